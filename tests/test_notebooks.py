"""Conventions every committed notebook keeps (see the course guide):

* executed top to bottom: every code cell has an execution count, counting 1, 2, 3, ...;
* no warnings or other stderr output, except in cells tagged ``raises-exception``;
* every markdown cell is prose in one language, tagged ``lang-en`` or ``lang-zh``, and each
  English cell is followed by its Chinese twin;
* twins carry the same formulas, the same numbers and the same images;
* figures embedded in markdown exist in ``images/``.

These checks read the committed files; nbval (``--nbval``) re-runs the cells and compares
their outputs.
"""

import json
import pathlib
import re
from collections import Counter

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb"))
LESSON = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?%?(?![\w])")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)|<img [^>]*src=\"([^\"]+)\"")
_CODE = re.compile(r"`[^`]*`")
_LINK_TARGET = re.compile(r"\]\(([^)]*)\)")


def formulas(md: str) -> Counter:
    """The LaTeX formulas of a markdown cell, whitespace-normalised."""
    return Counter(re.sub(r"\s+", "", a or b) for a, b in _MATH.findall(md))


def numbers(md: str) -> Counter:
    """Numbers written in the prose (outside formulas, inline code and link targets)."""
    text = _LINK_TARGET.sub("]", _CODE.sub(" ", _MATH.sub(" ", md)))
    return Counter(n.replace("−", "-").replace(",", "") for n in _NUMBER.findall(text))


def images(md: str) -> Counter:
    return Counter(a or b for a, b in _IMAGE.findall(md))


def code(md: str) -> Counter:
    return Counter(_CODE.findall(md))


def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "00_introduction.ipynb").exists()
    assert all(LESSON.match(p.name) for p in NOTEBOOKS), [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom(path):
    nb = _load(path)
    counts = [c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"
              and not {"skip-execution", "nbval-skip"} & set(_tags(c))]
    assert counts, "a lesson without code cells"
    assert None not in counts, "unexecuted code cells: re-execute the notebook (make execute)"
    assert counts == list(range(1, len(counts) + 1)), (
        f"execution counts {counts}: run the notebook top to bottom in a fresh kernel")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stderr_or_errors(path):
    for i, c in enumerate(_load(path)["cells"]):
        if c["cell_type"] != "code" or "raises-exception" in _tags(c):
            continue
        for o in c.get("outputs", []):
            assert not (o.get("output_type") == "stream" and o.get("name") == "stderr"), (
                f"cell {i} writes to stderr: {''.join(o.get('text', ''))[:200]!r}")
            assert o.get("output_type") != "error", f"cell {i} raised {o.get('ename')}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_error_cells_really_raise(path):
    """A cell tagged raises-exception demonstrates a real error, committed with its output."""
    for i, c in enumerate(_load(path)["cells"]):
        if c["cell_type"] == "code" and "raises-exception" in _tags(c):
            assert any(o.get("output_type") == "error" for o in c.get("outputs", [])), (
                f"cell {i} is tagged raises-exception but its committed output has no error")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_bilingual_twins(path):
    cells = _load(path)["cells"]
    md = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    assert md, "no prose"
    for i, c in md:
        langs = {"lang-en", "lang-zh"} & set(_tags(c))
        assert len(langs) == 1, f"markdown cell {i} must be tagged lang-en or lang-zh"
        if "lang-en" in langs:
            assert i + 1 < len(cells) and "lang-zh" in _tags(cells[i + 1]), (
                f"markdown cell {i} (lang-en) must be followed by its lang-zh twin")
            en, zh = _src(c), _src(cells[i + 1])
            where = f"cells {i}/{i + 1} ({en.strip().splitlines()[0][:60]!r})"
            assert formulas(en) == formulas(zh), f"{where}: the twins' formulas differ"
            assert numbers(en) == numbers(zh), (
                f"{where}: the twins' numbers differ: {numbers(en) - numbers(zh)} vs "
                f"{numbers(zh) - numbers(en)}")
            assert images(en) == images(zh), f"{where}: the twins' images differ"
            assert code(en) == code(zh), f"{where}: the twins' inline code differs"
            assert re.search(r"[\u4e00-\u9fff]", zh), f"{where}: the lang-zh twin has no Chinese"
        else:
            assert i > 0 and "lang-en" in _tags(cells[i - 1]), (
                f"markdown cell {i} (lang-zh) must follow its lang-en twin")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_embedded_images_exist(path):
    for c in _load(path)["cells"]:
        for ref in images(_src(c)):
            if not ref.startswith(("http:", "https:", "attachment:", "data:")):
                assert (path.parent / ref).resolve().is_file(), f"missing image {ref}"


def test_twin_checks_can_fail():
    """The extraction the twin test relies on sees formulas, numbers, images and code."""
    en = "The mean is $\\mu = 2.5$, then 1.25 and −1.3416 ![map](../images/a.png) `x.mean(-1)`"
    zh = "均值为 $\\mu=2.5$，然后是 1.25 和 -1.3416 ![图](../images/a.png) `x.mean(-1)`"
    assert formulas(en) == formulas(zh) and numbers(en) == numbers(zh)
    assert images(en) == images(zh) and code(en) == code(zh)
    assert formulas(en) != formulas(zh.replace("2.5", "2.6"))
    assert numbers(en) != numbers(zh.replace("1.25", "1.5"))
    assert images(en) != images(zh.replace("a.png", "b.png"))
