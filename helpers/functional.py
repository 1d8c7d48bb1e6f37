r"""From-scratch normalisation functions with the signatures and semantics of
``torch.nn.functional``.

Every function here is built from elementary tensor operations (``mean``, ``sqrt``,
``reshape``, arithmetic); none calls torch's own normalisation kernels, so they keep
working when those are unavailable and they can be read line by line.

All five share one recipe. For an index set :math:`S` of elements that share statistics,

.. math::

    \mu = \frac{1}{|S|}\sum_{k\in S} x_k,\qquad
    \sigma^2 = \frac{1}{|S|}\sum_{k\in S} (x_k-\mu)^2,\qquad
    \hat x_k = \frac{x_k-\mu}{\sqrt{\sigma^2+\epsilon}},\qquad
    y_k = \gamma\,\hat x_k + \beta

(RMSNorm drops :math:`\mu` and divides by :math:`\sqrt{\overline{x^2}+\epsilon}`). The
variance is the biased one (divide by :math:`|S|`) and is computed in two passes (mean
first, then the mean of squared deviations), never as :math:`E[x^2]-E[x]^2`, which cancels
catastrophically in float32. The second pass also averages the deviations themselves and
removes that average (the *corrected* two-pass algorithm of Chan, Golub & LeVeque, 1983): the
rounded mean of n equal values can be one unit in the last place away from them, and without
the correction a constant row would normalise to a multiple of :math:`1/\sqrt{\epsilon}` of
that rounding error instead of to exactly 0 (and to :math:`\pm 1` instead of NaN at
:math:`\epsilon = 0`). Half-precision inputs (float16, bfloat16) are computed in float32
and the result is cast back to the input dtype, as PyTorch's kernels do; so are their
gradients.

Arguments are checked as ``torch.nn.functional`` checks them: the same exception class
(``TypeError`` for an argument of the wrong type, ``RuntimeError`` or ``ValueError`` for a
bad shape, dtype or value), with a message that names the sizes involved.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch
from torch import Tensor

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm", "index_set_norm",
           "adaptive_instance_norm"]

_HALF = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------
def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the statistics are computed in: float32 for float16/bfloat16, else ``dtype``."""
    return torch.float32 if dtype in _HALF else dtype


def centred_moments(x: Tensor, dims: Sequence[int], *, corrected: bool = True
                    ) -> tuple[Tensor, Tensor, Tensor]:
    r"""Mean, centred input and biased variance over ``dims`` (kept as size-1 dims), in two
    passes; the centred input is returned so callers do not subtract the mean twice.

    .. math:: \mu = \tfrac{1}{n}\sum x,\qquad d = x - \mu,\qquad
              \delta = \tfrac{1}{n}\sum d,\qquad
              x - (\mu + \delta) = d - \delta,\qquad
              \sigma^2 = \tfrac{1}{n}\sum (d - \delta)^2

    In exact arithmetic :math:`\delta = 0`. In floating point :math:`\delta` is the rounding
    error of :math:`\mu` (the corrected two-pass algorithm, Chan, Golub & LeVeque, 1983,
    *The American Statistician* 37(3)): for n equal values the rounded mean can be an ulp
    off, every :math:`d` is then that same error, :math:`\delta` equals it exactly, and the
    centred values and the variance come out exactly 0, as in torch's own kernels.
    ``corrected=False`` gives the plain two-pass method (:math:`\delta` taken as 0; lesson
    07, section 6 measures its error).
    """
    dims = list(dims)
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    if corrected:
        error = centred.mean(dim=dims, keepdim=True)  # the rounding error of the mean
        centred = centred - error
        mean = mean + error
    return mean, centred, centred.square().mean(dim=dims, keepdim=True)


def moments(x: Tensor, dims: Sequence[int]) -> tuple[Tensor, Tensor]:
    r"""Mean and biased variance over ``dims`` (kept as size-1 dims), in two passes.

    .. math:: \mu = \tfrac{1}{n}\sum x,\qquad \sigma^2 = \tfrac{1}{n}\sum (x-\mu)^2
    """
    mean, _, var = centred_moments(x, dims)
    return mean, var


