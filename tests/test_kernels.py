"""Lesson 13's kernels (helpers.kernels) against torch, the determinism of the two-stage
reduction, the PTX reading, the checkers (helpers.checks.kernels) against banks of wrong
and right kernels, and the lesson without Triton (macOS, Windows)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from helpers import kernels as K  # sets TRITON_INTERPRET=1 before the kernels below

pytestmark = pytest.mark.skipif(not K.AVAILABLE, reason="Triton has wheels for Linux only")
triton, tl = K.triton, K.tl
ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the kernels against torch
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_layer_norm_forward_and_backward_match_torch(dtype):
    g = torch.Generator().manual_seed(0)
    m, n = 10, 100  # N not a power of two: 28 masked lanes
    x = (torch.randn(m, n, generator=g) * 2 + 1).to(dtype).requires_grad_()
    w = (torch.rand(n, generator=g) + 0.5).to(dtype).requires_grad_()
    b = torch.randn(n, generator=g).to(dtype).requires_grad_()
    dy = torch.randn(m, n, generator=g).to(dtype)
    y = K.layer_norm(x, (n,), w, b, 1e-5)
    grads = torch.autograd.grad(y, (x, w, b), dy)
    y_ref = F.layer_norm(x, (n,), w, b, 1e-5)
    ref = torch.autograd.grad(y_ref, (x, w, b), dy)
    rtol, atol = K.TOLERANCES[dtype]
    torch.testing.assert_close(y, y_ref, rtol=rtol, atol=atol)
    # dx against torch at the dtype's tolerance; dW, dB are sums of 10 rows, rounded once
    for got, want in zip(grads, ref):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.float(), want.float(), rtol=4 * rtol, atol=4 * rtol)
    # against float64: the saved statistics
    xd = x.detach().double()
    _, mean, rstd = K.layer_norm_forward(x.detach(), w.detach(), b.detach(), 1e-5)
    assert mean.dtype == rstd.dtype == torch.float32
    torch.testing.assert_close(mean.double(), xd.mean(-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(rstd.double(), 1 / (xd.var(-1, unbiased=False) + 1e-5).sqrt(),
                               rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rms_norm_forward_matches_torch(dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(2, 5, 100, generator=g) * 3).to(dtype)
    w = (torch.rand(100, generator=g) + 0.5).to(dtype)
    y, rstd = K.rms_norm_forward(x, w, 1e-6)
    rtol, atol = K.TOLERANCES[dtype]
    torch.testing.assert_close(y, F.rms_norm(x, (100,), w, 1e-6), rtol=rtol, atol=atol)
    xd = x.double().reshape(-1, 100)
    torch.testing.assert_close(rstd.double(), 1 / (xd.square().mean(-1) + 1e-6).sqrt(), rtol=1e-5, atol=0)


def test_two_stage_reduction_is_deterministic_and_lock_order_is_not():
    g = torch.Generator().manual_seed(2)
    x, dy = torch.randn(12, 100, generator=g), torch.randn(12, 100, generator=g)
    w = torch.rand(100, generator=g) + 0.5
    _, mean, rstd = K.layer_norm_forward(x, w, torch.zeros(100))
    first = K.layer_norm_backward(dy, x, w, mean, rstd, rows_per_program=4)
    again = K.layer_norm_backward(dy, x, w, mean, rstd, rows_per_program=4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    _, dw_part, _ = K.partial_sums(dy, x, w, mean, rstd, rows_per_program=1)
    sums = K.lock_order_sums(dw_part * 1e3, [range(12), reversed(range(12)), [5, 0, 11, 3, 8, 1, 10, 2, 7, 4, 9, 6]])
    assert not (torch.equal(sums[0], sums[1]) and torch.equal(sums[0], sums[2]))
    torch.testing.assert_close(sums[0], sums[1], rtol=1e-5, atol=1e-3)  # equal up to rounding


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        K.layer_norm(torch.zeros(2, 3), (2, 3), torch.ones(3), torch.zeros(3))
    with pytest.raises(ValueError):
        K.block_size(0)
    assert [K.block_size(n) for n in (1, 64, 65, 100)] == [1, 64, 128, 128]


# ---------------------------------------------------------------- PTX, without a GPU
def test_ptx_counts_and_the_vectorisation_hints_unlock():
    sig = {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "Rstd": "*fp32", "stride": "i32",
           "N": "i32", "eps": "fp32", "BLOCK_N": "constexpr"}
    jobs = {"plain": dict(kernel="rms_norm_fwd_kernel", signature=sig, constexprs={"BLOCK_N": 512},
                          hinted=[], num_warps=1, capability=90),
            "hinted": dict(kernel="rms_norm_fwd_kernel", signature=sig, constexprs={"BLOCK_N": 512},
                           hinted=["X", "Y", "W", "stride", "N"], num_warps=1, capability=90)}
    ptx = K.compile_many(jobs)
    plain, hinted = K.global_accesses(ptx["plain"]), K.global_accesses(ptx["hinted"])
    # 512 lanes / 32 threads = 16 halves a thread, for X and for W
    assert plain["ld.global.b16"] == 32 and "ld.global.v4.b32" not in plain
    assert hinted["ld.global.v4.b32"] == 4 and "ld.global.b16" not in hinted
    assert K.row_passes(hinted, 1, 512, 2) == {"read": 2.0, "write": 1.0}
    with pytest.raises(ValueError):
        K.global_accesses(ptx["plain"], part="loop")  # no loop in the forward


def test_global_accesses_parser_can_fail():
    ptx = ("\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];\n"
           "$L__BB0_2:  // =>This Inner Loop Header: Depth=1\n"
           "\tld.global.b32 { %r5 }, [ %rd2 + 0 ];\n"
           "\t@%p2 st.global.v2.b32 [ %rd3 + 0 ], { %r6, %r7 };\n"
           "\t@%p3 bra \t$L__BB0_2;\n"
           "\tst.global.b16 [ %rd4 + 0 ], %rs1;\n")
    assert K.global_accesses(ptx) == {"ld.global.v4.b32": 1, "ld.global.b32": 1,
                                      "st.global.v2.b32": 1, "st.global.b16": 1}
    assert K.global_accesses(ptx, "loop") == {"ld.global.b32": 1, "st.global.v2.b32": 1}
    assert K.row_passes(K.global_accesses(ptx), 1, 32, 4) == {"read": 4.0, "write": 2.0}


# ---------------------------------------------------------------- the RMSNorm checker
from helpers.checks import check_layer_norm_backward_kernel, check_rms_norm_kernel  # noqa: E402


@triton.jit
def rms_right_model(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_right_rsqrt_where(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    inside = offs < N
    ptr = X + tl.program_id(0) * stride + offs
    x = tl.where(inside, tl.load(ptr, mask=inside).to(tl.float32), 0.0)
    ms = tl.sum(x * x, axis=0) * (1.0 / N)
    r = tl.rsqrt(ms + eps)
    w = tl.load(W + offs, mask=inside, other=0.0).to(tl.float32)
    tl.store(Y + tl.program_id(0) * stride + offs, (x * w * r).to(Y.dtype.element_ty), mask=inside)
    tl.store(Rstd + tl.program_id(0), r)


@triton.jit
def rms_right_chunked(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    # two loops over chunks of 16 lanes: the style for rows longer than one block
    row = tl.program_id(0)
    acc = tl.zeros((16,), dtype=tl.float32)
    for start in range(0, N, 16):
        cols = start + tl.arange(0, 16)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    for start in range(0, N, 16):
        cols = start + tl.arange(0, 16)
        x = tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
        w = tl.load(W + cols, mask=cols < N, other=0.).to(tl.float32)
        tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=cols < N)


@triton.jit
def rms_unmasked_load(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_unmasked_store(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty))


@triton.jit
def rms_stats_16bit(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x16 = tl.load(X + row * stride + cols, mask=mask, other=0.)
    ms = (tl.sum(x16 * x16, axis=0) / N).to(tl.float32)  # the sum in the input's 16 bits
    rstd = 1 / tl.sqrt(ms + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x16.to(tl.float32) * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_bf16_product(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    xin = tl.load(X + row * stride + cols, mask=mask, other=0.)
    x = xin.to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask)
    tl.store(Y + row * stride + cols, ((xin * w) * rstd).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_eps_outside(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / (tl.sqrt(tl.sum(x * x, axis=0) / N) + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_divides_by_block(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / BLOCK_N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_centred(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    xc = tl.where(mask, x - tl.sum(x, axis=0) / N, 0.)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (xc * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_no_weight(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    tl.store(Y + row * stride + cols, (x * rstd).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_sum_not_mean(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_stride_is_n(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_saves_rms(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Rstd + row, rms)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x / rms * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rms_sqrt_in_half(X, Y, W, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-5)  # a literal keeps the 16-bit type
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


RMS_RIGHT = [rms_right_model, rms_right_rsqrt_where, rms_right_chunked, K.rms_norm_fwd_kernel]
RMS_WRONG = {
    rms_unmasked_load: "unmasked_tail",
    rms_unmasked_store: "unmasked_store",
    rms_stats_16bit: "statistics_16bit",
    rms_bf16_product: "bf16_no_cast",
    rms_eps_outside: "eps_outside_sqrt",
    rms_divides_by_block: "divides_by_block",
    rms_centred: "subtracts_mean",
    rms_no_weight: "weight_missing",
    rms_sum_not_mean: "sum_not_mean",
    rms_stride_is_n: "stride_is_n",
    rms_saves_rms: "saved_statistic",
    rms_sqrt_in_half: "statistics_16bit",  # no cast at all, tl.rsqrt
}


@pytest.mark.parametrize("kernel", RMS_RIGHT, ids=lambda k: getattr(k, "__name__", str(k)))
def test_rms_checker_accepts_right_kernels(kernel):
    r = check_rms_norm_kernel(kernel)
    assert r and r.mistake is None, r.message


@pytest.mark.parametrize("kernel, mistake", RMS_WRONG.items(),
                         ids=lambda k: getattr(k, "__name__", str(k)))
def test_rms_checker_names_each_mistake(kernel, mistake):
    r = check_rms_norm_kernel(kernel)
    assert not r and r.mistake == mistake, r.message
    en, zh = r.message.splitlines()
    assert en.startswith("✘ rms_norm_kernel: ") and zh.startswith("✘ rms_norm_kernel：")


# ---------------------------------------------------------------- the LayerNorm backward checker
@triton.jit
def bwd_right_model(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
                    ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for row in range(pid * ROWS_PER_PROGRAM, tl.minimum(pid * ROWS_PER_PROGRAM + ROWS_PER_PROGRAM, M)):
        x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        dy = tl.load(DY + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        xhat = tl.where(mask, (x - tl.load(Mean + row)) * tl.load(Rstd + row), 0.)
        g = w * dy
        dx = (g - xhat * (tl.sum(xhat * g, axis=0) / N) - tl.sum(g, axis=0) / N) * tl.load(Rstd + row)
        tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(DW + pid * N + cols, dw, mask=mask)
    tl.store(DB + pid * N + cols, db, mask=mask)


@triton.jit
def bwd_right_static(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
                     ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr):
    # unrolled rows, a guard per row instead of a loop bound, the tutorial's mean1/mean2 names
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for i in tl.static_range(ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        if row < M:
            x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
            dy = tl.load(DY + row * stride + cols, mask=mask, other=0.).to(tl.float32)
            mean = tl.load(Mean + row)
            rstd = tl.load(Rstd + row)
            xhat = tl.where(mask, (x - mean) * rstd, 0.)
            wdy = tl.where(mask, w * dy, 0.)
            mean1 = tl.sum(xhat * wdy, axis=0) / N
            mean2 = tl.sum(wdy, axis=0) / N
            dx = (wdy - (xhat * mean1 + mean2)) * rstd
            tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)
            dw += dy * xhat
            db += dy
    tl.store(DW + pid * N + cols, dw, mask=mask)
    tl.store(DB + pid * N + cols, db, mask=mask)


@triton.jit
def bwd_right_while(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
                    ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr):
    # a while loop, 1/N as a factor, dx from xhat written as (x - mean) * rstd inline
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    keep = offs < N
    w = tl.load(W + offs, mask=keep, other=0.).to(tl.float32)
    acc_w = tl.zeros((BLOCK_N,), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_N,), dtype=tl.float32)
    inv_n = 1.0 / N
    row = pid * ROWS_PER_PROGRAM
    end = tl.minimum(row + ROWS_PER_PROGRAM, M)
    while row < end:
        dy = tl.load(DY + row * stride + offs, mask=keep, other=0.).to(tl.float32)
        x = tl.load(X + row * stride + offs, mask=keep, other=0.).to(tl.float32)
        r = tl.load(Rstd + row)
        xhat = tl.where(keep, (x - tl.load(Mean + row)) * r, 0.)
        a = tl.sum(w * dy * xhat, axis=0) * inv_n
        c = tl.sum(w * dy, axis=0) * inv_n
        tl.store(DX + row * stride + offs, (r * (w * dy - c - xhat * a)).to(DX.dtype.element_ty), mask=keep)
        acc_w += xhat * dy
        acc_b += dy
        row += 1
    tl.store(DW + pid * N + offs, acc_w, mask=keep)
    tl.store(DB + pid * N + offs, acc_b, mask=keep)


def _bwd_variant(dx_expr="(g - xhat * c1 - c2) * rstd", dw_expr="dw += dy * xhat",
                 db_expr="db += dy", store_mask=", mask=mask", dx_mask=", mask=mask",
                 bound="tl.minimum(row_start + ROWS_PER_PROGRAM, M)", cast=".to(tl.float32)",
                 load_mask="mask=mask, other=0."):
    """A wrong kernel: the model with one line changed, written to a file so that Triton can
    read its source."""
    src = f'''
import triton
import triton.language as tl


@triton.jit
def kernel(DX, DY, X, W, Mean, Rstd, DW, DB, stride, M, N,
           ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(W + cols, mask=mask, other=0.){cast}
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    row_start = pid * ROWS_PER_PROGRAM
    for row in range(row_start, {bound}):
        x = tl.load(X + row * stride + cols, {load_mask}){cast}
        dy = tl.load(DY + row * stride + cols, {load_mask}){cast}
        mean = tl.load(Mean + row)
        rstd = tl.load(Rstd + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.)
        g = w * dy
        c1 = tl.sum(xhat * g, axis=0) / N
        c2 = tl.sum(g, axis=0) / N
        dx = {dx_expr}
        tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty){dx_mask})
        {dw_expr}
        {db_expr}
    tl.store(DW + pid * N + cols, dw{store_mask})
    tl.store(DB + pid * N + cols, db{store_mask})
'''
    return src


BWD_WRONG = {
    "missing_mean_term": dict(dx_expr="(g - xhat * c1) * rstd"),
    "missing_xhat_term": dict(dx_expr="(g - c2) * rstd"),
    "missing_rstd": dict(dx_expr="g - xhat * c1 - c2"),
    "dy_not_g": dict(dx_expr="(dy - xhat * (tl.sum(xhat * dy, axis=0) / N) - tl.sum(dy, axis=0) / N) * rstd"),
    "wrong_axis": dict(dw_expr="dw += tl.sum(dy * xhat, axis=0)", db_expr="db += tl.sum(dy, axis=0)"),
    "dw_uses_x": dict(dw_expr="dw += dy * x"),
    "overwrites_partial": dict(dw_expr="dw = dy * xhat", db_expr="db = dy"),
    "unmasked_store": dict(store_mask=""),          # the forgotten mask in the partial sums
    "unmasked_store ": dict(dx_mask=""),            # dx stored without its mask
    "rows_past_m": dict(bound="row_start + ROWS_PER_PROGRAM"),
    "bf16_no_cast": dict(cast=""),
    "unmasked_tail": dict(load_mask="mask=None"),
}


@pytest.fixture(scope="module")
def wrong_backward_kernels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wrong_kernels")
    sys.path.insert(0, str(folder))
    try:
        import importlib
        out = {}
        for i, (key, change) in enumerate(BWD_WRONG.items()):
            (folder / f"wrong_bwd_{i}.py").write_text(_bwd_variant(**change))
            out[key] = importlib.import_module(f"wrong_bwd_{i}").kernel
        yield out
    finally:
        sys.path.remove(str(folder))


@pytest.mark.parametrize("kernel", [bwd_right_model, bwd_right_static, bwd_right_while,
                                    K.layer_norm_bwd_kernel],
                         ids=lambda k: getattr(k, "__name__", str(k)))
def test_backward_checker_accepts_right_kernels(kernel):
    r = check_layer_norm_backward_kernel(kernel)
    assert r and r.mistake is None, r.message


def test_the_unchanged_variant_is_right(wrong_backward_kernels, tmp_path):
    (tmp_path / "model_variant.py").write_text(_bwd_variant())
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib
        assert check_layer_norm_backward_kernel(importlib.import_module("model_variant").kernel)
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("key", BWD_WRONG)
def test_backward_checker_names_each_mistake(wrong_backward_kernels, key):
    r = check_layer_norm_backward_kernel(wrong_backward_kernels[key])
    assert not r and r.mistake == key.strip(), r.message
    if key == "unmasked_store":
        assert "partial sums" in r.message and "部分和" in r.message


def test_checkers_keep_the_contract(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    for check in (check_rms_norm_kernel, check_layer_norm_backward_kernel):
        for bad in (lambda *a: 1 / 0, "not a kernel", None):
            r = check(bad)
            assert not r and r.mistake == "raised"
            assert r.message.splitlines()[0].startswith("✘")
    assert torch.equal(torch.rand(3), expected)
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------- without Triton
BLOCK_TRITON = """
import sys
sys.modules["triton"] = None            # import triton raises ImportError, as on macOS/Windows
sys.modules["triton.language"] = None
"""


def test_the_lesson_runs_without_triton(tmp_path):
    """Every code cell of lesson 13 runs with Triton missing; kernel cells print the message."""
    nb = json.loads((ROOT / "notebooks" / "13_fused_kernels.ipynb").read_text(encoding="utf-8"))
    cells = [("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"
             and not {"skip-execution", "nbval-skip"} & set(c["metadata"].get("tags", []))]
    script = BLOCK_TRITON + """
import io, contextlib, json
import matplotlib
matplotlib.use("Agg")
cells = json.load(open(sys.argv[1]))
ns = {}
outputs = []
for src in cells:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(src, "<cell>", "exec"), ns)
    outputs.append(buf.getvalue())
json.dump(outputs, open(sys.argv[2], "w"))
"""
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    (tmp_path / "run.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "cells.json"),
                           str(tmp_path / "out.json")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads((tmp_path / "out.json").read_text())
    kernel_cells = [o for src, o in zip(cells, outputs) if "K." in src or "check_" in src]
    assert kernel_cells
    assert sum("Linux" in o for o in outputs) >= 5
    assert all("Traceback" not in o for o in outputs)
