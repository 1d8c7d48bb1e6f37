"""helpers.experiments' batch-size experiment (Wu & He 2018, Table 2): the CNN's shapes, how
many values each BatchNorm statistic really averages (counted with forward hooks), the data
split, and train_and_evaluate's contract (keys, ranges, determinism, GroupNorm's three
errors coinciding). Tiny configurations only: the full grid is not run here."""

import re
import math

import pytest
import torch
from sklearn.datasets import load_digits

from helpers import experiments, norms


@pytest.fixture(scope="module")
def data():
    """A slice of the split (320 training, 100 test images), enough to exercise training."""
    x_train, y_train, x_test, y_test = experiments.digits_split()
    return x_train[:320], y_train[:320], x_test[:100], y_test[:100]


@pytest.mark.parametrize("norm", ["batch", "group", "none"])
def test_small_cnn_shapes(norm):
    model = experiments.small_cnn(norm, width=8)
    assert model(torch.randn(5, 1, 8, 8)).shape == (5, 10)
    kinds = {"batch": (norms.BatchNorm1d, norms.BatchNorm2d), "group": (norms.GroupNorm,),
             "none": (norms.BatchNorm1d, norms.BatchNorm2d, norms.GroupNorm)}[norm]
    count = sum(isinstance(m, kinds) for m in model.modules())
    assert count == (0 if norm == "none" else 3)


def test_small_cnn_rejects_unknown_norm():
    with pytest.raises(ValueError, match="norm must be"):
        experiments.small_cnn("layer")


def test_small_cnn_is_deterministic_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    a, b, c = (experiments.small_cnn("batch", seed=s) for s in (3, 3, 4))
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a[0].weight, c[0].weight)


def test_values_per_statistic():
    assert experiments.values_per_statistic(2) == [128, 32, 2]
    assert experiments.values_per_statistic(32) == [2048, 512, 32]


