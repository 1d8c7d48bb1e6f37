"""LayerNorm, BatchNorm (training and eval), RMSNorm and GroupNorm: lessons 00 to 04 and
the forward drills of lesson 12."""

import torch
import torch.nn.functional as F

from . import PASS, Sol, drill_copies


def f32(fn):
    """Compute in float32 (float16 input upcast), return the input's dtype."""
    def wrapped(x, *rest):
        rest = tuple(r.float() if isinstance(r, torch.Tensor) else r for r in rest)
        return fn(x.float(), *rest).to(x.dtype)
    wrapped.__name__ = fn.__name__
    return wrapped


def ch(p, x):
    return p.view(1, -1, *([1] * (x.dim() - 2)))


def bn_dims(x):
    return [0] + list(range(2, x.dim()))


S = []


def add(target, name, expect=PASS, **kw):
    def deco(fn):
        S.append(Sol(target, name, fn, expect, kw))
        return fn
    return deco


# ---------------------------------------------------------------- LayerNorm
LN = "check_layer_norm"


@add(LN, "model: float32 statistics, two passes, cast back")
@f32
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@add(LN, "rsqrt and var(unbiased=False)")
@f32
def _(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    return (x - mu) * torch.rsqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "sums divided by d = x.shape[-1], var_mean")
def _(x, w, b, eps):
    xf = x.to(torch.float32)
    d = xf.shape[-1]
    mu = xf.sum(-1, keepdim=True) / d
    var = (xf - mu).pow(2).sum(-1, keepdim=True) / d
    y = (xf - mu) / (var + eps) ** 0.5
    return (y * w.float() + b.float()).to(x.dtype)


@add(LN, "torch's own F.layer_norm")
def _(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


@add(LN, "float16 computed in float16 (passes with a note: the exercise does not require it)")
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


@add(LN, "unbiased variance (torch.var default)", "unbiased_variance")
@f32
def _(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b


@add(LN, "eps outside the root: (x - mu) / (std + eps)", "eps_outside_sqrt")
@f32
def _(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "eps left out", "eps_missing")
@f32
def _(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True, unbiased=False) * w + b


@add(LN, "mean not subtracted (an RMSNorm with a bias)", "mean_not_subtracted")
@f32
def _(x, w, b, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w + b


@add(LN, "LayerNorm([T, d]): statistics over time and features", "wrong_axes_time")
@f32
def _(x, w, b, eps):
    dims = (-2, -1) if x.dim() >= 3 else (-1,)
    mu = x.mean(dims, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(dims, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "statistics over the batch dim (a transposed layout)", "wrong_axes_batch")
@f32
def _(x, w, b, eps):
    mu = x.mean(0, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(0, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "no keepdim", "missing_keepdim")
@f32
def _(x, w, b, eps):
    mu, var = x.mean(-1), x.var(-1, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@add(LN, "one-pass variance E[x^2] - E[x]^2", "one_pass_variance")
def _(x, w, b, eps):
    xf = x.float()
    mu = xf.mean(-1, keepdim=True)
    var = (xf * xf).mean(-1, keepdim=True) - mu * mu
    return ((xf - mu) / torch.sqrt(var + eps) * w.float() + b.float()).to(x.dtype)


@add(LN, "float16 statistics, the exercise requiring float16", "half_not_float32", require_half=True)
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


@add(LN, "weight and bias not applied", "affine_missing")
@f32
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)


@add(LN, "(x_hat + bias) * weight", "affine_order")
@f32
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return ((x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) + b) * w


@add(LN, "returns float32 for float16 input", "wrong_dtype")
def _(x, w, b, eps):
    x, w, b = x.float(), w.float(), b.float()
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "written for (N, d) only: dim=1", "only_2d")
@f32
def _(x, w, b, eps):
    mu = x.mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + eps) * w + b


@add(LN, "a flipped sign: (mu - x)", None)
@f32
def _(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (mu - x) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b


# ---------------------------------------------------------------- BatchNorm, training
BN = "check_batch_norm"


@add(BN, "model: dims (0, 2, ...), (1, C, 1) parameters")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    mu = x.mean(d, keepdim=True)
    var = ((x - mu) ** 2).mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * ch(w, x) + ch(b, x)


@add(BN, "channels moved last, flattened to (M, C)")
def _(x, w, b, eps):
    xf = x.float()
    flat = xf.movedim(1, -1).reshape(-1, xf.shape[1])
    mu = flat.mean(0)
    var = flat.var(0, unbiased=False)
    y = (flat - mu) / torch.sqrt(var + eps) * w.float() + b.float()
    return y.reshape(xf.movedim(1, -1).shape).movedim(-1, 1).to(x.dtype)


@add(BN, "torch's own F.batch_norm")
def _(x, w, b, eps):
    return F.batch_norm(x, None, None, w, b, training=True, eps=eps)


@add(BN, "var_mean with correction=0, rsqrt")
@f32
def _(x, w, b, eps):
    var, mu = torch.var_mean(x, dim=bn_dims(x), keepdim=True, correction=0)
    return (x - mu) * torch.rsqrt(var + eps) * ch(w, x) + ch(b, x)


@add(BN, "unbiased variance", "unbiased_variance")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    return (x - x.mean(d, keepdim=True)) / torch.sqrt(x.var(d, keepdim=True) + eps) * ch(w, x) + ch(b, x)


@add(BN, "eps outside the root", "eps_outside_sqrt")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    return (x - x.mean(d, keepdim=True)) / (x.std(d, keepdim=True, unbiased=False) + eps) * ch(w, x) + ch(b, x)


@add(BN, "eps left out", "eps_missing")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    return (x - x.mean(d, keepdim=True)) / x.std(d, keepdim=True, unbiased=False) * ch(w, x) + ch(b, x)


@add(BN, "statistics over the batch dim only", "forgot_spatial_dims")
@f32
def _(x, w, b, eps):
    mu = x.mean(0, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(0, keepdim=True, unbiased=False) + eps) * ch(w, x) + ch(b, x)


@add(BN, "statistics per sample (LayerNorm's axes)", "per_sample_statistics")
@f32
def _(x, w, b, eps):
    d = list(range(1, x.dim()))
    mu = x.mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(d, keepdim=True, unbiased=False) + eps) * ch(w, x) + ch(b, x)


@add(BN, "no keepdim", "missing_keepdim")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    return (x - x.mean(d)) / torch.sqrt(x.var(d, unbiased=False) + eps) * ch(w, x) + ch(b, x)


@add(BN, "weight and bias not reshaped to (1, C, 1)", "params_not_reshaped")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    mu = x.mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(d, keepdim=True, unbiased=False) + eps) * w + b


@add(BN, "one-pass variance", "one_pass_variance")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    mu = x.mean(d, keepdim=True)
    return (x - mu) / torch.sqrt((x * x).mean(d, keepdim=True) - mu * mu + eps) * ch(w, x) + ch(b, x)


@add(BN, "float16 statistics, the exercise requiring float16", "half_not_float32", require_half=True)
def _(x, w, b, eps):
    d = bn_dims(x)
    mu = x.mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(d, keepdim=True) + eps) * ch(w, x) + ch(b, x)


@add(BN, "weight and bias not applied", "affine_missing")
@f32
def _(x, w, b, eps):
    d = bn_dims(x)
    mu = x.mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(d, keepdim=True, unbiased=False) + eps)


