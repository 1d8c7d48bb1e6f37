"""Figures of lesson 09 (normalisation in today's Transformers): the norm placements side by
side, training curves with and without QK-norm, and LayerNorm's input-output scatter. Labels
are bilingual or language-neutral; call :func:`helpers.plotting.use_course_style` first."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

__all__ = ["draw_layouts", "plot_runs", "plot_norm_scatter", "plot_lr_sweep", "plot_stream_rms"]

_COLORS = {"norm": "#f2c14e", "attn": "#7fb3d5", "ffn": "#9fd8a4", "add": "#ffffff",
           "final": "#e8a87c"}


def _steps(order: list[str], layout: str) -> list[tuple[str, str]]:
    """(label, kind) boxes of one block, bottom to top, from a recorded module order."""
    label = {"attn_in_norm": "Norm", "attn_out_norm": "Norm", "ffn_in_norm": "Norm",
             "ffn_out_norm": "Norm", "attn": "Attention", "ffn": "FFN"}
    boxes: list[tuple[str, str]] = []
    for name in order:
        if name == "final_norm":
            continue
        kind = "norm" if name.endswith("norm") else name
        if layout == "post" and name.endswith("out_norm"):
            boxes.append(("+ x", "add"))
        boxes.append((label[name], kind))
        if layout != "post" and (name.endswith("out_norm") or
                                 (name in ("attn", "ffn") and f"{name}_out_norm" not in order)):
            boxes.append(("+ x", "add"))
    return boxes


def draw_layouts(orders: dict[str, tuple[str, list[str]]], figsize=(9.6, 6.4)):
    """One column per model: ``orders`` maps a column title to ``(layout, module_order)``
    (:func:`helpers.transformer.module_order`). Boxes bottom to top in the recorded order;
    norm boxes yellow, '+ x' the residual addition, the final norm on top when present."""
    fig, ax = plt.subplots(figsize=figsize)
    n = len(orders)
    for col, (title, (layout, order)) in enumerate(orders.items()):
        boxes = _steps(order, layout)
        if "final_norm" in order:
            boxes += [("…", "add"), ("final · 最后 Norm", "final")]
        for row, (text, kind) in enumerate(boxes):
            x, y = col * 1.0, row * 0.62
            ax.add_patch(FancyBboxPatch((x + 0.1, y + 0.08), 0.8, 0.44,
                                        boxstyle="round,pad=0.02", fc=_COLORS[kind],
                                        ec="#333333" if kind != "add" else "none", lw=1))
            ax.text(x + 0.5, y + 0.30, text, ha="center", va="center", fontsize=12)
            if row:
                ax.annotate("", (x + 0.5, y + 0.08), (x + 0.5, y - 0.08),
                            arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1))
        ax.text(col + 0.5, -0.35, title, ha="center", va="top", fontsize=12)
    ax.set_xlim(0, n)
    ax.set_ylim(-1.3, 11 * 0.62)
    ax.axis("off")
    fig.tight_layout()
    return fig


def plot_runs(runs: dict[str, list[dict]], keys=("max_logit", "entropy", "loss"),
              ylabels=None, logy=("max_logit",), figsize=None):
    """One panel per history key, one colour per run group (``runs`` maps a label to the
    list of per-seed results of :func:`helpers.transformer.train_lm`), one line per seed."""
    ylabels = ylabels or {"max_logit": "max attention logit · 最大注意力 logit",
                          "entropy": "attention entropy · 注意力熵 (nats)",
                          "loss": "training loss · 训练损失", "log_z": "log Z"}
    colors = ["#c44e52", "#4c72b0", "#55a868", "#8172b2", "#ccb974"]
    cols = min(len(keys), 2)  # two panels a row at most, so that the text stays large
    rows = -(-len(keys) // cols)
    figsize = figsize or ((9.6, 3.6 * rows + 0.8) if len(keys) > 1 else (7.2, 4.2))
    fig, axes = plt.subplots(rows, cols, figsize=figsize, squeeze=False)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    axes = axes.flat
    for ax, key in zip(axes, keys):
        for color, (label, results) in zip(colors, runs.items()):
            for i, r in enumerate(results):
                ax.plot(range(1, len(r[key]) + 1), r[key], color=color, lw=1.2, alpha=0.85,
                        label=label if i == 0 else None)
        if key in logy:
            ax.set_yscale("log")
        ax.set_xlabel("step · 步")
        ax.set_ylabel(ylabels.get(key, key))
    handles, labels = axes[0].get_legend_handles_labels()
    if len(keys) > 1:
        if len(keys) % 2:  # the empty last panel holds the legend
            axes[len(keys)].set_visible(True)
            axes[len(keys)].axis("off")
            axes[len(keys)].legend(handles, labels, loc="center", frameon=False)
            fig.tight_layout()
        else:
            fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 2), frameon=False)
            fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    else:
        axes[0].legend(handles, labels, loc="center right")  # curves start high, end low or flat
        fig.tight_layout()
    return fig


def plot_norm_scatter(samples, fits=None, max_points: int = 3000, figsize=None):
    """LayerNorm input (x) against output before the affine step (y), one panel per norm
    layer (``samples`` from :func:`helpers.transformer.layer_norm_samples`), with the best
    :math:`a\\tanh(\\alpha x) + b` curve of ``fits`` (from :func:`tanh_fit`) in red."""
    import torch

    cols = min(len(samples), 2)
    rows = -(-len(samples) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=figsize or (9.6, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(samples):]:
        ax.set_visible(False)
    for i, (ax, (name, x, y)) in enumerate(zip(axes.flat, samples)):
        step = max(1, math.ceil(len(x) / max_points))
        ax.scatter(x[::step].numpy(), y[::step].numpy(), s=2, alpha=0.35, color="#4c72b0")
        if fits is not None:
            f = fits[i]
            grid = torch.linspace(float(x.min()), float(x.max()), 200, dtype=torch.float64)
            ax.plot(grid.numpy(), (f["a"] * torch.tanh(f["alpha"] * grid) + f["b"]).numpy(),
                    color="#c44e52", lw=1.5)
        block, _, module = name.replace("blocks.", "").partition(".")
        ax.set_title(f"block · 块 {block}: {module}", fontsize=12)
    for ax in axes[-1]:
        ax.set_xlabel("input x · 输入")
    for ax in axes[:, 0]:
        ax.set_ylabel("(x − μ)/σ")
    fig.tight_layout()
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


def plot_stream_rms(stream: dict, figsize=(6, 3.6)):
    """Root mean square of the residual stream after the embeddings (0) and after each block,
    per layout: ``stream`` maps a layout to ``(at_init, trained)`` lists of tensors
    (:meth:`helpers.transformer.LayoutTransformer.residual_stream`); dotted at
    initialisation, solid after training."""
    fig, ax = plt.subplots(figsize=figsize)
    for (layout, (init, trained)), color in zip(stream.items(), ["#c44e52", "#4c72b0", "#55a868"]):
        depth = range(len(init))
        ax.plot(depth, [float(v.pow(2).mean().sqrt()) for v in init], ":", color=color)
        ax.plot(depth, [float(v.pow(2).mean().sqrt()) for v in trained], "o-", color=color,
                label=f"{layout}, trained · 训练后")
        ax.set_xticks(list(depth))
    ax.plot([], [], ":", color="gray", label="dotted: init · 点线：初始化")
    ax.set_xlabel("block · 块 (0 = embeddings · 嵌入)")
    ax.set_ylabel("stream RMS · 残差流均方根")
    ax.legend(loc="center right")
    fig.tight_layout()
    return fig
