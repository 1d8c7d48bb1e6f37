"""Lesson 14: Switchable Normalisation ``fn(x, mean_weights, var_weights, weight, bias, eps)``
(x (N, C, H, W); importance weights of shape (3,), order IN, LN, BN; weight and bias (C,)) and
Filter Response Normalisation with its TLU ``fn(x, gamma, beta, tau, eps)`` (x (N, C, H, W);
gamma, beta, tau (C,)): right solutions in several styles and the mistakes each checker names."""

import torch
import torch.nn.functional as F

from . import PASS, Sol

# ---------------------------------------------------------------- the Switchable Norm checker
_SETS = ((2, 3), (1, 2, 3), (0, 2, 3))


def sn_ok_loop(x, wm, wv, weight, bias, eps):
    mu, var = 0, 0
    for k, dims in enumerate(_SETS):
        m = x.mean(dim=dims, keepdim=True)
        mu = mu + wm[k] * m
        var = var + wv[k] * ((x - m) ** 2).mean(dim=dims, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * weight[None, :, None, None] + bias[None, :, None, None]


def sn_ok_var_mean(x, wm, wv, weight, bias, eps):
    stats = [torch.var_mean(x, dim=d, keepdim=True, correction=0) for d in _SETS]
    var = sum(w * v for w, (v, _) in zip(wv, stats))
    mu = sum(w * m for w, (_, m) in zip(wm, stats))
    return torch.addcmul(bias.view(1, -1, 1, 1), (x - mu) * torch.rsqrt(var + eps), weight.view(1, -1, 1, 1))


def sn_ok_moments(x, wm, wv, weight, bias, eps):
    # the paper's trick: LN's and BN's moments from IN's (mean of the means, E[x^2] - mu^2)
    n, c = x.shape[:2]
    mu_in = x.mean((2, 3), keepdim=True)
    var_in = x.var((2, 3), unbiased=False, keepdim=True)
    sq_in = var_in + mu_in ** 2
    mu_ln, mu_bn = mu_in.mean(1, keepdim=True), mu_in.mean(0, keepdim=True)
    var_ln = sq_in.mean(1, keepdim=True) - mu_ln ** 2
    var_bn = sq_in.mean(0, keepdim=True) - mu_bn ** 2
    mu = wm[0] * mu_in + wm[1] * mu_ln + wm[2] * mu_bn
    var = wv[0] * var_in + wv[1] * var_ln + wv[2] * var_bn
    return ((x - mu) / (var + eps).sqrt()) * weight.reshape(1, c, 1, 1) + bias.reshape(1, c, 1, 1)


def sn_outputs_mixed(x, wm, wv, weight, bias, eps):
    y = sum(w * (x - x.mean(d, keepdim=True)) / torch.sqrt(x.var(d, unbiased=False, keepdim=True) + eps)
            for w, d in zip(wm, _SETS))
    return y * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_one_weight_set(x, wm, wv, weight, bias, eps):
    return sn_ok_loop(x, wm, wm, weight, bias, eps)


def sn_std_mixed(x, wm, wv, weight, bias, eps):
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, _SETS))
    sd = sum(w * torch.sqrt(x.var(d, unbiased=False, keepdim=True)) for w, d in zip(wv, _SETS))
    return (x - mu) / torch.sqrt(sd ** 2 + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_order_bn_ln_in(x, wm, wv, weight, bias, eps):
    sets = ((0, 2, 3), (1, 2, 3), (2, 3))
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, sets))
    var = sum(w * x.var(d, unbiased=False, keepdim=True) for w, d in zip(wv, sets))
    return (x - mu) / torch.sqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_softmax(x, wm, wv, weight, bias, eps):
    return sn_ok_loop(x, torch.softmax(wm, 0), torch.softmax(wv, 0), weight, bias, eps)


def sn_unbiased(x, wm, wv, weight, bias, eps):
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, _SETS))
    var = sum(w * x.var(d, keepdim=True) for w, d in zip(wv, _SETS))
    return (x - mu) / torch.sqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_std_plus_eps(x, wm, wv, weight, bias, eps):
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, _SETS))
    var = sum(w * x.var(d, unbiased=False, keepdim=True) for w, d in zip(wv, _SETS))
    return (x - mu) / (var.sqrt() + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_bn_over_batch_only(x, wm, wv, weight, bias, eps):
    sets = ((2, 3), (1, 2, 3), (0,))
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, sets))
    var = sum(w * x.var(d, unbiased=False, keepdim=True) for w, d in zip(wv, sets))
    return (x - mu) / torch.sqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_ln_over_channels(x, wm, wv, weight, bias, eps):
    sets = ((2, 3), (1,), (0, 2, 3))
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, sets))
    var = sum(w * x.var(d, unbiased=False, keepdim=True) for w, d in zip(wv, sets))
    return (x - mu) / torch.sqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def sn_no_affine(x, wm, wv, weight, bias, eps):
    mu = sum(w * x.mean(d, keepdim=True) for w, d in zip(wm, _SETS))
    var = sum(w * x.var(d, unbiased=False, keepdim=True) for w, d in zip(wv, _SETS))
    return (x - mu) / torch.sqrt(var + eps)


