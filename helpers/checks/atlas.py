r"""Exercise checkers for lesson 14 (the atlas): Switchable Normalisation and Filter Response
Normalisation with its TLU.

Same contract as :mod:`helpers.checks`: each checker runs the learner's function on cases
chosen to expose the mistakes that circulate, compares with an independent float64
reference written here from ``torch.var_mean`` and elementary operations, and returns a
:class:`helpers.checks.CheckResult` (English then Chinese) naming the mistake. It never prints,
never raises on the learner's code, and draws its inputs from a seeded ``torch.Generator``.

What the checkers pass (and the learner's function must accept):

- ``check_switchable_norm(fn)``: ``fn(x, mean_weights, var_weights, weight, bias, eps)`` with
  ``x`` a float32 or float64 tensor (N, C, H, W), ``mean_weights`` and ``var_weights`` tensors
  of shape (3,) (the softmaxed importance weights, order IN, LN, BN), ``weight`` and ``bias``
  of shape (C,), ``eps`` a float; returns a tensor of ``x``'s shape and dtype.
- ``check_frn(fn)``: ``fn(x, gamma, beta, tau, eps)`` with ``x`` a float32 or float64 tensor
  (N, C, H, W), ``gamma``, ``beta``, ``tau`` of shape (C,), ``eps`` a float; returns
  $\max(\gamma x/\sqrt{\nu^2+\epsilon} + \beta, \tau)$ in ``x``'s shape and dtype.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .engine import Case, CheckResult, generator, mistakes, randn, run_cases

__all__ = ["check_switchable_norm", "check_frn"]


def _c(p: Tensor) -> Tensor:
    return p.view(1, -1, 1, 1)


# --------------------------------------------------------------------------------------
# Switchable Normalisation
# --------------------------------------------------------------------------------------
_SN_SETS = {"in": (2, 3), "ln": (1, 2, 3), "bn": (0, 2, 3)}


def _sn(x, wm, wv, weight, bias, eps, sets=_SN_SETS, unbiased=False, combine="stats",
        eps_out=False, std_mix=False, affine=True):
    """Switchable Normalisation and its mutants (a float64 computation, cast back)."""
    xd = x.double()
    stats = []
    for key in ("in", "ln", "bn"):
        var, mu = torch.var_mean(xd, dim=sets[key], keepdim=True, correction=int(unbiased))
        stats.append((mu, var))
    wm, wv = wm.double(), wv.double()
    if combine == "outputs":
        y = sum(w * (xd - m) / (v + eps).sqrt() for w, (m, v) in zip(wm, stats))
    else:
        mu = sum(w * m for w, (m, _) in zip(wm, stats))
        if std_mix:
            sd = sum(w * v.sqrt() for w, (_, v) in zip(wv, stats))
            den = sd + eps if eps_out else (sd ** 2 + eps).sqrt()
        else:
            var = sum(w * v for w, (_, v) in zip(wv, stats))
            den = var.sqrt() + eps if eps_out else (var + eps).sqrt()
        y = (xd - mu) / den
    if affine:
        y = y * _c(weight.double()) + _c(bias.double())
    return y.to(x.dtype)


def _sn_reference(x, wm, wv, weight, bias, eps):
    return _sn(x, wm, wv, weight, bias, eps)


_SN_TEXTS = {
    "mixed_outputs": (
        "it mixes the three normalised outputs, sum_k w_k (x - mu_k)/sigma_k. Switchable "
        "Normalisation mixes the statistics: mu = sum_k w_k mu_k and sigma^2 = sum_k w'_k sigma_k^2, "
        "then normalises once: (x - mu)/sqrt(sigma^2 + eps).",
        "把三个归一化后的输出加权混合了：sum_k w_k (x - mu_k)/sigma_k。Switchable Normalisation 混合的是"
        "统计量：mu = sum_k w_k mu_k，sigma^2 = sum_k w'_k sigma_k^2，然后只归一化一次：(x - mu)/sqrt(sigma^2 + eps)。"),
    "mean_weights_for_variance": (
        "the variances are mixed with the mean's weights. The paper learns two sets of importance "
        "weights, one for the means (mean_weights) and one for the variances (var_weights).",
        "方差用了均值的权重来混合。论文学习两组重要性权重：一组给均值（mean_weights），一组给方差（var_weights）。"),
    "mixed_std": (
        "it mixes standard deviations, sum_k w'_k sigma_k, instead of variances. The paper mixes "
        "the variances: sigma^2 = sum_k w'_k sigma_k^2.",
        "混合的是标准差 sum_k w'_k sigma_k，而不是方差。论文混合的是方差：sigma^2 = sum_k w'_k sigma_k^2。"),
    "weights_order": (
        "the importance weights are applied in the wrong order. The checker passes them as "
        "(IN, LN, BN): weight 0 for InstanceNorm's statistics, 1 for LayerNorm's, 2 for BatchNorm's.",
        "重要性权重的顺序用错了。检查器按 (IN, LN, BN) 的顺序传入：第 0 个对应 InstanceNorm 的统计量，"
        "第 1 个对应 LayerNorm，第 2 个对应 BatchNorm。"),
    "softmax_again": (
        "a softmax applied to weights that are already softmaxed: the exercise passes the "
        "importance weights themselves (positive, summing to 1), so use them as they are.",
        "对已经做过 softmax 的权重又做了一次 softmax：练习传入的就是重要性权重本身（为正、和为 1），直接使用即可。"),
    "bn_axes": (
        "BatchNorm's statistics over the batch dim only. BN shares statistics over (N, H, W) "
        "for each channel: dims (0, 2, 3).",
        "BatchNorm 的统计量只在批维度上计算。BN 对每个通道在 (N, H, W) 上共享统计量：dims (0, 2, 3)。"),
    "ln_axes": (
        "LayerNorm's statistics over the channels only. In Switchable Normalisation LN's set is "
        "(C, H, W) of one sample: dims (1, 2, 3).",
        "LayerNorm 的统计量只在通道维度上计算。Switchable Normalisation 中 LN 的集合是一个样本的 (C, H, W)："
        "dims (1, 2, 3)。"),
    "in_axes": (
        "InstanceNorm's statistics over the last dim (W) only. IN's set is (H, W) of one sample "
        "and channel: dims (2, 3).",
        "InstanceNorm 的统计量只在最后一维（W）上计算。IN 的集合是一个样本一个通道的 (H, W)：dims (2, 3)。"),
}

_SN_MISTAKES = mistakes({
    "mixed_outputs": lambda *a: _sn(*a, combine="outputs"),
    "mean_weights_for_variance": lambda x, wm, wv, w, b, e: _sn(x, wm, wm, w, b, e),
    "mixed_std": lambda *a: _sn(*a, std_mix=True),
    "weights_order": lambda x, wm, wv, w, b, e: _sn(x, wm.flip(0), wv.flip(0), w, b, e),
    "softmax_again": lambda x, wm, wv, w, b, e: _sn(x, wm.softmax(0), wv.softmax(0), w, b, e),
    "bn_axes": lambda *a: _sn(*a, sets={**_SN_SETS, "bn": (0,)}),
    "ln_axes": lambda *a: _sn(*a, sets={**_SN_SETS, "ln": (1,)}),
    "in_axes": lambda *a: _sn(*a, sets={**_SN_SETS, "in": (3,)}),
    "unbiased_variance": lambda *a: _sn(*a, unbiased=True),
    "eps_outside_sqrt": lambda *a: _sn(*a, eps_out=True),
    "affine_missing": lambda *a: _sn(*a, affine=False),
}, _SN_TEXTS)


def _sn_cases() -> list[Case]:
    g = generator(14)
    cases = []
    scale = torch.tensor([0.5, 1.0, 2.0, 4.0, 1.5, 3.0], dtype=torch.float64).view(1, 6, 1, 1)
    shift = torch.tensor([1.0, -2.0, 0.0, 3.0, 0.5, -1.0], dtype=torch.float64).view(1, 6, 1, 1)

    def x_of(n, dtype):
        return (randn(n, 6, 3, 5, g=g, dtype=torch.float64) * scale + shift
                + randn(n, 1, 1, 1, g=g, dtype=torch.float64)).to(dtype)

    def params(dtype):
        w = (torch.rand(6, generator=g, dtype=torch.float64) + 0.5).to(dtype)
        return w, (torch.randn(6, generator=g, dtype=torch.float64) * 0.5).to(dtype)

    mixes = [("mixed importance weights", [0.2, 0.3, 0.5], [0.6, 0.1, 0.3]),
             ("one-hot: BatchNorm", [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]),
             ("one-hot: InstanceNorm", [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]),
             ("means from LN, variances from IN", [0.0, 1.0, 0.0], [0.7, 0.0, 0.3])]
    for name, wm, wv in mixes:
        w, b = params(torch.float64)
        cases.append(Case(f"{name}, x (4, 6, 3, 5) float64", (
            x_of(4, torch.float64), torch.tensor(wm, dtype=torch.float64),
            torch.tensor(wv, dtype=torch.float64), w, b, 1e-5), rtol=1e-6, atol=1e-6))
    w, b = params(torch.float64)
    small = x_of(3, torch.float64) * 1e-3
    cases.append(Case("small activations (std about 1e-3), eps 1e-5", (
        small, torch.tensor([0.3, 0.3, 0.4], dtype=torch.float64),
        torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64), w, b, 1e-5), rtol=1e-6, atol=1e-6))
    w, b = params(torch.float32)
    cases.append(Case("float32, x (2, 6, 3, 5)", (
        x_of(2, torch.float32), torch.tensor([0.1, 0.7, 0.2]), torch.tensor([0.3, 0.3, 0.4]),
        w, b, 1e-5)))
    return cases


def check_switchable_norm(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(x, mean_weights, var_weights, weight, bias, eps)`` against Switchable
    Normalisation in training mode: $\mu = \sum_k w_k\mu_k$, $\sigma^2 = \sum_k w'_k\sigma_k^2$
    over $k$ = (IN, LN, BN) (biased variances), $y = \gamma(x-\mu)/\sqrt{\sigma^2+\epsilon} + \beta$.
    Cases: mixed and one-hot importance weights, small activations, float32 and float64."""
    return run_cases("switchable_norm", fn, _sn_cases(), _sn_reference, _SN_MISTAKES,
                     against=("Switchable Normalisation (float64)", "Switchable Normalisation（float64）"))


