"""The one place that knows where the course lives: the repository root, its folders, and
the list of lessons (``notebooks/NN_*.ipynb``, in lesson order)."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
IMAGES = ROOT / "images"
STATIC = ROOT / "static"
BUILD = ROOT / "build"


def lessons() -> list[pathlib.Path]:
    """The lesson notebooks, ``notebooks/NN_*.ipynb``, sorted by their number."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
