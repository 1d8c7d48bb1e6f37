"""Inputs on which helpers.functional / helpers.norms once differed from torch, each checked
against torch itself.

- Half-precision BatchNorm/InstanceNorm training backward with loss-scaled gradients: finite,
  as torch's (the float16 rounding of the batch statistics applies to the forward only).
- An empty half-precision batch: zero (not NaN) parameter gradients, as torch.
- A constant row or group normalises to exactly 0 (NaN at eps = 0), as torch's LayerNorm and
  GroupNorm kernels give it; BatchNorm/InstanceNorm at least as close to the exact result as
  torch.
- weight and bias of different dtypes, a (C, 1) instance_norm weight, and arguments of the
  wrong type: rejected with torch's exception class.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import helpers.backward as HB
import helpers.functional as HF
import helpers.norms as HN
from helpers.distributed import SyncBatchNorm

HALF = [torch.float16, torch.bfloat16]
HALF_IDS = ["f16", "bf16"]


# --------------------------------------------------------------------------------------
# half-precision training backward (loss-scaled gradients)
# --------------------------------------------------------------------------------------
def _grads(module, x, dy):
    x = x.clone().requires_grad_()
    module(x).backward(dy)
    return [x.grad.float()] + [p.grad.float() for p in module.parameters()]


def test_float16_batchnorm2d_backward_with_loss_scaling_matches_torch():
    """A float16 BatchNorm2d in training, inputs of scale 20 and an upstream gradient scaled by
    256 (loss scaling): torch gives finite gradients; so must helpers, equal to torch's up to
    float16 rounding of the gradients' scale."""
    x = (torch.randn(8, 4, 8, 8) * 20).half()
    dy = (torch.randn(8, 4, 8, 8) * 256).half()
    expected = _grads(nn.BatchNorm2d(4).half(), x, dy)
    actual = _grads(HN.BatchNorm2d(4).half(), x, dy)
    for e, a in zip(expected, actual):
        assert e.isfinite().all()
        assert a.isfinite().all(), f"{int((~a.isfinite()).sum())} gradient entries are not finite"
        assert_close(a, e, atol=2e-3 * float(e.abs().max()), rtol=2e-3)


@pytest.mark.parametrize("which", ["instance_norm", "batch_norm", "InstanceNorm1d",
                                   "SyncBatchNorm"])
def test_float16_training_backward_of_a_large_spread(which):
    """The minimal reproducers: x = (-300, 300), dy = (256, -256). The exact gradient is about
    1e-10; torch returns float16 rounding noise of the gradient's scale |dy|/sigma (about 4e-4);
    helpers returned NaN (its rounded statistics' gradients overflowed float16)."""
    x = torch.tensor([[[-300.0, 300.0]]], dtype=torch.half)
    dy = torch.tensor([[[256.0, -256.0]]], dtype=torch.half)
    calls = {
        "instance_norm": (lambda t: F.instance_norm(t), lambda t: HF.instance_norm(t)),
        "batch_norm": (lambda t: F.batch_norm(t.reshape(2, 1), None, None, training=True),
                       lambda t: HF.batch_norm(t.reshape(2, 1), None, None, training=True)),
        "InstanceNorm1d": (nn.InstanceNorm1d(1).half(), HN.InstanceNorm1d(1).half()),
        "SyncBatchNorm": (nn.BatchNorm1d(1, eps=1e-12).half(),  # torch's SyncBatchNorm needs CUDA
                          SyncBatchNorm(1, eps=1e-12).half()),
    }[which]
    if which in ("batch_norm", "SyncBatchNorm"):
        x, dy = x.reshape(2, 1), dy.reshape(2, 1)
    grads = []
    for fn in calls:
        t = x.clone().requires_grad_()
        fn(t).backward(dy)
        grads.append(t.grad.float())
    expected, actual = grads
    assert expected.isfinite().all() and actual.isfinite().all(), (expected, actual)
    scale = 256.0 / 300.0  # |dy| / sigma
    assert_close(actual, expected, atol=2 * 2**-10 * scale, rtol=0)


def _half_training_grad(M, which, x, dy, dtype):
    t = x.to(dtype).clone().requires_grad_()
    if which == "batch_norm":
        y = M.batch_norm(t, None, None, training=True, eps=1e-12 if x.dim() == 3 else 1e-5)
    else:
        y = M.instance_norm(t)
    y.backward(dy.to(dtype))
    return t.grad.double()