# --------------------------------------------------------------------------------------
# Filter Response Normalisation + TLU
# --------------------------------------------------------------------------------------
def _frn(x, gamma, beta, tau, eps, dims=(2, 3), centre=False, eps_out=False, sqrt=True,
         tlu="after", affine=True):
    """FRN + TLU and its mutants (float64, cast back)."""
    xd = x.double()
    if centre:
        xd_c = xd - xd.mean(dims, keepdim=True)
        nu2 = (xd_c ** 2).mean(dims, keepdim=True)
    else:
        xd_c, nu2 = xd, (xd ** 2).mean(dims, keepdim=True)
    if not sqrt:
        den = nu2 + eps
    elif eps_out:
        den = nu2.sqrt() + eps
    else:
        den = (nu2 + eps).sqrt()
    xh = xd_c / den
    t = _c(tau.double())
    if tlu == "before":
        xh = torch.maximum(xh, t)
    y = xh * _c(gamma.double()) + _c(beta.double()) if affine else xh
    if tlu == "after":
        y = torch.maximum(y, t)
    elif tlu == "relu":
        y = y.clamp_min(0)
    elif tlu == "min":
        y = torch.minimum(y, t)
    return y.to(x.dtype)


def _frn_reference(x, gamma, beta, tau, eps):
    return _frn(x, gamma, beta, tau, eps)


