r"""Exercise checkers: run a learner's normalisation function on cases chosen to expose the
mistakes that circulate, and say *which* mistake it made.

Each checker compares the learner's output with ``torch.nn.functional`` (the reference) on
every case. When an output is wrong, it is compared with a catalogue of known-buggy
versions (unbiased variance, eps outside the square root, wrong reduction axes, missing
``keepdim``, ...); the mistake whose output the learner's matches is named, in English and
Chinese. The checkers never raise: an exception in the learner's code, a wrong shape or a
wrong dtype becomes a failed result with an explanation.

Usage::

    from helpers.checks import check_layer_norm

    def my_ln(x, weight, bias, eps):
        xf = x.float()
        mu = xf.mean(-1, keepdim=True)
        var = xf.var(-1, keepdim=True, unbiased=False)
        return ((xf - mu) / (var + eps).sqrt() * weight + bias).to(x.dtype)

    check_layer_norm(my_ln)   # ✔ layer_norm: all 7 cases match torch. / ...
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["CheckResult", "check_layer_norm", "check_batch_norm", "check_rms_norm",
           "check_group_norm"]


# --------------------------------------------------------------------------------------
# the result object
# --------------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """Outcome of a checker.

    Attributes:
        passed: True when every case matched the reference.
        message: what went right or wrong, in English then Chinese.
        mistake: a short key naming the recognised mistake (``"unbiased_variance"``, ...),
            ``None`` when passed or when no known mistake matched.
        failed_cases: names of the cases that failed.
    """

    passed: bool
    message: str
    mistake: str | None = None
    failed_cases: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:  # notebooks display the message itself
        return self.message

    def __bool__(self) -> bool:
        return self.passed


@dataclass(frozen=True)
class Mistake:
    """A known mistake: its key, explanation in both languages, and a buggy implementation
    with the learner's call signature (returning ``None`` where it does not apply)."""

    key: str
    en: str
    zh: str
    fn: Callable[..., Tensor | None] | None = None


@dataclass(frozen=True)
class Case:
    """One input to run: ``args`` in the learner's call order, a description, tolerances,
    and the mistake to suggest when this case alone fails and nothing else matched."""

    name: str
    args: tuple
    rtol: float = 1e-4
    atol: float = 1e-4
    hint: str | None = None


# --------------------------------------------------------------------------------------
# the engine shared by the four checkers
# --------------------------------------------------------------------------------------
def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, Tensor) else a for a in args)


