"""Lesson 12's drills that have no lesson exercise of their own: BatchNorm's and LayerNorm's
backward ``fn(grad_output, x, weight, eps) -> (grad_input, grad_weight, grad_bias)``,
BatchNorm with running statistics ``fn(x, weight, bias, running_mean, running_var, training,
momentum, eps) -> (y, running_mean, running_var)`` (buffers of None: a fresh layer), and
folding BatchNorm into a Linear ``fn(weight, bias, bn_weight, bn_bias, running_mean,
running_var, eps) -> (weight, bias)``. Each is graded by its checker and by its drill."""

import torch

from . import PASS, Sol, collector, drill_copies

S = []


add = collector(S)


# ---------------------------------------------------------------- backward passes
def backward(dy, x, w, eps, *, dims, pshape, lead, terms=("mean", "xhat"), unbiased=False,
             gamma=True, param="xhat", mean_params=False, eps_on=True):
    n = 1
    for d in dims:
        n *= x.shape[d]
    mu = x.mean(dims, keepdim=True)
    var = ((x - mu) ** 2).mean(dims, keepdim=True)
    if unbiased:
        var = var * n / (n - 1)
    r = 1 / torch.sqrt(var + (eps if eps_on else 0.0))
    xh = (x - mu) * r
    g = dy * w.view(pshape) if gamma else dy
    dx = g
    if "mean" in terms:
        dx = dx - g.mean(dims, keepdim=True)
    if "xhat" in terms:
        dx = dx - xh * (g * xh).mean(dims, keepdim=True)
    red = (lambda t: t.mean(lead)) if mean_params else (lambda t: t.sum(lead))
    src = {"xhat": xh, "x": x, "one": torch.ones_like(x)}[param]
    return r * dx, red(dy * src), red(dy)


def bn(dy, x, w, eps, **kw):
    dims = [0] + list(range(2, x.dim()))
    return backward(dy, x, w, eps, dims=dims, pshape=[1, -1] + [1] * (x.dim() - 2), lead=dims, **kw)


def ln(dy, x, w, eps, **kw):
    return backward(dy, x, w, eps, dims=[-1], pshape=[-1], lead=list(range(x.dim() - 1)), **kw)


BB = "check_bn_backward"
S += [
    Sol(BB, "model: r (g - mean(g) - x_hat mean(g x_hat))", lambda *a: bn(*a)),
    Sol(BB, "the textbook form: (m g - sum g - x_hat sum(g x_hat)) / (m sigma)", None),
    Sol(BB, "chain rule through var and mean, step by step (Kratzert's graph)", None),
    Sol(BB, "mean term dropped", lambda *a: bn(*a, terms=("xhat",)), "missing_mean_term"),
    Sol(BB, "variance term dropped", lambda *a: bn(*a, terms=("mean",)), "missing_xhat_term"),
    Sol(BB, "statistics as constants: r g", lambda *a: bn(*a, terms=()), "statistics_as_constants"),
    Sol(BB, "unbiased variance", lambda *a: bn(*a, unbiased=True), "unbiased_variance"),
    Sol(BB, "eps left out", lambda *a: bn(*a, eps_on=False), "eps_missing"),
    Sol(BB, "gamma left out of g", lambda *a: bn(*a, gamma=False), "gamma_missing"),
    Sol(BB, "parameter gradients averaged", lambda *a: bn(*a, mean_params=True), "param_grad_mean"),
    Sol(BB, "grad_weight = sum(dy * x)", lambda *a: bn(*a, param="x"), "param_grad_uses_x"),
    Sol(BB, "grad_weight = sum(dy)", lambda *a: bn(*a, param="one"), "grad_weight_is_sum_dy"),
    Sol(BB, "LayerNorm's axes", lambda dy, x, w, eps: backward(
        dy, x, w, eps, dims=list(range(1, x.dim())), pshape=[1, -1] + [1] * (x.dim() - 2),
        lead=[0] + list(range(2, x.dim()))), "per_sample_axes"),
    Sol(BB, "parameter gradients kept as (1, C, 1)", None, "param_grad_shape"),
    Sol(BB, "written for (N, C) only: dim 0, plain weight", None, "only_2d"),
]


