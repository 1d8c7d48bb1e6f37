"""Every figure of the course, drawn by its helper function, is readable when projected and
labelled in both languages (:func:`helpers.plotting.text_problems`):

- no text smaller on a slide than a slide's body text (:data:`helpers.plotting.SLIDE_BODY_PX`
  CSS px), once the picture is scaled down to fit the slide's figure box
  (:data:`helpers.plotting.SLIDE_FIGURE_BOX`, :func:`helpers.plotting.slide_scale`);
- no two texts (titles, axis and tick labels, legend texts, annotations) overlapping, as
  matplotlib's renderer places them (``get_window_extent``);
- every text bilingual (holds Chinese) or language-neutral (symbols, numbers, layer names).

The figures are drawn from small inputs of the same shape as the lessons' (real runs where
they take well under a second), so the labels are the ones the lessons show. The checker
itself is tested on figures built to break each rule.
"""

from __future__ import annotations

import functools
import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from helpers import plotting  # noqa: E402
from helpers.plotting import english_words, is_bilingual_or_neutral, text_problems  # noqa: E402


# --------------------------------------------------------------------------------------
# inputs shaped like the lessons'
# --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _lesson00_results():
    from helpers import experiments

    x, y = experiments.digits(torch.float32)
    xb, yb = x[:512], y[:512]
    settings = {"gain 0.5": dict(gain=0.5), "gain 3": dict(gain=3.0),
                "gain 3 + BatchNorm": dict(gain=3.0, norm="batch"),
                "gain 3 + LayerNorm": dict(gain=3.0, norm="layer")}
    torch.manual_seed(0)
    return {name: experiments.layer_statistics(
        experiments.deep_mlp(width=128, dtype=torch.float32, **kw), xb, yb)
        for name, kw in settings.items()}


def _batch_size_rows():
    rows = []
    for norm in ("batch", "group"):
        for b in (32, 16, 8, 4, 2):
            for seed in range(3):
                bad = norm == "batch" and b == 2
                rows.append({"norm": norm, "batch_size": b, "seed": seed,
                             "eval": 40.0 if bad else 2.0 + seed, "train_mode": 60.0 if bad else 3.0,
                             "recomputed": 37.0 if bad else 2.5})
    noise = [{"layer": layer, "batch_size": b, "values": n * b, "noise": 0.8 / math.sqrt(n * b) + 0.01}
             for layer, n in enumerate((64, 16, 1)) for b in (32, 16, 8, 4, 2)]
    return rows, noise


def _depth_grads():
    g = torch.Generator().manual_seed(0)
    return {("markov", p, L): (torch.rand(3, L, generator=g) * 0.2 + (0.8 if p == "post" else 0.4))
            for p in ("post", "pre") for L in (6, 12, 24)}


def _curves(n=3, steps=40, start=2.4):
    return [{"steps": list(range(0, steps, 5)), "loss": [start * math.exp(-s / (10 + 5 * k)) for s in range(0, steps, 5)]}
            for k in range(n)]


def _histories(n=2):
    return [{"max_logit": [1 + 0.5 * s for s in range(30)], "entropy": [2 - 0.05 * s for s in range(30)],
             "loss": [3 - 0.08 * s for s in range(30)]} for _ in range(n)]


def _layout_orders():
    from helpers import transformer as HT

    models = {"LLaMA": ("pre", "rms"), "Gemma 2 / Peri-LN": ("sandwich", "gemma_rms"),
              "OLMo 2": ("reordered", "rms"), "Post-LN (2017)": ("post", "layer")}
    idx, _ = HT.reversal_batch(2, 3, 16, torch.Generator().manual_seed(0))
    orders = {}
    for name, (layout, norm) in models.items():
        torch.manual_seed(0)
        model = HT.LayoutTransformer(16, d_model=16, n_heads=2, num_layers=2, layout=layout, norm=norm)
        orders[name] = (layout, HT.module_order(model, idx))
    return orders


