r"""Exercise checkers of lesson 09 (normalisation in today's Transformers).

- :func:`check_qk_norm_attention`: causal attention with per-head QK-norm (RMSNorm over
  ``head_dim`` of q and of k, one gain vector shared by the heads, the 1/sqrt(d_h) scale kept);
- :func:`check_dyt_module`: a ``DyT`` module, :math:`\gamma \odot \tanh(\alpha x) + \beta`
  with one scalar :math:`\alpha` per layer.

Each returns a :class:`helpers.checks.CheckResult` with a bilingual message (English, then
Chinese) and, when the learner's output matches a known mistake, its key in ``mistake``.
The checkers never print, never raise on the learner's code (an exception in it is a
diagnosis) and leave the global random state unchanged (inputs come from
``torch.Generator`` objects; a learner's constructor runs under ``torch.random.fork_rng``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from .engine import NO_MATCH, CheckResult, case_numel, error_line, error_text, show_case, what_zh

__all__ = ["check_qk_norm_attention", "check_dyt_module", "qk_norm_attention_reference"]


def _err_text(e: Exception) -> str:
    return error_text(e) + error_line(e)


def _close(a: Tensor, b: Tensor, tol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=tol, atol=tol))


# --------------------------------------------------------------------------------------
# QK-norm attention
# --------------------------------------------------------------------------------------
def _rms(z: Tensor, dims, w: Tensor | None, eps: float, *, centre: bool = False,
         eps_outside: bool = False, l2: bool = False, one_plus: bool = False) -> Tensor:
    if centre:
        z = z - z.mean(dims, keepdim=True)
    if l2:  # F.normalize: unit L2 norm instead of unit root mean square
        z = z / z.norm(dim=dims, keepdim=True).clamp_min(1e-12)
    else:
        ms = z.pow(2).mean(dims, keepdim=True)
        z = z / (ms.sqrt() + eps) if eps_outside else z / (ms + eps).sqrt()
    return z if w is None else z * ((1 + w) if one_plus else w)


def _attend(q: Tensor, k: Tensor, v: Tensor, *, scale: bool = True, causal: bool = True,
            d_scale: int | None = None) -> Tensor:
    t = q.shape[-2]
    logits = q @ k.transpose(-2, -1)
    if scale:
        logits = logits / math.sqrt(d_scale or q.shape[-1])
    if causal:
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        logits = logits.masked_fill(mask, float("-inf"))
    return logits.softmax(-1) @ v


def qk_norm_attention_reference(q: Tensor, k: Tensor, v: Tensor, q_weight: Tensor,
                                k_weight: Tensor, eps: float) -> Tensor:
    r"""Causal attention with per-head QK-norm, for q, k, v of shape (B, h, T, d_h):
    :math:`\hat q = q / \sqrt{\mathrm{mean}_{d_h}(q^2) + \epsilon} \odot g_q` (same for k),
    :math:`\mathrm{softmax}(\hat q \hat k^\top / \sqrt{d_h} + M)\,v`, computed in float64
    with :func:`torch.nn.functional.rms_norm` and
    :func:`torch.nn.functional.scaled_dot_product_attention`."""
    f = torch.nn.functional
    dh = q.shape[-1]
    qn = f.rms_norm(q.double(), (dh,), q_weight.double(), eps)
    kn = f.rms_norm(k.double(), (dh,), k_weight.double(), eps)
    out = f.scaled_dot_product_attention(qn, kn, v.double(), is_causal=True)
    return out.to(q.dtype)


def _whole(z: Tensor, w: Tensor, eps: float) -> Tensor:
    """RMSNorm over all heads' channels of one token (OLMo 2's q_norm on the projection), the
    per-head gain repeated over the heads."""
    b, h, t, dh = z.shape
    flat = z.transpose(1, 2).reshape(b, t, h * dh)
    out = _rms(flat, -1, w.repeat(h), eps)
    return out.view(b, t, h, dh).transpose(1, 2)


_QK_MISTAKES: dict[str, tuple[str, str, Callable]] = {
    "whole_projection": (
        "q and k are normalised over all heads together (h * d_h channels, as OLMo 2 does on the "
        "projection), not per head over d_h: one head's logits are then bounded h times more loosely.",
        "q 和 k 是在所有头上一起归一化的（h * d_h 个通道，OLMo 2 对整个投影就是这样做的），而不是对每个头在 d_h 上"
        "分别归一化：这样每个头的 logit 上界会松 h 倍。",
        lambda q, k, v, wq, wk, eps: _attend(_whole(q, wq, eps), _whole(k, wk, eps), v)),
    "over_heads": (
        "the statistics are taken over the heads axis (dim 1 of (B, h, T, d_h)), not over d_h: "
        "heads are mixed and each head's q is not normalised.",
        "统计量是沿头的维度（(B, h, T, d_h) 的第 1 维）计算的，而不是沿 d_h：不同的头被混在一起，"
        "每个头的 q 并没有被归一化。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, 1, wq, eps), _rms(k, 1, wk, eps), v)),
    "over_time": (
        "the statistics are taken over the time axis (dim 2): the norm then depends on the other "
        "tokens, and on future ones, which leaks information through the causal mask.",
        "统计量是沿时间维（第 2 维）计算的：归一化结果依赖于其他 token，包括未来的 token，"
        "从而绕过了因果掩码泄露信息。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, 2, wq, eps), _rms(k, 2, wk, eps), v)),
    "no_scale": (
        "the 1/sqrt(d_h) scale was dropped: today's QK-norm (RMSNorm or LayerNorm with a gain) "
        "keeps it. (Henry et al. 2020 replace it by a learned scalar, a different method.)",
        "去掉了 1/sqrt(d_h) 缩放：今天的 QK-norm（带增益的 RMSNorm 或 LayerNorm）保留它。"
        "（Henry 等人 2020 用一个可学习的标量代替它，那是另一种方法。）",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps), _rms(k, -1, wk, eps), v,
                                             scale=False)),
    "only_q": (
        "only q is normalised; k must be normalised too (with its own gain), or the logits can "
        "still grow with k.",
        "只归一化了 q；k 也必须归一化（用它自己的增益），否则 logit 仍会随 k 增大。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps), k, v)),
    "no_gain": (
        "the learnable gains are missing: multiply the normalised q by q_weight and k by k_weight.",
        "缺少可学习的增益：归一化后的 q 要乘 q_weight，k 要乘 k_weight。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, None, eps), _rms(k, -1, None, eps), v)),
    "mean_subtracted": (
        "the mean is subtracted (a LayerNorm without bias): the exercise asks for RMSNorm, as in "
        "Qwen3 and Gemma 3.",
        "减去了均值（相当于不带偏置的 LayerNorm）：本题要求 RMSNorm，与 Qwen3 和 Gemma 3 相同。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps, centre=True),
                                             _rms(k, -1, wk, eps, centre=True), v)),
    "eps_outside_sqrt": (
        "eps is added outside the square root: x / (sqrt(mean(x^2)) + eps) instead of "
        "x / sqrt(mean(x^2) + eps).",
        "eps 加在了平方根外面：x / (sqrt(mean(x^2)) + eps)，应为 x / sqrt(mean(x^2) + eps)。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps, eps_outside=True),
                                             _rms(k, -1, wk, eps, eps_outside=True), v)),
    "l2_normalised": (
        "q and k are divided by their L2 norm (F.normalize): that gives them norm 1, RMSNorm gives "
        "them norm sqrt(d_h), so the logits come out d_h times smaller. Divide by "
        "sqrt(mean(q**2) + eps). (Unit-norm q and k with a learned scale instead of 1/sqrt(d_h) "
        "is Henry et al. 2020's QKNorm, a different method.)",
        "q 和 k 除以了它们的 L2 范数（F.normalize）：这样范数为 1，而 RMSNorm 让范数为 sqrt(d_h)，"
        "logit 因此小了 d_h 倍。应除以 sqrt(mean(q**2) + eps)。（单位范数的 q、k 配一个可学习的缩放"
        "代替 1/sqrt(d_h)，是 Henry 等人 2020 的 QKNorm，另一种方法。）",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps, l2=True), _rms(k, -1, wk, eps, l2=True), v)),
    "eps_missing": (
        "eps is left out: q / sqrt(mean(q**2)). RMSNorm adds eps inside the root, "
        "q / sqrt(mean(q**2) + eps); it matters for small q and k.",
        "漏掉了 eps：q / sqrt(mean(q**2))。RMSNorm 在根号内加 eps：q / sqrt(mean(q**2) + eps)；"
        "q、k 很小时差别明显。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, 0.0), _rms(k, -1, wk, 0.0), v)),
    "dmodel_scale": (
        "the logits are scaled by 1/sqrt(h * d_h) (the model width) instead of 1/sqrt(d_h): each "
        "head's dot product has d_h terms.",
        "logit 按 1/sqrt(h * d_h)（模型宽度）缩放了，应为 1/sqrt(d_h)：每个头的点积只有 d_h 项。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps), _rms(k, -1, wk, eps), v,
                                             d_scale=q.shape[1] * q.shape[-1])),
    "one_plus_gain": (
        "the gains are applied as (1 + w), Gemma's convention for a weight stored around 0. Here "
        "q_weight and k_weight are the gains themselves (as in Qwen3 and torch.nn.RMSNorm): "
        "multiply by them.",
        "增益写成了 (1 + w)，这是 Gemma 对初始为 0 的存储权重的约定。本题的 q_weight、k_weight 就是增益本身"
        "（与 Qwen3 和 torch.nn.RMSNorm 相同）：直接乘以它们。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps, one_plus=True),
                                             _rms(k, -1, wk, eps, one_plus=True), v)),
    "shared_gain": (
        "one gain is used for both q and k: q is multiplied by q_weight, k by k_weight.",
        "q 和 k 用了同一个增益：q 乘 q_weight，k 乘 k_weight。",
        lambda q, k, v, wq, wk, eps: [_attend(_rms(q, -1, wq, eps), _rms(k, -1, wq, eps), v),
                                      _attend(_rms(q, -1, wk, eps), _rms(k, -1, wk, eps), v)]),
    "float32_statistics": (
        "the result is right to about 1e-7 but not to float64's precision: the statistics (or the "
        "attention) were computed in float32 on float64 input. Compute in the input's dtype; cast "
        "to float32 only inputs of lower precision.",
        "结果准确到约 1e-7，但没有达到 float64 的精度：对 float64 输入，统计量（或注意力）是在 float32 下"
        "计算的。应在输入的 dtype 下计算；只有精度更低的输入才转为 float32。",
        None),
    "no_causal_mask": (
        "the causal mask is missing: position t must not attend to positions after t.",
        "缺少因果掩码：位置 t 不能关注 t 之后的位置。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps), _rms(k, -1, wk, eps), v,
                                             causal=False)),
    "v_normalised": (
        "v is normalised too: QK-norm touches only the query and the key.",
        "把 v 也归一化了：QK-norm 只作用于查询和键。",
        lambda q, k, v, wq, wk, eps: _attend(_rms(q, -1, wq, eps), _rms(k, -1, wk, eps),
                                             _rms(v, -1, None, eps))),
}


def _qk_cases() -> list[tuple[str, tuple]]:
    g = torch.Generator().manual_seed(9)
    cases = []
    for name, (b, h, t, dh), scale, eps, dtype in [
            ("B=2, h=4, T=5, d_h=8", (2, 4, 5, 8), 1.0, 1e-6, torch.float64),
            ("large q, k (logits would explode without the norm)", (1, 3, 6, 4), 30.0, 1e-6,
             torch.float64),
            ("small q, k where eps matters", (1, 2, 4, 4), 1e-3, 1e-5, torch.float64),
            ("float32, h=2", (2, 2, 7, 6), 2.0, 1e-6, torch.float32)]:
        def rnd(*shape, s=1.0, o=0.0):
            return (torch.randn(*shape, generator=g, dtype=torch.float64) * s + o).to(dtype)
        q = rnd(b, h, t, dh, s=scale, o=0.3 * scale)
        k = rnd(b, h, t, dh, s=scale, o=-0.2 * scale)
        v = rnd(b, h, t, dh)
        wq = rnd(dh, s=0.5, o=1.0)
        wk = rnd(dh, s=0.5, o=1.0)
        cases.append((name, (q, k, v, wq, wk, eps)))
    return cases


def _candidates(bad) -> list[Tensor]:
    return [t for t in (bad if isinstance(bad, (list, tuple)) else [bad]) if isinstance(t, Tensor)]


def check_qk_norm_attention(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(q, k, v, q_weight, k_weight, eps)``: q, k, v of shape (B, h, T, d_h),
    ``q_weight`` and ``k_weight`` of shape (d_h,) shared by the heads; it should return
    :func:`qk_norm_attention_reference` (causal attention on per-head RMSNorm'd q and k,
    scaled by 1/sqrt(d_h)), shape (B, h, T, d_h), in the input dtype (float64 for three
    cases, float32 for one). Recognises the mistakes of ``_QK_MISTAKES`` (norm over the
    whole projection, over heads, over time, no scale, a 1/sqrt(h d_h) scale, only q,
    shared, missing or (1 + w) gains (q's and k's gains swapped give the same logits: not a
    mistake of the output), mean subtracted, L2 ``F.normalize``, eps
    missing or outside the sqrt, no causal mask, v normalised, statistics in float32)."""
    title = "QK-norm attention"
    failures: list[tuple] = []  # (name, what, keys, args, ref, out)
    cases = _qk_cases()
    for name, args in cases:
        ref = qk_norm_attention_reference(*args)
        tol = 1e-4 if args[0].dtype == torch.float32 else 1e-8
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                out = fn(*(a.clone() if isinstance(a, Tensor) else a for a in args))
        except Exception as e:  # the learner's bug, reported
            failures.append((name, f"raised {_err_text(e)}", [], args, ref, None))
            continue
        if not isinstance(out, Tensor):
            failures.append((name, f"returned {type(out).__name__}, not a tensor", [], args, ref, None))
            continue
        if out.shape != ref.shape:
            failures.append((name, f"returned shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
                             [], args, ref, out))
            continue
        if _close(out, ref, tol):
            if out.dtype != ref.dtype:
                failures.append((name, f"returned dtype {out.dtype}, expected {ref.dtype}", [],
                                 args, ref, out))
            continue
        keys = []
        q64 = tuple(a.double() if isinstance(a, Tensor) else a for a in args)
        for key, (_, _, bad_fn) in _QK_MISTAKES.items():
            if bad_fn is None:
                continue
            if any(not _close(bad, ref.double(), tol) and _close(out, bad, tol)
                   for bad in _candidates(bad_fn(*q64))):
                keys.append(key)
        if not keys and args[0].dtype == torch.float64 and _close(out, ref, 1e-5):
            keys.append("float32_statistics")
        err = float((out.double() - ref.double()).abs().nan_to_num(float("inf")).max())
        failures.append((name, f"max abs error {err:.3g}", keys, args, ref, out))
    return _verdict(title, cases, failures, _QK_MISTAKES, ("q", "k", "v", "q_weight", "k_weight", "eps"))


