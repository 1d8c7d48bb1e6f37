r"""Five-minute drills: write a normalisation forward pass from a blank function, grade it.

Five drills, each graded by a checker that names the mistake it recognises:

============================  ==============================================  ======================
drill                         signature                                       graded by
============================  ==============================================  ======================
``"batch_norm_train"``        ``fn(x, weight, bias, eps)``                    ``checks.check_batch_norm``
``"batch_norm_eval"``         ``fn(x, running_mean, running_var, weight,      ``check_batch_norm_eval``
                              bias, eps)``                                    (this module)
``"layer_norm"``              ``fn(x, weight, bias, eps)``                    ``checks.check_layer_norm``
``"rms_norm"``                ``fn(x, weight, eps)``                          ``checks.check_rms_norm``
``"group_norm"``              ``fn(x, num_groups, weight, bias, eps)``        ``checks.check_group_norm``
============================  ==============================================  ======================

Usage::

    from helpers import drills

    def my_layer_norm(x, weight, bias, eps):
        ...

    drills.grade("layer_norm", my_layer_norm)     # ✔ ... or ✘ with the diagnosis
    drills.solution("layer_norm")                 # prints the model solution (a spoiler)
    drills.grade("layer_norm", drills.model_solution("layer_norm"))   # grades it, prints nothing of it

The model solutions live here, not in the notebook, so that a drill cell does not show them.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from . import checks
from .checks import Case, CheckResult, Mistake

__all__ = ["DRILLS", "grade", "model_solution", "solution", "check_batch_norm_eval"]


# --------------------------------------------------------------------------------------
# model solutions (spoilers: print them with solution(name))
# --------------------------------------------------------------------------------------
def _upcast(x: Tensor) -> Tensor:
    """float16/bfloat16 are computed in float32, as PyTorch's kernels do."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def batch_norm_train(x, weight, bias, eps):
    """BatchNorm in training mode: per channel (dim 1), over every other dim."""
    xf = _upcast(x)
    dims = [0] + list(range(2, x.dim()))               # batch and spatial dims
    shape = [1, -1] + [1] * (x.dim() - 2)              # (C,) -> (1, C, 1, ...)
    mean = xf.mean(dims, keepdim=True)
    var = (xf - mean).square().mean(dims, keepdim=True)   # biased: divide by m
    x_hat = (xf - mean) / torch.sqrt(var + eps)            # eps inside the root
    return (x_hat * weight.view(shape) + bias.view(shape)).to(x.dtype)


def batch_norm_eval(x, running_mean, running_var, weight, bias, eps):
    """BatchNorm in eval mode: the stored statistics, used as they are."""
    xf = _upcast(x)
    shape = [1, -1] + [1] * (x.dim() - 2)
    x_hat = (xf - running_mean.view(shape)) / torch.sqrt(running_var.view(shape) + eps)
    return (x_hat * weight.view(shape) + bias.view(shape)).to(x.dtype)


def layer_norm(x, weight, bias, eps):
    """LayerNorm over the last dim: one mean and one variance per token."""
    xf = _upcast(x)
    mean = xf.mean(-1, keepdim=True)
    var = (xf - mean).square().mean(-1, keepdim=True)     # biased
    return ((xf - mean) / torch.sqrt(var + eps) * weight + bias).to(x.dtype)


