"""helpers.mock_interview: the questions come from the notebooks' question cells (checked
against tools.flashcards' own parser), the rubric is parsed from its markers and its
malformations are named, frequencies come from the survey, the draw is seeded and weighted
(checked against hand-computed probabilities), the pool has no near-duplicates, and the text
interview and the widget grade against the rubric with a clock the test controls."""

import asyncio
import json
import random
import time

import pytest

from helpers import mock_interview as M
from tools import flashcards


# ------------------------------------------------------------------ fixtures

def _cell(tags, src, cid=None):
    cell = {"cell_type": "markdown", "metadata": {"tags": tags}, "source": src}
    if cid:
        cell["id"] = cid
    return cell


def _notebook(folder, name, cells):
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


RUBRIC_EN = """**Question 1. Why does LayerNorm not depend on the batch?**

It normalises each token over its $d$ features, so no statistic crosses samples
(section 3 prints a difference of 0).

**Key points**
- statistics per token, over the last $d$ features
- the same in `train()` and `eval()`:
  no running statistics
- works with a batch of one

**Red flags**
- "it uses the batch mean": section 3 prints 0.0 for one sample alone vs in the batch.
"""
RUBRIC_ZH = """**问 1：为什么 LayerNorm 不依赖批？**

它在每个 token 的 $d$ 个特征上归一化，没有统计量跨样本（第 3 节打印的差为 0）。

**要点**
- 每个 token 在最后 $d$ 个特征上计算统计量
- `train()` 与 `eval()` 相同：没有滑动平均统计量
- 批大小为 1 也能用

**危险信号**
- “它用批均值”：第 3 节对单个样本与整批的差打印 0.0。
"""
PLAIN_EN = "**Question 2. What is $\\gamma$?**\n\nA per-feature gain (section 4)."
PLAIN_ZH = "**问 2：$\\gamma$ 是什么？**\n\n逐特征的增益（第 4 节）。"


def _lesson(tmp_path, en=RUBRIC_EN, zh=RUBRIC_ZH, name="02_demo.ipynb"):
    return _notebook(tmp_path, name, [
        _cell(["lang-en"], "# 02 · LayerNorm: demo"), _cell(["lang-zh"], "# 02 · LayerNorm：演示"),
        _cell(["lang-en", "question"], en, "aaaa0001"), _cell(["lang-zh", "question"], zh, "bbbb0001"),
        _cell(["lang-en", "question"], PLAIN_EN, "aaaa0002"), _cell(["lang-zh", "question"], PLAIN_ZH, "bbbb0002"),
    ])


def _pool(lessons=("01", "02", "03", "04"), per=5, frequency=lambda lesson, i: 0):
    return [M.Question(l, f"topic {l}", f"主题 {l}", f"q{l}-{i}?", f"a{l}-{i}.", f"问{l}-{i}？",
                       f"答{l}-{i}。", f"c{l}{i}", frequency(l, i))
            for l in lessons for i in range(per)]


# ------------------------------------------------------------------ the pool

def test_questions_are_the_question_cells_without_repeats():
    questions = M.load_questions()
    # the flashcards' rows (their own parser and de-duplication), before the markdown rewrite
    notes = {lang: [n for n in flashcards.notes(flashcards.collect()) if n.language == lang]
             for lang in ("en", "zh")}
    assert len(questions) == len(notes["en"]) == len(notes["zh"])
    assert len({q.front_en for q in questions}) == len(questions)
    by_front = {flashcards.qualify_references(q.front_en, q.lesson, "en"): q for q in questions}
    for note in notes["en"]:
        assert by_front[note.front].lesson == note.lessons[0]
    assert all(q.back_en and q.back_zh and q.front_zh and q.answer_en for q in questions)
    assert not any(q.front_en.startswith("Question ") or q.front_zh.startswith("问 ")
                   for q in questions)
    assert len({q.key for q in questions}) == len(questions) and all(q.cell_id for q in questions)


