"""Presenter notes for the lecture slides, one file per lesson: ``docs/speaker_notes/NN_x.md``.

Each section of a lesson (an English markdown cell that starts with ``## ``) has a block in
its lesson's file, in the same order and under the same heading; inside it, after the
section's own notes, one block per slide of the section::

    ## 1. Why normalise
    minutes: 6

    ### en
    - **Say:** ...            (the section: its point, a question for the room)
    - **Ask the room:** ...

    ### zh
    - **讲：** ...
    - **问听众：** ...

    ### slide 5a1b2c3d: the variance table
    #### en
    - **Shows:** ...          (what the slide shows: the code's point, the printed verdict, the figure)
    - **Say:** ...            (what to say or ask)
    #### zh
    - **展示：** ...
    - **讲：** ...

A slide block is keyed by the id of the slide's first cell (``cell.id`` in the lesson; for
prose, the English cell's id), so it follows its slide when cells are edited, moved or
retranslated; the label after the colon is for the reader of the file. The slides before the
first section (the title and the goals) have their blocks before the first ``## ``. Which
cells start a slide is the lesson's slide metadata (:mod:`tools.slides`): a cell of type
``slide`` or ``subslide``, and the first cell shown.

``make slides`` puts the notes into the decks as reveal.js speaker notes (press S in a deck:
the speaker view shows them beside the current and the next slide, with a clock), the English
text in the English deck and the Chinese one in the Chinese deck: on a section's heading
slide a line with the section's time and the section's notes (and that slide's own block if
it has one), on every other slide its block. A slide that ``make slides`` cuts because it is
too tall (:func:`tools.slides.split_for_slides`) shows its block on each piece, marked as
continued. The notebooks themselves do not change. :func:`problems` lists what breaks the
rules (tests/test_speaker_notes.py runs it on every lesson):

* one block per section, headings equal to the notebook's, in its order, and no other block;
* ``minutes: N`` with 1 ≤ N ≤ 30, adding up to within ±25 % of the lesson's time in the
  README's course map;
* an ``### en`` and a ``### zh`` list, each with a **Say** item, and an **Ask the room**
  item except in "Environment check" and "References";
* a block for every slide other than a section's heading slide, under the section that
  holds the slide, in slide order; none for a cell that starts no slide (a removed cell, or
  one that joined the slide before it); each with a label, an ``#### en`` list with
  **Shows** and **Say** items and an ``#### zh`` list with **展示** and **讲** items;
* English and Chinese with the same numbers, inline code and formulas (section and slide
  blocks alike).

    python -m tools.speaker_notes          # check every lesson's notes; exit 1 on a problem
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys

import nbformat

from .course import ROOT, lessons

NOTES = ROOT / "docs" / "speaker_notes"
README = ROOT / "README.md"
SAY = {"en": "**Say:**", "zh": "**讲：**"}
ASK = {"en": "**Ask the room:**", "zh": "**问听众：**"}
TIME_LABEL = {"en": "Time for this section: {} min", "zh": "本节用时：{} 分钟"}
NO_QUESTION = ("Environment check", "References")  # sections that need no question
SHOWS = {"en": "**Shows:**", "zh": "**展示：**"}
CONTINUED = {"en": "*(continued)*", "zh": "*（续）*"}
MINUTES_TOLERANCE = 0.25
# reveal.js's speaker view is a window of its own that shows a slide's notes as HTML copied from
# the deck: the notes carry the course's Chinese font with them. MathJax finds the notes' math in
# the deck but does not typeset it there (the notes are hidden), so what the view receives is
# the TeX source in a <script type="math/tex"> tag: the view shows that source as monospace text.
# Math that MathJax did typeset shows as its MathML (which the browser draws itself), not as the
# HTML rendering (.mjx-math), whose stylesheet stays behind, and its source stays hidden. Every
# selector is scoped to the view's notes box, so the deck itself does not change.
NOTES_STYLE = (
    '<style>@font-face { font-family: "Course Noto Sans CJK SC"; '
    'src: url("../static/fonts/NotoSansCJKsc-Regular-subset.otf") format("opentype"); } '
    '.speaker-controls-notes { font-family: "Course Noto Sans CJK SC", sans-serif; } '
    '.speaker-controls-notes .mjx-math, .speaker-controls-notes .MathJax_Preview, '
    '.speaker-controls-notes script { display: none !important; } '
    '.speaker-controls-notes script[type^="math/tex"] { display: inline !important; '
    'font-family: monospace; font-size: 0.9em; } '
    '.speaker-controls-notes .MathJax_CHTML + script { display: none !important; } '
    '.speaker-controls-notes .MJX_Assistive_MathML { position: static !important; '
    'clip: auto !important; width: auto !important; height: auto !important; '
    'overflow: visible !important; }</style>'
)


@dataclasses.dataclass
class SlideNote:
    key: str                # the id of the slide's first cell (the English cell for prose)
    label: str
    text: dict[str, str]    # language -> markdown


@dataclasses.dataclass
class Section:
    heading: str | None     # None: the slides before the first section (title, goals)
    minutes: int | None
    text: dict[str, str]    # language -> markdown
    slides: list[SlideNote] = dataclasses.field(default_factory=list)


def notes_path(lesson: pathlib.Path) -> pathlib.Path:
    return NOTES / f"{lesson.stem}.md"


def sections(nb: nbformat.NotebookNode, lang: str = "en") -> list[int]:
    """Indices of ``nb``'s section headings in ``lang`` (markdown cells tagged ``lang-<lang>``
    whose source starts with ``## ``)."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            and f"lang-{lang}" in c.metadata.get("tags", []) and c.source.startswith("## ")]


