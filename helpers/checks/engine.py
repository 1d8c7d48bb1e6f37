r"""The engine behind every exercise checker: run a learner's function on chosen cases,
compare each output with a reference, and name the known mistake the output follows.

A checker is a list of :class:`Case` (inputs built from a seeded :class:`torch.Generator`,
never the global random state), a reference function, and a catalogue of :class:`Mistake`
(a buggy version of the function, explained in English and Chinese). :func:`run_cases`
returns a :class:`CheckResult`:

- it never prints and never raises on the learner's code: an exception, a wrong shape or a
  wrong dtype becomes a failed result with an explanation;
- it leaves the global random state as it found it, even if the learner's function draws
  random numbers;
- a case marked ``advisory`` (float16 input, where a textbook implementation computes in
  half precision) does not fail the check: when its output differs, the result passes with
  a named note under the ✔ that says why, and where the course explains it.

Topic modules (:mod:`helpers.checks.norms`, ...) hold the cases and the catalogues.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["CheckResult", "Case", "Mistake", "run_cases", "COMMON", "mistakes", "what_zh",
           "generator", "randn", "affine_params", "HALF_OFFSET"]


# --------------------------------------------------------------------------------------
# the result, a case, a mistake
# --------------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """Outcome of a checker; a notebook displays its message, ``bool()`` is ``passed``.

    Attributes:
        passed: True when every (non-advisory) case matched the reference.
        message: what went right or wrong, in English then Chinese.
        mistake: a short key naming the recognised mistake (``"unbiased_variance"``, ...),
            ``None`` when passed or when no known mistake matched.
        failed_cases: names of the cases that failed.
        notes: keys of the notes reported under a pass (``"half_not_float32"``, ...).
    """

    passed: bool
    message: str
    mistake: str | None = None
    failed_cases: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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
    the mistake to suggest when this case alone fails and nothing else matched (``hint``),
    ``advisory``: when the output's values differ on this case but match the reference once
    the case's half-precision tensors are upcast to float32 (the formula is right), report
    the ``hint`` mistake as a note instead of a failure; and ``report_error=False`` where the size of a wrong result
    depends on the CPU's summation order (catastrophic cancellation), so it is not printed."""

    name: str
    args: tuple
    rtol: float = 1e-4
    atol: float = 1e-4
    hint: str | None = None
    advisory: bool = False
    report_error: bool = True


