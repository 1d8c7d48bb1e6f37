r"""Interactive explorers for lectures: move a slider, watch a normalisation layer react.

Each explorer is an ``ipywidgets.VBox`` holding its sliders, a figure (a PNG drawn with
matplotlib, shown in an ``ipywidgets.Image``) and a numeric readout (an
``ipywidgets.HTML``). Moving a slider recomputes the numbers with a pure *compute
function* of this module and redraws. The compute functions are documented with their
formulas and tested against independent references (``tests/test_widgets.py``).

Why PNG bytes and not ``ipywidgets.interact`` or an ``Output`` widget: without a widget
manager (a static export, or a test runner that re-executes the notebook) those leak their
plots and prints as ordinary cell output. Here the cell's only output is the container,
whose plain-text form (:meth:`Explorer.__repr__`) is a short deterministic line.

    from helpers.widgets import group_norm_explorer
    group_norm_explorer()

One explorer per lesson 01 to 05:

- :func:`bn_noise_explorer`: batch size B against the noise of BatchNorm's batch mean and
  standard deviation (theory :math:`\sigma/\sqrt B`), and what it does to a normalised value.
- :func:`ln_eps_explorer`: :math:`\epsilon` and the input's standard deviation s against
  LayerNorm's output standard deviation :math:`s/\sqrt{s^2+\epsilon}`.
- :func:`group_norm_explorer`: the number of groups G, which channels share statistics, and
  the special cases G = 1 (LayerNorm over (C, H, W)) and G = C (InstanceNorm).
- :func:`rms_mean_explorer`: the token mean :math:`\mu/\sigma` against RMSNorm's and
  LayerNorm's outputs.
- :func:`pre_post_ln_explorer`: the depth L against the per-layer gradient norms of Post-LN
  and Pre-LN at initialisation.
"""

from __future__ import annotations

import functools
import io
import math
from typing import Callable

import ipywidgets as widgets
import torch
import torch.nn.functional as F
from torch import Tensor

from .functional import centred_moments

__all__ = [
    "Explorer", "figure_png", "slider",
    "batch_statistics_spread", "batch_std_spread_theory", "bn_noise_figure", "bn_noise_explorer",
    "layer_norm_shrinkage", "ln_eps_figure", "ln_eps_explorer",
    "group_norm_channels", "group_norm_input", "group_norm_figure", "group_norm_explorer",
    "divisors",
    "rms_mean_offset", "rms_mean_figure", "rms_mean_explorer",
    "init_gradient_profile", "pre_post_ln_figure", "pre_post_ln_explorer",
]


# --------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------

