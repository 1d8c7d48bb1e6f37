"""Lesson 14 (helpers.atlas, helpers.checks.atlas): each method against an independent
reference (torch where it has the method, otherwise the paper's equations or a property the
method promises), and the two checkers proven by banks of wrong and right solutions written
the way a learner writes them."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import atlas as A
from helpers.checks import CheckResult, check_frn, check_switchable_norm

D = torch.float64


def _x(*shape, seed=0, scale=2.0, shift=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=D) * scale + shift


# ---------------------------------------------------------------- torch as the reference
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_lrn_matches_torch(size):
    x = _x(3, 7, 4, 5)
    ref = torch.nn.LocalResponseNorm(size, alpha=0.3, beta=0.75, k=2.0)(x)
    torch.testing.assert_close(A.local_response_norm(x, size, 0.3, 0.75, 2.0), ref)


def test_lrn_on_1d_and_3d_inputs():
    for shape in [(2, 6, 9), (2, 6, 3, 4, 2)]:
        x = _x(*shape)
        torch.testing.assert_close(A.local_response_norm(x, 3), torch.nn.LocalResponseNorm(3)(x))


@pytest.mark.parametrize("which, ref", [
    (0, lambda x: F.instance_norm(x)),
    (1, lambda x: F.layer_norm(x, x.shape[1:])),
    (2, lambda x: F.batch_norm(x, None, None, training=True)),
])
def test_switchable_norm_one_hot_is_in_ln_bn(which, ref):
    x = _x(4, 6, 3, 5)
    w = torch.zeros(3, dtype=D)
    w[which] = 1
    ones, zeros = torch.ones(6, dtype=D), torch.zeros(6, dtype=D)
    torch.testing.assert_close(A.switchable_norm(x, w, w, ones, zeros), ref(x))


def test_batch_instance_norm_ends_are_bn_and_in():
    x = _x(4, 6, 3, 5)
    ones, zeros = torch.ones(6, dtype=D), torch.zeros(6, dtype=D)
    torch.testing.assert_close(A.batch_instance_norm(x, ones, ones, zeros),
                               F.batch_norm(x, None, None, training=True))
    torch.testing.assert_close(A.batch_instance_norm(x, zeros, ones, zeros), F.instance_norm(x))
    # rho is clipped to [0, 1], as after each update in the paper
    torch.testing.assert_close(A.batch_instance_norm(x, 3 * ones, ones, zeros),
                               A.batch_instance_norm(x, ones, ones, zeros))


def test_conditional_bn_with_constant_modulation_is_bn():
    x = _x(4, 3, 2, 2)
    w, b = torch.tensor([0.5, 1.0, 2.0], dtype=D), torch.tensor([1.0, 0.0, -1.0], dtype=D)
    got = A.conditional_batch_norm(x, w.expand(4, 3), b.expand(4, 3))
    torch.testing.assert_close(got, F.batch_norm(x, None, None, w, b, training=True))


# ---------------------------------------------------------------- the papers' equations
def test_frn_by_hand():
    # one channel, one sample, values 1..4: nu^2 = 7.5
    x = torch.arange(1.0, 5.0, dtype=D).view(1, 1, 2, 2)
    g, b, t = (torch.tensor([v], dtype=D) for v in (2.0, -1.0, 0.0))
    z = A.frn(x, g, b, t, eps=0.0)
    expected = torch.clamp(2 * x / math.sqrt(7.5) - 1, min=0.0)
    torch.testing.assert_close(z, expected)


def test_frn_and_evonorm_s0_are_batch_independent():
    x = _x(5, 4, 3, 3)
    p = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=D)
    for f in (lambda x: A.frn(x, p, p, -p), lambda x: A.evonorm_s0(x, p, p, p, groups=2)):
        torch.testing.assert_close(f(x)[:2], f(x[:2]))
    # B0 uses the batch variance: it is not batch independent
    assert not torch.allclose(A.evonorm_b0(x, p, p, p)[:2], A.evonorm_b0(x[:2], p, p, p))


def test_evonorm_b0_and_s0_by_their_formulas():
    x = _x(3, 4, 2, 3)
    v1 = torch.tensor([0.0, 0.5, 1.0, -0.5], dtype=D)
    ones, zeros = torch.ones(4, dtype=D), torch.zeros(4, dtype=D)
    # B0 with v1 = 0: x / max(batch std, instance std)
    bstd = (x.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5).sqrt()
    istd = (x.var((2, 3), unbiased=False, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(A.evonorm_b0(x, zeros, ones, zeros), x / torch.maximum(bstd, istd))
    # S0 with v1 = 0: sigmoid(0) = 1/2 times GroupNorm without centring in the numerator
    gstd = (x.view(3, 2, 2, 2, 3).var((2, 3, 4), unbiased=False, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(A.evonorm_s0(x, zeros, ones, zeros, groups=2),
                               0.5 * x / gstd.expand(3, 2, 2, 2, 3).reshape(x.shape))
    assert A.evonorm_s0(x, v1, ones, zeros, groups=2).shape == x.shape


def test_zca_whitening_gives_identity_covariance_and_is_symmetric():
    x = _x(512, 5) @ _x(5, 5, seed=1)
    y, w = A.zca_whitening_matrix(x)
    torch.testing.assert_close(y.T @ y / 512, torch.eye(5, dtype=D))
    torch.testing.assert_close(w, w.T)
    cov = (x - x.mean(0)).T @ (x - x.mean(0)) / 512
    torch.testing.assert_close(w @ cov @ w, torch.eye(5, dtype=D))


def test_iternorm_converges_to_zca():
    g = torch.Generator().manual_seed(3)
    q, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=D))
    x = torch.randn(1024, 4, generator=g, dtype=D) * torch.tensor([1.0, 1.3, 1.6, 2.0], dtype=D) @ q
    _, zca = A.zca_whitening_matrix(x)
    errors = [float((A.iternorm_whitening_matrix(x, t)[1] - zca).norm() / zca.norm())
              for t in (1, 2, 3, 4, 5, 6, 12)]
    assert all(b < a for a, b in zip(errors[:6], errors[1:6])), errors  # falls step by step
    assert errors[-1] < 1e-12  # converged (quadratically, to rounding)


def test_power_norm_forward_uses_the_running_quadratic_mean():
    pn = A.PowerNorm(3, alpha=0.9, dtype=D)
    x = _x(8, 3)
    y = pn(x)
    torch.testing.assert_close(y, x / math.sqrt(1 + 1e-5))  # divides by the previous psi (1)
    torch.testing.assert_close(pn.running_phi, 0.9 + 0.1 * (x ** 2).mean(0))
    # one sample's output does not depend on the rest of its batch
    pn2 = A.PowerNorm(3, dtype=D)
    pn2.running_phi.copy_(pn.running_phi)
    pn.eval(), pn2.eval()
    torch.testing.assert_close(pn(x)[:1], pn2(x[:1]))


def test_scale_norm_and_single_scale_rms_norm():
    x = _x(4, 16)
    y = A.scale_norm(x, 3.0)
    torch.testing.assert_close(y.norm(dim=-1), torch.full((4,), 3.0, dtype=D))
    torch.testing.assert_close(A.single_scale_rms_norm(x, 0.75, eps=0.0),
                               A.scale_norm(x, 0.75 * math.sqrt(16)))
    torch.testing.assert_close(A.single_scale_rms_norm(x, 1.0, eps=1e-6),
                               F.rms_norm(x, (16,), eps=1e-6))


def test_cross_iteration_compensation_is_exact_for_a_linear_layer():
    g = torch.Generator().manual_seed(0)
    past = [(torch.randn(16, 4, generator=g, dtype=D) + 1, torch.randn(3, 4, generator=g, dtype=D))
            for _ in range(3)]
    now = torch.randn(3, 4, generator=g, dtype=D)
    truth = torch.stack([x.mean(0) @ now.T for x, _ in past]).mean(0)
    torch.testing.assert_close(A.cross_iteration_mean(past, now), truth)
    assert (A.cross_iteration_mean(past, now, compensate=False) - truth).abs().max() > 0.1


def test_film_and_adaln_zero_identity_at_init():
    h = _x(2, 3, 4, 4)
    gamma, beta = _x(2, 3, seed=1), _x(2, 3, seed=2)
    torch.testing.assert_close(A.film(h, gamma, beta)[1, 2], gamma[1, 2] * h[1, 2] + beta[1, 2])
    torch.manual_seed(0)
    block = A.AdaLNZeroBlock(8, 5, dtype=D)
    x, c = _x(2, 6, 8), _x(2, 5, seed=3)
    torch.testing.assert_close(block(x, c), x)
    with torch.no_grad():
        block.modulation.bias.fill_(0.1)  # once the modulation moves, the block is not the identity
    assert (block(x, c) - x).abs().max() > 1e-3


def test_mix_ln_layout_and_layernorm_scaling():
    assert A.mix_ln_layout(12, 0.25) == ["post"] * 3 + ["pre"] * 9
    assert A.mix_ln_layout(4, 0.0) == ["pre"] * 4 and A.mix_ln_layout(4, 1.0) == ["post"] * 4
    with pytest.raises(ValueError):
        A.mix_ln_layout(0)
    h = F.layer_norm(_x(5, 32), (32,))
    torch.testing.assert_close(A.layernorm_scaling(h, 4), h / 2)
    plain, scaled = A.pre_ln_stack_variance(12), A.pre_ln_stack_variance(12, scaled=True)
    assert scaled[-1] < plain[-1] and plain[-1] > plain[0]


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        A.frn(torch.ones(3, 4), torch.ones(4), torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match="divide"):
        A.evonorm_s0(torch.ones(1, 3, 2, 2), torch.ones(3), torch.ones(3), torch.ones(3), groups=2)


def test_the_map_covers_the_methods():
    names = {row[0] for row in A.ATLAS}
    for needed in ["FRN + TLU", "EvoNorm-B0", "EvoNorm-S0", "Switchable Norm", "Batch-Instance Norm",
                   "Decorrelated BN", "IterNorm", "PowerNorm", "ScaleNorm", "single-scale RMSNorm",
                   "Cross-iteration BN", "adaLN-Zero", "Mix-LN", "LayerNorm Scaling",
                   "Local Response Norm", "BatchNorm", "LayerNorm", "RMSNorm", "WeightNorm",
                   "adaptive gradient clipping", "fused LN / RMSNorm kernels"]:
        assert needed in names, needed
    assert all(len(row) == 5 for row in A.ATLAS)


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


def test_switchable_norm_checker_accepts_right_solutions():
    for fn in (sn_ok_loop, sn_ok_var_mean, sn_ok_moments):
        r = check_switchable_norm(fn)
        assert isinstance(r, CheckResult) and r.passed and r.mistake is None, (fn.__name__, r.message)


@pytest.mark.parametrize("fn, key", [
    (sn_outputs_mixed, "mixed_outputs"), (sn_one_weight_set, "mean_weights_for_variance"),
    (sn_std_mixed, "mixed_std"), (sn_order_bn_ln_in, "weights_order"), (sn_softmax, "softmax_again"),
    (sn_unbiased, "unbiased_variance"), (sn_std_plus_eps, "eps_outside_sqrt"),
    (sn_bn_over_batch_only, "bn_axes"), (sn_ln_over_channels, "ln_axes"),
    (sn_no_affine, "affine_missing"), (sn_no_keepdim, None),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_switchable_norm_checker_names_each_mistake(fn, key):
    r = check_switchable_norm(fn)
    assert not r.passed and r.failed_cases, r.message
    assert r.message.startswith("✘") and "✘ switchable_norm：" in r.message
    if key is None:  # reductions without keepdim broadcast wrongly or fail: a shape/error message
        assert r.mistake in (None, "missing_keepdim"), r.message
    else:
        assert r.mistake == key, (fn.__name__, r.mistake, r.message)
        assert "Likely mistake" in r.message and "可能的错误" in r.message


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


def test_frn_checker_accepts_right_solutions():
    for fn in (frn_ok, frn_ok_rsqrt_where, frn_ok_relu):
        r = check_frn(fn)
        assert r.passed and r.mistake is None, (fn.__name__, r.message)


@pytest.mark.parametrize("key", sorted(FRN_WRONG) + ["tlu_before_affine"])
def test_frn_checker_names_each_mistake(key):
    fn = frn_tlu_first if key == "tlu_before_affine" else FRN_WRONG[key]
    r = check_frn(fn)
    assert not r.passed and r.mistake == key, (key, r.mistake, r.message)
    assert "Likely mistake" in r.message and "可能的错误" in r.message


@pytest.mark.parametrize("check", [check_frn, check_switchable_norm])
@pytest.mark.parametrize("learner", ["raises", "garbage", "not_written"])
def test_checkers_keep_the_contract(check, learner, capsys):
    def not_written(*a):
        raise NotImplementedError
    fn = {"raises": lambda *a: 1 / 0, "garbage": lambda *a: "not a tensor",
          "not_written": not_written}[learner]
    torch.manual_seed(7)
    expected = torch.rand(2)
    torch.manual_seed(7)
    r = check(fn)
    assert torch.equal(torch.rand(2), expected)
    assert isinstance(r, CheckResult) and not r
    assert capsys.readouterr().out == ""
    if learner == "not_written":
        assert r.mistake == "not_implemented" and "not written yet" in r.message
