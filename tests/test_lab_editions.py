"""JupyterLab for the learner: quiet first start (tools/lab_setup.py), one language at a time
(make lab LANG=..), copies with the learner's work kept, and lessons restored (tools/restore.py)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from tools import lab_setup, restore
from tools.course import ROOT, lessons
from tools.export import export_notebooks, single_language

MAKE = shutil.which("make")
LESSON = lessons()[2]


def test_lab_settings_are_valid_for_this_jupyterlab(tmp_path):
    """The values are ones JupyterLab's own schema accepts (read from the installed
    JupyterLab), and keys already in the overrides file are kept."""
    schema_file = (pathlib.Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab"
                   / "apputils-extension" / "notification.json")
    if not schema_file.exists():
        pytest.skip("JupyterLab's schemas are not in this environment")
    schema = json.loads(schema_file.read_text())["properties"]
    assert "false" in [choice["const"] for choice in schema["fetchNews"]["oneOf"]]
    assert schema["checkForUpdates"]["type"] == "boolean"
    path = lab_setup.settings_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"@jupyterlab/notebook-extension:tracker": {"codeCellConfig": {"lineNumbers": True}},
                                "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True}}))
    assert lab_setup.write_lab_settings(tmp_path) == path
    lab_setup.write_lab_settings(tmp_path)  # idempotent
    assert json.loads(path.read_text()) == {
        "@jupyterlab/notebook-extension:tracker": {"codeCellConfig": {"lineNumbers": True}},
        "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True, "fetchNews": "false",
                                                         "checkForUpdates": False}}
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        lab_setup.write_lab_settings(tmp_path)


def test_trust_signs_once(tmp_path):
    notary = NotebookNotary(data_dir=str(tmp_path))
    copy = tmp_path / LESSON.name
    shutil.copy(LESSON, copy)
    assert not notary.check_signature(nbformat.read(copy, as_version=4))
    assert lab_setup.trust([copy], notary) == 1
    assert notary.check_signature(nbformat.read(copy, as_version=4))
    assert lab_setup.trust([copy], notary) == 0


def test_export_keeps_the_learners_copy(tmp_path):
    (first,) = export_notebooks(["zh"], [LESSON], tmp_path, keep_edited=True)
    exported = first.read_text()
    # unchanged copies are refreshed ...
    assert export_notebooks(["zh"], [LESSON], tmp_path, keep_edited=True) == [first]
    # ... a copy with the learner's work is kept, unless asked otherwise
    first.write_text(exported.replace("LayerNorm", "LayerNorm (my notes)", 1))
    assert export_notebooks(["zh"], [LESSON], tmp_path, keep_edited=True) == []
    assert "(my notes)" in first.read_text()
    assert export_notebooks(["zh"], [LESSON], tmp_path) == [first]
    assert first.read_text() == exported


def _committed(path):
    out = subprocess.run(["git", "show", f"HEAD:{path.relative_to(ROOT).as_posix()}"], cwd=ROOT,
                         capture_output=True, text=True, encoding="utf-8")
    if out.returncode:
        pytest.skip("needs the course as a git clone with the lesson committed")
    return out.stdout


@pytest.mark.parametrize("edition", ["bilingual", "zh"])
def test_restore_puts_back_the_committed_lesson(tmp_path, monkeypatch, edition):
    committed = _committed(LESSON)
    target = tmp_path / "work" / LESSON.name
    if edition == "bilingual":  # never write over the real lesson in a test
        monkeypatch.setattr(restore, "target_path", lambda lesson, ed, build: target)
        expected = committed
    else:
        target = tmp_path / "zh" / LESSON.name
        expected = nbformat.writes(single_language(nbformat.reads(committed, as_version=4), "zh")) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(expected[:-200] + "broken by autosave")
    mine = target.read_text()
    restored, backup = restore.restore(LESSON, edition, build=tmp_path)
    assert restored == target and target.read_text() == expected
    assert backup.parent == tmp_path / "backup" and backup.read_text() == mine
    # restoring an intact lesson keeps no backup
    assert restore.restore(LESSON, edition, build=tmp_path)[1] is None
    if edition == "zh":  # the restored copy counts as exported: `make lab LANG=zh` may refresh it
        assert export_notebooks(["zh"], [LESSON], tmp_path, keep_edited=True) == [target]


def test_restore_without_git_says_so(monkeypatch):
    monkeypatch.setattr(restore.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="git clone"):
        restore.committed_lesson(LESSON)
    with pytest.raises(ValueError, match="unknown edition"):
        restore.target_path(LESSON, "fr")


@pytest.mark.skipif(MAKE is None, reason="needs make")
@pytest.mark.parametrize("args, opens, exports", [
    ([], "notebooks/00_introduction.ipynb", None),
    (["LANG=zh"], "build/zh/00_introduction.ipynb", "--lang zh --keep-edited"),
    (["LANG=en"], "build/en/00_introduction.ipynb", "--lang en --keep-edited"),
])
def test_make_lab_language(args, opens, exports):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    env["LANG"] = "zh_CN.UTF-8"  # the shell's locale is not a course language choice
    out = subprocess.run([MAKE, "-n", "lab", "-o", ".venv/.installed", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1].endswith(" " + opens)
    assert ("-m tools.lab_setup" in lines[-2])
    export = [line for line in lines if "tools.export notebooks" in line]
    assert export == ([] if exports is None else [f".venv/bin/python -m tools.export notebooks {exports}"])


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_lab_refuses_other_languages():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    out = subprocess.run([MAKE, "-n", "lab", "LANG=fr"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "LANG=en and LANG=zh" in out.stderr


def test_server_config_merges(tmp_path):
    """tools.lab_setup's server configuration: keys already there kept, kernel encryption only
    where pyzmq has Curve, JupyterLab's custom CSS on."""
    path = lab_setup.server_config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"ServerApp": {"open_browser": False}}))
    lab_setup.write_server_config(tmp_path, curve=True)
    lab_setup.write_server_config(tmp_path, curve=True)  # idempotent
    assert json.loads(path.read_text()) == {"ServerApp": {"open_browser": False},
                                            "KernelManager": {"transport_encryption": "auto"},
                                            "LabApp": {"custom_css": True}}
    assert "KernelManager" not in lab_setup.write_server_config(tmp_path / "other", curve=False)[1]
    path.write_text("[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        lab_setup.write_server_config(tmp_path, curve=True)


def test_custom_css_keeps_the_learners_own_rules(tmp_path):
    """The course's block goes into custom/custom.css once (replaced, not repeated, on every
    `make lab`), after the learner's own rules, with the fonts it loads beside it."""
    import re

    css = lab_setup.custom_dir(tmp_path) / "custom.css"
    css.parent.mkdir(parents=True)
    css.write_text(".jp-Notebook { background: ivory; }\n")
    assert lab_setup.write_custom_css(tmp_path) == css
    lab_setup.write_custom_css(tmp_path)
    text = css.read_text()
    assert text.startswith(".jp-Notebook { background: ivory; }")
    assert text.count(lab_setup.BEGIN) == text.count(lab_setup.END) == 1
    fonts = re.findall(r'url\("([^"]+)"\)', text)
    assert len(fonts) == 2 and all((css.parent / f).is_file() for f in fonts), fonts
    assert "Course Noto Sans CJK SC" in text.split(":root:root", 1)[1]
