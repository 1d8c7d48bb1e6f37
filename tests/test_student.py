"""The student edition (tools/student.py, ``make student``): outputs cleared, model solutions
removed, every answer folded away, and nothing else changed."""

import ast
import re

import nbformat
import pytest

from tools.course import lessons
from tools.student import (EDITIONS, drop_solution_mentions, export_student, hide_answers,
                           student_notebook)

LESSONS = lessons()
DETAILS = re.compile(r"<details><summary>[^<]*</summary>(.*?)</details>", re.S)


def _visible(source: str) -> str:
    """What a reader sees before opening any <details> block."""
    return DETAILS.sub("", source)


def _md(source, *tags):
    return nbformat.v4.new_markdown_cell(source, metadata={"tags": list(tags)})


@pytest.fixture(scope="module", params=LESSONS, ids=lambda p: p.stem[:2])
def lesson(request):
    return nbformat.read(request.param, as_version=4)


def test_outputs_cleared_and_solutions_replaced(lesson):
    hidden = [c for c in lesson.cells if c.cell_type == "code"
              and c.source.startswith("# model solution")]
    for edition in EDITIONS:
        student = student_notebook(lesson, edition)
        nbformat.validate(student)
        code = [c for c in student.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code)
        assert "widgets" not in student.metadata
        assert not any(c.source.lstrip().startswith("# model solution") for c in code)
        assert not any(c.metadata.get("jupyter", {}).get("source_hidden") for c in code)
        # one empty cell in each solution's place, and every other code cell unchanged
        assert sum(c.source.startswith("# your solution") or c.source.startswith("# 在这里写")
                   for c in code) == len(hidden)
        full_code = [c.source for c in lesson.cells if c.cell_type == "code" and c not in hidden]
        assert [c.source for c in code if not c.source.startswith(("# your solution", "# 在这里写"))] \
            == full_code


def test_question_answers_hidden(lesson):
    for edition in EDITIONS:
        student = student_notebook(lesson, edition)
        questions = [c for c in student.cells if "question" in c.metadata.get("tags", [])]
        full = [c for c in lesson.cells if "question" in c.metadata.get("tags", [])
                and (edition == "bilingual" or f"lang-{edition}" in c.metadata["tags"])]
        assert len(questions) == len(full)
        for mine, theirs in zip(questions, full):
            question, answer = theirs.source.split("\n\n", 1)
            assert _visible(mine.source).strip() == question.strip()
            assert answer.strip() in DETAILS.search(mine.source).group(1)


def test_exercise_answers_hidden():
    # the written answers of the lessons, as the full edition shows them (hand-picked)
    answers = {
        "01": ["At B = 32 the two nearly agree"],
        "02": ["Every pair becomes", "每一对都变成"],
        "03": ["GroupNorm(6, 6) runs, but its output is 0", "GroupNorm(6, 6) 能运行，但输出"],
        "04": ["so in units of the token's own spread its output", "RMSNorm 除以的是",
               "LayerNorm maps a constant token to 0", "LayerNorm 把常数 token 映射为 0"],
        "05": ["with 10 warmup steps at", "不预热的 Pre-LN 在两种学习率下"],
        "07": ["Total 6, three times a fused kernel's 2", "共 6 次，是融合内核 2 次的三倍"],
        "08": ["Plain BatchNorm refuses to train on one value per channel", "普通 BatchNorm 拒绝在每个通道只有一个值"],
        "10": ["The stored variance is the training one"],
    }
    for path in LESSONS:
        fragments = answers.get(path.stem[:2], [])
        full_text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        student = student_notebook(nbformat.read(path, as_version=4), "bilingual")
        visible = "\n".join(_visible(c.source) for c in student.cells if c.cell_type == "markdown")
        for fragment in fragments:
            assert fragment in full_text, (path.stem, fragment)
            assert fragment not in visible, (path.stem, fragment)


def test_removed_solutions_are_not_used_later(lesson):
    """The learner who skips an exercise can still run the rest of the lesson: no later cell
    needs a name that only a removed model solution defines."""
    cells = lesson.cells
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or not cell.source.startswith("# model solution"):
            continue
        tree = ast.parse(cell.source)
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Name)}
        for later in cells[i + 1:]:
            if later.cell_type == "code":
                used = {n.id for n in ast.walk(ast.parse(later.source)) if isinstance(n, ast.Name)}
                assert not names & used, (names & used, later.source[:80])


