"""Speaker notes (docs/speaker_notes/, tools/speaker_notes.py): one block per section of every
lesson, in both languages, timed, and put into the decks."""

import nbformat
import pytest

from tools import speaker_notes as sn
from tools.course import lessons
from tools.export import single_language


@pytest.mark.parametrize("lesson", lessons(), ids=lambda p: p.stem[:2])
def test_every_section_has_notes(lesson):
    assert sn.problems(lesson) == []


GOOD = """# 99_x · a lesson

## 1. One
minutes: 4

### en
- **Say:** the point, 3 numbers and `code` and $x^2$.
- **Ask the room:** why?

### zh
- **讲：** 要点，3 个数字、`code` 和 $x^2$。
- **问听众：** 为什么？

## References
minutes: 1

### en
- **Say:** read them.

### zh
- **讲：** 读一读。
"""


def _lesson(tmp_path, monkeypatch, notes: str, minutes: int = 5):
    """A two-section lesson with the notes file ``notes`` and a course map row for it."""
    nb = nbformat.v4.new_notebook()
    for en, zh in (("# 99 · x", "# 99 · x"), ("## 1. One\n\ntext", "## 1. 一\n\n文字"),
                   ("## References\n\n- a", "## 参考文献\n\n- a")):
        nb.cells += [nbformat.v4.new_markdown_cell(en, metadata={"tags": ["lang-en"]}),
                     nbformat.v4.new_markdown_cell(zh, metadata={"tags": ["lang-zh"]})]
    nb.cells.insert(4, nbformat.v4.new_code_cell("1 + 1"))
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
    for lang, say in (("en", "**Say:** the point"), ("zh", "**讲：** 要点")):
        deck = sn.with_notes(single_language(source, lang), source, lang, sn.load(lesson))
        notes = [c for c in deck.cells if c.metadata.get("slideshow", {}).get("slide_type") == "notes"]
        assert len(notes) == 2
        # right after each section heading, in the deck's language
        for cell in notes:
            before = deck.cells[deck.cells.index(cell) - 1]
            assert before.source.startswith("## ") and f"lang-{lang}" in before.metadata["tags"]
        assert say in notes[0].source and sn.TIME_LABEL[lang].format(4) in notes[0].source


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
    (lambda s: s.replace("### zh\n- **讲：** 读", "#### zh\n- **讲：** 读"), "unexpected heading"),
    (lambda s: s.replace("minutes: 4\n", "minutes: 4\nstray text\n"), "text outside"),
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
