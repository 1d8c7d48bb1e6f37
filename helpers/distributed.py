r"""Synchronised BatchNorm built from ``torch.distributed``, and a small launcher that runs
it in several local processes (gloo backend, CPU, traffic over the loopback interface).

**The math.** Rank :math:`k` of :math:`W` holds a shard of :math:`n_k` values per channel
(batch times spatial positions). BatchNorm over the whole batch needs, per channel, the
global count, mean and biased variance

.. math::

    N = \sum_k n_k,\qquad \mu = \frac{1}{N}\sum_k n_k\,\mu_k,\qquad
    \sigma^2 = \frac{M_2}{N},\qquad
    M_2 = \sum_k \Big(M_{2,k} + n_k\,(\mu_k-\mu)^2\Big)

where :math:`\mu_k` and :math:`M_{2,k}=\sum_{i\in k}(x_i-\mu_k)^2` are each shard's own mean
and sum of squared deviations (Chan, Golub & LeVeque's merge of partial moments). Each rank
computes its three per-channel numbers in two passes, the ranks exchange them (one
``all_gather`` of :math:`2C+1` numbers each), and every rank merges them identically. The
alternative, one ``all_reduce`` of :math:`(n_k, \sum x, \sum x^2)` and
:math:`\sigma^2 = \overline{x^2} - \mu^2`, is exact in exact arithmetic but cancels
catastrophically when :math:`|\mu| \gg \sigma` (``stats="sumsq"`` keeps it for comparison).

The backward pass of BatchNorm over the whole batch, with :math:`\hat x = (x-\mu)\,r`,
:math:`r = 1/\sqrt{\sigma^2+\epsilon}`, is

.. math::

    \frac{\partial L}{\partial x_i} = \gamma\, r\left(\frac{\partial L}{\partial y_i}
        - \frac{1}{N}\sum_{\text{all}} \frac{\partial L}{\partial y}
        - \hat x_i\,\frac{1}{N}\sum_{\text{all}} \frac{\partial L}{\partial y}\,\hat x\right)

so each rank needs only two per-channel sums over *all* ranks: one ``all_reduce`` of
:math:`2C` numbers. The parameter gradients :math:`\sum \partial L/\partial y\,\hat x` and
:math:`\sum \partial L/\partial y` are returned as each rank's *local* sums, as
``torch.nn.SyncBatchNorm`` does: data-parallel training (DDP) all-reduces every parameter's
gradient afterwards anyway. The running statistics are updated with the global mean and the
global *unbiased* variance :math:`M_2/(N-1)`, identically on every rank.

**The launcher.** :func:`launch` starts ``world_size`` processes with the ``spawn`` start
method (the default on macOS and Windows, and safe from a Jupyter kernel), joins them in a
gloo process group whose rendezvous is ``tcp://127.0.0.1:port``, runs a module-level
function in each, and returns the results in rank order. The traffic goes over the loopback
interface; the rendezvous store (rank 0's TCPStore) listens on the port on all interfaces
while the run lasts. A taken port is reported before any
process starts (:class:`PortInUseError`); a worker's exception is re-raised in the parent
with its type, message and traceback (:class:`WorkerError`) and the other workers are
stopped at once, so a failure never leaves the parent waiting; an overall ``timeout`` bounds
everything else. Every worker leaves the group with ``destroy_process_group`` after its
result is delivered, and the parent waits for the workers to exit (exit code 0) before it
returns. On macOS, :func:`_check_port` may not notice a port another program holds on the
wildcard address (BSD ``SO_REUSEADDR`` semantics); the failure then arrives as a
:class:`WorkerError` from rank 0, not as a hang.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import queue as queue_module
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import Tensor, nn

from . import functional as HF
from .functional import merge_moments  # lesson 08 calls it D.merge_moments
from . import norms as HN

__all__ = [
    "channel_sums", "local_moments", "merge_moments", "moments_from_sums", "SyncBatchNormFunction",
    "SyncBatchNorm", "convert_sync_batchnorm", "CommunicationLog", "payload_bytes",
    "free_port", "PortInUseError", "WorkerError", "launch", "make_case",
    "compare_sync_batch_norm", "check_sync_batch_norm", "per_shard_differences",
    "DIFFERENCE_KEYS", "resnet50_layout", "failing_worker", "LaunchResults", "one_process_group",
]

STATS_MODES = ("merged", "sumsq")
#: seconds :func:`launch` allows a run by default (generous: on a loaded two-core machine
#: starting the workers alone can take tens of seconds; a failing worker is reported at once)
DEFAULT_TIMEOUT = 300.0
#: seconds :func:`launch` waits for workers to exit on their own after a successful run
JOIN_TIMEOUT = 30.0
DIFFERENCE_KEYS = ("output", "grad_input", "grad_weight", "grad_bias", "running_mean",
                   "running_var")


# --------------------------------------------------------------------------------------
# per-channel moments: local, merged, and from raw sums
# --------------------------------------------------------------------------------------
def channel_sums(x: Tensor) -> Tensor:
    r"""Per channel (dim 1) of an (N, C, \*) tensor, the sum :math:`\sum x` over the batch and
    spatial dims, shape (C,), in the tensor's own dtype, added pairwise in a fixed order
    (zero-padded to a power of two, then adjacent pairs added level by level). Each elementwise addition is correctly
    rounded, so the result is bit-for-bit the same on every CPU, whereas the order of
    ``Tensor.sum`` (and so its last bits in float32) depends on the CPU's vector width.

    Lesson 08."""
    c = x.shape[1]
    v = x.transpose(0, 1).reshape(c, -1)
    n = v.shape[1]
    if n == 0:
        return x.new_zeros(c)
    width = 1 << (n - 1).bit_length()  # the next power of two; adding zeros is exact
    if width > n:
        v = torch.cat([v, v.new_zeros(c, width - n)], 1)
    while v.shape[1] > 1:
        v = v[:, 0::2] + v[:, 1::2]
    return v[:, 0].clone()


def local_moments(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""Per channel (dim 1) of an (N, C, \*) shard: the count :math:`n` (a 0-dim tensor),
    the mean :math:`\mu` and the sum of squared deviations :math:`M_2 = \sum (x-\mu)^2`,
    each of shape (C,), computed in two passes with :func:`channel_sums`. An empty shard
    gives :math:`n = 0`, :math:`\mu = 0`, :math:`M_2 = 0`, which the merge ignores.

    Lesson 08."""
    c = x.shape[1]
    n = x.numel() // c if c else 0
    count = torch.tensor(float(n), dtype=x.dtype, device=x.device)
    if n == 0:
        zeros = x.new_zeros(c)
        return count, zeros, zeros.clone()
    mean = channel_sums(x) / n
    centred = x - mean.reshape([1, c] + [1] * (x.dim() - 2))
    return count, mean, channel_sums(centred.square())


