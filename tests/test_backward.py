"""helpers.backward (closed-form backward passes) against torch autograd.

Each hand-written backward returns (grad_input, grad_weight, grad_bias). The reference is
torch autograd through torch.nn.functional's op (with a bias present where the op has
one), in float64, to 1e-10, for 2-D to 5-D inputs and multi-dim normalized_shape. The
parameters are non-trivial (weight uniform in [0.5, 1.5], random bias) so that a missing
factor of the weight cannot hide. Each backward is also wrapped in an autograd.Function
whose forward is torch's op, and checked with torch.autograd.gradcheck. Finally the two
BatchNorm properties: the input gradient sums to zero per channel and is orthogonal to
x_hat per channel.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import helpers.backward as HB

F64 = torch.float64
TOL = {"atol": 1e-10, "rtol": 1e-10}


def rand(shape):
    return torch.randn(shape, dtype=F64) * 2.0 + 0.5


def params(shape, weighted):
    if not weighted:
        return None, None
    return (torch.empty(shape, dtype=F64).uniform_(0.5, 1.5), torch.randn(shape, dtype=F64))


def autograd_reference(op, x, w, b, gy):
    """(grad_input, grad_weight, grad_bias) of op(x, w, b) from torch autograd; None for
    parameters that are None."""
    leaves = [None if t is None else t.clone().requires_grad_(True) for t in (x, w, b)]
    out = op(*leaves)
    present = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, present, gy))
    return tuple(None if t is None else next(grads) for t in leaves)


def check(actual, expected, x, w, has_bias=True):
    gi, gw, gb = actual
    assert gi.dtype == x.dtype and gi.shape == x.shape
    assert_close(gi, expected[0], **TOL)
    if w is None:
        assert gw is None and gb is None
        return
    assert gw.shape == w.shape
    assert_close(gw, expected[1], **TOL)
    if has_bias:
        assert_close(gb, expected[2], **TOL)
    else:
        assert gb is None


# --------------------------------------------------------------------------------------
# 1. agreement with autograd
# --------------------------------------------------------------------------------------
BN_SHAPES = [(8, 3), (4, 3, 5), (2, 3, 3, 2), (2, 3, 2, 2, 2)]
LN_CASES = [((5,), (5,)), ((4, 5), (5,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)),
            ((2, 2, 3, 2), (2, 3, 2)), ((2, 3, 2, 2, 2), (3, 2, 2, 2))]
LN_IDS = [f"{list(s)}/{list(n)}" for s, n in LN_CASES]
GN_CASES = [((4, 6), 3), ((2, 6, 5), 2), ((2, 6, 2, 3), 6), ((2, 4, 2, 2, 2), 1), ((3, 6, 4), 3)]
EPS = [1e-5, 1e-2]
WEIGHTED = pytest.mark.parametrize("weighted", [True, False], ids=["weight", "no-weight"])


@WEIGHTED
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=[f"{len(s)}D" for s in BN_SHAPES])
def test_batch_norm_backward(shape, eps, weighted):
    """Training-mode BatchNorm (batch statistics over every dim but 1)."""
    x, gy = rand(shape), torch.randn(shape, dtype=F64)
    w, b = params(shape[1], weighted)
    expected = autograd_reference(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=eps), x, w, b, gy)
    check(HB.batch_norm_backward(gy, x, w, eps), expected, x, w)


@WEIGHTED
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("shape,nshape", LN_CASES, ids=LN_IDS)
def test_layer_norm_backward(shape, nshape, eps, weighted):
    """LayerNorm over the trailing normalized_shape, per-element weight and bias."""
    x, gy = rand(shape), torch.randn(shape, dtype=F64)
    w, b = params(nshape, weighted)
    expected = autograd_reference(lambda x, w, b: F.layer_norm(x, nshape, w, b, eps), x, w, b, gy)
    check(HB.layer_norm_backward(gy, x, nshape, w, eps), expected, x, w)


@WEIGHTED
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("shape,groups", GN_CASES, ids=[f"{len(s)}D-G{g}" for s, g in GN_CASES])
def test_group_norm_backward(shape, groups, eps, weighted):
    """GroupNorm: per (sample, group) statistics, per-channel weight and bias."""
    x, gy = rand(shape), torch.randn(shape, dtype=F64)
    w, b = params(shape[1], weighted)
    expected = autograd_reference(lambda x, w, b: F.group_norm(x, groups, w, b, eps), x, w, b, gy)
    check(HB.group_norm_backward(gy, x, groups, w, eps), expected, x, w)


@WEIGHTED
@pytest.mark.parametrize("eps", [None, 1e-6, 1e-2], ids=["eps=None", "eps=1e-6", "eps=1e-2"])
@pytest.mark.parametrize("shape,nshape", LN_CASES, ids=LN_IDS)
def test_rms_norm_backward(shape, nshape, eps, weighted):
    """RMSNorm: no mean, no bias (grad_bias is always None), eps=None rule of torch."""
    x, gy = rand(shape), torch.randn(shape, dtype=F64)
    w = params(nshape, weighted)[0]
    expected = autograd_reference(lambda x, w, b: F.rms_norm(x, nshape, w, eps), x, w, None, gy)
    check(HB.rms_norm_backward(gy, x, nshape, w, eps), expected, x, w, has_bias=False)


def test_rms_norm_backward_grad_bias_always_none():
    x, gy = rand((3, 4)), torch.randn(3, 4, dtype=F64)
    for w in (None, torch.ones(4, dtype=F64)):
        assert HB.rms_norm_backward(gy, x, (4,), w, 1e-6)[2] is None


# --------------------------------------------------------------------------------------
# 2. gradcheck: hand-written backward inside an autograd.Function (forward = torch's op)
# --------------------------------------------------------------------------------------
def as_function(forward, backward):
    """An autograd op whose forward is torch's and whose backward is the hand-written one."""

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return forward(x, w, b)

        @staticmethod
        def backward(ctx, gy):
            x, w = ctx.saved_tensors
            return backward(gy, x, w)

    return Op.apply


