r"""Checkers for lesson 13's kernel exercises: a learner's Triton RMSNorm forward kernel and
LayerNorm backward kernel, run through Triton's interpreter on the CPU.

Every tensor a kernel receives is a view into a larger buffer filled with NaN: the padding
between rows (the row stride is larger than ``BLOCK_N``) and a guard after the last row.
A load without its mask reads NaN there instead of raising; a store without its mask writes
into the padding or the guard, where the checker sees it. Outputs are compared with a
float64 reference computed from the same inputs; a wrong output is matched against the
known mistakes, each written as a float64 formula.

* :func:`check_rms_norm_kernel` ``(X, Y, W, Rstd, stride, N, eps, BLOCK_N)``, grid ``(M,)``:
  ``Y[r] = X[r] * rstd * W`` with ``rstd = 1 / sqrt(mean(X[r]**2) + eps)`` stored in
  ``Rstd[r]`` (float32).
* :func:`check_layer_norm_backward_kernel` ``(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
  ROWS_PER_PROGRAM, BLOCK_N)``, grid ``(cdiv(M, ROWS_PER_PROGRAM),)``: ``DX`` for every row;
  ``DW[p]``, ``DB[p]`` (float32, a contiguous ``(programs, N)`` buffer) the sums of
  ``dy * xhat`` and ``dy`` over the rows of program ``p``. The checker adds the partial rows.

Both return a bilingual :class:`~helpers.checks.engine.CheckResult`, never print and never
raise on the learner's kernel.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from .engine import CheckResult

__all__ = ["check_rms_norm_kernel", "check_layer_norm_backward_kernel", "MISTAKES"]

GUARD = 4096  # NaN elements after every tensor


MISTAKES: dict[str, tuple[str, str]] = {
    "not_available": (
        "Triton is not installed here (Linux only; WSL on Windows), so the kernel cannot run.",
        "这里没有安装 Triton（只支持 Linux；Windows 上可用 WSL），内核无法运行。"),
    "raised": (
        "the kernel raised an error (in the interpreter, or it is not a @triton.jit kernel): {detail}",
        "内核运行时报错（在解释器中，或者它不是 @triton.jit 内核）：{detail}"),
    "sqrt_of_16_bit": (
        "tl.sqrt / tl.rsqrt got a 16-bit value ({detail}): the statistics were computed in 16 "
        "bits. Cast the loaded row with .to(tl.float32) before squaring and summing.",
        "tl.sqrt / tl.rsqrt 收到了 16 位的值（{detail}）：统计量是用 16 位算的。"
        "先用 .to(tl.float32) 转换载入的行，再求平方和。"),
    "unmasked_store": (
        "a store without its mask: the kernel wrote past the end of a row (into the {detail}). "
        "BLOCK_N is rounded up to a power of two, so lanes N..BLOCK_N-1 must be masked out: "
        "tl.store(ptr, value, mask=cols < N).",
        "存储时没有掩码：内核写到了行尾之外（写进了{detail}）。BLOCK_N 向上取整到 2 的幂，"
        "所以第 N 到 BLOCK_N-1 个 lane 必须被屏蔽：tl.store(ptr, value, mask=cols < N)。"),
    "unmasked_tail": (
        "an unmasked tail: right when N is a power of two, wrong when it is not. A load without "
        "mask=cols < N (and other=0.) reads past the row and raises nothing; those lanes enter "
        "the sums. Every load and store of a row needs the mask.",
        "尾部没有屏蔽：N 是 2 的幂时结果正确，不是时就错了。没有 mask=cols < N（以及 other=0.）"
        "的载入会读到行尾之外，而且不会报错；这些 lane 被算进了求和。一行的每次载入和存储都需要掩码。"),
    "divides_by_block": (
        "the mean divides by BLOCK_N instead of N: right when N is a power of two only. "
        "The masked lanes are zeros, not features: divide the sum by N.",
        "均值除以了 BLOCK_N 而不是 N：只有 N 是 2 的幂时才对。被屏蔽的 lane 是补上的零，不是特征："
        "求和后应除以 N。"),
    "statistics_16bit": (
        "statistics in 16 bits: with float16 input the sum of squares was kept in float16 and "
        "overflowed past 65504 (here 50 values near 40 sum to about 80000). Load, then "
        ".to(tl.float32) before any arithmetic; cast back only when storing.",
        "统计量用 16 位计算：float16 输入的平方和保存在 float16 中，超过 65504 就溢出了"
        "（这里 50 个约为 40 的数的平方和约为 80000）。载入后先 .to(tl.float32) 再做任何运算，"
        "只在存储时转回原类型。"),
    "bf16_no_cast": (
        "bfloat16 arithmetic without a cast to float32: float32 and float16 inputs pass, "
        "bfloat16 fails. Triton's interpreter computes bfloat16 arithmetic wrongly (numpy has "
        "no bfloat16), and on a GPU it would round every step to 8 significant bits. Cast "
        "every loaded tensor with .to(tl.float32).",
        "bfloat16 运算前没有转换为 float32：float32 与 float16 输入都通过，bfloat16 不通过。"
        "Triton 的解释器算 bfloat16 运算会出错（numpy 没有 bfloat16），在 GPU 上每一步也会舍入到 "
        "8 位有效位。每个载入的张量都要 .to(tl.float32)。"),
    "eps_outside_sqrt": (
        "eps outside the root: 1 / (sqrt(mean(x**2)) + eps) instead of 1 / sqrt(mean(x**2) + eps); "
        "the two differ for small inputs (x about 1e-3 here).",
        "eps 放在了根号外面：1 / (sqrt(mean(x**2)) + eps) 而不是 1 / sqrt(mean(x**2) + eps)；"
        "输入很小时（这里 x 约为 1e-3）两者差别很大。"),
    "subtracts_mean": (
        "the mean is subtracted: that is LayerNorm. RMSNorm divides x itself by its root mean "
        "square.",
        "减去了均值：那是 LayerNorm。RMSNorm 直接用 x 除以它的均方根。"),
    "sum_not_mean": (
        "the sum of squares instead of their mean: divide by N.",
        "用了平方和而不是平方的均值：应除以 N。"),
    "weight_missing": (
        "the weight is not applied: y = x * rstd * w.",
        "没有乘权重：y = x * rstd * w。"),
    "stride_is_n": (
        "row 0 is right, the other rows are not: rows addressed without the row stride (with N, "
        "or BLOCK_N). Row r starts at X + r * stride (here the stride is larger than N).",
        "第 0 行正确，其他行不对：定位各行时没有用行步长（用了 N 或 BLOCK_N）。第 r 行从 "
        "X + r * stride 开始（这里步长大于 N）。"),
    "saved_statistic": (
        "Y is right but Rstd is not 1 / sqrt(mean(x**2) + eps) in float32 ({detail}); the "
        "backward reads it.",
        "Y 是对的，但 Rstd 不是 float32 的 1 / sqrt(mean(x**2) + eps)（{detail}）；反向传播要用它。"),
    "missing_mean_term": (
        "a missing term in dx: the mean of g = w * dy is not subtracted. "
        "dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).",
        "dx 少了一项：没有减去 g = w * dy 的均值。dx = rstd * (g - mean(g) - xhat * mean(g * xhat))。"),
    "missing_xhat_term": (
        "a missing term in dx: xhat * mean(g * xhat) is not subtracted (the path through the "
        "variance). dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).",
        "dx 少了一项：没有减去 xhat * mean(g * xhat)（经过方差的那条路径）。"
        "dx = rstd * (g - mean(g) - xhat * mean(g * xhat))。"),
    "missing_rstd": (
        "dx is not multiplied by rstd.",
        "dx 没有乘以 rstd。"),
    "dy_not_g": (
        "dx uses dy where it needs g = w * dy (the weight is part of the chain rule).",
        "dx 在需要 g = w * dy 的地方用了 dy（权重也在链式法则之中）。"),
    "wrong_axis": (
        "the wrong axis for dW / dB: they are sums over the rows, one value per feature "
        "(dw += dy * xhat), not tl.sum over the features of a row.",
        "dW / dB 的求和轴错了：它们是对各行求和，每个特征一个值（dw += dy * xhat），"
        "而不是对一行内的特征做 tl.sum。"),
    "dw_uses_x": (
        "dW sums dy * x instead of dy * xhat, the normalised input.",
        "dW 累加的是 dy * x，而不是归一化之后的 dy * xhat。"),
    "overwrites_partial": (
        "the partial sums are overwritten instead of accumulated: each program keeps only its "
        "last row (dw = ... instead of dw += ...).",
        "部分和被覆盖而不是累加：每个程序只保留了它的最后一行（写成了 dw = ... 而不是 dw += ...）。"),
    "rows_past_m": (
        "the last program runs past row M - 1: its ROWS_PER_PROGRAM rows go beyond M (here M = 6, "
        "4 rows a program). Stop at tl.minimum(row_start + ROWS_PER_PROGRAM, M).",
        "最后一个程序越过了第 M - 1 行：它的 ROWS_PER_PROGRAM 行超出了 M（这里 M = 6，每个程序 "
        "4 行）。循环应止于 tl.minimum(row_start + ROWS_PER_PROGRAM, M)。"),
    "wrong_values": (
        "wrong values on case '{detail}'. None of the known mistakes matches; compare your kernel "
        "with the formulas line by line.",
        "用例“{detail}”的数值不对，与已知的错误都不吻合；请逐行对照公式检查内核。"),
}


def _result(name: str, key: str | None, cases: list[str], detail: str = "",
            passed_text: tuple[str, str] | None = None) -> CheckResult:
    if key is None:
        en, zh = passed_text
        return CheckResult(True, f"✔ {name}: {en}\n✔ {name}：{zh}")
    en, zh = (t.replace("{detail}", detail) for t in MISTAKES[key])
    return CheckResult(False, f"✘ {name}: {en}\n✘ {name}：{zh}", mistake=key, failed_cases=cases)


# --------------------------------------------------------------------------------------
# guarded tensors
# --------------------------------------------------------------------------------------
@dataclass
class _Guarded:
    """A (rows, n) view with row stride ``stride`` inside a NaN buffer, a guard after it."""
    buf: Tensor
    view: Tensor
    rows: int
    n: int
    stride: int

    def outside(self) -> Tensor:
        """Mask of the buffer's elements that are not part of the view."""
        inside = torch.zeros(self.buf.numel(), dtype=torch.bool)
        idx = (torch.arange(self.rows)[:, None] * self.stride + torch.arange(self.n)).reshape(-1)
        inside[idx] = True
        return ~inside

    def written_outside(self) -> str | None:
        """Where the kernel wrote outside the view: None, 'row padding' or 'guard'."""
        data = self.buf.float()
        changed = ~torch.isnan(data) & self.outside()
        if not changed.any():
            return None
        first = int(changed.nonzero()[0])
        return "guard" if first >= self.rows * self.stride else "padding"