def moments_from_sums(count: Tensor, total: Tensor, total_sq: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""Moments from the raw sums :math:`N`, :math:`S = \sum x`, :math:`Q = \sum x^2`:

    .. math:: \mu = S/N,\qquad M_2 = Q - S^2/N

    Exact in exact arithmetic, but when :math:`|\mu| \gg \sigma` both terms of :math:`M_2`
    are about :math:`N\mu^2` and their difference is lost to rounding (it can even come out
    negative).

    Lesson 08."""
    mean = total / count
    return count.reshape(()), mean, total_sq - total * mean


# --------------------------------------------------------------------------------------
# communication, with a log of what was sent
# --------------------------------------------------------------------------------------
class CommunicationLog:
    """Records every collective the synchronised BatchNorm issues in this process, as
    ``(name, number of elements, bytes per element)``. Used to *measure* the traffic per
    layer and step rather than to assert it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def record(self, name: str, t: Tensor) -> None:
        """Log one collective ``name`` sending tensor ``t``."""
        self.calls.append((name, t.numel(), t.element_size()))

    def bytes(self, name: str | None = None) -> int:
        """Total payload in bytes (of the calls named ``name``, or of all of them)."""
        return sum(n * size for op, n, size in self.calls if name is None or op == name)

    def clear(self) -> None:
        """Forget the calls logged so far."""
        self.calls.clear()


LOG = CommunicationLog()


def _synchronised(group) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def _all_gather(t: Tensor, group) -> Tensor:
    """Stack every rank's ``t`` along a new dim 0 (just ``t[None]`` without a process group)."""
    if not _synchronised(group):
        return t.unsqueeze(0)
    LOG.record("all_gather", t)
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.stack(parts)


def _all_reduce(t: Tensor, group) -> Tensor:
    """The sum of every rank's ``t`` (just ``t`` without a process group)."""
    if not _synchronised(group):
        return t
    LOG.record("all_reduce", t)
    t = t.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return t


def payload_bytes(num_channels: int, world_size: int, itemsize: int = 4) -> dict[str, int]:
    r"""Bytes one BatchNorm layer with ``num_channels`` channels exchanges per training step
    in this implementation (and in ``torch.nn.SyncBatchNorm``, which packs the same sizes):

    - ``forward_sent``: each rank's all_gather message, :math:`(2C+1)` numbers;
    - ``forward_received``: what each rank receives, :math:`(W-1)(2C+1)` numbers (through a
      ring, each rank also sends that many, passing the other ranks' messages on);
    - ``backward``: the all_reduce message, :math:`2C` numbers (a ring all-reduce sends and
      receives :math:`2(W-1)/W` times this per rank).

    Lesson 08.
    """
    if num_channels < 1 or world_size < 1 or itemsize < 1:
        raise ValueError(f"payload_bytes needs num_channels, world_size and itemsize >= 1, got "
                         f"{num_channels}, {world_size}, {itemsize}")
    fwd = (2 * num_channels + 1) * itemsize
    return {"forward_sent": fwd, "forward_received": (world_size - 1) * fwd,
            "backward": 2 * num_channels * itemsize}


# --------------------------------------------------------------------------------------
# the autograd Function and the module
# --------------------------------------------------------------------------------------
class SyncBatchNormFunction(torch.autograd.Function):
    r"""Training-mode BatchNorm whose statistics cover the batch of every rank in ``group``.

    ``apply(input, weight, bias, running_mean, running_var, eps, momentum, group, stats)``.
    Forward: per-channel :math:`(n_k, \mu_k, M_{2,k})` all-gathered and merged
    (``stats="merged"``), or :math:`(n_k, \sum x, \sum x^2)` all-reduced
    (``stats="sumsq"``); :math:`y = \gamma (x-\mu)/\sqrt{M_2/N+\epsilon} + \beta`; running
    statistics updated in place with :math:`\mu` and :math:`M_2/(N-1)`. Backward: the
    per-channel :math:`\sum \partial L/\partial y` and :math:`\sum \partial L/\partial y\,\hat x`
    all-reduced, then the formula of the module docstring. Without an initialised process
    group (or with one rank) it is plain BatchNorm of the local batch.

    Lesson 08.
    """

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, group,
                stats="merged"):
        if stats not in STATS_MODES:
            raise ValueError(f"stats must be one of {STATS_MODES}, got {stats!r}")
        c = input.shape[1]
        shape = [1, c] + [1] * (input.dim() - 2)
        x = input.to(HF.compute_dtype(input.dtype))
        count, mean, m2 = local_moments(x)
        if stats == "merged":
            packed = _all_gather(torch.cat([count.reshape(1), mean, m2]), group)  # (W, 2C+1)
            count, mean, m2 = merge_moments(packed[:, 0], packed[:, 1:c + 1], packed[:, c + 1:])
        else:
            packed = _all_reduce(torch.cat([count.reshape(1), channel_sums(x),
                                            channel_sums(x.square())]), group)
            count, mean, m2 = moments_from_sums(packed[0], packed[1:c + 1], packed[c + 1:])
        n = int(count.item())
        if n <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got {n} value(s) per "
                f"channel over all ranks (local input size {list(input.shape)})")
        rstd = 1.0 / torch.sqrt(m2 / n + eps)
        xhat = (x - mean.reshape(shape)) * rstd.reshape(shape)
        y = HF._affine(xhat, weight, bias, shape)
        HF._update_running(running_mean, mean, momentum)
        HF._update_running(running_var, m2 / (n - 1), momentum)
        ctx.save_for_backward(xhat, rstd, weight)
        ctx.count, ctx.group, ctx.shape = n, group, shape
        return y.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, rstd, weight = ctx.saved_tensors
        c, shape = xhat.shape[1], ctx.shape
        dy = grad_output.to(xhat.dtype)
        sum_dy = channel_sums(dy)               # local: grad_bias of this rank
        sum_dy_xhat = channel_sums(dy * xhat)   # local: grad_weight of this rank
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            both = _all_reduce(torch.cat([sum_dy, sum_dy_xhat]), ctx.group)  # 2C numbers
            g_sum, g_xhat_sum = both[:c].reshape(shape), both[c:].reshape(shape)
            scale = rstd.reshape(shape)
            if weight is not None:
                scale = scale * weight.to(xhat.dtype).reshape(shape)
            grad_input = (scale * (dy - g_sum / ctx.count - xhat * g_xhat_sum / ctx.count)
                          ).to(grad_output.dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(grad_output.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


class SyncBatchNorm(HN._NormBase):
    r"""BatchNorm whose training statistics cover the batches of every rank of
    ``process_group`` (default: the whole world), with the constructor, parameters
    (``weight``, ``bias``), buffers (``running_mean``, ``running_var``,
    ``num_batches_tracked``) and ``repr`` of ``torch.nn.SyncBatchNorm``.

    .. math:: y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    with :math:`\mathrm{E}` and :math:`\mathrm{Var}` (biased) over the batch and spatial dims
    of all ranks. As in torch, statistics are synchronised only in training; evaluation uses
    the running statistics; without an initialised process group (or with one rank) it is
    plain BatchNorm. Unlike torch's, it runs on CPU tensors (gloo). The keyword-only
    ``stats`` chooses how statistics are combined: ``"merged"`` (default) or ``"sumsq"``.

    Lesson 08.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True, stats: str = "merged") -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        if stats not in STATS_MODES:
            raise ValueError(f"stats must be one of {STATS_MODES}, got {stats!r}")
        self.process_group = process_group
        self.stats = stats

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input): "
                             "SyncBatchNorm takes (N, C, *) with the channels at dim 1")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(
                f"SyncBatchNorm({self.num_features}) expected input with {self.num_features} "
                f"channels at dim 1, but got input of size {list(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        running_mean = self.running_mean if track else None
        running_var = self.running_var if track else None
        group = self.process_group if self.process_group is not None else (
            dist.group.WORLD if dist.is_available() and dist.is_initialized() else None)
        if not (self.training and use_batch_stats and _synchronised(group)):
            return HF.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                 use_batch_stats, factor, self.eps)
        return SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                           running_var, self.eps, factor, group, self.stats)


def convert_sync_batchnorm(module: nn.Module, process_group=None, stats: str = "merged") -> nn.Module:
    """Replace every BatchNorm layer of ``module`` (``torch.nn`` or ``helpers.norms``) by a
    :class:`SyncBatchNorm` that shares its parameters and buffers, as
    ``torch.nn.SyncBatchNorm.convert_sync_batchnorm`` does; returns the (new) module.

    Lesson 08."""
    out = module
    if isinstance(module, (nn.modules.batchnorm._BatchNorm, HN._BatchNorm)) and not isinstance(
            module, SyncBatchNorm):
        out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group,
                            bias=module.bias is not None, stats=stats)
        if module.affine:
            out.weight = module.weight
            out.bias = module.bias
        out.running_mean = module.running_mean
        out.running_var = module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.training = module.training
    for name, child in module.named_children():
        out.add_module(name, convert_sync_batchnorm(child, process_group, stats))
    return out


# --------------------------------------------------------------------------------------
# launching processes
# --------------------------------------------------------------------------------------
class PortInUseError(OSError):
    """The rendezvous port asked for is already taken on 127.0.0.1."""


class WorkerError(RuntimeError):
    """A worker process failed. The message names its rank and its exception's type and
    message; ``worker_traceback`` (also attached as a note, so it prints under the parent's
    traceback) holds the worker's own traceback and the tail of its output."""

    def __init__(self, message: str, rank: int, exc_type: str | None = None,
                 worker_traceback: str = ""):
        super().__init__(message)
        self.rank = rank
        self.exc_type = exc_type
        self.worker_traceback = worker_traceback
        if worker_traceback:
            self.add_note(worker_traceback)


#: how many free ports :func:`launch` tries when another process takes the one it picked
PORT_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it; bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_port(port: int) -> None:
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must be an integer in 1..65535 (or None to pick a free one), got {port!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if sys.platform != "win32":  # ignore sockets in TIME_WAIT, not listening ones
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise PortInUseError(
                f"port {port} on 127.0.0.1 is already in use ({e.strerror}); pass another "
                "port, or port=None to let the operating system pick a free one") from None


def _loopback_interface() -> str | None:
    """The loopback interface's name ('lo' on Linux, 'lo0' on macOS), if there is one."""
    try:
        names = {name for _, name in socket.if_nameindex()}
    except (OSError, AttributeError):
        return None
    return next((n for n in ("lo", "lo0") if n in names), None)


@contextlib.contextmanager
def one_process_group():
    """A gloo process group of one process (this one, rank 0 of 1) for the ``with`` block,
    destroyed afterwards. Rendezvous on ``tcp://127.0.0.1`` at a free port, with
    ``MASTER_ADDR=127.0.0.1`` and ``GLOO_SOCKET_IFNAME`` set to the loopback interface (unless
    already set) while the group is created, so gloo does not try to resolve the machine's
    hostname (which fails offline on some machines, with a warning on stderr). The
    environment is restored on exit. Yields the group (``dist.group.WORLD``)."""
    if dist.is_initialized():
        raise RuntimeError("a default process group is already initialised in this process")
    interface = _loopback_interface()
    settings = {"MASTER_ADDR": "127.0.0.1"}
    if interface and "GLOO_SOCKET_IFNAME" not in os.environ:
        settings["GLOO_SOCKET_IFNAME"] = interface
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                                world_size=1, timeout=timedelta(seconds=DEFAULT_TIMEOUT))
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _worker(rank: int, world_size: int, port: int, fn: Callable, args: tuple, results,
            timeout: float) -> None:
    """Runs in a spawned process: join the group, run ``fn``, report, leave the group.
    The process's stdout and stderr go to a temporary file whose tail is sent back with
    an error (so nothing a worker prints lands in the parent's, or a notebook's, output)."""
    log = tempfile.TemporaryFile(mode="w+")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    interface = _loopback_interface()
    if interface and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # keep gloo's traffic on this machine
    torch.set_num_threads(1)
    joined = False
    try:
        try:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world_size, timeout=timedelta(seconds=timeout))
            joined = True
            message = ("ok", rank, pickle.dumps(fn(rank, world_size, *args)))
        except BaseException as e:  # report everything, including KeyboardInterrupt
            log.flush()
            log.seek(0)
            output = log.read()[-2000:]
            message = ("error", rank, type(e).__name__, str(e), traceback.format_exc(), output)
        results.put(message)
        # wait until the message is in the pipe: only then leave the group, so a peer that
        # notices the departure ("connection closed") cannot report before this rank does
        results.close()
        results.join_thread()
    finally:
        if joined:
            dist.destroy_process_group()
        log.flush()


class LaunchResults(list):
    """The list of per-rank results returned by :func:`launch`, rank 0 first, with
    ``exitcodes``: every worker's exit code (0 when it left the group and exited cleanly)."""

    exitcodes: list


def launch(fn: Callable, world_size: int = 2, args: Sequence[Any] = (), *,
           port: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> LaunchResults:
    r"""Run ``fn(rank, world_size, *args)`` in ``world_size`` new processes joined in one
    gloo process group (rendezvous ``tcp://127.0.0.1:port``) and return the results, rank 0
    first (a :class:`LaunchResults` list; its ``exitcodes`` are all 0 after a clean run).

    - ``fn`` must be importable by name (defined at the top level of a module such as
      ``helpers``): the ``spawn`` start method pickles it by reference, so a function
      defined in a notebook cannot reach the workers (``ValueError``).
    - ``port=None`` picks a free port, and picks another (up to :data:`PORT_ATTEMPTS` times in
      all) if that port is taken before the rendezvous store binds it; a given port that is
      taken raises :class:`PortInUseError` before any process starts.
    - If a worker raises, or exits without a result, :class:`WorkerError` is raised here
      with its rank, exception type, message and traceback, and every other worker is
      terminated at once (they may be blocked in a collective waiting for it).
    - ``timeout`` (seconds) bounds the whole run and each collective (gloo's timeout); when
      it passes the workers are terminated and ``TimeoutError`` is raised. It only matters
      for a run that is stuck: a failing worker is reported at once, whatever the timeout.
    - Clean shutdown: each worker sends its result, then leaves the group
      (``destroy_process_group``) and exits; the parent waits up to
      :data:`JOIN_TIMEOUT` seconds for that before returning, and terminates (then kills)
      only workers still alive after an error, a timeout, or that wait.
    - Results travel back pickled, so they should be small (tensors are copied).

    Lesson 08.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    module = getattr(fn, "__module__", None)
    if module in (None, "__main__") or "<locals>" in getattr(fn, "__qualname__", "<locals>"):
        raise ValueError(
            f"{getattr(fn, '__qualname__', fn)!r} cannot be sent to spawned workers: define it at "
            "the top level of an importable module (for example in helpers/), not in a notebook "
            "or inside another function")
    if port is not None:
        _check_port(port)
        return _launch_once(fn, world_size, tuple(args), port, timeout)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            return _launch_once(fn, world_size, tuple(args), free_port(), timeout)
        except WorkerError as e:
            # a port that was free when picked can be taken before rank 0's store binds it
            # (often by one of gloo's own connections, which use ephemeral ports): pick again
            if attempt == PORT_ATTEMPTS or not _lost_port_race(e):
                raise
    raise AssertionError("unreachable")


def _lost_port_race(error: Exception) -> bool:
    """The worker error is the rendezvous store failing to bind its port (EADDRINUSE)."""
    text = str(error).lower()
    return "eaddrinuse" in text or "address already in use" in text


def _launch_once(fn: Callable, world_size: int, args: tuple, port: int,
                 timeout: float) -> LaunchResults:
    """One run of :func:`launch` on ``port`` (arguments already checked)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(rank, world_size, port, fn, args, results,
                                               timeout), daemon=True)
             for rank in range(world_size)]
    deadline = time.monotonic() + timeout
    done: dict[int, Any] = {}
    dead_since: dict[int, float] = {}
    try:
        for p in procs:
            p.start()
        while len(done) < world_size:
            try:
                message = results.get(timeout=0.05)
            except queue_module.Empty:
                message = None
            if message is not None:
                if message[0] == "ok":
                    done[message[1]] = pickle.loads(message[2])
                    continue
                _, rank, exc_type, text, tb, output = message
                exited = [f"rank {r} had exited with code {p.exitcode}"
                          for r, p in enumerate(procs) if r != rank and p.exitcode]
                extra = f" ({'; '.join(exited)})" if exited else ""  # often the cause
                note = f"--- traceback in rank {rank} ---\n{tb}"
                if output.strip():
                    note += f"--- output of rank {rank} ---\n{output}"
                raise WorkerError(f"rank {rank} of {world_size} raised {exc_type}: {text}{extra}",
                                  rank, exc_type, note)
            now = time.monotonic()
            for rank, p in enumerate(procs):
                if rank not in done and p.exitcode is not None:
                    # give a message already in the pipe a moment to arrive
                    if now - dead_since.setdefault(rank, now) > 1.0:
                        raise WorkerError(
                            f"rank {rank} of {world_size} exited with code {p.exitcode} without "
                            "returning a result (from a script, call launch under "
                            "`if __name__ == '__main__':`, which spawned processes need)", rank)
            if now > deadline:
                missing = sorted(set(range(world_size)) - set(done))
                raise TimeoutError(f"ranks {missing} of {world_size} gave no result within "
                                   f"{timeout:g} s; all workers were stopped")
        out = LaunchResults(done[r] for r in range(world_size))
        join_deadline = time.monotonic() + JOIN_TIMEOUT
        for p in procs:  # let every worker leave the group and exit on its own
            p.join(timeout=max(0.0, join_deadline - time.monotonic()))
        out.exitcodes = [p.exitcode for p in procs]
        return out
    finally:
        started = [p for p in procs if p.pid is not None]
        for p in started:
            if p.is_alive():
                p.terminate()
        for p in started:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        results.join_thread()


