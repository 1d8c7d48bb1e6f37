"""Lesson 12's interview questions: at least 70 bilingual pairs, each answer pointing to the
lesson and section that proves it (and that section exists in that lesson's notebook), no
question copied word for word from another lesson, and the same references in both languages."""

import json
import re

import pytest

from tools import flashcards
from tools.course import lessons

LESSON_12 = next(p for p in lessons() if p.name.startswith("12_"))
_EN_REF = re.compile(r"[Ll]esson (\d\d), (§§?\d+(?:\.\d+)?(?:(?:, | and | to |–)§?\d+(?:\.\d+)?)*)")
_ZH_REF = re.compile(r"第 (\d\d) 课((?:(?:和|、|及|与)?第 [\d.]+ ?(?:到|至)? ?[\d.]* ?节)+)")
_NUM = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)")


def _sections(lesson: str) -> set[str]:
    """The section numbers of a lesson: "## 4. ..." gives "4", "### 4.3 ..." gives "4.3"."""
    path = next(p for p in lessons() if p.name.startswith(f"{lesson}_"))
    found = set()
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown" and "lang-en" in cell["metadata"].get("tags", []):
            for line in "".join(cell["source"]).splitlines():
                m = re.match(r"^#{2,3}\s+(\d+(?:\.\d+)*)\.?\s", line)
                if m:
                    found.add(m[1])
    return found


def _references(text: str, language: str) -> list[tuple[str, str]]:
    """(lesson, section) pairs named in an answer."""
    refs = []
    pattern = _EN_REF if language == "en" else _ZH_REF
    for m in pattern.finditer(text):
        for number in _NUM.findall(m[2]):
            refs.append((m[1], number))
    return refs


@pytest.fixture(scope="module")
def cards():
    return flashcards.collect()


def test_lesson_12_has_at_least_70_pairs(cards):
    mine = [c for c in cards if c.lesson == "12"]
    en = [c for c in mine if c.language == "en"]
    assert len(en) == len([c for c in mine if c.language == "zh"]) >= 70
    numbers = [int(re.match(r"Question (\d+)\.", c.front)[1]) for c in en]
    assert numbers == list(range(1, len(en) + 1))


def test_every_answer_names_an_existing_lesson_section(cards):
    sections = {}
    for card in (c for c in cards if c.lesson == "12"):
        refs = _references(card.back, card.language)
        assert refs, f"{card.front!r}: no 'lesson NN, §N' reference"
        for lesson, number in refs:
            if lesson not in sections:
                sections[lesson] = _sections(lesson)
            assert number in sections[lesson], (
                f"{card.front!r}: lesson {lesson} has no section {number}")


def test_both_languages_cite_the_same_sections(cards):
    mine = [c for c in cards if c.lesson == "12"]
    en = [c for c in mine if c.language == "en"]
    zh = [c for c in mine if c.language == "zh"]
    for e, z in zip(en, zh):
        assert sorted(_references(e.back, "en")) == sorted(_references(z.back, "zh")), e.front


def test_new_questions_repeat_no_other_lesson(cards):
    others = {(c.language, flashcards.strip_number(c.front)) for c in cards if c.lesson != "12"}
    new = [c for c in cards if c.lesson == "12"
           and int(re.search(r"\d+", c.front)[0]) > 46]
    assert len(new) >= 2 * 24
    repeated = [c.front for c in new if (c.language, flashcards.strip_number(c.front)) in others]
    assert not repeated


def test_the_reference_parser_can_fail():
    assert _references("(lesson 10, §§2 and 3; lesson 09, §6.1)", "en") == [
        ("10", "2"), ("10", "3"), ("09", "6.1")]
    assert _references("（第 10 课第 2 节和第 3 节；第 09 课第 6.1 节）", "zh") == [
        ("10", "2"), ("10", "3"), ("09", "6.1")]
    assert "6.1" in _sections("09") and "99" not in _sections("09")


def test_every_drill_is_an_empty_stub_in_the_notebook_and_no_solution_is_shown():
    from helpers import drills

    cells = json.loads(LESSON_12.read_text(encoding="utf-8"))["cells"]
    code = [("".join(c["source"]), c) for c in cells if c["cell_type"] == "code"]
    for name in drills.DRILLS:
        stubs = [(s, c) for s, c in code
                 if re.search(rf'drills\.grade\("{name}", (?:my_|My)\w+\)', s)]
        assert len(stubs) == 1, name
        source, cell = stubs[0]
        assert "raise NotImplementedError" in source
        shown = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                        for o in cell["outputs"])
        assert "not written yet" in shown, name
    for source, _ in code:  # a solution is printed only on request: never called in the notebook
        for line in source.splitlines():
            assert not re.search(r"drills\.(show_)?solution\(", line.split("#")[0]), line