def _norm_samples():
    g = torch.Generator().manual_seed(0)
    out = []
    for name in ("blocks.0.attn_in_norm", "blocks.1.ffn_in_norm", "blocks.2.attn_in_norm",
                 "blocks.3.ffn_in_norm"):
        x = torch.randn(2000, generator=g, dtype=torch.float64) * 3
        out.append((name, x, torch.tanh(x / 3) * 2))
    return out


def _figures():
    """name -> callable returning a figure (or (figure, html)): every figure function."""
    from helpers import bn_practice as P
    from helpers import atlas, figures, grids, widgets
    from helpers import transformer_figures as HTF
    from helpers import weight_norms as WN
    from helpers.results import read_all_paths

    sweep = {None: [0.0, 0.0, 0.16, 0.654, 0.838, 0.927], "batch": [0.633] * 6, "layer": [0.632] * 6}
    gains = [0.25, 0.5, 1.0, 5 / 3, 3.0, 6.0]
    rows, noise = _batch_size_rows()
    img = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    rgb = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    samples = _norm_samples()
    bn_points = [("torch layer_norm", 1.75, 2.1), ("torch rms_norm", 1.0, 0.4),
                 ("torch batch_norm, train", 1.75, 0.5), ("torch batch_norm, eval", 0.5, 0.7),
                 ("torch group_norm, G=32", 1.75, 0.4), ("tiled · 分块 layer_norm", 1.75, 0.7),
                 ("tiled · 分块 layer_norm, var_mean", 1.75, 0.4), ("tiled · 分块 rms_norm", 1.0, 1.0)]
    wn_rows = [{"variant": v, "batch_size": b, "seed": s, "error": 2.0 + s + (30 if v == "bn" and b == 2 else 0)}
               for v in WN.VARIANTS for b in (64, 2) for s in range(2)]
    shapes = {"skewed": torch.distributions.Exponential(1.0).sample((2000,)),
              "bimodal": torch.cat([torch.randn(1000) - 3, torch.randn(1000) + 3])}
    return {
        # lesson 00
        "00 norm_map": figures.norm_map,
        "00 activation_histograms": lambda: figures.activation_histograms(_lesson00_results(), every=4),
        "00 gradient_histograms": lambda: figures.activation_histograms(_lesson00_results(), every=4,
                                                                        gradients=True),
        "00 gain_sweep": lambda: figures.gain_sweep(gains, sweep, ["0.25", "0.5", "1", "5/3", "3", "6"]),
        # lesson 01
        "01 batch_size_figure": lambda: figures.batch_size_figure(rows, noise),
        "01 bn_noise_figure": widgets.bn_noise_figure,
        # lesson 02
        "02 ln_eps_figure": widgets.ln_eps_figure,
        # lesson 03
        "03 group_map": lambda: figures.group_map(8, (1, 2, 4, 8)),
        "03 group_norm_figure": widgets.group_norm_figure,
        "03 instance_norm_images": lambda: figures.instance_norm_images(
            img * 3 + 1, img, [0.2, 0.5, 1.0, 1.5, 3.0, 6.0], [0.7, -0.3, 0.0, 2.0, -1.0, 5.0]),
        "03 adain_images": lambda: figures.adain_images(rgb, rgb.flip(1), rgb),
        # lesson 04
        "04 rms_mean_figure": widgets.rms_mean_figure,
        "04 eps_placement": lambda: figures.eps_placement([1.0, 1e-2, 1e-3, 1e-4], [1.0, 1.0, 0.9995, 0.995],
                                                          [1.0, 0.9999, 0.999, 0.99], 1e-6),
        # lesson 05
        "05 ln_placement": figures.ln_placement,
        "05 depth_gradients": lambda: figures.depth_gradients(_depth_grads(), (6, 12, 24),
                                                              {"post": 0.12, "pre": -0.48}),
        "05 pre_post_ln_figure": widgets.pre_post_ln_figure,
        "05 loss_curves": lambda: figures.loss_curves(
            {"Post-LN, no warmup": _curves(), "Post-LN, warmup 20": _curves(),
             "Pre-LN, no warmup": _curves()},
            math.log(11), "uniform guess · 均匀猜测: ln 11",
            title="reversal task · 反转任务: 6 layers · 层, d = 64, Adam lr 3e-3, 3 seeds · 种子"),
        "05 warmup_grid_figure": lambda: grids.warmup_grid_figure(read_all_paths("warmup_grid")),
        # lesson 06
        "06 update_growth": lambda: figures.update_growth(
            {(k, L): [0.01 * L ** e * (1 + 0.1 * s) for s in range(3)]
             for k, e in (("post", 0.5), ("pre", 0.1), ("deepnorm", 0.05)) for L in (6, 12, 24)},
            (6, 12, 24), {"post": 0.5, "pre": 0.1, "deepnorm": 0.05}),
        "06 loss_curves": lambda: figures.loss_curves(
            {"Post-LN, L = 6": _curves(), "Post-LN, L = 12": _curves(), "Pre-LN, L = 12": _curves(),
             "DeepNorm, L = 12": _curves()}, math.log(9), "uniform guess · 均匀猜测: ln 9",
            styles={"Post-LN, L = 6": ("#4c72b0", ":"), "Post-LN, L = 12": ("#4c72b0", "-"),
                    "Pre-LN, L = 12": ("#c44e52", "-"), "DeepNorm, L = 12": ("#55a868", "-")},
            title="reversal task · 反转任务: d = 32, Adam lr 3e-3, warmup · 预热 20"),
        # lesson 07
        "07 bandwidth_roofline": lambda: figures.bandwidth_roofline(
            [0.5, 2, 8, 32, 128, 512], [38.3, 31.3, 40.8, 16.4, 13.5, 13.3],
            {"L1d": 32 * 2**10, "L2": 512 * 2**10, "L3": 32 * 2**20}, 87.0, bn_points),
        # lesson 08
        "08 sync_spread": lambda: figures.sync_spread(
            [2, 4, 8, 16, 32], {"per-device mean": [0.7, 0.5, 0.35, 0.25, 0.18],
                                "synced mean": [0.25, 0.18, 0.12, 0.09, 0.06],
                                "per-device std": [0.6, 0.35, 0.25, 0.18, 0.12],
                                "synced std": [0.18, 0.12, 0.09, 0.06, 0.04]}),
        # lesson 09
        "09 draw_layouts": lambda: HTF.draw_layouts(_layout_orders()),
        "09 plot_runs": lambda: HTF.plot_runs({"no QK-norm · 无 QK-norm": _histories(),
                                               "QK-norm (per head) · 按头 QK-norm": _histories()}),
        "09 plot_lr_sweep": lambda: HTF.plot_lr_sweep(
            [1e-3, 3e-3, 1e-2, 3e-2], {"no QK-norm · 无 QK-norm": [1.0, 0.5, 2.7, 2.7],
                                       "QK-norm · 按头 QK-norm": [1.1, 0.4, 0.3, 0.9]}, chance=math.log(15)),
        "09 plot_stream_rms": lambda: HTF.plot_stream_rms(
            {layout: ([torch.randn(64) * (1 + k) for k in range(5)], [torch.randn(64) * (1 + 2 * k) for k in range(5)])
             for layout in ("pre", "sandwich", "reordered")}),
        "09 plot_norm_scatter": lambda: HTF.plot_norm_scatter(
            samples, [{"a": 2.0, "alpha": 1 / 3, "b": 0.0} for _ in samples]),
        "09 plot_runs_loss": lambda: HTF.plot_runs(
            {"LayerNorm": [_histories(1)[0]], "DyT, alpha0 0.1": [_histories(1)[0]],
             "DyT, alpha0 0.5": [_histories(1)[0]], "DyT, alpha0 2.0": [_histories(1)[0]]},
            keys=("loss",)),
        # lesson 10
        "10 plot_variance_shift": lambda: P.plot_variance_shift(
            [(label, [{"layer": k, "test_over_train": 0.5 + 0.1 * k, "shift": 1.5 - 0.1 * k} for k in (1, 2, 3)])
             for label in ("no dropout", "dropout 0.5 before every BN", "dropout 0.5 after the last BN",
                           "uniform noise 0.5 before every BN")], keep=0.5),
        "10 plot_weight_norms": lambda: P.plot_weight_norms(
            {"weight decay 0.0": [(s, 5 + 0.01 * s) for s in range(0, 400, 10)],
             "weight decay 0.005": [(s, 5 - 0.005 * s) for s in range(0, 400, 10)]}, lr=0.05, steps=400),
        # lesson 11
        "11 plot_grid": lambda: WN.plot_grid(wn_rows),
        "11 plot_shapes": lambda: WN.plot_shapes(shapes, {k: (v - v.mean()) / v.std() for k, v in shapes.items()}),
        # lesson 14
        "14 decision_map cnn": lambda: atlas.decision_map_figure("cnn"),
        "14 decision_map seq": lambda: atlas.decision_map_figure("seq"),
    }


