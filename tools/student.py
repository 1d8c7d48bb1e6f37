"""The student edition: every lesson as a teacher hands it out, with nothing to copy from.

``make student`` (``python -m tools.student``) writes ``build/student/<edition>/NN_x.ipynb``
for the editions ``en``, ``zh`` (one language, as :mod:`tools.export` makes them) and
``bilingual`` (both languages, as in ``notebooks/``), and copies the figures the lessons embed
to ``build/student/images``. In every lesson of the student edition

* **outputs are cleared**: no output, no execution count, no saved widget state; the learner
  runs every cell;
* **model solutions are removed**: a code cell whose first line starts with
  ``# model solution`` is replaced by an empty code cell for the learner's own solution (a
  code cell hidden in the full edition, ``metadata.jupyter.source_hidden``, must be one: any
  other hidden cell is an error, so that no cell is lost silently), and the lesson's words
  about it go with it: in a section that loses a model solution, every sentence, clause or
  parenthesis that speaks of the model solution ("a model solution is in the collapsed cell
  below", "（其后折叠的单元格中有参考答案）", ...) is taken out of the prose
  (:func:`drop_solution_mentions`), and a cell left empty is dropped;
* **answers are hidden until asked**: the answer of every interview question (cells tagged
  ``question``: a bold question, then the answer) and every written answer to an exercise or
  a "predict" question is folded into a ``<details>`` block: JupyterLab, the classic notebook
  and GitHub show "Answer · 答案" and open it on a click. A written answer is recognised in two
  ways: a paragraph that starts with ``**Answer``/``*Answer`` or ``**上面问题的答案``/``*答案``
  (to the end of its cell), and, in an exercises section (``## N. Exercises`` /
  ``## N. 练习``), by its place: the prose of an exercise (from ``**Exercise N`` /
  ``**练习 N`` to the next one) that comes after the exercise's last code cell is the answer
  to what that code printed (:func:`exercise_answers`). Answers already in a ``<details>``
  block stay as they are.

The full edition stays in ``notebooks/``; the lessons' own text does not change.

    python -m tools.student                    # every lesson, every edition
    python -m tools.student --lessons 1 02_layer_norm --editions zh

A lesson is named by its number (``1``, ``01``) or its name (``01_batch_norm``), see
:func:`tools.course.resolve_lesson`; a name that is not exactly one lesson is refused.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import re
import shutil
import sys

import nbformat
from helpers.mock_interview import QUESTION_CELL

from .course import BUILD, IMAGES, lesson_paths
from .export import LANG_TAGS, single_language

EDITIONS = ("en", "zh", "bilingual")
STUDENT = BUILD / "student"

SOLUTION_MARK = "# model solution"
# the learner's empty cell that takes a model solution's place, per edition
YOUR_SOLUTION = {
    "en": "# your solution (the model solution is in the full edition of the course)\n",
    "zh": "# 在这里写你的解答（参考答案在课程的完整版中）\n",
    "bilingual": "# your solution · 在这里写你的解答\n",
}
SUMMARY = {"lang-en": "Answer", "lang-zh": "答案"}
# the first paragraph of a written answer (the rest of its cell is the answer too)
_ANSWER_START = re.compile(r"^\s*(\*\*Answer|\*Answer|\*\*上面问题的答案|\*\*答案|\*答案)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# an exercises section's heading, and the paragraph that starts an exercise
_EXERCISES_HEADING = re.compile(r"^##\s+(?:\d+\.\s*)?(?:Exercises|练习)\s*$", re.M)
_EXERCISE_START = re.compile(r"^\s*\*\*(?:Exercise|练习)\s*\d+")
# what the lessons call a model solution, in either language
_SOLUTION_WORDS = r"(?:[Mm]odel solutions?|参考答案|参考解答)"
_NOT_CLAUSE = r"[^,，;；.。!?！？()（）\n]"
_SOLUTION_MENTIONS = [  # the smallest unit that holds the mention goes, in this order
    re.compile(r"[ \t]*[(（][^()（）\n]*" + _SOLUTION_WORDS + r"[^()（）\n]*[)）]"),      # a parenthesis
    re.compile(r"[ \t]*[;；][^;；.。\n]*" + _SOLUTION_WORDS + r"[^;；.。\n]*(?=[.。])"),   # a clause after ;
    re.compile(r"[ \t]*[,，]" + _NOT_CLAUSE + "*" + _SOLUTION_WORDS + _NOT_CLAUSE + r"*(?=[.。])"),  # last clause
    re.compile(r"(?:(?<=^)|(?<=[.!?:。！？：])|(?<=\*\*))[ \t]*[^.!?。！？\n]*" + _SOLUTION_WORDS
               + r"[^.!?。！？\n]*(?:[.!?:。！？：]|$)", re.M),                                 # a sentence
]


def _details(summary: str, body: str) -> str:
    # blank lines around the body: markdown inside an HTML block is rendered only then
    return f"<details><summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _language_tag(cell: nbformat.NotebookNode) -> str:
    tags = [t for t in cell.metadata.get("tags", []) if t in SUMMARY]
    if len(tags) != 1:
        raise ValueError("a markdown cell needs exactly one of the tags lang-en, lang-zh")
    return tags[0]


def hide_answers(cell: nbformat.NotebookNode) -> str:
    """The source of markdown ``cell`` with its answer folded into ``<details>`` (see the
    module docstring); the source unchanged if it holds no answer outside ``<details>``.
    Raises ``ValueError`` for a question cell that is not a bold question and an answer."""
    source = cell.source
    tags = cell.metadata.get("tags", [])
    if "question" in tags:
        match = QUESTION_CELL.match(source)
        if match is None or not match["back"].strip():
            raise ValueError(f"a question cell must be a bold question, then its answer: {source[:80]!r}")
        front = source[:match.start("back")].rstrip()
        return front + "\n\n" + _details(SUMMARY[_language_tag(cell)], match["back"])
    paragraphs = _PARAGRAPH_BREAK.split(source)
    for i, paragraph in enumerate(paragraphs):
        if _ANSWER_START.match(paragraph):
            body = "\n\n".join(paragraphs[i:])
            if "<details>" in body:
                raise ValueError(f"an answer paragraph mixed with a <details> block: {paragraph[:80]!r}")
            summary = SUMMARY[_language_tag(cell)]
            return "\n\n".join(paragraphs[:i] + [_details(summary, body)])
    return source


def drop_solution_mentions(source: str) -> str:
    """``source`` without the sentences, clauses and parentheses that speak of a model
    solution (see :data:`_SOLUTION_MENTIONS`); paragraphs left empty are dropped."""
    for pattern in _SOLUTION_MENTIONS:
        source = pattern.sub("", source)
    paragraphs = [p.rstrip() for p in _PARAGRAPH_BREAK.split(source)]
    return "\n\n".join(p for p in paragraphs if p.strip())


def _sections(cells: list, lang: str) -> list[tuple[int, int]]:
    """``(start, end)`` cell ranges of the sections of ``cells``: from a ``## `` heading
    tagged ``lang`` to the next (in a bilingual lesson, each holds the twins' cells too)."""
    starts = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## ")
              and lang in c.metadata.get("tags", [])]
    return list(zip(starts, starts[1:] + [len(cells)]))


