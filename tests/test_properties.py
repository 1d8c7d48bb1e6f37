"""Property-based tests (hypothesis): helpers.functional and helpers.norms against torch on
generated inputs.

Generated: shapes of 1 to 5 dims where the op allows them, with size-1 and empty dims; float64,
float32, float16 and bfloat16 (parameters in the input's dtype, or float32 beside a half-precision
input); contiguous, non-contiguous (strided, transposed), expanded (stride-0, hence constant
rows) and channels_last layouts; data of unit scale, with an offset, wide and narrow; every flag
(affine, weight and bias separately, track_running_stats, momentum including None, eps including
0 where torch allows it, training, use_input_stats).

Checked against torch (never against helpers' own output):
- the forward: when torch raises, helpers raises the same exception class; otherwise the same
  shape and dtype, and values equal within the dtype's tolerance, or, where torch is itself off
  (constant groups of BatchNorm/InstanceNorm, half-precision rounding), at most twice as far as
  torch from torch's float64 result of the same input;
- running statistics updated in place, several training steps then eval, for every module,
  and state_dicts loaded both ways with strict=True;
- gradients (float64 autograd through helpers' elementary operations against torch's);
- bad arguments: both raise, with the same exception class.

The example budget is the settings profile "course" (deadline None, derandomize=True, no example
database): the same examples on every run, under a minute with ``-n 2`` on 2 cores. More examples:
``HYPOTHESIS_PROFILE=thorough`` (10 times the budget, still derandomised).
"""

from __future__ import annotations

import math
import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

import helpers.functional as HF
import helpers.norms as HN

settings.register_profile(
    "course", max_examples=40, deadline=None, derandomize=True, database=None,
    # the autouse seeding fixture of tests/conftest.py is function-scoped; every example
    # here draws its data from its own seeded generator instead
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large])
settings.register_profile("thorough", parent=settings.get_profile("course"), max_examples=400)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))


def budget(weight: float):
    """This test's share of the loaded profile's example budget."""
    return settings(max_examples=max(1, round(settings.default.max_examples * weight)))


F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
DTYPES = [F64, F32, F16, BF16]
HALF = (F16, BF16)
# outputs of unit scale; half precision: a few units in the last place
TOL = {F64: {"rtol": 1e-7, "atol": 1e-7}, F32: {"rtol": 1.3e-6, "atol": 1e-5},
       F16: {"rtol": 1e-3, "atol": 2e-3}, BF16: {"rtol": 1.6e-2, "atol": 2e-2}}
KINDS = {"unit": (1.0, 0.0), "offset": (0.5, 3.0), "wide": (10.0, -2.0), "narrow": (1e-2, 1.0)}


# --------------------------------------------------------------------------------------
# strategies and builders
# --------------------------------------------------------------------------------------
size = st.sampled_from([2, 3, 1, 4, 0])  # size-1 and empty dims included
seeds = st.integers(0, 2**31 - 1)


@st.composite
def inputs(draw, rank: int, channels: int | None = None, sizes=size):
    """(shape, dtype, layout, kind, expand-mask, seed) of one input; dim 1 is ``channels``
    when given."""
    shape = [draw(sizes) for _ in range(rank)]
    if channels is not None and rank >= 2:
        shape[1] = channels
    layouts = ["contiguous", "strided", "expand"] + (["transposed"] if rank >= 2 else []) + (
        ["channels_last"] if rank in (4, 5) else [])
    layout = draw(st.sampled_from(layouts))
    mask = [draw(st.booleans()) for _ in range(rank)] if layout == "expand" else None
    return shape, draw(st.sampled_from(DTYPES)), layout, draw(st.sampled_from(list(KINDS))), \
        mask, draw(seeds)


def build(spec, dtype=None) -> torch.Tensor:
    """The tensor a spec of :func:`inputs` describes (values drawn in float64, then rounded
    to the dtype, so torch and helpers see the same numbers)."""
    shape, spec_dtype, layout, kind, mask, seed = spec
    dtype = dtype or spec_dtype
    g = torch.Generator().manual_seed(seed)
    scale, offset = KINDS[kind]
    if layout == "expand":
        small = [1 if m else s for s, m in zip(shape, mask)]
        return (torch.randn(small, generator=g, dtype=F64) * scale + offset).to(dtype).expand(shape)
    data = (torch.randn(shape, generator=g, dtype=F64) * scale + offset).to(dtype)
    if layout == "strided" and data.dim() >= 1:
        buf = torch.zeros(shape[:-1] + [2 * shape[-1]], dtype=dtype)
        buf[..., ::2] = data
        return buf[..., ::2]
    if layout == "transposed":
        return data.transpose(0, -1).contiguous().transpose(0, -1)
    if layout == "channels_last":
        fmt = torch.channels_last if data.dim() == 4 else torch.channels_last_3d
        return data.contiguous(memory_format=fmt)
    return data


