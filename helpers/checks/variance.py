r"""The checker of lesson 07's variance exercise: ``fn(x)`` returns the biased variance over
the last dim of a float32 (rows, d) tensor, in float32, accurate on data far from zero.
Lesson 07, section 6 and its exercise."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..functional import centred_moments
from .engine import Case, CheckResult, generator, mistakes, randn, run_cases

__all__ = ["check_variance"]


def _variance64(x: Tensor, correction: int = 0) -> Tensor:
    """The variance over the last dim, in float64 (two passes), divided by n - correction."""
    _, _, var = centred_moments(x.double(), [-1])
    n = x.shape[-1]
    return var.squeeze(-1) * (n / (n - correction))


def check_variance(fn: Callable[[Tensor], Tensor], shift: float = 1e3, tol: float = 2e-4, *,
                   title: str = "variance") -> CheckResult:
    r"""Check ``fn(x) -> var``: the biased variance :math:`\frac{1}{d}\sum_i (x_i - \bar x)^2`
    over the last dim of a float32 (rows, d) input, returned in float32 with shape (rows,),
    within relative error ``tol`` of the float64 value. Cases: data near zero (8 values a
    row: dividing by d - 1 is off by 8/7), and 16 rows of 1024 values shifted by ``shift``,
    where :math:`\overline{x^2} - \bar x^2` cancels in float32. Lesson 07, exercise."""
    g = generator(1)
    cases = [
        Case("(4, 8), no shift", (randn(4, 8, g=g),), tol, 0.0),
        Case(f"(16, 1024), x = {shift:g} + N(0, 1)", (randn(16, 1024, g=g, offset=shift),), tol,
             0.0, hint="one_pass_variance", report_error=False),
    ]
    catalogue = mistakes({"unbiased_variance": lambda x: _variance64(x, correction=1),
                          "std_not_variance": lambda x: _variance64(x).sqrt(),
                          "unbiased_std": lambda x: _variance64(x, correction=1).sqrt()},
                         extra={"std_not_variance": (
                             "the standard deviation is returned, not the variance: drop the square root.",
                             "返回的是标准差而不是方差：去掉平方根。"),
                             "unbiased_std": (
                             "the unbiased standard deviation (x.std()) is returned: the exercise asks "
                             "for the biased variance, mean((x - mean)**2), without a square root.",
                             "返回的是无偏标准差（x.std()）：题目要求有偏方差 mean((x - mean)**2)，不开平方。")})
    return run_cases(title, fn, cases, lambda x: _variance64(x).float(), catalogue,
                     against=("the float64 variance", "float64 下算出的方差"), names=("x",))
