r"""Fused LayerNorm and RMSNorm kernels in Triton, forward and backward, runnable on a CPU
(lesson 13).

**Where the kernels run.** Triton compiles a ``@triton.jit`` function for a GPU; with the
environment variable ``TRITON_INTERPRET=1`` set *before* the function is decorated, the
decorator returns an interpreter that runs every program of the grid one after another with
numpy, on CPU tensors. On import this module sets ``TRITON_INTERPRET=1`` when the variable is
not set and torch sees no CUDA device, so the kernels below (and any a notebook decorates
after importing this module) are interpreted on a laptop and compiled on a GPU machine.
:mod:`helpers.bench_kernels` times the compiled kernels and refuses to run with the
interpreter on.

Triton's wheels exist for Linux (x86-64 and aarch64) only. Where ``import triton`` fails,
:data:`AVAILABLE` is False, ``triton`` and ``tl`` are stand-ins that let a notebook *define*
kernels, and every function here that would run one returns or prints :data:`MISSING`.

**The kernels** (one program per row, ``BLOCK_N = next_power_of_2(N)`` lanes, a mask
``cols < N`` for the tail; statistics in float32 whatever the input dtype):

* :func:`layer_norm_fwd_kernel`: :math:`\mu = \frac1N\sum_i x_i`,
  :math:`\mathrm{rstd} = 1/\sqrt{\frac1N\sum_i (x_i-\mu)^2 + \epsilon}`,
  :math:`y = (x-\mu)\,\mathrm{rstd}\, w + b`; saves ``mean`` and ``rstd`` (float32) per row.
* :func:`rms_norm_fwd_kernel`: :math:`\mathrm{rstd} = 1/\sqrt{\frac1N\sum_i x_i^2 + \epsilon}`,
  :math:`y = x\,\mathrm{rstd}\,w`; saves ``rstd``.
* :func:`layer_norm_bwd_kernel`: with :math:`\hat x = (x-\mu)\,\mathrm{rstd}` and
  :math:`g = w \odot dy`,
  :math:`dx = \mathrm{rstd}\,\big(g - \overline{g} - \hat x\,\overline{g\hat x}\big)` (bars:
  means over the row, the two reductions of the backward), and the partial sums
  :math:`dW_p = \sum_{r \in p} dy_r \odot \hat x_r`, :math:`dB_p = \sum_{r \in p} dy_r` over
  the ``ROWS_PER_PROGRAM`` rows of program ``p``.
* :func:`partial_sum_kernel`: :math:`dW = \sum_p dW_p` in the fixed order ``p = 0, 1, ...``:
  the two-stage reduction gives the same bits on every run.

:class:`LayerNormFunction` wraps forward and backward in a ``torch.autograd.Function``;
:func:`compile_ptx` and :func:`global_accesses` read the global loads and stores of a kernel
compiled for an sm_90 GPU, on a machine without one.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import warnings
from collections import Counter
from typing import Sequence

import torch
from torch import Tensor

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before any @triton.jit below

try:
    import triton
    import triton.language as tl
    AVAILABLE = True
except ImportError:  # macOS, Windows: no wheel
    AVAILABLE = False

    class _Standin:
        """Lets a notebook define (not run) kernels where Triton is missing."""

        constexpr = object

        def __getattr__(self, name):
            return self

        def __call__(self, *args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]  # @triton.jit
            return self

        def __getitem__(self, item):
            return self

    triton = tl = _Standin()

__all__ = ["AVAILABLE", "MISSING", "INTERPRETED", "triton", "tl", "require", "environment",
           "show", "quiet", "layer_norm_fwd_kernel", "rms_norm_fwd_kernel", "layer_norm_bwd_kernel",
           "partial_sum_kernel", "block_size", "layer_norm_forward", "rms_norm_forward",
           "layer_norm_backward", "partial_sums", "LayerNormFunction", "layer_norm",
           "TOLERANCES", "lock_order_sums", "compile_ptx", "compile_many", "global_accesses",
           "row_passes", "HINTS"]

MISSING = (
    "Triton is not installed here: its wheels exist for Linux (x86-64, aarch64) only. The kernels "
    "of this lesson need Linux, or WSL on Windows; everything else in the lesson reads as is.\n"
    "这里没有安装 Triton：它只提供 Linux（x86-64、aarch64）的安装包。本课的内核需要 Linux，"
    "Windows 上可用 WSL；课程的其余部分照常阅读。")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


INTERPRETED = AVAILABLE and _interpreting()
"""True when the kernels run in Triton's interpreter (on the CPU)."""


def require() -> bool:
    """True when Triton is here; otherwise print :data:`MISSING` and return False."""
    if not AVAILABLE:
        print(MISSING)
    return AVAILABLE