def merge_moments(counts: Tensor, means: Tensor, m2s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""Merge the moments of disjoint sets, stacked along dim 0 (``counts`` (W,), ``means`` and
    ``m2s`` (W, ...)), into the moments of their union (Chan, Golub & LeVeque: a 1979 Stanford
    report, and The American Statistician, 1983):

    .. math:: N = \sum_k n_k,\quad \mu = \tfrac{1}{N}\sum_k n_k\mu_k,\quad
              M_2 = \sum_k M_{2,k} + \sum_k n_k(\mu_k - \mu)^2

    where :math:`M_2 = \sum (x - \bar x)^2` (the biased variance times the count). Only
    differences of means are squared, so nothing large cancels; with two sets, one of them a
    single value, this is Welford's (1962) update. Sets with :math:`n_k = 0` are ignored (all empty gives
    NaN, as the variance of nothing).
    Lesson 07, section 6 (blocks of a one-pass variance) and lesson 08, section 2 (the
    statistics of synchronised BatchNorm)."""
    counts = counts.reshape([-1] + [1] * (means.dim() - 1))
    total = counts.sum(0)
    mean = (counts * means).sum(0) / total
    m2 = m2s.sum(0) + (counts * (means - mean).square()).sum(0)
    return total.reshape(()), mean, m2


def _size(t: Tensor) -> list[int]:
    return list(t.shape)


def _check_floating(name: str, input: Tensor) -> None:
    if not input.is_floating_point():
        raise NotImplementedError(
            f'"{name}" not implemented for \'{str(input.dtype).replace("torch.", "")}\': '
            "normalisation needs a floating-point input (float16, bfloat16, float32 or float64)"
        )


def _is_real_number(v: object) -> bool:
    """What torch's argument parser takes for a ``float`` argument: a Python or NumPy real
    number (bool included) or a 0-d real tensor."""
    if isinstance(v, Tensor):
        return v.dim() == 0 and not v.is_complex()
    return isinstance(v, numbers.Real) or (type(v).__module__ == "numpy"
                                           and type(v).__name__ == "bool")


def _is_integer(v: object) -> bool:
    """What torch's argument parser takes for an ``int`` argument: a Python or NumPy integer
    (not a bool) or a 0-d integer tensor."""
    if isinstance(v, Tensor):
        return v.dim() == 0 and not v.is_floating_point() and not v.is_complex() \
            and v.dtype != torch.bool
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_arg(name: str, pname: str, position: int, value: object, kind: str,
               hint: str = "") -> None:
    """Raise torch's TypeError when ``value`` is not of ``kind`` ("float", "float or None",
    "bool" or "int"), as torch.nn.functional's parser does before any computation."""
    ok = {"float": _is_real_number, "float or None": lambda v: v is None or _is_real_number(v),
          "bool": lambda v: isinstance(v, bool), "int": _is_integer}[kind](value)
    if not ok:
        raise TypeError(f"{name}(): argument '{pname}' (position {position}) must be {kind}, "
                        f"not {type(value).__name__}{hint}")


def _param_dtype_ok(input: Tensor, dtype: torch.dtype) -> bool:
    """PyTorch's CPU rule for a parameter's dtype: the input's, or float32 for a float16 or
    bfloat16 input (mixed precision)."""
    return dtype == input.dtype or (input.dtype in _HALF and dtype == torch.float32)


def _check_param_dtype(name: str, input: Tensor, *, shared: bool = False,
                       **params: Tensor | None) -> None:
    """Raise torch's RuntimeError for parameter dtypes torch's CPU kernels reject: each must
    have the input's dtype or, for a float16/bfloat16 input, float32; ``weight`` and ``bias``
    must share one dtype; with ``shared``, all the given tensors must (BatchNorm's rule)."""
    given = {k: p for k, p in params.items() if p is not None}
    for pname, p in given.items():
        if not _param_dtype_ok(input, p.dtype):
            raise RuntimeError(
                f"mixed dtype (CPU): {name} got input of dtype {input.dtype} but {pname} of "
                f"dtype {p.dtype}; parameters and buffers must have the input's dtype (or "
                "float32 when the input is float16/bfloat16)"
            )
    if "weight" in given and "bias" in given and given["weight"].dtype != given["bias"].dtype:
        raise RuntimeError(
            f"mixed dtype (CPU): {name} got weight of dtype {given['weight'].dtype} and bias of "
            f"dtype {given['bias'].dtype}; weight and bias must have one dtype (the input's, or "
            "float32 for both when the input is float16/bfloat16)"
        )
    if shared and len({p.dtype for p in given.values()}) > 1:
        listing = ", ".join(f"{k} {p.dtype}" for k, p in given.items())
        raise RuntimeError(
            f"{name}: weight, bias, running_mean and running_var must share one dtype (the "
            f"input's, or float32 for a float16/bfloat16 input); got {listing}"
        )


