"""Lesson 12's drills 11 to 16: a numerical gradient check ``fn(f, x, eps) -> grad``, a BatchNorm
layer written as a class ``cls(num_features, eps, momentum)``, GroupNorm's backward
``fn(grad_output, x, num_groups, weight, eps) -> (grad_input, grad_weight, grad_bias)``,
DeepNorm's initialisation ``fn(block, num_encoder_layers, num_decoder_layers, side) ->
(alpha, beta)``, a Pre-LN stack ``fn(x, layers, final_norm)``, and Switchable Normalisation
(lesson 14's bank, re-targeted at the drill). Written the way a learner writes them,
independently of the checkers' catalogues."""

import itertools
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import PASS, Sol, atlas, collector, drill_copies

S = []
add = collector(S)

# ---------------------------------------------------------------- 11. gradient check
GC = "drill:grad_check"


@add(GC, "loop over itertools.product, restore the saved value")
def gc_product(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in itertools.product(*[range(s) for s in x.shape]):
        old = x[idx].item()
        x[idx] = old + eps
        fp = f(x).item()
        x[idx] = old - eps
        fm = f(x).item()
        x[idx] = old
        grad[idx] = (fp - fm) / (2 * eps)
    return grad


@add(GC, "a one-hot direction per entry, x never modified")
def gc_one_hot(f, x, eps):
    grad = torch.empty(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = eps
        grad[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return grad


@add(GC, "a contiguous clone, perturbed through a flat view and passed to f")
def gc_flat_clone(f, x, eps):
    xc = x.detach().clone().contiguous()
    flat = xc.view(-1)
    grad = torch.zeros_like(flat)
    for i in range(flat.numel()):
        keep = flat[i].clone()
        flat[i] = keep + eps
        fp = f(xc)
        flat[i] = keep - eps
        fm = f(xc)
        flat[i] = keep
        grad[i] = (fp - fm) / (2 * eps)
    return grad.view(x.shape)


@add(GC, "forward difference", "one_sided_difference")
def gc_forward(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    f0 = f(x)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = eps
        grad[idx] = (f(x + e) - f0) / eps
    return grad


@add(GC, "backward difference", "one_sided_difference")
def gc_backward(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = eps
        grad[idx] = (f(x) - f(x - e)) / eps
    return grad


@add(GC, "central difference divided by eps", "divided_by_eps")
def gc_over_eps(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = eps
        grad[idx] = (f(x + e) - f(x - e)) / eps
    return grad


@add(GC, "f(x - eps) - f(x + eps)", "sign_flipped")
def gc_flipped(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = eps
        grad[idx] = (f(x - e) - f(x + e)) / (2 * eps)
    return grad


@add(GC, "every entry perturbed at once", "perturbed_all_at_once")
def gc_all_at_once(f, x, eps):
    return torch.ones_like(x) * (f(x + eps) - f(x - eps)) / (2 * eps)


@add(GC, "x[i] += eps; x[i] -= 2 eps; never put back", "x_not_restored")
def gc_not_restored(f, x, eps):
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        x[idx] += eps
        fp = f(x)
        x[idx] -= 2 * eps
        fm = f(x)
        grad[idx] = (fp - fm) / (2 * eps)
    return grad


@add(GC, "x.reshape(-1) perturbed (a copy when x is not contiguous)", "perturbed_a_copy")
def gc_reshape_copy(f, x, eps):
    flat = x.reshape(-1)
    grad = torch.zeros(flat.shape, dtype=x.dtype)
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        fp = f(x)
        flat[i] = old - eps
        fm = f(x)
        flat[i] = old
        grad[i] = (fp - fm) / (2 * eps)
    return grad.reshape(x.shape)


@add(GC, "x.float() first: the whole check in float32", "float32_arithmetic")
def gc_float32(f, x, eps):
    x = x.float()
    grad = torch.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros_like(x)
        e[idx] = eps
        grad[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return grad


@add(GC, "float32 arithmetic, cast back to float64 at the end", "float32_arithmetic")
def gc_float32_cast_back(f, x, eps):
    return gc_float32(f, x, eps).double()


@add(GC, "eps ignored: a fixed step of 1e-2", "eps_ignored")
def gc_fixed_step(f, x, eps):
    h = 1e-2
    grad = torch.zeros(x.shape, dtype=x.dtype)
    for idx in np.ndindex(*x.shape):
        e = torch.zeros(x.shape, dtype=x.dtype)
        e[idx] = h
        grad[idx] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


@add(GC, "a flat gradient vector", "gradient_shape")
def gc_flat(f, x, eps):
    return gc_one_hot(f, x, eps).reshape(-1)


@add(GC, "autograd instead of finite differences", "used_torch_function")
def gc_autograd(f, x, eps):
    x = x.clone().requires_grad_()
    with torch.enable_grad():
        return torch.autograd.grad(f(x), x)[0]


# ---------------------------------------------------------------- 12. BatchNorm as a module
BM = "drill:batch_norm_module"


def _dims(x):
    return [0] + list(range(2, x.dim())), [1, -1] + [1] * (x.dim() - 2)


class BNInPlace(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0))

    def stats(self, x):
        dims, shape = _dims(x)
        return x.mean(dims), x.var(dims, unbiased=False), x.numel() // x.shape[1]

    def update(self, mean, var, n):
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        self.num_batches_tracked += 1

    def normalise(self, x, mean, var):
        _, shape = _dims(x)
        y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)

    def forward(self, x):
        if self.training:
            mean, var, n = self.stats(x)
            self.update(mean, var, n)
            return self.normalise(x, mean, var)
        return self.normalise(x, self.running_mean, self.running_var)


class BNDetachAssign(nn.Module):
    """Buffers re-assigned (they stay buffers) from detached statistics, torch.var_mean."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        dims, shape = _dims(x)
        if self.training:
            var, mean = torch.var_mean(x, dim=dims, correction=0)
            n = x.numel() / x.shape[1]
            m = self.momentum
            self.running_mean = (1 - m) * self.running_mean + m * mean.detach()
            self.running_var = (1 - m) * self.running_var + m * var.detach() * n / (n - 1)
            self.num_batches_tracked = self.num_batches_tracked + 1
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps) * self.weight.view(shape) \
            + self.bias.view(shape)


class BNLerpChannelsFirst(nn.Module):
    """Statistics of x moved to (C, everything else); buffers updated with lerp_."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        for name, value in (("running_mean", torch.zeros(num_features)),
                            ("running_var", torch.ones(num_features)),
                            ("num_batches_tracked", torch.tensor(0, dtype=torch.long))):
            self.register_buffer(name, value)

    def forward(self, x):
        c = x.shape[1]
        flat = x.transpose(0, 1).reshape(c, -1)
        shape = (1, c) + (1,) * (x.dim() - 2)
        if self.training:
            mean = flat.mean(1)
            var_b = flat.var(1, unbiased=False)
            with torch.no_grad():
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(flat.var(1, unbiased=True), self.momentum)
                self.num_batches_tracked.add_(1)
            mean, var = mean, var_b
        else:
            mean, var = self.running_mean, self.running_var
        return self.weight.reshape(shape) * (x - mean.reshape(shape)) / (var.reshape(shape) + self.eps).sqrt() \
            + self.bias.reshape(shape)


for cls in (BNInPlace, BNDetachAssign, BNLerpChannelsFirst):
    S.append(Sol(BM, cls.__doc__ or cls.__name__, cls, PASS))


class BNVarZero(BNInPlace):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps, momentum)
        self.running_var.zero_()  # "both statistics start at zero"


class BNPlainAttributes(BNInPlace):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        nn.Module.__init__(self)
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.running_mean = torch.zeros(num_features)
        self.running_var = torch.ones(num_features)
        self.num_batches_tracked = torch.tensor(0)


class BNParameters(BNInPlace):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        nn.Module.__init__(self)
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.running_mean = nn.Parameter(torch.zeros(num_features), requires_grad=False)
        self.running_var = nn.Parameter(torch.ones(num_features), requires_grad=False)
        self.register_buffer("num_batches_tracked", torch.tensor(0))


class BNBiasedRunning(BNInPlace):
    def update(self, mean, var, n):
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        self.num_batches_tracked += 1


class BNKeras(BNInPlace):
    def update(self, mean, var, n):
        with torch.no_grad():
            self.running_mean.copy_(self.momentum * self.running_mean + (1 - self.momentum) * mean)
            self.running_var.copy_(self.momentum * self.running_var
                                   + (1 - self.momentum) * var * n / (n - 1))
        self.num_batches_tracked += 1


class BNEvalBatch(BNInPlace):
    def forward(self, x):
        mean, var, n = self.stats(x)
        if self.training:
            self.update(mean, var, n)
        return self.normalise(x, mean, var)


class BNNoCounter(BNInPlace):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        nn.Module.__init__(self)
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def update(self, mean, var, n):
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))


class BNCounterStill(BNInPlace):
    def update(self, mean, var, n):
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))


