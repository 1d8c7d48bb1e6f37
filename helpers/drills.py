r"""Five-minute drills: write a normalisation forward pass from a blank function, grade it.

Five drills, each graded by a checker that names the mistake it recognises:

============================  ==============================================  ======================
drill                         signature                                       graded by
============================  ==============================================  ======================
``"batch_norm_train"``        ``fn(x, weight, bias, eps)``                    ``checks.check_batch_norm``
``"batch_norm_eval"``         ``fn(x, running_mean, running_var, weight,      ``checks.check_batch_norm_eval``
                              bias, eps)``
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

import inspect
from typing import Callable

import torch
from torch import Tensor

from .checks import (CheckResult, check_batch_norm, check_batch_norm_eval, check_group_norm,
                     check_layer_norm, check_rms_norm)

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
# the drills
# --------------------------------------------------------------------------------------
DRILLS: dict[str, tuple[Callable, Callable[[Callable], CheckResult]]] = {
    "batch_norm_train": (batch_norm_train, check_batch_norm),
    "batch_norm_eval": (batch_norm_eval, check_batch_norm_eval),
    "layer_norm": (layer_norm, check_layer_norm),
    "rms_norm": (rms_norm, check_rms_norm),
    "group_norm": (group_norm, check_group_norm),
}


def _drill(name: str):
    if name not in DRILLS:
        raise ValueError(f"unknown drill {name!r}; the drills are {', '.join(DRILLS)}")
    return DRILLS[name]


def model_solution(name: str) -> Callable:
    """The model solution of drill ``name`` as a function (its source is not printed).

    Lesson 12."""
    return _drill(name)[0]


def solution(name: str) -> None:
    """Print the model solution of drill ``name`` (a spoiler: try the drill first).

    Lesson 12."""
    print(inspect.getsource(_drill(name)[0]), end="")


def grade(name: str, fn: Callable) -> CheckResult:
    """Grade ``fn`` on drill ``name`` with its checker, reported under the drill's name; the
    result displays the diagnosis (a body still ``raise NotImplementedError`` gets a short
    reminder). Lesson 12."""
    _, checker = _drill(name)
    if not callable(fn):
        raise ValueError(f"grade({name!r}, fn): fn must be a function, got {type(fn).__name__}")
    return checker(fn, title=name)
