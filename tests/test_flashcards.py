"""tools.flashcards: question cells -> Anki CSV (front, back, tags), one file per language."""

import csv
import json

import pytest

from tools import flashcards


def _notebook(tmp_path, cells, name="07_demo.ipynb"):
    nb = {"cells": [{"cell_type": t, "metadata": {"tags": tags}, "source": src}
                    for t, tags, src in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_cards_and_csv_rows_written_by_hand(tmp_path):
    path = _notebook(tmp_path, [
        ("markdown", ["lang-en"], "## Interview questions"),
        ("markdown", ["lang-en", "question"],
         "**Question 1. Is $a < b$?**\n\nYes: `a` is $1$ and\n$$b = 2.$$"),
        ("markdown", ["lang-zh", "question"], "**问 1：$a < b$ 吗？**\n\n是的。"),
        ("code", ["question"], "print('not a card')"),
    ])
    cards = flashcards.cards_from_notebook(path)
    assert cards == [
        flashcards.Card("07", "en", "Question 1. Is $a < b$?", "Yes: `a` is $1$ and\n$$b = 2.$$"),
        flashcards.Card("07", "zh", "问 1：$a < b$ 吗？", "是的。"),
    ]
    out = tmp_path / "out" / "en.csv"
    assert flashcards.write_csv(cards, "en", out) == 1
    with out.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["Question 1. Is \\(a &lt; b\\)?",
                     "Yes: <code>a</code> is \\(1\\) and<br>\\[b = 2.\\]",
                     "normalization-course::07"]]


def test_malformed_question_cells_are_named(tmp_path):
    no_lang = _notebook(tmp_path, [("markdown", ["question"], "**Q?**\n\nA.")], "01_a.ipynb")
    with pytest.raises(ValueError, match="01_a.ipynb, cell 0: .*lang-en"):
        flashcards.cards_from_notebook(no_lang)
    no_bold = _notebook(tmp_path, [("markdown", ["question", "lang-en"], "Q? A.")], "01_b.ipynb")
    with pytest.raises(ValueError, match="bold question"):
        flashcards.cards_from_notebook(no_bold)
    with pytest.raises(ValueError, match="language"):
        flashcards.write_csv([], "fr", tmp_path / "x.csv")


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


def test_command_writes_both_languages(tmp_path, capsys):
    flashcards.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    for lang in ("en", "zh"):
        with (tmp_path / f"flashcards_{lang}.csv").open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        assert rows and all(len(r) == 3 and r[0] and r[1] for r in rows)
        assert f"{len(rows)} cards" in out
        assert "$" not in "".join(r[0] + r[1] for r in rows)  # all math rewritten for MathJax
