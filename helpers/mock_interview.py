r"""A timed mock interview drawn from the interview questions of every lesson.

**The pool.** The questions are the markdown cells tagged ``question`` (an English cell
tagged ``lang-en`` followed by its Chinese twin tagged ``lang-zh``), the same cells the
flashcards are made from (:func:`load_questions`). A question repeated word for word in a
later lesson is asked once, under the lesson that teaches it; :func:`near_duplicates` finds
the pairs that are worded differently but ask the same thing (a test keeps the pool free of
them).

**The question cell.** A bold question, a model answer, then the rubric an interviewer
grades with::

    **Question 3. Why does ...?**

    A model answer of a few lines.

    **Key points**
    - a point the candidate must make
    - another

    **Red flags**
    - "a circulating wrong answer": why it is wrong, with the number a lesson prints

The Chinese twin uses the markers ``**要点**`` and ``**危险信号**`` with as many bullets in
each list. A question without the markers has an empty rubric (:func:`rubric_problems`
lists such questions); markers that are present but malformed raise ``ValueError`` naming
the lesson and the question.

**How often it is asked.** ``docs/interview_survey.json`` maps each question (by lesson and
English cell id) to the canonical questions that public interview collections ask; a
question's ``frequency`` is the number of distinct collections asking any of them (0 when
the file is absent). :func:`select` weights the draw by it, :func:`most_asked` ranks by it.

**The mock.** :class:`MockInterview` draws a seeded selection (:func:`select`). In JupyterLab
:meth:`MockInterview.widget` asks one question at a time with a visible countdown, a
*Reveal* button (the answer also appears when the time is up), the key points as
checkboxes, the red flags, and a final report by topic. Without widgets, the same interview
in text::

    from helpers.mock_interview import MockInterview

    mock = MockInterview(n=6, seed=1)
    mock.plan()          # the selection: lesson and question, no answers
    mock.ask()           # question 1; the clock starts
    mock.reveal()        # its answer and rubric; the answering time stops here
    mock.grade(2)        # key points you made: a number, a list of ticks, or True/False
    mock.tally()         # score per topic and what to revise; tally(times=True) adds times

A question's score is key points hit / key points (a question without a rubric has one
point: "the essentials"). Output is a function of the seed and the grades only, except
``tally(times=True)``. Lesson 12, sections 1 and 7.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import pathlib
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

__all__ = ["Question", "Rubric", "parse_rubric", "load_questions", "load_survey",
           "with_frequencies", "survey_sources", "rubric_problems", "near_duplicates", "similarity", "draw_weight",
           "select", "most_asked", "qualify_references", "markdown_to_html", "MockInterview"]

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SURVEY = ROOT / "docs" / "interview_survey.json"
#: A question cell (tagged ``question``): a **bold question**, then its answer. The one
#: definition of the format, also used by tools.flashcards and tools.student.
QUESTION_CELL = re.compile(r"^\s*\*\*(?P<front>.+?)\*\*\s*(?:\n\s*\n|\n|$)(?P<back>.*)\Z", re.S)
#: The "Question N." / "问 N：" prefix of a question.
QUESTION_NUMBER = re.compile(r"^\s*(?:Question\s+\d+\s*[.:]|问\s*\d+\s*[：:.．])\s*")
#: The rubric's markers, each alone on its line: (key points, red flags) per language.
MARKERS = {"en": ("**Key points**", "**Red flags**"), "zh": ("**要点**", "**危险信号**")}
#: How many key points and red flags a question has.
KEY_POINTS_RANGE, RED_FLAGS_RANGE = (2, 4), (1, 3)
_MARKER_LIKE = re.compile(r"^\s*\*\*\s*(?:key\s*points?|red\s*flags?|要点|危险信号)", re.I)
_TITLE = re.compile(r"^#\s+\d+\s*·\s*(?P<topic>[^:：，,\n]+)")
_SECTION = re.compile(r"^##\s")
_SUBSECTION = re.compile(r"^###\s+(?:\d+(?:\.\d+)*\.?\s+)?(?P<topic>[^\n]+)")


# ------------------------------------------------------------------------------- the rubric

@dataclass(frozen=True)
class Rubric:
    """The back of a question cell: the model ``answer`` (markdown), then the ``key_points``
    and ``red_flags`` (markdown bullets without their ``- ``); both empty when the cell has no
    rubric yet."""
    answer: str
    key_points: tuple[str, ...] = ()
    red_flags: tuple[str, ...] = ()


def parse_rubric(back: str, language: str, where: str = "a question") -> Rubric:
    """Split the back of a question cell (the text after the bold question) into its model
    answer, key points and red flags (module docstring). ``language``: ``"en"`` or ``"zh"``
    (which markers to expect). No markers: the whole back is the answer, the lists are empty.
    ``ValueError`` (its message starts with ``where``) when the markers are malformed: a marker
    not alone on its line or of the other language, red flags before key points, one list
    without the other, an empty list, an empty answer, or a line in a list that is not a
    ``- `` bullet (an indented line continues the bullet above it)."""
    if language not in MARKERS:
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    key_marker, flag_marker = MARKERS[language]
    other = MARKERS["zh" if language == "en" else "en"]
    state, answer, lists = "answer", [], {"key": [], "flag": []}

    def fail(message: str):
        raise ValueError(f"{where}: {message}")

    for number, line in enumerate(back.splitlines(), 1):
        stripped = line.strip()
        if stripped in other:
            fail(f"line {number}: {stripped} is a marker of the other language "
                 f"(this cell's are {key_marker} and {flag_marker})")
        if stripped == key_marker:
            if state != "answer":
                fail(f"line {number}: a second {key_marker}, or {key_marker} after {flag_marker}")
            state = "key"
            continue
        if stripped == flag_marker:
            if state == "answer":
                fail(f"line {number}: {flag_marker} without {key_marker} before it")
            if state == "flag":
                fail(f"line {number}: a second {flag_marker}")
            state = "flag"
            continue
        if _MARKER_LIKE.match(stripped):
            fail(f"line {number}: {stripped[:40]!r} looks like a rubric marker but is not "
                 f"{key_marker} or {flag_marker} alone on its line")
        if state == "answer":
            answer.append(line)
        elif stripped.startswith("- "):
            lists[state].append(stripped[2:].strip())
        elif not stripped:
            continue
        elif line[:1].isspace() and lists[state]:
            lists[state][-1] += " " + stripped
        else:
            marker = key_marker if state == "key" else flag_marker
            fail(f"line {number}: after {marker} every line must be a '- ' bullet, got "
                 f"{stripped[:40]!r}")
    if state == "answer":
        return Rubric(back.strip())
    if state == "key":
        fail(f"{key_marker} without {flag_marker}")
    if not lists["key"] or not lists["flag"]:
        fail(f"an empty list under {key_marker if not lists['key'] else flag_marker}")
    text = "\n".join(answer).strip()
    if not text:
        fail(f"no model answer before {key_marker}")
    return Rubric(text, tuple(lists["key"]), tuple(lists["flag"]))


# ------------------------------------------------------------------------------ questions

@dataclass(frozen=True)
class Question:
    """One bilingual question: its ``lesson`` (``"01"``), the topic in English and Chinese,
    the question (``front``, number removed) and everything after it (``back``) in both
    languages, the English cell's ``cell_id``, and how many surveyed collections ask it
    (``frequency``; their ids: ``sources``). ``answer_*``, ``key_points_*`` and
    ``red_flags_*`` are parsed from the backs (:func:`parse_rubric`); ``ValueError`` when the
    twins' rubrics do not have the same number of key points and of red flags."""
    lesson: str
    topic_en: str
    topic_zh: str
    front_en: str
    back_en: str
    front_zh: str
    back_zh: str
    cell_id: str = ""
    frequency: int = 0
    sources: tuple[str, ...] = ()
    answer_en: str = field(init=False, repr=False)
    answer_zh: str = field(init=False, repr=False)
    key_points_en: tuple[str, ...] = field(init=False, repr=False)
    key_points_zh: tuple[str, ...] = field(init=False, repr=False)
    red_flags_en: tuple[str, ...] = field(init=False, repr=False)
    red_flags_zh: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self):
        where = f"lesson {self.lesson}, question {self.front_en!r}"
        en = parse_rubric(self.back_en, "en", where + " (English)")
        zh = parse_rubric(self.back_zh, "zh", where + " (Chinese)")
        counts = {lang: (len(r.key_points), len(r.red_flags)) for lang, r in (("en", en), ("zh", zh))}
        if counts["en"] != counts["zh"]:
            raise ValueError(f"{where}: the twins' rubrics differ: (key points, red flags) = "
                             f"{counts['en']} in English, {counts['zh']} in Chinese")
        for name, value in (("answer_en", en.answer), ("answer_zh", zh.answer),
                            ("key_points_en", en.key_points), ("key_points_zh", zh.key_points),
                            ("red_flags_en", en.red_flags), ("red_flags_zh", zh.red_flags)):
            object.__setattr__(self, name, value)

    @property
    def key(self) -> str:
        """``"NN:<English cell id>"``, the question's key in the survey."""
        return f"{self.lesson}:{self.cell_id}"

    @property
    def has_rubric(self) -> bool:
        return bool(self.key_points_en)

    @property
    def points(self) -> int:
        """Key points to grade: the rubric's, or 1 (the essentials) without a rubric."""
        return len(self.key_points_en) or 1