def exercise_answers(cells: list, lang: str) -> dict[int, list[int]]:
    """The answers that an exercises section gives by their place: for each markdown cell
    tagged ``lang`` (index in ``cells``), the indices of its paragraphs that come after the
    last code cell of their exercise, while the exercise has a code cell (see the module
    docstring)."""
    stream = [i for i, c in enumerate(cells) if c.cell_type == "code"
              or (c.cell_type == "markdown" and lang in c.metadata.get("tags", []))]
    # walk the language's cells as (cell, paragraph) units: exercise starts, code, prose
    units = []
    in_exercises = False
    for i in stream:
        cell = cells[i]
        if cell.cell_type == "code":
            units.append(("code", i, None))
            continue
        if "question" in cell.metadata.get("tags", []):
            continue  # an interview question folds its own answer (hide_answers)
        for k, paragraph in enumerate(_PARAGRAPH_BREAK.split(cell.source)):
            if paragraph.startswith("## "):
                in_exercises = bool(_EXERCISES_HEADING.match(paragraph.splitlines()[0]))
                units.append(("end", i, k))
            elif in_exercises and _EXERCISE_START.match(paragraph):
                units.append(("start", i, k))
            elif in_exercises:
                units.append(("prose", i, k))
    out: dict[int, list[int]] = {}
    seen_code = False
    pending: list[tuple[int, int]] = []
    for kind, i, k in units + [("end", None, None)]:
        if kind == "code":
            seen_code, pending = True, []  # prose before a code cell is an instruction
        elif kind == "prose":
            if seen_code:
                pending.append((i, k))
        else:  # an exercise ends: what followed its last code cell is its answer
            for j, m in pending:
                out.setdefault(j, []).append(m)
            seen_code, pending = False, []
    return out


