r"""Five-minute drills: write a normalisation forward pass from a blank function, grade it.

Sixteen drills, each graded by a checker that names the mistake it recognises:

============================  ==============================================  ======================
drill                         signature                                       graded by
============================  ==============================================  ======================
``"batch_norm_train"``        ``fn(x, weight, bias, eps)``                    ``checks.check_batch_norm``
``"batch_norm_eval"``         ``fn(x, running_mean, running_var, weight,      ``checks.check_batch_norm_eval``
                              bias, eps)``
``"layer_norm"``              ``fn(x, weight, bias, eps)``                    ``checks.check_layer_norm``
``"rms_norm"``                ``fn(x, weight, eps)``                          ``checks.check_rms_norm``
``"group_norm"``              ``fn(x, num_groups, weight, bias, eps)``        ``checks.check_group_norm``
``"bn_backward"``             ``fn(grad_output, x, weight, eps)``             ``checks.check_bn_backward``
                              ``-> (grad_input, grad_weight, grad_bias)``
``"ln_backward"``             ``fn(grad_output, x, weight, eps)``             ``checks.check_ln_backward``
                              ``-> (grad_input, grad_weight, grad_bias)``
``"bn_running_stats"``        ``fn(x, weight, bias, running_mean,             ``checks.check_bn_running_stats``
                              running_var, training, momentum, eps)``
                              ``-> (y, running_mean, running_var)``
                              (buffers ``None``: a fresh layer)
``"fold_bn"``                 ``fn(weight, bias, bn_weight, bn_bias,          ``checks.check_fold_bn``
                              running_mean, running_var, eps)``
                              ``-> (folded_weight, folded_bias)``
``"sync_bn_merge"``           ``fn(counts, means, vars)``                     ``checks.check_sync_bn_merge``
                              ``-> (mean, var, var_unbiased)``
``"grad_check"``              ``fn(f, x, eps) -> grad`` (central differences) ``check_grad_check``
``"batch_norm_module"``       a class ``cls(num_features, eps, momentum)``,   ``check_batch_norm_module``
                              an ``nn.Module`` with buffers
``"gn_backward"``             ``fn(grad_output, x, num_groups, weight, eps)`` ``check_gn_backward``
                              ``-> (grad_input, grad_weight, grad_bias)``
``"deepnorm_init"``           ``fn(block, num_encoder_layers,                 ``check_deepnorm_init``
                              num_decoder_layers, side) -> (alpha, beta)``
``"pre_ln_stack"``            ``fn(x, layers, final_norm)``                   ``check_pre_ln_stack``
``"switchable_norm"``         ``fn(x, mean_weights, var_weights, weight,      ``checks.check_switchable_norm``
                              bias, eps)``                                    (lesson 14)
============================  ==============================================  ======================

(``check_grad_check`` and the four after it live in :mod:`helpers.checks.interview_drills`.)

Every drill is graded from scratch: while the function runs, torch's own normalisation
functions (``F.batch_norm``, ``F.layer_norm``, ``F.group_norm``, ... and the modules built on
them), BatchNorm folding and autograd (``torch.autograd.grad``, ``.backward()``) are refused
(:func:`helpers.checks.scratch.from_scratch`), and a function that calls them is told so.

Usage::

    from helpers import drills

    def my_layer_norm(x, weight, bias, eps):
        ...

    drills.grade("layer_norm", my_layer_norm)     # ✔ ... or ✘ with the diagnosis
    drills.show_solution("layer_norm")            # prints the model solution (a spoiler)
    drills.grade("layer_norm", drills.model_solution("layer_norm"))   # grades it, prints nothing of it

The model solutions live here, not in the notebook, so that a drill cell does not show them.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Callable

import torch
import torch.nn as nn
from torch import Tensor

from .checks import (CheckResult, check_batch_norm, check_batch_norm_eval, check_bn_backward,
                     check_bn_running_stats, check_fold_bn, check_group_norm, check_layer_norm,
                     check_ln_backward, check_rms_norm, check_sync_bn_merge)
from .checks.atlas import check_switchable_norm
from .checks.interview_drills import (check_batch_norm_module, check_deepnorm_init,
                                      check_gn_backward, check_grad_check, check_pre_ln_stack)
from .checks.scratch import from_scratch

__all__ = ["DRILLS", "grade", "model_solution", "solution", "show_solution",
           "check_batch_norm_eval"]


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


def bn_backward(grad_output, x, weight, eps):
    """BatchNorm's backward (training mode): dL/dx = r (g - mean(g) - x_hat mean(g x_hat))."""
    dims = [0] + list(range(2, x.dim()))               # one set per channel
    shape = [1, -1] + [1] * (x.dim() - 2)
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square().mean(dims, keepdim=True)    # biased, as in the forward
    r = 1 / torch.sqrt(var + eps)
    x_hat = (x - mean) * r
    g = grad_output * weight.view(shape)                   # dL/dx_hat
    grad_input = r * (g - g.mean(dims, keepdim=True)       # through the mean
                      - x_hat * (g * x_hat).mean(dims, keepdim=True))   # through the variance
    grad_weight = (grad_output * x_hat).sum(dims)          # summed: shared by the set
    grad_bias = grad_output.sum(dims)
    return grad_input, grad_weight, grad_bias


