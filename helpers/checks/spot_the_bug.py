r"""The checkers of lesson 12's "spot the bug in famous code" drills: each drill shows a real
bug from public normalisation code (adapted to the course's terms) and asks for the fixed
function; each checker recognises the original bug and says whose it is.

==================================  =============================================  ==========================
checker                             the learner writes                             the bug it recognises
==================================  =============================================  ==========================
:func:`check_deepnorm_residual`     ``fn(x, gx, alpha, weight, bias, eps)``        labml.ai's DeepNorm
                                    :math:`\mathrm{LN}(\alpha x + g_x)`            (issue 145)
:func:`check_makemore_batch_norm`   ``fn(x, gamma, beta, eps)`` (N, C), training   makemore part 3 (issue 44)
:func:`check_running_var_update`    ``fn(x, running_mean, running_var, momentum)``  tinygrad (PR 807),
                                    ``-> (running_mean, running_var)``             tt-metal (PR 55440)
:func:`check_residual_branches`     ``fn(x, weights, biases)``: five residual      Understanding Deep
                                    branches, each with its own Linear             Learning 11.3 (19ee3af)
:func:`check_checkpoint_norm`       ``fn(x, weight, bias, eps)``: the LayerNorm    SGLang (PR 11791)
                                    a checkpoint was trained with
:func:`check_module_buffers`        ``cls(num_features, num_dims)``: BatchNorm     d2l-zh (PR 1265)
                                    with its statistics in the ``state_dict``
:func:`check_bf16_row_mean`         a Triton kernel ``(X, Out, N, BLOCK_N)``:      Triton's interpreter
                                    row means of bfloat16 input                    (issue 11604)
:func:`check_rms_norm_rsqrt`        ``fn(x, weight, eps)``: RMSNorm                LLM Foundry (PR 372)
==================================  =============================================  ==========================

All follow the checker contract (:mod:`helpers.checks.engine`): a bilingual
:class:`CheckResult`, never a print, never an exception on the learner's code, the mistake
named. Torch's own functions are allowed here: the drill is to fix the bug, not to rewrite
the layer from elementary operations. Lesson 12, section 8.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .engine import (NO_MATCH, NOT_WRITTEN, Case, CheckResult, affine_params, error_text,
                     generator, mistakes, randn, run_cases)
from . import kernels as _kernel_checks  # lesson 13's words for a missing or failing Triton

__all__ = ["SOURCES", "check_deepnorm_residual", "check_makemore_batch_norm",
           "check_running_var_update", "check_residual_branches", "check_checkpoint_norm",
           "check_module_buffers", "check_bf16_row_mean", "check_rms_norm_rsqrt"]

# whose bug it is: (English, Chinese), quoted in the diagnosis of the original bug
SOURCES: dict[str, tuple[str, str]] = {
    "deepnorm_alpha": (
        "labml.ai's annotated DeepNorm (labmlai/annotated_deep_learning_paper_implementations, "
        "issue 145)",
        "labml.ai 注释版 DeepNorm 的错误（labmlai/annotated_deep_learning_paper_implementations，"
        "issue 145）"),
    "makemore_variance": (
        "makemore part 3's BatchNorm1d (karpathy/nn-zero-to-hero, issue 44)",
        "makemore 第 3 部分 BatchNorm1d 的错误（karpathy/nn-zero-to-hero，issue 44）"),
    "running_var_bessel": (
        "tinygrad's BatchNorm2d before PR 807 (tinygrad/tinygrad) and of ttnn.batch_norm before "
        "PR 55440 (tenstorrent/tt-metal)",
        "tinygrad 的 BatchNorm2d 在 PR 807 之前（tinygrad/tinygrad）以及 ttnn.batch_norm 在 "
        "PR 55440 之前（tenstorrent/tt-metal）的错误"),
    "reused_linear": (
        "Understanding Deep Learning's notebook 11.3 (udlbook/udlbook, commit 19ee3af, fixed in "
        "5c10091)",
        "《Understanding Deep Learning》第 11.3 号 notebook 的错误（udlbook/udlbook，提交 19ee3af，"
        "在 5c10091 中修复）"),
    "rmsnorm_for_layernorm": (
        "SGLang's Qwen3-Omni vision patch merger before PR 11791 (sgl-project/sglang)",
        "SGLang 中 Qwen3-Omni 视觉 patch merger 在 PR 11791 之前的错误（sgl-project/sglang）"),
    "plain_attributes": (
        "d2l-zh's from-scratch BatchNorm (d2l-ai/d2l-zh, PR 1265)",
        "d2l-zh 从零实现的 BatchNorm 的错误（d2l-ai/d2l-zh，PR 1265）"),
    "bf16_bit_patterns": (
        "a bfloat16 reduction in Triton's interpreter (triton-lang/triton, issue 11604)",
        "Triton 解释器中 bfloat16 归约的错误（triton-lang/triton，issue 11604）"),
    "divides_by_rsqrt": (
        "LLM Foundry's rms_norm before PR 372 (mosaicml/llm-foundry)",
        "LLM Foundry 的 rms_norm 在 PR 372 之前的错误（mosaicml/llm-foundry）"),
}


def _theirs(key: str, en: str, zh: str) -> tuple[str, str]:
    """The texts of an original bug: what it does, then whose bug it is."""
    src_en, src_zh = SOURCES[key]
    sep = " " if src_zh[:1].isascii() else ""
    return (f"{en} This is the bug of {src_en}.", f"{zh}这正是{sep}{src_zh}。")


def _ln(t: Tensor, w: Tensor | None, b: Tensor | None, eps: float, *, unbiased=False,
        eps_outside=False) -> Tensor:
    """LayerNorm over the last dim in float64, with a mistake switched on where asked."""
    t = t.double()
    mean = t.mean(-1, keepdim=True)
    var = t.var(-1, keepdim=True, unbiased=unbiased)
    y = (t - mean) / (var.sqrt() + eps if eps_outside else (var + eps).sqrt())
    if w is not None:
        y = y * w.double()
    if b is not None:
        y = y + b.double()
    return y


# --------------------------------------------------------------------------------------
# 1. DeepNorm: LN(alpha x + G(x))
# --------------------------------------------------------------------------------------
def check_deepnorm_residual(fn: Callable[..., Tensor], *, title: str = "deepnorm_alpha") -> CheckResult:
    r"""Check ``fn(x, gx, alpha, weight, bias, eps)`` = :math:`\mathrm{LN}(\alpha x + g_x)`,
    DeepNorm's residual connection (Wang et al. 2022, eq. 1): the residual ``x`` up-weighted
    by :math:`\alpha > 1`, the sub-layer output ``gx`` not, LayerNorm over the last dim.

    Mistake keys: ``alpha_on_sublayer`` (:math:`\mathrm{LN}(x + \alpha g_x)`, labml.ai's bug;
    equal to :math:`\mathrm{LN}(x/\alpha + g_x)` since LayerNorm ignores a common scale),
    ``no_layer_norm`` (labml.ai's line before commit 0eb74d7), ``alpha_missing``,
    ``norm_on_branch_only`` (:math:`\alpha x + \mathrm{LN}(g_x)`), ``unbiased_variance``,
    ``eps_outside_sqrt``, ``affine_missing``. Lesson 12, section 8."""
    g = generator(81)
    cases = []

    def add(name, shape, alpha, scale=1.0):
        d = shape[-1]
        x, gx = randn(*shape, g=g, scale=scale), randn(*shape, g=g, scale=scale)
        w, b = affine_params(d, g)
        cases.append(Case(name, (x, gx, alpha, w, b, 1e-5)))

    add("(4, 8), alpha = (2 * 6) ** 0.25", (4, 8), (2 * 6) ** 0.25)
    add("(2, 3, 16), alpha = (2 * 18) ** 0.25", (2, 3, 16), (2 * 18) ** 0.25)
    add("(3, 6), alpha = 3.0", (3, 6), 3.0)
    add("(2, 8), small activations ~ 1e-3", (2, 8), 2.0, scale=1e-3)

    def ref(x, gx, alpha, w, b, eps):
        return F.layer_norm(alpha * x + gx, x.shape[-1:], w, b, eps)

    def out(f):
        return lambda x, gx, alpha, w, b, eps: f(x.double(), gx.double(), alpha, w, b, eps).float()

    texts = {
        "alpha_on_sublayer": _theirs(
            "deepnorm_alpha",
            "alpha multiplies the sub-layer output: LN(x + alpha * gx). DeepNorm up-weights the "
            "residual, LN(alpha * x + gx); since LayerNorm ignores a common scale, LN(x + alpha * gx) "
            "equals LN(x / alpha + gx): the residual is down-weighted by 1/alpha instead.",
            "alpha 乘在了子层输出上：LN(x + alpha * gx)。DeepNorm 放大的是残差：LN(alpha * x + gx)；"
            "由于 LayerNorm 不受整体缩放的影响，LN(x + alpha * gx) 等于 LN(x / alpha + gx)，残差反而被缩小为 "
            "1/alpha 倍。"),
        "no_layer_norm": (
            "no LayerNorm after the sum: DeepNorm is Post-LN, x_{l+1} = LN(alpha * x + gx). "
            "labml.ai's line before commit 0eb74d7 returned x + alpha * gx, without the norm.",
            "求和之后没有 LayerNorm：DeepNorm 属于 Post-LN，x_{l+1} = LN(alpha * x + gx)。labml.ai 在提交 "
            "0eb74d7 之前的那一行返回的是 x + alpha * gx，没有归一化。"),
        "alpha_missing": (
            "alpha left out: LN(x + gx) is plain Post-LN. DeepNorm multiplies the residual x by "
            "alpha before the sum.",
            "漏掉了 alpha：LN(x + gx) 只是普通的 Post-LN。DeepNorm 在求和前把残差 x 乘以 alpha。"),
        "norm_on_branch_only": (
            "the norm is applied to the sub-layer output only: alpha * x + LN(gx). DeepNorm "
            "normalises the sum: LN(alpha * x + gx).",
            "只对子层输出做了归一化：alpha * x + LN(gx)。DeepNorm 归一化的是两者之和：LN(alpha * x + gx)。"),
    }
    variants = {
        "alpha_on_sublayer": out(lambda x, gx, a, w, b, eps: _ln(x + a * gx, w, b, eps)),
        "no_layer_norm": lambda x, gx, a, w, b, eps: [x + a * gx, a * x + gx],
        "alpha_missing": out(lambda x, gx, a, w, b, eps: _ln(x + gx, w, b, eps)),
        "norm_on_branch_only": out(lambda x, gx, a, w, b, eps: a * x + _ln(gx, w, b, eps)),
        "unbiased_variance": out(lambda x, gx, a, w, b, eps: _ln(a * x + gx, w, b, eps, unbiased=True)),
        "eps_outside_sqrt": out(lambda x, gx, a, w, b, eps: _ln(a * x + gx, w, b, eps, eps_outside=True)),
        "affine_missing": out(lambda x, gx, a, w, b, eps: _ln(a * x + gx, None, None, eps)),
    }
    return run_cases(title, fn, cases, ref, mistakes(variants, extra=texts),
                     names=("x", "gx", "alpha", "weight", "bias", "eps"))


# --------------------------------------------------------------------------------------
# 2. makemore's BatchNorm1d: the variance it normalises with
# --------------------------------------------------------------------------------------
def _bn2d(x, gamma, beta, eps, *, unbiased=False, eps_outside=False, per_row=False,
          swapped=False, one_pass=False):
    x = x.double()
    dim = 1 if per_row else 0
    mean = x.mean(dim, keepdim=True)
    if one_pass:  # in float32, as a learner's x * x - mean ** 2 on float32 input
        xf = x.float()
        var = ((xf * xf).mean(dim, keepdim=True) - xf.mean(dim, keepdim=True) ** 2).double()
    else:
        var = x.var(dim, keepdim=True, unbiased=unbiased)
    xhat = (x - mean) / (var.sqrt() + eps if eps_outside else (var + eps).sqrt())
    g, b = (beta, gamma) if swapped else (gamma, beta)
    return (g.double() * xhat + b.double()).float()


def check_makemore_batch_norm(fn: Callable[..., Tensor], *, title: str = "makemore_variance") -> CheckResult:
    r"""Check ``fn(x, gamma, beta, eps)``: BatchNorm1d's training-mode output for (N, C) input,
    :math:`\gamma (x - \mu_B)/\sqrt{\sigma_B^2 + \epsilon} + \beta` with the **biased** batch
    variance, as ``torch.nn.BatchNorm1d`` computes it (compared with ``F.batch_norm``).

    Mistake keys: ``unbiased_variance`` (makemore's ``x.var(0, keepdim=True)``), ``eps_outside_sqrt``,
    ``statistics_per_row`` (per sample, LayerNorm's set), ``gamma_beta_swapped``,
    ``one_pass_variance``, ``eps_missing``, ``affine_missing``. Lesson 12, section 8."""
    g = generator(82)
    cases = []

    def add(name, n, c, scale=1.0, offset=0.0, report=True, tol=1e-4):
        x = randn(n, c, g=g, scale=scale, offset=offset)
        w, b = affine_params(c, g)
        cases.append(Case(name, (x, w, b, 1e-5), rtol=tol, atol=tol, report_error=report))

    add("(N, C) = (32, 4), makemore's batch size", 32, 4)
    add("(N, C) = (4, 3)", 4, 3, scale=2.0)
    add("(N, C) = (2, 5), two samples", 2, 5)
    add("(N, C) = (8, 3), small activations ~ 1e-3", 8, 3, scale=1e-3)
    add("(N, C) = (16, 2), mean 1e3", 16, 2, offset=1e3, report=False, tol=1e-3)

    def ref(x, w, b, eps):
        return F.batch_norm(x, None, None, w, b, training=True, eps=eps)

    texts = {
        "unbiased_variance": _theirs(
            "makemore_variance",
            "the batch variance is unbiased (x.var(0) divides by N-1). torch.nn.BatchNorm1d "
            "normalises with the biased variance (divide by N): x.var(0, unbiased=False); every "
            "output shrinks by sqrt((N-1)/N).",
            "批方差用了无偏估计（x.var(0) 除以 N-1）。torch.nn.BatchNorm1d 用有偏方差（除以 N）做归一化："
            "x.var(0, unbiased=False)；否则每个输出都缩小为 sqrt((N-1)/N) 倍。"),
        "statistics_per_row": (
            "the statistics are taken per sample (dim 1), as LayerNorm does. BatchNorm averages "
            "over the batch, dim 0, one mean and variance per feature.",
            "统计量是按样本（dim 1）求的，那是 LayerNorm 的做法。BatchNorm 在批维 dim 0 上求平均，"
            "每个特征一个均值和方差。"),
        "gamma_beta_swapped": (
            "gamma and beta swapped: y = gamma * x_hat + beta (gamma scales, beta shifts).",
            "gamma 和 beta 用反了：y = gamma * x_hat + beta（gamma 缩放，beta 平移）。"),
    }
    variants = {
        "unbiased_variance": lambda x, w, b, eps: _bn2d(x, w, b, eps, unbiased=True),
        "eps_outside_sqrt": lambda x, w, b, eps: _bn2d(x, w, b, eps, eps_outside=True),
        "statistics_per_row": lambda x, w, b, eps: [_bn2d(x, w, b, eps, per_row=True),
                                                    _bn2d(x, w, b, eps, per_row=True, unbiased=True)],
        "gamma_beta_swapped": lambda x, w, b, eps: _bn2d(x, w, b, eps, swapped=True),
        "one_pass_variance": lambda x, w, b, eps: _bn2d(x, w, b, eps, one_pass=True),
        "eps_missing": lambda x, w, b, eps: _bn2d(x, w, b, 0.0),
        "affine_missing": lambda x, w, b, eps: _bn2d(x, torch.ones_like(w), torch.zeros_like(b), eps),
    }
    return run_cases(title, fn, cases, ref, mistakes(variants, extra=texts),
                     names=("x", "gamma", "beta", "eps"))


# --------------------------------------------------------------------------------------
# 3. the running variance: Bessel's correction with m = N * H * W
# --------------------------------------------------------------------------------------
def _pair(out) -> Tensor:
    """(running_mean, running_var) as one (2, C) tensor for the engine; anything else as is."""
    if isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, Tensor) for t in out):
        return torch.stack([out[0].reshape(-1), out[1].reshape(-1)])
    return out


def _stacked(fn: Callable) -> Callable:
    def run(*args):
        return _pair(fn(*args))
    run.__name__ = getattr(fn, "__name__", "fn")
    return run


def _running(x, rm, rv, momentum, *, bessel="m", reversed_momentum=False, std=False):
    x = x.double()
    dims = [0] + list(range(2, x.dim()))
    mean = x.mean(dims)
    m = x.numel() // x.shape[1]
    var = x.var(dims, unbiased=False)
    if bessel == "m":
        var = var * m / (m - 1)
    elif bessel == "n":  # N-1 with N the batch size only
        var = var * x.shape[0] / (x.shape[0] - 1) if x.shape[0] > 1 else var * float("nan")
    if std:
        var = var.sqrt()
    k = 1 - momentum if reversed_momentum else momentum
    new_mean = (1 - k) * rm.double() + k * mean
    new_var = (1 - k) * rv.double() + k * var
    return torch.stack([new_mean, new_var]).float()


def check_running_var_update(fn: Callable, *, title: str = "running_var_bessel") -> CheckResult:
    r"""Check ``fn(x, running_mean, running_var, momentum) -> (running_mean, running_var)``:
    one training step of BatchNorm's buffers, as PyTorch does it (compared with the buffers
    ``F.batch_norm(..., training=True)`` leaves):
    :math:`\hat\mu \leftarrow (1-m)\hat\mu + m\,\mu_B`,
    :math:`\hat\sigma^2 \leftarrow (1-m)\hat\sigma^2 + m\,\sigma_B^2\,\frac{M}{M-1}`, with the
    momentum :math:`m` and :math:`M = N\cdot H\cdot W` the values per channel.

    Mistake keys: ``biased_running_var`` (tinygrad before PR 807, ttnn before tt-metal PR
    55440), ``bessel_over_batch_only`` (N-1 where M-1 is due), ``momentum_reversed``,
    ``std_not_variance``, ``mean_not_updated``. Lesson 12, section 8."""
    g = generator(83)
    cases = []

    def add(name, shape, momentum):
        c = shape[1]
        x = randn(*shape, g=g, scale=2.0, offset=0.5)
        rm = randn(c, g=g, scale=0.5).float()
        rv = (torch.rand(c, generator=g, dtype=torch.float64) + 0.5).float()
        cases.append(Case(name, (x, rm, rv, momentum)))

    add("(N, C) = (4, 3), momentum 0.1", (4, 3), 0.1)
    add("(N, C, H, W) = (2, 3, 2, 2), momentum 0.5", (2, 3, 2, 2), 0.5)
    add("(N, C, L) = (8, 2, 5), momentum 0.3", (8, 2, 5), 0.3)
    add("(N, C) = (16, 4), momentum 1.0", (16, 4), 1.0)

    def ref(x, rm, rv, momentum):
        rm, rv = rm.clone(), rv.clone()
        F.batch_norm(x, rm, rv, training=True, momentum=momentum)
        return torch.stack([rm, rv])

    texts = {
        "biased_running_var": _theirs(
            "running_var_bessel",
            "running_var is fed the biased batch variance. PyTorch normalises with the biased "
            "variance but stores the unbiased one, var * M / (M - 1) with M = N*H*W values per "
            "channel; without it running_var underestimates the variance by (M-1)/M.",
            "running_var 收到的是有偏的批方差。PyTorch 用有偏方差做归一化，存下的却是无偏方差 "
            "var * M / (M - 1)，M = N*H*W 为每个通道的取值个数；少了这个因子，running_var 会把方差低估为 "
            "(M-1)/M 倍。"),
        "bessel_over_batch_only": (
            "Bessel's correction with N, the batch size: the variance is taken over M = N*H*W "
            "values per channel, so the factor is M / (M - 1).",
            "贝塞尔校正用了批大小 N：方差是在每个通道的 M = N*H*W 个值上求的，因子应为 M / (M - 1)。"),
        "momentum_reversed": (
            "the momentum weights the old value: (1 - momentum) * new + momentum * old. In "
            "PyTorch momentum weights the new batch: (1 - momentum) * running + momentum * batch "
            "(Keras and d2l-zh use the opposite convention, momentum 0.9 = PyTorch's 0.1).",
            "momentum 乘在了旧值上：(1 - momentum) * 新值 + momentum * 旧值。PyTorch 的 momentum 乘在新批次上："
            "(1 - momentum) * running + momentum * batch（Keras 和 d2l-zh 的约定相反，它们的 0.9 即 PyTorch 的 0.1）。"),
        "std_not_variance": (
            "running_var is fed a standard deviation. It stores a variance: the unbiased batch "
            "variance, no square root.",
            "running_var 收到的是标准差。它存的是方差：无偏的批方差，不开平方。"),
        "mean_not_updated": (
            "running_mean is returned unchanged: it moves towards the batch mean with the same "
            "momentum as running_var.",
            "running_mean 没有更新：它应以与 running_var 相同的 momentum 向批均值移动。"),
    }
    variants = {
        "biased_running_var": lambda *a: _running(*a, bessel=None),
        "bessel_over_batch_only": lambda *a: _running(*a, bessel="n"),
        "momentum_reversed": lambda *a: [_running(*a, reversed_momentum=True),
                                         _running(*a, reversed_momentum=True, bessel=None)],
        "std_not_variance": lambda *a: [_running(*a, std=True), _running(*a, std=True, bessel=None)],
        "mean_not_updated": lambda x, rm, rv, mo: torch.stack([rm, _running(x, rm, rv, mo)[1]]),
    }
    return run_cases(title, _stacked(fn), cases, ref, mistakes(variants, extra=texts),
                     names=("x", "running_mean", "running_var", "momentum"))


# --------------------------------------------------------------------------------------
# 4. five residual branches, five Linear layers
# --------------------------------------------------------------------------------------
def _resnet(x, W, b, *, branch=(1, 2, 3, 4, 5), relu_after_add=False, no_residual=False,
            no_relu=False):
    x, W, b = x.double(), [w.double() for w in W], [v.double() for v in b]
    h = F.linear(x, W[0], b[0])
    for k in branch:
        z = h if no_relu else h.relu()
        branch_out = F.linear(z, W[k], b[k])
        h = branch_out if no_residual else h + branch_out
        if relu_after_add:
            h = h.relu()
    return F.linear(h, W[6], b[6]).float()


def check_residual_branches(fn: Callable[..., Tensor], *, title: str = "reused_linear") -> CheckResult:
    r"""Check ``fn(x, weights, biases)``: the residual network of Understanding Deep Learning's
    notebook 11.3 with seven Linear layers (``weights[k]``, ``biases[k]``, k = 0..6):
    :math:`h_0 = W_0 x + b_0`, :math:`h_k = h_{k-1} + W_k\,\mathrm{relu}(h_{k-1}) + b_k` for
    k = 1..5 (each branch its own layer), output :math:`W_6 h_5 + b_6`.

    Mistake keys: ``reused_linear`` (branches 4 and 5 reuse layer 3, the notebook's
    ``linear4``), ``relu_after_add``, ``no_residual``, ``relu_missing``. Lesson 12, section 8."""
    g = generator(84)
    cases = []

    def add(name, n, d_in, h, d_out):
        x = randn(n, d_in, g=g)
        shapes = [(h, d_in)] + [(h, h)] * 5 + [(d_out, h)]
        W = [randn(*s, g=g, scale=s[1] ** -0.5) for s in shapes]
        b = [randn(s[0], g=g, scale=0.1) for s in shapes]
        cases.append(Case(name, (x, W, b)))

    add("x (8, 5), hidden 6, output 3", 8, 5, 6, 3)
    add("x (4, 40), hidden 100, output 10 (the notebook's sizes)", 4, 40, 100, 10)
    add("x (2, 3), hidden 4, output 2", 2, 3, 4, 2)

    texts = {
        "reused_linear": _theirs(
            "reused_linear",
            "the third Linear of the branches (weights[3], the notebook's linear4) is used again "
            "in the fourth and fifth branches: they share its weights and weights[4], weights[5] "
            "are never used (nor trained). Each branch k has its own layer k.",
            "分支中的第三个 Linear（weights[3]，即 notebook 的 linear4）在第四、第五个分支里又被用了一次："
            "它们共用同一组权重，weights[4] 和 weights[5] 从未被使用（也不会被训练）。第 k 个分支应使用第 k 层。"),
        "relu_after_add": (
            "the ReLU is applied after the residual sum. In the notebook's branches the ReLU comes "
            "first: h + W relu(h) + b, and the sum itself is not passed through a ReLU.",
            "ReLU 放在了残差求和之后。notebook 的分支中 ReLU 在前：h + W relu(h) + b，和本身不再经过 ReLU。"),
        "no_residual": (
            "the residual connection is missing: h_k = W_k relu(h_{k-1}) + b_k. Each branch adds "
            "to its input: h_k = h_{k-1} + W_k relu(h_{k-1}) + b_k.",
            "缺少残差连接：h_k = W_k relu(h_{k-1}) + b_k。每个分支都应加回它的输入：h_k = h_{k-1} + "
            "W_k relu(h_{k-1}) + b_k。"),
        "relu_missing": (
            "no ReLU inside the branches: each branch is W_k relu(h_{k-1}) + b_k.",
            "分支里没有 ReLU：每个分支应为 W_k relu(h_{k-1}) + b_k。"),
    }
    variants = {
        "reused_linear": lambda x, W, b: _resnet(x, W, b, branch=(1, 2, 3, 3, 3)),
        "relu_after_add": lambda x, W, b: _resnet(x, W, b, relu_after_add=True),
        "no_residual": lambda x, W, b: _resnet(x, W, b, no_residual=True),
        "relu_missing": lambda x, W, b: _resnet(x, W, b, no_relu=True),
    }
    return run_cases(title, fn, cases, lambda x, W, b: _resnet(x, W, b),
                     mistakes(variants, extra=texts), against=("the reference", "参考实现"),
                     names=("x", "weights", "biases"))


# --------------------------------------------------------------------------------------
# 5. the norm a checkpoint was trained with
# --------------------------------------------------------------------------------------
def _rms(x, w, b, eps, *, with_bias=False):
    x = x.double()
    y = x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w.double()
    return (y + b.double() if with_bias else y).float()


def check_checkpoint_norm(fn: Callable[..., Tensor], *, title: str = "rmsnorm_for_layernorm") -> CheckResult:
    r"""Check ``fn(x, weight, bias, eps)``: the norm the checkpoint was trained with,
    ``nn.LayerNorm(d, eps=1e-6)``: :math:`(x-\mu)/\sqrt{\sigma^2+\epsilon}\,w + b` over the
    last dim (compared with ``F.layer_norm``). The inputs have a mean far from 0, as the vision
    features of Qwen3-Omni's patch merger do.

    Mistake keys: ``rmsnorm_for_layernorm`` (RMSNorm with the weight, the bias dropped:
    SGLang's bug), ``rmsnorm_with_bias``, ``bias_missing``, ``unbiased_variance``,
    ``eps_outside_sqrt``. Lesson 12, section 8."""
    g = generator(85)
    cases = []

    def add(name, shape, offset, scale=1.0):
        x = randn(*shape, g=g, scale=scale, offset=offset)
        w, b = affine_params(shape[-1], g)
        cases.append(Case(name, (x, w, b, 1e-6)))

    add("(4, 8), mean 1.5", (4, 8), 1.5)
    add("(2, 3, 16), mean -0.8", (2, 3, 16), -0.8)
    add("(5, 6), mean 3.0, spread 0.5", (5, 6), 3.0, scale=0.5)
    add("(2, 8), small activations ~ 1e-4", (2, 8), 0.0, scale=1e-4)

    def ref(x, w, b, eps):
        return F.layer_norm(x, x.shape[-1:], w, b, eps)

    texts = {
        "rmsnorm_for_layernorm": _theirs(
            "rmsnorm_for_layernorm",
            "RMSNorm computed with the checkpoint's weight: the mean is not subtracted and the "
            "checkpoint's bias is dropped. The checkpoint was trained with LayerNorm: "
            "(x - mean) / sqrt(var + eps) * weight + bias.",
            "用检查点的 weight 算了 RMSNorm：没有减去均值，检查点里的 bias 也被丢掉了。这个检查点是用 LayerNorm "
            "训练的：(x - mean) / sqrt(var + eps) * weight + bias。"),
        "rmsnorm_with_bias": (
            "RMSNorm with the bias added: the mean is still not subtracted. The checkpoint's norm "
            "is LayerNorm, which centres each token first.",
            "在 RMSNorm 上加了 bias：仍然没有减去均值。检查点的归一化是 LayerNorm，它先把每个 token 中心化。"),
        "bias_missing": (
            "LayerNorm without the bias: the checkpoint stores one (nn.LayerNorm has "
            "weight and bias); add it: ... * weight + bias.",
            "LayerNorm 漏掉了 bias：检查点里存有 bias（nn.LayerNorm 有 weight 和 bias），应加上：... * weight + bias。"),
    }
    variants = {
        "rmsnorm_for_layernorm": lambda x, w, b, eps: _rms(x, w, b, eps),
        "rmsnorm_with_bias": lambda x, w, b, eps: _rms(x, w, b, eps, with_bias=True),
        "bias_missing": lambda x, w, b, eps: _ln(x, w, None, eps).float(),
        "unbiased_variance": lambda x, w, b, eps: _ln(x, w, b, eps, unbiased=True).float(),
        "eps_outside_sqrt": lambda x, w, b, eps: _ln(x, w, b, eps, eps_outside=True).float(),
        "affine_missing": lambda x, w, b, eps: _ln(x, None, None, eps).float(),
    }
    return run_cases(title, fn, cases, ref, mistakes(variants, extra=texts),
                     names=("x", "weight", "bias", "eps"))


# --------------------------------------------------------------------------------------
# 8. RMSNorm with rsqrt
# --------------------------------------------------------------------------------------
def _rms_variant(x, w, eps, *, by_rsqrt=False, eps_outside=False, centred=False, total=False,
                 no_weight=False):
    x = x.double()
    if centred:
        x = x - x.mean(-1, keepdim=True)
    ms = x.pow(2).sum(-1, keepdim=True) if total else x.pow(2).mean(-1, keepdim=True)
    if by_rsqrt:
        y = x / torch.rsqrt(ms + eps)
    elif eps_outside:
        y = x / (ms.sqrt() + eps)
    else:
        y = x * torch.rsqrt(ms + eps)
    return (y if no_weight else y * w.double()).float()


def check_rms_norm_rsqrt(fn: Callable[..., Tensor], *, title: str = "divides_by_rsqrt") -> CheckResult:
    r"""Check ``fn(x, weight, eps)``: RMSNorm over the last dim,
    :math:`x\,\mathrm{rsqrt}(\overline{x^2} + \epsilon)\,w` (compared with ``F.rms_norm``).

    Mistake keys: ``divides_by_rsqrt`` (``x / rsqrt(...)``, LLM Foundry's bug: it multiplies
    by the RMS), ``eps_outside_sqrt``, ``eps_missing``, ``mean_subtracted`` (LayerNorm without
    bias), ``sum_not_mean``, ``missing_keepdim``, ``affine_missing``. Lesson 12, section 8."""
    g = generator(88)
    cases = []

    def add(name, shape, scale=1.0, offset=0.0):
        x = randn(*shape, g=g, scale=scale, offset=offset)
        w, _ = affine_params(shape[-1], g)
        cases.append(Case(name, (x, w, 1e-5)))

    add("(4, 8)", (4, 8), scale=2.0)
    add("(2, 3, 16), mean 1.0", (2, 3, 16), offset=1.0)
    add("(8, 8), rows = features", (8, 8), scale=0.5, offset=0.3)
    add("(2, 8), small activations ~ 1e-3", (2, 8), scale=1e-3)

    def ref(x, w, eps):
        return F.rms_norm(x, x.shape[-1:], w, eps)

    texts = {
        "divides_by_rsqrt": _theirs(
            "divides_by_rsqrt",
            "x is divided by rsqrt(mean(x**2) + eps): rsqrt is already the reciprocal, so this "
            "multiplies by the RMS instead of dividing by it (the output grows with the square "
            "of the input's scale). Multiply: x * torch.rsqrt(mean(x**2) + eps).",
            "x 除以了 rsqrt(mean(x**2) + eps)：rsqrt 本身已经是倒数，这样等于乘以 RMS 而不是除以它"
            "（输出随输入尺度的平方增长）。应当相乘：x * torch.rsqrt(mean(x**2) + eps)。"),
        "mean_subtracted": (
            "the mean is subtracted: that is LayerNorm without bias. RMSNorm divides x itself by "
            "its root mean square.",
            "减去了均值：那是没有偏置的 LayerNorm。RMSNorm 直接用 x 除以它自己的均方根。"),
        "sum_not_mean": (
            "the sum of squares instead of their mean: RMSNorm divides by sqrt(mean(x**2) + eps), "
            "the mean over the last dim.",
            "用了平方和而不是平方的均值：RMSNorm 除以 sqrt(mean(x**2) + eps)，均值在最后一维上求。"),
    }

    def no_keepdim(x, w, eps):
        if x.dim() != 2 or x.shape[0] != x.shape[1]:
            return None
        xd = x.double()
        return (xd * torch.rsqrt(xd.pow(2).mean(-1) + eps) * w.double()).float()

    variants = {
        "divides_by_rsqrt": lambda x, w, eps: _rms_variant(x, w, eps, by_rsqrt=True),
        "eps_outside_sqrt": lambda x, w, eps: _rms_variant(x, w, eps, eps_outside=True),
        "eps_missing": lambda x, w, eps: _rms_variant(x, w, 0.0),
        "mean_subtracted": lambda x, w, eps: _rms_variant(x, w, eps, centred=True),
        "sum_not_mean": lambda x, w, eps: _rms_variant(x, w, eps, total=True),
        "missing_keepdim": no_keepdim,
        "affine_missing": lambda x, w, eps: _rms_variant(x, w, eps, no_weight=True),
    }
    return run_cases(title, fn, cases, ref, mistakes(variants, extra=texts),
                     names=("x", "weight", "eps"))


# --------------------------------------------------------------------------------------
# 6. a module whose statistics live in its state_dict
# --------------------------------------------------------------------------------------
BUFFER_TEXTS: dict[str, tuple[str, str]] = {
    "plain_attributes": _theirs(
        "plain_attributes",
        "moving_mean and moving_var are plain tensor attributes: they are not in the state_dict, "
        "so a saved and reloaded model is back at mean 0 and variance 1, and .to() / .double() "
        "leave them behind. Register them in __init__: self.register_buffer('moving_mean', "
        "torch.zeros(shape)); assigning a tensor to the name later updates the buffer.",
        "moving_mean 和 moving_var 是普通的张量属性：它们不在 state_dict 里，保存再加载后的模型回到均值 0、"
        "方差 1，.to() / .double() 也不会带上它们。应在 __init__ 里注册："
        "self.register_buffer('moving_mean', torch.zeros(shape))；之后给这个名字赋新张量就会更新缓冲区。"),
    "stats_as_parameters": (
        "moving_mean and moving_var are nn.Parameter: they are in model.parameters(), so an "
        "optimiser receives them (weight decay shrinks them even with requires_grad=False in some "
        "optimisers' groups, and a trainable one gets gradients). Statistics are buffers: "
        "register_buffer.",
        "moving_mean 和 moving_var 被定义成了 nn.Parameter：它们出现在 model.parameters() 里，会被交给"
        "优化器（可训练的会得到梯度）。统计量是缓冲区：应使用 register_buffer。"),
    "non_persistent_buffers": (
        "the buffers are registered with persistent=False: they follow .to() but are left out of "
        "the state_dict, so a reloaded model loses them. Drop persistent=False.",
        "缓冲区注册时用了 persistent=False：它们会随 .to() 移动，却不进入 state_dict，"
        "重新加载的模型就丢失了它们。去掉 persistent=False。"),
    "buffer_names": (
        "the statistics are not under the names moving_mean and moving_var: the drill's "
        "checkpoint (and d2l's code) use those names.",
        "统计量没有使用 moving_mean 和 moving_var 这两个名字：本练习的检查点（以及 d2l 的代码）用的是它们。"),
    "stats_not_updated": (
        "moving_mean and moving_var stay at their initial values after training steps: store "
        "what batch_norm returns (Y, self.moving_mean, self.moving_var = batch_norm(...)).",
        "训练若干步后 moving_mean 和 moving_var 仍是初始值：应保存 batch_norm 返回的值"
        "（Y, self.moving_mean, self.moving_var = batch_norm(...)）。"),
    "wrong_initial_values": (
        "a fresh layer's statistics are not mean 0 and variance 1 (moving_var must start at "
        "ones, not zeros).",
        "新建的层的统计量不是均值 0、方差 1（moving_var 应初始化为全 1，而不是全 0）。"),
    "momentum_reversed": (
        "the moving averages weight the new batch by momentum = 0.9: with d2l's convention the "
        "old value keeps 0.9 (moving = 0.9 * moving + 0.1 * batch).",
        "滑动平均给新批次的权重是 0.9：按 d2l 的约定，旧值保留 0.9（moving = 0.9 * moving + 0.1 * batch）。"),
    "wrong_output": (
        "the training-mode output differs from BatchNorm with the batch's statistics: {detail}",
        "训练模式下的输出与用批统计量的 BatchNorm 不一致：{detail}"),
    "raised": ("it raised {detail}", "运行时抛出异常 {detail}"),
}


def _d2l_step(stats, X, momentum=0.9, unbiased=False):
    """One of d2l's updates of (moving_mean, moving_var) per channel, in float64."""
    mm, mv = stats
    dims = [0] if X.dim() == 2 else [0, 2, 3]
    mean = X.double().mean(dims)
    var = X.double().var(dims, unbiased=unbiased)
    return momentum * mm + (1 - momentum) * mean, momentum * mv + (1 - momentum) * var


def _buffers_result(title, key, detail="", cases=()):
    if key is None:
        return CheckResult(True, f"✔ {title}: trains, saves its statistics and reloads them as "
                                 f"nn.BatchNorm's buffers do. / 能训练，统计量会被保存并能重新加载，"
                                 f"与 nn.BatchNorm 的缓冲区一样。")
    if key == "not_implemented":
        return CheckResult(False, f"… {title}: {NOT_WRITTEN[0]} / {NOT_WRITTEN[1]}",
                           "not_implemented", list(cases))
    if key == "no_match":
        return CheckResult(False, f"✘ {title}: {NO_MATCH[0]} {detail}\n✘ {title}：{NO_MATCH[1]} {detail}",
                           None, list(cases))
    en, zh = (t.replace("{detail}", detail) for t in BUFFER_TEXTS[key])
    return CheckResult(False, f"✘ {title}: Likely mistake: {en}\n✘ {title}：可能的错误：{zh}", key,
                       list(cases))


def check_module_buffers(cls: Callable[..., nn.Module], *, title: str = "plain_attributes") -> CheckResult:
    r"""Check a BatchNorm module class ``cls(num_features, num_dims)`` written after d2l's
    from-scratch one: ``forward(X)`` normalises with the batch's statistics in training
    (:math:`\gamma\,(X-\mu_B)/\sqrt{\sigma_B^2+\epsilon}+\beta`, biased, eps 1e-5) and updates
    ``moving_mean`` and ``moving_var`` (d2l's rule, momentum 0.9 on the old value, or
    PyTorch's, unbiased variance); those two must be **buffers** in the ``state_dict``, start
    at 0 and 1, survive ``state_dict()`` / ``load_state_dict()``, follow ``.double()``, and
    not be parameters. Eval mode is run under ``torch.no_grad()`` (d2l's convention for
    prediction) and with ``.eval()``.

    Mistake keys: ``plain_attributes`` (d2l-zh's bug), ``stats_as_parameters``,
    ``non_persistent_buffers``, ``buffer_names``, ``stats_not_updated``,
    ``wrong_initial_values``, ``momentum_reversed``, ``wrong_output``, ``raised``.
    Lesson 12, section 8."""
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _check_buffers(cls, title)
        except NotImplementedError:
            return _buffers_result(title, "not_implemented", cases=["construct and train"])
        except Exception as e:  # the learner's code: a diagnosis, never raised
            return _buffers_result(title, "raised", error_text(e), ["construct and train"])


def _check_buffers(cls, title):
    g = generator(86)
    c = 3
    m = cls(c, 2)
    if not isinstance(m, nn.Module):
        return _buffers_result(title, "raised", f"TypeError: {type(m).__name__} is not an nn.Module",
                               ["construct"])
    params = dict(m.named_parameters())
    if "moving_mean" in params or "moving_var" in params:
        return _buffers_result(title, "stats_as_parameters", cases=["parameters()"])
    fresh = {k: v.detach().clone() for k, v in m.state_dict().items()}
    batches = [randn(8, c, g=g, scale=2.0, offset=1.0) for _ in range(3)]
    m.train()
    with torch.enable_grad():
        outs = [m(X) for X in batches]
    for X, Y in zip(batches, outs):
        want = F.batch_norm(X, None, None, training=True, eps=1e-5)
        gam, bet = [p for p in m.parameters()][:2] if len(params) >= 2 else (None, None)
        if gam is not None:
            want = want * gam.detach().reshape(1, -1) + bet.detach().reshape(1, -1)
        if not isinstance(Y, Tensor) or Y.shape != want.shape or not torch.allclose(
                Y.detach().double(), want.double(), rtol=1e-4, atol=1e-4):
            what = (f"returned {type(Y).__name__}" if not isinstance(Y, Tensor) else
                    f"returned shape {tuple(Y.shape)}" if Y.shape != want.shape else
                    f"max abs error {float((Y.detach().double() - want.double()).abs().max()):.3g}")
            return _buffers_result(title, "wrong_output", what, ["training forward"])
    sd = m.state_dict()
    buffers = dict(m.named_buffers())
    if "moving_mean" not in sd or "moving_var" not in sd:
        if "moving_mean" in buffers or "moving_var" in buffers:
            return _buffers_result(title, "non_persistent_buffers", cases=["state_dict()"])
        if isinstance(getattr(m, "moving_mean", None), Tensor):
            return _buffers_result(title, "plain_attributes", cases=["state_dict()"])
        return _buffers_result(title, "buffer_names", cases=["state_dict()"])
    if not (torch.allclose(fresh["moving_mean"].double().reshape(-1), torch.zeros(c, dtype=torch.float64))
            and torch.allclose(fresh["moving_var"].double().reshape(-1), torch.ones(c, dtype=torch.float64))):
        return _buffers_result(title, "wrong_initial_values", cases=["a fresh layer"])
    got = (sd["moving_mean"].double().reshape(-1), sd["moving_var"].double().reshape(-1))
    init = (torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64))

    def run(**kw):
        s = init
        for X in batches:
            s = _d2l_step(s, X, **kw)
        return s

    def same(a, b):
        return all(torch.allclose(u, v, rtol=1e-4, atol=1e-5) for u, v in zip(a, b))

    if not any(same(got, run(**kw)) for kw in ({}, {"momentum": 0.9, "unbiased": True})):
        if same(got, init):
            return _buffers_result(title, "stats_not_updated", cases=["after 3 training steps"])
        if any(same(got, run(momentum=0.1, unbiased=u)) for u in (False, True)):
            return _buffers_result(title, "momentum_reversed", cases=["after 3 training steps"])
        want = run()
        return _buffers_result(title, "no_match",
                               f"After 3 training steps: moving_mean {want[0].numpy().round(4).tolist()}, "
                               f"moving_var {want[1].numpy().round(4).tolist()} expected (d2l's rule), "
                               f"got {got[0].numpy().round(4).tolist()}, {got[1].numpy().round(4).tolist()}. "
                               f"/ 训练 3 步后 moving_mean、moving_var 应为上面第一组值，实得第二组值。",
                               ["after 3 training steps"])
    # reload into a fresh layer: the same predictions
    other = cls(c, 2)
    other.load_state_dict(sd)
    test = randn(5, c, g=g, scale=2.0, offset=1.0)
    m.eval()
    other.eval()
    with torch.no_grad():
        a, b = m(test), other(test)
    if not torch.allclose(a, b):
        return _buffers_result(title, "plain_attributes", cases=["save and reload"])
    m.double()
    if m.state_dict()["moving_mean"].dtype != torch.float64:
        return _buffers_result(title, "plain_attributes", cases=[".double()"])
    return _buffers_result(title, None)


# --------------------------------------------------------------------------------------
# 7. a Triton kernel's row means of bfloat16 input
# --------------------------------------------------------------------------------------
KERNEL_TEXTS: dict[str, tuple[str, str]] = {
    # Triton missing, or the kernel raising: the words of lesson 13's kernel checkers
    "not_available": _kernel_checks.MISTAKES["not_available"],
    "raised": _kernel_checks.MISTAKES["raised"],
    "bf16_bit_patterns": _theirs(
        "bf16_bit_patterns",
        "right on float32 input, wrong on bfloat16: the row is reduced in bfloat16. Triton's "
        "interpreter stores bfloat16 as 16-bit integers and tl.sum adds the bit patterns (a "
        "cast after the sum is too late); on a GPU the sum would at least be rounded to 8 "
        "significant bits. Cast the loaded row first: x = tl.load(...).to(tl.float32).",
        "float32 输入正确，bfloat16 输入出错：这一行是在 bfloat16 下归约的。Triton 解释器把 bfloat16 存成 16 位整数，"
        "tl.sum 加的是位模式（求和之后再转换就太晚了）；在 GPU 上这个和也至少会被舍入到 8 位有效数字。"
        "应先转换载入的行：x = tl.load(...).to(tl.float32)。"),
    "divided_by_block": (
        "divided by BLOCK_N instead of N: right when N is a power of two, wrong when it is not. "
        "The masked lanes hold zeros; the mean is the sum divided by N.",
        "除以了 BLOCK_N 而不是 N：N 是 2 的幂时正确，否则出错。被屏蔽的 lane 是 0；均值是总和除以 N。"),
    "unmasked_load": (
        "a load without mask=cols < N (other=0.): when N is not a power of two the lanes "
        "N..BLOCK_N-1 read the next row (or past the tensor) and enter the sum.",
        "载入时没有 mask=cols < N（other=0.）：N 不是 2 的幂时，第 N 到 BLOCK_N-1 个 lane 读到了下一行"
        "（或张量之外）的值，并被计入总和。"),
    "row_stride": (
        "rows addressed with BLOCK_N as their stride: row r starts at X + r * N (the rows are "
        "contiguous, N values each).",
        "用 BLOCK_N 作为行跨度寻址：第 r 行从 X + r * N 开始（各行连续存放，每行 N 个值）。"),
    "sum_not_mean": (
        "the sum is stored, not the mean: divide by N.",
        "存下的是总和而不是均值：应除以 N。"),
    "program_id_ignored": (
        "every program writes Out[0]: program r handles row r (tl.program_id(0)) and stores "
        "to Out + r.",
        "每个程序都写到了 Out[0]：第 r 个程序处理第 r 行（tl.program_id(0)），应存到 Out + r。"),
}


def _kernel_result(title, key, cases=(), detail=""):
    if key is None:
        return CheckResult(True, f"✔ {title}: all {detail} cases match x.float().mean(-1). / 全部 "
                                 f"{detail} 个用例与 x.float().mean(-1) 一致。")
    if key == "not_implemented":
        return CheckResult(False, f"… {title}: {NOT_WRITTEN[0]} / {NOT_WRITTEN[1]}",
                           "not_implemented", list(cases))
    if key == "no_match":
        return CheckResult(False, f"✘ {title}: {NO_MATCH[0]} {detail}\n✘ {title}：{NO_MATCH[1]} {detail}",
                           None, list(cases))
    en, zh = (t.replace("{detail}", detail) for t in KERNEL_TEXTS[key])
    mistake = None if key == "not_available" else key
    return CheckResult(False, f"✘ {title}: Likely mistake: {en}\n✘ {title}：可能的错误：{zh}", mistake,
                       list(cases))


# (name, dtype, rows, N): the row means of a (rows, N) contiguous tensor
_MEAN_CASES = [("float32, (3, 8)", torch.float32, 3, 8),
               ("float16, (3, 8)", torch.float16, 3, 8),
               ("bfloat16, (3, 8)", torch.bfloat16, 3, 8),
               ("bfloat16, (4, 6), BLOCK_N = 8", torch.bfloat16, 4, 6),
               ("float32, (4, 6), BLOCK_N = 8", torch.float32, 4, 6)]
_GUARD = 64


def _mean_variants(buf: Tensor, rows: int, n: int, block: int) -> dict[str, Tensor]:
    """The row means each known mistake gives (float64, from the flat buffer with its NaN guard)."""
    flat = buf.double()
    x = flat[: rows * n].view(rows, n)

    def window(start, length):
        return flat[start: start + length] if start + length <= flat.numel() else None

    def means(starts, length, div):
        out = []
        for s in starts:
            w = window(s, length)
            out.append(float("nan") if w is None else float(w.sum() / div))
        return torch.tensor(out, dtype=torch.float64)

    last = torch.full((rows,), float("nan"), dtype=torch.float64)
    last[0] = x[-1].mean()
    return {"divided_by_block": x.sum(-1) / block,
            "unmasked_load": means([r * n for r in range(rows)], block, n),
            "row_stride": means([r * block for r in range(rows)], n, n),
            "sum_not_mean": x.sum(-1),
            "program_id_ignored": last}


def check_bf16_row_mean(kernel, *, title: str = "bf16_bit_patterns") -> CheckResult:
    r"""Run a learner's Triton kernel ``kernel[(rows,)](X, Out, N, BLOCK_N=...)`` (program r
    stores the mean of row r of the contiguous (rows, N) tensor ``X`` into the float32
    ``Out[r]``; ``BLOCK_N`` = N rounded up to a power of two) through Triton's interpreter on
    float32, float16 and bfloat16 rows, N a power of two or not, and compare with
    ``x.float().mean(-1)``.

    Mistake keys: ``bf16_bit_patterns`` (right on float32, wrong on bfloat16: reduced without
    a cast to float32, Triton issue 11604), ``divided_by_block``, ``unmasked_load``,
    ``row_stride``, ``sum_not_mean``, ``program_id_ignored``, ``raised``; ``not_available``
    where Triton is not installed. Lesson 12, section 8."""
    from .. import kernels as K
    if not K.AVAILABLE:
        return _kernel_result(title, "not_available", ["Triton"])
    failed, keys = [], []
    first_bad = None
    with torch.random.fork_rng(devices=[]):
        g = generator(87)
        for name, dtype, rows, n in _MEAN_CASES:
            block = 1 << (n - 1).bit_length()
            x = randn(rows, n, g=g, scale=2.0, offset=0.5)
            buf = torch.full((rows * n + _GUARD,), float("nan"), dtype=dtype)
            buf[: rows * n] = x.reshape(-1).to(dtype)
            out = torch.full((rows,), float("nan"))
            try:
                import numpy as np
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    kernel[(rows,)](buf, out, n, BLOCK_N=block)
            except Exception as e:  # the learner's kernel: a diagnosis, never raised
                text = error_text(e)
                if "NotImplementedError" in text or isinstance(e.__cause__, NotImplementedError):
                    return _kernel_result(title, "not_implemented", [name])
                return _kernel_result(title, "raised", [name], text)
            want = buf[: rows * n].view(rows, n).double().mean(-1)
            tol = 1e-5 if dtype == torch.float32 else 1e-3
            if torch.allclose(out.double(), want, rtol=tol, atol=tol):
                continue
            failed.append(name)
            variants = _mean_variants(buf, rows, n, block)
            keys.append([k for k, v in variants.items()
                         if torch.allclose(out.double(), v, rtol=tol, atol=tol, equal_nan=True)
                         and not torch.allclose(v, want, rtol=tol, atol=tol)])
            if first_bad is None:
                first_bad = (name, want, out)
    if not failed:
        return _kernel_result(title, None, detail=str(len(_MEAN_CASES)))
    found = [k for ks in keys for k in ks]
    if found:
        key = max(set(found), key=found.count)
        return _kernel_result(title, key, failed)
    if all("bfloat16" in f or "float16" in f for f in failed) and any("bfloat16" in f for f in failed):
        return _kernel_result(title, "bf16_bit_patterns", failed)
    name, want, out = first_bad
    fmt = lambda t: "[" + ", ".join(f"{float(v):.4g}" for v in t[:4]) + "]"  # noqa: E731
    return _kernel_result(title, "no_match", failed,
                          f"Smallest failing case, '{name}': expected {fmt(want)}, got {fmt(out)}. "
                          f"/ 最小的未通过用例 '{name}'：应为 {fmt(want)}，实得 {fmt(out)}。")