class BNUnbiasedNorm(BNInPlace):
    def forward(self, x):
        if self.training:
            dims, _ = _dims(x)
            mean, var, n = x.mean(dims), x.var(dims), x.numel() // x.shape[1]
            self.update(mean, var * (n - 1) / n, n)
            return self.normalise(x, mean, var)
        return self.normalise(x, self.running_mean, self.running_var)


class BNGradMode(BNInPlace):
    def forward(self, x):
        if torch.is_grad_enabled():  # "training needs gradients, inference does not"
            mean, var, n = self.stats(x)
            self.update(mean, var, n)
            return self.normalise(x, mean, var)
        return self.normalise(x, self.running_mean, self.running_var)


class BNKeepsGraph(BNInPlace):
    def update(self, mean, var, n):
        m = self.momentum
        self.running_mean = (1 - m) * self.running_mean + m * mean
        self.running_var = (1 - m) * self.running_var + m * var * n / (n - 1)
        self.num_batches_tracked += 1


class BNLocalUpdate(BNInPlace):
    def update(self, mean, var, n):
        running_mean, running_var = self.running_mean, self.running_var
        running_mean = (1 - self.momentum) * running_mean + self.momentum * mean.detach()
        running_var = (1 - self.momentum) * running_var + self.momentum * var.detach() * n / (n - 1)
        self.num_batches_tracked += 1