def rms_norm(x, weight, eps):
    """RMSNorm over the last dim: no mean, a gain, no bias."""
    xf = _upcast(x)
    return (xf / torch.sqrt(xf.square().mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def group_norm(x, num_groups, weight, bias, eps):
    """GroupNorm: per sample, over each block of C/G contiguous channels and all positions."""
    xf = _upcast(x)
    n, c = x.shape[:2]
    groups = xf.reshape(n, num_groups, -1)                # (N, G, C/G * spatial)
    mean = groups.mean(-1, keepdim=True)
    var = (groups - mean).square().mean(-1, keepdim=True)
    x_hat = ((groups - mean) / torch.sqrt(var + eps)).reshape(x.shape)
    shape = [1, c] + [1] * (x.dim() - 2)
    return (x_hat * weight.view(shape) + bias.view(shape)).to(x.dtype)


# --------------------------------------------------------------------------------------
# a checker for eval-mode BatchNorm (the training-mode one is helpers.checks.check_batch_norm)
# --------------------------------------------------------------------------------------
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
            mean, var = xd.mean(dims, keepdim=True), xd.var(dims, keepdim=True, correction=0)
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


def check_batch_norm_eval(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(x, running_mean, running_var, weight, bias, eps)``: BatchNorm in eval mode.

    Expected (PyTorch's ``F.batch_norm(..., training=False)``):
    ``y = (x - running_mean) / sqrt(running_var + eps) * weight + bias``, per channel (dim 1),
    with the stored statistics used as they are (``running_var`` is already the unbiased
    estimate; nothing of the current batch enters), float32 math for float16 input. Cases:
    running statistics far from the batch's (batch statistics used by mistake), a batch of
    one sample (which must work in eval mode), (N, C, L) with L = C (buffers not reshaped),
    (N, C, H, W), a tiny running variance (eps placement, a missing square root), float16.
    Mistake keys: ``batch_statistics_in_eval``, ``variance_without_sqrt``, ``eps_outside_sqrt``,
    ``debiased_running_var``, ``missing_keepdim`` (here: the buffers not reshaped to
    (1, C, 1, ...), the same key as the other checkers' misaligned statistics),
    ``affine_missing``, ``wrong_dtype``.
    """
    g = checks._gen(4)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4, var_scale=1.0):
        c = x.shape[1]
        rm = checks._randn(c, g=g, scale=2.0)
        rv = (torch.rand(c, generator=g, dtype=torch.float64) * 3 + 0.5) * var_scale
        w, b = checks._params(c, g)
        cases.append(Case(name, (x, rm.float(), rv.float(), w, b, 1e-5), rtol, atol, hint))

    add("(N, C) = (16, 3), buffers far from the batch", checks._randn(16, 3, g=g, offset=3.0))
    add("(N, C) = (1, 4), one sample", checks._randn(1, 4, g=g))
    add("(N, C) = (2, 4)", checks._randn(2, 4, g=g, scale=2.0))
    add("(N, C, L) = (4, 3, 3), L = C", checks._randn(4, 3, 3, g=g))
    add("(N, C, H, W) = (2, 3, 4, 5)", checks._randn(2, 3, 4, 5, g=g, offset=-1.0))
    add("tiny running_var ~ 1e-6", checks._randn(8, 4, g=g, scale=1e-3), var_scale=1e-6,
        rtol=1e-3, atol=1e-3)
    add("float16 input, float32 buffers", checks._randn(8, 2, 16, g=g, offset=1.0,
                                                        dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2)

    def ref(x, rm, rv, w, b, eps):
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=False, eps=eps)

    texts = {
        "batch_statistics_in_eval": (
            "the batch's own mean and variance are used. In eval mode BatchNorm normalises with "
            "running_mean and running_var, so a sample's output does not depend on its batch "
            "(and a batch of one works).",
            "使用了当前批自己的均值和方差。推理（eval）模式下批归一化用 running_mean 和 running_var "
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
        "missing_keepdim": (  # the key of the other checkers for statistics that do not line up
            "the (C,) buffers broadcast against the last dim (or fail to broadcast). Reshape them to (1, C, 1, ...) so "
            "that they line up with the channel dim 1.",
            "形状为 (C,) 的缓冲区沿最后一维广播了（或无法广播）。应 reshape 成 (1, C, 1, ...)，与通道维 1 对齐。"),
    }
    variants = {
        "batch_statistics_in_eval": _eval_variant(batch_stats=True),
        "variance_without_sqrt": _eval_variant(no_sqrt=True),
        "eps_outside_sqrt": _eval_variant(eps_outside=True),
        "debiased_running_var": _eval_variant(debias=True),
        "missing_keepdim": _eval_variant(last_dim=True),
        "affine_missing": _eval_variant(affine=False),
    }
    mistakes = [Mistake(k, *(texts.get(k) or checks._COMMON[k]), f) for k, f in variants.items()]
    return checks._run("batch_norm_eval", fn, cases, ref, mistakes)


# --------------------------------------------------------------------------------------
# the drills
# --------------------------------------------------------------------------------------
DRILLS: dict[str, tuple[Callable, Callable[[Callable], CheckResult]]] = {
    "batch_norm_train": (batch_norm_train, checks.check_batch_norm),
    "batch_norm_eval": (batch_norm_eval, check_batch_norm_eval),
    "layer_norm": (layer_norm, checks.check_layer_norm),
    "rms_norm": (rms_norm, checks.check_rms_norm),
    "group_norm": (group_norm, checks.check_group_norm),
}


def _drill(name: str):
    if name not in DRILLS:
        raise ValueError(f"unknown drill {name!r}; the drills are {', '.join(DRILLS)}")
    return DRILLS[name]


def model_solution(name: str) -> Callable:
    """The model solution of drill ``name`` as a function (its source is not printed)."""
    return _drill(name)[0]


def solution(name: str) -> None:
    """Print the model solution of drill ``name`` (a spoiler: try the drill first)."""
    print(inspect.getsource(_drill(name)[0]), end="")


def grade(name: str, fn: Callable) -> CheckResult:
    """Grade ``fn`` on drill ``name`` with its checker; the result prints the diagnosis.

    A function whose body is still ``raise NotImplementedError`` gets a short reminder
    rather than a list of failed cases.
    """
    _, checker = _drill(name)
    if not callable(fn):
        raise ValueError(f"grade({name!r}, fn): fn must be a function, got {type(fn).__name__}")
    result = checker(fn)
    first_line = result.message.splitlines()[0]
    if not result.passed and "raised NotImplementedError" in first_line:
        return CheckResult(False, f"… {name}: not written yet. Fill in the body, then run this "
                                  f"cell again. / 还没有实现：写好函数体后重新运行本单元格。",
                           "not_implemented", result.failed_cases)
    return _retitled(result, name)


def _retitled(result: CheckResult, name: str) -> CheckResult:
    """``result`` with the checker's title (``✔ batch_norm: ...``) replaced by the drill's
    name (``✔ batch_norm_train: ...``) on its headline(s), so each drill reports under its own name."""
    lines = [re.sub(r"^([✔✘]) [^:：]+([:：])", lambda m: f"{m.group(1)} {name}{m.group(2)}", line)
             for line in result.message.splitlines()]
    return dataclasses.replace(result, message="\n".join(lines))