def _guarded(values: Tensor, stride: int | None = None) -> _Guarded:
    values = values.reshape(values.shape[0], -1) if values.dim() > 1 else values.reshape(1, -1)
    rows, n = values.shape
    stride = stride or n
    buf = torch.full((rows * stride + GUARD,), float("nan"), dtype=values.dtype)
    view = buf[: rows * stride].view(rows, stride)[:, :n]
    view.copy_(values)
    return _Guarded(buf, view, rows, n, stride)


@contextlib.contextmanager
def _quiet():
    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _launch(kernel, grid, *args, **meta) -> str | None:
    """Run the kernel; the exception text if it raised, else None."""
    try:
        with _quiet():
            kernel[grid](*args, **meta)
    except Exception as e:  # the learner's code: a diagnosis, never raised
        text = f"{type(e).__name__}: {e}"
        return text.splitlines()[0][:300] if text else type(e).__name__
    return None


def _close(a: Tensor, b: Tensor, rtol: float, atol: float) -> bool:
    a, b = a.double(), b.double()
    return a.shape == b.shape and bool(torch.isclose(a, b, rtol=rtol, atol=atol).all())


_TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}


def _available() -> bool:
    from .. import kernels as K
    return K.AVAILABLE


def _block(n: int) -> int:
    return 1 << (n - 1).bit_length()


