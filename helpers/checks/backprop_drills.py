r"""The checkers of lesson 12's whiteboard drills: BatchNorm's and LayerNorm's backward pass,
BatchNorm's forward with its running statistics, folding BatchNorm into a linear layer, and
merging the per-process statistics of synchronised BatchNorm.

Each drill returns several tensors; each tensor of each input is one :class:`Case` (the
case's last argument names the part), so the diagnosis says which result is wrong and which
known mistake it follows. The references are torch itself: autograd through
``F.batch_norm`` / ``F.layer_norm`` in float64, ``F.batch_norm`` updating its buffers,
``torch.nn.utils.fusion.fuse_linear_bn_weights``, and the statistics of the concatenated
shards. A result of the wrong shape or type is a diagnosis too (:class:`PartError`).

Lesson 12, section 4.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.fusion import fuse_linear_bn_weights

from .engine import Case, CheckResult, affine_params, generator, mistakes, randn, run_cases

__all__ = ["check_bn_backward", "check_ln_backward", "check_bn_running_stats",
           "check_fold_bn", "check_sync_bn_merge"]


class PartError(TypeError):
    """A drill's result has the wrong structure: the engine reports :attr:`mistake`."""

    def __init__(self, text: str, mistake: str | None = None):
        super().__init__(text)
        if mistake:
            self.mistake = mistake


