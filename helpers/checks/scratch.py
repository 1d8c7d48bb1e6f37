r"""A guard for from-scratch exercises: while the learner's function runs, PyTorch's own
normalisation functions, the modules built on them, BatchNorm folding and autograd raise
:class:`UsedTorchFunction` instead of computing the answer, so a checker can say "this calls
torch" rather than "✔".

Two mechanisms, so that neither ``F.batch_norm`` nor a name imported earlier
(``from torch.nn.functional import group_norm``) slips through:

- a :class:`torch.overrides.TorchFunctionMode` sees every call of a torch function on
  tensors, whatever name it was reached by, and refuses the normalisation functions
  (``torch.nn.functional.batch_norm``, ``layer_norm``, ``group_norm``, ``instance_norm``,
  ``rms_norm`` and their ``torch.*`` kernels, synchronised BatchNorm's ``torch.batch_norm_*``
  kernels) and ``Tensor.backward``;
- :func:`unittest.mock.patch` replaces the entry points that do not pass through that mode
  (``torch.autograd.grad``, ``torch.autograd.backward``, ``torch.func.grad``/``vjp``/...,
  ``torch.autograd.functional.*``, ``torch.nn.utils.fusion.*``) for the duration of the call.

Used by :func:`helpers.drills.grade` for every drill of lesson 12.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable
from unittest import mock

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["UsedTorchFunction", "from_scratch", "guard"]


class UsedTorchFunction(RuntimeError):
    """Raised inside a guarded call when it reaches one of torch's own implementations; the
    checker engine reads :attr:`mistake` and reports ``used_torch_function``."""

    mistake = "used_torch_function"


_FUNCTIONS = {
    F.batch_norm: "torch.nn.functional.batch_norm", F.layer_norm: "torch.nn.functional.layer_norm",
    F.group_norm: "torch.nn.functional.group_norm",
    F.instance_norm: "torch.nn.functional.instance_norm",
    F.rms_norm: "torch.nn.functional.rms_norm",
    torch.batch_norm: "torch.batch_norm", torch.layer_norm: "torch.layer_norm",
    torch.group_norm: "torch.group_norm", torch.instance_norm: "torch.instance_norm",
    torch.rms_norm: "torch.rms_norm", torch.native_batch_norm: "torch.native_batch_norm",
    torch.native_layer_norm: "torch.native_layer_norm",
    torch.native_group_norm: "torch.native_group_norm",
    torch.Tensor.backward: "Tensor.backward()", torch.autograd.grad: "torch.autograd.grad",
}
# synchronised BatchNorm's own kernels (what nn.SyncBatchNorm calls on a GPU)
_FUNCTIONS.update({getattr(torch, name): f"torch.{name}" for name in (
    "batch_norm_stats", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
    "batch_norm_elemt", "batch_norm_backward_reduce", "batch_norm_backward_elemt")
    if hasattr(torch, name)})
_PATCHED = [
    (torch.autograd, "grad"), (torch.autograd, "backward"),
    (torch.autograd.functional, "vjp"), (torch.autograd.functional, "jacobian"),
    (torch.autograd.functional, "vhp"), (torch.autograd.functional, "jvp"),
    (torch.func, "grad"), (torch.func, "grad_and_value"), (torch.func, "vjp"),
    (torch.func, "jacrev"), (torch.func, "jacfwd"),
    (torch.nn.utils.fusion, "fuse_linear_bn_weights"), (torch.nn.utils.fusion, "fuse_linear_bn_eval"),
    (torch.nn.utils.fusion, "fuse_conv_bn_weights"), (torch.nn.utils.fusion, "fuse_conv_bn_eval"),
]


class _Refuse(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = _FUNCTIONS.get(func)
        if name is not None:
            raise UsedTorchFunction(f"calls {name}")
        return func(*args, **(kwargs or {}))


def _refuser(name: str):
    def refuse(*args, **kwargs):
        raise UsedTorchFunction(f"calls {name}")
    return refuse


@contextlib.contextmanager
def guard():
    """Within the block, torch's normalisation functions, BatchNorm folding and autograd
    raise :class:`UsedTorchFunction`."""
    with contextlib.ExitStack() as stack:
        for owner, attr in _PATCHED:
            if hasattr(owner, attr):
                name = f"{owner.__name__}.{attr}"
                stack.enter_context(mock.patch.object(owner, attr, _refuser(name)))
        stack.enter_context(_Refuse())
        yield


def from_scratch(fn: Callable) -> Callable:
    """``fn`` wrapped so that each call runs inside :func:`guard`."""
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        with guard():
            return fn(*args, **kwargs)
    return guarded