FIGURES = _figures()


@pytest.fixture(scope="module", autouse=True)
def _course_style():
    plotting.use_course_style()
    yield
    plt.close("all")


def draw(name):
    out = FIGURES[name]()
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_is_readable_and_bilingual(name):
    fig = draw(name)
    try:
        problems = text_problems(fig)
    finally:
        plt.close(fig)
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_lesson_with_figures_is_covered():
    lessons = {name.split()[0] for name in FIGURES}
    assert lessons == {f"{k:02d}" for k in range(12)} | {"14"}


# --------------------------------------------------------------------------------------
# the checker catches each kind of problem
# --------------------------------------------------------------------------------------

def test_checker_passes_a_clean_figure():
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot([0, 1], [0, 1], label="BatchNorm")
    ax.set_xlabel("step · 步")
    ax.set_ylabel("loss · 损失")
    ax.set_title("$x_{l+1} = x_l + F(x_l)$")
    ax.legend()
    fig.tight_layout()
    assert text_problems(fig) == []
    plt.close(fig)


def test_checker_finds_overlapping_texts():
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.text(0.5, 0.5, "LayerNorm", fontsize=12)
    ax.text(0.52, 0.5, "RMSNorm", fontsize=12)
    problems = text_problems(fig)
    assert any(p.startswith("overlap") and "LayerNorm" in p and "RMSNorm" in p for p in problems)
    plt.close(fig)