# --------------------------------------------------------------------------------------
# RMSNorm forward
# --------------------------------------------------------------------------------------
def _rms_ref(x: Tensor, w: Tensor, eps: float, variant: str = "right") -> tuple[Tensor, Tensor]:
    x, w = x.double(), w.double()
    n = x.shape[-1]
    if variant == "subtracts_mean":
        x = x - x.mean(-1, keepdim=True)
    ms = (x * x).sum(-1, keepdim=True) / (n if variant != "sum_not_mean" else 1)
    if variant == "eps_outside_sqrt":
        rstd = 1 / (ms.sqrt() + eps)
    else:
        rstd = 1 / (ms + eps).sqrt()
    y = x * rstd * (w if variant != "weight_missing" else 1)
    return y, rstd.squeeze(-1)


@dataclass(frozen=True)
class _RmsCase:
    name: str
    rows: int
    n: int
    dtype: torch.dtype
    scale: float
    offset: float
    seed: int


_RMS_CASES = [
    _RmsCase("float32, N = 64 (a power of two)", 3, 64, torch.float32, 1.5, 0.3, 1),
    _RmsCase("float32, N = 50 (14 masked lanes)", 3, 50, torch.float32, 1.5, 0.3, 2),
    _RmsCase("float32, small inputs (x about 1e-3)", 3, 50, torch.float32, 1e-3, 0.0, 3),
    _RmsCase("float16, x = 40 + N(0, 1), N = 50", 3, 50, torch.float16, 1.0, 40.0, 4),
    _RmsCase("bfloat16, N = 50", 3, 50, torch.bfloat16, 1.5, 0.3, 5),
]


