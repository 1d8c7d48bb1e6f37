r"""Export the interview questions of every lesson as flashcards that Anki imports.

Each lesson ends with interview questions: pairs of markdown cells tagged ``question`` and
``lang-en`` / ``lang-zh``, written as a bold question, a blank line, then the answer::

    **Question 2. Which variance does PyTorch's BatchNorm store?**

    The unbiased one, $\frac{n}{n-1}\sigma_B^2$ ...

``python -m tools.flashcards`` (``make flashcards``) writes one CSV per language,
``build/flashcards/flashcards_en.csv`` and ``flashcards_zh.csv``. Each file starts with Anki's
header lines (Anki 2.1.55 or later), so File > Import needs no settings: comma separated, HTML
allowed, column 1 is the note's id (GUID), columns 2 and 3 the front and back (the first two
fields of the default note type, Basic; no ``#columns`` line, since Anki would then match
columns to fields by name, and field names differ between Anki's languages), column 4 the tags
(the lessons). The ``#deck`` line names ``Normalization course::English`` or
``Normalization course::中文``; Anki uses it when a deck of that name exists and otherwise the
current deck.

* **Stable ids.** A card's id is ``normalization-course-NN-<hash>-<lang>``: the lesson ``NN``
  and the first 10 hex digits of the SHA-1 of the English question without its
  ``Question N.`` prefix. Renumbering questions keeps the ids, so re-importing a file updates
  the notes instead of adding copies; the two languages share the stem of a question's id and
  differ in the ``-en`` / ``-zh`` suffix (a GUID is unique in the whole Anki collection).
* **No duplicates.** The front is the question without its ``Question N.`` / ``问 N：``
  prefix. Questions are bilingual pairs (the n-th English and n-th Chinese question of a
  lesson); a pair whose English or Chinese question repeats, word for word, one of an earlier
  lesson (the interview lesson 12 repeats several) is dropped, and the earlier lesson's card,
  where the topic is taught, gets the later lesson's tag as well. Both files hold the same
  questions.
* **Qualified references.** In the answers of lesson NN, a bare "section 4" becomes
  "lesson NN, §4" ("sections 7 and 8": "lesson NN, §§7 and 8") and "第 4 节" becomes
  "第 NN 课第 4 节"; references that already name a lesson ("lesson 01, section 2") or a paper
  ("Wu & He 2018, section 3.1") stay as they are.
* **Most asked first.** The rows are ordered by how many surveyed public interview
  collections ask the question (``docs/interview_survey.json``,
  :func:`helpers.mock_interview.survey_sources`), most asked first (ties: course order), so
  that Anki, which shows new cards in import order, starts with them; each note is tagged
  ``normalization-course::asked::NN`` with that number (two digits; ``00`` without a
  survey). Anki's browser can then search ``tag:normalization-course::asked::1*``.
* **The mock interview's pool.** The cards are the questions of
  :func:`helpers.mock_interview.load_questions`, merged the same way (a test checks it).
* **HTML fields.** ``**bold**`` becomes ``<b>``, ``*italic*`` and ``_italic_`` ``<i>``, inline
  code ``<code>``, ``[text](https://...)`` a link (other links just their text), line breaks
  ``<br>``, a ``- `` bullet ``•``; math is left as written inside Anki's MathJax delimiters: ``$...$`` as ``\(...\)``
  and ``$$...$$`` as ``\[...\]``.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import pathlib
import re
from dataclasses import dataclass

from helpers.mock_interview import (QUESTION_CELL, QUESTION_NUMBER, SURVEY, load_survey,
                                    qualify_references, survey_sources)

from .course import BUILD, lessons

__all__ = ["Card", "Note", "cards_from_notebook", "collect", "notes", "strip_number",
           "qualify_references", "to_anki_html", "anki_header", "write_csv", "main"]

LANGUAGES = ("en", "zh")
TAG_PREFIX = "normalization-course"
DECKS = {"en": "Normalization course::English", "zh": "Normalization course::中文"}
COLUMNS = ("guid", "front", "back", "tags")  # the order of the CSV columns

_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$")
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__(?!\w)", re.S)
_ITALIC = re.compile(r"(?<!\*)\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?!\*)"
                     r"|(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])")



@dataclass(frozen=True)
class Card:
    """One question cell: ``lesson`` (e.g. ``"01"``), ``language`` (``"en"`` or ``"zh"``),
    ``front`` and ``back`` in the notebook's markdown, and the cell's ``cell_id``."""
    lesson: str
    language: str
    front: str
    back: str
    cell_id: str = ""


@dataclass(frozen=True)
class Note:
    """One row of a CSV: ``guid``, ``language``, ``front`` and ``back`` in markdown (the
    number prefix stripped, section references qualified) and the ``lessons`` it comes from
    (the first is where the card's text comes from), and how many surveyed collections ask it
    (``frequency``)."""
    guid: str
    language: str
    front: str
    back: str
    lessons: tuple[str, ...]
    frequency: int = 0

    @property
    def tags(self) -> str:
        return " ".join([f"{TAG_PREFIX}::{lesson}" for lesson in self.lessons]
                        + [f"{TAG_PREFIX}::asked::{self.frequency:02d}"])


def _source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def cards_from_notebook(path) -> list[Card]:
    """The question cells of one notebook, in order. A cell tagged ``question`` must be
    tagged ``lang-en`` or ``lang-zh`` and start with a bold question; otherwise
    ``ValueError`` says which cell is malformed."""
    path = pathlib.Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    lesson = path.name[:2]
    cards = []
    for index, cell in enumerate(nb.get("cells", [])):
        tags = cell.get("metadata", {}).get("tags", [])
        if "question" not in tags or cell.get("cell_type") != "markdown":
            continue
        languages = [lang for lang in LANGUAGES if f"lang-{lang}" in tags]
        if len(languages) != 1:
            raise ValueError(f"{path.name}, cell {index}: a question cell needs exactly one of "
                             f"the tags lang-en / lang-zh, has {tags}")
        match = QUESTION_CELL.match(_source(cell))
        if not match or not match["back"].strip():
            raise ValueError(f"{path.name}, cell {index}: a question cell must start with a "
                             f"**bold question** followed by its answer")
        cards.append(Card(lesson, languages[0], match["front"].strip(), match["back"].strip(),
                          cell.get("id", "")))
    return cards


def collect(notebooks=None) -> list[Card]:
    """Cards of every lesson notebook (``notebooks/NN_*.ipynb`` by default), lesson by lesson."""
    if notebooks is None:
        notebooks = lessons()
    return [card for path in notebooks for card in cards_from_notebook(path)]


def strip_number(front: str) -> str:
    """The question without its ``Question N.`` / ``问 N：`` prefix, spaces collapsed.

    >>> strip_number("Question 12.  Why  not?"), strip_number("问 3：为什么？")
    ('Why not?', '为什么？')
    """
    return " ".join(QUESTION_NUMBER.sub("", front).split())


def notes(cards: list[Card], survey=SURVEY) -> list[Note]:
    """The rows of both CSVs, language by language: the cards paired by lesson and position,
    duplicates of an earlier lesson's pair dropped (its note gets the later lesson as a tag),
    ordered by the survey's frequency of the English card's question (``survey``: a path, the
    loaded JSON, or ``None``; most asked first, ties in lesson order), ids and references as
    the module docstring says. ``ValueError`` if a lesson has not as many English questions as
    Chinese ones."""
    data = survey if isinstance(survey, dict) or survey is None else load_survey(survey)
    by_lesson: dict[str, dict[str, list[Card]]] = {}
    for card in cards:
        by_lesson.setdefault(card.lesson, {lang: [] for lang in LANGUAGES})[card.language].append(card)
    pairs: list[dict] = []  # {"lesson", "lessons", "cards": {lang: Card}}
    seen: dict[tuple[str, str], dict] = {}
    for lesson, per_lang in by_lesson.items():
        counts = {lang: len(per_lang[lang]) for lang in LANGUAGES}
        if len(set(counts.values())) != 1:
            raise ValueError(f"lesson {lesson}: the questions do not pair up by language, "
                             f"{counts}")
        for pair_cards in zip(*(per_lang[lang] for lang in LANGUAGES)):
            keys = [(c.language, strip_number(c.front)) for c in pair_cards]
            earlier = next((seen[k] for k in keys if k in seen), None)
            if earlier is not None:
                if lesson not in earlier["lessons"]:
                    earlier["lessons"].append(lesson)
                continue
            pair = {"lesson": lesson, "lessons": [lesson],
                    "cards": {c.language: c for c in pair_cards}}
            pairs.append(pair)
            seen.update((k, pair) for k in keys)
    for pair in pairs:
        english = pair["cards"]["en"]
        pair["frequency"] = len(survey_sources(data, f"{english.lesson}:{english.cell_id}"))
    pairs.sort(key=lambda pair: -pair["frequency"])  # stable: course order among equals
    rows = []
    for lang in LANGUAGES:
        for pair in pairs:
            card = pair["cards"][lang]
            stem = hashlib.sha1(strip_number(pair["cards"]["en"].front).encode()).hexdigest()
            rows.append(Note(f"{TAG_PREFIX}-{pair['lesson']}-{stem[:10]}-{lang}", lang,
                             qualify_references(strip_number(card.front), card.lesson, lang),
                             qualify_references(card.back, card.lesson, lang),
                             tuple(pair["lessons"]), pair["frequency"]))
    return rows


def to_anki_html(markdown: str) -> str:
    r"""The small subset of markdown the questions use, as HTML for an Anki field.

    >>> to_anki_html("**Why?** *Since* $\\sigma^2 < 1$, see `eval()`.\nDone: $$a<b$$")
    '<b>Why?</b> <i>Since</i> \\(\\sigma^2 &lt; 1\\), see <code>eval()</code>.<br>Done: \\[a&lt;b\\]'
    """
    pieces = []

    def keep(text: str) -> str:  # protect math and code from the other rewrites
        pieces.append(text)
        return f"\x00{len(pieces) - 1}\x00"

    def link(m):
        url = html.unescape(m[2])
        if re.match(r"https?://", url):
            return f'<a href="{html.escape(url, quote=True)}">{m[1]}</a>'
        return m[1]

    text = _DISPLAY.sub(lambda m: keep(r"\[" + html.escape(m[1], quote=False) + r"\]"), markdown)
    text = _INLINE.sub(lambda m: keep(r"\(" + html.escape(m[1], quote=False) + r"\)"), text)
    text = _CODE.sub(lambda m: keep("<code>" + html.escape(m[1], quote=False) + "</code>"), text)
    text = html.escape(text, quote=False)
    text = _LINK.sub(link, text)
    text = _BOLD.sub(lambda m: f"<b>{m[1] or m[2]}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m[1] or m[2]}</i>", text)
    text = re.sub(r"(?m)^- ", "• ", text)
    text = text.replace("\\$", "$").replace("\n", "<br>")
    return re.sub(r"\x00(\d+)\x00", lambda m: pieces[int(m[1])], text)


def anki_header(language: str) -> list[str]:
    """The header lines Anki reads at the top of a text file (Anki 2.1.55 or later)."""
    return ["#separator:Comma", "#html:true",
            f"#guid column:{COLUMNS.index('guid') + 1}",
            f"#tags column:{COLUMNS.index('tags') + 1}",
            f"#deck:{DECKS[language]}"]


def write_csv(cards: list[Card], language: str, path, survey=SURVEY) -> int:
    """Write the ``language`` notes of ``cards`` to ``path`` as an Anki CSV (header lines,
    then guid, front, back, tags; most asked first, see :func:`notes`), UTF-8; return how many
    rows were written."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [(n.guid, to_anki_html(n.front), to_anki_html(n.back), n.tags)
            for n in notes(cards, survey) if n.language == language]
    with path.open("w", encoding="utf-8", newline="") as f:
        f.writelines(line + "\n" for line in anki_header(language))
        csv.writer(f, lineterminator="\n").writerows(rows)
    return len(rows)


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.flashcards",
                                     description="Write every lesson's interview questions "
                                                 "as Anki CSV files, one per language.")
    parser.add_argument("--out", default=str(BUILD / "flashcards"),
                        help="output folder (default: build/flashcards)")
    args = parser.parse_args(argv)
    cards = collect()
    for language in LANGUAGES:
        path = pathlib.Path(args.out) / f"flashcards_{language}.csv"
        count = write_csv(cards, language, path)
        questions = sum(c.language == language for c in cards)
        lesson_list = sorted({c.lesson for c in cards if c.language == language})
        order = "most asked first" if load_survey(SURVEY) is not None else "course order (no survey)"
        print(f"{count} cards from lessons {', '.join(lesson_list)} -> {path} "
              f"({questions - count} repeated questions merged; {order})")


if __name__ == "__main__":
    main()
