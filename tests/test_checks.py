"""The exercise checkers: correct implementations pass, and each known-buggy implementation
(written the way a learner writes it, independently of the checkers' own catalogue) fails
with the right diagnosis. A checker never raises, whatever the learner's function does."""

import pytest
import torch

from helpers.checks import check_batch_norm, check_group_norm, check_layer_norm, check_rms_norm


def _f32(fn):
    """Run ``fn`` in float32 and cast back: the float16 handling a correct solution needs."""
    def wrapped(x, *args):
        args = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
        return fn(x.float(), *args).to(x.dtype)
    return wrapped


def _diagnose(checker, fn, key):
    """The checker's result on ``fn``; float16 computed in float16 is a note under the pass,
    and a failure only when the exercise asks for half precision (``require_half``)."""
    if key != "half_not_float32":
        return checker(fn)
    note = checker(fn)
    assert note.passed and note.notes == [key] and note.mistake is None
    return checker(fn, require_half=True)


# ---------------------------------------------------------------- LayerNorm
@_f32
def ln_ok(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@_f32
def ln_unbiased(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b


@_f32
def ln_std_eps(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True, unbiased=False)
    return (x - mu) / (std + eps) * w + b


@_f32
def ln_two_dims(x, w, b, eps):
    dims = (-2, -1) if x.dim() >= 3 else (-1,)
    mu = x.mean(dims, keepdim=True)
    var = x.var(dims, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@_f32
def ln_no_keepdim(x, w, b, eps):
    mu = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@_f32
def ln_rms(x, w, b, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w + b


@_f32
def ln_one_pass(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mu * mu
    return (x - mu) / torch.sqrt(var + eps) * w + b


def ln_half(x, w, b, eps):  # no upcast
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def ln_returns_float32(x, w, b, eps):  # computes in float32 but forgets to cast back
    x, w, b = x.float(), w.float(), b.float()
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b


@_f32
def ln_batch_axis(x, w, b, eps):
    mu = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * w + b


@_f32
def ln_no_affine(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)


def test_layer_norm_correct_passes():
    r = check_layer_norm(ln_ok)
    assert r.passed, r.message
    assert r.mistake is None and "✔" in r.message


def test_layer_norm_torch_itself_passes():
    r = check_layer_norm(lambda x, w, b, eps: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps))
    assert r.passed, r.message


@pytest.mark.parametrize("fn, key", [
    (ln_unbiased, "unbiased_variance"),
    (ln_std_eps, "eps_outside_sqrt"),
    (ln_two_dims, "wrong_axes_time"),
    (ln_no_keepdim, "missing_keepdim"),
    (ln_rms, "mean_not_subtracted"),
    (ln_one_pass, "one_pass_variance"),
    (ln_half, "half_not_float32"),
    (ln_returns_float32, "wrong_dtype"),
    (ln_batch_axis, "wrong_axes_batch"),
    (ln_no_affine, "affine_missing"),
])
def test_layer_norm_mistakes_diagnosed(fn, key):
    r = _diagnose(check_layer_norm, fn, key)
    assert not r.passed
    assert r.mistake == key, r.message
    assert "✘" in r.message and "可能的错误" in r.message  # both languages


# ---------------------------------------------------------------- BatchNorm
def _ch(p, x):
    return p.view(1, -1, *([1] * (x.dim() - 2)))


def _bn_dims(x):
    return [0] + list(range(2, x.dim()))


@_f32
def bn_ok(x, w, b, eps):
    d = _bn_dims(x)
    mu = x.mean(d, keepdim=True)
    var = x.var(d, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * _ch(w, x) + _ch(b, x)


@_f32
def bn_unbiased(x, w, b, eps):
    d = _bn_dims(x)
    return (x - x.mean(d, keepdim=True)) / torch.sqrt(x.var(d, keepdim=True) + eps) * _ch(w, x) + _ch(b, x)


@_f32
def bn_dim0_only(x, w, b, eps):
    mu = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * _ch(w, x) + _ch(b, x)


@_f32
def bn_per_sample(x, w, b, eps):
    d = list(range(1, x.dim()))
    mu = x.mean(d, keepdim=True)
    var = x.var(d, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * _ch(w, x) + _ch(b, x)


@_f32
def bn_std_eps(x, w, b, eps):
    d = _bn_dims(x)
    return (x - x.mean(d, keepdim=True)) / (x.std(d, keepdim=True, unbiased=False) + eps) * _ch(w, x) + _ch(b, x)


@_f32
def bn_no_keepdim(x, w, b, eps):
    d = _bn_dims(x)
    mu, var = x.mean(d), x.var(d, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * _ch(w, x) + _ch(b, x)


def bn_half(x, w, b, eps):
    d = _bn_dims(x)
    mu = x.mean(d, keepdim=True)
    var = ((x - mu) ** 2).mean(d, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * _ch(w, x) + _ch(b, x)


def test_batch_norm_correct_passes():
    assert check_batch_norm(bn_ok).passed
    r = check_batch_norm(lambda x, w, b, eps: torch.nn.functional.batch_norm(
        x, None, None, w, b, training=True, eps=eps))
    assert r.passed, r.message


@pytest.mark.parametrize("fn, key", [
    (bn_unbiased, "unbiased_variance"),
    (bn_dim0_only, "forgot_spatial_dims"),
    (bn_per_sample, "per_sample_statistics"),
    (bn_std_eps, "eps_outside_sqrt"),
    (bn_no_keepdim, "missing_keepdim"),
    (bn_half, "half_not_float32"),
])
def test_batch_norm_mistakes_diagnosed(fn, key):
    r = _diagnose(check_batch_norm, fn, key)
    assert not r.passed
    assert r.mistake == key, r.message


# ---------------------------------------------------------------- RMSNorm
@_f32
def rms_ok(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@_f32
def rms_centred(x, w, eps):
    xc = x - x.mean(-1, keepdim=True)
    return xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * w


@_f32
def rms_eps_outside(x, w, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w


@_f32
def rms_no_gain(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_half(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@_f32
def rms_no_keepdim(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1) + eps) * w


def test_rms_norm_correct_passes():
    assert check_rms_norm(rms_ok).passed
    r = check_rms_norm(lambda x, w, eps: torch.nn.functional.rms_norm(x, x.shape[-1:], w, eps))
    assert r.passed, r.message


@pytest.mark.parametrize("fn, key", [
    (rms_centred, "mean_subtracted"),
    (rms_eps_outside, "eps_outside_sqrt"),
    (rms_no_gain, "no_gain"),
    (rms_half, "half_not_float32"),
    (rms_no_keepdim, "missing_keepdim"),
])
def test_rms_norm_mistakes_diagnosed(fn, key):
    r = _diagnose(check_rms_norm, fn, key)
    assert not r.passed
    assert r.mistake == key, r.message


# ---------------------------------------------------------------- GroupNorm
@_f32
def gn_ok(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, G, -1)
    mu = xs.mean(-1, keepdim=True)
    var = xs.var(-1, keepdim=True, unbiased=False)
    return ((xs - mu) / torch.sqrt(var + eps)).reshape(x.shape) * _ch(w, x) + _ch(b, x)


@_f32
def gn_channels_per_group(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, c // G, -1)
    mu = xs.mean(-1, keepdim=True)
    var = xs.var(-1, keepdim=True, unbiased=False)
    return ((xs - mu) / torch.sqrt(var + eps)).reshape(x.shape) * _ch(w, x) + _ch(b, x)


@_f32
def gn_interleaved(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, c // G, G, -1).transpose(1, 2).reshape(n, G, -1)
    mu = xs.mean(-1, keepdim=True)
    var = xs.var(-1, keepdim=True, unbiased=False)
    y = ((xs - mu) / torch.sqrt(var + eps)).reshape(n, G, c // G, -1).transpose(1, 2)
    return y.reshape(x.shape) * _ch(w, x) + _ch(b, x)


@_f32
def gn_per_position(x, G, w, b, eps):
    n, c = x.shape[:2]
    xs = x.reshape(n, G, c // G, -1)
    mu = xs.mean(2, keepdim=True)
    var = xs.var(2, keepdim=True, unbiased=False)
    return ((xs - mu) / torch.sqrt(var + eps)).reshape(x.shape) * _ch(w, x) + _ch(b, x)


@_f32
def gn_unbiased(x, G, w, b, eps):
    n = x.shape[0]
    xs = x.reshape(n, G, -1)
    y = (xs - xs.mean(-1, keepdim=True)) / torch.sqrt(xs.var(-1, keepdim=True) + eps)
    return y.reshape(x.shape) * _ch(w, x) + _ch(b, x)


def gn_raises(x, G, w, b, eps):
    raise RuntimeError("not implemented yet")


def test_group_norm_correct_passes():
    assert check_group_norm(gn_ok).passed
    r = check_group_norm(lambda x, G, w, b, eps: torch.nn.functional.group_norm(x, G, w, b, eps))
    assert r.passed, r.message


@pytest.mark.parametrize("fn, key", [
    (gn_channels_per_group, "groups_are_channels_per_group"),
    (gn_interleaved, "interleaved_groups"),
    (gn_per_position, "forgot_spatial_dims"),
    (gn_unbiased, "unbiased_variance"),
])
def test_group_norm_mistakes_diagnosed(fn, key):
    r = _diagnose(check_group_norm, fn, key)
    assert not r.passed
    assert r.mistake == key, r.message


# ---------------------------------------------------------------- robustness
@pytest.mark.parametrize("checker, bad", [
    (check_group_norm, gn_raises),
    (check_layer_norm, lambda x, w, b, eps: "not a tensor"),
    (check_batch_norm, lambda x, w, b, eps: x[:1]),
    (check_rms_norm, lambda x, w, eps: None),
    (check_layer_norm, lambda x, w, b, eps: 1 / 0),
])
def test_checkers_never_raise(checker, bad):
    r = checker(bad)
    assert not r.passed and not bool(r)
    assert r.message.startswith("✘")


def test_learner_cannot_corrupt_cases():
    """A learner function that writes into its input must not change later cases."""
    def inplace(x, w, b, eps):
        y = ln_ok(x, w, b, eps)
        x.zero_()
        return y
    assert check_layer_norm(inplace).passed
