r"""Drop-in normalisation modules built on :mod:`helpers.functional`.

Class names, constructor signatures (names, order, defaults, ``device``/``dtype``, the
keyword-only ``bias``), parameter and buffer names and shapes, ``repr`` and train/eval
behaviour are those of ``torch.nn`` in the pinned torch, so a ``state_dict`` loads both
ways with ``strict=True`` and a model can swap one for the other. The math lives in
:mod:`helpers.functional`; these classes hold the bookkeeping (parameters, buffers,
``momentum=None``, ``num_batches_tracked``, ``training``).
"""

from __future__ import annotations

import numbers
import warnings

import torch
from torch import Tensor, nn
from torch.nn import init
from torch.nn.parameter import Parameter

from . import functional as HF

__all__ = [
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LayerNorm", "GroupNorm", "RMSNorm", "DyT",
]


def _init_affine(module: nn.Module, shape, affine: bool, bias: bool, factory_kwargs) -> None:
    """Register ``weight`` (and ``bias`` unless ``bias=False``) of ``shape`` when ``affine``,
    else register both as ``None``: the parameter layout of every torch norm layer."""
    if affine:
        module.weight = Parameter(torch.empty(shape, **factory_kwargs))
        if bias:
            module.bias = Parameter(torch.empty(shape, **factory_kwargs))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module: nn.Module) -> None:
    """weight <- 1, bias <- 0 (where present), as torch initialises them."""
    if module.weight is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


class _NormBase(nn.Module):
    """Parameters and buffers shared by BatchNorm and InstanceNorm.

    ``weight``/``bias``: (C,) parameters when ``affine`` (``bias`` may be turned off);
    ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked`` (a long
    scalar) buffers when ``track_running_stats``, else registered as ``None``.
    """

    _version = 2  # version 2 added num_batches_tracked (same as torch)
    _accepted_ranks: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _init_affine(self, num_features, affine, bias, factory_kwargs)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory_kwargs))
            self.register_buffer("running_var", torch.ones(num_features, **factory_kwargs))
            self.register_buffer("num_batches_tracked",
                                 torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self._accepted_ranks:
            expected = " or ".join(f"{r}D" for r in self._accepted_ranks)
            raise ValueError(
                f"expected {expected} input (got {input.dim()}D input): "
                f"{type(self).__name__} takes {self._shape_hint}, got input of size "
                f"{list(input.shape)}"
            )

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # checkpoints older than version 2 have no num_batches_tracked: keep the module's
            # own count (0 for a fresh module), as torch does
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (
                    self.num_batches_tracked
                    if self.num_batches_tracked is not None
                    and self.num_batches_tracked.device != torch.device("meta")
                    else torch.tensor(0, dtype=torch.long))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.shape[1] != self.num_features and (self.affine or self.track_running_stats):
            raise RuntimeError(
                f"{type(self).__name__}({self.num_features}) expected input with "
                f"{self.num_features} channels at dim 1, but got input of size "
                f"{list(input.shape)} ({input.shape[1]} channels)"
            )
        # momentum=None: cumulative average, factor 1/num_batches_tracked
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        # batch statistics in training, and in eval when there are no running statistics
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        update_buffers = not self.training or self.track_running_stats
        return HF.batch_norm(
            input,
            self.running_mean if update_buffers else None,
            self.running_var if update_buffers else None,
            self.weight, self.bias, use_batch_stats, factor, self.eps,
        )


class BatchNorm1d(_BatchNorm):
    r"""BatchNorm over a 2D (N, C) or 3D (N, C, L) input; statistics per channel over N (and L).

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta
    """
    _accepted_ranks = (2, 3)
    _shape_hint = "(N, C) or (N, C, L) with the channels at dim 1 (for (B, T, C) use .transpose(1, 2))"


class BatchNorm2d(_BatchNorm):
    r"""BatchNorm over a 4D (N, C, H, W) input; statistics per channel over N, H, W.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    Lesson 01.
    """
    _accepted_ranks = (4,)
    _shape_hint = "(N, C, H, W)"


class BatchNorm3d(_BatchNorm):
    r"""BatchNorm over a 5D (N, C, D, H, W) input; statistics per channel over N, D, H, W.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta
    """
    _accepted_ranks = (5,)
    _shape_hint = "(N, C, D, H, W)"


class _InstanceNorm(_NormBase):
    _no_batch_dim: int = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device, dtype, bias=bias)

    def _instance_norm(self, input: Tensor) -> Tensor:
        return HF.instance_norm(
            input, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,  # torch: None means no update
            self.eps,
        )

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs) -> None:
        version = local_metadata.get("version", None)
        if version is None and not self.track_running_stats:
            keys = [prefix + k for k in ("running_mean", "running_var") if prefix + k in state_dict]
            if keys:
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {' and '.join(keys)} for "
                    f"{type(self).__name__} with track_running_stats=False: remove them from the "
                    "state_dict, or construct the module with track_running_stats=True"
                )
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features"
                    f" ({self.num_features}), but got: {input.size(feature_dim)}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. "
                "You can silence this warning by not passing in num_features, "
                "which is not used because affine=False",
                stacklevel=2,
            )
        if input.dim() == self._no_batch_dim:  # unbatched input
            return self._instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    r"""InstanceNorm over (N, C, L) or unbatched (C, L): per sample and channel, over L.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta
    """
    _accepted_ranks = (2, 3)
    _no_batch_dim = 2
    _shape_hint = "(N, C, L) or unbatched (C, L)"