def _close(a: Tensor, b: Tensor, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    a64, b64 = a.detach().double(), b.detach().double()
    return bool(torch.isclose(a64, b64, rtol=rtol, atol=atol).all())


def _max_err(a: Tensor, b: Tensor) -> float:
    d = (a.detach().double() - b.detach().double()).abs()
    d = torch.nan_to_num(d, nan=float("inf"))
    return float(d.max()) if d.numel() else 0.0


def what_zh(what: str) -> str:
    """The Chinese for the short descriptions of what went wrong in one case."""
    for en, zh in (("max abs error", "最大绝对误差"), ("returned shape", "返回的形状为"),
                   ("expected", "应为"), ("returned dtype", "返回的 dtype 为"),
                   ("returned", "返回了"), ("raised", "抛出异常"), (", not a tensor", "，不是张量")):
        what = what.replace(en, zh)
    return what


def _run(title: str, fn: Callable, cases: Sequence[Case], reference: Callable,
         mistakes: Sequence[Mistake]) -> CheckResult:
    by_key = {k: Mistake(k, *texts) for k, texts in _COMMON.items()}
    by_key.update({m.key: m for m in mistakes})
    failures: list[tuple[Case, str, list[str]]] = []  # (case, what happened, matching keys)
    for case in cases:
        ref = reference(*case.args)
        try:
            with torch.no_grad():
                out = fn(*_clone(case.args))
        except Exception as e:  # the learner's bug, reported, never raised
            text = f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
            keys = ["missing_keepdim"] if "must match the size of tensor" in text else []
            where = traceback.extract_tb(e.__traceback__)[-1]
            failures.append((case, f"raised {text} (line {where.lineno})", keys))
            continue
        if not isinstance(out, Tensor):
            failures.append((case, f"returned {type(out).__name__}, not a tensor", []))
            continue
        if out.shape != ref.shape:
            keys = ["missing_keepdim"] if out.dim() != ref.dim() else []
            failures.append((case, f"returned shape {tuple(out.shape)}, expected "
                                   f"{tuple(ref.shape)}", keys))
            continue
        close = _close(out, ref, case.rtol, case.atol)
        if out.dtype != ref.dtype and close:
            failures.append((case, f"returned dtype {out.dtype}, expected {ref.dtype}",
                             ["wrong_dtype"]))
            continue
        if close:
            continue
        keys = []
        for m in mistakes:
            if m.fn is None:
                continue
            try:
                bad = m.fn(*_clone(case.args))
            except Exception:
                bad = None
            # a mistake counts only where it changes the result and the learner's output follows it
            if (bad is not None and not _close(bad, ref, case.rtol, case.atol)
                    and _close(out, bad, case.rtol, case.atol)):
                keys.append(m.key)
        if not keys and case.hint:
            keys = [case.hint]
        failures.append((case, f"max abs error {_max_err(out, ref):.3g}", keys))

    if not failures:
        return CheckResult(True, f"✔ {title}: all {len(cases)} cases match torch. "
                                 f"/ 全部 {len(cases)} 个用例与 torch 一致。")

    # the mistakes found, the one that explains the most failing cases first
    counts: dict[str, int] = {}
    for _, _, keys in failures:
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    found = sorted(counts, key=lambda k: -counts[k])  # stable: ties keep case order
    key = found[0] if found else None
    case, what, _ = next(f for f in failures if key is None or key in f[2])
    names = [f[0].name for f in failures]
    head = (f"✘ {title}: {len(failures)} of {len(cases)} cases differ from torch "
            f"(first: '{case.name}', {what}).")
    head_zh = (f"✘ {title}：{len(failures)}/{len(cases)} 个用例与 torch 不一致"
               f"（首个：'{case.name}'，{what_zh(what)}）。")
    if key is None:
        body = ("No known mistake matches; print your output beside torch's on that case. "
                "/ 没有匹配到已知错误；请在该用例上把你的输出与 torch 的输出并排打印比较。")
        return CheckResult(False, f"{head}\n{body}\n{head_zh}", None, names)
    en = [f"Likely mistake: {by_key[key].en}"] + [f"Also: {by_key[k].en}" for k in found[1:]]
    zh = [f"可能的错误：{by_key[key].zh}"] + [f"另外：{by_key[k].zh}" for k in found[1:]]
    return CheckResult(False, "\n".join([head, *en, head_zh, *zh]), key, names)


# --------------------------------------------------------------------------------------
# building blocks for the buggy versions
# --------------------------------------------------------------------------------------
def _stats(x: Tensor, dims, unbiased: bool = False):
    return x.mean(dims, keepdim=True), x.var(dims, keepdim=True, correction=int(unbiased))


def _mv_norm(x, dims, eps, *, unbiased=False, eps_outside=False, one_pass=False,
             center=True, keepdim=True, in_dtype=False):
    """A mean/variance norm with switches for each mistake; float64 unless ``in_dtype``."""
    x = x if in_dtype else x.double()
    if one_pass:
        mean = x.mean(dims, keepdim=True)
        var = (x * x).mean(dims, keepdim=True) - mean * mean
    else:
        mean, var = _stats(x, dims, unbiased)
    if not keepdim:  # keepdim forgotten: the statistics broadcast against the last dims
        mean, var = mean.squeeze(tuple(dims) if isinstance(dims, (list, tuple)) else dims), \
            var.squeeze(tuple(dims) if isinstance(dims, (list, tuple)) else dims)
    xc = x - mean if center else x
    return xc / (var.sqrt() + eps) if eps_outside else xc / (var + eps).sqrt()


def _cast_like(y: Tensor | None, x: Tensor) -> Tensor | None:
    return None if y is None else y.to(x.dtype)


def _last(x: Tensor) -> list[int]:
    return [x.dim() - 1]


def _affine_last(y, w, b):
    y = y * w.double() if w is not None else y
    return y + b.double() if b is not None else y


def _ch(p: Tensor, x: Tensor) -> Tensor:
    """A per-channel vector shaped to broadcast against (N, C, *) input."""
    return p.reshape([1, x.shape[1]] + [1] * (x.dim() - 2))


def _affine_ch(y, x, w, b):
    y = y * _ch(w, x).double() if w is not None else y
    return y + _ch(b, x).double() if b is not None else y


def _only_if(cond: bool, thunk: Callable[[], Tensor]) -> Tensor | None:
    try:
        return thunk() if cond else None
    except RuntimeError:  # the buggy computation does not broadcast on this shape
        return None


# float16 values are 0.25 apart in [256, 512): a mean near the midpoint 300.125 rounds by
# about 0.125 when kept in float16, an error of about 0.1 standard deviations in x_hat.
_HALF_OFFSET = 300.125

_HALF_TEXT = ("the float16 input was computed in float16. Upcast to float32 for the statistics "
              "(x.float()), then cast the result back with .to(x.dtype), as PyTorch's kernels do.",
              "float16 输入直接用 float16 计算了。应先转为 float32 计算统计量（x.float()），"
              "再用 .to(x.dtype) 转回输入的精度，PyTorch 的内核就是这样做的。")

_COMMON = {
    "unbiased_variance": (
        "unbiased variance (dividing by n-1). Normalisation layers use the biased variance: "
        "x.var(..., unbiased=False) or ((x - mean)**2).mean(...).",
        "使用了无偏方差（除以 n-1）。归一化层用的是有偏方差："
        "x.var(..., unbiased=False) 或 ((x - mean)**2).mean(...)。"),
    "eps_outside_sqrt": (
        "eps outside the square root: dividing by (std + eps), or by (rms + eps) for RMSNorm. "
        "PyTorch divides by sqrt(var + eps) (sqrt(mean(x**2) + eps) for RMSNorm); the two "
        "differ greatly when the inputs are small.",
        "eps 放在了平方根外面：除以 (std + eps)，对 RMSNorm 则是 (rms + eps)。PyTorch 用的是 "
        "sqrt(var + eps)（RMSNorm 为 sqrt(mean(x**2) + eps)），输入很小时两者相差很大。"),
    "one_pass_variance": (
        "the one-pass variance E[x²] - E[x]², which cancels catastrophically in float32 when "
        "the mean is large compared with the spread. Subtract the mean first, then average "
        "the squares.",
        "使用了单遍方差公式 E[x²] - E[x]²：当均值远大于离散程度时，float32 下会发生灾难性相消。"
        "应先减去均值，再求平方的均值。"),
    "missing_keepdim": (
        "a reduction without keepdim=True: the statistics lose their reduced dims and then "
        "broadcast against the wrong axis (or fail to broadcast). Use mean(dim, keepdim=True).",
        "求均值/方差时没有 keepdim=True：统计量丢掉了被归约的维度，随后沿错误的轴广播"
        "（或无法广播）。请使用 mean(dim, keepdim=True)。"),
    "wrong_dtype": (
        "the output dtype differs from the input's. Return the input's dtype "
        "(compute in float32, then .to(x.dtype)).",
        "输出的数据类型与输入不同。应返回输入的 dtype（用 float32 计算后 .to(x.dtype)）。"),
    "half_not_float32": _HALF_TEXT,
    "affine_missing": (
        "weight (gamma) or bias (beta) not applied, or applied in the wrong order: "
        "y = x_hat * weight + bias.",
        "没有乘 weight（gamma）或没有加 bias（beta），或顺序错了：y = x_hat * weight + bias。"),
}


def _mistakes(keys_and_fns: dict[str, Callable | None], extra: dict[str, tuple] = {}) -> list:
    texts = {**_COMMON, **extra}
    return [Mistake(k, texts[k][0], texts[k][1], f) for k, f in keys_and_fns.items()]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, g, scale=1.0, offset=0.0, dtype=torch.float32):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)