_FRN_TEXTS = {
    "subtracted_mean": (
        "the mean is subtracted (a variance, as in InstanceNorm). FRN does not centre: it divides "
        "by the root of the mean square, nu^2 = mean(x^2) over (H, W); the learned threshold tau "
        "of the TLU deals with the missing mean.",
        "减去了均值（即用方差，像 InstanceNorm 那样）。FRN 不做中心化：它除以均方的平方根，nu^2 = mean(x^2)，"
        "在 (H, W) 上计算；缺少的均值由 TLU 中可学习的阈值 tau 来弥补。"),
    "missing_tlu": (
        "the Thresholded Linear Unit is missing: FRN is paired with z = max(y, tau), a learned "
        "threshold per channel, applied after the affine step.",
        "缺少阈值线性单元（TLU）：FRN 要与 z = max(y, tau) 配合使用，tau 是每个通道可学习的阈值，在仿射变换之后施加。"),
    "relu_not_tlu": (
        "ReLU, max(y, 0), instead of the TLU max(y, tau): the threshold tau is a learned "
        "parameter per channel, and without it FRN's outputs stay uncentred.",
        "用了 ReLU，即 max(y, 0)，而不是 TLU 的 max(y, tau)：阈值 tau 是每个通道可学习的参数，没有它 FRN 的输出没有偏移可调。"),
    "tlu_before_affine": (
        "the threshold is applied before the affine step. The order is y = gamma * x_hat + beta, "
        "then z = max(y, tau).",
        "阈值在仿射变换之前施加了。顺序应为 y = gamma * x_hat + beta，然后 z = max(y, tau)。"),
    "min_not_max": (
        "min(y, tau) instead of max(y, tau): the TLU is a ReLU with a learned threshold, so it keeps "
        "the values above tau.",
        "用了 min(y, tau) 而不是 max(y, tau)：TLU 是阈值可学习的 ReLU，保留的是大于 tau 的值。"),
    "layer_axes": (
        "nu^2 averaged over (C, H, W), one value per sample. FRN's nu^2 is per sample *and channel*, "
        "over (H, W): dims (2, 3).",
        "nu^2 在 (C, H, W) 上求平均，每个样本只有一个值。FRN 的 nu^2 是每个样本*每个通道*一个，在 (H, W) 上计算：dims (2, 3)。"),
    "batch_axes": (
        "nu^2 averaged over the batch as well, (N, H, W): then FRN depends on the batch. It is "
        "per sample and channel, over (H, W): dims (2, 3).",
        "nu^2 还在批维度上求了平均，即 (N, H, W)：这样 FRN 就依赖于批了。它应是每个样本每个通道一个，在 (H, W) 上计算：dims (2, 3)。"),
    "last_dim_only": (
        "nu^2 averaged over the last dim (W) only; FRN averages over both spatial dims (H, W).",
        "nu^2 只在最后一维（W）上求平均；FRN 在两个空间维度 (H, W) 上求平均。"),
    "missing_sqrt": (
        "divided by nu^2 + eps instead of its square root: x_hat = x / sqrt(nu^2 + eps).",
        "除以的是 nu^2 + eps，而不是它的平方根：x_hat = x / sqrt(nu^2 + eps)。"),
}

