"""The interview questions of every lesson: a pool large enough for the mock interview, each
lesson's questions numbered 1, 2, 3, ... in both languages, and every answer graded as an
interviewer grades it: a model answer, 2 to 4 key points and 1 to 3 red flags (each a quoted
wrong answer shown wrong by a number or a source), the same counts in the English and Chinese
twins. Lesson 12's answers also point to the lesson and section that proves them (and that
section exists), repeat no other lesson's question word for word, and cite the same sections in
both languages."""

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


MARKERS = {"en": ("**Key points**", "**Red flags**"), "zh": ("**要点**", "**危险信号**")}
_QUOTES = {"en": ('"', "“"), "zh": ("“", '"', "「")}
_NUMBERED = {"en": re.compile(r"Question (\d+)\. "), "zh": re.compile(r"问 (\d+)：")}


def rubric(back: str, language: str) -> tuple[str, list[str], list[str]]:
    """``(model answer, key points, red flags)`` of an answer written as the interview format
    asks: the model answer, then the key-points marker alone on its line followed by 2 to 4
    ``- `` bullets, then the red-flags marker followed by 1 to 3 ``- `` bullets, each a quoted
    wrong answer with the number (or the year of the source) that shows it wrong. Raises
    ``ValueError`` naming what is missing."""
    key, red = MARKERS[language]
    lines = back.strip().splitlines()
    stripped = [line.strip() for line in lines]
    if stripped.count(key) != 1 or stripped.count(red) != 1:
        raise ValueError(f"needs the lines {key!r} and {red!r}, once each")
    k, r = stripped.index(key), stripped.index(red)
    if not k < r:
        raise ValueError(f"{key!r} must come before {red!r}")
    answer = "\n".join(lines[:k]).strip()
    if not answer:
        raise ValueError("no model answer before the key points")

    def bullets(block: list[str], what: str) -> list[str]:
        found = []
        for line in block:
            if not line.strip():
                continue
            if not line.startswith("- "):
                raise ValueError(f"{what}: {line[:60]!r} is not a '- ' bullet")
            found.append(line[2:].strip())
        return found

    points, flags = bullets(lines[k + 1:r], key), bullets(lines[r + 1:], red)
    if not 2 <= len(points) <= 4:
        raise ValueError(f"{len(points)} key points, 2 to 4 needed")
    if not 1 <= len(flags) <= 3:
        raise ValueError(f"{len(flags)} red flags, 1 to 3 needed")
    for flag in flags:
        if not flag.startswith(_QUOTES[language]):
            raise ValueError(f"the red flag {flag[:60]!r} does not quote the wrong answer")
        # a number a lesson prints, or a cited source: a year, a URL or a file in a repository
        if not re.search(r"\d|https?://|`[\w./-]+/[\w.-]+`", flag):
            raise ValueError(f"the red flag {flag[:60]!r} gives no number or source")
    return answer, points, flags


def test_the_pool_is_large_enough_and_lesson_12_asks_its_own_questions(cards):
    en = [c for c in cards if c.language == "en"]
    assert len(en) == len([c for c in cards if c.language == "zh"])
    assert len(en) >= 100, f"{len(en)} questions in the whole course"
    assert len({c.lesson for c in en}) >= 14
    assert len([c for c in en if c.lesson == "12"]) >= 15


@pytest.mark.parametrize("lesson", lessons(), ids=lambda p: p.stem[:2])
def test_every_question_has_a_model_answer_key_points_and_red_flags(lesson):
    mine = flashcards.cards_from_notebook(lesson)
    en = [c for c in mine if c.language == "en"]
    zh = [c for c in mine if c.language == "zh"]
    assert en, f"{lesson.name}: no interview question"
    assert len(en) == len(zh), f"{lesson.name}: {len(en)} English and {len(zh)} Chinese questions"
    for language, twins in (("en", en), ("zh", zh)):
        numbers = [int(m[1]) if (m := _NUMBERED[language].match(c.front)) else None for c in twins]
        assert numbers == list(range(1, len(twins) + 1)), f"{lesson.name} ({language}): {numbers}"
    problems = []
    for e, z in zip(en, zh):
        try:
            _, points_en, flags_en = rubric(e.back, "en")
            _, points_zh, flags_zh = rubric(z.back, "zh")
        except ValueError as error:
            problems.append(f"{e.front[:50]}: {error}")
            continue
        if (len(points_en), len(flags_en)) != (len(points_zh), len(flags_zh)):
            problems.append(f"{e.front[:50]}: {len(points_en)}/{len(flags_en)} key points/red flags "
                            f"in English, {len(points_zh)}/{len(flags_zh)} in Chinese")
    assert not problems, f"{lesson.name}:\n" + "\n".join(problems)


def test_the_rubric_parser_can_fail():
    good = ("A model answer.\n\n**Key points**\n- one\n- two\n\n**Red flags**\n"
            "- \"a wrong answer\": section 3 prints 0.92.")
    assert rubric(good, "en") == ("A model answer.", ["one", "two"],
                                  ["\"a wrong answer\": section 3 prints 0.92."])
    for bad in (good.replace("- two\n", ""),                          # one key point
                good.replace("**Red flags**", "**Red flag**"),         # marker misspelt
                good.replace("\"a wrong answer\"", "a wrong answer"),  # not quoted
                good.replace("section 3 prints 0.92", "it is wrong"),  # no number, no source
                good.replace("A model answer.\n\n", ""),               # no model answer
                good.replace("- one", "one")):                          # not a bullet
        with pytest.raises(ValueError):
            rubric(bad, "en")
    zh = "答案。\n\n**要点**\n- 一\n- 二\n\n**危险信号**\n- “错误的说法”：第 3 节打印出 0.92。"
    assert len(rubric(zh, "zh")[2]) == 1
    with pytest.raises(ValueError):
        rubric(zh, "en")


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
    new = [c for c in cards if c.lesson == "12"]
    assert new
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