# --------------------------------------------------------------------------------------
# the proof: synchronised BN over shards == BatchNorm over the whole batch
# --------------------------------------------------------------------------------------
def make_case(seed: int = 0, shape: Sequence[int] = (11, 3, 4), dtype: torch.dtype = torch.float64,
              shift: float = 0.0, stats: str = "merged", momentum: float | None = 0.1,
              eps: float = 1e-5) -> dict[str, Any]:
    """A reproducible BatchNorm problem: input ``x`` (values ``shift + 2 + 3 N(0,1)``),
    upstream gradient ``dy``, non-trivial ``weight`` (0.5..1.5), ``bias``, ``running_mean``
    and ``running_var`` (0.5..1.5), drawn in float64 from ``torch.Generator`` seeded with
    ``seed`` and cast to ``dtype``. The default batch of 11 splits unevenly (6 + 5 for two
    ranks, 4 + 4 + 3 for three).

    Lesson 08."""
    if stats not in STATS_MODES:
        raise ValueError(f"stats must be one of {STATS_MODES}, got {stats!r}")
    if len(shape) < 2 or shape[1] < 1:
        raise ValueError(f"shape must be (N, C, *) with C >= 1, got {tuple(shape)}")
    g = torch.Generator().manual_seed(seed)
    c = shape[1]

    def draw(*size):
        return torch.randn(*size, generator=g, dtype=torch.float64)

    def uniform(n):
        return 0.5 + torch.rand(n, generator=g, dtype=torch.float64)

    case = {"x": shift + 2.0 + 3.0 * draw(*shape), "dy": draw(*shape), "weight": uniform(c),
            "bias": draw(c), "running_mean": 0.1 * draw(c), "running_var": uniform(c)}
    case = {k: v.to(dtype) for k, v in case.items()}
    case.update(stats=stats, momentum=momentum, eps=eps)
    return case


