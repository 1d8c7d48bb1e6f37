"""The lesson-10 checkers against independently written solutions: correct ones pass, each
typical mistake fails with its diagnosis, and no checker raises, prints or moves the global
RNG, whatever the learner's function does."""

import pytest
import torch

from helpers.checks import CheckResult
from helpers.checks import check_batch_renorm, check_frozen_batch_norm, check_weight_decay_groups


# ---------------------------------------------------------------- weight-decay groups
def wd_ok(model, weight_decay):
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def wd_ok_names(model, weight_decay):  # includes the frozen layer: allowed
    groups = {True: [], False: []}
    for name, p in model.named_parameters():
        groups[p.ndim > 1 and not name.endswith("bias")].append(p)
    return [{"params": groups[False], "weight_decay": 0}, {"params": groups[True], "weight_decay": weight_decay}]


def wd_all(model, weight_decay):
    return [{"params": list(model.parameters()), "weight_decay": weight_decay}]


def wd_bias_only(model, weight_decay):
    no = [p for n, p in model.named_parameters() if n.endswith("bias")]
    yes = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    return [{"params": yes, "weight_decay": weight_decay}, {"params": no, "weight_decay": 0.0}]


def wd_bn_by_type(model, weight_decay):
    bn_ids = {id(p) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters()}
    no = [p for n, p in model.named_parameters() if id(p) in bn_ids or n.endswith("bias")]
    yes = [p for n, p in model.named_parameters() if id(p) not in bn_ids and not n.endswith("bias")]
    return [{"params": yes, "weight_decay": weight_decay}, {"params": no, "weight_decay": 0.0}]


def wd_swapped(model, weight_decay):
    groups = wd_ok(model, weight_decay)
    return [{"params": groups[0]["params"], "weight_decay": 0.0}, {"params": groups[1]["params"], "weight_decay": weight_decay}]


def wd_twice(model, weight_decay):
    return [{"params": list(model.parameters()), "weight_decay": 0.0}] + wd_ok(model, weight_decay)[:1]


def wd_no_embedding(model, weight_decay):
    no = [p for n, p in model.named_parameters() if p.dim() < 2 or "embed" in n]
    yes = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    return [{"params": yes, "weight_decay": weight_decay}, {"params": no, "weight_decay": 0.0}]


def wd_wrong_value(model, weight_decay):
    groups = wd_ok(model, weight_decay)
    groups[0]["weight_decay"] = 1e-4
    return groups


def wd_raises(model, weight_decay):
    return [{"params": [p for p in model.parameters() if p.dimm() >= 2]}]


def wd_not_dicts(model, weight_decay):
    return [list(model.parameters())]


@pytest.mark.parametrize("fn", [wd_ok, wd_ok_names])
def test_weight_decay_correct(fn):
    result = check_weight_decay_groups(fn)
    assert result.passed and result.mistake is None, result.message


@pytest.mark.parametrize("fn, key", [
    (wd_all, "decay_everything"), (wd_bias_only, "norm_gains_decayed"),
    (wd_bn_by_type, "only_batchnorm_excluded"), (wd_swapped, "inverted"),
    (wd_twice, "duplicate_or_missing"), (wd_no_embedding, "matrix_not_decayed"),
    (wd_wrong_value, "wrong_value"), (wd_not_dicts, "bad_format"), (wd_raises, None)])
def test_weight_decay_mistakes(fn, key):
    result = check_weight_decay_groups(fn)
    assert isinstance(result, CheckResult) and not result.passed
    assert result.mistake == key, result.message
    assert result.failed_cases


# ---------------------------------------------------------------- frozen BatchNorm
def _shape(v, x, last=False):
    return v.view(*([1] * (x.dim() - 1)), -1) if last else v.view(1, -1, *([1] * (x.dim() - 2)))


def frozen_ok(x, w, b, rm, rv, eps):
    scale = w / torch.sqrt(rv + eps)
    return x * _shape(scale, x) + _shape(b - rm * scale, x)


def frozen_ok_direct(x, w, b, rm, rv, eps):
    return (x - _shape(rm, x)) / torch.sqrt(_shape(rv, x) + eps) * _shape(w, x) + _shape(b, x)


