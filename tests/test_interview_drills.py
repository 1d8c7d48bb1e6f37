"""Lesson 12's whiteboard drills (backward passes, running statistics, folding, the SyncBN
merge): solutions written the way a learner writes them, independently of the checkers'
catalogues. The correct ones pass; each wrong one gets its diagnosis; one that calls torch's
own implementation is refused. The model solutions are compared with torch directly."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import drills

NEW = ["bn_backward", "ln_backward", "bn_running_stats", "fold_bn", "sync_bn_merge", "grad_check",
       "batch_norm_module", "gn_backward", "deepnorm_init", "pre_ln_stack", "switchable_norm"]


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

    def blank(*args, **kwargs):  # (a class is built with keyword arguments)
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


# ---------------------------------------------------------------- drills 11 to 16: references
def test_grad_check_solution_matches_hand_computed_and_autograd_gradients():
    check = drills.model_solution("grad_check")
    x = torch.tensor([1.0, 2.0, -0.5], dtype=torch.float64)
    got = check(lambda t: (t ** 3).sum(), x, 1e-4)  # d/dx x^3 = 3 x^2
    torch.testing.assert_close(got, torch.tensor([3.0, 12.0, 0.75], dtype=torch.float64),
                               rtol=0, atol=1e-7)
    assert torch.equal(x, torch.tensor([1.0, 2.0, -0.5], dtype=torch.float64))  # restored
    g = torch.Generator().manual_seed(3)
    a = torch.randn(4, 3, generator=g, dtype=torch.float64).t()  # non-contiguous
    w = torch.randn(3, 4, generator=g, dtype=torch.float64)

    def f(t):
        return (torch.tanh(t) * w).sum() + (t ** 2).sum() ** 0.5

    got = check(f, a, 1e-6)
    at = a.clone().requires_grad_()
    ref = torch.autograd.grad(f(at), at)[0]
    torch.testing.assert_close(got, ref, rtol=1e-7, atol=1e-8)


def test_batch_norm_module_solution_matches_nn_batchnorm1d_and_keeps_buffers():
    cls = drills.model_solution("batch_norm_module")
    ours, ref = cls(3, momentum=0.2).double(), nn.BatchNorm1d(3, momentum=0.2).double()
    assert {n for n, _ in ours.named_parameters()} == {"weight", "bias"}
    assert set(ours.state_dict()) == set(ref.state_dict())  # the same keys: loads into torch's
    torch.testing.assert_close(ours.running_var, torch.ones(3, dtype=torch.float64))
    assert ours.running_mean.dtype == torch.float64  # moved by .double(): a buffer
    g = torch.Generator().manual_seed(4)
    for step in range(3):
        x = torch.randn(5, 3, 4, generator=g, dtype=torch.float64) * 2 + 1
        torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(dict(ours.state_dict()), dict(ref.state_dict()))
    assert int(ours.num_batches_tracked) == 3
    ours.eval(), ref.eval()
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x))
    fresh = nn.BatchNorm1d(3, momentum=0.2).double().eval()
    fresh.load_state_dict(ours.state_dict())  # strict: every key present
    torch.testing.assert_close(fresh(x), ref(x))


def test_gn_backward_solution_matches_autograd():
    g = torch.Generator().manual_seed(6)
    for shape, groups in (((2, 6, 5), 3), ((3, 4, 2, 2), 2), ((4, 6), 1)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()
        w = (torch.rand(shape[1], generator=g, dtype=torch.float64) + 0.5).requires_grad_()
        b = torch.randn(shape[1], generator=g, dtype=torch.float64).requires_grad_()
        dy = torch.randn(*shape, generator=g, dtype=torch.float64)
        expected = torch.autograd.grad(F.group_norm(x, groups, w, b, 1e-5), (x, w, b), dy)
        ours = drills.model_solution("gn_backward")(dy, x.detach(), groups, w.detach(), 1e-5)
        for a, e in zip(ours, expected):
            torch.testing.assert_close(a, e)


@pytest.mark.parametrize("n, m, side, alpha, beta", [
    (6, 0, "encoder", 1.861, 0.380),    # FACTS.md: encoder-only N = 6
    (12, 0, "encoder", 2.2134, 0.3195),  # encoder-only N = 12: 24^(1/4), 96^(-1/4)
    (0, 12, "decoder", 2.2134, 0.3195),  # decoder-only: the same formula in M
    # encoder-decoder (Table 1): 0.81 (N^4 M)^(1/16), 0.87 (N^4 M)^(-1/16); (3M)^(1/4), (12M)^(-1/4)
    (6, 6, "encoder", 0.81 * 7776 ** (1 / 16), 0.87 * 7776 ** (-1 / 16)),
    (6, 6, "decoder", 18 ** 0.25, 72 ** -0.25),
])
def test_deepnorm_solution_has_the_papers_constants_and_gains(n, m, side, alpha, beta):
    from helpers.transformer import Block
    torch.manual_seed(0)
    block = Block(128, 4, 512, norm_position="deepnorm")
    a, b = drills.model_solution("deepnorm_init")(block, n, m, side)
    assert a == pytest.approx(alpha, abs=5e-4) and b == pytest.approx(beta, abs=5e-4)
    assert block.alpha == a
    for name, gain in (("attn.q_proj", 1.0), ("attn.k_proj", 1.0), ("attn.v_proj", b),
                       ("attn.out_proj", b), ("ffn.fc1", b), ("ffn.fc2", b)):
        w = block.get_submodule(name).weight.detach()
        xavier = (2 / sum(w.shape)) ** 0.5
        assert float(w.std()) == pytest.approx(gain * xavier, rel=0.03), name


def test_pre_ln_stack_solution_matches_the_course_transformer():
    from helpers.transformer import TinyTransformer
    torch.manual_seed(0)
    model = TinyTransformer(11, d_model=16, n_heads=2, num_layers=3, norm_position="pre").double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    idx = torch.randint(0, 11, (2, 7))
    emb = model.tok_emb(idx) + model.pos_emb(torch.arange(7))
    layers = [(b.attn, b.ffn, b.norm1, b.norm2) for b in model.blocks]
    with torch.no_grad():
        torch.testing.assert_close(drills.model_solution("pre_ln_stack")(emb, layers, model.final_norm),
                                   model.features(idx))


def test_switchable_norm_solution_reduces_to_bn_ln_in_with_one_hot_weights():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 3, 5, 6, generator=g, dtype=torch.float64) * 2 + 1
    w = torch.rand(3, generator=g, dtype=torch.float64) + 0.5
    b = torch.randn(3, generator=g, dtype=torch.float64)
    sn = drills.model_solution("switchable_norm")
    one = torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(sn(x, one[0], one[0], w, b, 1e-5), F.instance_norm(x, weight=w, bias=b))
    torch.testing.assert_close(sn(x, one[2], one[2], w, b, 1e-5), F.batch_norm(x, None, None, w, b, True))
    ln = F.layer_norm(x, x.shape[1:], eps=1e-5) * w.view(1, -1, 1, 1) + b.view(1, -1, 1, 1)
    torch.testing.assert_close(sn(x, one[1], one[1], w, b, 1e-5), ln)


# ---------------------------------------------------------------- drills 11 to 16: diagnoses
def test_a_blank_batch_norm_class_gets_a_reminder():
    class MyBatchNorm(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__()
            raise NotImplementedError

    r = grade("batch_norm_module", MyBatchNorm)
    assert not r.passed and r.mistake == "not_implemented" and "not written yet" in r.message


def test_batch_norm_module_calling_f_batch_norm_in_forward_is_refused():
    class Wrapped(nn.BatchNorm1d):
        pass  # nn.BatchNorm1d's own forward calls F.batch_norm

    r = grade("batch_norm_module", Wrapped)
    assert not r.passed and r.mistake == "used_torch_function", r.message


def test_plain_attribute_buffers_are_named_with_the_state_dict():
    base = drills.model_solution("batch_norm_module")

    class Plain(base):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__(num_features, eps, momentum)
            del self._buffers["running_mean"]
            self.running_mean = torch.zeros(num_features)

    r = grade("batch_norm_module", Plain)
    assert not r.passed and r.mistake == "not_registered_buffers"
    assert "state_dict" in r.message and "register_buffer" in r.message


def test_grad_check_that_leaves_x_changed_is_named():
    def shifted(f, x, eps):
        grad = torch.zeros_like(x)
        for i in range(x.numel()):
            x.view(-1)[i] += eps
            fp = f(x)
            x.view(-1)[i] -= 2 * eps
            grad.view(-1)[i] = (fp - f(x)) / (2 * eps)
        return grad

    r = grade("grad_check", shifted)
    assert not r.passed and r.mistake in ("x_not_restored",), r.message


def test_deepnorm_with_beta_on_every_projection_is_named():
    def everywhere(block, n, m, side):
        k = n or m
        alpha, beta = (2 * k) ** 0.25, (8 * k) ** -0.25
        block.alpha = alpha
        for module in block.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_normal_(module.weight, gain=beta)
        return alpha, beta

    r = grade("deepnorm_init", everywhere)
    assert not r.passed and r.mistake == "beta_on_qk", r.message
