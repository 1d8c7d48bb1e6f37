"""Installation on the learner's own Python (README, Quick start).

- The supported Pythons (CPython 3.11.2 to 3.14) are the same in pyproject.toml's
  requires-python, in the Makefile's check, and in the Makefile's choice of interpreter.
- The README's commands without make are the commands of the Makefile's install recipe, for
  Linux/macOS and for Windows; `.ci/readme_install` runs them on CI's fresh clone.
- The course's .venv holds exactly the pinned versions, and the course itself as an editable
  install of this folder.
- `make test-resolve` (network, uv): requirements.txt resolves for every supported Python on
  Linux, macOS and Windows, to exactly the pinned versions (nothing floats).
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
IN_COURSE_VENV = pathlib.Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()
MAKE = shutil.which("make")

SUPPORTED = ["3.11.2", "3.11.9", "3.12.0", "3.12.1", "3.13.0", "3.14.0", "3.14.9"]
UNSUPPORTED = ["3.9.18", "3.10.13", "3.11.0", "3.11.1", "3.15.0"]


def makefile_var(name):
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(rf"^{name} :?= (.*)$", text, re.M)
    assert m, f"{name} not in the Makefile"
    return m.group(1)


def make(*args, env=None):
    # a clean make: under `make test PYTHON=...`, MAKEFLAGS would pass PYTHON= down to this one
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON")}
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(ROOT), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def python_ok(code, version):
    """Run the Makefile's version check (PYTHON_OK) as if sys.version_info were `version`."""
    parts = tuple(int(x) for x in version.split("."))
    fake = type("FakeSys", (), {"version_info": parts, "exit": staticmethod(sys.exit)})
    assert code.startswith("import sys; "), code
    try:
        exec(code.removeprefix("import sys; "), {"sys": fake})
    except SystemExit as e:
        return not e.code
    return True


def test_supported_pythons_agree():
    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                        ["requires-python"])
    code = makefile_var("PYTHON_OK")
    for v in SUPPORTED:
        assert v in spec, (v, str(spec))
        assert python_ok(code, v), v
    for v in UNSUPPORTED:
        assert v not in spec, (v, str(spec))
        assert not python_ok(code, v), v
    assert makefile_var("PYTHON_MIN") == "3.11.2"
    assert makefile_var("PYTHON_MAX") == "3.14"
    # the README's Quick start names the same range
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "3.11.2" in quick and "3.14" in quick


