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
import inspect
import re
import traceback
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["CheckResult", "Case", "Mistake", "run_cases", "COMMON", "mistakes", "what_zh",
           "generator", "randn", "affine_params", "HALF_OFFSET", "show_case", "NO_MATCH",
           "error_text", "error_line", "arg_names", "case_numel"]


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
    with the learner's call signature (returning ``None`` where it does not apply, or a list
    of outputs where the mistake is written in several ways)."""

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
    "eps_missing": (
        "eps left out: dividing by sqrt(var) (sqrt(mean(x**2)) for RMSNorm) alone. PyTorch "
        "divides by sqrt(var + eps), which keeps a nearly constant input from being blown up "
        "(and from dividing by zero).",
        "漏掉了 eps：只除以 sqrt(var)（RMSNorm 为 sqrt(mean(x**2))）。PyTorch 除以 sqrt(var + eps)，"
        "这样几乎恒定的输入不会被放大（也不会除以零）。"),
    "params_not_reshaped": (
        "weight and bias, of shape (C,), are not reshaped: they broadcast against the last dim "
        "(or fail to broadcast) instead of the channel dim 1. Reshape them to (1, C, 1, ...), "
        "e.g. weight.view(1, -1, *[1] * (x.dim() - 2)).",
        "形状为 (C,) 的 weight 和 bias 没有 reshape：它们沿最后一维广播（或无法广播），而不是沿通道维 1。"
        "应 reshape 成 (1, C, 1, ...)，例如 weight.view(1, -1, *[1] * (x.dim() - 2))。"),
    "kept_reduced_dim": (
        "the result keeps the reduced dim (size 1): the exercise asks for it without, e.g. shape "
        "(rows,) rather than (rows, 1). Reduce without keepdim, or .squeeze(-1) at the end.",
        "结果保留了被归约的那一维（大小为 1）：题目要求去掉它，例如形状 (rows,) 而不是 (rows, 1)。"
        "归约时不要 keepdim，或最后 .squeeze(-1)。"),
    "only_2d": (
        "right on every 2-D input, wrong on every input with more dims: the function is written "
        "for 2-D input only, and the checker also passes the 3-D and 4-D inputs listed in the "
        "exercise. Write the reductions and reshapes for any number of dims: per channel, "
        "dims (0, 2, 3, ...) and vectors viewed as (1, C, 1, ...); per token, dim=-1.",
        "对所有二维输入都正确，对更多维的输入都不对：函数只为二维输入写的，而检查器也会传入题目列出的三维、"
        "四维输入。归约和 reshape 应适用于任意维数：按通道时在 (0, 2, 3, ...) 上归约、把向量 view 成 "
        "(1, C, 1, ...)；按 token 时用 dim=-1。"),
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
    """The Chinese for the short descriptions of what went wrong in one case. The text of an
    exception (what follows ``raised``) is torch's or Python's own and is quoted verbatim."""
    m = re.fullmatch(r"raised (.*?)(?: \(line (\d+)\))?", what, flags=re.S)
    if m:
        line = f"（第 {m.group(2)} 行）" if m.group(2) else ""
        return f"抛出异常 {m.group(1)}{line}"
    for en, zh in ((", expected", "，应为"), ("max abs error", "最大绝对误差"), ("returned shape", "返回的形状为"),
                   ("expected", "应为"), ("values differ", "数值不同"), ("returned dtype", "返回的 dtype 为"),
                   ("returned", "返回了"), (", not a tensor", "，不是张量")):
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
        # a mistake may come in several forms: a list of candidate outputs
        if any(isinstance(b, Tensor) and not _close(b, ref, case.rtol, case.atol)
               and _close(out, b, case.rtol, case.atol)
               for b in (bad if isinstance(bad, list) else [bad])):
            keys.append(m.key)
    return keys


def _one_case(fn: Callable, case: Case, ref: Tensor, catalogue: Sequence[Mistake]
              ) -> tuple[str, list[str], bool, Tensor | None] | None:
    """None when ``fn`` matches ``ref`` on ``case``; else (what happened, matching mistake
    keys, whether only the values differ, the learner's output where it is a tensor)."""
    try:
        with torch.no_grad():
            out = fn(*_clone(case.args))
    except NotImplementedError as e:
        return f"raised NotImplementedError: {e}".strip(), ["not_implemented"], False, None
    except Exception as e:  # the learner's bug, reported, never raised
        text = error_text(e)
        if getattr(e, "mistake", None):  # raised by a guard that recognised the mistake
            return str(e).strip().splitlines()[0][:300], [e.mistake], False, None
        return f"raised {text}{error_line(e)}", [], False, None
    if not isinstance(out, Tensor):
        return f"returned {type(out).__name__}, not a tensor", [], False, None
    if out.shape != ref.shape:
        keys = (["kept_reduced_dim"] if out.dim() > ref.dim() and out.numel() == ref.numel()
                and out.squeeze().shape == ref.squeeze().shape else [])
        return f"returned shape {tuple(out.shape)}, expected {tuple(ref.shape)}", keys, False, out
    close = _close(out, ref, case.rtol, case.atol)
    if out.dtype != ref.dtype and close:
        return f"returned dtype {out.dtype}, expected {ref.dtype}", ["wrong_dtype"], False, out
    if close:
        return None
    keys = _matching(out, case, ref, catalogue)
    what = f"max abs error {_max_err(out, ref):.3g}" if case.report_error else "values differ"
    return what, keys, True, out


def error_text(e: BaseException) -> str:
    """The first line of an exception as ``Type: message`` (quoted verbatim, never translated)."""
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]


