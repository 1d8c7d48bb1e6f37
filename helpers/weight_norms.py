r"""Normalising the weights instead of the activations (lesson 11).

- Weight Normalization (Salimans & Kingma 2016): :func:`weight_norm_weight` (the formula),
  :func:`weight_norm_backward` (its hand-derived gradient), :class:`WeightNormFunction`
  (both as an autograd function), :func:`weight_norm` (a from-scratch parametrisation with
  torch's parameter names, so a ``state_dict`` loads both ways), :func:`data_dependent_init`
  and :class:`MeanOnlyBatchNorm`.
- Weight Standardisation (Qiao et al. 2019; Big Transfer's ``StdConv2d``):
  :func:`standardize_weight`, :class:`WSConv2d`; Batch-Channel Normalization:
  :class:`BatchChannelNorm`; scaled WS (NF-ResNets) and NFNets' adaptive gradient clipping:
  :func:`scaled_standardize_weight`, :func:`nonlinearity_gamma`, :func:`adaptive_grad_clip`.
- Spectral Normalisation (Miyato et al. 2018): :func:`power_iteration_step`,
  :func:`spectral_norm` (a from-scratch parametrisation with torch's names),
  :func:`reshaped_spectral_norm` and :func:`conv_operator_norm` (what torch's reshape bounds
  and what it does not).
- :func:`moments`: skewness and excess kurtosis (normalisation is not Gaussianisation).
- :func:`digits_cnn`, :func:`train_digits_cnn`, :func:`variant_grid`: the lesson's small
  experiment, BN / WN / WN + mean-only BN / GN / GN + WS on the digits CNN of lesson 01.

Everything here is used in lesson 11 (``notebooks/11_weight_normalization.ipynb``).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parametrize

from . import experiments
from .progress import Progress

__all__ = ["norm_except_dim", "weight_norm_weight", "weight_norm_backward", "WeightNormFunction",
           "WeightNorm", "weight_norm", "data_dependent_init", "MeanOnlyBatchNorm",
           "standardize_weight", "WSConv2d", "BatchChannelNorm", "scaled_standardize_weight", "nonlinearity_gamma",
           "adaptive_grad_clip", "power_iteration_step", "SpectralNorm", "spectral_norm",
           "reshaped_spectral_norm", "conv_operator_norm", "moments", "VARIANTS",
           "digits_cnn", "train_digits_cnn", "variant_grid", "grid_summary", "layer_output_stats",
           "plot_grid", "plot_shapes", "GRID_EPOCHS", "stored_grid"]


# --------------------------------------------------------------------------------------
# Weight Normalization
# --------------------------------------------------------------------------------------
def norm_except_dim(v: Tensor, dim: int | None = 0) -> Tensor:
    r"""The Euclidean norm of ``v`` over every dim except ``dim``, kept for broadcasting:

    .. math:: \lVert v_j \rVert = \sqrt{\textstyle\sum_{k} v_{j,k}^2}

    for each slice :math:`j` along ``dim`` (torch's convention: ``dim`` is the dim that is
    **kept**). For a Linear weight (out, in) and ``dim=0`` that is one norm per row (per
    output unit), shape (out, 1); for a conv kernel (out, in, kH, kW), shape (out, 1, 1, 1).
    ``dim=None``: one norm of the whole tensor (shape () ). Used in lesson 11."""
    if dim is None:
        return (v * v).sum().sqrt()
    dim = dim % v.dim()
    others = [d for d in range(v.dim()) if d != dim]
    return (v * v).sum(dim=others, keepdim=True).sqrt()


def weight_norm_weight(v: Tensor, g: Tensor, dim: int | None = 0) -> Tensor:
    r"""Weight Normalization (Salimans & Kingma 2016, eq. 2), one :math:`(g, v)` per slice
    along ``dim`` (one output unit for ``dim=0``):

    .. math:: w = g\,\frac{v}{\lVert v\rVert},\qquad \lVert w\rVert = |g| .

    ``g`` has the shape of :func:`norm_except_dim` (torch's ``original0``), ``v`` the
    weight's shape (torch's ``original1``). Elementary ops only. Used in lesson 11."""
    return v * (g / norm_except_dim(v, dim))


def weight_norm_backward(grad_w: Tensor, v: Tensor, g: Tensor,
                         dim: int | None = 0) -> tuple[Tensor, Tensor]:
    r"""Gradients of Weight Normalization (Salimans & Kingma 2016, eqs. 3 and 4), per slice:

    .. math::

        \nabla_g L = \frac{\nabla_w L\cdot v}{\lVert v\rVert},\qquad
        \nabla_v L = \frac{g}{\lVert v\rVert}\,\nabla_w L - \frac{g\,\nabla_g L}{\lVert v\rVert^2}\,v
                   = \frac{g}{\lVert v\rVert}\Big(I - \frac{w w^\top}{\lVert w\rVert^2}\Big)\nabla_w L .

    The v-gradient is the w-gradient scaled by :math:`g/\lVert v\rVert` and projected away
    from :math:`w`, so it is orthogonal to :math:`v`. Returns ``(grad_v, grad_g)`` with the
    shapes of ``v`` and ``g``. Used in lesson 11."""
    norm = norm_except_dim(v, dim)
    if dim is None:
        grad_g = (grad_w * v).sum() / norm
    else:
        d = dim % v.dim()
        others = [k for k in range(v.dim()) if k != d]
        grad_g = (grad_w * v).sum(dim=others, keepdim=True) / norm
    grad_v = g / norm * grad_w - g * grad_g / norm ** 2 * v
    return grad_v, grad_g.reshape(g.shape)


class WeightNormFunction(torch.autograd.Function):
    r""":math:`w = g\,v/\lVert v\rVert` with the hand-written backward of
    :func:`weight_norm_backward` (``WeightNormFunction.apply(g, v, dim)``). Used in lesson 11."""

    @staticmethod
    def forward(ctx, g: Tensor, v: Tensor, dim: int | None = 0) -> Tensor:
        ctx.save_for_backward(g, v)
        ctx.dim = dim
        return weight_norm_weight(v, g, dim)

    @staticmethod
    def backward(ctx, grad_w: Tensor):
        g, v = ctx.saved_tensors
        grad_v, grad_g = weight_norm_backward(grad_w, v, g, ctx.dim)
        return grad_g, grad_v, None


class WeightNorm(nn.Module):
    r"""The from-scratch parametrisation :math:`w = g\,v/\lVert v\rVert` (the course's twin
    of torch's ``_WeightNorm``): ``forward(weight_g, weight_v)`` builds the weight with
    :class:`WeightNormFunction` (hand-written gradient); ``right_inverse(weight)`` splits a
    weight into :math:`g = \lVert w\rVert` (per slice along ``dim``) and :math:`v = w`, so
    registering it leaves the layer's function unchanged. Used in lesson 11."""

    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim  # torch stores None as -1 internally

    def _dim(self):
        return None if self.dim == -1 else self.dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return WeightNormFunction.apply(weight_g, weight_v, self._dim())

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, self._dim()), weight


