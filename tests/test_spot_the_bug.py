"""helpers.spot_the_bug and its checkers (lesson 12, section 8): every reproduction checked
against an independent reference (torch's own layers, hand-computed values), every buggy
snippet recognised by its drill's checker as the bug of its source, every model solution
accepted, and the notebook's drill cells empty stubs."""

import io
import json
import math
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import spot_the_bug as spot

LESSON_12 = Path(__file__).resolve().parents[1] / "notebooks" / "12_interview_prep.ipynb"


def quiet(fn, *args):
    with redirect_stdout(io.StringIO()) as out:
        result = fn(*args)
    return result, out.getvalue()


# ------------------------------------------------------------------ the reproductions
def test_deepnorm_labml_line_down_weights_the_residual():
    r, text = quiet(spot.repro_deepnorm_alpha)
    assert r["alpha"] == pytest.approx(12 ** 0.25)
    assert r["inverse_gap"] < 1e-4
    assert r["corr_right"] > r["corr_theirs"] + 0.3
    g = torch.Generator().manual_seed(3)
    x, gx = torch.randn(4, 16, generator=g, dtype=torch.float64), torch.randn(4, 16, generator=g, dtype=torch.float64)
    ln = nn.LayerNorm(16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(spot.labml_deep_norm(x, gx, 2.0, ln.weight, ln.bias, 1e-5), ln(x + 2.0 * gx))
        torch.testing.assert_close(spot.deep_norm(x, gx, 2.0, ln.weight, ln.bias, 1e-5), ln(2.0 * x + gx))
    assert "1.861" in text and "0.537" in text
    # the correlations, recomputed with numpy and torch's own LayerNorm module
    import numpy as np
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 64, generator=g, dtype=torch.float64)
    gx = torch.randn(16, 64, generator=g, dtype=torch.float64)
    ln = nn.LayerNorm(64, elementwise_affine=False, dtype=torch.float64)
    a = 12 ** 0.25
    ref = ln(x).numpy().ravel()
    assert np.corrcoef(ln(a * x + gx).numpy().ravel(), ref)[0, 1] == pytest.approx(r["corr_right"], abs=1e-9)
    assert np.corrcoef(ln(x + a * gx).numpy().ravel(), ref)[0, 1] == pytest.approx(r["corr_theirs"], abs=1e-9)


def test_makemore_output_shrinks_by_sqrt_n_minus_1_over_n():
    r, _ = quiet(spot.repro_makemore_variance)
    for n in (32, 4):
        assert r[n][0] == pytest.approx(math.sqrt((n - 1) / n), abs=1e-5)
        assert r[n][1] == pytest.approx(1.0, abs=1e-5)


def test_running_var_without_bessel_is_seven_eighths():
    r, _ = quiet(spot.repro_running_var_bessel)
    assert r["ratio"] == pytest.approx(7 / 8, abs=1e-9)
    assert 3.0 < r["torch"] < 5.0
    # against torch's own buffers, one step of the model solution
    x = torch.randn(2, 3, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    bn = nn.BatchNorm2d(3, momentum=0.3, dtype=torch.float64)
    bn(x)
    rm, rv = spot.running_stats(x, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), 0.3)
    torch.testing.assert_close(rm, bn.running_mean)
    torch.testing.assert_close(rv, bn.running_var)


def test_udl_reused_linear4_leaves_linear5_untrained():
    r, _ = quiet(spot.repro_reused_linear)
    layer = 100 * 100 + 100
    assert r["19ee3af"] == (layer, 40 * 100 + 100 + 4 * layer + 100 * 10 + 10)
    assert r["5c10091"] == (0, 40 * 100 + 100 + 5 * layer + 100 * 10 + 10)