def test_checker_finds_overlapping_tick_labels():
    fig, ax = plt.subplots(figsize=(3, 3))
    ax.set_xticks(range(8), [f"BatchNorm {k}" for k in range(8)])
    assert any(p.startswith("overlap") for p in text_problems(fig))
    plt.close(fig)


def test_checker_scales_figures_to_the_slide_box():
    """16 pt at 100 dpi is 22.2 px, as large as a slide's 22-px body text, on a figure that
    fits the 1200 x 520 px box; 15.5 pt (21.5 px) is not. A 15-inch-wide figure is scaled
    down to the box's width and a 6-inch-tall one to its height, and their 16 pt with them."""
    for (width, height), pt, ok in (((9.6, 3.0), 16, True), ((9.6, 3.0), 15.5, False),
                                    ((15.0, 3.0), 16, False), ((9.6, 6.0), 16, False)):
        fig, ax = plt.subplots(figsize=(width, height))
        ax.set_title("BatchNorm", fontsize=pt)
        ax.set_xticks([0, 1], ["0", "1"], fontsize=16)
        ax.set_yticks([])
        fig.tight_layout()
        assert (text_problems(fig) == []) is ok, (width, height, pt, text_problems(fig))
        assert bool(plotting.slide_scale(fig) == 1.0) is ((width, height) == (9.6, 3.0))
        plt.close(fig)