@add(BN, "written for (N, C) only: mean(0), plain weight", "only_2d")
@f32
def _(x, w, b, eps):
    mu = x.mean(0)
    return (x - mu) / torch.sqrt(x.var(0, unbiased=False) + eps) * w + b


@add(BN, "no normalisation at all: x * weight + bias", "not_normalised")
@f32
def _(x, w, b, eps):
    return x * ch(w, x) + ch(b, x)


# ---------------------------------------------------------------- RMSNorm
RMS = "check_rms_norm"


@add(RMS, "model: float32, rsqrt, cast back")
@f32
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@add(RMS, "LLaMA style: weight * x.to(dtype)")
def _(x, w, eps):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


@add(RMS, "torch's own F.rms_norm")
def _(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


@add(RMS, "norm / sqrt(d) written out")
@f32
def _(x, w, eps):
    d = x.shape[-1]
    ms = torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d
    return x / torch.sqrt(ms + eps) * w


@add(RMS, "mean subtracted (LayerNorm without bias)", "mean_subtracted")
@f32
def _(x, w, eps):
    xc = x - x.mean(-1, keepdim=True)
    return xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * w


@add(RMS, "eps outside the root", "eps_outside_sqrt")
@f32
def _(x, w, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w


@add(RMS, "eps left out", "eps_missing")
@f32
def _(x, w, eps):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * w


@add(RMS, "statistics over time and features", "wrong_axes_time")
@f32
def _(x, w, eps):
    dims = (-2, -1) if x.dim() >= 3 else (-1,)
    return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps) * w


@add(RMS, "no keepdim", "missing_keepdim")
@f32
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w


@add(RMS, "no gain", "no_gain")
@f32
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@add(RMS, "L2-normalised: F.normalize(x) * weight", "l2_normalised")
@f32
def _(x, w, eps):
    return F.normalize(x, dim=-1) * w


@add(RMS, "Gemma's (1 + weight) gain", "one_plus_gain")
@f32
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w)