def test_rmsnorm_served_for_a_layernorm_checkpoint():
    r, _ = quiet(spot.repro_rmsnorm_for_layernorm)
    assert all(v > 0.1 for v in r.values())
    # recomputed with torch's own modules from the same draws
    g = torch.Generator().manual_seed(0)
    w = 1 + 0.1 * torch.randn(32, generator=g, dtype=torch.float64)
    b = 0.1 * torch.randn(32, generator=g, dtype=torch.float64)
    errors = []
    for offset, bias in ((1.5, b), (0.0, torch.zeros_like(b))):
        x = offset + torch.randn(64, 32, generator=g, dtype=torch.float64)
        ln = nn.LayerNorm(32, eps=1e-6, dtype=torch.float64)
        rms = nn.RMSNorm(32, eps=1e-6, dtype=torch.float64)
        with torch.no_grad():
            ln.weight.copy_(w)
            ln.bias.copy_(bias)
            rms.weight.copy_(w)
            errors.append(float((rms(x) - ln(x)).norm() / ln(x).norm()))
    assert errors == pytest.approx(list(r.values()), rel=1e-9)
    x = torch.randn(3, 8, dtype=torch.float64) + 2
    w, b = torch.rand(8, dtype=torch.float64) + 0.5, torch.randn(8, dtype=torch.float64)
    ref = nn.RMSNorm(8, eps=1e-6, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(w)
        torch.testing.assert_close(spot.sglang_merger_norm(x, w, b, 1e-6), ref(x))
    torch.testing.assert_close(spot.checkpoint_norm(x, w, b, 1e-6),
                               F.layer_norm(x, (8,), w, b, 1e-6))


def test_d2l_statistics_are_lost_on_reload_and_kept_as_buffers():
    r, _ = quiet(spot.repro_plain_attributes)
    keys, diff = r["D2LBatchNorm"]
    assert keys == ["gamma", "beta"] and diff > 0.1
    keys, diff = r["BatchNormWithBuffers"]
    assert keys == ["gamma", "beta", "moving_mean", "moving_var"] and diff == 0.0


def test_divides_by_rsqrt_scales_with_the_square():
    r, _ = quiet(spot.repro_divides_by_rsqrt)
    for s, (right, theirs) in r.items():
        assert right == pytest.approx(1.0, abs=1e-3)
        assert theirs == pytest.approx(s * math.sqrt(s * s + 1e-5), rel=1e-6)  # rms * sqrt(ms + eps)
    x, w = torch.randn(4, 8), torch.rand(8) + 0.5
    torch.testing.assert_close(spot.rms_norm(x, w, 1e-5), F.rms_norm(x, (8,), w, 1e-5))


@pytest.mark.skipif(not spot.TRITON_AVAILABLE, reason="Triton is not installed")
def test_triton_interpreter_sums_bfloat16_bit_patterns():
    r, text = quiet(spot.repro_bf16_bit_patterns)
    assert r[("float32", "tl.sum(x)")] == 2.5
    assert r[("bfloat16", "tl.sum(x.to(tl.float32))")] == 2.5
    assert abs(r[("bfloat16", "tl.sum(x)")]) < 1e-30        # the wrapped bit patterns: ~0, not 2.5
    bits = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.bfloat16).view(torch.int16).tolist()
    assert bits == [0x3F80, 0x4000, 0x4040, 0x4080] and sum(bits) % 65536 == 64
    assert "wraps to 64" in text


# ------------------------------------------------------------------ the drills
@pytest.mark.parametrize("name", list(spot.BUGS))
def test_the_original_bug_is_recognised_and_attributed(name):
    bug = spot.BUGS[name]
    if name == "bf16_bit_patterns" and not spot.TRITON_AVAILABLE:
        pytest.skip("Triton is not installed")
    r = spot.grade(name, bug.buggy)
    assert not r.passed and r.mistake == bug.original
    assert "This is the bug of" in r.message and "这正是" in r.message
    assert spot.grade(name, spot.model_solution(name)).passed


