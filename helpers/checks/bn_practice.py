r"""Exercise checkers of lesson 10 (BatchNorm in practice).

- :func:`check_weight_decay_groups`: ``fn(model, weight_decay)`` returns optimiser parameter
  groups that decay weight matrices and kernels but not biases, normalisation gains and
  shifts, or other 1-D and 0-D parameters (timm's rule).
- :func:`check_frozen_batch_norm`: ``fn(x, weight, bias, running_mean, running_var, eps)``
  computes a frozen BatchNorm, :math:`x\,s + (b - \hat\mu s)`, :math:`s = w/\sqrt{\hat\sigma^2 +
  \epsilon}` (torchvision's ``FrozenBatchNorm2d``).
- :func:`check_batch_renorm`: ``fn(x, running_mean, running_std, weight, bias, rmax, dmax,
  eps)`` computes Batch Renormalization's training-mode output with r and d clipped and
  treated as constants in the backward pass (Ioffe 2017, Algorithm 1).

Each returns a :class:`helpers.checks.CheckResult` with a message in English, then Chinese,
and the key of the mistake it recognised. A checker never prints, never raises on the
learner's code (an exception there is a diagnosis), and leaves the global RNG as it was: its
inputs come from its own ``torch.Generator`` and the learner's function runs inside
``torch.random.fork_rng``. Used in lesson 10.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .engine import NO_MATCH, CheckResult, case_numel, error_line, error_text, show_case

__all__ = ["check_weight_decay_groups", "check_frozen_batch_norm", "check_batch_renorm"]


def _raised(e: Exception) -> str:
    return error_text(e) + error_line(e)


def _raised_zh(e: Exception) -> str:
    line = error_line(e)
    return error_text(e) + (f"（第 {line[7:-1]} 行）" if line else "")


def _call(fn, *args):
    """Run the learner's function without touching the global RNG; return (output, error,
    the error in the Chinese message: torch's text verbatim)."""
    try:
        with torch.random.fork_rng(devices=[]):
            return fn(*args), None, None
    except Exception as e:  # the learner's bug: a diagnosis, never raised
        return None, _raised(e), _raised_zh(e)


def _fail(title: str, what_en: str, what_zh: str, key: str | None, texts: dict,
          cases: list[str], shown: tuple[str, str] | None = None) -> CheckResult:
    if key is None:
        en, zh = NO_MATCH
        if shown:
            en, zh = f"{en}\n{shown[0]}", f"{zh}\n{shown[1]}"
    else:
        en, zh = texts[key]
        en, zh = f"Likely mistake: {en}", f"可能的错误：{zh}"
    return CheckResult(False, f"✘ {title}: {what_en}\n{en}\n✘ {title}：{what_zh}\n{zh}", key,
                       cases)