def test_unpaired_notebook_is_refused(tmp_path):
    path = _notebook(tmp_path, "01_demo.ipynb", [
        _cell(["lang-en"], "# 01 · Demo: x"), _cell(["lang-zh"], "# 01 · 演示：x"),
        _cell(["lang-en", "question"], "**Question 1. Why?**\n\nBecause.")])
    with pytest.raises(ValueError, match="pair up"):
        M.load_questions([path])


# ------------------------------------------------------------------ the rubric

def test_rubric_parsed_from_a_notebook(tmp_path):
    q, plain = M.load_questions([_lesson(tmp_path)], survey=None)
    assert q.lesson == "02" and q.topic_en == "LayerNorm" and q.cell_id == "aaaa0001"
    assert q.front_en == "Why does LayerNorm not depend on the batch?"
    assert q.answer_en == ("It normalises each token over its $d$ features, so no statistic "
                           "crosses samples\n(section 3 prints a difference of 0).")
    assert q.key_points_en == ("statistics per token, over the last $d$ features",
                               "the same in `train()` and `eval()`: no running statistics",
                               "works with a batch of one")
    assert q.red_flags_en == ('"it uses the batch mean": section 3 prints 0.0 for one sample '
                              'alone vs in the batch.',)
    assert q.key_points_zh[1] == "`train()` 与 `eval()` 相同：没有滑动平均统计量"
    assert len(q.red_flags_zh) == 1 and q.answer_zh.startswith("它在每个 token")
    assert q.has_rubric and q.points == 3
    # a question without the markers: the whole back is the answer, no rubric, one point
    assert plain.answer_en == "A per-feature gain (section 4)." and plain.key_points_en == ()
    assert not plain.has_rubric and plain.points == 1
    assert M.rubric_problems([q, plain]) == [
        "lesson 02 (cell aaaa0002) 'What is $\\\\gamma$?': no **Key points** / **Red flags** rubric"]


MALFORMED = [
    ("**Key points**", "**Key points:**", "looks like a rubric marker"),
    ("**Key points**", "**Key Points**", "looks like a rubric marker"),
    ("**Red flags**", "**要点**", "marker of the other language"),
    ("**Red flags**\n- \"it uses", "- \"it uses", "without \\*\\*Red flags\\*\\*"),
    ("- works with a batch of one", "works with a batch of one", "must be a '- ' bullet"),
    ("**Key points**\n- statistics per token, over the last $d$ features\n- the same in "
     "`train()` and `eval()`:\n  no running statistics\n- works with a batch of one\n\n",
     "", "without \\*\\*Key points\\*\\* before it"),
    ("- \"it uses the batch mean\": section 3 prints 0.0 for one sample alone vs in the batch.\n",
     "", "an empty list under \\*\\*Red flags\\*\\*"),
]


@pytest.mark.parametrize("old, new, message", MALFORMED)
def test_malformed_rubric_names_lesson_and_question(tmp_path, old, new, message):
    assert old in RUBRIC_EN
    path = _lesson(tmp_path, en=RUBRIC_EN.replace(old, new, 1))
    with pytest.raises(ValueError, match=rf"02_demo.ipynb, Question 1 \(cell aaaa0001\).*"
                                         rf"lesson 02, question 'Why does LayerNorm.*{message}"):
        M.load_questions([path], survey=None)


def test_empty_answer_and_second_marker_are_malformed():
    with pytest.raises(ValueError, match="no model answer"):
        M.parse_rubric("**Key points**\n- a\n- b\n\n**Red flags**\n- c", "en")
    with pytest.raises(ValueError, match="a second"):
        M.parse_rubric("A.\n\n**要点**\n- 甲\n\n**危险信号**\n- 乙\n\n**危险信号**\n- 丙", "zh")
    with pytest.raises(ValueError, match="language"):
        M.parse_rubric("A.", "fr")


def test_twins_with_different_counts_are_refused(tmp_path):
    zh = RUBRIC_ZH.replace("- 批大小为 1 也能用\n", "")
    with pytest.raises(ValueError, match=r"Question 1 .*twins' rubrics differ: .*\(3, 1\) in "
                                         r"English, \(2, 1\) in Chinese"):
        M.load_questions([_lesson(tmp_path, zh=zh)], survey=None)
    with pytest.raises(ValueError, match="twins"):  # a rubric in one language only
        M.load_questions([_lesson(tmp_path, zh=RUBRIC_ZH.split("**要点**")[0])], survey=None)