class BNSubclassTorch(nn.BatchNorm1d):
    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training, self.momentum, self.eps)


for cls, key in ((BNVarZero, "fresh_running_var_zero"), (BNPlainAttributes, "not_registered_buffers"),
                 (BNParameters, "buffers_as_parameters"), (BNBiasedRunning, "running_var_biased"),
                 (BNKeras, "momentum_convention"), (BNEvalBatch, "eval_uses_batch_stats"),
                 (BNNoCounter, "num_batches_tracked_missing"), (BNCounterStill, "num_batches_not_counted"),
                 (BNUnbiasedNorm, "unbiased_variance"), (BNGradMode, "mode_from_grad_enabled"),
                 (BNKeepsGraph, "buffers_keep_graph"), (BNLocalUpdate, "running_stats_not_updated"),
                 (BNSubclassTorch, "used_torch_function")):
    S.append(Sol(BM, cls.__name__, cls, key))


# ---------------------------------------------------------------- 13. GroupNorm's backward
GB = "drill:gn_backward"


def gn_bwd(dy, x, G, w, eps, *, mean_term=True, var_term=True, unbiased=False, gamma=True,
           order="groups", average=False, wgrad="xhat", eps_on=True):
    n, c = x.shape[:2]
    wshape = [1, c] + [1] * (x.dim() - 2)
    if order == "groups":
        to_g, from_g = (lambda t: t.reshape(n, G, -1)), (lambda t: t.reshape(x.shape))
    elif order == "channels":  # one set per channel
        to_g, from_g = (lambda t: t.reshape(n, c, -1)), (lambda t: t.reshape(x.shape))
    else:  # (N, C // G, G, ...): channel k in group k % G
        def to_g(t):
            return t.reshape(n, c // G, G, -1).permute(0, 2, 1, 3).reshape(n, G, -1)

        def from_g(t):
            return t.reshape(n, G, c // G, -1).permute(0, 2, 1, 3).reshape(x.shape)
    xg = to_g(x)
    mu = xg.mean(-1, keepdim=True)
    var = xg.var(-1, keepdim=True, unbiased=unbiased)
    std = torch.sqrt(var + (eps if eps_on else 0.0))
    xh = (xg - mu) / std
    dxh = to_g(dy * w.view(wshape)) if gamma else to_g(dy)
    dx = dxh
    if mean_term:
        dx = dx - dxh.mean(-1, keepdim=True)
    if var_term:
        dx = dx - xh * (dxh * xh).mean(-1, keepdim=True)
    dims = [0] + list(range(2, x.dim()))
    src = {"xhat": from_g(xh), "x": x}[wgrad]
    red = (lambda t: t.mean(dims)) if average else (lambda t: t.sum(dims))
    return from_g(dx / std), red(dy * src), red(dy)


def gn_textbook(dy, x, G, w, eps):
    n, c = x.shape[:2]
    xg = x.reshape(n, G, -1)
    m = xg.shape[-1]
    mu = xg.sum(-1, keepdim=True) / m
    sigma = torch.sqrt(((xg - mu) ** 2).sum(-1, keepdim=True) / m + eps)
    xh = (xg - mu) / sigma
    g = (dy * w.reshape(1, c, *[1] * (x.dim() - 2))).reshape(n, G, -1)
    dx = (m * g - g.sum(-1, keepdim=True) - xh * (g * xh).sum(-1, keepdim=True)) / (m * sigma)
    dims = tuple([0] + list(range(2, x.dim())))
    return dx.reshape(x.shape), (dy * xh.reshape(x.shape)).sum(dims), dy.sum(dims)


def gn_loop(dy, x, G, w, eps):
    n, c = x.shape[:2]
    per = c // G
    dx = torch.empty_like(x)
    dw, db = torch.zeros_like(w), torch.zeros_like(w)
    for i in range(n):
        for k in range(G):
            sl = slice(k * per, (k + 1) * per)
            xs, gs = x[i, sl], dy[i, sl]
            ws = w[sl].reshape(per, *[1] * (xs.dim() - 1))
            mu = xs.mean()
            r = 1 / torch.sqrt(((xs - mu) ** 2).mean() + eps)
            xh = (xs - mu) * r
            g = gs * ws
            dx[i, sl] = r * (g - g.mean() - xh * (g * xh).mean())
            dw[sl] += (gs * xh).reshape(per, -1).sum(1)
            db[sl] += gs.reshape(per, -1).sum(1)
    return dx, dw, db


def gn_graph(dy, x, G, w, eps):
    n, c = x.shape[:2]
    xg = x.reshape(n, G, -1)
    m = xg.shape[-1]
    mu = xg.mean(-1, keepdim=True)
    xc = xg - mu
    var = (xc ** 2).mean(-1, keepdim=True)
    istd = (var + eps) ** -0.5
    dxh = (dy * w.view(1, c, *[1] * (x.dim() - 2))).reshape(n, G, -1)
    dvar = (dxh * xc).sum(-1, keepdim=True) * -0.5 * istd ** 3
    dmu = -(dxh * istd).sum(-1, keepdim=True) + dvar * (-2 * xc).mean(-1, keepdim=True)
    dx = dxh * istd + dvar * 2 * xc / m + dmu / m
    dims = [0] + list(range(2, x.dim()))
    return dx.reshape(x.shape), (dy * (xc * istd).reshape(x.shape)).sum(dims), dy.sum(dims)


def gn_keep_shape(dy, x, G, w, eps):
    dx, dw, db = gn_bwd(dy, x, G, w, eps)
    shape = [1, -1] + [1] * (x.dim() - 2)
    return dx, dw.view(shape), db.view(shape)


S += [
    Sol(GB, "per group: r (g - mean g - x_hat mean(g x_hat))", lambda *a: gn_bwd(*a)),
    Sol(GB, "the textbook form with sums, (m g - sum g - x_hat sum(g x_hat)) / (m sigma)", gn_textbook),
    Sol(GB, "a loop over samples and groups", gn_loop),
    Sol(GB, "the chain rule through var and mean, step by step", gn_graph),
    Sol(GB, "mean term dropped", lambda *a: gn_bwd(*a, mean_term=False), "missing_mean_term"),
    Sol(GB, "variance term dropped", lambda *a: gn_bwd(*a, var_term=False), "missing_xhat_term"),
    Sol(GB, "mean and variance treated as constants",
        lambda *a: gn_bwd(*a, mean_term=False, var_term=False), "statistics_as_constants"),
    Sol(GB, "unbiased variance (x.var default)", lambda *a: gn_bwd(*a, unbiased=True), "unbiased_variance"),
    Sol(GB, "gamma forgotten in g", lambda *a: gn_bwd(*a, gamma=False), "gamma_missing"),
    Sol(GB, "eps left out", lambda *a: gn_bwd(*a, eps_on=False), "eps_missing"),
    Sol(GB, "reshape(N, C // G, G, ...): the wrong axis order", lambda *a: gn_bwd(*a, order="interleaved"),
        "groups_interleaved"),
    Sol(GB, "per-channel statistics (InstanceNorm's backward)", lambda *a: gn_bwd(*a, order="channels"),
        "per_channel_statistics"),
    Sol(GB, "parameter gradients averaged", lambda *a: gn_bwd(*a, average=True), "param_grad_mean"),
    Sol(GB, "grad_weight = sum(dy * x)", lambda *a: gn_bwd(*a, wgrad="x"), "param_grad_uses_x"),
    Sol(GB, "parameter gradients kept as (1, C, 1)", gn_keep_shape, "param_grad_shape"),
    Sol(GB, "autograd through F.group_norm", lambda dy, x, G, w, eps: torch.autograd.grad(
        F.group_norm(x.requires_grad_(), G, w.requires_grad_(), None, eps), (x, w), dy)
        + (dy.sum([0] + list(range(2, x.dim()))),), "used_torch_function"),
]


# ---------------------------------------------------------------- 14. DeepNorm's initialisation
DN = "drill:deepnorm_init"
_QK = ("attn.q_proj", "attn.k_proj")
_REST = ("attn.v_proj", "attn.out_proj", "ffn.fc1", "ffn.fc2")


def constants(n, m, side):
    if n and m:
        if side == "encoder":
            return 0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16)
        return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)
    k = n or m
    return (2 * k) ** (1 / 4), (8 * k) ** (-1 / 4)