def ln_backward(grad_output, x, weight, eps):
    """LayerNorm's backward over the last dim: the same formula, one set per token."""
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).square().mean(-1, keepdim=True)
    r = 1 / torch.sqrt(var + eps)
    x_hat = (x - mean) * r
    g = grad_output * weight
    grad_input = r * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    lead = list(range(x.dim() - 1))                        # every token shares weight and bias
    return grad_input, (grad_output * x_hat).sum(lead), grad_output.sum(lead)


def bn_running_stats(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """BatchNorm's forward with its buffers: batch statistics in training (biased variance
    to normalise, unbiased into running_var), running statistics in eval. Buffers of None
    are a freshly built layer's: zeros and ones, as nn.BatchNorm1d registers them."""
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if running_mean is None:                            # a fresh layer
        running_mean = torch.zeros(x.shape[1], dtype=x.dtype)
        running_var = torch.ones(x.shape[1], dtype=x.dtype)    # not zeros: see eval before training
    if training:
        mean = x.mean(dims)
        var = (x - mean.view(shape)).square().mean(dims)   # biased: normalises
        m = x.numel() // x.shape[1]                         # values per channel
        running_mean = (1 - momentum) * running_mean + momentum * mean
        running_var = (1 - momentum) * running_var + momentum * var * m / (m - 1)  # unbiased
    else:
        mean, var = running_mean, running_var
    x_hat = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps)
    return x_hat * weight.view(shape) + bias.view(shape), running_mean, running_var


def fold_bn(weight, bias, bn_weight, bn_bias, running_mean, running_var, eps):
    """Linear then eval-mode BatchNorm as one linear layer: scale row c by s_c."""
    s = bn_weight / torch.sqrt(running_var + eps)          # the layer's own eps
    return weight * s[:, None], (bias - running_mean) * s + bn_bias


def sync_bn_merge(counts, means, vars):
    """Per-process (count, mean, biased var) -> global mean, biased and unbiased variance."""
    n = counts[:, None]
    total = counts.sum()
    mean = (n * means).sum(0) / total                      # weighted by the counts
    var = (n * (vars + (means - mean).square())).sum(0) / total   # within + between groups
    return mean, var, var * total / (total - 1)


def grad_check(f, x, eps):
    """Central differences, one entry at a time, x restored after each:
    df/dx_i ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps), in x's dtype (float64)."""
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in itertools.product(*map(range, x.shape)):  # x itself, even if non-contiguous
        old = x[idx].item()
        x[idx] = old + eps
        f_plus = f(x)
        x[idx] = old - eps
        f_minus = f(x)
        x[idx] = old                                       # restore before the next entry
        grad[idx] = (f_plus - f_minus) / (2 * eps)
    return grad