def test_rubric_counts_outside_the_spec_are_reported(tmp_path):
    en = RUBRIC_EN.replace("- works with a batch of one\n", "").replace(
        "- the same in `train()` and `eval()`:\n  no running statistics\n", "")
    zh = RUBRIC_ZH.replace("- 批大小为 1 也能用\n", "").replace(
        "- `train()` 与 `eval()` 相同：没有滑动平均统计量\n", "")
    q = M.load_questions([_lesson(tmp_path, en=en, zh=zh)], survey=None)[0]
    assert M.rubric_problems([q]) == [
        "lesson 02 (cell aaaa0001) 'Why does LayerNorm not depend on the batch?': "
        "1 key points, not 2 to 4"]


def test_every_question_in_the_pool_has_a_rubric():
    """The strict check of the rubric format on the whole pool: every question has a model
    answer, 2 to 4 key points and 1 to 3 red flags (twins alike: load_questions)."""
    problems = M.rubric_problems(M.load_questions())
    assert not problems, f"{len(problems)} questions:\n" + "\n".join(problems)


# ------------------------------------------------------------------ the survey

SURVEY = {
    "sources": {s: {"title": s, "url": f"https://example.org/{s}", "kind": "page", "note": ""}
                for s in ("s1", "s2", "s3", "s4")},
    "asked": {"why-ln": {"question": "Why LayerNorm?", "sources": ["s1", "s2", "s3"]},
              "ln-dims": {"question": "Which dims?", "sources": ["s2", "s4"]},
              "gamma": {"question": "What is gamma?", "sources": ["s1"]}},
    "questions": {"02:aaaa0001": {"front": "...", "asked": ["why-ln", "ln-dims"]},
                  "02:aaaa0002": {"front": "...", "asked": []}},
}


def test_frequency_counts_distinct_sources(tmp_path):
    path = _lesson(tmp_path)
    q, plain = M.load_questions([path], survey=SURVEY)
    # why-ln (s1, s2, s3) and ln-dims (s2, s4): s2 counted once
    assert (q.frequency, q.sources) == (4, ("s1", "s2", "s3", "s4"))
    assert (plain.frequency, plain.sources) == (0, ())
    file = tmp_path / "survey.json"
    file.write_text(json.dumps(SURVEY), encoding="utf-8")
    assert [x.frequency for x in M.load_questions([path], survey=file)] == [4, 0]
    assert [x.frequency for x in M.load_questions([path], survey=tmp_path / "absent.json")] == [0, 0]
    assert M.load_survey(tmp_path / "absent.json") is None
    bad = json.loads(json.dumps(SURVEY))
    bad["questions"]["02:aaaa0002"]["asked"] = ["nowhere"]
    with pytest.raises(ValueError, match="'nowhere', not under 'asked'"):
        M.load_questions([path], survey=bad)
    bad["asked"]["nowhere"] = {"question": "?", "sources": ["s9"]}
    with pytest.raises(ValueError, match="source 's9'"):
        M.load_questions([path], survey=bad)


def test_most_asked_ranks_by_frequency(tmp_path):
    pool = M.load_questions([_lesson(tmp_path)], survey=None)
    ranked = M.most_asked(2, questions=pool, survey=SURVEY)
    assert [q.cell_id for q in ranked] == ["aaaa0001", "aaaa0002"]
    md = ranked._repr_markdown_()
    assert md.count("<details>") == 2 and "asked in 4 of 4 surveyed collections" in md
    assert "在 4 个被调查的题库中有 4 个问到" in md
    # the answer and the rubric are inside the fold, the question outside
    before, folded = md.split("<details>", 1)
    assert "Why does LayerNorm not depend on the batch?" in before
    assert "**Key points**" in folded.split("</details>")[0] and "**危险信号**" in folded
    # shown in lesson 12, the references name the question's own lesson
    assert "(lesson 02, §3 prints a difference of 0)" in folded and "（第 02 课第 3 节打印的差为 0）" in folded
    assert repr(ranked).splitlines()[0].startswith(" 1. [4/4] Why does LayerNorm not depend")
    none = M.most_asked(2, questions=pool, survey=None)
    assert list(none) == [] and "No survey" in repr(none) and "No survey" in none._repr_markdown_()