def weight_norm(module: nn.Module, name: str = "weight", dim: int | None = 0,
                impl: str = "course") -> nn.Module:
    r"""Reparametrise ``module.<name>`` as :math:`g\,v/\lVert v\rVert`, with the signature of
    ``torch.nn.utils.parametrizations.weight_norm``: ``dim`` is the dim **kept** (0: one
    :math:`g` per output unit; ``None``: one scalar). The parameters are
    ``parametrizations.<name>.original0`` (:math:`g`) and ``.original1`` (:math:`v`), as in
    torch, so state_dicts load both ways. ``impl="course"`` registers :class:`WeightNorm`
    (from-scratch math, hand-written gradient) with torch's parametrisation bookkeeping;
    ``impl="torch"`` calls torch's own. Used in lesson 11."""
    if impl == "torch":
        return nn.utils.parametrizations.weight_norm(module, name=name, dim=dim)
    if impl != "course":
        raise ValueError(f"impl must be 'course' or 'torch', got {impl!r}")
    parametrize.register_parametrization(module, name, WeightNorm(dim), unsafe=True)
    return module


def _is_weight_normed(module: nn.Module) -> bool:
    """True when ``module.weight`` is weight-normalised (the course's or torch's)."""
    return parametrize.is_parametrized(module, "weight") and isinstance(
        module.parametrizations.weight[0], (WeightNorm, nn.utils.parametrizations._WeightNorm))


def _unit_stats(t: Tensor) -> tuple[Tensor, Tensor]:
    """Per output unit (dim 1) mean and biased std of t over every other dim."""
    dims = [0] + list(range(2, t.dim()))
    return t.mean(dims), t.std(dims, correction=0)


@torch.no_grad()
def data_dependent_init(model: nn.Sequential, x: Tensor, generator: torch.Generator | None = None,
                        v_std: float = 0.05, init_bias: bool = True) -> nn.Sequential:
    r"""Salimans & Kingma's data-dependent initialisation (section 3), layer by layer through
    the ``nn.Sequential`` ``model``: for each weight-normalised layer, draw
    :math:`v \sim \mathcal N(0, 0.05^2)`, set :math:`g = 1, b = 0`, compute its
    pre-activations :math:`t = v\cdot x/\lVert v\rVert` on the batch ``x`` (after the layers
    before it, already initialised), then set

    .. math:: g \leftarrow \frac{1}{\sigma[t]},\qquad b \leftarrow -\frac{\mu[t]}{\sigma[t]},

    per output unit (statistics over the batch and, for a convolution, the positions), so
    that each unit starts with zero mean and unit variance on this batch. With
    ``init_bias=False`` (when a mean-only BatchNorm follows and removes the mean) only
    :math:`g` is set. Weights are drawn from ``generator`` (torch's global RNG untouched if
    given). Returns the model. Used in lesson 11."""
    h = x
    for layer in model:
        if _is_weight_normed(layer):
            p = layer.parametrizations.weight
            v = torch.randn(p.original1.shape, generator=generator, dtype=p.original1.dtype) * v_std
            p.original1.copy_(v)
            p.original0.fill_(1.0)
            if layer.bias is not None:
                layer.bias.zero_()
            mu, sigma = _unit_stats(layer(h))
            p.original0.copy_((1.0 / sigma).reshape(p.original0.shape))
            if init_bias and layer.bias is not None:
                layer.bias.copy_(-mu / sigma)
        h = layer(h)
    return model


