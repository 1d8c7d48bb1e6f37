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
would not fit the screen, so that one idea sits on one slide. The height of a cell is
estimated in CSS px of the decks' 1240 × 700 slide (16:9), from the sizes of
``static/course.css`` (:func:`cell_px`: wrapped prose, headings, formulas, table rows,
code and text-output lines wrapped as the slides wrap them, figures at the size they show).
An English cell and its Chinese twin always get the same type, decided on the taller of
the two, so the single-language decks have the same slides.

Tag ``slides-output-only`` (:data:`OUTPUT_ONLY_TAG`): the decks of ``make slides`` show
the cell's outputs without its code; the notebook (and RISE) keep the code. This module
sets and removes it itself, on exactly the code cells whose code and outputs together are
taller than a slide, when the outputs alone fit or the code alone does not
(:func:`output_only`): a long figure-drawing cell shows its figure. Do not set it by hand;
``--check`` reports a tag that the rule would change.

A single cell taller than a slide is cut for the decks only (:func:`split_for_slides`,
applied by ``tools.export``): a markdown cell between paragraphs, list items or table rows
(each table piece repeats the header), a code cell's long text output between lines (the
code shows once, the rest on the following sub-slides). The decks also show an error's
last line only (the exception), not its traceback. ``python -m tools.slide_fit`` measures
every slide of the built decks in Chromium (``make slide-fit``).

    python -m tools.slides            # (re)write the metadata of every lesson
    python -m tools.slides --check    # exit 1 if a lesson's metadata is out of date
