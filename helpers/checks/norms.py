r"""The checkers of the normalisation exercises: LayerNorm (lessons 00, 02), BatchNorm in
training mode (lesson 01), GroupNorm (lesson 03), RMSNorm (lesson 04), and the drills of
lesson 12.

Each compares the learner's output with ``torch.nn.functional`` on every case; when an output
is wrong it is compared with a catalogue of buggy versions (unbiased variance, eps outside
the square root, wrong reduction axes, missing ``keepdim``, ...) and the one it follows is
named (:func:`helpers.checks.engine.run_cases`). The float16 case is advisory unless
``require_half=True``: a formula that is right but computed in float16 passes, with a note.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import centred_moments
from .engine import (HALF_OFFSET, Case, CheckResult, affine_params, generator, mistakes, randn,
                     run_cases)

__all__ = ["check_layer_norm", "check_batch_norm", "check_rms_norm", "check_group_norm"]

# --------------------------------------------------------------------------------------
# building blocks for the buggy versions
# --------------------------------------------------------------------------------------
def _stats(x: Tensor, dims, unbiased: bool = False):
    """Mean and variance over ``dims`` (kept), biased unless ``unbiased`` (the n - 1 slip)."""
    mean, _, var = centred_moments(x, dims)
    if unbiased:
        n = math.prod(x.shape[d] for d in dims)
        var = var * (n / (n - 1))
    return mean, var


def _mv_norm(x, dims, eps, *, unbiased=False, eps_outside=False, one_pass=False,
             center=True, keepdim=True, in_dtype=False):
    """A mean/variance norm with switches for each mistake; float64 unless ``in_dtype``."""
    x = x if in_dtype else x.double()
    if one_pass:
        mean = x.mean(dims, keepdim=True)
        var = (x * x).mean(dims, keepdim=True) - mean * mean
    else:
        mean, var = _stats(x, dims, unbiased)
    if not keepdim:  # keepdim forgotten: the statistics broadcast against the last dims
        mean, var = mean.squeeze(tuple(dims) if isinstance(dims, (list, tuple)) else dims), \
            var.squeeze(tuple(dims) if isinstance(dims, (list, tuple)) else dims)
    xc = x - mean if center else x
    return xc / (var.sqrt() + eps) if eps_outside else xc / (var + eps).sqrt()


def _cast_like(y: Tensor | None, x: Tensor) -> Tensor | None:
    return None if y is None else y.to(x.dtype)


def _last(x: Tensor) -> list[int]:
    return [x.dim() - 1]


def _affine_last(y, w, b):
    y = y * w.double() if w is not None else y
    return y + b.double() if b is not None else y


def _ch(p: Tensor, x: Tensor) -> Tensor:
    """A per-channel vector shaped to broadcast against (N, C, *) input."""
    return p.reshape([1, x.shape[1]] + [1] * (x.dim() - 2))


def _affine_ch(y, x, w, b):
    y = y * _ch(w, x).double() if w is not None else y
    return y + _ch(b, x).double() if b is not None else y


def _precision_and_affine_slips(dims_fn: Callable, per_feature: Callable) -> dict[str, Callable]:
    """The one-pass variance (float32 input), float16 computed in float16, and the affine step
    forgotten, for a mean/variance norm of ``fn(x, weight, bias, eps)`` over ``dims_fn(x)``
    whose parameters broadcast as ``per_feature(p, x)``."""
    def affine(y, x, w, b):
        return y * per_feature(w, x) + per_feature(b, x)

    return {
        "one_pass_variance": lambda x, w, b, eps: _only_if(x.dtype == torch.float32, lambda: affine(
            _mv_norm(x, dims_fn(x), eps, one_pass=True, in_dtype=True).double(), x,
            w.double(), b.double()).float()),
        "half_not_float32": lambda x, w, b, eps: _only_if(x.dtype == torch.float16, lambda: affine(
            _mv_norm(x, dims_fn(x), eps, in_dtype=True), x, w, b)),
        "affine_missing": lambda x, w, b, eps: _cast_like(_mv_norm(x, dims_fn(x), eps), x),
        "eps_missing": lambda x, w, b, eps: _cast_like(affine(
            _mv_norm(x, dims_fn(x), 0.0), x, w.double(), b.double()), x),
        "not_normalised": lambda x, w, b, eps: _cast_like(
            affine(x.double(), x, w.double(), b.double()), x),
        "affine_order": lambda x, w, b, eps: _cast_like(
            (_mv_norm(x, dims_fn(x), eps) + per_feature(b.double(), x)) * per_feature(w.double(), x), x),
    }


NOT_NORMALISED = (
    "the input is not normalised at all: only the affine step x * weight + bias. Subtract the "
    "mean and divide by sqrt(var + eps) first.",
    "输入根本没有归一化：只做了仿射变换 x * weight + bias。应先减去均值、再除以 sqrt(var + eps)。")
AFFINE_ORDER = (
    "bias added before the weight multiplies: (x_hat + bias) * weight. The affine step is "
    "x_hat * weight + bias.",
    "先加 bias 再乘 weight：(x_hat + bias) * weight。仿射变换应为 x_hat * weight + bias。")


def _only_if(cond: bool, thunk: Callable[[], Tensor]) -> Tensor | None:
    try:
        return thunk() if cond else None
    except RuntimeError:  # the buggy computation does not broadcast on this shape
        return None


# --------------------------------------------------------------------------------------
# LayerNorm
# --------------------------------------------------------------------------------------
def check_layer_norm(fn: Callable[[Tensor, Tensor, Tensor, float], Tensor], *, title: str = "layer_norm",
                     require_half: bool = False) -> CheckResult:
    r"""Check ``fn(x, weight, bias, eps)``: LayerNorm over the last dim of ``x``.

    Expected: ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance over
    the last dim, computed in float32 for float16 input and returned in the input dtype.
    Cases: (N, d) and (B, T, d) inputs, d = 4 (the unbiased variance is off by
    sqrt(4/3)), a square (6, 6) input where a missing ``keepdim`` still broadcasts, tiny
    inputs (eps placement), a large offset (one-pass variance), float16 input.

    Lessons 00, 02, 12.
    """
    g = generator(0)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4, advisory=False):
        w, b = affine_params(x.shape[-1], g, x.dtype)
        cases.append(Case(name, (x, w, b, 1e-5), rtol, atol, hint, advisory))

    add("(N, d) = (4, 8)", randn(4, 8, g=g))
    add("(B, T, d) = (2, 3, 4), small d", randn(2, 3, 4, g=g, offset=1.0))
    add("square (6, 6)", randn(6, 6, g=g, offset=0.5))
    add("tiny scale, x ~ 1e-3", randn(3, 16, g=g, scale=1e-3), atol=1e-3)
    add("large offset, x = 1e4 + N(0, 1)", randn(4, 64, g=g, offset=1e4), hint="one_pass_variance",
        atol=1e-2, rtol=1e-2)
    add("(N, C, H, W) = (2, 3, 4, 5), last dim only", randn(2, 3, 4, 5, g=g))
    add("float16, x = 300 + N(0, 1)", randn(4, 256, g=g, offset=HALF_OFFSET, dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2, advisory=not require_half)

    def ref(x, w, b, eps):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps)

    def variant(**kw):
        return lambda x, w, b, eps: _cast_like(_affine_last(_mv_norm(x, _last(x), eps, **kw), w, b), x)

    catalogue = mistakes({
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "mean_not_subtracted": lambda x, w, b, eps: _cast_like(_affine_last(
            x.double() / (x.double().square().mean(-1, keepdim=True) + eps).sqrt(), w, b), x),
        "wrong_axes_time": lambda x, w, b, eps: _only_if(x.dim() >= 3, lambda: _cast_like(
            _affine_last(_mv_norm(x, [-2, -1], eps), w, b), x)),
        "wrong_axes_batch": lambda x, w, b, eps: _cast_like(
            _affine_last(_mv_norm(x, [0], eps), w, b), x),
        "missing_keepdim": lambda x, w, b, eps: _only_if(x.dim() == 2 and x.shape[0] == x.shape[1],
            lambda: _cast_like(_affine_last(_mv_norm(x, _last(x), eps, keepdim=False), w, b), x)),
        **_precision_and_affine_slips(_last, lambda p, x: p),
    }, extra={
        "affine_order": AFFINE_ORDER,
        "not_normalised": NOT_NORMALISED,
        "mean_not_subtracted": (
            "the mean is not subtracted (that is RMSNorm, not LayerNorm): LayerNorm centres "
            "each row first, x - x.mean(-1, keepdim=True).",
            "没有减去均值（那是 RMSNorm，不是 LayerNorm）：LayerNorm 要先中心化每一行，"
            "x - x.mean(-1, keepdim=True)。"),
        "wrong_axes_time": (
            "statistics over the last two dims (time and features) of a (B, T, d) input: that "
            "mixes time steps, like LayerNorm([T, d]). A token is normalised over its own d "
            "features: reduce over dim=-1 only.",
            "在 (B, T, d) 输入的最后两维（时间和特征）上求统计量，把不同时间步混在了一起，"
            "相当于 LayerNorm([T, d])。每个 token 只应在自己的 d 个特征上归一化：只在 dim=-1 上归约。"),
        "wrong_axes_batch": (
            "statistics over the batch dim (that is BatchNorm's axis). LayerNorm reduces over "
            "the features of each sample: dim=-1.",
            "在 batch 维上求统计量（那是 BatchNorm 的轴）。LayerNorm 在每个样本自己的特征上归约：dim=-1。"),
    })
    return run_cases(title, fn, cases, ref, catalogue, names=("x", "weight", "bias", "eps"))


# --------------------------------------------------------------------------------------
# BatchNorm (training mode)
# --------------------------------------------------------------------------------------
def _bn_dims(x: Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


def check_batch_norm(fn: Callable[[Tensor, Tensor, Tensor, float], Tensor], *, title: str = "batch_norm",
                     require_half: bool = False) -> CheckResult:
    r"""Check ``fn(x, weight, bias, eps)``: training-mode BatchNorm of (N, C) or (N, C, L, ...)
    input, returning the output.

    Expected: per-channel statistics over every dim but 1 (batch and spatial), biased
    variance, ``sqrt(var + eps)``, per-channel ``weight``/``bias``; float32 math for
    float16 input. Cases: (N, C), (N, C, L) with L = C (a missing ``keepdim`` broadcasts),
    (N, C, H, W), N = 2 (the unbiased variance is off by sqrt(2) in (N, C)), tiny inputs,
    a large offset, float16.

    Lessons 01, 12.
    """
    g = generator(1)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4, advisory=False):
        w, b = affine_params(x.shape[1], g, x.dtype)
        cases.append(Case(name, (x, w, b, 1e-5), rtol, atol, hint, advisory))

    add("(N, C) = (16, 3)", randn(16, 3, g=g, offset=1.0))
    add("(N, C) = (2, 4), tiny batch", randn(2, 4, g=g))
    add("(N, C, L) = (4, 3, 3), L = C", randn(4, 3, 3, g=g, offset=0.5))
    add("(N, C, L) = (2, 3, 5)", randn(2, 3, 5, g=g))
    add("(N, C, H, W) = (2, 3, 4, 5)", randn(2, 3, 4, 5, g=g, offset=-1.0))
    add("tiny scale, x ~ 1e-3", randn(8, 4, 6, g=g, scale=1e-3), atol=1e-3)
    add("large offset, x = 1e4 + N(0, 1)", randn(64, 2, 8, g=g, offset=1e4),
        hint="one_pass_variance", rtol=1e-2, atol=1e-2)
    # float16 activations with float32 weight and bias, as in mixed-precision training.
    # (With float16 parameters too, torch's own CPU kernel rounds the batch mean to float16.)
    x16 = randn(64, 2, 16, g=g, offset=HALF_OFFSET, dtype=torch.float16)
    cases.append(Case("float16 input, float32 weight/bias, x = 300 + N(0, 1)",
                      (x16, *affine_params(2, g), 1e-5), 1e-2, 2e-2, "half_not_float32",
                      advisory=not require_half))

    def ref(x, w, b, eps):
        return F.batch_norm(x, None, None, w, b, training=True, eps=eps)

    def variant(dims_fn=_bn_dims, **kw):
        return lambda x, w, b, eps: _cast_like(_affine_ch(_mv_norm(x, dims_fn(x), eps, **kw),
                                                          x, w, b), x)

    catalogue = mistakes({
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "forgot_spatial_dims": lambda x, w, b, eps: _only_if(x.dim() > 2,
            lambda: variant(lambda t: [0])(x, w, b, eps)),
        "per_sample_statistics": variant(lambda t: list(range(1, t.dim()))),
        "missing_keepdim": lambda x, w, b, eps: _only_if(x.dim() > 2, lambda: _cast_like(
            _affine_ch(_mv_norm(x, _bn_dims(x), eps, keepdim=False), x, w, b), x)),
        "params_not_reshaped": lambda x, w, b, eps: _only_if(x.dim() > 2, lambda: _cast_like(
            _affine_last(_mv_norm(x, _bn_dims(x), eps), w, b), x)),
        **_precision_and_affine_slips(_bn_dims, _ch),
    }, extra={
        "affine_order": AFFINE_ORDER,
        "not_normalised": NOT_NORMALISED,
        "forgot_spatial_dims": (
            "statistics over the batch dim only: for (N, C, L, ...) input BatchNorm reduces "
            "over N and every spatial dim, i.e. dim=(0, 2, 3, ...), one mean per channel.",
            "只在 batch 维上求统计量：对 (N, C, L, ...) 输入，BatchNorm 要在 N 和所有空间维上归约，"
            "即 dim=(0, 2, 3, ...)，每个通道一个均值。"),
        "per_sample_statistics": (
            "statistics per sample (over channels and positions): that is LayerNorm. "
            "BatchNorm shares statistics across the batch, per channel: dim=(0, 2, ...).",
            "按样本求统计量（在通道和位置上归约）：那是 LayerNorm。BatchNorm 是每个通道在整个 batch 上"
            "共享统计量：dim=(0, 2, ...)。"),
    })
    return run_cases(title, fn, cases, ref, catalogue, names=("x", "weight", "bias", "eps"))


# --------------------------------------------------------------------------------------
# RMSNorm
# --------------------------------------------------------------------------------------
def check_rms_norm(fn: Callable[[Tensor, Tensor, float], Tensor], *, title: str = "rms_norm",
                   require_half: bool = False) -> CheckResult:
    r"""Check ``fn(x, weight, eps)``: RMSNorm over the last dim of ``x``.

    Expected: ``x / sqrt(mean(x**2) + eps) * weight`` (eps inside the square root, no mean
    subtracted, no bias), float32 math for float16 input. Cases include inputs with a
    non-zero mean (subtracting it is a mistake), tiny inputs (eps placement), (B, T, d),
    a square input (missing ``keepdim``) and float16 values whose squares overflow float16.

    Lessons 04, 12.
    """
    g = generator(2)
    cases = []

    def add(name, x, eps=1e-6, hint=None, rtol=1e-4, atol=1e-4, advisory=False):
        w, _ = affine_params(x.shape[-1], g, x.dtype)
        cases.append(Case(name, (x, w, eps), rtol, atol, hint, advisory))

    add("(N, d) = (4, 8), mean 2", randn(4, 8, g=g, offset=2.0))
    add("(B, T, d) = (2, 3, 4)", randn(2, 3, 4, g=g, offset=1.0))
    add("square (6, 6)", randn(6, 6, g=g, offset=0.5))
    add("tiny scale, x ~ 1e-3, eps = 1e-5", randn(3, 16, g=g, scale=1e-3), eps=1e-5, atol=1e-3)
    add("float16, x = 300 + N(0, 1)", randn(4, 64, g=g, offset=HALF_OFFSET, dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2, advisory=not require_half)

    def ref(x, w, eps):
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    def rms(x, dims, eps, *, outside=False, keepdim=True, in_dtype=False):
        x = x if in_dtype else x.double()
        ms = x.square().mean(dims, keepdim=True)
        if not keepdim:
            ms = ms.squeeze(dims[0])
        return x / (ms.sqrt() + eps) if outside else x / (ms + eps).sqrt()

    def lastw(y, x, w):
        return _cast_like(y * w.double(), x)

    catalogue = mistakes({
        "mean_subtracted": lambda x, w, eps: lastw(_mv_norm(x, _last(x), eps), x, w),
        "eps_outside_sqrt": lambda x, w, eps: lastw(rms(x, _last(x), eps, outside=True), x, w),
        "wrong_axes_time": lambda x, w, eps: _only_if(x.dim() >= 3, lambda: lastw(
            rms(x, [-2, -1], eps), x, w)),
        "missing_keepdim": lambda x, w, eps: _only_if(x.dim() == 2 and x.shape[0] == x.shape[1],
            lambda: lastw(rms(x, _last(x), eps, keepdim=False), x, w)),
        "no_gain": lambda x, w, eps: _cast_like(rms(x, _last(x), eps), x),
        "eps_missing": lambda x, w, eps: lastw(rms(x, _last(x), 0.0), x, w),
        "std_not_rms": lambda x, w, eps: lastw(
            x.double() / (x.double().var(-1, unbiased=False, keepdim=True) + eps).sqrt(), x, w),
        "l2_normalised": lambda x, w, eps: lastw(
            x.double() / x.double().norm(dim=-1, keepdim=True).clamp_min(1e-12), x, w),
        "one_plus_gain": lambda x, w, eps: _cast_like(rms(x, _last(x), eps) * (1 + w.double()), x),
        "half_not_float32": lambda x, w, eps: _only_if(x.dtype == torch.float16, lambda:
            rms(x, _last(x), eps, in_dtype=True) * w),
    }, extra={
        "mean_subtracted": (
            "the mean is subtracted (that is LayerNorm). RMSNorm divides x itself by "
            "sqrt(mean(x**2) + eps): no centring.",
            "减去了均值（那是 LayerNorm）。RMSNorm 直接用 x 除以 sqrt(mean(x**2) + eps)，不做中心化。"),
        "wrong_axes_time": (
            "statistics over the last two dims of a (B, T, d) input, mixing time steps; reduce "
            "over dim=-1 only.",
            "在 (B, T, d) 输入的最后两维上求统计量，混合了不同时间步；只应在 dim=-1 上归约。"),
        "l2_normalised": (
            "x divided by its L2 norm (F.normalize): that gives each row norm 1, RMSNorm gives "
            "it norm sqrt(d). RMSNorm divides by the root mean square, sqrt(mean(x**2) + eps), "
            "not by sqrt(sum(x**2)).",
            "用 x 的 L2 范数去除（F.normalize）：这样每行的范数为 1，而 RMSNorm 让范数为 sqrt(d)。"
            "RMSNorm 除以均方根 sqrt(mean(x**2) + eps)，而不是 sqrt(sum(x**2))。"),
        "std_not_rms": (
            "x divided by its standard deviation, sqrt(var + eps): RMSNorm divides by the root "
            "mean square sqrt(mean(x**2) + eps), which does not subtract the mean.",
            "x 除以了它的标准差 sqrt(var + eps)：RMSNorm 除以均方根 sqrt(mean(x**2) + eps)，不减去均值。"),
        "one_plus_gain": (
            "the gain applied as (1 + weight), Gemma's convention (its stored weight starts at 0). "
            "The exercise's weight is the gain itself, as in LLaMA and torch.nn.RMSNorm: x / rms * weight.",
            "增益写成了 (1 + weight)，这是 Gemma 的约定（它存储的 weight 初始为 0）。"
            "本题的 weight 就是增益本身，与 LLaMA 和 torch.nn.RMSNorm 相同：x / rms * weight。"),
        "no_gain": (
            "the learnable gain (weight) is not applied. RMSNorm has a learnable per-feature "
            "gain g (and no bias): y = x / rms * weight.",
            "没有乘可学习的增益 weight。RMSNorm 有逐特征的可学习增益 g（没有偏置）：y = x / rms * weight。"),
        "half_not_float32": (
            "the float16 input was computed in float16: x**2 overflows float16 (max 65504) for "
            "|x| > 256. Compute in float32 (x.float()) and cast back with .to(x.dtype). Lesson 07, "
            "section 6 (\"Half precision: why kernels accumulate in float32\").",
            "float16 输入直接用 float16 计算了：|x| > 256 时 x**2 超出 float16 的范围（最大 65504）。"
            "应转为 float32 计算（x.float()），再用 .to(x.dtype) 转回。见第 07 课第 6 节"
            "（“半精度：为什么内核用 float32 累加”）。"),
    })
    return run_cases(title, fn, cases, ref, catalogue, names=("x", "weight", "eps"))


# --------------------------------------------------------------------------------------
# GroupNorm
# --------------------------------------------------------------------------------------
def check_group_norm(fn: Callable[[Tensor, int, Tensor, Tensor, float], Tensor], *, title: str = "group_norm",
                     require_half: bool = False) -> CheckResult:
    r"""Check ``fn(x, num_groups, weight, bias, eps)``: GroupNorm of (N, C, \*) input.

    Expected: the C channels split into ``num_groups`` contiguous groups of C/G channels,
    statistics per sample and group over the group's channels and all spatial positions,
    biased variance, per-channel ``weight``/``bias``. Cases separate G groups from
    "G channels per group", contiguous from interleaved grouping, and include G = 1
    (LayerNorm-like), G = C (InstanceNorm-like), 3-D, 4-D and float16 input.

    Lessons 03, 12.
    """
    g = generator(3)
    cases = []

    def add(name, x, groups, hint=None, rtol=1e-4, atol=1e-4, advisory=False):
        w, b = affine_params(x.shape[1], g, x.dtype)
        cases.append(Case(name, (x, groups, w, b, 1e-5), rtol, atol, hint, advisory))

    add("(N, C, H, W) = (2, 8, 3, 3), G = 2", randn(2, 8, 3, 3, g=g, offset=0.5), 2)
    add("(N, C, L) = (2, 6, 5), G = 3", randn(2, 6, 5, g=g), 3)
    add("G = 1 (like LayerNorm)", randn(2, 4, 3, 3, g=g, offset=1.0), 1)
    add("G = C (like InstanceNorm)", randn(2, 4, 3, 3, g=g, offset=-1.0), 4)
    add("(N, C, H, W) = (1, 4, 2, 2), G = 2, few values", randn(1, 4, 2, 2, g=g), 2)
    add("(N, C, L) = (2, 4, 4), G = 2, L = C", randn(2, 4, 4, g=g, offset=0.5), 2)
    add("tiny scale, x ~ 1e-3", randn(2, 4, 4, 4, g=g, scale=1e-3), 2, atol=1e-3)
    add("float16, x = 300 + N(0, 1)", randn(2, 4, 8, 8, g=g, offset=HALF_OFFSET, dtype=torch.float16),
        2, hint="half_not_float32", rtol=1e-2, atol=2e-2, advisory=not require_half)

    def ref(x, groups, w, b, eps):
        return F.group_norm(x, groups, w, b, eps)

    def grouped(x, groups, eps, *, interleave=False, spatial=True, **kw):
        n, c = x.shape[:2]
        if interleave:  # channel c goes to group c % G
            xs = x.double().reshape(n, c // groups, groups, -1).transpose(1, 2)
            y = _mv_norm(xs, [2, 3], eps, **kw).transpose(1, 2)
            return y.reshape(x.shape)
        if not spatial:  # statistics over the group's channels at each position separately
            xs = x.double().reshape(n, groups, c // groups, -1)
            return _mv_norm(xs, [2], eps, **kw).reshape(x.shape)
        xs = x.double().reshape(n, groups, -1)
        return _mv_norm(xs, [2], eps, **kw).reshape(x.shape)

    def variant(**kw):
        return lambda x, G, w, b, eps: _cast_like(_affine_ch(grouped(x, G, eps, **kw), x, w, b), x)

    catalogue = mistakes({
        "groups_are_channels_per_group": lambda x, G, w, b, eps: _only_if(
            x.shape[1] // G != G, lambda: variant()(x, x.shape[1] // G, w, b, eps)),
        "interleaved_groups": variant(interleave=True),
        "forgot_spatial_dims": variant(spatial=False),
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "half_not_float32": lambda x, G, w, b, eps: _only_if(x.dtype == torch.float16, lambda:
            _mv_norm(x.reshape(x.shape[0], G, -1), [2], eps, in_dtype=True).reshape(x.shape)
            * _ch(w, x) + _ch(b, x)),
        "affine_missing": lambda x, G, w, b, eps: _cast_like(grouped(x, G, eps), x),
        "eps_missing": lambda x, G, w, b, eps: variant()(x, G, w, b, 0.0),
        "per_channel_statistics": lambda x, G, w, b, eps: _only_if(G != x.shape[1], lambda:
            variant()(x, x.shape[1], w, b, eps)),
        "params_not_reshaped": lambda x, G, w, b, eps: _cast_like(
            _affine_last(grouped(x, G, eps), w, b), x),
    }, extra={
        "per_channel_statistics": (
            "statistics per channel (that is InstanceNorm, GroupNorm with G = C): GroupNorm pools "
            "the C/G channels of a group, reshape to (N, G, -1).",
            "按通道求统计量（那是 InstanceNorm，即 G = C 的 GroupNorm）：GroupNorm 要把一组内的 C/G 个通道合在一起，"
            "reshape 成 (N, G, -1)。"),
        "groups_are_channels_per_group": (
            "num_groups used as the number of channels per group. GroupNorm(G, C) makes G "
            "groups of C/G channels: reshape to (N, G, C // G, ...), not (N, C // G, G, ...). "
            "(The paper's default is 32 groups, not 32 channels per group.)",
            "把 num_groups 当成了每组的通道数。GroupNorm(G, C) 是分成 G 组、每组 C/G 个通道："
            "应 reshape 成 (N, G, C // G, ...)，而不是 (N, C // G, G, ...)。"
            "（论文默认的是 32 个组，而不是每组 32 个通道。）"),
        "interleaved_groups": (
            "channels assigned to groups round-robin (channel c in group c % G). The groups are "
            "contiguous blocks: channels 0..C/G-1 form group 0. Reshape (N, C, ...) to "
            "(N, G, C // G, ...) directly, without a transpose.",
            "通道被轮流分配到各组（通道 c 属于第 c % G 组）。组是连续的通道块：0..C/G-1 号通道是第 0 组。"
            "应直接把 (N, C, ...) reshape 成 (N, G, C // G, ...)，不要转置。"),
        "forgot_spatial_dims": (
            "statistics over the group's channels at each spatial position separately. A group's "
            "statistics cover its C/G channels and all spatial positions: reshape to (N, G, -1).",
            "在每个空间位置上分别对组内通道求统计量。一个组的统计量应覆盖它的 C/G 个通道和所有空间位置："
            "reshape 成 (N, G, -1)。"),
    })
    return run_cases(title, fn, cases, ref, catalogue, names=("x", "num_groups", "weight", "bias", "eps"))
