"""Lesson 09: QK-norm attention, ``check_qk_norm_attention(fn)`` with fn(q, k, v, q_weight,
k_weight, eps), q, k, v of shape (B, h, T, d_h); and the DyT module, ``check_dyt_module(cls)``."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import PASS, Sol, collector

S = []


add = collector(S)


# ---------------------------------------------------------------- QK-norm
QK = "check_qk_norm_attention"


def rms(z, w, eps, *, dim=-1, centre=False, l2=False, eps_out=False, one_plus=False):
    if centre:
        z = z - z.mean(dim, keepdim=True)
    if l2:
        z = F.normalize(z, dim=dim)
    elif eps_out:
        z = z / (z.pow(2).mean(dim, keepdim=True).sqrt() + eps)
    else:
        z = z * torch.rsqrt(z.pow(2).mean(dim, keepdim=True) + eps)
    return z if w is None else z * ((1 + w) if one_plus else w)


def attend(q, k, v, *, scale=None, causal=True):
    t, dh = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(scale or dh)
    if causal:
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


@add(QK, "F.rms_norm then scaled_dot_product_attention(is_causal=True)")
def _(q, k, v, wq, wk, eps):
    dh = q.shape[-1]
    qn = F.rms_norm(q, (dh,), wq, eps)
    kn = F.rms_norm(k, (dh,), wk, eps)
    return F.scaled_dot_product_attention(qn, kn, v, is_causal=True)


@add(QK, "written out, -1e9 mask from torch.tril")
def _(q, k, v, wq, wk, eps):
    qn, kn = rms(q, wq, eps), rms(k, wk, eps)
    t = q.shape[-2]
    logits = qn @ kn.transpose(-1, -2) / q.shape[-1] ** 0.5
    logits = logits.masked_fill(torch.tril(torch.ones(t, t)) == 0, -1e9)
    return torch.softmax(logits, dim=-1) @ v


@add(QK, "one head at a time")
def _(q, k, v, wq, wk, eps):
    outs = []
    for hd in range(q.shape[1]):
        qh = q[:, hd] / torch.sqrt(q[:, hd].pow(2).mean(-1, keepdim=True) + eps) * wq
        kh = k[:, hd] / torch.sqrt(k[:, hd].pow(2).mean(-1, keepdim=True) + eps) * wk
        outs.append(attend(qh, kh, v[:, hd]))
    return torch.stack(outs, 1)


@add(QK, "nn.RMSNorm modules with the gains copied in")
def _(q, k, v, wq, wk, eps):
    nq = nn.RMSNorm(q.shape[-1], eps=eps).to(q.dtype)
    nk = nn.RMSNorm(k.shape[-1], eps=eps).to(k.dtype)
    with torch.no_grad():
        nq.weight.copy_(wq)
        nk.weight.copy_(wk)
    return attend(nq(q), nk(k), v)


@add(QK, "L2 F.normalize (Henry et al.'s unit norm) with 1/sqrt(d_h)", "l2_normalised")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, l2=True), rms(k, wk, eps, l2=True), v)


@add(QK, "eps left out", "eps_missing")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, 0.0), rms(k, wk, 0.0), v)


@add(QK, "eps outside the root", "eps_outside_sqrt")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, eps_out=True), rms(k, wk, eps, eps_out=True), v)


@add(QK, "scale 1/sqrt(h * d_h)", "dmodel_scale")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), rms(k, wk, eps), v, scale=q.shape[1] * q.shape[-1])


@add(QK, "Gemma's (1 + w) gains", "one_plus_gain")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, one_plus=True), rms(k, wk, eps, one_plus=True), v)


@add(QK, "q's gain used for k too", "shared_gain")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), rms(k, wq, eps), v)


@add(QK, "no gains", "no_gain")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, None, eps), rms(k, None, eps), v)


@add(QK, "LayerNorm without bias (mean subtracted)", "mean_subtracted")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, centre=True), rms(k, wk, eps, centre=True), v)


@add(QK, "only q normalised", "only_q")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), k, v)


@add(QK, "statistics over the heads axis", "over_heads")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, dim=1), rms(k, wk, eps, dim=1), v)


@add(QK, "statistics over time", "over_time")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps, dim=2), rms(k, wk, eps, dim=2), v)


@add(QK, "the whole projection (OLMo 2's q_norm)", "whole_projection")
def _(q, k, v, wq, wk, eps):
    def whole(z, w):
        b, h, t, dh = z.shape
        flat = z.transpose(1, 2).reshape(b, t, h * dh)
        return rms(flat, w.repeat(h), eps).view(b, t, h, dh).transpose(1, 2)
    return attend(whole(q, wq), whole(k, wk), v)


@add(QK, "no 1/sqrt(d_h)", "no_scale")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), rms(k, wk, eps), v, scale=1)


@add(QK, "causal mask dropped", "no_causal_mask")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), rms(k, wk, eps), v, causal=False)


@add(QK, "v normalised too", "v_normalised")
def _(q, k, v, wq, wk, eps):
    return attend(rms(q, wq, eps), rms(k, wk, eps), rms(v, None, eps))


@add(QK, "LLaMA-style .float() statistics on float64 input", "float32_statistics")
def _(q, k, v, wq, wk, eps):
    def r(z, w):
        zf = z.float()
        return (zf * torch.rsqrt(zf.pow(2).mean(-1, keepdim=True) + eps)).to(z.dtype) * w
    return attend(r(q, wq), r(k, wk), v)


# ---------------------------------------------------------------- DyT
DY = "check_dyt_module"


def dyt(forward=None, *, alpha=lambda a0: torch.ones(1) * a0, names=("alpha", "weight", "bias"),
        weight=torch.ones, bias=torch.zeros, buffer_alpha=False):
    """A learner's DyT class: parameters built as given, ``forward(self, x)``."""
    class DyT(nn.Module):
        def __init__(self, normalized_shape, alpha_init_value=0.5):
            super().__init__()
            self.a0 = alpha_init_value
            a = alpha(alpha_init_value)
            if buffer_alpha:
                self.register_buffer(names[0], a)
            else:
                setattr(self, names[0], nn.Parameter(a))
            setattr(self, names[1], nn.Parameter(weight(normalized_shape)))
            setattr(self, names[2], nn.Parameter(bias(normalized_shape)))

        def forward(self, x):
            if forward is None:
                return self.weight * torch.tanh(self.alpha * x) + self.bias
            return forward(self, x)
    return DyT


