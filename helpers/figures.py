r"""The course's figures, drawn by code. ``python -m helpers.figures`` regenerates every
committed image in ``images/``.

The map of the norms follows Wu & He (2018), Figure 2: a feature-map tensor drawn as an
(N, C, H×W) block, with the elements that share one mean and variance shaded. The shading
comes from :func:`statistics_mask`, the index set :math:`S_i` of the paper's section 3.1,
which the lesson checks against torch's own layers. :func:`ln_placement` draws the Post-LN and
Pre-LN sub-layers of Xiong et al. (2020), Figure 1, for lesson 05.
"""

from __future__ import annotations

import math
import sys

import torch

from .experiments import LayerStats

__all__ = ["statistics_mask", "norm_map", "group_map", "activation_histograms", "gain_sweep",
           "ln_placement", "batch_size_figure", "instance_norm_images", "adain_images",
           "eps_placement", "depth_gradients", "loss_curves", "update_growth",
           "bandwidth_roofline", "sync_spread", "build_all"]

# (method key, English title, Chinese title)
NORM_PANELS = [
    ("batch", "BatchNorm", "批归一化"),
    ("layer", "LayerNorm", "层归一化"),
    ("instance", "InstanceNorm", "实例归一化"),
    ("group", "GroupNorm", "组归一化"),
]


