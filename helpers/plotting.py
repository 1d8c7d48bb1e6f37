"""The course's figure style, with a bundled CJK font so that Chinese and English render
on any machine.

- :func:`use_course_style` registers the fonts shipped in ``static/fonts/`` (a subset of
  Noto Sans CJK SC, SIL OFL 1.1, renamed "Course Noto Sans CJK SC") with matplotlib and sets
  the course's rcParams: Latin, Greek and math text in DejaVu Sans (bundled with
  matplotlib), with per-glyph fallback to the CJK font for Chinese.
- :func:`savefig` writes ``images/<name>.png`` with fixed metadata, so saving the same
  figure twice gives identical bytes.

Nothing happens at import time; matplotlib itself is only imported when a function is
called. System fonts are never needed.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CJK_FAMILY", "FONT_DIR", "FONT_FILES", "IMAGES_DIR", "use_course_style",
           "course_font_paths", "savefig"]

_ROOT = Path(__file__).resolve().parent.parent

#: Folder holding the shipped font files (see its README.md for provenance and licence).
FONT_DIR = _ROOT / "static" / "fonts"
#: The shipped font files, by weight.
FONT_FILES = {
    "regular": FONT_DIR / "NotoSansCJKsc-Regular-subset.otf",
    "bold": FONT_DIR / "NotoSansCJKsc-Bold-subset.otf",
}
#: Family name of the shipped CJK font (renamed so that it never collides with a full
#: Noto Sans CJK SC installed on the system).
CJK_FAMILY = "Course Noto Sans CJK SC"
#: Where :func:`savefig` writes by default: ``images/`` at the repository root.
IMAGES_DIR = _ROOT / "images"

_LATIN_FAMILY = "DejaVu Sans"  # shipped inside matplotlib (mpl-data/fonts/ttf)

_STYLE = {
    # fonts: DejaVu Sans first, the shipped CJK font as per-glyph fallback
    "font.family": [_LATIN_FAMILY, CJK_FAMILY],
    "font.sans-serif": [_LATIN_FAMILY, CJK_FAMILY],
    "mathtext.fontset": "dejavusans",
    # DejaVu Sans (and the CJK subset) have U+2212 MINUS SIGN, so use it for tick labels
    "axes.unicode_minus": True,
    # sizes for notebooks and lecture slides
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "figure.figsize": (6.4, 4.0),
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 10.5,
    "ytick.labelsize": 10.5,
    "legend.fontsize": 10.5,
    "figure.titlesize": 14,
    "lines.linewidth": 1.8,
    # clean axes with a light grid behind the data
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#b0b0b0",
    "grid.linestyle": "-",
    "grid.linewidth": 0.6,
    "grid.alpha": 0.35,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    # deterministic ids in SVG output as well
    "svg.hashsalt": "normalization-course",
}


def course_font_paths() -> list[Path]:
    """Return the shipped font files (regular first), raising ``FileNotFoundError`` with a
    pointer to ``static/fonts/README.md`` if one is missing."""
    paths = list(FONT_FILES.values())
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"course font file(s) missing: {', '.join(map(str, missing))}; "
            f"see {FONT_DIR / 'README.md'} for how to regenerate them")
    return paths


def use_course_style() -> None:
    """Register the bundled CJK font with matplotlib and apply the course's rcParams.

    Idempotent and cheap: a font file is added to ``matplotlib.font_manager.fontManager``
    only if that font manager does not list it yet, and the rcParams are simply set again.
    Call it before drawing (the helpers that draw figures call it themselves). Afterwards
    ``font.family`` is ``["DejaVu Sans", "Course Noto Sans CJK SC"]``: Latin, Greek and
    math symbols come from DejaVu Sans and each glyph DejaVu Sans lacks (hanzi, CJK
    punctuation) from the CJK font, so a title such as ``"批归一化 BatchNorm: σ² = 1"``
    renders without missing-glyph boxes or warnings.

    Lessons 00, 01, 02, 03, 04, 05, 06, 07, 08.
    """
    import matplotlib
    from matplotlib import font_manager

    manager = font_manager.fontManager
    known = {entry.fname for entry in manager.ttflist}
    for path in course_font_paths():
        if str(path) not in known:  # FONT_DIR is absolute and resolved
            manager.addfont(str(path))
    matplotlib.rcParams.update(_STYLE)


def savefig(fig, name: str, *, directory: str | Path | None = None, **kwargs) -> Path:
    """Save ``fig`` as ``images/<name>.png`` (``images/`` at the repository root, created
    if missing) and return the path.

    The PNG carries no ``Software`` (matplotlib version) entry, so the same figure saved
    twice, or on another machine with the same pinned packages, gives identical bytes.
    ``name`` may include sub-folders (``"ch2/bn_stats"``) but not leave the folder; a
    trailing ``.png`` is accepted. ``directory`` overrides the target folder (tests use
    it); other keyword arguments go to :meth:`matplotlib.figure.Figure.savefig`
    (``dpi``, ``bbox_inches``, ...).
    """
    base = Path(directory) if directory is not None else IMAGES_DIR
    rel = Path(name)
    if rel.suffix.lower() == ".png":
        rel = rel.with_suffix("")
    if rel.is_absolute() or ".." in rel.parts or not rel.name:
        raise ValueError(f"name must be a relative path inside the images folder, got {name!r}")
    path = base / rel.parent / f"{rel.name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Software": None, **kwargs.pop("metadata", {})}
    fig.savefig(path, format="png", metadata=metadata, **kwargs)
    return path
