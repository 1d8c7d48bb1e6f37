"""tools.slides and the slide metadata of every lesson.

References: the raw notebook JSON, and cell heights counted by hand."""

import json
import pathlib

import nbformat
import pytest

from tools import course, slides

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
            height = sum(map(slides.cell_lines, deck))
            assert height <= slides.SLIDE_LINES or len(deck) == 1, (
                f"{lang}: a slide of {height} lines holds {len(deck)} cells")
        assert [sum(map(slides.cell_lines, d)) for d in decks] == slides.slide_heights(nb, lang)


def test_cell_lines_counted_by_hand():
    md = nbformat.v4.new_markdown_cell
    assert slides.cell_lines(md("one line")) == 1
    assert slides.cell_lines(md("a" * 79)) == 2                    # wraps at 78 characters
    assert slides.cell_lines(md("归" * 40)) == 2                    # 40 CJK characters = width 80
    assert slides.cell_lines(md("text\n\n![map](../images/x.png)")) == 2 + slides.IMAGE_LINES
    assert slides.cell_lines(md("$$\nx\n$$")) == 3 + 1              # a display formula adds 1
    code = nbformat.v4.new_code_cell("a = 1\nprint(a)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="1\n2\n3\n"),
        nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"})])
    assert slides.cell_lines(code) == 2 + 3 + slides.IMAGE_LINES
    long = nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="line\n" * 100)])
    assert slides.cell_lines(long) == 1 + slides.TEXT_OUTPUT_LINES


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
    nb = slides.assign_slide_types(nbformat.v4.new_notebook(cells=cells))
    assert [c.metadata["slideshow"]["slide_type"] for c in nb.cells] == [
        "slide", "slide", "skip", "-", "-", "fragment", "subslide", "subslide"]
    assert nb.metadata["rise"] == slides.RISE_SETTINGS
    assert slides.slide_heights(nb) == [1 + 1 + 2, 30]


def test_setup_cell_rules():
    code = nbformat.v4.new_code_cell
    assert slides.is_setup(code("import torch\nTHREADS = 1\ntorch.set_num_threads(THREADS)"))
    assert not slides.is_setup(code("x = 1"))                       # no import
    assert not slides.is_setup(code("import torch\nfor i in range(2): pass"))
    printed = code("import torch", outputs=[nbformat.v4.new_output("stream", name="stdout", text="hi")])
    assert not slides.is_setup(printed)
