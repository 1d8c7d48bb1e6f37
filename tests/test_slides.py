"""tools.slides and the slide metadata of every lesson.

References: the raw notebook JSON, and cell heights counted by hand."""

import base64
import copy
import json
import pathlib
import zlib

import nbformat
import pytest

from tools import course, slides
from tools import slides as S

LESSONS = course.lessons()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_cell_says_how_it_presents(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    types = [c["metadata"].get("slideshow", {}).get("slide_type") for c in cells]
    assert set(types) <= {"slide", "subslide", "fragment", "skip", "-"}, set(types)
    assert types[0] == "slide" and types[1] == "slide"  # both titles open a deck
    for i, cell in enumerate(cells):
        if "lang-en" in cell["metadata"].get("tags", []):
            assert types[i + 1] == types[i], f"cell {i + 1} (Chinese twin) presents differently"
    skipped = [c for c, t in zip(cells, types) if t == "skip"]
    assert all(c["cell_type"] == "code" and not c["outputs"] for c in skipped)
    assert len(skipped) <= 1


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_metadata_is_up_to_date_and_slides_fit(path):
    nb = nbformat.read(path, as_version=4)
    assert slides.assign_slide_types(nbformat.read(path, as_version=4)) == nb, (
        "slide metadata out of date: run python -m tools.slides")
    assert nb.metadata["rise"]["theme"] == "white"
    for lang in ("lang-en", "lang-zh"):
        # a slide taller than the screen is a single cell that could not be split
        shown = [c for c in nb.cells
                 if c.metadata["slideshow"]["slide_type"] != "skip"
                 and (c.cell_type == "code" or lang in c.metadata["tags"])]
        decks, current = [], []
        for c in shown:
            if c.metadata["slideshow"]["slide_type"] in ("slide", "subslide") and current:
                decks.append(current)
                current = []
            current.append(c)
        decks.append(current)
        for deck in decks:
            height = sum(map(slides.cell_px, deck))
            assert height <= slides.SLIDE_PX or len(deck) == 1, (
                f"{lang}: a slide of {height:.0f} px holds {len(deck)} cells")
        assert [sum(map(slides.cell_px, d)) for d in decks] == slides.slide_heights(nb, lang)
    for cell in nb.cells:  # the tag marks exactly the cells whose code pushes their output off
        tagged = slides.OUTPUT_ONLY_TAG in cell.metadata.get("tags", [])
        assert tagged == slides.output_only(cell)


def _png(width: int, height: int) -> str:
    """A base64 PNG header (signature and IHDR chunk) of the given size."""
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 6, 0, 0, 0])
    raw = (b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + ihdr
           + zlib.crc32(b"IHDR" + ihdr).to_bytes(4, "big"))
    return base64.b64encode(raw).decode()


def _figure(width: int, height: int):
    return nbformat.v4.new_output("display_data", data={"image/png": _png(width, height),
                                                        "text/plain": "<Figure>"})