_FRN_MISTAKES = mistakes({
    "subtracted_mean": lambda *a: _frn(*a, centre=True),
    "missing_tlu": lambda *a: _frn(*a, tlu="none"),
    "relu_not_tlu": lambda *a: _frn(*a, tlu="relu"),
    "tlu_before_affine": lambda *a: _frn(*a, tlu="before"),
    "min_not_max": lambda *a: _frn(*a, tlu="min"),
    "layer_axes": lambda *a: _frn(*a, dims=(1, 2, 3)),
    "batch_axes": lambda *a: _frn(*a, dims=(0, 2, 3)),
    "last_dim_only": lambda *a: _frn(*a, dims=(3,)),
    "missing_sqrt": lambda *a: _frn(*a, sqrt=False),
    "eps_outside_sqrt": lambda *a: _frn(*a, eps_out=True),
    "affine_missing": lambda *a: _frn(*a, affine=False),
}, _FRN_TEXTS)


def _frn_cases() -> list[Case]:
    g = generator(1911)
    scale = torch.tensor([0.5, 1.0, 2.0, 4.0, 1.5], dtype=torch.float64).view(1, 5, 1, 1)
    shift = torch.tensor([1.0, -1.0, 0.0, 2.0, 0.5], dtype=torch.float64).view(1, 5, 1, 1)

    def x_of(n, s=1.0, dtype=torch.float64):
        return ((randn(n, 5, 3, 4, g=g, dtype=torch.float64) * scale + shift) * s).to(dtype)

    def params(dtype=torch.float64):
        gamma = torch.rand(5, generator=g, dtype=torch.float64) + 0.5
        beta = torch.randn(5, generator=g, dtype=torch.float64) * 0.5
        tau = torch.randn(5, generator=g, dtype=torch.float64) * 0.5
        return gamma.to(dtype), beta.to(dtype), tau.to(dtype)

    cases = [Case("x (3, 5, 3, 4) float64", (x_of(3), *params(), 1e-6), rtol=1e-6, atol=1e-6),
             Case("x (2, 5, 3, 4), negative thresholds", (x_of(2), *(p for p in params()[:2]),
                  -torch.linspace(0.2, 1.0, 5, dtype=torch.float64), 1e-6), rtol=1e-6, atol=1e-6),
             Case("small activations (scale 1e-3), eps 1e-6", (x_of(2, 1e-3), *params(), 1e-6),
                  rtol=1e-6, atol=1e-6),
             Case("float32, x (2, 5, 3, 4)", (x_of(2, dtype=torch.float32),
                                             *params(torch.float32), 1e-6))]
    return cases


def check_frn(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(x, gamma, beta, tau, eps)`` against Filter Response Normalisation with its
    TLU: $\nu^2 = \mathrm{mean}_{H,W}(x^2)$, $z = \max(\gamma x/\sqrt{\nu^2+\epsilon} + \beta, \tau)$,
    per sample and channel. Cases: float64 and float32, negative thresholds, small activations."""
    return run_cases("frn", fn, _frn_cases(), _frn_reference, _FRN_MISTAKES,
                     against=("FRN + TLU (float64)", "FRN + TLU（float64）"))
