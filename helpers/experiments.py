r"""Small, fast experiments shared by the lessons.

``deep_mlp`` + ``layer_statistics``: the diagnostics of lesson 00 (why normalise): a deep
tanh MLP's activations and gradients, layer by layer, with and without a normalisation layer
before each non-linearity, on scikit-learn's bundled digits (no download).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import norms

__all__ = ["digits", "digit_images", "deep_mlp", "LayerStats", "layer_statistics",
           "INVARIANCES", "invariance_differences"]

SATURATION = 0.97  # |tanh| above this counts as saturated (gradient factor 1 - t^2 < 0.06)


def digits(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits (1797 images): inputs standardised per feature to
    mean 0 and std 1 (constant pixels left at 0), shape (1797, 64), and labels (1797,)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=dtype)
    std = x.std(0)
    x = (x - x.mean(0)) / torch.where(std > 0, std, torch.ones_like(std))
    return x, torch.tensor(data.target)


def digit_images(indices, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The bundled 8x8 digits at ``indices`` as images of shape (n, 1, 8, 8), pixel values
    scaled from 0..16 to 0..1 (no standardisation: lessons show what normalisation removes)."""
    from sklearn.datasets import load_digits

    images = torch.tensor(load_digits().images, dtype=dtype) / 16.0
    return images[list(indices)].unsqueeze(1)


def deep_mlp(depth: int = 20, width: int = 256, in_features: int = 64, num_classes: int = 10,
             gain: float = 1.0, norm: str | None = None, seed: int = 0,
             dtype: torch.dtype = torch.float64) -> nn.Sequential:
    r"""``depth`` blocks of Linear -> [norm] -> Tanh, then a Linear classifier.

    Hidden weights are drawn from :math:`\mathcal N(0, \text{gain}^2/\text{fan\_in})`
    (no bias), so ``gain`` sets how much each layer scales its input: a gain below 1
    shrinks the signal layer by layer, a large gain drives tanh into saturation.
    ``norm`` is ``None``, ``"batch"`` (``helpers.norms.BatchNorm1d``) or ``"layer"``
    (``helpers.norms.LayerNorm``), placed before each Tanh.
    """
    if norm not in (None, "batch", "layer"):
        raise ValueError(f"norm must be None, 'batch' or 'layer', got {norm!r}")
    g = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    fan_in = in_features
    for _ in range(depth):
        lin = nn.Linear(fan_in, width, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, fan_in, generator=g, dtype=dtype)
                             * gain / fan_in ** 0.5)
        layers.append(lin)
        if norm == "batch":
            layers.append(norms.BatchNorm1d(width, dtype=dtype))
        elif norm == "layer":
            layers.append(norms.LayerNorm(width, dtype=dtype))
        layers.append(nn.Tanh())
        fan_in = width
    head = nn.Linear(fan_in, num_classes, dtype=dtype)
    with torch.no_grad():
        head.weight.copy_(torch.randn(num_classes, fan_in, generator=g, dtype=dtype)
                          / fan_in ** 0.5)
        head.bias.zero_()
    return nn.Sequential(*layers, head)


@dataclass
class LayerStats:
    """Per hidden layer (index 1..depth): the tanh outputs and their gradients."""

    activations: list[torch.Tensor]  # tanh outputs, flattened
    gradients: list[torch.Tensor]    # dLoss/d(tanh output), flattened

    @property
    def std(self) -> list[float]:
        return [float(a.std()) for a in self.activations]

    @property
    def saturation(self) -> list[float]:
        """Fraction of |tanh| > 0.97 in each layer."""
        return [float((a.abs() > SATURATION).double().mean()) for a in self.activations]

    @property
    def grad_std(self) -> list[float]:
        return [float(g.std()) for g in self.gradients]


def layer_statistics(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor) -> LayerStats:
    """One forward and backward pass (cross-entropy on ``y``) in training mode, recording
    every Tanh's output and the gradient of the loss with respect to it."""
    model.train()
    acts: list[torch.Tensor] = []

    def keep(_module, _inp, out):
        out.retain_grad()
        acts.append(out)

    hooks = [m.register_forward_hook(keep) for m in model if isinstance(m, nn.Tanh)]
    try:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    finally:
        for h in hooks:
            h.remove()
    return LayerStats([a.detach().flatten() for a in acts],
                      [a.grad.detach().flatten() for a in acts])


# --------------------------------------------------------------------------------------
# Invariances of a normalisation (Ba et al. 2016, Table 1)
# --------------------------------------------------------------------------------------
INVARIANCES = [
    "weight matrix re-scaling",
    "weight matrix re-centering",
    "weight vector re-scaling",
    "dataset re-scaling",
    "dataset re-centering",
    "single training case re-scaling",
]


def invariance_differences(norm, batch: int = 8, d_in: int = 16, d_out: int = 32,
                           seed: int = 0) -> dict[str, float]:
    r"""For a layer :math:`h = \mathrm{norm}(W x + b)` on a batch of inputs (rows of ``x``),
    apply each transformation of Ba et al. (2016), Table 1, and return the largest absolute
    change of :math:`h` (0 up to rounding means invariant):

    - weight matrix re-scaling: :math:`W, b \to \delta W, \delta b` (:math:`\delta = 3`);
    - weight matrix re-centering: :math:`W \to W + \mathbf 1 \gamma^\top` (every row of W
      plus the same vector :math:`\gamma`);
    - weight vector re-scaling: one row :math:`w_i, b_i \to \delta w_i, \delta b_i`;
    - dataset re-scaling: every input :math:`x \to \delta x`, with :math:`b \to \delta b`
      (so that every summed input scales by :math:`\delta`);
    - dataset re-centering: every input :math:`x \to x + \gamma`, so every case's summed
      inputs shift by the same vector :math:`W\gamma`;
    - single training case re-scaling: one input :math:`x_n \to \delta x_n` (bias-free layer).

    ``norm`` maps the (batch, d_out) summed inputs to normalised outputs, e.g.
    ``lambda a: F.layer_norm(a, (a.shape[-1],), eps=0.0)``; use eps = 0 so that only the
    transformation matters (with eps > 0, "invariant" holds up to a term of order eps/var).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, d_in, generator=g, dtype=torch.float64)
    w = torch.randn(d_out, d_in, generator=g, dtype=torch.float64)
    b = torch.randn(d_out, generator=g, dtype=torch.float64)
    gamma_in = torch.randn(d_in, generator=g, dtype=torch.float64)
    delta = 3.0

    def out(x_, w_, b_):
        return norm(x_ @ w_.T + b_)

    base = out(x, w, b)
    base_nobias = out(x, w, torch.zeros_like(b))
    one_row = torch.ones(d_out, 1, dtype=torch.float64)
    row_scale = torch.ones(d_out, dtype=torch.float64)
    row_scale[0] = delta
    case_scale = torch.ones(batch, 1, dtype=torch.float64)
    case_scale[0] = delta
    changed = {
        "weight matrix re-scaling": (out(x, delta * w, delta * b), base),
        "weight matrix re-centering": (out(x, w + one_row * gamma_in, b), base),
        "weight vector re-scaling": (out(x, w * row_scale[:, None], b * row_scale), base),
        "dataset re-scaling": (out(delta * x, w, delta * b), base),
        "dataset re-centering": (out(x + gamma_in, w, b), base),
        "single training case re-scaling": (out(case_scale * x, w, torch.zeros_like(b)),
                                            base_nobias),
    }
    return {k: float((a - c).abs().max()) for k, (a, c) in changed.items()}