def test_float16_training_backward_random_loss_scaled_cases():
    """200 small float16 batches (offset, spread and upstream gradients up to 4**7 vary):
    wherever torch's input gradient is not finite, helpers' is the same (inf of the same sign,
    or NaN), and elsewhere helpers is at most twice as far from the float64 gradient as torch
    is, or within float16 rounding of the gradient's scale. Before the forward-only rounding,
    helpers gave NaN or an infinity of the wrong sign in many of these."""
    g = torch.Generator().manual_seed(1)
    shapes = [(1, 1, 3), (2, 3, 4), (4, 2), (1, 2, 2, 3)]
    for i in range(200):
        shape = shapes[i % 4]
        which = "batch_norm" if len(shape) == 2 or i % 2 else "instance_norm"
        x = (torch.randn(shape, generator=g) * torch.rand(1, generator=g) * 10
             + torch.randn(1, generator=g) * 5).half()
        dy = (torch.randn(shape, generator=g) * 4.0 ** torch.randint(0, 8, (1,), generator=g)).half()
        expected = _half_training_grad(F, which, x, dy, torch.half)
        actual = _half_training_grad(HF, which, x, dy, torch.half)
        exact = _half_training_grad(F, which, x, dy, torch.float64)
        finite = expected.isfinite()
        assert torch.equal(actual[~finite].nan_to_num(posinf=1, neginf=-1, nan=0),
                           expected[~finite].nan_to_num(posinf=1, neginf=-1, nan=0)), (i, x, dy)
        assert actual[finite].isfinite().all(), (i, x, dy)
        scale = float(dy.double().abs().max() * exact.abs().max().clamp(min=1))
        err_h = (actual - exact)[finite].abs().max() if finite.any() else 0.0
        err_t = (expected - exact)[finite].abs().max() if finite.any() else 0.0
        assert err_h <= max(2 * err_t, 2**-10 * scale), (i, err_h, err_t)


# --------------------------------------------------------------------------------------
# empty half-precision batch
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name,shape", [("BatchNorm1d", (0, 3)), ("BatchNorm3d", (0, 3, 1, 1, 0)),
                                        ("BatchNorm2d", (0, 3, 2, 2))])
def test_empty_half_batch_gives_zero_parameter_gradients(name, shape, dtype):
    """torch: weight.grad = bias.grad = 0 and an SGD step leaves the weight finite."""
    grads = []
    for M in (nn, HN):
        m = getattr(M, name)(3).to(dtype)
        x = torch.empty(shape, dtype=dtype, requires_grad=True)
        m(x).sum().backward()
        torch.optim.SGD(m.parameters(), lr=0.1).step()
        grads.append((m.weight.grad, m.bias.grad, m.weight.detach().clone()))
    for e, a in zip(*grads):
        assert_close(a, e)
    assert grads[1][0].eq(0).all()