def _source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _unnumbered(front: str) -> str:
    return " ".join(QUESTION_NUMBER.sub("", front).split())


def load_questions(notebooks: Sequence[pathlib.Path] | None = None,
                   survey: pathlib.Path | dict | None = SURVEY) -> list[Question]:
    """Every lesson's questions, in lesson order, pairs repeated word for word (in either
    language) in a later lesson left out. A question's topic is its lesson's title (up to the
    colon), or the ``###`` heading above it within its section (lesson 12: "BatchNorm", ...).
    Frequencies come from ``survey`` (a path or the loaded JSON; see :func:`with_frequencies`);
    ``survey=None`` or a missing file: frequency 0 for all. ``ValueError`` names the lesson
    and question of a malformed rubric, or a lesson whose questions do not pair up."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if notebooks is None else notebooks
    questions, seen = [], set()
    for path in paths:
        path = pathlib.Path(path)
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        topic = {"en": path.stem, "zh": path.stem}
        sub: dict[str, str | None] = {"en": None, "zh": None}
        cards: dict[str, list[tuple[str, str, str, str]]] = {"en": [], "zh": []}
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
                    cards[lang].append((m["front"].strip(), m["back"].strip(),
                                        sub[lang] or topic[lang], cell.get("id", "")))
        if len(cards["en"]) != len(cards["zh"]):
            raise ValueError(f"{path.name}: {len(cards['en'])} English and {len(cards['zh'])} "
                             f"Chinese questions do not pair up")
        for (fe, be, te, cid), (fz, bz, tz, _) in zip(cards["en"], cards["zh"]):
            ue, uz = _unnumbered(fe), _unnumbered(fz)
            if ue in seen or uz in seen:
                continue
            seen.update((ue, uz))
            try:
                questions.append(Question(path.name[:2], te, tz, ue, be, uz, bz, cid))
            except ValueError as error:
                raise ValueError(f"{path.name}, {fe.split('.')[0] if fe.startswith('Question') else fe[:40]}"
                                 f" (cell {cid}): {error}") from None
    return with_frequencies(questions, survey)


# ------------------------------------------------------------------ section references

_NUM = r"\d+(?:\.\d+)*(?:\s*\([a-z]\))?"
_EN_REF = re.compile(rf"\b(?P<word>[Ss]ections?)\s+(?P<nums>{_NUM}"
                     rf"(?:(?:\s*,\s*|\s+and\s+|\s+to\s+|\s*[-–]\s*){_NUM})*)")
_ZH_REF = re.compile(rf"第\s*{_NUM}(?:\s*(?:到|至|-|–)\s*{_NUM})?\s*节")
_NAMED_EN = re.compile(r"(?:[Ll]essons?\s+\d+|\d{4}[a-z]?|et al\.)\s*,\s*$")
_NAMED_ZH = re.compile(r"(?:第\s*\d+\s*课|\d{4}[a-z]?\s*[，,]|\d+\s*节\s*(?:和|、|及|与))\s*$")


def qualify_references(text: str, lesson: str, language: str) -> str:
    """Name the lesson in the bare section references of an answer of ``lesson`` (for a
    question shown outside its lesson: lesson 12's list, the widget, the flashcards).

    >>> qualify_references("(section 4; Ba 2016, section 3.1; lesson 01, section 2)", "02", "en")
    '(lesson 02, §4; Ba 2016, section 3.1; lesson 01, section 2)'
    >>> qualify_references("（第 7 节和第 8 节；第 01 课第 2 节）", "03", "zh")
    '（第 03 课第 7 节和第 8 节；第 01 课第 2 节）'
    """
    if language == "en":
        def en(m):
            if _NAMED_EN.search(text[:m.start()]):
                return m[0]
            lesson_word = "Lesson" if m["word"][0] == "S" else "lesson"
            marks = "§§" if m["word"].lower() == "sections" else "§"
            return f"{lesson_word} {lesson}, {marks}{m['nums']}"
        return _EN_REF.sub(en, text)

    def zh(m):
        if _NAMED_ZH.search(text[:m.start()]):
            return m[0]
        return f"第 {lesson} 课{m[0]}"
    return _ZH_REF.sub(zh, text)


# ------------------------------------------------------------------------- the survey

def load_survey(path: pathlib.Path | str | None = SURVEY) -> dict | None:
    """The survey (``docs/interview_survey.json``: its sources, the canonical questions they ask, and the
    canonical questions each question of the course answers) as a dict, or
    ``None`` when ``path`` is ``None`` or the file does not exist."""
    if path is None:
        return None
    path = pathlib.Path(path)
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def survey_sources(survey: dict | None, key: str) -> tuple[str, ...]:
    """The distinct sources (sorted) that ask the question ``key`` (``"NN:<English cell
    id>"``) according to ``survey``: those listed under each canonical question that
    ``survey["questions"][key]["asked"]`` names. ``()`` without a survey or for a question
    it does not list. ``ValueError`` for a canonical id or a source id it does not define."""
    if survey is None:
        return ()
    sources: set[str] = set()
    for canonical in survey.get("questions", {}).get(key, {}).get("asked", []):
        if canonical not in survey.get("asked", {}):
            raise ValueError(f"survey: {key} names {canonical!r}, not under 'asked'")
        for source in survey["asked"][canonical]["sources"]:
            if source not in survey.get("sources", {}):
                raise ValueError(f"survey: {canonical!r} names the source {source!r}, "
                                 f"not under 'sources'")
            sources.add(source)
    return tuple(sorted(sources))


def with_frequencies(questions: Iterable[Question], survey: pathlib.Path | dict | None = SURVEY
                     ) -> list[Question]:
    """``questions`` with ``sources`` (:func:`survey_sources`) and ``frequency`` (how many)
    from ``survey`` (a path or the loaded JSON): a question the survey does not list, or no
    survey, has frequency 0."""
    data = survey if isinstance(survey, dict) or survey is None else load_survey(survey)
    out = []
    for q in questions:
        sources = survey_sources(data, q.key)
        out.append(dataclasses.replace(q, frequency=len(sources), sources=sources))
    return out


def rubric_problems(questions: Iterable[Question] | None = None) -> list[str]:
    """What the strict check of the rubric finds: one line per question with no
    rubric, or with a number of key points outside 2 to 4 or of red flags outside 1 to 3.
    The default is the whole pool (:func:`load_questions`)."""
    questions = load_questions() if questions is None else questions
    problems = []
    for q in questions:
        name = f"lesson {q.lesson} (cell {q.cell_id}) {q.front_en[:70]!r}"
        if not q.has_rubric:
            problems.append(f"{name}: no **Key points** / **Red flags** rubric")
            continue
        k, r = len(q.key_points_en), len(q.red_flags_en)
        if not KEY_POINTS_RANGE[0] <= k <= KEY_POINTS_RANGE[1]:
            problems.append(f"{name}: {k} key points, not {KEY_POINTS_RANGE[0]} to {KEY_POINTS_RANGE[1]}")
        if not RED_FLAGS_RANGE[0] <= r <= RED_FLAGS_RANGE[1]:
            problems.append(f"{name}: {r} red flags, not {RED_FLAGS_RANGE[0]} to {RED_FLAGS_RANGE[1]}")
    return problems


# --------------------------------------------------------------------- near-duplicates

_STOP_WORDS = frozenset(
    "a an the of to in on for and or is are be it its does do did what which why how when "
    "where who with by as at from that this than not no can you your there their them they "
    "one two per each about into vs versus".split())


def _words(text: str) -> frozenset[str]:
    """Lower-case words of ``text`` (markdown, math and code marks dropped), without stop
    words, a plural ``s`` dropped from words longer than three letters."""
    words = set()
    for w in re.findall(r"[a-z0-9]+", re.sub(r"[`$\\*_]", " ", text.lower())):
        if w in _STOP_WORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        words.add(w)
    return frozenset(words)


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def similarity(a: Question, b: Question) -> float:
    r"""How alike two questions are, from 0 to 1: the mean of the Jaccard indices
    :math:`|A \cap B| / |A \cup B|` of the word sets of their English fronts and of their
    English model answers (stop words dropped; see ``_words``). The question alone misses
    rewordings ("What does InstanceNorm remove ..., and how do its defaults differ" against
    "How do InstanceNorm's defaults differ"); the answer alone misses short answers on
    the same topic; their mean catches both."""
    return (_jaccard(_words(a.front_en), _words(b.front_en))
            + _jaccard(_words(a.answer_en), _words(b.answer_en))) / 2


#: The threshold of :func:`near_duplicates`. Measured on the pool of 154 questions before the
#: interview questions' third edition: the 21 pairs reviewed as the same question (and then
#: merged) score 0.30 to 0.85, the three reviewed as different questions 0.20 to 0.25.
NEAR_DUPLICATE_THRESHOLD = 0.28


def near_duplicates(questions: Sequence[Question], threshold: float = NEAR_DUPLICATE_THRESHOLD
                    ) -> list[tuple[float, Question, Question]]:
    """Every pair of ``questions`` whose :func:`similarity` is at least ``threshold``, as
    ``(similarity, first, second)`` (first: earlier in ``questions``), most similar first."""
    words = [(_words(q.front_en), _words(q.answer_en)) for q in questions]
    pairs = []
    for i, (qi, (fi, ai)) in enumerate(zip(questions, words)):
        for j in range(i + 1, len(questions)):
            fj, aj = words[j]
            s = (_jaccard(fi, fj) + _jaccard(ai, aj)) / 2
            if s >= threshold:
                pairs.append((s, qi, questions[j]))
    pairs.sort(key=lambda p: -p[0])
    return pairs


# ------------------------------------------------------------------------ the draw

#: How much a topic's weight is cut for each question already drawn from it (select()).
TOPIC_DAMPING = 0.25


def draw_weight(frequency: int) -> float:
    r"""The weight of a question asked by ``frequency`` surveyed collections in the draw:
    :math:`2^{f/2}`, each collection that asks it multiplying its weight by :math:`\sqrt 2`.
    A question no collection asks keeps weight 1 (it still comes up); one asked by 13 of the
    24 surveyed collections weighs :math:`2^{6.5} \approx 90`, so the few questions that
    most collections ask are in most mocks, as in real interviews. (Weights linear in
    :math:`f`, such as :math:`1 + f`, leave the most asked question in about one mock in
    six: the long tail of questions asked by 1 to 7 collections outweighs it.)"""
    return 2.0 ** (frequency / 2)


def select(questions: Sequence[Question], n: int, seed: int,
           lessons: Sequence[str] | None = None, damping: float = TOPIC_DAMPING) -> list[Question]:
    r"""``n`` distinct questions (optionally only from ``lessons``), drawn one at a time with
    ``random.Random(seed)``, without replacement. Each draw picks question :math:`i` with
    probability proportional to

    .. math:: w_i = 2^{f_i/2} \cdot \text{damping}^{\,k_i}

    where :math:`f_i` is its frequency (how many surveyed collections ask it,
    :func:`draw_weight`) and :math:`k_i` how many questions of its topic (``topic_en``: a
    lesson, or a subsection of lesson 12) are already drawn. Often-asked questions come up
    often, as in a real interview, while ``damping`` (0.25: a topic already asked weighs a
    quarter, twice asked a sixteenth) spreads the questions over topics. With every
    frequency equal this is a topic-spread uniform draw; ``damping=0`` draws every topic once
    before any topic twice, ``damping=1`` ignores topics. ``ValueError`` if fewer than ``n``
    questions are available."""
    pool = [q for q in questions if lessons is None or q.lesson in lessons]
    if n > len(pool):
        raise ValueError(f"asked for {n} questions, only {len(pool)} available")
    if not 0 <= damping <= 1:
        raise ValueError(f"damping must be in [0, 1], got {damping}")
    rng = random.Random(seed)
    base = [draw_weight(q.frequency) for q in pool]
    drawn_per_topic: dict[str, int] = {}
    left = list(range(len(pool)))
    chosen: list[Question] = []
    while len(chosen) < n:
        # damping ** (k_i - k_min): the same probabilities as damping ** k_i, and with
        # damping 0 a round robin over the topics
        counts = [drawn_per_topic.get(pool[i].topic_en, 0) for i in left]
        least = min(counts)
        weights = [base[i] * damping ** (k - least) for i, k in zip(left, counts)]
        total = sum(weights)
        r = rng.random() * total
        pick = len(left) - 1
        for k, w in enumerate(weights):
            r -= w
            if r < 0:
                pick = k
                break
        q = pool[left.pop(pick)]
        drawn_per_topic[q.topic_en] = drawn_per_topic.get(q.topic_en, 0) + 1
        chosen.append(q)
    return chosen


# --------------------------------------------------------------------------- rendering

_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$(?!\$).+?(?<![\\$])\$", re.S)
_CODE = re.compile(r"`[^`]+`")


def markdown_to_html(text: str) -> str:
    r"""The markdown subset of the question cells as HTML for ``ipywidgets.HTMLMath``: math
    (``$...$``, ``$$...$$``) kept as written (HTML-escaped) for the front end's MathJax,
    inline code, ``**bold**``, ``*italic*``, ``[links](https://...)``, ``- `` bullet lists and
    paragraphs (a single line break is a space, as in markdown).

    >>> markdown_to_html("**Why** $a<b$?\n\n- `x` one\n- *two*")
    '<p><b>Why</b> $a&lt;b$?</p>\n<ul><li><code>x</code> one</li><li><i>two</i></li></ul>'
    """
    kept: list[str] = []

    def keep(s: str) -> str:
        kept.append(s)
        return f"\x00{len(kept) - 1}\x00"

    text = _CODE.sub(lambda m: keep("<code>" + html.escape(m[0][1:-1], quote=False) + "</code>"), text)
    text = _MATH.sub(lambda m: keep(html.escape(m[0], quote=False)), text)
    text = html.escape(text, quote=False)
    text = re.sub(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)",
                  lambda m: keep(f'<a href="{m[2]}" target="_blank">{m[1]}</a>'), text)
    text = re.sub(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", r"<b>\1</b>", text, flags=re.S)
    text = re.sub(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])", r"<i>\1</i>", text)
    blocks = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        if all(line.lstrip().startswith("- ") or line[:1].isspace() for line in lines):
            items: list[str] = []
            for line in lines:
                if line.lstrip().startswith("- "):
                    items.append(line.lstrip()[2:])
                else:
                    items[-1] += " " + line.strip()
            blocks.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
        else:
            blocks.append("<p>" + " ".join(line.strip() for line in lines) + "</p>")
    out = "\n".join(blocks)
    while "\x00" in out:
        out = re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m[1])], out)
    return out


def _inline_html(text: str) -> str:
    """:func:`markdown_to_html` of a one-paragraph text, without its ``<p>`` wrapper."""
    out = markdown_to_html(text)
    return out[3:-4] if out.startswith("<p>") and out.endswith("</p>") and out.count("<p>") == 1 else out


class _Shown:
    """A text with a markdown form (a notebook renders it, math typeset) and a plain form
    (the terminal, and the ``text/plain`` that nbval compares)."""

    def __init__(self, markdown: str, plain: str):
        self.markdown, self.plain = markdown, plain

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __repr__(self) -> str:
        return self.plain


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _show(markdown: str, plain: str | None = None) -> None:
    """Display ``markdown`` in a notebook (rendered, with its plain text beside it), print
    the plain text elsewhere."""
    plain = markdown if plain is None else plain
    if _in_notebook():
        from IPython.display import display
        display(_Shown(markdown, plain))
    else:
        print(plain)


def _details(summary: str, body: str) -> str:
    # blank lines around the body: markdown inside an HTML block is rendered only then
    return f"<details><summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _rubric_markdown(q: Question, lang: str, qualify: bool = False) -> str:
    """The answer and the rubric in markdown; ``qualify``: section references name the
    question's lesson (:func:`qualify_references`), for a question shown outside it."""
    fix = (lambda t: qualify_references(t, q.lesson, lang)) if qualify else (lambda t: t)
    key, flag = MARKERS[lang]
    parts = [fix(getattr(q, f"answer_{lang}"))]
    points, flags = getattr(q, f"key_points_{lang}"), getattr(q, f"red_flags_{lang}")
    if points:
        parts.append(key + "\n" + "\n".join(f"- {fix(p)}" for p in points))
        parts.append(flag + "\n" + "\n".join(f"- {fix(p)}" for p in flags))
    return "\n\n".join(parts)


class MostAsked(list):
    """The ranking :func:`most_asked` returns: a list of questions that a notebook shows as
    markdown (each answer and rubric folded in ``<details>``) and a terminal as text."""

    def __init__(self, questions, sources: int, survey_found: bool):
        super().__init__(questions)
        self.sources, self.survey_found = sources, survey_found

    def _line(self, i: int, q: Question) -> tuple[str, str]:
        asked = (f"asked in {q.frequency} of {self.sources} surveyed collections / "
                 f"在 {self.sources} 个被调查的题库中有 {q.frequency} 个问到")
        return f"lesson {q.lesson} · {q.topic_en} / 第 {q.lesson} 课 · {q.topic_zh}", asked

    def _repr_markdown_(self) -> str:
        if not self.survey_found:
            return ("*No survey (`docs/interview_survey.json`): no frequencies to rank by.* / "
                    "*没有调查数据（`docs/interview_survey.json`），无法按频率排序。*")
        out = []
        for i, q in enumerate(self, 1):
            where, asked = self._line(i, q)
            body = (_rubric_markdown(q, "en", qualify=True) + "\n\n---\n\n"
                    + _rubric_markdown(q, "zh", qualify=True))
            out.append(f"**{i}. {q.front_en}**<br>{q.front_zh}<br>\n<small>{where}; {asked}</small>"
                       f"\n\n{_details('Answer and rubric / 答案与评分要点', body)}")
        return "\n\n".join(out)

    def __repr__(self) -> str:
        if not self.survey_found:
            return "No survey (docs/interview_survey.json): no frequencies to rank by."
        lines = []
        for i, q in enumerate(self, 1):
            where, asked = self._line(i, q)
            lines.append(f"{i:2d}. [{q.frequency}/{self.sources}] {q.front_en} ({where})")
        return "\n".join(lines)


def most_asked(k: int = 20, questions: Sequence[Question] | None = None,
               survey: pathlib.Path | dict | None = SURVEY) -> MostAsked:
    """The ``k`` questions of the pool asked by the most surveyed collections (ties: course
    order), as a :class:`MostAsked` list. In a notebook it renders as markdown: each question
    in both languages, its lesson, "asked in k of n surveyed collections", and its answer and
    rubric folded in ``<details>`` so that the reader answers first."""
    data = survey if isinstance(survey, dict) or survey is None else load_survey(survey)
    pool = load_questions(survey=data) if questions is None else with_frequencies(questions, data)
    ranked = sorted(pool, key=lambda q: -q.frequency)[:k] if data is not None else []
    return MostAsked(ranked, len(data["sources"]) if data else 0, data is not None)


# ----------------------------------------------------------------------- the interview

@dataclass
class _Answer:
    question: Question
    hit: tuple[bool, ...]       # one tick per key point (one point without a rubric)
    answer_seconds: float       # from the question to the reveal
    reading_seconds: float      # from the reveal to the grade

    @property
    def score(self) -> float:
        return sum(self.hit) / len(self.hit)

    @property
    def seconds(self) -> float:
        return self.answer_seconds


@dataclass
class MockInterview:
    """A mock interview of ``n`` questions drawn with ``seed`` (see :func:`select`), asked one
    at a time with the answer hidden until :meth:`reveal` (or, in :meth:`widget`, until the
    countdown of ``seconds_per_question`` ends), graded against the rubric (:meth:`grade`),
    and a report by topic (:meth:`tally`). ``language``: ``"en"``, ``"zh"`` or ``"both"``.
    ``clock`` (seconds) is replaceable for tests."""

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
        if not self.seconds_per_question > 0:
            raise ValueError(f"seconds_per_question must be positive, got {self.seconds_per_question}")
        pool = load_questions() if self.questions is None else self.questions
        self.selection = select(pool, self.n, self.seed, self.lessons)
        self._current: int | None = None
        self._started: float | None = None
        self._revealed: float | None = None

    # ---------------------------------------------------------------- text
    def _langs(self) -> list[str]:
        return {"en": ["en"], "zh": ["zh"], "both": ["en", "zh"]}[self.language]

    def _topic(self, q: Question) -> str:
        return " / ".join(getattr(q, f"topic_{lang}") for lang in self._langs())

    def plan(self) -> None:
        """Show the selection: for each question its lesson, topic and question (no answer)."""
        head = (f"Mock interview: {self.n} questions, seed {self.seed}, "
                f"{self.seconds_per_question:g} s each / 模拟面试：{self.n} 道题，"
                f"随机种子 {self.seed}，每题 {self.seconds_per_question:g} 秒")
        md, plain = [head], [head]
        for i, q in enumerate(self.selection, 1):
            first, *rest = [getattr(q, f"front_{lang}") for lang in self._langs()]
            md.append(f"{i}. [lesson {q.lesson} · {self._topic(q)}] {first}"
                      + "".join(f"<br>{r}" for r in rest))
            plain.append(f"{i}. [lesson {q.lesson} · {self._topic(q)}] {first}")
            plain.extend(f"   {r}" for r in rest)
        # one block per question (blank lines between them): a slide deck can cut between them
        _show("\n\n".join(md), "\n".join(plain))

    def start_question(self) -> Question:
        """Start the next question's clock and return it (no output)."""
        if self._current is not None:
            raise RuntimeError("grade the current question first: grade(...)")
        if len(self.answers) == self.n:
            raise RuntimeError("the interview is over: see tally()")
        self._current = len(self.answers)
        self._started, self._revealed = self.clock(), None
        return self.selection[self._current]

    def ask(self) -> None:
        """Show the next question (without its answer) and start its clock."""
        q = self.start_question()
        head = (f"Question {self._current + 1} of {self.n} / 第 {self._current + 1} 题，共 {self.n} 题"
                f" (lesson {q.lesson} · {self._topic(q)})")
        fronts = [getattr(q, f"front_{lang}") for lang in self._langs()]
        _show("\n\n".join([f"**{head}**"] + fronts), "\n".join([head] + fronts))

    def current(self) -> Question:
        if self._current is None:
            raise RuntimeError("no question asked yet: call ask() first")
        return self.selection[self._current]

    def stop_clock(self) -> None:
        """Stop the answering clock of the current question (once; no output)."""
        self.current()
        if self._revealed is None:
            self._revealed = self.clock()

    def reveal(self) -> None:
        """Show the model answer and the rubric of the current question: the numbered key
        points to tick in :meth:`grade` and the red flags. Stops the answering clock."""
        q = self.current()
        self.stop_clock()
        head = (f"Answer (its sections are those of lesson {q.lesson}) / "
                f"答案（节号指第 {q.lesson} 课）:")
        md, plain = [f"**{head}**"], [head]
        for lang in self._langs():
            md.append(_rubric_markdown(q, lang))
            plain.append(getattr(q, f"answer_{lang}"))
            key, flag = MARKERS[lang]
            points = getattr(q, f"key_points_{lang}")
            if points:
                plain.append(key.strip("*") + ":")
                plain.extend(f"  {i}. {p}" for i, p in enumerate(points, 1))
                plain.append(flag.strip("*") + ":")
                plain.extend(f"  - {p}" for p in getattr(q, f"red_flags_{lang}"))
        if not q.has_rubric:
            note = ("No rubric yet: grade(True) if you said the essentials, else grade(False). / "
                    "尚无评分要点：说出了要点就 grade(True)，否则 grade(False)。")
            md.append(f"*{note}*")
            plain.append(note)
        else:
            note = (f"grade(k) with the number of key points you made (of {q.points}), or a list "
                    f"of {q.points} ticks / 用 grade(k) 记录你说出的要点个数（共 {q.points} 个），"
                    f"或 {q.points} 个勾选的列表")
            md.append(f"*{note}*")
            plain.append(note)
        _show("\n\n".join(md), "\n".join(plain))

    def _ticks(self, q: Question, hit) -> tuple[bool, ...]:
        points = q.points
        if isinstance(hit, bool):
            return (hit,) * points
        if isinstance(hit, int):
            if not 0 <= hit <= points:
                raise ValueError(f"{hit} key points hit: this question has {points}")
            return (True,) * hit + (False,) * (points - hit)
        ticks = tuple(bool(t) for t in hit)
        if len(ticks) != points:
            raise ValueError(f"{len(ticks)} ticks for {points} key points")
        return ticks

    def grade(self, hit) -> None:
        """Record the current question's grade and stop its clock. ``hit``: the number of key
        points you made, a list of one tick per key point (in the order :meth:`reveal`
        numbers them), or ``True`` / ``False`` for all / none. The answering time runs from
        :meth:`ask` to :meth:`reveal` (to now if not revealed), the reading time from the
        reveal to now."""
        q = self.current()
        ticks = self._ticks(q, hit)
        now = self.clock()
        revealed = self._revealed if self._revealed is not None else now
        self.answers.append(_Answer(q, ticks, revealed - self._started, now - revealed))
        self._current = None

    # ---------------------------------------------------------------- the result
    def score(self) -> tuple[float, int]:
        """(sum of the question scores, questions graded); a question's score is key points
        hit / key points."""
        return sum(a.score for a in self.answers), len(self.answers)

    def by_topic(self) -> dict[str, tuple[float, int]]:
        """Per ``"NN · topic"``: (sum of scores, questions graded), in order of first
        appearance."""
        out: dict[str, list] = {}
        for a in self.answers:
            key = f"{a.question.lesson} · {self._topic(a.question)}"
            entry = out.setdefault(key, [0.0, 0])
            entry[0] += a.score
            entry[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    def to_revise(self) -> list[tuple[Question, list[str]]]:
        """The questions not fully answered, each with the English key points missed."""
        out = []
        for a in self.answers:
            if a.score < 1:
                missed = [p for p, t in zip(a.question.key_points_en, a.hit) if not t]
                out.append((a.question, missed))
        return out

    def report_lines(self, times: bool = False) -> list[str]:
        """The lines of :meth:`tally`."""
        total, graded = self.score()
        percent = f" ({100 * total / graded:.0f}%)" if graded else ""
        lines = [f"Score: {total:.2f} of {graded} graded{percent}; {self.n - graded} not asked / "
                 f"得分：已评 {graded} 题，得 {total:.2f} 分；{self.n - graded} 题未问"]
        for topic, (s, g) in self.by_topic().items():
            lines.append(f"  lesson {topic}: {s:.2f}/{g}")
        for i, a in enumerate(self.answers, 1):
            line = (f"  question {i} (lesson {a.question.lesson}): "
                    f"{sum(a.hit)}/{len(a.hit)} key points")
            if times:
                over = " over budget / 超时" if a.answer_seconds > self.seconds_per_question else ""
                line += (f"; answered in {a.answer_seconds:.0f} s{over}, "
                         f"read the answer {a.reading_seconds:.0f} s")
            lines.append(line)
        revise = self.to_revise()
        if revise:
            lines.append("Revise / 复习:")
            for q, missed in revise:
                lines.append(f"  lesson {q.lesson}: {q.front_en}")
                lines.extend(f"    missed: {m}" for m in missed)
        if times:
            spent = sum(a.answer_seconds for a in self.answers)
            lines.append(f"Answering time / 作答用时: {spent:.0f} s of "
                         f"{self.seconds_per_question * graded:.0f} s")
        return lines

    def tally(self, times: bool = False) -> None:
        """Print the score, per topic and per question, and what to revise (the questions not
        fully answered and their missed key points); with ``times=True`` also each question's
        answering time (to the reveal) against the budget and its reading time (not
        reproducible output)."""
        print("\n".join(self.report_lines(times)))

    # ---------------------------------------------------------------- the widget
    def widget(self, autostart: bool = False) -> "InterviewWidget":
        """The interview as an ipywidgets panel for JupyterLab (:class:`InterviewWidget`)."""
        return InterviewWidget(self, autostart=autostart)


class InterviewWidget:
    """One question at a time with a visible countdown, in JupyterLab.

    *Start* shows the first question and starts its countdown (updated every second by an
    asyncio task on the kernel's event loop, or a timer thread where no loop runs). *Reveal*,
    or the countdown reaching 0, stops the answering clock and shows the model answer, the key
    points as checkboxes and the red flags. *Next* records the ticked key points as the grade
    (:meth:`MockInterview.grade`) and asks the next question; after the last, the final report
    by topic, with the answering and reading times and what to revise. Mathematics is typeset
    by JupyterLab (``ipywidgets.HTMLMath``). Shown where no kernel runs (a saved notebook, the
    HTML edition), it is one line of text. ``run_timer=False`` leaves the ticks to the caller
    (:meth:`on_tick`; tests)."""

    def __init__(self, mock: MockInterview, autostart: bool = False, tick: float = 1.0,
                 run_timer: bool = True):
        import ipywidgets as w

        self.mock, self.tick, self.run_timer = mock, tick, run_timer
        self._task = None
        self._generation = 0  # bumped whenever a countdown must stop
        self.header = w.HTML()
        self.countdown = w.HTML()
        self.bar = w.FloatProgress(value=0, min=0, max=mock.seconds_per_question,
                                   layout=w.Layout(width="420px"))
        self.question = w.HTMLMath()
        self.answer = w.HTMLMath()
        self.checks = w.VBox()
        self.flags = w.HTMLMath()
        self.report = w.HTMLMath()
        self.start_button = w.Button(description="Start / 开始", button_style="primary")
        self.reveal_button = w.Button(description="Reveal / 揭晓", disabled=True)
        self.next_button = w.Button(description="Next / 下一题", disabled=True,
                                    button_style="success")
        self.start_button.on_click(lambda _: self.start())
        self.reveal_button.on_click(lambda _: self.reveal())
        self.next_button.on_click(lambda _: self.next())
        self.header.value = (f"<b>Mock interview: {mock.n} questions, "
                             f"{mock.seconds_per_question:g} s each</b> / "
                             f"<b>模拟面试：{mock.n} 道题，每题 {mock.seconds_per_question:g} 秒</b>"
                             "<br>Answer aloud, then reveal and tick the key points you made. / "
                             "先大声作答，再揭晓答案并勾选你说到的要点。")
        self.box = w.VBox([self.header, w.HBox([self.countdown, self.bar]), self.question,
                           w.HBox([self.start_button, self.reveal_button, self.next_button]),
                           self.answer, self.checks, self.flags, self.report],
                          layout=w.Layout(max_width="900px"))
        if autostart:
            self.start()

    # -------------------------------------------------------------- display
    def _ipython_display_(self):
        from IPython.display import display
        bundle = self.box._repr_mimebundle_()
        bundle = {**(bundle or {}), "text/plain": repr(self)}
        display(bundle, raw=True)

    def __repr__(self) -> str:
        return (f"Mock interview: {self.mock.n} questions (needs a running kernel) / "
                f"模拟面试：{self.mock.n} 道题（需要运行中的内核）")

    # -------------------------------------------------------------- the countdown
    def remaining(self) -> float:
        """Seconds left to answer the current question (0 once revealed or over)."""
        m = self.mock
        if m._current is None or m._revealed is not None:
            return 0.0
        return max(0.0, m.seconds_per_question - (m.clock() - m._started))

    def _show_time(self) -> None:
        m = self.mock
        style = "font-size:1.4em;font-family:monospace"
        if m._current is not None and m._revealed is not None:
            spent = int(m._revealed - m._started)
            self.countdown.value = (f"<span style='{style}'>{spent // 60}:{spent % 60:02d}</span>"
                                    " answered in / 作答用时")
            return
        left = self.remaining()
        whole = int(left + 0.999)
        colour = "#b00020" if left <= 10 else "#222"
        self.countdown.value = (f"<span style='{style};color:{colour}'>{whole // 60}:{whole % 60:02d}"
                                "</span> left / 剩余")
        self.bar.value = left

    def on_tick(self) -> bool:
        """One tick of the countdown: redraw it; at 0, reveal. Returns whether to go on."""
        if self.mock._current is None or self.mock._revealed is not None:
            return False
        self._show_time()
        if self.remaining() <= 0:
            self.reveal()
            return False
        return True

    def _run_countdown(self) -> None:
        self._generation += 1
        generation = self._generation

        async def loop():
            while generation == self._generation and self.on_tick():
                await asyncio.sleep(self.tick)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            running = None
        else:
            running = True
        if running:
            self._task = asyncio.ensure_future(loop())
            return

        def thread():
            while generation == self._generation and self.on_tick():
                time.sleep(self.tick)

        self._task = threading.Thread(target=thread, daemon=True)
        self._task.start()

    # -------------------------------------------------------------- the steps
    def _fronts_html(self, q: Question) -> str:
        m = self.mock
        i = m._current + 1
        head = (f"<b>Question {i} of {m.n} / 第 {i} 题，共 {m.n} 题</b> "
                f"<small>(lesson {q.lesson} · {m._topic(q)})</small>")
        return head + "".join(f"<div style='font-size:1.15em;margin:0.4em 0'>"
                              f"{markdown_to_html('**' + getattr(q, f'front_{lang}') + '**')}</div>"
                              for lang in m._langs())

    def start(self) -> None:
        """Ask the next question and start its countdown."""
        q = self.mock.start_question()
        self.start_button.layout.display = "none"
        self.question.value = self._fronts_html(q)
        self.answer.value = self.flags.value = self.report.value = ""
        self.checks.children = ()
        self.reveal_button.disabled, self.next_button.disabled = False, True
        self._show_time()
        if self.run_timer:
            self._run_countdown()

    def reveal(self) -> None:
        """Stop the answering clock; show the answer, the key points to tick, the red flags."""
        import ipywidgets as w

        m = self.mock
        if m._current is None or self.next_button.disabled is False:
            return
        q = m.current()
        m.stop_clock()
        self._generation += 1
        self._show_time()
        langs = m._langs()
        fix = qualify_references
        self.answer.value = "".join(
            f"<div style='margin-top:0.5em'>"
            f"{markdown_to_html(fix(getattr(q, f'answer_{lang}'), q.lesson, lang))}</div>"
            for lang in langs)
        if q.has_rubric:
            labels = ["<br>".join(_inline_html(fix(getattr(q, f"key_points_{lang}")[i], q.lesson, lang))
                                  for lang in langs) for i in range(q.points)]
            title = " / ".join(MARKERS[lang][0].strip("*") for lang in langs)
            flags = "".join(f"<b>{MARKERS[lang][1].strip('*')}</b>"
                            + markdown_to_html("\n".join(f"- {fix(f, q.lesson, lang)}"
                                                         for f in getattr(q, f'red_flags_{lang}')))
                            for lang in langs)
        else:
            labels = ["I said the essentials / 我说出了要点"]
            title = "No rubric yet / 尚无评分要点"
            flags = ""
        boxes = [w.Checkbox(value=False, indent=False, layout=w.Layout(width="auto"))
                 for _ in labels]
        rows = [w.HBox([b, w.HTMLMath(label)]) for b, label in zip(boxes, labels)]
        self._boxes = boxes
        self.checks.children = (w.HTMLMath(f"<b>{title}</b> (tick what you said / 勾选你说到的)"),
                                *rows)
        self.flags.value = flags
        self.reveal_button.disabled, self.next_button.disabled = True, False

    def next(self) -> None:
        """Grade the current question with the ticked boxes; ask the next or show the report."""
        m = self.mock
        if m._current is None or self.next_button.disabled:
            return
        m.grade([b.value for b in self._boxes])
        if len(m.answers) < m.n:
            self.start()
        else:
            self.finish()

    def finish(self) -> None:
        """Show the final report: per topic and per question, times, and what to revise."""
        m = self.mock
        self.reveal_button.disabled = self.next_button.disabled = True
        self.question.value = self.answer.value = self.flags.value = ""
        self.checks.children = ()
        self.countdown.value, self.bar.value = "", 0
        for part in (self.bar, self.reveal_button, self.next_button):
            part.layout.display = "none"
        self.report.value = self.report_html()

    def report_html(self) -> str:
        """The final report as an HTML table (topic, question, key points, times) and the
        list of what to revise."""
        m = self.mock
        total, graded = m.score()
        rows = []
        for i, a in enumerate(m.answers, 1):
            over = " style='color:#b00020'" if a.answer_seconds > m.seconds_per_question else ""
            rows.append(f"<tr><td>{i}</td><td>{a.question.lesson} · {m._topic(a.question)}</td>"
                        f"<td>{_inline_html(a.question.front_en)}</td>"
                        f"<td>{sum(a.hit)}/{len(a.hit)}</td>"
                        f"<td{over}>{a.answer_seconds:.0f} s</td><td>{a.reading_seconds:.0f} s</td></tr>")
        topics = "".join(f"<li>lesson {t}: {s:.2f}/{g}</li>" for t, (s, g) in m.by_topic().items())
        revise = "".join(f"<li>lesson {q.lesson}: {_inline_html(q.front_en)}"
                         + ("<ul>" + "".join(f"<li>{_inline_html(p)}</li>" for p in missed)
                            + "</ul>" if missed else "") + "</li>"
                         for q, missed in m.to_revise())
        percent = f" ({100 * total / graded:.0f}%)" if graded else ""
        return (f"<h3>Report / 报告: {total:.2f} of {graded}{percent}</h3>"
                f"<b>By topic / 按主题</b><ul>{topics}</ul>"
                "<table><tr><th>#</th><th>topic / 主题</th><th>question / 题目</th>"
                "<th>key points / 要点</th><th>answering / 作答</th><th>reading / 读答案</th></tr>"
                + "".join(rows) + "</table>"
                + (f"<b>Revise / 复习</b><ul>{revise}</ul>" if revise else ""))
