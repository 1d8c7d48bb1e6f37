"""The student edition (tools/student.py, ``make student``): outputs cleared, model solutions
removed, every answer folded away, and nothing else changed."""

import ast
import re

import nbformat
import pytest

from tools.course import lessons
from tools.student import EDITIONS, export_student, hide_answers, student_notebook

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
        "04": ["so in units of the token's own spread its output", "RMSNorm 除以的是"],
        "05": ["with 10 warmup steps at", "不预热的 Pre-LN 在两种学习率下"],
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
