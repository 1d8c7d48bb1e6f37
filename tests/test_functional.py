"""helpers.functional against torch.nn.functional, the independent reference.

Checked: signatures; forward values (ranks 2..5, float64/32/16/bfloat16, affine on/off,
several eps and momentum values, training and eval); running statistics updated in place
exactly as torch does (including instance_norm, and empty batches); accepted and rejected
dtype combinations; autograd gradients in float64; the two-pass variance; that nothing
calls torch's own normalisation kernels; and that bad input raises torch's exception class
with an informative message.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import helpers.functional as HF

FUNCS = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm"]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
DTYPE_IDS = ["f64", "f32", "f16", "bf16"]
C = 3  # channels for batch_norm / instance_norm
SHAPES = {2: (6, C), 3: (4, C, 5), 4: (2, C, 4, 3), 5: (2, C, 2, 3, 2)}


# --------------------------------------------------------------------------------------
# small builders (random data only; all expected values come from torch)
# --------------------------------------------------------------------------------------
def rand(shape, dtype=torch.float64):
    """Non-centred, non-unit data so mean and variance both matter."""
    return (torch.randn(shape, dtype=torch.float64) * 2.0 + 0.5).to(dtype)


def affine_params(shape, dtype, affine=True):
    """weight uniform in [0.5, 1.5] and a random bias, or (None, None)."""
    if not affine:
        return None, None
    w = torch.empty(shape, dtype=torch.float64).uniform_(0.5, 1.5).to(dtype)
    b = torch.randn(shape, dtype=torch.float64).to(dtype)
    return w, b


def running_stats(c, dtype):
    """Non-trivial running statistics (mean ~ N(0, 0.25), var in [0.5, 2])."""
    rm = (torch.randn(c, dtype=torch.float64) * 0.5).to(dtype)
    rv = torch.empty(c, dtype=torch.float64).uniform_(0.5, 2.0).to(dtype)
    return rm, rv


def clones(*ts):
    return tuple(None if t is None else t.clone() for t in ts)


# --------------------------------------------------------------------------------------
# 1. signatures
# --------------------------------------------------------------------------------------
def bn_tol(dtype):
    """Tolerance for BatchNorm/InstanceNorm outputs in training mode. torch's all-bfloat16 CPU
    kernel rounds its batch statistics in an order that is not documented; helpers (which
    rounds mean and 1/std to bfloat16, matching float16 exactly) agrees with it to about two
    bfloat16 ulps at unit scale, so bfloat16 gets an absolute tolerance of 2e-2."""
    return {"atol": 2e-2, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}


def _sig(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", FUNCS)
def test_signature_matches_torch(name):
    """Same parameter names, kinds, order and defaults as torch.nn.functional's."""
    assert _sig(getattr(HF, name)) == _sig(getattr(F, name))


# --------------------------------------------------------------------------------------
# 2. batch_norm
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_batch_norm_matches_torch(rank, dtype, training, affine):
    """Output and in-place running-stat update equal torch's (default tolerance of dtype)."""
    x = rand(SHAPES[rank], dtype)
    w, b = affine_params(C, dtype, affine)
    rm, rv = running_stats(C, dtype)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    expected = F.batch_norm(x, rm_t, rv_t, w, b, training, 0.1, 1e-5)
    actual = HF.batch_norm(x, rm_h, rv_h, w, b, training, 0.1, 1e-5)
    assert_close(actual, expected, **bn_tol(dtype))
    assert_close(rm_h, rm_t)
    assert_close(rv_h, rv_t)


@pytest.mark.parametrize("momentum", [0.0, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.5])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_eps_and_momentum(eps, momentum, training):
    """eps inside the sqrt and the momentum convention (unbiased var in the buffer)."""
    x = rand((5, C, 4))
    w, b = affine_params(C, torch.float64)
    rm, rv = running_stats(C, torch.float64)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    expected = F.batch_norm(x, rm_t, rv_t, w, b, training=training, momentum=momentum, eps=eps)
    actual = HF.batch_norm(x, rm_h, rv_h, w, b, training=training, momentum=momentum, eps=eps)
    assert_close(actual, expected)
    assert_close(rm_h, rm_t)
    assert_close(rv_h, rv_t)