def interpreters():
    """The Pythons on this machine: python3.9 ... python3.15 on PATH, Debian's, pyenv's."""
    found = {}
    candidates = [shutil.which(f"python3.{m}") for m in range(9, 16)]
    candidates += ["/usr/bin/python3.11", *sorted(pathlib.Path.home().glob(
        ".pyenv/versions/3.*/bin/python3"))]
    for c in candidates:
        if not c or not os.access(c, os.X_OK):
            continue
        out = subprocess.run([str(c), "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0:
            found.setdefault(out.stdout.strip(), str(c))
    return sorted(found.items(), key=lambda kv: Version(kv[0]))


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_accepts_supported_and_refuses_other_pythons():
    spec = SpecifierSet(">=3.11.2,<3.15")
    found = interpreters()
    assert found, "no Python found"
    for version, path in found:
        out = make("check-python", f"PYTHON={path}")
        if version in spec:
            assert out.returncode == 0, (version, out.stderr)
            assert f"Python: {path} ({version})" in out.stdout
        else:
            assert out.returncode != 0, version
            assert version in out.stderr
            for v in ("3.11 (3.11.2 or later)", "3.12", "3.13", "3.14"):
                assert v in out.stderr, out.stderr


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_make_picks_the_first_supported_python(tmp_path):
    """Without PYTHON=, make skips commands that are not a supported Python."""
    bad = "#!/bin/sh\nexit 1\n"  # a `python3.x` that fails the check (too old, or broken)
    for name in ("python3.11", "python3.12", "python3", "python"):
        (tmp_path / name).write_text(bad)
        (tmp_path / name).chmod(0o755)
    (tmp_path / "python3.13").symlink_to(sys.executable)
    (tmp_path / "python3.14").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHON", None)
    out = make("check-python", env=env)
    assert out.returncode == 0, out.stderr
    assert f"Python: {tmp_path / 'python3.13'} (" in out.stdout, out.stdout

    (tmp_path / "python3.13").unlink()
    (tmp_path / "python3.14").unlink()
    out = make("check-python", "PYTHON_CANDIDATES=python3.11 python3.12 python3 python", env=env)
    assert out.returncode != 0
    assert "No supported Python found" in out.stderr and "3.14" in out.stderr


# ---- the README's commands without make ------------------------------------------------------

def code_blocks(text):
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)


def commands(block):
    lines = [re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def readme_no_make(shell):
    """The README's install commands without make: `bash` (Linux, macOS) or `bat` (Windows)."""
    blocks = [commands(b) for lang, b in code_blocks(README)
              if lang == shell and "-m venv .venv" in b and "pip install -e ." in b
              and "--index-url" not in b]
    assert len(blocks) == 1, f"one {shell} block of commands without make, found {len(blocks)}"
    return blocks[0]


def readme_cpu_torch():
    blocks = [commands(b) for lang, b in code_blocks(README)
              if lang == "bash" and "download.pytorch.org/whl/cpu" in b]
    assert len(blocks) == 1, blocks
    return blocks[0]


# the pip that the install puts in first (the pin of requirements.txt, where the venv's own
# pip then installs the rest from)
PIP_PIN = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
               if line.startswith("pip=="))


def make_install_recipe(*args):
    """The commands `make` runs to create .venv (dry run, PYTHON=python3 as in the README)."""
    out = make("-n", "-B", ".venv/.installed", "PYTHON=python3", *args)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if " -m venv " in line)
    recipe = []
    for line in lines[start:]:
        if line.startswith("touch "):
            break
        line = line.replace('"python3"', "python3")
        # options that only keep pip quiet and non-interactive
        line = line.replace(" --disable-pip-version-check --no-input", "")
        recipe.append(line)
    return recipe


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_readme_commands_are_the_makefile_recipe():
    readme = readme_no_make("bash")
    assert readme == [
        "python3 -m venv .venv",
        f".venv/bin/python -m pip install {PIP_PIN}",
        ".venv/bin/python -m pip install -r requirements.txt",
        ".venv/bin/python -m pip install -e .",
        ".venv/bin/python -m tools.lab_setup",
        ".venv/bin/jupyter lab",
    ]
    assert make_install_recipe() == readme[:-1]
    lab = make("-n", "lab", "PYTHON=python3", "-o", ".venv/.installed")
    assert lab.stdout.strip().splitlines()[-1].startswith(readme[-1] + " "), lab.stdout


def test_readme_windows_commands_are_the_same():
    windows = readme_no_make("bat")
    assert re.fullmatch(r"py -3\.1[1-4] -m venv \.venv", windows[0]), windows[0]
    as_posix = ["python3 -m venv .venv"] + [c.replace(".venv\\Scripts\\", ".venv/bin/")
                                            for c in windows[1:]]
    assert as_posix == readme_no_make("bash")


@pytest.mark.skipif(MAKE is None, reason="needs make")
def test_readme_cpu_torch_is_the_makefile_option():
    cpu = readme_cpu_torch()
    torch_pin = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                     if line.startswith("torch=="))
    step = f".venv/bin/python -m pip install {torch_pin} --index-url " \
           "https://download.pytorch.org/whl/cpu"
    assert step in cpu
    assert cpu[cpu.index(step) - 1] == f".venv/bin/python -m pip install {PIP_PIN}"
    recipe = make_install_recipe("TORCH_INDEX=https://download.pytorch.org/whl/cpu")
    assert recipe[2] == step
    assert [*recipe[:2], *recipe[3:]] == make_install_recipe()


def test_ci_runs_the_readme_commands_on_its_fresh_clone():
    ci = commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert ci.index(".ci/readme_install") < ci.index("make test || failed=1")
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_install"), "--print"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == readme_no_make("bash")


# ---- the installed environment ---------------------------------------------------------------

