r"""The checker of eval-mode BatchNorm: ``fn(x, running_mean, running_var, weight, bias, eps)``
against ``F.batch_norm(..., training=False)``, naming the mistakes of inference mode (batch
statistics used, the square root forgotten, the stored variance "debiased", buffers not
reshaped). Lesson 12 (drill ``batch_norm_eval``)."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import centred_moments
from .engine import Case, CheckResult, affine_params, generator, mistakes, randn, run_cases

__all__ = ["check_batch_norm_eval"]


def _ch(p: Tensor, x: Tensor) -> Tensor:
    return p.double().reshape([1, x.shape[1]] + [1] * (x.dim() - 2))


def _eval_variant(*, batch_stats=False, no_sqrt=False, eps_outside=False, debias=False,
                  last_dim=False, affine=True):
    """An eval-mode BatchNorm with one mistake switched on, computed in float64."""
    def fn(x, rm, rv, w, b, eps):
        xd = x.double()
        if last_dim:  # (C,) buffers broadcast against the last dim instead of dim 1
            mean, var = rm.double(), rv.double()
        elif batch_stats:
            dims = [0] + list(range(2, x.dim()))
            mean, _, var = centred_moments(xd, dims)
        else:
            mean, var = _ch(rm, x), _ch(rv, x)
        if debias:  # "the stored variance is unbiased, so convert it back": m is the eval batch's
            m = x.numel() // x.shape[1]
            var = var * (m - 1) / m
        if no_sqrt:
            y = (xd - mean) / (var + eps)
        elif eps_outside:
            y = (xd - mean) / (var.sqrt() + eps)
        else:
            y = (xd - mean) / (var + eps).sqrt()
        if affine:
            y = y * (w.double() if last_dim else _ch(w, x)) + (b.double() if last_dim else _ch(b, x))
        return y.to(x.dtype)
    return fn


def check_batch_norm_eval(fn: Callable[..., Tensor], *, title: str = "batch_norm_eval") -> CheckResult:
    r"""Check ``fn(x, running_mean, running_var, weight, bias, eps)``: BatchNorm in eval mode.

    Expected (PyTorch's ``F.batch_norm(..., training=False)``):
    ``y = (x - running_mean) / sqrt(running_var + eps) * weight + bias``, per channel (dim 1),
    with the stored statistics used as they are (``running_var`` is already the unbiased
    estimate; nothing of the current batch enters), float32 math for float16 input. Cases:
    running statistics far from the batch's (batch statistics used by mistake), a batch of
    one sample (which must work in eval mode), (N, C, L) with L = C (buffers not reshaped),
    (N, C, H, W), a tiny running variance (eps placement, a missing square root), float16.
    Mistake keys: ``batch_statistics_in_eval``, ``variance_without_sqrt``, ``eps_outside_sqrt``,
    ``debiased_running_var``, ``buffers_not_reshaped`` (the buffers not reshaped to
    (1, C, 1, ...)), ``eps_missing``, ``affine_missing``, ``wrong_dtype``.

    Lesson 12.
    """
    g = generator(4)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4, var_scale=1.0):
        c = x.shape[1]
        rm = randn(c, g=g, scale=2.0)
        rv = (torch.rand(c, generator=g, dtype=torch.float64) * 3 + 0.5) * var_scale
        w, b = affine_params(c, g)
        cases.append(Case(name, (x, rm.float(), rv.float(), w, b, 1e-5), rtol, atol, hint))

    add("(N, C) = (16, 3), buffers far from the batch", randn(16, 3, g=g, offset=3.0))
    add("(N, C) = (1, 4), one sample", randn(1, 4, g=g))
    add("(N, C) = (2, 4)", randn(2, 4, g=g, scale=2.0))
    add("(N, C, L) = (4, 3, 3), L = C", randn(4, 3, 3, g=g))
    add("(N, C, H, W) = (2, 3, 4, 5)", randn(2, 3, 4, 5, g=g, offset=-1.0))
    add("tiny running_var ~ 1e-6", randn(8, 4, g=g, scale=1e-3), var_scale=1e-6,
        rtol=1e-3, atol=1e-3)
    add("float16 input, float32 buffers", randn(8, 2, 16, g=g, offset=1.0, dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2)

    def ref(x, rm, rv, w, b, eps):
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=False, eps=eps)

    texts = {
        "batch_statistics_in_eval": (
            "the batch's own mean and variance are used. In eval mode BatchNorm normalises with "
            "running_mean and running_var, so a sample's output does not depend on its batch "
            "(and a batch of one works).",
            "使用了当前批自己的均值和方差。评估（eval）模式下 BatchNorm 用 running_mean 和 running_var "
            "归一化，样本的输出与它所在的批无关（只有一个样本的批也能工作）。"),
        "variance_without_sqrt": (
            "divided by (running_var + eps) without the square root: running_var is a variance, "
            "divide by sqrt(running_var + eps).",
            "除以了 (running_var + eps) 而没有开平方：running_var 是方差，应除以 sqrt(running_var + eps)。"),
        "eps_outside_sqrt": (
            "eps outside the square root: (sqrt(running_var) + eps). PyTorch divides by "
            "sqrt(running_var + eps); they differ when the variance is small.",
            "eps 放在了平方根外面：(sqrt(running_var) + eps)。PyTorch 除以 sqrt(running_var + eps)，"
            "方差很小时两者不同。"),
        "debiased_running_var": (
            "running_var rescaled by (m-1)/m. It is used as stored (the unbiased estimate); "
            "eval mode takes nothing from the current batch, not even its size.",
            "把 running_var 乘了 (m-1)/m。它应按存储的值直接使用（无偏估计）；eval 模式不从当前 batch "
            "取任何东西，连 batch 的大小也不用。"),
        "buffers_not_reshaped": (
            "the (C,) buffers broadcast against the last dim (or fail to broadcast). Reshape them to (1, C, 1, ...) so "
            "that they line up with the channel dim 1.",
            "形状为 (C,) 的缓冲区沿最后一维广播了（或无法广播）。应 reshape 成 (1, C, 1, ...)，与通道维 1 对齐。"),
    }
    variants = {
        "batch_statistics_in_eval": _eval_variant(batch_stats=True),
        "variance_without_sqrt": _eval_variant(no_sqrt=True),
        "eps_outside_sqrt": _eval_variant(eps_outside=True),
        "debiased_running_var": _eval_variant(debias=True),
        "buffers_not_reshaped": _eval_variant(last_dim=True),
        "eps_missing": lambda x, rm, rv, w, b, eps: _eval_variant()(x, rm, rv, w, b, 0.0),
        "affine_missing": _eval_variant(affine=False),
    }
    return run_cases(title, fn, cases, ref, mistakes(variants, extra=texts),
                     names=("x", "running_mean", "running_var", "weight", "bias", "eps"))