def headings(nb: nbformat.NotebookNode) -> list[str]:
    return [nb.cells[i].source.splitlines()[0][3:].strip() for i in sections(nb, "en")]


def parse(text: str) -> list[Section]:
    """The blocks of a notes file, in order: the sections, preceded by a section with heading
    ``None`` when slide blocks come before the first ``## `` (other text there is the file's
    title). Raises ``ValueError`` on a line it cannot place."""
    out: list[Section] = []
    lang = None
    slide: SlideNote | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            out.append(Section(line[3:].strip(), None, {}))
            lang, slide = None, None
        elif m := re.fullmatch(r"###\s+slide\s+(\S+?)\s*:\s*(.*?)\s*", line):
            if not out:
                out.append(Section(None, None, {}))
            slide = SlideNote(m.group(1), m.group(2), {})
            out[-1].slides.append(slide)
            lang = None
        elif not out:
            continue
        elif m := re.fullmatch(r"minutes:\s*(\d+)\s*", line):
            if lang is not None or slide is not None or out[-1].minutes is not None:
                raise ValueError(f"line {number}: 'minutes:' belongs right under the section heading")
            out[-1].minutes = int(m.group(1))
        elif m := re.fullmatch(r"###\s+(en|zh)\s*", line):
            if slide is not None:
                raise ValueError(f"line {number}: the section's '### {m.group(1)}' notes come before "
                                 "its slide blocks")
            lang = m.group(1)
            if lang in out[-1].text:
                raise ValueError(f"line {number}: a second '### {lang}' in section {out[-1].heading!r}")
            out[-1].text[lang] = ""
        elif m := re.fullmatch(r"####\s+(en|zh)\s*", line):
            if slide is None:
                raise ValueError(f"line {number}: '#### {m.group(1)}' belongs to a '### slide <id>: "
                                 "<label>' block")
            lang = m.group(1)
            if lang in slide.text:
                raise ValueError(f"line {number}: a second '#### {lang}' in slide {slide.key}")
            slide.text[lang] = ""
        elif line.startswith("#"):
            raise ValueError(f"line {number}: unexpected heading {line!r} (only '## section', "
                             "'### en', '### zh', '### slide <id>: <label>', '#### en' and '#### zh')")
        elif lang is not None:
            (slide.text if slide is not None else out[-1].text)[lang] += line + "\n"
        elif line.strip():
            raise ValueError(f"line {number}: text outside '### en' / '### zh' / '#### en' / "
                             f"'#### zh': {line[:60]!r}")
    for section in out:
        section.text = {k: v.strip() for k, v in section.text.items()}
        for note in section.slides:
            note.text = {k: v.strip() for k, v in note.text.items()}
    return out


def _headed(notes: list[Section]) -> list[Section]:
    return [s for s in notes if s.heading is not None]


def _is_continuation(cell_id: str, ids: set[str]) -> bool:
    """Whether ``cell_id`` names a piece k ≥ 1 of a cell that the decks cut in pieces
    (:func:`tools.slides.split_for_slides` names them ``<id>-<k>``)."""
    base, dash, k = cell_id.rpartition("-")
    return bool(dash) and k.isdigit() and base in ids