@add(RMS, "x**2 in float16, the exercise requiring float16", "half_not_float32", require_half=True)
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@add(RMS, "the standard deviation instead of the RMS", "std_not_rms")
@f32
def _(x, w, eps):
    return x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w


@add(RMS, "written for (N, d) only: dim=1", "only_2d")
@f32
def _(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + eps) * w


# ---------------------------------------------------------------- GroupNorm
GN = "check_group_norm"


def _gn(x, G, w, b, eps, *, groups_fn=lambda n, G, c: (n, G, -1), unbiased=False, eps_out=False,
        eps_on=True, affine=True, reshape=True):
    n, c = x.shape[:2]
    xs = x.reshape(*groups_fn(n, G, c))
    mu = xs.mean(-1, keepdim=True)
    var = xs.var(-1, keepdim=True, unbiased=unbiased)
    e = eps if eps_on else 0.0
    y = ((xs - mu) / (var.sqrt() + e) if eps_out else (xs - mu) / torch.sqrt(var + e)).reshape(x.shape)
    if not affine:
        return y
    return y * ch(w, x) + ch(b, x) if reshape else y * w + b


@add(GN, "model: reshape (N, G, -1)")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps)


@add(GN, "(N, G, C // G, *spatial), statistics over dims 2...")
def _(x, G, w, b, eps):
    xf = x.float()
    n, c = xf.shape[:2]
    xs = xf.view(n, G, c // G, *xf.shape[2:])
    dims = tuple(range(2, xs.dim()))
    mu = xs.mean(dims, keepdim=True)
    var = xs.var(dims, keepdim=True, unbiased=False)
    y = ((xs - mu) / torch.sqrt(var + eps)).view_as(xf)
    return (y * ch(w.float(), xf) + ch(b.float(), xf)).to(x.dtype)


@add(GN, "torch's own F.group_norm")
def _(x, G, w, b, eps):
    return F.group_norm(x, G, w, b, eps)


@add(GN, "a loop over the groups, torch.cat")
def _(x, G, w, b, eps):
    xf = x.float()
    outs = []
    for chunk in xf.chunk(G, dim=1):
        dims = tuple(range(1, chunk.dim()))
        mu = chunk.mean(dims, keepdim=True)
        var = ((chunk - mu) ** 2).mean(dims, keepdim=True)
        outs.append((chunk - mu) / torch.sqrt(var + eps))
    y = torch.cat(outs, dim=1)
    return (y * ch(w.float(), xf) + ch(b.float(), xf)).to(x.dtype)


@add(GN, "num_groups as channels per group", "groups_are_channels_per_group")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, groups_fn=lambda n, G, c: (n, c // G, -1))


@add(GN, "interleaved groups (c % G)", "interleaved_groups")
@f32
def _(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, c // G, G, -1).transpose(1, 2).reshape(n, G, -1)
    mu = xs.mean(-1, keepdim=True)
    var = xs.var(-1, keepdim=True, unbiased=False)
    y = ((xs - mu) / torch.sqrt(var + eps)).reshape(n, G, c // G, -1).transpose(1, 2)
    return y.reshape(x.shape) * ch(w, x) + ch(b, x)


@add(GN, "statistics per position (spatial dims forgotten)", "forgot_spatial_dims")
@f32
def _(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, G, c // G, -1)
    mu = xs.mean(2, keepdim=True)
    var = xs.var(2, keepdim=True, unbiased=False)
    return ((xs - mu) / torch.sqrt(var + eps)).reshape(x.shape) * ch(w, x) + ch(b, x)


@add(GN, "unbiased variance", "unbiased_variance")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, unbiased=True)


@add(GN, "eps outside the root", "eps_outside_sqrt")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, eps_out=True)


@add(GN, "eps left out", "eps_missing")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, eps_on=False)


@add(GN, "weight and bias not applied", "affine_missing")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, affine=False)


@add(GN, "weight and bias not reshaped", "params_not_reshaped")
@f32
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps, reshape=False)


@add(GN, "float16 statistics, the exercise requiring float16", "half_not_float32", require_half=True)
def _(x, G, w, b, eps):
    return _gn(x, G, w, b, eps)