def _check_running_pair(name: str, running_mean: Tensor | None,
                        running_var: Tensor | None) -> None:
    if (running_mean is None) != (running_var is None):
        raise ValueError(
            f"{name}: running_mean and running_var must either both be None or neither be None"
        )


def _check_per_channel(name: str, input: Tensor, num_channels: int, *, vectors: bool = False,
                       **params: Tensor | None) -> None:
    """Each given tensor holds one value per channel; with ``vectors``, it must also have at
    most one dim (instance_norm: torch repeats each N times along dim 0, which a (C, 1)
    tensor does not allow)."""
    for pname, p in params.items():
        if vectors and p is not None and p.dim() > 1:
            raise RuntimeError(
                f"{name}: {pname} must be a vector of {num_channels} elements (one per channel), "
                f"got {pname} of shape {_size(p)}; reshape it with .reshape({num_channels})"
            )
        if p is not None and p.numel() != num_channels:
            raise RuntimeError(
                f"{name}: {pname} should contain {num_channels} elements (one per channel, the "
                f"size of dim 1 of the input) not {p.numel()}; got input of size {_size(input)}"
            )


def _verify_batch_size(size: list[int]) -> None:
    # Same rule as torch: with one value per channel there is no variance to estimate.
    if math.prod(size[:1] + size[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {size}"
        )


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None, shape: Sequence[int]) -> Tensor:
    if weight is not None:
        y = y * weight.reshape(shape).to(y.dtype)
    if bias is not None:
        y = y + bias.reshape(shape).to(y.dtype)
    return y


def _stats_dtype(input: Tensor, *params: Tensor | None) -> torch.dtype:
    """The precision torch's BatchNorm/InstanceNorm kernel keeps its batch statistics in:
    float32 when a float16/bfloat16 input comes with float32 parameters or buffers (mixed
    precision), otherwise the input's own dtype."""
    if input.dtype in _HALF and any(p is not None and p.dtype == torch.float32 for p in params):
        return torch.float32
    return input.dtype


def _normalise_per_channel(x: Tensor, mean: Tensor, var: Tensor, eps: float,
                           weight: Tensor | None, bias: Tensor | None, shape: list[int],
                           stats_dtype: torch.dtype) -> Tensor:
    r"""y = (x - mean) / sqrt(var + eps) * weight + bias, in the compute dtype of ``x``.

    ``stats_dtype`` is the precision of batch statistics (pass the compute dtype when
    normalising with running statistics, which torch does not round)."""
    if stats_dtype in _HALF and x.numel() > 0:
        return _half_precision_affine(x, mean, var, eps, weight, bias, shape, stats_dtype)
    # (an empty batch has a NaN mean; folded into a shift it would give NaN * 0 = NaN
    # gradients for the parameters, where there is nothing to differentiate: 0)
    return _affine((x - mean) / torch.sqrt(var + eps), weight, bias, shape)