def sn_no_keepdim(x, wm, wv, weight, bias, eps):
    mu = sum(w * x.mean(d) for w, d in zip(wm, _SETS))
    var = sum(w * x.var(d, unbiased=False) for w, d in zip(wv, _SETS))
    return (x - mu) / torch.sqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


# ---------------------------------------------------------------- the FRN checker
def frn_ok(x, gamma, beta, tau, eps):
    nu2 = x.pow(2).mean(dim=(2, 3), keepdim=True)
    y = gamma.view(1, -1, 1, 1) * x / torch.sqrt(nu2 + eps) + beta.view(1, -1, 1, 1)
    return torch.max(y, tau.view(1, -1, 1, 1))


def frn_ok_rsqrt_where(x, gamma, beta, tau, eps):
    n, c, h, w = x.shape
    nu2 = (x * x).reshape(n, c, h * w).sum(-1) / (h * w)
    y = x * torch.rsqrt(nu2 + eps)[:, :, None, None] * gamma[:, None, None] + beta[:, None, None]
    t = tau[:, None, None].expand_as(y)
    return torch.where(y > t, y, t)


def frn_ok_relu(x, gamma, beta, tau, eps):
    # max(y, tau) = relu(y - tau) + tau
    nu2 = torch.einsum("nchw,nchw->nc", x, x)[..., None, None] / (x.shape[2] * x.shape[3])
    y = gamma[:, None, None] * (x / (nu2 + eps) ** 0.5) + beta[:, None, None]
    return torch.relu(y - tau[:, None, None]) + tau[:, None, None]


def _frn_wrong(nu2_of, post=lambda y, t: torch.max(y, t), centre=False, affine=True, den=None):
    def fn(x, gamma, beta, tau, eps):
        xc = x - x.mean((2, 3), keepdim=True) if centre else x
        nu2 = nu2_of(xc)
        d = den(nu2, eps) if den else torch.sqrt(nu2 + eps)
        y = gamma.view(1, -1, 1, 1) * xc / d + beta.view(1, -1, 1, 1) if affine else xc / d
        return post(y, tau.view(1, -1, 1, 1))
    return fn


_HW = lambda x: x.pow(2).mean((2, 3), keepdim=True)  # noqa: E731

FRN_WRONG = {
    "subtracted_mean": _frn_wrong(_HW, centre=True),
    "missing_tlu": _frn_wrong(_HW, post=lambda y, t: y),
    "relu_not_tlu": _frn_wrong(_HW, post=lambda y, t: F.relu(y)),
    "min_not_max": _frn_wrong(_HW, post=lambda y, t: torch.min(y, t)),
    "layer_axes": _frn_wrong(lambda x: x.pow(2).mean((1, 2, 3), keepdim=True)),
    "batch_axes": _frn_wrong(lambda x: x.pow(2).mean((0, 2, 3), keepdim=True)),
    "last_dim_only": _frn_wrong(lambda x: x.pow(2).mean(-1, keepdim=True)),
    "missing_sqrt": _frn_wrong(_HW, den=lambda nu2, eps: nu2 + eps),
    "eps_outside_sqrt": _frn_wrong(_HW, den=lambda nu2, eps: nu2.sqrt() + eps),
    "affine_missing": _frn_wrong(_HW, affine=False),
}


def frn_tlu_first(x, gamma, beta, tau, eps):
    xh = x / torch.sqrt(x.pow(2).mean((2, 3), keepdim=True) + eps)
    return gamma.view(1, -1, 1, 1) * torch.max(xh, tau.view(1, -1, 1, 1)) + beta.view(1, -1, 1, 1)


SN = "check_switchable_norm"
FRN = "check_frn"
SOLUTIONS = (
    [Sol(SN, f.__name__, f) for f in (sn_ok_loop, sn_ok_var_mean, sn_ok_moments)]
    + [Sol(SN, f.__name__, f, key) for f, key in [
        (sn_outputs_mixed, "mixed_outputs"), (sn_one_weight_set, "mean_weights_for_variance"),
        (sn_std_mixed, "mixed_std"), (sn_order_bn_ln_in, "weights_order"), (sn_softmax, "softmax_again"),
        (sn_unbiased, "unbiased_variance"), (sn_std_plus_eps, "eps_outside_sqrt"),
        (sn_bn_over_batch_only, "bn_axes"), (sn_ln_over_channels, "ln_axes"),
        (sn_no_affine, "affine_missing"), (sn_no_keepdim, None)]]
    + [Sol(FRN, f.__name__, f) for f in (frn_ok, frn_ok_rsqrt_where, frn_ok_relu)]
    + [Sol(FRN, key, fn, key) for key, fn in FRN_WRONG.items()]
    + [Sol(FRN, "tlu_before_affine", frn_tlu_first, "tlu_before_affine")]
)
