r"""The checkers of lesson 12's later five-minute drills: a numerical gradient check, a BatchNorm
layer built from scratch as an ``nn.Module``, GroupNorm's backward pass, DeepNorm's constants and
initialisation, and a Pre-LN Transformer stack with its final norm. (Switchable Normalisation,
the last drill, is graded by lesson 14's :func:`helpers.checks.atlas.check_switchable_norm`.)

Same contract as every checker (:mod:`helpers.checks.engine`): a bilingual
:class:`~helpers.checks.engine.CheckResult`, nothing printed, nothing raised on the learner's
code, the mistake named. What each checker passes:

- :func:`check_grad_check`: ``fn(f, x, eps) -> grad``, ``f`` a scalar function of one float64
  tensor ``x`` (shapes (5,), (3, 4), (6,), (2, 3, 4), (4, 5) and a transposed, non-contiguous
  (4, 3) view), ``eps`` a Python float (1e-4, or 1e-6); the central difference
  :math:`(f(x + \epsilon e_i) - f(x - \epsilon e_i)) / 2\epsilon` of ``x``'s shape and dtype,
  ``x`` left as it was. Reference: autograd on ``f``.
- :func:`check_batch_norm_module`: a class ``cls(num_features, eps=1e-5, momentum=0.1)``, an
  ``nn.Module`` for (N, C, *) input; compared, scenario by scenario (a fresh layer's buffers,
  eval before training, training steps then eval, a validation pass with gradients on, a
  state_dict round trip), with ``nn.BatchNorm1d`` / ``nn.BatchNorm2d`` from the same fresh
  state, in float64 (the layer is moved with ``.double()``).
- :func:`check_gn_backward`: ``fn(grad_output, x, num_groups, weight, eps) ->
  (grad_input, grad_weight, grad_bias)`` for float64 (N, C, *) input, against autograd through
  ``F.group_norm``.
- :func:`check_deepnorm_init`: ``fn(block, num_encoder_layers, num_decoder_layers, side) ->
  (alpha, beta)`` that also sets ``block.alpha`` and initialises the block's six ``nn.Linear``
  weights (``block.attn.{q,k,v,out}_proj``, ``block.ffn.{fc1,fc2}``) as DeepNet's Figure 2 does;
  the block is a :class:`helpers.transformer.Block` (d = 64, 4 heads, d_ff = 256). Each weight's
  standard deviation is measured and compared with Xavier's, gain :math:`\beta` or 1.
- :func:`check_pre_ln_stack`: ``fn(x, layers, final_norm)``, ``layers`` a list of
  ``(attn, ffn, norm1, norm2)`` tuples; ``x`` float64 (B, T, d); returns the Pre-LN stack's output
  after the final norm.

Lesson 12, section 4 (drills 11 to 15).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .backprop_drills import (_BACKWARD_TEXTS, PartError, _autograd, _picker, _run)
from .engine import Case, CheckResult, affine_params, generator, mistakes, randn, run_cases
from .scratch import guard

__all__ = ["check_grad_check", "check_batch_norm_module", "check_gn_backward",
           "check_deepnorm_init", "check_pre_ln_stack"]


# --------------------------------------------------------------------------------------
# 11. a numerical gradient check
# --------------------------------------------------------------------------------------
def _cubes(x):
    return (x ** 3).sum()


def _make_functions(g: torch.Generator):
    w = randn(3, 4, g=g, dtype=torch.float64)
    a = randn(6, 6, g=g, dtype=torch.float64)
    gamma = torch.rand(5, generator=g, dtype=torch.float64) + 0.5
    c = randn(4, 3, g=g, dtype=torch.float64)

    def sin_weighted(x):
        return (torch.sin(x) * w).sum()

    def quadratic(x):
        return x @ a @ x

    def log_sum_exp(x):
        return torch.log(torch.exp(x).sum())

    def layer_norm_loss(x):  # LayerNorm over the last dim, written with elementary operations
        mean = x.mean(-1, keepdim=True)
        x_hat = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        return (x_hat * gamma * torch.arange(1.0, 6.0, dtype=x.dtype)).sum()

    def weighted_cubes(x):
        return (x ** 3 * c).sum()

    return sin_weighted, quadratic, log_sum_exp, layer_norm_loss, weighted_cubes


def _central(f, x, eps, *, kind="central", dtype=None, all_at_once=False, restore=True,
             copy=False, divide=2.0):
    """Finite differences with a switch per slip: one-sided, in another dtype, every entry
    perturbed at once, x not restored, a reshaped copy perturbed, divided by eps."""
    x = x.clone() if dtype is None else x.to(dtype)
    if all_at_once:
        d = (f(x + eps) - f(x - eps)) / (divide * eps)
        return torch.full_like(x, float(d))
    grad = torch.zeros(x.shape, dtype=x.dtype)
    if copy:  # x.reshape(-1): a view of a contiguous x, a copy of a non-contiguous one
        target, positions = x.reshape(-1), list(range(x.numel()))
    else:
        target, positions = x, list(itertools.product(*map(range, x.shape)))
    gflat = grad.view(-1)
    for k, pos in enumerate(positions):
        old = target[pos].item()
        if kind == "central":
            target[pos] = old + eps
            fp = f(x)
            target[pos] = old - eps
            fm = f(x)
            d = (fp - fm) / (divide * eps)
        elif kind == "forward":
            f0 = f(x)
            target[pos] = old + eps
            d = (f(x) - f0) / eps
        elif kind == "backward":
            f0 = f(x)
            target[pos] = old - eps
            d = (f0 - f(x)) / eps
        else:  # "flipped"
            target[pos] = old + eps
            fp = f(x)
            target[pos] = old - eps
            d = (f(x) - fp) / (divide * eps)
        if restore:
            target[pos] = old
        gflat[k] = d
    return grad


_GRAD_TEXTS = {
    "one_sided_difference": (
        "a one-sided difference (f(x + eps e_i) - f(x)) / eps: its error is about eps/2 * f'', "
        "here 1e-5 to 1e-4, against eps^2/6 * f''' for the central difference (f(x + eps e_i) - "
        "f(x - eps e_i)) / (2 eps). A gradient check built on it flags right gradients as wrong.",
        "用了单侧差分 (f(x + eps e_i) - f(x)) / eps：它的误差约为 eps/2 * f''，这里是 1e-5 到 1e-4；"
        "中心差分 (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) 的误差只有 eps^2/6 * f'''。"
        "用它做梯度检验，会把正确的梯度判为错误。"),
    "divided_by_eps": (
        "the central difference is divided by eps instead of 2 eps: the two points are 2 eps "
        "apart, so the estimate is twice the gradient.",
        "中心差分除以了 eps 而不是 2 eps：两个点相距 2 eps，结果成了梯度的两倍。"),
    "sign_flipped": (
        "the difference is taken the wrong way round, (f(x - eps e_i) - f(x + eps e_i)) / "
        "(2 eps): every entry has the wrong sign.",
        "差分的顺序反了，(f(x - eps e_i) - f(x + eps e_i)) / (2 eps)：每个分量的符号都错了。"),
    "perturbed_all_at_once": (
        "every entry is perturbed at once, (f(x + eps) - f(x - eps)) / (2 eps): that is the "
        "derivative along the all-ones direction (the sum of the partial derivatives), the same "
        "number for every entry. Perturb one entry at a time: x_i +- eps, the others fixed.",
        "一次扰动了所有分量，(f(x + eps) - f(x - eps)) / (2 eps)：这是沿全 1 方向的方向导数"
        "（各偏导数之和），每个分量得到同一个数。应每次只扰动一个分量：x_i +- eps，其余不变。"),
    "x_not_restored": (
        "x is changed by the call: after perturbing x_i it must be put back (old = x[i].item(); "
        "... ; x[i] = old). Otherwise every later entry is evaluated at a shifted point, and the "
        "caller's tensor is left modified.",
        "调用之后 x 被改变了：扰动 x_i 之后必须把它恢复（old = x[i].item(); ... ; x[i] = old）。"
        "否则后面每个分量都在一个偏移了的点上求值，调用者的张量也被改掉了。"),
    "perturbed_a_copy": (
        "on a non-contiguous x the gradient is 0: x.reshape(-1) (or .flatten(), .contiguous()) "
        "returned a copy, so the perturbation never reached x. Perturb x itself: index it "
        "directly (x[idx] for idx in itertools.product(*map(range, x.shape))), or work on a "
        "contiguous clone and pass that clone to f.",
        "对非连续的 x，梯度为 0：x.reshape(-1)（或 .flatten()、.contiguous()）返回的是副本，扰动根本没有作用到 x 上。"
        "应扰动 x 本身：直接按下标索引（x[idx]，idx 取自 itertools.product(*map(range, x.shape))），"
        "或者在一个连续的克隆上操作，并把这个克隆传给 f。"),
    "float32_arithmetic": (
        "computed in float32: f(x + eps) - f(x - eps) loses about 7 significant digits to "
        "rounding, an error near 1e-7 * |f| / eps, here 1e-3 and more. A gradient check runs in "
        "float64 (torch.autograd.gradcheck requires it), and returns x's dtype.",
        "用 float32 计算了：f(x + eps) - f(x - eps) 的舍入误差约为 7 位有效数字，误差约 1e-7 * |f| / eps，"
        "这里达到 1e-3 甚至更大。梯度检验要在 float64 下做（torch.autograd.gradcheck 也要求 float64），"
        "并返回与 x 相同的 dtype。"),
    "eps_ignored": (
        "the eps argument is ignored (a fixed step, 1e-2 here): with a large step the central "
        "difference's error eps^2/6 * f''' is about 1e-5. Use the eps the caller passes.",
        "忽略了传入的 eps（用了固定步长，这里是 1e-2）：步长大时，中心差分的误差 eps^2/6 * f''' 约为 1e-5。"
        "应使用调用者传入的 eps。"),
    "gradient_shape": (
        "the gradient has the wrong shape: it has x's shape (one partial derivative per entry), "
        "not a flat vector.",
        "梯度的形状不对：它与 x 同形（每个分量一个偏导数），而不是一个展平的向量。"),
}


def _grad_catalogue():
    def restore_missing(f, x, eps):
        return _central(f, x, eps, restore=False)

    def copied(f, x, eps):
        return None if x.is_contiguous() else torch.zeros_like(x)

    return mistakes({
        "one_sided_difference": lambda f, x, eps: [_central(f, x, eps, kind="forward"),
                                                   _central(f, x, eps, kind="backward")],
        "divided_by_eps": lambda f, x, eps: _central(f, x, eps, divide=1.0),
        "sign_flipped": lambda f, x, eps: _central(f, x, eps, kind="flipped"),
        "perturbed_all_at_once": lambda f, x, eps: _central(f, x, eps, all_at_once=True),
        "x_not_restored": restore_missing,
        "perturbed_a_copy": copied,
        "float32_arithmetic": lambda f, x, eps: _central(f, x, eps, dtype=torch.float32).double(),
        "eps_ignored": lambda f, x, eps: [_central(f, x, e) for e in (1e-2, 1e-3) if e != eps],
        "gradient_shape": None,  # a structural check of the result
    }, extra=_GRAD_TEXTS)


def check_grad_check(fn: Callable, *, title: str = "grad_check") -> CheckResult:
    r"""Check ``fn(f, x, eps) -> grad``: the central-difference gradient of a scalar function
    ``f`` at ``x``, one entry at a time,

    .. math:: \frac{\partial f}{\partial x_i} \approx
              \frac{f(x + \epsilon e_i) - f(x - \epsilon e_i)}{2\epsilon},

    of ``x``'s shape and dtype (float64), ``x`` unchanged afterwards, against autograd on ``f``
    (the error of a right central difference is about :math:`\epsilon^2 f'''/6`, below 1e-7
    here; tolerance 1e-6). Functions: sum(x³), sum(w sin x), xᵀAx (cross terms), log-sum-exp of
    a 3-D x, a LayerNorm loss, and sum(c x³) on a transposed, non-contiguous view (eps = 1e-6
    there). Mistakes named: a one-sided difference, division by eps, the sign flipped, every
    entry perturbed at once, x not restored, a reshaped copy perturbed, float32 arithmetic, the
    eps argument ignored, a flat result. Lesson 12, section 4 (drill 11)."""
    g = generator(111)
    sin_weighted, quadratic, lse, ln_loss, weighted_cubes = _make_functions(g)
    inputs = [
        ("f = sum(x^3), x (5,)", _cubes, randn(5, g=g, dtype=torch.float64), 1e-4),
        ("f = sum(w * sin(x)), x (3, 4)", sin_weighted, randn(3, 4, g=g, dtype=torch.float64), 1e-4),
        ("f = x^T A x, x (6,)", quadratic, randn(6, g=g, dtype=torch.float64), 1e-4),
        ("f = log(sum(exp(x))), x (2, 3, 4)", lse, randn(2, 3, 4, g=g, dtype=torch.float64), 1e-4),
        ("f = a LayerNorm loss, x (4, 5)", ln_loss, randn(4, 5, g=g, scale=2.0, dtype=torch.float64), 1e-4),
        ("f = sum(c * x^3), x a transposed (4, 3) view (non-contiguous), eps 1e-6", weighted_cubes,
         randn(3, 4, g=g, dtype=torch.float64).t(), 1e-6),
    ]
    cases = [Case(name, (f, x, eps), 1e-6, 1e-6) for name, f, x, eps in inputs]

    def reference(f, x, eps):
        with torch.enable_grad():
            xr = x.detach().clone().requires_grad_()
            return torch.autograd.grad(f(xr), xr)[0]

    def learner(f, x, eps):
        before = x.clone()
        out = fn(f, x, eps)
        if not torch.allclose(x, before, rtol=1e-10, atol=1e-12):
            raise PartError("x is changed by the call (not restored after perturbing it)",
                            "x_not_restored")
        if isinstance(out, Tensor):
            if out.dtype in (torch.float32, torch.float16, torch.bfloat16):
                raise PartError(f"returned {out.dtype}: computed in low precision",
                                "float32_arithmetic")
            if out.shape != x.shape and out.numel() == x.numel():
                raise PartError(f"returned shape {tuple(out.shape)}, expected {tuple(x.shape)}",
                                "gradient_shape")
        return out

    return run_cases(title, learner, cases, reference, _grad_catalogue(),
                     against=("autograd", "自动求导"), names=("f", "x", "eps"))


# --------------------------------------------------------------------------------------
# 12. a BatchNorm layer from scratch
# --------------------------------------------------------------------------------------
class _SlipBatchNorm(nn.Module):
    """BatchNorm over dim 1 with a switch per slip (the catalogue's buggy layers)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, *, fresh_var=1.0, biased_running=False,
                 keras=False, eval_batch=False, unbiased_norm=False, no_update=False,
                 update_in_eval=False, grad_mode=False, count=True):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.full((num_features,), fresh_var))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self.biased_running, self.keras, self.eval_batch = biased_running, keras, eval_batch
        self.unbiased_norm, self.no_update, self.update_in_eval = unbiased_norm, no_update, update_in_eval
        self.grad_mode, self.count = grad_mode, count

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        training = torch.is_grad_enabled() if self.grad_mode else self.training
        n = x.numel() // x.shape[1]
        mean = x.mean(dims)
        var = ((x - mean.view(shape)) ** 2).mean(dims)
        if (training or self.update_in_eval) and not self.no_update:
            with torch.no_grad():
                keep = self.momentum if self.keras else 1 - self.momentum
                new_var = var if self.biased_running else var * n / (n - 1)
                self.running_mean.mul_(keep).add_((1 - keep) * mean)
                self.running_var.mul_(keep).add_((1 - keep) * new_var)
        if training and self.count:
            self.num_batches_tracked += 1
        if training or self.eval_batch:
            m, v = mean, (var * n / (n - 1) if self.unbiased_norm else var)
        else:
            m, v = self.running_mean, self.running_var
        y = (x - m.view(shape)) / torch.sqrt(v.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)