# --------------------------------------------------------------------------------------
# inputs: always from a generator the checker owns
# --------------------------------------------------------------------------------------
# float16 values are 0.25 apart in [256, 512): a mean near the midpoint 300.125 rounds by
# about 0.125 when kept in float16, an error of about 0.1 standard deviations in x_hat.
HALF_OFFSET = 300.125


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``: checkers draw from it, never from the global state."""
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, g: torch.Generator, scale: float = 1.0, offset: float = 0.0,
          dtype: torch.dtype = torch.float32) -> Tensor:
    """``offset + scale * N(0, 1)`` of ``shape``, drawn in float64 from ``g``, cast to ``dtype``."""
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)


def affine_params(n: int, g: torch.Generator, dtype: torch.dtype = torch.float32,
                  shape: Sequence[int] | None = None) -> tuple[Tensor, Tensor]:
    """A non-trivial weight in [0.5, 1.5) and bias ``0.5 * N(0, 1)`` of ``shape`` (default (n,)),
    so that a missing or misplaced affine step cannot hide."""
    shape = tuple(shape or (n,))
    w = (torch.rand(*shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    b = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) * 0.5
    return w, b


# --------------------------------------------------------------------------------------
# the mistakes every normalisation checker knows
# --------------------------------------------------------------------------------------
HALF_NOTE = (
    "float16 input computed in float16. This case is about precision, not the formula: float16 "
    "keeps 11 significant bits, so near 300 its values are 0.25 apart and a mean or a sum of "
    "squares kept in float16 is rounded by up to that much. PyTorch's kernels accumulate in "
    "float32 and cast the result back. To match them: x.float() for the statistics, then "
    ".to(x.dtype). Lesson 07, section 6 (\"Half precision: why kernels accumulate in float32\").",
    "float16 输入直接用 float16 计算了。这个用例考的是精度，不是公式：float16 只有 11 位有效二进制位，"
    "在 300 附近相邻两个数相差 0.25，用 float16 保存的均值或平方和会被舍入这么多。PyTorch 的内核用 "
    "float32 累加，再把结果转回输入的精度。要与它一致：用 x.float() 计算统计量，再 .to(x.dtype)。"
    "见第 07 课第 6 节（“半精度：为什么内核用 float32 累加”）。")

COMMON: dict[str, tuple[str, str]] = {
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
        "使用了单遍方差公式 E[x²] - E[x]²：当均值远大于离散程度时，float32 下会发生灾难性抵消。"
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
    "half_not_float32": HALF_NOTE,
    "used_torch_function": (
        "it calls PyTorch's own implementation (a normalisation function, a module built on "
        "one, or autograd). The drill asks for the formula written from elementary tensor "
        "operations (mean, sum, sqrt, ...): torch is the reference it is compared with.",
        "调用了 PyTorch 自己的实现（归一化函数、基于它的模块，或自动求导）。这个练习要求用基本的"
        "张量运算（mean、sum、sqrt……）写出公式：torch 正是用来对照的参考答案。"),
    "affine_missing": (
        "weight (gamma) or bias (beta) not applied, or applied in the wrong order: "
        "y = x_hat * weight + bias.",
        "没有乘 weight（gamma）或没有加 bias（beta），或顺序错了：y = x_hat * weight + bias。"),
}


def mistakes(keys_and_fns: dict[str, Callable | None],
             extra: dict[str, tuple[str, str]] | None = None) -> list[Mistake]:
    """The catalogue of a checker: for each key, its buggy function and its texts, taken
    from ``extra`` or else from :data:`COMMON`."""
    texts = {**COMMON, **(extra or {})}
    return [Mistake(k, texts[k][0], texts[k][1], f) for k, f in keys_and_fns.items()]


# --------------------------------------------------------------------------------------
# comparing outputs
# --------------------------------------------------------------------------------------
def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, Tensor) else a for a in args)


def _close(a: Tensor, b: Tensor, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    return bool(torch.isclose(a.detach().double(), b.detach().double(), rtol=rtol, atol=atol).all())


def _max_err(a: Tensor, b: Tensor) -> float:
    d = torch.nan_to_num((a.detach().double() - b.detach().double()).abs(), nan=float("inf"))
    return float(d.max()) if d.numel() else 0.0


def what_zh(what: str) -> str:
    """The Chinese for the short descriptions of what went wrong in one case."""
    for en, zh in (("max abs error", "最大绝对误差"), ("returned shape", "返回的形状为"),
                   ("expected", "应为"), ("values differ", "数值不同"), ("returned dtype", "返回的 dtype 为"),
                   ("returned", "返回了"), ("raised", "抛出异常"), (", not a tensor", "，不是张量")):
        what = what.replace(en, zh)
    return what


def _matching(out: Tensor, case: Case, ref: Tensor, catalogue: Sequence[Mistake]) -> list[str]:
    """The keys of the mistakes whose output the learner's follows on ``case`` (a mistake
    counts only where it changes the result)."""
    keys = []
    for m in catalogue:
        if m.fn is None:
            continue
        try:
            bad = m.fn(*_clone(case.args))
        except Exception:
            bad = None
        if (isinstance(bad, Tensor) and not _close(bad, ref, case.rtol, case.atol)
                and _close(out, bad, case.rtol, case.atol)):
            keys.append(m.key)
    return keys


def _one_case(fn: Callable, case: Case, ref: Tensor, catalogue: Sequence[Mistake]
              ) -> tuple[str, list[str], bool] | None:
    """None when ``fn`` matches ``ref`` on ``case``; else (what happened, matching mistake
    keys, whether only the values differ)."""
    try:
        with torch.no_grad():
            out = fn(*_clone(case.args))
    except NotImplementedError as e:
        return f"raised NotImplementedError: {e}".strip(), ["not_implemented"], False
    except Exception as e:  # the learner's bug, reported, never raised
        text = f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
        keys = ["missing_keepdim"] if "must match the size of tensor" in text else []
        if getattr(e, "mistake", None):  # raised by a guard that recognised the mistake
            return text, [e.mistake], False
        where = traceback.extract_tb(e.__traceback__)[-1]
        return f"raised {text} (line {where.lineno})", keys, False
    if not isinstance(out, Tensor):
        return f"returned {type(out).__name__}, not a tensor", [], False
    if out.shape != ref.shape:
        keys = ["missing_keepdim"] if out.dim() != ref.dim() else []
        return f"returned shape {tuple(out.shape)}, expected {tuple(ref.shape)}", keys, False
    close = _close(out, ref, case.rtol, case.atol)
    if out.dtype != ref.dtype and close:
        return f"returned dtype {out.dtype}, expected {ref.dtype}", ["wrong_dtype"], False
    if close:
        return None
    keys = _matching(out, case, ref, catalogue) or ([case.hint] if case.hint else [])
    what = f"max abs error {_max_err(out, ref):.3g}" if case.report_error else "values differ"
    return what, keys, True


def _right_in_float32(fn: Callable, case: Case, reference: Callable) -> bool:
    """Whether ``fn`` matches the reference on ``case`` with its half-precision tensors upcast
    to float32: then the formula is right, and a difference on the half-precision input is
    one of precision only."""
    args = tuple(a.float() if isinstance(a, Tensor) and a.dtype in (torch.float16, torch.bfloat16)
                 else a for a in case.args)
    return _one_case(fn, dataclasses.replace(case, args=args), reference(*args), ()) is None


NOT_WRITTEN = ("not written yet. Fill in the body, then run this cell again.",
               "还没有实现：写好函数体后重新运行本单元格。")


def run_cases(title: str, fn: Callable, cases: Sequence[Case], reference: Callable[..., Tensor],
              catalogue: Sequence[Mistake],
              against: tuple[str, str] = ("torch", "torch")) -> CheckResult:
    """Run ``fn`` on every case, compare with ``reference`` (named ``against`` in the message,
    in English and Chinese), and name the known mistake that explains the most failing cases.

    Returns a :class:`CheckResult` headed ``✔ title`` or ``✘ title``; a function that
    raises ``NotImplementedError`` on every case gets ``… title: not written yet``."""
    by_key = {k: Mistake(k, *texts) for k, texts in COMMON.items()}
    by_key.update({m.key: m for m in catalogue})
    failures: list[tuple[Case, str, list[str]]] = []
    notes: list[tuple[Case, str]] = []
    with torch.random.fork_rng(devices=[]):  # the learner's code may draw random numbers
        for case in cases:
            ref = reference(*case.args)
            outcome = _one_case(fn, case, ref, catalogue)
            if outcome is None:
                continue
            what, keys, values_only = outcome
            if case.advisory and values_only and case.hint and _right_in_float32(fn, case, reference):
                notes.append((case, what))
            else:
                failures.append((case, what, keys))
    n = len(cases)
    if failures and all("not_implemented" in k for _, _, k in failures) and len(failures) == n:
        return CheckResult(False, f"… {title}: {NOT_WRITTEN[0]} / {NOT_WRITTEN[1]}",
                           "not_implemented", [c.name for c, _, _ in failures])
    # (the size of a half-precision error depends on the CPU's summation order: not printed)
    note_en = [f"Note ('{c.name}'): {by_key[c.hint].en}" for c, _ in notes]
    note_zh = [f"注意（'{c.name}'）：{by_key[c.hint].zh}" for c, _ in notes]
    note_keys = [c.hint for c, _ in notes]
    ref_en, ref_zh = against
    # a space between Chinese and a Latin word, none between two Chinese characters
    ref_zh = (" " if ref_zh[:1].isascii() else "") + ref_zh + (" " if ref_zh[-1:].isascii() else "")
    if not failures:
        matched = n - len(notes)
        if notes:
            head = (f"✔ {title}: {matched} of {n} cases match {ref_en}; the other is a note. "
                    f"/ {matched}/{n} 个用例与{ref_zh}一致；另一个见下面的注意。")
        elif n == 1:
            head = f"✔ {title}: matches {ref_en}. / 与{ref_zh}一致。"
        else:
            head = f"✔ {title}: all {n} cases match {ref_en}. / 全部 {n} 个用例与{ref_zh}一致。"
        return CheckResult(True, "\n".join([head, *note_en, *note_zh]), notes=note_keys)

    # the mistakes found, the one that explains the most failing cases first
    counts: dict[str, int] = {}
    for _, _, keys in failures:
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    found = sorted(counts, key=lambda k: -counts[k])  # stable: ties keep case order
    key = found[0] if found else None
    case, what, _ = next(f for f in failures if key is None or key in f[2])
    names = [f[0].name for f in failures]
    if key == "used_torch_function":  # not compared at all: say what it called
        called = what.split("calls ", 1)[-1]
        head = f"✘ {title}: not graded, it calls {called}."
        head_zh = f"✘ {title}：未评分，它调用了 {called}。"
    elif n == 1:
        head = f"✘ {title}: differs from {ref_en} ({what})."
        head_zh = f"✘ {title}：与{ref_zh}不一致（{what_zh(what)}）。"
    else:
        head = (f"✘ {title}: {len(failures)} of {n} cases differ from {ref_en} "
                f"(first: '{case.name}', {what}).")
        head_zh = (f"✘ {title}：{len(failures)}/{n} 个用例与{ref_zh}不一致"
                   f"（首个：'{case.name}'，{what_zh(what)}）。")
    if key is None:
        body = (f"No known mistake matches; print your output beside the expected one on that "
                f"case. / 没有匹配到已知错误；请在该用例上把你的输出与期望的输出并排打印比较。")
        return CheckResult(False, "\n".join([head, body, *note_en, head_zh, *note_zh]), None,
                           names, note_keys)
    texts = {**by_key, "not_implemented": Mistake("not_implemented", *NOT_WRITTEN)}
    en = [f"Likely mistake: {texts[key].en}"] + [f"Also: {texts[k].en}" for k in found[1:]]
    zh = [f"可能的错误：{texts[key].zh}"] + [f"另外：{texts[k].zh}" for k in found[1:]]
    return CheckResult(False, "\n".join([head, *en, *note_en, head_zh, *zh, *note_zh]), key,
                       names, note_keys)
