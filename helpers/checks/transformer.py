r"""The checker of lessons 05 and 06's block exercises: ``fn(x, attn, ffn, norm1, norm2)``
computes one Transformer block with the norms in a given place (Post-LN, Pre-LN), or, with a
sixth argument ``alpha``, a DeepNorm block. Lesson 05 (Post-LN, Pre-LN) and lesson 06
(DeepNorm), exercises."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..transformer import NORM_POSITIONS, Block
from .engine import Case, CheckResult, generator, mistakes, run_cases

__all__ = ["check_block_forward"]


def _placements(x: Tensor, a, f, n1, n2, al: float = 1.0) -> dict[str, Tensor]:
    """What a block's parts compute under each placement of the norms, and the usual slips."""
    def two(sub1, sub2):  # one sub-layer step applied twice: attention, then the FFN
        return sub2(sub1(x, a, n1), f, n2)

    def swapped(sub):  # the right placement with norm1 and norm2 exchanged
        return sub(sub(x, a, n2), f, n1)

    return {
        "post_norms_swapped": swapped(lambda y, g, n: n(y + g(y))),
        "pre_norms_swapped": swapped(lambda y, g, n: y + g(n(y))),
        "deepnorm_norms_swapped": swapped(lambda y, g, n: n(al * y + g(y))),
        "shortcut_from_normed": two(lambda y, g, n: n(y) + g(n(y)), lambda y, g, n: n(y) + g(n(y))),
        "ffn_first_post": n2(n1(x + f(x)) + a(n1(x + f(x)))),
        "ffn_first_pre": (lambda y: y + a(n2(y)))(x + f(n1(x))),
        "ffn_first_deepnorm": n2(al * n1(al * x + f(x)) + a(n1(al * x + f(x)))),
        "post": two(lambda y, g, n: n(y + g(y)), lambda y, g, n: n(y + g(y))),
        "pre": two(lambda y, g, n: y + g(n(y)), lambda y, g, n: y + g(n(y))),
        "no_residual": two(lambda y, g, n: n(g(y)), lambda y, g, n: n(g(y))),
        "no_residual_pre": two(lambda y, g, n: g(n(y)), lambda y, g, n: g(n(y))),
        "norm_on_branch_output": two(lambda y, g, n: y + n(g(y)), lambda y, g, n: y + n(g(y))),
        "deepnorm": two(lambda y, g, n: n(al * y + g(y)), lambda y, g, n: n(al * y + g(y))),
        "alpha_on_branch": two(lambda y, g, n: n(y + al * g(y)), lambda y, g, n: n(y + al * g(y))),
        "alpha_in_pre_ln": two(lambda y, g, n: al * y + g(n(y)), lambda y, g, n: al * y + g(n(y))),
    }