def param(seed: int, shape, dtype, kind: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "weight":  # both signs, away from 0
        t = torch.rand(shape, generator=g, dtype=F64) + 0.5
        t = t * torch.where(torch.rand(shape, generator=g, dtype=F64) < 0.2, -1.0, 1.0)
    elif kind == "var":
        t = torch.rand(shape, generator=g, dtype=F64) * 1.5 + 0.5
    else:
        t = torch.randn(shape, generator=g, dtype=F64) * 0.5
    return t.to(dtype)


def outcome(fn):
    """``fn()``'s value, or the exception it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as e:  # noqa: BLE001 - compared by class
        return e


def same_outcome(expected, actual) -> bool:
    """Both raised with the same exception class (True), or both returned (False). Where torch
    fails with an IndexError (an internal index out of range, e.g. ``input.size(1)`` of a 1-D
    input, not a check of its own), helpers' deliberate check may raise another class. An
    integer input is refused by torch with NotImplementedError or, on a non-contiguous layout,
    with a RuntimeError from ``mean()``; helpers refuses it with NotImplementedError on every
    layout."""
    if isinstance(expected, Exception) or isinstance(actual, Exception):
        assert isinstance(expected, Exception), f"helpers raised {actual!r} where torch returned"
        assert isinstance(actual, Exception), f"helpers returned where torch raised {expected!r}"
        integer_input = (type(actual) is NotImplementedError and "floating-point input" in str(actual)
                         and type(expected) in (NotImplementedError, RuntimeError))
        assert (type(actual) is type(expected) or type(expected) is IndexError
                or integer_input), (expected, actual)
        return True
    return False


def check_close(actual, expected, reference, dtype, what="output"):
    """``actual`` (helpers) equals ``expected`` (torch) within the dtype's tolerance; where not,
    it is at most twice as far as torch from ``reference`` (torch in float64 on the same
    input), and it has torch's NaNs and infinities."""
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    try:
        assert_close(actual, expected, equal_nan=True, check_stride=False, **TOL[dtype])
        return
    except AssertionError:
        pass
    a, e, r = actual.double(), expected.double(), reference.double()
    finite = e.isfinite()
    assert torch.equal(a[~finite].nan_to_num(0, 1, -1), e[~finite].nan_to_num(0, 1, -1)), \
        f"{what}: non-finite values differ from torch's"
    if not finite.any():
        return
    err_h = (a - r)[finite].abs().nan_to_num(math.inf).max().item()
    err_t = (e - r)[finite].abs().nan_to_num(math.inf).max().item()
    assert err_h <= 2 * err_t + 1e-12, (
        f"{what}: helpers differs from torch by {(a - e)[finite].abs().max().item():.3g} and is "
        f"{err_h:.3g} from the float64 result, where torch is {err_t:.3g} from it")


def as_float64(args, kwargs):
    """The reference's arguments: every tensor as a float64 copy."""
    return [a.double() if isinstance(a, torch.Tensor) else a for a in args], kwargs


def coarser(*dtypes):
    """The least precise of ``dtypes`` (its tolerance applies)."""
    return max(dtypes, key=DTYPES.index)


def param_dtype(draw, dtype):
    """The dtype of parameters and buffers: the input's, or float32 beside a half input."""
    return F32 if dtype in HALF and draw(st.booleans()) else dtype


# --------------------------------------------------------------------------------------
# the functional norms
# --------------------------------------------------------------------------------------
@st.composite
def functional_calls(draw, name: str, float64_only: bool = False):
    """A call of ``name``: ``(make() -> (args, kwargs), input dtype, running statistics given,
    input spec)``. ``make`` builds fresh tensors on every call so that in-place updates of one
    library do not reach the other; :func:`as_float64` turns its result into the reference's
    arguments."""
    if name == "layer_norm" or name == "rms_norm":
        rank = draw(st.integers(1, 5))
        spec = draw(inputs(rank))
    elif name == "group_norm":
        rank = draw(st.integers(2, 5))
        groups = draw(st.sampled_from([1, 2, 3]))
        spec = draw(inputs(rank, channels=groups * draw(st.sampled_from([1, 2]))))
    else:
        rank = draw(st.integers(2, 5))
        spec = draw(inputs(rank, channels=draw(st.sampled_from([1, 2, 3]))))
    dtype = F64 if float64_only else spec[1]
    spec = (spec[0], dtype) + spec[2:]
    pdt = param_dtype(draw, dtype)
    shape = spec[0]
    pseed = draw(seeds)
    with_weight, with_bias = draw(st.booleans()), draw(st.booleans())
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1, 1.0, 0.0]))

    if name in ("layer_norm", "rms_norm"):
        k = draw(st.integers(1, len(shape)))
        nshape = tuple(shape[len(shape) - k:])
        nshape_arg = draw(st.sampled_from([nshape, list(nshape), torch.Size(nshape)]))
        if name == "rms_norm":
            eps = draw(st.sampled_from([None, 1e-6, 1e-3, 0.1, 0.0]))

        def make():
            w = param(pseed, nshape, pdt, "weight") if with_weight else None
            if name == "rms_norm":
                return (nshape_arg, w), {"eps": eps}
            b = param(pseed + 1, nshape, pdt, "bias") if with_bias else None
            return (nshape_arg, w, b), {"eps": eps}
        return make, dtype, None, spec

    c = shape[1]
    if name == "group_norm":
        def make():
            w = param(pseed, (c,), pdt, "weight") if with_weight else None
            b = param(pseed + 1, (c,), pdt, "bias") if with_bias else None
            return (groups, w, b), {"eps": eps}
        return make, dtype, None, spec

    training = draw(st.booleans())
    stats = draw(st.booleans()) or not training
    momentum = draw(st.sampled_from([0.1, 0.0, 0.5, 1.0]))
    if name == "batch_norm" and training:
        eps = draw(st.sampled_from([1e-5, 1e-3, 0.1, 1.0]))  # torch: positive when training
    # instance_norm's running statistics may have any floating dtype
    sdt = draw(st.sampled_from([pdt, F32, F64])) if name == "instance_norm" else pdt

    def make():
        rm = param(pseed + 2, (c,), sdt, "bias") if stats else None
        rv = param(pseed + 3, (c,), sdt, "var") if stats else None
        w = param(pseed, (c,), pdt, "weight") if with_weight else None
        b = param(pseed + 1, (c,), pdt, "bias") if with_bias else None
        if name == "batch_norm":
            return (rm, rv, w, b, training, momentum, eps), {}
        return (rm, rv, w, b), {"use_input_stats": training, "momentum": momentum, "eps": eps}
    return make, dtype, stats, spec


