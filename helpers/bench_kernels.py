r"""Time lesson 13's kernels, compiled, on a CUDA GPU, against torch and a plain copy.

Each row normalises one ``rows x cols`` tensor (4096 x 4096 by default) and reports the median
time of ``--repeats`` calls (CUDA events, after warm-up calls) and the bandwidth

.. math:: \text{GB/s} = \frac{\text{passes} \times \text{rows} \times \text{cols} \times
          \text{bytes per element}}{\text{time}}

with the ideal pass count of each operation: 2 for a forward (read x, write y) and for the copy,
3 for the backward (read x and dy, write dx; the tutorial's count), whatever the kernel really
moves; then that bandwidth as a fraction of the copy's (``y.copy_(x)`` into a preallocated
tensor). The rows: the copy, ``x.clone()``, the lesson's Triton kernels
(:mod:`helpers.kernels`), ``F.layer_norm`` / ``F.rms_norm`` and their ``torch.compile`` d
versions, and LayerNorm's backward (the lesson's two-stage kernels against torch's autograd).
Every kernel's output is compared with torch's before it is timed.

Usage (on a machine with a CUDA GPU, ``TRITON_INTERPRET`` unset)::

    python -m helpers.bench_kernels --out results/kernel_bench.json
    python -m helpers.bench_kernels --rows 1024 --cols 1000 --no-compile   # quicker

The file records the device, the versions of torch, Triton and CUDA, the command and the date;
lesson 13 reads it (:func:`summary`). Without CUDA the script exits with a message and writes
nothing: CI never times.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

RESULT = pathlib.Path(__file__).resolve().parents[1] / "results" / "kernel_bench.json"

__all__ = ["RESULT", "read", "summary", "main"]


def _gb_s(passes: int, numel: int, elem: int, ms: float) -> float:
    return passes * numel * elem / (ms * 1e-3) / 1e9


def _time(fn, repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``fn``, each between two CUDA events."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _rms_eager(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def run(rows: int, cols: int, dtypes: list[str], repeats: int, compile_: bool) -> dict:
    from . import kernels as K

    if K.INTERPRETED or not K.AVAILABLE:
        raise SystemExit("helpers.kernels runs in the interpreter here: unset TRITON_INTERPRET")
    out = []
    for name in dtypes:
        dtype = getattr(torch, name)
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, cols, device="cuda", generator=g).to(dtype)
        dy = torch.randn(rows, cols, device="cuda", generator=g).to(dtype)
        w = (torch.rand(cols, device="cuda", generator=g) + 0.5).to(dtype)
        b = torch.randn(cols, device="cuda", generator=g).to(dtype)
        dest = torch.empty_like(x)
        numel, elem = x.numel(), x.element_size()
        rtol, atol = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
                      torch.bfloat16: (5e-2, 5e-2)}[dtype]

        # correctness first, on the GPU
        y, mean, rstd = K.layer_norm_forward(x, w, b, 1e-5)
        torch.testing.assert_close(y, F.layer_norm(x, (cols,), w, b, 1e-5), rtol=rtol, atol=atol)
        yr, _ = K.rms_norm_forward(x, w, 1e-6)
        torch.testing.assert_close(yr, F.rms_norm(x, (cols,), w, 1e-6), rtol=rtol, atol=atol)
        xg = x.detach().clone().requires_grad_()
        wg, bg = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        y_ref = F.layer_norm(xg, (cols,), wg, bg, 1e-5)
        ref = torch.autograd.grad(y_ref, (xg, wg, bg), dy, retain_graph=True)
        mine = K.layer_norm_backward(dy, x, w, mean, rstd, rows_per_program=32)
        torch.testing.assert_close(mine[0], ref[0], rtol=rtol, atol=atol)
        for got, want in zip(mine[1:], ref[1:]):  # sums over all rows: relative to their size
            torch.testing.assert_close(got.float(), want.float(), rtol=rtol,
                                       atol=atol * float(want.float().abs().max()))

        cases = [
            ("copy", "y.copy_(x)", 2, lambda: dest.copy_(x)),
            ("copy", "x.clone()", 2, lambda: x.clone()),
            ("LayerNorm forward", "lesson kernel (Triton)", 2,
             lambda: K.layer_norm_forward(x, w, b, 1e-5)),
            ("LayerNorm forward", "F.layer_norm", 2, lambda: F.layer_norm(x, (cols,), w, b, 1e-5)),
            ("RMSNorm forward", "lesson kernel (Triton)", 2, lambda: K.rms_norm_forward(x, w, 1e-6)),
            ("RMSNorm forward", "F.rms_norm", 2, lambda: F.rms_norm(x, (cols,), w, 1e-6)),
            ("LayerNorm backward", "lesson kernels (Triton, two-stage dW/dB)", 3,
             lambda: K.layer_norm_backward(dy, x, w, mean, rstd, rows_per_program=32)),
            ("LayerNorm backward", "torch autograd (dx, dW, dB)", 3,
             lambda: torch.autograd.grad(y_ref, (xg, wg, bg), dy, retain_graph=True)),
        ]
        if compile_:
            ln_c = torch.compile(lambda t: F.layer_norm(t, (cols,), w, b, 1e-5))
            rms_c = torch.compile(lambda t: _rms_eager(t, w, 1e-6))
            cases.insert(4, ("LayerNorm forward", "torch.compile(F.layer_norm)", 2, lambda: ln_c(x)))
            cases.insert(7, ("RMSNorm forward", "torch.compile(x * rsqrt(mean(x²) + eps) * w)", 2,
                             lambda: rms_c(x)))
        copy_gb = None
        for op, impl, passes, fn in cases:
            ms = _time(fn, repeats)
            gb = _gb_s(passes, numel, elem, ms)
            copy_gb = copy_gb or gb  # the first row is the copy
            out.append(dict(dtype=name, operation=op, implementation=impl, passes=passes,
                            ms=round(ms, 5), gb_s=round(gb, 1), of_copy=round(gb / copy_gb, 3)))
    return dict(rows=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                   choices=["float32", "float16", "bfloat16"])
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="write the record there (results/kernel_bench.json for the lesson)")
    args = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off", "no"):
        print("TRITON_INTERPRET is set: the kernels would run in the interpreter, on the CPU. "
              "Unset it to time the compiled kernels.", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("No CUDA GPU here: this benchmark times compiled kernels on a GPU and writes "
              "nothing without one. Lesson 13 runs its kernels in Triton's interpreter instead.",
              file=sys.stderr)
        return 2
    import triton

    record = dict(
        command="python -m helpers.bench_kernels " + " ".join(sys.argv[1:] if argv is None else argv),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        device=torch.cuda.get_device_name(),
        capability=".".join(map(str, torch.cuda.get_device_capability())),
        torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda,
        shape=[args.rows, args.cols], repeats=args.repeats,
        timing="median of the repeats, CUDA events, after 5 warm-up calls",
        bandwidth="passes x rows x cols x bytes per element / time; 2 passes forward and copy, 3 backward",
    )
    record.update(run(args.rows, args.cols, args.dtypes, args.repeats, not args.no_compile))
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(summary(record))
    return 0


def read(path: pathlib.Path = RESULT) -> dict | None:
    """The recorded run, or None where no GPU run has been recorded."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def summary(record: dict | None = None) -> str:
    """The recorded run as a table, with where it came from; or a note that there is none."""
    if record is None:
        record = read()
    if record is None:
        return ("No GPU run is recorded yet (results/kernel_bench.json does not exist). On a machine "
                "with a CUDA GPU: python -m helpers.bench_kernels --out results/kernel_bench.json\n"
                "还没有记录过 GPU 上的运行（results/kernel_bench.json 不存在）。在有 CUDA GPU 的机器上运行："
                "python -m helpers.bench_kernels --out results/kernel_bench.json")
    lines = [f"{record['device']} (compute capability {record['capability']}), torch {record['torch']}, "
             f"triton {record['triton']}, CUDA {record['cuda']}, {record['date']}",
             f"{record['command']}; {record['shape'][0]} x {record['shape'][1]}, {record['timing']}",
             f"{'dtype':<9}{'operation':<20}{'implementation':<46}{'ms':>8}{'GB/s':>8}{'x copy':>8}"]
    for r in record["rows"]:
        lines.append(f"{r['dtype']:<9}{r['operation']:<20}{r['implementation']:<46}"
                     f"{r['ms']:>8.3f}{r['gb_s']:>8.0f}{r['of_copy']:>8.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