GRADCHECK = {
    "batch_norm-3D": ((4, 3, 3), (3,), as_function(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-3),
        lambda gy, x, w: HB.batch_norm_backward(gy, x, w, 1e-3))),
    "batch_norm-4D": ((2, 3, 2, 2), (3,), as_function(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5),
        lambda gy, x, w: HB.batch_norm_backward(gy, x, w, 1e-5))),
    "layer_norm-2dims": ((2, 3, 4), (3, 4), as_function(
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-5),
        lambda gy, x, w: HB.layer_norm_backward(gy, x, (3, 4), w, 1e-5))),
    "layer_norm-2D": ((3, 5), (5,), as_function(
        lambda x, w, b: F.layer_norm(x, (5,), w, b, 1e-3),
        lambda gy, x, w: HB.layer_norm_backward(gy, x, (5,), w, 1e-3))),
    "group_norm-3D": ((2, 6, 3), (6,), as_function(
        lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5),
        lambda gy, x, w: HB.group_norm_backward(gy, x, 3, w, 1e-5))),
    "group_norm-5D": ((2, 4, 2, 1, 2), (4,), as_function(
        lambda x, w, b: F.group_norm(x, 2, w, b, 1e-3),
        lambda gy, x, w: HB.group_norm_backward(gy, x, 2, w, 1e-3))),
    "rms_norm-2dims": ((2, 3, 4), (3, 4), as_function(
        lambda x, w, b: F.rms_norm(x, (3, 4), w, 1e-6),
        lambda gy, x, w: HB.rms_norm_backward(gy, x, (3, 4), w, 1e-6))),
    "rms_norm-eps-None": ((3, 5), (5,), as_function(
        lambda x, w, b: F.rms_norm(x, (5,), w, None),
        lambda gy, x, w: HB.rms_norm_backward(gy, x, (5,), w, None))),
}


@WEIGHTED
@pytest.mark.parametrize("case", list(GRADCHECK))
def test_gradcheck(case, weighted):
    """Finite differences of torch's forward agree with the hand-written backward."""
    shape, pshape, op = GRADCHECK[case]
    x = rand(shape).requires_grad_(True)
    w, b = params(pshape, weighted)
    if w is not None:
        w.requires_grad_(True)
        b = None if case.startswith("rms") else b.requires_grad_(True)
    assert torch.autograd.gradcheck(op, (x, w, b))


# --------------------------------------------------------------------------------------
# 3. the BatchNorm input-gradient properties
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", BN_SHAPES, ids=[f"{len(s)}D" for s in BN_SHAPES])
def test_batch_norm_input_gradient_properties(shape):
    """With weight=None, dL/dx sums to zero per channel and is orthogonal to x_hat per
    channel. Orthogonality is exact only for eps=0 (sum x_hat^2 = m var/(var+eps)), so that
    part uses eps=0; x_hat is computed here from torch's mean/std, not from helpers."""
    x, gy = rand(shape), torch.randn(shape, dtype=F64)
    dims = [0] + list(range(2, x.dim()))
    for eps in (1e-5, 0.0):
        gx, gw, gb = HB.batch_norm_backward(gy, x, None, eps)
        assert gw is None and gb is None
        assert_close(gx.sum(dims), torch.zeros(shape[1], dtype=F64), atol=1e-10, rtol=0)
    mean = x.mean(dims, keepdim=True)
    xhat = (x - mean) / x.std(dims, unbiased=False, keepdim=True)
    gx = HB.batch_norm_backward(gy, x, None, 0.0)[0]
    assert_close((gx * xhat).sum(dims), torch.zeros(shape[1], dtype=F64), atol=1e-10, rtol=0)
    # and the gradient is not trivially zero
    assert gx.abs().max() > 1e-3