FUNCTIONS = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm"]


def _run(module, name, x, args, kwargs):
    return outcome(lambda: getattr(module, name)(x, *args, **kwargs))


@pytest.mark.parametrize("name", FUNCTIONS)
@budget(3.0)
@given(data=st.data())
def test_functional_forward_and_running_stats(name, data):
    make, dtype, stats, spec = data.draw(functional_calls(name))
    x = build(spec)
    t_args, t_kw = make()
    h_args, h_kw = make()
    expected = _run(F, name, x, t_args, t_kw)
    actual = _run(HF, name, x, h_args, h_kw)
    if same_outcome(expected, actual):
        return
    r_args, r_kw = as_float64(*make())
    reference = getattr(F, name)(x.double(), *r_args, **r_kw)
    check_close(actual, expected, reference, dtype)
    if stats:  # running statistics, updated in place (in their own dtype)
        for i, what in ((0, "running_mean"), (1, "running_var")):
            check_close(h_args[i], t_args[i], r_args[i], coarser(dtype, t_args[i].dtype), what)


@pytest.mark.parametrize("name", FUNCTIONS)
@budget(1.5)
@given(data=st.data())
def test_functional_gradients_float64(name, data):
    """Gradients with respect to the input, weight and bias: float64 autograd through
    helpers' elementary operations against torch's own backward."""
    make, dtype, stats, spec = data.draw(functional_calls(name, float64_only=True))
    x = build(spec)
    slots = {"batch_norm": (2, 3), "instance_norm": (2, 3), "layer_norm": (1, 2),
             "group_norm": (1, 2), "rms_norm": (1,)}[name]  # weight, bias among the args
    grads = []
    for module in (F, HF):
        args, kw = make()
        leaves = [x.detach().clone().requires_grad_()]
        leaves += [args[i].requires_grad_() for i in slots if args[i] is not None]
        out = outcome(lambda: getattr(module, name)(leaves[0], *args, **kw))
        if isinstance(out, Exception):
            grads.append(out)
            continue
        dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(spec[-1]), dtype=F64)
        got = outcome(lambda: torch.autograd.grad(out, leaves, dy, allow_unused=True))
        if isinstance(got, Exception):
            # torch 2.13's GroupNorm backward with a bias and no weight fails with "tensor
            # does not have a device": there is no torch gradient to compare with
            assert module is F, got
            return
        grads.append([torch.zeros_like(l) if g is None else g for g, l in zip(got, leaves)])
    if same_outcome(*grads):
        return
    if x.numel() == 0:  # empty sums: every gradient is 0 (torch 2.13's GroupNorm gives its
        for e, a in zip(*grads):  # weight NaN when the groups are empty)
            assert a.eq(0).all() and (e.eq(0) | e.isnan()).all(), (a, e)
        return
    for e, a in zip(*grads):
        scale = max(1.0, e.abs().nan_to_num(0, 0, 0).max().item()) if e.numel() else 1.0
        assert_close(a, e, equal_nan=True, rtol=1e-7, atol=1e-7 * scale)