_TEXTS = {
    "post": ("the block computes Post-LN: LN(x + F(x)), the norm after the residual sum.",
             "这个块算的是 Post-LN：LN(x + F(x))，归一化在残差相加之后。"),
    "pre": ("the block computes Pre-LN: x + F(LN(x)), the norm inside the branch.",
            "这个块算的是 Pre-LN：x + F(LN(x))，归一化在分支里面。"),
    "no_residual": ("the residual connection is missing: LN(F(x)) (or F(LN(x)) in a Pre-LN block).",
                    "缺少残差连接：LN(F(x))（Pre-LN 块中为 F(LN(x))）。"),
    "norm_on_branch_output": ("the norm is applied to the branch output: x + LN(F(x)).",
                              "归一化作用在了分支的输出上：x + LN(F(x))。"),
    "deepnorm": ("the block computes DeepNorm: LN(alpha * x + F(x)), alpha on the shortcut.",
                 "这个块算的是 DeepNorm：LN(alpha * x + F(x))，alpha 乘在捷径上。"),
    "alpha_on_branch": ("alpha scales the branch instead of the shortcut: LN(x + alpha * F(x)).",
                        "alpha 乘在了分支上而不是捷径上：LN(x + alpha * F(x))。"),
    "alpha_in_pre_ln": ("alpha is put into a Pre-LN block: alpha * x + F(LN(x)).",
                        "把 alpha 用在了 Pre-LN 块里：alpha * x + F(LN(x))。"),
}
_TEXTS.update({
    "norms_swapped": ("norm1 and norm2 are exchanged: norm1 belongs to the attention sub-layer, "
                      "norm2 to the FFN (each has its own gain and bias).",
                      "norm1 和 norm2 用反了：norm1 属于注意力子层，norm2 属于前馈子层（各有自己的增益和偏置）。"),
    "shortcut_from_normed": ("the shortcut starts from the normalised x: LN(x) + F(LN(x)). In Pre-LN "
                             "the residual stream is never normalised: x + F(LN(x)).",
                             "捷径从归一化后的 x 出发：LN(x) + F(LN(x))。Pre-LN 中残差流本身从不归一化："
                             "x + F(LN(x))。"),
    "ffn_first": ("the FFN sub-layer comes first: a block applies attention, then the FFN.",
                  "前馈子层放在了前面：一个块先做注意力，再做前馈。"),
})
_SLIPS = {"post": ("pre", "no_residual", "norm_on_branch_output", "norms_swapped", "ffn_first"),
          "pre": ("post", "no_residual", "norm_on_branch_output", "norms_swapped",
                  "shortcut_from_normed", "ffn_first"),
          "deepnorm": ("alpha_on_branch", "alpha_in_pre_ln", "post", "norms_swapped", "ffn_first")}
_PER_POSITION = {"norms_swapped": "{}_norms_swapped", "ffn_first": "ffn_first_{}"}
_LABEL = {"post": "post-LN", "pre": "pre-LN", "deepnorm": "DeepNorm"}


def check_block_forward(fn: Callable[..., Tensor], norm_position: str, *,
                        title: str | None = None) -> CheckResult:
    r"""Check ``fn(x, attn, ffn, norm1, norm2)``: one block with ``norm_position``
    ``"post"`` (:math:`\mathrm{LN}(x + F(x))` per sub-layer) or ``"pre"``
    (:math:`x + F(\mathrm{LN}(x))`), sub-layers in the order attention then FFN; for
    ``"deepnorm"`` ``fn`` takes a sixth argument ``alpha`` (the checker passes 2.0) and should
    compute :math:`\mathrm{LN}(\alpha x + F(x))` per sub-layer. The parts come from the
    course's :class:`helpers.transformer.Block` with non-trivial float64 parameters; the
    result names the placement ``fn`` computes instead. Lessons 05 and 06, exercises."""
    if norm_position not in NORM_POSITIONS:
        raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {norm_position!r}")
    alpha = 2.0 if norm_position == "deepnorm" else 1.0
    g = generator(1)
    with torch.random.fork_rng(devices=[]):  # Block's initialisation draws from the global state
        block = Block(8, 2, 16, norm_position=norm_position, alpha=alpha).double()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 + 0.2)
    x = torch.randn(2, 5, 8, generator=g, dtype=torch.float64) * 3
    args = (x, block.attn, block.ffn, block.norm1, block.norm2)
    if norm_position == "deepnorm":
        args = args + (alpha,)
    cases = [Case("x of shape (2, 5, 8), float64", args, 1e-5, 1e-8)]

    cache: dict = {}

    def computed(*a):  # every placement, computed once for the case's (only) input
        if not cache:
            cache.update(_placements(*a))
        return cache

    def placement(key: str):
        key = _PER_POSITION.get(key, "{}").format(norm_position) if key in _PER_POSITION else key
        if key == "no_residual" and norm_position == "pre":
            return lambda *a: [computed(*a)["no_residual"], computed(*a)["no_residual_pre"]]
        return lambda *a: computed(*a)[key]

    catalogue = mistakes({k: placement(k) for k in _SLIPS[norm_position]}, extra=_TEXTS)
    with torch.no_grad():
        return run_cases(title or f"{_LABEL[norm_position]} block", fn, cases,
                         placement(norm_position), catalogue, against=("the course's Block", "课程的 Block"),
                         names=("x", "attn", "ffn", "norm1", "norm2", "alpha"))