# ------------------------------------------------------------------ the draw

def _inclusion(pool, n, seeds, **kwargs):
    counts = {q: 0 for q in pool}
    for seed in range(seeds):
        for q in M.select(pool, n, seed, **kwargs):
            counts[q] += 1
    return {q: c / seeds for q, c in counts.items()}


def test_draw_probabilities_match_hand_computed_values():
    # three topics, frequencies 0, 2, 4: weights 1, 2, 4 (sum 7)
    pool = [M.Question(str(i).zfill(2), f"t{i}", f"t{i}", f"q{i}?", "a.", "问？", "答。", f"c{i}", f)
            for i, f in enumerate((0, 2, 4))]
    assert [M.draw_weight(q.frequency) for q in pool] == [1, 2, 4]
    assert M.draw_weight(13) == pytest.approx(90.51, abs=0.01)
    one = _inclusion(pool, 1, 20000)
    two = _inclusion(pool, 2, 20000)
    sd = (0.25 / 20000) ** 0.5
    assert one[pool[2]] == pytest.approx(4 / 7, abs=5 * sd)
    assert one[pool[0]] == pytest.approx(1 / 7, abs=5 * sd)
    # P(q2 in a draw of 2) = 4/7 + (1/7)(4/6) + (2/7)(4/5)
    assert two[pool[2]] == pytest.approx(4 / 7 + (1 / 7) * (4 / 6) + (2 / 7) * (4 / 5), abs=5 * sd)
    # q0 and q1 in one topic: after q1 is drawn, q0 weighs 1 * 0.25
    same = [pool[0], M.dataclasses.replace(pool[1], topic_en="t0"), pool[2]]
    exact = 1 / 7 + (2 / 7) * (0.25 / (0.25 + 4)) + (4 / 7) * (1 / 3)
    assert _inclusion(same, 2, 20000)[same[0]] == pytest.approx(exact, abs=5 * sd)


def test_selection_is_seeded_spread_and_without_repeats():
    pool = _pool()
    a = M.select(pool, 8, seed=3)
    assert a == M.select(pool, 8, seed=3)
    assert any(M.select(pool, 8, seed=s) != a for s in range(4, 10))
    assert len(set(a)) == 8
    # damping 0: every topic before any topic twice (round robin in a random order)
    for seed in range(20):
        b = M.select(pool, 8, seed=seed, damping=0)
        assert sorted(q.lesson for q in b[:4]) == ["01", "02", "03", "04"]
        assert sorted(q.lesson for q in b[4:]) == ["01", "02", "03", "04"]
    # damping 0.25 spreads topics far more than an undamped draw (damping 1)
    def distinct(damping):
        return sum(len({q.topic_en for q in M.select(pool, 4, s, damping=damping)})
                   for s in range(400)) / 400
    assert distinct(0.25) > distinct(1.0) + 0.5 and distinct(0.25) > 3.4
    everything = M.select(pool, 20, seed=0)
    assert sorted(everything, key=lambda q: q.front_en) == sorted(pool, key=lambda q: q.front_en)
    with pytest.raises(ValueError, match="only 20"):
        M.select(pool, 21, seed=0)
    with pytest.raises(ValueError, match="damping"):
        M.select(pool, 2, seed=0, damping=2)
    only = M.select(pool, 3, seed=1, lessons=["02"])
    assert {q.lesson for q in only} == {"02"}