def _textbook(dy, x, w, eps):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    m = x.numel() // x.shape[1]
    mu = x.mean(dims, keepdim=True)
    sigma = torch.sqrt(((x - mu) ** 2).mean(dims, keepdim=True) + eps)
    xh = (x - mu) / sigma
    g = dy * w.view(shape)
    dx = (m * g - g.sum(dims, keepdim=True) - xh * (g * xh).sum(dims, keepdim=True)) / (m * sigma)
    return dx, (dy * xh).sum(dims), dy.sum(dims)


def _graph(dy, x, w, eps):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    m = x.numel() // x.shape[1]
    mu = x.mean(dims, keepdim=True)
    xc = x - mu
    var = (xc ** 2).mean(dims, keepdim=True)
    istd = 1 / torch.sqrt(var + eps)
    dxh = dy * w.view(shape)
    dvar = (dxh * xc).sum(dims, keepdim=True) * -0.5 * istd ** 3
    dmu = (-dxh * istd).sum(dims, keepdim=True) + dvar * (-2 * xc).sum(dims, keepdim=True) / m
    dx = dxh * istd + dvar * 2 * xc / m + dmu / m
    return dx, (dy * xc * istd).sum(dims), dy.sum(dims)


def _keep_shape(dy, x, w, eps):
    dx, dw, db = bn(dy, x, w, eps)
    shape = [1, -1] + [1] * (x.dim() - 2)
    return dx, dw.view(shape), db.view(shape)


def _only_nc(dy, x, w, eps):
    mu = x.mean(0)
    var = ((x - mu) ** 2).mean(0)
    r = 1 / torch.sqrt(var + eps)
    xh = (x - mu) * r
    g = dy * w
    return r * (g - g.mean(0) - xh * (g * xh).mean(0)), (dy * xh).sum(0), dy.sum(0)


S = [s if s.fn is not None else Sol(s.target, s.name, {
    "the textbook form: (m g - sum g - x_hat sum(g x_hat)) / (m sigma)": _textbook,
    "chain rule through var and mean, step by step (Kratzert's graph)": _graph,
    "parameter gradients kept as (1, C, 1)": _keep_shape,
    "written for (N, C) only: dim 0, plain weight": _only_nc}[s.name], s.expect) for s in S]

LB = "check_ln_backward"


def _ln_sums(dy, x, w, eps):
    d = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / d
    xc = x - mu
    sigma = torch.sqrt((xc * xc).sum(-1, keepdim=True) / d + eps)
    xh = xc / sigma
    g = dy * w
    dx = (d * g - g.sum(-1, keepdim=True) - xh * (g * xh).sum(-1, keepdim=True)) / (d * sigma)
    flat = (-1, d)
    return dx, (dy * xh).reshape(flat).sum(0), dy.reshape(flat).sum(0)


def _ln_loop(dy, x, w, eps):
    d = x.shape[-1]
    xs, dys = x.reshape(-1, d), dy.reshape(-1, d)
    rows, dw, db = [], torch.zeros_like(w), torch.zeros_like(w)
    for xi, gi in zip(xs, dys):
        mu = xi.mean()
        r = 1 / torch.sqrt(((xi - mu) ** 2).mean() + eps)
        xh = (xi - mu) * r
        g = gi * w
        rows.append(r * (g - g.mean() - xh * (g * xh).mean()))
        dw += gi * xh
        db += gi
    return torch.stack(rows).reshape(x.shape), dw, db


def _ln_dim0_params(dy, x, w, eps):
    dx, _, _ = ln(dy, x, w, eps)
    xh = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    return dx, (dy * xh).sum(0), dy.sum(0)