class BatchNorm(nn.Module):
    """BatchNorm for (N, C, *) input, from scratch: parameters weight and bias, buffers
    running_mean = 0, running_var = 1 and num_batches_tracked = 0 (register_buffer: in the
    state_dict, moved by .to(), not trained)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))    # 1, not 0
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))               # per channel (dim 1)
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:                                  # the mode, not torch.is_grad_enabled()
            mean = x.mean(dims)
            var = (x - mean.view(shape)).square().mean(dims)   # biased: normalises
            m = x.numel() // x.shape[1]
            with torch.no_grad():                          # no autograd graph in the buffers
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * m / (m - 1))
                self.num_batches_tracked += 1
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return x_hat * self.weight.view(shape) + self.bias.view(shape)


def gn_backward(grad_output, x, num_groups, weight, eps):
    """GroupNorm's backward: per sample and group of C/G contiguous channels (and positions),
    dL/dx = r (g - mean(g) - x_hat mean(g x_hat)) with g = gamma_c dL/dy (gamma per channel)."""
    n, c = x.shape[:2]
    shape = [1, c] + [1] * (x.dim() - 2)
    g = (grad_output * weight.view(shape)).reshape(n, num_groups, -1)   # gamma before grouping
    xg = x.reshape(n, num_groups, -1)                       # (N, G, C/G * spatial)
    mean = xg.mean(-1, keepdim=True)
    var = (xg - mean).square().mean(-1, keepdim=True)
    r = 1 / torch.sqrt(var + eps)
    x_hat = (xg - mean) * r
    grad_input = r * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    dims = [0] + list(range(2, x.dim()))                   # gamma and beta: per channel
    x_hat = x_hat.reshape(x.shape)
    return grad_input.reshape(x.shape), (grad_output * x_hat).sum(dims), grad_output.sum(dims)


def deepnorm_init(block, num_encoder_layers, num_decoder_layers, side):
    """DeepNet (Wang et al. 2022): Table 1's alpha and beta for this side, block.alpha = alpha,
    and Figure 2's init: Xavier-normal, gain beta for the FFN and the value and output
    projections, gain 1 for the query and key projections."""
    n, m = num_encoder_layers, num_decoder_layers
    if m == 0:                                            # encoder-only
        alpha, beta = (2 * n) ** 0.25, (8 * n) ** -0.25
    elif n == 0:                                          # decoder-only
        alpha, beta = (2 * m) ** 0.25, (8 * m) ** -0.25
    elif side == "encoder":                               # encoder-decoder: both depths
        alpha, beta = 0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16)
    else:
        alpha, beta = (3 * m) ** 0.25, (12 * m) ** -0.25
    block.alpha = alpha                                   # LN(alpha * x + G(x)): the shortcut
    for name in ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "ffn.fc1", "ffn.fc2"):
        linear = block.get_submodule(name)
        gain = 1.0 if name in ("attn.q_proj", "attn.k_proj") else beta
        nn.init.xavier_normal_(linear.weight, gain=gain)
        nn.init.zeros_(linear.bias)
    return alpha, beta


def pre_ln_stack(x, layers, final_norm):
    """Pre-LN blocks, x <- x + Attn(LN1(x)), x <- x + FFN(LN2(x)), then the final norm once."""
    for attn, ffn, norm1, norm2 in layers:
        x = x + attn(norm1(x))                             # the residual stream is never normalised
        x = x + ffn(norm2(x))
    return final_norm(x)                                   # ... except once, before the head


def switchable_norm(x, mean_weights, var_weights, weight, bias, eps):
    """Switchable Normalisation (Luo et al. 2019), training mode: the statistics of IN, LN and
    BN mixed, mu = sum_k w_k mu_k, var = sum_k w'_k var_k, then one normalisation."""
    mean, var = 0, 0
    for k, dims in enumerate(((2, 3), (1, 2, 3), (0, 2, 3))):   # IN, LN, BN
        mu_k = x.mean(dims, keepdim=True)
        mean = mean + mean_weights[k] * mu_k
        var = var + var_weights[k] * (x - mu_k).square().mean(dims, keepdim=True)   # biased
    shape = [1, -1, 1, 1]
    return (x - mean) / torch.sqrt(var + eps) * weight.view(shape) + bias.view(shape)


# --------------------------------------------------------------------------------------
# the drills
# --------------------------------------------------------------------------------------
DRILLS: dict[str, tuple[Callable, Callable[[Callable], CheckResult]]] = {
    "batch_norm_train": (batch_norm_train, check_batch_norm),
    "batch_norm_eval": (batch_norm_eval, check_batch_norm_eval),
    "layer_norm": (layer_norm, check_layer_norm),
    "rms_norm": (rms_norm, check_rms_norm),
    "group_norm": (group_norm, check_group_norm),
    "bn_backward": (bn_backward, check_bn_backward),
    "ln_backward": (ln_backward, check_ln_backward),
    "bn_running_stats": (bn_running_stats, check_bn_running_stats),
    "fold_bn": (fold_bn, check_fold_bn),
    "sync_bn_merge": (sync_bn_merge, check_sync_bn_merge),
    "grad_check": (grad_check, check_grad_check),
    "batch_norm_module": (BatchNorm, check_batch_norm_module),
    "gn_backward": (gn_backward, check_gn_backward),
    "deepnorm_init": (deepnorm_init, check_deepnorm_init),
    "pre_ln_stack": (pre_ln_stack, check_pre_ln_stack),
    "switchable_norm": (switchable_norm,
                        lambda fn, title="switchable_norm": check_switchable_norm(fn)),
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


show_solution = solution


def grade(name: str, fn: Callable) -> CheckResult:
    """Grade ``fn`` on drill ``name`` with its checker, reported under the drill's name; the
    result displays the diagnosis (a body still ``raise NotImplementedError`` gets a short
    reminder). The function is graded from scratch: a call of torch's own normalisation
    function, BatchNorm folding or autograd inside it fails with ``used_torch_function``.
    The grading runs on one thread (the cases are tiny), restored afterwards. Lesson 12."""
    _, checker = _drill(name)
    if not callable(fn):
        raise ValueError(f"grade({name!r}, fn): fn must be a function, got {type(fn).__name__}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the cases are tiny: more threads only contend
    try:
        return checker(from_scratch(fn), title=name)
    finally:
        torch.set_num_threads(threads)