def _torch_bn(num_features, eps, momentum, rank):
    return (nn.BatchNorm2d if rank == 4 else nn.BatchNorm1d)(num_features, eps=eps, momentum=momentum)


def _inspect(module, c: int) -> None:
    """The structure a BatchNorm layer must have; a :class:`PartError` naming what is not."""
    if not isinstance(module, nn.Module):
        raise PartError(f"the class builds a {type(module).__name__}, not an nn.Module")
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    for name in ("running_mean", "running_var"):
        if name in params:
            raise PartError(f"{name} is an nn.Parameter", "buffers_as_parameters")
        if name not in buffers:
            if isinstance(getattr(module, name, None), Tensor):
                raise PartError(f"{name} is a plain tensor attribute, missing from the "
                                "state_dict", "not_registered_buffers")
            raise PartError(f"no buffer named {name}", "not_registered_buffers")
    if "num_batches_tracked" not in buffers:
        raise PartError("no buffer named num_batches_tracked", "num_batches_tracked_missing")
    for name in ("weight", "bias"):
        p = params.get(name)
        if p is None or tuple(p.shape) != (c,):
            raise PartError(f"no parameter {name} of shape ({c},)", "affine_params_missing")
    missing = {"running_mean", "running_var", "num_batches_tracked"} - set(module.state_dict())
    if missing:
        raise PartError(f"missing from the state_dict: {sorted(missing)}", "not_registered_buffers")