def _load(module: nn.Module, case: dict) -> nn.Module:
    with torch.no_grad():
        module.weight.copy_(case["weight"])
        module.bias.copy_(case["bias"])
        module.running_mean.copy_(case["running_mean"])
        module.running_var.copy_(case["running_var"])
    return module


def _run(module: nn.Module, x: Tensor, dy: Tensor) -> dict[str, Tensor]:
    """Forward and backward of ``module`` (training mode) on ``x`` with upstream ``dy``."""
    module.train()
    x = x.clone().requires_grad_()
    y = module(x)
    y.backward(dy)
    return {"output": y.detach(), "grad_input": x.grad, "grad_weight": module.weight.grad,
            "grad_bias": module.bias.grad, "running_mean": module.running_mean.clone(),
            "running_var": module.running_var.clone()}


def _median_ms(fn: Callable, repeats: int = 15) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * sorted(times)[len(times) // 2]


def _timings(case: dict, rank: int, world_size: int) -> dict[str, float]:
    """Median milliseconds, on this rank, of one training step (forward and backward) of
    the layer with and without synchronisation, and of one bare all_reduce of 2C numbers."""
    x = torch.tensor_split(case["x"], world_size)[rank]
    dy = torch.tensor_split(case["dy"], world_size)[rank]
    c = x.shape[1]
    synced = SyncBatchNorm(c, dtype=x.dtype)
    singletons = [dist.new_group([r]) for r in range(world_size)]  # every rank creates every group
    local = SyncBatchNorm(c, dtype=x.dtype, process_group=singletons[rank])  # no communication
    both = torch.zeros(2 * c, dtype=x.dtype)
    out = {"step_sync_ms": _median_ms(lambda: _run(synced, x, dy)),
           "step_local_ms": _median_ms(lambda: _run(local, x, dy)),
           "all_reduce_ms": _median_ms(lambda: dist.all_reduce(both))}
    dist.barrier()
    return out


def _sync_bn_worker(rank: int, world_size: int, cases: list[dict], timing: bool = False) -> list[dict]:
    """Worker: for each case, this rank's shard through :class:`SyncBatchNorm`, plus the
    bytes it communicated for that case (and, with ``timing``, :func:`_timings` of the last
    case)."""
    out = []
    for case in cases:
        x, c = case["x"], case["x"].shape[1]
        layer = _load(SyncBatchNorm(c, case["eps"], case["momentum"], dtype=x.dtype,
                                    stats=case["stats"]), case)
        LOG.clear()
        result = _run(layer, torch.tensor_split(x, world_size)[rank],
                      torch.tensor_split(case["dy"], world_size)[rank])
        result["bytes"] = {"all_gather": LOG.bytes("all_gather"),
                           "all_reduce": LOG.bytes("all_reduce"), "calls": len(LOG.calls)}
        if timing and case is cases[-1]:
            result["timing"] = _timings(case, rank, world_size)
        out.append(result)
    return out


def failing_worker(rank: int, world_size: int, failing_rank: int = 1) -> float:
    """Worker: rank ``failing_rank`` raises while the others wait in an all_reduce for it,
    to show how :func:`launch` reports a failed worker. Lesson 08, section 7."""
    if rank == failing_rank:
        raise RuntimeError(f"rank {rank} failed on purpose before the all_reduce")
    t = torch.ones(1)
    dist.all_reduce(t)  # blocks until gloo's timeout: the peer never arrives
    return float(t)


def _reference(case: dict) -> dict[str, Tensor]:
    """Plain BatchNorm (torch's own kernel) on the whole batch, in float64 whatever the
    case's dtype (the same values, cast up), so a float32 run is measured against the
    exact answer for its own inputs."""
    case = {k: v.double() if isinstance(v, Tensor) else v for k, v in case.items()}
    layer = _TorchBN(case["x"].shape[1], case["eps"], case["momentum"], dtype=torch.float64)
    return _run(_load(layer, case), case["x"], case["dy"])


class _TorchBN(nn.modules.batchnorm._BatchNorm):
    """torch's BatchNorm for any rank >= 2 (the reference for 4D/5D cases)."""

    def _check_input_dim(self, input):
        pass


def _differences(parts: list[dict], reference: dict) -> dict[str, float]:
    """Largest |difference| per key: outputs and input gradients concatenated over ranks,
    parameter gradients summed over ranks (DDP's all-reduce sums them, then divides by
    :math:`W`), running
    statistics compared rank by rank (every rank must hold the global ones)."""
    joined = {
        "output": torch.cat([p["output"] for p in parts]),
        "grad_input": torch.cat([p["grad_input"] for p in parts]),
        "grad_weight": sum(p["grad_weight"] for p in parts),
        "grad_bias": sum(p["grad_bias"] for p in parts),
    }
    diffs = {k: float((joined[k].double() - reference[k].double()).abs().max()) for k in joined}
    for k in ("running_mean", "running_var"):
        diffs[k] = max(float((p[k].double() - reference[k].double()).abs().max()) for p in parts)
    return {k: diffs[k] for k in DIFFERENCE_KEYS}


def per_shard_possible(case: dict, world_size: int) -> bool:
    """Whether every one of ``world_size`` shards of ``case["x"]`` holds more than one value
    per channel, which plain (unsynchronised) BatchNorm needs in training."""
    x = case["x"]
    per_sample = math.prod(x.shape[2:])
    return all(s.shape[0] * per_sample > 1 for s in torch.tensor_split(x, world_size))


def per_shard_differences(case: dict, world_size: int = 2) -> dict[str, float]:
    """The same differences as :func:`check_sync_batch_norm` for *unsynchronised* BatchNorm:
    each of ``world_size`` shards normalised with its own statistics (torch's BatchNorm,
    in this process, in float64 whatever the case's dtype, so only the missing
    synchronisation is measured), against BatchNorm over the whole batch. Raises ``ValueError`` when a
    shard holds at most one value per channel (BatchNorm cannot train on it; see
    :func:`per_shard_possible`)."""
    x, dy = case["x"], case["dy"]
    if not per_shard_possible(case, world_size):
        sizes = [s.shape[0] for s in torch.tensor_split(x, world_size)]
        raise ValueError(f"unsynchronised BatchNorm cannot train on shards of {sizes} samples of "
                         f"shape {tuple(x.shape[1:])}: each needs more than 1 value per channel")
    case = {k: v.double() if isinstance(v, Tensor) else v for k, v in case.items()}
    x, dy = case["x"], case["dy"]
    parts = []
    for xs, dys in zip(torch.tensor_split(x, world_size), torch.tensor_split(dy, world_size)):
        layer = _TorchBN(x.shape[1], case["eps"], case["momentum"], dtype=x.dtype)
        parts.append(_run(_load(layer, case), xs, dys))
    return _differences(parts, _reference(case))


def compare_sync_batch_norm(cases: Sequence[dict], world_size: int = 2, *, timing: bool = False,
                            port: int | None = None,
                            timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    """Run every case of ``cases`` (from :func:`make_case`) through :class:`SyncBatchNorm` on
    ``world_size`` processes (one launch for all of them; rank :math:`k` gets the
    :math:`k`-th part of ``torch.tensor_split``, which may be empty) and compare with
    BatchNorm over the whole batch. Per case: ``{"sync": differences, "per_shard":
    differences of unsynchronised BN (``None`` where a shard has at most one value per
    channel, which plain BatchNorm refuses), "bytes": payload per rank of the forward
    all_gather / all_reduce and the backward all_reduce, measured on rank 0, "exitcodes":
    the workers' exit codes (0: clean shutdown)}``; with ``timing``, the last case also gets
    ``"timing"``: rank 0's median milliseconds per training step of the layer synchronised
    and not, and of one bare all_reduce of :math:`2C` numbers (machine-dependent).

    Lesson 08."""
    if not cases:
        raise ValueError("compare_sync_batch_norm needs at least one case")
    for case in cases:
        if case["x"].shape[0] * math.prod(case["x"].shape[2:]) < 2:
            raise ValueError(f"a batch of shape {tuple(case['x'].shape)} has fewer than 2 values "
                             "per channel: BatchNorm cannot train on it, synchronised or not")
    per_rank = launch(_sync_bn_worker, world_size, (list(cases), timing), port=port,
                      timeout=timeout)
    out = []
    for i, case in enumerate(cases):
        parts = [rank_results[i] for rank_results in per_rank]
        possible = per_shard_possible(case, world_size)
        out.append({"sync": _differences(parts, _reference(case)),
                    "per_shard": per_shard_differences(case, world_size) if possible else None,
                    "bytes": parts[0]["bytes"], "exitcodes": list(per_rank.exitcodes)})
        if "timing" in parts[0]:
            out[-1]["timing"] = parts[0]["timing"]
    return out


def check_sync_batch_norm(world_size: int = 2, seed: int = 0, *, stats: str = "merged",
                          dtype: torch.dtype = torch.float64, shift: float = 0.0,
                          port: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, float]:
    """Synchronised BatchNorm on ``world_size`` processes, each holding a shard of one batch
    (:func:`make_case` with ``seed``), against torch's BatchNorm on the whole batch in this
    process. Returns the largest absolute differences for ``output``, ``grad_input``,
    ``grad_weight``, ``grad_bias`` (summed over ranks), ``running_mean`` and
    ``running_var`` (worst rank); all at rounding level in float64."""
    case = make_case(seed, dtype=dtype, shift=shift, stats=stats)
    return compare_sync_batch_norm([case], world_size, port=port, timeout=timeout)[0]["sync"]


# --------------------------------------------------------------------------------------
# cost accounting for a real network, and an exercise checker
# --------------------------------------------------------------------------------------
def resnet50_layout() -> dict[str, Any]:
    """The BatchNorm layers of torchvision's ResNet-50, written out from its architecture
    (stem 7x7 conv; stages of 3, 4, 6, 3 bottlenecks of widths 64, 128, 256, 512, each
    1x1 -> 3x3 -> 1x1 (x4) with a BatchNorm after every conv, and a 1x1 projection with its
    BatchNorm in each stage's first block; a 2048 -> 1000 classifier). Returns
    ``{"bn_channels": [C of each BatchNorm], "parameters": total parameter count}``; the
    count is checked in the tests against torchvision's published 25,557,032.

    Lesson 08."""
    bn, params = [64], 7 * 7 * 3 * 64 + 2 * 64
    in_ch = 64
    for width, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        for b in range(blocks):
            convs = [(in_ch, width, 1), (width, width, 3), (width, 4 * width, 1)]
            if b == 0:
                convs.append((in_ch, 4 * width, 1))  # projection shortcut
            for cin, cout, k in convs:
                params += cin * cout * k * k + 2 * cout  # conv (no bias) + BatchNorm gamma, beta
                bn.append(cout)
            in_ch = 4 * width
    params += 2048 * 1000 + 1000
    return {"bn_channels": bn, "parameters": params}
