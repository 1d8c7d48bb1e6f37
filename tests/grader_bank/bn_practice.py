"""Lesson 10: weight-decay groups ``fn(model, weight_decay)``, a frozen BatchNorm
``fn(x, weight, bias, running_mean, running_var, eps)`` and Batch Renormalization
``fn(x, running_mean, running_std, weight, bias, rmax, dmax, eps)``."""

import torch
import torch.nn.functional as F
from torch import nn

from . import collector

S = []


add = collector(S)


# ---------------------------------------------------------------- weight-decay groups
WD = "check_weight_decay_groups"


def split(model, rule):
    yes, no = [], []
    for n, p in model.named_parameters():
        if p.requires_grad:
            (yes if rule(n, p) else no).append(p)
    return yes, no


def groups(yes, no, wd, wd_no=0.0):
    return [{"params": yes, "weight_decay": wd}, {"params": no, "weight_decay": wd_no}]


@add(WD, "timm's rule: p.ndim <= 1 not decayed")
def _(model, wd):
    return groups(*split(model, lambda n, p: p.ndim > 1), wd)


@add(WD, "nanoGPT: p.dim() >= 2, the no-decay group first")
def _(model, wd):
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    return [{"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0},
            {"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": wd}]


@add(WD, "by module type: every norm layer, biases and scalars excluded (frozen included)")
def _(model, wd):
    norm_types = (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)
    no_ids = {id(p) for m in model.modules() if isinstance(m, norm_types) for p in m.parameters()}
    yes, no = [], []
    for n, p in model.named_parameters():
        (no if id(p) in no_ids or n.endswith("bias") or p.ndim == 0 else yes).append(p)
    return groups(yes, no, wd)


@add(WD, "decay on everything", "decay_everything")
def _(model, wd):
    return [{"params": [p for p in model.parameters() if p.requires_grad], "weight_decay": wd}]


@add(WD, "groups inverted", "inverted")
def _(model, wd):
    return groups(*split(model, lambda n, p: p.ndim <= 1), wd)


@add(WD, "only names ending in 'bias' excluded", "norm_gains_decayed")
def _(model, wd):
    return groups(*split(model, lambda n, p: not n.endswith("bias")), wd)


@add(WD, "BatchNorm found by type, other norms decayed", "only_batchnorm_excluded")
def _(model, wd):
    bn = {id(p) for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()}
    return groups(*split(model, lambda n, p: id(p) not in bn and not n.endswith("bias")), wd)


@add(WD, "embeddings excluded by name", "matrix_not_decayed")
def _(model, wd):
    return groups(*split(model, lambda n, p: p.ndim > 1 and "embed" not in n), wd)


@add(WD, "a hard-coded decay of 1e-4", "wrong_value")
def _(model, wd):
    return groups(*split(model, lambda n, p: p.ndim > 1), 1e-4)


@add(WD, "every parameter twice", "duplicate_or_missing")
def _(model, wd):
    return [{"params": list(model.parameters()), "weight_decay": 0.0}] + groups(
        *split(model, lambda n, p: p.ndim > 1), wd)[:1]


@add(WD, "lists of parameters, not dicts", "bad_format")
def _(model, wd):
    return [list(split(model, lambda n, p: p.ndim > 1)[0])]


@add(WD, "the no-decay group given the decay too", "decay_everything")
def _(model, wd):
    return groups(*split(model, lambda n, p: p.ndim > 1), wd, wd)


# ---------------------------------------------------------------- frozen BatchNorm
FZ = "check_frozen_batch_norm"


def sh(p, x):
    return p.reshape(1, -1, *([1] * (x.dim() - 2)))


@add(FZ, "torchvision's FrozenBatchNorm2d: scale and shift")
def _(x, w, b, rm, rv, eps):
    scale = w * (rv + eps).rsqrt()
    shift = b - rm * scale
    return x * sh(scale, x) + sh(shift, x)


@add(FZ, "F.batch_norm(training=False)")
def _(x, w, b, rm, rv, eps):
    return F.batch_norm(x, rm, rv, w, b, training=False, eps=eps)


@add(FZ, "normalise then affine, written with view")
def _(x, w, b, rm, rv, eps):
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    y = (x - rm.view(shape)) / torch.sqrt(rv.view(shape) + eps)
    return y * w.view(shape) + b.view(shape)


@add(FZ, "batch statistics", "batch_statistics")
def _(x, w, b, rm, rv, eps):
    dims = [0] + list(range(2, x.dim()))
    return F.batch_norm(x, None, None, w, b, training=True, eps=eps)


@add(FZ, "eps outside the root", "eps_outside_sqrt")
def _(x, w, b, rm, rv, eps):
    scale = w / (rv.sqrt() + eps)
    return x * sh(scale, x) + sh(b - rm * scale, x)


@add(FZ, "old torchvision: w * rv.rsqrt(), no eps", "eps_missing")
def _(x, w, b, rm, rv, eps):
    scale = w * rv.rsqrt()
    return x * sh(scale, x) + sh(b - rm * scale, x)


@add(FZ, "running_var used as a standard deviation", "var_as_std")
def _(x, w, b, rm, rv, eps):
    scale = w / (rv + eps)
    return x * sh(scale, x) + sh(b - rm * scale, x)


@add(FZ, "running mean not subtracted", "mean_not_subtracted")
def _(x, w, b, rm, rv, eps):
    return x * sh(w * (rv + eps).rsqrt(), x) + sh(b, x)


@add(FZ, "vectors broadcast along the last dim", "channel_last")
def _(x, w, b, rm, rv, eps):
    scale = w * (rv + eps).rsqrt()
    return x * scale + (b - rm * scale)


@add(FZ, "buffers updated in place with the batch mean", "buffers_modified")
def _(x, w, b, rm, rv, eps):
    rm.mul_(0.9).add_(0.1 * x.mean([0] + list(range(2, x.dim()))))
    scale = w * (rv + eps).rsqrt()
    return x * sh(scale, x) + sh(b - rm * scale, x)


@add(FZ, "weight and bias not applied", "affine_missing")
def _(x, w, b, rm, rv, eps):
    return (x - sh(rm, x)) / torch.sqrt(sh(rv, x) + eps)


# ---------------------------------------------------------------- Batch Renormalization
RN = "check_batch_renorm"


def renorm(x, rm, rs, w, b, rmax, dmax, eps, *, detach=True, clip_r=True, clip_d=True,
           invert=False, d_raw=False, unbiased=False, plain=False, rs_is_var=False):
    dims = [0] + list(range(2, x.dim()))
    mu = x.mean(dims)
    sigma = torch.sqrt(x.var(dims, unbiased=unbiased) + eps)
    run = rs.sqrt() if rs_is_var else rs
    r = run / sigma if invert else sigma / run
    d = (mu - rm) if d_raw else (mu - rm) / run
    if clip_r:
        r = r.clamp(1 / rmax, rmax)
    if clip_d:
        d = d.clamp(-dmax, dmax)
    if detach:
        r, d = r.detach(), d.detach()
    y = (x - sh(mu, x)) / sh(sigma, x)
    if not plain:
        y = y * sh(r, x) + sh(d, x)
    return y * sh(w, x) + sh(b, x)


@add(RN, "Algorithm 1, r and d detached")
def _(*a):
    return renorm(*a)


@add(RN, "r and d computed under torch.no_grad()")
def _(x, rm, rs, w, b, rmax, dmax, eps):
    dims = [0] + list(range(2, x.dim()))
    mu = x.mean(dims)
    sigma = (x.var(dims, unbiased=False) + eps).sqrt()
    with torch.no_grad():
        r = torch.clamp(sigma / rs, 1 / rmax, rmax)
        d = torch.clamp((mu - rm) / rs, -dmax, dmax)
    y = (x - sh(mu, x)) / sh(sigma, x) * sh(r, x) + sh(d, x)
    return y * sh(w, x) + sh(b, x)


@add(RN, "also updates the running statistics in place")
def _(x, rm, rs, w, b, rmax, dmax, eps):
    y = renorm(x, rm, rs, w, b, rmax, dmax, eps)
    dims = [0] + list(range(2, x.dim()))
    with torch.no_grad():
        rm += 0.01 * (x.mean(dims) - rm)
        rs += 0.01 * (x.var(dims, unbiased=False).add(eps).sqrt() - rs)
    return y


@add(RN, "r and d not detached", "r_d_not_detached")
def _(*a):
    return renorm(*a, detach=False)


@add(RN, "no clipping", "no_clipping")
def _(*a):
    return renorm(*a, clip_r=False, clip_d=False)


@add(RN, "d not clipped", "d_not_clipped")
def _(*a):
    return renorm(*a, clip_d=False)


@add(RN, "r inverted", "r_inverted")
def _(*a):
    return renorm(*a, invert=True)


@add(RN, "d not divided by sigma", "d_not_scaled")
def _(*a):
    return renorm(*a, d_raw=True)


@add(RN, "unbiased batch variance", "unbiased_variance")
def _(*a):
    return renorm(*a, unbiased=True)


@add(RN, "plain BatchNorm", "plain_batch_norm")
def _(*a):
    return renorm(*a, plain=True)


@add(RN, "running_std read as a variance", "std_as_variance")
def _(*a):
    return renorm(*a, rs_is_var=True)


SOLUTIONS = S
