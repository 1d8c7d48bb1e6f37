"""Lesson 07's variance exercise: ``check_variance(fn)``, fn(x) -> (rows,) biased variance."""

import torch

from helpers import bench_norms as B

from . import PASS, Sol

T = "check_variance"
S = []


def add(name, expect=PASS):
    def deco(fn):
        S.append(Sol(T, name, fn, expect))
        return fn
    return deco


@add("two passes: mean first, then the mean of the squares")
def _(x):
    mu = x.mean(-1, keepdim=True)
    return ((x - mu) ** 2).mean(-1)


@add("Welford, the course's own")
def _(x):
    return B.welford_moments(x)[1]


@add("torch.var(correction=0)")
def _(x):
    return torch.var(x, dim=-1, correction=0)


@add("float64 then back to float32")
def _(x):
    return x.double().var(-1, unbiased=False).float()


@add("shifted data: subtract the first value, then one pass")
def _(x):
    k = x[..., :1]
    d = x - k
    return (d * d).mean(-1) - d.mean(-1) ** 2


@add("unbiased variance", "unbiased_variance")
def _(x):
    return x.var(-1)


@add("one pass in float32", "one_pass_variance")
def _(x):
    return (x * x).mean(-1) - x.mean(-1) ** 2


@add("the standard deviation", "std_not_variance")
def _(x):
    return x.std(-1, unbiased=False)


@add("x.std() (unbiased standard deviation)", "unbiased_std")
def _(x):
    return x.std(-1)


@add("keepdim=True: shape (rows, 1)", "kept_reduced_dim")
def _(x):
    return x.var(-1, keepdim=True, unbiased=False)


@add("returns float64", "wrong_dtype")
def _(x):
    return x.double().var(-1, unbiased=False)


@add("one variance for the whole tensor", None)
def _(x):
    return x.var(unbiased=False)


@add("variance down the columns (dim 0)", None)
def _(x):
    return x.var(0, unbiased=False)


@add("the course's naive (one-pass) moments", "one_pass_variance")
def _(x):
    return B.naive_moments(x)[1]


SOLUTIONS = S