"""

from __future__ import annotations

import argparse
import ast
import base64
import copy
import math
import pathlib
import re
import sys
import unicodedata

import nbformat

from helpers.plotting import SLIDE_FIGURE_BOX

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
CELL_PX = 24               # padding and margins around a code cell and around its outputs
OUTPUT_PAD_PX = 13         # padding of each text output
BLOCK_PX = 16              # space between paragraphs, list items' blocks, headings
HEADING_PX = {1: 70, 2: 60, 3: 48, 4: 40}
FORMULA_PX = 50            # a display formula, one line
TABLE_ROW_PX = 40          # a row of a markdown table
IMAGE_MAX = SLIDE_FIGURE_BOX  # an image is scaled down to fit this box (course.css)
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


def png_size(head: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG from its first 24 bytes (None if it is not a PNG)."""
    if head[:8] != b"\x89PNG\r\n\x1a\n" or len(head) < 24:
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _png_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG, read from its header."""
    try:
        return png_size(base64.b64decode(data[:44]))
    except ValueError:
        return None


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


def _output_height(out: dict) -> float:
    """Height of one output on a slide: a figure, or lines of text (a ``pre`` drops a
    newline that opens it) with the padding of its own output box."""
    data = out.get("data", {})
    if "image/png" in data:
        return IMAGE_PAD_PX + image_px(_png_size(data["image/png"]), out.get("metadata", {}).get("image/png"))
    if "application/vnd.jupyter.widget-view+json" in data:
        return IMAGE_MAX[1]
    markdown = _markdown_output(out)
    if markdown is not None:  # rendered as markdown, as a markdown cell is
        return _output_markdown_px(markdown) + OUTPUT_PAD_PX if markdown.strip() else 0.0
    if out.get("output_type") == "error":
        text = "\n".join(out.get("traceback", [])[-1:])
    else:
        text = out.get("text") or data.get("text/plain") or ""
        text = "".join(text) if isinstance(text, list) else text
    text = text.removeprefix("\n").rstrip("\n")
    return _wrapped(text, CODE_CHARS) * CODE_PX + OUTPUT_PAD_PX if text.strip() else 0.0


def _markdown_output(out: dict) -> str | None:
    """The markdown of an output that a page renders as markdown (``text/markdown`` and no
    richer kind that a page would show first), else ``None``."""
    data = out.get("data", {})
    if "text/markdown" not in data or any(k in data for k in ("text/html", "image/svg+xml", "image/jpeg", "text/latex")):
        return None
    text = data["text/markdown"]
    return "".join(text) if isinstance(text, list) else text


_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)


def _output_markdown_blocks(text: str) -> list[str]:
    """The blocks of a rendered markdown output, as :func:`_markdown_blocks`, except that a
    folded ``<details>`` element stays whole and stays with the block just before it (its
    heading: a list of answers to open, as lesson 12's most asked)."""
    blocks, depth = [], 0
    for block in _markdown_blocks(text):
        opens = block.count("<details")
        inside = depth > 0  # the rest of a <details> that an earlier block opened
        heading = block.lstrip().startswith("<details") and blocks and "<details" not in blocks[-1]
        if inside or heading:
            blocks[-1] += "\n\n" + block
        else:
            blocks.append(block)
        depth += opens - block.count("</details>")
    return blocks


def _output_markdown_px(text: str) -> float:
    """Estimated height of rendered markdown on a slide: as a markdown cell, except that a
    folded ``<details>`` element shows only its summary line."""
    height = 0.0
    for block in _output_markdown_blocks(text):
        shown = block.split("<details")[0]
        height += markdown_px(shown) if shown.strip() else 0.0
        height += sum(markdown_px(m) for m in _SUMMARY.findall(block))
    return height


def output_px(cell: nbformat.NotebookNode) -> float:
    """Estimated height of a code cell's outputs on a slide, in CSS px (0 if none): each
    output's height (:func:`_output_height`), and the margin of the output area."""
    heights = [_output_height(out) for out in cell.get("outputs", [])]
    return sum(heights) + (CELL_PX if any(heights) else 0)


def source_px(cell: nbformat.NotebookNode) -> float:
    """Estimated height of a code cell's code on a slide, in CSS px."""
    return _wrapped(cell.source, CODE_CHARS) * CODE_PX + CELL_PX if cell.source.strip() else 0


def output_only(cell: nbformat.NotebookNode) -> bool:
    """Whether the decks show only the outputs of ``cell``: a code cell whose code and
    outputs together are taller than a slide (its figure would fall below it), when its
    outputs alone fit a slide or its code alone does not. (Outputs taller than a slide are
    cut across slides: :func:`split_for_slides`.)"""
    out = output_px(cell) if cell.cell_type == "code" and cell.get("outputs") else 0
    code = source_px(cell)
    return out > 0 and code + out > SLIDE_PX and (out <= SLIDE_PX or code > SLIDE_PX)


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


def _markdown_blocks(text: str) -> list[str]:
    """The blocks of a markdown cell (paragraphs, lists, tables, formulas, code fences),
    split at blank lines outside ``$$`` formulas and code fences; a table taller than a
    slide is cut into tables of fewer rows, each with the header rows."""
    blocks, current, fence, formula = [], [], False, False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
        formula ^= line.count("$$") % 2 == 1
        if not line.strip() and not fence and not formula:
            if current:
                blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    out = []
    for block in blocks:
        rows = block.splitlines()
        if markdown_px(block) <= SLIDE_PX:
            out.append(block)
        elif len(rows) >= 4 and all(r.lstrip().startswith("|") for r in rows):
            out += _cut(rows[2:], head=rows[:2])  # a table: its rows
        elif any(_LIST_ITEM.match(r) for r in rows[1:]):
            items = []  # a list: its items (with the lines that continue them)
            for row in rows:
                if _LIST_ITEM.match(row) or not items:
                    items.append([row])
                else:
                    items[-1].append(row)
            out += _cut(["\n".join(item) for item in items])
        else:
            out.append(block)
    return out


_LIST_ITEM = re.compile(r"(?:[-*+]|\d+[.)])\s")


def _cut(rows: list[str], head: list[str] = ()) -> list[str]:
    """``rows`` as blocks (each led by ``head``) that each fit a slide."""
    blocks, chunk = [], []
    for row in rows:
        if chunk and markdown_px("\n".join([*head, *chunk, row])) > SLIDE_PX:
            blocks.append("\n".join([*head, *chunk]))
            chunk = []
        chunk.append(row)
    blocks.append("\n".join([*head, *chunk]))
    return blocks


def _pack(heights: list[float], first: float = SLIDE_PX, later: float = SLIDE_PX) -> list[int]:
    """Indices where a new slide starts when items of ``heights`` are packed greedily into
    a first slide of ``first`` px and more of ``later`` px."""
    starts, used, budget = [0], 0.0, first
    for i, h in enumerate(heights):
        if i and used + h > budget:
            starts.append(i)
            used, budget = 0.0, later
        used += h
    return starts


def _pieces(items: list, starts: list[int]) -> list[list]:
    return [items[a:b] for a, b in zip(starts, starts[1:] + [len(items)])]


def _continued(cell: nbformat.NotebookNode, k: int, **changes) -> nbformat.NotebookNode:
    part = copy.deepcopy(cell)
    part.update(changes)
    if k:
        part["id"] = f"{cell.get('id', 'cell')}-{k}"[:64]
        part.metadata.setdefault("slideshow", {})["slide_type"] = "subslide"
    return part


def _split_code(cell: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """``cell`` as one or more cells whose outputs fit a slide each: text outputs are cut
    between lines, rendered markdown taller than a slide between its blocks; the code shows
    on the first slide only."""
    hidden = OUTPUT_ONLY_TAG in cell.metadata.get("tags", [])
    items = []  # (height, output); text outputs one line each
    for out in cell.get("outputs", []):
        markdown = _markdown_output(out)
        if out.get("output_type") == "stream" and out.get("text", "").strip():
            text = out["text"]
            for line in text.removeprefix("\n").splitlines(keepends=True):
                items.append((_wrapped(line.rstrip("\n"), CODE_CHARS) * CODE_PX,
                              nbformat.v4.new_output("stream", name=out.get("name", "stdout"), text=line)))
        elif markdown is not None and _output_markdown_px(markdown) + OUTPUT_PAD_PX > SLIDE_PX - CELL_PX - OUTPUT_PAD_PX:
            # rendered markdown taller than a slide: cut between its blocks, as a markdown cell
            # (a folded <details> whole, with the block before it)
            for block in _output_markdown_blocks(markdown):
                items.append((_output_markdown_px(block) + OUTPUT_PAD_PX, nbformat.v4.new_output(
                    "display_data", data={"text/markdown": block, "text/plain": block})))
        else:
            items.append((_output_height(out), out))
    first = SLIDE_PX - (0 if hidden else source_px(cell)) - CELL_PX - OUTPUT_PAD_PX
    later = SLIDE_PX - CELL_PX - OUTPUT_PAD_PX
    starts = _pack([h for h, _ in items], first, later)
    if len(starts) == 1:
        return [cell]
    pieces = _pieces(items, starts)
    if items and items[0][0] > first:  # the code fills its slide: outputs from the next one
        pieces = [[]] + _pieces(items, _pack([h for h, _ in items], later, later))
    parts = []
    for k, piece in enumerate(pieces):
        outputs = []
        for _, out in piece:  # consecutive lines of one stream join again
            if (outputs and out.get("output_type") == "stream" and outputs[-1].get("output_type") == "stream"
                    and outputs[-1].get("name") == out.get("name")):
                outputs[-1] = nbformat.v4.new_output("stream", name=out["name"], text=outputs[-1]["text"] + out["text"])
            else:
                outputs.append(out)
        part = _continued(cell, k, outputs=outputs)
        if k and OUTPUT_ONLY_TAG not in part.metadata.get("tags", []):
            part.metadata["tags"] = [*part.metadata.get("tags", []), OUTPUT_ONLY_TAG]
        parts.append(part)
    return parts


def split_for_slides(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of the bilingual ``nb`` for the decks, in which no single cell is taller than
    a slide: a markdown cell is cut between blocks (:func:`_markdown_blocks`) into cells that
    each fit, and a code cell's long text output is cut between lines (:func:`_split_code`);
    each continuation starts a ``subslide``. An English cell and its Chinese twin are cut at
    the same blocks when they have the same blocks (else each on its own). The notebooks
    themselves are not changed: ``tools.export`` applies this to the decks only."""
    out = copy.deepcopy(nb)
    cells = []
    for group in _twins(nb):
        group_cells = [copy.deepcopy(nb.cells[i]) for i in group]
        first = group_cells[0]
        if first.cell_type == "code":
            cells += _split_code(first)
            continue
        if first.cell_type != "markdown" or max(map(cell_px, group_cells)) <= SLIDE_PX:
            cells += group_cells
            continue
        blocks = [_markdown_blocks(c.source) for c in group_cells]
        if len({len(b) for b in blocks}) == 1:
            heights = [max(markdown_px(b[i]) for b in blocks) for i in range(len(blocks[0]))]
            starts = [_pack(heights)] * len(blocks)
        else:
            starts = [_pack([markdown_px(x) for x in b]) for b in blocks]
        for c, b, st in zip(group_cells, blocks, starts):
            cells += [_continued(c, k, source="\n\n".join(piece)) for k, piece in enumerate(_pieces(b, st))]
    out.cells = cells
    return out


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
