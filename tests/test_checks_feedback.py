"""What a learner reads: torch's (or Python's) error text quoted verbatim in both languages,
the smallest failing case shown when no known mistake matches, a case's hint never reported
as the mistake of a function that fails elsewhere, and broadcasting errors not all called a
missing keepdim."""

import pytest
import torch
import torch.nn.functional as F

from helpers import drills
from helpers.checks import (check_batch_norm, check_bn_backward, check_dyt_module,
                            check_frozen_batch_norm, check_layer_norm, check_power_iteration,
                            check_qk_norm_attention, check_rms_norm, check_variance,
                            check_weight_norm, check_weight_norm_grad)

ERROR = "expected 3 values, returned 2 (shape mismatch)"  # words the translation used to rewrite


def _raises(*args):
    raise ValueError(ERROR)


class _RaisingDyT(torch.nn.Module):
    def __init__(self, n, alpha_init_value=0.5):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.ones(1) * alpha_init_value)
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.bias = torch.nn.Parameter(torch.zeros(n))

    def forward(self, x):
        raise ValueError(ERROR)


@pytest.mark.parametrize("checker, fn", [
    (check_layer_norm, _raises), (check_qk_norm_attention, _raises),
    (check_frozen_batch_norm, _raises), (check_weight_norm, _raises),
    (check_dyt_module, _RaisingDyT),
])
def test_error_text_is_quoted_verbatim_in_chinese(checker, fn):
    r = checker(fn)
    assert not r.passed
    en, zh = r.message.split("\n✘", 1) if "\n✘" in r.message else (r.message, "")
    assert f"ValueError: {ERROR}" in en
    assert f"ValueError: {ERROR}" in zh, r.message


def _flipped_ln(x, w, b, eps):
    xf = x.float()
    mu = xf.mean(-1, keepdim=True)
    return ((mu - xf) / torch.sqrt(xf.var(-1, keepdim=True, unbiased=False) + eps) * w + b).to(x.dtype)


def test_no_known_mistake_shows_the_smallest_failing_case_in_both_languages():
    r = check_layer_norm(_flipped_ln)
    assert not r.passed and r.mistake is None
    assert "Smallest failing case, '(B, T, d) = (2, 3, 4), small d'" in r.message  # 24 values
    assert "x: tensor (2, 3, 4) float32" in r.message and "eps: 1e-05" in r.message
    assert "largest difference at index (0, 0, 0)" in r.message
    assert "最小的未通过用例 '(B, T, d) = (2, 3, 4), small d'" in r.message
    assert "差异最大处在索引 (0, 0, 0)" in r.message


def test_a_hint_is_named_only_when_its_case_alone_fails():
    def l2(x, w, eps):
        xf = x.float()
        return (F.normalize(xf, dim=-1) * w).to(x.dtype)

    assert check_rms_norm(l2).mistake == "l2_normalised"

    def doubled(x, w, eps):  # wrong everywhere, in no known way
        xf = x.float()
        return (2 * xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)

    r = check_rms_norm(doubled)
    assert not r.passed and r.mistake is None and "float16" not in r.message.split("\n")[1]
    assert check_variance(lambda x: x.std(-1, unbiased=False)).mistake == "std_not_variance"


def test_broadcasting_errors_get_their_own_diagnosis():
    def weight_not_reshaped(x, w, b, eps):
        d = [0] + list(range(2, x.dim()))
        mu = x.mean(d, keepdim=True)
        return (x - mu) / torch.sqrt(x.var(d, keepdim=True, unbiased=False) + eps) * w + b

    assert check_batch_norm(lambda *a: weight_not_reshaped(*a).to(a[0].dtype)).mistake == \
        "params_not_reshaped"

    def nc_only_backward(dy, x, w, eps):
        mu = x.mean(0)
        r = 1 / torch.sqrt(((x - mu) ** 2).mean(0) + eps)
        xh = (x - mu) * r
        g = dy * w
        return r * (g - g.mean(0) - xh * (g * xh).mean(0)), (dy * xh).sum(0), dy.sum(0)

    assert check_bn_backward(nc_only_backward).mistake == "only_2d"
    r = check_variance(lambda x: x.var(-1, keepdim=True, unbiased=False))
    assert r.mistake == "kept_reduced_dim" and "keepdim=True" not in r.message.split("Likely")[0]


def test_styles_the_issue_found_rejected_are_accepted():
    class ScalarAlpha(_RaisingDyT):
        def __init__(self, n, alpha_init_value=0.5):
            super().__init__(n, alpha_init_value)
            self.alpha = torch.nn.Parameter(torch.tensor(float(alpha_init_value)))

        def forward(self, x):
            return self.weight * torch.tanh(self.alpha * x) + self.bias

    assert check_dyt_module(ScalarAlpha).passed

    def power_float_sigma(W, v):
        u = F.normalize(W @ v, dim=0)
        v = F.normalize(W.T @ u, dim=0)
        return u, v, float(u @ W @ v)

    assert check_power_iteration(power_float_sigma).passed

    def grad_by_autograd(gw, v, g):
        v = v.clone().requires_grad_()
        w = g * v / v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
        return torch.autograd.grad(w, v, gw)[0]

    assert check_weight_norm_grad(grad_by_autograd).passed

    def grad_abs_g(gw, v, g):
        n = v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
        u = v / n
        along = (gw * u).flatten(1).sum(1).view(-1, *([1] * (v.dim() - 1)))
        return g.abs() / n * (gw - along * u)

    assert check_weight_norm_grad(grad_abs_g).mistake == "abs_g"


def test_a_fresh_layer_starts_at_zeros_and_ones():
    model = drills.model_solution("bn_running_stats")

    def zero_var(x, w, b, rm, rv, training, momentum, eps):
        if rm is None:
            rm, rv = torch.zeros(x.shape[1], dtype=x.dtype), torch.zeros(x.shape[1], dtype=x.dtype)
        return model(x, w, b, rm, rv, training, momentum, eps)

    assert drills.grade("bn_running_stats", model).passed
    assert drills.grade("bn_running_stats", zero_var).mistake == "fresh_running_var_zero"