def test_the_most_asked_question_is_in_most_mocks():
    """A pool shaped like the course's (110 questions, 14 topics, a long tail of questions
    asked by 0 to 3 collections, one asked by 10): the most asked question is in most 8-question
    mocks, where an unweighted draw puts it in about 8 / 110 of them."""
    rng = random.Random(0)
    lessons = [f"{i:02d}" for i in range(14)]
    pool = [M.Question(l, f"topic {l}", f"主题 {l}", f"q{l}-{i}?", "a.", "问？", "答。", f"c{l}{i}",
                       rng.choice((0, 0, 0, 1, 1, 2, 3)))
            for l in lessons for i in range(8)][:110]
    top = M.dataclasses.replace(pool[17], frequency=10)
    pool[17] = top
    weighted = sum(top in M.select(pool, 8, s) for s in range(2000)) / 2000
    flat = [M.dataclasses.replace(q, frequency=0) for q in pool]
    unweighted = sum(flat[17] in M.select(flat, 8, s) for s in range(2000)) / 2000
    print(f"most asked question in {weighted:.1%} of 8-question mocks (unweighted: {unweighted:.1%})")
    assert weighted > 0.6 and unweighted < 0.12


def test_the_course_pool_weighted_by_the_survey():
    """With the survey of the course (docs/interview_survey.json), the most asked question is
    in a large share of 8-question mocks; skipped where the survey is absent."""
    survey = M.load_survey()
    if survey is None:
        pytest.skip("docs/interview_survey.json is absent")
    pool = M.load_questions(survey=survey)
    top = max(pool, key=lambda q: q.frequency)
    share = sum(top in M.select(pool, 8, s) for s in range(1000)) / 1000
    print(f"{top.front_en!r} (asked in {top.frequency} of {len(survey['sources'])}) "
          f"is in {share:.1%} of 1000 8-question mocks")
    assert share > 0.5


# ------------------------------------------------------------------ near-duplicates

def test_similarity_is_symmetric_and_bounded():
    a, b, c = _pool(("01",), per=3)
    same = M.dataclasses.replace(b, front_en=a.front_en, back_en=a.back_en)
    assert M.similarity(a, same) == 1.0
    assert M.similarity(a, b) == M.similarity(b, a)
    x = M.Question("01", "t", "t", "Why does BatchNorm help?", "Smoother loss.", "?", "。")
    y = M.Question("02", "t", "t", "Does BatchNorm help, and why?", "The loss landscape is smoother.", "?", "。")
    z = M.Question("03", "t", "t", "What is QK-norm?", "A norm on queries and keys.", "?", "。")
    assert M.similarity(x, y) == pytest.approx((1.0 + 2 / 3) / 2)  # {batchnorm, help}; {loss, smoother} of 3
    assert M.similarity(x, z) == 0.0
    assert [(s, p.front_en, r.front_en) for s, p, r in M.near_duplicates([x, y, z])] == [
        (pytest.approx(5 / 6), x.front_en, y.front_en)]


#: Pairs above the threshold judged to be different questions ("NN:<English cell id>").
#: The first three were reviewed with the merge of the near-duplicates ("different questions, keep both").
REVIEWED_DISTINCT = {
    frozenset({"01:2e78ecd0", "02:d9e145bd"}),  # over which dims: BatchNorm / LayerNorm
    frozenset({"06:65d52875", "12:2ea36424"}),  # do today's LLMs use DeepNorm / why Pre-LN + RMSNorm
    frozenset({"04:8a1f4979", "04:f438b9f5"}),  # when is RMSNorm equal to LayerNorm / always faster
    frozenset({"02:294cba8e", "04:995a601d"}),  # LayerNorm's input gradient / RMSNorm's, and how it differs
    frozenset({"10:c4adfbf7", "12:85d54075"}),  # does weight decay regularise a weight before BN /
    #                                             what such a weight shares with a WeightNorm weight
}


def test_no_near_duplicates_in_the_pool():
    """No two questions of the pool ask the same thing, except
    pairs reviewed as different questions (REVIEWED_DISTINCT)."""
    questions = M.load_questions(survey=None)
    found = [(s, a, b) for s, a, b in M.near_duplicates(questions)
             if frozenset({a.key, b.key}) not in REVIEWED_DISTINCT]
    assert not found, f"{len(found)} near-duplicate pairs:\n" + "\n".join(
        f"{s:.2f} {a.key} {a.front_en[:60]!r} ~ {b.key} {b.front_en[:60]!r}" for s, a, b in found)


# ------------------------------------------------------------------ the text interview

