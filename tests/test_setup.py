"""The set-up contract of the README: in the virtual environment that `make lab` / `make
test` create, `import helpers` works from any folder (the repository root, `notebooks/`,
anywhere else) in a fresh interpreter or kernel, without PYTHONPATH; and `.ci/run` runs the
README's own test command (then the exports and the browser test)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
IN_COURSE_VENV = pathlib.Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()


@pytest.mark.skipif(not IN_COURSE_VENV, reason="checks the .venv that `make` creates; "
                    "run through `make test`")
@pytest.mark.parametrize("cwd", [ROOT, ROOT / "notebooks", pathlib.Path("/")],
                         ids=["root", "notebooks", "elsewhere"])
def test_helpers_import_without_pythonpath(cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import helpers, sys; print(helpers.__file__)"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert pathlib.Path(out.stdout.strip()).resolve().parent == ROOT / "helpers"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test   # run every test" in readme
    commands = [line.strip() for line in ci.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    makes = [c for c in commands if c.startswith("make ")]
    # the resolution of the pins beside the tests (uv installed first), the README's command,
    # the lessons on a second CPU code path, then the editions, built once, their check against
    # the bilingual notebooks and the browser test on what was built
    assert makes == ["make .venv/.installed-resolve",
                     "make test-resolve > build/ci-test-resolve.log 2>&1 &",
                     "make test", "make test-cpu-path CPU_PATH=default",
                     "make export slides", "make test-exports EXPORTED=1",
                     "make test-browser EXPORTED=1"]
    assert commands.index("set -euo pipefail") < commands.index("make test")
    assert 'if wait "$resolve"; then cat build/ci-test-resolve.log' in commands  # its failure counts
