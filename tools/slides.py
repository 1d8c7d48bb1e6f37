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
import base64
import math
import pathlib
import re
import sys
import unicodedata

import nbformat

from .course import IMAGES, lessons

SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "-", "notes")
NEW_SLIDE = ("slide", "subslide")
# A code cell with this tag shows only its outputs on the decks of ``make slides`` (the
# notebook keeps its code): set here on a cell whose code and output do not fit one slide.
OUTPUT_ONLY_TAG = "slides-output-only"
# The decks' slide in CSS px (tools/export.py; 16:9 at the height of reveal.js's 960 × 700)
# and the sizes of static/course.css, from which the heights below are estimated.
SLIDE_SIZE = (1240, 700)
SLIDE_PX = 640             # content height a slide may hold (the rest: margins, estimate error)
PROSE_PX = 29              # one line of prose (22 px, line height 1.3)
CHARS_PER_LINE = 82        # Latin characters per line of prose; a CJK character counts as 2
CODE_PX = 22.5             # one line of code or text output (18 px, line height 1.25)
CODE_CHARS = 106           # characters per code line before it wraps (DejaVu Sans Mono 18 px)
CELL_PX = 24               # padding and margins around a code cell and around its output
BLOCK_PX = 16              # space between paragraphs, list items' blocks, headings
HEADING_PX = {1: 70, 2: 60, 3: 48, 4: 40}
FORMULA_PX = 50            # a display formula, one line
TABLE_ROW_PX = 40          # a row of a markdown table
IMAGE_MAX = (1200, 520)    # an image is scaled down to fit this box (course.css)
IMAGE_PAD_PX = 70          # margins around a figure
# The old names, in slide lines of PROSE_PX
SLIDE_LINES = SLIDE_PX // PROSE_PX
# RISE settings stored in each lesson's metadata: the "white" theme needs no web font (other
# reveal.js themes fetch theirs from the internet), long slides scroll.
RISE_SETTINGS = {"theme": "white", "transition": "none", "scroll": True,
                 "start_slideshow_at": "beginning", "slideNumber": "c/t"}


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrapped(text: str | list[str], chars: int = CHARS_PER_LINE) -> int:
    lines = text.splitlines() if isinstance(text, str) else text
    return sum(max(1, math.ceil(_width(line) / chars)) for line in lines)


def _png_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG, read from its header."""
    try:
        head = base64.b64decode(data[:44])
    except ValueError:
        return None
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def image_px(size: tuple[int, int] | None, metadata: dict | None = None) -> float:
    """Height of an image on a slide: its size (or the width/height its output metadata
    asks for), scaled down to fit :data:`IMAGE_MAX`; an image of unknown size counts as
    the full :data:`IMAGE_MAX` height."""
    metadata = metadata or {}
    if "width" in metadata and "height" in metadata:
        size = (metadata["width"], metadata["height"])
    if not size or not size[0] or not size[1]:
        return IMAGE_MAX[1]
    w, h = size
    return min(h, IMAGE_MAX[1], h * IMAGE_MAX[0] / w)


def _markdown_image_px(line: str) -> float:
    m = re.search(r"!\[[^\]]*\]\(([^)\s]+)", line)
    path = IMAGES / pathlib.PurePosixPath(m.group(1)).name if m else None
    if path is None or not path.is_file():
        return IMAGE_MAX[1]
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return IMAGE_MAX[1]
    return image_px((int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")))


def markdown_px(text: str) -> float:
    """Estimated height of a markdown cell on a slide, in CSS px: headings, wrapped prose
    and list items, display formulas (one line per ``\\\\`` row), table rows and images."""
    height = 0.0
    blocks = re.split(r"\n\s*\n", text.strip())
    for block in blocks:
        lines = block.splitlines()
        if not lines:
            continue
        height += BLOCK_PX
        in_formula = False
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("$$") or in_formula:
                dollars = stripped.count("$$")
                if stripped.startswith("$$") and not in_formula:
                    height += FORMULA_PX
                    in_formula = dollars == 1
                else:
                    height += FORMULA_PX * 0.6 if stripped.strip("$ ") else 0
                    in_formula = in_formula and dollars == 0
                height += FORMULA_PX * 0.6 * stripped.count("\\\\")
            elif stripped.startswith("#"):
                level = len(stripped) - len(stripped.lstrip("#"))
                px = HEADING_PX.get(level, PROSE_PX)
                height += px * _wrapped([stripped], int(CHARS_PER_LINE * PROSE_PX / px))
            elif stripped.startswith("|"):
                if not re.fullmatch(r"\|[\s:|-]+\|?", stripped):
                    height += TABLE_ROW_PX * _wrapped([stripped], CHARS_PER_LINE - 10)
            elif "![" in stripped:
                height += _markdown_image_px(stripped)
            else:
                height += PROSE_PX * _wrapped([re.sub(r"\]\([^)]*\)", "]", stripped)])
    return height


def _outputs(cell: nbformat.NotebookNode) -> tuple[float, str]:
    """Height of a code cell's figures and the text of its other outputs."""
    images, text = 0.0, ""
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/png" in data:
            images += IMAGE_PAD_PX + image_px(_png_size(data["image/png"]),
                                              out.get("metadata", {}).get("image/png"))
        elif "application/vnd.jupyter.widget-view+json" in data:
            images += IMAGE_MAX[1]
        elif out.get("output_type") == "error":
            text += "\n".join(out.get("traceback", [])[-1:]) + "\n"
        else:
            chunk = out.get("text") or data.get("text/plain") or ""
            text += "".join(chunk) if isinstance(chunk, list) else chunk
    return images, text


