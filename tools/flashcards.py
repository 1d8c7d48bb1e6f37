r"""Export the interview questions of every lesson as flashcards that Anki imports.

Each lesson ends with interview questions: pairs of markdown cells tagged ``question`` and
``lang-en`` / ``lang-zh``, written as a bold question, a blank line, then the answer::

    **Question 2. Which variance does PyTorch's BatchNorm store?**

    The unbiased one, $\frac{n}{n-1}\sigma_B^2$ ...

``python -m tools.flashcards`` (``make flashcards``) writes one CSV per language,
``build/flashcards/flashcards_en.csv`` and ``flashcards_zh.csv``, with three columns: front
(the question), back (the answer) and tags (the lesson, e.g. ``normalization-course::01``).
Fields are HTML, as Anki expects: ``**bold**`` becomes ``<b>``, inline code ``<code>``,
line breaks ``<br>``, and math is rewritten for Anki's MathJax: ``$...$`` as ``\(...\)`` and
``$$...$$`` as ``\[...\]``. In Anki: File > Import, choose the file, "Fields separated by:
Comma", "Allow HTML in fields" on, and map the third column to Tags.
"""

from __future__ import annotations

import csv
import html
import pathlib
import re
from dataclasses import dataclass

__all__ = ["Card", "cards_from_notebook", "collect", "to_anki_html", "write_csv", "main"]

from .course import BUILD, lessons
LANGUAGES = ("en", "zh")
TAG_PREFIX = "normalization-course"

_QUESTION = re.compile(r"^\s*\*\*(?P<front>.+?)\*\*\s*(?:\n\s*\n|\n|$)(?P<back>.*)\Z", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)


@dataclass(frozen=True)
class Card:
    """One flashcard: ``lesson`` (e.g. ``"01"``), ``language`` (``"en"`` or ``"zh"``),
    ``front`` and ``back`` in the notebook's markdown."""
    lesson: str
    language: str
    front: str
    back: str


def _source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def cards_from_notebook(path) -> list[Card]:
    """The question cells of one notebook, in order. A cell tagged ``question`` must be
    tagged ``lang-en`` or ``lang-zh`` and start with a bold question; otherwise
    ``ValueError`` says which cell is malformed."""
    import json

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
        match = _QUESTION.match(_source(cell))
        if not match or not match["back"].strip():
            raise ValueError(f"{path.name}, cell {index}: a question cell must start with a "
                             f"**bold question** followed by its answer")
        cards.append(Card(lesson, languages[0], match["front"].strip(), match["back"].strip()))
    return cards


def collect(notebooks=None) -> list[Card]:
    """Cards of every lesson notebook (``notebooks/NN_*.ipynb`` by default), lesson by lesson."""
    if notebooks is None:
        notebooks = lessons()
    return [card for path in notebooks for card in cards_from_notebook(path)]


def to_anki_html(markdown: str) -> str:
    r"""The small subset of markdown the questions use, as HTML for an Anki field.

    >>> to_anki_html("**Why?** Because $\\sigma^2 < 1$, see `eval()`.\nDone: $$a<b$$")
    '<b>Why?</b> Because \\(\\sigma^2 &lt; 1\\), see <code>eval()</code>.<br>Done: \\[a&lt;b\\]'
    """
    pieces, out = [], []

    def keep(text: str) -> str:  # protect math and code from the other rewrites
        pieces.append(text)
        return f"\x00{len(pieces) - 1}\x00"

    text = _DISPLAY.sub(lambda m: keep(r"\[" + html.escape(m[1], quote=False) + r"\]"), markdown)
    text = _INLINE.sub(lambda m: keep(r"\(" + html.escape(m[1], quote=False) + r"\)"), text)
    text = _CODE.sub(lambda m: keep("<code>" + html.escape(m[1], quote=False) + "</code>"), text)
    text = html.escape(text, quote=False)
    text = _BOLD.sub(r"<b>\1</b>", text)
    text = text.replace("\n", "<br>")
    for part in re.split(r"(\x00\d+\x00)", text):
        out.append(pieces[int(part[1:-1])] if part.startswith("\x00") else part)
    return "".join(out)


def write_csv(cards: list[Card], language: str, path) -> int:
    """Write the ``language`` cards to ``path`` as an Anki CSV (front, back, tags), UTF-8;
    return how many were written."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [(to_anki_html(c.front), to_anki_html(c.back), f"{TAG_PREFIX}::{c.lesson}")
            for c in cards if c.language == language]
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
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
        lessons = sorted({c.lesson for c in cards if c.language == language})
        print(f"{count} cards from lessons {', '.join(lessons)} -> {path}")


if __name__ == "__main__":
    main()