S += [
    Sol(LB, "model: per token over dim=-1", lambda *a: ln(*a)),
    Sol(LB, "sums divided by d, parameter sums over the flattened tokens", _ln_sums),
    Sol(LB, "a loop over the tokens", _ln_loop),
    Sol(LB, "mean term dropped", lambda *a: ln(*a, terms=("xhat",)), "missing_mean_term"),
    Sol(LB, "variance term dropped", lambda *a: ln(*a, terms=("mean",)), "missing_xhat_term"),
    Sol(LB, "statistics as constants", lambda *a: ln(*a, terms=()), "statistics_as_constants"),
    Sol(LB, "unbiased variance", lambda *a: ln(*a, unbiased=True), "unbiased_variance"),
    Sol(LB, "eps left out", lambda *a: ln(*a, eps_on=False), "eps_missing"),
    Sol(LB, "gamma left out", lambda *a: ln(*a, gamma=False), "gamma_missing"),
    Sol(LB, "parameter gradients averaged", lambda *a: ln(*a, mean_params=True), "param_grad_mean"),
    Sol(LB, "grad_weight = sum(dy * x)", lambda *a: ln(*a, param="x"), "param_grad_uses_x"),
    Sol(LB, "grad_weight = sum(dy)", lambda *a: ln(*a, param="one"), "grad_weight_is_sum_dy"),
    Sol(LB, "BatchNorm's axes", lambda dy, x, w, eps: backward(
        dy, x, w, eps, dims=list(range(x.dim() - 1)), pshape=[-1], lead=list(range(x.dim() - 1))),
        "per_feature_axes"),
    Sol(LB, "parameter gradients summed over dim 0 only", _ln_dim0_params, "param_grad_shape"),
]


# ---------------------------------------------------------------- running statistics
RS = "check_bn_running_stats"


def step(x, w, b, rm, rv, training, momentum, eps, *, store_biased=False, norm_unbiased=False,
         keras=False, eval_batch=False, train_running=False, update=True, update_eval=False,
         eps_out=False, fresh=(0.0, 1.0), in_place=False):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    c = x.shape[1]
    if rm is None:
        rm, rv = torch.full((c,), fresh[0], dtype=x.dtype), torch.full((c,), fresh[1], dtype=x.dtype)
    bm, bvb = x.mean(dims), x.var(dims, unbiased=False)
    bvu = x.var(dims, unbiased=True)
    new_m, new_v = rm, rv
    if (training or update_eval) and update:
        keep = momentum if keras else 1 - momentum
        new_m = keep * rm + (1 - keep) * bm
        new_v = keep * rv + (1 - keep) * (bvb if store_biased else bvu)
    if (training and not train_running) or (not training and eval_batch):
        m, v = bm, (bvu if norm_unbiased else bvb)
    else:
        m, v = rm, rv
    den = v.view(shape).sqrt() + eps if eps_out else torch.sqrt(v.view(shape) + eps)
    y = (x - m.view(shape)) / den * w.view(shape) + b.view(shape)
    if in_place:
        rm.copy_(new_m)
        rv.copy_(new_v)
        return y, rm, rv
    return y, new_m, new_v


def _per_channel_loop(x, w, b, rm, rv, training, momentum, eps):
    c = x.shape[1]
    rm = torch.zeros(c, dtype=x.dtype) if rm is None else rm.clone()
    rv = torch.ones(c, dtype=x.dtype) if rv is None else rv.clone()
    y = torch.empty_like(x)
    for k in range(c):
        xc = x[:, k]
        if training:
            m, v = xc.mean(), ((xc - xc.mean()) ** 2).mean()
            n = xc.numel()
            rm[k] = (1 - momentum) * rm[k] + momentum * m
            rv[k] = (1 - momentum) * rv[k] + momentum * v * n / (n - 1)
        else:
            m, v = rm[k], rv[k]
        y[:, k] = (xc - m) / torch.sqrt(v + eps) * w[k] + b[k]
    return y, rm, rv