@add(GN, "InstanceNorm: one group per channel whatever G", "per_channel_statistics")
@f32
def _(x, G, w, b, eps):
    return _gn(x, x.shape[1], w, b, eps)


# ---------------------------------------------------------------- BatchNorm, eval
EV = "check_batch_norm_eval"


def _ev(x, rm, rv, w, b, eps, *, no_sqrt=False, eps_out=False, eps_on=True, reshape=True,
        affine=True, batch=False, debias=False):
    xf = x.float()
    sh = (lambda p: ch(p, xf)) if reshape else (lambda p: p)
    if batch:
        d = bn_dims(xf)
        m, v = xf.mean(d, keepdim=True), xf.var(d, keepdim=True, unbiased=False)
    else:
        m, v = sh(rm), sh(rv)
    if debias:
        k = xf.numel() // xf.shape[1]
        v = v * (k - 1) / k
    e = eps if eps_on else 0.0
    den = (v + e) if no_sqrt else (v.sqrt() + e if eps_out else torch.sqrt(v + e))
    y = (xf - m) / den
    return (y * sh(w) + sh(b) if affine else y).to(x.dtype)


@add(EV, "model: buffers viewed as (1, C, 1)")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps)


@add(EV, "scale and shift precomputed (a folded BatchNorm)")
def _(x, rm, rv, w, b, eps):
    s = w * torch.rsqrt(rv + eps)
    t = b - rm * s
    xf = x.float()
    return (xf * ch(s, xf) + ch(t, xf)).to(x.dtype)


@add(EV, "written for (N, C), (N, C, L), (N, C, H, W) with unsqueeze")
def _(x, rm, rv, w, b, eps):
    xf = x.to(torch.float32)
    shape = (1, -1) + (1,) * (x.dim() - 2)
    y = (xf - rm.reshape(shape)) / (rv.reshape(shape) + eps).sqrt()
    return (y * w.reshape(shape) + b.reshape(shape)).to(x.dtype)


@add(EV, "torch's own F.batch_norm(training=False)")
def _(x, rm, rv, w, b, eps):
    return F.batch_norm(x, rm, rv, w, b, training=False, eps=eps)


@add(EV, "batch statistics in eval", "batch_statistics_in_eval")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, batch=True)


@add(EV, "no square root", "variance_without_sqrt")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, no_sqrt=True)


@add(EV, "eps outside the root", "eps_outside_sqrt")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, eps_out=True)


@add(EV, "eps left out", "eps_missing")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, eps_on=False)


@add(EV, "running_var 'debiased' by (m - 1) / m", "debiased_running_var")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, debias=True)


@add(EV, "buffers not reshaped", "buffers_not_reshaped")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, reshape=False)


@add(EV, "weight and bias not applied", "affine_missing")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps, affine=False)


@add(EV, "returns float32 for float16 input", "wrong_dtype")
def _(x, rm, rv, w, b, eps):
    return _ev(x, rm, rv, w, b, eps).float()


@add(EV, "a flipped sign: (running_mean - x)", None)
def _(x, rm, rv, w, b, eps):
    return _ev(-x, -rm, rv, w, b, eps)


# ---------------------------------------------------------------- the drills
_TORCH = {"torch's own F.layer_norm", "torch's own F.batch_norm", "torch's own F.rms_norm",
          "torch's own F.group_norm", "torch's own F.batch_norm(training=False)",
          "float16 computed in float16 (passes with a note: the exercise does not require it)"}
DRILLS = drill_copies(S, {LN: "drill:layer_norm", BN: "drill:batch_norm_train", RMS: "drill:rms_norm",
                          GN: "drill:group_norm", EV: "drill:batch_norm_eval"}, exclude=_TORCH)
for target, call in (("drill:layer_norm", lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
                     ("drill:batch_norm_train",
                      lambda x, w, b, eps: torch.nn.BatchNorm1d(x.shape[1], eps=eps)(x)),
                     ("drill:rms_norm", lambda x, w, eps: torch.nn.functional.rms_norm(x, x.shape[-1:], w, eps)),
                     ("drill:group_norm", lambda x, G, w, b, eps: F.group_norm(x, G, w, b, eps)),
                     ("drill:batch_norm_eval",
                      lambda x, rm, rv, w, b, eps: torch.batch_norm(x, w, b, rm, rv, False, 0.1, eps, False))):
    DRILLS.append(Sol(target, "calls torch's own implementation", call, "used_torch_function"))
DRILLS.append(Sol("drill:layer_norm", "float16 computed in float16 (the drill notes it)", S[4].fn, PASS))

SOLUTIONS = S + DRILLS
