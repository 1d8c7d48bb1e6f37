"""Merging per-shard moments: lesson 08's ``check_merge`` (counts, means, M2s -> N, mean,
M2) and lesson 12's ``sync_bn_merge`` drill (counts, means, biased vars -> mean, var,
unbiased var)."""

import torch

from helpers import distributed as D

from . import PASS, Sol, collector

S = []


add = collector(S)


M = "check_merge"


@add(M, "the course's merge_moments")
def _(c, m, q):
    return D.merge_moments(c, m, q)


@add(M, "Chan et al. pairwise, folded over the shards")
def _(c, m, q):
    n, mean, m2 = c[0], m[0], q[0]
    for k in range(1, len(c)):
        nb, mb, qb = c[k], m[k], q[k]
        delta = mb - mean
        tot = n + nb
        mean = mean + delta * nb / tot
        m2 = m2 + qb + delta ** 2 * n * nb / tot
        n = tot
    return n, mean, m2


@add(M, "N as a Python float, vectorised")
def _(c, m, q):
    n = float(c.sum())
    mean = (c[:, None] * m).sum(0) / n
    return n, mean, q.sum(0) + (c[:, None] * (m - mean) ** 2).sum(0)


@add(M, "means averaged without counts", "unweighted_mean")
def _(c, m, q):
    mean = m.mean(0)
    return c.sum(), mean, q.sum(0) + (c[:, None] * (m - mean) ** 2).sum(0)


@add(M, "between-shard term left out", "missing_between_term")
def _(c, m, q):
    return c.sum(), (c[:, None] * m).sum(0) / c.sum(), q.sum(0)


@add(M, "the variance returned for M2", "variance_not_m2")
def _(c, m, q):
    n = c.sum()
    mean = (c[:, None] * m).sum(0) / n
    return n, mean, (q.sum(0) + (c[:, None] * (m - mean) ** 2).sum(0)) / n


@add(M, "N = number of shards", "shard_count_not_samples")
def _(c, m, q):
    mean = (c[:, None] * m).sum(0) / c.sum()
    return torch.tensor(float(len(c))), mean, q.sum(0) + (c[:, None] * (m - mean) ** 2).sum(0)


@add(M, "between term without the counts", "between_term_unweighted")
def _(c, m, q):
    mean = (c[:, None] * m).sum(0) / c.sum()
    return c.sum(), mean, q.sum(0) + ((m - mean) ** 2).sum(0)


@add(M, "M2 averaged over the shards", "m2_averaged")
def _(c, m, q):
    mean = (c[:, None] * m).sum(0) / c.sum()
    return c.sum(), mean, q.mean(0) + (c[:, None] * (m - mean) ** 2).sum(0)


@add(M, "returns (mean, M2) only", None)
def _(c, m, q):
    mean = (c[:, None] * m).sum(0) / c.sum()
    return mean, q.sum(0) + (c[:, None] * (m - mean) ** 2).sum(0)


@add(M, "a flipped sign in the between term", None)
def _(c, m, q):
    mean = (c[:, None] * m).sum(0) / c.sum()
    return c.sum(), mean, q.sum(0) - (c[:, None] * (m - mean) ** 2).sum(0)


Y = "drill:sync_bn_merge"


@add(Y, "model: within + between, weighted")
def _(c, m, v):
    n = c[:, None]
    tot = c.sum()
    mean = (n * m).sum(0) / tot
    var = (n * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var, var * tot / (tot - 1)


@add(Y, "E[x^2] - E[x]^2 from the per-shard second moments (float64)")
def _(c, m, v):
    tot = c.sum()
    mean = (c[:, None] * m).sum(0) / tot
    ex2 = (c[:, None] * (v + m ** 2)).sum(0) / tot
    var = ex2 - mean ** 2
    return mean, var, var * tot / (tot - 1)


@add(Y, "a Python loop over the processes")
def _(c, m, v):
    tot = float(c.sum())
    mean = sum(c[k] * m[k] for k in range(len(c))) / tot
    var = sum(c[k] * (v[k] + (m[k] - mean) ** 2) for k in range(len(c))) / tot
    return mean, var, var * tot / (tot - 1)


@add(Y, "means averaged without counts", "unweighted_mean")
def _(c, m, v):
    mean = m.mean(0)
    tot = c.sum()
    var = (c[:, None] * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var, var * tot / (tot - 1)


@add(Y, "between-group term left out", "missing_between_term")
def _(c, m, v):
    tot = c.sum()
    var = (c[:, None] * v).sum(0) / tot
    return (c[:, None] * m).sum(0) / tot, var, var * tot / (tot - 1)


@add(Y, "variances averaged", "averaged_variances")
def _(c, m, v):
    tot = c.sum()
    var = v.mean(0)
    return (c[:, None] * m).sum(0) / tot, var, var * tot / (tot - 1)


@add(Y, "unbiased equal to biased", "unbiased_not_corrected")
def _(c, m, v):
    tot = c.sum()
    mean = (c[:, None] * m).sum(0) / tot
    var = (c[:, None] * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var, var


@add(Y, "biased and unbiased swapped", "biased_unbiased_swapped")
def _(c, m, v):
    tot = c.sum()
    mean = (c[:, None] * m).sum(0) / tot
    var = (c[:, None] * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var * tot / (tot - 1), var


@add(Y, "between term without the counts", "between_term_unweighted")
def _(c, m, v):
    tot = c.sum()
    mean = (c[:, None] * m).sum(0) / tot
    var = ((c[:, None] * v).sum(0) + ((m - mean) ** 2).sum(0)) / tot
    return mean, var, var * tot / (tot - 1)


@add(Y, "unbiased with the number of processes", "unbiased_process_count")
def _(c, m, v):
    tot = c.sum()
    k = len(c)
    mean = (c[:, None] * m).sum(0) / tot
    var = (c[:, None] * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var, var * k / (k - 1)


@add(Y, "standard deviations returned", None)
def _(c, m, v):
    tot = c.sum()
    mean = (c[:, None] * m).sum(0) / tot
    var = (c[:, None] * (v + (m - mean) ** 2)).sum(0) / tot
    return mean, var.sqrt(), (var * tot / (tot - 1)).sqrt()


# the drill's checker, called directly, on the same solutions
SOLUTIONS = S + [Sol("check_sync_bn_merge", s.name, s.fn, s.expect) for s in S if s.target == Y]