# --------------------------------------------------------------------------------------
# weight-decay parameter groups
# --------------------------------------------------------------------------------------
class _Mixed(nn.Module):
    """A small model holding every kind of parameter the rule must sort."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)            # kernel (decay), bias (no)
        self.bn = nn.BatchNorm2d(4)                          # gain, shift (no)
        self.embed = nn.Embedding(10, 4)                     # 2-D table (decay)
        self.ln = nn.LayerNorm(4)                            # gain, shift (no)
        self.proj = nn.Linear(4, 4, bias=False)              # matrix (decay)
        self.norm = nn.GroupNorm(2, 4)                       # gain, shift (no)
        self.scale = nn.Parameter(torch.tensor(0.5))         # scalar (no)
        self.head = nn.Linear(4, 3)                          # matrix (decay), bias (no)
        self.frozen = nn.Linear(4, 4)                        # not trainable: left out
        self.frozen.requires_grad_(False)


def _kind(name: str, p: Tensor) -> str:
    if p.ndim >= 2:
        return "matrix"
    if name.startswith("bn."):
        return "batchnorm"
    if name.startswith(("ln.", "norm.")):
        return "other_norm"
    if p.ndim == 0:
        return "scalar"
    return "bias"


_WD_TEXTS = {
    "bad_format": (
        "return a list of dicts, each with a 'params' list and a 'weight_decay' value, as "
        "torch.optim optimisers accept.",
        "应返回由字典组成的列表，每个字典含 'params' 列表和 'weight_decay' 数值，与 torch.optim 优化器接受的格式一致。"),
    "duplicate_or_missing": (
        "every trainable parameter must be in exactly one group (an optimiser refuses a "
        "parameter that appears twice; a missing one is never trained).",
        "每个可训练参数必须恰好出现在一个组中（同一参数出现两次优化器会报错；遗漏的参数不会被训练）。"),
    "decay_everything": (
        "weight decay on every parameter. Biases and normalisation gains/shifts (every 1-D or "
        "0-D parameter) go into a group with weight_decay=0.",
        "对所有参数都施加了权重衰减。偏置和归一化层的增益/平移（所有一维或零维参数）应放进 weight_decay=0 的组。"),
    "inverted": (
        "the groups are swapped: weight matrices and kernels (ndim >= 2) get the decay, "
        "1-D and 0-D parameters do not.",
        "两组弄反了：应对权重矩阵和卷积核（ndim >= 2）施加衰减，一维和零维参数不衰减。"),
    "norm_gains_decayed": (
        "only the biases are excluded: normalisation gains (BatchNorm/LayerNorm/GroupNorm "
        "weight) are 1-D too and should not be decayed. Test p.ndim <= 1, not the name "
        "'bias' alone.",
        "只排除了偏置：归一化层的增益（BatchNorm/LayerNorm/GroupNorm 的 weight）也是一维参数，"
        "不应衰减。应判断 p.ndim <= 1，而不只看名字里的 'bias'。"),
    "only_batchnorm_excluded": (
        "the exclusion finds BatchNorm by its name or type only: LayerNorm and GroupNorm "
        "parameters (and scalar parameters) are still decayed. Use p.ndim <= 1 (timm's rule), "
        "which catches every norm layer whatever it is called.",
        "只按名字或类型找到了 BatchNorm：LayerNorm、GroupNorm 的参数（以及标量参数）仍被衰减。"
        "应使用 p.ndim <= 1（timm 的规则），无论层叫什么名字都能识别。"),
    "matrix_not_decayed": (
        "some weight matrices, kernels or embedding tables (ndim >= 2) got no weight decay; "
        "the rule decays every parameter with ndim >= 2 (nanoGPT: p.dim() >= 2).",
        "部分权重矩阵、卷积核或嵌入表（ndim >= 2）没有权重衰减；规则是对所有 ndim >= 2 的参数衰减"
        "（nanoGPT：p.dim() >= 2）。"),
    "wrong_value": (
        "the decayed group does not carry the weight_decay value passed in (or the other "
        "group is not 0).",
        "衰减组的 weight_decay 不是传入的值（或不衰减组的值不为 0）。"),
}


def check_weight_decay_groups(fn: Callable[[nn.Module, float], list]) -> CheckResult:
    r"""Check ``fn(model, weight_decay)`` -> list of optimiser groups ``{"params": [...],
    "weight_decay": value}``: every trainable parameter in exactly one group; decay
    ``weight_decay`` for parameters with ``ndim >= 2`` (weight matrices, conv kernels,
    embeddings), 0 for 1-D and 0-D ones (biases, BatchNorm/LayerNorm/GroupNorm gains and
    shifts, scalars). The test model holds one of each, names its norms ``bn``, ``ln`` and
    ``norm``, and has a frozen layer (which may be left out). Used in lesson 10."""
    title = "weight_decay_groups"
    with torch.random.fork_rng(devices=[]):  # the layers' initialisation draws
        torch.manual_seed(0)
        model, wd = _Mixed().double(), 0.05
    groups, err, err_zh = _call(fn, model, wd)
    if err is not None:
        return _fail(title, f"your function raised {err}.", f"你的函数抛出异常 {err_zh}。",
                     None, _WD_TEXTS, ["call"])
    try:
        groups = list(groups)
        assigned: dict[int, list[float]] = {}
        for g in groups:
            value = float(g["weight_decay"])
            for p in g["params"]:
                assigned.setdefault(id(p), []).append(value)
    except Exception as e:  # a malformed return value
        return _fail(title, f"the groups could not be read ({_raised(e)}).",
                     f"无法读取返回的参数组（{_raised_zh(e)}）。", "bad_format", _WD_TEXTS, ["format"])
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    wrong_count = [n for n, p in named if len(assigned.get(id(p), [])) != 1]
    if wrong_count:
        return _fail(title, f"{len(wrong_count)} parameters are missing or repeated "
                            f"(first: '{wrong_count[0]}').",
                     f"有 {len(wrong_count)} 个参数缺失或重复（首个：'{wrong_count[0]}'）。",
                     "duplicate_or_missing", _WD_TEXTS, wrong_count)
    got = {n: assigned[id(p)][0] for n, p in named}
    expected = {n: (wd if p.ndim >= 2 else 0.0) for n, p in named}
    wrong = [n for n in got if got[n] != expected[n]]
    if not wrong:
        return CheckResult(True, f"✔ {title}: all {len(named)} trainable parameters are in the "
                                 f"right group. / 全部 {len(named)} 个可训练参数都分在了正确的组。")
    kinds = {n: _kind(n, p) for n, p in named}
    decayed = {n for n in got if got[n] != 0.0}
    bad_kinds = {kinds[n] for n in wrong}
    values = {got[n] for n in decayed}
    if decayed and values != {wd} and {kinds[n] for n in decayed} == {"matrix"}:
        key = "wrong_value"
    elif all(n in decayed for n in got):
        key = "decay_everything"
    elif all((n in decayed) != (kinds[n] == "matrix") for n in got):
        key = "inverted"
    elif "matrix" in bad_kinds:
        key = "matrix_not_decayed"
    elif "batchnorm" in bad_kinds and "bias" not in bad_kinds:
        key = "norm_gains_decayed"
    elif "batchnorm" not in bad_kinds and bad_kinds & {"other_norm", "scalar"}:
        key = "only_batchnorm_excluded"
    else:
        key = None
    return _fail(title, f"{len(wrong)} of {len(named)} parameters have the wrong weight decay "
                        f"(first: '{wrong[0]}', {got[wrong[0]]} instead of {expected[wrong[0]]}).",
                 f"{len(named)} 个参数中有 {len(wrong)} 个权重衰减不对（首个：'{wrong[0]}'，"
                 f"应为 {expected[wrong[0]]}，实为 {got[wrong[0]]}）。", key, _WD_TEXTS, wrong)


# --------------------------------------------------------------------------------------
# frozen BatchNorm
# --------------------------------------------------------------------------------------
_FROZEN_TEXTS = {
    "batch_statistics": (
        "the batch's own mean and variance are used. A frozen BatchNorm uses the stored "
        "running_mean and running_var, whatever the batch holds.",
        "使用了当前批的均值和方差。冻结的 BatchNorm 无论输入是什么，都使用保存的 running_mean 和 running_var。"),
    "eps_outside_sqrt": (
        "eps outside the square root: weight / (sqrt(running_var) + eps). It is "
        "weight * (running_var + eps).rsqrt().",
        "eps 放在了平方根外面：weight / (sqrt(running_var) + eps)。正确的是 weight * (running_var + eps).rsqrt()。"),
    "eps_missing": (
        "eps is left out: weight * running_var.rsqrt(). That is torchvision's FrozenBatchNorm2d "
        "before version 0.9 (vision PR 2933), which is why torchvision still loads its v1 COCO "
        "detection weights with overwrite_eps(model, 0.0). The layer's eps belongs inside the "
        "root: weight * (running_var + eps).rsqrt().",
        "漏掉了 eps：weight * running_var.rsqrt()。这是 torchvision 0.9 之前（vision PR 2933）的 "
        "FrozenBatchNorm2d，所以 torchvision 至今在加载 v1 版 COCO 检测权重时要调用 overwrite_eps(model, 0.0)。"
        "该层的 eps 应放在根号里：weight * (running_var + eps).rsqrt()。"),
    "var_as_std": (
        "running_var used as a standard deviation (no square root): divide by "
        "sqrt(running_var + eps).",
        "把 running_var 当成了标准差（没有开平方）：应除以 sqrt(running_var + eps)。"),
    "mean_not_subtracted": (
        "the running mean is not subtracted: the shift is bias - running_mean * scale, "
        "not bias.",
        "没有减去滑动均值：平移项是 bias - running_mean * scale，而不是 bias。"),
    "affine_missing": (
        "weight and bias are not applied: the frozen layer still scales and shifts, "
        "y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.",
        "没有使用 weight 和 bias：冻结的层仍要缩放和平移，"
        "y = (x - running_mean) / sqrt(running_var + eps) * weight + bias。"),
    "channel_last": (
        "the per-channel vectors broadcast along the last dim. Reshape them to "
        "(1, C, 1, 1, ...): the channel is dim 1.",
        "逐通道的向量沿最后一维广播了。应 reshape 成 (1, C, 1, 1, ...)：通道在第 1 维。"),
    "buffers_modified": (
        "the function changed running_mean or running_var in place. A frozen BatchNorm "
        "never updates its statistics.",
        "函数原地修改了 running_mean 或 running_var。冻结的 BatchNorm 从不更新统计量。"),
}


def _frozen_ref(x, w, b, rm, rv, eps, *, batch=False, eps_out=False, no_sqrt=False,
                no_mean=False, last=False, no_affine=False):
    if no_affine:
        w, b = torch.ones_like(w), torch.zeros_like(b)
    shape = [1] * (x.dim() - 1) + [-1] if last else [1, -1] + [1] * (x.dim() - 2)
    if batch:
        dims = [0] + list(range(2, x.dim()))
        rm, rv = x.mean(dims), x.var(dims, unbiased=False)
    denom = rv.sqrt() + eps if eps_out else (rv + eps if no_sqrt else (rv + eps).sqrt())
    scale = w / denom
    shift = b if no_mean else b - rm * scale
    return x * scale.reshape(shape) + shift.reshape(shape)


def _run_cases(title, fn, cases, reference, mistakes, texts, *, grad=None, names=()):
    """Shared loop: ``cases`` = [(name, args)]; ``reference(*args)`` the expected output;
    ``mistakes`` = {key: buggy(*args)}; ``grad`` optional (name, args) -> extra check."""
    failures = []  # (name, what, what in Chinese, key, args, ref, out)
    for name, args in cases:
        clones = tuple(a.clone() if isinstance(a, Tensor) else a for a in args)
        ref = reference(*args)
        out, err, err_zh = _call(fn, *clones)
        if err is not None:
            failures.append((name, f"raised {err}", f"抛出异常 {err_zh}", None, args, ref, None))
            continue
        if not isinstance(out, Tensor) or out.shape != ref.shape:
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            failures.append((name, f"returned {shape}, expected shape {tuple(ref.shape)}",
                             f"返回了 {shape}，应为形状 {tuple(ref.shape)}", None, args, ref,
                             out if isinstance(out, Tensor) else None))
            continue
        changed = [a for a, c in zip(args, clones) if isinstance(a, Tensor) and a.dim() == 1
                   and not torch.equal(a, c)]
        if changed and "buffers_modified" in texts:
            failures.append((name, "changed its inputs in place", "原地修改了输入",
                             "buffers_modified", args, ref, out))
            continue
        out = out.detach().double()
        if torch.allclose(out, ref, rtol=1e-6, atol=1e-6):
            if grad is not None:
                bad = grad(name, args)
                if bad is not None:
                    failures.append((name, *bad, args, None, None))
            continue
        key = None
        for k, buggy in mistakes.items():
            try:
                b = buggy(*args)
            except Exception:
                continue
            if b is not None and b.shape == ref.shape and not torch.allclose(b, ref, 1e-6, 1e-6) \
                    and torch.allclose(out, b, rtol=1e-6, atol=1e-6):
                key = k
                break
        err_max = float(torch.nan_to_num((out - ref).abs(), nan=float("inf")).max())
        failures.append((name, f"max abs error {err_max:.3g}", f"最大绝对误差 {err_max:.3g}", key,
                         args, ref, out))
    if not failures:
        return CheckResult(True, f"✔ {title}: all {len(cases)} cases match. "
                                 f"/ 全部 {len(cases)} 个用例都正确。")
    keys = [f[3] for f in failures if f[3] is not None]
    key = max(keys, key=keys.count) if keys else None
    first = next(f for f in failures if key is None or f[3] == key)
    shown = None
    if key is None:
        small = [f for f in failures if f[5] is not None]
        if small:
            f = min(small, key=lambda f: case_numel(f[4]))
            shown = show_case(f[0], f[4], names, f[5], f[6])
    return _fail(title, f"{len(failures)} of {len(cases)} cases fail (first: '{first[0]}', "
                        f"{first[1]}).",
                 f"{len(cases)} 个用例中有 {len(failures)} 个不通过（首个：'{first[0]}'，{first[2]}）。",
                 key, texts, [f[0] for f in failures], shown)


def check_frozen_batch_norm(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(x, weight, bias, running_mean, running_var, eps)``: a frozen BatchNorm,
    per channel (dim 1), :math:`y = x\,s + (b - \hat\mu\,s)`, :math:`s = w\,(\hat\sigma^2 +
    \epsilon)^{-1/2}`, whatever the batch holds, without changing the buffers. The expected
    output is ``torch.nn.functional.batch_norm(..., training=False)``. Cases: (N, C), (N, C,
    H, W) with W = C (a channel-last broadcast still runs), running statistics far from the
    batch's, a tiny running variance (eps placement), float64 throughout. Used in lesson 10."""
    g = torch.Generator().manual_seed(10)

    def randn(*shape, scale=1.0, offset=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + offset

    def params(c, var_scale=1.0):
        return (torch.rand(c, generator=g, dtype=torch.float64) + 0.5, randn(c),
                randn(c, scale=2.0), (torch.rand(c, generator=g, dtype=torch.float64) + 0.5)
                * var_scale)

    cases = []
    for name, x, vs, eps in [("(N, C) = (8, 3)", randn(8, 3, scale=2.0, offset=1.0), 1.0, 1e-5),
                             ("(N, C, H, W) = (2, 3, 4, 3), W = C", randn(2, 3, 4, 3), 1.0, 1e-5),
                             ("batch far from the running statistics", randn(6, 4, 5, scale=5.0, offset=-3.0), 4.0, 1e-5),
                             ("tiny running_var ~ 1e-4, eps = 1e-3", randn(5, 2, 3, scale=0.01), 1e-4, 1e-3)]:
        w, b, rm, rv = params(x.shape[1], vs)
        cases.append((name, (x, w, b, rm, rv, eps)))

    def reference(x, w, b, rm, rv, eps):
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=False, eps=eps)

    mistakes = {
        "batch_statistics": lambda *a: _frozen_ref(*a, batch=True),
        "eps_outside_sqrt": lambda *a: _frozen_ref(*a, eps_out=True),
        "var_as_std": lambda *a: _frozen_ref(*a, no_sqrt=True),
        "eps_missing": lambda x, w, b, rm, rv, eps: _frozen_ref(x, w, b, rm, rv, 0.0),
        "affine_missing": lambda *a: _frozen_ref(*a, no_affine=True),
        "mean_not_subtracted": lambda *a: _frozen_ref(*a, no_mean=True),
        "channel_last": lambda *a: _frozen_ref(*a, last=True),
    }
    return _run_cases("frozen_batch_norm", fn, cases, reference, mistakes, _FROZEN_TEXTS,
                      names=("x", "weight", "bias", "running_mean", "running_var", "eps"))