def _flat(*ts) -> Tensor:
    out = []
    for t in ts:
        if not isinstance(t, Tensor):
            raise PartError(f"the layer returned {type(t).__name__}, not a tensor")
        out.append(t.detach().to(torch.float64).reshape(-1))
    return torch.cat(out)


def _scenario(make, learner: bool, kind, xs, w, b, momentum):
    """Run one scenario on a layer built by ``make(C, eps, momentum, rank)``; returns the
    float64 vector of what it observes. The learner's layer runs inside the from-scratch
    guard, with its structure checked."""
    c, rank = xs[0].shape[1], xs[0].dim()
    ctx = guard if learner else contextlib.nullcontext

    def build():
        m = make(c, 1e-5, momentum, rank)
        if learner:
            _inspect(m, c)
        m = m.double()
        with torch.no_grad():
            m.weight.copy_(w)
            m.bias.copy_(b)
        return m

    def state(m):
        return (m.running_mean, m.running_var, m.num_batches_tracked)

    def train_step(m, x):
        m.train()
        with torch.enable_grad(), ctx():
            y = m(x.clone().requires_grad_())
        if learner and any(isinstance(t, Tensor) and t.requires_grad for t in state(m)[:2]):
            raise PartError("a running statistic requires grad (it keeps the autograd graph)",
                            "buffers_keep_graph")
        return y

    def evaluate(m, x, with_grad=False):
        m.eval()
        with (torch.enable_grad() if with_grad else torch.no_grad()), ctx():
            return m(x.clone().requires_grad_(with_grad))

    m = build()
    if kind == "fresh":
        return _flat(*state(m))
    if kind == "eval_first":
        return _flat(evaluate(m, xs[0]), *state(m))
    if kind == "validation_with_grad":
        train_step(m, xs[0])
        return _flat(evaluate(m, xs[1], with_grad=True), *state(m))
    if kind == "state_dict":
        train_step(m, xs[0])
        fresh = build()
        fresh.load_state_dict(m.state_dict())
        return _flat(evaluate(fresh, xs[1]), *state(fresh))
    ys = [train_step(m, x) for x in xs[:-1]] if len(xs) > 1 else [train_step(m, xs[0])]
    last = [evaluate(m, xs[-1])] if len(xs) > 1 else []
    return _flat(*ys, *last, *state(m))


