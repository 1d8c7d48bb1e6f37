r"""Exercise checkers for lesson 11 (normalising the weights): Weight Normalization's
forward pass and its v-gradient, and one step of the power iteration of spectral
normalisation.

Same contract as :mod:`helpers.checks`: each checker runs the learner's function on cases
chosen to expose the mistakes that circulate, compares with an independent reference
(torch's ``torch._weight_norm``, autograd, torch's power-iteration formulas), and returns a
:class:`helpers.checks.CheckResult` whose message is in English then Chinese and names the
mistake it recognises. A checker never prints, never raises on the learner's code (an
exception in it is a diagnosis), and never touches torch's global random state (its inputs
come from a seeded ``torch.Generator``).

Usage::

    from helpers.checks import check_weight_norm

    def my_weight_norm(v, g):
        return g * v / v.flatten(1).norm(dim=1).view(-1, *[1] * (v.dim() - 1))

    check_weight_norm(my_weight_norm)   # ✔ weight_norm: all 4 cases match torch. / ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .engine import NO_MATCH, CheckResult, arg_names, case_numel, error_line, error_text, show_case

__all__ = ["check_weight_norm", "check_weight_norm_grad", "check_power_iteration"]


@dataclass(frozen=True)
class _Case:
    name: str
    args: tuple


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _as_tuple(out) -> tuple | None:
    """The result as a tuple of tensors; a Python number (sigma as a float) becomes a 0-d
    float64 tensor."""
    if isinstance(out, Tensor):
        return (out,)
    if isinstance(out, (tuple, list)) and all(isinstance(o, (Tensor, int, float)) and not isinstance(o, bool)
                                              for o in out):
        return tuple(o if isinstance(o, Tensor) else torch.tensor(float(o), dtype=torch.float64)
                     for o in out)
    return None


def _scalars_0d(out: tuple, ref: tuple) -> tuple:
    """A one-element tensor where the reference holds a 0-d one (sigma of shape (1,)) is read
    as that number."""
    return tuple(a.reshape(()) if b.dim() == 0 and a.numel() == 1 else a for a, b in zip(out, ref))


def _close(out: tuple, ref: tuple, tol: float = 1e-6) -> bool:
    if len(out) != len(ref):
        return False
    for a, b in zip(out, ref):
        if a.shape != b.shape:
            return False
        if not torch.allclose(a.detach().double(), b.detach().double(), rtol=tol, atol=tol):
            return False
    return True


def _max_err(out: tuple, ref: tuple) -> float:
    errs = [float(torch.nan_to_num((a.detach().double() - b.detach().double()).abs(),
                                   nan=float("inf")).max())
            for a, b in zip(out, ref) if a.shape == b.shape and a.numel()]
    return max(errs) if errs else float("inf")


def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, Tensor) else a for a in args)


def _check(title: str, fn: Callable, cases: list[_Case], reference: Callable,
           mistakes: dict[str, tuple[str, str, Callable | None]],
           on_error: Callable[[str], str | None] = lambda text: None,
           names: tuple[str, ...] = ()) -> CheckResult:
    """Run ``fn`` on every case (with autograd enabled: a learner may use it); compare with
    ``reference``; on a mismatch, find the known mistakes whose output the learner's matches
    (where that mistake changes the result)."""
    failures = []  # (case, what, the same in Chinese, [keys], ref, out)
    for case in cases:
        ref = _as_tuple(reference(*_clone(case.args)))
        try:
            with torch.random.fork_rng(devices=[]), torch.enable_grad():
                raw = fn(*_clone(case.args))
        except Exception as e:  # the learner's bug, diagnosed, never raised
            text, line = error_text(e), error_line(e)
            key = on_error(text)
            line_zh = f"（第 {line[7:-1]} 行）" if line else ""
            failures.append((case, f"raised {text}{line}", f"抛出异常 {text}{line_zh}",
                             [key] if key else [], ref, None))
            continue
        out = _as_tuple(raw)
        if out is None or len(out) != len(ref):
            what = "a tensor" if isinstance(raw, Tensor) else type(raw).__name__
            kinds = ", ".join(type(o).__name__ for o in raw) if isinstance(raw, (tuple, list)) else ""
            failures.append((case, f"returned {what}{f' ({kinds})' if kinds else ''}, expected "
                                   f"{len(ref)} tensor(s)",
                             f"返回了 {what}{f'（{kinds}）' if kinds else ''}，应为 {len(ref)} 个张量",
                             [], ref, None))
            continue
        out = tuple(o.detach() for o in _scalars_0d(out, ref))
        if any(a.shape != b.shape for a, b in zip(out, ref)):
            shapes = [tuple(a.shape) for a in out]
            expected = [tuple(b.shape) for b in ref]
            failures.append((case, f"returned shapes {shapes}, expected {expected}",
                             f"返回的形状为 {shapes}，应为 {expected}", [], ref, out))
            continue
        if _close(out, ref):
            continue
        keys = []
        for key, (_, _, buggy) in mistakes.items():
            if buggy is None:
                continue
            try:
                bad = _as_tuple(buggy(*_clone(case.args)))
            except Exception:
                bad = None
            if bad is not None and not _close(bad, ref) and _close(out, bad):
                keys.append(key)
        err = f"{_max_err(out, ref):.3g}"
        failures.append((case, f"max abs error {err}", f"最大绝对误差 {err}", keys, ref, out))

    if not failures:
        return CheckResult(True, f"✔ {title}: all {len(cases)} cases match torch. "
                                 f"/ 全部 {len(cases)} 个用例与 torch 一致。")
    counts: dict[str, int] = {}
    for f in failures:
        for k in f[3]:
            counts[k] = counts.get(k, 0) + 1
    found = sorted(counts, key=lambda k: -counts[k])
    key = found[0] if found else None
    case, what, what_zh, *_ = next(f for f in failures if key is None or key in f[3])
    head = (f"✘ {title}: {len(failures)} of {len(cases)} cases differ from torch "
            f"(first: '{case.name}', {what}).")
    head_zh = f"✘ {title}：{len(failures)}/{len(cases)} 个用例与 torch 不一致（首个：'{case.name}'，{what_zh}）。"
    failed = [f[0].name for f in failures]
    if key is None:
        small = min(failures, key=lambda f: case_numel(f[0].args))
        ref, out = small[4], small[5]
        # the part that differs most (or the first) is the one shown
        part = 0
        if out is not None and len(out) == len(ref):
            errs = [_max_err((a,), (b,)) if a.shape == b.shape else float("inf") for a, b in zip(out, ref)]
            part = max(range(len(errs)), key=lambda i: errs[i])
        en, zh = show_case(small[0].name, small[0].args, names or arg_names(reference, len(small[0].args)),
                           ref[part], None if out is None else out[part])
        return CheckResult(False, "\n".join([head, NO_MATCH[0], en, head_zh, NO_MATCH[1], zh]),
                           None, failed)
    en = [f"Likely mistake: {mistakes[key][0]}"] + [f"Also: {mistakes[k][0]}" for k in found[1:]]
    zh = [f"可能的错误：{mistakes[key][1]}"] + [f"另外：{mistakes[k][1]}" for k in found[1:]]
    return CheckResult(False, "\n".join([head, *en, head_zh, *zh]), key, failed)


# --------------------------------------------------------------------------------------
# Weight Normalization: forward
# --------------------------------------------------------------------------------------
def _row_norm(v: Tensor) -> Tensor:
    """Norm of each slice along dim 0, shaped (out, 1, ..., 1)."""
    return v.flatten(1).norm(dim=1).reshape((-1,) + (1,) * (v.dim() - 1))


def _wn_cases() -> list[_Case]:
    g = _gen(11)
    cases = []
    for name, shape in [("Linear weight (out, in) = (3, 5)", (3, 5)),
                        ("Linear weight (out, in) = (4, 4), square", (4, 4)),
                        ("Conv2d kernel (out, in, kH, kW) = (4, 2, 3, 3)", (4, 2, 3, 3))]:
        scales = torch.tensor([0.3, 2.0, 5.0, 0.7], dtype=torch.float64)[:shape[0]]
        v = torch.randn(shape, generator=g, dtype=torch.float64) * scales.reshape(
            (-1,) + (1,) * (len(shape) - 1))
        gain = (torch.rand((shape[0],) + (1,) * (len(shape) - 1), generator=g,
                           dtype=torch.float64) * 2 + 0.5)
        cases.append(_Case(name, (v, gain)))
    v = torch.randn(2, 3, generator=g, dtype=torch.float64)
    cases.append(_Case("Linear weight (2, 3), a negative g", (v, torch.tensor([[1.5], [-2.0]],
                                                                              dtype=torch.float64))))
    return cases


_WN_MISTAKES = {
    "forgot_g": ("g forgotten: v / ||v|| has unit norm per output unit. Weight Normalization "
                 "multiplies by g, so ||w|| = |g|: w = g * v / ||v||.",
                 "忘记乘 g：v / ||v|| 每个输出单元的范数都是 1。权重归一化还要乘上 g，使 ||w|| = |g|："
                 "w = g * v / ||v||。",
                 lambda v, g: v / _row_norm(v)),
    "no_normalization": ("v is not divided by its norm: w = g * v. Divide each output unit's "
                         "v by its Euclidean norm.",
                         "v 没有除以它的范数：w = g * v。应把每个输出单元的 v 除以它的欧几里得范数。",
                         lambda v, g: g * v),
    "wrong_axis": ("the norm is taken over the wrong axis (down each column, dim 0). Weight "
                   "Normalization has one norm per output unit: over every dim except dim 0 "
                   "(torch's dim=0 is the dim that is kept).",
                   "在错误的轴上求范数（沿每一列，即第 0 维）。权重归一化对每个输出单元各有一个范数："
                   "在除第 0 维以外的所有维度上求（torch 的 dim=0 指的是保留的那一维）。",
                   lambda v, g: g * v / v.norm(dim=0, keepdim=True)),
    "whole_tensor_norm": ("one norm for the whole tensor (torch's dim=None) instead of one per "
                          "output unit.",
                          "对整个张量只求了一个范数（相当于 torch 的 dim=None），而不是每个输出单元一个。",
                          lambda v, g: g * v / v.norm()),
    "last_dim_only": ("the norm is over the last dim only: for a conv kernel (out, in, kH, kW) "
                      "that is one norm per kernel row. Reduce over every dim except dim 0, "
                      "e.g. v.flatten(1).norm(dim=1).",
                      "只在最后一维上求范数：对卷积核 (out, in, kH, kW) 来说，这是每一行各一个范数。"
                      "应在除第 0 维以外的所有维度上求，例如 v.flatten(1).norm(dim=1)。",
                      lambda v, g: g * v / v.norm(dim=-1, keepdim=True)),
    "squared_norm": ("divided by the squared norm ||v||^2 instead of ||v||.",
                     "除以了范数的平方 ||v||^2，而不是 ||v||。",
                     lambda v, g: g * v / _row_norm(v) ** 2),
    "abs_g": ("|g| used instead of g: the gain keeps its sign (w = g v / ||v|| can point against "
              "v); ||w|| = |g|, but w itself is g * v / ||v||.",
              "用了 |g| 而不是 g：增益保留符号（w = g v / ||v|| 可以与 v 反向）；||w|| = |g|，但 w 本身是 "
              "g * v / ||v||。",
              lambda v, g: g.abs() * v / _row_norm(v)),
}


def _keepdim_hint(text: str) -> str | None:
    return "missing_keepdim" if "must match the size" in text else None


_KEEPDIM = ("a norm without keepdim=True (or not reshaped): it cannot broadcast against v, or, "
            "for a square weight, broadcasts along the wrong dim. Keep the reduced dims: shape "
            "(out, 1) for a Linear weight, (out, 1, 1, 1) for a kernel.",
            "求范数时没有 keepdim=True（也没有 reshape）：无法与 v 广播，或者（方阵权重时）沿错误的维度广播。"
            "应保留被归约的维度：Linear 权重为 (out, 1)，卷积核为 (out, 1, 1, 1)。",
            lambda v, g: g * v / v.flatten(1).norm(dim=1) if v.dim() == 2 and v.shape[0] == v.shape[1] else None)


def check_weight_norm(fn: Callable[[Tensor, Tensor], Tensor]) -> CheckResult:
    r"""Check ``fn(v, g)``: Weight Normalization's weight :math:`w = g\,v/\lVert v\rVert`
    with one norm per output unit (over every dim of ``v`` except dim 0), ``g`` of shape
    (out, 1, ..., 1) as torch's ``original0``. Reference: ``torch._weight_norm(v, g, 0)``.
    Cases: Linear weights (3, 5) and (4, 4), a conv kernel (4, 2, 3, 3), a negative g; rows
    of very different norms, so that a missing or misplaced norm shows. Recognises: g
    forgotten, no normalisation, the wrong axis, one norm for the whole tensor, the last
    dim only, the squared norm, a norm without keepdim."""
    mistakes = {**_WN_MISTAKES, "missing_keepdim": _KEEPDIM}
    return _check("weight_norm", fn, _wn_cases(), lambda v, g: torch._weight_norm(v, g, 0),
                  mistakes, _keepdim_hint, ("v", "g"))


# --------------------------------------------------------------------------------------
# Weight Normalization: the gradient with respect to v
# --------------------------------------------------------------------------------------
def _autograd_grad_v(grad_w: Tensor, v: Tensor, g: Tensor) -> Tensor:
    v = v.detach().clone().requires_grad_()
    w = torch._weight_norm(v, g, 0)
    return torch.autograd.grad(w, v, grad_w)[0]


def _project(grad_w: Tensor, v: Tensor, sign: float = -1.0) -> Tensor:
    """grad_w minus (plus, for sign=+1) its component along v, per output unit."""
    unit = v / _row_norm(v)
    along = (grad_w * unit).flatten(1).sum(1).reshape((-1,) + (1,) * (v.dim() - 1))
    return grad_w + sign * along * unit


def _grad_cases() -> list[_Case]:
    g = _gen(12)
    cases = []
    for name, shape in [("Linear weight (out, in) = (3, 5)", (3, 5)),
                        ("Conv2d kernel (out, in, kH, kW) = (3, 2, 2, 2)", (3, 2, 2, 2)),
                        ("Linear weight (out, in) = (4, 4), square", (4, 4))]:
        scales = torch.tensor([0.4, 3.0, 1.0, 6.0], dtype=torch.float64)[:shape[0]]
        v = torch.randn(shape, generator=g, dtype=torch.float64) * scales.reshape(
            (-1,) + (1,) * (len(shape) - 1))
        gain = torch.rand((shape[0],) + (1,) * (len(shape) - 1), generator=g,
                          dtype=torch.float64) * 2 + 0.5
        grad_w = torch.randn(shape, generator=g, dtype=torch.float64)
        cases.append(_Case(name, (grad_w, v, gain)))
    v = torch.randn(3, 4, generator=g, dtype=torch.float64) * torch.tensor([[0.5], [2.0], [1.0]],
                                                                           dtype=torch.float64)
    cases.append(_Case("Linear weight (3, 4), a negative g",
                       (torch.randn(3, 4, generator=g, dtype=torch.float64), v,
                        torch.tensor([[1.5], [-2.0], [-0.7]], dtype=torch.float64))))
    return cases


_GRAD_MISTAKES = {
    "no_projection": ("the projection is missing: (g/||v||) * grad_w keeps the component along "
                      "w. Subtract it: (g/||v||) * (grad_w - (grad_w . w_hat) w_hat), w_hat = "
                      "v/||v||; the result is orthogonal to v.",
                      "缺少投影：(g/||v||) * grad_w 保留了沿 w 方向的分量。应减去它："
                      "(g/||v||) * (grad_w - (grad_w · w_hat) w_hat)，其中 w_hat = v/||v||；"
                      "结果与 v 正交。",
                      lambda gw, v, g: g / _row_norm(v) * gw),
    "no_scale": ("the factor g/||v|| is missing: the projected grad_w alone is not the "
                 "gradient with respect to v.",
                 "缺少系数 g/||v||：只有投影后的 grad_w 还不是对 v 的梯度。",
                 lambda gw, v, g: _project(gw, v)),
    "forgot_g": ("g forgotten in the factor: (1/||v||) * projected grad_w. The factor is "
                 "g/||v||.",
                 "系数中忘了 g：(1/||v||) * 投影后的 grad_w。系数应为 g/||v||。",
                 lambda gw, v, g: _project(gw, v) / _row_norm(v)),
    "squared_norm": ("the factor g/||v||^2 instead of g/||v||.",
                     "系数写成了 g/||v||^2，而不是 g/||v||。",
                     lambda gw, v, g: g / _row_norm(v) ** 2 * _project(gw, v)),
    "projection_sign": ("the component along w is added instead of subtracted: "
                        "(I + w w^T/||w||^2) instead of (I - w w^T/||w||^2).",
                        "沿 w 的分量被加上而不是减去：写成了 (I + w w^T/||w||^2)，"
                        "应为 (I - w w^T/||w||^2)。",
                        lambda gw, v, g: g / _row_norm(v) * _project(gw, v, +1.0)),
    "abs_g": ("|g| used instead of g in the factor: the gradient is (g/||v||) times the projected "
              "grad_w, with g's sign (a negative g flips it).",
              "系数中用了 |g| 而不是 g：梯度是 (g/||v||) 乘以投影后的 grad_w，保留 g 的符号（g 为负时梯度反向）。",
              lambda gw, v, g: g.abs() / _row_norm(v) * _project(gw, v)),
    "wrong_axis": ("the norms and projections are per column (dim 0) instead of per output "
                   "unit (over every dim except dim 0).",
                   "范数和投影按列（第 0 维）计算了，而应按输出单元计算（在除第 0 维以外的所有维度上）。",
                   lambda gw, v, g: g / v.norm(dim=0, keepdim=True) * (
                       gw - (gw * v).sum(0, keepdim=True) * v / (v * v).sum(0, keepdim=True))),
}


def check_weight_norm_grad(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> CheckResult:
    r"""Check ``fn(grad_w, v, g)``: the gradient with respect to ``v`` of
    :math:`w = g\,v/\lVert v\rVert` (one norm per output unit), given
    :math:`\nabla_w L` = ``grad_w``:

    .. math:: \nabla_v L = \frac{g}{\lVert v\rVert}\Big(I - \frac{w w^\top}{\lVert w\rVert^2}\Big)\nabla_w L .

    Reference: autograd through ``torch._weight_norm``. Cases: Linear weights (3, 5) and
    (4, 4), a conv kernel (3, 2, 2, 2), rows of very different norms, and a (3, 4) weight
    with negative gains. The learner's function runs with autograd enabled, so an answer
    that differentiates ``g * v / ||v||`` itself is accepted. Recognises: the projection
    missing, the factor missing, g forgotten, the squared norm, the projection's sign, |g|
    for g, per-column norms, a norm without keepdim."""
    mistakes = {**_GRAD_MISTAKES, "missing_keepdim": _KEEPDIM}
    return _check("weight_norm_grad_v", fn, _grad_cases(), _autograd_grad_v, mistakes,
                  _keepdim_hint, ("grad_w", "v", "g"))


# --------------------------------------------------------------------------------------
# Spectral normalisation: one step of the power iteration
# --------------------------------------------------------------------------------------
def _power_reference(w: Tensor, v: Tensor):
    """torch's order (``_SpectralNorm._power_method`` then ``forward``)."""
    u = F.normalize(torch.mv(w, v), dim=0, eps=1e-12)
    v = F.normalize(torch.mv(w.T, u), dim=0, eps=1e-12)
    return u, v, torch.vdot(u, torch.mv(w, v))