def test_cell_px_counted_by_hand():
    md = nbformat.v4.new_markdown_cell
    S = slides
    assert S.cell_px(md("one line")) == S.BLOCK_PX + S.PROSE_PX
    n = S.CHARS_PER_LINE
    assert S.cell_px(md("a" * (n + 1))) == S.BLOCK_PX + 2 * S.PROSE_PX       # wraps
    assert S.cell_px(md("归" * (n // 2 + 1))) == S.BLOCK_PX + 2 * S.PROSE_PX  # a CJK character is 2 wide
    assert S.cell_px(md("## Title\n\ntext")) == 2 * S.BLOCK_PX + S.HEADING_PX[2] + S.PROSE_PX
    assert S.cell_px(md("$$\nx\n$$")) == S.BLOCK_PX + S.FORMULA_PX + 0.6 * S.FORMULA_PX
    assert S.cell_px(md("| a | b |\n|---|---|\n| 1 | 2 |")) == S.BLOCK_PX + 2 * S.TABLE_ROW_PX
    # a figure shows at its size, scaled down to fit IMAGE_MAX (1200 x 520 px)
    code = nbformat.v4.new_code_cell("a = 1\nprint(a)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="1\n2\n3\n"), _figure(600, 300)])
    assert S.cell_px(code) == ((2 * S.CODE_PX + S.CELL_PX) + (3 * S.CODE_PX + S.OUTPUT_PAD_PX + S.CELL_PX)
                               + S.IMAGE_PAD_PX + 300)
    assert S.image_px((2400, 600)) == 300          # half as wide, half as tall
    assert S.image_px((800, 1040)) == 520          # capped at 520 px
    assert S.image_px(None) == 520
    long = nbformat.v4.new_code_cell("x" * (S.CODE_CHARS + 1), outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="line\n" * 100)])
    assert S.cell_px(long) == (2 * S.CODE_PX + S.CELL_PX) + (100 * S.CODE_PX + S.OUTPUT_PAD_PX + S.CELL_PX)


def test_output_only_tag_for_long_figure_cells():
    code = nbformat.v4.new_code_cell
    fits = int((slides.SLIDE_PX - 300 - slides.IMAGE_PAD_PX - slides.CELL_PX) / slides.CODE_PX)
    short = code("\n".join(["plt.plot(x)"] * 5), outputs=[_figure(600, 300)])
    long = code("\n".join(["plt.plot(x)"] * (fits + 1)), outputs=[_figure(600, 300)])
    no_output = code("\n".join(["x = 1"] * 60))
    assert not slides.output_only(short) and slides.output_only(long)
    assert not slides.output_only(no_output)
    md = nbformat.v4.new_markdown_cell
    cells = [md("# T", metadata={"tags": ["lang-en"], "slideshow": {"slide_type": "slide"}}),
             md("# 标题", metadata={"tags": ["lang-zh"], "slideshow": {"slide_type": "slide"}}),
             long, short]
    nb = slides.assign_slide_types(nbformat.v4.new_notebook(cells=cells))
    assert nb.cells[2].metadata["tags"] == [slides.OUTPUT_ONLY_TAG]
    assert "tags" not in nb.cells[3].metadata
    # on the slide the tagged cell counts its figure only, so title and figure share a slide
    assert slides.cell_px(nb.cells[2]) == slides.IMAGE_PAD_PX + 300 + slides.CELL_PX
    assert nb.cells[2].metadata["slideshow"]["slide_type"] == "fragment"
    # the code shrinks (moved into a helper): the tag goes
    nb.cells[2].source = "figures.plot_it()"
    slides.assign_slide_types(nb)
    assert nb.cells[2].metadata["tags"] == []


def test_the_decks_hide_tagged_code_and_long_tracebacks():
    from tools import export
    tagged = nbformat.v4.new_code_cell("fig = make_it()\nplt.show()", outputs=[_figure(600, 300)],
                                       metadata={"tags": [slides.OUTPUT_ONLY_TAG]})
    error = nbformat.v4.new_code_cell("1 / 0", outputs=[nbformat.v4.new_output(
        "error", ename="ZeroDivisionError", evalue="division by zero",
        traceback=["Traceback (most recent call last)", "  in frame_one",
                   "ZeroDivisionError: division by zero"])])
    nb = export._for_slides(nbformat.v4.new_notebook(cells=[tagged, error]))
    assert nb.cells[0].metadata["transient"] == {"remove_source": True} and nb.cells[0].outputs
    assert nb.cells[1].outputs[0].traceback == ["ZeroDivisionError: division by zero"]
    body, _ = export._exporter("slides", "en").from_notebook_node(nb, resources={
        "course": {"static": "s", "index": "i", "index_label": "", "nav_label": "",
                   "other_lang": "zh", "other_href": "", "other_label": ""}})
    assert "make_it" not in body and "ZeroDivisionError" in body and "frame_one" not in body


def test_twins_break_on_the_taller_one():
    md = nbformat.v4.new_markdown_cell
    cells = [md("# T", metadata={"tags": ["lang-en"], "slideshow": {"slide_type": "slide"}}),
             md("# 标题", metadata={"tags": ["lang-zh"], "slideshow": {"slide_type": "slide"}}),
             md("para\n" * 10, metadata={"tags": ["lang-en"]}),
             md("段落\n" * 10, metadata={"tags": ["lang-zh"]}),
             md("short", metadata={"tags": ["lang-en"]}),
             md("很长的中文" * 150, metadata={"tags": ["lang-zh"]})]
    heading = slides.cell_px(cells[0])
    assert heading + slides.cell_px(cells[2]) + slides.cell_px(cells[4]) <= slides.SLIDE_PX
    assert heading + slides.cell_px(cells[3]) + slides.cell_px(cells[5]) > slides.SLIDE_PX
    nb = slides.assign_slide_types(nbformat.v4.new_notebook(cells=cells))
    assert [c.metadata["slideshow"]["slide_type"] for c in nb.cells[2:]] == ["-", "-", "subslide", "subslide"]


def test_assign_slide_types_on_a_small_notebook():
    md = nbformat.v4.new_markdown_cell
    cells = [md("# T", metadata={"tags": ["lang-en"], "slideshow": {"slide_type": "slide"}}),
             md("# 标题", metadata={"tags": ["lang-zh"], "slideshow": {"slide_type": "slide"}}),
             nbformat.v4.new_code_cell("import torch\ntorch.manual_seed(0)"),
             md("short", metadata={"tags": ["lang-en"]}),
             md("短", metadata={"tags": ["lang-zh"]}),
             nbformat.v4.new_code_cell("print(1)", outputs=[
                 nbformat.v4.new_output("stream", name="stdout", text="1\n")]),
             md("x\n" * 30, metadata={"tags": ["lang-en"]}),
             md("x\n" * 30, metadata={"tags": ["lang-zh"]})]
    assert slides.cell_px(cells[6]) == slides.BLOCK_PX + 30 * slides.PROSE_PX  # one paragraph
    nb = slides.assign_slide_types(nbformat.v4.new_notebook(cells=cells))
    assert [c.metadata["slideshow"]["slide_type"] for c in nb.cells] == [
        "slide", "slide", "skip", "-", "-", "fragment", "subslide", "subslide"]
    assert nb.metadata["rise"] == slides.RISE_SETTINGS
    P, B, C = slides.PROSE_PX, slides.BLOCK_PX, slides.CODE_PX + slides.CELL_PX
    out = slides.CODE_PX + slides.OUTPUT_PAD_PX + slides.CELL_PX  # the printed "1"
    assert slides.slide_heights(nb) == [slides.HEADING_PX[1] + B + P + B + C + out, B + 30 * P]


def test_setup_cell_rules():
    code = nbformat.v4.new_code_cell
    assert slides.is_setup(code("import torch\nTHREADS = 1\ntorch.set_num_threads(THREADS)"))
    assert not slides.is_setup(code("x = 1"))                       # no import
    assert not slides.is_setup(code("import torch\nfor i in range(2): pass"))
    printed = code("import torch", outputs=[nbformat.v4.new_output("stream", name="stdout", text="hi")])
    assert not slides.is_setup(printed)


def test_split_for_slides_cuts_tall_cells_only_on_the_decks():
    md = nbformat.v4.new_markdown_cell
    rows = "\n".join(f"| {i} | row {i} |" for i in range(40))
    en = md("## Table\n\n| n | what |\n|---|---|\n" + rows, metadata={"tags": ["lang-en"]})
    zh = md("## 表\n\n| n | 内容 |\n|---|---|\n" + rows, metadata={"tags": ["lang-zh"]})
    items = "\n".join(f"- item {i}" for i in range(40))
    listed = md("Intro\n\n" + items, metadata={"tags": ["lang-en"]})
    listed_zh = md("引言\n\n" + items, metadata={"tags": ["lang-zh"]})
    printed = nbformat.v4.new_code_cell("for i in range(60): print(i)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="".join(f"{i}\n" for i in range(60)))])
    nb = nbformat.v4.new_notebook(cells=[en, zh, listed, listed_zh, printed])
    before = copy.deepcopy(nb)
    out = slides.split_for_slides(nb)
    assert nb == before                                   # the notebook itself is untouched
    nbformat.validate(out)
    assert all(slides.cell_px(c) <= slides.SLIDE_PX for c in out.cells)
    en_parts = [c for c in out.cells if "lang-en" in c.metadata.get("tags", [])]
    zh_parts = [c for c in out.cells if "lang-zh" in c.metadata.get("tags", [])]
    assert len(en_parts) == len(zh_parts) > 2              # twins cut alike
    # every table piece keeps the header rows; every row and item shows exactly once
    tables = [c.source for c in en_parts if "| n | what |" in c.source]
    assert len(tables) >= 2 and all("|---|---|" in t for t in tables)
    shown = "\n".join(c.source for c in en_parts)
    assert all(shown.count(f"| {i} | row {i} |") == 1 for i in range(40))
    assert all(shown.count(f"- item {i}\n") + shown.endswith(f"- item {i}") == 1 for i in range(40))
    codes = [c for c in out.cells if c.cell_type == "code"]
    assert len(codes) >= 2
    assert "".join(o.text for c in codes for o in c.outputs) == "".join(f"{i}\n" for i in range(60))
    assert slides.OUTPUT_ONLY_TAG not in codes[0].metadata.get("tags", [])  # the code, once
    assert all(slides.OUTPUT_ONLY_TAG in c.metadata["tags"] for c in codes[1:])
    assert all(c.metadata["slideshow"]["slide_type"] == "subslide" for c in codes[1:])
    assert len({c.id for c in out.cells}) == len(out.cells)


def test_slide_sizes_match_the_stylesheet():
    """The figure check (helpers.plotting) and the slide estimates use the sizes that
    static/course.css gives a slide's body text and a slide's pictures."""
    import re

    from helpers.plotting import SLIDE_BODY_PX, SLIDE_FIGURE_BOX

    css = (pathlib.Path(__file__).resolve().parent.parent / "static" / "course.css").read_text()
    body = re.search(r"\.reveal \.jp-RenderedHTMLCommon \{ font-size: (\d+)px; \}", css)
    image = re.search(r"\.reveal \.jp-RenderedHTMLCommon img \{ max-height: (\d+)px; max-width: 100%;", css)
    assert body and int(body.group(1)) == SLIDE_BODY_PX
    assert image and int(image.group(1)) == SLIDE_FIGURE_BOX[1]
    # the box's width is the slide's content width: the deck's slide less reveal.js's margins
    assert S.IMAGE_MAX == SLIDE_FIGURE_BOX and SLIDE_FIGURE_BOX[0] <= S.SLIDE_SIZE[0] - 40


def test_a_tall_rendered_markdown_output_is_cut_between_its_blocks():
    """A code cell whose markdown output (as helpers.mock_interview shows an answer) is taller
    than a slide becomes several slides, each output a whole block of it, each fitting; a
    markdown output with folded <details> (a list of answers to open) stays whole."""
    blocks = [f"**Block {i}**\n\n- " + "\n- ".join(f"point {i}.{k} " + "word " * 12 for k in range(4))
              for i in range(6)]
    tall = "\n\n".join(blocks)
    assert S.markdown_px(tall) > S.SLIDE_PX
    cell = nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": tall, "text/plain": tall})])
    nb = nbformat.v4.new_notebook(cells=[cell])
    parts = S.split_for_slides(nb).cells
    assert len(parts) > 1
    shown = "\n\n".join(o["data"]["text/markdown"] for p in parts for o in p.outputs)
    assert sorted(S._markdown_blocks(shown)) == sorted(S._markdown_blocks(tall))  # nothing lost or cut inside
    assert all(S.output_px(p) <= S.SLIDE_PX for p in parts[1:])
    folded = "\n\n".join(f"<details><summary>{i}</summary>\n\n{b}\n\n</details>" for i, b in enumerate(blocks))
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": folded, "text/plain": folded})]
    assert len(S.split_for_slides(nbformat.v4.new_notebook(cells=[cell])).cells) == 1
    # a long list of headings, each with its folded answer: cut between them, never inside one
    many = "\n\n".join(f"**{i}. a question**<br>a second line\n<small>asked in 3 of 29</small>\n\n"
                        f"<details><summary>Answer</summary>\n\n{blocks[0]}\n\n</details>" for i in range(20))
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": many, "text/plain": many})]
    parts = S.split_for_slides(nbformat.v4.new_notebook(cells=[cell])).cells
    assert len(parts) > 1
    for part in parts:
        for out in part.outputs:
            md = out["data"]["text/markdown"]
            assert md.count("<details") == md.count("</details>") == md.count("**") // 2 - md.count("**Block")
    assert sum(o["data"]["text/markdown"].count("<details") for p in parts for o in p.outputs) == 20