_BN_TEXTS = {
    "fresh_running_var_zero": (
        "a freshly built layer's running_var is 0: nn.BatchNorm1d registers running_var = ones(C) "
        "and running_mean = zeros(C), so that a layer evaluated before any training step divides "
        "by sqrt(1 + eps), not by sqrt(eps) (outputs about 300 times too large).",
        "新建层的 running_var 是 0：nn.BatchNorm1d 注册的是 running_var = ones(C) 和 running_mean = zeros(C)，"
        "这样在任何训练步之前评估时除以的是 sqrt(1 + eps)，而不是 sqrt(eps)（输出会大约大 300 倍）。"),
    "not_registered_buffers": (
        "running_mean and running_var are plain tensor attributes, not buffers: they are missing "
        "from the state_dict (a saved model loses them) and .to(), .double() and .cuda() do not "
        "move them. Register them: self.register_buffer('running_mean', torch.zeros(C)).",
        "running_mean 和 running_var 是普通的张量属性，不是缓冲区：它们不在 state_dict 中（保存的模型会丢掉它们），"
        ".to()、.double() 和 .cuda() 也不会移动它们。应注册为缓冲区：self.register_buffer('running_mean', torch.zeros(C))。"),
    "buffers_as_parameters": (
        "running_mean and running_var are nn.Parameters: the optimiser would update them by "
        "gradient descent (and weight decay). They are buffers: register_buffer, in the "
        "state_dict, not in parameters().",
        "running_mean 和 running_var 被定义成了 nn.Parameter：优化器会用梯度下降（以及权重衰减）更新它们。"
        "它们应是缓冲区：用 register_buffer 注册，出现在 state_dict 中，但不在 parameters() 里。"),
    "num_batches_tracked_missing": (
        "no num_batches_tracked buffer: nn.BatchNorm registers it (a long tensor, 0 at first, +1 "
        "per training step; momentum=None averages with it), and a state_dict without it does "
        "not load into nn.BatchNorm1d.",
        "没有 num_batches_tracked 缓冲区：nn.BatchNorm 注册了它（long 型张量，初始为 0，每个训练步加 1；"
        "momentum=None 时用它求累积平均），缺少它的 state_dict 无法载入 nn.BatchNorm1d。"),
    "num_batches_not_counted": (
        "num_batches_tracked is not incremented: add 1 at each forward pass in training mode.",
        "num_batches_tracked 没有递增：训练模式下每次前向传播应加 1。"),
    "affine_params_missing": (
        "no learnable weight and bias of shape (C,): nn.BatchNorm1d has weight = ones(C) and "
        "bias = zeros(C), as nn.Parameters named weight and bias.",
        "没有形状为 (C,) 的可学习 weight 和 bias：nn.BatchNorm1d 有名为 weight 和 bias 的 nn.Parameter，"
        "初始值为 ones(C) 和 zeros(C)。"),
    "running_var_biased": (
        "running_var is updated with the biased batch variance. PyTorch normalises with the biased "
        "variance but stores the unbiased one, var * m / (m - 1) (m values per channel).",
        "running_var 用有偏的批方差更新了。PyTorch 用有偏方差做归一化，但存的是无偏方差 var * m / (m - 1)"
        "（m 为每个通道的取值个数）。"),
    "momentum_convention": (
        "the Keras/TensorFlow momentum convention: running = momentum * running + (1 - momentum) "
        "* batch. In PyTorch momentum is the weight of the new batch: running = (1 - momentum) * "
        "running + momentum * batch.",
        "用了 Keras/TensorFlow 的动量约定：running = momentum * running + (1 - momentum) * batch。"
        "PyTorch 的 momentum 是新批次的权重：running = (1 - momentum) * running + momentum * batch。"),
    "eval_uses_batch_stats": (
        "eval mode normalises with the batch's own statistics. After .eval() BatchNorm uses "
        "running_mean and running_var (check self.training).",
        "评估模式下用了当前批自己的统计量。.eval() 之后 BatchNorm 用 running_mean 和 running_var（看 self.training）。"),
    "unbiased_variance": (
        "training normalises with the unbiased variance (divide by m - 1): BatchNorm normalises "
        "with the biased batch variance (divide by m) and stores the unbiased one.",
        "训练时用无偏方差（除以 m - 1）做了归一化：BatchNorm 用有偏的批方差（除以 m）归一化，存的才是无偏方差。"),
    "running_stats_not_updated": (
        "the running statistics never change in training: update the buffers themselves, in "
        "place (self.running_mean.mul_(1 - momentum).add_(momentum * mean)) or by assigning "
        "self.running_mean = ..., not a local variable.",
        "训练时滑动平均统计量从未改变：应更新缓冲区本身，原地更新（self.running_mean.mul_(1 - momentum)"
        ".add_(momentum * mean)）或赋值给 self.running_mean，而不是一个局部变量。"),
    "updated_in_eval": (
        "the running statistics change in eval mode: eval only reads them.",
        "评估模式下滑动平均统计量也被改变了：评估模式只读取它们。"),
    "mode_from_grad_enabled": (
        "train or eval is decided by torch.is_grad_enabled(): a validation pass run with gradients "
        "on then uses batch statistics and updates the buffers. The mode is self.training, set by "
        ".train() and .eval().",
        "用 torch.is_grad_enabled() 判断训练还是评估：开着梯度跑验证时就会用批统计量并更新缓冲区。"
        "模式由 self.training 决定，由 .train() 和 .eval() 设置。"),
    "buffers_keep_graph": (
        "a running statistic requires grad: it was computed from x with autograd on, so each "
        "step's graph stays attached to the buffer (memory grows, and backward reaches old steps). "
        "Update under torch.no_grad(), or from mean.detach() and var.detach().",
        "滑动平均统计量带有梯度：它是在开启自动求导时由 x 计算出来的，每一步的计算图都挂在缓冲区上"
        "（内存不断增长，反向传播还会走到以前的步骤）。应在 torch.no_grad() 下更新，或用 mean.detach() 和 var.detach()。"),
}


def _bn_catalogue():
    def slip(**kw):
        def make(c, eps, momentum, rank):
            return _SlipBatchNorm(c, eps, momentum, **kw)
        return lambda kind, xs, w, b, momentum: _scenario(make, False, kind, xs, w, b, momentum)

    return mistakes({
        "fresh_running_var_zero": slip(fresh_var=0.0),
        "running_var_biased": slip(biased_running=True),
        "momentum_convention": slip(keras=True),
        "eval_uses_batch_stats": slip(eval_batch=True),
        "unbiased_variance": slip(unbiased_norm=True),
        "running_stats_not_updated": slip(no_update=True),
        "updated_in_eval": slip(update_in_eval=True),
        "mode_from_grad_enabled": slip(grad_mode=True),
        "num_batches_not_counted": slip(count=False),
        "not_registered_buffers": None, "buffers_as_parameters": None,
        "num_batches_tracked_missing": None, "affine_params_missing": None,
        "buffers_keep_graph": None,
    }, extra=_BN_TEXTS)


def check_batch_norm_module(cls: Callable, *, title: str = "batch_norm_module") -> CheckResult:
    r"""Check a BatchNorm layer written as a class, ``cls(num_features, eps=1e-5,
    momentum=0.1)``, an ``nn.Module`` whose ``forward(x)`` takes (N, C, *) input, against
    ``nn.BatchNorm1d`` (``nn.BatchNorm2d`` for 4-D input) built fresh with the same arguments.
    The layer must have parameters ``weight`` and ``bias`` of shape (C,), and three
    **buffers** (``register_buffer``: in the ``state_dict``, moved by ``.to()``/``.double()``,
    not parameters): ``running_mean`` = 0, ``running_var`` = 1, ``num_batches_tracked`` = 0.
    In training it normalises with the batch mean and the biased batch variance, and updates
    ``running = (1 - momentum) * running + momentum * batch`` with the unbiased variance (and
    ``num_batches_tracked += 1``); in eval (``self.training`` False) it uses the buffers.

    Scenarios, float64 (the checker calls ``.double()`` and sets non-trivial weight and bias):
    a fresh layer's buffers (C = 3); eval before any training step on (4, 3); one training
    step on (8, 3) at momentum 0.1; three steps on (4, 2, 5) at momentum 0.3 then eval; a
    (2, 3, 2, 2) step then eval (BatchNorm2d); a validation pass in eval mode with gradients
    on; a state_dict loaded into a fresh layer. Training steps run with autograd on, as in a
    training loop. Lesson 12, section 4 (drill 12)."""
    g = generator(112)

    def data(*shape):
        return randn(*shape, g=g, scale=1.5, offset=2.0, dtype=torch.float64)

    scenarios = [
        ("a fresh layer's buffers (C = 3)", "fresh", (data(4, 3),), 0.1),
        ("eval before any training step, x (4, 3)", "eval_first", (data(4, 3),), 0.1),
        ("one training step, x (8, 3), momentum 0.1", "train", (data(8, 3),), 0.1),
        ("3 training steps on (4, 2, 5), momentum 0.3, then eval", "train",
         (data(4, 2, 5), data(4, 2, 5), data(4, 2, 5), data(3, 2, 5)), 0.3),
        ("(N, C, H, W) = (2, 3, 2, 2): a step, then eval (BatchNorm2d)", "train",
         (data(2, 3, 2, 2), data(2, 3, 2, 2)), 0.1),
        ("a validation pass in eval mode with gradients on, after a step on (6, 3)",
         "validation_with_grad", (data(6, 3), data(5, 3)), 0.1),
        ("state_dict of a trained layer loaded into a fresh one, then eval on (5, 2)",
         "state_dict", (data(6, 2), data(5, 2)), 0.2),
    ]
    cases = []
    for name, kind, xs, momentum in scenarios:
        w, b = affine_params(xs[0].shape[1], g, torch.float64)
        cases.append(Case(name, (kind, xs, w, b, momentum), 1e-6, 1e-6))

    def reference(kind, xs, w, b, momentum):
        return _scenario(_torch_bn, False, kind, xs, w, b, momentum)

    def learner(kind, xs, w, b, momentum):
        def make(c, eps, mom, rank):
            return cls(c, eps=eps, momentum=mom)
        return _scenario(make, True, kind, xs, w, b, momentum)

    return run_cases(title, learner, cases, reference, _bn_catalogue(),
                     against=("nn.BatchNorm1d / nn.BatchNorm2d", "nn.BatchNorm1d / nn.BatchNorm2d"),
                     names=("scenario", "x (each step)", "weight", "bias", "momentum"))