def _power_cases() -> list[_Case]:
    g = _gen(13)
    cases = []
    for name, shape in [("W (out, in) = (5, 3)", (5, 3)), ("W (out, in) = (4, 4), square", (4, 4)),
                        ("W (out, in) = (3, 6)", (3, 6))]:
        w = torch.randn(shape, generator=g, dtype=torch.float64) * 2.0
        v = torch.randn(shape[1], generator=g, dtype=torch.float64)
        cases.append(_Case(name, (w, v / v.norm())))
    return cases


def _unnormalised(w, v):
    u = w @ v
    v2 = w.T @ u
    return u, v2, u @ (w @ v2)


def _transposed(w, v):
    u = F.normalize(w.T @ v, dim=0)
    v2 = F.normalize(w @ u, dim=0)
    return u, v2, u @ (w.T @ v2)


def _stale_sigma(w, v):
    u = F.normalize(w @ v, dim=0)
    v2 = F.normalize(w.T @ u, dim=0)
    return u, v2, u @ (w @ v)


def _frobenius(w, v):
    u, v2, _ = _power_reference(w, v)
    return u, v2, torch.linalg.matrix_norm(w)


_POWER_MISTAKES = {
    "no_normalize": ("u and v are not normalised: divide W v and W^T u by their norms, "
                     "otherwise u^T W v is not an estimate of the largest singular value.",
                     "u 和 v 没有归一化：应把 W v 和 W^T u 除以各自的范数，否则 u^T W v 不是最大奇异值的估计。",
                     _unnormalised),
    "transposed": ("W and W^T swapped: u lives in the output space, u = normalize(W v); "
                   "v in the input space, v = normalize(W^T u).",
                   "W 与 W^T 用反了：u 属于输出空间，u = normalize(W v)；v 属于输入空间，v = normalize(W^T u)。",
                   _transposed),
    "stale_sigma": ("sigma computed with the old v: torch computes sigma = u^T W v after "
                    "updating both u and v.",
                    "sigma 用旧的 v 计算了：torch 在 u 和 v 都更新之后才计算 sigma = u^T W v。",
                    _stale_sigma),
    "v_not_updated": ("v is returned unchanged: the step also updates v = normalize(W^T u), and "
                      "sigma = u^T W v uses the new v.",
                      "返回的 v 没有更新：这一步还要更新 v = normalize(W^T u)，sigma = u^T W v 用的是新的 v。",
                      lambda w, v: (F.normalize(w @ v, dim=0), v, F.normalize(w @ v, dim=0) @ (w @ v))),
    "sigma_norm_wv": ("sigma taken as ||W v'|| with the updated v': torch's estimate is u^T W v' "
                      "(equal to ||W^T u||), which weighs W v' by the new u.",
                      "sigma 取成了用更新后的 v' 算出的 ||W v'||：torch 的估计是 u^T W v'（等于 ||W^T u||），"
                      "即用新的 u 对 W v' 加权。",
                      lambda w, v: (*_power_reference(w, v)[:2], (w @ _power_reference(w, v)[1]).norm())),
    "exact_sigma": ("sigma is the exact largest singular value (an SVD or matrix_norm(ord=2)): one "
                    "step of the power iteration returns the estimate u^T W v', which is what "
                    "spectral_norm divides by.",
                    "sigma 取成了精确的最大奇异值（SVD 或 matrix_norm(ord=2)）：幂迭代一步返回的是估计值 u^T W v'，"
                    "spectral_norm 正是除以这个估计值。",
                    lambda w, v: (*_power_reference(w, v)[:2], torch.linalg.matrix_norm(w, ord=2))),
    "frobenius": ("the Frobenius norm instead of the spectral norm: ||W||_F is the root of the "
                  "sum of all squared singular values, not the largest one.",
                  "用了 Frobenius 范数而不是谱范数：||W||_F 是所有奇异值平方和的平方根，而不是最大的奇异值。",
                  _frobenius),
}


def _shape_error(text: str) -> str | None:
    return "transposed" if ("size mismatch" in text or "cannot be multiplied" in text
                            or "mat1 and mat2" in text) else None


def check_power_iteration(fn: Callable[[Tensor, Tensor], tuple]) -> CheckResult:
    r"""Check ``fn(W, v)`` returning ``(u, v, sigma)``: one step of the power iteration in
    torch's order,

    .. math:: u = \frac{W v}{\lVert W v\rVert},\quad v' = \frac{W^\top u}{\lVert W^\top u\rVert},
              \quad \sigma = u^\top W v' .

    Reference: ``F.normalize``, ``torch.mv`` and ``torch.vdot`` in the order of torch's
    ``_SpectralNorm``. ``sigma`` may be a 0-d tensor, a one-element tensor or a Python
    float. Cases: W (5, 3), (4, 4) and (3, 6). Recognises: no normalisation,
    W and W^T swapped (a shape error on non-square W), sigma from the old v, the Frobenius
    norm."""
    return _check("power_iteration_step", fn, _power_cases(), _power_reference,
                  _POWER_MISTAKES, _shape_error, ("W", "v"))