# --------------------------------------------------------------------------------------
# constant rows and groups
# --------------------------------------------------------------------------------------
CONSTANTS = torch.cat([torch.tensor([2.283592939376831, 0.1, 0.3, -7.77, 1e4]),
                       torch.linspace(-10, 10, 27, dtype=torch.float64) * 1.2345])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_constant_row_layer_norm_is_exactly_zero(dtype):
    """torch's float32/float64 LayerNorm of a constant row is exactly 0 (its statistics are
    exact); helpers' plain two-pass mean was an ulp off for 6 to 44 % of random constants,
    amplified by 1/sqrt(eps) to about 1.5e-4."""
    for n in (10, 768, 1000):
        x = CONSTANTS.to(dtype)[:, None].expand(-1, n)
        expected = F.layer_norm(x, (n,))
        assert expected.eq(0).all()
        assert_close(HF.layer_norm(x, (n,)), expected, rtol=0, atol=0)
        assert_close(HN.LayerNorm(n, dtype=dtype)(x), expected, rtol=0, atol=0)
        assert_close(HF.group_norm(x.reshape(-1, 2, n // 2), 1), F.group_norm(
            x.reshape(-1, 2, n // 2), 1), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_constant_row_half_layer_norm_at_least_as_exact_as_torch(dtype):
    """torch's half-precision LayerNorm kernel leaves up to about 2e-5 on a constant row;
    helpers is at least as close to the exact 0."""
    for n in (10, 768, 1000):
        x = CONSTANTS.to(dtype)[:, None].expand(-1, n)
        torch_err = F.layer_norm(x, (n,)).float().abs().amax(-1)
        assert (HF.layer_norm(x, (n,)).float().abs().amax(-1) <= torch_err).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_constant_row_without_eps_is_nan(dtype):
    """eps = 0: a constant row is 0/0, NaN in torch (helpers gave +1 or -1)."""
    for v in (0.3, 0.1, 2.283592939376831):
        x = torch.full((1, 10), v, dtype=dtype)
        assert F.layer_norm(x, (10,), eps=0.0).isnan().all()
        assert HF.layer_norm(x, (10,), eps=0.0).isnan().all()
        assert F.group_norm(x.reshape(1, 2, 5), 1, eps=0.0).isnan().all()
        assert HF.group_norm(x.reshape(1, 2, 5), 1, eps=0.0).isnan().all()


def test_constant_group_group_norm_as_torch():
    """Constant groups of 2 channels: exactly 0 without affine, as torch; with affine the exact
    result is the bias, which helpers gives at least as closely as torch (whose folded
    x * scale + shift rounds)."""
    values = (torch.rand(4, 3, dtype=torch.float64) * 10).float()
    x = values[:, :, None].expand(4, 3, 30).reshape(4, 6, 3, 5)  # 3 constant groups of 2 channels
    assert F.group_norm(x, 3).eq(0).all()
    assert_close(HF.group_norm(x, 3), F.group_norm(x, 3), rtol=0, atol=0)
    w, b = torch.rand(6) + 0.5, torch.randn(6)
    exact = b[None, :, None, None].expand_as(x)
    torch_err = (F.group_norm(x, 3, w, b) - exact).abs().max()
    assert (HF.group_norm(x, 3, w, b) - exact).abs().max() <= torch_err


@pytest.mark.parametrize("layout", ["expand", "full"])
def test_constant_channels_batch_and_instance_norm_as_close_as_torch(layout):
    """BatchNorm and InstanceNorm of constant channels: torch itself is off by up to about
    2.5e-5 there; helpers must be at least as close to the exact 0 as torch (it is exact)."""
    c = torch.tensor([2.283592939376831, 0.7, -3.3])
    x = c[None, :, None, None, None].expand(2, 3, 2, 3, 4)
    if layout == "full":
        x = x.contiguous()
    for fn in (lambda M: M.instance_norm(x), lambda M: M.batch_norm(x, None, None, training=True)):
        torch_err = fn(F).abs().max()
        assert fn(HF).abs().max() <= torch_err
    assert HN.InstanceNorm3d(3)(x).abs().max() <= nn.InstanceNorm3d(3)(x).abs().max()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_layer_norm_backward_of_a_constant_row_matches_torch(dtype):
    """helpers.backward.layer_norm_backward with eps = 1e-12 on constant rows: the weight
    gradient sums dy * x_hat, and x_hat is 0 in torch (helpers gave 0.43 where torch gives 0.06,
    through the amplified rounding error of the mean). The reference is torch's float64
    autograd (torch's float32 kernel is itself off here: weight gradients up to 0.08)."""
    x = CONSTANTS.to(dtype)[:, None].expand(-1, 7).contiguous()
    w = torch.linspace(0.5, 1.5, 7, dtype=dtype)
    dy = torch.randn(x.shape, dtype=dtype)
    leaves = [t.double().requires_grad_() for t in (x, w, torch.zeros(7))]
    expected = torch.autograd.grad(F.layer_norm(leaves[0], (7,), *leaves[1:], 1e-12), leaves,
                                   dy.double())
    actual = HB.layer_norm_backward(dy, x, (7,), w, 1e-12)
    for a, e in zip(actual, expected):
        assert_close(a, e.to(dtype), atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------
# arguments torch rejects
# --------------------------------------------------------------------------------------
xb = torch.randn(2, 3, 4).bfloat16()
x32 = torch.randn(2, 3, 4)
BF, F32 = torch.bfloat16, torch.float32
REJECTED = {
    # weight and bias of different dtypes
    "ln-w32-b16": lambda M: M.layer_norm(xb, (4,), torch.ones(4), torch.zeros(4, dtype=BF)),
    "ln-w16-b32": lambda M: M.layer_norm(xb, (4,), torch.ones(4, dtype=BF), torch.zeros(4)),
    "gn-w16-b32": lambda M: M.group_norm(xb, 3, torch.ones(3, dtype=BF), torch.zeros(3)),
    "gn-w32-b16": lambda M: M.group_norm(xb, 3, torch.ones(3), torch.zeros(3, dtype=BF)),
    "in-w32-b16": lambda M: M.instance_norm(xb, weight=torch.ones(3), bias=torch.zeros(3, dtype=BF)),
    # a lone float32 bias with running statistics (torch accepts a lone float32 weight)
    "in-stats-b32": lambda M: M.instance_norm(xb, torch.zeros(3), torch.ones(3), bias=torch.zeros(3)),
    "in-stats16-b32": lambda M: M.instance_norm(xb, torch.zeros(3, dtype=BF),
                                                torch.ones(3, dtype=BF), bias=torch.zeros(3)),
    # argument types
    "in-momentum-None": lambda M: M.instance_norm(x32, momentum=None),
    "in-momentum-str": lambda M: M.instance_norm(x32, momentum="0.1"),
    "in-eps-vector": lambda M: M.instance_norm(x32, eps=torch.tensor([1e-5])),
    "in-use_input_stats-None": lambda M: M.instance_norm(x32, use_input_stats=None),
    "in-use_input_stats-1": lambda M: M.instance_norm(x32, use_input_stats=1),
    "bn-training-None": lambda M: M.batch_norm(x32, torch.zeros(3), torch.ones(3), training=None),
    "bn-training-1": lambda M: M.batch_norm(x32, torch.zeros(3), torch.ones(3), training=1),
    "bn-training-numpy": lambda M: M.batch_norm(x32, torch.zeros(3), torch.ones(3),
                                                training=np.True_),
    "bn-momentum-complex": lambda M: M.batch_norm(x32, None, None, training=True, momentum=1j),
    "bn-eps-vector": lambda M: M.batch_norm(x32, None, None, training=True,
                                            eps=torch.tensor([1e-5])),
    "ln-shape-float": lambda M: M.layer_norm(x32, (4.0,)),
    "ln-shape-bool": lambda M: M.layer_norm(x32, (True,)),
    "ln-shape-tensor": lambda M: M.layer_norm(x32, torch.tensor([4])),
    "ln-eps-complex": lambda M: M.layer_norm(x32, (4,), eps=1j),
    "rms-shape-float": lambda M: M.rms_norm(x32, (4.0,)),
    "rms-shape-numpy-float": lambda M: M.rms_norm(x32, (np.float64(4),)),
    "rms-eps-str": lambda M: M.rms_norm(x32, (4,), eps="1e-6"),
    "gn-groups-float": lambda M: M.group_norm(x32, 3.0),
    "gn-groups-bool": lambda M: M.group_norm(x32, True),
    "gn-eps-vector": lambda M: M.group_norm(x32, 3, eps=torch.tensor([1e-5])),
    # instance_norm parameters must be vectors (torch repeats them N times)
    "in-weight-C1": lambda M: M.instance_norm(x32, weight=torch.ones(3, 1)),
    "in-bias-1C": lambda M: M.instance_norm(x32, bias=torch.ones(1, 3)),
    "in-stats-C1": lambda M: M.instance_norm(x32, torch.zeros(3, 1), torch.ones(3, 1)),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_rejected_like_torch(case, same_error):
    same_error(lambda: REJECTED[case](F), lambda: REJECTED[case](HF))


ACCEPTED = {
    # what torch's parser takes for a float, a bool, an int and a tuple of ints
    "bn-momentum-int": lambda M: M.batch_norm(x32, torch.zeros(3), torch.ones(3), training=True,
                                              momentum=1),
    "bn-momentum-0d-tensor": lambda M: M.batch_norm(x32, torch.zeros(3), torch.ones(3),
                                                    training=True, momentum=torch.tensor(0.3)),
    "in-momentum-numpy": lambda M: M.instance_norm(x32, torch.zeros(3), torch.ones(3),
                                                   momentum=np.float32(0.3)),
    "in-eps-0d-tensor": lambda M: M.instance_norm(x32, eps=torch.tensor(0.5)),
    "ln-shape-numpy-int": lambda M: M.layer_norm(x32, (np.int64(4),)),
    "ln-shape-0d-int-tensor": lambda M: M.layer_norm(x32, (torch.tensor(4),)),
    "ln-shape-Size": lambda M: M.layer_norm(x32, x32.shape[1:]),
    "rms-eps-None": lambda M: M.rms_norm(x32, [4], eps=None),
    "gn-groups-numpy": lambda M: M.group_norm(x32, np.int64(3)),
    "gn-groups-0d-tensor": lambda M: M.group_norm(x32, torch.tensor(3)),
    "in-weight-0d-one-channel": lambda M: M.instance_norm(x32[:, :1], weight=torch.tensor(2.0)),
    "in-lone-weight32-stats": lambda M: M.instance_norm(xb, torch.zeros(3), torch.ones(3),
                                                        weight=torch.full((3,), 2.0)),
    "ln-both-params-32": lambda M: M.layer_norm(xb, (4,), torch.ones(4), torch.zeros(4)),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_accepted_like_torch(case):
    """The argument checks reject no call that torch accepts, and the result is torch's."""
    expected = ACCEPTED[case](F)
    tol = {"atol": 2e-2, "rtol": 1.6e-2} if expected.dtype == BF else {}
    assert_close(ACCEPTED[case](HF), expected, **tol)