# --------------------------------------------------------------------------------------
# index_set_norm and adaptive_instance_norm (Wu & He's four choices; AdaIN)
# --------------------------------------------------------------------------------------
@budget(1.0)
@given(spec=inputs(4, channels=4), groups=st.sampled_from([1, 2, 4]), across=st.booleans(),
       eps=st.sampled_from([1e-5, 0.1]))
def test_index_set_norm_is_torchs_norm(spec, groups, across, eps):
    """index_set_norm(x, C, True) is BatchNorm in training, (1, False) GroupNorm with one group
    (LayerNorm over (C, *) without affine), (G, False) GroupNorm."""
    x = build(spec)
    dtype = spec[1]
    if across:
        if groups != x.shape[1]:
            return
        fn = lambda M: M.batch_norm(x, None, None, training=True, eps=eps)  # noqa: E731
    else:
        fn = lambda M: M.group_norm(x, groups, eps=eps)  # noqa: E731
    expected = outcome(lambda: fn(F))
    actual = outcome(lambda: HF.index_set_norm(x, groups, across, eps))
    if isinstance(expected, Exception):
        return  # index_set_norm does not check batch sizes; torch's checks are tested above
    assert not isinstance(actual, Exception), actual
    reference = (F.batch_norm(x.double(), None, None, training=True, eps=eps) if across
                 else F.group_norm(x.double(), groups, eps=eps))
    check_close(actual, expected, reference, dtype)


@budget(0.5)
@given(content=inputs(4, channels=3), style_hw=st.tuples(st.integers(2, 4), st.integers(2, 4)),
       seed=seeds)
def test_adaptive_instance_norm_from_torchs_instance_norm(content, style_hw, seed):
    """AdaIN(x, y) = sigma(y) * instance_norm(x) + mu(y), with torch's instance_norm and
    torch's var_mean of y as the reference."""
    shape, dtype = content[0], content[1]
    if 0 in shape or shape[2] * shape[3] < 2:
        return
    x = build(content)
    g = torch.Generator().manual_seed(seed)
    y = (torch.randn(shape[0], 3, *style_hw, generator=g, dtype=F64) * 2 + 1).to(dtype)
    var, mean = torch.var_mean(y.double(), dim=(2, 3), keepdim=True, correction=0)
    expected64 = (var + 1e-5).sqrt() * F.instance_norm(x.double()) + mean
    actual = HF.adaptive_instance_norm(x, y)
    check_close(actual, expected64.to(dtype), expected64, dtype)


# --------------------------------------------------------------------------------------
# the modules: several training steps, then eval, then state_dicts both ways
# --------------------------------------------------------------------------------------
BN = {"BatchNorm1d": (2, 3), "BatchNorm2d": (4,), "BatchNorm3d": (5,)}
IN = {"InstanceNorm1d": (3, 2), "InstanceNorm2d": (4, 3), "InstanceNorm3d": (5, 4)}
MODULES = list(BN) + list(IN) + ["LayerNorm", "GroupNorm", "RMSNorm"]


