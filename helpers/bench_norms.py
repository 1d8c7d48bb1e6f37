r"""The cost of normalisation, measured: time each normalisation kernel on one tensor and
compare its bandwidth with a plain copy (``make bench-norms``).

A normalisation layer does a handful of floating-point operations per element (LayerNorm
about 7, RMSNorm about 4, see :data:`FLOPS_PER_ELEMENT`) but must read every element and
write every result: at least 8 bytes per float32 element. Its arithmetic intensity, about
one FLOP per byte or less, is far below what a CPU or GPU needs to be compute-bound, so its
speed is set by how many bytes it moves. For each implementation the benchmark prints

- the **median** time of several repeats at a **fixed thread count** (the implementations
  are timed in turn, round after round, so a burst of load from other programs falls on all
  of them alike); with one CPU thread the clock is the thread's CPU time, which leaves out
  the time the machine gave to other programs (:func:`time_calls`);
- the **page faults per call** (mean over the timed calls, :func:`minor_faults`): a call
  whose output or intermediates land on memory fresh from the operating system pays about
  one fault per 4 KiB page (4096 per 16 MiB), a cost the byte count does not see; whether
  it happens depends on the memory allocator's state, so it can change between runs;
- its effective bandwidth, ``GB/s = (bytes of x read once + bytes of y written once) /
  time``, the same ideal byte count for every row, so GB/s is a speed, not a claim about
  what the kernel really moved;
- that bandwidth as a fraction of a plain copy's (the practical limit: a copy also reads x
  once and writes y once, and does nothing else); the copy writes into a preallocated
  tensor, ``y.copy_(x)``, so it pays no page faults;
- the bytes its ATen operations move if each one reads its inputs and writes its outputs in
  full (:func:`traffic`), counted in passes over the tensor: an unfused implementation pays
  for every intermediate tensor it writes and reads back.

Usage::

    python -m helpers.bench_norms                    # 4096 x 1024 float32, CPU, then CUDA if present
    python -m helpers.bench_norms --threads 2 --repeats 31
    python -m helpers.bench_norms --rows 64 --cols 32 --repeats 3   # a quick smoke test
    python -m helpers.bench_norms --compile          # add torch.compile'd versions (slow to compile)
    OMP_NUM_THREADS=1 python -m helpers.bench_norms --record --repeats 31
        # every timing of lesson 07, written to results/norm_costs.<CPU path>.json

Timings depend on the machine and on what else it runs; read them as one measurement.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from . import functional as HF
from .functional import merge_moments

__all__ = ["FLOPS_PER_ELEMENT", "GROUPS", "CLOCKS", "OpTraffic", "Row", "tensor_bytes",
           "ideal_bytes", "bandwidth_gbs", "median", "time_calls", "default_clock", "traffic",
           "passes", "naive_moments", "two_pass_moments", "merge_moments", "welford_moments",
           "sequential_sum", "minor_faults", "parse_size", "cache_sizes", "tiled_layer_norm", "tiled_rms_norm",
           "implementations", "measure", "format_table", "copy_bandwidth", "matmul_gflops",
           "roofline", "RECORD_NAME", "SWEEP_SIZES", "CLONE_NUMEL", "FOLD_SHAPE",
           "clone_against_copy", "group_norm_layouts", "fold_setup", "fold_timings",
           "record_measurements", "recorded", "section", "table_rows", "predicted_seconds",
           "provenance", "main"]

#: Floating-point operations per element, the model used for arithmetic intensity (per-row
#: or per-channel work such as a square root is negligible next to it):
#: LayerNorm 7 = 1 add (mean) + 1 sub (centre) + 2 (square, add: variance) + 1 mul (by
#: 1/sigma) + 2 (gain, bias); RMSNorm 4 = 2 (square, add) + 1 mul (by 1/RMS) + 1 (gain);
#: BatchNorm in training and GroupNorm as LayerNorm; BatchNorm in evaluation 2 (one
#: multiply-add with the folded per-channel scale and shift); a copy 0.
FLOPS_PER_ELEMENT = {"copy": 0, "layer_norm": 7, "rms_norm": 4, "batch_norm_train": 7,
                     "batch_norm_eval": 2, "group_norm": 7}

#: Number of groups for GroupNorm in the table (Wu & He 2018's default).
GROUPS = 32

GB = 1e9


# --------------------------------------------------------------------------------------
# bytes, bandwidth, medians
# --------------------------------------------------------------------------------------
def tensor_bytes(shape: Sequence[int], dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a dense tensor: ``prod(shape) * itemsize`` (4 for float32, 2 for float16 and
    bfloat16, 8 for float64).

    Lesson 07."""
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"a shape has non-negative sizes, got {shape}")
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def ideal_bytes(shape: Sequence[int], dtype: torch.dtype = torch.float32) -> int:
    """The least a normalisation (or a copy) of a tensor of this shape can move: read the
    input once and write the output once, ``2 * tensor_bytes(shape, dtype)`` (the per-feature
    or per-channel parameters are negligible and not counted).

    Lesson 07."""
    return 2 * tensor_bytes(shape, dtype)


def bandwidth_gbs(nbytes: float, seconds: float) -> float:
    """Effective bandwidth in GB/s (10**9 bytes per second): ``nbytes / seconds / 1e9``."""
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"a time must be a positive number of seconds, got {seconds}")
    if nbytes < 0:
        raise ValueError(f"a byte count cannot be negative, got {nbytes}")
    return nbytes / seconds / GB


