"""Speaker notes (docs/speaker_notes/, tools/speaker_notes.py): one block per section and one
per slide of every lesson, in both languages, timed, and put into the decks."""

import nbformat
import pytest

from tools import speaker_notes as sn
from tools.course import lessons
from tools.export import single_language


@pytest.mark.parametrize("lesson", lessons(), ids=lambda p: p.stem[:2])
def test_every_section_and_every_slide_has_notes(lesson):
    assert sn.problems(lesson) == []


GOOD = """# 99_x · a lesson

### slide t-en: title
#### en
- **Shows:** the title and 2 goals.
- **Say:** what we will do.
#### zh
- **展示：** 标题和 2 个目标。
- **讲：** 我们要做什么。

## 1. One
minutes: 4

### en
- **Say:** the point, 3 numbers and `code` and $x^2$.
- **Ask the room:** why?

### zh
- **讲：** 要点，3 个数字、`code` 和 $x^2$。
- **问听众：** 为什么？

### slide c1: the sum
#### en
- **Shows:** `1 + 1` prints 2.
- **Say:** ask for the result first.
#### zh
- **展示：** `1 + 1` 打印 2。
- **讲：** 先问结果。

## References
minutes: 1

### en
- **Say:** read them.

### zh
- **讲：** 读一读。
"""