def environment() -> str:
    """One line per fact a reader needs: versions, and where the kernels run."""
    lines = [f"torch {torch.__version__}"]
    if not AVAILABLE:
        return "\n".join(lines + [MISSING])
    lines.append(f"triton {triton.__version__}")
    if INTERPRETED:
        lines.append("TRITON_INTERPRET=1: kernels run in Triton's interpreter, on the CPU (numpy)")
    else:
        lines.append("kernels are compiled for the GPU: "
                     + (torch.cuda.get_device_name() if torch.cuda.is_available() else "none found"))
    return "\n".join(lines)


@contextlib.contextmanager
def quiet():
    """Silence numpy's floating-point warnings: the interpreter computes with numpy, and an
    overflow on purpose (a float16 sum past 65504) would print a RuntimeWarning."""
    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def show(kernel) -> None:
    """Print a kernel's Python source (as the interpreter and the compiler read it)."""
    fn = getattr(kernel, "fn", kernel)
    print(inspect.getsource(fn).rstrip())


# --------------------------------------------------------------------------------------
# the kernels
# --------------------------------------------------------------------------------------
@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)                          # one program per row
    cols = tl.arange(0, BLOCK_N)                    # BLOCK_N >= N lanes, a power of two
    mask = cols < N                                 # the tail lanes read and write nothing
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N                    # statistics in float32
    xc = tl.where(mask, x - mean, 0.)               # masked lanes would add mean**2 each
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)                      # saved for the backward
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    b = tl.load(B + cols, mask=mask).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_fwd_kernel(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)   # eps inside the root
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_bwd_kernel(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
                          ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)                          # program p owns rows [p R, p R + R)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)     # this program's partial sums
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    row_start = pid * ROWS_PER_PROGRAM
    row_end = tl.minimum(row_start + ROWS_PER_PROGRAM, M)
    for row in range(row_start, row_end):
        x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        dy = tl.load(DY + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        mean = tl.load(Mean + row)
        rstd = tl.load(Rstd + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.)
        g = w * dy
        c1 = tl.sum(xhat * g, axis=0) / N           # reduction 1: mean of g * xhat
        c2 = tl.sum(g, axis=0) / N                  # reduction 2: mean of g
        dx = (g - xhat * c1 - c2) * rstd
        tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)
        dw += dy * xhat                             # over rows: one value per feature
        db += dy
    tl.store(DW + pid * N + cols, dw, mask=mask)    # row p of the (programs, N) buffers
    tl.store(DB + pid * N + cols, db, mask=mask)


