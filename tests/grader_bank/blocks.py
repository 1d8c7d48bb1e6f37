"""The Transformer block of lessons 05 (Post-LN, Pre-LN) and 06 (DeepNorm):
``check_block_forward(fn, position)``."""

from . import PASS, Sol

T = "check_block_forward"
S = []


def add(position, name, expect=PASS):
    def deco(fn):
        S.append(Sol(T, f"{position}: {name}", fn, expect, {"norm_position": position}))
        return fn
    return deco


# ---------------------------------------------------------------- Post-LN
@add("post", "model: two lines")
def _(x, a, f, n1, n2):
    y = n1(x + a(x))
    return n2(y + f(y))


@add("post", "a loop over (sub-layer, norm) pairs")
def _(x, a, f, n1, n2):
    for sub, norm in ((a, n1), (f, n2)):
        x = norm(x + sub(x))
    return x


@add("post", "calls .forward explicitly, the residual kept in a variable")
def _(x, a, f, n1, n2):
    h = x
    h = n1.forward(h + a.forward(h))
    r = h
    return n2.forward(r + f.forward(h))


@add("post", "Pre-LN written instead", "pre")
def _(x, a, f, n1, n2):
    y = x + a(n1(x))
    return y + f(n2(y))


@add("post", "no residual", "no_residual")
def _(x, a, f, n1, n2):
    return n2(f(n1(a(x))))


@add("post", "norm on the branch output", "norm_on_branch_output")
def _(x, a, f, n1, n2):
    y = x + n1(a(x))
    return y + n2(f(y))


@add("post", "norm1 and norm2 swapped", "norms_swapped")
def _(x, a, f, n1, n2):
    y = n2(x + a(x))
    return n1(y + f(y))


@add("post", "FFN first", "ffn_first")
def _(x, a, f, n1, n2):
    y = n1(x + f(x))
    return n2(y + a(y))


# ---------------------------------------------------------------- Pre-LN
@add("pre", "model: two lines")
def _(x, a, f, n1, n2):
    y = x + a(n1(x))
    return y + f(n2(y))


@add("pre", "in-place style: x = x + ...")
def _(x, a, f, n1, n2):
    x = x + a(n1(x))
    x = x + f(n2(x))
    return x


@add("pre", "a loop over (sub-layer, norm) pairs")
def _(x, a, f, n1, n2):
    for sub, norm in ((a, n1), (f, n2)):
        x = x + sub(norm(x))
    return x


@add("pre", "Post-LN written instead", "post")
def _(x, a, f, n1, n2):
    y = n1(x + a(x))
    return n2(y + f(y))


@add("pre", "the shortcut taken from the normalised x", "shortcut_from_normed")
def _(x, a, f, n1, n2):
    h = n1(x)
    y = h + a(h)
    h = n2(y)
    return h + f(h)


@add("pre", "norm1 and norm2 swapped", "norms_swapped")
def _(x, a, f, n1, n2):
    y = x + a(n2(x))
    return y + f(n1(y))


@add("pre", "no residual", "no_residual")
def _(x, a, f, n1, n2):
    return f(n2(a(n1(x))))


@add("pre", "norm on the branch output (OLMo 2's placement)", "norm_on_branch_output")
def _(x, a, f, n1, n2):
    y = x + n1(a(x))
    return y + n2(f(y))


@add("pre", "FFN first", "ffn_first")
def _(x, a, f, n1, n2):
    y = x + f(n1(x))
    return y + a(n2(y))


@add("pre", "the first norm used for both sub-layers", None)
def _(x, a, f, n1, n2):
    y = x + a(n1(x))
    return y + f(n1(y))


# ---------------------------------------------------------------- DeepNorm
@add("deepnorm", "model: alpha on the shortcut")
def _(x, a, f, n1, n2, alpha):
    y = n1(alpha * x + a(x))
    return n2(alpha * y + f(y))


@add("deepnorm", "x * alpha, a loop")
def _(x, a, f, n1, n2, alpha):
    for sub, norm in ((a, n1), (f, n2)):
        x = norm(x * alpha + sub(x))
    return x


@add("deepnorm", "alpha on the branch", "alpha_on_branch")
def _(x, a, f, n1, n2, alpha):
    y = n1(x + alpha * a(x))
    return n2(y + alpha * f(y))


@add("deepnorm", "alpha in a Pre-LN block", "alpha_in_pre_ln")
def _(x, a, f, n1, n2, alpha):
    y = alpha * x + a(n1(x))
    return alpha * y + f(n2(y))


@add("deepnorm", "alpha forgotten (Post-LN)", "post")
def _(x, a, f, n1, n2, alpha):
    y = n1(x + a(x))
    return n2(y + f(y))


@add("deepnorm", "norms swapped", "norms_swapped")
def _(x, a, f, n1, n2, alpha):
    y = n2(alpha * x + a(x))
    return n1(alpha * y + f(y))


@add("deepnorm", "FFN first", "ffn_first")
def _(x, a, f, n1, n2, alpha):
    y = n1(alpha * x + f(x))
    return n2(alpha * y + a(y))


@add("deepnorm", "alpha applied only in the first sub-layer", None)
def _(x, a, f, n1, n2, alpha):
    y = n1(alpha * x + a(x))
    return n2(y + f(y))


SOLUTIONS = S