@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_batch_norm_training_without_running_stats(rank):
    """training=True with running_mean=running_var=None: plain batch statistics."""
    x = rand(SHAPES[rank])
    w, b = affine_params(C, torch.float64)
    assert_close(HF.batch_norm(x, None, None, w, b, training=True),
                 F.batch_norm(x, None, None, w, b, training=True))


def test_batch_norm_repeated_updates():
    """Several training calls in a row accumulate the buffers as torch does."""
    rm, rv = running_stats(C, torch.float64)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    for step in range(4):
        x = rand((8, C, 3)) + step
        F.batch_norm(x, rm_t, rv_t, training=True, momentum=0.3)
        HF.batch_norm(x, rm_h, rv_h, training=True, momentum=0.3)
    assert_close(rm_h, rm_t)
    assert_close(rv_h, rv_t)


# --------------------------------------------------------------------------------------
# 3. instance_norm
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("mode", ["input_stats", "input_stats+running", "running"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_instance_norm_matches_torch(rank, dtype, mode, affine):
    """Per-(sample, channel) statistics; buffers updated with the batch-averaged stats."""
    x = rand(SHAPES[rank], dtype)
    w, b = affine_params(C, dtype, affine)
    rm, rv = running_stats(C, dtype) if mode != "input_stats" else (None, None)
    use_input_stats = mode != "running"
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    expected = F.instance_norm(x, rm_t, rv_t, w, b, use_input_stats, 0.1, 1e-5)
    actual = HF.instance_norm(x, rm_h, rv_h, w, b, use_input_stats, 0.1, 1e-5)
    assert_close(actual, expected, **bn_tol(dtype))
    if rm is not None:
        assert_close(rm_h, rm_t)
        assert_close(rv_h, rv_t)


def test_instance_norm_rank2_with_running_stats():
    """An (N, C) input is valid when the running statistics normalise it."""
    x = rand((4, C))
    rm, rv = running_stats(C, torch.float64)
    w, b = affine_params(C, torch.float64)
    assert_close(HF.instance_norm(x, rm, rv, w, b, use_input_stats=False),
                 F.instance_norm(x, rm, rv, w, b, use_input_stats=False))


@pytest.mark.parametrize("momentum", [0.0, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.5])
def test_instance_norm_eps_and_momentum(eps, momentum):
    """eps and momentum, including the unbiased per-instance variance in the buffer."""
    x = rand((3, C, 6))
    w, b = affine_params(C, torch.float64)
    rm, rv = running_stats(C, torch.float64)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    expected = F.instance_norm(x, rm_t, rv_t, w, b, True, momentum, eps)
    actual = HF.instance_norm(x, rm_h, rv_h, w, b, True, momentum, eps)
    assert_close(actual, expected)
    assert_close(rm_h, rm_t)
    assert_close(rv_h, rv_t)


# --------------------------------------------------------------------------------------
# 4. layer_norm, rms_norm, group_norm
# --------------------------------------------------------------------------------------
LN_CASES = [
    ((5,), (5,)),
    ((4, 5), (5,)),
    ((4, 5), (4, 5)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 4)),
    ((2, 3, 4, 5), (3, 4, 5)),
    ((2, 3, 2, 3, 2), (2, 3, 2)),
]
LN_IDS = [f"{list(s)}/{list(n)}" for s, n in LN_CASES]


@pytest.mark.parametrize("eps", [1e-5, 0.1])
@pytest.mark.parametrize("params", ["none", "weight", "weight+bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape,nshape", LN_CASES, ids=LN_IDS)
def test_layer_norm_matches_torch(shape, nshape, dtype, params, eps):
    """Statistics over the trailing normalized_shape; per-element weight and bias."""
    x = rand(shape, dtype)
    w, b = affine_params(nshape, dtype, params != "none")
    if params == "weight":
        b = None
    assert_close(HF.layer_norm(x, list(nshape), w, b, eps), F.layer_norm(x, list(nshape), w, b, eps))


@pytest.mark.parametrize("nshape", [(4,), [4], torch.Size([4])], ids=["tuple", "list", "Size"])
def test_layer_and_rms_norm_accept_shape_sequences(nshape):
    """normalized_shape as a tuple, a list or a torch.Size, as torch accepts."""
    x = rand((3, 4))
    assert_close(HF.layer_norm(x, nshape), F.layer_norm(x, nshape))
    assert_close(HF.rms_norm(x, nshape), F.rms_norm(x, nshape))


@pytest.mark.parametrize("eps", [None, 1e-6, 0.1], ids=["eps=None", "eps=1e-6", "eps=0.1"])
@pytest.mark.parametrize("weighted", [True, False], ids=["weight", "no-weight"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape,nshape", LN_CASES, ids=LN_IDS)
def test_rms_norm_matches_torch(shape, nshape, dtype, weighted, eps):
    """RMS over the trailing dims, eps inside the sqrt, eps=None rule of torch."""
    x = rand(shape, dtype)
    w = affine_params(nshape, dtype)[0] if weighted else None
    assert_close(HF.rms_norm(x, list(nshape), w, eps), F.rms_norm(x, list(nshape), w, eps))


def test_rms_norm_eps_none_is_machine_epsilon():
    """eps=None must be finfo(compute dtype).eps: visible on an all-zero-but-tiny input."""
    for dtype in (torch.float32, torch.float64):
        x = torch.full((2, 4), 1e-5, dtype=dtype)  # x^2 ~ 1e-10, comparable to float32 eps
        assert_close(HF.rms_norm(x, (4,)), F.rms_norm(x, (4,)))


GN_SHAPES = [(4, 6), (2, 6, 5), (2, 6, 3, 2), (2, 6, 2, 2, 2)]


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("groups", [1, 2, 3, 6])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", GN_SHAPES, ids=[f"{len(s)}D" for s in GN_SHAPES])
def test_group_norm_matches_torch(shape, dtype, groups, affine):
    """Contiguous groups of C/G channels; per-channel weight and bias."""
    x = rand(shape, dtype)
    w, b = affine_params(shape[1], dtype, affine)
    expected = F.group_norm(x, groups, w, b)
    if x[0].numel() == groups:
        # One element per group: the exact output is the bias. torch's float32 kernel
        # (x*scale + shift with scale ~ 1/sqrt(eps)) is off by ~2e-5 there, beyond float32's
        # default tolerance, so the reference is torch in float64, rounded to the dtype.
        expected = F.group_norm(x.double(), groups, *(None if t is None else t.double()
                                                      for t in (w, b))).to(dtype)
    assert_close(HF.group_norm(x, groups, w, b), expected)


@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.5])
def test_group_norm_eps(eps):
    x = rand((2, 6, 4))
    w, b = affine_params(6, torch.float64)
    assert_close(HF.group_norm(x, 3, w, b, eps), F.group_norm(x, 3, w, b, eps))


# --------------------------------------------------------------------------------------
# 5. empty batches and zero-size dims
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_batch_norm_empty_batch(rank, training):
    """N=0: empty output, buffers left untouched (as torch leaves them)."""
    x = rand((0,) + SHAPES[rank][1:])
    w, b = affine_params(C, torch.float64)
    rm, rv = running_stats(C, torch.float64)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    assert_close(HF.batch_norm(x, rm_h, rv_h, w, b, training),
                 F.batch_norm(x, rm_t, rv_t, w, b, training))
    assert_close(rm_h, rm_t, equal_nan=True)
    assert_close(rv_h, rv_t, equal_nan=True)


@pytest.mark.parametrize("momentum", [0.0, 0.1])
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_instance_norm_empty_batch_running_stats(rank, momentum):
    """N=0 with running stats: torch's batch average over zero samples gives NaN buffers."""
    x = rand((0,) + SHAPES[rank][1:])
    rm, rv = running_stats(C, torch.float64)
    rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
    assert_close(HF.instance_norm(x, rm_h, rv_h, momentum=momentum),
                 F.instance_norm(x, rm_t, rv_t, momentum=momentum))
    assert_close(rm_h, rm_t, equal_nan=True)
    assert_close(rv_h, rv_t, equal_nan=True)


@pytest.mark.parametrize("shape", [(2, C, 0), (2, C, 0, 3), (2, C, 2, 0, 2)],
                         ids=["L=0", "H=0", "H=0(5D)"])
def test_zero_spatial_size(shape):
    """Zero-size spatial dims: torch returns empty outputs and leaves the buffers alone."""
    x = rand(shape)
    rm, rv = running_stats(C, torch.float64)
    for fn in ("batch_norm", "instance_norm"):
        rm_t, rv_t, rm_h, rv_h = clones(rm, rv, rm, rv)
        if fn == "batch_norm":
            expected = F.batch_norm(x, rm_t, rv_t, training=True)
            actual = HF.batch_norm(x, rm_h, rv_h, training=True)
        else:
            expected = F.instance_norm(x, rm_t, rv_t)
            actual = HF.instance_norm(x, rm_h, rv_h)
        assert_close(actual, expected)
        assert_close(rm_h, rm_t, equal_nan=True, msg=f"{fn} running_mean")
        assert_close(rv_h, rv_t, equal_nan=True, msg=f"{fn} running_var")


@pytest.mark.parametrize("shape", [(0, 6), (0, 6, 4), (0, 6, 2, 2), (0, 6, 2, 2, 2)],
                         ids=["2D", "3D", "4D", "5D"])
def test_empty_batch_layer_group_rms(shape):
    """N=0 for the per-sample norms: empty output of the right shape and dtype."""
    x = rand(shape)
    nshape = list(shape[1:])
    w, b = affine_params(nshape, torch.float64)
    assert_close(HF.layer_norm(x, nshape, w, b), F.layer_norm(x, nshape, w, b))
    assert_close(HF.rms_norm(x, nshape, w), F.rms_norm(x, nshape, w))
    gw, gb = affine_params(6, torch.float64)
    assert_close(HF.group_norm(x, 3, gw, gb), F.group_norm(x, 3, gw, gb))


# --------------------------------------------------------------------------------------
# 6. dtype combinations: whatever torch accepts must work, whatever it rejects must raise
# --------------------------------------------------------------------------------------
def _call(M, name, x, p, s):
    """Call ``M.name`` with weight/bias of dtype p and running stats of dtype s."""
    c = x.shape[1]
    if name in ("batch_norm", "instance_norm"):
        w, b = (torch.linspace(0.5, 1.5, c, dtype=torch.float64).to(p),
                torch.linspace(-1, 1, c, dtype=torch.float64).to(p))
        rm = torch.linspace(-0.2, 0.2, c, dtype=torch.float64).to(s)
        rv = torch.linspace(0.5, 2.0, c, dtype=torch.float64).to(s)
        out = getattr(M, name)(x, rm, rv, w, b, True, 0.1, 1e-5)
        return out, rm, rv
    d = x.shape[-1]
    w = torch.linspace(0.5, 1.5, d, dtype=torch.float64).to(p)
    b = torch.linspace(-1, 1, d, dtype=torch.float64).to(p)
    if name == "layer_norm":
        return getattr(M, name)(x, (d,), w, b), None, None
    if name == "rms_norm":
        return getattr(M, name)(x, (d,), w), None, None
    gw = torch.linspace(0.5, 1.5, c, dtype=torch.float64).to(p)
    gb = torch.linspace(-1, 1, c, dtype=torch.float64).to(p)
    return getattr(M, name)(x, 2, gw, gb), None, None


def _combo_cases():
    cases = []
    for name in FUNCS:
        stats = DTYPES if name in ("batch_norm", "instance_norm") else [None]
        for xi, xd in enumerate(DTYPES):
            for pi, pd in enumerate(DTYPES):
                for sd in stats:
                    sid = "" if sd is None else f"-stats_{DTYPE_IDS[DTYPES.index(sd)]}"
                    cases.append(pytest.param(
                        name, xd, pd, sd, id=f"{name}-x_{DTYPE_IDS[xi]}-p_{DTYPE_IDS[pi]}{sid}"))
    return cases


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # torch's own
@pytest.mark.parametrize("name,xd,pd,sd", _combo_cases())
def test_dtype_combinations_follow_torch(name, xd, pd, sd):
    """Mixed input/parameter/buffer dtypes: same acceptance as torch, same results."""
    x = rand((4, 4, 6), xd)
    try:
        expected, rm_t, rv_t = _call(F, name, x, pd, sd)
    except Exception as e:  # torch rejects: helpers must reject with the same class
        with pytest.raises(Exception) as info:
            _call(HF, name, x, pd, sd)
        assert type(info.value) is type(e), (type(info.value), info.value, type(e), e)
        return
    actual, rm_h, rv_h = _call(HF, name, x, pd, sd)
    assert_close(actual, expected, **bn_tol(xd))
    if rm_t is not None:
        # With a float16/bfloat16 input, torch's instance_norm rounds its running-statistics
        # update through half precision in an undocumented order; helpers computes the batch
        # statistics in float32. They agree to half precision.
        tol = {torch.float16: {"atol": 2e-3, "rtol": 2e-3},
               torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2}}.get(xd, {})
        assert_close(rm_h, rm_t, **tol)
        assert_close(rv_h, rv_t, **tol)


# --------------------------------------------------------------------------------------
# 7. gradients through autograd (float64)
# --------------------------------------------------------------------------------------
def _stats(c):
    return (torch.linspace(-0.5, 0.5, c, dtype=torch.float64),
            torch.linspace(0.5, 2.0, c, dtype=torch.float64))


GRAD_CASES = {
    # id: (input shape, parameter shape, call(M, x, w, b))
    "bn-train-2D": ((6, C), (C,), lambda M, x, w, b: M.batch_norm(x, None, None, w, b, True)),
    "bn-train-3D": ((4, C, 5), (C,), lambda M, x, w, b: M.batch_norm(x, None, None, w, b, True)),
    "bn-train-4D": ((2, C, 3, 2), (C,), lambda M, x, w, b: M.batch_norm(x, None, None, w, b, True)),
    "bn-train-5D": ((2, C, 2, 2, 2), (C,), lambda M, x, w, b: M.batch_norm(x, None, None, w, b, True)),
    "bn-train-stats": ((4, C, 5), (C,),
                       lambda M, x, w, b: M.batch_norm(x, *_stats(C), w, b, True, 0.3, 1e-3)),
    "bn-eval": ((4, C, 5), (C,), lambda M, x, w, b: M.batch_norm(x, *_stats(C), w, b, False)),
    "in-3D": ((3, C, 5), (C,), lambda M, x, w, b: M.instance_norm(x, None, None, w, b)),
    "in-4D-stats": ((2, C, 3, 2), (C,), lambda M, x, w, b: M.instance_norm(x, *_stats(C), w, b)),
    "in-eval": ((3, C, 5), (C,),
                lambda M, x, w, b: M.instance_norm(x, *_stats(C), w, b, use_input_stats=False)),
    "ln-2D": ((4, 5), (5,), lambda M, x, w, b: M.layer_norm(x, (5,), w, b)),
    "ln-3D-2dims": ((2, 3, 4), (3, 4), lambda M, x, w, b: M.layer_norm(x, (3, 4), w, b, 1e-3)),
    "ln-5D": ((2, 2, 2, 3, 2), (2, 3, 2), lambda M, x, w, b: M.layer_norm(x, (2, 3, 2), w, b)),
    "gn-2D": ((4, 6), (6,), lambda M, x, w, b: M.group_norm(x, 3, w, b)),
    "gn-3D": ((2, 6, 5), (6,), lambda M, x, w, b: M.group_norm(x, 2, w, b)),
    "gn-4D": ((2, 6, 2, 3), (6,), lambda M, x, w, b: M.group_norm(x, 6, w, b, 1e-3)),
    "gn-5D": ((2, 4, 2, 2, 2), (4,), lambda M, x, w, b: M.group_norm(x, 1, w, b)),
    "rms-2D": ((4, 5), (5,), lambda M, x, w, b: M.rms_norm(x, (5,), w)),
    "rms-3D-2dims": ((2, 3, 4), (3, 4), lambda M, x, w, b: M.rms_norm(x, (3, 4), w, 1e-3)),
    "rms-4D": ((2, 2, 3, 2), (2, 3, 2), lambda M, x, w, b: M.rms_norm(x, (2, 3, 2), w)),
}


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients_match_torch(case, affine):
    """d(output)/d(input, weight, bias) through autograd equals torch's, in float64."""
    shape, pshape, call = GRAD_CASES[case]
    x = rand(shape)
    w, b = affine_params(pshape, torch.float64, affine)
    gy = torch.randn(shape, dtype=torch.float64)

    def grads(M):
        xx, ww, bb = (None if t is None else t.clone().requires_grad_(True) for t in (x, w, b))
        out = call(M, xx, ww, bb)
        leaves = [t for t in (xx, ww, bb) if t is not None]
        return torch.autograd.grad(out, leaves, gy, allow_unused=True)

    expected, actual = grads(F), grads(HF)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if e is None:  # rms_norm has no bias: torch gives no gradient for it either
            assert a is None
        else:
            assert_close(a, e)


# --------------------------------------------------------------------------------------
# 8. two-pass variance
# --------------------------------------------------------------------------------------
# float32 spacing near 1e4 is ~1e-3, so x - mean carries ~1e-3 absolute error in any
# float32 algorithm (torch's included): outputs agree to a few 1e-3, not to float32 eps.
TWO_PASS_ATOL = 5e-3


def test_two_pass_variance_float32_large_offset():
    """x = 1e4 + N(0,1) in float32: E[x^2]-E[x]^2 would cancel to ~0; two passes give ~1."""
    x = (1e4 + torch.randn(8, 256, dtype=torch.float64)).float()
    y = HF.layer_norm(x, (256,))
    std = y.double().std(dim=-1, unbiased=False)
    assert_close(std, torch.ones(8, dtype=torch.float64), atol=1e-2, rtol=0)
    assert_close(y, F.layer_norm(x, (256,)), atol=TWO_PASS_ATOL, rtol=0)

    # the other mean-and-variance norms share the same two-pass moments
    x3 = x.reshape(8, 4, 64)
    assert_close(HF.group_norm(x3, 2), F.group_norm(x3, 2), atol=TWO_PASS_ATOL, rtol=0)
    assert_close(HF.instance_norm(x3), F.instance_norm(x3), atol=TWO_PASS_ATOL, rtol=0)
    xb = x.reshape(32, 4, 16)
    assert_close(HF.batch_norm(xb, None, None, training=True),
                 F.batch_norm(xb, None, None, training=True), atol=TWO_PASS_ATOL, rtol=0)
    # and the unbiased variance stored in the running buffer is ~1, not ~0
    rm, rv = torch.zeros(4), torch.ones(4)
    rm_t, rv_t = torch.zeros(4), torch.ones(4)
    HF.batch_norm(xb, rm, rv, training=True, momentum=1.0)
    F.batch_norm(xb, rm_t, rv_t, training=True, momentum=1.0)
    assert_close(rv, rv_t, atol=1e-2, rtol=0)
    assert (rv - 1).abs().max() < 0.2


# --------------------------------------------------------------------------------------
# 9. no dependence on torch's own normalisation functions
# --------------------------------------------------------------------------------------
NO_KERNEL_CASES = {
    "batch_norm": ((4, C, 5), (C,), lambda M, x, w, b: M.batch_norm(x, *_stats(C), w, b, True)),
    "batch_norm-eval": ((4, C, 5), (C,), lambda M, x, w, b: M.batch_norm(x, *_stats(C), w, b)),
    "instance_norm": ((2, C, 5), (C,), lambda M, x, w, b: M.instance_norm(x, *_stats(C), w, b)),
    "layer_norm": ((2, 3, 4), (3, 4), lambda M, x, w, b: M.layer_norm(x, (3, 4), w, b)),
    "group_norm": ((2, 6, 3), (6,), lambda M, x, w, b: M.group_norm(x, 3, w, b)),
    "rms_norm": ((2, 3, 4), (4,), lambda M, x, w, b: M.rms_norm(x, (4,), w)),
}


def test_functional_works_without_torch_norm_kernels(no_torch_norms):
    """Every helpers.functional function, forward and backward, with torch's kernels gone."""
    data, refs = {}, {}
    for name, (shape, pshape, call) in NO_KERNEL_CASES.items():  # references first
        x = rand(shape).requires_grad_(True)
        w, b = (t.requires_grad_(True) for t in affine_params(pshape, torch.float64))
        gy = torch.randn(shape, dtype=torch.float64)
        out = call(F, x, w, b)
        leaves = (x, w) if name == "rms_norm" else (x, w, b)
        refs[name] = (out.detach(), torch.autograd.grad(out, leaves, gy))
        data[name] = (x, w, b, gy, leaves)

    with no_torch_norms():
        with pytest.raises(AssertionError):  # the patch is active
            F.layer_norm(torch.ones(2, 3), (3,))
        for name, (shape, pshape, call) in NO_KERNEL_CASES.items():
            x, w, b, gy, leaves = data[name]
            out = call(HF, x, w, b)
            grads = torch.autograd.grad(out, leaves, gy)
            assert_close(out.detach(), refs[name][0])
            for g, r in zip(grads, refs[name][1]):
                assert_close(g, r)


# --------------------------------------------------------------------------------------
# 10. bad input: same exception class as torch, informative message
# --------------------------------------------------------------------------------------
def _x():
    return torch.randn(4, C, 5)


ERROR_CASES = {
    # id: (call(M), strings helpers' message must contain)
    "gn-groups-not-dividing": (lambda M: M.group_norm(torch.randn(2, 6, 3), 4), ["6", "4"]),
    "gn-groups-not-dividing-4D": (lambda M: M.group_norm(torch.randn(2, 5, 2, 2), 2), ["5", "2"]),
    "gn-rank-1": (lambda M: M.group_norm(torch.randn(4), 2), ["1"]),
    "gn-weight-size": (lambda M: M.group_norm(_x(), 3, torch.ones(4)), ["[4]", "[4, 3, 5]"]),
    "gn-one-value-per-group": (lambda M: M.group_norm(torch.randn(1, 4), 4), ["[1, 4]"]),
    "bn-running-mean-size-train": (
        lambda M: M.batch_norm(_x(), torch.zeros(4), torch.ones(4), training=True), ["3", "4"]),
    "bn-running-var-size-eval": (
        lambda M: M.batch_norm(_x(), torch.zeros(3), torch.ones(5)), ["3", "5"]),
    "bn-weight-size": (
        lambda M: M.batch_norm(_x(), None, None, torch.ones(4), training=True), ["3", "4"]),
    "bn-bias-size": (
        lambda M: M.batch_norm(_x(), None, None, None, torch.ones(2), training=True), ["3", "2"]),
    "bn-eval-running-mean-none": (lambda M: M.batch_norm(_x(), None, None), ["running_mean"]),
    "bn-one-value-per-channel-2D": (
        lambda M: M.batch_norm(torch.randn(1, C), None, None, training=True), ["[1, 3]"]),
    "bn-one-value-per-channel-4D": (
        lambda M: M.batch_norm(torch.randn(1, C, 1, 1), None, None, training=True),
        ["[1, 3, 1, 1]"]),
    "bn-eps-zero-train": (lambda M: M.batch_norm(_x(), None, None, training=True, eps=0.0), ["0.0"]),
    "bn-eps-negative-eval": (
        lambda M: M.batch_norm(_x(), torch.zeros(C), torch.ones(C), eps=-1.0), ["-1.0"]),
    "bn-momentum-none": (
        lambda M: M.batch_norm(_x(), torch.zeros(C), torch.ones(C), training=True, momentum=None),
        ["momentum"]),
    "bn-only-running-mean": (
        lambda M: M.batch_norm(_x(), torch.zeros(C), None, training=True),
        ["running_mean", "running_var"]),
    "bn-only-running-var-eval": (
        lambda M: M.batch_norm(_x(), None, torch.ones(C)), ["running_mean", "running_var"]),
    "bn-rank-1-train": (
        lambda M: M.batch_norm(torch.randn(1), None, None, training=True), ["[1]"]),
    "in-running-stats-size": (
        lambda M: M.instance_norm(_x(), torch.zeros(4), torch.ones(4)), ["3", "4"]),
    "in-weight-size": (lambda M: M.instance_norm(_x(), weight=torch.ones(2)), ["3", "2"]),
    "in-one-spatial-element": (lambda M: M.instance_norm(torch.randn(2, C, 1)), ["[2, 3, 1]"]),
    "in-one-spatial-element-4D": (
        lambda M: M.instance_norm(torch.randn(2, C, 1, 1)), ["[2, 3, 1, 1]"]),
    "in-eval-without-stats": (
        lambda M: M.instance_norm(_x(), use_input_stats=False), ["running_mean"]),
    "in-only-running-mean": (
        lambda M: M.instance_norm(_x(), torch.zeros(C), None), ["running_mean", "running_var"]),
    "in-rank-1": (lambda M: M.instance_norm(torch.randn(5)), ["[5]"]),
    "ln-shape-mismatch": (lambda M: M.layer_norm(_x(), [4]), ["[4]", "[4, 3, 5]"]),
    "ln-shape-too-long": (lambda M: M.layer_norm(torch.randn(5), [2, 5]), ["[2, 5]", "[5]"]),
    "ln-weight-shape": (lambda M: M.layer_norm(_x(), [5], torch.ones(4)), ["[4]", "[5]"]),
    "ln-bias-shape": (lambda M: M.layer_norm(_x(), [5], None, torch.ones(3, 5)), ["[3, 5]", "[5]"]),
    "ln-empty-shape": (lambda M: M.layer_norm(_x(), []), ["normalized_shape"]),
    "ln-int-shape": (lambda M: M.layer_norm(_x(), 5), ["normalized_shape"]),
    "rms-shape-mismatch": (lambda M: M.rms_norm(_x(), [3]), ["[3]", "[4, 3, 5]"]),
    "rms-weight-shape": (lambda M: M.rms_norm(_x(), [5], torch.ones(6)), ["[6]", "[5]"]),
    "rms-rank-too-low": (lambda M: M.rms_norm(torch.randn(4), [3, 4]), ["[3, 4]", "[4]"]),
    "rms-empty-shape": (lambda M: M.rms_norm(_x(), []), ["normalized_shape"]),
    "rms-int-shape": (lambda M: M.rms_norm(_x(), 5), ["normalized_shape"]),
    "bn-integer-input": (
        lambda M: M.batch_norm(torch.ones(4, C, dtype=torch.long), None, None, training=True),
        ["batch_norm"]),
    "in-integer-input": (lambda M: M.instance_norm(torch.ones(4, C, 5, dtype=torch.long)), ["norm"]),
    "ln-integer-input": (lambda M: M.layer_norm(torch.ones(4, C, dtype=torch.long), [C]), ["norm"]),
    "gn-integer-input": (lambda M: M.group_norm(torch.ones(4, C, 2, dtype=torch.long), 3), ["norm"]),
    "rms-integer-input": (lambda M: M.rms_norm(torch.ones(4, C, dtype=torch.long), [C]), ["norm"]),
    "ln-float64-weight-float32-input": (
        lambda M: M.layer_norm(_x(), [5], torch.ones(5, dtype=torch.float64)), ["float64"]),
    "bn-float64-stats-float32-input": (
        lambda M: M.batch_norm(_x(), torch.zeros(C, dtype=torch.float64),
                               torch.ones(C, dtype=torch.float64), training=True), ["float64"]),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_bad_input_raises_like_torch(case, same_error):
    """Same exception class as torch; the message names the offending sizes/values."""
    call, must_contain = ERROR_CASES[case]
    torch.manual_seed(0)
    same_error(lambda: call(F), lambda: call(HF), *must_contain)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("stats", ["empty", "none"])
def test_batch_norm_empty_1d_input_as_torch(training, stats):
    """torch accepts an empty 1-D input with empty (or no) running statistics."""
    x = torch.empty(0, dtype=torch.float64)
    rm, rv = (torch.empty(0), torch.empty(0)) if stats == "empty" else (None, None)
    ref = F.batch_norm(x, rm, rv, training=training)
    out = HF.batch_norm(x, rm, rv, training=training)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    with pytest.raises((RuntimeError, IndexError)):  # a non-empty 1-D input is refused by both
        F.batch_norm(torch.randn(5), torch.empty(0), torch.empty(0), training=training)
    with pytest.raises(RuntimeError):
        HF.batch_norm(torch.randn(5), torch.empty(0), torch.empty(0), training=training)
