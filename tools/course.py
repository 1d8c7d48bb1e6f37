"""The one place that knows where the course lives: the repository root, its folders, the
list of lessons (``notebooks/NN_*.ipynb``, in lesson order), and how a lesson is named on a
command line (:func:`lesson_paths`)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterable

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
IMAGES = ROOT / "images"
STATIC = ROOT / "static"
BUILD = ROOT / "build"


def lessons() -> list[pathlib.Path]:
    """The lesson notebooks, ``notebooks/NN_*.ipynb``, sorted by their number."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _listing(paths: list[pathlib.Path]) -> str:
    return "the lessons are " + ", ".join(p.stem for p in paths)


def resolve_lesson(name: str, paths: list[pathlib.Path] | None = None) -> pathlib.Path:
    """The one lesson that ``name`` names, out of ``paths`` (default: :func:`lessons`).

    A lesson is named by its number (``1`` or ``01``; a number, never a prefix, so ``1`` is
    lesson 01 and never 10 to 19), by its full name (``01_batch_norm``, also as
    ``01_batch_norm.ipynb`` or a path to that notebook), or by its number and the start of
    its name (``01_batch``). Anything else (``0x``, ``batch_norm``, ``01_layer_norm``, a
    number no lesson has) raises ``ValueError`` with a message that lists the lessons, and so
    does a number that two notebooks share."""
    paths = lessons() if paths is None else list(paths)
    key = pathlib.PurePath(str(name).strip()).name.removesuffix(".ipynb")
    number, _, rest = key.partition("_")
    hits = []
    if number.isdigit() and number.isascii():
        hits = [p for p in paths if p.stem[:2].isdigit() and int(p.stem[:2]) == int(number)
                and p.stem[3:].startswith(rest)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise ValueError(f"lesson {name!r} is ambiguous: it names {', '.join(p.stem for p in hits)}; "
                         + _listing(paths))
    raise ValueError(f"no lesson matches {name!r}: name a lesson by its number (1 or 01) or its "
                     "full name (01_batch_norm); " + _listing(paths))


def lesson_paths(names: Iterable[str] | None = None,
                 paths: list[pathlib.Path] | None = None) -> list[pathlib.Path]:
    """The lessons that ``names`` name (:func:`resolve_lesson`), in the order given and each
    once; every lesson, in order, when ``names`` is empty or ``None``. Raises ``ValueError``
    for a name that does not name exactly one lesson."""
    paths = lessons() if paths is None else list(paths)
    names = list(names or [])
    if not names:
        return paths
    chosen: list[pathlib.Path] = []
    for name in names:
        path = resolve_lesson(name, paths)
        if path not in chosen:
            chosen.append(path)
    return chosen