def test_checker_finds_small_and_english_only_text():
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.set_xlabel("training step")
    ax.legend(handles=ax.plot([0, 1], [0, 1], label="RMSNorm"), fontsize=8)
    problems = text_problems(fig)
    assert "English only: 'training step'" in problems
    assert any(p.startswith("too small (8 pt") and "RMSNorm" in p for p in problems)
    plt.close(fig)


@pytest.mark.parametrize("text, ok", [
    ("loss · 损失", True), ("BatchNorm", True), ("L = 12", True), ("Post-LN, L = 6", True),
    ("$\\|\\partial L / \\partial W\\|$", True), ("tiled layer_norm, var_mean", False),
    ("layer_norm", True), ("BN, eval()", True), ("1/√n", True), ("training loss", False),
    ("gain 3 + BatchNorm", False), ("gain 3 + BatchNorm · 增益 3", True),
])
def test_bilingual_or_neutral(text, ok):
    assert is_bilingual_or_neutral(text) is ok, english_words(text)


def test_bilingual_labels():
    glossary = [("no warmup", "无预热"), ("warmup", "预热")]
    assert plotting.bilingual("Post-LN, no warmup", glossary) == "Post-LN, no warmup · Post-LN, 无预热"
    assert plotting.bilingual("Post-LN, warmup 20", glossary) == "Post-LN, warmup 20 · Post-LN, 预热 20"
    assert plotting.bilingual("Pre-LN", glossary) == "Pre-LN"
    assert plotting.bilingual("预热 · warmup", glossary) == "预热 · warmup"


def test_checker_finds_text_outside_the_figure():
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot([0, 1], [0, 1], label="uniform noise 0.5 before every BN · 均匀噪声 0.5 在每个 BN 之前")
    fig.legend(loc="lower center", ncol=3, bbox_to_anchor=(0.9, 0.0))
    assert any(p.startswith("outside the figure") for p in text_problems(fig))
    plt.close(fig)


# --------------------------------------------------------------------------------------
# the stored pictures are shown at their size on a slide
# --------------------------------------------------------------------------------------

def _stored_pictures():
    """(where, (width, height)) of every PNG output of the committed lessons and every PNG
    in images/, read from the PNG headers."""
    import base64
    import pathlib

    import nbformat

    from tools.slides import png_size

    root = pathlib.Path(__file__).resolve().parent.parent
    found = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for k, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                data = out.get("data", {}).get("image/png")
                if data:
                    found.append((f"{path.name} cell {k}", png_size(base64.b64decode(data[:44]))))
    for path in sorted((root / "images").glob("*.png")):
        found.append((f"images/{path.name}", png_size(path.read_bytes()[:24])))
    return found


def test_stored_pictures_fit_the_slide_box():
    """A slide shows a picture at its stored size unless it is larger than the figure box, so
    the figure functions' 16-pt text stays as large as the slide's body text only if every
    stored picture fits the box (the browser test measures the same on the decks)."""
    pictures = _stored_pictures()
    assert len(pictures) >= 30  # every lesson's figures and the two committed images
    box = plotting.SLIDE_FIGURE_BOX
    too_large = [f"{where}: {w}x{h} px" for where, (w, h) in pictures if w > box[0] or h > box[1]]
    assert not too_large, f"larger than {box[0]}x{box[1]} px:\n" + "\n".join(too_large)


def test_checker_finds_missing_glyphs():
    """A text holding $...$ is drawn by mathtext, whose fonts have no Chinese: empty boxes,
    even for the Chinese outside the dollars."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.set_xticks([0, 1])
    ax.set_yticks([])
    ax.set_title("均值 · mean μ")  # plain text: the CJK font is a fallback
    assert text_problems(fig) == []
    ax.set_title(r"$\mu_B$ 均值")
    problems = text_problems(fig)
    assert any(p.startswith("missing glyph") and "U+5747" in p for p in problems), problems
    plt.close(fig)