# --------------------------------------------------------------------------------------
# Batch Renormalization
# --------------------------------------------------------------------------------------
_RENORM_TEXTS = {
    "r_d_not_detached": (
        "r and d carry gradients. The output is right but the backward pass is not: Batch "
        "Renorm treats r and d as constants (stop_gradient), e.g. compute them under "
        "torch.no_grad() or with .detach().",
        "r 和 d 带上了梯度。输出正确，但反向传播不对：Batch Renorm 把 r 和 d 当作常数（stop_gradient），"
        "例如在 torch.no_grad() 中计算，或使用 .detach()。"),
    "no_clipping": (
        "r and d are not clipped: r = clamp(sigma_B / sigma, 1/rmax, rmax), "
        "d = clamp((mu_B - mu) / sigma, -dmax, dmax).",
        "没有对 r 和 d 截断：r = clamp(sigma_B / sigma, 1/rmax, rmax)，d = clamp((mu_B - mu) / sigma, -dmax, dmax)。"),
    "d_not_clipped": (
        "r is clipped but d is not: d = clamp((mu_B - mu) / sigma, -dmax, dmax).",
        "截断了 r 却没有截断 d：d = clamp((mu_B - mu) / sigma, -dmax, dmax)。"),
    "r_inverted": (
        "r inverted: it is sigma_B / sigma (batch over running), so that "
        "(x - mu_B) / sigma_B * r = (x - mu_B) / sigma when unclipped.",
        "r 取了倒数：应为 sigma_B / sigma（批的除以滑动的），这样不截断时 (x - mu_B) / sigma_B * r = (x - mu_B) / sigma。"),
    "d_not_scaled": (
        "d not divided by the running sigma: d = (mu_B - mu) / sigma, in units of the "
        "running standard deviation.",
        "d 没有除以滑动标准差：d = (mu_B - mu) / sigma，以滑动标准差为单位。"),
    "unbiased_variance": (
        "unbiased batch variance (dividing by m - 1); Algorithm 1 uses the biased one: "
        "sigma_B = sqrt(eps + mean((x - mu_B)**2)).",
        "使用了无偏的批方差（除以 m - 1）；算法 1 用的是有偏方差：sigma_B = sqrt(eps + mean((x - mu_B)**2))。"),
    "std_as_variance": (
        "running_std is treated as a variance (its square root taken): it is already the running "
        "standard deviation sigma, used as it is in r = sigma_B / sigma and d = (mu_B - mu) / sigma.",
        "把 running_std 当成了方差（又开了平方根）：它本身就是滑动标准差 sigma，直接用于 "
        "r = sigma_B / sigma 和 d = (mu_B - mu) / sigma。"),
    "plain_batch_norm": (
        "r and d are missing (this is plain BatchNorm): x_hat = (x - mu_B) / sigma_B * r + d.",
        "缺少 r 和 d（这就是普通的 BatchNorm）：x_hat = (x - mu_B) / sigma_B * r + d。"),
}


