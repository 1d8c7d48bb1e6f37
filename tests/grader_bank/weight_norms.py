"""Lesson 11: Weight Normalization's weight ``fn(v, g)`` and v-gradient ``fn(grad_w, v, g)``
(g of shape (out, 1, ..., 1)), and one power-iteration step ``fn(W, v) -> (u, v, sigma)``."""

import torch
import torch.nn.functional as F

from . import collector

S = []


add = collector(S)


def rown(v):
    return v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))


# ---------------------------------------------------------------- forward
WN = "check_weight_norm"


@add(WN, "flatten(1).norm(dim=1) reshaped")
def _(v, g):
    return g * v / rown(v)


@add(WN, "torch._weight_norm")
def _(v, g):
    return torch._weight_norm(v, g, 0)


@add(WN, "vector_norm over dims 1.. with keepdim")
def _(v, g):
    return g * v / torch.linalg.vector_norm(v, dim=tuple(range(1, v.dim())), keepdim=True)


@add(WN, "g forgotten", "forgot_g")
def _(v, g):
    return v / rown(v)


@add(WN, "not normalised", "no_normalization")
def _(v, g):
    return g * v


@add(WN, "norm over dim 0", "wrong_axis")
def _(v, g):
    return g * v / v.norm(dim=0, keepdim=True)


@add(WN, "one norm for the whole tensor", "whole_tensor_norm")
def _(v, g):
    return g * v / v.norm()


@add(WN, "norm over the last dim only", "last_dim_only")
def _(v, g):
    return g * v / v.norm(dim=-1, keepdim=True)


@add(WN, "squared norm", "squared_norm")
def _(v, g):
    return g * v / rown(v) ** 2


@add(WN, "|g| for g", "abs_g")
def _(v, g):
    return g.abs() * v / rown(v)


@add(WN, "no keepdim", "missing_keepdim")
def _(v, g):
    return g * v / v.flatten(1).norm(dim=1)


# ---------------------------------------------------------------- the v-gradient
WG = "check_weight_norm_grad"


def proj(gw, v, sign=-1.0):
    u = v / rown(v)
    along = (gw * u).flatten(1).sum(1).view(-1, *([1] * (v.dim() - 1)))
    return gw + sign * along * u


@add(WG, "the formula: (g / ||v||) (I - w w^T / ||w||^2) grad_w")
def _(gw, v, g):
    return g / rown(v) * proj(gw, v)


@add(WG, "autograd through g * v / ||v||")
def _(gw, v, g):
    v = v.clone().requires_grad_()
    w = g * v / rown(v)
    (grad,) = torch.autograd.grad(w, v, gw)
    return grad


@add(WG, "written with w = g v / ||v||: (g / ||v||) (grad_w - (grad_w . w) w / ||w||^2)")
def _(gw, v, g):
    w = g * v / rown(v)
    dot = (gw * w).flatten(1).sum(1).view(-1, *([1] * (v.dim() - 1)))
    return g / rown(v) * (gw - dot * w / rown(w) ** 2)


@add(WG, "no projection", "no_projection")
def _(gw, v, g):
    return g / rown(v) * gw


@add(WG, "no factor", "no_scale")
def _(gw, v, g):
    return proj(gw, v)


@add(WG, "g forgotten in the factor", "forgot_g")
def _(gw, v, g):
    return proj(gw, v) / rown(v)


@add(WG, "g / ||v||^2", "squared_norm")
def _(gw, v, g):
    return g / rown(v) ** 2 * proj(gw, v)


@add(WG, "projection added", "projection_sign")
def _(gw, v, g):
    return g / rown(v) * proj(gw, v, +1.0)


@add(WG, "|g| in the factor", "abs_g")
def _(gw, v, g):
    return g.abs() / rown(v) * proj(gw, v)


@add(WG, "per column (dim 0)", "wrong_axis")
def _(gw, v, g):
    n = v.norm(dim=0, keepdim=True)
    return g / n * (gw - (gw * v).sum(0, keepdim=True) * v / (v * v).sum(0, keepdim=True))


@add(WG, "no keepdim on the norm", "missing_keepdim")
def _(gw, v, g):
    return g / v.flatten(1).norm(dim=1) * proj(gw, v)


# ---------------------------------------------------------------- power iteration
PW = "check_power_iteration"


@add(PW, "F.normalize, sigma = u^T W v'")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    v = F.normalize(W.T @ u, dim=0)
    return u, v, u @ W @ v


@add(PW, "sigma as a Python float (.item())")
def _(W, v):
    u = W @ v
    u = u / u.norm()
    v = W.T @ u
    v = v / v.norm()
    return u, v, (u @ W @ v).item()


@add(PW, "sigma = ||W^T u||, shape (1,)")
def _(W, v):
    u = F.normalize(torch.mv(W, v), dim=0)
    wtu = torch.mv(W.T, u)
    return u, wtu / wtu.norm(), wtu.norm().reshape(1)


@add(PW, "not normalised", "no_normalize")
def _(W, v):
    u = W @ v
    v2 = W.T @ u
    return u, v2, u @ (W @ v2)


@add(PW, "W and W^T swapped", "transposed")
def _(W, v):
    u = F.normalize(W.T @ v, dim=0)
    v2 = F.normalize(W @ u, dim=0)
    return u, v2, u @ (W.T @ v2)


@add(PW, "sigma with the old v", "stale_sigma")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    v2 = F.normalize(W.T @ u, dim=0)
    return u, v2, u @ (W @ v)


@add(PW, "Frobenius norm", "frobenius")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    return u, F.normalize(W.T @ u, dim=0), torch.linalg.matrix_norm(W)


@add(PW, "v not updated", "v_not_updated")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    return u, v, u @ W @ v


@add(PW, "sigma = ||W v|| with the old v (the same as u^T W v)", "stale_sigma")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    return u, F.normalize(W.T @ u, dim=0), (W @ v).norm()


@add(PW, "sigma = ||W v'|| with the new v", "sigma_norm_wv")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    v2 = F.normalize(W.T @ u, dim=0)
    return u, v2, (W @ v2).norm()


@add(PW, "the exact sigma from svdvals", "exact_sigma")
def _(W, v):
    u = F.normalize(W @ v, dim=0)
    return u, F.normalize(W.T @ u, dim=0), torch.linalg.svdvals(W)[0]


@add(PW, "a flipped sign: u = -normalize(W v)", None)
def _(W, v):
    u = -F.normalize(W @ v, dim=0)
    v2 = F.normalize(W.T @ u, dim=0)
    return u, v2, u @ W @ v2


SOLUTIONS = S