def _fold_exercise_answers(cells: list, lang_tags: list[str]) -> None:
    for tag in lang_tags:
        for i, indices in exercise_answers(cells, tag).items():
            paragraphs = _PARAGRAPH_BREAK.split(cells[i].source)
            chosen = [k for k in indices if "<details>" not in paragraphs[k]]
            if not chosen:
                continue
            body = "\n\n".join(paragraphs[k] for k in chosen)
            folded = _details(SUMMARY[tag], body)
            kept = [p if k not in chosen else (folded if k == chosen[0] else None)
                    for k, p in enumerate(paragraphs)]
            cells[i].source = "\n\n".join(p for p in kept if p is not None)


def is_model_solution(cell: nbformat.NotebookNode) -> bool:
    """Whether ``cell`` is a model solution: a code cell whose first line starts with
    ``# model solution``. Raises ``ValueError`` for a code cell hidden in the full edition
    (``metadata.jupyter.source_hidden``) that does not say it is one."""
    if cell.cell_type != "code":
        return False
    if cell.source.lstrip().startswith(SOLUTION_MARK):
        return True
    if cell.metadata.get("jupyter", {}).get("source_hidden"):
        raise ValueError(f"a code cell with hidden source must start with {SOLUTION_MARK!r}: "
                         f"{cell.source[:80]!r}")
    return False


def student_notebook(nb: nbformat.NotebookNode, edition: str) -> nbformat.NotebookNode:
    """The student edition of the bilingual lesson ``nb`` (``edition``: en, zh or bilingual)."""
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}; choose from {', '.join(EDITIONS)}")
    out = single_language(nb, edition) if edition in LANG_TAGS else copy.deepcopy(nb)
    out.metadata.pop("widgets", None)
    removed = [i for i, cell in enumerate(out.cells) if is_model_solution(cell)]
    for i in removed:
        out.cells[i] = nbformat.v4.new_code_cell(YOUR_SOLUTION[edition], id=out.cells[i].get("id"))
    # the words about a removed solution go too, in the section that held it
    for start, end in _sections(out.cells, LANG_TAGS["en" if edition == "bilingual" else edition]):
        if not any(start <= i < end for i in removed):
            continue
        for cell in out.cells[start:end]:
            if cell.cell_type == "markdown":
                cell.source = drop_solution_mentions(cell.source)
    out.cells = [c for c in out.cells if c.cell_type != "markdown" or c.source.strip()]
    _fold_exercise_answers(out.cells, [t for t in SUMMARY if edition == "bilingual" or t == LANG_TAGS[edition]])
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = hide_answers(cell)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("jupyter", None)
    return out


def export_student(editions: list[str], lessons: list[pathlib.Path],
                   out: pathlib.Path = STUDENT) -> list[pathlib.Path]:
    """Write ``out/<edition>/<lesson>.ipynb`` for every edition and lesson, and copy the
    lessons' images to ``out/images``. Returns the written paths."""
    written = []
    for edition in editions:
        folder = out / edition
        folder.mkdir(parents=True, exist_ok=True)
        for path in lessons:
            nb = student_notebook(nbformat.read(path, as_version=4), edition)
            target = folder / path.name
            nbformat.write(nb, target)
            written.append(target)
            print(f"[student] {target.relative_to(out.parent.parent)}  ({len(nb.cells)} cells)", flush=True)
    if IMAGES.is_dir():
        shutil.copytree(IMAGES, out / "images", dirs_exist_ok=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--editions", nargs="+", default=list(EDITIONS), choices=EDITIONS)
    parser.add_argument("--lessons", nargs="*", default=None, metavar="NN",
                        help="lessons by number or name, e.g. 1 05 02_layer_norm (default: all)")
    parser.add_argument("--out", type=pathlib.Path, default=STUDENT)
    args = parser.parse_args(argv)
    try:
        lessons = lesson_paths(args.lessons)
    except ValueError as err:
        parser.error(str(err))
    export_student(args.editions, lessons, args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