def dn(block, n, m, side, *, table=constants, qk_gain=1.0, rest_gain=None, set_alpha=True,
       init=nn.init.xavier_normal_, swap=False):
    alpha, beta = table(n, m, side)
    if swap:
        alpha, beta = beta, alpha
    if set_alpha:
        block.alpha = alpha
    for name in _QK:
        init(block.get_submodule(name).weight, gain=qk_gain if qk_gain != "beta" else beta)
    for name in _REST:
        init(block.get_submodule(name).weight, gain=beta if rest_gain is None else rest_gain)
    return alpha, beta


def dn_helpers(block, n, m, side):
    from helpers.transformer import deepnorm_constants
    alpha, beta = deepnorm_constants(n, m)[side]
    block.alpha = alpha
    for name, module in block.named_modules():
        if isinstance(module, nn.Linear):
            gain = 1.0 if name.endswith(("q_proj", "k_proj")) else beta
            nn.init.xavier_normal_(module.weight, gain=gain)
            nn.init.zeros_(module.bias)
    return alpha, beta


def dn_by_hand(block, n, m, side):
    alpha, beta = constants(n, m, side)
    block.alpha = alpha
    with torch.no_grad():
        for name in _QK + _REST:
            w = block.get_submodule(name).weight
            fan_out, fan_in = w.shape
            std = (1.0 if name in _QK else beta) * math.sqrt(2.0 / (fan_in + fan_out))
            w.normal_(0.0, std)
    return alpha, beta