def _rounded_forward(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` rounded to ``dtype`` in the forward pass only: the value is ``t.to(dtype)`` (in
    ``t``'s dtype), the gradient passes through unrounded (straight through), so that a
    float32 backward is not squeezed through float16's range (65504) or precision."""
    rounded = t.to(dtype).to(t.dtype)
    # t + (rounded - t) is exactly `rounded` (the difference of a float and its rounding is
    # representable); where either is infinite the difference is NaN, and `rounded` is kept
    return torch.where(rounded == t, t, t + (rounded - t).detach())


def _half_precision_affine(x: Tensor, mean: Tensor, var: Tensor, eps: float,
                           weight: Tensor | None, bias: Tensor | None, shape: list[int],
                           stats_dtype: torch.dtype) -> Tensor:
    """All-float16/bfloat16 BatchNorm in training, as torch's CPU kernel computes it: the
    batch mean and 1/std rounded to the input's precision, then y = x * scale + shift in
    float32. (A float16 mean near 300 is off by up to 0.125. For bfloat16 inputs of 3 or more
    dims torch's own summation order differs again, so the two agree to about 2 bfloat16
    ulps there.) The rounding is applied to the values only: the backward stays in float32,
    as torch's backward kernel does (rounded gradients of the mean and 1/std overflow float16
    with loss-scaled upstream gradients, and inf - inf gives NaN)."""
    mean = _rounded_forward(mean, stats_dtype)
    rstd = _rounded_forward(1.0 / torch.sqrt(var + eps), stats_dtype)
    scale = rstd if weight is None else rstd * weight.reshape(shape).to(x.dtype)
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias.reshape(shape).to(x.dtype)
    return x * scale + shift


def _update_running(running: Tensor | None, batch_value: Tensor, momentum: float) -> None:
    r"""In place: running <- (1 - momentum) * running + momentum * batch_value."""
    if running is None:
        return
    momentum = float(momentum)  # torch also takes a 0-d tensor (even a bool one) here
    with torch.no_grad():
        new = running.to(batch_value.dtype) * (1.0 - momentum) + batch_value.detach() * momentum
        running.copy_(new.to(running.dtype))


# --------------------------------------------------------------------------------------
# BatchNorm and InstanceNorm
# --------------------------------------------------------------------------------------
def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    r"""Batch normalisation of an (N, C, \*) input, per channel (dim 1): Ioffe & Szegedy
    (2015), Algorithm 1, with torch's signature and checks. Lesson 01.

    Training (``training=True``) uses the statistics of the batch over every dim but 1:

    .. math::

        \mu_c = \frac{1}{m}\sum_{n,s} x_{n c s},\quad
        \sigma_c^2 = \frac{1}{m}\sum_{n,s}(x_{n c s}-\mu_c)^2,\quad
        y_{n c s} = \gamma_c \frac{x_{n c s}-\mu_c}{\sqrt{\sigma_c^2+\epsilon}} + \beta_c

    with :math:`m = N\cdot\prod(\text{spatial})`, and updates the running statistics in place
    (when given) with the **unbiased** variance:

    .. math::

        \hat\mu \leftarrow (1-\text{momentum})\,\hat\mu + \text{momentum}\,\mu_c,\qquad
        \hat\sigma^2 \leftarrow (1-\text{momentum})\,\hat\sigma^2
            + \text{momentum}\,\tfrac{m}{m-1}\sigma_c^2

    Evaluation (``training=False``) normalises with ``running_mean`` and ``running_var``.

    Args:
        input: (N, C) or (N, C, \*) floating-point tensor.
        running_mean, running_var: (C,) buffers, updated in place when training; required
            when not training.
        weight, bias: optional (C,) affine parameters :math:`\gamma, \beta`.
        training: use batch statistics (and update the buffers) instead of the buffers.
        momentum: weight of the new batch in the running average (PyTorch convention;
            Keras/TF's ``momentum`` is ``1 -`` this).
        eps: added to the variance inside the square root.

    Returns:
        A tensor of the input's shape and dtype.
    """
    if _check_batch_norm_args(input, running_mean, running_var, weight, bias, training,
                              momentum, eps):
        return input.clone()  # an empty 1-D input: nothing to normalise, as in torch
    c = input.shape[1]
    shape = [1, c] + [1] * (input.dim() - 2)  # broadcasts a per-channel vector
    x = input.to(compute_dtype(input.dtype))  # float16/bfloat16 are computed in float32
    if training:  # Algorithm 1: mini-batch mean and variance over every dim but the channel's
        mean, var = moments(x, [0] + list(range(2, input.dim())))
        m = input.numel() // c if c else 0
        if m > 0:  # an empty batch leaves the buffers untouched, as in torch
            _update_running(running_mean, mean.reshape(c), momentum)
            _update_running(running_var, var.reshape(c) * (m / (m - 1)), momentum)
    else:  # inference: the population estimates
        mean, var = running_mean.reshape(shape).to(x.dtype), running_var.reshape(shape).to(x.dtype)
    stats_dtype = (_stats_dtype(input, weight, bias, running_mean, running_var) if training
                   else x.dtype)
    # normalise, then scale and shift: y = gamma * (x - mu) / sqrt(var + eps) + beta
    return _normalise_per_channel(x, mean, var, eps, weight, bias, shape,
                                  stats_dtype).to(input.dtype)


def _check_batch_norm_args(input: Tensor, running_mean: Tensor | None,
                           running_var: Tensor | None, weight: Tensor | None,
                           bias: Tensor | None, training: bool, momentum: float,
                           eps: float) -> bool:
    """Raise what ``torch.nn.functional.batch_norm`` raises for the same arguments. Returns
    True for the one 1-D input torch accepts: an empty one, with empty (or no) running
    statistics and no affine parameters (torch counts the channels of a 1-D input as 0)."""
    if momentum is None:
        raise TypeError(
            "batch_norm(): momentum must be a float; the cumulative average of momentum=None is "
            "handled by the BatchNorm modules, which pass 1/num_batches_tracked"
        )
    _check_arg("batch_norm", "training", 6, training, "bool")
    _check_arg("batch_norm", "momentum", 7, momentum, "float")
    _check_arg("batch_norm", "eps", 8, eps, "float")
    if input.dim() == 1 and input.numel() == 0 and weight is None and bias is None and all(
            t is None or t.numel() == 0 for t in (running_mean, running_var)):
        return True
    if training:
        _verify_batch_size(_size(input))
    if input.dim() < 2:
        raise RuntimeError(
            "batch_norm expects an input of shape (N, C) or (N, C, *) with the channels at dim 1, "
            f"got a {input.dim()}D input of size {_size(input)} (only an empty 1-D input with "
            "empty running statistics is accepted, as in torch)"
        )
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    elif eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    _check_floating("batch_norm", input)
    _check_per_channel("batch_norm", input, input.shape[1], running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    _check_param_dtype("batch_norm", input, shared=True, running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    if training:
        _check_running_pair("batch_norm", running_mean, running_var)
    else:
        for name, t in (("running_mean", running_mean), ("running_var", running_var)):
            if t is None:
                raise RuntimeError(
                    f"{name} must be defined in evaluation mode: batch_norm with training=False "
                    "normalises with running_mean and running_var, so both must be tensors")
    return False


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    r"""Instance normalisation of an (N, C, \*) input: per sample and channel, over the
    spatial dims.

    .. math::

        \mu_{nc} = \frac{1}{|s|}\sum_s x_{ncs},\quad
        \sigma_{nc}^2 = \frac{1}{|s|}\sum_s (x_{ncs}-\mu_{nc})^2,\quad
        y_{ncs} = \gamma_c\frac{x_{ncs}-\mu_{nc}}{\sqrt{\sigma_{nc}^2+\epsilon}}+\beta_c

    With ``use_input_stats=True`` and running buffers given, the buffers are updated in
    place with the batch average of the per-instance statistics (unbiased variance):

    .. math::

        \hat\mu_c \leftarrow (1-m)\,\hat\mu_c + m\,\tfrac{1}{N}\sum_n \mu_{nc},\qquad
        \hat\sigma_c^2 \leftarrow (1-m)\,\hat\sigma_c^2
            + m\,\tfrac{1}{N}\sum_n \tfrac{|s|}{|s|-1}\sigma_{nc}^2

    With ``use_input_stats=False`` the buffers normalise instead (they must be given).

    Lesson 03.
    """
    _check_arg("instance_norm", "use_input_stats", 6, use_input_stats, "bool")
    _check_arg("instance_norm", "momentum", 7, momentum, "float",
               " (momentum=None, the cumulative average, is an option of the BatchNorm modules; "
               "with InstanceNorm modules it means no update, so they pass 0.0)"
               if momentum is None else "")
    _check_arg("instance_norm", "eps", 8, eps, "float")
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {input.size()}"
        )
    if input.dim() < 2:
        raise RuntimeError(
            "instance_norm expects an input of shape (N, C, *) with the channels at dim 1, "
            f"got a {input.dim()}D input of size {_size(input)}"
        )
    _check_floating("instance_norm", input)
    n, c = input.shape[0], input.shape[1]
    if n == 0 and (weight is not None or bias is not None):
        # torch repeats the affine parameters N times and then fails on the empty result
        raise IndexError(
            f"instance_norm of an empty batch (input of size {_size(input)}) with affine "
            "parameters: torch's kernel repeats weight and bias once per sample and cannot "
            "index the empty result"
        )
    _check_per_channel("instance_norm", input, c, vectors=True, running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    # torch accepts running statistics of any floating dtype here (they are updated in their
    # own dtype); the affine parameters follow the usual rule, which torch's kernel checks
    # only when there is something to normalise
    if input.numel() > 0:
        _check_param_dtype("instance_norm", input, weight=weight, bias=bias)
    if (input.numel() > 0 and weight is None and bias is not None and running_mean is not None
            and bias.dtype != input.dtype):
        # torch's CPU kernel: a float32 bias of a half-precision input needs a float32 weight
        # beside it once running statistics are given (a float32 weight alone is accepted)
        raise RuntimeError(
            f"mixed dtype (CPU): instance_norm got input of dtype {input.dtype}, bias of dtype "
            f"{bias.dtype}, no weight and running statistics: torch's kernel then needs the "
            f"bias in the input's dtype, or a weight of dtype {bias.dtype} beside it"
        )
    _check_running_pair("instance_norm", running_mean, running_var)
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError(
            "Expected running_mean and running_var to be defined when use_input_stats is false"
        )

    x = input.to(compute_dtype(input.dtype))
    shape = [1, c] + [1] * (input.dim() - 2)
    if use_input_stats:
        spatial = list(range(2, input.dim()))
        mean, var = moments(x, spatial)
        s = math.prod(input.shape[2:])
        if s > 0:  # zero spatial elements leave the buffers untouched, as in torch
            # batch average over N (NaN for an empty batch, exactly as torch)
            _update_running(running_mean, mean.reshape(n, c).mean(0), momentum)
            _update_running(running_var, (var * (s / (s - 1))).reshape(n, c).mean(0), momentum)
        elif n == 0 and running_mean is not None:
            with torch.no_grad():
                running_mean.fill_(float("nan"))
                running_var.fill_(float("nan"))
    else:
        mean = running_mean.reshape(shape).to(x.dtype)
        var = running_var.reshape(shape).to(x.dtype)

    stats_dtype = _stats_dtype(input, weight, bias) if use_input_stats else x.dtype
    return _normalise_per_channel(x, mean, var, eps, weight, bias, shape,
                                  stats_dtype).to(input.dtype)


# --------------------------------------------------------------------------------------
# LayerNorm and RMSNorm (statistics over the trailing normalized_shape)
# --------------------------------------------------------------------------------------
def _as_shape(normalized_shape: Sequence[int], name: str = "normalized_shape") -> tuple[int, ...]:
    """``normalized_shape`` as a tuple. Like torch.nn.functional, a bare int is a TypeError
    here (the LayerNorm/RMSNorm modules accept one and wrap it)."""
    if isinstance(normalized_shape, numbers.Integral):
        raise TypeError(
            f"{name} must be a tuple or list of ints, e.g. ({int(normalized_shape)},), not the "
            f"int {int(normalized_shape)}"
        )
    if isinstance(normalized_shape, Tensor) or not isinstance(normalized_shape, Sequence):
        raise TypeError(f"{name} must be a tuple or list of ints, not "
                        f"{type(normalized_shape).__name__}")
    for i, s in enumerate(normalized_shape):
        if isinstance(s, Tensor) and s.dim() == 0 and s.dtype == torch.bool:
            raise RuntimeError(f"{name}: expected integer sizes, got the bool tensor {s} at pos {i}")
        if not _is_integer(s):
            raise TypeError(f"{name} must be a tuple or list of ints, but found element of type "
                            f"{type(s).__name__} at pos {i}")
    return tuple(int(s) for s in normalized_shape)


def _check_normalized_shape(name: str, input: Tensor, normalized_shape: tuple[int, ...],
                            weight: Tensor | None, bias: Tensor | None = None) -> None:
    if len(normalized_shape) == 0:
        raise RuntimeError(
            f"{name}: expected normalized_shape to be at least 1-dimensional (the trailing dims "
            f"to normalise over, e.g. (d,) for (B, T, d) input), but got normalized_shape = []"
        )
    k = len(normalized_shape)
    if input.dim() < k or tuple(input.shape[input.dim() - k:]) != normalized_shape:
        raise RuntimeError(
            f"{name}: given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}] (those sizes as the trailing dims), but "
            f"got input of size {_size(input)}"
        )
    for pname, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != normalized_shape:
            raise RuntimeError(
                f"{name}: expected {pname} to be of same shape as normalized_shape, but got "
                f"{pname} of shape {_size(p)} and normalized_shape = {list(normalized_shape)}"
            )


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""Layer normalisation over the trailing ``len(normalized_shape)`` dims of each sample.

    .. math::

        \mu = \frac{1}{H}\sum_{i=1}^{H} x_i,\quad
        \sigma^2 = \frac{1}{H}\sum_{i=1}^{H}(x_i-\mu)^2,\quad
        y_i = \gamma_i\,\frac{x_i-\mu}{\sqrt{\sigma^2+\epsilon}} + \beta_i

    where :math:`H` is the number of elements of ``normalized_shape`` and
    :math:`\gamma,\beta` have shape ``normalized_shape`` (one per element, not per channel).
    The same computation at training and inference; no running statistics.

    Lessons 02, 04, 07.
    """
    _check_arg("layer_norm", "eps", 5, eps, "float")
    shape = _as_shape(normalized_shape)
    _check_normalized_shape("layer_norm", input, shape, weight, bias)
    _check_floating("layer_norm", input)
    _check_param_dtype("layer_norm", input, weight=weight, bias=bias)
    x = input.to(compute_dtype(input.dtype))
    dims = list(range(input.dim() - len(shape), input.dim()))
    _, centred, var = centred_moments(x, dims)
    y = centred / torch.sqrt(var + eps)
    return _affine(y, weight, bias, shape).to(input.dtype)


def rms_eps(dtype: torch.dtype, eps: float | None) -> float:
    """PyTorch's ``eps=None`` rule for RMSNorm: the machine epsilon of the compute dtype
    (float32's for float16, bfloat16 and float32 inputs; float64's for float64)."""
    return torch.finfo(compute_dtype(dtype)).eps if eps is None else eps


def rms_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    r"""Root-mean-square normalisation over the trailing ``len(normalized_shape)`` dims.

    .. math::

        \mathrm{RMS}(x) = \sqrt{\frac{1}{H}\sum_{i=1}^{H} x_i^2 + \epsilon},\qquad
        y_i = \frac{x_i}{\mathrm{RMS}(x)}\,g_i

    :math:`\epsilon` sits **inside** the square root; the gain :math:`g` (``weight``) is
    learnable and there is no bias. ``eps=None`` means ``torch.finfo(float32).eps`` for
    float16/bfloat16/float32 inputs and ``torch.finfo(float64).eps`` for float64.

    Lesson 04.
    """
    _check_arg("rms_norm", "eps", 4, eps, "float or None")
    shape = _as_shape(normalized_shape)
    if input.dim() < len(shape):
        raise ValueError(
            f"Input tensor must have at least {len(shape)} dimensions, but got {input.dim()}: "
            f"rms_norm normalises over its last {len(shape)} dims, normalized_shape="
            f"{list(shape)}, input of size {_size(input)}"
        )
    _check_normalized_shape("rms_norm", input, shape, weight)
    _check_floating("rms_norm", input)
    x = input.to(compute_dtype(input.dtype))
    dims = list(range(input.dim() - len(shape), input.dim()))
    ms = x.square().mean(dim=dims, keepdim=True)
    y = x / torch.sqrt(ms + rms_eps(input.dtype, eps))
    if weight is not None:
        y = y * weight.to(torch.promote_types(y.dtype, weight.dtype))
    return y.to(input.dtype)


# --------------------------------------------------------------------------------------
# GroupNorm
# --------------------------------------------------------------------------------------
def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""Group normalisation: the C channels of each sample are split into ``num_groups``
    contiguous groups of C/G channels; statistics per sample and group, over the group's
    channels and all spatial positions.

    .. math::

        \mu_{ng} = \frac{1}{|S_g|}\sum_{c\in g,\,s} x_{ncs},\quad
        \sigma_{ng}^2 = \frac{1}{|S_g|}\sum_{c\in g,\,s}(x_{ncs}-\mu_{ng})^2,\quad
        y_{ncs} = \gamma_c\frac{x_{ncs}-\mu_{ng}}{\sqrt{\sigma_{ng}^2+\epsilon}}+\beta_c

    :math:`\gamma,\beta` are per channel. ``num_groups=1`` is LayerNorm over (C, \*) without
    its per-element affine; ``num_groups=C`` is InstanceNorm.

    Lesson 03.
    """
    if input.dim() < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.dim()}: "
            "group_norm expects an input of shape (N, C, *)"
        )
    n, c = input.shape[0], input.shape[1]
    _verify_batch_size([n * c // num_groups, num_groups] + list(input.shape[2:]))
    _check_arg("group_norm", "num_groups", 2, num_groups, "int")
    _check_arg("group_norm", "eps", 5, eps, "float")
    if c % num_groups != 0:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {_size(input)} and num_groups={num_groups}: {c} channels cannot be split "
            f"into {num_groups} equal groups"
        )
    for pname, p in (("weight", weight), ("bias", bias)):
        if p is not None and (p.dim() != 1 or p.numel() != c):
            raise RuntimeError(
                f"Expected {pname} to be a vector of size equal to the number of channels in "
                f"input, but got {pname} of shape {_size(p)} and input of shape {_size(input)}"
            )
    _check_floating("group_norm", input)
    _check_param_dtype("group_norm", input, weight=weight, bias=bias)

    x = input.to(compute_dtype(input.dtype))
    per_group = (c // num_groups) * math.prod(input.shape[2:])
    grouped = x.reshape(n, num_groups, per_group)  # explicit sizes: works for empty batches
    _, centred, var = centred_moments(grouped, [2])
    y = (centred / torch.sqrt(var + eps)).reshape(input.shape)
    return _affine(y, weight, bias, [1, c] + [1] * (input.dim() - 2)).to(input.dtype)


# --------------------------------------------------------------------------------------
# One formula for all four (Wu & He 2018, section 3.1)
# --------------------------------------------------------------------------------------
def index_set_norm(input: Tensor, num_groups: int, across_batch: bool,
                   eps: float = 1e-5) -> Tensor:
    r"""Normalise an (N, C, \*) input over the index set :math:`S_i` of Wu & He (2018, eq. 2),
    without affine parameters:

    .. math::

        \hat x_i = \frac{x_i - \mu_i}{\sqrt{\sigma_i^2 + \epsilon}},\qquad
        \mu_i = \frac{1}{m}\sum_{k\in S_i} x_k,\qquad
        \sigma_i^2 = \frac{1}{m}\sum_{k\in S_i}(x_k - \mu_i)^2 .

    The input is viewed as (N, G, C/G, spatial); :math:`S_i` is the group of element
    :math:`i` (its C/G channels and all spatial positions), in the same sample, or in every
    sample when ``across_batch``. The four norms are four choices:

    ====================  ==============  ==============
    norm                  ``num_groups``  ``across_batch``
    ====================  ==============  ==============
    BatchNorm (training)  C               True
    LayerNorm (C, \*)     1               False
    InstanceNorm          C               False
    GroupNorm             G               False
    ====================  ==============  ==============

    Lesson 03.
    """
    if input.dim() < 2:
        raise RuntimeError(f"index_set_norm expects (N, C, *) input, got size {_size(input)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(
            f"index_set_norm: {c} channels cannot be split into num_groups={num_groups} groups")
    x = input.to(compute_dtype(input.dtype))
    view = x.reshape(n, num_groups, c // num_groups, math.prod(input.shape[2:]))
    dims = [0, 2, 3] if across_batch else [2, 3]
    _, centred, var = centred_moments(view, dims)
    return (centred / torch.sqrt(var + eps)).reshape(input.shape).to(input.dtype)


def adaptive_instance_norm(content: Tensor, style: Tensor, eps: float = 1e-5) -> Tensor:
    r"""Adaptive instance normalisation (Huang & Belongie 2017, section 5) of (N, C, \*) tensors:
    normalise each channel of ``content`` by its own mean and standard deviation over the
    spatial dims, then give it the mean and standard deviation of the same channel of
    ``style``:

    .. math::

        \mathrm{AdaIN}(x, y) = \sigma(y)\,\frac{x - \mu(x)}{\sigma(x)} + \mu(y)

    with :math:`\sigma(x) = \sqrt{\mathrm{Var}(x) + \epsilon}` (biased variance). ``style``
    must have the same N and C (its spatial size may differ).

    Lesson 03.
    """
    if content.dim() < 3 or style.dim() < 3 or content.shape[:2] != style.shape[:2]:
        raise RuntimeError(
            "adaptive_instance_norm expects (N, C, *spatial) content and style with the same N "
            f"and C, got content {_size(content)} and style {_size(style)}")
    x = content.to(compute_dtype(content.dtype))
    y = style.to(compute_dtype(style.dtype))
    _, centred, vx = centred_moments(x, range(2, x.dim()))
    my, vy = moments(y, range(2, y.dim()))
    return (torch.sqrt(vy + eps) * centred / torch.sqrt(vx + eps) + my).to(content.dtype)