def slide_starts(nb: nbformat.NotebookNode, lang: str = "en") -> list[int]:
    """Indices of the cells of ``nb`` (bilingual or of one language) that start a slide of
    the ``lang`` deck: the first cell shown and every ``slide`` / ``subslide`` cell, among
    the code cells and the markdown cells tagged ``lang-<lang>``."""
    out, first = [], True
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and f"lang-{lang}" not in cell.metadata.get("tags", []):
            continue
        if cell.cell_type not in ("markdown", "code"):
            continue
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind in ("skip", "notes"):
            continue
        if first or kind in ("slide", "subslide"):
            out.append(i)
        first = False
    return out


def _english_keys(bilingual: nbformat.NotebookNode) -> dict[str, str]:
    """Cell id -> the key of its slide block: a Chinese cell's English twin (the English cell
    before it), any other cell itself."""
    keys, english = {}, None
    ids = {c.get("id", "") for c in bilingual.cells}
    for cell in bilingual.cells:
        tags = cell.metadata.get("tags", [])
        cid = cell.get("id", "")
        if cell.cell_type == "markdown" and "lang-en" in tags and not _is_continuation(cid, ids):
            english = cid
        keys[cid] = english if (cell.cell_type == "markdown" and "lang-zh" in tags and english) else cid
    return keys


def slide_plan(nb: nbformat.NotebookNode) -> list[tuple[str | None, str, bool, str]]:
    """The slides of the lesson ``nb`` (bilingual, as in notebooks/) that notes are written
    for, in order: ``(section heading or None, key, is the section's heading slide, the
    slide's first line)``."""
    heads = set(sections(nb, "en"))
    plan, section = [], None
    starts = set(slide_starts(nb, "en"))
    for i, cell in enumerate(nb.cells):
        if i in heads:
            section = cell.source.splitlines()[0][3:].strip()
        if i in starts:
            first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
            plan.append((section, cell.get("id", str(i)), i in heads, first[:70]))
    return plan