class InstanceNorm2d(_InstanceNorm):
    r"""InstanceNorm over (N, C, H, W) or unbatched (C, H, W): per sample and channel, over H, W.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta
    """
    _accepted_ranks = (3, 4)
    _no_batch_dim = 3
    _shape_hint = "(N, C, H, W) or unbatched (C, H, W)"


class InstanceNorm3d(_InstanceNorm):
    r"""InstanceNorm over (N, C, D, H, W) or unbatched (C, D, H, W), over D, H, W.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta
    """
    _accepted_ranks = (4, 5)
    _no_batch_dim = 4
    _shape_hint = "(N, C, D, H, W) or unbatched (C, D, H, W)"


def _tuple_shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(nn.Module):
    r"""LayerNorm over the trailing ``normalized_shape`` dims, with per-element affine.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \odot \gamma + \beta

    ``weight`` and ``bias`` have shape ``normalized_shape``; same in training and eval.

    Lesson 00.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _tuple_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _init_affine(self, self.normalized_shape, elementwise_affine, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return HF.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(nn.Module):
    r"""GroupNorm: ``num_groups`` groups of ``num_channels // num_groups`` channels each.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    Statistics per sample and group; ``weight`` and ``bias`` are per channel.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _init_affine(self, num_channels, affine, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return HF.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(nn.Module):
    r"""RMSNorm over the trailing ``normalized_shape`` dims, with a learnable gain and no bias.

    .. math:: y = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \epsilon}} \odot g

    ``eps=None``: ``torch.finfo(float32).eps`` for float16/bfloat16/float32 inputs, float64's
    for float64.

    Lesson 04.
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _tuple_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(torch.empty(self.normalized_shape, **factory_kwargs))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return HF.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class DyT(nn.Module):
    r"""Dynamic Tanh (Zhu, Chen, He, LeCun & Liu 2025, *Transformers without Normalization*,
    arXiv:2503.10622, section 3), a drop-in replacement for a LayerNorm or RMSNorm layer:

    .. math:: \mathrm{DyT}(x) = \gamma \odot \tanh(\alpha x) + \beta

    ``alpha`` is **one** learnable scalar per layer (shape (1,)), initialised to
    ``alpha_init_value`` (0.5, the authors' default for non-LLM models); ``weight`` (γ, ones)
    and ``bias`` (β, zeros) are per element of ``normalized_shape``, as in LayerNorm. No
    statistics are computed: each element is squashed on its own. ``channels_last=False``
    applies γ and β along dim 1 of an (N, C, H, W) input. Parameter names and initial values
    follow the authors' ``dynamic_tanh.py`` (repository jiachenzhu/DyT).
    """

    def __init__(self, normalized_shape, alpha_init_value: float = 0.5,
                 elementwise_affine: bool = True, bias: bool = True, channels_last: bool = True,
                 device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _tuple_shape(normalized_shape)
        if not channels_last and len(self.normalized_shape) != 1:
            raise ValueError("channels_last=False needs a single channel dimension")
        self.alpha_init_value = float(alpha_init_value)
        self.elementwise_affine = elementwise_affine
        self.channels_last = channels_last
        self.alpha = Parameter(torch.empty(1, **factory_kwargs))
        _init_affine(self, self.normalized_shape, elementwise_affine, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.alpha, self.alpha_init_value)
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.tanh(self.alpha * x)
        if self.weight is None:
            return y
        w, b = self.weight, self.bias
        if not self.channels_last:  # (N, C, ...) input: gamma and beta along dim 1
            shape = (-1,) + (1,) * (x.dim() - 2)
            w = w.view(shape)
            b = None if b is None else b.view(shape)
        y = y * w
        return y if b is None else y + b

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, alpha_init_value={self.alpha_init_value}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}, "
                f"channels_last={self.channels_last}")
