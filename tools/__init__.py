"""The course's build tooling, run from the repository root (not part of the ``helpers`` library
the notebooks import):

- :mod:`tools.course`: the repository root and the list of lessons, for every tool below.
- :mod:`tools.export`: single-language notebooks, the HTML edition and the reveal.js slides
  (``make export``, ``make slides``).
- :mod:`tools.slides`: the slide metadata of every cell (``python -m tools.slides``).
- :mod:`tools.flashcards`: the interview questions as Anki flashcards (``make flashcards``).
- :mod:`tools.bench`: execute and time the notebooks (``make bench``, ``make execute``).
"""
