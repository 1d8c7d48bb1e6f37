"""Execute the course's notebooks and print the wall time of each (``make bench``), or
re-execute them in place so their committed outputs are fresh (``make execute``).

Budgets (course guide): each notebook at most 30 s on a 2-core CPU (60 s at most for any),
the whole course at most 200 s. The numbers depend on the machine and on what else it is doing; run it on
an idle machine and read them as a measurement, not a promise.

    python -m tools.bench                      # time every notebook
    python -m tools.bench notebooks/00_introduction.ipynb
    python -m tools.bench 1 05                 # lessons 01 and 05 (make bench LESSONS="1 5")
    python -m tools.bench --execute-in-place   # rewrite the notebooks with fresh outputs
    python -m tools.bench --threads 2          # pin torch's thread count in the kernels
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

from .course import ROOT, lesson_paths, lessons
NOTEBOOK_AIM_S = 30.0
NOTEBOOK_BUDGET_S = 60.0
COURSE_BUDGET_S = 200.0


def _notebooks(names: list[str]) -> list[pathlib.Path]:
    """The notebooks to run: an argument ending in ``.ipynb`` that is a file is that notebook
    (a lesson or any other, e.g. a copy in build/zh); any other argument names a lesson
    (``1``, ``01``, ``01_batch_norm``: :func:`tools.course.resolve_lesson`). No arguments:
    every lesson. Raises ``ValueError`` for a name that is not exactly one lesson."""
    if not names:
        return lessons()
    out = []
    for name in names:
        path = pathlib.Path(name)
        out.append(path.resolve() if name.endswith(".ipynb") and path.is_file()
                   else lesson_paths([name])[0])
    return out


def execute(path: pathlib.Path, in_place: bool = False, timeout: int = 600) -> float:
    """Run every cell of ``path`` in a fresh kernel (cwd = the notebook's folder) and return
    the wall time in seconds. With ``in_place``, write the executed notebook back."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    if in_place:
        for cell in nb.cells:  # keep the committed files free of run-specific metadata
            cell.metadata.pop("execution", None)
        nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*",
                        help="notebook files, or lessons by number or name (1, 01, 01_batch_norm); "
                             "default: all lessons")
    parser.add_argument("--execute-in-place", action="store_true",
                        help="write the executed notebooks back (fresh outputs)")
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS for the kernels (default: torch's own choice)")
    args = parser.parse_args(argv)

    # kernels inherit this environment: helpers importable, a fixed thread count if asked
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)

    try:
        paths = _notebooks(args.notebooks)
    except ValueError as err:
        parser.error(str(err))
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 1
    print(f"{'notebook':<40} {'wall time':>10}  aim {NOTEBOOK_AIM_S:.0f} s, budget {NOTEBOOK_BUDGET_S:.0f} s"
          f"   (cpus: {os.cpu_count()}, threads: {os.environ.get('OMP_NUM_THREADS', 'default')})")
    total, over = 0.0, []
    for p in paths:
        t = execute(p, in_place=args.execute_in_place)
        total += t
        ok = t <= NOTEBOOK_BUDGET_S
        over += [] if ok else [p.name]
        verdict = ("ok" if t <= NOTEBOOK_AIM_S else f"over the {NOTEBOOK_AIM_S:.0f}-s aim" if ok
                   else "OVER BUDGET")
        print(f"{p.name:<40} {t:>8.1f} s  {verdict}", flush=True)
    whole = not args.notebooks
    if whole:
        print(f"{'whole course':<40} {total:>8.1f} s  budget {COURSE_BUDGET_S:.0f} s: "
              f"{'ok' if total <= COURSE_BUDGET_S else 'OVER BUDGET'}")
    else:
        print(f"{f'total of {len(paths)} notebook(s)':<40} {total:>8.1f} s")
    if args.execute_in_place:
        print("notebooks rewritten with fresh outputs; commit them")
    return 1 if over or (whole and total > COURSE_BUDGET_S) else 0


if __name__ == "__main__":
    sys.exit(main())
