"""helpers.weight_norms against independent references: torch's parametrizations
(weight_norm, spectral_norm), torch._weight_norm, torch.linalg.matrix_norm, autograd, an
explicit convolution matrix, and hand-computed values."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import experiments
from helpers import weight_norms as WN

D = torch.float64


def _rand(*shape, seed=0, scale=1.0):
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=D) * scale


# ---------------------------------------------------------------- WeightNorm: the formula
def test_weight_norm_hand_computed():
    v = torch.tensor([[3.0, 4.0], [0.0, 2.0]], dtype=D)
    g = torch.tensor([[2.0], [0.5]], dtype=D)
    expected = torch.tensor([[1.2, 1.6], [0.0, 0.5]], dtype=D)
    torch.testing.assert_close(WN.weight_norm_weight(v, g), expected)


@pytest.mark.parametrize("shape,dim", [((5, 3), 0), ((4, 3, 2, 2), 0), ((5, 3), 1),
                                       ((4, 3, 2, 2), 1), ((5, 3), None)])
def test_weight_norm_matches_torch_kernel(shape, dim):
    v = _rand(*shape)
    ref_g = torch.norm_except_dim(v, 2, dim if dim is not None else -1)
    g = ref_g * (1.0 + _rand(*ref_g.shape, seed=1).abs())
    expected = torch._weight_norm(v, g, dim if dim is not None else -1)
    torch.testing.assert_close(WN.weight_norm_weight(v, g, dim), expected)
    torch.testing.assert_close(WN.norm_except_dim(v, dim), ref_g.reshape(WN.norm_except_dim(v, dim).shape))


@pytest.mark.parametrize("shape", [(4, 6), (3, 2, 3, 3)])
def test_weight_norm_backward_against_autograd(shape):
    v = _rand(*shape, scale=2.0)
    g = _rand(shape[0], *[1] * (len(shape) - 1), seed=1)  # negative entries included
    grad_w = _rand(*shape, seed=2)
    gv, vv = g.clone().requires_grad_(), v.clone().requires_grad_()
    auto_g, auto_v = torch.autograd.grad(torch._weight_norm(vv, gv, 0), (gv, vv), grad_w)
    hand_v, hand_g = WN.weight_norm_backward(grad_w, v, g)
    torch.testing.assert_close(hand_v, auto_v, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(hand_g, auto_g, rtol=1e-10, atol=1e-12)
    # orthogonal to v, per unit
    assert (hand_v * v).flatten(1).sum(1).abs().max() < 1e-12


def test_weight_norm_function_gradcheck():
    g = _rand(3, 1).requires_grad_()
    v = _rand(3, 4, seed=1).requires_grad_()
    assert torch.autograd.gradcheck(WN.WeightNormFunction.apply, (g, v))


def test_weight_norm_module_matches_torch_and_state_dicts_load_both_ways():
    torch.manual_seed(0)
    plain = nn.Conv2d(3, 5, 3, dtype=D)
    x = _rand(2, 3, 6, 6)
    ours = WN.weight_norm(copy.deepcopy(plain))
    theirs = nn.utils.parametrizations.weight_norm(copy.deepcopy(plain))
    torch.testing.assert_close(ours(x), plain(x))  # registration keeps the function
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    with torch.no_grad():
        theirs.parametrizations.weight.original0.mul_(2.5)
        theirs.parametrizations.weight.original1.add_(_rand(5, 3, 3, 3, seed=3, scale=0.1))
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x), theirs(x))
    ga = torch.autograd.grad(ours(x).square().sum(), list(ours.parameters()))
    gb = torch.autograd.grad(theirs(x).square().sum(), list(theirs.parameters()))
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b)
    fresh = nn.utils.parametrizations.weight_norm(nn.Conv2d(3, 5, 3, dtype=D))
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(fresh(x), ours(x))


def test_weight_norm_impl_switch():
    m = WN.weight_norm(nn.Linear(3, 2), impl="torch")
    assert isinstance(m.parametrizations.weight[0], nn.utils.parametrizations._WeightNorm)
    with pytest.raises(ValueError):
        WN.weight_norm(nn.Linear(3, 2), impl="numpy")


# ---------------------------------------------------------------- init, mean-only BN
def test_data_dependent_init_standardises_the_init_batch():
    x = _rand(64, 1, 8, 8)
    model = WN.digits_cnn("wn").double()
    before = torch.random.get_rng_state()
    WN.data_dependent_init(model, x, generator=torch.Generator().manual_seed(0))
    assert torch.equal(before, torch.random.get_rng_state())
    for mean, std in WN.layer_output_stats(model, x):
        assert mean.abs().max() < 1e-10
        torch.testing.assert_close(std, torch.ones_like(std))
    # v drawn with std 0.05 (before g was set): the first layer's v has 16 * 9 values
    v = model[0].parametrizations.weight.original1
    assert 0.03 < float(v.detach().std()) < 0.07


def test_data_dependent_init_without_bias_leaves_bias_zero():
    model = WN.digits_cnn("wn").double()
    WN.data_dependent_init(model, _rand(32, 1, 8, 8), torch.Generator().manual_seed(0), init_bias=False)
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            assert m.bias.abs().max() == 0


def test_mean_only_batch_norm():
    t = _rand(10, 3, 4, 4) + torch.tensor([1.0, -2.0, 5.0], dtype=D).view(1, 3, 1, 1)
    m = WN.MeanOnlyBatchNorm(3, dtype=D)
    with torch.no_grad():
        m.bias.copy_(torch.tensor([0.5, 0.0, -1.0], dtype=D))
    y = m(t)
    torch.testing.assert_close(y.mean((0, 2, 3)), m.bias.detach())
    torch.testing.assert_close((y - t).std((0, 2, 3)), torch.zeros(3, dtype=D), atol=1e-12, rtol=0)
    torch.testing.assert_close(m.running_mean, 0.1 * t.mean((0, 2, 3)))
    m.eval()
    torch.testing.assert_close(m(t), t - m.running_mean.view(1, 3, 1, 1) + m.bias.view(1, 3, 1, 1))


# ---------------------------------------------------------------- WS, BCN, NFNets
def test_standardize_weight_variants_by_hand():
    w = _rand(4, 3, 3, 3, scale=0.3) + 0.2
    flat = w.flatten(1)
    mu = flat.mean(1, keepdim=True)
    bit = (flat - mu) / torch.sqrt(((flat - mu) ** 2).mean(1, keepdim=True) + 1e-10)
    qiao = (flat - mu) / (torch.sqrt(((flat - mu) ** 2).sum(1, keepdim=True) / 26) + 1e-5)
    torch.testing.assert_close(WN.standardize_weight(w, "bit").flatten(1), bit)
    torch.testing.assert_close(WN.standardize_weight(w, "qiao").flatten(1), qiao)
    with pytest.raises(ValueError):
        WN.standardize_weight(w, "other")


def test_ws_conv2d_is_conv_with_standardised_kernel():
    torch.manual_seed(0)
    conv = WN.WSConv2d(3, 4, 3, padding=1, bias=True).double()
    x = _rand(2, 3, 5, 5)
    flat = conv.weight.detach().flatten(1)
    std_kernel = ((flat - flat.mean(1, keepdim=True)) / flat.std(1, correction=0, keepdim=True)).view_as(conv.weight)
    torch.testing.assert_close(conv(x), F.conv2d(x, std_kernel, conv.bias, padding=1), rtol=1e-8, atol=1e-8)
    assert set(conv.state_dict()) == set(nn.Conv2d(3, 4, 3).state_dict())


def test_batch_channel_norm_is_bn_then_gn():
    torch.manual_seed(0)
    x = _rand(4, 8, 3, 3, scale=3.0) + 1.0
    bcn = WN.BatchChannelNorm(8, 2).double()
    expected = F.group_norm(F.batch_norm(x, None, None, training=True), 2)
    torch.testing.assert_close(bcn(x), expected)


def test_scaled_standardize_weight_row_norm_is_gain():
    w = _rand(5, 4, 3, 3) + 0.3
    gain = torch.arange(1.0, 6.0, dtype=D)
    out = WN.scaled_standardize_weight(w, gain, eps=0.0).flatten(1)
    torch.testing.assert_close(out.norm(dim=1), gain)
    assert out.mean(1).abs().max() < 1e-12


def test_adaptive_grad_clip_by_hand():
    w = nn.Parameter(torch.tensor([[3.0, 4.0], [1.0, 0.0]], dtype=D))  # row norms 5, 1
    w.grad = torch.tensor([[0.0, 10.0], [0.001, 0.0]], dtype=D)        # ratios 2, 0.001
    WN.adaptive_grad_clip([w], clipping=0.1)
    torch.testing.assert_close(w.grad, torch.tensor([[0.0, 0.5], [0.001, 0.0]], dtype=D))
    tiny = nn.Parameter(torch.zeros(2, 2, dtype=D))                     # max(||W||, 1e-3)
    tiny.grad = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=D)
    WN.adaptive_grad_clip([tiny], clipping=0.01)
    torch.testing.assert_close(tiny.grad[0, 0], torch.tensor(1e-5, dtype=D))


# ---------------------------------------------------------------- spectral norm
def test_power_iteration_converges_to_matrix_norm_from_below():
    w = _rand(7, 4)
    exact = torch.linalg.matrix_norm(w, 2)
    v = _rand(4, seed=1)
    v = v / v.norm()
    for _ in range(200):
        u, v, sigma = WN.power_iteration_step(w, v)
        assert sigma <= exact + 1e-12
    torch.testing.assert_close(sigma, exact)


def test_power_iteration_step_matches_torch_internal_order():
    w = _rand(5, 3)
    v0 = _rand(3, seed=2)
    v0 = v0 / v0.norm()
    with torch.random.fork_rng(devices=[]):
        sn = nn.utils.parametrizations._SpectralNorm(w.clone(), n_power_iterations=1)
    sn._v.copy_(v0)
    sn.train()
    out = sn(w)
    u, v, sigma = WN.power_iteration_step(w, v0)
    torch.testing.assert_close(sn._u, u)
    torch.testing.assert_close(sn._v, v)
    torch.testing.assert_close(out, w / sigma)


@pytest.mark.parametrize("make", [lambda: nn.Linear(5, 8, dtype=D),
                                  lambda: nn.Conv2d(3, 4, 3, dtype=D),
                                  lambda: nn.ConvTranspose2d(3, 4, 3, dtype=D)])
def test_spectral_norm_module_matches_torch(make):
    torch.manual_seed(0)
    base = make()
    ours = WN.spectral_norm(copy.deepcopy(base), generator=torch.Generator().manual_seed(5))
    theirs = nn.utils.parametrizations.spectral_norm(copy.deepcopy(base))
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert ours.parametrizations.weight[0]._u.shape == theirs.parametrizations.weight[0]._u.shape
    ours.load_state_dict(theirs.state_dict())
    x = _rand(2, 5) if isinstance(base, nn.Linear) else _rand(2, 3, 6, 6)
    for _ in range(3):
        a, b = ours(x), theirs(x)
        torch.testing.assert_close(a, b)
        ga = torch.autograd.grad(a.sum(), ours.parametrizations.weight.original)[0]
        gb = torch.autograd.grad(b.sum(), theirs.parametrizations.weight.original)[0]
        torch.testing.assert_close(ga, gb)
    ours.eval()
    u = ours.parametrizations.weight[0]._u.clone()
    ours(x)
    assert torch.equal(u, ours.parametrizations.weight[0]._u)


def test_spectral_norm_after_registration_has_unit_sigma():
    torch.manual_seed(0)
    lin = WN.spectral_norm(nn.Linear(6, 9, dtype=D), generator=torch.Generator().manual_seed(0))
    for _ in range(30):
        lin(_rand(1, 6))
    torch.testing.assert_close(torch.linalg.matrix_norm(lin.weight, 2), torch.tensor(1.0, dtype=D))


@pytest.mark.parametrize("stride,padding,size", [(1, 1, 6), (1, 0, 5), (2, 1, 7)])
def test_conv_operator_norm_against_explicit_matrix(stride, padding, size):
    k = _rand(3, 2, 3, 3)
    f = lambda t: F.conv2d(t, k, stride=stride, padding=padding)  # noqa: E731
    x0 = torch.zeros(1, 2, size, size, dtype=D)
    out = f(x0).numel()
    matrix = torch.autograd.functional.jacobian(f, x0).reshape(out, -1)
    exact = torch.linalg.matrix_norm(matrix, 2)
    est = WN.conv_operator_norm(k, (2, size, size), stride=stride, padding=padding, steps=300,
                                generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(est, exact, rtol=1e-6, atol=0)


def test_reshaped_norm_is_not_the_operator_norm_but_bounds_it():
    torch.manual_seed(0)
    k = nn.Conv2d(8, 8, 3, padding=1, bias=False, dtype=D).weight.detach()
    k = k / WN.reshaped_spectral_norm(k)
    torch.testing.assert_close(WN.reshaped_spectral_norm(k), torch.tensor(1.0, dtype=D))
    op = WN.conv_operator_norm(k, (8, 12, 12), padding=1, steps=200, generator=torch.Generator().manual_seed(0))
    assert 1.05 < float(op) <= 3.0  # above 1, below k = 3 times the reshaped norm


# ---------------------------------------------------------------- moments
def test_moments_hand_computed_and_affine_invariant():
    x = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=D)  # mean 1/4, m2 = 3/16, m3 = 3/32, m4 = 21/256
    skew, kurt = WN.moments(x)
    torch.testing.assert_close(skew, torch.tensor((3 / 32) / (3 / 16) ** 1.5, dtype=D))
    torch.testing.assert_close(kurt, torch.tensor((21 / 256) / (3 / 16) ** 2 - 3, dtype=D))
    s2, k2 = WN.moments(3 * x - 7)
    torch.testing.assert_close((s2, k2), (skew, kurt))
    s3, _ = WN.moments(-x)
    torch.testing.assert_close(s3, -skew)


# ---------------------------------------------------------------- the experiment's models
def test_digits_cnn_variants_and_rng():
    before = torch.random.get_rng_state()
    bn = WN.digits_cnn("bn")
    ref = experiments.small_cnn("batch", impl="torch")
    for a, b in zip(bn.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a, b)
    ws = WN.digits_cnn("gn_ws")
    assert isinstance(ws[0], WN.WSConv2d) and isinstance(ws[3], WN.WSConv2d)
    assert torch.equal(ws[0].weight, experiments.small_cnn("group", impl="torch")[0].weight)
    mobn = WN.digits_cnn("wn_mobn")
    assert sum(isinstance(m, WN.MeanOnlyBatchNorm) for m in mobn) == 3
    assert torch.equal(before, torch.random.get_rng_state())
    with pytest.raises(ValueError):
        WN.digits_cnn("ln")


def test_train_digits_cnn_short_run_is_reproducible():
    data = experiments.digits_split()
    small = (data[0][:64], data[1][:64], data[2][:50], data[3][:50])
    a = WN.train_digits_cnn("wn_mobn", 16, seed=0, epochs=1, data=small)
    b = WN.train_digits_cnn("wn_mobn", 16, seed=0, epochs=1, data=small)
    assert a == b and 0 <= a["error"] <= 100 and math.isfinite(a["final_train_loss"])
    c = WN.train_digits_cnn("wn_mobn", 16, seed=0, epochs=1, data=small, impl="course")
    assert abs(c["final_train_loss"] - a["final_train_loss"]) < 1e-8  # the same function


def test_variant_grid_rows_and_summary(capsys):
    data = experiments.digits_split()
    small = (data[0][:40], data[1][:40], data[2][:20], data[3][:20])
    rows = WN.variant_grid(variants=("bn", "gn"), batch_sizes=(8,), seeds=(0, 1), workers=1,
                           data=small, epochs=1)
    assert [(r["variant"], r["seed"]) for r in rows] == [("bn", 0), ("bn", 1), ("gn", 0), ("gn", 1)]
    out = capsys.readouterr().out
    # a script sees one line per finished run, then the final line (one worker: loop order)
    assert out.splitlines() == ["[1/4] bn batch 8 seed 0", "[2/4] bn batch 8 seed 1",
                                "[3/4] gn batch 8 seed 0", "[4/4] gn batch 8 seed 1",
                                "runs [" + "#" * 20 + "] 4 runs (2 variants x 1 batch sizes x 2 seeds)"]
    summary = WN.grid_summary(rows)
    errs = [r["error"] for r in rows if r["variant"] == "bn"]
    assert summary["bn", 8] == (sum(errs) / 2, min(errs), max(errs))


def test_scaled_ws_fixed_gamma_and_learnable_gain_are_separate():
    w = _rand(5, 4, 3, 3) + 0.3
    gain = torch.arange(1.0, 6.0, dtype=D)
    gamma = WN.nonlinearity_gamma("relu")
    out = WN.scaled_standardize_weight(w, gain, gamma=gamma, eps=0.0).flatten(1)
    torch.testing.assert_close(out.norm(dim=1), gain * gamma)


def test_relu_gamma_matches_deepmind_constant_and_sampling():
    gamma = WN.nonlinearity_gamma("relu")
    assert abs(gamma - math.sqrt(2 / (1 - 1 / math.pi))) < 1e-15
    assert abs(gamma / 1.7139588594436646 - 1) < 1e-3      # deepmind-research nfnets/base.py's estimate
    z = torch.randn(2_000_000, generator=torch.Generator().manual_seed(0), dtype=D)
    assert abs(float(torch.relu(z).std()) * gamma - 1.0) < 2e-3  # unit variance through ReLU
    assert WN.nonlinearity_gamma("linear") == 1.0
    with pytest.raises(ValueError):
        WN.nonlinearity_gamma("gelu")


def test_stored_grid_rows_carry_epochs_and_learning_rate(monkeypatch):
    calls = []

    def fake_grid(variants=tuple(WN.VARIANTS), batch_sizes=(32, 2), seeds=(0,), **kw):
        calls.append((tuple(variants), tuple(batch_sizes), kw.get("base_lr", 0.1), kw["epochs"]))
        return [{"variant": v, "batch_size": b, "seed": s, "error": 1.0, "final_train_loss": 0.1}
                for v in variants for b in batch_sizes for s in seeds]

    monkeypatch.setattr(WN, "variant_grid", fake_grid)
    rows = WN.stored_grid(seeds=(0,), workers=1, progress=False)
    assert calls == [(tuple(WN.VARIANTS), (32, 2), 0.1, 6), (("wn",), (32,), 0.01, 6)]
    assert len(rows) == 11 and {r["base_lr"] for r in rows} == {0.1, 0.01}
    assert all(r["epochs"] == WN.GRID_EPOCHS for r in rows)