def pins(*files, constraints=True):
    """{name: (version, marker)} of the `name==version` lines, following `-r` lines and, with
    constraints=True, `-c` lines."""
    out = {}
    for f in files:
        for line in (ROOT / f).read_text().splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("-r ") or (constraints and line.startswith("-c ")):
                out.update(pins(line[3:].strip(), constraints=constraints))
            elif line.startswith("-c "):
                continue
            elif line and not line.startswith("#"):
                req = Requirement(line)
                (spec,) = req.specifier
                assert spec.operator == "==", line
                out[canonicalize_name(req.name)] = (spec.version, req.marker)
    return out


def test_every_requirement_is_pinned_once():
    names = []
    for f in ("requirements.txt", "constraints-cuda.txt", "requirements-browser.txt",
              "requirements-resolve.txt"):
        for line in (ROOT / f).read_text().splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith(("#", "-c ")):
                req = Requirement(line)
                assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", \
                    f"{f}: {line} is not pinned"
                names.append(canonicalize_name(req.name))
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    direct = pins("requirements.in")
    full = pins("requirements.txt")
    for name, (version, _) in direct.items():
        assert full[name][0] == version, name


@pytest.mark.skipif(not IN_COURSE_VENV, reason="checks the .venv that `make` creates")
def test_course_venv_holds_exactly_the_pins():
    pinned = pins("requirements.txt", "requirements-browser.txt", "requirements-resolve.txt")
    installed = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}
    # the constraints (torch's CUDA build's libraries) install only with that build
    for name, (version, marker) in pins("requirements.txt", constraints=False).items():
        if marker is None or marker.evaluate():
            assert name in installed, f"{name}=={version} is not installed"
    for name, dist in installed.items():
        if name == "normalization-course":
            continue
        assert name in pinned, f"{name} {dist.version} is installed but not pinned"
        # torch's CPU build is 2.13.0+cpu: the pin names the public version
        assert Version(dist.version).public == pinned[name][0], (name, dist.version)
    course = installed["normalization-course"]
    direct_url = json.loads(course.read_text("direct_url.json"))
    assert direct_url["dir_info"].get("editable") is True
    assert pathlib.Path(direct_url["url"].removeprefix("file://")).resolve() == ROOT


# ---- resolution for every supported Python and platform (make test-resolve) ------------------

PLATFORMS = {  # uv's platform name, and the marker environment it stands for
    "linux": ("x86_64-manylinux_2_28",
              {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
               "platform_machine": "x86_64"}),
    "windows": ("x86_64-pc-windows-msvc",
                {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt",
                 "platform_machine": "AMD64"}),
    "macos": ("aarch64-apple-darwin",
              {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix",
               "platform_machine": "arm64"}),
}
# every supported Python on Linux; the oldest and the newest on macOS and Windows
RESOLVE = [(py, "linux") for py in ("3.11.2", "3.12", "3.13", "3.14")] + \
    [(py, plat) for plat in ("macos", "windows") for py in ("3.11.2", "3.14")]


