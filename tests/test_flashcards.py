"""tools.flashcards: question cells -> Anki CSV files, one per language, read back the way
Anki's text importer reads them (header lines first, then rows)."""

import csv
import dataclasses
import hashlib
import io
import json
import re

import pytest

from tools import flashcards

ANKI_SEPARATORS = {"comma": ",", "semicolon": ";", "tab": "\t", "space": " ", "pipe": "|",
                   "colon": ":"}


def _notebook(folder, cells, name="07_demo.ipynb"):
    nb = {"cells": [{"cell_type": t, "id": f"c{name[:2]}{i:03d}", "metadata": {"tags": tags},
                     "source": src}
                    for i, (t, tags, src) in enumerate(cells)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _en(src):
    return ("markdown", ["lang-en", "question"], src)


def _zh(src):
    return ("markdown", ["lang-zh", "question"], src)


def read_like_anki(path):
    """Parse a text file as Anki's importer does: the lines at the top that start with ``#``
    are meta lines (``#key:value``, key case-insensitive), the rest are records split by the
    declared separator; the guid and tags columns (1-based) are set apart and the remaining
    columns fill the note's fields in order. Returns (settings, notes)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    settings, start = {}, 0
    while start < len(lines) and lines[start].startswith("#"):
        key, colon, value = lines[start][1:].rstrip("\r\n").partition(":")
        if colon:
            settings[key.strip().lower()] = value
        start += 1
    separator = settings["separator"]
    separator = ANKI_SEPARATORS.get(separator.lower(), separator)
    assert len(separator) == 1
    records = [r for r in csv.reader(io.StringIO("".join(lines[start:])), delimiter=separator)
               if r]
    guid, tags = int(settings["guid column"]), int(settings["tags column"])
    notes = [{"guid": r[guid - 1], "tags": r[tags - 1].split(), "columns": len(r),
              "fields": [v for i, v in enumerate(r, 1) if i not in (guid, tags)]}
             for r in records]
    return settings, notes


def _guid(lesson, english_question, lang):
    # the documented id: lesson + first 10 hex digits of SHA-1 of the unnumbered question
    return (f"normalization-course-{lesson}-"
            f"{hashlib.sha1(english_question.encode()).hexdigest()[:10]}-{lang}")


LESSON_01 = [
    ("markdown", ["lang-en"], "## Interview questions"),
    _en("**Question 1. Is $a < b$ for the *next* layer?**\n\n"
        "Yes: `a_b` is $1$ and\n$$b = 2.$$ See section 4 and [the paper](https://x.org/p?a=1&b=2)."),
    _zh("**问 1：对*下*一层 $a < b$ 吗？**\n\n是的：`a_b` 是 $1$，而\n$$b = 2.$$ 见第 4 节和"
        "[论文](https://x.org/p?a=1&b=2)。"),
    _en("**Question 2. Why _batch_ statistics?**\n\n"
        "Because (sections 7 and 8; Ba et al. 2016, section 3.1; lesson 05, section 2)."),
    _zh("**问 2：为什么用批统计量？**\n\n因为（第 7 节和第 8 节；Ba 等人 2016，第 3.1 节；"
        "第 05 课第 2 节）。"),
    ("code", ["question"], "print('not a card')"),
]
LESSON_12 = [
    _en("**Question 1. Why _batch_ statistics?**\n\nA longer answer (section 2)."),
    _zh("**问 1：为什么要用批统计量？**\n\n更长的答案（第 2 节）。"),
    _en("**Question 2. What does **eps** do?**\n\nIt keeps $\\sigma^2 + \\epsilon > 0$ "
        "(lesson 01, section 2)."),
    _zh("**问 2：**eps** 起什么作用？**\n\n它使 $\\sigma^2 + \\epsilon > 0$（第 01 课第 2 节）。"),
]


def test_cards_from_notebook_written_by_hand(tmp_path):
    cards = flashcards.cards_from_notebook(_notebook(tmp_path, LESSON_01[:3], "01_a.ipynb"))
    assert [c.cell_id for c in cards] == ["c01001", "c01002"]
    cards = [dataclasses.replace(c, cell_id="") for c in cards]
    assert cards == [
        flashcards.Card("01", "en", "Question 1. Is $a < b$ for the *next* layer?",
                        "Yes: `a_b` is $1$ and\n$$b = 2.$$ See section 4 and "
                        "[the paper](https://x.org/p?a=1&b=2)."),
        flashcards.Card("01", "zh", "问 1：对*下*一层 $a < b$ 吗？",
                        "是的：`a_b` 是 $1$，而\n$$b = 2.$$ 见第 4 节和[论文](https://x.org/p?a=1&b=2)。"),
    ]


def test_csv_as_anki_reads_it(tmp_path):
    nbs = [_notebook(tmp_path / "nb", LESSON_01, "01_a.ipynb"),
           _notebook(tmp_path / "nb", LESSON_12, "12_interview.ipynb")]
    cards = flashcards.collect(nbs)
    assert len(cards) == 8
    written = {}
    for lang in ("en", "zh"):
        written[lang] = flashcards.write_csv(cards, lang, tmp_path / f"{lang}.csv", survey=None)
        first = (tmp_path / f"{lang}.csv").read_text(encoding="utf-8").splitlines()[:4]
        assert first == ["#separator:Comma", "#html:true", "#guid column:1", "#tags column:4"]
    assert written == {"en": 3, "zh": 3}  # lesson 12's question 1 repeats lesson 01's
    # (without a survey: course order, every note tagged asked::00)

    settings, en = read_like_anki(tmp_path / "en.csv")
    assert settings["html"] == "true"
    link = '<a href="https://x.org/p?a=1&amp;b=2">the paper</a>'
    assert en == [
        {"guid": _guid("01", "Is $a < b$ for the *next* layer?", "en"),
         "tags": ["normalization-course::01", "normalization-course::asked::00"], "columns": 4,
         "fields": ["Is \\(a &lt; b\\) for the <i>next</i> layer?",
                    "Yes: <code>a_b</code> is \\(1\\) and<br>\\[b = 2.\\] See lesson 01, §4 and "
                    + link + "."]},
        {"guid": _guid("01", "Why _batch_ statistics?", "en"),
         "tags": ["normalization-course::01", "normalization-course::12",
                  "normalization-course::asked::00"], "columns": 4,
         "fields": ["Why <i>batch</i> statistics?",
                    "Because (lesson 01, §§7 and 8; Ba et al. 2016, section 3.1; "
                    "lesson 05, section 2)."]},
        {"guid": _guid("12", "What does **eps** do?", "en"),
         "tags": ["normalization-course::12", "normalization-course::asked::00"], "columns": 4,
         "fields": ["What does <b>eps</b> do?",
                    "It keeps \\(\\sigma^2 + \\epsilon &gt; 0\\) (lesson 01, section 2)."]},
    ]
    _, zh = read_like_anki(tmp_path / "zh.csv")
    assert [n["guid"] for n in zh] == [n["guid"][:-2] + "zh" for n in en]
    assert [n["tags"] for n in zh] == [n["tags"] for n in en]
    assert [n["fields"] for n in zh] == [
        ["对<i>下</i>一层 \\(a &lt; b\\) 吗？",
         "是的：<code>a_b</code> 是 \\(1\\)，而<br>\\[b = 2.\\] 见第 01 课第 4 节和"
         '<a href="https://x.org/p?a=1&amp;b=2">论文</a>。'],
        ["为什么用批统计量？",
         "因为（第 01 课第 7 节和第 8 节；Ba 等人 2016，第 3.1 节；第 05 课第 2 节）。"],
        ["<b>eps</b> 起什么作用？",
         "它使 \\(\\sigma^2 + \\epsilon &gt; 0\\)（第 01 课第 2 节）。"],
    ]


def test_most_asked_first_and_tagged_with_the_frequency(tmp_path):
    """With a survey, the rows come most asked first (ties in course order), each tagged
    with the number of collections asking it; the frequency is that of the English cell."""
    nbs = [_notebook(tmp_path / "nb", LESSON_01, "01_a.ipynb"),
           _notebook(tmp_path / "nb", LESSON_12, "12_interview.ipynb")]
    cards = flashcards.collect(nbs)
    en = [c for c in cards if c.language == "en"]
    survey = {"sources": {s: {} for s in ("a", "b", "c")},
              "asked": {"eps": {"question": "?", "sources": ["a", "b"]},
                        "batch": {"question": "?", "sources": ["b", "c"]},
                        "tiny": {"question": "?", "sources": ["c"]}},
              "questions": {f"12:{en[3].cell_id}": {"asked": ["eps", "batch"]},  # 3 sources
                            f"01:{en[1].cell_id}": {"asked": ["tiny"]}}}      # 1 source
    rows = [n for n in flashcards.notes(cards, survey) if n.language == "en"]
    assert [(n.front, n.frequency) for n in rows] == [
        ("What does **eps** do?", 3), ("Why _batch_ statistics?", 1),
        ("Is $a < b$ for the *next* layer?", 0)]
    assert rows[0].tags == "normalization-course::12 normalization-course::asked::03"
    zh = [n for n in flashcards.notes(cards, survey) if n.language == "zh"]
    assert [n.guid[:-3] for n in zh] == [n.guid[:-3] for n in rows]
    path = tmp_path / "en.csv"
    flashcards.write_csv(cards, "en", path, survey=survey)
    _, read = read_like_anki(path)
    assert [n["tags"][-1] for n in read] == ["normalization-course::asked::03",
                                             "normalization-course::asked::01",
                                             "normalization-course::asked::00"]
    assert "<b>Key points</b><br>• one<br>• two" in flashcards.to_anki_html(
        "A.\n\n**Key points**\n- one\n- two")


def test_ids_survive_renumbering_and_follow_the_question(tmp_path):
    def guids(cells):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        return [n.guid for n in flashcards.notes(
            flashcards.collect([_notebook(folder, cells, "01_a.ipynb")]))]

    before = guids(LESSON_01)
    renumbered = [(t, tags, src.replace("Question 1.", "Question 7.").replace("问 1：", "问 7："))
                  for t, tags, src in LESSON_01]
    assert guids(renumbered) == before
    reworded = [(t, tags, src.replace("for the *next* layer", "for the *previous* layer"))
                for t, tags, src in LESSON_01]
    changed = guids(reworded)
    # rows: English 1, 2, then Chinese 1, 2; the question's id stem is shared by both
    assert changed[0] != before[0] and changed[2] != before[2]
    assert changed[0][:-3] == changed[2][:-3]
    assert (changed[1], changed[3]) == (before[1], before[3])
    assert len(set(before)) == len(before) == 4


def test_a_chinese_repeat_alone_merges_the_pair(tmp_path):
    later = [_en("**Question 1. Why do we use batch statistics?**\n\nB."),
             _zh("**问 3：为什么用批统计量？**\n\n乙。")]
    cards = flashcards.collect([_notebook(tmp_path, LESSON_01, "01_a.ipynb"),
                                _notebook(tmp_path, later, "12_b.ipynb")])
    rows = flashcards.notes(cards)
    assert [(n.language, n.lessons) for n in rows] == [
        ("en", ("01",)), ("en", ("01", "12")), ("zh", ("01",)), ("zh", ("01", "12"))]


def test_malformed_question_cells_are_named(tmp_path):
    no_lang = _notebook(tmp_path, [("markdown", ["question"], "**Q?**\n\nA.")], "01_a.ipynb")
    with pytest.raises(ValueError, match="01_a.ipynb, cell 0: .*lang-en"):
        flashcards.cards_from_notebook(no_lang)
    no_bold = _notebook(tmp_path, [("markdown", ["question", "lang-en"], "Q? A.")], "01_b.ipynb")
    with pytest.raises(ValueError, match="bold question"):
        flashcards.cards_from_notebook(no_bold)
    with pytest.raises(ValueError, match="language"):
        flashcards.write_csv([], "fr", tmp_path / "x.csv")
    unpaired = _notebook(tmp_path, LESSON_01[:4], "01_c.ipynb")
    with pytest.raises(ValueError, match="lesson 01: .*pair"):
        flashcards.notes(flashcards.cards_from_notebook(unpaired))


def test_every_lesson_has_matching_question_pairs():
    cards = flashcards.collect()
    lessons = sorted({c.lesson for c in cards})
    assert lessons, "no question cells found"
    for lesson in lessons:
        en = [c for c in cards if c.lesson == lesson and c.language == "en"]
        zh = [c for c in cards if c.lesson == lesson and c.language == "zh"]
        assert len(en) == len(zh) >= 4, lesson
        assert all(c.front.startswith("Question ") for c in en), lesson
        assert all(c.front.startswith("问 ") for c in zh), lesson


def _outside_math(field):
    return re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]", "", field, flags=re.S)


def test_command_writes_both_languages_importable_by_anki(tmp_path, capsys):
    flashcards.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    cards = flashcards.collect()
    guids = {}
    for lang in ("en", "zh"):
        settings, notes = read_like_anki(tmp_path / f"flashcards_{lang}.csv")
        assert settings["html"] == "true" and notes
        assert f"{len(notes)} cards" in out
        width = max(int(settings["guid column"]), int(settings["tags column"]), 4)
        assert all(n["columns"] == width for n in notes)
        assert all(len(n["fields"]) == 2 and all(n["fields"]) for n in notes)
        guids[lang] = [n["guid"] for n in notes]
        assert len(set(guids[lang])) == len(notes)
        fronts = [n["fields"][0] for n in notes]
        assert len(set(fronts)) == len(fronts)
        assert not any(f.startswith(("Question ", "问 ")) for f in fronts)
        for n in notes:
            assert n["tags"] and all(t.startswith("normalization-course::") for t in n["tags"])
            for field in n["fields"]:
                plain = _outside_math(field)
                assert "$" not in plain, field
                assert not re.search(r"(?<!\*)\*[^\s*][^*]*\*", plain), field  # italics left
                assert "**" not in plain and "`" not in plain, field
        # every question of the notebooks is a card, or merged into an earlier one
        questions = {flashcards.strip_number(c.front) for c in cards if c.language == lang}
        kept = {n.front for n in flashcards.notes(cards) if n.language == lang}
        # (the course asks each question once: nothing is left to merge today)
        assert kept <= questions and len(notes) <= sum(c.language == lang for c in cards)
    assert not set(guids["en"]) & set(guids["zh"])
    assert [g[:-3] for g in guids["en"]] == [g[:-3] for g in guids["zh"]]
    text = (tmp_path / "flashcards_en.csv").read_text(encoding="utf-8")
    assert not re.search(r"(?<!lesson \d\d, )(?<!\d{4}, )\b[Ss]ection \d+\)", text)


def test_every_reference_in_the_written_cards_names_its_lesson(tmp_path):
    """In both written files, a section reference names a lesson (or a paper): "lesson 02, §4",
    "第 02 课第 4 节", "Wu & He 2018, section 3.1"; none is left bare, in any phrasing."""
    flashcards.main(["--out", str(tmp_path)])
    _, en = read_like_anki(tmp_path / "flashcards_en.csv")
    _, zh = read_like_anki(tmp_path / "flashcards_zh.csv")
    named_en = re.compile(r"(?:\d{4}[a-z]?|et al\.|[Ll]esson \d\d), $")
    named_zh = re.compile(r"(?:课|\d{4}[a-z]?\s*[，,]|节\s*(?:和|、|及|与|到|至))\s*$")
    bare = []
    for note in en:
        for field in note["fields"]:
            for m in re.finditer(r"\b[Ss]ections? \d", field):
                if not named_en.search(field[:m.start()]):
                    bare.append(field[max(0, m.start() - 40):m.end() + 10])
    for note in zh:
        for field in note["fields"]:
            for m in re.finditer(r"第\s*\d+(?:\.\d+)*\s*节", field):
                if not named_zh.search(field[:m.start()]):
                    bare.append(field[max(0, m.start() - 40):m.end()])
    assert not bare, bare[:5]
    # lesson 12's questions, old and new, are all there, once
    twelve = [n for n in en if n["guid"].startswith("normalization-course-12-")]
    # lesson 12 keeps only the questions no other lesson asks
    assert len(twelve) >= 15 and len({n["fields"][0] for n in en}) == len(en)