class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _rubric_pool(tmp_path):
    return M.load_questions([_lesson(tmp_path)], survey=None)


def test_ask_reveal_grade_tally(capsys, tmp_path):
    clock = Clock()
    rubric, plain = _rubric_pool(tmp_path)
    mock = M.MockInterview(n=2, seed=0, questions=[rubric, plain], clock=clock,
                           seconds_per_question=60, language="en")
    mock.selection = [rubric, plain]  # a fixed order for the test
    mock.plan()
    out = capsys.readouterr().out
    assert out.count("[lesson ") == 2 and "normalises each token" not in out  # no answers
    with pytest.raises(RuntimeError, match="ask"):
        mock.reveal()
    mock.ask()
    out = capsys.readouterr().out
    assert rubric.front_en in out and "normalises" not in out and "Key points" not in out
    with pytest.raises(RuntimeError, match="grade"):
        mock.ask()
    clock.t += 45
    mock.reveal()
    out = capsys.readouterr().out
    assert rubric.answer_en in out
    assert "Key points:\n  1. statistics per token" in out and "  3. works with a batch of one" in out
    assert 'Red flags:\n  - "it uses the batch mean"' in out and "grade(k)" in out
    clock.t += 20
    with pytest.raises(ValueError, match="4 key points hit: this question has 3"):
        mock.grade(4)
    with pytest.raises(ValueError, match="2 ticks for 3"):
        mock.grade([True, False])
    mock.grade([True, False, True])
    mock.ask()
    clock.t += 130  # over budget, never revealed: answering time to the grade
    mock.grade(False)
    capsys.readouterr()
    assert mock.score() == (pytest.approx(2 / 3), 2)
    assert [(a.answer_seconds, a.reading_seconds) for a in mock.answers] == [(45, 20), (130, 0)]
    mock.tally()
    out = capsys.readouterr().out
    assert out.startswith("Score: 0.67 of 2 graded (33%); 0 not asked")
    assert "  lesson 02 · LayerNorm: 0.67/2\n" in out
    assert "  question 1 (lesson 02): 2/3 key points\n  question 2 (lesson 02): 0/1 key points" in out
    assert ("Revise / 复习:\n  lesson 02: Why does LayerNorm not depend on the batch?\n"
            "    missed: the same in `train()` and `eval()`: no running statistics\n"
            "  lesson 02: What is $\\gamma$?\n") in out
    assert "answered in" not in out and "Answering time" not in out  # no times
    mock.tally(times=True)
    out = capsys.readouterr().out
    assert "question 1 (lesson 02): 2/3 key points; answered in 45 s, read the answer 20 s" in out
    assert "answered in 130 s over budget / 超时, read the answer 0 s" in out
    assert "Answering time / 作答用时: 175 s of 120 s" in out
    with pytest.raises(RuntimeError, match="over"):
        mock.ask()


def test_both_languages_and_bad_arguments(capsys, tmp_path):
    rubric, plain = _rubric_pool(tmp_path)
    mock = M.MockInterview(n=2, seed=1, questions=[rubric, plain], language="both")
    mock.selection = [rubric, plain]
    mock.ask()
    mock.reveal()
    out = capsys.readouterr().out
    assert "要点:\n  1. 每个 token" in out and "危险信号:" in out and "Key points:" in out
    with pytest.raises(ValueError, match="language"):
        M.MockInterview(n=2, questions=_pool(), language="fr")
    with pytest.raises(ValueError, match="seconds_per_question"):
        M.MockInterview(n=2, questions=_pool(), seconds_per_question=0)


def test_text_output_depends_only_on_the_seed(capsys):
    def run(seed):
        mock = M.MockInterview(n=4, seed=seed, questions=M.load_questions(survey=None),
                               clock=Clock())
        mock.plan()
        mock.ask()
        mock.reveal()
        mock.grade(True)
        mock.tally()
        return capsys.readouterr().out
    assert run(5) == run(5) != run(6)


def test_markdown_to_html_keeps_math_for_mathjax():
    html = M.markdown_to_html("**Why** is $x_{i}^2 < \\sigma$ and *not* `a*b`?\n\n$$a_1 < b_2$$")
    assert html == ("<p><b>Why</b> is $x_{i}^2 &lt; \\sigma$ and <i>not</i> <code>a*b</code>?</p>\n"
                    "<p>$$a_1 &lt; b_2$$</p>")