S += [
    Sol(DY, "the authors' dynamic_tanh.py: alpha of shape (1,)", dyt()),
    Sol(DY, "a 0-d alpha: nn.Parameter(torch.tensor(alpha_init_value))",
        dyt(alpha=lambda a0: torch.tensor(float(a0)))),
    Sol(DY, "torch.full((1,), alpha_init_value), x.tanh(), addcmul",
        dyt(lambda m, x: torch.addcmul(m.bias, m.weight, (m.alpha * x).tanh()),
            alpha=lambda a0: torch.full((1,), float(a0)))),
    Sol(DY, "alpha per channel", dyt(alpha=lambda a0: torch.full((6,), float(a0))), "alpha_per_channel"),
    Sol(DY, "weight starts at 0 (Gemma's habit)", dyt(weight=torch.zeros), "wrong_init"),
    Sol(DY, "alpha hard-coded to 0.5", dyt(alpha=lambda a0: torch.ones(1) * 0.5), "wrong_init"),
    Sol(DY, "parameters named gamma and beta", dyt(
        lambda m, x: m.gamma * torch.tanh(m.alpha * x) + m.beta, names=("alpha", "gamma", "beta")),
        "missing_parameter"),
    Sol(DY, "alpha registered as a buffer", dyt(buffer_alpha=True), "alpha_not_parameter"),
    Sol(DY, "forward uses alpha_init_value", dyt(lambda m, x: m.weight * torch.tanh(m.a0 * x) + m.bias),
        "alpha_not_used"),
    Sol(DY, "alpha outside the tanh", dyt(lambda m, x: m.weight * m.alpha * torch.tanh(x) + m.bias),
        "alpha_outside_tanh"),
    Sol(DY, "affine inside the tanh", dyt(lambda m, x: torch.tanh(m.alpha * (m.weight * x + m.bias))),
        "affine_inside_tanh"),
    Sol(DY, "gamma inside the tanh, beta outside",
        dyt(lambda m, x: torch.tanh(m.alpha * x * m.weight) + m.bias), "affine_inside_tanh"),
    Sol(DY, "bias left out", dyt(lambda m, x: m.weight * torch.tanh(m.alpha * x)), "no_bias"),
    Sol(DY, "LayerNorm before the tanh",
        dyt(lambda m, x: m.weight * torch.tanh(m.alpha * F.layer_norm(x, x.shape[-1:])) + m.bias),
        "normalises_first"),
    Sol(DY, "RMSNorm before the tanh",
        dyt(lambda m, x: m.weight * torch.tanh(m.alpha * F.rms_norm(x, x.shape[-1:], eps=1e-6)) + m.bias),
        "normalises_first"),
    Sol(DY, "hardtanh", dyt(lambda m, x: m.weight * F.hardtanh(m.alpha * x) + m.bias), "hard_clip"),
    Sol(DY, "a flipped sign: tanh(-alpha x)",
        dyt(lambda m, x: m.weight * torch.tanh(-m.alpha * x) + m.bias), None),
]

SOLUTIONS = S
