r"""The course's figures, drawn by code. ``python -m helpers.figures`` regenerates every
committed image in ``images/``.

The map of the norms follows Wu & He (2018), Figure 2: a feature-map tensor drawn as an
(N, C, H×W) block, with the elements that share one mean and variance shaded. The shading
comes from :func:`statistics_mask`, the index set :math:`S_i` of the paper's section 3.1,
which the lesson checks against torch's own layers. :func:`ln_placement` draws the Post-LN and
Pre-LN sub-layers of Xiong et al. (2020), Figure 1, for lesson 05.
"""

from __future__ import annotations

import sys

import torch

from .experiments import LayerStats

__all__ = ["statistics_mask", "norm_map", "group_map", "activation_histograms", "ln_placement",
           "build_all"]

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
    ax.set_box_aspect(mask.shape)
    ax.view_init(elev=22, azim=-58)
    ax.set_xlabel(xlabel, labelpad=-12)
    ax.set_ylabel(ylabel, labelpad=-12)
    ax.set_zlabel(zlabel, labelpad=-10)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_zticks([])
    ax.xaxis.pane.set_visible(False)
    ax.yaxis.pane.set_visible(False)
    ax.zaxis.pane.set_visible(False)


def norm_map(n: int = 4, c: int = 6, hw: int = 5, num_groups: int = 2, b: int = 4, t: int = 5,
             d: int = 6):
    """Figure: the four norms on an (N, C, H×W) block, shaded where one element's statistics
    come from, plus LayerNorm/RMSNorm on a (B, T, d) sequence block. Returns the figure."""
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    fig = plt.figure(figsize=(15.5, 3.6))
    palette = {"batch": "#4c72b0", "layer": "#dd8452", "instance": "#55a868", "group": "#c44e52"}
    for k, (key, en, zh) in enumerate(NORM_PANELS):
        ax = fig.add_subplot(1, 5, k + 1, projection="3d")
        # voxel axes: x = N, y = C, z = H×W; the reference element is the front corner
        # element of the visible side face, so each shaded set shows on the visible faces
        mask = statistics_mask(key, (n, c, hw), (n - 1, 0, 0), num_groups)
        _block(ax, mask, palette[key], "N", "C", "H×W")
        ax.set_title(f"{en}\n{zh}" + (f"  (G = {num_groups})" if key == "group" else ""),
                     pad=0)
    ax = fig.add_subplot(1, 5, 5, projection="3d")
    _block(ax, statistics_mask("token", (b, t, d), (b - 1, 0, 0)), "#8172b3", "B", "T", "d")
    ax.set_title("LayerNorm / RMSNorm\n层归一化 / 均方根归一化  (B, T, d)", pad=0)
    fig.subplots_adjust(left=0.0, right=0.97, bottom=0.02, top=0.86, wspace=0.12)
    return fig


