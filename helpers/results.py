r"""Results files: the numbers of experiments too long to run inside a lesson.

A lesson may quote a number only if one of its cells prints it, or if it comes from a file
under ``results/`` written by a script in this repository. This module writes and reads those
files. Each is JSON with the rows of the experiment and what is needed to reproduce them:

- ``command``: the command that wrote the file (run it from the repository root);
- ``torch``, ``python``: the versions;
- ``cpu_capability``: the CPU code path torch's kernels ran on (``"AVX2"``, ``"AVX512"``,
  ``"DEFAULT"``: :func:`torch.backends.cpu.get_cpu_capability`; ``ATEN_CPU_CAPABILITY=default``
  forces the scalar path on any x86-64 machine);
- ``processor``: the CPU's model name (the same code path on another processor can still
  round differently: BLAS and oneDNN pick their kernels by the processor, not by
  ``ATEN_CPU_CAPABILITY``);
- ``threads``: torch's thread count; ``seeds``; ``written``: the UTC date.

Chaotic runs (a training run whose result a last-bit rounding difference can change) end
differently on different CPU paths, so their files are kept per path
(``NAME.avx2.json``, ``NAME.default.json``) and a lesson shows the spread over paths, never
one path's digits as *the* result. Used by lessons 01 (batch-size grid), 05 (warmup grid) and
06 (DeepNorm ablation).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import shlex
import sys

import torch

__all__ = ["RESULTS_DIR", "processor", "cpu_path", "result_path", "write_results", "read_results",
           "read_all_paths"]

RESULTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "results"


def processor() -> str:
    """The CPU's model name as the operating system reports it (``platform.processor()`` when
    ``/proc/cpuinfo`` is not there), or ``"unknown"``."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_path() -> str:
    """The CPU code path torch runs on now, lower case: ``"avx2"``, ``"avx512"``, ``"default"``."""
    return torch.backends.cpu.get_cpu_capability().lower()


def result_path(name: str, path: str | None = None) -> pathlib.Path:
    """``results/NAME.PATH.json`` for the CPU path ``path`` (default: the current one)."""
    if not name or "/" in name or "." in name:
        raise ValueError(f"a results name is a plain word such as 'warmup_grid', got {name!r}")
    return RESULTS_DIR / f"{name}.{path or cpu_path()}.json"


def write_results(name: str, rows: list[dict], *, seeds, argv: list[str] | None = None,
                  module: str | None = None, **settings) -> pathlib.Path:
    """Write ``rows`` (JSON-serialisable dicts) to :func:`result_path` with the metadata listed
    in the module docstring; ``settings`` (learning rates, steps, ...) are stored as given.
    ``module``/``argv`` rebuild the command line (``python -m MODULE ARGV``)."""
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join(["python", "-m", module] + [shlex.quote(a) for a in argv]) if module else ""
    env = os.environ.get("ATEN_CPU_CAPABILITY")
    record = {
        "name": name,
        "command": (f"ATEN_CPU_CAPABILITY={env} " if env else "") + command,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "processor": processor(),
        "threads": torch.get_num_threads(),
        "seeds": list(seeds),
        "settings": settings,
        "written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "rows": rows,
    }
    target = result_path(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return target


def read_results(name: str, path: str | None = None) -> dict:
    """The record written by :func:`write_results` for one CPU path (default: the current
    one, falling back to the only file there is)."""
    target = result_path(name, path)
    if not target.exists() and path is None:
        files = sorted(RESULTS_DIR.glob(f"{name}.*.json"))
        if not files:
            raise FileNotFoundError(f"no results file for {name!r} in {RESULTS_DIR}")
        target = files[0]
    return json.loads(target.read_text(encoding="utf-8"))


def read_all_paths(name: str) -> dict[str, dict]:
    """Every CPU path's record of ``name``, keyed by path (``{"avx2": ..., "default": ...}``)."""
    records = {p.name.split(".")[1]: json.loads(p.read_text(encoding="utf-8"))
               for p in sorted(RESULTS_DIR.glob(f"{name}.*.json"))}
    if not records:
        raise FileNotFoundError(f"no results file for {name!r} in {RESULTS_DIR}")
    return records