def _rms_inputs(case: _RmsCase) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(case.seed)
    x = (torch.randn(case.rows, case.n, generator=g, dtype=torch.float64) * case.scale
         + case.offset).to(case.dtype)
    w = (torch.rand(case.n, generator=g, dtype=torch.float64) + 0.5).to(case.dtype)
    return x, w


def check_rms_norm_kernel(kernel: Callable, eps: float = 1e-5) -> CheckResult:
    """Run a learner's RMSNorm forward kernel ``(X, Y, W, Rstd, stride, N, eps, BLOCK_N)`` on
    the cases of :data:`_RMS_CASES` (float32, float16, bfloat16; N a power of two or not; small
    inputs) through Triton's interpreter and name the mistake it makes."""
    name = "rms_norm_kernel"
    if not _available():
        return _result(name, "not_available", [])
    state = torch.get_rng_state()
    try:
        return _check_rms(kernel, eps, name)
    finally:
        torch.set_rng_state(state)


def _check_rms(kernel, eps, name) -> CheckResult:
    failed: list[str] = []
    first_key, first_detail = None, ""
    for case in _RMS_CASES:
        x, w = _rms_inputs(case)
        block = _block(case.n)
        stride = block + 8                       # the tail overshoot stays in the row padding
        X, Y = _guarded(x, stride), _guarded(torch.zeros_like(x), stride)
        Y.buf.fill_(float("nan"))
        W = _guarded(w)
        R = _guarded(torch.zeros(case.rows, 1))
        R.buf.fill_(float("nan"))
        err = _launch(kernel, (case.rows,), X.view, Y.view, W.view.reshape(-1), R.view.reshape(-1),
                      stride, case.n, eps, BLOCK_N=block)
        if err is not None:
            if "Expected dtype" in err and ("fp16" in err or "bf16" in err):
                return _result(name, "sqrt_of_16_bit", [case.name], err)
            return _result(name, "raised", [case.name], err)
        where = Y.written_outside() or R.written_outside()
        if where:
            part = {"padding": "padding between rows / 行与行之间的填充区",
                    "guard": "guard after the last row / 最后一行之后的保护区"}[where]
            return _result(name, "unmasked_store", [case.name], part)
        y, rstd = Y.view.clone(), R.view.reshape(-1).clone()
        y_ref, rstd_ref = _rms_ref(x, w, eps)
        rtol, atol = _TOL[case.dtype]
        y_ok = _close(y, y_ref, rtol, atol)
        rstd_ok = _close(rstd, rstd_ref, 1e-4, 0.0)
        if y_ok and rstd_ok:
            continue
        failed.append(case.name)
        if first_key is not None:
            continue
        key = None
        if case.dtype == torch.float32 and case.n == 64:
            if y_ok:
                key, first_detail = "saved_statistic", (
                    f"Rstd[0] = {float(rstd[0]):.4g}, expected {float(rstd_ref[0]):.4g}")
            else:
                for variant in ("subtracts_mean", "sum_not_mean", "weight_missing"):
                    if _close(y, _rms_ref(x, w, eps, variant)[0], 1e-4, 1e-4):
                        key = variant
                        break
                else:
                    if _close(y[0], y_ref[0], 1e-4, 1e-4):  # row 0 right, the others not
                        key = "stride_is_n"
        elif case.dtype == torch.float32 and case.n == 50 and case.scale > 1e-2:
            padded = torch.cat([x.double(), torch.zeros(case.rows, block - case.n,
                                                        dtype=torch.float64)], 1)
            ms = (padded * padded).sum(-1, keepdim=True) / block
            if _close(y, x.double() / (ms + eps).sqrt() * w.double(), 1e-4, 1e-4):
                key = "divides_by_block"
            else:
                key = "unmasked_tail"
        elif case.scale < 1e-2:
            if _close(y, _rms_ref(x, w, eps, "eps_outside_sqrt")[0], 1e-4, 1e-7):
                key = "eps_outside_sqrt"
        elif case.dtype == torch.float16:
            key = "statistics_16bit"
        elif case.dtype == torch.bfloat16:
            key = "bf16_no_cast"
        first_key = key or "wrong_values"
        if key is None:
            first_detail = case.name
    if first_key is None:
        return _result(name, None, [], passed_text=(
            f"all {len(_RMS_CASES)} cases match (float32, float16, bfloat16; N = 64 and 50; "
            "small inputs), no write outside the rows.",
            f"全部 {len(_RMS_CASES)} 个用例一致（float32、float16、bfloat16；N = 64 与 50；"
            "很小的输入），没有写到行之外。"))
    return _result(name, first_key, failed, first_detail)


