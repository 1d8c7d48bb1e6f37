"""Every reference from one lesson to a section of another points at a section that exists.

Lessons cite each other as "lesson 09, §2 and §6.1", "lesson 05, §§4 and 5", "lesson 01,
section 7", and in Chinese "第 09 课第 2 节和第 6.1 节". A section number N (or N.M) exists when the
target lesson has a markdown heading "## N." or "### N.M ..." (in either language). Renumbering
a lesson's sections without updating the lessons that cite it fails here, with the citing cell.
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)[.\s]", re.M)
NUMBER = r"\d+(?:\.\d+)*(?:\s?\([a-z]\))?"
# "lesson 09, §2 and §6.1", "lesson 05, §§4 and 5", "lesson 03, sections 2 and 3"
EN = re.compile(r"lesson (\d\d),? ((?:§§?|sections? )\s?" + NUMBER
                + r"(?:(?:,\s?| and | or |–)(?:§\s?)?" + NUMBER + r")*)")
# "第 09 课第 2 节和第 6.1 节", "第 05 课第 4 节与第 5 节"
ZH = re.compile(r"第 ?(\d\d) ?课((?:第 ?\d+(?:\.\d+)* ?节(?:\s?\([a-z]\))?[、和与及或，]?)+)")
SECTION = re.compile(r"(?<![\d.(])(\d+(?:\.\d+)*)(?![\d)])")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _markdown(path):
    for cell in _cells(path):
        if cell["cell_type"] == "markdown":
            yield cell.get("id", "?"), "".join(cell["source"])


def _sections(path) -> set[str]:
    found = set()
    for _, text in _markdown(path):
        found.update(HEADING.findall(text))
    return found


SECTIONS = {path.name[:2]: _sections(path) for path in NOTEBOOKS}


def references(text: str):
    """(target lesson, section) for every cross-reference in ``text``."""
    for pattern in (EN, ZH):
        for match in pattern.finditer(text):
            for section in SECTION.findall(match.group(2)):
                yield match.group(1), section


def test_reference_parser_reads_every_form():
    text = ("(lesson 09, §2 and §6.1; lesson 05, §§4 and 5; lesson 03, sections 2 and 3; "
            "lesson 01, section 7) 第 09 课第 2 节和第 6.1 节；第 05 课第 4 节与第 5 节")
    assert list(references(text)) == [
        ("09", "2"), ("09", "6.1"), ("05", "4"), ("05", "5"), ("03", "2"), ("03", "3"),
        ("01", "7"), ("09", "2"), ("09", "6.1"), ("05", "4"), ("05", "5")]


def test_a_missing_section_is_found():
    assert ("09", "9.9") in set(references("see lesson 09, §9.9"))
    assert "9.9" not in SECTIONS.get("09", set())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cross_references_point_at_existing_sections(path):
    dangling = []
    for cell_id, text in _markdown(path):
        for lesson, section in references(text):
            if lesson in SECTIONS and section not in SECTIONS[lesson]:
                dangling.append(f"cell {cell_id}: lesson {lesson} has no section {section}")
    assert not dangling, "\n".join(dangling)
