"""helpers.bench_kernels: it refuses to time without CUDA or with the interpreter on, and the
lesson's summary names where a recorded run came from (or says there is none)."""

import json

import pytest
import torch

from helpers import bench_kernels as BK

RECORD = {
    "command": "python -m helpers.bench_kernels --out results/kernel_bench.json",
    "date": "2026-01-01 00:00 UTC", "device": "Some GPU", "capability": "9.0",
    "torch": "2.13.0", "triton": "3.7.1", "cuda": "13.0", "shape": [4096, 4096], "repeats": 50,
    "timing": "median of the repeats, CUDA events, after 5 warm-up calls",
    "rows": [{"dtype": "float32", "operation": "copy", "implementation": "y.copy_(x)", "passes": 2,
              "ms": 0.05, "gb_s": 2684.4, "of_copy": 1.0},
             {"dtype": "float32", "operation": "LayerNorm forward",
              "implementation": "lesson kernel (Triton)", "passes": 2, "ms": 0.1, "gb_s": 1342.2,
              "of_copy": 0.5}],
}


def test_no_record_says_so(tmp_path):
    assert BK.read(tmp_path / "missing.json") is None
    text = BK.summary(None) if BK.read() is None else BK.summary(BK.read())
    assert ("No GPU run is recorded yet" in text) == (BK.read() is None)


def test_a_record_is_shown_with_its_provenance(tmp_path):
    path = tmp_path / "kernel_bench.json"
    path.write_text(json.dumps(RECORD))
    text = BK.summary(BK.read(path))
    assert "Some GPU" in text and "torch 2.13.0" in text and "triton 3.7.1" in text
    assert "2026-01-01" in text and RECORD["command"] in text
    assert "0.50" in text.splitlines()[-1] and "1342" in text.splitlines()[-1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_without_cuda_it_exits_with_a_message(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    out = tmp_path / "kernel_bench.json"
    assert BK.main(["--out", str(out)]) == 2
    assert "No CUDA GPU" in capsys.readouterr().err and not out.exists()


def test_with_the_interpreter_on_it_refuses(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "kernel_bench.json"
    assert BK.main(["--out", str(out)]) == 2
    assert "unset" in capsys.readouterr().err.lower() and not out.exists()
