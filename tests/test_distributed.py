"""helpers.distributed: synchronised BatchNorm against torch's BatchNorm on the whole batch,
the moment merge against torch.var_mean, the module against torch.nn.SyncBatchNorm's
layout, and the launcher's error paths (taken port, failing or vanishing worker, timeout).

The tests that start processes cost a few seconds each (spawn imports torch in every
worker); several checks share one launch where they can."""

import socket
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dist_workers import exiting_worker, rank_sum_worker, sleeping_worker

from helpers import distributed as D

torch.set_default_dtype(torch.float32)


# ----------------------------------------------------------------------------- moments
@pytest.mark.parametrize("shape", [(13, 3), (5, 2, 7), (4, 3, 2, 3), (0, 2, 3), (1, 1)])
def test_channel_sums_match_torch_sum(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64)
    dims = [0] + list(range(2, len(shape)))
    torch.testing.assert_close(D.channel_sums(x), x.sum(dims), rtol=0, atol=1e-12)


def test_channel_sums_float32_order_is_the_fixed_pairwise_one():
    np = pytest.importorskip("numpy")
    torch.manual_seed(0)
    x = (1e4 + torch.randn(13, 2)).float()
    for c in range(2):  # by hand in numpy float32: pad to 16 with zeros, add adjacent pairs
        level = [np.float32(v) for v in x[:, c].tolist()] + [np.float32(0)] * 3
        while len(level) > 1:
            level = [level[i] + level[i + 1] for i in range(0, len(level), 2)]
        assert D.channel_sums(x)[c].item() == float(level[0])
    # integers up to 2**24 add exactly in float32
    ints = torch.arange(1000, dtype=torch.float32).reshape(250, 4)
    assert D.channel_sums(ints).tolist() == ints.double().sum(0).tolist()


def test_merge_moments_matches_var_mean_on_uneven_and_empty_shards():
    torch.manual_seed(0)
    x = torch.randn(13, 4, 5, dtype=torch.float64) * 3 + 7
    shards = [x[:6], x[6:6], x[6:9], x[9:]]  # 6, 0, 3, 4 samples
    parts = [D.local_moments(s) for s in shards]
    n, mean, m2 = D.merge_moments(torch.stack([p[0] for p in parts]),
                                  torch.stack([p[1] for p in parts]),
                                  torch.stack([p[2] for p in parts]))
    var, mu = torch.var_mean(x, dim=(0, 2), correction=0)
    assert n.item() == 13 * 5
    torch.testing.assert_close(mean, mu, rtol=0, atol=1e-12)
    torch.testing.assert_close(m2 / n, var, rtol=0, atol=1e-12)


def test_sum_of_squares_cancels_in_float32_and_the_merge_does_not():
    torch.manual_seed(0)
    x = (1e4 + torch.randn(4096, 2, dtype=torch.float64)).float()  # variance about 1
    truth = torch.var(x.double(), dim=0, correction=0)
    halves = [D.local_moments(h) for h in (x[:2048], x[2048:])]
    n, _, m2 = D.merge_moments(*(torch.stack(t) for t in zip(*halves)))
    merged = m2 / n
    sums = sum(torch.cat([torch.tensor([float(h.shape[0])]), h.sum(0), h.square().sum(0)])
               for h in (x[:2048], x[2048:]))
    n2, _, m2_sq = D.moments_from_sums(sums[0], sums[1:3], sums[3:])
    sumsq = m2_sq / n2
    assert (merged.double() - truth).abs().max() < 1e-3
    assert (sumsq.double() - truth).abs().max() > 0.5  # the documented failure


def test_moments_from_sums_exact_in_float64():
    torch.manual_seed(1)
    x = torch.randn(50, 3, dtype=torch.float64)
    n, mean, m2 = D.moments_from_sums(torch.tensor(50.0, dtype=torch.float64), x.sum(0),
                                      x.square().sum(0))
    var, mu = torch.var_mean(x, dim=0, correction=0)
    torch.testing.assert_close(mean, mu)
    torch.testing.assert_close(m2 / n, var)


# ------------------------------------------------------------- single process (no group)
@pytest.mark.parametrize("stats", D.STATS_MODES)
def test_function_without_group_is_batch_norm(stats):
    case = D.make_case(3, shape=(5, 3, 2, 2), stats=stats)
    rm, rv = case["running_mean"].clone(), case["running_var"].clone()
    x = case["x"].clone().requires_grad_()
    w = case["weight"].clone().requires_grad_()
    b = case["bias"].clone().requires_grad_()
    y = D.SyncBatchNormFunction.apply(x, w, b, rm, rv, 1e-5, 0.1, None, stats)
    grads = torch.autograd.grad(y, [x, w, b], case["dy"])
    x2 = case["x"].clone().requires_grad_()
    w2 = case["weight"].clone().requires_grad_()
    b2 = case["bias"].clone().requires_grad_()
    rm2, rv2 = case["running_mean"].clone(), case["running_var"].clone()
    y2 = F.batch_norm(x2, rm2, rv2, w2, b2, True, 0.1, 1e-5)
    grads2 = torch.autograd.grad(y2, [x2, w2, b2], case["dy"])
    torch.testing.assert_close(y, y2)
    for g, g2 in zip(grads, grads2):
        torch.testing.assert_close(g, g2)
    torch.testing.assert_close(rm, rm2)
    torch.testing.assert_close(rv, rv2)