S += [
    Sol(RS, "model: new tensors, zeros and ones for a fresh layer", lambda *a: step(*a)),
    Sol(RS, "buffers updated in place", lambda *a: step(*a, in_place=True)),
    Sol(RS, "a loop over the channels", _per_channel_loop),
    Sol(RS, "running_var stores the biased variance", lambda *a: step(*a, store_biased=True),
        "running_var_biased"),
    Sol(RS, "normalises with the unbiased variance", lambda *a: step(*a, norm_unbiased=True),
        "unbiased_variance"),
    Sol(RS, "Keras momentum", lambda *a: step(*a, keras=True), "momentum_convention"),
    Sol(RS, "eval uses the batch statistics", lambda *a: step(*a, eval_batch=True),
        "eval_uses_batch_stats"),
    Sol(RS, "training normalises with the running statistics", lambda *a: step(*a, train_running=True),
        "train_uses_running_stats"),
    Sol(RS, "running statistics never updated", lambda *a: step(*a, update=False),
        "running_stats_not_updated"),
    Sol(RS, "updated in eval too", lambda *a: step(*a, update_eval=True), "updated_in_eval"),
    Sol(RS, "eps outside the root", lambda *a: step(*a, eps_out=True), "eps_outside_sqrt"),
    Sol(RS, "a fresh layer's running_var starts at 0", lambda *a: step(*a, fresh=(0.0, 0.0)),
        "fresh_running_var_zero"),
    Sol(RS, "a fresh layer's buffers swapped", lambda *a: step(*a, fresh=(1.0, 0.0)),
        "fresh_buffers_swapped"),
    Sol(RS, "buffers of None not handled", lambda x, w, b, rm, rv, t, mom, eps: step(
        x, w, b, rm * 1, rv, t, mom, eps), "fresh_buffers_missing"),
]


# ---------------------------------------------------------------- folding
FB = "check_fold_bn"


def fold(W, b, g, beta, rm, rv, eps, *, e=None, var=False, mean=True, bias=True, rows=True,
         beta_on=True, unscaled=False):
    ee = eps if e is None else e
    s = g / ((rv + ee) if var else torch.sqrt(rv + ee))
    Wf = W * s[:, None] if rows else W * s
    bb = b if bias else torch.zeros_like(b)
    bf = (bb - rm if mean else bb) * s + (beta if beta_on else 0)
    if unscaled:
        bf = b - rm * s + beta
    return Wf, bf


S += [
    Sol(FB, "model: rows scaled by s", lambda *a: fold(*a)),
    Sol(FB, "diag(s) @ W, rsqrt", lambda W, b, g, beta, rm, rv, eps: (
        torch.diag(g * torch.rsqrt(rv + eps)) @ W, beta + (b - rm) * g * torch.rsqrt(rv + eps))),
    Sol(FB, "unsqueeze(1), bias written as b * s + (beta - rm * s)", lambda W, b, g, beta, rm, rv, eps: (
        W * (g / (rv + eps).sqrt()).unsqueeze(1),
        b * (g / (rv + eps).sqrt()) + (beta - rm * g / (rv + eps).sqrt()))),
    Sol(FB, "eps left out", lambda *a: fold(*a, e=0.0), "fold_eps_missing"),
    Sol(FB, "variance, not standard deviation", lambda *a: fold(*a, var=True), "fold_variance_not_std"),
    Sol(FB, "running mean left out", lambda *a: fold(*a, mean=False), "fold_mean_missing"),
    Sol(FB, "linear bias dropped", lambda *a: fold(*a, bias=False), "fold_linear_bias_dropped"),
    Sol(FB, "columns scaled", lambda *a: fold(*a, rows=False), "fold_scale_on_columns"),
    Sol(FB, "eps hard-coded 1e-5", lambda *a: fold(*a[:-1], 1e-5), "fold_eps_hard_coded"),
    Sol(FB, "beta left out", lambda *a: fold(*a, beta_on=False), "fold_beta_missing"),
    Sol(FB, "linear bias not scaled", lambda *a: fold(*a, unscaled=True), "fold_linear_bias_unscaled"),
]

DRILLS = drill_copies(S, {BB: "drill:bn_backward", LB: "drill:ln_backward",
                          RS: "drill:bn_running_stats", FB: "drill:fold_bn"})
DRILLS += [
    Sol("drill:bn_backward", "autograd through F.batch_norm", lambda dy, x, w, eps: torch.autograd.grad(
        torch.nn.functional.batch_norm(x.requires_grad_(), None, None, w.requires_grad_(),
                                       torch.zeros_like(w).requires_grad_(), True, 0.1, eps),
        (x, w), dy) + (dy.sum([0] + list(range(2, x.dim()))),), "used_torch_function"),
    Sol("drill:fold_bn", "torch.nn.utils.fusion", lambda W, b, g, beta, rm, rv, eps:
        torch.nn.utils.fusion.fuse_linear_bn_weights(W, b, rm, rv, eps, g, beta), "used_torch_function"),
]

SOLUTIONS = S + DRILLS