def median(values: Sequence[float]) -> float:
    """The median (middle value, or the mean of the two middle values): robust to the few
    runs that another program on the machine slows down.

    Lesson 07."""
    values = list(values)
    if not values:
        raise ValueError("the median of no values is undefined: time at least one repeat")
    return statistics.median(values)


def _synchronize(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def minor_faults() -> int:
    """Minor page faults so far (``resource.getrusage(...).ru_minflt``) of the calling
    thread where the system reports it per thread (Linux), else of the whole process. A
    minor fault is the operating system mapping a page (4 KiB) of memory on its first
    touch; the difference of two readings counts the faults in between."""
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    return int(resource.getrusage(who).ru_minflt)


def time_calls(fns: dict[str, Callable[[], object]], repeats: int = 15, warmup: int = 2,
               device: str | torch.device = "cpu", clock: str = "wall",
               faults: dict[str, list[int]] | None = None) -> dict[str, list[float]]:
    """Seconds taken by each zero-argument callable, ``repeats`` times each.

    The callables are run in turn, round after round (not all repeats of one, then all of
    the next), so a slow spell of the machine hits all of them; ``warmup`` untimed rounds
    come first. ``clock="wall"`` reads ``time.perf_counter`` (on a CUDA device after
    ``torch.cuda.synchronize``, before starting and before stopping); ``clock="thread"``
    reads ``time.thread_time``, the CPU time of the calling thread, which leaves out the
    time the operating system gave to other programs: on a shared machine it measures the
    kernel rather than the load, but it is only the kernel's time when torch runs on the
    calling thread alone (``torch.set_num_threads(1)``) and the device is the CPU.

    If a dict is given as ``faults``, it receives for each name the minor page faults of
    each timed call (:func:`minor_faults`, read outside the timed interval).

    Lesson 07.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, "
                         f"warmup={warmup}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    if clock == "thread" and (torch.device(device).type != "cpu" or torch.get_num_threads() != 1):
        raise ValueError("clock='thread' times only the calling thread: use it on the CPU with "
                         "torch.set_num_threads(1), or use clock='wall'")
    now = CLOCKS[clock]
    sync = _synchronize(torch.device(device))
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    if faults is not None:
        faults.clear()
        faults.update({name: [] for name in fns})
    for _ in range(repeats):
        for name, fn in fns.items():
            before = minor_faults()
            sync()
            start = now()
            fn()
            sync()
            times[name].append(now() - start)
            if faults is not None:
                faults[name].append(minor_faults() - before)
    return times


# --------------------------------------------------------------------------------------
# memory traffic of a call, operation by operation
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpTraffic:
    """One ATen operation and the bytes it reads and writes (if it touches each input and
    output element once)."""
    op: str
    read: int
    written: int


_FREE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_NOT_READ = {"copy_", "fill_", "zero_", "normal_", "uniform_"}  # overwrite self, never read it


def _touched(t: Tensor) -> int:
    """Bytes of the distinct elements a tensor view addresses: an expanded (stride-0) dim
    is counted once."""
    return math.prod(s for s, st in zip(t.shape, t.stride()) if st != 0) * t.element_size()


def _tensors(obj) -> list[Tensor]:
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


class _Traffic(TorchDispatchMode):
    def __init__(self, min_bytes: int = 0):
        super().__init__()
        self.ops: list[OpTraffic] = []
        self.min_bytes = min_bytes

    def _bytes(self, tensors: list[Tensor]) -> int:
        return sum(_touched(t) for t in tensors
                   if t.untyped_storage().nbytes() >= self.min_bytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if func.is_view or name in _FREE:
            return out  # a view or an uninitialised allocation moves no data
        read = 0
        schema_args = func._schema.arguments
        values = dict(zip((a.name for a in schema_args), args))
        values.update(kwargs)
        for a in schema_args:
            written_only = a.alias_info is not None and a.alias_info.is_write and (
                a.name == "out" or name in _NOT_READ)
            if a.name in values and not written_only:
                read += self._bytes(_tensors(values[a.name]))
        written = self._bytes(_tensors(out))
        self.ops.append(OpTraffic(name, read, written))
        return out


def traffic(fn: Callable[..., object], *args, min_bytes: int = 0, **kwargs) -> list[OpTraffic]:
    """Run ``fn(*args, **kwargs)`` and list the ATen operations it dispatches, each with
    the bytes it reads and writes under the model "every operation reads each of its inputs
    and writes each of its outputs once, from and to memory". Views and uninitialised
    allocations are free; an expanded (broadcast) input counts its distinct elements.

    ``min_bytes`` counts only tensors whose storage holds at least that many bytes: with
    the size of the normalised tensor, only full-size tensors count, and small ones
    (per-row statistics, parameters, the intermediates of a cache-sized tile) are taken to
    stay in cache.

    The model is exact at the boundaries between operations (an intermediate tensor is
    written by one operation and read back by the next) and blind inside one: a fused kernel
    counts one read of x and one write of y, whatever it does with data it keeps in cache.

    Lesson 07.
    """
    if min_bytes < 0:
        raise ValueError(f"min_bytes cannot be negative, got {min_bytes}")
    mode = _Traffic(min_bytes)
    with mode:
        fn(*args, **kwargs)
    return mode.ops


def passes(ops: Sequence[OpTraffic], nbytes: int) -> float:
    """Total bytes read and written by ``ops``, in units of ``nbytes`` (the tensor's size):
    a copy makes 2 passes (one read, one write).

    Lesson 07."""
    if nbytes <= 0:
        raise ValueError(f"the tensor size must be positive, got {nbytes} bytes")
    return sum(o.read + o.written for o in ops) / nbytes


# --------------------------------------------------------------------------------------
# three ways to compute a variance
# --------------------------------------------------------------------------------------
def naive_moments(x: Tensor) -> tuple[Tensor, Tensor]:
    r"""Mean and biased variance over the last dim from one pass of sums:
    :math:`\sigma^2 = \overline{x^2} - \bar x^2`. Cancels catastrophically when
    :math:`|\bar x| \gg \sigma` (the two terms agree in all their leading digits).

    Lesson 07."""
    mean = x.mean(-1)
    return mean, x.square().mean(-1) - mean.square()


def two_pass_moments(x: Tensor) -> tuple[Tensor, Tensor]:
    r"""Mean and biased variance over the last dim in two passes: the mean first, then
    :math:`\sigma^2 = \overline{(x - \bar x)^2}` (:func:`helpers.functional.centred_moments`
    without its correction of the mean's rounding error, so that the table shows what that
    error costs).

    Lesson 07."""
    mean, _, var = HF.centred_moments(x, [-1], corrected=False)
    return mean.squeeze(-1), var.squeeze(-1)


def welford_moments(x: Tensor, block: int = 1) -> tuple[Tensor, Tensor]:
    r"""Mean and biased variance over the last dim in **one pass** over the data, in the
    input's dtype, streaming ``block`` values at a time:

    - ``block=1``: Welford's update for each new value :math:`x_k`,
      :math:`\delta = x_k - \bar x_{k-1}`, :math:`\bar x_k = \bar x_{k-1} + \delta / k`,
      :math:`M_{2,k} = M_{2,k-1} + \delta\,(x_k - \bar x_k)`;
    - ``block=b``: the mean and :math:`M_2` of each block of b values, merged into the
      running statistics with :func:`helpers.functional.merge_moments` (what vectorised kernels do: each SIMD
      lane or thread keeps its own statistics and they are merged at the end).

    Returns ``(mean, M2 / n)``. Never forms :math:`\overline{x^2}`, so it does not cancel
    like :func:`naive_moments`.

    Lesson 07.
    """
    if block < 1:
        raise ValueError(f"block must be a positive number of values, got {block}")
    n_total = x.shape[-1]
    if n_total == 0:
        raise ValueError("the moments of an empty last dim are undefined")
    zeros = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    n, mean, m2 = 0, zeros, zeros.clone()
    for start in range(0, n_total, block):
        chunk = x[..., start:start + block]
        k = chunk.shape[-1]
        if k == 1:  # Welford's update
            value = chunk[..., 0]
            n += 1
            delta = value - mean
            mean = mean + delta / n
            m2 = m2 + delta * (value - mean)
        else:
            chunk_mean = chunk.mean(-1)
            chunk_m2 = (chunk - chunk_mean.unsqueeze(-1)).square().sum(-1)
            n, mean, m2 = merge_moments(torch.tensor([float(n), float(k)], dtype=x.dtype),
                                        torch.stack([mean, chunk_mean]), torch.stack([m2, chunk_m2]))
    return mean, m2 / n


def sequential_sum(x: Tensor, dtype: torch.dtype) -> Tensor:
    r"""Sum over the last dim, left to right, with the running sum kept in ``dtype``:
    :math:`s_k = \mathrm{round}_{\text{dtype}}(s_{k-1} + x_k)`. This is what a kernel that
    accumulates in the storage type would compute; PyTorch's reductions over float16 and
    bfloat16 accumulate in float32 instead. In float16, adding 1 to 2048 gives 2048 (2049
    lies between two float16 numbers, 2048 and 2050, and rounds to the even one).

    Lesson 07."""
    acc = torch.zeros(x.shape[:-1], dtype=dtype, device=x.device)
    for k in range(x.shape[-1]):
        acc = acc + x[..., k].to(dtype)
    return acc


# --------------------------------------------------------------------------------------
# a single pass over memory, emulated: one tile of rows at a time, kept in cache
# --------------------------------------------------------------------------------------
def _check_2d(name: str, x: Tensor, tile_rows: int) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} expects a 2-D (tokens, features) input, got size "
                         f"{list(x.shape)}; reshape to (-1, features) first")
    if tile_rows < 1:
        raise ValueError(f"tile_rows must be a positive number of rows, got {tile_rows}")


def tiled_layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                     eps: float = 1e-5, tile_rows: int = 64, welford: bool = False) -> Tensor:
    r"""LayerNorm over the last dim of a 2-D input, a tile of ``tile_rows`` rows at a time:

    .. math:: y_{\text{tile}} = (x_{\text{tile}} - \mu)\,\frac{1}{\sqrt{\sigma^2+\epsilon}}
              \odot\gamma + \beta

    Each tile is loaded once (64 rows of 1024 float32 values is 256 KiB), its few
    operations run on the loaded copy while it stays in cache, and the result is stored
    once: x is read from memory once and y written once, the access pattern of a fused
    kernel, built from ordinary operations. The statistics of a tile come
    from two passes over the cached tile (mean, then the norm of the centred tile), or, with
    ``welford``, from ``torch.var_mean``, a one-pass Welford reduction (on the CPU a scalar,
    not vectorised, loop accumulated in float64).
    """
    _check_2d("tiled_layer_norm", x, tile_rows)
    d = x.shape[-1]
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], tile_rows):
        tile = x[start:start + tile_rows].clone()  # load the tile once
        if welford:
            var, mean = torch.var_mean(tile, dim=-1, correction=0, keepdim=True)
            y = tile - mean
        else:
            y = tile - tile.mean(-1, keepdim=True)
            var = torch.linalg.vector_norm(y, dim=-1, keepdim=True).square_().div_(d)
        y.mul_(torch.rsqrt(var + eps))
        if weight is not None:
            y.mul_(weight)
        if bias is not None:
            y.add_(bias)
        out[start:start + tile_rows] = y  # store once
    return out


def tiled_rms_norm(x: Tensor, weight: Tensor | None = None, eps: float | None = None,
                   tile_rows: int = 64) -> Tensor:
    r"""RMSNorm over the last dim of a 2-D input, a tile of rows at a time (as
    :func:`tiled_layer_norm`):

    .. math:: y_{\text{tile}} = x_{\text{tile}}\,\frac{1}{\sqrt{\|x\|_2^2/d+\epsilon}}\odot g

    with the sum of squares from ``torch.linalg.vector_norm`` (one pass over the cached
    tile) and PyTorch's
    ``eps=None`` rule (float32's machine epsilon for float32 input).
    """
    _check_2d("tiled_rms_norm", x, tile_rows)
    eps = HF.rms_eps(x.dtype, eps)
    d = x.shape[-1]
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], tile_rows):
        tile = x[start:start + tile_rows].clone()  # load the tile once
        ms = torch.linalg.vector_norm(tile, dim=-1, keepdim=True).square_().div_(d)
        y = tile * torch.rsqrt(ms + eps)
        if weight is not None:
            y.mul_(weight)
        out[start:start + tile_rows] = y  # store once
    return out


# --------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One line of the table: an implementation, its median time and what follows."""
    name: str
    kind: str  # a key of FLOPS_PER_ELEMENT
    seconds: float  # median
    min_seconds: float  # fastest repeat: the least disturbed by other programs
    gbs: float
    fraction_of_copy: float
    passes: float  # bytes moved to and from full-size tensors / the tensor's bytes
    ops: int  # ATen operations dispatched
    faults: float = float("nan")  # minor page faults per call, mean over the timed calls


def implementations(x: Tensor, compile: bool = False) -> dict[str, tuple[str, Callable[[], Tensor]]]:
    """The implementations in the table, each as ``name -> (kind, zero-argument callable)``
    normalising the 2-D (tokens or samples, features or channels) tensor ``x``.

    LayerNorm and RMSNorm normalise each row over its features; BatchNorm normalises each
    column (channel) over the rows, in training mode (batch statistics) and in evaluation
    mode (running statistics); GroupNorm treats the rows as samples and splits the features
    into :data:`GROUPS` groups. The copy, the yardstick, writes into a tensor allocated
    once (``y.copy_(x)``); the norms allocate their outputs as they do in a network.
    Parameters are random (not 1 and 0) so no work is skipped.
    With ``compile``, two ``torch.compile``'d versions are added (the first call compiles:
    seconds on a GPU machine, minutes on a small CPU).

    Lesson 07.
    """
    if x.dim() != 2 or x.shape[1] % GROUPS:
        raise ValueError(f"need a 2-D input whose second size divides into {GROUPS} groups, "
                         f"got size {list(x.shape)}")
    d = x.shape[1]
    g = torch.Generator(device="cpu").manual_seed(0)
    w = (torch.rand(d, generator=g) + 0.5).to(x)
    b = (torch.rand(d, generator=g) - 0.5).to(x)
    running_mean, running_var = torch.zeros(d).to(x), torch.ones(d).to(x)
    y = torch.empty_like(x)
    impl = {
        "copy (y.copy_(x))": ("copy", lambda: y.copy_(x)),
        "torch layer_norm": ("layer_norm", lambda: F.layer_norm(x, (d,), w, b)),
        "torch rms_norm": ("rms_norm", lambda: F.rms_norm(x, (d,), w)),
        "torch batch_norm, train": ("batch_norm_train", lambda: F.batch_norm(
            x, running_mean, running_var, w, b, training=True)),
        "torch batch_norm, eval": ("batch_norm_eval", lambda: F.batch_norm(
            x, running_mean, running_var, w, b, training=False)),
        f"torch group_norm, G={GROUPS}": ("group_norm", lambda: F.group_norm(x, GROUPS, w, b)),
        "helpers layer_norm": ("layer_norm", lambda: HF.layer_norm(x, (d,), w, b)),
        "helpers rms_norm": ("rms_norm", lambda: HF.rms_norm(x, (d,), w)),
        "helpers batch_norm, train": ("batch_norm_train", lambda: HF.batch_norm(
            x, None, None, w, b, training=True)),
        f"helpers group_norm, G={GROUPS}": ("group_norm", lambda: HF.group_norm(x, GROUPS, w, b)),
        "tiled layer_norm": ("layer_norm", lambda: tiled_layer_norm(x, w, b)),
        "tiled layer_norm, var_mean": ("layer_norm",
                                       lambda: tiled_layer_norm(x, w, b, welford=True)),
        "tiled rms_norm": ("rms_norm", lambda: tiled_rms_norm(x, w)),
    }
    if compile:
        ln = torch.compile(lambda t: F.layer_norm(t, (d,), w, b))
        eps = HF.rms_eps(x.dtype, None)
        rms = torch.compile(lambda t: t * torch.rsqrt(t.square().mean(-1, keepdim=True) + eps) * w)
        impl["torch.compile layer_norm"] = ("layer_norm", lambda: ln(x))
        impl["torch.compile rms_norm"] = ("rms_norm", lambda: rms(x))
    return impl


def default_clock(device: str | torch.device = "cpu") -> str:
    """``"thread"`` (CPU time of the calling thread) on the CPU with one torch thread, else
    ``"wall"``: see :func:`time_calls`.

    Lesson 07."""
    one_cpu_thread = torch.device(device).type == "cpu" and torch.get_num_threads() == 1
    return "thread" if one_cpu_thread else "wall"


def measure(rows: int = 4096, cols: int = 1024, dtype: torch.dtype = torch.float32,
            device: str = "cpu", threads: int | None = 1, repeats: int = 15, warmup: int = 2,
            compile: bool = False, seed: int = 0, clock: str | None = None) -> list[Row]:
    """Time every implementation of :func:`implementations` on a ``rows x cols`` tensor of
    N(0, 1) values and return one :class:`Row` each (the copy first). ``threads`` fixes
    torch's CPU thread count for the measurement (restored afterwards; ``None`` keeps it).
    ``clock=None`` picks :func:`default_clock`. Each row also carries the mean minor page
    faults per timed call (:func:`minor_faults`).

    Lesson 07."""
    if rows < 2 or cols < GROUPS:
        raise ValueError(f"need at least 2 rows and {GROUPS} columns, got {rows} x {cols}")
    previous = torch.get_num_threads()
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be positive, got {threads}")
        torch.set_num_threads(threads)
    try:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(rows, cols, generator=gen).to(device=device, dtype=dtype)
        impl = implementations(x, compile=compile)
        faults: dict[str, list[int]] = {}
        times = time_calls({name: fn for name, (_, fn) in impl.items()}, repeats=repeats,
                           warmup=warmup, device=device, clock=clock or default_clock(device),
                           faults=faults)
        nbytes = ideal_bytes(x.shape, dtype)
        copy_s = median(times[next(iter(impl))])
        out = []
        for name, (kind, fn) in impl.items():
            t = median(times[name])
            if name.startswith("torch.compile"):  # one generated kernel the hook cannot see into
                n_ops, n_passes = 0, float("nan")
            else:
                n_ops = len(traffic(fn))
                n_passes = passes(traffic(fn, min_bytes=nbytes // 2), nbytes // 2)
            out.append(Row(name, kind, t, min(times[name]), bandwidth_gbs(nbytes, t), copy_s / t,
                           n_passes, n_ops, statistics.fmean(faults[name])))
        return out
    finally:
        torch.set_num_threads(previous)


def format_table(rows: Sequence[Row], title: str = "") -> str:
    """The rows as a fixed-width text table: median and fastest time, GB/s (from the
    median), fraction of the copy's bandwidth, ATen operations dispatched, passes over
    full-size tensors (bytes read and written to tensors as large as the input, over the
    input's size; :func:`traffic`) and minor page faults per call (mean).

    Lesson 07."""
    lines = [title] if title else []
    lines.append(f"{'implementation':<30}{'median ms':>10}{'min ms':>8}{'GB/s':>8}{'x copy':>8}"
                 f"{'ops':>5}{'passes':>8}{'faults/call':>12}")
    for r in rows:
        lines.append(f"{r.name:<30}{r.seconds * 1e3:>10.2f}{r.min_seconds * 1e3:>8.2f}{r.gbs:>8.1f}"
                     f"{r.fraction_of_copy:>8.2f}{r.ops or '-':>5}"
                     f"{'-' if math.isnan(r.passes) else f'{r.passes:.1f}':>8}"
                     f"{'-' if math.isnan(r.faults) else f'{r.faults:.0f}':>12}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# the machine's two ceilings, for a roofline
# --------------------------------------------------------------------------------------
def copy_bandwidth(nbytes: int, repeats: int = 7, device: str = "cpu") -> float:
    """Median copy bandwidth in GB/s for a float32 tensor of about ``nbytes`` bytes, copied
    into a destination allocated once (``y.copy_(x)``: ``2 * nbytes`` moved), timed with
    :func:`default_clock`. The working set is ``2 * nbytes``: small tensors stay in a
    core's caches, large ones reach main memory, so the answer depends on ``nbytes``.
    (``x.clone()`` would also time the operating system mapping a fresh destination, one
    page fault per 4 KiB, whenever the allocator returns new memory.)

    Lesson 07."""
    x = torch.ones(max(nbytes // 4, 1), device=device)
    y = torch.empty_like(x)
    t = median(time_calls({"copy": lambda: y.copy_(x)}, repeats=repeats, warmup=1,
                          device=device, clock=default_clock(device))["copy"])
    return bandwidth_gbs(2 * x.numel() * 4, t)


_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20,
          "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30}


def parse_size(text: str) -> int:
    """Bytes in a cache size as the system writes it: ``"48K"`` -> 49152, ``"2048K"``,
    ``"105 MiB"``, ``"512"`` (binary units: K = 1024)."""
    t = text.strip().upper().replace(" ", "")
    digits = t.rstrip("BKMGI")
    unit = t[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(f"not a size such as '48K' or '105 MiB': {text!r}")
    return int(digits) * _UNITS[unit]


def cache_sizes(cpu_dir: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int]:
    """The data caches that CPU core 0 sees, as the operating system describes them (Linux
    ``/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}``, what ``lscpu`` shows):
    ``{"L1d": bytes, "L2": bytes, "L3": bytes}`` (instruction caches left out). An empty
    dict where the directory does not exist (other systems): nothing is guessed.

    Lesson 07."""
    out: dict[str, int] = {}
    if not os.path.isdir(cpu_dir):
        return out
    for entry in sorted(os.listdir(cpu_dir)):
        path = os.path.join(cpu_dir, entry)
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(path, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(path, "size")) as f:
                size = parse_size(f.read())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        out[f"L{level}" + ("d" if kind == "Data" else "")] = size
    return out


def matmul_gflops(n: int = 512, repeats: int = 7, device: str = "cpu") -> float:
    """Median float32 matrix-multiply throughput in GFLOP/s (``2 n^3`` FLOPs per ``n x n``
    product, timed with :func:`default_clock`): a practical compute ceiling.

    Lesson 07."""
    a = torch.ones(n, n, device=device)
    t = median(time_calls({"mm": lambda: a @ a}, repeats=repeats, warmup=1, device=device,
                          clock=default_clock(device))["mm"])
    return 2 * n ** 3 / t / GB


def roofline(intensity, peak_gflops: float, bandwidth: float):
    r"""Attainable GFLOP/s at arithmetic intensity ``intensity`` (FLOP per byte):
    :math:`\min(\text{peak},\ \text{intensity} \times \text{bandwidth})` (Williams,
    Waterman & Patterson 2009). Accepts a number or a sequence; the ridge point, where the
    two meet, is ``peak_gflops / bandwidth``.

    Lesson 07."""
    if peak_gflops <= 0 or bandwidth <= 0:
        raise ValueError(f"peak and bandwidth must be positive, got {peak_gflops}, {bandwidth}")
    if isinstance(intensity, (int, float)):
        if intensity < 0:
            raise ValueError(f"an arithmetic intensity cannot be negative, got {intensity}")
        return min(peak_gflops, intensity * bandwidth)
    return [roofline(float(i), peak_gflops, bandwidth) for i in intensity]


# --------------------------------------------------------------------------------------
# the lesson's measurements, recorded with their provenance (``--record``)
# --------------------------------------------------------------------------------------
#: Name of the results file: ``results/norm_costs.<CPU path>.json`` (:mod:`helpers.results`).
RECORD_NAME = "norm_costs"

#: Bytes of the copied tensor in the bandwidth sweep of lesson 07, section 3: 256 KiB to 256 MiB.
SWEEP_SIZES = (2**18, 2**20, 2**22, 2**24, 2**26, 2**28)

#: float32 values of the tensor that ``x.clone()`` and ``y.copy_(x)`` copy (64 MiB).
CLONE_NUMEL = 2**24

#: Input of the convolution whose BatchNorm is folded: 16 images, 16 channels, 64 x 64.
FOLD_SHAPE = (16, 16, 64, 64)


def _clock_for(clock: str | None) -> str:
    return clock or default_clock("cpu")


def clone_against_copy(numel: int | None = None, repeats: int = 5, warmup: int = 2,
                       clock: str | None = None) -> dict[str, tuple[float, float]]:
    """``x.clone()`` against ``y.copy_(x)`` (``y`` allocated once) for a float32 tensor of
    ``numel`` values (default :data:`CLONE_NUMEL`, 64 MiB): ``name -> (median seconds,
    mean minor page faults per call)``. The same bytes are copied; the clone also pays for
    mapping a fresh destination whenever the allocator takes it from the operating system.

    Lesson 07."""
    big = torch.ones(numel or CLONE_NUMEL)
    dest = torch.empty_like(big)
    faults: dict[str, list[int]] = {}
    times = time_calls({"x.clone()": big.clone, "y.copy_(x)": lambda: dest.copy_(big)},
                       repeats=repeats, warmup=warmup, clock=_clock_for(clock), faults=faults)
    return {name: (median(ts), statistics.fmean(faults[name])) for name, ts in times.items()}


def group_norm_layouts(x: Tensor, repeats: int = 11, warmup: int = 2,
                       clock: str | None = None) -> dict[str, float]:
    """Median seconds of ``F.group_norm`` with :data:`GROUPS` groups on the same bytes in two
    layouts, the 2-D ``(rows, cols)`` tensor ``x`` (H x W = 1) and ``x.view(rows // cols,
    cols, cols)`` (H x W = cols; needs ``rows`` a multiple of ``cols``), and of
    ``F.layer_norm`` on ``x``. Keys as printed in lesson 07, section 4.

    Lesson 07."""
    rows, d = x.shape
    if rows % d:
        raise ValueError(f"need rows a multiple of cols to view x as (rows/cols, cols, cols), "
                         f"got {rows} x {d}")
    g = torch.Generator(device="cpu").manual_seed(0)
    w, b = torch.rand(d, generator=g) + 0.5, torch.rand(d, generator=g) - 0.5
    layouts = {
        f"({rows}, {d}): H x W = 1, {d // GROUPS} values per group": x,
        f"({rows // d}, {d}, {d}): H x W = {d}, {d * d // GROUPS} per group": x.view(rows // d, d, d),
    }
    calls = {f"group_norm {k}": (lambda t=t: F.group_norm(t, GROUPS, w, b))
             for k, t in layouts.items()}
    calls[f"layer_norm ({rows}, {d})"] = lambda: F.layer_norm(x, (d,), w, b)
    times = time_calls(calls, repeats=repeats, warmup=warmup, clock=_clock_for(clock))
    return {name: median(ts) for name, ts in times.items()}


def fold_setup(shape: Sequence[int] | None = None, seed: int = 0):
    """The convolution and BatchNorm of lesson 07, section 7: a 3 x 3 convolution from
    ``shape[1]`` to ``2 * shape[1]`` channels followed by an evaluation-mode BatchNorm with
    random running statistics and affine parameters, the folded convolution
    (:func:`helpers.fold.fold_batch_norm`) and N(0, 1) images of ``shape`` (default
    :data:`FOLD_SHAPE`). Returns ``(conv, bn, folded, images)``.

    Lesson 07."""
    from .fold import fold_batch_norm

    shape = tuple(shape or FOLD_SHAPE)
    torch.manual_seed(seed)
    c = shape[1]
    conv, bn = torch.nn.Conv2d(c, 2 * c, 3, padding=1), torch.nn.BatchNorm2d(2 * c)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    bn.eval()
    return conv, bn, fold_batch_norm(conv, bn), torch.randn(shape)


def fold_timings(conv, bn, folded, images: Tensor, repeats: int = 15, warmup: int = 2,
                 clock: str | None = None) -> dict[str, float]:
    """Median seconds (no autograd) of the convolution, the convolution followed by the
    BatchNorm, the folded convolution, and the BatchNorm alone on the convolution's output.

    Lesson 07."""
    with torch.no_grad():
        z = conv(images)
        times = time_calls({"conv": lambda: conv(images), "conv + BatchNorm": lambda: bn(conv(images)),
                            "folded conv": lambda: folded(images), "BatchNorm alone": lambda: bn(z)},
                           repeats=repeats, warmup=warmup, clock=_clock_for(clock))
    return {name: median(ts) for name, ts in times.items()}


def record_measurements(rows: int = 4096, cols: int = 1024, repeats: int = 31, warmup: int = 3,
                        sweep_repeats: int = 11, matmul_n: int = 512,
                        seed: int = 0) -> list[dict]:
    """Every timing of lesson 07 on one CPU thread (thread CPU time, medians of ``repeats``
    rounds taken in turn after ``warmup`` rounds), as flat rows for :mod:`helpers.results`,
    each with a ``section``:

    - ``"table"``: one row per implementation of :func:`measure` (median and fastest time,
      GB/s, fraction of the copy, passes, ATen operations, faults per call);
    - ``"copy_sweep"``: :func:`copy_bandwidth` for each of :data:`SWEEP_SIZES` (``bytes``,
      ``gbs``), and ``"matmul"``: :func:`matmul_gflops` of a ``matmul_n`` square product;
    - ``"clone_vs_copy"``: :func:`clone_against_copy` (``seconds``, ``faults``);
    - ``"group_norm_layout"``: :func:`group_norm_layouts` on the table's tensor;
    - ``"fold"``: :func:`fold_timings` on :func:`fold_setup`.

    The thread count is set to 1 for the measurement and restored afterwards.

    Lesson 07."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out: list[dict] = []
        for r in measure(rows, cols, threads=1, repeats=repeats, warmup=warmup, seed=seed):
            out.append({"section": "table", "name": r.name, "kind": r.kind, "seconds": r.seconds,
                        "min_seconds": r.min_seconds, "gbs": r.gbs,
                        "fraction_of_copy": r.fraction_of_copy, "passes": _json_number(r.passes),
                        "ops": r.ops, "faults": _json_number(r.faults)})
        for n in SWEEP_SIZES:
            out.append({"section": "copy_sweep", "name": f"copy of {n} bytes", "bytes": n,
                        "gbs": copy_bandwidth(n, repeats=sweep_repeats)})
        out.append({"section": "matmul", "name": f"float32 matmul {matmul_n} x {matmul_n}",
                    "n": matmul_n, "gflops": matmul_gflops(matmul_n, repeats=sweep_repeats)})
        for name, (t, f) in clone_against_copy(repeats=sweep_repeats, warmup=warmup).items():
            out.append({"section": "clone_vs_copy", "name": name, "bytes": 4 * CLONE_NUMEL,
                        "seconds": t, "faults": f})
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(rows, cols, generator=gen)
        for name, t in group_norm_layouts(x, repeats=repeats, warmup=warmup).items():
            out.append({"section": "group_norm_layout", "name": name, "seconds": t})
        for name, t in fold_timings(*fold_setup(seed=seed), repeats=repeats, warmup=warmup).items():
            out.append({"section": "fold", "name": name, "seconds": t})
        return out
    finally:
        torch.set_num_threads(previous)


def recorded(path: str = "avx2") -> dict:
    """The recorded run of lesson 07's timings, ``results/norm_costs.<path>.json``, as
    written by ``python -m helpers.bench_norms --record`` (:mod:`helpers.results`)."""
    from .results import read_results

    return read_results(RECORD_NAME, path)


def section(record: dict, name: str) -> dict[str, dict]:
    """The rows of one section of a recorded run, keyed by their ``name``, in order."""
    rows = {r["name"]: r for r in record["rows"] if r["section"] == name}
    if not rows:
        raise KeyError(f"the record has no section {name!r}")
    return rows


def table_rows(record: dict) -> list[Row]:
    """The ``"table"`` section of a recorded run as :class:`Row` objects, for
    :func:`format_table`."""
    return [Row(r["name"], r["kind"], r["seconds"], r["min_seconds"], r["gbs"],
                r["fraction_of_copy"], float("nan") if r["passes"] is None else r["passes"],
                r["ops"], float("nan") if r["faults"] is None else r["faults"])
            for r in section(record, "table").values()]


def predicted_seconds(rows: Sequence[Row]) -> dict[str, tuple[float, float]]:
    r"""Each row's time predicted from its passes alone, :math:`t \approx \text{passes}/2
    \times t_{\text{copy}}` (the copy is the first row), as ``name -> (predicted seconds,
    measured / predicted)``; rows without a pass count are left out.

    Lesson 07."""
    copy_s = rows[0].seconds
    out = {}
    for r in rows[1:]:
        if not math.isnan(r.passes):
            predicted = r.passes / 2 * copy_s
            out[r.name] = (predicted, r.seconds / predicted)
    return out


def provenance(record: dict) -> str:
    """Where a recorded run comes from, in two or three lines: the command; torch, CPU
    path, processor, threads and date; and, when the record has them, the machine's CPU
    count and load average (the mean number of runnable programs) at the start and end."""
    lines = [f"recorded by: {record['command']}",
             f"torch {record['torch']}, {record['cpu_capability']} code path, {record['processor']}, "
             f"{record['threads']} thread, {record['written']}"]
    s = record.get("settings", {})
    if s.get("load_average_before") and s.get("load_average_after"):
        lines.append(f"machine: {s['cpu_count']} CPUs, load average {s['load_average_before'][0]:.1f} "
                     f"at the start and {s['load_average_after'][0]:.1f} at the end")
    return "\n".join(lines)


def _json_number(v: float):
    return None if isinstance(v, float) and math.isnan(v) else v


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------
def _devices(choice: str) -> list[str]:
    if choice == "all":
        return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available here")
    return [choice]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096, help="tokens (default 4096)")
    parser.add_argument("--cols", type=int, default=1024,
                        help=f"features, a multiple of {GROUPS} (default 1024)")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--device", choices=["all", "cpu", "cuda"], default="all",
                        help="all = CPU, then CUDA when a device is present (default)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads during the timing (default 1)")
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds (default 21)")
    parser.add_argument("--compile", action="store_true",
                        help="add torch.compile'd LayerNorm and RMSNorm (compiling takes a while)")
    parser.add_argument("--record", action="store_true",
                        help="run every timing of lesson 07 on one CPU thread and write them, with "
                             f"their provenance, to results/{RECORD_NAME}.<CPU path>.json")
    args = parser.parse_args(argv)
    if args.rows < 2 or args.cols < GROUPS or args.cols % GROUPS:
        parser.error(f"need --rows >= 2 and --cols a positive multiple of {GROUPS}")
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be positive")
    if args.record:
        if args.threads != 1 or args.device == "cuda" or args.dtype != "float32" or args.compile:
            parser.error("--record times the lesson's float32 CPU measurements on one thread: "
                         "leave out --threads, --device cuda, --dtype and --compile")
        if args.rows % args.cols:
            parser.error("--record needs --rows a multiple of --cols (GroupNorm's second layout)")
        return _record(args, argv)
    dtype = getattr(torch, args.dtype)
    for device in _devices(args.device):
        rows = measure(args.rows, args.cols, dtype, device, threads=args.threads,
                       repeats=args.repeats, compile=args.compile)
        where = (f"{device}: {torch.cuda.get_device_name()}, wall clock" if device == "cuda"
                 else f"cpu, {args.threads} thread(s), "
                      f"{'thread CPU time' if args.threads == 1 else 'wall clock'}")
        title = (f"{args.rows} x {args.cols} {args.dtype}, {where}, median of {args.repeats}; "
                 f"GB/s = 2 x {tensor_bytes((args.rows, args.cols), dtype) / 2**20:.3g} MiB "
                 f"/ time")
        print(format_table(rows, title))
        seconds = {r.name: r.seconds for r in rows}
        print("RMSNorm against LayerNorm, same implementation style (paper: 7% to 64% "
              "less time):")
        for style in ("torch", "helpers", "tiled") + (("torch.compile",) if args.compile else ()):
            ratio = seconds[f"{style} rms_norm"] / seconds[f"{style} layer_norm"]
            print(f"  {style:<16} RMSNorm time / LayerNorm time = {ratio:5.2f}  "
                  f"({1 - ratio:+.0%} time saved)")
        print()
    return 0


def _record(args, argv: list[str] | None) -> int:
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # measured, and recorded as the run's thread count, on one thread
    try:
        return _record_one_thread(args, argv, load_before)
    finally:
        torch.set_num_threads(previous)


def _record_one_thread(args, argv: list[str] | None, load_before) -> int:
    from .results import write_results

    rows = record_measurements(args.rows, args.cols, repeats=args.repeats)
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    target = write_results(
        RECORD_NAME, rows, seeds=[0], argv=sys.argv[1:] if argv is None else argv,
        module="helpers.bench_norms", tokens=args.rows, features=args.cols, dtype="float32",
        repeats=args.repeats, warmup=3, sweep_repeats=11, clock="thread CPU time (time.thread_time)",
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"), cpu_count=os.cpu_count(),
        caches=cache_sizes(),
        load_average_before=load_before, load_average_after=load_after,
        note="one run on one machine, which other programs shared; thread CPU time leaves out "
             "the time given to them, not their use of the caches and the memory bus")
    record = {"rows": rows}
    print(format_table(table_rows(record), f"{args.rows} x {args.cols} float32, 1 thread, thread "
                                           f"CPU time, median of {args.repeats}"))
    for name in ("copy_sweep", "matmul", "clone_vs_copy", "group_norm_layout", "fold"):
        for key, row in section(record, name).items():
            values = ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                               if k not in ("section", "name") and isinstance(v, float))
            print(f"{name:<18} {key:<52} {values}")
    print(f"written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