def figure_png(fig) -> bytes:
    """The matplotlib figure ``fig`` as PNG bytes (fixed metadata, so the same figure gives
    the same bytes); the figure is closed, so nothing is shown as a side effect."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    finally:
        plt.close(fig)
    return buf.getvalue()


def slider(kind: str, description: str, value, **kwargs) -> widgets.Widget:
    """A slider for an explorer: ``kind`` is ``"int"`` (``IntSlider``), ``"float"``
    (``FloatSlider``), ``"log"`` (``FloatLogSlider``, base 10: ``min``/``max`` are exponents)
    or ``"select"`` (``SelectionSlider`` over ``options``). It updates on release
    (``continuous_update=False``) and leaves room for its description."""
    classes = {"int": widgets.IntSlider, "float": widgets.FloatSlider,
               "log": widgets.FloatLogSlider, "select": widgets.SelectionSlider}
    if kind not in classes:
        raise ValueError(f"kind must be one of {sorted(classes)}, got {kind!r}")
    return classes[kind](value=value, description=description, continuous_update=False,
                         style={"description_width": "initial"},
                         layout=widgets.Layout(width="460px"), **kwargs)


class Explorer(widgets.VBox):
    """A lecture explorer: sliders, then a figure and a readout redrawn on every move.

    ``controls`` maps keyword names to slider widgets; ``draw(**values)`` returns
    ``(figure, html)`` for the sliders' current values. The figure is drawn once at
    construction, then again whenever a slider's ``value`` changes. Its plain-text form
    (what a notebook shows without a running kernel, and what a test compares) is one line:
    ``Explorer: <title_en> (needs a running kernel) / 交互探索：<title_zh>（需要运行中的内核）``.

    With ``picture=True``, showing the explorer in a notebook (the last line of a cell, or
    ``display``) first shows the figure for the starting values as an ordinary PNG output,
    then the widget: the stored notebook, its HTML and slide editions, and JupyterLab without
    a running kernel then show a picture where the live widget cannot be drawn.
    """

    #: text/plain of the starting figure's output
    PICTURE_TEXT = "starting figure of the explorer / 交互探索的初始图"

    def __init__(self, title_en: str, title_zh: str, controls: dict[str, widgets.Widget],
                 draw: Callable[..., tuple[object, str]], picture: bool = True) -> None:
        if not controls:
            raise ValueError("an explorer needs at least one control")
        self._title_en, self._title_zh = title_en, title_zh
        self.picture = picture
        self.controls = dict(controls)
        self._draw = draw
        self.image = widgets.Image(format="png")
        self.readout = widgets.HTML()
        super().__init__([*self.controls.values(), self.image, self.readout])
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    def values(self) -> dict:
        """The current slider values, by keyword name."""
        return {name: control.value for name, control in self.controls.items()}

    def refresh(self) -> None:
        """Recompute and redraw for the current slider values."""
        fig, html = self._draw(**self.values())
        self.image.value = figure_png(fig)
        self.readout.value = html

    def _on_change(self, change) -> None:
        self.refresh()

    def picture_bundle(self) -> dict:
        """The current figure as a display bundle: base64 PNG and a short text."""
        import base64

        return {"image/png": base64.b64encode(self.image.value).decode("ascii"),
                "text/plain": self.PICTURE_TEXT}

    def _ipython_display_(self) -> None:
        """One output: the widget, with its current figure as a PNG in the same bundle. A
        front end with a running kernel shows the widget (the figure once, inside it); a
        saved notebook opened without one, and the static editions, which drop the widget
        view, show the PNG (tools.bench saves no widget views or widget state, so a lesson
        opened before it is run shows the figure once, with no disconnected slider)."""
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        if self.picture:
            bundle = {**bundle, "image/png": self.picture_bundle()["image/png"]}
        display(bundle, raw=True)

    def __repr__(self) -> str:
        return (f"Explorer: {self._title_en} (needs a running kernel) / "
                f"交互探索：{self._title_zh}（需要运行中的内核）")


def _style():
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    return plt


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><td style='padding-right:1.5em'>{k}</td><td><b>{v}</b></td></tr>"
                    for k, v in rows)
    return f"<table style='font-family:monospace'>{cells}</table>"


def _fmt(value: float, digits: int = 4) -> str:
    """``value`` with ``digits`` decimals, never as ``-0.000``."""
    return f"{round(value, digits) + 0.0:.{digits}f}"


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _positive(name: str, value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0 \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------
# lesson 01: batch size vs the noise of BatchNorm's batch statistics
# --------------------------------------------------------------------------------------

def batch_std_spread_theory(batch_size: int, std: float = 1.0) -> float:
    r"""Standard deviation, across batches, of the *biased* batch standard deviation
    :math:`s_B = \sqrt{\frac1B\sum_i (x_i - \bar x)^2}` of B independent
    :math:`\mathcal N(\mu, \sigma^2)` values (the one BatchNorm normalises with):

    .. math:: \operatorname{sd}(s_B) = \sigma\sqrt{\tfrac{B-1}{B}}\sqrt{1 - c_4(B)^2},\qquad
              c_4(B) = \sqrt{\tfrac{2}{B-1}}\,\frac{\Gamma(B/2)}{\Gamma((B-1)/2)},

    since the unbiased :math:`s` has :math:`E[s] = c_4\sigma` and
    :math:`E[s^2] = \sigma^2`. For large B it approaches :math:`\sigma/\sqrt{2B}`."""
    b = _positive_int("batch_size", batch_size, 2)
    std = _positive("std", std)
    c4 = math.sqrt(2.0 / (b - 1)) * math.exp(math.lgamma(b / 2) - math.lgamma((b - 1) / 2))
    return std * math.sqrt((b - 1) / b) * math.sqrt(max(0.0, 1.0 - c4 * c4))


def batch_statistics_spread(batch_size: int, num_batches: int = 2000, mean: float = 0.0,
                            std: float = 1.0, eps: float = 1e-5, seed: int = 0) -> dict:
    r"""How much BatchNorm's batch statistics vary from batch to batch.

    Draws ``num_batches`` batches of ``batch_size`` = B values of one channel,
    :math:`x \sim \mathcal N(\mu, \sigma^2)` (float64, ``torch.Generator`` seeded with
    ``seed``), and for each batch its mean :math:`\mu_B`, biased standard deviation
    :math:`\sigma_B`, and the normalised first value
    :math:`\hat x_B = (x_1 - \mu_B)/\sqrt{\sigma_B^2 + \epsilon}` (what BatchNorm outputs in
    training), next to :math:`\hat x = (x_1 - \mu)/\sqrt{\sigma^2 + \epsilon}` with the
    population statistics (what it should approximate).

    Returns a dict with the tensors ``batch_mean``, ``batch_std``, ``x_hat_batch``,
    ``x_hat_population`` (each of length ``num_batches``) and the numbers
    ``mean_spread`` (standard deviation of :math:`\mu_B` across batches; theory
    ``mean_theory`` :math:`= \sigma/\sqrt B`), ``std_spread`` (of :math:`\sigma_B`; theory
    ``std_theory`` from :func:`batch_std_spread_theory`) and ``activation_error``, the
    root-mean-square of :math:`\hat x_B - \hat x`. With B = 2, :math:`\hat x_B = \pm
    d/\sqrt{d^2+\epsilon}` for the half-difference d: almost exactly :math:`\pm 1`."""
    b = _positive_int("batch_size", batch_size, 2)
    n = _positive_int("num_batches", num_batches, 2)
    std = _positive("std", std)
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    g = torch.Generator().manual_seed(seed)
    x = mean + std * torch.randn(n, b, generator=g, dtype=torch.float64)
    mu_b, _, var_b = centred_moments(x, [1])
    mu_b, sd_b = mu_b.squeeze(1), var_b.squeeze(1).sqrt()
    x_hat_batch = (x[:, 0] - mu_b) / (sd_b ** 2 + eps).sqrt()
    x_hat_pop = (x[:, 0] - mean) / math.sqrt(std ** 2 + eps)
    return {
        "batch_size": b, "batch_mean": mu_b, "batch_std": sd_b,
        "x_hat_batch": x_hat_batch, "x_hat_population": x_hat_pop,
        "mean_spread": float(mu_b.std()), "mean_theory": std / math.sqrt(b),
        "std_spread": float(sd_b.std()), "std_theory": batch_std_spread_theory(b, std),
        "activation_error": float((x_hat_batch - x_hat_pop).pow(2).mean().sqrt()),
    }


_BN_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256)


@functools.lru_cache(maxsize=None)
def _bn_spreads(sizes: tuple[int, ...]) -> list[dict]:
    return [batch_statistics_spread(b) for b in sizes]


def bn_noise_figure(batch_size: int = 8, sizes: tuple[int, ...] = _BN_SIZES):
    """Figure and readout for :func:`bn_noise_explorer` (standard normal channel, 2000
    batches): left, the spread of the batch mean and standard deviation against B with their
    theory lines; right, BatchNorm's normalised value against the population-normalised one
    for 400 batches of size ``batch_size``. Returns ``(figure, html)``."""
    from matplotlib.ticker import NullFormatter

    plt = _style()
    r = batch_statistics_spread(batch_size)
    grid = _bn_spreads(tuple(sizes))
    bs = [s["batch_size"] for s in grid]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11.6, 4.9), width_ratios=(1.25, 1))
    ax0.loglog(bs, [s["mean_spread"] for s in grid], "o", color="#4c72b0",
               label=r"std($\mu_B$)")
    ax0.loglog(bs, [s["mean_theory"] for s in grid], "-", color="#4c72b0", lw=1,
               label=r"$\sigma/\sqrt{B}$")
    ax0.loglog(bs, [s["std_spread"] for s in grid], "s", color="#dd8452",
               label=r"std($\sigma_B$)")
    ax0.loglog(bs, [s["std_theory"] for s in grid], "--", color="#dd8452", lw=1,
               label=r"$\approx \sigma/\sqrt{2B}$")
    ax0.loglog([r["batch_size"]] * 2, [r["mean_spread"], r["std_spread"]], "o", ms=14,
               mfc="none", mec="k", mew=1.5)
    ax0.set_ylim(2e-3, 1.5)  # room below the lines for the legend
    ax0.yaxis.set_minor_formatter(NullFormatter())
    ax0.set_xlabel("batch size B · 批大小 B")
    ax0.set_ylabel("spread across batches\n跨批波动")
    ax0.set_title("σ = 1")
    # measured markers in the left column, theory lines in the right one; the words in the
    # title (a text mixing $...$ math and Chinese would lose the Chinese glyphs)
    handles, labels = ax0.get_legend_handles_labels()
    order = [0, 2, 1, 3]
    ax0.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower left", ncol=2,
               title="markers: measured · 实测\nlines: theory · 理论", alignment="left")
    k = 400
    ax1.plot(r["x_hat_population"][:k].numpy(), r["x_hat_batch"][:k].numpy(), ".", alpha=0.5, color="#c44e52")
    ax1.plot([-3.5, 3.5], [-3.5, 3.5], "k--", lw=1, label="y = x: no noise\n无批噪声")
    ax1.set_xlim(-3.5, 3.5)
    ax1.set_ylim(-4.5, 4.5)
    ax1.set_xlabel("x̂, population · 用总体统计量")
    ax1.set_ylabel("x̂, batch · 用批统计量")
    ax1.set_title(f"B = {r['batch_size']}")
    ax1.legend(loc="upper left", handlelength=1.5)
    fig.tight_layout()
    html = _table([
        ("batch size B", str(r["batch_size"])),
        ("sd of batch mean: measured / σ/√B", f"{r['mean_spread']:.3f} / {r['mean_theory']:.3f}"),
        ("sd of batch std: measured / theory", f"{r['std_spread']:.3f} / {r['std_theory']:.3f}"),
        ("rms error of the normalised value", f"{r['activation_error']:.3f}"),
    ])
    return fig, html


def bn_noise_explorer(batch_size: int = 8) -> Explorer:
    """Explorer (lesson 01): a slider over the batch size B (2 to 256) redraws
    :func:`bn_noise_figure`.

    Lesson 01."""
    if batch_size not in _BN_SIZES:
        raise ValueError(f"batch_size must be one of {_BN_SIZES}, got {batch_size!r}")
    return Explorer("batch size vs BatchNorm's batch statistics", "批大小与 BatchNorm 的批统计量",
                    {"batch_size": slider("select", "batch size B", batch_size,
                                          options=list(_BN_SIZES))},
                    bn_noise_figure)


# --------------------------------------------------------------------------------------
# lesson 02: eps vs small-variance tokens in LayerNorm
# --------------------------------------------------------------------------------------

def _standardised_tokens(tokens: int, d: int, seed: int) -> Tensor:
    """(tokens, d) float64 tokens with mean exactly 0 and biased std exactly 1 each."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(tokens, d, generator=g, dtype=torch.float64)
    z = z - z.mean(-1, keepdim=True)
    return z / z.pow(2).mean(-1, keepdim=True).sqrt()


