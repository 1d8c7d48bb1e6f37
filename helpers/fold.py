r"""Folding a BatchNorm layer into the linear or convolution layer before it, for inference.

In evaluation mode BatchNorm is a fixed per-channel affine map,

.. math:: \mathrm{BN}(z) = \gamma\,\frac{z - \hat\mu}{\sqrt{\hat\sigma^2 + \epsilon}} + \beta
          = s\,z + (\beta - s\,\hat\mu), \qquad s = \frac{\gamma}{\sqrt{\hat\sigma^2 + \epsilon}},

so after a layer :math:`z = W x + b` it can be absorbed into the weights:

.. math:: W' = s \odot W \ (\text{row } c \text{ scaled by } s_c), \qquad b' = s\,(b - \hat\mu) + \beta .

One layer and one pass over memory instead of two. Valid only with running statistics
(``track_running_stats=True``) and only for inference: in training BatchNorm uses the
statistics of each batch.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["fold_batch_norm"]

_FOLDABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def fold_batch_norm(layer: nn.Module, bn: nn.Module) -> nn.Module:
    r"""Return a copy of ``layer`` (``nn.Linear`` or ``nn.Conv{1,2,3}d``) whose weight and
    bias include the evaluation-mode BatchNorm ``bn`` that follows it:
    ``fold_batch_norm(layer, bn)(x) == bn.eval()(layer(x))``.

    ``bn`` may be ``torch.nn.BatchNorm{1,2,3}d`` or ``helpers.norms.BatchNorm{1,2,3}d``; it
    must track running statistics and have one channel per output channel of ``layer``.

    Lessons 01, 07, 12.
    """
    if not isinstance(layer, _FOLDABLE):
        raise TypeError(f"can fold into nn.Linear or nn.Conv1d/2d/3d, not {type(layer).__name__}")
    mean, var = getattr(bn, "running_mean", None), getattr(bn, "running_var", None)
    if mean is None or var is None:
        raise ValueError(
            "folding needs running statistics: this BatchNorm has track_running_stats=False, "
            "so it normalises with batch statistics even in eval mode and is not a fixed map")
    out_channels = layer.weight.shape[0]
    if mean.numel() != out_channels:
        raise ValueError(
            f"{type(bn).__name__} has {mean.numel()} channels but {type(layer).__name__} has "
            f"{out_channels} outputs")
    with torch.no_grad():
        scale = torch.rsqrt(var + bn.eps)
        if bn.weight is not None:
            scale = scale * bn.weight
        shift = -mean * scale
        if bn.bias is not None:
            shift = shift + bn.bias
        folded = copy.deepcopy(layer)
        folded.weight.mul_(scale.reshape(-1, *([1] * (layer.weight.dim() - 1))))
        bias = layer.bias if layer.bias is not None else torch.zeros_like(mean)
        new_bias = bias * scale + shift
        if folded.bias is None:
            folded.bias = nn.Parameter(new_bias.to(folded.weight.dtype))
        else:
            folded.bias.copy_(new_bias)
    return folded