# ------------------------------------------------------------------ the widget

def _widget(tmp_path, clock, seconds=60):
    rubric, plain = _rubric_pool(tmp_path)
    mock = M.MockInterview(n=2, seed=0, questions=[rubric, plain], clock=clock,
                           seconds_per_question=seconds, language="both")
    mock.selection = [rubric, plain]
    return M.InterviewWidget(mock, run_timer=False), rubric


def test_widget_counts_down_reveals_at_zero_and_reports(tmp_path):
    clock = Clock()
    w, rubric = _widget(tmp_path, clock)
    assert "needs a running kernel" in repr(w)
    assert w.question.value == "" and w.reveal_button.disabled
    w.start_button.click()
    assert "Why does LayerNorm not depend on the batch?" in w.question.value
    assert "为什么 LayerNorm 不依赖批？" in w.question.value and w.answer.value == ""
    assert "1:00</span> left / 剩余" in w.countdown.value and w.bar.value == 60
    clock.t += 18.5
    assert w.on_tick() and "0:42</span> left" in w.countdown.value and w.answer.value == ""
    assert w.bar.value == 41.5
    clock.t += 41.5  # time is up: the next tick reveals, and the clock shows the time taken
    assert not w.on_tick()
    assert "1:00</span> answered in / 作答用时" in w.countdown.value
    assert "normalises each token over its $d$ features" in w.answer.value
    assert w.reveal_button.disabled and not w.next_button.disabled
    labels = [row.children[1].value for row in w.checks.children[1:]]
    assert len(labels) == 3 and "statistics per token, over the last $d$ features<br>" in labels[0]
    assert "“它用批均值”" in w.flags.value and "it uses the batch mean" in w.flags.value
    clock.t += 30  # reading
    w._boxes[0].value = w._boxes[2].value = True
    w.next_button.click()
    assert (w.mock.answers[0].hit, w.mock.answers[0].answer_seconds,
            w.mock.answers[0].reading_seconds) == ((True, False, True), 60, 30)
    assert "What is $\\gamma$?" in w.question.value and w.answer.value == ""
    clock.t += 10
    w.reveal_button.click()  # revealed early
    assert "A per-feature gain" in w.answer.value and len(w._boxes) == 1
    w.next_button.click()
    report = w.report.value
    assert "Report / 报告: 0.67 of 2 (33%)" in report
    assert "<li>lesson 02 · LayerNorm / LayerNorm: 0.67/2</li>" in report
    assert "<td>2/3</td><td>60 s</td><td>30 s</td>" in report
    assert "<td>0/1</td><td>10 s</td><td>0 s</td>" in report
    assert "Revise / 复习" in report and "no running statistics" in report
    assert w.next_button.disabled and w.reveal_button.disabled
    assert w.bar.layout.display == w.next_button.layout.display == "none"


def test_widget_countdown_runs_on_a_thread():
    """Outside an event loop the countdown runs on a thread, with the real clock."""
    mock = M.MockInterview(n=1, seed=0, questions=_pool(), seconds_per_question=0.3)
    w = M.InterviewWidget(mock, tick=0.05)
    w.start()
    deadline = time.monotonic() + 5
    while w.next_button.disabled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not w.next_button.disabled and w.answer.value, "the countdown did not reveal"
    assert 0.25 < mock._revealed - mock._started < 2


def test_widget_countdown_runs_on_the_event_loop():
    """In a kernel (an asyncio loop running) the countdown is a task on that loop."""
    async def main():
        mock = M.MockInterview(n=1, seed=0, questions=_pool(), seconds_per_question=0.3)
        w = M.InterviewWidget(mock, tick=0.05)
        w.start()
        assert isinstance(w._task, asyncio.Task)
        for _ in range(100):
            if not w.next_button.disabled:
                break
            await asyncio.sleep(0.05)
        return w
    w = asyncio.run(main())
    assert not w.next_button.disabled and w.answer.value
