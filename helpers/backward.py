r"""Hand-derived backward passes (closed form, no autograd inside).

Every mean-and-variance norm has the same backward. Over the set of :math:`m` elements that
share one mean :math:`\mu` and one inverse standard deviation
:math:`r = 1/\sqrt{\sigma^2+\epsilon}`, with :math:`\hat x = (x-\mu)\,r` and
:math:`g = \partial L/\partial \hat x = \gamma \cdot \partial L/\partial y`:

.. math::

    \frac{\partial L}{\partial x} = r\left(g - \overline{g} - \hat x\,\overline{g\,\hat x}\right)
    = \frac{r}{m}\left(m\,g - \sum g - \hat x \sum g\,\hat x\right)

where the bars are means over the set. So the input gradient sums to zero over the set and
is orthogonal to :math:`\hat x` there. The parameter gradients sum over everything that
shares a parameter: :math:`\partial L/\partial\gamma = \sum \partial L/\partial y\cdot\hat x`,
:math:`\partial L/\partial\beta = \sum \partial L/\partial y`.

RMSNorm has no mean: with :math:`r = 1/\sqrt{\overline{x^2}+\epsilon}` and :math:`\hat x = x\,r`,

.. math:: \frac{\partial L}{\partial x} = r\left(g - \hat x\,\overline{g\,\hat x}\right).

Each function returns ``(grad_input, grad_weight, grad_bias)``; the parameter gradients are
``None`` when ``weight`` is ``None``, and ``grad_bias`` is always ``None`` for RMSNorm.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .functional import _as_shape, centred_moments, compute_dtype, rms_eps

__all__ = ["batch_norm_backward", "layer_norm_backward", "group_norm_backward",
           "rms_norm_backward"]


def _mean_var_backward(g: Tensor, xhat: Tensor, rstd: Tensor, dims: list[int]) -> Tensor:
    r"""dL/dx = r * (g - mean(g) - xhat * mean(g * xhat)), means over ``dims``."""
    return rstd * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))


def _normalise(x: Tensor, dims: list[int], eps: float) -> tuple[Tensor, Tensor]:
    _, centred, var = centred_moments(x, dims)
    rstd = 1.0 / torch.sqrt(var + eps)
    return centred * rstd, rstd


def _trailing(grad_output: Tensor, input: Tensor, normalized_shape):
    """Compute-dtype copies of input and grad_output, the normalised (trailing) dims and the
    leading dims that parameter gradients sum over."""
    shape = _as_shape(normalized_shape)
    ct = compute_dtype(input.dtype)
    dims = list(range(input.dim() - len(shape), input.dim()))
    lead = list(range(input.dim() - len(shape)))
    return input.to(ct), grad_output.to(ct), dims, lead


def _sum_lead(t: Tensor, lead: list[int]) -> Tensor:
    return t.sum(lead) if lead else t


def _out(grad_input: Tensor, grad_weight, grad_bias, input: Tensor, weight):
    grad_input = grad_input.to(input.dtype)
    if weight is None:
        return grad_input, None, None
    return (grad_input, grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(weight.dtype))


def batch_norm_backward(grad_output: Tensor, input: Tensor, weight: Tensor | None,
                        eps: float = 1e-5):
    r"""Backward of training-mode BatchNorm (batch statistics over every dim but 1).

    .. math::

        \frac{\partial L}{\partial x} = \frac{r_c}{m}\Big(m\,g - \sum_{n,s} g
            - \hat x \sum_{n,s} g\,\hat x\Big),\quad g = \gamma_c\,\frac{\partial L}{\partial y},
        \quad \frac{\partial L}{\partial \gamma_c} = \sum_{n,s}\frac{\partial L}{\partial y}\hat x,
        \quad \frac{\partial L}{\partial \beta_c} = \sum_{n,s}\frac{\partial L}{\partial y}

    with :math:`m = N\cdot\prod(\text{spatial})` and :math:`r_c = 1/\sqrt{\sigma_c^2+\epsilon}`.

    Lessons 01, 12.
    """
    ct = compute_dtype(input.dtype)
    x, dy = input.to(ct), grad_output.to(ct)
    c = input.shape[1]
    dims = [0] + list(range(2, input.dim()))
    shape = [1, c] + [1] * (input.dim() - 2)
    xhat, rstd = _normalise(x, dims, eps)
    g = dy if weight is None else dy * weight.to(ct).reshape(shape)
    grad_input = _mean_var_backward(g, xhat, rstd, dims)
    grad_weight = (dy * xhat).sum(dims)
    grad_bias = dy.sum(dims)
    return _out(grad_input, grad_weight, grad_bias, input, weight)


def layer_norm_backward(grad_output: Tensor, input: Tensor, normalized_shape: Sequence[int],
                        weight: Tensor | None, eps: float = 1e-5):
    r"""Backward of LayerNorm over the trailing ``normalized_shape`` dims (H elements).

    .. math::

        \frac{\partial L}{\partial x} = r\Big(g - \tfrac{1}{H}\sum_i g_i
            - \hat x\,\tfrac{1}{H}\sum_i g_i\hat x_i\Big),\quad g = \gamma\odot\frac{\partial L}{\partial y}

    :math:`\partial L/\partial\gamma` and :math:`\partial L/\partial\beta` sum over the
    leading (batch, time) dims and have shape ``normalized_shape``.

    Lessons 02, 12.
    """
    x, dy, dims, lead = _trailing(grad_output, input, normalized_shape)
    xhat, rstd = _normalise(x, dims, eps)
    g = dy if weight is None else dy * weight.to(x.dtype)
    grad_input = _mean_var_backward(g, xhat, rstd, dims)
    grad_weight = _sum_lead(dy * xhat, lead)
    grad_bias = _sum_lead(dy, lead)
    return _out(grad_input, grad_weight, grad_bias, input, weight)


def group_norm_backward(grad_output: Tensor, input: Tensor, num_groups: int,
                        weight: Tensor | None, eps: float = 1e-5):
    r"""Backward of GroupNorm: the mean-and-variance backward over each (sample, group) set
    of :math:`m = (C/G)\cdot\prod(\text{spatial})` elements, with the per-channel
    :math:`\gamma_c` folded into :math:`g` first.

    .. math::

        \frac{\partial L}{\partial x} = r_{ng}\Big(g - \overline{g} - \hat x\,\overline{g\hat x}\Big),\quad
        \frac{\partial L}{\partial\gamma_c} = \sum_{n,s}\frac{\partial L}{\partial y}\hat x,\quad
        \frac{\partial L}{\partial\beta_c} = \sum_{n,s}\frac{\partial L}{\partial y}

    Lesson 03.
    """
    ct = compute_dtype(input.dtype)
    x, dy = input.to(ct), grad_output.to(ct)
    n, c = input.shape[0], input.shape[1]
    shape = [1, c] + [1] * (input.dim() - 2)
    per_group = input.numel() // max(n * num_groups, 1)
    xhat, rstd = _normalise(x.reshape(n, num_groups, per_group), [2], eps)
    xhat_full = xhat.reshape(input.shape)
    g = dy if weight is None else dy * weight.to(ct).reshape(shape)
    grad_input = _mean_var_backward(g.reshape(n, num_groups, per_group), xhat, rstd, [2])
    red = [0] + list(range(2, input.dim()))
    grad_weight = (dy * xhat_full).sum(red)
    grad_bias = dy.sum(red)
    return _out(grad_input.reshape(input.shape), grad_weight, grad_bias, input, weight)


def rms_norm_backward(grad_output: Tensor, input: Tensor, normalized_shape: Sequence[int],
                      weight: Tensor | None, eps: float | None = None):
    r"""Backward of RMSNorm over the trailing ``normalized_shape`` dims (H elements).

    .. math::

        r = \frac{1}{\sqrt{\tfrac{1}{H}\sum_i x_i^2+\epsilon}},\quad \hat x = x\,r,\quad
        \frac{\partial L}{\partial x} = r\Big(g - \hat x\,\tfrac{1}{H}\sum_i g_i\hat x_i\Big),
        \quad g = \mathbf{g}\odot\frac{\partial L}{\partial y}

    :math:`\partial L/\partial\mathbf{g} = \sum \partial L/\partial y\cdot\hat x` over the
    leading dims. There is no bias, so ``grad_bias`` is ``None``.

    Lessons 04, 12.
    """
    x, dy, dims, lead = _trailing(grad_output, input, normalized_shape)
    rstd = 1.0 / torch.sqrt(x.square().mean(dims, keepdim=True) + rms_eps(input.dtype, eps))
    xhat = x * rstd
    g = dy if weight is None else dy * weight.to(x.dtype)
    grad_input = rstd * (g - xhat * (g * xhat).mean(dims, keepdim=True))
    grad_weight = _sum_lead(dy * xhat, lead)
    return _out(grad_input, grad_weight, None, input, weight)
