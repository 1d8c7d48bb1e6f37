r"""A timed mock interview drawn from the interview questions of every lesson.

The questions are the markdown cells tagged ``question`` (a bold question, then the answer;
an English cell tagged ``lang-en`` followed by its Chinese twin tagged ``lang-zh``), the same
cells the flashcards are made from. A question repeated word for word in a later lesson is
asked once, under the lesson that teaches it.

:class:`MockInterview` draws a seeded selection, one lesson (topic) after another so that
the topics are spread, and never the same question twice::

    from helpers.mock_interview import MockInterview

    mock = MockInterview(n=6, seed=1)
    mock.plan()          # the selection: lesson and question, no answers
    mock.ask()           # question 1; the clock starts
    mock.reveal()        # its answer
    mock.grade(True)     # your verdict; the clock stops
    mock.tally()         # score, per topic; tally(times=True) adds the times

Printed output depends only on the seed and the verdicts, except ``tally(times=True)``,
which prints how long each answer took. Lesson 12, section 6.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["Question", "load_questions", "select", "MockInterview"]

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
#: A question cell (tagged ``question``): a **bold question**, then its answer. The one
#: definition of the format, also used by tools.flashcards and tools.student.
QUESTION_CELL = re.compile(r"^\s*\*\*(?P<front>.+?)\*\*\s*(?:\n\s*\n|\n|$)(?P<back>.*)\Z", re.S)
#: The "Question N." / "问 N：" prefix of a question.
QUESTION_NUMBER = re.compile(r"^\s*(?:Question\s+\d+\s*[.:]|问\s*\d+\s*[：:.．])\s*")
_TITLE = re.compile(r"^#\s+\d+\s*·\s*(?P<topic>[^:：，,\n]+)")
_SECTION = re.compile(r"^##\s")
_SUBSECTION = re.compile(r"^###\s+(?:\d+(?:\.\d+)*\.?\s+)?(?P<topic>[^\n]+)")


@dataclass(frozen=True)
class Question:
    """One bilingual question: its ``lesson`` (``"01"``), the lesson's topic in English and
    Chinese, and the question and answer in both languages (markdown, number removed)."""
    lesson: str
    topic_en: str
    topic_zh: str
    front_en: str
    back_en: str
    front_zh: str
    back_zh: str


def _source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _unnumbered(front: str) -> str:
    return " ".join(QUESTION_NUMBER.sub("", front).split())


def load_questions(notebooks: Sequence[pathlib.Path] | None = None) -> list[Question]:
    """Every lesson's questions, in lesson order, pairs repeated word for word (in either
    language) in a later lesson left out. A question's topic is its lesson's title (up to the
    colon), or the ``###`` heading above it within its section (lesson 12: "BatchNorm", ...)."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if notebooks is None else notebooks
    questions, seen = [], set()
    for path in paths:
        path = pathlib.Path(path)
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        topic = {"en": path.stem, "zh": path.stem}
        sub: dict[str, str | None] = {"en": None, "zh": None}
        cards: dict[str, list[tuple[str, str, str]]] = {"en": [], "zh": []}
        for cell in cells:
            if cell.get("cell_type") != "markdown":
                continue
            tags = cell.get("metadata", {}).get("tags", [])
            lang = "en" if "lang-en" in tags else "zh" if "lang-zh" in tags else None
            if lang is None:
                continue
            text = _source(cell)
            title = _TITLE.match(text)
            if title and topic[lang] == path.stem:
                topic[lang] = title["topic"].strip()
            if _SECTION.match(text):
                sub[lang] = None
            heading = _SUBSECTION.match(text)
            if heading:
                sub[lang] = heading["topic"].strip()
            if "question" in tags:
                m = QUESTION_CELL.match(text)
                if m:
                    cards[lang].append((_unnumbered(m["front"]), m["back"].strip(),
                                        sub[lang] or topic[lang]))
        if len(cards["en"]) != len(cards["zh"]):
            raise ValueError(f"{path.name}: {len(cards['en'])} English and {len(cards['zh'])} "
                             f"Chinese questions do not pair up")
        for (fe, be, te), (fz, bz, tz) in zip(cards["en"], cards["zh"]):
            if fe in seen or fz in seen:
                continue
            seen.update((fe, fz))
            questions.append(Question(path.name[:2], te, tz, fe, be, fz, bz))
    return questions


def select(questions: Sequence[Question], n: int, seed: int,
           lessons: Sequence[str] | None = None) -> list[Question]:
    """``n`` distinct questions drawn with ``random.Random(seed)``: the lessons (optionally
    only ``lessons``) in a shuffled order, one question from each in turn, so that ``n``
    questions cover ``min(n, number of lessons)`` lessons. ``ValueError`` if fewer than ``n``
    questions are available."""
    pool = [q for q in questions if lessons is None or q.lesson in lessons]
    if n > len(pool):
        raise ValueError(f"asked for {n} questions, only {len(pool)} available")
    rng = random.Random(seed)
    by_lesson: dict[str, list[Question]] = {}
    for q in pool:
        by_lesson.setdefault(q.lesson, []).append(q)
    order = sorted(by_lesson)
    rng.shuffle(order)
    for lesson in order:
        rng.shuffle(by_lesson[lesson])
    chosen: list[Question] = []
    while len(chosen) < n:
        for lesson in order:
            if by_lesson[lesson] and len(chosen) < n:
                chosen.append(by_lesson[lesson].pop())
    return chosen