@st.composite
def module_cases(draw, name: str):
    """(constructor args, kwargs, per-step input specs, module dtype, parameter dtype)."""
    c = draw(st.sampled_from([1, 2, 3, 4]))
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    if name in BN or name in IN:
        rank = draw(st.sampled_from((BN | IN)[name]))
        kwargs = {"eps": eps, "momentum": draw(st.sampled_from([0.1, None, 0.0, 0.5, 1.0])),
                  "affine": draw(st.booleans()),
                  "track_running_stats": draw(st.booleans())}
        if kwargs["affine"] and draw(st.booleans()):
            kwargs["bias"] = False
        args = (c,)
        specs = [draw(inputs(rank, channels=c if rank > 2 or name in BN else None))
                 for _ in range(draw(st.integers(1, 3)) + 1)]
        if name in IN and rank == IN[name][1]:  # unbatched (C, *): channels at dim 0
            specs = [(
                [c] + s[0][1:],) + s[1:] for s in specs]
    elif name == "GroupNorm":
        groups = draw(st.sampled_from([1, 2, 4]))
        c = groups * draw(st.sampled_from([1, 2]))
        args = (groups, c)
        kwargs = {"eps": eps, "affine": draw(st.booleans())}
        if kwargs["affine"] and draw(st.booleans()):
            kwargs["bias"] = False
        rank = draw(st.integers(2, 5))
        specs = [draw(inputs(rank, channels=c)) for _ in range(draw(st.integers(1, 2)) + 1)]
    else:
        rank = draw(st.integers(1, 4))
        shape = [draw(size) for _ in range(rank)]
        k = draw(st.integers(1, rank))
        nshape = tuple(shape[rank - k:])
        args = (nshape[0] if k == 1 and draw(st.booleans()) else nshape,)
        kwargs = {"eps": eps if name == "LayerNorm" else draw(st.sampled_from([None, 1e-6, eps])),
                  "elementwise_affine": draw(st.booleans())}
        if name == "LayerNorm" and draw(st.booleans()):
            kwargs["bias"] = False
        specs = []
        for _ in range(draw(st.integers(1, 2)) + 1):
            s = draw(inputs(rank))
            specs.append((list(s[0][:rank - k]) + list(nshape),) + s[1:])
    dtype = draw(st.sampled_from(DTYPES))
    return args, kwargs, specs, dtype, param_dtype(draw, dtype), draw(seeds)


def _randomise(module, seed):
    with torch.no_grad():
        for i, (n, p) in enumerate(sorted(module.named_parameters())):
            p.copy_(param(seed + i, p.shape, p.dtype, n))
        for i, (n, b) in enumerate(sorted(module.named_buffers())):
            if b.is_floating_point():
                b.copy_(param(seed + 10 + i, b.shape, b.dtype, "var" if "var" in n else "bias"))


def _buffers_close(hm, tm, dtype):
    for (hn, hb), (tn, tb) in zip(sorted(hm.named_buffers()), sorted(tm.named_buffers())):
        assert hn == tn
        if hb.is_floating_point():
            tol = TOL[BF16] if BF16 in (dtype, hb.dtype) else TOL[F16] if F16 in (dtype, hb.dtype) \
                else TOL[hb.dtype]
            assert_close(hb, tb, equal_nan=True, **tol)
        else:
            assert torch.equal(hb, tb), (hn, hb, tb)