# --------------------------------------------------------------------------------------
# 13. GroupNorm's backward
# --------------------------------------------------------------------------------------
def _gn_grads(dy, x, num_groups, w, eps, *, terms=("mean", "xhat"), unbiased=False, gamma=True,
              interleaved=False, per_channel=False, mean_params=False, param="xhat", eps_on=True):
    """GroupNorm's input and parameter gradients with a switch per slip."""
    x, dy, w = x.double(), dy.double(), w.double()
    n, c = x.shape[:2]
    shape = [1, c] + [1] * (x.dim() - 2)
    g = dy * w.view(shape) if gamma else dy
    if per_channel:
        grouped = lambda t: t.reshape(n, c, -1)  # noqa: E731
    elif interleaved:  # channel k in group k % G: the (C/G, G) axis order
        grouped = lambda t: t.reshape(n, c // num_groups, num_groups, -1).transpose(1, 2).reshape(n, num_groups, -1)  # noqa: E731,E501

        def ungroup(t):
            return t.reshape(n, num_groups, c // num_groups, -1).transpose(1, 2).reshape(x.shape)
    else:
        grouped = lambda t: t.reshape(n, num_groups, -1)  # noqa: E731
    if not interleaved:
        def ungroup(t):
            return t.reshape(x.shape)
    xg, gg = grouped(x), grouped(g)
    m = xg.shape[-1]
    mean = xg.mean(-1, keepdim=True)
    var = ((xg - mean) ** 2).mean(-1, keepdim=True)
    if unbiased:
        var = var * m / (m - 1)
    r = 1 / torch.sqrt(var + (eps if eps_on else 0.0))
    xhat = (xg - mean) * r
    dx = gg
    if "mean" in terms:
        dx = dx - gg.mean(-1, keepdim=True)
    if "xhat" in terms:
        dx = dx - xhat * (gg * xhat).mean(-1, keepdim=True)
    dx = ungroup(r * dx)
    xh = ungroup(xhat)
    dims = [0] + list(range(2, x.dim()))
    src = {"xhat": xh, "x": x, "one": torch.ones_like(x)}[param]
    red = (lambda t: t.mean(dims)) if mean_params else (lambda t: t.sum(dims))
    return dx, red(dy * src), red(dy)


_GN_TEXTS = {
    **_BACKWARD_TEXTS,
    "groups_interleaved": (
        "the groups are taken with the wrong axis order: reshape(N, C // G, G, ...) puts channel k "
        "in group k % G. GroupNorm's groups are blocks of C/G contiguous channels: "
        "reshape(N, G, C // G * spatial).",
        "分组时轴的顺序错了：reshape(N, C // G, G, ...) 把第 k 个通道分到第 k % G 组。GroupNorm 的每组是连续的 "
        "C/G 个通道：reshape(N, G, C // G * spatial)。"),
    "per_channel_statistics": (
        "statistics per channel (InstanceNorm's backward): GroupNorm shares one mean and variance "
        "per sample and group, over C/G channels and all positions.",
        "按通道求了统计量（那是 InstanceNorm 的反向传播）：GroupNorm 每个样本、每组共享一个均值和方差，"
        "覆盖 C/G 个通道和所有位置。"),
}


def check_gn_backward(fn: Callable, *, title: str = "gn_backward") -> CheckResult:
    r"""Check ``fn(grad_output, x, num_groups, weight, eps) -> (grad_input, grad_weight,
    grad_bias)``: GroupNorm's backward for (N, C, *) input (groups of C/G contiguous
    channels, statistics per sample and group over the channels and positions of the group),
    against autograd through ``F.group_norm`` in float64. Within each set of m values,

    .. math:: \frac{\partial L}{\partial x} = r\,(g - \overline{g} - \hat x\,\overline{g\hat x}),
              \quad g = \gamma_c\,\frac{\partial L}{\partial y},\quad
              \frac{\partial L}{\partial\gamma_c} = \sum_{n,\,\mathrm{pos}} \frac{\partial L}{\partial y}\hat x,
              \quad \frac{\partial L}{\partial\beta_c} = \sum_{n,\,\mathrm{pos}} \frac{\partial L}{\partial y}

    (:math:`\gamma` is per channel, so it multiplies before the means over the group).
    Cases, float64: (2, 6, 4) with G = 3, (3, 4, 2, 2) with G = 2, (4, 6) with G = 2, (2, 4, 5)
    with G = 1, and (2, 4, 3) with G = 2 and x ~ 1e-3 (eps matters). Mistakes named: either
    term of the input gradient missing (or both), the unbiased variance, eps or gamma left out,
    groups taken in the wrong axis order, per-channel statistics, parameter gradients averaged,
    summed with x, equal to grad_bias, or of the wrong shape. Lesson 12, section 4 (drill 13)."""
    g = generator(113)
    inputs = []
    for name, shape, groups, scale in (("(N, C, L) = (2, 6, 4), G = 3", (2, 6, 4), 3, 2.0),
                                       ("(N, C, H, W) = (3, 4, 2, 2), G = 2", (3, 4, 2, 2), 2, 2.0),
                                       ("(N, C) = (4, 6), G = 2", (4, 6), 2, 2.0),
                                       ("(N, C, L) = (2, 4, 5), G = 1", (2, 4, 5), 1, 2.0),
                                       ("(2, 4, 3), G = 2, x ~ 1e-3 (eps matters)", (2, 4, 3), 2, 1e-3)):
        x = randn(*shape, g=g, scale=scale, offset=scale / 2, dtype=torch.float64)
        x = x + scale * torch.arange(shape[1], dtype=torch.float64).view(1, -1, *[1] * (len(shape) - 2))
        dy = randn(*shape, g=g, offset=0.3, dtype=torch.float64)
        w, _ = affine_params(shape[1], g, torch.float64)
        inputs.append((name, (dy, x, groups, w, 1e-5)))

    def reference(dy, x, groups, w, eps):
        b = torch.zeros_like(w)
        return _autograd(lambda x_, w_, b_: F.group_norm(x_, groups, w_, b_, eps), dy, x, w, b)

    def slip(**kw):
        return lambda dy, x, G, w, eps: _gn_grads(dy, x, G, w, eps, **kw)

    catalogue = mistakes({
        "missing_mean_term": slip(terms=("xhat",)),
        "missing_xhat_term": slip(terms=("mean",)),
        "statistics_as_constants": slip(terms=()),
        "unbiased_variance": slip(unbiased=True),
        "gamma_missing": slip(gamma=False),
        "eps_missing": slip(eps_on=False),
        "groups_interleaved": slip(interleaved=True),
        "per_channel_statistics": slip(per_channel=True),
        "param_grad_mean": slip(mean_params=True),
        "param_grad_uses_x": slip(param="x"),
        "grad_weight_is_sum_dy": slip(param="one"),
        "param_grad_shape": None,
    }, extra=_GN_TEXTS)
    names = ("grad_input", "grad_weight", "grad_bias")
    shapes = {"grad_input": lambda a: a[1].shape, "grad_weight": lambda a: a[3].shape,
              "grad_bias": lambda a: a[3].shape}
    pick = _picker(names, shapes, {"grad_weight": "param_grad_shape", "grad_bias": "param_grad_shape"})
    return _run(title, fn, names, pick, inputs, reference, catalogue,
                ("autograd through F.group_norm", "经 F.group_norm 的自动求导"),
                arg_names=("grad_output", "x", "num_groups", "weight", "eps"))


# --------------------------------------------------------------------------------------
# 14. DeepNorm's constants and initialisation
# --------------------------------------------------------------------------------------
_PROJECTIONS = ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "ffn.fc1", "ffn.fc2")
_SCALED = ("attn.v_proj", "attn.out_proj", "ffn.fc1", "ffn.fc2")


def _table(n: int, m: int, side: str, *, variant: str = "paper") -> tuple[float, float]:
    """DeepNet's Table 1 and its usual misreadings, (alpha, beta) for ``side``."""
    if variant == "encoder_only_everywhere" or (m == 0 or n == 0) and variant == "paper":
        k = n if side == "encoder" else m
        return (2 * k) ** 0.25, (8 * k) ** -0.25
    if variant == "encdec_decoder_formula":  # (3M)^(1/4), (12M)^(-1/4) for a decoder-only model
        k = m if m else n
        return (3 * k) ** 0.25, (12 * k) ** -0.25
    if variant == "n_m_swapped" and side == "encoder":
        return 0.81 * (m ** 4 * n) ** (1 / 16), 0.87 * (m ** 4 * n) ** (-1 / 16)
    if side == "encoder":
        return 0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16)
    return (3 * m) ** 0.25, (12 * m) ** -0.25