# --------------------------------------------------------------------------------------
# DyT module
# --------------------------------------------------------------------------------------
def _dyt_ref(x: Tensor, alpha: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return torch.tanh(alpha.double() * x.double()) * w.double() + b.double()


def _ln(x: Tensor) -> Tensor:
    return torch.nn.functional.layer_norm(x, x.shape[-1:])


def _rmsn(x: Tensor) -> Tensor:
    return torch.nn.functional.rms_norm(x, x.shape[-1:], eps=1e-6)


_DYT_MISTAKES: dict[str, tuple[str, str, Callable | None]] = {
    "alpha_per_channel": (
        "alpha has one value per channel: DyT's alpha is one learnable scalar per layer, "
        "shape (1,) as in the authors' code, or () (gamma and beta are the per-channel parameters).",
        "alpha 每个通道一个值：DyT 的 alpha 是每层一个可学习的标量，形状为 (1,)（与作者代码相同）或 ()"
        "（按通道的参数是 gamma 和 beta）。",
        None),
    "wrong_init": (
        "the initial values are wrong: alpha starts at alpha_init_value, weight (gamma) at 1, "
        "bias (beta) at 0.",
        "初始值不对：alpha 初始为 alpha_init_value，weight（gamma）为 1，bias（beta）为 0。",
        None),
    "missing_parameter": (
        "a parameter is missing or misnamed: DyT has `alpha` (shape (1,) or ()), `weight` and "
        "`bias` (shape (normalized_shape,)), all nn.Parameter.",
        "缺少参数或参数名不对：DyT 有 `alpha`（形状 (1,) 或 ()）、`weight` 和 `bias`（形状为 "
        "(normalized_shape,)），都是 nn.Parameter。",
        None),
    "alpha_not_parameter": (
        "alpha is a plain tensor, a buffer or a number, not an nn.Parameter: it must be learned. "
        "self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value).",
        "alpha 是普通张量、缓冲区或数字，而不是 nn.Parameter：它必须可学习。"
        "self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)。",
        None),
    "alpha_not_used": (
        "the forward pass does not use the parameter alpha (it uses alpha_init_value, a constant): "
        "after training changes alpha the output does not follow. Use self.alpha in forward.",
        "前向计算没有用参数 alpha（用的是 alpha_init_value 这个常数）：训练改变 alpha 后输出不会随之变化。"
        "应在 forward 中使用 self.alpha。",
        lambda x, a, w, b: torch.tanh(0.7 * x) * w + b),
    "alpha_outside_tanh": (
        "alpha multiplies the tanh instead of its input: gamma * alpha * tanh(x) + beta.",
        "alpha 乘在了 tanh 外面：gamma * alpha * tanh(x) + beta，应乘在 tanh 的输入上。",
        lambda x, a, w, b: a * torch.tanh(x) * w + b),
    "affine_inside_tanh": (
        "gamma and/or beta are applied inside the tanh (e.g. tanh(alpha * (gamma * x + beta))); "
        "DyT squashes alpha * x first and applies the affine step after: gamma * tanh(alpha * x) + beta.",
        "gamma 和/或 beta 放在了 tanh 里面（例如 tanh(alpha * (gamma * x + beta))）；DyT 先压缩 alpha * x，"
        "之后才做仿射变换：gamma * tanh(alpha * x) + beta。",
        lambda x, a, w, b: [torch.tanh(a * (x * w + b)), torch.tanh(a * x * w + b),
                            torch.tanh(a * x * w) + b, torch.tanh(a * x + b) * w]),
    "no_bias": (
        "beta (bias) is not added.",
        "没有加上 beta（bias）。",
        lambda x, a, w, b: torch.tanh(a * x) * w),
    "normalises_first": (
        "the input is normalised (LayerNorm or RMSNorm) before the tanh: DyT replaces the norm, "
        "it computes no statistics at all.",
        "在 tanh 之前先做了归一化（LayerNorm 或 RMSNorm）：DyT 取代归一化层，根本不计算统计量。",
        lambda x, a, w, b: [torch.tanh(a * _ln(x)) * w + b, torch.tanh(a * _rmsn(x)) * w + b,
                            torch.tanh(a * _ln(x) * w + b), torch.tanh(a * (_ln(x) * w + b))]),
    "hard_clip": (
        "the input is clipped (hardtanh) instead of squashed by tanh.",
        "用了截断（hardtanh）而不是 tanh 的平滑压缩。",
        lambda x, a, w, b: torch.clamp(a * x, -1, 1) * w + b),
}


def check_dyt_module(cls: Callable[..., torch.nn.Module]) -> CheckResult:
    r"""Check a learner's class ``cls(normalized_shape, alpha_init_value=0.5)`` (the checker
    builds ``cls(6, alpha_init_value=0.7)`` and passes float64 inputs of shape (5, 6) and
    (2, 3, 6)): it should hold parameters ``alpha`` of shape (1,) as in the authors' code, or
    a 0-d scalar (initialised to ``alpha_init_value``), ``weight`` (ones) and ``bias`` (zeros)
    of shape ``(normalized_shape,)``, and compute
    :math:`\mathrm{weight} \odot \tanh(\alpha x) + \mathrm{bias}` over the last dim
    (Zhu et al. 2025; compared in float64 with that formula after the parameters are set to
    non-trivial values). Recognises ``_DYT_MISTAKES``."""
    title = "DyT"
    cases: list[tuple[str, tuple]] = []
    failures: list[tuple] = []
    d = 6
    # construction and parameters
    try:
        with torch.random.fork_rng(devices=[]):
            m = cls(d, alpha_init_value=0.7)
    except Exception as e:
        return _verdict(title, [("construct", ())],
                        [("construct", f"cls({d}, alpha_init_value=0.7) raised {_err_text(e)}", [],
                          (), None, None)], _DYT_MISTAKES)
    params = dict(m.named_parameters()) if isinstance(m, torch.nn.Module) else {}
    cases.append(("parameters: names and shapes", ()))
    want = {"alpha": (1,), "weight": (d,), "bias": (d,)}
    missing = [n for n in want if n not in params]
    if missing:
        key = ("alpha_not_parameter" if missing == ["alpha"] and getattr(m, "alpha", None) is not None
               else "missing_parameter")
        failures.append(("parameters: names and shapes", f"missing parameter(s) {missing}", [key],
                         (), None, None))
        return _verdict(title, cases, failures, _DYT_MISTAKES)
    shapes = {n: tuple(params[n].shape) for n in want}
    if shapes["alpha"] == ():  # a 0-d scalar is one scalar per layer too
        shapes["alpha"] = (1,)
    if shapes != want:
        key = ["alpha_per_channel"] if shapes["alpha"] == (d,) else ["missing_parameter"]
        failures.append(("parameters: names and shapes", f"shapes {shapes}, expected {want}", key,
                         (), None, None))
        return _verdict(title, cases, failures, _DYT_MISTAKES)
    cases.append(("initial values", ()))
    with torch.no_grad():
        ok = (torch.allclose(params["alpha"].double().reshape(1), torch.full((1,), 0.7, dtype=torch.float64))
              and bool((params["weight"] == 1).all()) and bool((params["bias"] == 0).all()))
    if not ok:
        failures.append(("initial values",
                         f"alpha {params['alpha'].detach().flatten().tolist()}, weight starts "
                         f"{params['weight'].detach()[:3].tolist()}..., bias starts "
                         f"{params['bias'].detach()[:3].tolist()}...", ["wrong_init"], (), None, None))
    # forward with non-trivial parameters
    g = torch.Generator().manual_seed(5)
    m = m.double()
    for name, scale, alpha in [("x ~ N(0, 1), alpha 0.7", 1.0, 0.7),
                               ("large x (the tails saturate), alpha 0.5", 8.0, 0.5),
                               ("(B, T, d) input, alpha 1.3", 2.0, 1.3)]:
        shape = (2, 3, d) if name.startswith("(B") else (5, d)
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * scale + 0.3
        w = torch.randn(d, generator=g, dtype=torch.float64) * 0.5 + 1.0
        b = torch.randn(d, generator=g, dtype=torch.float64) * 0.5
        a = torch.tensor([alpha], dtype=torch.float64)
        cases.append((name, (x,)))
        ref = _dyt_ref(x, a, w, b)
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                params["alpha"].copy_(a.reshape(params["alpha"].shape))
                params["weight"].copy_(w)
                params["bias"].copy_(b)
                out = m(x.clone())
        except Exception as e:
            failures.append((name, f"raised {_err_text(e)}", [], (x,), ref, None))
            continue
        if not isinstance(out, Tensor) or out.shape != ref.shape:
            what = (f"returned shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
                    if isinstance(out, Tensor) else f"returned {type(out).__name__}, not a tensor")
            failures.append((name, what, [], (x,), ref, out if isinstance(out, Tensor) else None))
            continue
        if _close(out, ref, 1e-9):
            continue
        keys = [key for key, (_, _, f) in _DYT_MISTAKES.items() if f is not None
                and any(not _close(bad, ref, 1e-9) and _close(out, bad, 1e-9)
                        for bad in _candidates(f(x, a, w, b)))]
        err = float((out.double() - ref).abs().nan_to_num(float("inf")).max())
        failures.append((name, f"max abs error {err:.3g}", keys, (x,), ref, out))
    return _verdict(title, cases, failures, _DYT_MISTAKES, ("x",))


# --------------------------------------------------------------------------------------
# the verdict
# --------------------------------------------------------------------------------------
def _zh(what: str) -> str:
    for en, zh in (("missing parameter(s)", "缺少参数"), ("shapes {", "形状为 {"),
                   (", expected {", "，应为 {"), ("weight starts", "weight 开头为"),
                   ("bias starts", "bias 开头为")):
        if not what.startswith("raised") and " raised " not in what:
            what = what.replace(en, zh)
    if " raised " in what:  # cls(...) raised <torch's text, verbatim>
        call, err = what.split(" raised ", 1)
        return f"{call} {what_zh('raised ' + err)}"
    return what_zh(what)


def _verdict(title: str, cases, failures, mistakes, names=()) -> CheckResult:
    if not failures:
        return CheckResult(True, f"✔ {title}: all {len(cases)} cases pass. / 全部 {len(cases)} 个用例通过。")
    counts: dict[str, int] = {}
    for f in failures:
        for k in f[2]:
            counts[k] = counts.get(k, 0) + 1
    found = sorted(counts, key=lambda k: -counts[k])
    key = found[0] if found else None
    name, what, *_ = next(f for f in failures if key is None or key in f[2])
    failed = [f[0] for f in failures]
    head = f"✘ {title}: {len(failures)} of {len(cases)} cases fail (first: '{name}', {what})."
    head_zh = f"✘ {title}：{len(failures)}/{len(cases)} 个用例未通过（首个：'{name}'，{_zh(what)}）。"
    if key is None:
        shown = [f for f in failures if f[4] is not None]
        if not shown:
            return CheckResult(False, f"{head}\n{NO_MATCH[0]}\n{head_zh}\n{NO_MATCH[1]}", None, failed)
        small = min(shown, key=lambda f: case_numel(f[3]))
        en, zh = show_case(small[0], small[3], names, small[4], small[5])
        return CheckResult(False, "\n".join([head, NO_MATCH[0], en, head_zh, NO_MATCH[1], zh]),
                           None, failed)
    en = [f"Likely mistake: {mistakes[key][0]}"] + [f"Also: {mistakes[k][0]}" for k in found[1:]]
    zh = [f"可能的错误：{mistakes[key][1]}"] + [f"另外：{mistakes[k][1]}" for k in found[1:]]
    return CheckResult(False, "\n".join([head, *en, head_zh, *zh]), key, failed)