def load(lesson: pathlib.Path) -> list[Section]:
    path = notes_path(lesson)
    try:
        return parse(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{path.relative_to(ROOT)}: {err}") from None


def lesson_minutes(lesson: pathlib.Path, readme: pathlib.Path = README) -> int:
    """The lesson's time in the README's course map (the row ``| NN | ... | M min | ...``)."""
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == lesson.stem[:2]:
            for cell in cells:
                if m := re.fullmatch(r"(\d+) min", cell):
                    return int(m.group(1))
    raise ValueError(f"README's course map has no time for lesson {lesson.stem[:2]}")


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?")
_CODE = re.compile(r"`[^`]+`")
_MATH = re.compile(r"\$[^$]+\$")


def _facts(text: str) -> tuple[list[str], list[str], list[str]]:
    """What twins must share: inline code, formulas, and the numbers outside them."""
    code = sorted(_CODE.findall(text))
    math = sorted(_MATH.findall(text))
    rest = _MATH.sub(" ", _CODE.sub(" ", text))
    return code, math, sorted(_NUMBER.findall(rest))


def _slide_problems(name: str, nb: nbformat.NotebookNode, notes: list[Section]) -> list[str]:
    out = []
    plan = slide_plan(nb)
    where_slide = {key: section for section, key, _, _ in plan}
    seen: dict[str, str | None] = {}
    for s in notes:
        order = [k for section, k, _, _ in plan if section == s.heading]
        keys = [n.key for n in s.slides]
        for note in s.slides:
            where = f"{name}, slide {note.key}"
            if note.key in seen:
                out.append(f"{where}: a second block for this slide")
            seen[note.key] = s.heading
            if note.key not in where_slide:
                out.append(f"{where}: no slide starts with cell {note.key} (the cell was removed, "
                           "joined the slide before it, or its id changed)")
            elif where_slide[note.key] != s.heading:
                out.append(f"{where}: under section {s.heading!r}, but the slide is in "
                           f"section {where_slide[note.key]!r}")
            if not note.label:
                out.append(f"{where}: needs a label ('### slide {note.key}: <what it shows>')")
            for lang, items in (("en", (SHOWS["en"], SAY["en"])), ("zh", (SHOWS["zh"], SAY["zh"]))):
                text = note.text.get(lang, "")
                if not text:
                    out.append(f"{where}: needs '#### {lang}' notes")
                    continue
                for item in items:
                    if item not in text:
                        out.append(f"{where}: the {lang} notes need a {item} item")
            out += _twin_problems(where, note.text)
        mine = [k for k in keys if k in order]
        if mine != sorted(mine, key=order.index):
            out.append(f"{name}, {s.heading!r}: the slide blocks are not in slide order")
    for section, key, heading_slide, first in plan:
        if not heading_slide and key not in seen:
            out.append(f"{name}: slide {key} ({first!r}) in section {section!r} has no notes: "
                       f"add '### slide {key}: <label>' with #### en and #### zh")
    return out


def _twin_problems(where: str, text: dict[str, str]) -> list[str]:
    out = []
    if "en" in text and "zh" in text:
        for kind, en, zh in zip(("inline code", "formulas", "numbers"), _facts(text["en"]), _facts(text["zh"])):
            if en != zh:
                out.append(f"{where}: the twins' {kind} differ: {en} vs {zh}")
    return out


def problems(lesson: pathlib.Path) -> list[str]:
    """What is wrong with ``lesson``'s notes (empty if nothing)."""
    path = notes_path(lesson)
    if not path.exists():
        return [f"{path.relative_to(ROOT)} is missing"]
    try:
        notes = load(lesson)
    except ValueError as err:
        return [str(err)]
    nb = nbformat.read(lesson, as_version=4)
    want = headings(nb)
    have = [s.heading for s in _headed(notes)]
    out = []
    if have != want:
        out.append(f"{path.name}: sections {have} differ from the lesson's {want}")
    for s in _headed(notes):
        where = f"{path.name}, {s.heading!r}"
        if s.minutes is None or not 1 <= s.minutes <= 30:
            out.append(f"{where}: needs 'minutes: N' with N from 1 to 30")
        for lang in ("en", "zh"):
            text = s.text.get(lang, "")
            if SAY[lang] not in text:
                out.append(f"{where}: the {lang} notes need a {SAY[lang]} item")
            if ASK[lang] not in text and s.heading not in NO_QUESTION:
                out.append(f"{where}: the {lang} notes need an {ASK[lang]} item")
        out += _twin_problems(where, s.text)
    out += _slide_problems(path.name, nb, notes)
    total = sum(s.minutes or 0 for s in _headed(notes))
    planned = lesson_minutes(lesson)
    if abs(total - planned) > MINUTES_TOLERANCE * planned:
        out.append(f"{path.name}: the sections add up to {total} min, the course map says {planned} min")
    return out


def with_notes(nb: nbformat.NotebookNode, bilingual: nbformat.NotebookNode, lang: str,
               notes: list[Section]) -> nbformat.NotebookNode:
    """``nb`` (the ``lang`` edition of the lesson ``bilingual``, both as the decks are made:
    after :func:`tools.slides.split_for_slides`) with a speaker-notes cell on every slide
    that has notes: after each section heading the section's time and notes (and the heading
    slide's own block), after the first cell of every other slide its block (on a continued
    piece of a cut slide, the block of the slide it continues). Raises ``ValueError`` if the
    notes do not match the sections."""
    headed = _headed(notes)
    if [s.heading for s in headed] != headings(bilingual):
        raise ValueError("the notes' sections differ from the lesson's: run python -m tools.speaker_notes")
    at = sections(nb, lang)
    if len(at) != len(headed):
        raise ValueError(f"the {lang} edition has {len(at)} section headings, the notes {len(headed)}")
    blocks = {note.key: note for s in notes for note in s.slides}
    keys = _english_keys(bilingual)
    ids = {c.get("id", "") for c in nb.cells}
    inserts: dict[int, str] = {}
    for index, section in zip(at, headed):
        inserts[index] = f"*{TIME_LABEL[lang].format(section.minutes)}*\n\n{section.text[lang]}"
    shown = None  # the notes of the slide that a continued piece continues
    for index in slide_starts(nb, lang):
        cid = nb.cells[index].get("id", "")
        if _is_continuation(cid, ids):
            if shown:
                inserts[index] = CONTINUED[lang] + "\n\n" + shown
            continue
        block = blocks.get(keys.get(cid, cid))
        own = block.text.get(lang) if block else None
        if own:
            inserts[index] = inserts[index] + "\n\n" + own if index in inserts else own
        shown = inserts.get(index)
    out = nbformat.from_dict(nb)
    for index in sorted(inserts, reverse=True):
        cell = nbformat.v4.new_markdown_cell(f"{NOTES_STYLE}\n\n{inserts[index]}",
                                             metadata={"slideshow": {"slide_type": "notes"},
                                                       "tags": [f"lang-{lang}"]})
        cell.id = f"{out.cells[index].get('id', index)}-notes"[:64]
        out.cells.insert(index + 1, cell)
    return out


def main() -> int:
    bad = [p for lesson in lessons() for p in problems(lesson)]
    for line in bad:
        print(line)
    print(f"{len(lessons())} lessons, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