def statistics_mask(method: str, shape: tuple[int, ...], index: tuple[int, ...],
                    num_groups: int = 2) -> torch.Tensor:
    r"""Boolean mask of the elements whose mean and variance the element at ``index`` is
    normalised with (the set :math:`S_i` of Wu & He 2018, eq. 2), for an input of ``shape``
    (N, C, \*spatial):

    - ``"batch"``: same channel, any sample and position: :math:`k_C = i_C`;
    - ``"layer"``: same sample: :math:`k_N = i_N`;
    - ``"instance"``: same sample and channel: :math:`k_N = i_N, k_C = i_C`;
    - ``"group"``: same sample and group of C/G channels:
      :math:`k_N = i_N,\ \lfloor k_C/(C/G)\rfloor = \lfloor i_C/(C/G)\rfloor`;
    - ``"token"`` (LayerNorm/RMSNorm on (B, T, d)): same sample and time step.

    Lesson 00.
    """
    n_idx = torch.arange(shape[0]).reshape([-1] + [1] * (len(shape) - 1))
    c_idx = torch.arange(shape[1]).reshape([1, -1] + [1] * (len(shape) - 2))
    same_n = (n_idx == index[0]).expand(shape)
    same_c = (c_idx == index[1]).expand(shape)
    if method == "batch":
        return same_c.clone()
    if method == "layer":
        return same_n.clone()
    if method == "instance":
        return same_n & same_c
    if method == "group":
        if shape[1] % num_groups:
            raise ValueError(f"{shape[1]} channels do not split into {num_groups} groups")
        per = shape[1] // num_groups
        return same_n & ((c_idx // per) == index[1] // per).expand(shape)
    if method == "token":  # (B, T, d): index = (b, t, ...)
        return same_n & same_c
    raise ValueError(f"unknown method {method!r}; use batch, layer, instance, group or token")


def _block(ax, mask: torch.Tensor, color: str, xlabel: str, ylabel: str, zlabel: str) -> None:
    """Draw a (depth, columns, rows) boolean mask as a voxel block, shaded where True."""
    import numpy as np

    filled = np.ones(mask.shape, dtype=bool)
    colors = np.where(mask.numpy()[..., None], np.array([color]), np.array(["#f4f4f4"]))
    ax.voxels(filled, facecolors=colors[..., 0], edgecolor="#555555", linewidth=0.4)
    ax.set_box_aspect(mask.shape, zoom=1.1)
    ax.view_init(elev=22, azim=-58)
    ax.set_xlabel(xlabel, labelpad=-12)
    ax.set_ylabel(ylabel, labelpad=-12)
    ax.set_zlabel(zlabel, labelpad=-4)  # clear of the axis line
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_zticks([])
    ax.xaxis.pane.set_visible(False)
    ax.yaxis.pane.set_visible(False)
    ax.zaxis.pane.set_visible(False)
    ax.set_facecolor("none")  # a neighbouring panel's background must not hide this one's labels


def norm_map(n: int = 4, c: int = 6, hw: int = 5, num_groups: int = 2, b: int = 4, t: int = 5,
             d: int = 6):
    """Figure: the four norms on an (N, C, H×W) block, shaded where one element's statistics
    come from, plus LayerNorm/RMSNorm on a (B, T, d) sequence block, in one row of five panels
    that fits a slide's figure box at full size. Returns the figure.

    Lesson 00."""
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    fig = plt.figure(figsize=(11.8, 4.4))
    palette = {"batch": "#4c72b0", "layer": "#dd8452", "instance": "#55a868", "group": "#c44e52"}
    for k, (key, en, zh) in enumerate(NORM_PANELS):
        ax = fig.add_subplot(1, 5, k + 1, projection="3d")
        # voxel axes: x = N, y = C, z = H×W; the reference element is the front corner
        # element of the visible side face, so each shaded set shows on the visible faces
        mask = statistics_mask(key, (n, c, hw), (n - 1, 0, 0), num_groups)
        _block(ax, mask, palette[key], "N", "C", "H×W")
        ax.set_title(f"{en}\n{zh}" + (f"\nG = {num_groups}" if key == "group" else "\n "),
                     pad=0)
    ax = fig.add_subplot(1, 5, 5, projection="3d")
    _block(ax, statistics_mask("token", (b, t, d), (b - 1, 0, 0)), "#8172b3", "B", "T", "d")
    ax.set_title("LN / RMSNorm\n层归一化与\n均方根归一化", pad=0)
    fig.subplots_adjust(left=0.0, right=0.97, bottom=0.0, top=0.84, wspace=0.12)
    return fig


def group_map(num_channels: int = 8, group_counts: tuple[int, ...] = (1, 2, 4, 8)):
    """Figure: for each number of groups G (one row), the channels coloured by the group
    whose statistics they share. G = 1 is LayerNorm over (C, H, W), G = C InstanceNorm.

    Lesson 03."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .plotting import use_course_style

    use_course_style()
    fig, ax = plt.subplots(figsize=(9.6, 0.6 * len(group_counts) + 1.2))
    rows = []
    for g in group_counts:
        if num_channels % g:
            raise ValueError(f"{num_channels} channels do not split into {g} groups")
        rows.append(np.arange(num_channels) // (num_channels // g))
    ax.imshow(np.array(rows), cmap="tab10", vmin=0, vmax=9, aspect="auto")
    for r, ids in enumerate(rows):
        for c, gid in enumerate(ids):
            ax.text(c, r, str(gid), ha="center", va="center", color="white")
    ax.set_yticks(range(len(group_counts)),
                  labels=[f"G = {g}" + ("  (LN)" if g == 1 else "  (IN)" if g == num_channels else "")
                          for g in group_counts])
    ax.set_xticks(range(num_channels))
    ax.set_xlabel("channel c · 通道 c (number = group index · 数字为组号)")
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.tight_layout()
    return fig


def _setting_title(name: str) -> str:
    """``"gain 3 + BatchNorm"`` -> ``"gain 3 + BatchNorm · 增益 3 + BatchNorm"`` (a name that
    already holds Chinese is kept)."""
    if any("\u4e00" <= ch <= "\u9fff" for ch in name):
        return name
    return f"{name} · {name.replace('gain', '增益').replace('no normalisation', '无归一化')}"


def _short_number(value: float, _pos=None) -> str:
    """A tick label: ``0.2``, ``0``, ``−3e−4`` (no offset text under the axis)."""
    if value == 0:
        return "0"
    text = f"{value:g}" if abs(value) >= 0.01 else f"{value:.0e}".replace("e-0", "e-")
    return text.replace("-", "−")


def _round_below(value: float) -> float:
    """The largest one-digit multiple of a power of ten not above ``value`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(value))
    return math.floor(value / power * (1 + 1e-9)) * power


def activation_histograms(results: dict[str, LayerStats], every: int = 4, gradients: bool = False,
                          clip: float = 0.3):
    """Karpathy-style per-layer histograms: one panel per setting (four panels a row), one line
    per layer (every ``every``-th layer), of the tanh outputs or of their gradients, as the
    fraction of the values in each of 60 bins.

    All panels share one y axis, so that a panel whose values spread over many bins (a
    normalised network) is not stretched to look as peaked as one whose values pile up in a
    few (saturation at ±1, or everything in the central bin). The y axis ends at the highest
    bar below ``clip``; a line that leaves it is cut, and the panel says by how much. For the
    tanh outputs the panels also share the x axis [−1, 1]; for the gradients each panel has
    its own symmetric range (the 99.5th percentile of |g| over its layers), because the
    gradients of the settings differ by orders of magnitude.

    Lesson 00."""
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    from matplotlib.ticker import FuncFormatter

    use_course_style()
    cols = min(len(results), 4)
    rows = (len(results) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11.8, 5.0 * rows), sharey=True,
                             sharex=not gradients, squeeze=False)
    curves, peaks = [], []
    for ax, (title, stats) in zip(axes.flat, results.items()):
        series = [t.float() for t in (stats.gradients if gradients else stats.activations)]
        hi = max(float(t.abs().quantile(0.995)) for t in series) if gradients else 1.0
        hi = hi if hi > 0 else 1.0
        edges = torch.linspace(-hi, hi, 61)
        centres = (edges[:-1] + edges[1:]) / 2
        for i in range(0, len(series), every):
            counts = torch.histc(series[i], bins=60, min=-hi, max=hi)
            frac = counts / counts.sum()
            curves.append((ax, i, centres, frac))
            peaks.append(float(frac.max()))
        ax.set_title(_setting_title(title).replace(" · ", "\n"))
        if gradients:  # ticks −a, 0, a, a round a well inside the range, in units of 10^e
            ax.set_xlim(-hi, hi)
            a = _round_below(0.75 * hi)
            ax.set_xticks([-a, 0, a])
            e = math.floor(math.log10(a)) if a < 0.01 else 0
            ax.xaxis.set_major_formatter(FuncFormatter(
                lambda v, _pos, e=e: _short_number(round(v / 10.0 ** e, 6))))
            if e:
                ax.set_xlabel(f"× $10^{{{e}}}$", labelpad=2)
        else:
            ax.set_xticks([-1, 0, 1])
    top = 1.08 * max([p for p in peaks if p <= clip] or [clip])
    colors = {}
    for ax, i, centres, frac in curves:
        line, = ax.plot(centres.numpy(), frac.numpy(), lw=1.5, color=colors.get(i),
                        label=f"{i + 1}")
        colors[i] = line.get_color()
    for ax in axes.flat[len(results):]:
        ax.set_visible(False)
    for ax in axes.flat[:len(results)]:
        cut = max(float(f.max()) for a, _, _, f in curves if a is ax)
        if cut > top:
            ax.text(1.0, 0.98, f"peak {cut:.2f}\n峰值 {cut:.2f}\noff scale\n超出范围",
                    transform=ax.transAxes, va="top", ha="right", color="#444444")
    axes[0, 0].set_ylim(0, top)
    for ax in axes[:, 0]:
        ax.set_ylabel("fraction · 占比")
    fig.supxlabel("gradient dL/dh · 梯度" if gradients else "tanh output · tanh 输出",
                  fontsize=plt.rcParams["axes.labelsize"], y=0.02 / rows, va="bottom")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               title="layer · 层", columnspacing=1.2)
    # margins in inches: the legend and the two-line titles above, ticks and label below
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=1.0 / width, right=1 - 0.08 / width,
                        bottom=(1.15 if gradients else 0.8) / height,
                        top=1 - 1.5 / height, wspace=0.08, hspace=0.5)
    return fig


def gain_sweep(gains: list[float], sweep: dict, labels: list[str] | None = None):
    """The standard deviation of the last layer's activations against the initial weight gain
    g (log axis), one line per normalisation of ``sweep`` (``None``, ``"batch"``,
    ``"layer"`` mapped to a list of stds, one per gain).

    Lesson 00."""
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    fig, ax = plt.subplots(figsize=(10.6, 4.2))
    styles = {None: ("o-", "no normalisation · 无归一化"), "batch": ("s-", "BatchNorm"),
              "layer": ("^--", "LayerNorm")}
    for norm, stds in sweep.items():
        ax.plot(gains, stds, styles[norm][0], label=styles[norm][1])
    ax.set_xscale("log")
    ax.set_xticks(gains, labels=labels or [f"{g:g}" for g in gains])
    ax.minorticks_off()
    ax.set_xlabel("initial weight gain g · 初始权重增益 g")
    ax.set_ylabel("std of layer 20 · 第 20 层标准差")
    # right of the plot, where it covers no line and no point
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0, frameon=False)
    fig.tight_layout()
    return fig


def ln_placement():
    """Figure: one Transformer sub-layer F (attention or FFN) with its residual connection,
    under Post-LN, :math:`x_{l+1} = \\mathrm{LN}(x_l + F(x_l))`, and Pre-LN,
    :math:`x_{l+1} = x_l + F(\\mathrm{LN}(x_l))` with one final LN after the last layer
    (Xiong et al. 2020, Figure 1). The norm is drawn in orange. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from .plotting import use_course_style

    use_course_style()
    fig, axes = plt.subplots(1, 2, figsize=(11.8, 5.0))
    ln_color, f_color = "#f5b971", "#a6c8e8"

    def box(ax, y, text, color, x=0.5, w=0.44):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - 0.045), w, 0.09,
                                    boxstyle="round,pad=0.01", fc=color, ec="#333333"))
        ax.text(x, y, text, ha="center", va="center", fontsize=16)

    def plus(ax, y, x=0.5):
        ax.add_patch(plt.Circle((x, y), 0.03, fc="white", ec="#333333"))
        ax.text(x, y, "+", ha="center", va="center", fontsize=16)

    def arrow(ax, x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.4,
                                    shrinkA=0, shrinkB=0))

    def skip(ax, y0, y1, x_side=0.95):  # residual path: right of the main column
        ax.plot([0.5, x_side, x_side], [y0, y0, y1], color="#333333", lw=1.4)
        arrow(ax, x_side, y1, 0.53, y1)

    # Post-LN: x -> F -> (+ x) -> LN
    ax = axes[0]
    ax.text(0.5, 0.02, r"$x_l$", ha="center", fontsize=16)
    arrow(ax, 0.5, 0.08, 0.5, 0.255)
    box(ax, 0.3, "F (attention / FFN · 注意力 / FFN)", f_color, w=0.78)
    arrow(ax, 0.5, 0.345, 0.5, 0.49)
    plus(ax, 0.52)
    skip(ax, 0.15, 0.52)
    arrow(ax, 0.5, 0.55, 0.5, 0.655)
    box(ax, 0.7, "LayerNorm", ln_color)
    arrow(ax, 0.5, 0.745, 0.5, 0.88)
    ax.text(0.5, 0.9, r"$x_{l+1} = \mathrm{LN}(x_l + F(x_l))$", ha="center", fontsize=16)
    ax.set_title("Post-LN")

    # Pre-LN: x -> LN -> F -> (+ x); final LN after the last layer
    ax = axes[1]
    ax.text(0.5, 0.02, r"$x_l$", ha="center", fontsize=16)
    arrow(ax, 0.5, 0.08, 0.5, 0.135)
    box(ax, 0.18, "LayerNorm", ln_color)
    arrow(ax, 0.5, 0.225, 0.5, 0.275)
    box(ax, 0.32, "F (attention / FFN · 注意力 / FFN)", f_color, w=0.78)
    arrow(ax, 0.5, 0.365, 0.5, 0.45)
    plus(ax, 0.48)
    skip(ax, 0.11, 0.48)
    arrow(ax, 0.5, 0.51, 0.5, 0.56)  # ends below the equation
    ax.text(0.5, 0.615, r"$x_{l+1} = x_l + F(\mathrm{LN}(x_l))$", ha="center", va="center",
            fontsize=16)
    ax.plot([0.5, 0.5], [0.67, 0.715], color="#333333", lw=1.4, ls=":")  # starts above it
    box(ax, 0.76, "final LayerNorm · 最终 LN", ln_color, w=0.62)
    ax.text(0.5, 0.9, "after the last layer only · 仅在最后一层之后", ha="center", fontsize=16,
            color="#555555")
    ax.set_title("Pre-LN")
    for ax in axes:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------
# the lessons' result figures: one function per figure, the notebook cell shows the call
# --------------------------------------------------------------------------------------

def _style():
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    return plt


def batch_size_figure(rows: list[dict], noise: list[dict], paper: dict | None = None,
                      spatial: tuple[int, ...] | None = None):
    r"""Test error against batch size for BatchNorm (three ways of getting its statistics at
    test time) and GroupNorm in our grid (``rows`` of :func:`helpers.experiments.batch_size_grid`),
    next to Wu & He (2018), Table 2 (``paper``, default
    :data:`helpers.experiments.WU_HE_TABLE2`); on the right, the noise of each BatchNorm layer's
    batch mean (BN 1 to BN 3, the layer's positions × B values) against the number of values per
    statistic (``noise`` of
    :func:`helpers.experiments.statistic_noise`) with the :math:`1/\sqrt n` of independent
    values dashed.

    Lesson 01."""
    from . import experiments

    plt = _style()
    paper = paper if paper is not None else experiments.WU_HE_TABLE2
    spatial = spatial if spatial is not None else experiments.SPATIAL
    fig, (ours, theirs, ax2) = plt.subplots(1, 3, figsize=(11.8, 5.0), width_ratios=(1, 1, 1.45))
    sizes = sorted({r["batch_size"] for r in rows}, reverse=True)

    def mean_error(norm, key, b):
        vals = [r[key] for r in rows if r["norm"] == norm and r["batch_size"] == b]
        return sum(vals) / len(vals)

    for norm, key, label, style, color in [
            ("batch", "eval", "BN, eval() · 评估模式", "o-", "C0"),
            ("batch", "train_mode", "BN, train() · 训练模式", "s--", "C2"),
            ("batch", "recomputed", "BN, recomputed · 重算统计量", "^:", "C3"),
            ("group", "eval", "GN", "D-", "C1")]:
        ours.plot(sizes, [mean_error(norm, key, b) for b in sizes], style, label=label, color=color)
    paper_sizes = sorted(paper["batch"], reverse=True)
    for norm, label, style, color in [("batch", "BN", "o-", "C0"), ("group", "GN", "D-", "C1")]:
        theirs.plot(paper_sizes, [paper[norm][b] for b in paper_sizes], style, label=label, color=color)
    for ax, ticks, title, xlabel, ylabel in [
            (ours, sizes, "ours: digits\n本课：手写数字", "batch size B · 批大小 B",
             "test error % · 测试错误率"),
            (theirs, paper_sizes, "Wu & He: ImageNet\n论文：ImageNet", "images per GPU\n每卡图像数",
             "val error % · 验证错误率")]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.minorticks_off()
        ax.invert_xaxis()
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    # one legend for both error panels: the paper's BN and GN are drawn like ours in eval()
    handles, labels = ours.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               columnspacing=1.2)
    for layer, marker, shade in zip(range(3), "os^", ["0.15", "0.4", "0.65"]):  # greys: layers
        points = [r for r in noise if r["layer"] == layer]
        ax2.loglog([r["values"] for r in points], [r["noise"] for r in points], marker + "-",
                   color=shade, label=f"{layer + 1}: n = {spatial[layer] if spatial[layer] > 1 else ''}B")
    n = torch.logspace(0, 4, 50)
    ax2.loglog(n.numpy(), (n ** -0.5).numpy(), "k--", lw=1, label="1/√n")
    ax2.set_xlabel("values per statistic n\n每个统计量的值个数 n")
    ax2.set_ylabel(r"rms $(\mu_B - \mu)/\sigma$")
    ax2.set_title("noise of the batch mean\n批均值的噪声")
    # headroom above the lines for the legend (the lines fall from the upper left)
    ax2.set_ylim(top=30 * max([1.0] + [r["noise"] for r in noise]))
    ax2.legend(loc="upper right", handlelength=1.4, borderaxespad=0.1,
               title="layer · 层")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()), w_pad=0.6)
    return fig


def instance_norm_images(varied: torch.Tensor, normalised: torch.Tensor, contrast, brightness):
    """Six grey images with their contrast a and brightness b (top, one shared grey scale)
    and the same images after InstanceNorm (bottom), which are all alike.

    Lesson 03."""
    plt = _style()
    k = varied.shape[0]
    fig, axes = plt.subplots(2, k, figsize=(11.0, 5.0))
    for j in range(k):
        axes[0, j].imshow(varied[j, 0].numpy(), cmap="gray", vmin=-1, vmax=11)
        axes[0, j].set_title(f"a = {float(contrast[j]):g}\nb = {float(brightness[j]):g}".replace("-", "−"))
        axes[1, j].imshow(normalised[j, 0].numpy(), cmap="gray", vmin=-2.5, vmax=2.5)
        for ax in axes[:, j]:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            for spine in ax.spines.values():
                spine.set_visible(False)
    axes[0, 0].set_ylabel("a·x + b\ninput · 输入")
    axes[1, 0].set_ylabel("IN(a·x + b)\noutput · 输出")
    fig.tight_layout()
    return fig


def adain_images(content: torch.Tensor, style: torch.Tensor, out: torch.Tensor):
    """The content image, the style image and AdaIN's output (RGB tensors of shape
    (1, 3, H, W), clipped to [0, 1]).

    Lesson 03."""
    plt = _style()
    fig, axes = plt.subplots(1, 3, figsize=(7.2, 3.0))
    for ax, img, title in zip(axes, [content, style, out], ["content · 内容", "style · 风格", "AdaIN"]):
        ax.imshow(img[0].permute(1, 2, 0).clamp(0, 1).numpy())
        ax.set_title(title)
        ax.axis("off")
    fig.tight_layout()
    return fig


def eps_placement(scales, inside_rms, outside_rms, eps: float):
    r"""RMS of RMSNorm's output against the input's RMS, with epsilon inside the square root
    (PyTorch) and outside it (the authors' code); the dotted line marks :math:`\sqrt\epsilon`.

    Lesson 04."""
    plt = _style()
    fig, ax = plt.subplots(figsize=(10.0, 4.8))
    ax.plot(scales, inside_rms, "o-", label="inside (PyTorch) · 根号内（PyTorch）: a / √(mean(a²) + ε)")
    ax.plot(scales, outside_rms, "s--", label="outside (authors' code) · 根号外（作者代码）: a / (√mean(a²) + ε)")
    ax.axvline(eps ** 0.5, color="grey", lw=1, ls=":")
    ax.text(eps ** 0.5, 0.08, r" $s = \sqrt{\epsilon}$", transform=ax.get_xaxis_transform(),
            color="#444444")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.35)
    ax.set_xlabel("RMS of the input token · 输入 token 的 RMS")
    ax.set_ylabel("RMS of the output · 输出的 RMS")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def depth_gradients(grads: dict, depths, slopes: dict, key: str = "markov"):
    r"""Per-layer :math:`\lVert\partial\mathcal L/\partial W_2^{(l)}\rVert_F` at initialisation
    for Post-LN and Pre-LN at each depth (``grads[key, position, L]``: seeds × layers, mean
    with a min-to-max band), and the last layer's gradient against L on log-log axes with the
    fitted ``slopes`` and the slope −1/2 of Xiong et al. (2020), Theorem 1. One row: the two
    placements on the left, the log-log plot on the right, each legend below its panels.

    Lesson 05."""
    from matplotlib.ticker import MaxNLocator

    plt = _style()
    fig = plt.figure(figsize=(11.8, 5.0))
    grid = fig.add_gridspec(1, 3, width_ratios=(1, 1, 1.05))
    top = [fig.add_subplot(grid[0, 0])]
    top.append(fig.add_subplot(grid[0, 1], sharey=top[0]))
    ax = fig.add_subplot(grid[0, 2])
    colors = dict(zip(depths, ["#4c72b0", "#dd8452", "#c44e52", "#55a868"]))
    for axis, position in zip(top, ["post", "pre"]):
        for L in depths:
            g = grads[key, position, L]
            layers = torch.arange(1, L + 1)
            axis.plot(layers, g.mean(0), "o-", ms=3, color=colors[L], label=f"L = {L}")
            axis.fill_between(layers, g.min(0).values, g.max(0).values, color=colors[L], alpha=0.2)
        axis.set_title(f"{position.capitalize()}-LN, init · 初始化")
        axis.set_xlabel("layer l · 层 l")
        axis.set_ylim(0, None)
        axis.xaxis.set_major_locator(MaxNLocator(4, integer=True))
    top[1].tick_params(labelleft=False)
    top[0].set_ylabel(r"$\|\partial \mathcal{L} / \partial W_2^{(l)}\|_F$")
    top[0].yaxis.set_major_locator(MaxNLocator(5))
    last = {}
    # black and grey, circles and squares: the colours of the left panels stand for the depths
    for position, style, color in [("post", "o-", "black"), ("pre", "s--", "#777777")]:
        last[position] = [grads[key, position, L].mean(0)[-1].item() for L in depths]
        slope = f"{slopes[position]:.2f}".replace("-", "−")
        ax.loglog(depths, last[position], style, color=color, ms=7,
                  label=f"{position.capitalize()}-LN: slope · 斜率 {slope}")
    theorem = [last["pre"][0] * (depths[0] / L) ** 0.5 for L in depths]
    ax.loglog(depths, theorem, ":", color="#999999", lw=2.2, label="Theorem 1 · 定理 1: slope · 斜率 −0.5")
    ax.set_xticks(depths, labels=[str(L) for L in depths])
    lo, hi = min(min(v) for v in [*last.values(), theorem]), max(max(v) for v in last.values())
    ticks = [t for t in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0) if lo / 1.3 <= t <= hi * 1.3]
    ax.set_yticks(ticks, labels=[f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("layers L · 层数 L")
    ax.set_title("last layer's FFN gradient\n最后一层 FFN 的梯度")
    # the legends below their panels: the depths under the two profiles, the slopes under the
    # log-log plot (wider than its panel, so flush with its right edge)
    _legends_below(fig, [(top, *top[0].get_legend_handles_labels(), len(depths), "center"),
                         ([ax], *ax.get_legend_handles_labels(), 1, "right")])
    return fig


def loss_curves(groups: dict[str, list[dict]], chance: float, chance_label: str,
                styles: dict[str, tuple[str, str]] | None = None, title: str | None = None):
    """Training loss against step, one colour (and line style) per group of runs, one line per
    seed (``groups`` maps a label to the results of
    :func:`helpers.transformer.train_reversal`, with ``steps`` and ``loss``; "warmup" in a
    label gets its Chinese), and the loss of a uniform guess ``chance`` dashed. The legend
    stands below the plot; a long ``title`` is broken into two lines after its first ": ".

    Lessons 05 and 06."""
    from .plotting import bilingual

    plt = _style()
    fig, ax = plt.subplots(figsize=(10.6, 5.0))
    colors = ["#8172b2", "#ccb974", "#937860", "#da8bc3"]
    placement = [("Post-LN", "#4c72b0"), ("Pre-LN", "#c44e52"), ("DeepNorm", "#55a868")]
    glossary = [("no warmup", "无预热"), ("warmup", "预热")]
    k = 0
    for label, results in groups.items():
        if styles and label in styles:
            color, ls = styles[label]
        else:  # the course's colours of the placements; dashed without warmup
            color = next((c for name, c in placement if name in label), None)
            if color is None:
                color, k = colors[k % len(colors)], k + 1
            ls = "--" if "no warmup" in label else "-"
        # the Chinese half translates only the part after the layer's name
        head, sep, tail = label.partition(", ")
        shown = bilingual(tail, glossary) if sep else bilingual(label, glossary)
        shown = f"{head}{sep}{shown}" if sep else shown
        lw = 2.4 if ls in (":", "dotted") else 1.6  # a dotted line thick enough to see
        for i, r in enumerate(results):
            ax.plot(r["steps"], r["loss"], color=color, ls=ls, lw=lw, label=shown if i == 0 else None)
    ax.axhline(chance, color="gray", ls="--", lw=1, label=chance_label)
    ax.set_xlabel("step · 步")
    ax.set_ylabel("training loss · 训练损失")
    if title:
        ax.set_title(title.replace(": ", "\n", 1) if len(title) > 50 else title)
    handles, labels = ax.get_legend_handles_labels()  # below the plot, where it covers no curve
    _legends_below(fig, [([ax], handles, labels, 3 if max(map(len, labels)) <= 24 else 2, "center")])
    return fig


def _legends_below(fig, legends):
    """Figure legends under the axes, ``legends`` = ``[(axes, handles, labels, ncol, align),
    ...]``, each centred under its ``axes`` (``align="center"``) or flush with their right
    edge (``"right"``); the axes are laid out (``tight_layout``) above the tallest one."""
    drawn = [fig.legend(handles, labels, loc="upper " + align, ncol=ncol, frameon=False,
                        borderaxespad=0, borderpad=0)
             for axes, handles, labels, ncol, align in legends]
    renderer = fig.canvas.get_renderer()
    bottom = max(legend.get_window_extent(renderer).height for legend in drawn) / fig.bbox.height
    gap = 0.1 / fig.get_figheight()  # a tenth of an inch between the x labels and the legends
    fig.tight_layout(rect=(0, bottom + gap, 1, 1))
    for legend, (axes, *_, align) in zip(drawn, legends):
        x0, x1 = min(a.get_position().x0 for a in axes), max(a.get_position().x1 for a in axes)
        legend.set_bbox_to_anchor((x1 if align == "right" else (x0 + x1) / 2, bottom),
                                  transform=fig.transFigure)


def update_growth(updates: dict, depths, fits: dict, kinds=("post", "pre", "deepnorm")):
    """RMS change of the features after one Adam step against depth L (log-log), mean over
    seeds with a min-to-max band, for Post-LN, Pre-LN and DeepNorm, each with its fitted
    power of L (``fits``).

    Lesson 06."""
    plt = _style()
    fig, ax = plt.subplots(figsize=(10.6, 4.4))
    names = {"post": "Post-LN", "pre": "Pre-LN", "deepnorm": "DeepNorm"}
    for kind, color in zip(kinds, ["#4c72b0", "#c44e52", "#55a868"]):
        vals = torch.tensor([updates[kind, L] for L in depths])
        ax.loglog(depths, vals.mean(1).numpy(), "o-", color=color,
                  label=f"{names.get(kind, kind)}: $\\propto L^{{{fits[kind]:.2f}}}$")
        ax.fill_between(depths, vals.min(1).values.numpy(), vals.max(1).values.numpy(),
                        color=color, alpha=0.2)
    ax.set_xticks(depths, labels=[str(L) for L in depths])
    ax.minorticks_off()
    ax.set_xlabel("number of layers L · 层数 L")
    ax.set_ylabel("RMS change, 1 step\n一步后的 RMS 变化")
    # right of the plot, where it covers no line and no band
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0, frameon=False)
    fig.tight_layout()
    return fig


def bandwidth_roofline(working_sets, bandwidth, caches: dict, peak: float, points):
    """(a) Copy bandwidth (GB/s) against the working set (MiB), with the cache sizes the
    system reports dotted; (b) the roofline of one core, a cache roof (first bandwidth) and a
    memory roof (last bandwidth) under the matmul peak ``peak`` (GFLOP/s), and the measured
    norms ``points`` = ``[(name, FLOP/byte, GFLOP/s), ...]``, one marker each, named in the
    legend (not next to the points, where they would overlap: several norms share one
    intensity), which stands right of (b), a long name broken after its comma.

    Lesson 07."""
    from matplotlib.ticker import LogLocator

    from . import bench_norms as B

    plt = _style()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11.8, 4.9))
    ax0.plot(working_sets, bandwidth, "o-")
    for name, size in caches.items():
        ax0.axvline(size / 2**20, color="grey", ls=":", lw=1)
        ax0.text(size / 2**20, 0.04, f" {name}", transform=ax0.get_xaxis_transform(), color="#444444")
    ax0.set(xscale="log", xlabel="working set (MiB) · 工作集\nsource + destination · 源 + 目标",
            ylabel="copy bandwidth · 复制带宽 (GB/s)", title="(a) bandwidth · 带宽")
    ax0.xaxis.set_major_locator(LogLocator(numticks=12))  # every power of 10
    ax0.set_ylim(0, 1.15 * max(bandwidth))
    intensity = [2 ** (k / 4) for k in range(-16, 33)]  # 1/16 to 256 FLOP/byte
    for bw, label, style in [(bandwidth[0], "cache roof · 缓存带宽上限", "--"),
                             (bandwidth[-1], "memory roof · 内存带宽上限", "-")]:
        ax1.plot(intensity, B.roofline(intensity, peak, bw), style, color="C0", label=label)
    markers = "osD^v<>ph*"
    # points of one intensity whose markers would overlap (GFLOP/s within 25%) are set side
    # by side, a few percent apart along the intensity axis, and drawn slightly transparent
    shift = [1.0] * len(points)
    order = sorted(range(len(points)), key=lambda k: (points[k][1], points[k][2]))
    clusters = []
    for k in order:
        last = clusters[-1][-1] if clusters else None
        if last is not None and points[last][1] == points[k][1] and points[k][2] < 1.25 * points[last][2]:
            clusters[-1].append(k)
        else:
            clusters.append([k])
    for cluster in clusters:
        for j, k in enumerate(cluster):
            shift[k] = 1.2 ** (j - (len(cluster) - 1) / 2)
    for k, (name, x, y) in enumerate(points):
        ax1.plot(x * shift[k], y, markers[k % len(markers)], ms=8, color=f"C{k + 1}", alpha=0.85,
                 label=name.replace(", ", ",\n", 1) if len(name) > 24 else name)
    ax1.set(xscale="log", yscale="log", xlabel="arithmetic intensity\n(FLOP/byte) · 算术强度",
            ylabel="GFLOP/s", title="(b) roofline · 屋顶线")
    ax1.set_xlim(intensity[0], intensity[-1])
    ax1.xaxis.set_major_locator(LogLocator(numticks=12))
    ax1.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, frameon=False,
               labelspacing=0.3)
    fig.tight_layout()
    return fig


def sync_spread(per_device, spread: dict):
    """Standard deviation over many batches of the batch mean and the batch standard deviation
    of standard normal values, on one device of b values and synchronised over all devices,
    against b (``spread`` maps the four series to lists, one value per b).

    Lesson 08."""
    plt = _style()
    fig, ax = plt.subplots(figsize=(11.0, 4.4))
    labels = {"per-device mean": ("o-", "mean, per device · 单卡均值"),
              "synced mean": ("o--", "mean, synced · 同步均值"),
              "per-device std": ("s-", "std, per device · 单卡标准差"),
              "synced std": ("s--", "std, synced · 同步标准差")}
    for key, values in spread.items():
        style, label = labels[key]
        ax.plot(per_device, values, style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(per_device, [str(b) for b in per_device])
    ax.minorticks_off()
    ax.set_xlabel("samples per device b · 每卡样本数 b")
    ax.set_ylabel("std over batches · 跨批标准差")
    # right of the plot, where it covers no line
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0, frameon=False)
    fig.tight_layout()
    return fig


def build_all() -> list[str]:
    """Regenerate every committed figure into ``images/``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import savefig

    written = []
    fig = norm_map()
    written.append(str(savefig(fig, "norm_map")))
    plt.close(fig)
    fig = ln_placement()
    written.append(str(savefig(fig, "ln_placement")))
    plt.close(fig)
    return written


if __name__ == "__main__":
    for p in build_all():
        print("wrote", p)
    sys.exit(0)