def test_hide_answers_rules():
    q = _md("**Question 1. Why?**\n\nBecause $x$.\n\nAnd more.", "lang-en", "question")
    assert hide_answers(q) == ("**Question 1. Why?**\n\n<details><summary>Answer</summary>\n\n"
                               "Because $x$.\n\nAnd more.\n\n</details>")
    zh = _md("**问 1：为什么？**\n答：因为。", "lang-zh", "question")
    assert hide_answers(zh).endswith("<details><summary>答案</summary>\n\n答：因为。\n\n</details>")
    ex = _md("**Exercise 3.** Predict.\n\n*Answer:* two.\n\nBecause.", "lang-en")
    assert _visible(hide_answers(ex)) == "**Exercise 3.** Predict.\n\n"
    plain = _md("**Exercise 4.** Predict.\n\n<details><summary>Answer</summary>\n\nNo.\n</details>", "lang-en")
    assert hide_answers(plain) == plain.source
    with pytest.raises(ValueError, match="bold question"):
        hide_answers(_md("Question without bold\n\nanswer", "lang-en", "question"))
    with pytest.raises(ValueError, match="lang-en, lang-zh"):
        hide_answers(_md("**Answer:** untagged"))


def test_hidden_cell_that_is_no_solution_is_an_error():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", metadata={"jupyter": {"source_hidden": True}})])
    with pytest.raises(ValueError, match="model solution"):
        student_notebook(nb, "bilingual")
    with pytest.raises(ValueError, match="unknown edition"):
        student_notebook(nb, "fr")