def dn_default_times_beta(block, n, m, side):  # nn.Linear's own init, then "weight *= beta"
    alpha, beta = constants(n, m, side)
    block.alpha = alpha
    with torch.no_grad():
        for name in _REST:
            block.get_submodule(name).weight.mul_(beta)
    return alpha, beta


def _table_8n_alpha(n, m, side):
    a, b = constants(n, m, side)
    k = n if side == "encoder" else m
    return ((8 * k) ** 0.25 if not (n and m) else a), b


def _table_2n_beta(n, m, side):
    a, b = constants(n, m, side)
    k = n if side == "encoder" else m
    return a, ((2 * k) ** -0.25 if not (n and m) else b)


def _table_plus_exponent(n, m, side):
    a, b = constants(n, m, side)
    k = n if side == "encoder" else m
    return a, ((8 * k) ** 0.25 if not (n and m) else 1 / b)


def _table_encoder_only(n, m, side):
    k = n if side == "encoder" else m
    return (2 * k) ** 0.25, (8 * k) ** -0.25


def _table_encdec_decoder(n, m, side):
    if n and m:
        return constants(n, m, side)
    k = n or m
    return (3 * k) ** 0.25, (12 * k) ** -0.25


def _table_nm_swapped(n, m, side):
    if n and m and side == "encoder":
        return 0.81 * (m ** 4 * n) ** (1 / 16), 0.87 * (m ** 4 * n) ** (-1 / 16)
    return constants(n, m, side)


