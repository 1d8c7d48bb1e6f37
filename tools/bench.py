"""Execute the course's notebooks and print the wall time of each (``make bench``), or
re-execute them in place so their committed outputs are fresh (``make execute``).

Budgets (course guide): each notebook at most 30 s on a 2-core CPU (60 s at most for any),
the whole course (15 lessons) at most 240 s. The numbers depend on the machine and on what else it is doing; run it on
an idle machine and read them as a measurement, not a promise.

    python -m tools.bench                      # time every notebook
    python -m tools.bench notebooks/00_introduction.ipynb
    python -m tools.bench 1 05                 # lessons 01 and 05 (make bench LESSONS="1 5")
    python -m tools.bench --execute-in-place   # rewrite the notebooks with fresh outputs
    python -m tools.bench --threads 2          # pin torch's thread count in the kernels
    python -m tools.bench --portable-paths notebooks/08_sync_batch_norm.ipynb  # outputs only

The outputs written back do not depend on where the repository or Python lie
(:func:`portable_paths`): a traceback names ``../helpers/distributed.py`` and
``<site-packages>/torch/...``, not the absolute paths of the machine that ran it. They hold
no widget views and no widget state (:func:`saved_without_widgets`): an explorer is saved as
its starting figure and one line of text, and becomes a widget when its cell is run.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import sysconfig
import time

from .course import ROOT, lesson_paths, lessons
NOTEBOOK_AIM_S = 30.0
NOTEBOOK_BUDGET_S = 60.0
COURSE_BUDGET_S = 240.0


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


def _path_rules(notebook_dir: pathlib.Path, root: pathlib.Path | None = None) -> list[tuple[re.Pattern, str]]:
    """(pattern, replacement) pairs that make the paths in outputs portable: the repository
    becomes a path relative to the notebook's folder (a link JupyterLab can open), installed
    packages ``<site-packages>/``, the standard library ``<stdlib>/``."""
    root = root or ROOT
    rel = os.path.relpath(ROOT, notebook_dir).replace(os.sep, "/")
    rules = [(re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s\"'\x1b:()\[\]/\\]+)*?[/\\](?:site|dist)-packages[/\\]"),
              "<site-packages>/")]
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        rules.append((re.compile(re.escape(stdlib.rstrip("/\\")) + r"[/\\]"), "<stdlib>/"))
    rules.append((re.compile(re.escape(str(root)) + r"[/\\]"), "" if rel == "." else rel + "/"))
    return rules


def portable_paths(nb, notebook_dir: pathlib.Path, root: pathlib.Path | None = None) -> int:
    """Rewrite, in every output of ``nb`` (tracebacks, streams, text), the absolute paths of
    this machine's repository (``root``, default this one), installed packages and standard
    library (:func:`_path_rules`). Returns how many outputs changed."""
    rules = _path_rules(notebook_dir, root)

    def fix(text: str) -> str:
        for pattern, repl in rules:
            text = pattern.sub(repl, text)
        return text

    changed = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            before = repr(out)
            if out.get("output_type") == "error":
                out["traceback"] = [fix(line) for line in out.get("traceback", [])]
                out["evalue"] = fix(out.get("evalue", ""))
            elif out.get("output_type") == "stream":
                out["text"] = fix(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
            for mime in ("text/plain",):
                if mime in out.get("data", {}):
                    value = out["data"][mime]
                    out["data"][mime] = fix(value if isinstance(value, str) else "".join(value))
            changed += repr(out) != before
    return changed


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def saved_without_widgets(nb) -> int:
    """Drop the widget views from ``nb``'s outputs and its saved widget state (returns how many
    views were dropped). An explorer's output keeps its PNG and its one-line text: opened
    before it is run, a lesson shows the starting figure once and says that the explorer
    needs a running kernel, instead of a copy of the widget with a slider that moves nothing
    (JupyterLab draws a saved widget view from the saved state, marked disconnected)."""
    nb.metadata.pop("widgets", None)
    dropped = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("data", {}).pop(WIDGET_VIEW, None) is not None:
                dropped += 1
    return dropped


def execute(path: pathlib.Path, in_place: bool = False, timeout: int = 600) -> float:
    """Run every cell of ``path`` in a fresh kernel (cwd = the notebook's folder) and return
    the wall time in seconds. With ``in_place``, write the executed notebook back."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    # the kernel's connection encrypted as JupyterLab's, where pyzmq can (tools/lab_setup.py):
    # without keys, ipykernel warns at every start that the connection "is susceptible to
    # eavesdropping"
    from traitlets.config import Config

    from .lab_setup import server_config

    config = Config({k: v for k, v in server_config().items() if k == "KernelManager"})
    # no widget state: a saved widget view would be drawn, disconnected, before the lesson
    # is run (see saved_without_widgets)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(path.parent)}}, config=config)
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    if in_place:
        for cell in nb.cells:  # keep the committed files free of run-specific metadata
            cell.metadata.pop("execution", None)
        portable_paths(nb, path.parent)
        saved_without_widgets(nb)
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
    parser.add_argument("--portable-paths", action="store_true",
                        help="only rewrite the saved outputs' absolute paths (no execution)")
    parser.add_argument("--from-root", type=pathlib.Path, default=None,
                        help="with --portable-paths: where the repository lay when the outputs "
                             "were made (default: here)")
    args = parser.parse_args(argv)
    if args.portable_paths:
        import nbformat

        for p in _notebooks(args.notebooks):
            nb = nbformat.read(p, as_version=4)
            n = portable_paths(nb, p.parent, args.from_root)
            if n:
                nbformat.write(nb, p)
            print(f"{p.name}: {n} outputs with portable paths")
        return 0

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
