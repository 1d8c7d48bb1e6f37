"""helpers.bn_practice against independent references: torch's own modules and functions,
hand-computed values, Monte Carlo estimates and gradcheck."""

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers import bn_practice as P


def test_dropout_variance_ratio_by_hand_and_by_sampling():
    assert P.dropout_variance_ratio(0.5) == pytest.approx(0.5)
    # c = 1, v = 1, p = 0.5: v / ((c^2 + v)/p - c^2) = 1 / (4 - 1)
    assert P.dropout_variance_ratio(0.5, mean=1.0, var=1.0) == pytest.approx(1 / 3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400_000, generator=g, dtype=torch.float64) * 2 + 1  # c = 1, v = 4
    train = x * (torch.rand(x.shape, generator=g, dtype=torch.float64) < 0.7) / 0.7
    assert x.var() / train.var() == pytest.approx(P.dropout_variance_ratio(0.7, 1.0, 4.0), rel=0.01)
    drop = nn.Dropout(0.3).train()
    torch.manual_seed(123)  # not 0: the generator above also started from seed 0
    assert x.var() / drop(x).var() == pytest.approx(P.dropout_variance_ratio(0.7, 1.0, 4.0), rel=0.01)


def test_uniform_noise_ratio_and_module():
    assert P.uniform_noise_variance_ratio(0.3) == pytest.approx(1 / (1 + 0.03))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(400_000, generator=g, dtype=torch.float64) + 0.5
    torch.manual_seed(123)
    noisy = P.UniformNoise(0.6).train()(x)
    assert x.var() / noisy.var() == pytest.approx(P.uniform_noise_variance_ratio(0.6, 0.5, 1.0), rel=0.01)
    assert torch.equal(P.UniformNoise(0.6).eval()(x), x)


def test_mlp_layout_and_rng_untouched():
    state = torch.random.get_rng_state()
    every = P.mlp(dropout=0.5, where="every")
    last = P.mlp(dropout=0.5, where="after_last_bn")
    assert torch.equal(state, torch.random.get_rng_state())
    kinds = [type(m).__name__ for m in every]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Dropout", "Linear", "BatchNorm1d", "ReLU",
                     "Dropout", "Linear", "BatchNorm1d", "ReLU", "Dropout", "Linear"]
    assert [type(m).__name__ for m in last].count("Dropout") == 1
    swapped = [type(m).__name__ for m in P.mlp(order="relu_bn")]
    assert swapped[:3] == ["Linear", "ReLU", "BatchNorm1d"]
    assert P.mlp(seed=3)[0].weight.equal(P.mlp(seed=3)[0].weight)