def _params(n, g, dtype=torch.float32, shape=None):
    shape = shape or (n,)
    w = (torch.rand(*shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    b = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) * 0.5
    return w, b


# --------------------------------------------------------------------------------------
# LayerNorm
# --------------------------------------------------------------------------------------
def check_layer_norm(fn: Callable[[Tensor, Tensor, Tensor, float], Tensor]) -> CheckResult:
    r"""Check ``fn(x, weight, bias, eps)``: LayerNorm over the last dim of ``x``.

    Expected: ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance over
    the last dim, computed in float32 for float16 input and returned in the input dtype.
    Cases: (N, d) and (B, T, d) inputs, d = 4 (the unbiased variance is off by
    sqrt(4/3)), a square (6, 6) input where a missing ``keepdim`` still broadcasts, tiny
    inputs (eps placement), a large offset (one-pass variance), float16 input.
    """
    g = _gen(0)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4):
        w, b = _params(x.shape[-1], g, x.dtype)
        cases.append(Case(name, (x, w, b, 1e-5), rtol, atol, hint))

    add("(N, d) = (4, 8)", _randn(4, 8, g=g))
    add("(B, T, d) = (2, 3, 4), small d", _randn(2, 3, 4, g=g, offset=1.0))
    add("square (6, 6)", _randn(6, 6, g=g, offset=0.5))
    add("tiny scale, x ~ 1e-3", _randn(3, 16, g=g, scale=1e-3), atol=1e-3)
    add("large offset, x = 1e4 + N(0, 1)", _randn(4, 64, g=g, offset=1e4), hint="one_pass_variance",
        atol=1e-2, rtol=1e-2)
    add("(N, C, H, W) = (2, 3, 4, 5), last dim only", _randn(2, 3, 4, 5, g=g))
    add("float16, x = 300 + N(0, 1)", _randn(4, 256, g=g, offset=_HALF_OFFSET, dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2)

    def ref(x, w, b, eps):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps)

    def variant(**kw):
        return lambda x, w, b, eps: _cast_like(_affine_last(_mv_norm(x, _last(x), eps, **kw), w, b), x)

    mistakes = _mistakes({
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "mean_not_subtracted": lambda x, w, b, eps: _cast_like(_affine_last(
            x.double() / (x.double().square().mean(-1, keepdim=True) + eps).sqrt(), w, b), x),
        "wrong_axes_time": lambda x, w, b, eps: _only_if(x.dim() >= 3, lambda: _cast_like(
            _affine_last(_mv_norm(x, [-2, -1], eps), w, b), x)),
        "wrong_axes_batch": lambda x, w, b, eps: _cast_like(
            _affine_last(_mv_norm(x, [0], eps), w, b), x),
        "missing_keepdim": lambda x, w, b, eps: _only_if(x.dim() == 2 and x.shape[0] == x.shape[1],
            lambda: _cast_like(_affine_last(_mv_norm(x, _last(x), eps, keepdim=False), w, b), x)),
        "one_pass_variance": lambda x, w, b, eps: _only_if(x.dtype == torch.float32, lambda:
            _affine_last(_mv_norm(x, _last(x), eps, one_pass=True, in_dtype=True).double(), w, b).float()),
        "half_not_float32": lambda x, w, b, eps: _only_if(x.dtype == torch.float16, lambda:
            _mv_norm(x, _last(x), eps, in_dtype=True) * w + b),
        "affine_missing": lambda x, w, b, eps: _cast_like(_mv_norm(x, _last(x), eps), x),
    }, extra={
        "mean_not_subtracted": (
            "the mean is not subtracted (that is RMSNorm, not LayerNorm): LayerNorm centres "
            "each row first, x - x.mean(-1, keepdim=True).",
            "没有减去均值（那是 RMSNorm，不是 LayerNorm）：LayerNorm 要先中心化每一行，"
            "x - x.mean(-1, keepdim=True)。"),
        "wrong_axes_time": (
            "statistics over the last two dims (time and features) of a (B, T, d) input: that "
            "mixes time steps, like LayerNorm([T, d]). A token is normalised over its own d "
            "features: reduce over dim=-1 only.",
            "在 (B, T, d) 输入的最后两维（时间和特征）上求统计量，把不同时间步混在了一起，"
            "相当于 LayerNorm([T, d])。每个 token 只应在自己的 d 个特征上归一化：只在 dim=-1 上归约。"),
        "wrong_axes_batch": (
            "statistics over the batch dim (that is BatchNorm's axis). LayerNorm reduces over "
            "the features of each sample: dim=-1.",
            "在 batch 维上求统计量（那是 BatchNorm 的轴）。LayerNorm 在每个样本自己的特征上归约：dim=-1。"),
    })
    return _run("layer_norm", fn, cases, ref, mistakes)