def group_map(num_channels: int = 8, group_counts: tuple[int, ...] = (1, 2, 4, 8)):
    """Figure: for each number of groups G (one row), the channels coloured by the group
    whose statistics they share. G = 1 is LayerNorm over (C, H, W), G = C InstanceNorm.

    Lesson 03."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .plotting import use_course_style

    use_course_style()
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * len(group_counts) + 1.0))
    rows = []
    for g in group_counts:
        if num_channels % g:
            raise ValueError(f"{num_channels} channels do not split into {g} groups")
        rows.append(np.arange(num_channels) // (num_channels // g))
    ax.imshow(np.array(rows), cmap="tab10", vmin=0, vmax=9, aspect="auto")
    for r, ids in enumerate(rows):
        for c, gid in enumerate(ids):
            ax.text(c, r, str(gid), ha="center", va="center", color="white", fontsize=10)
    ax.set_yticks(range(len(group_counts)),
                  labels=[f"G = {g}" + ("  (LN)" if g == 1 else "  (IN)" if g == num_channels else "")
                          for g in group_counts])
    ax.set_xticks(range(num_channels))
    ax.set_xlabel("channel c / 通道 c   (number = group index / 数字为组号)")
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.tight_layout()
    return fig


def activation_histograms(results: dict[str, LayerStats], every: int = 4, gradients: bool = False):
    """Karpathy-style per-layer histograms: one panel per setting, one line per layer
    (every ``every``-th layer), of the tanh outputs or of their gradients.

    Lesson 00."""
    import matplotlib.pyplot as plt

    from .plotting import use_course_style

    use_course_style()
    fig, axes = plt.subplots(1, len(results), figsize=(4.6 * len(results), 3.4))
    for ax, (title, stats) in zip(axes, results.items()):
        series = [t.float() for t in (stats.gradients if gradients else stats.activations)]
        # one symmetric range per panel, so the layers' widths can be compared
        # (gradients: the 99.5th percentile of |g| over all layers, so outliers do not
        # squeeze the bulk into one bin)
        hi = max(float(t.abs().quantile(0.995)) for t in series) if gradients else 1.0
        hi = hi if hi > 0 else 1.0
        edges = torch.linspace(-hi, hi, 61)
        centres = (edges[:-1] + edges[1:]) / 2
        for i in range(0, len(series), every):
            counts = torch.histc(series[i], bins=60, min=-hi, max=hi)
            ax.plot(centres.numpy(), (counts / counts.sum()).numpy(), label=f"layer {i + 1}",
                    lw=1.3)
        ax.set_title(title)
        ax.set_xlabel("gradient dL/dh / 梯度" if gradients else "tanh output / tanh 输出")
        ax.legend(fontsize=8.5, loc="best")
        if gradients:
            ax.ticklabel_format(axis="x", style="sci", scilimits=(-2, 2))
    axes[0].set_ylabel("fraction of values / 占比")
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
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 5.4))
    ln_color, f_color = "#f5b971", "#a6c8e8"

    def box(ax, y, text, color, x=0.5, w=0.44):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - 0.045), w, 0.09,
                                    boxstyle="round,pad=0.01", fc=color, ec="#333333"))
        ax.text(x, y, text, ha="center", va="center", fontsize=12)

    def plus(ax, y, x=0.5):
        ax.add_patch(plt.Circle((x, y), 0.03, fc="white", ec="#333333"))
        ax.text(x, y, "+", ha="center", va="center", fontsize=14)

    def arrow(ax, x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.4,
                                    shrinkA=0, shrinkB=0))

    def skip(ax, y0, y1, x_side=0.86):  # residual path: right of the main column
        ax.plot([0.5, x_side, x_side], [y0, y0, y1], color="#333333", lw=1.4)
        arrow(ax, x_side, y1, 0.53, y1)

    # Post-LN: x -> F -> (+ x) -> LN
    ax = axes[0]
    ax.text(0.5, 0.02, r"$x_l$", ha="center", fontsize=13)
    arrow(ax, 0.5, 0.08, 0.5, 0.255)
    box(ax, 0.3, "F (attention / FFN)", f_color)
    arrow(ax, 0.5, 0.345, 0.5, 0.49)
    plus(ax, 0.52)
    skip(ax, 0.15, 0.52)
    arrow(ax, 0.5, 0.55, 0.5, 0.655)
    box(ax, 0.7, "LayerNorm", ln_color)
    arrow(ax, 0.5, 0.745, 0.5, 0.88)
    ax.text(0.5, 0.9, r"$x_{l+1} = \mathrm{LN}(x_l + F(x_l))$", ha="center", fontsize=12)
    ax.set_title("Post-LN", fontsize=14)

    # Pre-LN: x -> LN -> F -> (+ x); final LN after the last layer
    ax = axes[1]
    ax.text(0.5, 0.02, r"$x_l$", ha="center", fontsize=13)
    arrow(ax, 0.5, 0.08, 0.5, 0.215)
    box(ax, 0.26, "LayerNorm", ln_color)
    arrow(ax, 0.5, 0.305, 0.5, 0.375)
    box(ax, 0.42, "F (attention / FFN)", f_color)
    arrow(ax, 0.5, 0.465, 0.5, 0.6)
    plus(ax, 0.63)
    skip(ax, 0.13, 0.63)
    ax.text(0.5, 0.7, r"$x_{l+1} = x_l + F(\mathrm{LN}(x_l))$", ha="center", fontsize=12)
    arrow(ax, 0.5, 0.66, 0.5, 0.69)
    ax.plot([0.5, 0.5], [0.735, 0.775], color="#333333", lw=1.4, ls=":")
    box(ax, 0.83, "final LayerNorm", ln_color, w=0.46)
    ax.text(0.5, 0.93, "after the last layer only", ha="center", fontsize=10.5,
            color="#555555")
    ax.set_title("Pre-LN", fontsize=14)
    for ax in axes:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
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