@pytest.mark.parametrize("batch_size", [2, 5, 32])
def test_batchnorm_layers_see_the_documented_number_of_values(batch_size):
    model = experiments.small_cnn("batch").train()
    seen = []
    bns = [m for m in model.modules() if isinstance(m, (norms.BatchNorm1d, norms.BatchNorm2d))]
    hooks = [m.register_forward_hook(lambda _m, inp, _out: seen.append(
        inp[0].numel() // inp[0].shape[1])) for m in bns]
    try:
        model(torch.randn(batch_size, 1, 8, 8))
    finally:
        for h in hooks:
            h.remove()
    assert seen == experiments.values_per_statistic(batch_size)


def test_digits_split_is_a_deterministic_partition():
    train, test = experiments.digits_split_indices(0)
    assert (len(train), len(test)) == (1297, 500)
    assert sorted(torch.cat([train, test]).tolist()) == list(range(1797))
    train1, _ = experiments.digits_split_indices(1)
    assert not torch.equal(train, train1)

    a, b = experiments.digits_split(0), experiments.digits_split(0)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    x_train, y_train, x_test, y_test = a
    assert x_train.shape == (1297, 1, 8, 8) and x_test.shape == (500, 1, 8, 8)
    assert x_train.dtype == x_test.dtype == torch.float32
    assert y_train.shape == (1297,) and y_test.shape == (500,)
    assert abs(float(x_train.mean())) < 1e-5 and abs(float(x_train.std()) - 1) < 1e-5
    # the same images as digit_images, standardised with the training set's mean and std
    raw = experiments.digit_images(train.tolist(), dtype=torch.float32)
    raw_test = experiments.digit_images(test.tolist(), dtype=torch.float32)
    torch.testing.assert_close(x_train, (raw - raw.mean()) / raw.std())
    torch.testing.assert_close(x_test, (raw_test - raw.mean()) / raw.std())
    assert torch.equal(y_test, torch.tensor(load_digits().target)[test])


def test_train_and_evaluate_contract_and_determinism(data):
    first = experiments.train_and_evaluate("batch", 32, seed=0, epochs=1, data=data)
    again = experiments.train_and_evaluate("batch", 32, seed=0, epochs=1, data=data)
    other = experiments.train_and_evaluate("batch", 32, seed=1, epochs=1, data=data)
    assert set(first) == {"eval", "train_mode", "recomputed", "final_train_loss"}
    assert first == again
    assert first["final_train_loss"] != other["final_train_loss"]
    for key in ("eval", "train_mode", "recomputed"):
        assert 0 <= first[key] <= 100
    assert math.isfinite(first["final_train_loss"]) and first["final_train_loss"] > 0


def test_groupnorm_errors_coincide(data):
    result = experiments.train_and_evaluate("group", 32, seed=0, epochs=1, data=data)
    assert result["eval"] == result["train_mode"] == result["recomputed"]


def test_recomputed_statistics_are_the_training_set_average():
    # equal-sized batches: the cumulative average of the batch means is the overall mean
    model = experiments.small_cnn("batch")
    x = torch.randn(64, 1, 8, 8)
    redone = experiments._recompute_bn_statistics(model, x, batch_size=16)
    assert not redone.training and redone[1].num_batches_tracked == 4
    with torch.no_grad():
        expected = model[0](x).mean(dim=(0, 2, 3))
    torch.testing.assert_close(redone[1].running_mean, expected)
    assert torch.equal(model[1].running_mean, torch.zeros(16))  # the original is untouched


def test_batch_size_grid_rows_and_progress_on_stdout(capsys):
    rows = experiments.batch_size_grid(norms=("group",), batch_sizes=(32,), seeds=(0,),
                                       epochs=1)
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("[1/1] group batch 32 seed 0: eval error")
    assert len(lines) == 2 and re.fullmatch(
        r"runs \[#{20}\] 1 runs \(1 norms x 1 batch sizes x 1 seeds\) in \d+ s", lines[1])
    assert [(r["norm"], r["batch_size"], r["seed"]) for r in rows] == [("group", 32, 0)]
    assert set(rows[0]) == {"norm", "batch_size", "seed", "eval", "train_mode", "recomputed",
                            "final_train_loss", "seconds"}


def test_impls_compute_the_same_function():
    # helpers.norms against torch.nn: same weights, same outputs, in training and eval mode
    x = torch.randn(6, 1, 8, 8)
    for norm in ("batch", "group"):
        ours = experiments.small_cnn(norm, seed=2, impl="course")
        ref = experiments.small_cnn(norm, seed=2, impl="torch")
        assert any(isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm)) for m in ref)
        for mode in (True, False):
            torch.testing.assert_close(ours.train(mode)(x), ref.train(mode)(x))
    with pytest.raises(ValueError, match="impl"):
        experiments.small_cnn("batch", impl="jax")


def test_train_small_cnn_rejects_batch_of_one(data):
    with pytest.raises(ValueError, match="at least 2"):
        experiments.train_small_cnn("batch", 1, data=data)


def test_training_restores_the_thread_count(data):
    before = torch.get_num_threads()
    experiments.train_small_cnn("group", 64, epochs=1, data=data)
    assert torch.get_num_threads() == before


def test_grid_in_worker_processes_matches_one_process(data):
    kwargs = dict(norms=("batch",), batch_sizes=(64,), seeds=(0, 1), epochs=1, progress=False)
    serial = experiments.batch_size_grid(workers=1, **kwargs)
    parallel = experiments.batch_size_grid(workers=2, **kwargs)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip(serial) == strip(parallel)
    assert [(r["seed"]) for r in parallel] == [0, 1]  # loop order, not completion order
    with pytest.raises(ValueError, match="workers"):
        experiments.batch_size_grid(workers=0)


def test_grid_table_means_spreads_and_the_paper():
    rows = [{"norm": "batch", "batch_size": b, "seed": s, "eval": e, "train_mode": 50.0,
             "recomputed": 1.0, "final_train_loss": 0.5} for b, s, e in
            [(32, 0, 2.0), (32, 1, 4.0), (2, 0, 30.0), (2, 1, 40.0)]]
    table = experiments.grid_table(rows).splitlines()
    assert "batch 32" in table[0] and "batch 2" in table[0] and "2 seeds" in table[0]
    eval_row = next(line for line in table if "eval()" in line)
    assert eval_row.split()[-4:] == ["3.0", "(2.0)", "35.0", "(10.0)"]
    paper = next(line for line in table if "Wu & He BN" in line)
    assert paper.split()[-2:] == ["23.6", "34.7"]  # Table 2 of the GroupNorm paper
    assert not any(line.startswith("GN") for line in table)  # no GroupNorm rows were given


def test_statistic_noise_by_hand_and_for_independent_values():
    # one BatchNorm1d: the noise is the rms of (batch mean - mean) / std, computed by hand
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
    x = torch.randn(8, 3) * torch.tensor([1.0, 5.0, 0.1]) + 7
    (row,) = experiments.statistic_noise(model, x, batch_sizes=(4,))
    xd = x.double()
    means = torch.stack([xd[:4].mean(0), xd[4:].mean(0)])
    expected = (((means - xd.mean(0)) / xd.std(0, unbiased=False)) ** 2).mean().sqrt()
    assert row == {"layer": 0, "batch_size": 4, "values": 4, "noise": pytest.approx(float(expected))}
    # many independent values: about 1 / sqrt(n)
    big = torch.randn(4096, 3)
    for r in experiments.statistic_noise(model, big, batch_sizes=(2, 8, 32)):
        assert r["noise"] == pytest.approx(r["values"] ** -0.5, rel=0.1)
    assert model.training  # left as it was
    with pytest.raises(ValueError, match="no BatchNorm"):
        experiments.statistic_noise(torch.nn.Sequential(torch.nn.Identity()), big)


def test_statistic_noise_counts_positions():
    model = experiments.small_cnn("batch", impl="torch")
    rows = experiments.statistic_noise(model, torch.randn(64, 1, 8, 8), batch_sizes=(2,))
    assert [r["values"] for r in rows] == experiments.values_per_statistic(2)


def test_training_runs_in_float64_by_default(data):
    model, loss = experiments.train_small_cnn("group", 64, epochs=1, data=data)
    assert all(p.dtype == torch.float64 for p in model.parameters())
    model32, _ = experiments.train_small_cnn("group", 64, epochs=1, data=data, dtype=torch.float32)
    assert all(p.dtype == torch.float32 for p in model32.parameters())
    # statistic_noise accepts float32 images for a float64 model
    bn_model, _ = experiments.train_small_cnn("batch", 64, epochs=1, data=data)
    assert len(experiments.statistic_noise(bn_model, data[0][:64], batch_sizes=(8,))) == 3


@pytest.mark.parametrize("batch_size", [8, 2])
def test_stacked_training_is_bit_for_bit_the_separate_runs(data, batch_size):
    """train_small_cnns (one stacked network, grouped convolutions) against train_small_cnn
    run by run: the same weights, running statistics and last-epoch losses, exactly, with
    BatchNorm and GroupNorm runs mixed and two runs sharing a seed."""
    runs = [("group", 1), ("batch", 0), ("group", 0), ("batch", 1)]
    stacked = experiments.train_small_cnns(runs, batch_size, epochs=1, data=data)
    for (norm, seed), (model, loss) in zip(runs, stacked):
        ref, ref_loss = experiments.train_small_cnn(norm, batch_size, seed=seed, epochs=1, data=data)
        assert loss == ref_loss
        assert model.training
        for (name, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
            assert torch.equal(a, b), (norm, seed, name)


def test_stacked_training_rejects_what_it_cannot_stack(data):
    with pytest.raises(ValueError, match="at least 2"):
        experiments.train_small_cnns([("batch", 0)], 1, data=data)
    with pytest.raises(ValueError, match="'batch' and 'group'"):
        experiments.train_small_cnns([("none", 0)], 8, epochs=1, data=data)
    with pytest.raises(ValueError, match="no runs"):
        experiments.train_small_cnns([], 8, data=data)


def test_stacked_grid_rows_equal_the_run_by_run_grid(data):
    kwargs = dict(norms=("batch", "group"), batch_sizes=(64, 16), seeds=(0, 1), epochs=1,
                  progress=False, data=data)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    stacked = experiments.batch_size_grid(stacked=True, workers=2, **kwargs)
    separate = experiments.batch_size_grid(stacked=False, workers=1, **kwargs)
    assert strip(stacked) == strip(separate)
    # norms that cannot be stacked go run by run
    rows = experiments.batch_size_grid(norms=("none",), batch_sizes=(64,), seeds=(0,), epochs=1,
                                       progress=False, data=data)
    assert rows[0]["eval"] == rows[0]["train_mode"] == rows[0]["recomputed"]


def test_worker_pool_is_kept_and_its_workers_use_one_thread():
    pool = experiments.worker_pool(2)
    assert experiments.worker_pool(2) is pool
    threads = {pool.submit(torch.get_num_threads).result() for _ in range(4)}
    assert threads == {1}
    with pytest.raises(ValueError, match="at least 2"):
        experiments.worker_pool(1)


def test_lr_gain_grid_in_workers_equals_the_loop():
    from helpers.training import train_classifier

    kwargs = dict(norms=(None, "batch"), gains=(1.0,), lrs=(0.03, 1.0), seeds=(0, 1), depth=3,
                  width=16, steps=5)
    got = experiments.lr_gain_grid(workers=2, stacked=False, **kwargs)
    x, y = experiments.digits(torch.float64)
    for (norm, gain, lr), losses in got.items():
        expected = [train_classifier(experiments.deep_mlp(depth=3, width=16, gain=gain, norm=norm,
                                                          seed=s), x, y, lr=lr, steps=5, seed=s)["loss"]
                    for s in (0, 1)]
        assert losses == expected
    assert set(got) == {(n, 1.0, lr) for n in (None, "batch") for lr in (0.03, 1.0)}


def test_stacked_lr_gain_grid_equals_the_separate_runs_to_rounding():
    """The stacked runs (batched products over the runs, one job per norm) against
    train_classifier on each run's own model: the same losses to rounding, in 2 worker
    processes and in this one, and the same divergence (inf) for a run that overflows."""
    from helpers.training import train_classifier

    kwargs = dict(norms=(None, "batch"), gains=(1.0, 3.0), lrs=(0.03, 0.3, 1.0), seeds=(0, 1),
                  depth=3, width=16, steps=8)
    x, y = experiments.digits(torch.float64)
    for workers in (1, 2):
        got = experiments.lr_gain_grid(workers=workers, **kwargs)
        assert set(got) == {(n, g, lr) for n in (None, "batch") for g in (1.0, 3.0)
                            for lr in (0.03, 0.3, 1.0)}
        for (norm, gain, lr), losses in got.items():
            expected = [train_classifier(experiments.deep_mlp(depth=3, width=16, gain=gain,
                                                              norm=norm, seed=s),
                                         x, y, lr=lr, steps=8, seed=s)["loss"] for s in (0, 1)]
            assert losses == pytest.approx(expected, rel=1e-9, abs=1e-12), (norm, gain, lr)
    # an infinite initial gain: a NaN loss at the first step, reported as inf, as train_classifier reports, and
    # the run beside it in the stack is not disturbed
    runs = [(None, float("inf"), 0.03, 0), (None, 1.0, 0.03, 1)]
    got = experiments._stacked_mlps(runs, depth=3, width=16, steps=8)
    expected = [train_classifier(experiments.deep_mlp(depth=3, width=16, gain=g, norm=n, seed=s),
                                 x, y, lr=lr, steps=8, seed=s)["loss"] for n, g, lr, s in runs]
    assert expected[0] == float("inf") and got[0] == float("inf")
    assert got[1] == pytest.approx(expected[1], rel=1e-9)
    with pytest.raises(ValueError, match="one norm"):
        experiments._stacked_mlps([(None, 1.0, 0.1, 0), ("batch", 1.0, 0.1, 0)], 3, 16, 2)


def test_grid_keeps_the_trained_model_it_is_asked_for():
    """keep=[run]: the row holds that run's trained model, the very model train_small_cnn
    trains on its own (so lesson 01 need not train it again), and no other row holds one."""
    rows = experiments.batch_size_grid(batch_sizes=(32,), seeds=(0,), epochs=1, workers=1,
                                       progress=False, keep=[("batch", 32, 0)])
    kept = [r for r in rows if "model" in r]
    assert [(r["norm"], r["batch_size"], r["seed"]) for r in kept] == [("batch", 32, 0)]
    alone, _ = experiments.train_small_cnn("batch", 32, seed=0, epochs=1)  # the grid's data
    model = kept[0]["model"]
    assert model.training
    for (name, a), (_, b) in zip(model.state_dict().items(), alone.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="stacked"):
        experiments.batch_size_grid(batch_sizes=(32,), seeds=(0,), epochs=1, progress=False,
                                    stacked=False, keep=[("batch", 32, 0)])
