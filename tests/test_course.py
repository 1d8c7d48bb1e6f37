"""Lesson names (tools/course.py): ``1``, ``01`` and ``01_batch_norm`` name lesson 01 wherever a
lesson is named (restore, student, bench, export, the Makefile), and no command touches a
lesson other than the one named."""

import os
import pathlib
import shutil
import subprocess

import pytest

from tools import bench, restore, student
from tools.course import ROOT, lesson_paths, lessons, resolve_lesson

MAKE = shutil.which("make")
# the course as it will be, with lessons 13 and 14: "1" must stay lesson 01
FUTURE = [pathlib.Path(f"notebooks/{n:02d}_lesson_{n}.ipynb") for n in range(15)]


def _stems(paths):
    return [p.stem for p in paths]


@pytest.mark.parametrize("name", ["1", "01", "001", "01_batch_norm", "01_batch_norm.ipynb",
                                  "notebooks/01_batch_norm.ipynb", "01_batch", " 1 "])
def test_every_form_names_lesson_01(name):
    assert resolve_lesson(name).stem == "01_batch_norm"


@pytest.mark.parametrize("name, stem", [("1", "01_lesson_1"), ("01", "01_lesson_1"), ("10", "10_lesson_10"),
                                        ("13", "13_lesson_13"), ("14_lesson_14", "14_lesson_14"),
                                        ("0", "00_lesson_0"), ("3", "03_lesson_3")])
def test_a_number_is_a_number_not_a_prefix(name, stem):
    assert resolve_lesson(name, FUTURE).stem == stem


@pytest.mark.parametrize("name", ["15", "x", "", "batch_norm", "01_layer_norm", "1.0", "-1", "1 2",
                                  "０１"])
def test_unknown_names_are_refused_with_the_list(name):
    with pytest.raises(ValueError, match=r"no lesson matches .*00_introduction, 01_batch_norm, "):
        resolve_lesson(name)


def test_two_notebooks_with_one_number_are_ambiguous():
    paths = FUTURE + [pathlib.Path("notebooks/01_lesson_1_old.ipynb")]
    with pytest.raises(ValueError, match="ambiguous: it names 01_lesson_1, 01_lesson_1_old"):
        resolve_lesson("1", paths)
    assert resolve_lesson("01_lesson_1_old", paths).stem == "01_lesson_1_old"


def test_lesson_paths_keeps_order_and_drops_repeats():
    assert _stems(lesson_paths(["3", "1", "01_batch_norm", "03"])) == [
        "03_instance_and_group_norm", "01_batch_norm"]
    assert lesson_paths() == lesson_paths([]) == lessons()


@pytest.fixture
def restored(monkeypatch):
    calls = []
    monkeypatch.setattr(restore, "restore", lambda lesson, edition="bilingual", *a, **k:
                        calls.append((lesson.stem, edition)) or (lesson, None))
    return calls


@pytest.mark.parametrize("args, want", [
    (["1"], ["01_batch_norm"]), (["01"], ["01_batch_norm"]), (["3"], ["03_instance_and_group_norm"]),
    (["01_batch_norm", "12"], ["01_batch_norm", "12_interview_prep"]),
])
def test_restore_touches_the_named_lesson_only(restored, args, want):
    assert restore.main([*args, "--edition", "zh"]) == 0
    assert restored == [(stem, "zh") for stem in want]


def test_restore_refuses_a_bad_name_before_writing(restored, capsys):
    with pytest.raises(SystemExit):
        restore.main(["1", "99"])
    assert restored == []
    assert "no lesson matches '99'" in capsys.readouterr().err


def test_student_edition_of_the_named_lesson_only(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(student, "export_student", lambda editions, paths, out: calls.append(_stems(paths)))
    assert student.main(["--lessons", "1", "--out", str(tmp_path)]) == 0
    assert student.main(["--lessons", "3", "05"]) == 0
    assert calls == [["01_batch_norm"], ["03_instance_and_group_norm", "05_pre_and_post_ln"]]
    with pytest.raises(SystemExit):
        student.main(["--lessons", "99"])


def test_bench_takes_lesson_names_and_notebook_files():
    assert _stems(bench._notebooks(["1", "12_interview_prep"])) == ["01_batch_norm", "12_interview_prep"]
    assert bench._notebooks([str(ROOT / "notebooks" / "03_instance_and_group_norm.ipynb")]) == [
        ROOT / "notebooks" / "03_instance_and_group_norm.ipynb"]
    assert bench._notebooks([]) == lessons()
    with pytest.raises(ValueError, match="no lesson matches"):
        bench._notebooks(["1x"])


@pytest.mark.skipif(MAKE is None, reason="needs make")
@pytest.mark.parametrize("target, args, command", [
    ("restore", ["LESSON=1"], "-m tools.restore 1 --edition bilingual"),
    ("restore", ["LESSON=all", "EDITION=zh"], "-m tools.restore --all --edition zh"),
    ("student", ["LESSONS=1"], "-m tools.student --lessons 1"),
    ("bench", ["LESSONS=1 05"], "-m tools.bench 1 05"),
    ("execute", ["LESSONS=3"], "-m tools.bench --execute-in-place 3"),
    ("export", ["LESSONS=1"], "-m tools.export notebooks html --lessons 1"),
])
def test_make_passes_the_name_on_unchanged(target, args, command):
    """The Makefile hands LESSON / LESSONS to the tools as given; the tools resolve them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    out = subprocess.run([MAKE, "-n", target, "-o", ".venv/.installed", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].endswith(command), out.stdout
