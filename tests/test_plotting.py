"""Tests for :mod:`helpers.plotting`: the shipped CJK font covers the course's text, a
bilingual figure renders without a single warning, and :func:`helpers.plotting.savefig`
is byte-reproducible.

Only the project's own font is used: the tests pass on a machine without any system CJK
font, and on a machine with one they check that matplotlib still resolves Chinese to the
shipped file.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import warnings
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from helpers import plotting  # noqa: E402

TERMS = ["批归一化", "层归一化", "实例归一化", "组归一化", "均方根归一化", "激活值", "梯度",
         "标准差", "层数", "训练", "推理", "样本", "通道", "均值", "方差", "缩放", "平移"]
SYMBOLS = "αβγεμσ²√×·−≤≥∑‖→±∞≈°…–—‘’“”"
CJK_PUNCTUATION = "，。：；（）「」、！？《》【】·“”"
TITLE = "批归一化 BatchNorm: σ² = 1.25, −1.3416"


def gb2312_level1() -> list[str]:
    """All 3755 level-1 hanzi of GB2312 (bytes 0xB0A1-0xD7F9)."""
    chars = []
    for row in range(0xB0, 0xD8):
        for cell in range(0xA1, 0xFF):
            try:
                chars.append(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return chars


def font_charmap(path: Path) -> set[int]:
    """Code points the font maps to a glyph (fontTools if available, else FreeType)."""
    try:
        from fontTools.ttLib import TTFont
    except ImportError:  # pragma: no cover - fontTools ships with matplotlib
        from matplotlib.ft2font import FT2Font

        return set(FT2Font(str(path)).get_charmap())
    with TTFont(path, lazy=True) as font:
        return set(font.getBestCmap())


def system_has_cjk_font() -> bool:
    """True if fontconfig knows a Chinese font on this machine (False without fc-list)."""
    if shutil.which("fc-list") is None:
        return False
    out = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True,
                         check=False).stdout
    return bool(out.strip())


@pytest.fixture
def course_style():
    """Apply the course style inside an rc context, restored afterwards."""
    with matplotlib.rc_context():
        plotting.use_course_style()
        yield
    plt.close("all")


def test_gb2312_level1_sample_is_3755_chars():
    assert len(gb2312_level1()) == 3755


@pytest.mark.parametrize("weight", sorted(plotting.FONT_FILES))
def test_font_covers_course_text(weight):
    cmap = font_charmap(plotting.FONT_FILES[weight])
    wanted = set("".join(TERMS)) | set(SYMBOLS) | set(CJK_PUNCTUATION)
    wanted |= {chr(c) for c in range(0x20, 0x7F)}  # ASCII printable
    missing = sorted(ch for ch in wanted if ord(ch) not in cmap)
    assert not missing, f"{weight} font lacks {''.join(missing)!r}"
    level1 = gb2312_level1()
    sample = level1[::7] + level1[-5:]  # every 7th plus the end of the range
    missing = [ch for ch in sample if ord(ch) not in cmap]
    assert not missing, f"{weight} font lacks GB2312 level-1 hanzi {''.join(missing)!r}"


def test_font_covers_all_gb2312_level1():
    cmap = font_charmap(plotting.FONT_FILES["regular"])
    missing = [ch for ch in gb2312_level1() if ord(ch) not in cmap]
    assert not missing, f"{len(missing)} level-1 hanzi missing: {''.join(missing[:40])}"


def test_font_keeps_licence_records():
    from fontTools.ttLib import TTFont

    for path in plotting.FONT_FILES.values():
        with TTFont(path, lazy=True) as font:
            name = font["name"]
            assert "Adobe" in name.getDebugName(0)
            assert "Open Font License" in name.getDebugName(13)
            assert name.getDebugName(1) == plotting.CJK_FAMILY
    assert (plotting.FONT_DIR / "OFL.txt").is_file()


def test_use_course_style_is_idempotent(course_style):
    n = len(font_manager.fontManager.ttflist)
    plotting.use_course_style()
    plotting.use_course_style()
    assert len(font_manager.fontManager.ttflist) == n
    shipped = {p.resolve() for p in plotting.FONT_FILES.values()}
    registered = [e for e in font_manager.fontManager.ttflist
                  if Path(e.fname).resolve() in shipped]
    assert len({e.fname for e in registered}) == len(shipped)
    family = list(matplotlib.rcParams["font.family"])
    assert family[0] == "DejaVu Sans" and plotting.CJK_FAMILY in family


@pytest.mark.parametrize("weight", ["normal", "bold"])
def test_chinese_resolves_to_shipped_font(course_style, weight):
    # On a machine with system CJK fonts (fc-list) this is what keeps the other tests
    # honest: the course family must resolve to the shipped file, never a system font.
    has_system_cjk = system_has_cjk_font()
    prop = font_manager.FontProperties(family=plotting.CJK_FAMILY, weight=weight)
    path = Path(font_manager.findfont(prop, fallback_to_default=False)).resolve()
    expected = plotting.FONT_FILES["bold" if weight == "bold" else "regular"].resolve()
    assert path == expected, f"system CJK font present: {has_system_cjk}; got {path}"
    # and the default fallback chain (font.family) is DejaVu Sans from matplotlib's own
    # mpl-data, then the shipped file
    chain = [Path(font_manager.findfont(
        font_manager.FontProperties(family=family, weight=weight),
        fallback_to_default=False)).resolve()
        for family in matplotlib.rcParams["font.family"]]
    assert chain[0].name.startswith("DejaVuSans")
    assert Path(matplotlib.get_data_path()).resolve() in chain[0].parents
    assert expected in chain


def test_bilingual_figure_renders_without_warnings(course_style, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="matplotlib")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" becomes an error
        fig, ax = plt.subplots()
        ax.plot([-1.3416, 0.0, 1.3416], [0.2, 1.0, 0.2], label="激活值 activation")
        ax.set_title(TITLE)
        ax.set_xlabel("标准差 σ（训练、推理）：μ ± 2σ")
        ax.set_ylabel("梯度 ‖g‖ → 0")
        ax.legend(title="批归一化 / 层归一化")
        fig.suptitle("，。：；（）「」、 均方根归一化 RMSNorm ∑ x² ≤ 1", fontweight="bold")
        for term in TERMS:
            fig.text(0.01, 0.01, term)
        fig.canvas.draw()
        plotting.savefig(fig, "bilingual", directory=tmp_path)
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not problems, problems
    assert (tmp_path / "bilingual.png").stat().st_size > 0


def test_missing_glyph_check_is_live(course_style):
    # The test above relies on matplotlib warning about missing glyphs; make sure it still
    # does, with a character neither font has (U+E000 private use area).
    fig, ax = plt.subplots()
    ax.set_title("\ue000")
    with pytest.warns(UserWarning, match="missing from font"):
        fig.canvas.draw()


def test_savefig_is_byte_reproducible(course_style, tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1.0, -0.5, 0.25])
    ax.set_title(TITLE)
    first = plotting.savefig(fig, "repro", directory=tmp_path / "a")
    second = plotting.savefig(fig, "repro.png", directory=tmp_path / "b")
    assert first == tmp_path / "a" / "repro.png" and second.name == "repro.png"
    assert first.read_bytes() == second.read_bytes()
    assert b"Software" not in first.read_bytes()
    # a fresh figure drawn the same way gives the same bytes as well
    fig2, ax2 = plt.subplots()
    ax2.plot([0, 1, 2], [1.0, -0.5, 0.25])
    ax2.set_title(TITLE)
    third = plotting.savefig(fig2, "repro", directory=tmp_path / "c")
    assert third.read_bytes() == first.read_bytes()


def test_savefig_default_folder_and_bad_names(monkeypatch, tmp_path):
    monkeypatch.setattr(plotting, "IMAGES_DIR", tmp_path / "images")
    fig, _ = plt.subplots()
    try:
        path = plotting.savefig(fig, "sub/figure")
        assert path == tmp_path / "images" / "sub" / "figure.png" and path.is_file()
        for bad in ["../escape", "/abs/path", ""]:
            with pytest.raises(ValueError):
                plotting.savefig(fig, bad)
    finally:
        plt.close(fig)


def test_default_images_dir_is_repo_root():
    assert plotting.IMAGES_DIR == Path(__file__).resolve().parent.parent / "images"
    assert plotting.FONT_DIR == Path(__file__).resolve().parent.parent / "static" / "fonts"