def test_variance_shift_is_one_without_dropout_and_p_with_it():
    """A single BatchNorm fed by dropout on fixed zero-mean data: Var_test / Var_train = p."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(20000, 8, generator=g, dtype=torch.float64)
    model = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1d(8, dtype=torch.float64))
    rows = P.variance_shift(model, x)
    assert rows[0]["test_over_train"] == pytest.approx(0.5, rel=0.03)
    plain = nn.Sequential(nn.BatchNorm1d(8, dtype=torch.float64))
    assert P.variance_shift(plain, x)[0]["test_over_train"] == pytest.approx(1.0)
    assert torch.equal(model[1].running_var, torch.ones(8, dtype=torch.float64))  # unchanged


def test_recompute_statistics_matches_population_with_dropout_off():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3).double(), nn.Dropout(0.5), nn.BatchNorm1d(3).double())
    x = torch.randn(256, 4, dtype=torch.float64)
    fixed = P.recompute_bn_statistics(model, x, batch_size=64)
    with torch.no_grad():
        z = model[0](x)
    torch.testing.assert_close(fixed[2].running_mean, z.mean(0))
    # unbiased per-batch variances, averaged over the 4 batches
    batch_var = torch.stack([z[i:i + 64].var(0) for i in range(0, 256, 64)]).mean(0)
    torch.testing.assert_close(fixed[2].running_var, batch_var)
    assert not fixed.training


def test_param_groups_follow_timm_rule():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.LayerNorm(8),
                          nn.Linear(8, 3, bias=False))
    model.register_parameter("alpha", nn.Parameter(torch.tensor(1.0)))
    model[0].bias.requires_grad_(False)
    no_decay, decay = P.param_groups_weight_decay(model, 0.1, no_weight_decay_list=("4.weight",))
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(model[0].weight)}
    assert {id(p) for p in no_decay["params"]} == {id(model[1].weight), id(model[1].bias),
                                                    id(model[3].weight), id(model[3].bias),
                                                    id(model[4].weight), id(model.alpha)}


def test_scale_invariance_and_orthogonal_gradient():
    torch.manual_seed(0)
    lin, x = nn.Linear(5, 4, bias=False).double(), torch.randn(16, 5, dtype=torch.float64)
    target = torch.randn(16, 4, dtype=torch.float64)

    def loss(w):
        return ((F.batch_norm(x @ w.T, None, None, training=True, eps=1e-300) - target) ** 2).sum()

    w = lin.weight.detach().clone().requires_grad_()
    w3 = (3 * lin.weight.detach()).requires_grad_()
    torch.testing.assert_close(loss(w), loss(w3))
    (g,) = torch.autograd.grad(loss(w), w)
    (g3,) = torch.autograd.grad(loss(w3), w3)
    torch.testing.assert_close(g3, g / 3)
    assert (g * w).sum(1).abs().max() < 1e-10  # orthogonal, row by row


def test_weight_norm_trace_records():
    lin = nn.Linear(3, 2)
    on_step, trace = P.weight_norm_trace(lin, every=2)
    for t in range(5):
        on_step(None, t, 5)
    assert [t for t, _ in trace] == [0, 2, 4]
    assert trace[0][1] == pytest.approx(float(lin.weight.detach().norm()))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5, 5)])
def test_frozen_batch_norm_equals_torch_eval(shape):
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3) if len(shape) == 4 else nn.BatchNorm1d(3)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_()
    bn(torch.randn(*shape) * 3 + 2)  # training step: non-trivial running statistics
    frozen = P.FrozenBatchNorm2d(3)
    frozen.load_state_dict(bn.state_dict())  # num_batches_tracked dropped
    assert [n for n, _ in frozen.named_parameters()] == []
    assert sorted(n for n, _ in frozen.named_buffers()) == ["bias", "running_mean", "running_var", "weight"]
    x = torch.randn(*shape)
    torch.testing.assert_close(frozen.train()(x), bn.eval()(x))


def test_freeze_batch_norm_converts_nested_modules():
    torch.manual_seed(0)
    model = P.small_convnet(width=4)
    model.train()
    model(torch.randn(8, 1, 8, 8, dtype=torch.float64))
    reference = copy.deepcopy(model).eval()
    P.freeze_batch_norm(model)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert sum(isinstance(m, P.FrozenBatchNorm2d) for m in model.modules()) == 2
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(model.train()(x), reference(x))


def test_batch_renorm_is_batch_norm_with_rmax_1_dmax_0():
    torch.manual_seed(0)
    x = torch.randn(8, 3, 4, 4, dtype=torch.float64) * 2 + 1
    w, b = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)
    rm, rs = torch.randn(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64) + 0.5
    out = P.batch_renorm(x, rm.clone(), rs.clone(), w, b, True, rmax=1.0, dmax=0.0)
    torch.testing.assert_close(out, F.batch_norm(x, None, None, w, b, training=True))


def test_batch_renorm_unclipped_uses_running_statistics():
    """With r, d inside their limits, x_hat = (x - mu) / sigma with the running mu, sigma:
    the training output equals the eval output (hand-derived from Algorithm 1)."""
    torch.manual_seed(1)
    x = torch.randn(32, 4, dtype=torch.float64) * 1.5 + 0.5
    rm, rs = torch.randn(4, dtype=torch.float64) * 0.3, torch.rand(4, dtype=torch.float64) + 1.0
    train = P.batch_renorm(x, rm.clone(), rs.clone(), None, None, True, rmax=100.0, dmax=100.0)
    torch.testing.assert_close(train, (x - rm) / rs)


def test_batch_renorm_running_update_and_clipping_by_hand():
    x = torch.tensor([[0.0], [2.0], [4.0], [6.0]], dtype=torch.float64)  # mean 3, var 5
    rm, rs = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    out = P.batch_renorm(x, rm, rs, None, None, True, rmax=2.0, dmax=1.0, momentum=0.5, eps=0.0)
    sigma = 5 ** 0.5
    # r = clip(sqrt 5, 1/2, 2) = 2, d = clip(3, -1, 1) = 1
    torch.testing.assert_close(out, (x - 3) / sigma * 2 + 1)
    torch.testing.assert_close(rm, torch.tensor([1.5], dtype=torch.float64))        # 0 + 0.5 (3 - 0)
    torch.testing.assert_close(rs, torch.tensor([(1 + sigma) / 2], dtype=torch.float64))  # std, not var


def test_batch_renorm_gradients_treat_r_and_d_as_constants():
    torch.manual_seed(2)
    x = (torch.randn(10, 3, dtype=torch.float64) * 3 + 1).requires_grad_()
    w = (torch.rand(3, dtype=torch.float64) + 0.5).requires_grad_()
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    rm, rs = torch.zeros(3, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64)
    r = torch.tensor([0.8, 1.2, 1.5], dtype=torch.float64)
    d = torch.tensor([0.3, -0.5, 0.0], dtype=torch.float64)
    assert torch.autograd.gradcheck(P.BatchRenormFunction.apply, (x, w, b, r, d, 1e-5))
    # clipped r and d are locally constant: then the whole forward's true derivative is the
    # stop-gradient one, and gradcheck passes on batch_renorm itself
    clipped = lambda x, w, b: P.batch_renorm(x, rm.clone() - 30, rs.clone() * 10, w, b, True, 1.5, 0.5)
    assert torch.autograd.gradcheck(clipped, (x, w, b))
    g = torch.randn(10, 3, dtype=torch.float64)
    auto = torch.autograd.grad((P.batch_renorm(x, rm.clone(), rs.clone(), w, b, True, 1.5, 0.5) * g).sum(), (x, w, b))
    r, d = P.renorm_corrections(x.detach(), rm, rs, 1.5, 0.5)
    hand = P.batch_renorm_backward(g, x.detach(), w.detach(), r, d)
    for a, h in zip(auto, hand):
        torch.testing.assert_close(a, h)
    # the input gradient is r times BatchNorm's
    sigma = (x.detach().var(0, unbiased=False) + 1e-5).sqrt()
    torch.testing.assert_close(r, (sigma / rs).clamp(1 / 1.5, 1.5))
    (bn_grad,) = torch.autograd.grad((F.batch_norm(x, None, None, w, b, training=True) * g).sum(), x)
    torch.testing.assert_close(hand[0], bn_grad * r)


def test_batch_renorm_module_buffers_and_errors():
    m = P.BatchRenorm2d(3)
    assert sorted(n for n, _ in m.named_buffers()) == ["num_batches_tracked", "running_mean", "running_std"]
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        P.BatchRenorm1d(3)(torch.randn(1, 3))
    with pytest.raises(ValueError, match="expected 4D input"):
        m(torch.randn(2, 3))
    x = torch.randn(5, 3, 2, 2)
    m(x)
    assert int(m.num_batches_tracked) == 1
    torch.testing.assert_close(m.eval()(x), (x - m.running_mean.view(1, 3, 1, 1)) / m.running_std.view(1, 3, 1, 1))


def test_renorm_limits_schedule_shape():
    # the paper's numbers in a 40k-step frame: 1/0 until 5k, dmax 5 at 25k, rmax 3 at 40k
    assert P.renorm_limits(4000, 40000) == (1.0, 0.0)
    assert P.renorm_limits(25000, 40000)[1] == pytest.approx(5.0)
    assert P.renorm_limits(40000, 40000) == (pytest.approx(3.0), pytest.approx(5.0))
    r, d = P.renorm_limits(15000, 40000)
    assert r == pytest.approx(1 + 2 * 10 / 35) and d == pytest.approx(5 * 10 / 20)


def test_ghost_batch_norm_equals_torch_per_chunk():
    torch.manual_seed(0)
    x = torch.randn(12, 3, 2, 2, dtype=torch.float64) * 2 + 1
    w, b = torch.rand(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    expected = torch.cat([F.batch_norm(c, None, None, w, b, training=True) for c in x.split(4)])
    torch.testing.assert_close(P.ghost_batch_norm(x, 4, w, b), expected)
    torch.testing.assert_close(P.ghost_batch_norm(x, 12, w, b), F.batch_norm(x, None, None, w, b, training=True))
    with pytest.raises(ValueError, match="not a multiple"):
        P.ghost_batch_norm(x, 5)


def test_zero_init_residual_blocks_start_as_identity():
    model = P.residual_mlp(depth=4, zero_init=True)
    x = torch.randn(16, 64, dtype=torch.float64)
    stem = model[1](model[0](x))
    torch.testing.assert_close(model[2:6](stem), stem)  # ReLU of a non-negative input
    assert all(float(m.bn2.weight.detach().abs().sum()) == 0 for m in model[2:6])
    assert not torch.allclose(P.residual_mlp(depth=4)[2:6](stem), stem)


def test_train_is_reproducible_and_leaves_global_rng():
    x, y, xt, yt = P.digits_data()
    state = torch.random.get_rng_state()
    errors = []
    for _ in range(2):
        m = P.mlp(width=16, dropout=0.2, seed=1)
        P.train(m, x, y, steps=30, batch_size=32, seed=4)
        errors.append(P.test_error(m, xt, yt))
    assert errors[0] == errors[1] and errors[0] < 60
    assert torch.equal(state, torch.random.get_rng_state())


def test_class_sorted_batches_hold_two_classes():
    y = torch.arange(10).repeat(20)
    g = torch.Generator().manual_seed(0)
    for idx in P._batches(y, 16, 5, "class_sorted", 2, g):
        assert len(idx) == 16 and len(y[idx].unique()) == 2


def test_digits_data_standardised_on_training_set():
    x, y, xt, yt = P.digits_data()
    assert x.shape == (1297, 64) and xt.shape == (500, 64)
    assert x.mean(0).abs().max() < 1e-12
    xi, yi, _, _ = P.digits_data(images=True, classes=range(5))
    assert xi.shape[1:] == (1, 8, 8) and set(yi.tolist()) == {0, 1, 2, 3, 4}


def test_figures_plot_the_numbers_given():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [{"layer": 1, "test_over_train": 1.0, "shift": 1.2}, {"layer": 2, "test_over_train": 0.6, "shift": 1.9}]
    fig = P.plot_variance_shift([("a", rows)], keep=0.5)
    left, right = fig.axes[:2]
    assert list(left.lines[0].get_ydata()) == [1.0, 0.6] and list(right.lines[0].get_ydata()) == [1.2, 1.9]
    plt.close(fig)
    fig = P.plot_weight_norms({"wd": [(0, 2.0), (10, 1.0)]}, lr=0.1, steps=10)
    assert list(fig.axes[0].lines[0].get_ydata()) == [2.0, 1.0]
    assert fig.axes[1].lines[0].get_ydata()[0] == pytest.approx(0.1 / 4)  # lr / ||W||^2 at step 0
    plt.close(fig)


def test_experiments_progress_is_one_final_line_or_nothing(capsys):
    """Outside a notebook an experiment prints one final line; with progress=False nothing."""
    P.placement_experiment(seeds=(0,), steps=2)
    assert capsys.readouterr() == ("placement runs [####################] 2 runs\n", "")
    P.placement_experiment(seeds=(0,), steps=2, progress=False)
    assert capsys.readouterr() == ("", "")
    assert P.spread([1.0, 2.0, 3.0]) == "2.0 (1.0-3.0)"


@pytest.mark.parametrize("kw, train_kw", [
    (dict(), dict(batch_size=64)),
    (dict(norm="group"), dict(batch_size=16, sampler="class_sorted")),
    (dict(norm="renorm"), dict(batch_size=8)),
    (dict(order="relu_bn"), dict(batch_size=32, weight_decay=1e-2)),
])
def test_train_stacked_equals_separate_runs(kw, train_kw):
    # the batched trainer must reproduce P.train run by run (no dropout: no random draws)
    x, y, _, _ = P.digits_data()
    stacked = [P.mlp(seed=s, **kw) for s in (0, 1)]
    separate = [copy.deepcopy(m) for m in stacked]
    on = P.set_renorm_limits if kw.get("norm") == "renorm" else None
    losses = [P.train(m, x, y, 30, seed=s, on_step=on, **train_kw) for s, m in zip((0, 1), separate)]
    stacked_losses = P.train_stacked(stacked, x, y, 30, seeds=(0, 1), renorm_schedule=on is not None, **train_kw)
    assert stacked_losses == pytest.approx(losses, rel=1e-9)
    for a, b in zip(stacked, separate):
        for (name, t), u in zip(a.state_dict().items(), b.state_dict().values()):
            torch.testing.assert_close(t, u, rtol=1e-9, atol=1e-10, msg=name)


def test_train_stacked_weight_decay_per_run_and_exclusion():
    x, y, _, _ = P.digits_data()
    models = [P.mlp(seed=0), P.mlp(seed=0)]
    ref = [copy.deepcopy(m) for m in models]
    P.train_stacked(models, x, y, 20, seeds=(0, 0), weight_decay=[0.0, 5e-2], exclude_1d=True, batch_size=32)
    P.train(ref[0], x, y, 20, seed=0, batch_size=32)
    P.train(ref[1], x, y, 20, seed=0, batch_size=32, param_groups=P.param_groups_weight_decay(ref[1], 5e-2))
    for a, b in zip(models, ref):
        torch.testing.assert_close(a[3].weight, b[3].weight)
        torch.testing.assert_close(a[1].weight, b[1].weight)


def test_train_stacked_micro_batch_statistics_are_ghost_batches():
    # stats_size = 4 in a batch of 8: the forward pass is ghost BatchNorm over 4 examples
    x, y, _, _ = P.digits_data()
    model = P.mlp(seed=0)
    P.train_stacked([model], x, y, 1, seeds=(0,), batch_size=8, stats_size=4)
    idx = next(P._batches(y, 8, 1, "iid", 2, torch.Generator().manual_seed(0)))
    h = (x[idx] @ P.mlp(seed=0)[0].weight.T).detach()
    within = torch.stack([c.var(0) for c in h.split(4)]).mean(0)      # unbiased, per group of 4
    torch.testing.assert_close(model[1].running_var, 0.9 + 0.1 * within)
    assert not torch.allclose(model[1].running_var, 0.9 + 0.1 * h.var(0))
    with pytest.raises(ValueError):
        P.train_stacked([P.mlp(seed=0)], x, y, 1, batch_size=8, stats_size=3)


def test_sgd_step_matches_torch_optimiser():
    torch.manual_seed(0)
    p1 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    p2 = p1.detach().clone().requires_grad_()
    opt = torch.optim.SGD([p2], lr=0.1, momentum=0.9, weight_decay=1e-2)
    step = P._sgd([{"params": [p1], "weight_decay": 1e-2}], momentum=0.9)
    for _ in range(3):
        g = torch.randn(4, 3, dtype=torch.float64)
        p1.grad, p2.grad = g.clone(), g.clone()
        step(0.1)
        opt.step()
    torch.testing.assert_close(p1, p2)


def test_swa_experiment_update_bn_recomputes_statistics():
    rows, pairs = P.swa_experiment(seeds=(0,), steps=30, start=10)
    last, averaged = pairs[0]
    x, _, _, _ = P.digits_data()
    fresh = P.recompute_bn_statistics(averaged.module, x)
    torch.testing.assert_close(fresh[1].running_mean, averaged.module[1].running_mean)
    assert not torch.equal(averaged.module[0].weight, last[0].weight)  # the weights were averaged
    assert set(rows[0]) == {"seed", "last", "averaged_stale", "averaged_recomputed"}


def test_int8_fake_quantisation_by_hand():
    w = torch.tensor([[1.0, -0.5], [0.01, 0.02]], dtype=torch.float64)
    per_tensor = P.quantize_per_tensor(w)
    step = 1.0 / 127
    torch.testing.assert_close(per_tensor, torch.round(w / step) * step)
    per_channel = P.quantize_per_channel(w)
    torch.testing.assert_close(per_channel[1], torch.round(w[1] / (0.02 / 127)) * (0.02 / 127))
    assert per_tensor[1, 0] == step                             # 0.01 / (1/127) = 1.27 -> one level
