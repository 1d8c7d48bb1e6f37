"""Lesson 12's whiteboard drills (backward passes, running statistics, folding, the SyncBN
merge): solutions written the way a learner writes them, independently of the checkers'
catalogues. The correct ones pass; each wrong one gets its diagnosis; one that calls torch's
own implementation is refused. The model solutions are compared with torch directly."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import drills

NEW = ["bn_backward", "ln_backward", "bn_running_stats", "fold_bn", "sync_bn_merge"]


def grade(name, fn):
    result = drills.grade(name, fn)
    assert "✔" in result.message or "✘" in result.message or "…" in result.message
    return result


# ---------------------------------------------------------------- the references themselves
def test_backward_solutions_match_autograd():
    g = torch.Generator().manual_seed(5)
    for norm, name in ((lambda x, w, b: F.batch_norm(x, None, None, w, b, True), "bn_backward"),
                       (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), "ln_backward")):
        x = torch.randn(4, 3, 5, generator=g, dtype=torch.float64, requires_grad=True)
        c = 3 if name == "bn_backward" else 5
        w = (torch.rand(c, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
        b = torch.randn(c, generator=g, dtype=torch.float64).requires_grad_()
        dy = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
        expected = torch.autograd.grad(norm(x, w, b), (x, w, b), dy)
        ours = drills.model_solution(name)(dy, x.detach(), w.detach(), 1e-5)
        for a, e in zip(ours, expected):
            torch.testing.assert_close(a, e)


def test_running_stats_solution_matches_nn_batchnorm():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3, momentum=0.2).double()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_()
    rm, rv = bn.running_mean.clone(), bn.running_var.clone()
    step = drills.model_solution("bn_running_stats")
    for _ in range(3):
        x = torch.randn(5, 3, 4, dtype=torch.float64) * 2 + 1
        y, rm, rv = step(x, bn.weight.detach(), bn.bias.detach(), rm, rv, True, 0.2, bn.eps)
        torch.testing.assert_close(y, bn(x).detach())
        torch.testing.assert_close((rm, rv), (bn.running_mean, bn.running_var))
    bn.eval()
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    y, _, _ = step(x, bn.weight.detach(), bn.bias.detach(), rm, rv, False, 0.2, bn.eps)
    torch.testing.assert_close(y, bn(x).detach())


def test_fold_solution_matches_the_unfolded_layers():
    torch.manual_seed(0)
    linear, bn = nn.Linear(6, 4).double(), nn.BatchNorm1d(4, eps=1e-3).double()
    bn(linear(torch.randn(32, 6, dtype=torch.float64) * 3 + 1))  # non-trivial running statistics
    bn.eval()
    W, b = drills.model_solution("fold_bn")(linear.weight.detach(), linear.bias.detach(),
                                            bn.weight.detach(), bn.bias.detach(),
                                            bn.running_mean, bn.running_var, bn.eps)
    x = torch.randn(7, 6, dtype=torch.float64)
    torch.testing.assert_close(x @ W.T + b, bn(linear(x)).detach())


def test_merge_solution_matches_the_full_batch():
    g = torch.Generator().manual_seed(1)
    shards = [torch.randn(n, 4, generator=g, dtype=torch.float64) * (k + 1) + 3 * k
              for k, n in enumerate((1, 6, 3))]
    counts = torch.tensor([float(len(s)) for s in shards], dtype=torch.float64)
    means = torch.stack([s.mean(0) for s in shards])
    vars_ = torch.stack([s.var(0, correction=0) for s in shards])
    whole = torch.cat(shards)
    mean, var, unbiased = drills.model_solution("sync_bn_merge")(counts, means, vars_)
    torch.testing.assert_close((mean, var, unbiased),
                               (whole.mean(0), whole.var(0, correction=0), whole.var(0)))
    # what SyncBatchNorm normalises with is BatchNorm over the whole batch
    y = (whole - mean) / torch.sqrt(var + 1e-5)
    torch.testing.assert_close(y, F.batch_norm(whole, None, None, training=True))


@pytest.mark.parametrize("name", NEW)
def test_correct_solutions_pass_and_blanks_get_a_reminder(name):
    assert grade(name, drills.model_solution(name)).passed

    def blank(*args):
        raise NotImplementedError

    result = grade(name, blank)
    assert not result.passed and result.mistake == "not_implemented"
    assert "not written yet" in result.message


# ---------------------------------------------------------------- BatchNorm's backward
def _bn(x):
    dims = [0] + list(range(2, x.dim()))
    return dims, [1, -1] + [1] * (x.dim() - 2)


def bn_bwd(dy, x, w, eps, *, mean_term=True, var_term=True, unbiased=False, gamma=True,
           average=False, axes="channel"):
    dims, shape = _bn(x)
    sdims = dims if axes == "channel" else list(range(1, x.dim()))
    mu = x.mean(sdims, keepdim=True)
    var = x.var(sdims, keepdim=True, unbiased=unbiased)
    xh = (x - mu) / torch.sqrt(var + eps)
    dxh = dy * w.view(shape) if gamma else dy
    n = x.numel() / x.shape[1] if axes == "channel" else x[0].numel()
    dx = dxh
    if mean_term:
        dx = dx - dxh.sum(sdims, keepdim=True) / n
    if var_term:
        dx = dx - xh * (dxh * xh).sum(sdims, keepdim=True) / n
    dx = dx / torch.sqrt(var + eps)
    red = (lambda t: t.mean(dims)) if average else (lambda t: t.sum(dims))
    return dx, red(dy * xh), red(dy)


@pytest.mark.parametrize("kw, key", [
    (dict(mean_term=False), "missing_mean_term"),
    (dict(var_term=False), "missing_xhat_term"),
    (dict(mean_term=False, var_term=False), "statistics_as_constants"),
    (dict(unbiased=True), "unbiased_variance"),
    (dict(gamma=False), "gamma_missing"),
    (dict(average=True), "param_grad_mean"),
    (dict(axes="sample"), "per_sample_axes"),
])
def test_bn_backward_diagnoses(kw, key):
    result = grade("bn_backward", lambda dy, x, w, eps: bn_bwd(dy, x, w, eps, **kw))
    assert not result.passed and result.mistake == key, result.message
    assert "可能的错误" in result.message


def test_bn_backward_parameter_gradient_slips():
    def with_x(dy, x, w, eps):  # dgamma = sum(dy * x)
        dx, _, db = bn_bwd(dy, x, w, eps)
        return dx, (dy * x).sum(_bn(x)[0]), db

    def per_position(dy, x, w, eps):  # dgamma summed over the batch only: (C, L) for 3-D input
        dx, _, _ = bn_bwd(dy, x, w, eps)
        xh = (x - x.mean(_bn(x)[0], keepdim=True)) / torch.sqrt(
            x.var(_bn(x)[0], keepdim=True, unbiased=False) + eps)
        return dx, (dy * xh).sum(0), dy.sum(0)

    r = grade("bn_backward", with_x)
    assert not r.passed and r.mistake == "param_grad_uses_x", r.message
    r = grade("bn_backward", per_position)
    assert not r.passed and r.mistake == "param_grad_shape", r.message


def test_bn_backward_through_autograd_is_refused():
    def by_autograd(dy, x, w, eps):
        with torch.enable_grad():
            x = x.clone().requires_grad_()
            w = w.clone().requires_grad_()
            b = torch.zeros_like(w, requires_grad=True)
            y = F.batch_norm(x, None, None, w, b, training=True, eps=eps)
            return torch.autograd.grad(y, (x, w, b), dy)

    def elementary_then_backward(dy, x, w, eps):  # no F.batch_norm, but .backward()
        with torch.enable_grad():
            x = x.clone().requires_grad_()
            w = w.clone().requires_grad_()
            b = torch.zeros_like(w, requires_grad=True)
            dims, shape = _bn(x)
            y = (x - x.mean(dims, keepdim=True)) / torch.sqrt(
                x.var(dims, keepdim=True, unbiased=False) + eps) * w.view(shape) + b.view(shape)
            (y * dy).sum().backward()
            return x.grad, w.grad, b.grad

    for fn in (by_autograd, elementary_then_backward):
        r = grade("bn_backward", fn)
        assert not r.passed and r.mistake == "used_torch_function", r.message


# ---------------------------------------------------------------- LayerNorm's backward
def ln_bwd(dy, x, w, eps, *, mean_term=True, var_term=True, unbiased=False, axes="feature",
           summed=True):
    d = -1 if axes == "feature" else 0
    mu = x.mean(d, keepdim=True)
    var = x.var(d, keepdim=True, unbiased=unbiased)
    r = (var + eps).rsqrt()
    xh = (x - mu) * r
    g = dy * w
    dx = g.clone()
    if mean_term:
        dx -= g.mean(d, keepdim=True)
    if var_term:
        dx -= xh * (g * xh).mean(d, keepdim=True)
    lead = tuple(range(x.dim() - 1))
    gw, gb = ((dy * xh).sum(lead), dy.sum(lead)) if summed else (dy * xh, dy)
    return r * dx, gw, gb


@pytest.mark.parametrize("kw, key", [
    (dict(mean_term=False), "missing_mean_term"),
    (dict(var_term=False), "missing_xhat_term"),
    (dict(unbiased=True), "unbiased_variance"),
    (dict(axes="batch"), "per_feature_axes"),
    (dict(summed=False), "param_grad_shape"),
])
def test_ln_backward_diagnoses(kw, key):
    result = grade("ln_backward", lambda dy, x, w, eps: ln_bwd(dy, x, w, eps, **kw))
    assert not result.passed and result.mistake == key, result.message


def test_ln_backward_calling_layer_norm_is_refused():
    from torch.nn.functional import layer_norm  # imported before the check: still refused

    def fn(dy, x, w, eps):
        with torch.enable_grad():
            x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
            b = torch.zeros_like(w, requires_grad=True)
            out = layer_norm(x, x.shape[-1:], w, b, eps)
            return torch.autograd.grad(out, (x, w, b), dy)

    r = grade("ln_backward", fn)
    assert not r.passed and r.mistake == "used_torch_function" and "layer_norm" in r.message


# ---------------------------------------------------------------- running statistics
def bn_step(x, w, b, rm, rv, training, momentum, eps, *, store="unbiased", norm="biased",
            keras=False, eval_batch=False, train_running=False, update=True,
            update_eval=False):
    dims, shape = _bn(x)
    if rm is None:  # a freshly built layer
        rm, rv = torch.zeros(x.shape[1], dtype=x.dtype), torch.ones(x.shape[1], dtype=x.dtype)
    bm = x.mean(dims)
    bv_b = x.var(dims, unbiased=False)
    bv_u = x.var(dims, unbiased=True)
    if training or update_eval:
        if update:
            new_v = bv_u if store == "unbiased" else bv_b
            if keras:
                rm_new = momentum * rm + (1 - momentum) * bm
                rv_new = momentum * rv + (1 - momentum) * new_v
            else:
                rm_new = rm + momentum * (bm - rm)
                rv_new = rv + momentum * (new_v - rv)
        else:
            rm_new, rv_new = rm, rv
    else:
        rm_new, rv_new = rm, rv
    if training and not train_running or (not training and eval_batch):
        mean, var = bm, (bv_b if norm == "biased" else bv_u)
    else:
        mean, var = rm, rv
    y = (x - mean.view(shape)) / (var.view(shape) + eps).sqrt() * w.view(shape) + b.view(shape)
    return y, rm_new, rv_new


@pytest.mark.parametrize("kw, key", [
    (dict(store="biased"), "running_var_biased"),
    (dict(norm="unbiased"), "unbiased_variance"),
    (dict(keras=True), "momentum_convention"),
    (dict(eval_batch=True), "eval_uses_batch_stats"),
    (dict(train_running=True), "train_uses_running_stats"),
    (dict(update=False), "running_stats_not_updated"),
    (dict(update_eval=True), "updated_in_eval"),
])
def test_running_stats_diagnoses(kw, key):
    result = grade("bn_running_stats", lambda *a: bn_step(*a, **kw))
    assert not result.passed and result.mistake == key, result.message


def test_running_stats_in_place_update_passes_and_module_is_refused():
    def in_place(x, w, b, rm, rv, training, momentum, eps):
        if rm is None:
            rm, rv = torch.zeros(x.shape[1], dtype=x.dtype), torch.ones(x.shape[1], dtype=x.dtype)
        y, new_m, new_v = bn_step(x, w, b, rm, rv, training, momentum, eps)
        rm.copy_(new_m)
        rv.copy_(new_v)
        return y, rm, rv

    assert grade("bn_running_stats", in_place).passed

    def via_module(x, w, b, rm, rv, training, momentum, eps):
        bn = nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum).double()
        bn.weight.data, bn.bias.data = w, b
        bn.running_mean, bn.running_var = rm, rv
        bn.train(training)
        return bn(x), bn.running_mean, bn.running_var

    r = grade("bn_running_stats", via_module)
    assert not r.passed and r.mistake == "used_torch_function"


# ---------------------------------------------------------------- folding
def fold(W, b, g, beta, rm, rv, eps, *, with_eps=True, sqrt=True, mean=True, bias=True,
         rows=True, eps_value=None):
    e = (eps if eps_value is None else eps_value) if with_eps else 0.0
    std = (rv + e).sqrt() if sqrt else rv + e
    scale = g / std
    W2 = W * scale.unsqueeze(1) if rows else W * scale.unsqueeze(0)
    b2 = beta + scale * ((b if bias else 0) - (rm if mean else 0))
    return W2, b2


@pytest.mark.parametrize("kw, key", [
    (dict(with_eps=False), "fold_eps_missing"),
    (dict(sqrt=False), "fold_variance_not_std"),
    (dict(mean=False), "fold_mean_missing"),
    (dict(bias=False), "fold_linear_bias_dropped"),
    (dict(rows=False), "fold_scale_on_columns"),
    (dict(eps_value=1e-5), "fold_eps_hard_coded"),
])
def test_fold_diagnoses(kw, key):
    result = grade("fold_bn", lambda *a: fold(*a, **kw))
    assert not result.passed and result.mistake == key, result.message


def test_fold_with_torch_fusion_is_refused():
    from torch.nn.utils import fusion

    r = grade("fold_bn", lambda W, b, g, beta, rm, rv, eps:
              fusion.fuse_linear_bn_weights(W, b, rm, rv, eps, g, beta))
    assert not r.passed and r.mistake == "used_torch_function"


# ---------------------------------------------------------------- the SyncBN merge
def merge(counts, means, vars_, *, weighted=True, between=True, plain=False, swap=False,
          same=False):
    N = counts.sum()
    w = counts.unsqueeze(1) / N
    mu = (w * means).sum(0) if weighted else means.mean(0)
    if plain:
        var = vars_.mean(0)
    else:
        var = (w * vars_).sum(0) + ((w * (means - mu) ** 2).sum(0) if between else 0)
    unb = var if same else var * N / (N - 1)
    return (mu, unb, var) if swap else (mu, var, unb)


@pytest.mark.parametrize("kw, key", [
    (dict(weighted=False), "unweighted_mean"),
    (dict(between=False), "missing_between_term"),
    (dict(plain=True), "averaged_variances"),
    (dict(swap=True), "biased_unbiased_swapped"),
    (dict(same=True), "unbiased_not_corrected"),
])
def test_merge_diagnoses(kw, key):
    result = grade("sync_bn_merge", lambda *a: merge(*a, **kw))
    assert not result.passed and result.mistake == key, result.message


def test_merge_with_syncbn_kernel_is_refused():
    def with_kernel(counts, means, vars_):  # nn.SyncBatchNorm's own merge (a GPU kernel)
        mean, invstd = torch.batch_norm_gather_stats_with_counts(
            means, means, (vars_ + 1e-5).rsqrt(), None, None, 0.1, 1e-5, counts)
        return mean, 1 / invstd ** 2 - 1e-5, None

    r = grade("sync_bn_merge", with_kernel)
    assert not r.passed and r.mistake == "used_torch_function", r.message


# ---------------------------------------------------------------- drill 5 and the others
def test_calling_torch_group_norm_no_longer_passes_drill_5():
    r = grade("group_norm", lambda x, G, w, b, eps: F.group_norm(x, G, w, b, eps))
    assert not r.passed and r.mistake == "used_torch_function"
    assert r.message.startswith("✘ group_norm: not graded, it calls torch.nn.functional.group_norm.")
    assert "未评分，它调用了 torch.nn.functional.group_norm" in r.message
    r = grade("group_norm", lambda x, G, w, b, eps: nn.functional.group_norm(x, G, w, b, eps))
    assert not r.passed and r.mistake == "used_torch_function"


@pytest.mark.parametrize("name, fn", [
    ("batch_norm_train", lambda x, w, b, eps: F.batch_norm(x, None, None, w, b, True, eps=eps)),
    ("layer_norm", lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
    ("rms_norm", lambda x, w, eps: torch.rms_norm(x, x.shape[-1:], w, eps)),
])
def test_every_forward_drill_refuses_torch(name, fn):
    r = grade(name, fn)
    assert not r.passed and r.mistake == "used_torch_function"


def test_the_guard_is_lifted_after_the_check():
    grade("group_norm", lambda x, G, w, b, eps: F.group_norm(x, G, w, b, eps))
    x = torch.randn(2, 4, 3)
    F.group_norm(x, 2)  # works again outside the check
    torch.autograd.grad((x.requires_grad_() * 2).sum(), x)


def test_show_solution_prints_the_reference(capsys):
    drills.show_solution("bn_backward")
    out = capsys.readouterr().out
    assert out.startswith("def bn_backward(grad_output, x, weight, eps):")
    assert "x_hat * (g * x_hat).mean(dims, keepdim=True)" in out
