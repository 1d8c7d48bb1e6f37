"""helpers.norms against torch.nn: are the modules true drop-in replacements?

Checked: constructor signatures; parameters and buffers (names, shapes, dtypes, initial
values); repr; state_dict loading both ways with strict=True (and old checkpoints without
num_batches_tracked); dtype/device factory kwargs; forward, input and parameter gradients
and running statistics over several training steps and then in eval, for every momentum
flavour, affine/bias/track_running_stats setting; torch.no_grad() vs eval(); unbatched
InstanceNorm; no use of torch's own normalisation kernels; bad input raising torch's
exception class with an informative message.
"""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import helpers.norms as HN

C = 3
F64 = torch.float64
BN = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
IN = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
ALL = BN + IN + ["LayerNorm", "GroupNorm", "RMSNorm"]
# a batched input shape per class (channels = C)
SHAPE = {
    "BatchNorm1d": (6, C, 4),
    "BatchNorm2d": (2, C, 3, 4),
    "BatchNorm3d": (2, C, 2, 3, 2),
    "InstanceNorm1d": (4, C, 5),
    "InstanceNorm2d": (2, C, 3, 4),
    "InstanceNorm3d": (2, C, 2, 3, 2),
}


# --------------------------------------------------------------------------------------
# builders (all expected values come from the torch twin)
# --------------------------------------------------------------------------------------
def randomize(module):
    """Non-trivial parameters: weight uniform in [0.5, 1.5], bias random."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name == "weight":
                p.uniform_(0.5, 1.5)
            else:
                p.normal_()
    return module


def copy_state(src, dst):
    """Copy parameters and buffers by name (without using load_state_dict)."""
    with torch.no_grad():
        dp, db = dict(dst.named_parameters()), dict(dst.named_buffers())
        for n, p in src.named_parameters():
            dp[n].copy_(p)
        for n, b in src.named_buffers():
            db[n].copy_(b)


def pair(cls, *args, **kwargs):
    """A torch module with random parameters and its helpers twin holding the same values."""
    t = randomize(getattr(nn, cls)(*args, **kwargs))
    h = getattr(HN, cls)(*args, **kwargs)
    copy_state(t, h)
    return t, h


def rand(shape, dtype=F64, offset=0.0):
    return torch.randn(shape, dtype=dtype) * 2.0 + 0.5 + offset


def assert_same_state(h, t):
    """Same parameters and buffers (names, values, dtypes) and same None attributes."""
    for getter in ("named_parameters", "named_buffers"):
        hs, ts = dict(getattr(h, getter)()), dict(getattr(t, getter)())
        assert list(hs) == list(ts), getter
        for k in ts:
            assert_close(hs[k], ts[k], equal_nan=True, msg=f"{getter}: {k}")
    for attr in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
        if hasattr(t, attr):
            assert (getattr(h, attr) is None) == (getattr(t, attr) is None), attr


def step(t, h, x, grad=True):
    """One forward (and backward) on both; compare outputs, input and parameter grads."""
    xt, xh = x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
    yt, yh = t(xt), h(xh)
    assert_close(yh, yt)
    if grad:
        gy = torch.randn_like(yt)
        (yt * gy).sum().backward()
        (yh * gy).sum().backward()
        assert_close(xh.grad, xt.grad)
        for (n, pt), (_, ph) in zip(t.named_parameters(), h.named_parameters()):
            assert_close(ph.grad, pt.grad, msg=f"grad of {n}")
        t.zero_grad()
        h.zero_grad()


# configurations: (class, args, kwargs)
CONFIGS = []
for _cls in BN:
    for _kw in ({}, {"affine": False}, {"bias": False}, {"track_running_stats": False},
                {"momentum": None}, {"eps": 1e-3, "momentum": 0.3}):
        CONFIGS.append((_cls, (C,), _kw))
for _cls in IN:
    for _kw in ({}, {"affine": True}, {"affine": True, "track_running_stats": True},
                {"affine": True, "bias": False}, {"track_running_stats": True}):
        CONFIGS.append((_cls, (C,), _kw))
CONFIGS += [
    ("LayerNorm", (5,), {}), ("LayerNorm", ((3, 4),), {}), ("LayerNorm", ([4],), {"bias": False}),
    ("LayerNorm", (4,), {"elementwise_affine": False}), ("LayerNorm", (4,), {"eps": 1e-3}),
    ("GroupNorm", (2, 4), {}), ("GroupNorm", (2, 4), {"affine": False}),
    ("GroupNorm", (3, 6), {"bias": False}), ("GroupNorm", (1, 4), {"eps": 1e-3}),
    ("RMSNorm", (5,), {}), ("RMSNorm", ((3, 4),), {"eps": 1e-6}),
    ("RMSNorm", ([4],), {"elementwise_affine": False}),
]
CONFIG_IDS = [f"{c}{a}{kw}".replace(" ", "") for c, a, kw in CONFIGS]
PUBLIC_ATTRS = ["num_features", "eps", "momentum", "affine", "track_running_stats",
                "normalized_shape", "elementwise_affine", "num_groups", "num_channels", "training"]


# --------------------------------------------------------------------------------------
# 1. construction: signature, parameters, buffers, repr, factory kwargs
# --------------------------------------------------------------------------------------
def _sig(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", ALL)
def test_init_signature_matches_torch(cls):
    """Same constructor parameter names, kinds (incl. keyword-only bias), order, defaults."""
    assert _sig(getattr(HN, cls).__init__) == _sig(getattr(nn, cls).__init__)


@pytest.mark.parametrize("cls,args,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_parameters_buffers_and_attributes_at_init(cls, args, kwargs):
    """Names, order, shapes, dtypes and initial values of parameters and buffers."""
    t, h = getattr(nn, cls)(*args, **kwargs), getattr(HN, cls)(*args, **kwargs)
    for getter in ("named_parameters", "named_buffers"):
        ts = [(n, tuple(v.shape), v.dtype) for n, v in getattr(t, getter)()]
        hs = [(n, tuple(v.shape), v.dtype) for n, v in getattr(h, getter)()]
        assert hs == ts, getter
    assert_same_state(h, t)
    for attr in PUBLIC_ATTRS:
        if hasattr(t, attr):
            assert getattr(h, attr) == getattr(t, attr), attr
    assert [n for n, _ in h.named_parameters()] == [n for n, _ in t.named_parameters()]


@pytest.mark.parametrize("cls,args,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_repr_matches_torch(cls, args, kwargs):
    assert repr(getattr(HN, cls)(*args, **kwargs)) == repr(getattr(nn, cls)(*args, **kwargs))


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("cls,args,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_factory_kwargs(cls, args, kwargs, device):
    """dtype=float64 and device= reach every parameter and buffer exactly as in torch
    (num_batches_tracked stays int64)."""
    t = getattr(nn, cls)(*args, **kwargs, device=device, dtype=F64)
    h = getattr(HN, cls)(*args, **kwargs, device=device, dtype=F64)
    for getter in ("named_parameters", "named_buffers"):
        ts = [(n, tuple(v.shape), v.dtype, v.device) for n, v in getattr(t, getter)()]
        hs = [(n, tuple(v.shape), v.dtype, v.device) for n, v in getattr(h, getter)()]
        assert hs == ts, getter
    if device == "cpu":
        assert_same_state(h, t)


# --------------------------------------------------------------------------------------
# 2. state_dict compatibility
# --------------------------------------------------------------------------------------
def _input_for(cls, args):
    if cls in SHAPE:
        return rand(SHAPE[cls], torch.float32)
    if cls == "GroupNorm":
        return rand((2, args[1], 3), torch.float32)
    nshape = (args[0],) if isinstance(args[0], int) else tuple(args[0])
    return rand((2,) + nshape, torch.float32)


@pytest.mark.parametrize("cls,args,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_state_dict_loads_both_ways_strict(cls, args, kwargs):
    """torch -> helpers and helpers -> torch with strict=True; same outputs afterwards."""
    x = _input_for(cls, args)
    t = randomize(getattr(nn, cls)(*args, **kwargs)).train()
    t(x)  # move running statistics / num_batches_tracked away from their initial values
    h = getattr(HN, cls)(*args, **kwargs)
    h.load_state_dict(t.state_dict(), strict=True)
    assert list(h.state_dict()) == list(t.state_dict())
    assert_same_state(h, t)

    h2 = randomize(getattr(HN, cls)(*args, **kwargs)).train()
    h2(x + 1.0)
    t2 = getattr(nn, cls)(*args, **kwargs)
    t2.load_state_dict(h2.state_dict(), strict=True)
    assert_same_state(h2, t2)
    t2.eval(), h2.eval()
    assert_close(h2(x), t2(x))


def test_state_dict_in_a_model():
    """A torch model and the same model built from helpers modules exchange checkpoints."""
    def model(lib):
        return nn.Sequential(nn.Conv2d(2, 4, 3), lib.BatchNorm2d(4), nn.ReLU(),
                             lib.GroupNorm(2, 4), nn.Flatten(), lib.LayerNorm(16),
                             lib.RMSNorm(16))
    t = randomize(model(nn))
    x = rand((3, 2, 4, 4), torch.float32)
    t(x)
    h = model(HN)
    h.load_state_dict(t.state_dict(), strict=True)
    t.eval(), h.eval()
    assert_close(h(x), t(x))
    t.load_state_dict(h.state_dict(), strict=True)


@pytest.mark.parametrize("cls", BN + ["InstanceNorm2d"])
def test_old_state_dict_without_num_batches_tracked(cls, same_error):
    """Version-1 checkpoints (before num_batches_tracked) load with strict=True and give 0;
    with version 2 the key is required, as in torch (torch's own test does the same)."""
    kwargs = {"track_running_stats": True} if cls.startswith("Instance") else {}
    for prefix, wrap in (("", lambda m: m), ("0.", lambda m: nn.Sequential(m))):
        sd = wrap(randomize(getattr(nn, cls)(C, **kwargs))).state_dict()
        del sd[prefix + "num_batches_tracked"]
        sd._metadata[prefix[:-1]]["version"] = 1
        h = wrap(getattr(HN, cls)(C, **kwargs))
        h.load_state_dict(sd, strict=True)
        bn = h if prefix == "" else h[0]
        assert bn.num_batches_tracked.dtype == torch.long
        assert bn.num_batches_tracked.item() == 0
        assert_close(bn.running_mean, sd[prefix + "running_mean"])

        sd._metadata[prefix[:-1]]["version"] = 2
        same_error(lambda: wrap(getattr(nn, cls)(C, **kwargs)).load_state_dict(sd),
                   lambda: wrap(getattr(HN, cls)(C, **kwargs)).load_state_dict(sd),
                   "num_batches_tracked")


@pytest.mark.parametrize("cls", BN)
def test_old_state_dict_into_trained_module_matches_torch(cls):
    """Loading a version-1 checkpoint into a module that has already trained: torch keeps the
    module's own num_batches_tracked for the missing key; a drop-in must do the same."""
    t, h = pair(cls, C)
    for i in range(3):
        x = rand(SHAPE[cls], torch.float32, offset=i)
        t(x), h(x)
    sd = getattr(nn, cls)(C).state_dict()
    del sd["num_batches_tracked"]
    sd._metadata[""]["version"] = 1
    t.load_state_dict(sd)
    h.load_state_dict(sd)
    assert h.num_batches_tracked.item() == t.num_batches_tracked.item()


@pytest.mark.parametrize("cls", IN)
def test_instance_norm_old_state_dict_with_unexpected_running_stats(cls, same_error):
    """An unversioned checkpoint with running stats into track_running_stats=False: torch
    refuses to load it (RuntimeError naming the buffers); helpers must too."""
    sd = nn.BatchNorm1d(C).state_dict()  # has running_mean / running_var
    del sd["num_batches_tracked"]
    del sd["weight"], sd["bias"]
    sd._metadata[""].pop("version", None)
    same_error(lambda: getattr(nn, cls)(C).load_state_dict(sd),
               lambda: getattr(HN, cls)(C).load_state_dict(sd), "running_mean")


# --------------------------------------------------------------------------------------
# 3. training steps then eval
# --------------------------------------------------------------------------------------
BN_TRAIN_KW = [
    {"momentum": 0.1}, {"momentum": 0.3}, {"momentum": None}, {"affine": False},
    {"bias": False}, {"track_running_stats": False}, {"momentum": None, "affine": False},
    {"track_running_stats": False, "affine": False}, {"eps": 0.1},
]


@pytest.mark.parametrize("kwargs", BN_TRAIN_KW, ids=[str(k) for k in BN_TRAIN_KW])
@pytest.mark.parametrize("cls", BN)
def test_batchnorm_training_then_eval(cls, kwargs):
    """4 training steps (outputs, gradients, running stats, num_batches_tracked, momentum
    None = cumulative average), then eval (running stats, or batch stats when not
    tracked), then back to training."""
    t, h = pair(cls, C, dtype=F64, **kwargs)
    shapes = [SHAPE[cls]] + ([(8, C)] if cls == "BatchNorm1d" else [])
    for i in range(4):
        step(t, h, rand(shapes[i % len(shapes)], offset=i))
        assert_same_state(h, t)
    t.eval(), h.eval()
    for i in range(2):
        step(t, h, rand(SHAPE[cls], offset=-i))
        assert_same_state(h, t)
    t.train(), h.train()
    step(t, h, rand(SHAPE[cls]))
    assert_same_state(h, t)


@pytest.mark.parametrize("cls", BN)
def test_batchnorm_eval_single_value_per_channel(cls):
    """In eval, a batch of one with one value per channel is fine (running stats)."""
    t, h = pair(cls, C, dtype=F64)
    step(t, h, rand(SHAPE[cls]))
    t.eval(), h.eval()
    step(t, h, rand((1, C) + (1,) * (len(SHAPE[cls]) - 2)))


IN_TRAIN_KW = [
    {}, {"affine": True}, {"affine": True, "bias": False}, {"track_running_stats": True},
    {"affine": True, "track_running_stats": True, "momentum": 0.3},
    {"track_running_stats": True, "momentum": None}, {"eps": 0.1, "affine": True},
]


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("kwargs", IN_TRAIN_KW, ids=[str(k) for k in IN_TRAIN_KW])
@pytest.mark.parametrize("cls", IN)
def test_instancenorm_training_then_eval(cls, kwargs, unbatched):
    """3 training steps then eval: per-instance stats, running stats when tracked (used in
    eval), momentum None (no update, as in torch); unbatched (C, *) input too."""
    t, h = pair(cls, C, dtype=F64, **kwargs)
    shape = SHAPE[cls][1:] if unbatched else SHAPE[cls]
    for i in range(3):
        step(t, h, rand(shape, offset=i))
        assert_same_state(h, t)
    t.eval(), h.eval()
    step(t, h, rand(shape, offset=5))
    assert_same_state(h, t)


PER_SAMPLE = [
    ("LayerNorm", (5,), {}, (4, 5)),
    ("LayerNorm", ((3, 4),), {"eps": 1e-3}, (2, 5, 3, 4)),
    ("LayerNorm", (4,), {"bias": False}, (2, 3, 4)),
    ("LayerNorm", (4,), {"elementwise_affine": False}, (3, 4)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", (3, 6), {"bias": False}, (2, 6, 2, 2)),
    ("GroupNorm", (1, 4), {"affine": False}, (2, 4, 2, 2, 2)),
    ("GroupNorm", (4, 4), {}, (2, 4, 3)),
    ("RMSNorm", (5,), {}, (4, 5)),
    ("RMSNorm", ((3, 4),), {"eps": 1e-6}, (2, 3, 4)),
    ("RMSNorm", (4,), {"elementwise_affine": False}, (3, 4)),
]


@pytest.mark.parametrize("dtype", [F64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("cls,args,kwargs,shape", PER_SAMPLE,
                         ids=[f"{c}{a}{k}".replace(" ", "") for c, a, k, _ in PER_SAMPLE])
def test_per_sample_norms_train_and_eval(cls, args, kwargs, shape, dtype):
    """LayerNorm/GroupNorm/RMSNorm: same forward and gradients, identical in train and eval."""
    t, h = pair(cls, *args, dtype=dtype, **kwargs)
    step(t, h, rand(shape, dtype))
    t.eval(), h.eval()
    step(t, h, rand(shape, dtype))


@pytest.mark.parametrize("cls,kwargs", [(c, {}) for c in BN]
                         + [(c, {"track_running_stats": True}) for c in IN])
def test_no_grad_vs_eval(cls, kwargs):
    """torch.no_grad() in training mode still uses batch stats and updates the running stats
    (and num_batches_tracked); eval() uses and keeps them. Same as torch."""
    t, h = pair(cls, C, dtype=F64, **kwargs)
    x = rand(SHAPE[cls], offset=1.0)
    with torch.no_grad():
        step(t, h, x, grad=False)
    assert_same_state(h, t)  # incl. num_batches_tracked (BatchNorm counts, InstanceNorm not)
    assert not torch.equal(h.running_mean, torch.zeros(C, dtype=F64))
    before = {k: v.clone() for k, v in h.named_buffers()}
    t.eval(), h.eval()
    with torch.no_grad():
        step(t, h, x, grad=False)
    assert_same_state(h, t)
    for k, v in h.named_buffers():
        assert torch.equal(v, before[k]), k


# --------------------------------------------------------------------------------------
# 4. no dependence on torch's own normalisation functions
# --------------------------------------------------------------------------------------
NO_KERNEL = [
    ("BatchNorm1d", (C,), {}, (6, C, 4)),
    ("BatchNorm2d", (C,), {}, SHAPE["BatchNorm2d"]),
    ("BatchNorm3d", (C,), {"momentum": None}, SHAPE["BatchNorm3d"]),
    ("InstanceNorm1d", (C,), {"affine": True, "track_running_stats": True}, SHAPE["InstanceNorm1d"]),
    ("InstanceNorm2d", (C,), {"affine": True}, SHAPE["InstanceNorm2d"]),
    ("InstanceNorm3d", (C,), {}, SHAPE["InstanceNorm3d"]),
    ("LayerNorm", ((3, 4),), {}, (2, 3, 4)),
    ("GroupNorm", (2, 4), {}, (2, 4, 3)),
    ("RMSNorm", (4,), {}, (2, 3, 4)),
]


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_modules_work_without_torch_norm_kernels(mode, no_torch_norms):
    """Every helpers.norms module, forward and backward, with torch's kernels patched to
    raise. The torch references are computed first, before patching."""
    refs = []
    for cls, args, kwargs, shape in NO_KERNEL:
        t, h = pair(cls, *args, dtype=F64, **kwargs)
        if mode == "eval":
            t(rand(shape)), h(rand(shape))  # (different data: running stats are compared below)
            copy_state(t, h)
            t.eval(), h.eval()
        x = rand(shape).requires_grad_(True)
        gy = torch.randn(shape, dtype=F64)
        y = t(x)
        grads = torch.autograd.grad(y, [x, *t.parameters()], gy)
        refs.append((h, x, gy, y.detach(), grads, t))

    with no_torch_norms():
        for h, x, gy, y_ref, grads_ref, t in refs:
            y = h(x)
            grads = torch.autograd.grad(y, [x, *h.parameters()], gy)
            assert_close(y, y_ref)
            for g, r in zip(grads, grads_ref):
                assert_close(g, r)
            assert_same_state(h, t)


# --------------------------------------------------------------------------------------
# 5. bad input: same exception class as torch, informative message
# --------------------------------------------------------------------------------------
def _x(*shape):
    return torch.randn(*shape)


MODULE_ERRORS = {
    # id: (call(lib), strings helpers' message must contain)
    "GroupNorm-3-groups-4-channels": (lambda L: L.GroupNorm(3, 4), ["4", "3"]),
    "GroupNorm-4-groups-6-channels": (lambda L: L.GroupNorm(4, 6), ["6", "4"]),
    "GroupNorm-channel-mismatch": (lambda L: L.GroupNorm(2, 4)(_x(2, 6, 3)), ["4", "6"]),
    "GroupNorm-rank-1": (lambda L: L.GroupNorm(2, 4)(_x(4)), ["1"]),
    "BatchNorm1d-rank-4": (lambda L: L.BatchNorm1d(C)(_x(2, C, 4, 4)), ["4D"]),
    "BatchNorm1d-rank-1": (lambda L: L.BatchNorm1d(C)(_x(C)), ["1D"]),
    "BatchNorm2d-rank-3": (lambda L: L.BatchNorm2d(C)(_x(2, C, 4)), ["3D"]),
    "BatchNorm2d-rank-5": (lambda L: L.BatchNorm2d(C)(_x(2, C, 2, 2, 2)), ["5D"]),
    "BatchNorm3d-rank-4": (lambda L: L.BatchNorm3d(C)(_x(2, C, 4, 4)), ["4D"]),
    "InstanceNorm1d-rank-4": (lambda L: L.InstanceNorm1d(C)(_x(2, C, 4, 4)), ["4D"]),
    "InstanceNorm1d-rank-1": (lambda L: L.InstanceNorm1d(C)(_x(5)), ["1D"]),
    "InstanceNorm2d-rank-2": (lambda L: L.InstanceNorm2d(C)(_x(C, 4)), ["2D"]),
    "InstanceNorm2d-rank-5": (lambda L: L.InstanceNorm2d(C)(_x(2, C, 2, 2, 2)), ["5D"]),
    "InstanceNorm3d-rank-3": (lambda L: L.InstanceNorm3d(C)(_x(C, 4, 4)), ["3D"]),
    "InstanceNorm3d-rank-6": (lambda L: L.InstanceNorm3d(C)(_x(1, 2, C, 2, 2, 2)), ["6D"]),
    "LayerNorm-rank-too-low": (lambda L: L.LayerNorm((3, 4))(_x(4)), ["[3, 4]", "[4]"]),
    "RMSNorm-rank-too-low": (lambda L: L.RMSNorm((3, 4))(_x(4)), ["[3, 4]", "[4]"]),
    "LayerNorm-shape-mismatch": (lambda L: L.LayerNorm(5)(_x(2, 4)), ["[5]", "[2, 4]"]),
    "RMSNorm-shape-mismatch": (lambda L: L.RMSNorm(5)(_x(2, 4)), ["[5]", "[2, 4]"]),
    "BatchNorm1d-channels": (lambda L: L.BatchNorm1d(C)(_x(4, 4)), ["3", "4"]),
    "BatchNorm2d-channels": (lambda L: L.BatchNorm2d(C)(_x(2, 5, 3, 3)), ["3", "5"]),
    "BatchNorm2d-channels-no-affine": (
        lambda L: L.BatchNorm2d(C, affine=False)(_x(2, 4, 3, 3)), ["3", "4"]),
    "BatchNorm3d-channels-untracked": (
        lambda L: L.BatchNorm3d(C, track_running_stats=False)(_x(2, 4, 2, 2, 2)), ["3", "4"]),
    "BatchNorm2d-channels-eval": (lambda L: L.BatchNorm2d(C).eval()(_x(2, 4, 3, 3)), ["3", "4"]),
    "InstanceNorm1d-affine-channels": (
        lambda L: L.InstanceNorm1d(C, affine=True)(_x(2, 4, 5)), ["3", "4"]),
    "InstanceNorm2d-affine-channels-unbatched": (
        lambda L: L.InstanceNorm2d(C, affine=True)(_x(4, 3, 3)), ["3", "4"]),
    "BatchNorm1d-one-value-per-channel": (lambda L: L.BatchNorm1d(C)(_x(1, C)), ["[1, 3]"]),
    "BatchNorm2d-one-value-per-channel": (
        lambda L: L.BatchNorm2d(C)(_x(1, C, 1, 1)), ["[1, 3, 1, 1]"]),
    "BatchNorm1d-one-value-untracked-eval": (
        lambda L: L.BatchNorm1d(C, track_running_stats=False).eval()(_x(1, C)), ["[1, 3]"]),
    "InstanceNorm1d-one-spatial": (lambda L: L.InstanceNorm1d(C)(_x(2, C, 1)), ["[2, 3, 1]"]),
    "InstanceNorm2d-one-spatial": (
        lambda L: L.InstanceNorm2d(C)(_x(2, C, 1, 1)), ["[2, 3, 1, 1]"]),
    "InstanceNorm1d-one-spatial-unbatched": (lambda L: L.InstanceNorm1d(C)(_x(C, 1)), ["1"]),
}


@pytest.mark.parametrize("case", list(MODULE_ERRORS))
def test_module_bad_input_raises_like_torch(case, same_error):
    """Same exception class as torch; the message names the offending sizes."""
    call, must_contain = MODULE_ERRORS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the InstanceNorm num_features warning
        same_error(lambda: call(nn), lambda: call(HN), *must_contain)


@pytest.mark.parametrize("cls", IN)
def test_instancenorm_channel_mismatch_without_affine_warns(cls):
    """Non-affine InstanceNorm ignores num_features: torch warns (UserWarning) and computes."""
    x = rand(SHAPE[cls]).repeat_interleave(2, dim=1)  # 2*C channels
    with pytest.warns(UserWarning) as rec_t:
        yt = getattr(nn, cls)(C)(x)
    with pytest.warns(UserWarning) as rec_h:
        yh = getattr(HN, cls)(C)(x)
    assert_close(yh, yt)
    assert any("num_features" in str(r.message) for r in rec_h)
    assert len(rec_t) >= 1