def layer_norm_shrinkage(input_std: float, eps: float = 1e-5, d: int = 64, tokens: int = 256,
                         seed: int = 0) -> dict:
    r"""LayerNorm's output for tokens of standard deviation s = ``input_std``.

    Every token :math:`a = s\,z` has mean 0 and biased standard deviation exactly s (z is
    standardised Gaussian noise, float64). LayerNorm (``helpers.functional.layer_norm``,
    no affine) divides by :math:`\sqrt{s^2 + \epsilon}`, so each output token has standard
    deviation

    .. math:: \operatorname{std}(\mathrm{LN}(a)) = \frac{s}{\sqrt{s^2 + \epsilon}},

    about 1 for :math:`s \gg \sqrt\epsilon`, :math:`1/\sqrt 2` at :math:`s = \sqrt\epsilon`,
    and about :math:`s/\sqrt\epsilon` below: :math:`\epsilon` silently shrinks
    low-variance tokens. Returns ``input``, ``output`` ((tokens, d)), ``output_std``
    (measured, mean over tokens) and ``theory``."""
    from .functional import layer_norm

    s = _positive("input_std", input_std)
    if not (isinstance(eps, (int, float)) and eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    d = _positive_int("d", d, 2)
    a = s * _standardised_tokens(_positive_int("tokens", tokens), d, seed)
    y = layer_norm(a, (d,), eps=eps)
    return {"input": a, "output": y,
            "output_std": float(y.pow(2).mean(-1).sqrt().mean()),  # y has mean 0 per token
            "theory": s / math.sqrt(s * s + eps)}


def ln_eps_figure(input_std: float = 1e-3, eps: float = 1e-5):
    r"""Figure and readout for :func:`ln_eps_explorer`: left, the output standard deviation
    :math:`s/\sqrt{s^2+\epsilon}` against s (line: formula; dots: measured), with
    :math:`\sqrt\epsilon` marked; right, one token's 16 first features after LayerNorm with
    this :math:`\epsilon` and with :math:`\epsilon = 0`. Returns ``(figure, html)``.

    Lesson 02."""
    plt = _style()
    r = layer_norm_shrinkage(input_std, eps)
    ref = layer_norm_shrinkage(input_std, 0.0)
    s_grid = torch.logspace(-6, 2, 200, dtype=torch.float64)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11.6, 4.9))
    ax0.semilogx(s_grid.numpy(), (s_grid / (s_grid ** 2 + eps).sqrt()).numpy(), "-", color="#4c72b0",
                 label="s / √(s² + ε)")
    pts = [10.0 ** k for k in range(-6, 3)]
    ax0.semilogx(pts, [layer_norm_shrinkage(p, eps, tokens=8)["output_std"] for p in pts], "o",
                 color="#4c72b0", label="measured · 实测")
    if eps > 0:
        ax0.axvline(math.sqrt(eps), color="grey", ls=":", lw=1, label="s = √ε")
    ax0.plot([input_std], [r["output_std"]], "o", ms=13, mfc="none", mec="k", mew=1.5)
    ax0.set_ylim(-0.05, 1.75)  # the legend sits above the line at 1
    ax0.set_yticks([0, 0.5, 1])
    ax0.set_xlabel("input std s · 输入标准差 s")
    ax0.set_ylabel("output std · 输出标准差")
    ax0.set_title(f"ε = {eps:.0e}")
    ax0.legend(loc="upper left")
    idx = torch.arange(16).numpy()
    ax1.bar(idx - 0.2, ref["output"][0, :16].numpy(), width=0.4, color="#bbbbbb", label="ε = 0")
    ax1.bar(idx + 0.2, r["output"][0, :16].numpy(), width=0.4, color="#c44e52", label=f"ε = {eps:.0e}")
    ax1.set_ylim(-3, 3)
    ax1.set_xticks(range(0, 16, 5))
    ax1.set_xlabel("feature i · 特征 i")
    ax1.set_ylabel("LN(a)ᵢ")
    ax1.set_title(f"one token · 一个 token, s = {input_std:.1e}")
    ax1.legend(loc="lower right")
    fig.tight_layout()
    html = _table([
        ("input std s, eps", f"{input_std:.2e}, {eps:.0e}"),
        ("sqrt(eps)", f"{math.sqrt(eps):.2e}"),
        ("output std: measured / s/sqrt(s²+eps)", f"{r['output_std']:.4f} / {r['theory']:.4f}"),
        ("shrunk by", f"{100 * (1 - r['output_std']):.1f}%"),
    ])
    return fig, html