def _default_gain(name: str, d: int = 64, d_ff: int = 256) -> float:
    """nn.Linear's own init (uniform, bound 1/sqrt(fan_in)) as a multiple of Xavier's std."""
    fan_in, fan_out = {"ffn.fc1": (d, d_ff), "ffn.fc2": (d_ff, d)}.get(name, (d, d))
    return (1 / math.sqrt(3 * fan_in)) / math.sqrt(2 / (fan_in + fan_out))


def _deepnorm_vector(n, m, side, *, variant="paper", swap=False, qk_beta=False, no_beta=False,
                     alpha_set=True, scaled_default=False, alpha_8n=False, beta_2n=False,
                     beta_exponent=False):
    """(alpha, beta, block.alpha, then the gain of each projection) under a slip."""
    alpha, beta = _table(n, m, side, variant=variant)
    k = n if side == "encoder" else m
    if alpha_8n:
        alpha = (8 * k) ** 0.25
    if beta_2n:
        beta = (2 * k) ** -0.25
    if beta_exponent:
        beta = (8 * k) ** 0.25
    if swap:
        alpha, beta = beta, alpha
    gains = []
    for name in _PROJECTIONS:
        scaled = name in _SCALED or qk_beta
        gain = beta if scaled and not no_beta else 1.0
        if scaled_default:
            gain = _default_gain(name) * (beta if name in _SCALED else 1.0)
        gains.append(gain)
    return torch.tensor([alpha, beta, alpha if alpha_set else 1.0, *gains], dtype=torch.float64)


_DN_TEXTS = {
    "alpha_beta_swapped": (
        "alpha and beta are swapped: alpha > 1 up-weights the shortcut in LN(alpha x + G(x)); "
        "beta < 1 is the Xavier gain of the FFN, value and output projections.",
        "alpha 和 beta 弄反了：alpha > 1，在 LN(alpha x + G(x)) 中加大恒等捷径的权重；beta < 1，"
        "是 FFN、值投影和输出投影的 Xavier 增益。"),
    "beta_on_qk": (
        "beta is applied to the query and key projections too: DeepNet (Figure 2) scales the FFN "
        "weights and the value and output projections; q_proj and k_proj keep Xavier gain 1 "
        "(scaling both would shrink every attention logit by beta^2).",
        "把 beta 也用在了查询和键的投影上：DeepNet（图 2）缩放的是 FFN 权重以及值投影和输出投影；"
        "q_proj 和 k_proj 的 Xavier 增益保持为 1（两者都缩放会让每个注意力 logit 缩小 beta^2 倍）。"),
    "beta_not_applied": (
        "beta is computed but not applied: the FFN weights and the value and output projections "
        "are Xavier-normal with gain beta, nn.init.xavier_normal_(w, gain=beta).",
        "算出了 beta 却没有使用：FFN 权重以及值投影和输出投影要用增益为 beta 的 Xavier 正态初始化，"
        "nn.init.xavier_normal_(w, gain=beta)。"),
    "scaled_default_init": (
        "the default nn.Linear initialisation is multiplied by beta: its std is 1/sqrt(3 fan_in), "
        "not Xavier's sqrt(2/(fan_in + fan_out)) (labml's DeepNormTransformerLayer does this: "
        "feed_forward.layer1.weight *= deep_norm_beta). DeepNet uses Xavier-normal with gain beta "
        "(gain 1 for q_proj and k_proj).",
        "把 nn.Linear 的默认初始化乘了 beta：它的标准差是 1/sqrt(3 fan_in)，不是 Xavier 的 "
        "sqrt(2/(fan_in + fan_out))（labml 的 DeepNormTransformerLayer 就是这样做的：feed_forward.layer1.weight "
        "*= deep_norm_beta）。DeepNet 用增益为 beta 的 Xavier 正态初始化（q_proj 和 k_proj 增益为 1）。"),
    "alpha_8n": (
        "alpha = (8N)^(1/4): the 8 belongs to beta. For N layers alpha = (2N)^(1/4) and beta = "
        "(8N)^(-1/4) (encoder-only; decoder-only with M).",
        "alpha = (8N)^(1/4)：8 属于 beta。N 层时 alpha = (2N)^(1/4)，beta = (8N)^(-1/4)"
        "（仅编码器；仅解码器用 M）。"),
    "beta_2n": (
        "beta = (2N)^(-1/4): the 2 belongs to alpha. beta = (8N)^(-1/4) (encoder-only; "
        "decoder-only with M).",
        "beta = (2N)^(-1/4)：2 属于 alpha。beta = (8N)^(-1/4)（仅编码器；仅解码器用 M）。"),
    "beta_exponent_sign": (
        "beta = (8N)^(+1/4), larger than 1: the exponent is -1/4, beta = (8N)^(-1/4) < 1 shrinks "
        "the initial weights.",
        "beta = (8N)^(+1/4)，大于 1：指数是 -1/4，beta = (8N)^(-1/4) < 1，用来缩小初始权重。"),
    "encoder_only_formula_in_encdec": (
        "the encoder-only constants used in an encoder-decoder model: there alpha and beta depend "
        "on both depths, encoder alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16); decoder "
        "alpha = (3M)^(1/4), beta = (12M)^(-1/4) (DeepNet, Table 1).",
        "在编码器-解码器模型中用了仅编码器的常数：那里 alpha 和 beta 同时依赖两边的深度，编码器 alpha = "
        "0.81 (N^4 M)^(1/16)，beta = 0.87 (N^4 M)^(-1/16)；解码器 alpha = (3M)^(1/4)，beta = (12M)^(-1/4)"
        "（DeepNet 表 1）。"),
    "encdec_formula_for_decoder_only": (
        "the encoder-decoder decoder's constants, (3M)^(1/4) and (12M)^(-1/4), used for a "
        "decoder-only model: without an encoder, alpha = (2M)^(1/4) and beta = (8M)^(-1/4).",
        "仅解码器模型用了编码器-解码器中解码器的常数 (3M)^(1/4) 和 (12M)^(-1/4)：没有编码器时，"
        "alpha = (2M)^(1/4)，beta = (8M)^(-1/4)。"),
    "n_m_swapped": (
        "N and M are swapped in the encoder-decoder encoder's constants: alpha = 0.81 (N^4 M)^(1/16), "
        "N the number of encoder layers to the fourth power.",
        "编码器-解码器中编码器的常数里把 N 和 M 弄反了：alpha = 0.81 (N^4 M)^(1/16)，四次方的是编码器层数 N。"),
    "alpha_not_set": (
        "block.alpha is not set: the block computes LN(alpha x + G(x)) with its own alpha, which "
        "stays 1 (plain Post-LN) unless the initialisation sets it.",
        "没有设置 block.alpha：块用自己的 alpha 计算 LN(alpha x + G(x))，初始化不设置它就一直是 1（普通的 Post-LN）。"),
}