# --------------------------------------------------------------------------------------
# LayerNorm backward
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _BwdCase:
    name: str
    rows: int
    n: int
    dtype: torch.dtype
    seed: int


_BWD_CASES = [
    _BwdCase("float32, N = 64, M = 6 rows (4 a program)", 6, 64, torch.float32, 11),
    _BwdCase("float32, N = 50 (14 masked lanes)", 6, 50, torch.float32, 12),
    _BwdCase("bfloat16, N = 50", 6, 50, torch.bfloat16, 13),
]
_ROWS_PER_PROGRAM = 4


def _bwd_inputs(case: _BwdCase):
    g = torch.Generator().manual_seed(case.seed)
    x = (torch.randn(case.rows, case.n, generator=g, dtype=torch.float64) * 1.5 + 0.5).to(case.dtype)
    dy = torch.randn(case.rows, case.n, generator=g, dtype=torch.float64).to(case.dtype)
    w = (torch.rand(case.n, generator=g, dtype=torch.float64) + 0.5).to(case.dtype)
    xd = x.double()
    mean = xd.mean(-1)
    rstd = 1 / (xd.var(-1, unbiased=False) + 1e-5).sqrt()
    return x, dy, w, mean.float(), rstd.float()


def _bwd_ref(x, dy, w, mean, rstd, variant="right", rows_per_program=_ROWS_PER_PROGRAM):
    x, dy, w = x.double(), dy.double(), w.double()
    mean, rstd = mean.double()[:, None], rstd.double()[:, None]
    xhat = (x - mean) * rstd
    g = (w if variant != "dy_not_g" else 1) * dy
    c1 = (xhat * g).mean(-1, keepdim=True)
    c2 = g.mean(-1, keepdim=True)
    terms = {"missing_mean_term": g - xhat * c1, "missing_xhat_term": g - c2}
    dx = terms.get(variant, g - xhat * c1 - c2)
    if variant != "missing_rstd":
        dx = dx * rstd
    dw, db = (dy * xhat).sum(0), dy.sum(0)
    if variant == "wrong_axis":
        dw = (dy * xhat).sum().expand(x.shape[1])
        db = dy.sum().expand(x.shape[1])
    elif variant == "dw_uses_x":
        dw = (dy * x).sum(0)
    elif variant == "overwrites_partial":
        last = [min(p + rows_per_program, x.shape[0]) - 1 for p in range(0, x.shape[0], rows_per_program)]
        dw, db = (dy * xhat)[last].sum(0), dy[last].sum(0)
    return dx, dw, db


def check_layer_norm_backward_kernel(kernel: Callable) -> CheckResult:
    """Run a learner's LayerNorm backward kernel ``(DX, DY, X, W, Mean, Rstd, DW, DB, stride,
    M, N, ROWS_PER_PROGRAM, BLOCK_N)`` (grid: one program per ``ROWS_PER_PROGRAM`` rows) on
    float32 and bfloat16 cases, N a power of two or not, through Triton's interpreter; add its
    partial sums; name the mistake it makes."""
    name = "layer_norm_backward_kernel"
    if not _available():
        return _result(name, "not_available", [])
    state = torch.get_rng_state()
    try:
        return _check_bwd(kernel, name)
    finally:
        torch.set_rng_state(state)