@triton.jit
def partial_sum_kernel(P, OUT, G, N, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)                          # one program per block of columns
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for p in range(0, G):                           # always the order 0, 1, ..., G-1
        acc += tl.load(P + p * N + cols, mask=mask, other=0.)
    tl.store(OUT + cols, acc.to(OUT.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------
# launching them
# --------------------------------------------------------------------------------------
def block_size(n: int) -> int:
    """The smallest power of two >= ``n``: one lane per feature, the tail masked."""
    if n < 1:
        raise ValueError(f"a row needs at least one feature, got N = {n}")
    return 1 << (n - 1).bit_length()


def _warps(block: int) -> int:
    """Triton's tutorial 05 heuristic: one warp per 256 lanes, 1 to 8 (ignored when interpreted)."""
    return min(max(block // 256, 1), 8)


def _rows(x: Tensor) -> Tensor:
    if x.dim() < 1:
        raise ValueError("the input needs at least one dimension (the normalised one)")
    return x.reshape(-1, x.shape[-1]).contiguous()


def layer_norm_forward(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5,
                       kernel=None) -> tuple[Tensor, Tensor, Tensor]:
    """LayerNorm over the last dimension with :func:`layer_norm_fwd_kernel` (or ``kernel``,
    same signature). Returns ``y`` (shape and dtype of ``x``) and the float32 ``mean`` and
    ``rstd`` of each row."""
    x2 = _rows(x)
    m, n = x2.shape
    y = torch.empty_like(x2)
    mean = torch.empty(m, dtype=torch.float32, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    (kernel or layer_norm_fwd_kernel)[(m,)](x2, y, weight, bias, mean, rstd, x2.stride(0), n,
                                            eps, BLOCK_N=block_size(n),
                                            num_warps=_warps(block_size(n)))
    return y.reshape(x.shape), mean, rstd


def rms_norm_forward(x: Tensor, weight: Tensor, eps: float = 1e-6,
                     kernel=None) -> tuple[Tensor, Tensor]:
    """RMSNorm over the last dimension with :func:`rms_norm_fwd_kernel` (or ``kernel``).
    Returns ``y`` and the float32 ``rstd`` of each row."""
    x2 = _rows(x)
    m, n = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    (kernel or rms_norm_fwd_kernel)[(m,)](x2, y, weight, rstd, x2.stride(0), n, eps,
                                          BLOCK_N=block_size(n), num_warps=_warps(block_size(n)))
    return y.reshape(x.shape), rstd


def partial_sums(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
                 rows_per_program: int = 4, kernel=None) -> tuple[Tensor, Tensor, Tensor]:
    """Stage 1 of the backward: ``dx`` and the float32 partial sums ``(programs, N)`` of dW and
    dB, one row per program of ``rows_per_program`` rows."""
    x2, dy2 = _rows(x), _rows(dy)
    m, n = x2.shape
    programs = -(-m // rows_per_program)
    dx = torch.empty_like(x2)
    dw_part = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    db_part = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    (kernel or layer_norm_bwd_kernel)[(programs,)](
        dx, dy2, x2, weight, mean, rstd, dw_part, db_part, x2.stride(0), m, n,
        ROWS_PER_PROGRAM=rows_per_program, BLOCK_N=block_size(n), num_warps=_warps(block_size(n)))
    return dx.reshape(x.shape), dw_part, db_part


def _reduce(part: Tensor, dtype: torch.dtype, block: int = 128) -> Tensor:
    out = torch.empty(part.shape[1], dtype=dtype, device=part.device)
    n = part.shape[1]
    partial_sum_kernel[(-(-n // block),)](part, out, part.shape[0], n, BLOCK_N=block)
    return out


def layer_norm_backward(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
                        rows_per_program: int = 4, kernel=None) -> tuple[Tensor, Tensor, Tensor]:
    """``dx, dW, dB`` of LayerNorm: stage 1 (:func:`partial_sums`), then stage 2
    (:func:`partial_sum_kernel`) sums the partial rows in a fixed order."""
    dx, dw_part, db_part = partial_sums(dy, x, weight, mean, rstd, rows_per_program, kernel)
    return dx, _reduce(dw_part, weight.dtype), _reduce(db_part, weight.dtype)


if AVAILABLE:
    class LayerNormFunction(torch.autograd.Function):
        """``y = LayerNorm(x) * weight + bias`` over the last dimension, forward and backward
        by the kernels of this module; ``mean`` and ``rstd`` are what the forward saves."""

        @staticmethod
        def forward(ctx, x, weight, bias, eps=1e-5):
            y, mean, rstd = layer_norm_forward(x, weight, bias, eps)
            ctx.save_for_backward(x, weight, mean, rstd)
            return y

        @staticmethod
        def backward(ctx, dy):
            x, weight, mean, rstd = ctx.saved_tensors
            dx, dw, db = layer_norm_backward(dy.contiguous(), x, weight, mean, rstd)
            return dx, dw, db, None
else:
    LayerNormFunction = None


def layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Tensor, bias: Tensor,
               eps: float = 1e-5) -> Tensor:
    """``F.layer_norm`` over the last dimension only, by :class:`LayerNormFunction`."""
    if tuple(normalized_shape) != (x.shape[-1],):
        raise ValueError(f"these kernels normalise the last dimension only: normalized_shape "
                         f"{tuple(normalized_shape)} but x.shape[-1] = {x.shape[-1]}")
    return LayerNormFunction.apply(x, weight, bias, eps)


# torch.testing.assert_close's default tolerances for each dtype (rtol, atol)
TOLERANCES = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
              torch.bfloat16: (1.6e-2, 1e-5)}


def lock_order_sums(partials: Tensor, orders: Sequence[Sequence[int]]) -> list[Tensor]:
    """What the tutorial's lock-based accumulation computes: the float32 partial rows added
    one at a time into one buffer, ``acc = acc + partials[i]``, in the order ``i`` in which
    programs took the lock. Float addition is not associative, so the bits depend on it."""
    out = []
    for order in orders:
        acc = torch.zeros(partials.shape[1:], dtype=torch.float32)
        for i in order:
            acc = acc + partials[i].float()
        out.append(acc)
    return out


# --------------------------------------------------------------------------------------
# reading the compiled code, without a GPU
# --------------------------------------------------------------------------------------
HINTS = 16  # tt.divisibility: a pointer 16-byte aligned, an integer a multiple of 16


def compile_ptx(kernel: str, signature: dict[str, str], constexprs: dict[str, int],
                hinted: Sequence[str] = (), num_warps: int = 4, capability: int = 90) -> str:
    """The PTX that Triton generates for the kernel named ``kernel`` (a kernel of this module)
    on a CUDA GPU of compute capability ``capability`` (90: H100), compiled here without one
    (the wheel bundles ``ptxas``).

    ``signature`` maps every argument to its type (``"*fp16"``, ``"i32"``, ``"fp32"``;
    constexprs too, as ``"constexpr"``); the arguments named in ``hinted`` are declared
    divisible by :data:`HINTS` (pointers: 16-byte aligned), the facts a launch on a GPU
    deduces from the actual values. The compiler cannot run in a process whose kernels are
    interpreted, so this runs ``python -m helpers.kernels --ptx`` with ``TRITON_INTERPRET=0``;
    see :func:`compile_many` to compile several kernels in one such process."""
    job = dict(kernel=kernel, signature=signature, constexprs=constexprs, hinted=list(hinted),
               num_warps=num_warps, capability=capability)
    return compile_many({"job": job})["job"]


def compile_many(jobs: dict[str, dict]) -> dict[str, str]:
    """:func:`compile_ptx` for each job (a dict of its arguments), in one child process."""
    if not AVAILABLE:
        raise RuntimeError(MISSING)
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this helpers' repository
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "helpers.kernels", "--ptx"], input=json.dumps(jobs),
                          capture_output=True, text=True, env=env, cwd=root, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _compile_here(kernel: str, signature: dict, constexprs: dict, hinted: Sequence[str],
                  num_warps: int, capability: int) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = globals()[kernel]
    names = list(signature)
    unknown = set(hinted) - set(names)
    if unknown:
        raise ValueError(f"no such arguments: {sorted(unknown)}")
    attrs = {(names.index(a),): [["tt.divisibility", HINTS]] for a in hinted}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": num_warps})
    return compiled.asm["ptx"]


_ACCESS = re.compile(r"^\s*(?:@!?%p\d+\s+)?((?:ld|st)\.global[.\w:]*)\s", re.M)


def global_accesses(ptx: str, part: str = "all") -> Counter:
    """How many times each global load/store instruction (``ld.global.v4.b32``, ...) appears
    in the PTX; each is executed once by every thread that reaches it. ``part="loop"`` counts
    only the body of the kernel's loop (from the label LLVM marks ``Loop Header`` to the last
    branch back to it), ``"outside"`` the rest."""
    lines = ptx.splitlines()
    inside = [False] * len(lines)
    if part != "all":
        head = next((i for i, l in enumerate(lines) if "Loop Header" in l), None)
        if head is None:
            raise ValueError("the PTX has no loop")
        label = lines[head].split(":")[0].strip()
        back = max(i for i, l in enumerate(lines) if re.search(rf"\bbra(?:\.uni)?\s+{re.escape(label)};", l))
        for i in range(head, back + 1):
            inside[i] = True
    keep = {"all": lambda i: True, "loop": lambda i: inside[i], "outside": lambda i: not inside[i]}
    if part not in keep:
        raise ValueError(f"part must be 'all', 'loop' or 'outside', not {part!r}")
    out = Counter()
    for i, line in enumerate(lines):
        m = _ACCESS.match(line)
        if m and keep[part](i):
            out[re.sub(r"\.L1::\w+|\.L2::\w+|\.nc\b", "", m[1])] += 1
    return out


def _width(op: str) -> int:
    """Bytes one thread moves with ``op``: ``.vK`` times the bits of ``.bB`` / 8."""
    bits = int(re.search(r"\.[bfsu](\d+)$", op)[1])
    vec = re.search(r"\.v(\d+)\.", op)
    return (int(vec[1]) if vec else 1) * bits // 8


def row_passes(accesses: Counter, num_warps: int, block_n: int,
               elem_bytes: int) -> dict[str, float]:
    """Passes over a row (one read or write of ``block_n`` elements of ``elem_bytes``) made by
    the vector instructions (``.v2``/``.v4``) among ``accesses``: each is executed by all
    ``32 * num_warps`` threads, each thread moving its own lanes. Scalar accesses (a row's
    mean and rstd) are left out: count them from :func:`global_accesses`."""
    threads = 32 * num_warps
    out = {"read": 0.0, "write": 0.0}
    for op, count in accesses.items():
        if re.search(r"\.v\d+\.", op):
            out["read" if op.startswith("ld") else "write"] += (
                count * _width(op) * threads / (block_n * elem_bytes))
    return out

if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:] != ["--ptx"]:
        sys.exit("usage: TRITON_INTERPRET=0 python -m helpers.kernels --ptx < jobs.json")
    if INTERPRETED:
        sys.exit("--ptx needs TRITON_INTERPRET=0: the compiler does not run beside the interpreter")
    print(json.dumps({name: _compile_here(**job) for name, job in json.load(sys.stdin).items()}))