class MeanOnlyBatchNorm(nn.Module):
    r"""Mean-only BatchNorm (Salimans & Kingma 2016, section 4): subtract each channel's batch
    mean, no division, then add a learned bias:

    .. math:: y = t - \mu_B[t] + \beta \quad\text{(training)},\qquad
              y = t - \hat\mu + \beta \quad\text{(eval)},

    with the running mean :math:`\hat\mu \leftarrow (1-\rho)\hat\mu + \rho\,\mu_B` (PyTorch's
    momentum convention, :math:`\rho = 0.1`). Channel dim 1, statistics over every other
    dim. Used in lesson 11."""

    def __init__(self, num_features: int, momentum: float = 0.1, dtype=None):
        super().__init__()
        self.num_features, self.momentum = num_features, momentum
        self.bias = nn.Parameter(torch.zeros(num_features, dtype=dtype))
        self.register_buffer("running_mean", torch.zeros(num_features, dtype=dtype))

    def forward(self, t: Tensor) -> Tensor:
        shape = (1, -1) + (1,) * (t.dim() - 2)
        if self.training:
            dims = [0] + list(range(2, t.dim()))
            mean = t.mean(dims)
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
        else:
            mean = self.running_mean
        return t - mean.view(shape) + self.bias.view(shape)

    def extra_repr(self) -> str:
        return f"{self.num_features}, momentum={self.momentum}"


# --------------------------------------------------------------------------------------
# Weight Standardisation, Batch-Channel Normalization, NFNets
# --------------------------------------------------------------------------------------
def standardize_weight(w: Tensor, variant: str = "bit", eps: float | None = None) -> Tensor:
    r"""Weight Standardisation: each output channel's kernel (dim 0) standardised over its
    fan-in (every other dim, :math:`C_\text{in}\cdot k_H\cdot k_W` values), no gain:

    - ``variant="bit"`` (Big Transfer's ``StdConv2d``; eps :math:`10^{-10}`):
      :math:`\hat W = (W - \mu)/\sqrt{\sigma^2 + \epsilon}` with the biased variance;
    - ``variant="qiao"`` (Qiao et al.'s code; eps :math:`10^{-5}`):
      :math:`\hat W = (W - \mu)/(s + \epsilon)` with torch's (unbiased) ``std`` :math:`s`.

    Used in lesson 11."""
    dims = list(range(1, w.dim()))
    mean = w.mean(dims, keepdim=True)
    if variant == "bit":
        var = ((w - mean) ** 2).mean(dims, keepdim=True)
        return (w - mean) / torch.sqrt(var + (1e-10 if eps is None else eps))
    if variant == "qiao":
        std = w.std(dims, keepdim=True)  # unbiased, as in the authors' code
        return (w - mean) / (std + (1e-5 if eps is None else eps))
    raise ValueError(f"variant must be 'bit' or 'qiao', got {variant!r}")


class WSConv2d(nn.Conv2d):
    r"""``nn.Conv2d`` whose kernel is standardised at every forward,
    :math:`\mathrm{conv}(x, \hat W)` with :math:`\hat W` of :func:`standardize_weight`
    (``variant="bit"`` by default). Meant to be followed by GroupNorm or BatchNorm (the WS
    authors' advice). Same parameters and state_dict as ``nn.Conv2d``. Used in lesson 11."""

    def __init__(self, *args, ws_variant: str = "bit", **kwargs):
        super().__init__(*args, **kwargs)
        self.ws_variant = ws_variant

    def forward(self, x: Tensor) -> Tensor:
        return self._conv_forward(x, standardize_weight(self.weight, self.ws_variant), self.bias)


