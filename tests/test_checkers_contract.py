"""The checkers outside the normalisation exercises (variance, merge, Transformer block), and
the contract every checker keeps: a bilingual CheckResult, nothing printed, nothing raised
on the learner's code, the global random state untouched."""

import pytest
import torch

from helpers import bench_norms as B
from helpers import distributed as D
from helpers import drills, transformer as T
from helpers.checks import (CheckResult, check_batch_norm, check_batch_norm_eval,
                            check_block_forward, check_bn_backward, check_bn_running_stats,
                            check_fold_bn, check_group_norm, check_layer_norm, check_ln_backward,
                            check_merge, check_rms_norm, check_sync_bn_merge, check_variance)


# ---------------------------------------------------------------- variance (lesson 07)
def test_check_variance_names_the_mistake():
    assert check_variance(lambda x: B.two_pass_moments(x)[1])
    assert check_variance(lambda x: B.welford_moments(x)[1])
    r = check_variance(lambda x: B.naive_moments(x)[1])  # E[x^2] - E[x]^2 in float32
    assert not r and r.mistake == "one_pass_variance"
    r = check_variance(lambda x: x.var(-1, unbiased=True))
    assert not r and r.mistake == "unbiased_variance"
    r = check_variance(lambda x: x.double().var(-1, unbiased=False))
    assert not r and r.mistake == "wrong_dtype"
    r = check_variance(lambda x: x.var(unbiased=False))  # one number, not one per row
    assert not r and "shape" in r.message


# ---------------------------------------------------------------- merge (lesson 08)
def test_check_merge_names_the_mistakes():
    assert check_merge(D.merge_moments)
    r = check_merge(lambda c, m, q: (c.sum(), m.mean(0), q.sum(0)))
    assert not r and r.mistake == "unweighted_mean"
    r = check_merge(lambda c, m, q: (c.sum(), (c[:, None] * m).sum(0) / c.sum(), q.sum(0)))
    assert not r and r.mistake == "missing_between_term" and r.failed_cases == ["M2"]
    r = check_merge(lambda c, m, q: 1 / 0)
    assert not r and "ZeroDivisionError" in r.message


# ---------------------------------------------------------------- Transformer block (05, 06)
def post(x, a, f, n1, n2):
    y = n1(x + a(x))
    return n2(y + f(y))


def pre(x, a, f, n1, n2):
    y = x + a(n1(x))
    return y + f(n2(y))


def test_check_block_forward_diagnoses():
    assert check_block_forward(post, "post") and check_block_forward(pre, "pre")
    r = check_block_forward(pre, "post")
    assert not r and r.mistake == "pre" and "Pre-LN" in r.message
    r = check_block_forward(lambda x, a, f, n1, n2: n2(f(n1(a(x)))), "pre")
    assert not r and r.mistake == "no_residual"
    r = check_block_forward(lambda x, *m: x * 2, "pre")
    assert not r and r.mistake is None and "max abs error" in r.message
    with pytest.raises(ValueError):  # a wrong call by the notebook, not the learner's code
        check_block_forward(pre, "sandwich")
    assert not hasattr(T, "check_block_forward")  # the library does not re-export a checker


def test_check_block_forward_deepnorm():
    def deepnorm(x, a, f, n1, n2, alpha):  # LN(alpha x + G(x)), per sub-layer
        y = n1(alpha * x + a(x))
        return n2(alpha * y + f(y))

    def on_branch(x, a, f, n1, n2, alpha):
        y = n1(x + alpha * a(x))
        return n2(y + alpha * f(y))

    def in_pre_ln(x, a, f, n1, n2, alpha):
        y = alpha * x + a(n1(x))
        return alpha * y + f(n2(y))

    assert check_block_forward(deepnorm, "deepnorm")
    assert check_block_forward(on_branch, "deepnorm").mistake == "alpha_on_branch"
    assert check_block_forward(in_pre_ln, "deepnorm").mistake == "alpha_in_pre_ln"
    assert check_block_forward(lambda x, a, f, n1, n2, al: post(x, a, f, n1, n2),
                               "deepnorm").mistake == "post"


# ---------------------------------------------------------------- the contract
def _ln(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


def _noisy(*args):  # draws from the global generator, prints, and is wrong
    print("learner's debug print")
    return args[0] + torch.randn(args[0].shape, dtype=args[0].dtype)


CALLS = {
    "layer_norm": lambda fn: check_layer_norm(fn),
    "batch_norm": lambda fn: check_batch_norm(fn),
    "rms_norm": lambda fn: check_rms_norm(fn),
    "group_norm": lambda fn: check_group_norm(fn),
    "batch_norm_eval": lambda fn: check_batch_norm_eval(fn),
    "variance": lambda fn: check_variance(fn),
    "merge": lambda fn: check_merge(fn),
    "block": lambda fn: check_block_forward(fn, "pre"),
    "bn_backward": lambda fn: check_bn_backward(fn),
    "ln_backward": lambda fn: check_ln_backward(fn),
    "bn_running_stats": lambda fn: check_bn_running_stats(fn),
    "fold_bn": lambda fn: check_fold_bn(fn),
    "sync_bn_merge": lambda fn: check_sync_bn_merge(fn),
    "drill_guarded": lambda fn: drills.grade("bn_backward", fn),  # inside the from-scratch guard
    **{f"drill_{name}": (lambda n: lambda fn: drills.grade(n, fn))(name)  # lesson 12, drills 11-16
       for name in ("grad_check", "batch_norm_module", "gn_backward", "deepnorm_init",
                    "pre_ln_stack", "switchable_norm")},
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("learner", ["raises", "garbage", "noisy"])
def test_every_checker_keeps_the_contract(name, learner, capsys):
    fn = {"raises": lambda *a: 1 / 0, "garbage": lambda *a: "not a tensor",
          "noisy": _noisy}[learner]
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    result = CALLS[name](fn)
    assert torch.equal(torch.rand(3), expected)  # the global random state is untouched
    assert isinstance(result, CheckResult) and not result
    head_en, *rest = result.message.splitlines()
    assert head_en.startswith("✘") and any(line.startswith("✘") and "：" in line for line in rest)
    out = capsys.readouterr().out
    assert out in ("", "learner's debug print\n" * out.count("\n"))  # only the learner prints


def test_textbook_formula_in_float16_passes_with_a_note():
    """The formula right, computed in the input's float16: ✔, with the half-precision note."""
    r = check_layer_norm(_ln)
    assert r and r.notes == ["half_not_float32"] and "Lesson 07" in r.message
    assert "第 07 课" in r.message
    strict = check_layer_norm(_ln, require_half=True)
    assert not strict and strict.mistake == "half_not_float32"


def test_drills_report_under_the_drill_name():
    r = drills.grade("batch_norm_train", drills.model_solution("batch_norm_train"))
    assert r.message.startswith("✔ batch_norm_train:")


def test_a_wrong_formula_on_float16_is_a_failure_not_a_note():
    """The float16 case is a note only when the formula is right in float32."""
    def per_batch_ln(x, w, b, eps):  # upcasts, but normalises over the batch dim
        xf = x.float()
        mu = xf.mean(0, keepdim=True)
        y = (xf - mu) / torch.sqrt(((xf - mu) ** 2).mean(0, keepdim=True) + eps) * w + b
        return y.to(x.dtype)

    r = check_layer_norm(per_batch_ln)
    assert not r and r.notes == [] and "float16, x = 300 + N(0, 1)" in r.failed_cases
