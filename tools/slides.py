"""Slide metadata for the lessons: every cell says how it presents (RISE in JupyterLab, and
the reveal.js decks of ``make slides``).

Each cell carries ``metadata.slideshow.slide_type``, one of

* ``slide`` / ``subslide``: a new (vertical) slide; set by the author on section and
  sub-section headings, kept as they are;
* ``-``: continues the current slide;
* ``fragment``: appears on the next key press, on the current slide (a code cell and its
  output after the explanation above it);
* ``skip``: not shown (the first code cell when it only imports and configures: run it
  before starting the show).

:func:`assign_slide_types` fills in the cells the author left unset and breaks a slide that
would not fit the screen, so that one idea sits on one slide. The size of a cell is
estimated in lines of a 960 × 700 slide (:func:`cell_lines`). English and Chinese twins
always get the same type (it is decided on the English cell), so the single-language decks
have the same slides.

    python -m tools.slides            # (re)write the metadata of every lesson
    python -m tools.slides --check    # exit 1 if a lesson's metadata is out of date
"""

from __future__ import annotations

import argparse
import ast
import math
import pathlib
import sys
import unicodedata

import nbformat

from .course import lessons
SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "-", "notes")
NEW_SLIDE = ("slide", "subslide")
# Lines that fit on one slide of the decks (960 × 700 at the course's font sizes).
SLIDE_LINES = 26
IMAGE_LINES = 14          # a figure, scaled to the slide's width
CHARS_PER_LINE = 78       # Latin characters per line of prose; a CJK character counts as 2
TEXT_OUTPUT_LINES = 14    # a cell's text output counts at most this much
# RISE settings stored in each lesson's metadata: the "white" theme needs no web font (other
# reveal.js themes fetch theirs from the internet), long slides scroll.
RISE_SETTINGS = {"theme": "white", "transition": "none", "scroll": True,
                 "start_slideshow_at": "beginning", "slideNumber": "c/t"}


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrapped(text: str | list[str], chars: int = CHARS_PER_LINE) -> int:
    lines = text.splitlines() if isinstance(text, str) else text
    return sum(max(1, math.ceil(_width(line) / chars)) for line in lines)


def cell_lines(cell: nbformat.NotebookNode) -> int:
    """Estimated height of ``cell`` on a slide, in lines: wrapped prose (a display formula
    counts 2), code lines, text output lines (at most :data:`TEXT_OUTPUT_LINES`: a longer
    output scrolls on its own) and :data:`IMAGE_LINES` per figure, explorer or embedded image."""
    if cell.cell_type == "markdown":
        text = cell.source
        images = text.count("![")
        formulas = text.count("$$") // 2
        prose = [line for line in text.splitlines() if not line.startswith("![")]
        return _wrapped(prose) + formulas + images * IMAGE_LINES
    lines, text = len(cell.source.splitlines()), ""
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/png" in data or "application/vnd.jupyter.widget-view+json" in data:
            lines += IMAGE_LINES
        elif out.get("output_type") == "error":
            text += "\n".join(out.get("traceback", [])[-1:]) + "\n"
        else:
            chunk = out.get("text") or data.get("text/plain") or ""
            text += "".join(chunk) if isinstance(chunk, list) else chunk
    return lines + min(TEXT_OUTPUT_LINES, _wrapped(text.rstrip("\n"), 100) if text.strip() else 0)


def is_setup(cell: nbformat.NotebookNode) -> bool:
    """A code cell that prints nothing and only imports and configures: imports, calls such
    as ``torch.manual_seed(0)``, and names bound to a constant or a call's result."""
    if cell.cell_type != "code" or cell.get("outputs"):
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    def setup(node):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(node, ast.Expr):
            return isinstance(node.value, ast.Call)
        return isinstance(node, ast.Assign) and isinstance(node.value, (ast.Call, ast.Constant))
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body) and all(map(setup, body))


def _twins(nb: nbformat.NotebookNode) -> list[list[int]]:
    """The cells grouped as the slides see them: an English markdown cell with its Chinese
    twin, or a code cell alone."""
    groups, i = [], 0
    while i < len(nb.cells):
        tags = nb.cells[i].metadata.get("tags", [])
        if ("lang-en" in tags and i + 1 < len(nb.cells)
                and "lang-zh" in nb.cells[i + 1].metadata.get("tags", [])):
            groups.append([i, i + 1])
            i += 2
        else:
            groups.append([i])
            i += 1
    return groups


def assign_slide_types(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Give every cell of ``nb`` an explicit slide type (in place; returns ``nb``).

    Authored ``slide`` / ``subslide`` cells are kept. The first code cell, when it only
    imports and configures (:func:`is_setup`), is ``skip``. Any other cell starts a
    ``subslide`` when it would push the current slide past :data:`SLIDE_LINES`; otherwise a
    code cell after prose is a ``fragment`` and everything else continues the slide (``-``).
    Also stores :data:`RISE_SETTINGS` in the notebook's metadata."""
    used = 0
    seen_code = False
    prev_kind = None
    for group in _twins(nb):
        first = nb.cells[group[0]]
        authored = first.metadata.get("slideshow", {}).get("slide_type")
        height = cell_lines(first)
        if not seen_code and is_setup(first):
            kind = "skip"
        elif authored in NEW_SLIDE:
            kind = authored
        elif used and used + height > SLIDE_LINES:
            kind = "subslide"
        elif first.cell_type == "code" and prev_kind == "markdown":
            kind = "fragment"
        else:
            kind = "-"
        if first.cell_type == "code":
            seen_code = True
        if kind in NEW_SLIDE:
            used = height
        elif kind != "skip":
            used += height
        prev_kind = first.cell_type
        for i in group:
            nb.cells[i].metadata.setdefault("slideshow", {})["slide_type"] = kind
    nb.metadata["rise"] = dict(RISE_SETTINGS)
    return nb


def slide_heights(nb: nbformat.NotebookNode, lang: str = "lang-en") -> list[int]:
    """Estimated height of each slide of the ``lang`` deck, in lines (skipped cells excluded)."""
    heights: list[int] = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown" and lang not in tags:
            continue
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind == "skip":
            continue
        if kind in NEW_SLIDE or not heights:
            heights.append(0)
        heights[-1] += cell_lines(cell)
    return heights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="only report lessons whose metadata would change")
    args = parser.parse_args(argv)
    paths = args.notebooks or lessons()
    stale = []
    for path in paths:
        before = nbformat.read(path, as_version=4)
        after = assign_slide_types(nbformat.read(path, as_version=4))
        if after == before:
            continue
        stale.append(path.name)
        if not args.check:
            nbformat.write(after, path)
            print(f"updated {path.name}: {len(slide_heights(after))} slides")
    if args.check and stale:
        print("slide metadata out of date (run python -m tools.slides): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
