"""Presenter notes for the lecture slides, one file per lesson: ``docs/speaker_notes/NN_x.md``.

Each section of a lesson (an English markdown cell that starts with ``## ``) has a block in
its lesson's file, in the same order and under the same heading::

    ## 1. Why normalise
    minutes: 6

    ### en
    - **Say:** ...
    - **Ask the room:** ...

    ### zh
    - **讲：** ...
    - **问听众：** ...

``make slides`` puts each block into the decks as reveal.js speaker notes (press S in a deck:
the speaker view shows them beside the current and the next slide, with a clock), the English
block in the English deck and the Chinese one in the Chinese deck, on the slide of the
section's heading, after a line with the section's time. The notebooks themselves do not
change. :func:`problems` lists what breaks the rules (tests/test_speaker_notes.py runs it on
every lesson):

* one block per section, headings equal to the notebook's, in its order, and no other block;
* ``minutes: N`` with 1 ≤ N ≤ 30, adding up to within ±25 % of the lesson's time in the
  README's course map;
* an ``### en`` and a ``### zh`` list, each with a **Say** item, and an **Ask the room**
  item except in "Environment check" and "References";
* English and Chinese with the same numbers, inline code and formulas.

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
MINUTES_TOLERANCE = 0.25
# reveal.js's speaker view is a window of its own that shows a slide's notes as HTML copied from
# the deck: the notes carry the course's Chinese font with them, and of the math that MathJax
# typeset in the deck the view shows the MathML (which the browser draws itself) and not the
# HTML rendering (.mjx-math), whose stylesheet stays behind. Every selector is scoped to the view's notes
# box, so the deck itself does not change.
NOTES_STYLE = (
    '<style>@font-face { font-family: "Course Noto Sans CJK SC"; '
    'src: url("../static/fonts/NotoSansCJKsc-Regular-subset.otf") format("opentype"); } '
    '.speaker-controls-notes { font-family: "Course Noto Sans CJK SC", sans-serif; } '
    '.speaker-controls-notes .mjx-math, .speaker-controls-notes .MathJax_Preview, '
    '.speaker-controls-notes script { display: none !important; } '
    '.speaker-controls-notes .MJX_Assistive_MathML { position: static !important; '
    'clip: auto !important; width: auto !important; height: auto !important; '
    'overflow: visible !important; }</style>'
)


@dataclasses.dataclass
class Section:
    heading: str
    minutes: int | None
    text: dict[str, str]  # language -> markdown


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
    """The blocks of a notes file, in order (the text before the first ``## `` is its title).
    Raises ``ValueError`` on a line it cannot place."""
    out: list[Section] = []
    lang = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            out.append(Section(line[3:].strip(), None, {}))
            lang = None
        elif not out:
            continue
        elif m := re.fullmatch(r"minutes:\s*(\d+)\s*", line):
            if lang is not None or out[-1].minutes is not None:
                raise ValueError(f"line {number}: 'minutes:' belongs right under the section heading")
            out[-1].minutes = int(m.group(1))
        elif m := re.fullmatch(r"###\s+(en|zh)\s*", line):
            lang = m.group(1)
            if lang in out[-1].text:
                raise ValueError(f"line {number}: a second '### {lang}' in section {out[-1].heading!r}")
            out[-1].text[lang] = ""
        elif line.startswith("#"):
            raise ValueError(f"line {number}: unexpected heading {line!r} (only '## section', "
                             "'### en' and '### zh')")
        elif lang is not None:
            out[-1].text[lang] += line + "\n"
        elif line.strip():
            raise ValueError(f"line {number}: text outside '### en' / '### zh': {line[:60]!r}")
    for section in out:
        section.text = {k: v.strip() for k, v in section.text.items()}
    return out


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


def problems(lesson: pathlib.Path) -> list[str]:
    """What is wrong with ``lesson``'s notes (empty if nothing)."""
    path = notes_path(lesson)
    if not path.exists():
        return [f"{path.relative_to(ROOT)} is missing"]
    try:
        notes = load(lesson)
    except ValueError as err:
        return [str(err)]
    want = headings(nbformat.read(lesson, as_version=4))
    have = [s.heading for s in notes]
    out = []
    if have != want:
        out.append(f"{path.name}: sections {have} differ from the lesson's {want}")
    for s in notes:
        where = f"{path.name}, {s.heading!r}"
        if s.minutes is None or not 1 <= s.minutes <= 30:
            out.append(f"{where}: needs 'minutes: N' with N from 1 to 30")
        for lang in ("en", "zh"):
            text = s.text.get(lang, "")
            if SAY[lang] not in text:
                out.append(f"{where}: the {lang} notes need a {SAY[lang]} item")
            if ASK[lang] not in text and s.heading not in NO_QUESTION:
                out.append(f"{where}: the {lang} notes need an {ASK[lang]} item")
        if "en" in s.text and "zh" in s.text:
            for kind, en, zh in zip(("inline code", "formulas", "numbers"),
                                    _facts(s.text["en"]), _facts(s.text["zh"])):
                if en != zh:
                    out.append(f"{where}: the twins' {kind} differ: {en} vs {zh}")
    total = sum(s.minutes or 0 for s in notes)
    planned = lesson_minutes(lesson)
    if abs(total - planned) > MINUTES_TOLERANCE * planned:
        out.append(f"{path.name}: the sections add up to {total} min, the course map says {planned} min")
    return out


def with_notes(nb: nbformat.NotebookNode, bilingual: nbformat.NotebookNode, lang: str,
               notes: list[Section]) -> nbformat.NotebookNode:
    """``nb`` (the ``lang`` edition of the lesson ``bilingual``) with a speaker-notes cell
    after each section heading. Raises ``ValueError`` if the notes do not match the sections."""
    if [s.heading for s in notes] != headings(bilingual):
        raise ValueError("the notes' sections differ from the lesson's: run python -m tools.speaker_notes")
    at = sections(nb, lang)
    if len(at) != len(notes):
        raise ValueError(f"the {lang} edition has {len(at)} section headings, the notes {len(notes)}")
    out = nbformat.from_dict(nb)
    for index, section in sorted(zip(at, notes), reverse=True):
        text = f"{NOTES_STYLE}\n\n*{TIME_LABEL[lang].format(section.minutes)}*\n\n{section.text[lang]}"
        cell = nbformat.v4.new_markdown_cell(text, metadata={"slideshow": {"slide_type": "notes"},
                                                             "tags": [f"lang-{lang}"]})
        cell.id = f"{out.cells[index].get('id', index)}-notes"
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
