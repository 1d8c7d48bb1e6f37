"""helpers.drills: the model solutions agree with torch, the eval-mode BatchNorm checker
passes a correct implementation and names each mistake of implementations written the way a
learner writes them (independently of the checker's own catalogue), and grade() handles blank
and invalid input."""

import pytest
import torch
import torch.nn.functional as F

from helpers import drills
from helpers.drills import check_batch_norm_eval


# ---------------------------------------------------------------- model solutions vs torch
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_model_solutions_match_torch(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 6, 5, generator=g) * 3 + 1).to(dtype)
    w, b = torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g)
    rm, rv = torch.randn(6, generator=g), torch.rand(6, generator=g) + 0.5
    wd, bd = (w, b) if dtype == torch.float16 else (w.to(dtype), b.to(dtype))
    rmd, rvd = (rm, rv) if dtype == torch.float16 else (rm.to(dtype), rv.to(dtype))
    wl, bl = (torch.rand(5, generator=g) + 0.5).to(dtype), torch.randn(5, generator=g).to(dtype)
    tol = dict(rtol=1e-2, atol=2e-2) if dtype == torch.float16 else {}
    cases = [
        (drills.model_solution("batch_norm_train")(x, wd, bd, 1e-5),
         F.batch_norm(x, None, None, wd, bd, training=True, eps=1e-5)),
        (drills.model_solution("batch_norm_eval")(x, rmd, rvd, wd, bd, 1e-5),
         F.batch_norm(x, rmd, rvd, wd, bd, training=False, eps=1e-5)),
        (drills.model_solution("layer_norm")(x, wl, bl, 1e-5), F.layer_norm(x, (5,), wl, bl, 1e-5)),
        (drills.model_solution("rms_norm")(x, wl, 1e-6), F.rms_norm(x, (5,), wl, 1e-6)),
        (drills.model_solution("group_norm")(x, 3, wd, bd, 1e-5), F.group_norm(x, 3, wd, bd, 1e-5)),
    ]
    for ours, ref in cases:
        assert ours.dtype == ref.dtype
        torch.testing.assert_close(ours, ref, **tol)


@pytest.mark.parametrize("name", list(drills.DRILLS))
def test_model_solutions_pass_their_graders(name):
    result = drills.grade(name, drills.model_solution(name))
    assert result.passed, result.message
    assert result.message.startswith(f"✔ {name}:")  # each drill reports under its own name


def test_a_failing_training_mode_drill_reports_under_its_drill_name():
    def unbiased(x, weight, bias, eps):  # BatchNorm in training mode with the unbiased variance
        dims, shape = [0] + list(range(2, x.dim())), [1, -1] + [1] * (x.dim() - 2)
        xf = x.float()
        y = (xf - xf.mean(dims, keepdim=True)) / torch.sqrt(xf.var(dims, keepdim=True) + eps)
        return (y * weight.view(shape) + bias.view(shape)).to(x.dtype)

    result = drills.grade("batch_norm_train", unbiased)
    assert not result.passed and result.mistake == "unbiased_variance"
    heads = [line for line in result.message.splitlines() if line.startswith("✘")]
    assert len(heads) == 2 and all(h.startswith("✘ batch_norm_train") for h in heads), heads


# ---------------------------------------------------------------- the eval-mode checker
def _shape(x):
    return [1, -1] + [1] * (x.dim() - 2)


def bn_eval_ok(x, rm, rv, w, b, eps):
    xf = x.float()
    s = _shape(x)
    return ((xf - rm.view(s)) / torch.sqrt(rv.view(s) + eps) * w.view(s) + b.view(s)).to(x.dtype)


def bn_eval_batch_stats(x, rm, rv, w, b, eps):
    return F.batch_norm(x.float(), None, None, w, b, training=True, eps=eps).to(x.dtype)