# --------------------------------------------------------------------------------------
# BatchNorm (training mode)
# --------------------------------------------------------------------------------------
def _bn_dims(x: Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


def check_batch_norm(fn: Callable[[Tensor, Tensor, Tensor, float], Tensor]) -> CheckResult:
    r"""Check ``fn(x, weight, bias, eps)``: training-mode BatchNorm of (N, C) or (N, C, L, ...)
    input, returning the output.

    Expected: per-channel statistics over every dim but 1 (batch and spatial), biased
    variance, ``sqrt(var + eps)``, per-channel ``weight``/``bias``; float32 math for
    float16 input. Cases: (N, C), (N, C, L) with L = C (a missing ``keepdim`` broadcasts),
    (N, C, H, W), N = 2 (the unbiased variance is off by sqrt(2) in (N, C)), tiny inputs,
    a large offset, float16.
    """
    g = _gen(1)
    cases = []

    def add(name, x, hint=None, rtol=1e-4, atol=1e-4):
        w, b = _params(x.shape[1], g, x.dtype)
        cases.append(Case(name, (x, w, b, 1e-5), rtol, atol, hint))

    add("(N, C) = (16, 3)", _randn(16, 3, g=g, offset=1.0))
    add("(N, C) = (2, 4), tiny batch", _randn(2, 4, g=g))
    add("(N, C, L) = (4, 3, 3), L = C", _randn(4, 3, 3, g=g, offset=0.5))
    add("(N, C, L) = (2, 3, 5)", _randn(2, 3, 5, g=g))
    add("(N, C, H, W) = (2, 3, 4, 5)", _randn(2, 3, 4, 5, g=g, offset=-1.0))
    add("tiny scale, x ~ 1e-3", _randn(8, 4, 6, g=g, scale=1e-3), atol=1e-3)
    add("large offset, x = 1e4 + N(0, 1)", _randn(64, 2, 8, g=g, offset=1e4),
        hint="one_pass_variance", rtol=1e-2, atol=1e-2)
    # float16 activations with float32 weight and bias, as in mixed-precision training.
    # (With float16 parameters too, torch's own CPU kernel rounds the batch mean to float16.)
    x16 = _randn(64, 2, 16, g=g, offset=_HALF_OFFSET, dtype=torch.float16)
    cases.append(Case("float16 input, float32 weight/bias, x = 300 + N(0, 1)",
                      (x16, *_params(2, g), 1e-5), 1e-2, 2e-2, "half_not_float32"))

    def ref(x, w, b, eps):
        return F.batch_norm(x, None, None, w, b, training=True, eps=eps)

    def variant(dims_fn=_bn_dims, **kw):
        return lambda x, w, b, eps: _cast_like(_affine_ch(_mv_norm(x, dims_fn(x), eps, **kw),
                                                          x, w, b), x)

    mistakes = _mistakes({
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "forgot_spatial_dims": lambda x, w, b, eps: _only_if(x.dim() > 2,
            lambda: variant(lambda t: [0])(x, w, b, eps)),
        "per_sample_statistics": variant(lambda t: list(range(1, t.dim()))),
        "missing_keepdim": lambda x, w, b, eps: _only_if(x.dim() > 2, lambda: _cast_like(
            _affine_ch(_mv_norm(x, _bn_dims(x), eps, keepdim=False), x, w, b), x)),
        "one_pass_variance": lambda x, w, b, eps: _only_if(x.dtype == torch.float32, lambda:
            _affine_ch(_mv_norm(x, _bn_dims(x), eps, one_pass=True, in_dtype=True).double(),
                       x, w, b).float()),
        "half_not_float32": lambda x, w, b, eps: _only_if(x.dtype == torch.float16, lambda:
            _mv_norm(x, _bn_dims(x), eps, in_dtype=True) * _ch(w, x) + _ch(b, x)),
        "affine_missing": lambda x, w, b, eps: _cast_like(_mv_norm(x, _bn_dims(x), eps), x),
    }, extra={
        "forgot_spatial_dims": (
            "statistics over the batch dim only: for (N, C, L, ...) input BatchNorm reduces "
            "over N and every spatial dim, i.e. dim=(0, 2, 3, ...), one mean per channel.",
            "只在 batch 维上求统计量：对 (N, C, L, ...) 输入，BatchNorm 要在 N 和所有空间维上归约，"
            "即 dim=(0, 2, 3, ...)，每个通道一个均值。"),
        "per_sample_statistics": (
            "statistics per sample (over channels and positions): that is LayerNorm. "
            "BatchNorm shares statistics across the batch, per channel: dim=(0, 2, ...).",
            "按样本求统计量（在通道和位置上归约）：那是 LayerNorm。BatchNorm 是每个通道在整个 batch 上"
            "共享统计量：dim=(0, 2, ...)。"),
    })
    return _run("batch_norm", fn, cases, ref, mistakes)


# --------------------------------------------------------------------------------------
# RMSNorm
# --------------------------------------------------------------------------------------
def check_rms_norm(fn: Callable[[Tensor, Tensor, float], Tensor]) -> CheckResult:
    r"""Check ``fn(x, weight, eps)``: RMSNorm over the last dim of ``x``.

    Expected: ``x / sqrt(mean(x**2) + eps) * weight`` (eps inside the square root, no mean
    subtracted, no bias), float32 math for float16 input. Cases include inputs with a
    non-zero mean (subtracting it is a mistake), tiny inputs (eps placement), (B, T, d),
    a square input (missing ``keepdim``) and float16 values whose squares overflow float16.
    """
    g = _gen(2)
    cases = []

    def add(name, x, eps=1e-6, hint=None, rtol=1e-4, atol=1e-4):
        w, _ = _params(x.shape[-1], g, x.dtype)
        cases.append(Case(name, (x, w, eps), rtol, atol, hint))

    add("(N, d) = (4, 8), mean 2", _randn(4, 8, g=g, offset=2.0))
    add("(B, T, d) = (2, 3, 4)", _randn(2, 3, 4, g=g, offset=1.0))
    add("square (6, 6)", _randn(6, 6, g=g, offset=0.5))
    add("tiny scale, x ~ 1e-3, eps = 1e-5", _randn(3, 16, g=g, scale=1e-3), eps=1e-5, atol=1e-3)
    add("float16, x = 300 + N(0, 1)", _randn(4, 64, g=g, offset=_HALF_OFFSET, dtype=torch.float16),
        hint="half_not_float32", rtol=1e-2, atol=2e-2)

    def ref(x, w, eps):
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    def rms(x, dims, eps, *, outside=False, keepdim=True, in_dtype=False):
        x = x if in_dtype else x.double()
        ms = x.square().mean(dims, keepdim=True)
        if not keepdim:
            ms = ms.squeeze(dims[0])
        return x / (ms.sqrt() + eps) if outside else x / (ms + eps).sqrt()

    def lastw(y, x, w):
        return _cast_like(y * w.double(), x)

    mistakes = _mistakes({
        "mean_subtracted": lambda x, w, eps: lastw(_mv_norm(x, _last(x), eps), x, w),
        "eps_outside_sqrt": lambda x, w, eps: lastw(rms(x, _last(x), eps, outside=True), x, w),
        "wrong_axes_time": lambda x, w, eps: _only_if(x.dim() >= 3, lambda: lastw(
            rms(x, [-2, -1], eps), x, w)),
        "missing_keepdim": lambda x, w, eps: _only_if(x.dim() == 2 and x.shape[0] == x.shape[1],
            lambda: lastw(rms(x, _last(x), eps, keepdim=False), x, w)),
        "no_gain": lambda x, w, eps: _cast_like(rms(x, _last(x), eps), x),
        "half_not_float32": lambda x, w, eps: _only_if(x.dtype == torch.float16, lambda:
            rms(x, _last(x), eps, in_dtype=True) * w),
    }, extra={
        "mean_subtracted": (
            "the mean is subtracted (that is LayerNorm). RMSNorm divides x itself by "
            "sqrt(mean(x**2) + eps): no centring.",
            "减去了均值（那是 LayerNorm）。RMSNorm 直接用 x 除以 sqrt(mean(x**2) + eps)，不做中心化。"),
        "wrong_axes_time": (
            "statistics over the last two dims of a (B, T, d) input, mixing time steps; reduce "
            "over dim=-1 only.",
            "在 (B, T, d) 输入的最后两维上求统计量，混合了不同时间步；只应在 dim=-1 上归约。"),
        "no_gain": (
            "the learnable gain (weight) is not applied. RMSNorm has a learnable per-feature "
            "gain g (and no bias): y = x / rms * weight.",
            "没有乘可学习的增益 weight。RMSNorm 有逐特征的可学习增益 g（没有偏置）：y = x / rms * weight。"),
        "half_not_float32": (
            "the float16 input was computed in float16: x**2 overflows float16 (max 65504) for "
            "|x| > 256. Compute in float32 (x.float()) and cast back with .to(x.dtype).",
            "float16 输入直接用 float16 计算了：|x| > 256 时 x**2 超出 float16 的范围（最大 65504）。"
            "应转为 float32 计算（x.float()），再用 .to(x.dtype) 转回。"),
    })
    return _run("rms_norm", fn, cases, ref, mistakes)


# --------------------------------------------------------------------------------------
# GroupNorm
# --------------------------------------------------------------------------------------
def check_group_norm(fn: Callable[[Tensor, int, Tensor, Tensor, float], Tensor]) -> CheckResult:
    r"""Check ``fn(x, num_groups, weight, bias, eps)``: GroupNorm of (N, C, \*) input.

    Expected: the C channels split into ``num_groups`` contiguous groups of C/G channels,
    statistics per sample and group over the group's channels and all spatial positions,
    biased variance, per-channel ``weight``/``bias``. Cases separate G groups from
    "G channels per group", contiguous from interleaved grouping, and include G = 1
    (LayerNorm-like), G = C (InstanceNorm-like), 3-D, 4-D and float16 input.
    """
    g = _gen(3)
    cases = []

    def add(name, x, groups, hint=None, rtol=1e-4, atol=1e-4):
        w, b = _params(x.shape[1], g, x.dtype)
        cases.append(Case(name, (x, groups, w, b, 1e-5), rtol, atol, hint))

    add("(N, C, H, W) = (2, 8, 3, 3), G = 2", _randn(2, 8, 3, 3, g=g, offset=0.5), 2)
    add("(N, C, L) = (2, 6, 5), G = 3", _randn(2, 6, 5, g=g), 3)
    add("G = 1 (like LayerNorm)", _randn(2, 4, 3, 3, g=g, offset=1.0), 1)
    add("G = C (like InstanceNorm)", _randn(2, 4, 3, 3, g=g, offset=-1.0), 4)
    add("(N, C, H, W) = (1, 4, 2, 2), G = 2, few values", _randn(1, 4, 2, 2, g=g), 2)
    add("tiny scale, x ~ 1e-3", _randn(2, 4, 4, 4, g=g, scale=1e-3), 2, atol=1e-3)
    add("float16, x = 300 + N(0, 1)", _randn(2, 4, 8, 8, g=g, offset=_HALF_OFFSET, dtype=torch.float16),
        2, hint="half_not_float32", rtol=1e-2, atol=2e-2)

    def ref(x, groups, w, b, eps):
        return F.group_norm(x, groups, w, b, eps)

    def grouped(x, groups, eps, *, interleave=False, spatial=True, **kw):
        n, c = x.shape[:2]
        if interleave:  # channel c goes to group c % G
            xs = x.double().reshape(n, c // groups, groups, -1).transpose(1, 2)
            y = _mv_norm(xs, [2, 3], eps, **kw).transpose(1, 2)
            return y.reshape(x.shape)
        if not spatial:  # statistics over the group's channels at each position separately
            xs = x.double().reshape(n, groups, c // groups, -1)
            return _mv_norm(xs, [2], eps, **kw).reshape(x.shape)
        xs = x.double().reshape(n, groups, -1)
        return _mv_norm(xs, [2], eps, **kw).reshape(x.shape)

    def variant(**kw):
        return lambda x, G, w, b, eps: _cast_like(_affine_ch(grouped(x, G, eps, **kw), x, w, b), x)

    mistakes = _mistakes({
        "groups_are_channels_per_group": lambda x, G, w, b, eps: _only_if(
            x.shape[1] // G != G, lambda: variant()(x, x.shape[1] // G, w, b, eps)),
        "interleaved_groups": variant(interleave=True),
        "forgot_spatial_dims": variant(spatial=False),
        "unbiased_variance": variant(unbiased=True),
        "eps_outside_sqrt": variant(eps_outside=True),
        "half_not_float32": lambda x, G, w, b, eps: _only_if(x.dtype == torch.float16, lambda:
            _mv_norm(x.reshape(x.shape[0], G, -1), [2], eps, in_dtype=True).reshape(x.shape)
            * _ch(w, x) + _ch(b, x)),
        "affine_missing": lambda x, G, w, b, eps: _cast_like(grouped(x, G, eps), x),
    }, extra={
        "groups_are_channels_per_group": (
            "num_groups used as the number of channels per group. GroupNorm(G, C) makes G "
            "groups of C/G channels: reshape to (N, G, C // G, ...), not (N, C // G, G, ...). "
            "(The paper's default is 32 groups, not 32 channels per group.)",
            "把 num_groups 当成了每组的通道数。GroupNorm(G, C) 是分成 G 组、每组 C/G 个通道："
            "应 reshape 成 (N, G, C // G, ...)，而不是 (N, C // G, G, ...)。"
            "（论文默认的是 32 个组，而不是每组 32 个通道。）"),
        "interleaved_groups": (
            "channels assigned to groups round-robin (channel c in group c % G). The groups are "
            "contiguous blocks: channels 0..C/G-1 form group 0. Reshape (N, C, ...) to "
            "(N, G, C // G, ...) directly, without a transpose.",
            "通道被轮流分配到各组（通道 c 属于第 c % G 组）。组是连续的通道块：0..C/G-1 号通道是第 0 组。"
            "应直接把 (N, C, ...) reshape 成 (N, G, C // G, ...)，不要转置。"),
        "forgot_spatial_dims": (
            "statistics over the group's channels at each spatial position separately. A group's "
            "statistics cover its C/G channels and all spatial positions: reshape to (N, G, -1).",
            "在每个空间位置上分别对组内通道求统计量。一个组的统计量应覆盖它的 C/G 个通道和所有空间位置："
            "reshape 成 (N, G, -1)。"),
    })
    return _run("group_norm", fn, cases, ref, mistakes)