def check_deepnorm_init(fn: Callable, *, title: str = "deepnorm_init") -> CheckResult:
    r"""Check ``fn(block, num_encoder_layers, num_decoder_layers, side) -> (alpha, beta)``:
    DeepNet's constants (Wang et al. 2022, Table 1) for the ``side`` ("encoder" or "decoder")
    of a model of N encoder and M decoder layers (M = 0: encoder-only, N = 0: decoder-only),
    ``block.alpha`` set to alpha, and Figure 2's initialisation of the block: Xavier-normal with
    gain beta for ``ffn.fc1``, ``ffn.fc2``, ``attn.v_proj`` and ``attn.out_proj``, gain 1 for
    ``attn.q_proj`` and ``attn.k_proj``. The block is a :class:`helpers.transformer.Block`
    (d = 64, 4 heads, d_ff = 256, ``norm_position="deepnorm"``).

    Each weight's standard deviation over its 4,096 or 16,384 entries is measured as a multiple
    of Xavier's :math:`\sqrt{2/(\text{fan\_in}+\text{fan\_out})}` (its sampling error is about
    1 %); a measured gain within 7 % of a gain that a right or known wrong initialisation gives
    that weight is read as that gain (the nearest one). Cases: encoder-only N = 6 and 24, decoder-only M = 12, and both sides
    of an encoder-decoder model with N = 12, M = 6. Mistakes named: alpha and beta swapped,
    beta on q/k, beta not applied, the default init times beta, alpha = (8N)^(1/4), beta =
    (2N)^(-1/4), beta's exponent +1/4, the encoder-only constants in an encoder-decoder model,
    the encoder-decoder decoder's constants for a decoder-only model, N and M swapped, block.alpha
    not set. Lesson 12, section 4 (drill 14)."""
    from ..transformer import Block

    specs = [("encoder-only, N = 6", 6, 0, "encoder"), ("decoder-only, M = 12", 0, 12, "decoder"),
             ("encoder-decoder N = 12, M = 6: the encoder", 12, 6, "encoder"),
             ("encoder-decoder N = 12, M = 6: the decoder", 12, 6, "decoder"),
             ("encoder-only, N = 24", 24, 0, "encoder")]
    cases = [Case(name, (n, m, side, seed), 1e-4, 1e-6)
             for seed, (name, n, m, side) in enumerate(specs)]

    slips = {
        "alpha_beta_swapped": dict(swap=True),
        "beta_on_qk": dict(qk_beta=True),
        "beta_not_applied": dict(no_beta=True),
        "scaled_default_init": dict(scaled_default=True),
        "alpha_8n": dict(alpha_8n=True),
        "beta_2n": dict(beta_2n=True),
        "beta_exponent_sign": dict(beta_exponent=True),
        "encoder_only_formula_in_encdec": dict(variant="encoder_only_everywhere"),
        "encdec_formula_for_decoder_only": dict(variant="encdec_decoder_formula"),
        "n_m_swapped": dict(variant="n_m_swapped"),
        "alpha_not_set": dict(alpha_set=False),
    }

    def applies(key, n, m):
        if key == "encoder_only_formula_in_encdec":
            return n and m
        if key == "encdec_formula_for_decoder_only":
            return not (n and m)
        if key == "n_m_swapped":
            return n and m
        return True

    def vector(key, n, m, side):
        if key is None:
            return _deepnorm_vector(n, m, side)
        return _deepnorm_vector(n, m, side, **slips[key]) if applies(key, n, m) else None

    def reference(n, m, side, seed):
        return vector(None, n, m, side)

    def candidates(n, m, side):  # per projection: the gains a right or known wrong init gives
        vs = [t for t in (vector(k, n, m, side) for k in [None, *slips]) if t is not None]
        return [sorted({round(float(t[3 + i]), 12) for t in vs}) for i in range(len(_PROJECTIONS))]

    def learner(n, m, side, seed):
        torch.manual_seed(1000 + seed)  # inside the engine's fork: the global state is restored
        block = Block(64, 4, 256, norm_position="deepnorm")
        out = fn(block, n, m, side)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise PartError(f"expected a tuple (alpha, beta), got {type(out).__name__}")
        alpha, beta = (float(v) for v in out)
        modules = dict(block.named_modules())
        gains = []
        cands = candidates(n, m, side)
        for name, known in zip(_PROJECTIONS, cands):
            w = modules[name].weight.detach().double()
            fan_out, fan_in = w.shape
            gain = float(w.std()) / math.sqrt(2 / (fan_in + fan_out))
            near = min(known, key=lambda c: abs(gain / c - 1))
            gains.append(near if abs(gain / near - 1) < 0.07 else gain)
        return torch.tensor([alpha, beta, float(block.alpha), *gains], dtype=torch.float64)

    catalogue = mistakes({k: (lambda key: lambda n, m, side, seed: vector(key, n, m, side))(k)
                          for k in slips}, extra=_DN_TEXTS)
    return run_cases(title, learner, cases, reference, catalogue,
                     against=("DeepNet's Table 1 and Figure 2", "DeepNet 的表 1 和图 2"),
                     names=("num_encoder_layers", "num_decoder_layers", "side", "seed"))