def error_line(e: BaseException) -> str:
    """`` (line N)``: the line of the learner's code (the last frame outside torch) that raised."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if "/torch/" not in f.filename.replace("\\", "/")
              and "/helpers/checks/" not in f.filename.replace("\\", "/")]
    return f" (line {frames[-1].lineno})" if frames else ""


def _right_in_float32(fn: Callable, case: Case, reference: Callable) -> bool:
    """Whether ``fn`` matches the reference on ``case`` with its half-precision tensors upcast
    to float32: then the formula is right, and a difference on the half-precision input is
    one of precision only."""
    args = tuple(a.float() if isinstance(a, Tensor) and a.dtype in (torch.float16, torch.bfloat16)
                 else a for a in case.args)
    return _one_case(fn, dataclasses.replace(case, args=args), reference(*args), ()) is None


# --------------------------------------------------------------------------------------
# showing a failing case
# --------------------------------------------------------------------------------------
def _fmt_value(v) -> str:
    if isinstance(v, torch.nn.Module):
        return type(v).__name__
    if isinstance(v, Tensor):
        return f"tensor {tuple(v.shape)} {str(v.dtype).replace('torch.', '')}"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_fmt_value(a) for a in v[:3]) + (", ..." if len(v) > 3 else "")
        return f"{type(v).__name__} of {len(v)} ({inner})"
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v) if isinstance(v, str) else str(v)


def _fmt_numbers(t: Tensor, k: int = 4) -> str:
    flat = t.detach().reshape(-1).double()
    vals = ", ".join(f"{float(a):.4g}" for a in flat[:k])
    return f"[{vals}{', ...' if flat.numel() > k else ''}]"


def arg_names(reference: Callable, n: int) -> list[str]:
    """The names of ``reference``'s positional parameters (``arg1``, ... where it has none)."""
    try:
        params = [p for p in inspect.signature(reference).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params][:n]
    return names + [f"arg{i + 1}" for i in range(len(names), n)]


def case_numel(args: tuple) -> int:
    """The size of a case: the number of values in its tensors (for choosing the smallest)."""
    total = 0
    for a in args:
        if isinstance(a, Tensor):
            total += a.numel()
        elif isinstance(a, (tuple, list)):
            total += case_numel(tuple(a))
    return total


def show_case(name: str, args: tuple, names: Sequence[str], ref, out) -> tuple[str, str]:
    """The smallest failing case, in English and Chinese: its inputs (shapes, dtypes, the
    scalar arguments), a few expected and returned values, and where they differ most."""
    inputs = ", ".join(f"{k}: {_fmt_value(v)}" for k, v in zip(names, args))
    en = [f"Smallest failing case, '{name}': inputs {inputs}."]
    zh = [f"最小的未通过用例 '{name}'：输入 {inputs}。"]
    if isinstance(ref, Tensor):
        if isinstance(out, Tensor) and out.shape == ref.shape and ref.numel():
            d = torch.nan_to_num((out.detach().double() - ref.detach().double()).abs(), nan=float("inf"))
            idx = tuple(int(i) for i in torch.unravel_index(torch.argmax(d), d.shape)) if d.dim() else ()
            e, o = float(ref.detach().double()[idx]), float(out.detach().double()[idx])
            en.append(f"Expected {_fmt_numbers(ref)}, got {_fmt_numbers(out)} (first values); "
                      f"largest difference at index {idx}: expected {e:.6g}, got {o:.6g}.")
            zh.append(f"应为 {_fmt_numbers(ref)}，实得 {_fmt_numbers(out)}（前几个值）；"
                      f"差异最大处在索引 {idx}：应为 {e:.6g}，实得 {o:.6g}。")
        else:
            got = (f"shape {tuple(out.shape)}" if isinstance(out, Tensor) else "no result")
            en.append(f"Expected shape {tuple(ref.shape)} ({str(ref.dtype).replace('torch.', '')}), "
                      f"first values {_fmt_numbers(ref)}; got {got}.")
            zh.append(f"应得形状 {tuple(ref.shape)}（{str(ref.dtype).replace('torch.', '')}），"
                      f"前几个值 {_fmt_numbers(ref)}；实得{'形状 ' + str(tuple(out.shape)) if isinstance(out, Tensor) else '无结果'}。")
    return " ".join(en), "".join(zh)