@pytest.mark.parametrize("name", MODULES)
@budget(1.5)
@given(data=st.data())
def test_module_training_eval_and_state_dict(name, data):
    args, kwargs, specs, dtype, pdt, seed = data.draw(module_cases(name))
    tm = getattr(nn, name)(*args, **kwargs)
    hm = getattr(HN, name)(*args, **kwargs)
    _randomise(tm, seed)
    tm.to(pdt)
    hm.to(pdt).load_state_dict(tm.state_dict(), strict=True)  # torch's state_dict into helpers
    ref = getattr(nn, name)(*args, **kwargs).double()  # float64, on the same (rounded) values
    ref.load_state_dict(tm.state_dict(), strict=True)
    for step, spec in enumerate(specs):
        training = step < len(specs) - 1  # training steps, then eval
        for m in (tm, hm, ref):
            m.train(training)
        x = build(spec, dtype)
        grad = dtype == F64 and training
        xs = [x.detach().clone().requires_grad_(grad) for _ in range(2)]
        expected, actual = outcome(lambda: tm(xs[0])), outcome(lambda: hm(xs[1]))
        if not same_outcome(expected, actual):
            check_close(actual, expected, ref(x.double()), dtype)
            if grad and actual.numel() > 0:
                dy = torch.randn(actual.shape, generator=torch.Generator().manual_seed(seed),
                                 dtype=F64)
                expected.backward(dy)
                actual.backward(dy)
                assert_close(xs[1].grad, xs[0].grad, equal_nan=True, rtol=1e-7,
                             atol=1e-7 * max(1.0, xs[0].grad.abs().nan_to_num().max().item()))
                for (n, p), (_, q) in zip(sorted(hm.named_parameters()),
                                          sorted(tm.named_parameters())):
                    assert_close(p.grad, q.grad, equal_nan=True, rtol=1e-7, atol=1e-7), n
        else:
            outcome(lambda: ref(x.double()))  # keep the reference's counters in step
        _buffers_close(hm, tm, dtype)
    # state_dicts both ways, strict: the same keys, and each library runs the other's state
    assert list(hm.state_dict()) == list(tm.state_dict())
    t2 = getattr(nn, name)(*args, **kwargs).to(pdt)
    h2 = getattr(HN, name)(*args, **kwargs).to(pdt)
    t2.load_state_dict(hm.state_dict(), strict=True)
    h2.load_state_dict(tm.state_dict(), strict=True)
    t2.eval(), h2.eval(), tm.eval(), hm.eval()
    x = build(specs[-1], dtype)
    for a, e in ((h2, tm), (hm, t2)):
        expected, actual = outcome(lambda: e(x)), outcome(lambda: a(x))
        if not same_outcome(expected, actual):
            check_close(actual, expected, ref.eval()(x.double()), dtype)


# --------------------------------------------------------------------------------------
# bad arguments: both raise, with the same exception class
# --------------------------------------------------------------------------------------
def _t(*shape, dtype=F32):
    return torch.ones(shape, dtype=dtype)