def frozen_batch_stats(x, w, b, rm, rv, eps):
    dims = [0] + list(range(2, x.dim()))
    m, v = x.mean(dims, keepdim=True), x.var(dims, unbiased=False, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * _shape(w, x) + _shape(b, x)


def frozen_eps_out(x, w, b, rm, rv, eps):
    scale = w / (rv.sqrt() + eps)
    return x * _shape(scale, x) + _shape(b - rm * scale, x)


def frozen_no_sqrt(x, w, b, rm, rv, eps):
    scale = w / (rv + eps)
    return x * _shape(scale, x) + _shape(b - rm * scale, x)


def frozen_no_mean(x, w, b, rm, rv, eps):
    scale = w * (rv + eps).rsqrt()
    return x * _shape(scale, x) + _shape(b, x)


def frozen_last_dim(x, w, b, rm, rv, eps):
    scale = w * (rv + eps).rsqrt()
    return x * _shape(scale, x, True) + _shape(b - rm * scale, x, True)


def frozen_updates(x, w, b, rm, rv, eps):
    out = frozen_ok(x, w, b, rm, rv, eps)
    rm.mul_(0.9).add_(0.1 * x.mean(0) if x.dim() == 2 else 0.1 * x.mean((0, 2, 3)) if x.dim() == 4 else 0.1 * x.mean((0, 2)))
    return out


def frozen_prints_and_draws(x, w, b, rm, rv, eps):
    torch.rand(3)  # touches the global RNG
    return frozen_ok(x, w, b, rm, rv, eps)


def frozen_bad_shape(x, w, b, rm, rv, eps):
    return frozen_ok(x, w, b, rm, rv, eps).flatten()


@pytest.mark.parametrize("fn", [frozen_ok, frozen_ok_direct, frozen_prints_and_draws])
def test_frozen_correct(fn):
    result = check_frozen_batch_norm(fn)
    assert result.passed, result.message


@pytest.mark.parametrize("fn, key", [
    (frozen_batch_stats, "batch_statistics"), (frozen_eps_out, "eps_outside_sqrt"),
    (frozen_no_sqrt, "var_as_std"), (frozen_no_mean, "mean_not_subtracted"),
    (frozen_last_dim, "channel_last"), (frozen_updates, "buffers_modified"),
    (frozen_bad_shape, None)])
def test_frozen_mistakes(fn, key):
    result = check_frozen_batch_norm(fn)
    assert not result.passed and result.mistake == key, result.message


# ---------------------------------------------------------------- Batch Renorm
def renorm_ok(x, rm, rs, w, b, rmax, dmax, eps):
    dims = [0] + list(range(2, x.dim()))
    sh = [1, -1] + [1] * (x.dim() - 2)
    mu = x.mean(dims)
    sigma = torch.sqrt(((x - mu.view(sh)) ** 2).mean(dims) + eps)
    with torch.no_grad():
        r = torch.clamp(sigma / rs, 1 / rmax, rmax)
        d = torch.clamp((mu - rm) / rs, -dmax, dmax)
    x_hat = (x - mu.view(sh)) / sigma.view(sh) * r.view(sh) + d.view(sh)
    return w.view(sh) * x_hat + b.view(sh)


def renorm_ok_updates_buffers(x, rm, rs, w, b, rmax, dmax, eps):
    out = renorm_ok(x, rm, rs, w, b, rmax, dmax, eps)
    with torch.no_grad():
        dims = [0] + list(range(2, x.dim()))
        rm += 0.01 * (x.mean(dims) - rm)
    return out


def _renorm_variant(*, detach=True, clip=True, invert=False, raw_d=False, unbiased=False, plain=False):
    def fn(x, rm, rs, w, b, rmax, dmax, eps):
        dims = [0] + list(range(2, x.dim()))
        sh = [1, -1] + [1] * (x.dim() - 2)
        mu = x.mean(dims)
        var = x.var(dims, unbiased=unbiased)
        sigma = (var + eps) ** 0.5
        r = rs / sigma if invert else sigma / rs
        d = (mu - rm) if raw_d else (mu - rm) / rs
        if clip:
            r = torch.minimum(torch.maximum(r, torch.full_like(r, 1 / rmax)), torch.full_like(r, rmax))
            d = torch.minimum(torch.maximum(d, torch.full_like(d, -dmax)), torch.full_like(d, dmax))
        if detach:
            r, d = r.detach(), d.detach()
        x_hat = (x - mu.view(sh)) / sigma.view(sh)
        if not plain:
            x_hat = x_hat * r.view(sh) + d.view(sh)
        return w.view(sh) * x_hat + b.view(sh)
    return fn


def renorm_raises(x, rm, rs, w, b, rmax, dmax, eps):
    return x.mean(dim=[0, 2, 3])


@pytest.mark.parametrize("fn", [renorm_ok, renorm_ok_updates_buffers, _renorm_variant()])
def test_renorm_correct(fn):
    result = check_batch_renorm(fn)
    assert result.passed, result.message


@pytest.mark.parametrize("kw, key", [
    (dict(detach=False), "r_d_not_detached"), (dict(clip=False), "no_clipping"),
    (dict(invert=True), "r_inverted"), (dict(raw_d=True), "d_not_scaled"),
    (dict(unbiased=True), "unbiased_variance"), (dict(plain=True), "plain_batch_norm")])
def test_renorm_mistakes(kw, key):
    result = check_batch_renorm(_renorm_variant(**kw))
    assert not result.passed and result.mistake == key, result.message


def test_renorm_exception_is_a_diagnosis():
    result = check_batch_renorm(renorm_raises)
    assert not result.passed and "raised" in result.message or "returned" in result.message


@pytest.mark.parametrize("check, fn", [(check_weight_decay_groups, wd_ok), (check_frozen_batch_norm, frozen_prints_and_draws),
                                       (check_batch_renorm, renorm_ok)])
def test_checkers_leave_global_rng_and_stdout(check, fn, capsys):
    state = torch.random.get_rng_state()
    result = check(fn)
    assert torch.equal(state, torch.random.get_rng_state())
    assert capsys.readouterr().out == ""
    en, zh = result.message.split("/", 1) if result.passed else result.message.split("\n✘", 1)
    assert en.isascii() or "✔" in en or "✘" in en
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