def test_export_writes_every_edition(tmp_path):
    written = export_student(["zh"], LESSONS[:2], tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == \
        [f"zh/{p.name}" for p in LESSONS[:2]]
    assert (tmp_path / "images").is_dir()
    nb = nbformat.read(written[1], as_version=4)
    assert nb.metadata["language"] == "zh"
    assert not any("lang-en" in c.metadata.get("tags", []) for c in nb.cells)


def test_model_solutions_are_collapsed_in_the_full_edition(lesson):
    """A learner scrolling through a lesson does not read the solution by accident."""
    for cell in lesson.cells:
        if cell.cell_type == "code" and cell.source.startswith("# model solution"):
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, cell.source[:60]


# Words that point at a model solution; "collapsed" and "折叠的单元格" only ever describe the
# hidden solution cells (folding BatchNorm into a layer is "折叠进", never "折叠的单元格")
POINTS_AT_CELL = re.compile(r"collapsed|折叠的单元格|折叠起来的单元格", re.I)
SPEAKS_OF_SOLUTION = re.compile(r"model solution|参考答案|参考解答", re.I)
STUDENT = {(p.stem[:2], e): None for p in LESSONS for e in EDITIONS}


def _student(path, edition):
    key = (path.stem[:2], edition)
    if STUDENT[key] is None:
        STUDENT[key] = student_notebook(nbformat.read(path, as_version=4), edition)
    return STUDENT[key]


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_no_model_solution_and_no_sentence_about_one(path, edition):
    """What a fresh clone's student edition shows: no line of a model solution's code, and no
    sentence that speaks of a model solution where there is none (lesson 12's drills keep
    theirs in helpers.drills, shown on request: there the words stay true)."""
    full = nbformat.read(path, as_version=4)
    solutions = [c.source for c in full.cells if c.cell_type == "code"
                 and c.source.lstrip().startswith("# model solution")]
    others = "\n".join(c.source for c in full.cells if c.source not in solutions)
    nb = _student(path, edition)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for source in solutions:
        for line in source.splitlines()[1:]:
            if len(line.strip()) > 12 and line not in others:
                assert line not in code, line
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        visible = _visible(cell.source)
        assert not POINTS_AT_CELL.search(visible), (cell.id, visible[:300])
        if solutions:
            assert not SPEAKS_OF_SOLUTION.search(visible), (cell.id, visible[:300])


def _exercises(nb, tag):
    """Per exercise of ``nb``'s exercises sections, in the language ``tag``: the list of its
    units, ("code", source) or ("prose", visible paragraph)."""
    exercises, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "code":
            if inside and exercises:
                exercises[-1].append(("code", cell.source))
            continue
        if tag not in cell.metadata.get("tags", []) or "question" in cell.metadata["tags"]:
            continue
        for paragraph in re.split(r"\n\s*\n", _visible(cell.source)):
            if paragraph.startswith("## "):
                inside = bool(re.match(r"## \d+\. (Exercises|练习)$", paragraph.splitlines()[0]))
            elif inside and re.match(r"\*\*(Exercise|练习) \d", paragraph):
                exercises.append([("start", paragraph)])
            elif inside and exercises and paragraph.strip():
                exercises[-1].append(("prose", paragraph))
    return exercises


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_no_visible_prose_after_an_exercise_runs(path, edition):
    """An exercise's prose after its last code cell explains what the code printed: the
    answer. In the student edition it is folded, in every exercise of every lesson."""
    nb = _student(path, edition)
    tags = ["lang-en", "lang-zh"] if edition == "bilingual" else [f"lang-{edition}"]
    count = 0
    for tag in tags:
        for exercise in _exercises(nb, tag):
            kinds = [k for k, _ in exercise]
            if "code" not in kinds:
                continue
            count += 1
            last = len(kinds) - 1 - kinds[::-1].index("code")
            assert [text for _, text in exercise[last + 1:]] == [], exercise[0][1][:80]
    if path.stem[:2] in ("01", "02", "03", "04", "07", "08"):
        assert count  # the scan found the exercises it is about


@pytest.mark.parametrize("before, after", [
    ("Then fix it (a model solution is in the collapsed cell after it).", "Then fix it."),
    ("然后修正它（其后折叠的单元格中有参考答案）。", "然后修正它。"),
    ("Both modes; the collapsed cell after it holds a model solution and runs the test on it.", "Both modes."),
    ("两种模式下对照；其后折叠的单元格中是参考答案，并用测试检验了它。", "两种模式下对照。"),
    ("Run it. A model solution follows in a collapsed cell; try it yourself first.", "Run it."),
    ("反复运行。下面折叠的单元格中有参考答案，请先自己尝试。", "反复运行。"),
    ("**Exercise 2 (write both).** Write both, attention first. A model solution:",
     "**Exercise 2 (write both).** Write both, attention first."),
    ("**练习 2（两个都写）。** 写出两个，先注意力后前馈。参考答案：", "**练习 2（两个都写）。** 写出两个，先注意力后前馈。"),
    ("A model solution:", ""),
    ("Predict what it says (a, b), then read the model solution after it.", "Predict what it says (a, b)."),
    ("先预测它会说什么（a、b），再看其后的参考答案。", "先预测它会说什么（a、b）。"),
    ("Predict, then fix it; a model solution follows.\n\nMore.", "Predict, then fix it.\n\nMore."),
    ("No solution is named here (1, 2).", "No solution is named here (1, 2)."),
])
def test_words_about_a_removed_solution_go(before, after):
    assert drop_solution_mentions(before) == after


def test_answer_after_an_exercise_is_folded_and_instructions_stay():
    en = lambda s: _md(s, "lang-en")  # noqa: E731
    code = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[
        en("## 3. Exercises\n\n**Exercise 1.** Predict."), code("print(1)"),
        en("It prints 1.\n\n**Exercise 2.** Write it."), code("first_try()"), en("Fix it."),
        code("# model solution\nx = 2", metadata={"jupyter": {"source_hidden": True}}),
        en("**Exercise 3.** No code."), en("## 4. Interview questions\n\nAfter."), code("y = 3"),
        en("Not an exercise."),
    ])
    out = student_notebook(nb, "en")
    sources = [c.source for c in out.cells if c.cell_type == "markdown"]
    assert sources[1] == ("<details><summary>Answer</summary>\n\nIt prints 1.\n\n</details>\n\n"
                          "**Exercise 2.** Write it.")
    assert sources[2] == "Fix it." and sources[-1] == "Not an exercise."