def _check_bwd(kernel, name) -> CheckResult:
    failed: list[str] = []
    first_key, first_detail = None, ""
    r = _ROWS_PER_PROGRAM
    for case in _BWD_CASES:
        x, dy, w, mean, rstd = _bwd_inputs(case)
        m, n = case.rows, case.n
        programs = -(-m // r)
        block = _block(n)
        stride = block + 8
        X, DY = _guarded(x, stride), _guarded(dy, stride)
        DX = _guarded(torch.zeros_like(x), stride)
        DX.buf.fill_(float("nan"))
        DW = _guarded(torch.zeros(programs, n))
        DB = _guarded(torch.zeros(programs, n))
        DW.buf.fill_(float("nan"))
        DB.buf.fill_(float("nan"))
        W, MEAN, RSTD = _guarded(w), _guarded(mean), _guarded(rstd)
        err = _launch(kernel, (programs,), DX.view, DY.view, X.view, W.view.reshape(-1),
                      MEAN.view.reshape(-1), RSTD.view.reshape(-1), DW.view, DB.view, stride, m, n,
                      ROWS_PER_PROGRAM=r, BLOCK_N=block)
        if err is not None:
            if "Expected dtype" in err and ("fp16" in err or "bf16" in err):
                return _result(name, "sqrt_of_16_bit", [case.name], err)
            return _result(name, "raised", [case.name], err)
        where_dx = DX.written_outside()
        if where_dx == "guard" and DX.buf[m * stride: m * stride + n].isnan().logical_not().any():
            return _result(name, "rows_past_m", [case.name])
        if where_dx:
            return _result(name, "unmasked_store", [case.name],
                           "padding after a row of DX / DX 行尾之后的填充区")
        where_p = DW.written_outside() or DB.written_outside()
        if where_p:
            return _result(name, "unmasked_store", [case.name],
                           "guard after the partial sums DW / DB: a forgotten mask in the partial "
                           "sums; on a GPU the overshoot of program p lands on the first values of "
                           "program p + 1's row, which may have stored them already / 部分和 DW / DB "
                           "之后的保护区：部分和的存储忘了掩码；在 GPU 上，程序 p 越界写入的部分落在程序 "
                           "p + 1 那一行的开头，而后者可能已经存好了")
        dx = DX.view.clone()
        dw, db = DW.view.double().sum(0), DB.view.double().sum(0)
        dx_ref, dw_ref, db_ref = _bwd_ref(x, dy, w, mean, rstd)
        rtol, atol = _TOL[case.dtype]
        dx_ok = _close(dx, dx_ref, rtol, atol)
        p_tol = 1e-4 if case.dtype == torch.float32 else 2e-2  # float32 partial sums
        dwb_ok = _close(dw, dw_ref, p_tol, p_tol) and _close(db, db_ref, p_tol, p_tol)
        if dx_ok and dwb_ok:
            continue
        failed.append(case.name)
        if first_key is not None:
            continue
        key = None
        if case.dtype == torch.float32 and n == 64:
            if not dx_ok:
                for variant in ("missing_mean_term", "missing_xhat_term", "missing_rstd", "dy_not_g"):
                    if _close(dx, _bwd_ref(x, dy, w, mean, rstd, variant)[0], 1e-4, 1e-4):
                        key = variant
                        break
            elif torch.isnan(dw).any() or torch.isnan(db).any():
                key = "rows_past_m"  # rows >= M read the NaN guard
            else:
                for variant in ("wrong_axis", "dw_uses_x", "overwrites_partial"):
                    _, vw, vb = _bwd_ref(x, dy, w, mean, rstd, variant)
                    if _close(dw, vw, 1e-4, 1e-4) or (variant == "wrong_axis" and _close(db, vb, 1e-4, 1e-4)):
                        key = variant
                        break
        elif case.dtype == torch.float32:
            key = "unmasked_tail"
        elif case.dtype == torch.bfloat16:
            key = "bf16_no_cast"
        first_key = key or "wrong_values"
        if key is None:
            first_detail = case.name
    if first_key is None:
        return _result(name, None, [], passed_text=(
            f"all {len(_BWD_CASES)} cases match (dx, and dW, dB from the partial sums; float32 "
            "and bfloat16; N = 64 and 50; 6 rows, 4 a program), no write outside the rows.",
            f"全部 {len(_BWD_CASES)} 个用例一致（dx，以及由部分和得到的 dW、dB；float32 与 "
            "bfloat16；N = 64 与 50；6 行，每个程序 4 行），没有写到行之外。"))
    return _result(name, first_key, failed, first_detail)
