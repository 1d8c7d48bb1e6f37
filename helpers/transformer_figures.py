"""Figures of lesson 09 (normalisation in today's Transformers): the norm placements side by
side, training curves with and without QK-norm, and LayerNorm's input-output scatter. Labels
are bilingual or language-neutral; call :func:`helpers.plotting.use_course_style` first."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch
from matplotlib.ticker import MaxNLocator

__all__ = ["draw_layouts", "plot_runs", "plot_norm_scatter", "plot_lr_sweep", "plot_stream_rms"]

_COLORS = {"norm": "#f2c14e", "attn": "#7fb3d5", "ffn": "#9fd8a4", "add": "#ffffff",
           "final": "#e8a87c"}


def _steps(order: list[str], reads) -> list[tuple[str, str]]:
    """(label, kind) boxes of one block, bottom to top, from a recorded module order and from
    what each output norm receives (``reads``: :func:`helpers.transformer.residual_reads`,
    ``{"attn": "x + F(x)" or "F(x)", ...}``): '+ x' goes before an output norm that reads
    the sum, after one that reads the sub-layer's output alone, and right after a sub-layer
    without an output norm. ``reads`` may also be a layout name (``"post"`` reads the sum,
    every other layout the output alone)."""
    label = {"attn_in_norm": "Norm", "attn_out_norm": "Norm", "ffn_in_norm": "Norm",
             "ffn_out_norm": "Norm", "attn": "Attention", "ffn": "FFN"}
    if isinstance(reads, str):
        reads = {sub: "x + F(x)" if reads == "post" else "F(x)" for sub in ("attn", "ffn")}
    boxes: list[tuple[str, str]] = []
    for name in order:
        if name == "final_norm":
            continue
        kind = "norm" if name.endswith("norm") else name
        sub = name.split("_")[0]
        sum_first = name.endswith("out_norm") and reads.get(sub) == "x + F(x)"
        if sum_first:
            boxes.append(("+ x", "add"))
        boxes.append((label[name], kind))
        if (name.endswith("out_norm") and not sum_first) or (
                name in ("attn", "ffn") and f"{name}_out_norm" not in order):
            boxes.append(("+ x", "add"))
    return boxes


def draw_layouts(orders: dict[str, tuple[str, list[str]]], figsize=None):
    """One column per model: ``orders`` maps a column title to ``(reads, module_order)``
    (:func:`helpers.transformer.residual_reads`, or a layout name; and
    :func:`helpers.transformer.module_order`). Boxes bottom to top in the recorded order;
    norm boxes yellow, '+ x' the residual addition, the final norm on top when present.
    The figure is laid out in inches (a box row 0.45 in, the text 16 pt), so that it fits a
    slide at full size: ``figsize`` defaults to 11.6 in wide and as tall as the columns."""
    columns = []
    for title, (reads, order) in orders.items():
        boxes = _steps(order, reads)
        if "final_norm" in order:
            boxes += [("…", "add"), ("final · 最后 Norm", "final")]
        columns.append((title, boxes))
    pitch, box_h, title_h = 0.45, 0.34, 0.42  # inches: a row, a box in it, the titles below
    rows = max(len(boxes) for _, boxes in columns)
    figsize = figsize or (11.6, title_h + rows * pitch)
    width, height = figsize
    col_w = width / len(columns)
    fig = plt.figure(figsize=figsize)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(-title_h, height - title_h)
    box_w = min(col_w - 0.3, 2.4)
    for col, (title, boxes) in enumerate(columns):
        cx = (col + 0.5) * col_w
        for row, (text, kind) in enumerate(boxes):
            y = row * pitch + (pitch - box_h) / 2
            ax.add_patch(FancyBboxPatch((cx - box_w / 2, y), box_w, box_h,
                                        boxstyle="round,pad=0,rounding_size=0.06", fc=_COLORS[kind],
                                        ec="#333333" if kind != "add" else "none", lw=1))
            ax.text(cx, y + box_h / 2, text, ha="center", va="center_baseline", fontsize=16)
            if row:
                ax.annotate("", (cx, y), (cx, y - (pitch - box_h)),
                            arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1,
                                            shrinkA=0, shrinkB=0, mutation_scale=10))
        ax.text(cx, -0.1, title, ha="center", va="top", fontsize=17)
    ax.axis("off")
    return fig


def plot_runs(runs: dict[str, list[dict]], keys=("max_logit", "entropy", "loss"),
              ylabels=None, logy=("max_logit",), figsize=None):
    """One panel per history key, side by side, one colour per run group (``runs`` maps a
    label to the list of per-seed results of :func:`helpers.transformer.train_lm`), one line
    per seed. Several keys: each panel titled with its quantity (``ylabels``), one legend
    above all panels. One key: the quantity on the y axis, the legend beside the axes."""
    ylabels = ylabels or {"max_logit": "max attention logit · 最大注意力 logit",
                          "entropy": "attention entropy · 注意力熵 (nats)",
                          "loss": "training loss · 训练损失", "log_z": "log Z"}
    colors = ["#c44e52", "#4c72b0", "#55a868", "#8172b2", "#ccb974"]
    several = len(keys) > 1
    figsize = figsize or ((11.6, 5.0) if several else (9.0, 4.2))
    fig, axes = plt.subplots(1, len(keys), figsize=figsize, squeeze=False)
    axes = axes[0]
    for ax, key in zip(axes, keys):
        for color, (label, results) in zip(colors, runs.items()):
            for i, r in enumerate(results):
                ax.plot(range(1, len(r[key]) + 1), r[key], color=color, lw=1.5, alpha=0.85,
                        label=label if i == 0 else None)
        if key in logy:
            ax.set_yscale("log")
        else:
            ax.yaxis.set_major_locator(MaxNLocator(5, steps=[1, 2, 5, 10]))
        ax.xaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 2.5, 5, 10], integer=True))
        ax.set_xlabel("step · 步")
        label = ylabels.get(key, key)
        if several:  # a title a panel: two lines ("English\n中文") fit a third of the width
            ax.set_title(label.replace(" · ", "\n", 1))
        else:
            ax.set_ylabel(label)
    handles, labels = axes[0].get_legend_handles_labels()
    handles = [Line2D([], [], color=h.get_color(), lw=3) for h in handles]  # thicker than the curves
    if several:
        fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
                   columnspacing=2.5)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / fig.get_figheight()), w_pad=1.5)
    else:
        axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.tight_layout()
    return fig


def plot_norm_scatter(samples, fits=None, max_points: int = 3000, figsize=None):
    """LayerNorm input (x) against output before the affine step (y), one panel per norm
    layer side by side (``samples`` from :func:`helpers.transformer.layer_norm_samples`; four
    panels a row), with the best :math:`a\\tanh(\\alpha x) + b` curve of ``fits`` (from
    :func:`tanh_fit`) in red. The panels share the y axis; each has its own x range."""
    import torch

    cols = min(len(samples), 4)
    rows = -(-len(samples) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=figsize or (11.6, 4.9 * rows), squeeze=False,
                             sharey=True)
    for ax in axes.flat[len(samples):]:
        ax.set_visible(False)
    for i, (ax, (name, x, y)) in enumerate(zip(axes.flat, samples)):
        step = max(1, math.ceil(len(x) / max_points))
        ax.scatter(x[::step].numpy(), y[::step].numpy(), s=3, alpha=0.35, color="#4c72b0")
        if fits is not None:
            f = fits[i]
            grid = torch.linspace(float(x.min()), float(x.max()), 200, dtype=torch.float64)
            ax.plot(grid.numpy(), (f["a"] * torch.tanh(f["alpha"] * grid) + f["b"]).numpy(),
                    color="#c44e52", lw=2, label="tanh fit\ntanh 拟合" if i == 0 else None)
        block, _, module = name.replace("blocks.", "").partition(".")
        ax.set_title(f"block · 块 {block}\n{module}")
        ax.xaxis.set_major_locator(MaxNLocator(4, symmetric=True))
        ax.set_xlabel("input x · 输入")
    for ax in axes[:, 0]:
        ax.set_ylabel("(x − μ)/σ")
    if fits is not None:  # one legend entry for the red curve of every panel, in a free corner
        handles, labels = axes.flat[0].get_legend_handles_labels()
        axes.flat[len(samples) - 1].legend(handles, labels, loc="upper left", handlelength=1.2,
                                           borderaxespad=0.2, handletextpad=0.4)
    fig.tight_layout(w_pad=1.0)
    return fig


def plot_lr_sweep(lrs, final_losses: dict[str, list[float]], chance: float, figsize=(9.2, 3.8)):
    """Final loss against learning rate (log-log), one line per label of ``final_losses``,
    and the loss of a uniform guess ``chance`` dotted."""
    fig, ax = plt.subplots(figsize=figsize)
    for label, losses in final_losses.items():
        ax.plot(lrs, losses, "o-", label=label)
    ax.axhline(chance, color="gray", ls=":", label=f"uniform guess · 均匀猜测 {chance:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("learning rate · 学习率")
    ax.set_ylabel("final loss · 最终损失")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the axes: the curves fill them
    fig.tight_layout()
    return fig


# legend names of the layouts of :func:`plot_stream_rms`, as the layout diagram names the models
_LAYOUT_NAMES = {"pre": "Pre-LN (LLaMA)", "sandwich": "sandwich · 三明治\n(Gemma 2 / Peri-LN)",
                 "reordered": "reordered · 重排\n(OLMo 2)", "post": "Post-LN", "none": "no norm · 无归一化"}


def plot_stream_rms(stream: dict, figsize=(10.0, 4.4)):
    """Root mean square of the residual stream after the embeddings (0) and after each block,
    per layout: ``stream`` maps a layout to ``(at_init, trained)`` lists of tensors
    (:meth:`helpers.transformer.LayoutTransformer.residual_stream`); dotted with open markers
    at initialisation, solid with filled markers after training (one colour and marker a
    layout)."""
    fig, ax = plt.subplots(figsize=figsize)
    styles = zip(["#c44e52", "#4c72b0", "#55a868", "#8172b2", "#ccb974"], "os^Dv")
    for (layout, (init, trained)), (color, marker) in zip(stream.items(), styles):
        depth = range(len(init))
        ax.plot(depth, [float(v.pow(2).mean().sqrt()) for v in init], ":", color=color, lw=2,
                marker=marker, mfc="white", ms=7)
        ax.plot(depth, [float(v.pow(2).mean().sqrt()) for v in trained], "-", color=color,
                marker=marker, ms=7, label=_LAYOUT_NAMES.get(layout, layout))
        ax.set_xticks(list(depth))
    ax.plot([], [], "-", color="gray", marker="o", label="solid: trained\n实线：训练后")
    ax.plot([], [], ":", color="gray", lw=2, marker="o", mfc="white",
            label="dotted: init\n点线：初始化")
    ax.set_xlabel("block · 块 (0 = embeddings · 嵌入)")
    ax.set_ylabel("stream RMS · 残差流均方根")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), labelspacing=0.7)  # beside the axes
    fig.tight_layout()
    return fig