def output_px(cell: nbformat.NotebookNode) -> float:
    """Estimated height of a code cell's outputs on a slide, in CSS px (0 if none)."""
    images, text = _outputs(cell)
    lines = _wrapped(text.rstrip("\n"), CODE_CHARS) if text.strip() else 0
    return images + (lines * CODE_PX + CELL_PX if lines else 0)


def source_px(cell: nbformat.NotebookNode) -> float:
    """Estimated height of a code cell's code on a slide, in CSS px."""
    return _wrapped(cell.source, CODE_CHARS) * CODE_PX + CELL_PX if cell.source.strip() else 0


def output_only(cell: nbformat.NotebookNode) -> bool:
    """Whether the decks show only the outputs of ``cell``: a code cell with outputs whose
    code and outputs together are taller than a slide (its figure would fall below it)."""
    return (cell.cell_type == "code" and bool(cell.get("outputs")) and output_px(cell) > 0
            and source_px(cell) + output_px(cell) > SLIDE_PX)


def cell_px(cell: nbformat.NotebookNode) -> float:
    """Estimated height of ``cell`` on a slide of the decks, in CSS px: see
    :func:`markdown_px`; a code cell's code (wrapped at :data:`CODE_CHARS`; none when it is
    tagged :data:`OUTPUT_ONLY_TAG`) and outputs: text lines (wrapped alike) and figures at
    the size they show."""
    if cell.cell_type == "markdown":
        return markdown_px(cell.source)
    if cell.cell_type != "code":
        return 0.0
    hidden = OUTPUT_ONLY_TAG in cell.metadata.get("tags", [])
    return (0.0 if hidden else source_px(cell)) + output_px(cell)


def cell_lines(cell: nbformat.NotebookNode) -> int:
    """:func:`cell_px` in lines of prose (:data:`PROSE_PX`), rounded up."""
    return math.ceil(cell_px(cell) / PROSE_PX)


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

    A code cell gets the tag :data:`OUTPUT_ONLY_TAG` exactly when :func:`output_only` says
    so (the tag is removed from a cell that no longer needs it). Authored ``slide`` /
    ``subslide`` cells are kept. The first code cell, when it only imports and configures
    (:func:`is_setup`), is ``skip``. Any other cell starts a ``subslide`` when it would push
    the current slide past :data:`SLIDE_PX` (the taller of an English cell and its Chinese
    twin counts); otherwise a code cell after prose is a ``fragment`` and everything else
    continues the slide (``-``). Also stores :data:`RISE_SETTINGS` in the notebook's
    metadata."""
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if output_only(cell) and OUTPUT_ONLY_TAG not in tags:
            cell.metadata["tags"] = [*tags, OUTPUT_ONLY_TAG]
        elif OUTPUT_ONLY_TAG in tags and not output_only(cell):
            cell.metadata["tags"] = [t for t in tags if t != OUTPUT_ONLY_TAG]
    used = 0.0
    seen_code = False
    prev_kind = None
    for group in _twins(nb):
        first = nb.cells[group[0]]
        authored = first.metadata.get("slideshow", {}).get("slide_type")
        height = max(cell_px(nb.cells[i]) for i in group)
        if not seen_code and is_setup(first):
            kind = "skip"
        elif authored in NEW_SLIDE:
            kind = authored
        elif used and used + height > SLIDE_PX:
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


def slide_heights(nb: nbformat.NotebookNode, lang: str = "lang-en") -> list[float]:
    """Estimated height of each slide of the ``lang`` deck, in CSS px (skipped cells excluded)."""
    heights: list[float] = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown" and lang not in tags:
            continue
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind == "skip":
            continue
        if kind in NEW_SLIDE or not heights:
            heights.append(0.0)
        heights[-1] += cell_px(cell)
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