# --------------------------------------------------------------------------------------
# 15. a Pre-LN stack with its final norm
# --------------------------------------------------------------------------------------
def _stack(x, layers, final_norm, *, kind="pre", final="end"):
    """A stack of blocks under a placement, and where the final norm goes."""
    if final == "input":
        x = final_norm(x)
    for attn, ffn, n1, n2 in layers:
        if kind == "pre":
            x = x + attn(n1(x))
            x = x + ffn(n2(x))
        elif kind == "post":
            x = n1(x + attn(x))
            x = n2(x + ffn(x))
        elif kind == "normed_shortcut":
            h = n1(x)
            x = h + attn(h)
            h = n2(x)
            x = h + ffn(h)
        elif kind == "swapped":
            x = x + attn(n2(x))
            x = x + ffn(n1(x))
        elif kind == "ffn_first":
            x = x + ffn(n2(x))
            x = x + attn(n1(x))
        elif kind == "branch_output":
            x = x + n1(attn(x))
            x = x + n2(ffn(x))
        elif kind == "no_residual":
            x = attn(n1(x))
            x = ffn(n2(x))
        if final == "each":
            x = final_norm(x)
    return final_norm(x) if final == "end" else x


_STACK_TEXTS = {
    "no_final_norm": (
        "the final norm is missing: in Pre-LN the residual stream is never normalised inside the "
        "blocks and grows with depth, so the stack ends with one more LayerNorm before the head "
        "(GPT-2, section 2.3: 'an additional layer normalization was added after the final "
        "self-attention block').",
        "缺少最后的归一化层：Pre-LN 中残差流在块内从不归一化，并随深度增大，所以整个堆叠在输出头之前还要再接一个 "
        "LayerNorm（GPT-2 第 2.3 节：“在最后一个自注意力块之后增加了一个 LayerNorm”）。"),
    "final_norm_in_each_block": (
        "the final norm is applied after every block: that normalises the residual stream between "
        "blocks (a Post-LN-like stream). It is applied once, after the last block.",
        "最后的归一化在每个块之后都用了一次：这样块与块之间的残差流都被归一化了（类似 Post-LN）。它只在最后一个块之后用一次。"),
    "final_norm_at_input": (
        "the final norm is applied to the input (the embeddings) instead of after the last block.",
        "最后的归一化用在了输入（嵌入）上，而不是最后一个块之后。"),
    "post_ln": (
        "the blocks are Post-LN, LN(x + F(x)): in a Pre-LN block the norm is inside the branch, "
        "x + F(LN(x)).",
        "块写成了 Post-LN，LN(x + F(x))：Pre-LN 块的归一化在分支里面，x + F(LN(x))。"),
    "shortcut_from_normed": (
        "the shortcut starts from the normalised x: LN(x) + F(LN(x)). The residual stream itself "
        "is never normalised in Pre-LN: x + F(LN(x)).",
        "捷径从归一化后的 x 出发：LN(x) + F(LN(x))。Pre-LN 中残差流本身从不归一化：x + F(LN(x))。"),
    "norms_swapped": (
        "norm1 and norm2 are exchanged: norm1 belongs to the attention sub-layer, norm2 to the FFN.",
        "norm1 和 norm2 用反了：norm1 属于注意力子层，norm2 属于前馈子层。"),
    "ffn_first": (
        "the FFN sub-layer comes first: a block applies attention, then the FFN.",
        "前馈子层放在了前面：一个块先做注意力，再做前馈。"),
    "norm_on_branch_output": (
        "the norm is applied to the branch output, x + LN(F(x)): Pre-LN normalises the branch's "
        "input, x + F(LN(x)).",
        "归一化作用在了分支的输出上，x + LN(F(x))：Pre-LN 归一化的是分支的输入，x + F(LN(x))。"),
    "no_residual": (
        "the residual connection is missing: x + F(LN(x)), not F(LN(x)).",
        "缺少残差连接：应为 x + F(LN(x))，而不是 F(LN(x))。"),
}


def check_pre_ln_stack(fn: Callable, *, title: str = "pre_ln_stack") -> CheckResult:
    r"""Check ``fn(x, layers, final_norm)``: a stack of Pre-LN blocks followed by the final norm,

    .. math:: x \leftarrow x + \mathrm{Attn}(\mathrm{LN}_1(x)),\quad
              x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_2(x))\ \text{per block};\quad
              y = \mathrm{LN}_f(x),

    ``layers`` a list of ``(attn, ffn, norm1, norm2)`` tuples taken from the course's
    :class:`helpers.transformer.Block` (the norms are the course's own LayerNorm), ``final_norm``
    a LayerNorm, every parameter non-trivial, float64. Cases: x (2, 5, 8) through 3 blocks, x
    (1, 4, 8) through 1 block, x (2, 3, 8) through 2 blocks with a large input. Mistakes named:
    no final norm, the final norm after every block or on the input, Post-LN blocks, the
    shortcut from the normalised x, norm1 and norm2 swapped, the FFN first, the norm on the
    branch output, no residual. Lesson 12, section 4 (drill 15)."""
    from ..norms import LayerNorm
    from ..transformer import Block

    g = generator(115)
    cases = []
    for name, shape, depth, scale in (("x (2, 5, 8), 3 blocks", (2, 5, 8), 3, 3.0),
                                      ("x (1, 4, 8), 1 block", (1, 4, 8), 1, 1.0),
                                      ("x (2, 3, 8), 2 blocks, large input", (2, 3, 8), 2, 30.0)):
        with torch.random.fork_rng(devices=[]):  # Block's own init draws from the global state
            blocks = [Block(8, 2, 16, norm_position="pre", norm_impl="course").double()
                      for _ in range(depth)]
            final = LayerNorm(8).double()
        with torch.no_grad():
            for module in (*blocks, final):
                for p in module.parameters():
                    p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.4 + 0.1)
            for b in blocks:
                b.norm1.weight.add_(0.8)
                b.norm2.weight.add_(0.8)
            final.weight.add_(0.8)
        layers = [(b.attn, b.ffn, b.norm1, b.norm2) for b in blocks]
        x = randn(*shape, g=g, scale=scale, offset=0.5, dtype=torch.float64)
        cases.append(Case(name, (x, layers, final), 1e-6, 1e-8))

    def slip(**kw):
        return lambda x, layers, final: _stack(x, layers, final, **kw)

    catalogue = mistakes({
        "no_final_norm": slip(final="none"),
        "final_norm_in_each_block": slip(final="each"),
        "final_norm_at_input": slip(final="input"),
        "post_ln": lambda x, l, f: [_stack(x, l, f, kind="post", final="none"),
                                    _stack(x, l, f, kind="post")],
        "shortcut_from_normed": slip(kind="normed_shortcut"),
        "norms_swapped": slip(kind="swapped"),
        "ffn_first": slip(kind="ffn_first"),
        "norm_on_branch_output": slip(kind="branch_output"),
        "no_residual": slip(kind="no_residual"),
    }, extra=_STACK_TEXTS)
    with torch.no_grad():
        return run_cases(title, fn, cases, lambda x, l, f: _stack(x, l, f), catalogue,
                         against=("a Pre-LN stack with its final norm", "带最终归一化的 Pre-LN 堆叠"),
                         names=("x", "layers", "final_norm"))