def test_function_gradcheck():
    case = D.make_case(4, shape=(4, 2, 3))
    inputs = [case[k].clone().requires_grad_() for k in ("x", "weight", "bias")]
    assert torch.autograd.gradcheck(
        lambda x, w, b: D.SyncBatchNormFunction.apply(x, w, b, None, None, 1e-5, 0.1, None),
        inputs)


def test_one_value_per_channel_raises():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        D.SyncBatchNorm(3)(torch.randn(1, 3))


def test_bad_stats_mode_raises():
    with pytest.raises(ValueError, match="stats must be one of"):
        D.SyncBatchNorm(3, stats="welford")


def test_module_layout_matches_torch_sync_batch_norm():
    ours, theirs = D.SyncBatchNorm(5), nn.SyncBatchNorm(5)
    assert repr(ours) == repr(theirs)
    assert [(k, v.shape, v.dtype) for k, v in ours.state_dict().items()] == \
        [(k, v.shape, v.dtype) for k, v in theirs.state_dict().items()]
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.running_var.uniform_(0.5, 1.5)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    ours.eval(), theirs.eval()
    x = torch.randn(4, 5, 3)
    torch.testing.assert_close(ours(x), theirs(x))  # eval: running statistics, no sync


def test_module_training_without_group_and_momentum_none():
    torch.manual_seed(0)
    ours, theirs = D.SyncBatchNorm(3, momentum=None), nn.BatchNorm1d(3, momentum=None)
    for _ in range(3):
        x = torch.randn(6, 3, 4)
        torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours.running_var, theirs.running_var)
    assert int(ours.num_batches_tracked) == 3


def test_convert_sync_batchnorm_shares_parameters():
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm1d(2)))
    net.eval()
    converted = D.convert_sync_batchnorm(net)
    assert isinstance(converted[1], D.SyncBatchNorm) and isinstance(converted[2][0], D.SyncBatchNorm)
    assert converted[1].weight is net[1].weight and converted[1].running_var is net[1].running_var
    assert not converted[1].training
    reference = nn.SyncBatchNorm.convert_sync_batchnorm(
        nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm1d(2))))
    assert list(converted.state_dict()) == list(reference.state_dict())


def test_payload_bytes_by_hand():
    assert D.payload_bytes(64, 2) == {"forward_sent": 516, "forward_received": 516, "backward": 512}
    assert D.payload_bytes(3, 3, itemsize=8) == {"forward_sent": 56, "forward_received": 112,
                                                 "backward": 48}
    with pytest.raises(ValueError):
        D.payload_bytes(0, 2)


# ------------------------------------------------------------------ launcher, no processes
def test_taken_port_raises_before_starting_workers():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(D.PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"):
            D.launch(D.failing_worker, 2, port=port)
        assert time.monotonic() - start < 1.0


def test_free_port_is_bindable():
    port = D.free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))


def _local_function(rank, world_size):
    return rank


def test_unpicklable_worker_function_is_refused():
    def inner(rank, world_size):
        return rank

    with pytest.raises(ValueError, match="top level of an importable module"):
        D.launch(inner, 2)
    with pytest.raises(ValueError, match="positive integer"):
        D.launch(_local_function, 0)
    with pytest.raises(ValueError, match="port must be"):
        D.launch(_local_function, 2, port=70000)


# ----------------------------------------------------------------- launcher, processes
def test_sync_equals_full_batch_world_size_2_several_cases():
    cases = [D.make_case(0), D.make_case(1, shape=(5, 2, 3, 3)), D.make_case(2, momentum=None),
             D.make_case(5, stats="sumsq")]
    results = D.compare_sync_batch_norm(cases, world_size=2)
    for r in results:
        assert set(r["sync"]) == set(D.DIFFERENCE_KEYS)
        assert max(r["sync"].values()) < 1e-12, r["sync"]
        # the unsynchronised layer really differs, so the check above can fail
        assert r["per_shard"]["output"] > 0.05 and r["per_shard"]["running_var"] > 1e-3
        assert r["exitcodes"] == [0, 0]  # clean shutdown: no worker was terminated
    # bytes measured on rank 0 for C = 3, float64: (2C+1) * 8 gathered, 2C * 8 reduced
    assert results[0]["bytes"] == {"all_gather": 56, "all_reduce": 48, "calls": 2}
    assert results[3]["bytes"] == {"all_gather": 0, "all_reduce": 56 + 48, "calls": 2}