@dataclass
class _Answer:
    question: Question
    ok: bool
    seconds: float


@dataclass
class MockInterview:
    """A mock interview of ``n`` questions drawn with ``seed`` (see :func:`select`), asked one
    at a time with the answer hidden until :meth:`reveal`, a clock per question, a budget of
    ``seconds_per_question``, and a self-graded tally. ``language``: ``"en"``, ``"zh"`` or
    ``"both"``. ``clock`` (seconds) is replaceable for tests."""

    n: int = 8
    seed: int = 0
    language: str = "both"
    seconds_per_question: float = 120.0
    lessons: Sequence[str] | None = None
    questions: Sequence[Question] | None = None
    clock: Callable[[], float] = time.monotonic
    selection: list[Question] = field(init=False)
    answers: list[_Answer] = field(init=False, default_factory=list)

    def __post_init__(self):
        if self.language not in ("en", "zh", "both"):
            raise ValueError(f"language must be 'en', 'zh' or 'both', got {self.language!r}")
        pool = load_questions() if self.questions is None else self.questions
        self.selection = select(pool, self.n, self.seed, self.lessons)
        self._current: int | None = None
        self._started: float | None = None
        self._start_all: float | None = None

    # ---------------------------------------------------------------- printing
    def _lines(self, q: Question, part: str) -> list[str]:
        en, zh = (q.front_en, q.front_zh) if part == "front" else (q.back_en, q.back_zh)
        return {"en": [en], "zh": [zh], "both": [en, zh]}[self.language]

    def _topic(self, q: Question) -> str:
        return {"en": q.topic_en, "zh": q.topic_zh,
                "both": f"{q.topic_en} / {q.topic_zh}"}[self.language]

    def plan(self) -> None:
        """Print the selection: for each question its lesson, topic and question (no answer)."""
        print(f"Mock interview: {self.n} questions, seed {self.seed}, "
              f"{self.seconds_per_question:g} s each / 模拟面试：{self.n} 道题，"
              f"随机种子 {self.seed}，每题 {self.seconds_per_question:g} 秒")
        for i, q in enumerate(self.selection, 1):
            first, *rest = self._lines(q, "front")
            print(f"{i}. [lesson {q.lesson} · {self._topic(q)}] {first}")
            for line in rest:
                print(f"   {line}")

    def ask(self) -> None:
        """Show the next question (without its answer) and start its clock."""
        if self._current is not None:
            raise RuntimeError("grade the current question first: grade(True) or grade(False)")
        if len(self.answers) == self.n:
            raise RuntimeError("the interview is over: see tally()")
        self._current = len(self.answers)
        self._started = self.clock()
        if self._start_all is None:
            self._start_all = self._started
        q = self.selection[self._current]
        print(f"Question {self._current + 1} of {self.n} / 第 {self._current + 1} 题，共 {self.n} 题"
              f" (lesson {q.lesson} · {self._topic(q)})")
        for line in self._lines(q, "front"):
            print(line)

    def reveal(self) -> None:
        """Print the answer of the current question (the clock keeps running until grade)."""
        if self._current is None:
            raise RuntimeError("no question asked yet: call ask() first")
        q = self.selection[self._current]
        print(f"Answer (its sections are those of lesson {q.lesson}) / 答案（节号指第 {q.lesson} 课）:")
        for line in self._lines(q, "back"):
            print(line)

    def grade(self, ok: bool) -> None:
        """Record your own verdict on the current question and stop its clock."""
        if self._current is None:
            raise RuntimeError("no question asked yet: call ask() first")
        seconds = self.clock() - self._started
        self.answers.append(_Answer(self.selection[self._current], bool(ok), seconds))
        self._current = None

    # ---------------------------------------------------------------- the result
    def score(self) -> tuple[int, int]:
        """(right, graded)."""
        return sum(a.ok for a in self.answers), len(self.answers)

    def by_topic(self) -> dict[str, tuple[int, int]]:
        """Per lesson ``"NN · topic"``: (right, graded), in order of first appearance."""
        out: dict[str, list[int]] = {}
        for a in self.answers:
            key = f"{a.question.lesson} · {self._topic(a.question)}"
            out.setdefault(key, [0, 0])
            out[key][0] += a.ok
            out[key][1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    def tally(self, times: bool = False) -> None:
        """Print the score, per topic, and what to revise; with ``times=True`` also each
        question's time against the budget and the total (not reproducible output)."""
        right, graded = self.score()
        percent = f" ({100 * right / graded:.0f}%)" if graded else ""
        print(f"Score: {right} of {graded} graded right{percent}; {self.n - graded} not asked / "
              f"得分：已评 {graded} 题，答对 {right} 题；{self.n - graded} 题未问")
        for topic, (r, g) in self.by_topic().items():
            print(f"  lesson {topic}: {r}/{g}")
        wrong = sorted({a.question.lesson for a in self.answers if not a.ok})
        if wrong:
            print("Revise / 复习: " + ", ".join(f"lesson {w}" for w in wrong))
        if times:
            for i, a in enumerate(self.answers, 1):
                over = " over budget / 超时" if a.seconds > self.seconds_per_question else ""
                print(f"  question {i}: {a.seconds:.0f} s{over}")
            total = sum(a.seconds for a in self.answers)
            print(f"Total / 总计: {total:.0f} s of {self.seconds_per_question * graded:.0f} s")
