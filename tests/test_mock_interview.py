"""helpers.mock_interview: the questions come from the notebooks' question cells (checked
against tools.flashcards' own parser), the selection is seeded, spread over lessons and free
of repeats, and the tally counts what was graded, with a clock the test controls."""

import json

import pytest

from helpers import mock_interview as M
from tools import flashcards


def test_questions_are_the_question_cells_without_repeats():
    questions = M.load_questions()
    # the flashcards' rows (their own parser and de-duplication), before the markdown rewrite
    notes = {lang: [n for n in flashcards.notes(flashcards.collect()) if n.language == lang]
             for lang in ("en", "zh")}
    fronts = {n.guid[:-3]: n for n in notes["en"]}
    assert len(questions) == len(notes["en"]) == len(notes["zh"])
    assert len({q.front_en for q in questions}) == len(questions)
    by_front = {flashcards.qualify_references(q.front_en, q.lesson, "en"): q for q in questions}
    for note in fronts.values():
        q = by_front[note.front]
        assert q.lesson == note.lessons[0]
    assert all(q.back_en and q.back_zh and q.front_zh for q in questions)
    assert not any(q.front_en.startswith("Question ") or q.front_zh.startswith("问 ")
                   for q in questions)


def _pool(lessons=("01", "02", "03", "04"), per=5):
    return [M.Question(l, f"topic {l}", f"主题 {l}", f"q{l}-{i}?", f"a{l}-{i}.", f"问{l}-{i}？",
                       f"答{l}-{i}。") for l in lessons for i in range(per)]


def test_selection_is_seeded_spread_and_without_repeats():
    pool = _pool()
    a = M.select(pool, 8, seed=3)
    assert a == M.select(pool, 8, seed=3)
    assert any(M.select(pool, 8, seed=s) != a for s in range(4, 10))
    assert len(set(a)) == 8
    # every lesson before any lesson twice: 8 questions from 4 lessons -> 2 each
    assert sorted(q.lesson for q in a[:4]) == ["01", "02", "03", "04"]
    assert {q.lesson: sum(p.lesson == q.lesson for p in a) for q in a} == {
        "01": 2, "02": 2, "03": 2, "04": 2}
    everything = M.select(pool, 20, seed=0)
    assert sorted(everything, key=lambda q: q.front_en) == sorted(pool, key=lambda q: q.front_en)
    with pytest.raises(ValueError, match="only 20"):
        M.select(pool, 21, seed=0)
    only = M.select(pool, 3, seed=1, lessons=["02"])
    assert {q.lesson for q in only} == {"02"}


def test_selection_over_the_course_covers_distinct_lessons():
    questions = M.load_questions()
    lessons = sorted({q.lesson for q in questions})
    chosen = M.select(questions, len(lessons), seed=12)
    assert sorted(q.lesson for q in chosen) == lessons


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_ask_reveal_grade_tally(capsys):
    clock = Clock()
    mock = M.MockInterview(n=3, seed=0, questions=_pool(("01", "02")), clock=clock,
                           seconds_per_question=60, language="en")
    mock.plan()
    out = capsys.readouterr().out
    assert out.count("[lesson ") == 3 and "a01" not in out and "a02" not in out  # no answers
    with pytest.raises(RuntimeError, match="ask"):
        mock.reveal()
    mock.ask()
    first = mock.selection[0]
    out = capsys.readouterr().out
    assert first.front_en in out and first.back_en not in out and "问" not in first.front_en
    with pytest.raises(RuntimeError, match="grade"):
        mock.ask()
    mock.reveal()
    assert first.back_en in capsys.readouterr().out
    clock.t += 45
    mock.grade(True)
    mock.ask()
    clock.t += 90
    mock.grade(False)
    assert mock.score() == (1, 2)
    assert [a.seconds for a in mock.answers] == [45, 90]
    mock.tally()
    out = capsys.readouterr().out
    assert "Score: 1 of 2 graded right (50%); 1 not asked" in out
    wrong = mock.selection[1].lesson
    assert f"Revise / 复习: lesson {wrong}" in out and " s" not in out.split("Revise")[0][-5:]
    mock.tally(times=True)
    out = capsys.readouterr().out
    assert "question 1: 45 s\n" in out and "question 2: 90 s over budget" in out
    assert "Total / 总计: 135 s of 120 s" in out
    mock.ask()
    mock.grade(True)
    with pytest.raises(RuntimeError, match="over"):
        mock.ask()


def test_both_languages_and_bad_language():
    mock = M.MockInterview(n=2, seed=1, questions=_pool(), language="both")
    q = mock.selection[0]
    assert mock._lines(q, "back") == [q.back_en, q.back_zh]
    with pytest.raises(ValueError, match="language"):
        M.MockInterview(n=2, questions=_pool(), language="fr")


def test_unpaired_notebook_is_refused(tmp_path):
    cell = lambda tags, src: {"cell_type": "markdown", "metadata": {"tags": tags}, "source": src}
    nb = {"cells": [cell(["lang-en"], "# 01 · Demo: x"), cell(["lang-zh"], "# 01 · 演示：x"),
                    cell(["lang-en", "question"], "**Question 1. Why?**\n\nBecause.")],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_demo.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(ValueError, match="pair up"):
        M.load_questions([path])