def bn_eval_no_sqrt(x, rm, rv, w, b, eps):
    s = _shape(x)
    return ((x.float() - rm.view(s)) / (rv.view(s) + eps) * w.view(s) + b.view(s)).to(x.dtype)


def bn_eval_eps_outside(x, rm, rv, w, b, eps):
    s = _shape(x)
    return ((x.float() - rm.view(s)) / (rv.view(s).sqrt() + eps) * w.view(s) + b.view(s)).to(x.dtype)


def bn_eval_debiased(x, rm, rv, w, b, eps):
    s = _shape(x)
    m = x.numel() // x.shape[1]
    var = rv.view(s) * (m - 1) / m  # "running_var is unbiased, convert it"
    return ((x.float() - rm.view(s)) / torch.sqrt(var + eps) * w.view(s) + b.view(s)).to(x.dtype)


def bn_eval_not_reshaped(x, rm, rv, w, b, eps):
    return ((x.float() - rm) / torch.sqrt(rv + eps) * w + b).to(x.dtype)  # broadcasts on the last dim


def bn_eval_no_affine(x, rm, rv, w, b, eps):
    s = _shape(x)
    return ((x.float() - rm.view(s)) / torch.sqrt(rv.view(s) + eps)).to(x.dtype)


def bn_eval_float32_out(x, rm, rv, w, b, eps):
    s = _shape(x)
    return (x.float() - rm.view(s)) / torch.sqrt(rv.view(s) + eps) * w.view(s) + b.view(s)


def test_eval_checker_passes_a_correct_implementation():
    result = check_batch_norm_eval(bn_eval_ok)
    assert result.passed and result.mistake is None, result.message


@pytest.mark.parametrize("fn, key", [
    (bn_eval_batch_stats, "batch_statistics_in_eval"),
    (bn_eval_no_sqrt, "variance_without_sqrt"),
    (bn_eval_eps_outside, "eps_outside_sqrt"),
    (bn_eval_debiased, "debiased_running_var"),
    (bn_eval_not_reshaped, "buffers_not_reshaped"),
    (bn_eval_no_affine, "affine_missing"),
    (bn_eval_float32_out, "wrong_dtype"),
])
def test_eval_checker_names_the_mistake(fn, key):
    result = check_batch_norm_eval(fn)
    assert not result.passed
    assert result.mistake == key, result.message
    assert "✘" in result.message and "可能的错误" in result.message


# ---------------------------------------------------------------- grade(), solution()
def test_blank_function_gets_a_reminder_not_a_traceback():
    def blank(x, weight, bias, eps):
        raise NotImplementedError

    result = drills.grade("layer_norm", blank)
    assert not result.passed and result.mistake == "not_implemented"
    assert "not written yet" in result.message


def test_a_wrong_function_is_diagnosed_through_grade():
    def unbiased(x, weight, bias, eps):
        xf = x.float()
        return ((xf - xf.mean(-1, keepdim=True)) / torch.sqrt(xf.var(-1, keepdim=True) + eps)
                * weight + bias).to(x.dtype)

    result = drills.grade("layer_norm", unbiased)
    assert not result.passed and result.mistake == "unbiased_variance"


def test_grade_never_raises_on_garbage_output():
    result = drills.grade("rms_norm", lambda x, w, eps: 3)
    assert not result.passed and "not a tensor" in result.message


def test_bad_names_and_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown drill 'batchnorm'.*batch_norm_train"):
        drills.grade("batchnorm", lambda *a: None)
    with pytest.raises(ValueError, match="unknown drill"):
        drills.solution("layernorm")
    with pytest.raises(ValueError, match="must be a function"):
        drills.grade("layer_norm", "def f(): pass")


def test_solution_prints_the_source(capsys):
    drills.solution("group_norm")
    out = capsys.readouterr().out
    assert out.startswith("def group_norm(x, num_groups, weight, bias, eps):")
    assert "reshape(n, num_groups, -1)" in out