BAD = {
    # batch_norm
    "bn-one-value-per-channel": lambda M, x: M.batch_norm(x[:1, :, :1], None, None, training=True),
    "bn-eps-0-training": lambda M, x: M.batch_norm(x, None, None, training=True, eps=0.0),
    "bn-eps-negative": lambda M, x: M.batch_norm(x, _t(3), _t(3), eps=-1e-5),
    "bn-eval-without-stats": lambda M, x: M.batch_norm(x, None, _t(3)),
    "bn-stats-wrong-size": lambda M, x: M.batch_norm(x, _t(4), _t(4), training=True),
    "bn-weight-wrong-size": lambda M, x: M.batch_norm(x, None, None, _t(2), training=True),
    "bn-int-input": lambda M, x: M.batch_norm(x.long(), None, None, training=True),
    "bn-1d-input": lambda M, x: M.batch_norm(x.flatten(), None, None, training=True),
    "bn-weight-f64": lambda M, x: M.batch_norm(x, None, None, _t(3, dtype=F64), training=True),
    "bn-only-running-mean": lambda M, x: M.batch_norm(x, _t(3), None, training=True),
    "bn-momentum-None": lambda M, x: M.batch_norm(x, _t(3), _t(3), training=True, momentum=None),
    "bn-training-None": lambda M, x: M.batch_norm(x, _t(3), _t(3), training=None),
    "bn-eps-str": lambda M, x: M.batch_norm(x, _t(3), _t(3), eps="1e-5"),
    # instance_norm
    "in-one-spatial-value": lambda M, x: M.instance_norm(x[:, :, :1]),
    "in-1d-input": lambda M, x: M.instance_norm(x.flatten(), use_input_stats=False),
    "in-weight-wrong-size": lambda M, x: M.instance_norm(x, weight=_t(4)),
    "in-weight-C1": lambda M, x: M.instance_norm(x, weight=_t(3, 1)),
    "in-no-stats-eval": lambda M, x: M.instance_norm(x, use_input_stats=False),
    "in-momentum-None": lambda M, x: M.instance_norm(x, momentum=None),
    "in-use_input_stats-int": lambda M, x: M.instance_norm(x, use_input_stats=1),
    "in-int-input": lambda M, x: M.instance_norm(x.int()),
    "in-bias-f64": lambda M, x: M.instance_norm(x, bias=_t(3, dtype=F64)),
    # layer_norm
    "ln-shape-mismatch": lambda M, x: M.layer_norm(x, (x.shape[-1] + 1,)),
    "ln-empty-shape": lambda M, x: M.layer_norm(x, ()),
    "ln-bare-int": lambda M, x: M.layer_norm(x, x.shape[-1]),
    "ln-float-shape": lambda M, x: M.layer_norm(x, (float(x.shape[-1]),)),
    "ln-weight-wrong-shape": lambda M, x: M.layer_norm(x, x.shape[-1:], _t(x.shape[-1] + 1)),
    "ln-bias-wrong-shape": lambda M, x: M.layer_norm(x, x.shape[-1:], None, _t(1, x.shape[-1])),
    "ln-int-input": lambda M, x: M.layer_norm(x.long(), x.shape[-1:]),
    "ln-eps-complex": lambda M, x: M.layer_norm(x, x.shape[-1:], eps=1j),
    "ln-mixed-param-dtypes": lambda M, x: M.layer_norm(x.bfloat16(), x.shape[-1:],
                                                       _t(x.shape[-1]),
                                                       _t(x.shape[-1], dtype=BF16)),
    # group_norm
    "gn-indivisible": lambda M, x: M.group_norm(x, 2),
    "gn-float-groups": lambda M, x: M.group_norm(x, 3.0),
    "gn-weight-wrong-size": lambda M, x: M.group_norm(x, 3, _t(2)),
    "gn-weight-2d": lambda M, x: M.group_norm(x, 3, _t(3, 1)),
    "gn-1d-input": lambda M, x: M.group_norm(x.flatten(), 1),
    "gn-one-value-per-group": lambda M, x: M.group_norm(x[:1, :1, :1], 1),
    "gn-mixed-param-dtypes": lambda M, x: M.group_norm(x.half(), 3, _t(3), _t(3, dtype=F16)),
    # rms_norm
    "rms-shape-mismatch": lambda M, x: M.rms_norm(x, (x.shape[-1] + 1,)),
    "rms-too-many-dims": lambda M, x: M.rms_norm(x[0, 0], (1,) + tuple(x.shape[-1:])),
    "rms-float-shape": lambda M, x: M.rms_norm(x, (float(x.shape[-1]),)),
    "rms-weight-wrong-shape": lambda M, x: M.rms_norm(x, x.shape[-1:], _t(x.shape[-1] + 1)),
    "rms-int-input": lambda M, x: M.rms_norm(x.long(), x.shape[-1:]),
    # modules
    "BatchNorm1d-4d": lambda M, x: M.BatchNorm1d(3)(x[..., None]),
    "BatchNorm2d-channels": lambda M, x: M.BatchNorm2d(4)(x[..., None]),
    "BatchNorm3d-3d": lambda M, x: M.BatchNorm3d(3)(x),
    "InstanceNorm1d-4d": lambda M, x: M.InstanceNorm1d(3)(x[..., None]),
    "InstanceNorm2d-affine-channels": lambda M, x: M.InstanceNorm2d(4, affine=True)(x[..., None]),
    "LayerNorm-trailing": lambda M, x: M.LayerNorm(x.shape[-1] + 1)(x),
    "GroupNorm-indivisible": lambda M, x: M.GroupNorm(2, 3),
    "GroupNorm-channels": lambda M, x: M.GroupNorm(2, 4)(x),
    "RMSNorm-trailing": lambda M, x: M.RMSNorm([x.shape[-1], 1])(x),
}


@budget(2.0)
@given(case=st.sampled_from(sorted(BAD)), spec=inputs(3, channels=3, sizes=st.integers(2, 4)))
def test_bad_arguments_raise_like_torch(case, spec):
    x = build(spec, F32)
    expected = outcome(lambda: BAD[case](F if case[0].islower() else nn, x))
    actual = outcome(lambda: BAD[case](HF if case[0].islower() else HN, x))
    assert isinstance(expected, Exception), f"test set-up: torch accepted {case}"
    assert same_outcome(expected, actual)