def _lesson(tmp_path, monkeypatch, notes: str, minutes: int = 5):
    """A two-section lesson (title slide, a heading slide per section, a code slide) with the
    notes file ``notes`` and a course map row for it."""
    nb = nbformat.v4.new_notebook()
    for key, en, zh in (("t", "# 99 · x", "# 99 · x"), ("one", "## 1. One\n\ntext", "## 1. 一\n\n文字"),
                        ("refs", "## References\n\n- a", "## 参考文献\n\n- a")):
        meta = {"slideshow": {"slide_type": "slide"}}
        nb.cells += [nbformat.v4.new_markdown_cell(en, id=f"{key}-en", metadata={"tags": ["lang-en"], **meta}),
                     nbformat.v4.new_markdown_cell(zh, id=f"{key}-zh", metadata={"tags": ["lang-zh"], **meta})]
    nb.cells.insert(4, nbformat.v4.new_code_cell("1 + 1", id="c1", metadata={"slideshow": {"slide_type": "subslide"}}))
    lesson = tmp_path / "99_x.ipynb"
    nbformat.write(nb, lesson)
    (tmp_path / "notes").mkdir(exist_ok=True)
    (tmp_path / "notes" / "99_x.md").write_text(notes, encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(f"| # | lesson | time |\n|---|---|---|\n| 99 | [x](x) | {minutes} min |\n")
    monkeypatch.setattr(sn, "NOTES", tmp_path / "notes")
    monkeypatch.setattr(sn, "README", readme)
    monkeypatch.setattr(sn, "ROOT", tmp_path)
    monkeypatch.setattr(sn.lesson_minutes, "__defaults__", (readme,))
    return lesson


def test_good_notes_pass_and_go_into_each_deck(tmp_path, monkeypatch):
    lesson = _lesson(tmp_path, monkeypatch, GOOD)
    assert sn.problems(lesson) == []
    source = nbformat.read(lesson, as_version=4)
    for lang, say, shows in (("en", "**Say:** the point", "**Shows:** `1 + 1`"),
                             ("zh", "**讲：** 要点", "**展示：** `1 + 1`")):
        deck = sn.with_notes(single_language(source, lang), source, lang, sn.load(lesson))
        notes = [c for c in deck.cells if c.metadata.get("slideshow", {}).get("slide_type") == "notes"]
        # one notes cell on every slide, right after the slide's first cell, in the deck's language
        assert len(notes) == len(sn.slide_starts(deck, lang)) == 4
        for cell in notes:
            before = deck.cells[deck.cells.index(cell) - 1]
            assert deck.cells.index(before) in sn.slide_starts(deck, lang)
            assert cell.metadata["tags"] == [f"lang-{lang}"]
        title, one, code, refs = (n.source for n in notes)
        assert sn.SHOWS[lang] in title and "2" in title
        assert say in one and sn.TIME_LABEL[lang].format(4) in one
        assert shows in code and sn.SAY[lang] not in one.split(sn.TIME_LABEL[lang].format(4))[0]
        assert sn.TIME_LABEL[lang].format(1) in refs


def test_a_slide_cut_in_pieces_shows_its_notes_on_each(tmp_path, monkeypatch):
    lesson = _lesson(tmp_path, monkeypatch, GOOD)
    source = nbformat.read(lesson, as_version=4)
    piece = nbformat.v4.new_code_cell("", id="c1-1", metadata={"slideshow": {"slide_type": "subslide"}})
    source.cells.insert(5, piece)  # as tools.slides.split_for_slides names a second piece
    for lang in ("en", "zh"):
        deck = sn.with_notes(single_language(source, lang), source, lang, sn.load(lesson))
        after = deck.cells[[c.get("id") for c in deck.cells].index("c1-1") + 1]
        assert after.metadata["slideshow"]["slide_type"] == "notes"
        assert sn.CONTINUED[lang] in after.source and sn.SHOWS[lang] in after.source


@pytest.mark.parametrize("change, message", [
    (lambda s: s.replace("## 1. One", "## 1. Uno"), "differ from the lesson's"),
    (lambda s: s.replace("minutes: 4\n", ""), "needs 'minutes: N'"),
    (lambda s: s.replace("minutes: 4", "minutes: 40"), "needs 'minutes: N'"),
    (lambda s: s.replace("- **Ask the room:** why?\n", ""), "need an **Ask the room:** item"),
    (lambda s: s.replace("- **问听众：** 为什么？\n", ""), "need an **问听众：** item"),
    (lambda s: s.replace("- **Say:** read them.", "- read them."), "need a **Say:** item"),
    (lambda s: s.replace("3 个数字", "4 个数字"), "numbers differ"),
    (lambda s: s.replace("、`code` 和", "和"), "inline code differ"),
    (lambda s: s.replace("$x^2$。", "$x^3$。"), "formulas differ"),
    (lambda s: s.replace("minutes: 1", "minutes: 9"), "add up to 13 min, the course map says 5 min"),
    (lambda s: s.replace("### zh\n- **讲：** 读", "#### zh\n- **讲：** 读"), "belongs to a '### slide <id>"),
    (lambda s: s.replace("### zh\n- **讲：** 读", "### zhh\n- **讲：** 读"), "unexpected heading"),
    (lambda s: s.replace("minutes: 4\n", "minutes: 4\nstray text\n"), "text outside"),
    (lambda s: s.replace("### slide c1: the sum", "### slide c2: the sum"), "slide c1 ('1 + 1') in section '1. One' has no notes"),
    (lambda s: s.replace("### slide c1: the sum", "### slide c2: the sum"), "no slide starts with cell c2"),
    (lambda s: s.replace("### slide t-en: title", "### slide c1: title"), "the slide is in section '1. One'"),
    (lambda s: s.replace("### slide t-en: title", "### slide t-en:"), "needs a label"),
    (lambda s: s.replace("- **Shows:** `1 + 1` prints 2.\n", ""), "need a **Shows:** item"),
    (lambda s: s.replace("- **讲：** 先问结果。\n", ""), "need a **讲：** item"),
    (lambda s: s.replace("打印 2。", "打印 3。"), "numbers differ"),
    (lambda s: s.replace("#### zh\n- **展示：** 标题", "- **展示：** 标题"), "needs '#### zh' notes"),
    (lambda s: s.replace("### slide c1: the sum\n#### en", "### slide c1: the sum\n#### en\n#### en"),
     "a second '#### en'"),
    (lambda s: s + "\n### slide t-en: again\n#### en\n- **Shows:** x\n- **Say:** y\n#### zh\n"
     "- **展示：** x\n- **讲：** y\n", "a second block for this slide"),
    (lambda s: s.replace("### zh\n- **讲：** 要点", "### slide c1: x\n### zh\n- **讲：** 要点"),
     "come before its slide blocks"),
])
def test_broken_notes_are_named(tmp_path, monkeypatch, change, message):
    lesson = _lesson(tmp_path, monkeypatch, change(GOOD))
    found = sn.problems(lesson)
    assert any(message in p for p in found), found


def test_missing_notes_and_mismatched_decks(tmp_path, monkeypatch):
    lesson = _lesson(tmp_path, monkeypatch, GOOD)
    source = nbformat.read(lesson, as_version=4)
    one = sn.load(lesson)[:1]
    with pytest.raises(ValueError, match="differ from the lesson's"):
        sn.with_notes(single_language(source, "en"), source, "en", one)
    (tmp_path / "notes" / "99_x.md").unlink()
    assert sn.problems(lesson) == ["notes/99_x.md is missing"]