class BatchChannelNorm(nn.Module):
    r"""Batch-Channel Normalization (Qiao et al., "Micro-Batch Training with Batch-Channel
    Normalization and Weight Standardization"), in the simple form: a BatchNorm without
    affine (batch statistics in training, running estimates in eval), then a channel norm,
    GroupNorm over ``num_groups`` groups with a per-channel affine:

    .. math:: y = \mathrm{GN}_{\gamma,\beta}\big(\mathrm{BN}(x)\big).

    (The authors' micro-batch variant normalises with the running estimates in training too;
    labml's ``batch_channel_norm`` has both.) Used in lesson 11."""

    def __init__(self, num_channels: int, num_groups: int, eps: float = 1e-5,
                 momentum: float = 0.1):
        super().__init__()
        self.batch_norm = nn.BatchNorm2d(num_channels, eps=eps, momentum=momentum, affine=False)
        self.channel_norm = nn.GroupNorm(num_groups, num_channels, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.channel_norm(self.batch_norm(x))


def nonlinearity_gamma(name: str = "relu") -> float:
    r"""The fixed gain :math:`\gamma` of Scaled Weight Standardisation for a nonlinearity
    (Brock, De & Smith 2021, NF-ResNets): :math:`1/\text{std}(f(z))` for
    :math:`z \sim \mathcal N(0, 1)`, so that a unit-variance input keeps unit variance
    through :math:`f`. For ReLU, :math:`E[f(z)^2] = 1/2` and :math:`E[f(z)] = 1/\sqrt{2\pi}`,
    so :math:`\gamma = \sqrt{2/(1 - 1/\pi)} \approx 1.7129` (deepmind-research
    ``nfnets/base.py`` bakes 1.7139588594436646 into its ReLU, an estimate 0.06% higher).
    ``"linear"`` gives 1.
    Used in lesson 11."""
    if name == "relu":
        return math.sqrt(2.0 / (1.0 - 1.0 / math.pi))
    if name == "linear":
        return 1.0
    raise ValueError(f"name must be 'relu' or 'linear', got {name!r}")


def scaled_standardize_weight(w: Tensor, gain: Tensor | float = 1.0, gamma: float = 1.0,
                              eps: float = 1e-4) -> Tensor:
    r"""Scaled Weight Standardisation (introduced with NF-ResNets, Brock, De & Smith, ICLR
    2021; used by NFNets), per output channel over its fan-in :math:`N`:

    .. math:: \hat W = g \odot \gamma\,\frac{W - \mu}{\sigma\sqrt N}

    with :math:`\gamma` a **fixed** constant set by the nonlinearity that follows
    (:func:`nonlinearity_gamma`: about 1.71 for ReLU) and :math:`g` = ``gain`` a separate
    **learnable** gain, a scalar or one value per output channel (initialised to 1, as
    ``WSConv2D``'s ``gain`` in deepmind-research ``nfnets/base.py`` and timm's
    ``ScaledStdConv2d``). Biased :math:`\sigma`; :math:`\epsilon` added to
    :math:`\sigma^2 N`, as in the reference code's ``max(var * fan_in, eps)`` up to the
    clamp. Each row then has mean 0 and norm :math:`|g_i|\,\gamma` (for :math:`\epsilon = 0`).
    Used in lesson 11."""
    dims = list(range(1, w.dim()))
    fan_in = w[0].numel()
    mean = w.mean(dims, keepdim=True)
    var = ((w - mean) ** 2).mean(dims, keepdim=True)
    if isinstance(gain, Tensor):
        gain = gain.reshape((-1,) + (1,) * (w.dim() - 1))
    return gain * gamma * (w - mean) / torch.sqrt(var * fan_in + eps)


@torch.no_grad()
def adaptive_grad_clip(parameters, clipping: float, eps: float = 1e-3) -> None:
    r"""Unit-wise adaptive gradient clipping (Brock et al. 2021, section 4.1), in place: for
    each unit :math:`i` (a row of a Linear weight, an output channel of a kernel; a vector,
    such as a bias, is one unit, as in the authors' ``unitwise_norm``),

    .. math::

        G_i \leftarrow \lambda\,\frac{\max(\lVert W_i\rVert, \epsilon)}{\lVert G_i\rVert}\,G_i
        \quad\text{if}\quad \frac{\lVert G_i\rVert}{\max(\lVert W_i\rVert, \epsilon)} > \lambda,

    with :math:`\lambda` = ``clipping`` and :math:`\epsilon = 10^{-3}`; other units are left
    alone. Used in lesson 11."""
    for p in parameters:
        if p.grad is None:
            continue
        if p.dim() <= 1:  # a vector (or scalar) is one unit
            w_norm, g_norm = p.norm(), p.grad.norm()
        else:
            w_norm, g_norm = norm_except_dim(p, 0), norm_except_dim(p.grad, 0)
        max_norm = w_norm.clamp_min(eps) * clipping
        scale = torch.where(g_norm > max_norm, max_norm / g_norm.clamp_min(1e-6),
                            torch.ones_like(g_norm))
        p.grad.mul_(scale)


# --------------------------------------------------------------------------------------
# Spectral Normalisation
# --------------------------------------------------------------------------------------
def _normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    return x / torch.clamp_min(torch.sqrt((x * x).sum()), eps)


def power_iteration_step(w: Tensor, v: Tensor, eps: float = 1e-12) -> tuple[Tensor, Tensor, Tensor]:
    r"""One step of the power iteration for the largest singular value of the matrix
    :math:`W` (out, in), in torch's order (``_SpectralNorm._power_method`` and ``forward``):

    .. math:: u \leftarrow \frac{W v}{\lVert W v\rVert},\qquad
              v \leftarrow \frac{W^\top u}{\lVert W^\top u\rVert},\qquad
              \sigma = u^\top W v .

    Returns ``(u, v, sigma)``. Repeated, :math:`\sigma` rises to :math:`\sigma_1(W)` (from
    below: :math:`u^\top W v \le \sigma_1` for unit vectors). Used in lesson 11."""
    u = _normalize(w @ v, eps)
    v = _normalize(w.T @ u, eps)
    return u, v, u @ (w @ v)


class SpectralNorm(nn.Module):
    r"""The from-scratch parametrisation :math:`W/\sigma(W)` (Miyato et al. 2018), the
    course's twin of torch's ``_SpectralNorm``, with the same buffers ``_u`` and ``_v`` (so
    a state_dict loads both ways): the weight is reshaped to a matrix (out, -1) (``dim``
    moved first), :math:`u, v` start as normalised Gaussian vectors refined by 15 power
    iterations, then each forward **in training mode** does ``n_power_iterations`` steps of
    :func:`power_iteration_step` (no gradient through :math:`u, v`) and returns

    .. math:: W_\text{SN} = \frac{W}{\sigma},\qquad \sigma = u^\top W_\text{mat} v .

    In eval mode :math:`u, v` are reused unchanged. Used in lesson 11."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12, generator: torch.Generator | None = None):
        super().__init__()
        self.dim, self.eps, self.n_power_iterations = dim % weight.dim(), eps, n_power_iterations
        mat = self._matrix(weight)
        u = torch.randn(mat.shape[0], generator=generator, dtype=weight.dtype)
        v = torch.randn(mat.shape[1], generator=generator, dtype=weight.dtype)
        self.register_buffer("_u", _normalize(u, eps))
        self.register_buffer("_v", _normalize(v, eps))
        self._power_method(mat, 15)

    def _matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.flatten(1)

    @torch.no_grad()
    def _power_method(self, mat: Tensor, steps: int) -> None:
        for _ in range(steps):
            u, v, _ = power_iteration_step(mat, self._v, self.eps)
            self._u.copy_(u)
            self._v.copy_(v)

    def forward(self, weight: Tensor) -> Tensor:
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = u @ (mat @ v)
        return weight / sigma


def spectral_norm(module: nn.Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None, impl: str = "course",
                  generator: torch.Generator | None = None) -> nn.Module:
    r"""Reparametrise ``module.<name>`` as :math:`W/\sigma(W)` with the signature of
    ``torch.nn.utils.parametrizations.spectral_norm`` (``dim=None``: 1 for ConvTranspose,
    else 0). ``impl="course"`` registers :class:`SpectralNorm` (initial :math:`u, v` drawn
    from ``generator``); ``impl="torch"`` calls torch's. Parameter
    ``parametrizations.<name>.original`` and buffers ``parametrizations.<name>.0._u``,
    ``._v`` in both. Used in lesson 11."""
    if impl == "torch":
        return nn.utils.parametrizations.spectral_norm(module, name, n_power_iterations, eps, dim)
    if impl != "course":
        raise ValueError(f"impl must be 'course' or 'torch', got {impl!r}")
    weight = getattr(module, name)
    if dim is None:
        transposed = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, SpectralNorm(weight.detach(), n_power_iterations, dim, eps, generator))
    return module


def reshaped_spectral_norm(weight: Tensor) -> Tensor:
    r""":math:`\sigma_1` of the kernel reshaped to a matrix (out, in·kH·kW), what spectral
    normalisation in torch and in Miyato et al.'s code divides by:
    ``torch.linalg.matrix_norm(weight.flatten(1), ord=2)``. For a convolution this is **not**
    the norm of the convolution as a linear map (:func:`conv_operator_norm`). Used in lesson 11."""
    return torch.linalg.matrix_norm(weight.flatten(1), ord=2)


@torch.no_grad()
def conv_operator_norm(weight: Tensor, input_shape: tuple[int, int, int], stride: int = 1,
                       padding: int = 0, steps: int = 100,
                       generator: torch.Generator | None = None) -> Tensor:
    r"""The spectral norm of the convolution :math:`x \mapsto \mathrm{conv2d}(x, W)` as a
    linear map on inputs of shape ``input_shape`` (C, H, W), by power iteration through the
    convolution :math:`A` and its adjoint :math:`A^\top` (``conv_transpose2d`` with the same
    kernel, stride and padding):

    .. math:: x \leftarrow \frac{A^\top A x}{\lVert A^\top A x\rVert},\qquad
              \lVert A\rVert_2 \approx \lVert A x\rVert .

    The estimate rises to :math:`\lVert A\rVert_2` from below. Used in lesson 11."""
    x = torch.randn((1,) + tuple(input_shape), generator=generator, dtype=weight.dtype)
    x = x / x.norm()
    for _ in range(steps):
        y = F.conv2d(x, weight, stride=stride, padding=padding)
        x = F.conv_transpose2d(y, weight, stride=stride, padding=padding,
                               output_padding=_output_padding(input_shape, y.shape, weight, stride, padding))
        x = x / x.norm()
    return F.conv2d(x, weight, stride=stride, padding=padding).norm()


def _output_padding(input_shape, out_shape, weight, stride, padding):
    """The output_padding that makes conv_transpose2d return exactly ``input_shape``."""
    pads = []
    for size, out, k in zip(input_shape[1:], out_shape[2:], weight.shape[2:]):
        pads.append(size - ((out - 1) * stride - 2 * padding + k))
    return tuple(pads)


# --------------------------------------------------------------------------------------
# Normalisation is not Gaussianisation
# --------------------------------------------------------------------------------------
def moments(x: Tensor, dim=0) -> tuple[Tensor, Tensor]:
    r"""Sample skewness and excess kurtosis of ``x`` along ``dim`` (biased moments):

    .. math:: \text{skew} = \frac{m_3}{m_2^{3/2}},\qquad
              \text{kurt} = \frac{m_4}{m_2^2} - 3,\qquad m_k = \overline{(x - \bar x)^k}.

    Both are 0 for a Gaussian and unchanged by any :math:`x \to a x + b` with :math:`a > 0`
    (skewness flips sign for :math:`a < 0`). Used in lesson 11."""
    c = x - x.mean(dim, keepdim=True)
    m2 = (c ** 2).mean(dim)
    return (c ** 3).mean(dim) / m2 ** 1.5, (c ** 4).mean(dim) / m2 ** 2 - 3


# --------------------------------------------------------------------------------------
# The small experiment: the digits CNN of lesson 01 with weight-side norms
# --------------------------------------------------------------------------------------
VARIANTS = {
    "bn": "BatchNorm",
    "wn": "WeightNorm (data-dependent init)",
    "wn_mobn": "WeightNorm + mean-only BN",
    "gn": "GroupNorm",
    "gn_ws": "GroupNorm + WS",
}


def digits_cnn(variant: str, seed: int = 0, width: int = 16) -> nn.Sequential:
    r"""Lesson 01's ``experiments.small_cnn`` with its three norm layers replaced:

    conv3x3(1 -> w) -> [norm] -> ReLU -> conv3x3(w -> 2w, stride 2) -> [norm] -> ReLU
    -> global average pool -> Linear(2w, 2w) -> [norm] -> ReLU -> Linear(2w, 10)

    ``variant``: ``"bn"`` (BatchNorm, exactly ``small_cnn("batch")`` with torch's modules),
    ``"gn"`` (GroupNorm, 4 groups, exactly ``small_cnn("group")``), ``"gn_ws"`` (GroupNorm,
    and the two convolutions standardised, :class:`WSConv2d`), ``"wn"`` (every layer,
    classifier included, weight-normalised with a bias, no norm layer) and ``"wn_mobn"``
    (weight-normalised hidden layers without bias, each followed by
    :class:`MeanOnlyBatchNorm`; the classifier weight-normalised with a bias). WN models
    still need :func:`data_dependent_init`. Initial weights drawn under
    ``torch.manual_seed(seed)`` in a forked RNG (global RNG untouched). Used in lesson 11."""
    if variant in ("bn", "gn", "gn_ws"):
        model = experiments.small_cnn({"bn": "batch", "gn": "group", "gn_ws": "group"}[variant],
                                      seed=seed, width=width, impl="torch")
        if variant == "gn_ws":
            for i in (0, 3):  # (a new module draws its own weight: keep the global RNG)
                conv = model[i]
                with torch.random.fork_rng(devices=[]):
                    ws = WSConv2d(conv.in_channels, conv.out_channels, conv.kernel_size,
                                  stride=conv.stride, padding=conv.padding, bias=False)
                ws.weight = conv.weight
                model[i] = ws
        return model
    if variant not in ("wn", "wn_mobn"):
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    mean_only = variant == "wn_mobn"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = [nn.Conv2d(1, width, 3, padding=1, bias=not mean_only),
                  MeanOnlyBatchNorm(width) if mean_only else nn.Identity(), nn.ReLU(),
                  nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=not mean_only),
                  MeanOnlyBatchNorm(2 * width) if mean_only else nn.Identity(), nn.ReLU(),
                  nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                  nn.Linear(2 * width, 2 * width, bias=not mean_only),
                  MeanOnlyBatchNorm(2 * width) if mean_only else nn.Identity(), nn.ReLU(),
                  nn.Linear(2 * width, 10)]
    model = nn.Sequential(*[m for m in layers if not isinstance(m, nn.Identity)])
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            weight_norm(m)
    return model


def train_digits_cnn(variant: str, batch_size: int, seed: int = 0, epochs: int = 2,
                     base_lr: float = 0.1, data: tuple | None = None, impl: str = "torch",
                     dtype: torch.dtype = torch.float64) -> dict[str, float]:
    r"""Train :func:`digits_cnn` (``variant``, ``seed``) on the training half of
    ``experiments.digits_split()`` (or ``data``) and return ``{"error": test error in %
    in eval mode, "final_train_loss": mean training loss of the last epoch}``.

    As lesson 01's ``train_small_cnn``: cross-entropy, SGD with momentum 0.9, learning rate
    :math:`0.1\cdot B/32` annealed by a cosine, the same ``epochs`` for every batch size,
    shuffled by a generator seeded with ``seed``, last incomplete batch dropped, one torch
    thread, float64 (so the results agree across CPU kernels).

    WN models (``impl``: torch's weight_norm, the faster, or the course's; the same function)
    first get :func:`data_dependent_init` on the first 256 training images (mean-only BN
    models: g only), then :math:`v` is rescaled to :math:`\lVert v\rVert = |g|` per unit.
    That leaves :math:`w` unchanged but not the training: a step :math:`\Delta v` moves
    :math:`w` by :math:`(g/\lVert v\rVert)` times its part orthogonal to :math:`v`, and
    :math:`\nabla_v L` carries another :math:`g/\lVert v\rVert`, so SGD moves the direction
    with an effective learning rate :math:`\eta\,g^2/\lVert v\rVert^2`; after the rescaling
    it is :math:`\eta`, as for a plain network (with the paper's
    :math:`v \sim \mathcal N(0, 0.05^2)` it is tens of times larger in the first layers).
    Used in lesson 11."""
    data = experiments.digits_split() if data is None else data
    x_train, y_train, x_test, y_test = (t.to(dtype) if t.is_floating_point() else t for t in data)
    model = digits_cnn(variant, seed=seed).to(dtype)
    if variant in ("wn", "wn_mobn"):
        if impl == "torch":
            for m in model:
                if _is_weight_normed(m):
                    parametrize.remove_parametrizations(m, "weight")
                    weight_norm(m, impl="torch")
        model.train()
        data_dependent_init(model, x_train[:256], torch.Generator().manual_seed(seed),
                            init_bias=variant == "wn")
        with torch.no_grad():
            for m in model:
                if _is_weight_normed(m):
                    p = m.parametrizations.weight
                    p.original1.mul_(p.original0.abs() / norm_except_dim(p.original1, 0))
        for m in model:  # the init batch's means are not part of the running statistics
            if isinstance(m, MeanOnlyBatchNorm):
                m.running_mean.zero_()
    steps = len(x_train) // batch_size
    opt = torch.optim.SGD(model.parameters(), lr=base_lr * batch_size / 32, momentum=0.9)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps)
    g = torch.Generator().manual_seed(seed)
    model.train()
    with experiments.one_thread():
        for _ in range(epochs):
            perm = torch.randperm(len(x_train), generator=g)
            total = 0.0
            for i in range(steps):
                idx = perm[i * batch_size:(i + 1) * batch_size]
                loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                schedule.step()
                total += float(loss.detach())
        error = experiments._test_error(model.eval(), x_test, y_test, len(x_test))
    loss = total / steps
    return {"error": error, "final_train_loss": loss if math.isfinite(loss) else math.inf}


def _grid_run(job: tuple) -> dict:
    variant, batch_size, seed, kwargs = job
    start = time.perf_counter()
    result = train_digits_cnn(variant, batch_size, seed=seed, **kwargs)
    return {"variant": variant, "batch_size": batch_size, "seed": seed, **result,
            "seconds": time.perf_counter() - start}


def variant_grid(variants=tuple(VARIANTS), batch_sizes=(32, 2), seeds=(0, 1, 2),
                 workers: int = 2, progress: bool = True, **kwargs) -> list[dict]:
    r""":func:`train_digits_cnn` for every (variant, batch size, seed); one row per run
    (keys variant, batch_size, seed, error, final_train_loss, seconds), in loop order.

    ``workers > 1`` runs worker processes (``spawn``); every run uses one thread and its own
    seeds, so the numbers do not depend on ``workers``. With ``progress``, a
    :class:`helpers.progress.Progress` line (live in a notebook, which keeps one final line
    without timings). Used in lesson 11."""
    from itertools import product

    kwargs = {"data": experiments.digits_split(), **kwargs}
    jobs = [(v, b, s, kwargs) for v, b, s in product(variants, batch_sizes, seeds)]
    done: dict = {}
    bar = Progress("runs", len(jobs), label_width=4, steps_to_stdout=True) if progress else None

    def report(row):
        done[(row["variant"], row["batch_size"], row["seed"])] = row
        if bar is not None:
            bar.update(len(done), f"{row['variant']} batch {row['batch_size']} seed {row['seed']}")

    experiments.run_jobs(_grid_run, jobs, workers, report)
    if bar is not None:
        bar.close(f"{len(jobs)} runs ({len(variants)} variants x {len(batch_sizes)} batch sizes x "
                  f"{len(seeds)} seeds)")
    return [done[(v, b, s)] for v, b, s, _ in jobs]


def grid_summary(rows: list[dict], key: str = "error") -> dict:
    """{(variant, batch_size): (mean, min, max)} of ``key`` over seeds. Used in lesson 11."""
    out = {}
    for r in rows:
        out.setdefault((r["variant"], r["batch_size"]), []).append(r[key])
    return {k: (sum(v) / len(v), min(v), max(v)) for k, v in out.items()}


# --------------------------------------------------------------------------------------
# Diagnostics and figures
# --------------------------------------------------------------------------------------
@torch.no_grad()
def layer_output_stats(model: nn.Sequential, x: Tensor) -> list[tuple[Tensor, Tensor]]:
    r"""For each Conv2d / Linear layer of the ``nn.Sequential`` ``model`` (in order), the
    per-unit mean and (biased) standard deviation of its output on the batch ``x``, over the
    batch and the positions: the pre-activations that :func:`data_dependent_init` sets to
    mean 0 and std 1. The model runs in its current mode. Used in lesson 11."""
    stats, h = [], x
    for layer in model:
        h = layer(h)
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            stats.append(_unit_stats(h))
    return stats


# short tick labels for :func:`plot_grid` (the full names are in :data:`VARIANTS`)
_SHORT = {"bn": "BN", "wn": "WN", "wn_mobn": "WN +\nmean BN\n均值 BN", "gn": "GN", "gn_ws": "GN +\nWS"}


def plot_grid(rows: list[dict], variants=tuple(VARIANTS)):
    """Figure: test error (%) of each variant at each batch size, one dot per seed and a bar
    at the mean (the rows of :func:`variant_grid`). Returns the figure. Used in lesson 11."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from .plotting import use_course_style

    use_course_style()
    sizes = sorted({r["batch_size"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(sizes), figsize=(9.6, 4.8), sharey=True)
    axes = [axes] if len(sizes) == 1 else axes
    for ax, b in zip(axes, sizes):
        for i, v in enumerate(variants):
            errs = [r["error"] for r in rows if r["variant"] == v and r["batch_size"] == b]
            ax.bar(i, sum(errs) / len(errs), color=f"C{i}", alpha=0.35)
            ax.plot([i] * len(errs), errs, "o", color=f"C{i}")
        ax.set_xticks(range(len(variants)), [_SHORT.get(v, VARIANTS[v]) for v in variants])
        ax.set_title(f"batch size {b} · 批大小 {b}")
        ax.set_yscale("log")
        # labels at 1-2-5 steps, so that errors of a few per cent can be read
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel("test error %, log · 测试错误率（对数）")
    fig.tight_layout()
    return fig


_SHAPE_NAMES = {"skewed": "偏斜", "bimodal": "双峰"}


def _signed(v) -> str:
    """``v`` to 2 decimals, negative numbers with a true minus sign (U+2212)."""
    return f"{float(v):.2f}".replace("-", "\u2212")


def plot_shapes(samples: dict[str, Tensor], normalised: dict[str, Tensor], bins: int = 60):
    """Figure: histograms of each named sample before and after normalisation, side by side
    (one pair of panels per sample, sharing the count axis, each titled with its skewness
    and excess kurtosis). Returns the figure. Used in lesson 11."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from .plotting import use_course_style

    use_course_style()
    fig = plt.figure(figsize=(11.6, 4.9), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.08, wspace=0.06)
    for sub, name in zip(fig.subfigures(1, len(samples), wspace=0.04, squeeze=False).flat, samples):
        sub.suptitle(f"{name} · {_SHAPE_NAMES.get(name, name)}", fontsize=18, fontweight="bold")
        axes = sub.subplots(1, 2, sharey=True)
        for ax, data, when in zip(axes, (samples[name], normalised[name]),
                                  ("before · 归一化前", "after · 归一化后")):
            ax.hist(data.flatten().numpy(), bins=bins, color="C0" if "before" in when else "C1")
            skew, kurt = moments(data.flatten())
            ax.set_title(f"{when}\nskew · 偏度 {_signed(skew)}\n"
                         f"excess kurtosis\n超额峰度 {_signed(kurt)}", fontsize=16)
            ax.xaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
        axes[0].set_ylabel("count · 计数")
    return fig


# --------------------------------------------------------------------------------------
# The lesson's grid at 6 epochs, stored in results/ (too long to run inside the lesson)
# --------------------------------------------------------------------------------------
GRID_EPOCHS = 6  # lesson 01's schedule for the same CNN


def stored_grid(seeds=(0, 1, 2), epochs: int = GRID_EPOCHS, workers: int = 2,
                progress: bool = True) -> list[dict]:
    r"""The rows of ``results/weight_norm_grid.PATH.json``: :func:`variant_grid` for every
    variant at batch sizes 32 and 2 and every seed, ``epochs`` epochs, learning rate
    :math:`0.1\cdot B/32`; then a diagnostic: WeightNorm alone at batch 32 with the learning
    rate 0.01 instead of 0.1 (``base_lr`` 0.01, the rest unchanged). Every row gets
    ``epochs`` and ``base_lr``. Used in lesson 11."""
    rows = [{**r, "epochs": epochs, "base_lr": 0.1}
            for r in variant_grid(batch_sizes=(32, 2), seeds=seeds, workers=workers,
                                  progress=progress, epochs=epochs)]
    rows += [{**r, "epochs": epochs, "base_lr": 0.01}
             for r in variant_grid(variants=("wn",), batch_sizes=(32,), seeds=seeds,
                                   workers=workers, progress=progress, epochs=epochs,
                                   base_lr=0.01)]
    return rows


def _main(argv=None) -> None:
    """``python -m helpers.weight_norms grid [--seeds 0 1 2]``: write
    ``results/weight_norm_grid.PATH.json`` (:func:`stored_grid`) for the CPU path torch runs
    on (``ATEN_CPU_CAPABILITY=avx2`` or ``=default`` in front selects one)."""
    import argparse
    import sys

    from .results import write_results

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m helpers.weight_norms")
    parser.add_argument("grid", choices=["grid"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    import importlib  # the workers must find the module by its name, not as __main__

    rows = importlib.import_module("helpers.weight_norms").stored_grid(seeds=args.seeds, workers=args.workers)
    for r in rows:
        r.pop("seconds", None)
    path = write_results("weight_norm_grid", rows, seeds=args.seeds, argv=argv,
                         module="helpers.weight_norms", epochs=GRID_EPOCHS,
                         batch_sizes=[32, 2], base_lr="0.1 x B / 32; diagnostic: 0.01 for WN at B = 32",
                         variants=list(VARIANTS), threads_per_run=1)
    print(f"written: {path}")


if __name__ == "__main__":
    _main()
