"""No library module imports a checker: ``helpers.checks`` imports the library (the course's
Block, the from-scratch statistics), never the other way round, so a notebook that imports
``helpers.transformer`` does not load the checkers, and there is no import circle.
(``helpers.drills`` and ``helpers.spot_the_bug`` are the drills' grading front ends and import
their checkers by design.)"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
HELPERS = ROOT / "helpers"
GRADERS = {"drills.py", "spot_the_bug.py"}  # the front ends of the drills: graders themselves


def _imports_checks(path: pathlib.Path) -> list[str]:
    """The import statements of ``path`` that reach ``helpers.checks``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            mod = ("." * node.level) + (node.module or "")
            names = [a.name for a in node.names]
            if (mod in (".checks", "helpers.checks") or mod.startswith((".checks.", "helpers.checks."))
                    or (mod in (".", "helpers") and "checks" in names)):
                found.append(f"line {node.lineno}: from {mod} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "helpers.checks" or a.name.startswith("helpers.checks."):
                    found.append(f"line {node.lineno}: import {a.name}")
    return found


def test_no_library_module_imports_a_checker():
    offenders = {}
    for path in sorted(HELPERS.glob("*.py")):
        if path.name in GRADERS:
            continue
        found = _imports_checks(path)
        if found:
            offenders[path.name] = found
    assert not offenders, f"library modules importing helpers.checks: {offenders}"


def test_the_scan_sees_an_import(tmp_path):  # the test above can fail
    for text in ("def f():\n    from .checks import check_merge\n    return check_merge\n",
                 "from . import checks\n", "import helpers.checks.engine\n",
                 "from helpers.checks.norms import check_layer_norm\n"):
        fake = tmp_path / "fake.py"
        fake.write_text(text)
        assert _imports_checks(fake), text
    fake.write_text("from . import functional\n")
    assert not _imports_checks(fake)


def test_importing_the_library_loads_no_checker():
    code = ("import sys, helpers, helpers.transformer, helpers.functional, helpers.norms, "
            "helpers.bench_norms, helpers.distributed, helpers.bn_practice, helpers.weight_norms\n"
            "print(sorted(m for m in sys.modules if m.startswith('helpers.checks')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.strip()
    assert out == "[]", out
