r"""The checker of lesson 08's merge exercise: ``fn(counts, means, m2s) -> (N, mean, M2)``
merges per-shard moments (Chan, Golub & LeVeque) into the moments of the union, as
synchronised BatchNorm does after its ``all_gather``. Lesson 08, exercise."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..functional import centred_moments
from .engine import Case, CheckResult, generator, mistakes, randn, run_cases

__all__ = ["check_merge"]

_PARTS = ("N", "mean", "M2")


def _part(out, part: str) -> Tensor:
    """One of the three results, as a float64 tensor (a learner may return Python numbers)."""
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise TypeError(f"expected a tuple (N, mean, M2), got {type(out).__name__}")
    return torch.as_tensor(out[_PARTS.index(part)], dtype=torch.float64)


def _merge(counts: Tensor, means: Tensor, m2s: Tensor, *, weighted: bool = True,
           between: bool = True, per_value: bool = False, shard_count: bool = False,
           between_unweighted: bool = False, m2_averaged: bool = False):
    r""":math:`N = \sum n_k`, :math:`\mu = \sum n_k\mu_k / N`,
    :math:`M_2 = \sum M_{2,k} + \sum n_k(\mu_k-\mu)^2`, with a switch for each slip."""
    n = torch.tensor(float(len(counts)), dtype=torch.float64) if shard_count else counts.sum()
    mean = (counts[:, None] * means).sum(0) / counts.sum() if weighted else means.mean(0)
    w = torch.ones_like(counts) if between_unweighted else counts
    within = m2s.mean(0) if m2_averaged else m2s.sum(0)
    m2 = within + ((w[:, None] * (means - mean).square()).sum(0) if between else 0)
    return n, mean, (m2 / n if per_value else m2)


def check_merge(fn: Callable, *, title: str = "merge") -> CheckResult:
    r"""Check ``fn(counts, means, m2s) -> (N, mean, M2)`` on three shards of uneven sizes
    (7, 2 and 4 samples of 3 channels, shard k centred near 5k), against the moments of the
    concatenated shards computed in float64; each of N, mean and M2 is a case. Mistakes:
    the shard means averaged without their counts, the between-shard term
    :math:`\sum_k n_k(\mu_k-\mu)^2` left out, the variance returned instead of :math:`M_2`.
    Lesson 08, exercise."""
    g = generator(0)
    shards = [randn(n, 3, g=g, scale=2.0, offset=5.0 * k, dtype=torch.float64)
              for k, n in enumerate((7, 2, 4))]
    counts = torch.tensor([float(len(s)) for s in shards], dtype=torch.float64)
    stats = [centred_moments(s, [0]) for s in shards]
    means = torch.stack([m.squeeze(0) for m, _, _ in stats])
    m2s = torch.stack([v.squeeze(0) * len(s) for (_, _, v), s in zip(stats, shards)])
    whole = torch.cat(shards)
    mean, _, var = centred_moments(whole, [0])
    truth = {"N": torch.tensor(float(len(whole)), dtype=torch.float64),
             "mean": mean.squeeze(0), "M2": var.squeeze(0) * len(whole)}
    cases = [Case(part, (counts, means, m2s, part), 1e-9, 1e-9) for part in _PARTS]

    def slip(**kw):
        return lambda c, m, s, part: _part(_merge(c, m, s, **kw), part)

    catalogue = mistakes({
        "unweighted_mean": slip(weighted=False),
        "missing_between_term": slip(between=False),
        "variance_not_m2": slip(per_value=True),
        "shard_count_not_samples": slip(shard_count=True),
        "between_term_unweighted": slip(between_unweighted=True),
        "m2_averaged": slip(m2_averaged=True),
    }, extra={
        "shard_count_not_samples": (
            "N counts the shards (3), not the samples: N = sum_k n_k.",
            "N 数的是分片个数（3），而不是样本数：N = sum_k n_k。"),
        "between_term_unweighted": (
            "the between-shard term is not weighted by the counts: sum_k n_k (mean_k - mean)^2, "
            "each shard's mean counts once per sample.",
            "分片之间的项没有按样本数加权：应为 sum_k n_k (mean_k - mean)^2，每个分片的均值按样本数计入。"),
        "m2_averaged": (
            "the shards' M2 are averaged: M2 is a sum of squared deviations, so the shards' M2 add up "
            "(sum_k M2_k), plus the between-shard term.",
            "对各分片的 M2 取了平均：M2 是偏差平方和，各分片的 M2 应相加（sum_k M2_k），再加上分片之间的项。"),
        "unweighted_mean": (
            "the shard means are averaged without their counts (the shards hold 7, 2 and 4 "
            "samples). Weight each by n_k / N: mean = sum_k n_k mean_k / N.",
            "直接平均了各分片的均值，没有按样本数加权（三个分片分别有 7、2、4 个样本）。"
            "应按 n_k / N 加权：mean = sum_k n_k mean_k / N。"),
        "missing_between_term": (
            "M2 sums the shards' M2 but leaves out the between-shard term "
            "sum_k n_k (mean_k - mean)^2: the spread of the shard means is part of the spread.",
            "M2 只加了各分片的 M2，漏掉了分片之间的项 sum_k n_k (mean_k - mean)^2："
            "分片均值之间的离散也是总离散的一部分。"),
        "variance_not_m2": (
            "M2 is the sum of squared deviations (N times the biased variance), not the variance.",
            "M2 是偏差平方和（N 乘以有偏方差），不是方差本身。"),
    })
    return run_cases(title, lambda c, m, s, part: _part(fn(c, m, s), part), cases,
                     lambda c, m, s, part: truth[part], catalogue,
                     against=("the moments of the concatenated shards", "拼接后全部数据的矩"),
                     names=("counts", "means", "m2s", "part"))
