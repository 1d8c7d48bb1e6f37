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

__all__ = ["CJK_FAMILY", "FONT_DIR", "FONT_FILES", "IMAGES_DIR", "SLIDE_BODY_PX", "SLIDE_FIGURE_BOX",
           "use_course_style", "bilingual", "english_words", "is_bilingual_or_neutral", "figure_texts",
           "text_problems", "slide_scale",
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
    # sizes for lecture slides: at 100 dpi a 16-pt text is 22 px, the size of a slide's body
    # text (SLIDE_BODY_PX), once the figure fits SLIDE_FIGURE_BOX and is shown at its size
    "figure.dpi": 100,
    "savefig.dpi": "figure",
    "figure.figsize": (8.0, 4.6),
    "font.size": 16,
    "axes.titlesize": 17,
    "axes.labelsize": 16,
    "xtick.labelsize": 16,
    "ytick.labelsize": 16,
    "legend.fontsize": 16,
    "figure.titlesize": 18,
    "lines.linewidth": 2.2,
    "lines.markersize": 7,
    "legend.handlelength": 1.6,
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


# --------------------------------------------------------------------------------------
# legibility checks: every figure readable when projected, labels in both languages
# --------------------------------------------------------------------------------------

#: Size (CSS px) of a slide's body text (``.reveal .jp-RenderedHTMLCommon`` in
#: ``static/course.css``): no text of a figure may be smaller on a slide.
SLIDE_BODY_PX = 22
#: Box (CSS px, width and height) that a slide gives a figure (``static/course.css``): a
#: larger picture is scaled down to fit it, and its text with it.
SLIDE_FIGURE_BOX = (1200, 520)

#: Words that read the same in both languages: layer names, abbreviations, units, symbols.
NEUTRAL_WORDS = {
    "batchnorm", "layernorm", "instancenorm", "groupnorm", "rmsnorm", "deepnorm", "syncbatchnorm",
    "weightnorm", "post", "pre", "ln", "bn", "gn", "in", "wn", "ws", "qk", "norm", "adain", "ffn",
    "attention", "dyt", "tanh", "relu", "gelu", "rms", "std", "var", "max", "min", "log", "exp",
    "sqrt", "mean", "adam", "sgd", "lr", "eps", "kib", "mib", "gib", "gb", "flop", "gflop",
    "nats", "cnn", "mlp", "resnet", "imagenet", "gemma", "peri", "olmo", "dyt", "alpha", "beta", "theorem", "eq", "fig", "init", "id", "test",
    "train", "eval", "torch", "numpy", "softmax", "logit", "logits", "llama", "gpt", "per",
    "syncbn", "frn", "tlu", "evonorm", "iternorm", "dbn", "film", "adaln", "renorm", "float32",
}


def _has_cjk(text: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in text)


def english_words(text: str) -> list[str]:
    """The words of ``text`` (outside ``$...$`` math and code names such as ``layer_norm``
    or ``eval()``) that are English rather than symbols, numbers or :data:`NEUTRAL_WORDS`:
    runs of three or more Latin letters."""
    import re

    plain = re.sub(r"\$[^$]*\$", " ", text)
    plain = re.sub(r"\w*_\w*|\w+\(\)", " ", plain)  # code: layer_norm, var_mean, eval()
    words = re.findall(r"[A-Za-z]{3,}", plain)
    return [w for w in words if w.lower() not in NEUTRAL_WORDS]


def is_bilingual_or_neutral(text: str) -> bool:
    """True if ``text`` holds Chinese characters or no English word (:func:`english_words`)."""
    return _has_cjk(text) or not english_words(text)


def bilingual(label: str, glossary: list[tuple[str, str]]) -> str:
    """``label`` followed by `` · `` and its Chinese, made by replacing each English phrase
    of ``glossary`` (pairs, longest first) in turn; a label that already holds Chinese, or
    that no phrase matches, is returned as it is.

    >>> bilingual("Post-LN, no warmup", [("no warmup", "无预热")])
    'Post-LN, no warmup · Post-LN, 无预热'
    """
    if _has_cjk(label):
        return label
    zh = label
    for en, cn in glossary:
        zh = zh.replace(en, cn)
    return label if zh == label else f"{label} · {zh}"


def figure_texts(fig) -> list:
    """The text artists of ``fig`` that are drawn: titles, axis labels, tick labels of the
    ticks inside the view, offset texts, legend texts, annotations and free texts; visible,
    non-empty, and inside the figure. Draws the figure (Agg) first."""
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    tick_labels, drawn_ticks = set(), []
    for axis in fig.findobj(Axis):
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            tick_labels.update({id(tick.label1), id(tick.label2)})
        if not (axis.axes.axison and axis.axes.get_visible() and axis.get_visible()):
            continue  # ax.axis("off") or a hidden panel: no tick labels drawn
        for tick in axis._update_ticks():  # the ticks that are drawn
            drawn_ticks += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    width, height = fig.bbox.width, fig.bbox.height
    out = []
    for t in [t for t in fig.findobj(Text) if id(t) not in tick_labels] + drawn_ticks:
        if not t.get_visible() or not t.get_text().strip() or t in out:
            continue
        if hasattr(t, "get_figure") and t.get_figure(root=True) is None:
            continue
        box = t.get_window_extent(renderer)
        if box.x1 < 0 or box.y1 < 0 or box.x0 > width or box.y0 > height:
            continue
        out.append(t)
    return out


def _missing_glyphs(fig) -> list[str]:
    """Messages of matplotlib's missing-glyph warnings (``warnings`` for plain text, its
    logger for mathtext) while ``fig`` is drawn."""
    import logging
    import warnings

    class _Collect(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    handler, logger = _Collect(), logging.getLogger("matplotlib")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.canvas.draw()
    finally:
        logger.removeHandler(handler)
    messages = handler.messages + [str(w.message) for w in caught]
    return [m for m in messages if "glyph" in m.lower()]


def slide_scale(fig, box: tuple[int, int] = SLIDE_FIGURE_BOX) -> float:
    """The factor by which a slide scales ``fig``'s picture: the notebook stores it cropped
    to its contents (``bbox_inches="tight"``, as the inline backend does) at ``fig.dpi``, one
    pixel per CSS px, and a slide shows it at that size unless it is larger than ``box``."""
    import matplotlib

    fig.canvas.draw()
    tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    pad = 2 * matplotlib.rcParams["savefig.pad_inches"]
    width, height = (tight.width + pad) * fig.dpi, (tight.height + pad) * fig.dpi
    return min(1.0, box[0] / width, box[1] / height)


def text_problems(fig, min_px: float = SLIDE_BODY_PX, box: tuple[int, int] = SLIDE_FIGURE_BOX,
                  tolerance_px: float = 1.0) -> list[str]:
    """What makes ``fig`` hard to read when projected, one line each (empty when none):

    - a text smaller on a slide than ``min_px`` CSS px (a slide's body text,
      :data:`SLIDE_BODY_PX`), once the picture is scaled down to fit ``box``
      (:func:`slide_scale`);
    - two texts whose rendered boxes (``get_window_extent``) overlap by more than
      ``tolerance_px`` pixels in both directions;
    - a text that is only English (:func:`is_bilingual_or_neutral`);
    - a text that reaches outside the figure (cut off when saved, or widening the picture
      when the notebook crops it to its contents, so that it is scaled down on a slide);
    - a character that no font of the figure has (drawn as an empty box), for example
      Chinese inside ``$...$`` mathtext, which uses only the math font.
    """
    problems = [f"missing glyph: {m}" for m in _missing_glyphs(fig)]
    texts = figure_texts(fig)
    renderer = fig.canvas.get_renderer()
    scale = slide_scale(fig, box)
    if scale < 1.0:
        problems.append(f"larger than a slide's figure box {box[0]}x{box[1]} px: shown at "
                        f"{scale:.0%}")
    for t in texts:
        size = t.get_fontsize() * fig.dpi / 72 * scale
        if size < min_px - 0.05:
            problems.append(f"too small ({t.get_fontsize():g} pt, {size:.1f} px on a slide, "
                            f"body text {min_px} px): {t.get_text()!r}")
        if not is_bilingual_or_neutral(t.get_text()):
            problems.append(f"English only: {t.get_text()!r}")
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    width, height = fig.bbox.width, fig.bbox.height
    for t, box in boxes:
        if (box.x0 < -tolerance_px or box.y0 < -tolerance_px or box.x1 > width + tolerance_px
                or box.y1 > height + tolerance_px):
            problems.append(f"outside the figure: {t.get_text()!r}")
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            dx = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            dy = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if dx > tolerance_px and dy > tolerance_px:
                problems.append(f"overlap: {a.get_text()!r} and {b.get_text()!r}")
    return problems