def _renorm_ref(x, rm, rs, w, b, rmax, dmax, eps, *, detach=True, clip=True, invert=False,
                d_raw=False, unbiased=False, plain=False, std_as_var=False, clip_d=True):
    if std_as_var:  # running_std read as a variance: its square root taken
        rs = rs.sqrt()
    dims = [0] + list(range(2, x.dim()))
    sh = [1, -1] + [1] * (x.dim() - 2)
    mu = x.mean(dims)
    sigma = (x.var(dims, correction=int(unbiased)) + eps).sqrt()
    r = rs / sigma if invert else sigma / rs
    d = (mu - rm) if d_raw else (mu - rm) / rs
    if clip:
        r = r.clamp(1 / rmax, rmax)
        d = d.clamp(-dmax, dmax) if clip_d else d
    if detach:
        r, d = r.detach(), d.detach()
    x_hat = (x - mu.reshape(sh)) / sigma.reshape(sh)
    if not plain:
        x_hat = x_hat * r.reshape(sh) + d.reshape(sh)
    return x_hat * w.reshape(sh) + b.reshape(sh)


def check_batch_renorm(fn: Callable[..., Tensor]) -> CheckResult:
    r"""Check ``fn(x, running_mean, running_std, weight, bias, rmax, dmax, eps)``: Batch
    Renormalization's training-mode output (Ioffe 2017, Algorithm 1), per channel (dim 1):
    :math:`\sigma_B = \sqrt{\epsilon + \text{biased var}}`, :math:`r =
    \text{clip}_{[1/r_\max, r_\max]}(\sigma_B/\sigma)`, :math:`d = \text{clip}_{[-d_\max,
    d_\max]}((\mu_B - \mu)/\sigma)`, :math:`y = \gamma((x - \mu_B)/\sigma_B \cdot r + d) +
    \beta`, with r and d constants in the backward pass: the gradient with respect to x is
    compared too. Updating the running statistics is not required. Cases: r and d inside and
    outside their limits, rmax = 1 and dmax = 0 (BatchNorm), (N, C) and (N, C, H, W). Used in
    lesson 10."""
    g = torch.Generator().manual_seed(11)

    def randn(*shape, scale=1.0, offset=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + offset

    cases = []
    for name, x, rs_scale, rmax, dmax in [
            ("(N, C) = (16, 3), r and d inside their limits", randn(16, 3, scale=1.5, offset=0.5), 1.2, 3.0, 5.0),
            ("(N, C) = (8, 4), r and d clipped", randn(8, 4, scale=4.0, offset=3.0), 0.5, 2.0, 1.0),
            ("(N, C, H, W) = (2, 3, 4, 4), mixed", randn(2, 3, 4, 4, scale=2.0, offset=-1.0), 1.0, 1.5, 0.5),
            ("rmax = 1, dmax = 0 (BatchNorm)", randn(6, 3, scale=3.0, offset=2.0), 0.7, 1.0, 0.0)]:
        c = x.shape[1]
        rm = randn(c, scale=0.5)
        rs = (torch.rand(c, generator=g, dtype=torch.float64) + 0.5) * rs_scale * x.std()
        w = torch.rand(c, generator=g, dtype=torch.float64) + 0.5
        b = randn(c)
        cases.append((name, (x, rm, rs, w, b, rmax, dmax, 1e-5)))
    upstream = {name: torch.randn(args[0].shape, generator=g, dtype=torch.float64)
                for name, args in cases}

    def reference(*args):
        return _renorm_ref(*args).detach()

    def grad_check(name, args):
        def grad_of(f):
            x = args[0].clone().requires_grad_()
            rest = tuple(a.clone() if isinstance(a, Tensor) else a for a in args[1:])
            out = f(x, *rest)
            (gx,) = torch.autograd.grad((out * upstream[name]).sum(), x)
            return gx
        try:
            with torch.random.fork_rng(devices=[]):
                got = grad_of(fn)
        except Exception as e:
            return (f"backward raised {_raised(e)}", f"反向传播抛出异常 {_raised_zh(e)}", None)
        want = grad_of(_renorm_ref)
        if torch.allclose(got.double(), want, rtol=1e-6, atol=1e-6):
            return None
        undetached = grad_of(lambda *a: _renorm_ref(*a, detach=False))
        key = "r_d_not_detached" if torch.allclose(got.double(), undetached, 1e-6, 1e-6) else None
        err_max = float((got.double() - want).abs().max())
        return (f"the gradient with respect to x is off by up to {err_max:.3g}",
                f"对 x 的梯度最多偏差 {err_max:.3g}", key)

    mistakes = {
        "plain_batch_norm": lambda *a: _renorm_ref(*a, plain=True).detach(),
        "no_clipping": lambda *a: _renorm_ref(*a, clip=False).detach(),
        "r_inverted": lambda *a: _renorm_ref(*a, invert=True).detach(),
        "d_not_scaled": lambda *a: _renorm_ref(*a, d_raw=True).detach(),
        "unbiased_variance": lambda *a: _renorm_ref(*a, unbiased=True).detach(),
        "std_as_variance": lambda *a: _renorm_ref(*a, std_as_var=True).detach(),
        "d_not_clipped": lambda *a: _renorm_ref(*a, clip_d=False).detach(),
    }
    return _run_cases("batch_renorm", fn, cases, reference, mistakes, _RENORM_TEXTS,
                      grad=grad_check, names=("x", "running_mean", "running_std", "weight", "bias",
                                              "rmax", "dmax", "eps"))
