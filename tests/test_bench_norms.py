"""Tests for helpers.bench_norms: the byte counts, bandwidth arithmetic, traffic model,
variance algorithms and tiled norms against hand-computed values, torch and float64
references, and the command line on tiny sizes. No test depends on a measured time."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import bench_norms as B


# --- bytes, bandwidth, median ---------------------------------------------------------
def test_tensor_bytes_by_hand():
    assert B.tensor_bytes((4096, 1024)) == 16 * 2**20  # 4 bytes per float32 value
    assert B.tensor_bytes((4096, 1024), torch.float16) == 8 * 2**20
    assert B.tensor_bytes((4096, 1024), torch.bfloat16) == 8 * 2**20
    assert B.tensor_bytes((3, 5), torch.float64) == 120
    assert B.tensor_bytes((0, 7)) == 0
    assert B.ideal_bytes((4096, 1024)) == 32 * 2**20
    with pytest.raises(ValueError, match="non-negative"):
        B.tensor_bytes((2, -1))


def test_bandwidth_arithmetic():
    assert B.bandwidth_gbs(2e9, 1.0) == pytest.approx(2.0)
    assert B.bandwidth_gbs(32 * 2**20, 3.3554432e-3) == pytest.approx(10.0)  # 33.55 MB in 3.36 ms
    for bad in (0.0, -1e-3, float("inf")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            B.bandwidth_gbs(1e6, bad)
    with pytest.raises(ValueError, match="negative"):
        B.bandwidth_gbs(-1, 1.0)


def test_median():
    assert B.median([3.0, 1.0, 2.0]) == 2.0
    assert B.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert B.median([1.0, 1.0, 100.0]) == 1.0  # one disturbed run does not move it
    with pytest.raises(ValueError, match="at least one"):
        B.median([])


def test_time_calls_runs_in_rounds():
    order = []
    times = B.time_calls({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                         repeats=3, warmup=1)
    assert order == ["a", "b"] * 4  # one warm-up round, then 3 timed rounds, interleaved
    assert [len(v) for v in times.values()] == [3, 3]
    assert all(t >= 0 for v in times.values() for t in v)
    with pytest.raises(ValueError, match="repeats"):
        B.time_calls({"a": lambda: None}, repeats=0)
    with pytest.raises(ValueError, match="clock"):
        B.time_calls({"a": lambda: None}, clock="sundial")


def test_thread_clock_leaves_out_sleeping():
    import time

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert B.default_clock("cpu") == "thread"
        wall = B.time_calls({"sleep": lambda: time.sleep(0.02)}, repeats=2, warmup=0)["sleep"]
        cpu = B.time_calls({"sleep": lambda: time.sleep(0.02)}, repeats=2, warmup=0,
                           clock="thread")["sleep"]
        assert min(wall) >= 0.02 and max(cpu) < 0.01  # a sleeping thread uses no CPU time
        torch.set_num_threads(2)
        assert B.default_clock("cpu") == "wall"
        with pytest.raises(ValueError, match="set_num_threads"):
            B.time_calls({"a": lambda: None}, clock="thread")
    finally:
        torch.set_num_threads(previous)
    assert B.default_clock("cuda") == "wall"


# --- the traffic model ----------------------------------------------------------------
def test_traffic_of_elementwise_ops_by_hand():
    x = torch.randn(64, 32)
    nbytes = 64 * 32 * 4
    (op,) = B.traffic(lambda: x.clone())
    assert (op.op, op.read, op.written) == ("clone", nbytes, nbytes)
    (op,) = B.traffic(lambda: x * 2)
    assert (op.read, op.written) == (nbytes, nbytes)
    (op,) = B.traffic(lambda: x + x)  # the same tensor read twice counts twice
    assert (op.read, op.written) == (2 * nbytes, nbytes)
    (op,) = B.traffic(lambda: x.sum(-1))  # a reduction writes one value per row
    assert (op.read, op.written) == (nbytes, 64 * 4)
    assert B.passes(B.traffic(lambda: x.clone()), nbytes) == 2.0


def test_traffic_views_inplace_out_and_broadcast():
    x = torch.randn(64, 32)
    nbytes = 64 * 32 * 4
    assert B.traffic(lambda: x.view(32, 64).t()[0:3]) == []  # views move no data
    y = torch.zeros(64, 32)
    (op,) = B.traffic(lambda: y.add_(1.0))  # read and write y
    assert (op.read, op.written) == (nbytes, nbytes)
    (op,) = B.traffic(lambda: y.copy_(x))  # y is overwritten, not read
    assert (op.read, op.written) == (nbytes, nbytes)
    (op,) = B.traffic(lambda: torch.mul(x, 3.0, out=y))
    assert (op.read, op.written) == (nbytes, nbytes)
    w = torch.randn(32)
    (op,) = B.traffic(lambda: x * w.expand(64, 32))  # 32 distinct weights, not 64 x 32
    assert op.read == nbytes + 32 * 4
    assert B.traffic(lambda: torch.empty_like(x)) == []
    with pytest.raises(ValueError, match="positive"):
        B.passes([], 0)


def test_traffic_of_torch_norms_on_this_build():
    x = torch.randn(256, 64)
    w = torch.rand(64)
    n = x.numel() * 4
    ops = B.traffic(lambda: F.rms_norm(x, (64,), w), min_bytes=n)
    # pow, mean, add_, rsqrt, mul, mul: pow R+W, mean R, x*rstd R+W, *w R+W = 7 full passes
    assert [o.op for o in ops] == ["pow", "mean", "add_", "rsqrt", "mul", "mul"]
    assert B.passes(ops, n) == pytest.approx(7.0)
    ops = B.traffic(lambda: F.layer_norm(x, (64,), w, w))
    assert [o.op for o in ops] == ["native_layer_norm"]
    assert B.passes(B.traffic(lambda: F.layer_norm(x, (64,), w, w), min_bytes=n), n) == 2.0
    with pytest.raises(ValueError, match="min_bytes"):
        B.traffic(lambda: None, min_bytes=-1)


# --- variance algorithms ----------------------------------------------------------------
@pytest.mark.parametrize("block", [1, 7, 64, 100])
def test_welford_matches_float64_reference(block):
    x = torch.randn(5, 100, dtype=torch.float64) * 3 + 2
    var, mean = torch.var_mean(x, dim=-1, correction=0)
    m, v = B.welford_moments(x, block=block)
    torch.testing.assert_close(m, mean)
    torch.testing.assert_close(v, var)


def test_variance_algorithms_on_shifted_float32_data():
    torch.manual_seed(0)
    x = (1e4 + torch.randn(8, 1024, dtype=torch.float64)).float()
    ref = x.double().var(-1, unbiased=False)  # exact variance of the float32 values
    errors = {}
    for name, fn in [("naive", B.naive_moments), ("two-pass", B.two_pass_moments),
                     ("welford", B.welford_moments)]:
        _, var = fn(x)
        assert var.dtype == torch.float32
        errors[name] = ((var.double() - ref).abs() / ref).max().item()
    assert errors["naive"] > 1.0  # catastrophic cancellation: no correct digit left
    assert errors["two-pass"] < 1e-5 and errors["welford"] < 1e-2
    torch.testing.assert_close(B.two_pass_moments(x)[1], x.var(-1, unbiased=False))


def test_merge_of_two_halves_is_the_whole():
    x = torch.randn(3, 50, dtype=torch.float64)
    a, b = x[:, :20], x[:, 20:]
    n, mean, m2 = B.merge_moments(torch.tensor([20.0, 30.0], dtype=torch.float64),
                                  torch.stack([a.mean(-1), b.mean(-1)]),
                                  torch.stack([a.var(-1, unbiased=False) * 20,
                                               b.var(-1, unbiased=False) * 30]))
    assert n == 50
    torch.testing.assert_close(mean, x.mean(-1))
    torch.testing.assert_close(m2 / 50, x.var(-1, unbiased=False))


def test_welford_bad_input():
    with pytest.raises(ValueError, match="block"):
        B.welford_moments(torch.randn(2, 3), block=0)
    with pytest.raises(ValueError, match="empty"):
        B.welford_moments(torch.randn(2, 0))


def test_sequential_sum_in_low_precision():
    ones = torch.ones(3, 4096)
    # float16 has 11 significant bits: 2048 + 1 rounds back to 2048; bfloat16 has 8: 256
    assert B.sequential_sum(ones, torch.float16).tolist() == [2048.0] * 3
    assert B.sequential_sum(ones, torch.bfloat16).tolist() == [256.0] * 3
    assert B.sequential_sum(ones, torch.float32).tolist() == [4096.0] * 3
    assert ones.half().sum(-1).tolist() == [4096.0] * 3  # torch accumulates in float32
    tens = torch.full((1, 1024), 10.0)  # squares 100 each, their sum 102400 > 65504
    assert B.sequential_sum(tens.square(), torch.float16).isinf().all()
    torch.testing.assert_close(B.sequential_sum(tens, torch.float64),
                               tens.double().sum(-1))


# --- tiled one-pass norms ----------------------------------------------------------------
@pytest.mark.parametrize("tile_rows", [1, 7, 64, 1000])
@pytest.mark.parametrize("welford", [False, True])
def test_tiled_layer_norm_matches_torch(tile_rows, welford):
    x = torch.randn(50, 96) * 2 + 1
    w, b = torch.rand(96) + 0.5, torch.randn(96)
    torch.testing.assert_close(B.tiled_layer_norm(x, w, b, 1e-5, tile_rows, welford),
                               F.layer_norm(x, (96,), w, b, 1e-5))
    torch.testing.assert_close(B.tiled_layer_norm(x, tile_rows=tile_rows, welford=welford),
                               F.layer_norm(x, (96,)))


@pytest.mark.parametrize("tile_rows", [1, 13, 64])
def test_tiled_rms_norm_matches_torch(tile_rows):
    x = torch.randn(50, 96) * 2 + 1
    w = torch.rand(96) + 0.5
    torch.testing.assert_close(B.tiled_rms_norm(x, w, tile_rows=tile_rows),
                               F.rms_norm(x, (96,), w))
    tiny = x * 1e-4  # eps matters here, so its value and placement are checked
    torch.testing.assert_close(B.tiled_rms_norm(tiny, None, 1e-6, tile_rows),
                               F.rms_norm(tiny, (96,), eps=1e-6))


def test_tiled_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        B.tiled_layer_norm(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="tile_rows"):
        B.tiled_rms_norm(torch.randn(2, 4), tile_rows=0)


def test_tiled_norms_read_and_write_full_size_tensors_once():
    x = torch.randn(256, 64)
    n = x.numel() * 4
    for fn in (lambda: B.tiled_layer_norm(x), lambda: B.tiled_rms_norm(x)):
        assert B.passes(B.traffic(fn, min_bytes=n), n) == pytest.approx(2.0)


# --- the table ----------------------------------------------------------------------------
def test_implementations_agree_with_torch_of_the_same_kind():
    x = torch.randn(16, 1024) * 2 + 0.5  # GroupNorm: 32 groups of 32 features
    impl = B.implementations(x)
    torch_out = {kind: fn() for name, (kind, fn) in impl.items() if name.startswith("torch")}
    for name, (kind, fn) in impl.items():
        if kind == "copy":
            torch.testing.assert_close(fn(), x)
        elif not name.startswith("torch"):
            torch.testing.assert_close(fn(), torch_out[kind], msg=name)
    with pytest.raises(ValueError, match="groups"):
        B.implementations(torch.randn(8, 40))


def test_measure_tiny():
    before = torch.get_num_threads()
    rows = B.measure(16, 64, repeats=2, warmup=0, threads=1)
    assert torch.get_num_threads() == before
    names = [r.name for r in rows]
    assert names[0] == "copy (y.copy_(x))" and len(set(names)) == len(names)
    assert rows[0].fraction_of_copy == 1.0 and rows[0].passes == 2.0
    by_name = {r.name: r for r in rows}
    assert by_name["torch rms_norm"].passes == pytest.approx(7.0)
    assert by_name["torch layer_norm"].ops == 1
    for r in rows:
        assert r.min_seconds <= r.seconds
        assert r.gbs == pytest.approx(2 * 16 * 64 * 4 / r.seconds / 1e9)
        assert r.fraction_of_copy == pytest.approx(rows[0].seconds / r.seconds)
        assert r.faults >= 0  # a mean of non-negative counts
    text = B.format_table(rows, "title")
    assert text.splitlines()[0] == "title" and len(text.splitlines()) == len(rows) + 2
    assert text.splitlines()[1].split()[-1] == "faults/call"
    compiled = B.Row("torch.compile rms_norm", "rms_norm", 1e-3, 1e-3, 1.0, 0.5, float("nan"), 0)
    assert B.format_table([compiled]).splitlines()[1].split()[-3:] == ["-", "-", "-"]
    with pytest.raises(ValueError):
        B.measure(1, 64)
    with pytest.raises(ValueError, match="threads"):
        B.measure(16, 64, threads=0)


def test_roofline():
    assert B.roofline(0.5, 100.0, 20.0) == 10.0  # memory-bound: 0.5 FLOP/B x 20 GB/s
    assert B.roofline(50.0, 100.0, 20.0) == 100.0  # compute-bound
    assert B.roofline([0.0, 5.0, 10.0], 100.0, 20.0) == [0.0, 100.0, 100.0]  # ridge at 5
    with pytest.raises(ValueError):
        B.roofline(1.0, 0.0, 20.0)
    with pytest.raises(ValueError):
        B.roofline(-1.0, 1.0, 1.0)


def test_ceilings_are_positive():
    assert B.copy_bandwidth(2**16, repeats=2) > 0
    assert B.matmul_gflops(32, repeats=2) > 0


def test_cli_tiny(capsys):
    assert B.main(["--rows", "8", "--cols", "32", "--repeats", "2", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "8 x 32 float32, cpu, 1 thread(s), thread CPU time, median of 2" in out
    assert "torch rms_norm" in out and "tiled rms_norm" in out and "faults/call" in out
    assert out.count("RMSNorm time / LayerNorm time") == 3
    with pytest.raises(SystemExit):
        B.main(["--cols", "33"])
    with pytest.raises(SystemExit):
        B.main(["--repeats", "0"])


# --- page faults, the preallocated copy, the system's cache sizes ---------------------
def test_minor_faults_counts_first_touch_of_fresh_pages():
    import mmap

    before = B.minor_faults()
    assert isinstance(before, int) and before >= 0
    size = 64 * 2**20
    buf = mmap.mmap(-1, size)  # fresh anonymous memory, mapped on first touch
    try:
        start = B.minor_faults()
        for offset in range(0, size, 4096):  # touch each 4 KiB page once
            buf[offset] = 1
        touched = B.minor_faults() - start
    finally:
        buf.close()
    # 16384 faults with 4 KiB pages; at least 32 even if the kernel maps 2 MiB huge pages
    assert 32 <= touched <= 2 * size // 4096
    assert B.minor_faults() >= start


def test_time_calls_records_faults_per_call():
    faults = {"stale": [99]}
    B.time_calls({"a": lambda: None, "b": lambda: torch.ones(8).sum()}, repeats=3, warmup=0,
                 faults=faults)
    assert sorted(faults) == ["a", "b"]  # cleared, then one list per callable
    for counts in faults.values():
        assert len(counts) == 3 and all(isinstance(c, int) and c >= 0 for c in counts)


def test_copy_writes_into_one_preallocated_tensor():
    x = torch.randn(8, 64)
    kind, copy = B.implementations(x)["copy (y.copy_(x))"]
    first, second = copy(), copy()
    assert kind == "copy" and first.data_ptr() == second.data_ptr() != x.data_ptr()
    torch.testing.assert_close(second, x)


def test_parse_size_by_hand():
    assert B.parse_size("48K") == 48 * 1024
    assert B.parse_size("2048K\n") == 2 * 2**20
    assert B.parse_size("105 MiB") == 105 * 2**20
    assert B.parse_size("512") == 512
    for bad in ("", "K", "12Q", "1.5M"):
        with pytest.raises(ValueError, match="size"):
            B.parse_size(bad)


def test_cache_sizes_reads_the_sysfs_layout(tmp_path):
    entries = [("index0", "1", "Data", "48K"), ("index1", "1", "Instruction", "32K"),
               ("index2", "2", "Unified", "2048K"), ("index3", "3", "Unified", "107520K")]
    for name, level, kind, size in entries:
        d = tmp_path / name
        d.mkdir()
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    (tmp_path / "uevent").write_text("")  # not an index* entry: ignored
    assert B.cache_sizes(str(tmp_path)) == {"L1d": 48 * 2**10, "L2": 2 * 2**20, "L3": 105 * 2**20}
    assert B.cache_sizes(str(tmp_path / "missing")) == {}


# --- the recorded run of lesson 07 (results/norm_costs.<path>.json) --------------------
def _hand_made_record():
    """A record as --record writes it, with round numbers: a 2 ms copy of 32 MiB."""
    table = [
        ("copy (y.copy_(x))", "copy", 2e-3, 2.0, 0.0),
        ("torch layer_norm", "layer_norm", 4e-3, 2.0, 0.0),
        ("torch rms_norm", "rms_norm", 14e-3, 7.0, 4096.0),
        ("helpers layer_norm", "layer_norm", 30e-3, 12.0, 12288.0),
    ]
    rows = [{"section": "table", "name": n, "kind": k, "seconds": t, "min_seconds": t * 0.9,
             "gbs": 32 * 2**20 / t / 1e9, "fraction_of_copy": 2e-3 / t, "passes": p,
             "ops": 1, "faults": f} for n, k, t, p, f in table]
    rows.append({"section": "fold", "name": "conv", "seconds": 0.01})
    return {"command": "python -m helpers.bench_norms --record", "torch": "2.13.0",
            "cpu_capability": "AVX2", "processor": "a CPU", "threads": 1, "written": "2026-01-01",
            "rows": rows}


def test_recorded_table_and_predictions_from_a_hand_made_record():
    record = _hand_made_record()
    rows = B.table_rows(record)
    assert [r.name for r in rows][:2] == ["copy (y.copy_(x))", "torch layer_norm"]
    assert rows[1].fraction_of_copy == pytest.approx(0.5) and rows[1].faults == 0.0
    text = B.format_table(rows)
    assert "16.8" in text.splitlines()[1]  # 33.55 MB in 2 ms
    predicted = B.predicted_seconds(rows)
    assert set(predicted) == {"torch layer_norm", "torch rms_norm", "helpers layer_norm"}
    assert predicted["torch layer_norm"] == pytest.approx((2e-3, 2.0))  # 2 passes: one copy
    assert predicted["torch rms_norm"] == pytest.approx((7e-3, 2.0))  # 3.5 copies, took 7
    assert predicted["helpers layer_norm"] == pytest.approx((12e-3, 2.5))  # 6 copies, took 15
    assert B.section(record, "fold") == {"conv": record["rows"][-1]}
    with pytest.raises(KeyError, match="no section"):
        B.section(record, "roofline")
    assert B.provenance(record) == ("recorded by: python -m helpers.bench_norms --record\n"
                                    "torch 2.13.0, AVX2 code path, a CPU, 1 thread, 2026-01-01")
    record["settings"] = {"cpu_count": 2, "load_average_before": [3.04, 2.0, 1.0],
                          "load_average_after": [4.96, 3.0, 2.0]}
    assert B.provenance(record).splitlines()[2] == ("machine: 2 CPUs, load average 3.0 at the "
                                                    "start and 5.0 at the end")
    record["rows"][0]["passes"] = None  # written as null when the hook could not count
    assert math.isnan(B.table_rows(record)[0].passes)


def test_group_norm_layouts_and_fold_setup():
    x = torch.randn(64, 32)
    times = B.group_norm_layouts(x, repeats=1, warmup=0, clock="wall")
    assert list(times) == ["group_norm (64, 32): H x W = 1, 1 values per group",
                           "group_norm (2, 32, 32): H x W = 32, 32 per group", "layer_norm (64, 32)"]
    with pytest.raises(ValueError, match="multiple"):
        B.group_norm_layouts(torch.randn(40, 32), repeats=1)
    conv, bn, folded, images = B.fold_setup((2, 4, 8, 8))
    assert images.shape == (2, 4, 8, 8) and conv.out_channels == 8 and not bn.training
    with torch.no_grad():
        torch.testing.assert_close(folded(images), bn(conv(images)), rtol=1e-5, atol=1e-5)
    assert list(B.fold_timings(conv, bn, folded, images, repeats=1, clock="wall")) == [
        "conv", "conv + BatchNorm", "folded conv", "BatchNorm alone"]
    clone = B.clone_against_copy(2**10, repeats=1, warmup=0, clock="wall")
    assert list(clone) == ["x.clone()", "y.copy_(x)"] and clone["y.copy_(x)"][0] > 0


def test_record_cli_writes_every_section_with_provenance(tmp_path, monkeypatch, capsys):
    from helpers import results

    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(B, "SWEEP_SIZES", (2**12, 2**14))
    monkeypatch.setattr(B, "CLONE_NUMEL", 2**10)
    monkeypatch.setattr(B, "FOLD_SHAPE", (2, 4, 8, 8))
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    before = torch.get_num_threads()
    argv = ["--record", "--rows", "64", "--cols", "32", "--repeats", "2"]
    assert B.main(argv) == 0
    assert torch.get_num_threads() == before
    record = results.read_results(B.RECORD_NAME)
    assert record["command"] == "python -m helpers.bench_norms " + " ".join(argv)
    assert record["torch"] == torch.__version__ and record["threads"] == 1
    assert record["settings"]["tokens"] == 64 and record["settings"]["repeats"] == 2
    sections = {r["section"] for r in record["rows"]}
    assert sections == {"table", "copy_sweep", "matmul", "clone_vs_copy", "group_norm_layout", "fold"}
    table = B.table_rows(record)
    assert table[0].name == "copy (y.copy_(x))" and len(table) == len(B.implementations(torch.randn(64, 32)))
    by_name = {r.name: r for r in table}
    assert by_name["torch rms_norm"].passes == pytest.approx(7.0)  # pow, mean, add_, rsqrt, mul, mul
    for r in table:
        assert r.gbs == pytest.approx(2 * 64 * 32 * 4 / r.seconds / 1e9)
        assert r.fraction_of_copy == pytest.approx(table[0].seconds / r.seconds)
    assert [r["bytes"] for r in B.section(record, "copy_sweep").values()] == [2**12, 2**14]
    assert "written to" in capsys.readouterr().out
    for bad in (["--record", "--threads", "2"], ["--record", "--rows", "48", "--cols", "32"]):
        with pytest.raises(SystemExit):
            B.main(bad)


def test_committed_record_is_complete_and_consistent():
    from helpers import results

    records = results.read_all_paths(B.RECORD_NAME)
    for path, record in records.items():
        assert record["torch"].startswith("2.13.0") and record["cpu_capability"].lower() == path
        assert record["threads"] == 1 and record["command"].startswith("python -m helpers.bench_norms --record")
        table = B.table_rows(record)
        s = record["settings"]
        nbytes = 2 * s["tokens"] * s["features"] * 4
        assert table[0].name == "copy (y.copy_(x))" and table[0].passes == 2.0
        by_name = {r.name: r for r in table}
        assert by_name["torch rms_norm"].passes == pytest.approx(7.0)
        assert by_name["torch layer_norm"].passes == pytest.approx(2.0)
        for r in table:
            assert r.min_seconds <= r.seconds
            assert r.gbs == pytest.approx(nbytes / r.seconds / 1e9)
            assert r.fraction_of_copy == pytest.approx(table[0].seconds / r.seconds)
        assert [r["bytes"] for r in B.section(record, "copy_sweep").values()] == list(B.SWEEP_SIZES)
        assert set(B.section(record, "fold")) == {"conv", "conv + BatchNorm", "folded conv",
                                                   "BatchNorm alone"}
        assert len(B.section(record, "group_norm_layout")) == 3
        assert set(B.section(record, "clone_vs_copy")) == {"x.clone()", "y.copy_(x)"}
