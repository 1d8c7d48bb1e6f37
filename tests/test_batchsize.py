"""helpers.experiments' batch-size experiment (Wu & He 2018, Table 2): the CNN's shapes, how
many values each BatchNorm statistic really averages (counted with forward hooks), the data
split, and train_and_evaluate's contract (keys, ranges, determinism, GroupNorm's three
errors coinciding). Tiny configurations only: the full grid is not run here."""

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
    assert "1/1" in out
    assert [(r["norm"], r["batch_size"], r["seed"]) for r in rows] == [("group", 32, 0)]
    assert set(rows[0]) == {"norm", "batch_size", "seed", "eval", "train_mode", "recomputed",
                            "final_train_loss"}