S += [
    Sol(DN, "Table 1 and Figure 2, xavier_normal_", lambda *a: dn(*a)),
    Sol(DN, "helpers.transformer.deepnorm_constants, named_modules", dn_helpers),
    Sol(DN, "normal_ with Xavier's std written out", dn_by_hand),
    Sol(DN, "xavier_uniform_ with the same gains (the same variance)",
        lambda *a: dn(*a, init=nn.init.xavier_uniform_)),
    Sol(DN, "alpha and beta swapped", lambda *a: dn(*a, swap=True), "alpha_beta_swapped"),
    Sol(DN, "beta applied to q_proj and k_proj too", lambda *a: dn(*a, qk_gain="beta"), "beta_on_qk"),
    Sol(DN, "beta computed, every weight Xavier with gain 1", lambda *a: dn(*a, rest_gain=1.0),
        "beta_not_applied"),
    Sol(DN, "the default nn.Linear init multiplied by beta (labml's DeepNormTransformerLayer)",
        dn_default_times_beta, "scaled_default_init"),
    Sol(DN, "alpha = (8N)^(1/4)", lambda *a: dn(*a, table=_table_8n_alpha), "alpha_8n"),
    Sol(DN, "beta = (2N)^(-1/4)", lambda *a: dn(*a, table=_table_2n_beta), "beta_2n"),
    Sol(DN, "beta = (8N)^(+1/4)", lambda *a: dn(*a, table=_table_plus_exponent), "beta_exponent_sign"),
    Sol(DN, "encoder-only constants in an encoder-decoder model", lambda *a: dn(*a, table=_table_encoder_only),
        "encoder_only_formula_in_encdec"),
    Sol(DN, "(3M)^(1/4), (12M)^(-1/4) for a decoder-only model",
        lambda *a: dn(*a, table=_table_encdec_decoder), "encdec_formula_for_decoder_only"),
    Sol(DN, "N and M swapped in 0.81 (N^4 M)^(1/16)", lambda *a: dn(*a, table=_table_nm_swapped),
        "n_m_swapped"),
    Sol(DN, "block.alpha never set", lambda *a: dn(*a, set_alpha=False), "alpha_not_set"),
]