def ln_eps_explorer(input_std: float = 1e-3, eps: float = 1e-5) -> Explorer:
    r"""Explorer (lesson 02): sliders for the input's standard deviation (:math:`10^{-5}` to
    10) and for :math:`\log_{10}\epsilon` (:math:`10^{-12}` to :math:`10^{-1}`) redraw
    :func:`ln_eps_figure`.

    Lesson 02."""
    _positive("input_std", input_std)
    _positive("eps", eps)
    return Explorer("eps vs LayerNorm on small-variance tokens", "ε 与低方差 token 上的 LayerNorm",
                    {"input_std": slider("log", "input std s", input_std, base=10, min=-5,
                                         max=1, step=0.25, readout_format=".1e"),
                     "eps": slider("log", "eps", eps, base=10, min=-12, max=-1, step=0.5,
                                   readout_format=".0e")},
                    ln_eps_figure, picture=False)  # lesson 02 shows the starting figure above


# --------------------------------------------------------------------------------------
# lesson 03: the number of groups in GroupNorm
# --------------------------------------------------------------------------------------

def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending (the valid group counts for n channels)."""
    n = _positive_int("n", n)
    return [g for g in range(1, n + 1) if n % g == 0]


def group_norm_channels(x: Tensor, num_groups: int, eps: float = 1e-5) -> dict:
    r"""GroupNorm (no affine) of an (N, C, \*) input, written out, with per-channel readouts.

    Channel c belongs to group :math:`g(c) = \lfloor c / (C/G) \rfloor`. For each sample n
    and group g, over the :math:`m = (C/G)\cdot\prod \ast` values of its channels at every
    position,

    .. math:: \mu_{ng} = \frac1m\sum x,\quad \sigma^2_{ng} = \frac1m\sum (x-\mu_{ng})^2,\quad
              \hat x = \frac{x - \mu_{ng}}{\sqrt{\sigma^2_{ng} + \epsilon}}.

    G = 1 is LayerNorm over (C, \*), G = C InstanceNorm. Returns ``output``, ``group`` (the
    group of each channel), ``group_size`` m, and ``channel_mean``, ``channel_std`` ((N, C):
    mean and biased standard deviation of the output over each channel's positions: always 0
    and about 1 for every channel when G = C, in general not otherwise)."""
    if x.dim() < 2:
        raise ValueError(f"expected an (N, C, *) input, got shape {list(x.shape)}")
    n, c = x.shape[:2]
    g = _positive_int("num_groups", num_groups)
    if c % g:
        raise ValueError(f"{c} channels do not split into {g} groups; choose one of {divisors(c)}")
    xg = x.reshape(n, g, -1)
    _, centred, var = centred_moments(xg, [-1])
    y = (centred / torch.sqrt(var + eps)).reshape(x.shape)
    cmean, _, cvar = centred_moments(y.reshape(n, c, -1), [-1])
    cmean, cstd = cmean.squeeze(-1), cvar.squeeze(-1).sqrt()
    return {"output": y, "group": torch.arange(c) // (c // g), "group_size": xg.shape[-1],
            "channel_mean": cmean, "channel_std": cstd}


def group_norm_input(num_channels: int = 12, seed: int = 0) -> Tensor:
    """The explorer's input: (2, C, 4, 4) float64, channel c drawn from
    :math:`\\mathcal N(\\mu_c, \\sigma_c^2)` with means and scales that differ from channel to
    channel (:math:`\\mu_c = \\sin(c)`, :math:`\\sigma_c = 0.5 + c/C`), so that sharing statistics
    is visible."""
    c = _positive_int("num_channels", num_channels)
    g = torch.Generator().manual_seed(seed)
    idx = torch.arange(c, dtype=torch.float64)
    mu, sd = torch.sin(idx), 0.5 + idx / c
    return mu.view(1, c, 1, 1) + sd.view(1, c, 1, 1) * torch.randn(2, c, 4, 4, generator=g,
                                                                     dtype=torch.float64)


def group_norm_figure(num_groups: int = 3, num_channels: int = 12):
    """Figure and readout for :func:`group_norm_explorer`: top, the channels coloured by their
    group; bottom, each channel's output mean and standard deviation (sample 0). The readout
    compares the result with ``F.group_norm`` and, at G = 1 and G = C, with ``F.layer_norm``
    over (C, H, W) and ``F.instance_norm``. Returns ``(figure, html)``."""
    import numpy as np
    from matplotlib.patches import Patch

    plt = _style()
    x = group_norm_input(num_channels)
    c = num_channels
    r = group_norm_channels(x, num_groups)
    groups = r["group"].numpy()
    # the strip shares the bars' channel axis, so each colour sits above its channel's bars
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(11.6, 4.9), height_ratios=(1, 4), sharex=True)
    ax0.imshow(groups[None, :] % 10, cmap="tab10", vmin=0, vmax=9, aspect="auto")
    for ch, gid in enumerate(groups):
        ax0.text(ch, 0, str(gid), ha="center", va="center", color="white")
    ax0.set_yticks([])
    ax0.tick_params(axis="x", bottom=False, labelbottom=False)
    ax0.grid(False)
    label = "  (= LayerNorm)" if num_groups == 1 else "  (= InstanceNorm)" if num_groups == c else ""
    ax0.set_title(f"G = {num_groups}: {c // num_groups} channels per group · 每组 {c // num_groups} 个通道"
                  f"{label}")
    colors = plt.get_cmap("tab10")(groups % 10)
    chans = np.arange(c)
    ax1.bar(chans - 0.2, r["channel_mean"][0].numpy(), width=0.4, color=colors)
    ax1.bar(chans + 0.2, r["channel_std"][0].numpy(), width=0.4, color=colors, alpha=0.45,
            hatch="//")
    ax1.axhline(0, color="k", lw=0.8)
    ax1.axhline(1, color="grey", lw=0.8, ls=":")
    ax1.set_xticks(range(c))
    ax1.set_xlim(-0.5, c - 0.5)
    ax1.set_xlabel("channel c (colour = group) · 通道 c（颜色 = 组）")
    ax1.set_ylim(-2.2, 2.2)
    # grey swatches: the legend tells the two kinds of bar apart, the colours tell the groups
    ax1.legend([Patch(color="0.4"), Patch(facecolor="0.4", alpha=0.45, hatch="//")],
               ["output-channel mean · 输出通道均值", "output-channel std · 输出通道标准差"],
               loc="lower right", ncol=2, columnspacing=1.2, borderaxespad=0.1)
    fig.tight_layout()
    theirs = F.group_norm(x, num_groups)
    rows = [("G, channels per group", f"{num_groups}, {c // num_groups}"),
            ("values per statistic m = (C/G)·H·W", str(r["group_size"])),
            ("max |ours - F.group_norm|", _bound(r["output"] - theirs))]
    if num_groups == 1:
        rows.append(("G = 1: max |ours - F.layer_norm over (C, H, W)|",
                     _bound(r["output"] - F.layer_norm(x, x.shape[1:]))))
    if num_groups == c:
        rows.append(("G = C: max |ours - F.instance_norm|",
                     _bound(r["output"] - F.instance_norm(x))))
    rows.append(("largest |mean| of an output channel (sample 0)",
                 _fmt(float(r["channel_mean"][0].abs().max()), 3)))
    return fig, _table(rows)


def _bound(diff: Tensor) -> str:
    from .display import bound

    return bound(diff.abs().max(), 1e-12)


def group_norm_explorer(num_groups: int = 3, num_channels: int = 12) -> Explorer:
    """Explorer (lesson 03): a slider over the divisors G of ``num_channels`` redraws
    :func:`group_norm_figure`.

    Lesson 03."""
    options = divisors(num_channels)
    if num_groups not in options:
        raise ValueError(f"num_groups must divide num_channels = {num_channels}: one of {options}, "
                         f"got {num_groups!r}")
    draw = functools.partial(group_norm_figure, num_channels=num_channels)
    return Explorer(f"number of groups G in GroupNorm (C = {num_channels})",
                    f"GroupNorm 的组数 G（C = {num_channels}）",
                    {"num_groups": slider("select", "groups G", num_groups, options=options)},
                    draw)


# --------------------------------------------------------------------------------------
# lesson 04: the token mean vs RMSNorm
# --------------------------------------------------------------------------------------

def rms_mean_offset(mean_offset: float, d: int = 64, tokens: int = 256, eps: float = 1e-6,
                    seed: int = 0) -> dict:
    r"""RMSNorm and LayerNorm (no affine) of tokens whose mean is ``mean_offset`` = m times
    their standard deviation.

    Every token is :math:`a = z + m` with z standardised noise (mean 0, biased std 1 per
    token, float64), so :math:`\mu = m`, :math:`\sigma = 1` and
    :math:`\overline{a^2} = \sigma^2 + \mu^2 = 1 + m^2`. RMSNorm,
    :math:`a/\sqrt{\overline{a^2} + \epsilon}`, keeps the offset and shrinks the part that
    varies across features:

    .. math:: \operatorname{std}(\mathrm{RMSNorm}(a)) = \frac{1}{\sqrt{1 + m^2 + \epsilon}},
              \qquad \operatorname{mean}(\mathrm{RMSNorm}(a)) = \frac{m}{\sqrt{1 + m^2 + \epsilon}},

    while LayerNorm's output has mean 0 and std :math:`1/\sqrt{1+\epsilon}` whatever m.
    Returns ``input``, ``rms``, ``ln`` ((tokens, d)), the measured ``rms_std``,
    ``rms_mean``, ``ln_std``, ``ln_mean`` (biased std and mean over features, averaged over
    tokens) and the formulas ``rms_std_theory``, ``rms_mean_theory``."""
    if not (isinstance(mean_offset, (int, float)) and math.isfinite(mean_offset)):
        raise ValueError(f"mean_offset must be a finite number, got {mean_offset!r}")
    if not (isinstance(eps, (int, float)) and eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    d = _positive_int("d", d, 2)
    a = _standardised_tokens(_positive_int("tokens", tokens), d, seed) + mean_offset
    rms = a / torch.sqrt(a.pow(2).mean(-1, keepdim=True) + eps)
    _, centred, var = centred_moments(a, [-1])
    ln = centred / torch.sqrt(var + eps)

    def std(t):
        return float(centred_moments(t, [-1])[2].sqrt().mean())

    denom = math.sqrt(1 + mean_offset ** 2 + eps)
    return {"input": a, "rms": rms, "ln": ln,
            "rms_std": std(rms), "rms_mean": float(rms.mean()),
            "ln_std": std(ln), "ln_mean": float(ln.mean()),
            "rms_std_theory": 1 / denom, "rms_mean_theory": mean_offset / denom}


def rms_mean_figure(mean_offset: float = 2.0):
    r"""Figure and readout for :func:`rms_mean_explorer`: left, the output's standard
    deviation against :math:`m = \mu/\sigma` for RMSNorm (:math:`1/\sqrt{1+m^2}`) and
    LayerNorm (1); right, one token (16 first features) before and after each norm.
    Returns ``(figure, html)``.

    Lesson 04."""
    plt = _style()
    r = rms_mean_offset(mean_offset)
    m_grid = torch.linspace(0, 8, 161, dtype=torch.float64)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11.6, 4.9))
    ax0.plot(m_grid.numpy(), (1 / (1 + m_grid ** 2 + 1e-6).sqrt()).numpy(), "-", color="#c44e52",
             label="RMSNorm: 1/√(1 + m²)")
    ax0.plot(m_grid.numpy(), (torch.ones_like(m_grid) / math.sqrt(1 + 1e-6)).numpy(), "-", color="#4c72b0",
             label="LayerNorm: 1")
    ax0.plot([mean_offset] * 2, [r["rms_std"], r["ln_std"]], "o", ms=11, mfc="none",
             mec="k", mew=1.5, label="measured · 实测")
    ax0.set_ylim(0, 1.75)  # the legend sits above the LayerNorm line at 1
    ax0.set_yticks([0, 0.5, 1])
    ax0.set_xlabel("mean offset m = μ/σ · 均值偏移 m")
    ax0.set_ylabel("output std · 输出标准差")
    ax0.set_title("variation left · 剩余的波动")
    ax0.legend(loc="upper right")
    idx = torch.arange(16).numpy()
    ax1.plot(idx, r["input"][0, :16].numpy(), "o:", color="grey", label="input a · 输入 a")
    ax1.plot(idx, r["ln"][0, :16].numpy(), "s-", color="#4c72b0", label="LayerNorm(a)")
    ax1.plot(idx, r["rms"][0, :16].numpy(), "^-", color="#c44e52", label="RMSNorm(a)")
    ax1.set_ylim(-3, 11)
    ax1.set_xticks(range(0, 16, 5))
    ax1.set_xlabel("feature i · 特征 i")
    ax1.set_title(f"one token · 一个 token, m = {mean_offset:g}")
    # outside the axes: for some m the input's points pass through every corner
    ax1.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    html = _table([
        ("m = mu/sigma", f"{mean_offset:g}"),
        ("RMSNorm output std: measured / 1/sqrt(1+m²+eps)",
         f"{r['rms_std']:.4f} / {r['rms_std_theory']:.4f}"),
        ("RMSNorm output mean: measured / m/sqrt(1+m²+eps)",
         f"{_fmt(r['rms_mean'])} / {_fmt(r['rms_mean_theory'])}"),
        ("LayerNorm output std, mean", f"{_fmt(r['ln_std'])}, {_fmt(r['ln_mean'])}"),
    ])
    return fig, html


def rms_mean_explorer(mean_offset: float = 2.0) -> Explorer:
    """Explorer (lesson 04): a slider for the mean offset m = μ/σ (0 to 8) redraws
    :func:`rms_mean_figure`.

    Lesson 04."""
    if not (isinstance(mean_offset, (int, float)) and 0 <= mean_offset <= 8):
        raise ValueError(f"mean_offset must be between 0 and 8, got {mean_offset!r}")
    return Explorer("token mean vs RMSNorm and LayerNorm", "token 均值与 RMSNorm、LayerNorm",
                    {"mean_offset": slider("float", "mean offset m = μ/σ", float(mean_offset),
                                           min=0.0, max=8.0, step=0.25)},
                    rms_mean_figure, picture=False)  # lesson 04 shows the starting figure above


# --------------------------------------------------------------------------------------
# lesson 05: depth vs gradient norms of Post-LN and Pre-LN at initialisation
# --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _gradient_profile(num_layers, d_model, n_heads, seq_len, batch_size, vocab_size, seed):
    from . import transformer as HT

    out = {}
    for position in ("post", "pre"):
        with torch.random.fork_rng(devices=[]):  # leave the caller's global RNG untouched
            torch.manual_seed(seed)
            model = HT.TinyTransformer(vocab_size, d_model, n_heads=n_heads, num_layers=num_layers,
                                       max_len=seq_len, norm_position=position)
        g = torch.Generator().manual_seed(1000 + seed)
        x = HT.markov_tokens(batch_size, seq_len + 1, vocab_size, g)
        loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        out[position] = tuple(HT.layer_gradient_norms(model, "ffn.fc2.weight"))
    return out


def init_gradient_profile(num_layers: int, d_model: int = 32, n_heads: int = 4,
                          seq_len: int = 16, batch_size: int = 4, vocab_size: int = 32,
                          seed: int = 0) -> dict[str, list[float]]:
    r"""Per-layer :math:`\lVert \partial\mathcal L/\partial W_2^{(l)}\rVert_F` (the FFN's second
    weight, Xiong et al. 2020) of a ``helpers.transformer.TinyTransformer`` at initialisation,
    for ``"post"`` and ``"pre"`` placement: same seed (so the same weights), one batch of
    Markov token streams, next-token cross-entropy, one backward pass. A small model (d = 32,
    4 sequences of 16 tokens) so that it takes well under a second on a laptop CPU; results
    are cached per argument tuple, and torch's global random state is left as it was.
    Returns ``{"post": [...], "pre": [...]}``, layer 1 first."""
    args = [_positive_int(name, v) for name, v in (
        ("num_layers", num_layers), ("d_model", d_model), ("n_heads", n_heads),
        ("seq_len", seq_len), ("batch_size", batch_size), ("vocab_size", vocab_size))]
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}")
    out = _gradient_profile(*args, seed)
    return {k: list(v) for k, v in out.items()}


def pre_post_ln_figure(num_layers: int = 12, seeds: tuple[int, ...] = (0, 1, 2)):
    """Figure and readout for :func:`pre_post_ln_explorer`: the per-layer gradient norms of
    :func:`init_gradient_profile` for Post-LN and Pre-LN at depth ``num_layers``, mean over
    ``seeds`` with a band from the smallest to the largest, and in the readout the mean's
    first and last layer and their ratio. Returns ``(figure, html)``."""
    import numpy as np

    from matplotlib.ticker import MaxNLocator

    if not seeds:
        raise ValueError("seeds must name at least one seed")
    plt = _style()
    profiles = [init_gradient_profile(num_layers, seed=s) for s in seeds]
    layers = np.arange(1, num_layers + 1)
    fig, ax = plt.subplots(figsize=(10.4, 4.6))
    rows = [("number of layers L", str(num_layers))]
    for name, key, style, color in (("Post-LN", "post", "o-", "#4c72b0"),
                                    ("Pre-LN", "pre", "s-", "#c44e52")):
        g = np.array([p[key] for p in profiles])
        mean = g.mean(0)
        ax.plot(layers, mean, style, ms=6, color=color, label=name)
        ax.fill_between(layers, g.min(0), g.max(0), color=color, alpha=0.2)
        rows.append((f"{name}: first, last, last/first (mean of {len(seeds)} seeds)",
                     f"{mean[0]:.3f}, {mean[-1]:.3f}, {mean[-1] / mean[0]:.2f}"))
    ax.set_xlabel("layer l · 层 l")
    ax.set_ylabel("‖∂L/∂W₂‖, init · 初始化")
    ax.set_title(f"L = {num_layers}, d = 32: mean of {len(seeds)} seeds · {len(seeds)} 个种子的均值")
    ax.set_ylim(0, None)
    ax.set_xlim(0.5, max(num_layers, 2) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(7, integer=True))
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))  # clear of the bands at every L
    fig.tight_layout()
    return fig, _table(rows)


def pre_post_ln_explorer(num_layers: int = 12) -> Explorer:
    """Explorer (lesson 05): a slider for the depth L (1 to 24) redraws
    :func:`pre_post_ln_figure`.

    Lesson 05."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or not 1 <= num_layers <= 24:
        raise ValueError(f"num_layers must be an integer from 1 to 24, got {num_layers!r}")
    return Explorer("depth vs gradient norms of Post-LN and Pre-LN", "深度与 Post-LN、Pre-LN 的梯度范数",
                    {"num_layers": slider("int", "layers L", num_layers, min=1, max=24)},
                    pre_post_ln_figure)
