"""Put back a lesson as the course ships it, after JupyterLab has saved over it.

JupyterLab saves a notebook as you work (and autosaves every two minutes), so the lesson you
opened is the lesson you changed. To start a lesson afresh:

    python -m tools.restore 1                   # notebooks/01_batch_norm.ipynb, bilingual
    python -m tools.restore 01 --edition zh     # build/zh/01_batch_norm.ipynb (make lab LANG=zh)
    python -m tools.restore --all               # every lesson of the edition
    make restore LESSON=1 [EDITION=zh]          # the same with make

A lesson is named by its number (``1``, ``01``) or its name (``01_batch_norm``), see
:func:`tools.course.resolve_lesson`: ``1`` is lesson 01 only, and a name that is not exactly
one lesson is refused before anything is written.

The lesson is taken from the last commit of the clone (``git show HEAD:notebooks/...``), so
your other changes to the repository do not matter; a single-language copy is made from that
same committed lesson. Your version is not lost: when it differs from the committed one it is
first copied to ``build/backup/<lesson>.<edition>.<date-time>.ipynb``. Without git (a course
downloaded as a zip) there is no committed copy to go back to: the message says so and nothing
is changed.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import shutil
import subprocess
import sys

import nbformat

from .course import BUILD, ROOT, lesson_paths
from .export import LANG_TAGS, record_exported, single_language

EDITIONS = ("bilingual", *LANG_TAGS)
BACKUP = BUILD / "backup"


def committed_lesson(path: pathlib.Path) -> str:
    """The text of lesson ``path`` at the clone's last commit. Raises ``RuntimeError`` when
    there is none (no git, not a clone, or the lesson is not committed)."""
    relative = path.resolve().relative_to(ROOT).as_posix()
    git = shutil.which("git")
    if git is None:
        raise RuntimeError("git was not found: restoring needs the course as a git clone "
                           "(git clone ...), or download the course again")
    result = subprocess.run([git, "show", f"HEAD:{relative}"], cwd=ROOT, capture_output=True,
                            text=True, encoding="utf-8")
    if result.returncode != 0:
        raise RuntimeError(f"no committed copy of {relative}: {result.stderr.strip()}")
    return result.stdout


def target_path(lesson: pathlib.Path, edition: str, build: pathlib.Path = BUILD) -> pathlib.Path:
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}; choose from {', '.join(EDITIONS)}")
    return lesson if edition == "bilingual" else build / edition / lesson.name


def restore(lesson: pathlib.Path, edition: str = "bilingual", build: pathlib.Path = BUILD,
            now: datetime.datetime | None = None) -> tuple[pathlib.Path, pathlib.Path | None]:
    """Write the committed ``lesson`` (or its ``edition`` copy) over the working one; return
    the restored path and the backup of the learner's version (``None`` when there was
    nothing to keep: no file, or the same as the committed one)."""
    target = target_path(lesson, edition, build)
    text = committed_lesson(lesson)
    if edition != "bilingual":
        nb = single_language(nbformat.reads(text, as_version=4), edition)
        text = nbformat.writes(nb) + "\n"
    backup = None
    if target.exists() and target.read_text(encoding="utf-8") != text:
        stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
        backup = build / "backup" / f"{lesson.stem}.{edition}.{stamp}.ipynb"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target, backup)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    if edition != "bilingual":  # the copy is as exported again: a later export may refresh it
        record_exported([target])
    return target, backup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", metavar="NN",
                        help="lessons by number or name, e.g. 1 05 02_layer_norm")
    parser.add_argument("--all", action="store_true", help="every lesson")
    parser.add_argument("--edition", default="bilingual", choices=EDITIONS)
    args = parser.parse_args(argv)
    if bool(args.lessons) == args.all:
        parser.error("name the lessons to restore (e.g. 01), or --all")
    try:
        lessons = lesson_paths(None if args.all else args.lessons)
    except ValueError as err:
        parser.error(str(err))
    for lesson in lessons:
        try:
            target, backup = restore(lesson, args.edition)
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        kept = f"; your version is in {backup.relative_to(ROOT)}" if backup else ""
        print(f"restored {target.relative_to(ROOT)}{kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