# ---------------------------------------------------------------- 15. Pre-LN stack
PS = "drill:pre_ln_stack"


def pre_ok(x, layers, final_norm):
    for attn, ffn, norm1, norm2 in layers:
        x = x + attn(norm1(x))
        x = x + ffn(norm2(x))
    return final_norm(x)


def pre_block_fn(x, layers, final_norm):
    def sublayer(h, f, norm):
        return h + f(norm(h))

    for attn, ffn, n1, n2 in layers:
        x = sublayer(sublayer(x, attn, n1), ffn, n2)
    return final_norm(x)


def pre_named(x, layers, final_norm):
    h = x
    for layer in layers:
        attn, ffn, ln_1, ln_2 = layer
        a = attn(ln_1(h))
        h = h + a
        m = ffn(ln_2(h))
        h = h + m
    out = final_norm(h)
    return out


def pre_no_final(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = x + attn(n1(x))
        x = x + ffn(n2(x))
    return x


def pre_final_each(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = x + attn(n1(x))
        x = final_norm(x + ffn(n2(x)))
    return x


def pre_final_first(x, layers, final_norm):
    x = final_norm(x)  # "normalise the embeddings"
    for attn, ffn, n1, n2 in layers:
        x = x + attn(n1(x))
        x = x + ffn(n2(x))
    return x


def post_stack(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = n1(x + attn(x))
        x = n2(x + ffn(x))
    return final_norm(x)


def post_stack_no_final(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = n1(x + attn(x))
        x = n2(x + ffn(x))
    return x


def pre_residual_from_normed(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = n1(x)
        x = x + attn(x)
        x = n2(x)
        x = x + ffn(x)
    return final_norm(x)


def pre_swapped_norms(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = x + attn(n2(x))
        x = x + ffn(n1(x))
    return final_norm(x)


def pre_ffn_first(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = x + ffn(n2(x))
        x = x + attn(n1(x))
    return final_norm(x)


def pre_norm_after_branch(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = x + n1(attn(x))
        x = x + n2(ffn(x))
    return final_norm(x)


def pre_no_residual(x, layers, final_norm):
    for attn, ffn, n1, n2 in layers:
        x = ffn(n2(attn(n1(x))))
    return final_norm(x)


S += [Sol(PS, f.__name__, f) for f in (pre_ok, pre_block_fn, pre_named)]
S += [Sol(PS, f.__name__, f, key) for f, key in (
    (pre_no_final, "no_final_norm"), (pre_final_each, "final_norm_in_each_block"),
    (pre_final_first, "final_norm_at_input"), (post_stack, "post_ln"), (post_stack_no_final, "post_ln"),
    (pre_residual_from_normed, "shortcut_from_normed"), (pre_swapped_norms, "norms_swapped"),
    (pre_ffn_first, "ffn_first"), (pre_norm_after_branch, "norm_on_branch_output"),
    (pre_no_residual, "no_residual"))]


# ---------------------------------------------------------------- 16. Switchable Normalisation
SWITCH = drill_copies(atlas.SOLUTIONS, {"check_switchable_norm": "drill:switchable_norm"})

SOLUTIONS = S + SWITCH