NO_MATCH = ("No known mistake matches; compare your output with the expected one on the case below.",
            "没有匹配到已知错误；请在下面的用例上对照你的输出与期望的输出。")


NOT_WRITTEN = ("not written yet. Fill in the body, then run this cell again.",
               "还没有实现：写好函数体后重新运行本单元格。")


def _rank(case: Case) -> int | None:
    """The number of dims of the case's first tensor argument (the input)."""
    for a in case.args:
        if isinstance(a, Tensor):
            return a.dim()
    return None


def _only_2d(cases: Sequence[Case], failed: set[str]) -> bool:
    """Right on every 2-D input, wrong on every input of more dims (there being both)."""
    ranks = {c.name: _rank(c) for c in cases}
    two = [c for c in cases if ranks[c.name] == 2]
    more = [c for c in cases if (ranks[c.name] or 0) > 2]
    return (bool(two) and bool(more) and not any(c.name in failed for c in two)
            and all(c.name in failed for c in more) and failed <= {c.name for c in more})


def run_cases(title: str, fn: Callable, cases: Sequence[Case], reference: Callable[..., Tensor],
              catalogue: Sequence[Mistake],
              against: tuple[str, str] = ("torch", "torch"),
              names: Sequence[str] | None = None) -> CheckResult:
    """Run ``fn`` on every case, compare with ``reference`` (named ``against`` in the message,
    in English and Chinese), and name the known mistake that explains the most failing cases.

    A case's ``hint`` is named only when that case is the only one that fails (and, for the
    half-precision hint, the formula is right in float32); a function right on every 2-D
    input and wrong on every larger one is told it handles 2-D input only. When no known
    mistake matches, the message shows the smallest failing case (inputs, expected and
    returned values), in both languages; ``names`` are the names of the arguments shown there
    (default: the reference's parameter names).

    Returns a :class:`CheckResult` headed ``✔ title`` or ``✘ title``; a function that
    raises ``NotImplementedError`` on every case gets ``… title: not written yet``."""
    by_key = {k: Mistake(k, *texts) for k, texts in COMMON.items()}
    by_key.update({m.key: m for m in catalogue})
    failures: list[tuple[Case, str, list[str], object, object]] = []
    notes: list[tuple[Case, str]] = []
    with torch.random.fork_rng(devices=[]):  # the learner's code may draw random numbers
        for case in cases:
            ref = reference(*case.args)
            outcome = _one_case(fn, case, ref, catalogue)
            if outcome is None:
                continue
            what, keys, values_only, out = outcome
            if case.advisory and values_only and case.hint and _right_in_float32(fn, case, reference):
                notes.append((case, what))
            else:
                failures.append((case, what, keys, ref, out))
        n = len(cases)
        if failures and all("not_implemented" in f[2] for f in failures) and len(failures) == n:
            return CheckResult(False, f"… {title}: {NOT_WRITTEN[0]} / {NOT_WRITTEN[1]}",
                               "not_implemented", [f[0].name for f in failures])
        # a case's hint, where that case alone fails and nothing in the catalogue matched
        if len(failures) == 1 and not failures[0][2] and failures[0][0].hint:
            case, what, _, ref, out = failures[0]
            if case.hint != "half_not_float32" or _right_in_float32(fn, case, reference):
                failures[0] = (case, what, [case.hint], ref, out)
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
    for _, _, keys, _, _ in failures:
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    found = sorted(counts, key=lambda k: -counts[k])  # stable: ties keep case order
    failed_names = {f[0].name for f in failures}
    if set(found) <= {"param_grad_shape"} and _only_2d(cases, failed_names):
        found = ["only_2d"]  # (a parameter gradient of shape (C, L): the same cause)
    key = found[0] if found else None
    case, what, _, _, _ = next(f for f in failures if key is None or key in f[2] or key == "only_2d")
    names_failed = [f[0].name for f in failures]
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
        small = min(failures, key=lambda f: case_numel(f[0].args))
        shown_en, shown_zh = show_case(small[0].name, small[0].args,
                                       names or arg_names(reference, len(small[0].args)),
                                       small[3], small[4])
        return CheckResult(False, "\n".join([head, NO_MATCH[0], shown_en, *note_en, head_zh,
                                             NO_MATCH[1], shown_zh, *note_zh]), None,
                           names_failed, note_keys)
    texts = {**by_key, "not_implemented": Mistake("not_implemented", *NOT_WRITTEN)}
    en = [f"Likely mistake: {texts[key].en}"] + [f"Also: {texts[k].en}" for k in found[1:]]
    zh = [f"可能的错误：{texts[key].zh}"] + [f"另外：{texts[k].zh}" for k in found[1:]]
    return CheckResult(False, "\n".join([head, *en, *note_en, head_zh, *zh, *note_zh]), key,
                       names_failed, note_keys)