def _picker(names: Sequence[str], shapes: dict[str, Callable[[tuple], tuple]] | None = None,
            mistake_for_shape: dict[str, str] | None = None):
    """``pick(out, part, args)``: the named part of a tuple result as a float64 tensor, with
    the structure checked (a tuple of len(names); a tensor of the expected shape)."""
    def pick(out, part: str, args: tuple) -> Tensor:
        if not isinstance(out, (tuple, list)) or len(out) != len(names):
            raise PartError(f"expected a tuple ({', '.join(names)}), got "
                            f"{type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else ""))
        value = out[names.index(part)]
        if not isinstance(value, Tensor):
            value = torch.as_tensor(value, dtype=torch.float64)
        if shapes and part in shapes:
            want = shapes[part](args)
            if tuple(value.shape) != tuple(want):
                raise PartError(f"{part} has shape {tuple(value.shape)}, expected {tuple(want)}",
                                (mistake_for_shape or {}).get(part))
        return value.detach().to(torch.float64)
    return pick


def _run(title, fn, names, pick, inputs, reference, catalogue, against, broadcast_mistake=None,
         arg_names=None):
    """Cases ``(name, args)`` × parts; ``reference(*args)`` and each mistake return the tuple.
    A broadcasting error in ``fn`` is reported as ``broadcast_mistake`` when given."""
    cases = [Case(f"{name}: {part}", (*args, part), 1e-6, 1e-6)
             for name, args in inputs for part in names]
    refs: dict[int, tuple] = {}

    def ref(*a):
        args, part = a[:-1], a[-1]
        key = id(args[0])
        if key not in refs:
            refs[key] = reference(*args)
        return torch.as_tensor(refs[key][names.index(part)], dtype=torch.float64)

    def learner(*a):
        args, part = a[:-1], a[-1]
        try:
            out = fn(*args)
        except RuntimeError as e:
            if broadcast_mistake and "must match the size of tensor" in str(e):
                raise PartError(str(e).splitlines()[0], broadcast_mistake) from e
            raise
        return pick(out, part, args)

    def wrap(bad):
        def one(*a):
            args, part = a[:-1], a[-1]
            out = bad(*args)
            return None if out is None else torch.as_tensor(out[names.index(part)], dtype=torch.float64)
        return one

    catalogue = [type(m)(m.key, m.en, m.zh, wrap(m.fn) if m.fn else None) for m in catalogue]
    return run_cases(title, learner, cases, ref, catalogue, against=against,
                     names=None if arg_names is None else (*arg_names, "part"))


# --------------------------------------------------------------------------------------
# the backward passes
# --------------------------------------------------------------------------------------
def _autograd(forward, dy, x, w, b):
    x, w, b = (t.detach().double().requires_grad_() for t in (x, w, b))
    with torch.enable_grad():
        y = forward(x, w, b)
        return torch.autograd.grad(y, (x, w, b), dy.double())


def _norm_backward(dy, x, w, eps, dims, pshape, *, terms=("mean", "xhat"), unbiased=False,
                   gamma=True, param_mean=False, param_x=False):
    """The input and parameter gradients of a mean/variance norm over ``dims`` with switches
    for each slip: ``terms`` kept in ``r (g - mean(g) - x̂ mean(g x̂))``, the unbiased
    variance, gamma left out of g, parameter gradients averaged instead of summed, x
    instead of x̂ in grad_weight."""
    x, dy = x.double(), dy.double()
    n = 1
    for d in dims:
        n *= x.shape[d]
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square().mean(dims, keepdim=True)
    if unbiased:
        var = var * n / (n - 1)
    r = 1 / torch.sqrt(var + eps)
    xhat = (x - mean) * r
    g = dy * w.double().reshape(pshape) if gamma else dy
    dx = g
    if "mean" in terms:
        dx = dx - g.mean(dims, keepdim=True)
    if "xhat" in terms:
        dx = dx - xhat * (g * xhat).mean(dims, keepdim=True)
    return r * dx, xhat


_BACKWARD_TEXTS = {
    "missing_mean_term": (
        "grad_input lacks the term -mean(g) (g = gamma * grad_output): the gradient that flows "
        "through the mean. dL/dx = r (g - mean(g) - x_hat mean(g x_hat)); without it the input "
        "gradient no longer sums to zero over the set.",
        "grad_input 少了 -mean(g) 这一项（g = gamma * grad_output），即经过均值回传的梯度。"
        "dL/dx = r (g - mean(g) - x_hat mean(g x_hat))；少了它，输入梯度在集合上的和就不再为零。"),
    "missing_xhat_term": (
        "grad_input lacks the term -x_hat * mean(g * x_hat): the gradient that flows through "
        "the variance. dL/dx = r (g - mean(g) - x_hat mean(g x_hat)).",
        "grad_input 少了 -x_hat * mean(g * x_hat) 这一项，即经过方差回传的梯度。"
        "dL/dx = r (g - mean(g) - x_hat mean(g x_hat))。"),
    "statistics_as_constants": (
        "grad_input is r * g: the mean and the variance are treated as constants. Both depend "
        "on x: dL/dx = r (g - mean(g) - x_hat mean(g x_hat)).",
        "grad_input 只是 r * g：把均值和方差当成了常数。它们都依赖 x："
        "dL/dx = r (g - mean(g) - x_hat mean(g x_hat))。"),
    "gamma_missing": (
        "gamma (weight) is left out of grad_input: the chain rule goes through y = gamma x_hat "
        "+ beta first, so g = gamma * grad_output.",
        "grad_input 中漏了 gamma（weight）：链式法则先经过 y = gamma x_hat + beta，"
        "所以 g = gamma * grad_output。"),
    "param_grad_mean": (
        "grad_weight / grad_bias are averaged instead of summed: a parameter shared by many "
        "elements receives the sum of their gradients.",
        "grad_weight / grad_bias 取了平均而不是求和：被许多元素共享的参数，得到的是它们梯度的和。"),
    "param_grad_uses_x": (
        "grad_weight sums grad_output * x; it multiplies x_hat, so sum(grad_output * x_hat).",
        "grad_weight 用了 grad_output * x 求和；weight 乘的是 x_hat，应为 sum(grad_output * x_hat)。"),
    "grad_weight_is_sum_dy": (
        "grad_weight is the sum of grad_output (that is grad_bias): weight multiplies x_hat, so "
        "grad_weight = sum(grad_output * x_hat).",
        "grad_weight 取成了 grad_output 之和（那是 grad_bias）：weight 乘的是 x_hat，"
        "所以 grad_weight = sum(grad_output * x_hat)。"),
    "eps_missing": (
        "eps is left out of r = 1 / sqrt(var + eps): the forward pass divides by sqrt(var + eps), "
        "so its backward does too.",
        "r = 1 / sqrt(var + eps) 中漏了 eps：前向除以 sqrt(var + eps)，反向也一样。"),
    "param_grad_shape": (
        "a parameter gradient has the wrong shape: it must have the parameter's shape, summed "
        "over every dim that shares the parameter.",
        "参数梯度的形状不对：它必须与参数形状相同，在共享该参数的所有维度上求和。"),
    "per_sample_axes": (
        "statistics per sample (over the features): that is LayerNorm's backward. BatchNorm "
        "shares one mean and variance per channel over the batch (and positions): dim=(0, 2, ...).",
        "按样本（在特征上）求统计量：那是 LayerNorm 的反向传播。BatchNorm 每个通道在整个批"
        "（及所有位置）上共享一个均值和方差：dim=(0, 2, ...)。"),
    "per_feature_axes": (
        "statistics per feature over the batch: that is BatchNorm's backward. LayerNorm "
        "normalises each token over its own features: means over dim=-1.",
        "按特征在批上求统计量：那是 BatchNorm 的反向传播。LayerNorm 在每个 token 自己的特征上"
        "归一化：在 dim=-1 上求均值。"),
}


def _backward_catalogue(dims_fn, pshape_fn, lead_fn, wrong_axes_key, wrong_dims_fn):
    def grads(dy, x, w, eps, *, dims=None, mean_param=False, x_param=False, dy_param=False, **kw):
        d = dims_fn(x) if dims is None else dims
        dx, xhat = _norm_backward(dy, x, w, eps, d, pshape_fn(x), **kw)
        lead = lead_fn(x)
        dyd = dy.double()
        src = x.double() if x_param else (torch.ones_like(xhat) if dy_param else xhat)
        if mean_param:
            return dx, (dyd * src).mean(lead), dyd.mean(lead)
        return dx, (dyd * src).sum(lead), dyd.sum(lead)

    def slip(**kw):
        return lambda dy, x, w, eps: grads(dy, x, w, eps, **kw)

    def wrong_axes(dy, x, w, eps):
        try:
            return grads(dy, x, w, eps, dims=wrong_dims_fn(x))
        except RuntimeError:
            return None

    return mistakes({
        "missing_mean_term": slip(terms=("xhat",)),
        "missing_xhat_term": slip(terms=("mean",)),
        "statistics_as_constants": slip(terms=()),
        "unbiased_variance": slip(unbiased=True),
        "gamma_missing": slip(gamma=False),
        "param_grad_mean": slip(mean_param=True),
        "param_grad_uses_x": slip(x_param=True),
        "grad_weight_is_sum_dy": slip(dy_param=True),
        "eps_missing": lambda dy, x, w, eps: grads(dy, x, w, 0.0),
        wrong_axes_key: wrong_axes,
        "param_grad_shape": None,  # reported by the shape check of the result
    }, extra=_BACKWARD_TEXTS)


def _bn_dims(x: Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


def _bn_pshape(x: Tensor) -> list[int]:
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _backward_inputs(seed: int, cases, feature_dim: int) -> list:
    """(name, (grad_output, x, weight, eps)) for each (name, shape) of ``cases``, in float64:
    an input with a spread of 2 around 1, an upstream gradient with a mean of 0.3, and a
    gain per feature along ``feature_dim``."""
    g = generator(seed)
    inputs = []
    for name, shape, *scale in cases:
        s = scale[0] if scale else 2.0
        x = randn(*shape, g=g, scale=s, offset=s / 2, dtype=torch.float64)
        dy = randn(*shape, g=g, offset=0.3, dtype=torch.float64)
        w, _ = affine_params(shape[feature_dim], g, torch.float64)
        inputs.append((name, (dy, x, w, 1e-5)))
    return inputs


def check_bn_backward(fn: Callable, *, title: str = "bn_backward") -> CheckResult:
    r"""Check ``fn(grad_output, x, weight, eps) -> (grad_input, grad_weight, grad_bias)``: the
    backward pass of training-mode BatchNorm (statistics per channel, dim 1, over every other
    dim) of (N, C) or (N, C, L) input, against autograd through ``F.batch_norm`` in float64.

    .. math:: \frac{\partial L}{\partial x} = r\,(g - \overline{g} - \hat x\,\overline{g\hat x}),
              \quad g = \gamma\,\frac{\partial L}{\partial y},\quad
              \frac{\partial L}{\partial\gamma} = \sum \frac{\partial L}{\partial y}\hat x,\quad
              \frac{\partial L}{\partial\beta} = \sum \frac{\partial L}{\partial y}

    Cases: (N, C) = (8, 3) and (4, 4), (N, C, L) = (3, 2, 5), and (6, 2) with x ~ 1e-3
    (where eps matters), float64. Mistakes named: either term of the input gradient missing,
    or both (statistics treated as constants), the unbiased variance, eps left out, gamma
    left out, parameter gradients averaged or summed with x instead of x̂, grad_weight equal
    to grad_bias (the sum of grad_output), per-sample (LayerNorm) axes, a parameter gradient
    of the wrong shape, a backward written for (N, C) only. Lesson 12, section 4 (drill 6)."""
    inputs = _backward_inputs(61, (("(N, C) = (8, 3)", (8, 3)), ("(N, C) = (4, 4)", (4, 4)),
                                   ("(N, C, L) = (3, 2, 5)", (3, 2, 5)),
                                   ("(N, C) = (6, 2), x ~ 1e-3 (eps matters)", (6, 2), 1e-3)),
                              feature_dim=1)

    def reference(dy, x, w, eps):
        b = torch.zeros_like(w)
        return _autograd(lambda x_, w_, b_: F.batch_norm(x_, None, None, w_, b_, True, 0.1, eps),
                         dy, x, w, b)

    names = ("grad_input", "grad_weight", "grad_bias")
    shapes = {"grad_input": lambda a: a[1].shape, "grad_weight": lambda a: a[2].shape,
              "grad_bias": lambda a: a[2].shape}
    pick = _picker(names, shapes, {"grad_weight": "param_grad_shape", "grad_bias": "param_grad_shape"})
    catalogue = _backward_catalogue(_bn_dims, _bn_pshape, _bn_dims, "per_sample_axes",
                                    lambda x: list(range(1, x.dim())))
    return _run(title, fn, names, pick, inputs, reference, catalogue,
                ("autograd through F.batch_norm", "经 F.batch_norm 的自动求导"),
                arg_names=("grad_output", "x", "weight", "eps"))


def check_ln_backward(fn: Callable, *, title: str = "ln_backward") -> CheckResult:
    r"""Check ``fn(grad_output, x, weight, eps) -> (grad_input, grad_weight, grad_bias)``: the
    backward pass of LayerNorm over the last dim of (N, d) or (B, T, d) input, against
    autograd through ``F.layer_norm`` in float64. The input gradient has BatchNorm's formula
    with means over the d features of each token; the parameter gradients sum over every
    leading dim and have shape (d,). Cases: (N, d) = (3, 8) and (4, 4), (B, T, d) =
    (2, 3, 5), and (2, 6) with x ~ 1e-3, float64. Mistakes as :func:`check_bn_backward`, with
    per-feature (BatchNorm) axes instead. Lesson 12, section 4 (drill 7)."""
    inputs = _backward_inputs(62, (("(N, d) = (3, 8)", (3, 8)), ("(N, d) = (4, 4)", (4, 4)),
                                   ("(B, T, d) = (2, 3, 5)", (2, 3, 5)),
                                   ("(N, d) = (2, 6), x ~ 1e-3 (eps matters)", (2, 6), 1e-3)),
                              feature_dim=-1)

    def reference(dy, x, w, eps):
        b = torch.zeros_like(w)
        return _autograd(lambda x_, w_, b_: F.layer_norm(x_, (x_.shape[-1],), w_, b_, eps),
                         dy, x, w, b)

    names = ("grad_input", "grad_weight", "grad_bias")
    shapes = {"grad_input": lambda a: a[1].shape, "grad_weight": lambda a: a[2].shape,
              "grad_bias": lambda a: a[2].shape}
    pick = _picker(names, shapes, {"grad_weight": "param_grad_shape", "grad_bias": "param_grad_shape"})
    catalogue = _backward_catalogue(lambda x: [x.dim() - 1], lambda x: [x.shape[-1]],
                                    lambda x: list(range(x.dim() - 1)), "per_feature_axes",
                                    lambda x: list(range(x.dim() - 1)))
    return _run(title, fn, names, pick, inputs, reference, catalogue,
                ("autograd through F.layer_norm", "经 F.layer_norm 的自动求导"),
                arg_names=("grad_output", "x", "weight", "eps"))


# --------------------------------------------------------------------------------------
# BatchNorm's forward with running statistics
# --------------------------------------------------------------------------------------
def _bn_forward(x, w, b, rm, rv, training, momentum, eps, *, store_biased=False,
                normalise_unbiased=False, keras=False, eval_batch=False, train_running=False,
                no_update=False, update_in_eval=False, eps_outside=False, fresh_var=1.0,
                fresh_mean=0.0):
    """BatchNorm forward returning (y, running_mean, running_var), with a switch per slip;
    ``None`` buffers (a freshly built layer) start at ``fresh_mean`` and ``fresh_var``."""
    x = x.double()
    dims = _bn_dims(x)
    shape = _bn_pshape(x)
    c = x.shape[1]
    rm = torch.full((c,), fresh_mean, dtype=torch.float64) if rm is None else rm
    rv = torch.full((c,), fresh_var, dtype=torch.float64) if rv is None else rv
    rm, rv = rm.double(), rv.double()
    batch = training or eval_batch or update_in_eval
    if batch:
        mean = x.mean(dims, keepdim=True)
        var = (x - mean).square().mean(dims, keepdim=True)
        n = x.numel() // x.shape[1]
        unb = var * n / (n - 1)
    if training or update_in_eval:
        new = var if store_biased else unb
        if not no_update:
            keep = momentum if keras else 1 - momentum
            rm_new = keep * rm + (1 - keep) * mean.reshape(-1)
            rv_new = keep * rv + (1 - keep) * new.reshape(-1)
        else:
            rm_new, rv_new = rm, rv
    else:
        rm_new, rv_new = rm, rv
    if (training and not train_running) or (not training and eval_batch):
        m, v = mean, (unb if normalise_unbiased else var)
    else:
        m, v = rm.reshape(shape), rv.reshape(shape)
    denom = v.sqrt() + eps if eps_outside else (v + eps).sqrt()
    y = (x - m) / denom * w.double().reshape(shape) + b.double().reshape(shape)
    return y, rm_new, rv_new


def check_bn_running_stats(fn: Callable, *, title: str = "bn_running_stats") -> CheckResult:
    r"""Check ``fn(x, weight, bias, running_mean, running_var, training, momentum, eps)
    -> (y, new_running_mean, new_running_var)``: BatchNorm's forward with its running
    statistics, against ``F.batch_norm`` updating its buffers (what ``nn.BatchNorm1d`` does).

    Training: normalise with the batch mean and the **biased** batch variance, and update
    ``running = (1 - momentum) * running + momentum * batch`` with the **unbiased** variance.
    Eval: normalise with the running statistics, leave them unchanged. ``running_mean`` and
    ``running_var`` of ``None`` stand for a freshly built layer: the function creates them
    as ``nn.BatchNorm1d`` does (zeros and ones, shape (C,)), then updates them. (The function
    may update the buffers in place or return new tensors; the inputs are fresh copies each
    time.) Cases, float64: (N, C) = (6, 3) and (N, C, L) = (3, 2, 4) in training at momentum
    0.1 and 0.3, eval on (5, 3), a chain of three training steps on (4, 2) followed by eval,
    and a fresh layer (None buffers) trained for one step on (4, 3) then evaluated.
    Lesson 12, section 4 (drill 8)."""
    g = generator(63)
    inputs = []

    def add(name, shape, training, momentum, steps=1, fresh=False):
        c = shape[1]
        xs = tuple(randn(*shape, g=g, scale=1.5, offset=2.0, dtype=torch.float64)
                   for _ in range(steps))
        w, b = affine_params(c, g, torch.float64)
        rm = randn(c, g=g, scale=0.5, dtype=torch.float64)
        rv = torch.rand(c, generator=g, dtype=torch.float64) + 0.5
        if fresh:
            rm = rv = None
        inputs.append((name, (xs, w, b, rm, rv, training, momentum, 1e-5)))

    add("train, (N, C) = (6, 3), momentum 0.1", (6, 3), True, 0.1)
    add("train, (N, C, L) = (3, 2, 4), momentum 0.3", (3, 2, 4), True, 0.3)
    add("eval, (N, C) = (5, 3)", (5, 3), False, 0.1)
    add("3 train steps then eval, (N, C) = (4, 2), momentum 0.2", (4, 2), True, 0.2, steps=4)
    add("fresh layer (buffers None): 1 train step then eval, (N, C) = (4, 3), momentum 0.1",
        (4, 3), True, 0.1, steps=2, fresh=True)

    def chain(step):
        """Run ``step`` over the case: one call, or train steps then an eval call."""
        def cl(t):
            return None if t is None else t.clone()

        def run(xs, w, b, rm, rv, training, momentum, eps):
            if len(xs) == 1:
                return step(xs[0].clone(), w.clone(), b.clone(), cl(rm), cl(rv),
                            training, momentum, eps)
            for x in xs[:-1]:
                out = step(x.clone(), w.clone(), b.clone(), cl(rm), cl(rv), True,
                           momentum, eps)
                if out is None:
                    return None
                rm, rv = (torch.as_tensor(t).detach().to(torch.float64) for t in out[1:])
            return step(xs[-1].clone(), w.clone(), b.clone(), cl(rm), cl(rv), False,
                        momentum, eps)
        return run

    def torch_step(x, w, b, rm, rv, training, momentum, eps):
        c = x.shape[1]  # a fresh layer: nn.BatchNorm1d's zeros and ones
        rm = torch.zeros(c, dtype=x.dtype) if rm is None else rm.clone()
        rv = torch.ones(c, dtype=x.dtype) if rv is None else rv.clone()
        y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
        return y, rm, rv

    names = ("y", "running_mean", "running_var")
    shapes = {"y": lambda a: a[0][-1].shape, "running_mean": lambda a: a[0][-1].shape[1:2],
              "running_var": lambda a: a[0][-1].shape[1:2]}
    pick = _picker(names, shapes)

    def learner_step(x, w, b, rm, rv, training, momentum, eps):
        try:
            out = fn(x, w, b, rm, rv, training, momentum, eps)
        except (TypeError, AttributeError) as e:
            if rm is None and "NoneType" in str(e):  # the buffers of a fresh layer not created
                raise PartError(f"{type(e).__name__}: {e}".splitlines()[0],
                                "fresh_buffers_missing") from e
            raise
        if rm is None and isinstance(out, (tuple, list)) and len(out) == 3 and (
                out[1] is None or out[2] is None):
            raise PartError("returned None for a running statistic of a fresh layer",
                            "fresh_buffers_missing")
        # the learner may update in place and return the same tensors: pick checks structure
        return tuple(pick(out, n, ((x,), w, b, rm)) for n in names)

    def slip(**kw):
        return chain(lambda *a: _bn_forward(*a, **kw))

    catalogue = mistakes({
        "running_var_biased": slip(store_biased=True),
        "unbiased_variance": slip(normalise_unbiased=True),
        "momentum_convention": slip(keras=True),
        "eval_uses_batch_stats": slip(eval_batch=True),
        "train_uses_running_stats": slip(train_running=True),
        "running_stats_not_updated": slip(no_update=True),
        "updated_in_eval": slip(update_in_eval=True),
        "eps_outside_sqrt": slip(eps_outside=True),
        "fresh_running_var_zero": slip(fresh_var=0.0),
        "fresh_buffers_swapped": slip(fresh_var=0.0, fresh_mean=1.0),
        "fresh_buffers_missing": None,
    }, extra={
        "fresh_running_var_zero": (
            "a fresh layer's running_var starts at 0: nn.BatchNorm1d starts it at 1 (and "
            "running_mean at 0), so that a layer evaluated before any training step divides by "
            "sqrt(1 + eps), not by sqrt(eps).",
            "新建层的 running_var 从 0 开始了：nn.BatchNorm1d 让它从 1 开始（running_mean 从 0 开始），"
            "这样在任何训练步之前评估时除以的是 sqrt(1 + eps)，而不是 sqrt(eps)。"),
        "fresh_buffers_swapped": (
            "a fresh layer's buffers are swapped: running_mean starts at 0 and running_var at 1, "
            "as in nn.BatchNorm1d.",
            "新建层的两个缓冲区初始值弄反了：running_mean 从 0 开始，running_var 从 1 开始，与 nn.BatchNorm1d 相同。"),
        "fresh_buffers_missing": (
            "running_mean and running_var of None stand for a freshly built layer: create them "
            "first, torch.zeros(C) and torch.ones(C) (what nn.BatchNorm1d registers), then update them.",
            "running_mean 和 running_var 为 None 表示新建的层：先创建它们，torch.zeros(C) 和 torch.ones(C)"
            "（nn.BatchNorm1d 注册的就是这两个），再更新。"),
        "running_var_biased": (
            "running_var is updated with the biased batch variance. PyTorch normalises with the "
            "biased variance but stores the unbiased one, var * m / (m - 1) (m values per "
            "channel); otherwise eval-mode outputs are too large by sqrt(m / (m - 1)).",
            "running_var 用有偏的批方差更新了。PyTorch 用有偏方差做归一化，但存的是无偏方差 "
            "var * m / (m - 1)（m 为每个通道的取值个数）；否则评估模式的输出会偏大 sqrt(m / (m - 1)) 倍。"),
        "momentum_convention": (
            "the Keras/TensorFlow momentum convention: running = momentum * running + "
            "(1 - momentum) * batch. In PyTorch momentum is the weight of the new batch: "
            "running = (1 - momentum) * running + momentum * batch.",
            "用了 Keras/TensorFlow 的动量约定：running = momentum * running + (1 - momentum) * batch。"
            "PyTorch 的 momentum 是新批次的权重：running = (1 - momentum) * running + momentum * batch。"),
        "eval_uses_batch_stats": (
            "eval mode normalises with the batch's own statistics. After model.eval() BatchNorm "
            "uses running_mean and running_var, so a sample's output does not depend on its batch.",
            "评估模式下用了当前批自己的统计量。model.eval() 之后 BatchNorm 用 running_mean 和 "
            "running_var，样本的输出不再依赖它所在的批。"),
        "train_uses_running_stats": (
            "training mode normalises with the running statistics. In training BatchNorm "
            "normalises with the batch mean and biased batch variance, and only updates the "
            "running ones.",
            "训练模式下用了滑动平均统计量做归一化。训练时 BatchNorm 用批均值和有偏的批方差归一化，"
            "滑动平均统计量只是被更新。"),
        "running_stats_not_updated": (
            "the running statistics are not updated in training mode: return (or update in "
            "place) (1 - momentum) * running + momentum * batch.",
            "训练模式下没有更新滑动平均统计量：应返回（或原地更新为）"
            "(1 - momentum) * running + momentum * batch。"),
        "updated_in_eval": (
            "the running statistics change in eval mode. Eval only reads them.",
            "评估模式下滑动平均统计量也被改变了。评估模式只读取它们。"),
    })

    def pick_any(out, part, args):
        return out[names.index(part)]

    return _run(title, chain(learner_step), names, pick_any, inputs, chain(torch_step), catalogue,
                ("F.batch_norm with its buffers", "带缓冲区的 F.batch_norm"),
                arg_names=("x (each step)", "weight", "bias", "running_mean", "running_var", "training",
                           "momentum", "eps"))


# --------------------------------------------------------------------------------------
# folding BatchNorm into the linear layer before it
# --------------------------------------------------------------------------------------
def _fold(W, b, gamma, beta, rm, rv, eps, *, no_eps=False, variance=False, no_mean=False,
          drop_bias=False, columns=False, fixed_eps=None, no_beta=False, bias_unscaled=False):
    W, b, gamma, beta, rm, rv = (t.double() for t in (W, b, gamma, beta, rm, rv))
    e = 0.0 if no_eps else (fixed_eps if fixed_eps is not None else eps)
    denom = (rv + e) if variance else (rv + e).sqrt()
    s = gamma / denom
    if columns:
        if W.shape[0] != W.shape[1]:
            return None
        Wf = W * s[None, :]
    else:
        Wf = W * s[:, None]
    bias = torch.zeros_like(b) if drop_bias else b
    bf = (bias if no_mean else bias - rm) * s + (0 if no_beta else beta)
    if bias_unscaled:
        bf = b - rm * s + beta
    return Wf, bf


def check_fold_bn(fn: Callable, *, title: str = "fold_bn") -> CheckResult:
    r"""Check ``fn(weight, bias, bn_weight, bn_bias, running_mean, running_var, eps)
    -> (folded_weight, folded_bias)``: an ``nn.Linear`` (weight (out, in), bias (out,))
    followed by an eval-mode BatchNorm1d folded into one linear layer, against
    ``torch.nn.utils.fusion.fuse_linear_bn_weights``:

    .. math:: s = \gamma/\sqrt{\hat\sigma^2 + \epsilon},\quad W' = s \odot W \text{ (row c by } s_c),
              \quad b' = s\,(b - \hat\mu) + \beta

    Mistakes named: eps left out, the variance instead of the standard deviation, the running
    mean or the layer's bias left out of b', the scale applied to the columns (inputs), eps
    hard-coded instead of the layer's. Cases: Linear(5, 4), a square Linear(4, 4), and
    eps = 1e-3 with small running variances. Lesson 12, section 4 (drill 9)."""
    g = generator(64)
    inputs = []
    for name, (out_f, in_f), eps, small in (("Linear(5, 4)", (4, 5), 1e-5, False),
                                            ("square Linear(4, 4)", (4, 4), 1e-5, False),
                                            ("eps = 1e-3, small running_var", (3, 6), 1e-3, True)):
        W = randn(out_f, in_f, g=g, dtype=torch.float64)
        b = randn(out_f, g=g, dtype=torch.float64)
        gamma, beta = affine_params(out_f, g, torch.float64)
        rm = randn(out_f, g=g, scale=2.0, dtype=torch.float64)
        rv = torch.rand(out_f, generator=g, dtype=torch.float64) * (1e-3 if small else 1.0) + (
            1e-4 if small else 0.5)
        inputs.append((name, (W, b, gamma, beta, rm, rv, eps)))

    def reference(W, b, gamma, beta, rm, rv, eps):
        return fuse_linear_bn_weights(W, b, rm, rv, eps, gamma, beta)

    def slip(**kw):
        return lambda *a: _fold(*a, **kw)

    names = ("folded_weight", "folded_bias")
    shapes = {"folded_weight": lambda a: a[0].shape, "folded_bias": lambda a: a[1].shape}
    catalogue = mistakes({
        "fold_eps_missing": slip(no_eps=True),
        "fold_variance_not_std": slip(variance=True),
        "fold_mean_missing": slip(no_mean=True),
        "fold_linear_bias_dropped": slip(drop_bias=True),
        "fold_scale_on_columns": slip(columns=True),
        "fold_eps_hard_coded": lambda *a: None if a[-1] == 1e-5 else _fold(*a, fixed_eps=1e-5),
        "fold_beta_missing": slip(no_beta=True),
        "fold_linear_bias_unscaled": slip(bias_unscaled=True),
    }, extra={
        "fold_beta_missing": (
            "BatchNorm's shift beta (bn_bias) is left out of the folded bias: b' = s * (b - "
            "running_mean) + beta.",
            "折叠后的偏置漏了 BatchNorm 的平移 beta（bn_bias）：b' = s * (b - running_mean) + beta。"),
        "fold_linear_bias_unscaled": (
            "the linear layer's bias is added unscaled: BatchNorm scales the whole pre-activation "
            "W x + b by s, so b' = s * (b - running_mean) + beta.",
            "线性层的偏置没有乘缩放系数：BatchNorm 把整个 W x + b 乘以 s，所以 b' = s * (b - running_mean) + beta。"),
        "fold_eps_missing": (
            "eps is left out: the scale is gamma / sqrt(running_var + eps), with the BatchNorm "
            "layer's eps (it matters when running_var is small).",
            "漏了 eps：缩放系数是 gamma / sqrt(running_var + eps)，eps 取该 BatchNorm 层自己的值"
            "（running_var 很小时影响很大）。"),
        "fold_variance_not_std": (
            "divided by running_var + eps instead of its square root: s = gamma / "
            "sqrt(running_var + eps).",
            "除以了 running_var + eps 而不是它的平方根：s = gamma / sqrt(running_var + eps)。"),
        "fold_mean_missing": (
            "the running mean is left out of the bias: b' = s * (b - running_mean) + beta.",
            "偏置中漏了滑动平均的均值：b' = s * (b - running_mean) + beta。"),
        "fold_linear_bias_dropped": (
            "the linear layer's own bias is dropped: b' = s * (b - running_mean) + beta keeps "
            "it, scaled by s.",
            "丢掉了线性层自己的偏置：b' = s * (b - running_mean) + beta 保留了它，并乘以 s。"),
        "fold_scale_on_columns": (
            "the scale multiplies the columns of W (the inputs). BatchNorm scales each output "
            "channel c, i.e. row c: W * s[:, None].",
            "缩放系数乘在了 W 的列（输入）上。BatchNorm 缩放的是每个输出通道 c，即第 c 行：W * s[:, None]。"),
        "fold_eps_hard_coded": (
            "eps is hard-coded (1e-5) instead of the eps argument: use the BatchNorm layer's own "
            "eps (Keras uses 1e-3, for example).",
            "eps 被写死成了 1e-5，没有用传入的 eps：应使用该 BatchNorm 层自己的 eps（例如 Keras 用 1e-3）。"),
    })
    return _run(title, fn, names, _picker(names, shapes), inputs, reference, catalogue,
                ("torch.nn.utils.fusion.fuse_linear_bn_weights", "torch.nn.utils.fusion.fuse_linear_bn_weights"),
                broadcast_mistake="fold_scale_on_columns",
                arg_names=("weight", "bias", "bn_weight", "bn_bias", "running_mean", "running_var", "eps"))


# --------------------------------------------------------------------------------------
# synchronised BatchNorm: merging per-process statistics
# --------------------------------------------------------------------------------------
def _merge(counts, means, vars_, *, weighted=True, between=True, plain_average=False,
           swap=False, same=False, between_unweighted=False, process_count=False):
    n = counts.double()
    total = n.sum()
    means, vars_ = means.double(), vars_.double()
    mean = (n[:, None] * means).sum(0) / total if weighted else means.mean(0)
    if plain_average:
        var = vars_.mean(0)
    else:
        var = (n[:, None] * vars_).sum(0) / total
        if between:
            nb = torch.ones_like(n) if between_unweighted else n
            var = var + (nb[:, None] * (means - mean).square()).sum(0) / total
    k = torch.tensor(float(len(n)), dtype=torch.float64)
    unbiased = var if same else (var * k / (k - 1) if process_count else var * total / (total - 1))
    if swap:
        var, unbiased = unbiased, var
    return mean, var, unbiased


def check_sync_bn_merge(fn: Callable, *, title: str = "sync_bn_merge") -> CheckResult:
    r"""Check ``fn(counts, means, vars) -> (mean, var, var_unbiased)``: each of K processes
    holds ``counts[k]`` samples of C channels, their per-channel ``means[k]`` and **biased**
    ``vars[k]`` (shapes (K,), (K, C), (K, C)); return the global mean and biased variance (what
    synchronised BatchNorm normalises with) and the unbiased variance (what it stores in
    ``running_var``), against the statistics of the concatenated shards:

    .. math:: N = \sum_k n_k,\quad \mu = \tfrac1N\sum_k n_k\mu_k,\quad
              \sigma^2 = \tfrac1N\sum_k n_k\big(\sigma_k^2 + (\mu_k - \mu)^2\big),\quad
              s^2 = \tfrac{N}{N-1}\sigma^2

    Cases: uneven counts (7, 2, 4) with shard means apart, and four shards one of which holds
    a single sample (variance 0). Mistakes: means averaged without counts, the between-group
    term left out, the variances simply averaged, biased and unbiased swapped or equal.
    Lesson 12, section 4 (drill 10); lesson 08, section 2."""
    g = generator(65)
    inputs = []
    for name, sizes in (("counts (7, 2, 4)", (7, 2, 4)), ("counts (1, 5, 3, 8)", (1, 5, 3, 8))):
        shards = [randn(n, 3, g=g, scale=1.0 + k, offset=3.0 * k, dtype=torch.float64)
                  for k, n in enumerate(sizes)]
        counts = torch.tensor([float(n) for n in sizes], dtype=torch.float64)
        means = torch.stack([s.mean(0) for s in shards])
        vars_ = torch.stack([(s - s.mean(0)).square().mean(0) for s in shards])
        inputs.append((name, (counts, means, vars_, torch.cat(shards))))

    def reference(counts, means, vars_, whole):
        return (whole.mean(0), whole.var(0, correction=0), whole.var(0, correction=1))

    def slip(**kw):
        return lambda c, m, v, whole: _merge(c, m, v, **kw)

    names = ("mean", "var", "var_unbiased")
    shapes = {p: (lambda a: a[1].shape[1:]) for p in names}
    pick = _picker(names, shapes)
    catalogue = mistakes({
        "unweighted_mean": slip(weighted=False),
        "missing_between_term": slip(between=False),
        "averaged_variances": slip(plain_average=True),
        "unbiased_not_corrected": slip(same=True),  # before the swap: ties keep this order
        "biased_unbiased_swapped": slip(swap=True),
        "between_term_unweighted": slip(between_unweighted=True),
        "unbiased_process_count": slip(process_count=True),
    }, extra={
        "between_term_unweighted": (
            "the between-group term is not weighted by the counts: var = sum_k n_k (var_k + "
            "(mean_k - mean)^2) / N, the n_k multiplying both terms.",
            "组间项没有按样本数加权：var = sum_k n_k (var_k + (mean_k - mean)^2) / N，n_k 同时乘两项。"),
        "unbiased_process_count": (
            "the unbiased variance uses the number of processes K: it is var * N / (N - 1) with N "
            "the global number of samples.",
            "无偏方差用了进程数 K：应为 var * N / (N - 1)，N 是全局样本数。"),
        "unweighted_mean": (
            "the process means are averaged without their counts (uneven shards). Weight each "
            "by n_k / N: mean = sum_k n_k mean_k / N.",
            "直接平均了各进程的均值，没有按样本数加权（各分片大小不同）。应按 n_k / N 加权："
            "mean = sum_k n_k mean_k / N。"),
        "missing_between_term": (
            "the variances are merged without the between-group term: var = sum_k n_k (var_k + "
            "(mean_k - mean)^2) / N. The spread of the process means is part of the spread.",
            "合并方差时漏了组间项：var = sum_k n_k (var_k + (mean_k - mean)^2) / N。"
            "各进程均值之间的离散也是总离散的一部分。"),
        "averaged_variances": (
            "the process variances are simply averaged: weight them by their counts and add the "
            "between-group term, var = sum_k n_k (var_k + (mean_k - mean)^2) / N.",
            "直接平均了各进程的方差：应按样本数加权，并加上组间项，"
            "var = sum_k n_k (var_k + (mean_k - mean)^2) / N。"),
        "biased_unbiased_swapped": (
            "biased and unbiased variance swapped: normalise with the biased one (divide by N), "
            "store var * N / (N - 1) in running_var.",
            "有偏方差与无偏方差弄反了：用有偏方差（除以 N）做归一化，在 running_var 中存 var * N / (N - 1)。"),
        "unbiased_not_corrected": (
            "the unbiased variance equals the biased one: multiply by N / (N - 1), with N the "
            "global count (not a process's count).",
            "无偏方差与有偏方差相同：应乘以 N / (N - 1)，N 是全局样本数（不是单个进程的）。"),
    })

    def learner(counts, means, vars_, whole):
        return fn(counts.clone(), means.clone(), vars_.clone())

    return _run(title, learner, names, pick, inputs, reference, catalogue,
                ("the statistics of the concatenated shards", "拼接后全部数据的统计量"),
                arg_names=("counts", "means", "vars", "the concatenated data"))