def test_world_size_3_uneven_one_sample_per_rank_and_empty_shard_exit_cleanly():
    cases = [D.make_case(0),                       # 11 samples: shards of 4, 4, 3
             D.make_case(2, shape=(3, 4)),         # one sample (one value per channel) per rank
             D.make_case(3, shape=(2, 3, 4))]      # shards of 1, 1, 0: rank 2 holds nothing
    results = D.compare_sync_batch_norm(cases, world_size=3)
    for r in results:
        assert list(r["sync"]) == list(D.DIFFERENCE_KEYS)
        assert max(r["sync"].values()) < 1e-12, r["sync"]
        assert r["exitcodes"] == [0, 0, 0]  # every worker left the group and exited by itself
    assert results[0]["per_shard"]["output"] > 0.05
    # plain BatchNorm refuses one value per channel (torch's own check), so there is no
    # unsynchronised comparison for the last two cases
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(cases[1]["x"][:1], None, None, training=True)
    assert results[1]["per_shard"] is None and results[2]["per_shard"] is None
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        D.per_shard_differences(cases[1], world_size=3)


def test_compare_refuses_a_batch_batchnorm_cannot_train_on():
    with pytest.raises(ValueError, match="fewer than 2 values per channel"):
        D.compare_sync_batch_norm([D.make_case(0, shape=(1, 3))], world_size=2)


def test_one_process_group_reaches_torchs_cpu_check_only_in_training():
    import os

    import torch.distributed as dist

    before = {k: os.environ.get(k) for k in ("MASTER_ADDR", "GLOO_SOCKET_IFNAME")}
    layer = nn.SyncBatchNorm(3)
    x = torch.randn(4, 3, 5)
    with D.one_process_group():
        assert dist.is_initialized() and dist.get_world_size() == 1
        assert os.environ["MASTER_ADDR"] == "127.0.0.1"
        if D._loopback_interface() and before["GLOO_SOCKET_IFNAME"] is None:
            assert os.environ["GLOO_SOCKET_IFNAME"] in ("lo", "lo0")
        with pytest.raises(ValueError, match="expected input tensor to be on GPU"):
            layer(x)  # training mode, group initialised, CPU tensor
        layer.eval()
        torch.testing.assert_close(layer(x), F.batch_norm(x, layer.running_mean,
                                                          layer.running_var, layer.weight,
                                                          layer.bias, False))
    assert not dist.is_initialized()
    assert {k: os.environ.get(k) for k in before} == before
    layer.train()
    torch.testing.assert_close(layer(x), F.batch_norm(x, None, None, layer.weight, layer.bias,
                                                      True))  # no group: plain BatchNorm


def test_failing_worker_is_reraised_without_hanging():
    start = time.monotonic()
    with pytest.raises(D.WorkerError, match="rank 1 of 2 raised RuntimeError: rank 1 failed on "
                                            "purpose") as info:
        D.launch(D.failing_worker, 2, timeout=120)
    assert info.value.rank == 1 and info.value.exc_type == "RuntimeError"
    assert "in failing_worker" in info.value.worker_traceback  # the worker's own traceback
    # rank 0 sat in an all_reduce with a 120 s timeout; the parent did not wait for it
    assert time.monotonic() - start < 60


def test_vanishing_worker_and_timeout():
    with pytest.raises(D.WorkerError, match="rank 1 of 2 exited with code 3"):
        D.launch(exiting_worker, 2, timeout=120)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="gave no result within 2 s"):
        # (not failing_worker with no failing rank: both ranks then meet in the all_reduce and
        # return, within 2 s on a quick machine)
        D.launch(sleeping_worker, 2, timeout=2)
    assert time.monotonic() - start < 30


# ------------------------------------------------------------------ cost and exercises
def test_resnet50_layout_matches_torchvision_count():
    layout = D.resnet50_layout()
    assert layout["parameters"] == 25_557_032  # torchvision's ResNet50_Weights num_params
    assert len(layout["bn_channels"]) == 53 and layout["bn_channels"][-1] == 2048


def test_launch_picks_another_port_when_the_picked_one_is_taken(monkeypatch):
    """A port free when picked can be taken before rank 0's store binds it; launch must then
    pick another (the race that an ephemeral port of another connection can cause)."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picks = [taken.getsockname()[1]]
    real_free_port = D.free_port

    def first_the_taken_port():
        picks.append(real_free_port())
        return picks.pop(0)

    monkeypatch.setattr(D, "free_port", first_the_taken_port)
    try:
        results = D.launch(rank_sum_worker, 2, timeout=120)
    finally:
        taken.close()
    assert results == [{"rank": 0, "sum": 1.0}, {"rank": 1, "sum": 1.0}]
    assert results.exitcodes == [0, 0] and len(picks) == 1  # two picks: the taken port, then a free one
    # and a run whose failure is not a lost port race is not repeated
    monkeypatch.setattr(D, "free_port", real_free_port)
    with pytest.raises(D.WorkerError, match="rank 1 failed on purpose"):
        D.launch(D.failing_worker, 2, timeout=120)