@pytest.mark.parametrize("python,platform", RESOLVE, ids=[f"{p}-{q}" for p, q in RESOLVE])
def test_resolve(python, platform, tmp_path):
    # needs the package index: `make test-resolve` runs these (in CI beside `make test`, which
    # therefore leaves them out even when uv is installed)
    if os.environ.get("COURSE_TEST_RESOLVE") != "1":
        pytest.skip("run `make test-resolve` (it installs uv and sets COURSE_TEST_RESOLVE=1)")
    uv = pytest.importorskip("uv", reason="run `make test-resolve` (installs uv)")
    uv_platform, env = PLATFORMS[platform]
    # torch 2.13.0's macOS wheels are for macOS 14 and later
    run_env = {**os.environ, "MACOSX_DEPLOYMENT_TARGET": "14.0"}
    out = subprocess.run(
        [uv.find_uv_bin(), "pip", "compile", "--quiet", "--no-header", "--no-annotate",
         "--python-version", python, "--python-platform", uv_platform,
         "-o", str(tmp_path / "resolved.txt"), str(ROOT / "requirements.txt")],
        capture_output=True, text=True, timeout=300, env=run_env)
    assert out.returncode == 0, out.stderr
    resolved = {}
    for line in (tmp_path / "resolved.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line.split(";")[0])
            resolved[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    # every package resolved is pinned at that version (nothing floats) ...
    pinned = pins("requirements.txt")
    for name, version in resolved.items():
        assert name in pinned, f"{name}=={version} is not pinned"
        assert pinned[name][0] == version, (name, version, pinned[name][0])
    # ... and every requirement that applies to this Python and platform is in the resolution
    full = python if python.count(".") == 2 else python + ".0"
    marker_env = {**env, "python_version": ".".join(full.split(".")[:2]),
                  "python_full_version": full, "implementation_name": "cpython",
                  "platform_python_implementation": "CPython"}
    reqs = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith(("#", "-c "))]
    for line in reqs:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(marker_env):
            assert canonicalize_name(req.name) in resolved, line
        else:
            assert canonicalize_name(req.name) not in resolved, line
    assert resolved["torch"] == "2.13.0"
    assert ("nvidia-cudnn-cu13" in resolved) == (platform == "linux")


# ------------------------------------------------------------------ a quiet install and kernel

def test_install_builds_without_deprecation_warnings(tmp_path):
    """`pip install -e .` runs these PEP 517 hooks of the pinned setuptools: none may warn
    (a licence given as a TOML table made setuptools warn at each of them)."""
    pin = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    import setuptools

    assert pin == [f"setuptools=={setuptools.__version__}"], (pin, setuptools.__version__)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("helpers", "static/fonts"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / "out").mkdir()
    code = ("from setuptools import build_meta as b; b.get_requires_for_build_editable(); "
            "b.prepare_metadata_for_build_editable('out'); b.build_editable('out')")
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    warnings = [line for line in (run.stdout + run.stderr).splitlines()
                if re.search(r"Deprecat|Warning:", line) and "InformationOnly" not in line]
    assert not warnings, "\n".join(warnings)
    metadata = next((tmp_path / "out").glob("*.dist-info/METADATA")).read_text()
    assert "License-Expression: MIT AND CC-BY-4.0 AND OFL-1.1" in metadata


def _kernel_stderr(config, tmp_path) -> str:
    from jupyter_client import KernelManager
    from traitlets.config import Config

    km = KernelManager(kernel_name="python3", config=Config(config))
    log = tmp_path / f"kernel-{len(list(tmp_path.iterdir()))}.txt"
    with open(log, "w") as err:
        km.start_kernel(stdout=err, stderr=err)
        try:
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            reply = kc.execute_interactive("1 + 1", timeout=60)
            assert reply["content"]["status"] == "ok"
            kc.stop_channels()
        finally:
            km.shutdown_kernel(now=True)
    return log.read_text()


@pytest.mark.skipif(not __import__("zmq").has("curve"), reason="pyzmq without CurveZMQ")
def test_kernel_starts_without_the_eavesdropping_warning(tmp_path):
    """JupyterLab's kernels, with the server configuration that tools.lab_setup writes into
    the environment, run over an encrypted connection: ipykernel does not warn that the
    connection "is susceptible to eavesdropping" (without it, it does)."""
    from tools import lab_setup

    path, config = lab_setup.write_server_config(tmp_path / "prefix", curve=True)
    assert json.loads(path.read_text())["KernelManager"] == {"transport_encryption": "auto"}
    logs = tmp_path / "logs"
    logs.mkdir()
    assert "eavesdropping" in _kernel_stderr({}, logs)  # the check can fail
    assert "eavesdropping" not in _kernel_stderr(config, logs)


@pytest.mark.skipif(not __import__("zmq").has("curve"), reason="pyzmq without CurveZMQ")
def test_bench_kernels_start_without_the_eavesdropping_warning(tmp_path, capfd):
    """`make bench` and `make execute` (tools.bench) start each kernel with JupyterLab's
    transport encryption: no warning per lesson on the terminal."""
    import nbformat

    from tools import bench

    path = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    bench.execute(path)
    assert "eavesdropping" not in capfd.readouterr().err