@pytest.mark.parametrize("name", list(spot.BUGS))
def test_an_empty_stub_is_not_written_yet(name):
    if name == "bf16_bit_patterns":
        if not spot.TRITON_AVAILABLE:
            pytest.skip("Triton is not installed")

        @spot.triton.jit
        def stub(X, Out, N, BLOCK_N: spot.tl.constexpr):
            raise NotImplementedError
    elif name == "plain_attributes":
        class stub(nn.Module):
            def __init__(self, num_features, num_dims):
                super().__init__()
                raise NotImplementedError
    else:
        def stub(*args):
            raise NotImplementedError
    r = spot.grade(name, stub)
    assert not r.passed and r.mistake == "not_implemented" and "not written yet" in r.message


def test_show_prints_the_source_and_its_link():
    for name, bug in spot.BUGS.items():
        _, text = quiet(spot.show, name)
        assert bug.url in text and text.count("\n") <= 30
    with pytest.raises(ValueError):
        spot.grade("no_such_bug", lambda x: x)
    with pytest.raises(ValueError):
        spot.grade("deepnorm_alpha", 3)


def test_solutions_are_printed_only_on_request():
    _, text = quiet(spot.solution, "divides_by_rsqrt")
    assert "torch.rsqrt" in text and "*" in text


def test_checkers_never_raise_on_odd_learner_code():
    for name in spot.BUGS:
        if name == "bf16_bit_patterns" and not spot.TRITON_AVAILABLE:
            continue
        r = spot.grade(name, lambda *a: "not a tensor")
        assert not r.passed and r.message


# ------------------------------------------------------------------ the notebook
def _cells():
    return json.loads(LESSON_12.read_text(encoding="utf-8"))["cells"]


def test_every_spot_the_bug_drill_is_an_empty_stub_in_lesson_12():
    cells = _cells()
    code = [("".join(c["source"]), c) for c in cells if c["cell_type"] == "code"]
    for name in spot.BUGS:
        stubs = [(s, c) for s, c in code if re.search(rf'spot\.grade\("{name}", (my_\w+|My\w+)\)', s)]
        assert len(stubs) == 1, name
        source, cell = stubs[0]
        assert "raise NotImplementedError" in source
        shown = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                        for o in cell["outputs"])
        assert "not written yet" in shown or "Triton is not installed" in shown, name
        graded = [s for s, _ in code if f'spot.grade("{name}", spot.model_solution("{name}"))' in s]
        assert len(graded) == 1, name
        assert [s for s, _ in code if f'spot.reproduce("{name}")' in s], name
    for source, _ in code:
        for line in source.splitlines():
            assert not re.search(r"spot\.solution\(", line.split("#")[0]), line


def test_section_8_cites_every_source_in_both_languages():
    cells = _cells()
    start = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## 8. Spot the bug"))
    end = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Summary"))
    text = {lang: "\n".join("".join(c["source"]) for c in cells[start:end]
                            if f"lang-{lang}" in c["metadata"].get("tags", [])) for lang in ("en", "zh")}
    for bug in spot.BUGS.values():
        for lang in ("en", "zh"):
            assert bug.url in text[lang], (bug.key, lang)


@pytest.mark.skipif(not spot.TRITON_AVAILABLE, reason="Triton is not installed")
def test_kernels_still_run_after_an_optimiser_step_imported_triton():
    """torch._dynamo (an optimiser's step) imports Triton; importing helpers first sets
    TRITON_INTERPRET so that Triton's own functions are built for the interpreter."""
    import subprocess
    import sys
    code = ("import os, torch; os.environ.pop('TRITON_INTERPRET', None); import helpers\n"
            "p = torch.nn.Parameter(torch.ones(3)); opt = torch.optim.SGD([p], lr=0.1)\n"
            "p.sum().backward(); opt.step()\n"
            "from helpers import spot_the_bug as spot\n"
            "print(spot.grade('bf16_bit_patterns', spot.model_solution('bf16_bit_patterns')).passed)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU: kernels are compiled, not interpreted")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert out.stdout.strip().endswith("True"), out.stderr[-2000:]
