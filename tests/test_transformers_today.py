"""Lesson 09's helpers against independent references: helpers.norms.DyT against the formula
of Zhu et al. 2025 written with torch.tanh; the layouts of helpers.transformer against their
equations written with torch.nn.functional; QK-norm against F.rms_norm / F.layer_norm per
head; and the lesson's exercise checkers against independently written correct and wrong
solutions."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers import norms as HN
from helpers import transformer as T
from helpers.checks import check_dyt_module, check_qk_norm_attention

F64 = torch.float64


# ---- DyT ----------------------------------------------------------------------------------

def test_dyt_parameters_and_initial_values():
    m = HN.DyT(7)
    assert {n: tuple(p.shape) for n, p in m.named_parameters()} == {
        "alpha": (1,), "weight": (7,), "bias": (7,)}
    assert m.alpha.item() == 0.5  # the authors' default alpha_init_value
    assert torch.equal(m.weight, torch.ones(7)) and torch.equal(m.bias, torch.zeros(7))
    assert HN.DyT(3, alpha_init_value=2.0).alpha.item() == 2.0
    assert HN.DyT(3, bias=False).bias is None
    assert HN.DyT(3, elementwise_affine=False).weight is None


def test_dyt_forward_is_the_formula():
    g = torch.Generator().manual_seed(0)
    m = HN.DyT(5, dtype=F64)
    with torch.no_grad():
        m.alpha.fill_(0.8)
        m.weight.copy_(torch.randn(5, generator=g, dtype=F64))
        m.bias.copy_(torch.randn(5, generator=g, dtype=F64))
    x = torch.randn(3, 4, 5, generator=g, dtype=F64) * 3
    expected = torch.stack([torch.tanh(0.8 * x[..., c]) * m.weight[c] + m.bias[c]
                            for c in range(5)], -1)
    torch.testing.assert_close(m(x), expected, rtol=0, atol=1e-15)
    # the tails saturate at weight + bias and -weight + bias
    big = torch.full((1, 5), 1e3, dtype=F64)
    torch.testing.assert_close(m(big)[0], m.weight + m.bias)
    torch.testing.assert_close(m(-big)[0], -m.weight + m.bias)


def test_dyt_channels_first_and_gradients():
    g = torch.Generator().manual_seed(1)
    m = HN.DyT(3, channels_last=False, dtype=F64)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([1.0, -2.0, 0.5]))
        m.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    x = torch.randn(2, 3, 4, 4, generator=g, dtype=F64)
    expected = torch.tanh(0.5 * x) * torch.tensor([1.0, -2.0, 0.5], dtype=F64).view(3, 1, 1) \
        + torch.tensor([0.1, 0.2, 0.3], dtype=F64).view(3, 1, 1)
    torch.testing.assert_close(m(x), expected)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: HN.DyT(3, channels_last=False, dtype=F64)(z), (x,))
    # d/d alpha of sum(tanh(alpha x)) is sum(x (1 - tanh^2(alpha x)))
    m2 = HN.DyT(4, dtype=F64)
    z = torch.randn(6, 4, generator=g, dtype=F64)
    m2(z).sum().backward()
    torch.testing.assert_close(m2.alpha.grad[0], (z * (1 - torch.tanh(0.5 * z) ** 2)).sum())


def test_dyt_state_dict_and_repr():
    a, b = HN.DyT(4, alpha_init_value=0.3), HN.DyT(4)
    b.load_state_dict(a.state_dict())
    assert b.alpha.item() == pytest.approx(0.3)
    assert "alpha_init_value=0.3" in repr(a)
    with pytest.raises(ValueError):
        HN.DyT((2, 3), channels_last=False)


# ---- Gemma RMSNorm, layouts ---------------------------------------------------------------

def test_gemma_rmsnorm_is_one_plus_weight():
    g = torch.Generator().manual_seed(2)
    m = T.GemmaRMSNorm(6).double()
    assert torch.equal(m.weight, torch.zeros(6, dtype=F64))  # stored weight starts at 0
    x = torch.randn(2, 6, generator=g, dtype=F64)
    torch.testing.assert_close(m(x), F.rms_norm(x, (6,), eps=1e-6))  # gain 1 at init
    with torch.no_grad():
        m.weight.fill_(0.5)
    torch.testing.assert_close(m(x), F.rms_norm(x, (6,), torch.full((6,), 1.5, dtype=F64), 1e-6))


def _functional_block(block, x, layout):
    """The layouts written from their equations, with the block's own sub-modules."""
    def sub(x, f, nin, nout):
        if layout == "pre":
            return x + f(nin(x))
        if layout == "sandwich":
            return x + nout(f(nin(x)))
        if layout == "reordered":
            return x + nout(f(x))
        if layout == "post":
            return nout(x + f(x))
        return x + f(x)
    x = sub(x, block.attn, block.attn_in_norm, block.attn_out_norm)
    return sub(x, block.ffn, block.ffn_in_norm, block.ffn_out_norm)


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_layouts_match_their_equations(layout):
    torch.manual_seed(0)
    block = T.LayoutBlock(8, 2, 16, layout=layout, norm="rms").double()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * 0.5 + 0.3)
    x = torch.randn(2, 5, 8, generator=g, dtype=F64) * 2
    torch.testing.assert_close(block(x), _functional_block(block, x, layout))
    n_norms = sum(getattr(block, s) is not None for s in
                  ("attn_in_norm", "attn_out_norm", "ffn_in_norm", "ffn_out_norm"))
    assert n_norms == {"pre": 2, "sandwich": 4, "reordered": 2, "post": 2, "none": 0}[layout]


def test_module_order_and_final_norm():
    idx = torch.zeros(1, 4, dtype=torch.long)
    torch.manual_seed(0)
    m = T.LayoutTransformer(5, 8, 2, 2, layout="sandwich", norm="gemma_rms")
    assert T.module_order(m, idx) == ["attn_in_norm", "attn", "attn_out_norm", "ffn_in_norm",
                                      "ffn", "ffn_out_norm", "final_norm"]
    m = T.LayoutTransformer(5, 8, 2, 2, layout="reordered", norm="rms")
    assert T.module_order(m, idx) == ["attn", "attn_out_norm", "ffn", "ffn_out_norm", "final_norm"]
    assert T.LayoutTransformer(5, 8, 2, 2, layout="post").final_norm is None
    assert T.LayoutTransformer(5, 8, 2, 2, layout="pre", final_norm=False).final_norm is None


def _attention_by_hand(attn, x, qk_norm, eps):
    b, t, d = x.shape
    h, dh = attn.n_heads, attn.head_dim
    q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
    if qk_norm == "whole":
        q = F.layer_norm(q, (d,), attn.q_norm.weight, attn.q_norm.bias, eps)
        k = F.layer_norm(k, (d,), attn.k_norm.weight, attn.k_norm.bias, eps)
    q, k, v = (z.view(b, t, h, dh).transpose(1, 2) for z in (q, k, v))
    if qk_norm == "head":
        q = F.layer_norm(q, (dh,), attn.q_norm.weight, attn.q_norm.bias, eps)
        k = F.layer_norm(k, (dh,), attn.k_norm.weight, attn.k_norm.bias, eps)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attn.out_proj(out.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("qk_norm", T.QK_NORMS)
def test_qk_norm_attention_matches_sdpa(qk_norm):
    torch.manual_seed(0)
    attn = T.QKNormAttention(12, 3, qk_norm=qk_norm).double()
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in attn.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=F64) * 0.3)
    x = torch.randn(2, 6, 12, generator=g, dtype=F64) * 3
    torch.testing.assert_close(attn(x), _attention_by_hand(attn, x, qk_norm, 1e-5))
    if qk_norm is not None:
        want = (4,) if qk_norm == "head" else (12,)
        assert attn.q_norm.weight.shape == want and attn.k_norm.weight.shape == want


def test_recorded_max_logit_and_entropy():
    torch.manual_seed(0)
    attn = T.QKNormAttention(8, 2).double()
    attn.record = True
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 4, 8, generator=g, dtype=F64)
    attn(x)
    q = attn.q_proj(x).view(1, 4, 2, 4).transpose(1, 2)
    k = attn.k_proj(x).view(1, 4, 2, 4).transpose(1, 2)
    logits = (q @ k.transpose(-2, -1) / 2).detach()
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    assert attn.last_max_logit == pytest.approx(float(logits[:, :, causal].max()), rel=1e-12)
    ents = []
    for hh in range(2):
        for t in range(1, 4):
            p = logits[0, hh, t, :t + 1].softmax(-1)
            ents.append(float(-(p * p.log()).sum()))
    assert attn.last_entropy == pytest.approx(sum(ents) / len(ents), rel=1e-10)


def test_branch_scales():
    torch.manual_seed(0)
    m = T.LayoutTransformer(7, 8, 2, 3, layout="none", branch_scale="skipinit")
    idx = torch.randint(0, 7, (2, 5))
    stream = m.residual_stream(idx)
    for s in stream[1:]:  # zero-initialised branches: every block is the identity at init
        torch.testing.assert_close(s, stream[0])
    ls = T.LayoutTransformer(7, 8, 2, 3, layout="pre", branch_scale="layerscale", branch_scale_init=0.1)
    assert ls.blocks[0].attn_scale.shape == (8,) and float(ls.blocks[0].attn_scale.detach()[0]) == pytest.approx(0.1)
    assert m.blocks[0].attn_scale.shape == (1,)


def test_cosine_lr_schedule():
    assert T.cosine_lr(0, 100, 10) == pytest.approx(0.1)
    assert T.cosine_lr(9, 100, 10) == pytest.approx(1.0)
    assert T.cosine_lr(10, 100, 10) == pytest.approx(1.0)
    assert T.cosine_lr(55, 100, 10) == pytest.approx(0.5)
    assert T.cosine_lr(100, 100, 10) == pytest.approx(0.0, abs=1e-12)


def test_train_lm_learns_and_z_loss_pulls_log_z_to_zero():
    torch.manual_seed(0)
    m = T.LayoutTransformer(8, 16, 2, 1, layout="pre").double()
    r = T.train_lm(m, steps=60, lr=1e-2, warmup_steps=6, batch_size=16, seq_len=4, vocab_size=8,
                   record_attention=True)
    assert r["final_loss"] < math.log(7) - 0.5 and not r["diverged"]
    assert len(r["max_logit"]) == 60 and len(r["entropy"]) == 60
    torch.manual_seed(0)
    m = T.LayoutTransformer(8, 16, 2, 1, layout="pre").double()
    rz = T.train_lm(m, steps=60, lr=1e-2, warmup_steps=6, batch_size=16, seq_len=4, vocab_size=8,
                    z_loss=1.0)
    assert abs(rz["log_z"][-1]) < abs(r["log_z"][-1])


def test_residual_reads_tells_post_ln_from_olmo2():
    idx, _ = T.reversal_batch(2, 3, 16, torch.Generator().manual_seed(0))
    expected = {"pre": {}, "sandwich": {"attn": "F(x)", "ffn": "F(x)"},
                "reordered": {"attn": "F(x)", "ffn": "F(x)"},
                "post": {"attn": "x + F(x)", "ffn": "x + F(x)"}}
    for layout, want in expected.items():
        torch.manual_seed(0)
        m = T.LayoutTransformer(16, d_model=16, n_heads=2, num_layers=2, layout=layout, norm="rms")
        assert T.residual_reads(m, idx) == want, layout
        assert T.residual_reads(m, idx, block=1) == want, layout


def test_rope_is_a_complex_rotation_of_channel_pairs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 8, generator=g, dtype=F64)
    got = T.rope(x, base=100.0)
    # reference: channel i and i + d/2 as one complex number, times exp(i t theta_i)
    d, t = 8, 7
    z = torch.complex(x[..., : d // 2], x[..., d // 2:])
    theta = 100.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    rot = torch.polar(torch.ones(t, d // 2, dtype=F64), torch.arange(t, dtype=F64)[:, None] * theta)
    w = z * rot
    torch.testing.assert_close(got, torch.cat([w.real, w.imag], -1))
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1))
    with pytest.raises(ValueError, match="even"):
        T.rope(torch.zeros(2, 3))


def test_train_lm_batch_equals_separate_train_lm_runs():
    # reference: torch.optim.AdamW and LambdaLR inside train_lm, one model at a time
    task = dict(steps=25, warmup_steps=5, batch_size=8, seq_len=4, vocab_size=8)
    lrs, wds, zs, seeds = [0.01, 0.003, 0.02], [0.0, 0.1, 0.0], [0.0, 1e-3, 0.0], [0, 1, 2]

    def make(seed, **kw):
        torch.manual_seed(seed)
        return T.LayoutTransformer(8, 16, 2, 2, max_len=8, **kw).double()

    for kw in [dict(layout="pre", qk_norm="head"), dict(layout="sandwich", norm="dyt"),
               dict(layout="none", branch_scale="skipinit")]:
        ref = [T.train_lm(make(s, **kw), lr=lr, weight_decay=wd, z_loss=z, seed=s,
                          record_attention=True, **task)
               for s, lr, wd, z in zip(seeds, lrs, wds, zs)]
        models = [make(s, **kw) for s in seeds]
        got = T.train_lm_batch(models, lr=lrs, weight_decay=wds, z_loss=zs, seeds=seeds,
                               record_attention=True, **task)
        for r, g in zip(ref, got):
            assert set(r) == set(g)
            for key in ("loss", "log_z", "mean_logit", "top_logit", "max_logit", "entropy"):
                torch.testing.assert_close(torch.tensor(g[key], dtype=F64),
                                           torch.tensor(r[key], dtype=F64), rtol=1e-8, atol=1e-9)
            assert g["final_loss"] == pytest.approx(r["final_loss"], rel=1e-8)
            assert g["accuracy"] == r["accuracy"] and not g["diverged"]
        # the trained parameters are written back into the models
        again = make(seeds[1], **kw)
        T.train_lm(again, lr=lrs[1], weight_decay=wds[1], z_loss=zs[1], seed=seeds[1], **task)
        for (name, p), q in zip(models[1].named_parameters(), again.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-8, atol=1e-9, msg=name)


def test_train_lm_batch_rejects_mismatched_models_and_lists():
    torch.manual_seed(0)
    a = T.LayoutTransformer(8, 16, 2, 1, layout="pre").double()
    b = T.LayoutTransformer(8, 16, 2, 1, layout="sandwich").double()
    with pytest.raises(ValueError, match="same parameter"):
        T.train_lm_batch([a, b], steps=1)
    with pytest.raises(ValueError, match="lr"):
        T.train_lm_batch([a, a], steps=1, lr=[0.1, 0.2, 0.3])


def test_train_lm_batch_stops_a_diverging_model_only():
    torch.manual_seed(0)
    models = [T.LayoutTransformer(8, 16, 2, 1, layout="pre").double() for _ in range(2)]
    out = T.train_lm_batch(models, steps=5, warmup_steps=1, lr=[1e-2, float("inf")],
                           batch_size=8, seq_len=4, vocab_size=8, seeds=[0, 1])
    assert not out[0]["diverged"] and len(out[0]["loss"]) == 5
    assert out[1]["diverged"] and math.isnan(out[1]["final_loss"])


# ---- checkers -----------------------------------------------------------------------------

def qk_correct(q, k, v, wq, wk, eps):
    def rms(z, w):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps) * w
    q, k = rms(q, wq), rms(k, wk)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    t = q.shape[-2]
    s = s + torch.full((t, t), float("-inf"), dtype=s.dtype).triu(1)
    return torch.softmax(s, -1) @ v


def qk_correct_via_torch(q, k, v, wq, wk, eps):
    n = nn.RMSNorm(q.shape[-1], eps=eps, dtype=q.dtype)
    m = nn.RMSNorm(q.shape[-1], eps=eps, dtype=q.dtype)
    with torch.no_grad():
        n.weight.copy_(wq)
        m.weight.copy_(wk)
    return F.scaled_dot_product_attention(n(q), m(k), v, is_causal=True)


def qk_whole(q, k, v, wq, wk, eps):
    b, h, t, dh = q.shape
    def rms(z, w):
        z2 = z.transpose(1, 2).reshape(b, t, h * dh)
        z2 = z2 / torch.sqrt(z2.pow(2).mean(-1, keepdim=True) + eps) * w.repeat(h)
        return z2.view(b, t, h, dh).transpose(1, 2)
    return F.scaled_dot_product_attention(rms(q, wq), rms(k, wk), v, is_causal=True)


def qk_over_heads(q, k, v, wq, wk, eps):
    def rms(z, w):
        return z / torch.sqrt(z.pow(2).mean(1, keepdim=True) + eps) * w
    return F.scaled_dot_product_attention(rms(q, wq), rms(k, wk), v, is_causal=True)


def qk_no_scale(q, k, v, wq, wk, eps):
    return F.scaled_dot_product_attention(F.rms_norm(q, q.shape[-1:], wq, eps),
                                          F.rms_norm(k, k.shape[-1:], wk, eps), v,
                                          is_causal=True, scale=1.0)


def qk_only_q(q, k, v, wq, wk, eps):
    return F.scaled_dot_product_attention(F.rms_norm(q, q.shape[-1:], wq, eps), k, v, is_causal=True)


def qk_layernorm(q, k, v, wq, wk, eps):
    return F.scaled_dot_product_attention(F.layer_norm(q, q.shape[-1:], wq, None, eps),
                                          F.layer_norm(k, k.shape[-1:], wk, None, eps), v,
                                          is_causal=True)


def qk_no_mask(q, k, v, wq, wk, eps):
    return F.scaled_dot_product_attention(F.rms_norm(q, q.shape[-1:], wq, eps),
                                          F.rms_norm(k, k.shape[-1:], wk, eps), v)


def qk_raises(q, k, v, wq, wk, eps):
    return q.view(-1, 3) @ k


def qk_returns_list(q, k, v, wq, wk, eps):
    return [0.0]


@pytest.mark.parametrize("fn", [qk_correct, qk_correct_via_torch])
def test_qk_checker_passes_correct_solutions(fn):
    r = check_qk_norm_attention(fn)
    assert r.passed and r.mistake is None and r.failed_cases == [], r.message


@pytest.mark.parametrize("fn,key", [(qk_whole, "whole_projection"), (qk_over_heads, "over_heads"),
                                    (qk_no_scale, "no_scale"), (qk_only_q, "only_q"),
                                    (qk_layernorm, "mean_subtracted"), (qk_no_mask, "no_causal_mask")])
def test_qk_checker_names_the_mistake(fn, key):
    r = check_qk_norm_attention(fn)
    assert not r.passed and r.mistake == key, r.message
    assert r.failed_cases and "✘" in r.message and "可能的错误" in r.message


@pytest.mark.parametrize("fn", [qk_raises, qk_returns_list])
def test_qk_checker_never_raises(fn):
    r = check_qk_norm_attention(fn)
    assert not r.passed and r.mistake is None
    assert ("raised" in r.message) or ("not a tensor" in r.message)


class DyTGood(nn.Module):
    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor([float(alpha_init_value)]))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias


class DyTPerChannel(DyTGood):
    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__(normalized_shape, alpha_init_value)
        self.alpha = nn.Parameter(torch.full((normalized_shape,), float(alpha_init_value)))


class DyTAlphaOutside(DyTGood):
    def forward(self, x):
        return self.weight * self.alpha * torch.tanh(x) + self.bias


class DyTAffineInside(DyTGood):
    def forward(self, x):
        return torch.tanh(self.alpha * (self.weight * x + self.bias))


class DyTWrongInit(DyTGood):
    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__(normalized_shape, 1.0)


class DyTRandomInit(DyTGood):
    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__(normalized_shape, alpha_init_value)
        self.weight = nn.Parameter(torch.randn(normalized_shape))  # uses the global RNG


class DyTNoBias(nn.Module):
    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor([float(alpha_init_value)]))
        self.weight = nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x)


def test_dyt_checker_passes_correct_solutions():
    for cls in (DyTGood, lambda d, alpha_init_value=0.5: HN.DyT(d, alpha_init_value=alpha_init_value)):
        r = check_dyt_module(cls)
        assert r.passed and r.mistake is None, r.message


@pytest.mark.parametrize("cls,key", [(DyTPerChannel, "alpha_per_channel"),
                                     (DyTAlphaOutside, "alpha_outside_tanh"),
                                     (DyTAffineInside, "affine_inside_tanh"),
                                     (DyTWrongInit, "wrong_init"),
                                     (DyTNoBias, "missing_parameter")])
def test_dyt_checker_names_the_mistake(cls, key):
    r = check_dyt_module(cls)
    assert not r.passed and r.mistake == key, r.message


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    check_dyt_module(DyTRandomInit)
    check_qk_norm_attention(qk_correct)
    assert torch.equal(torch.get_rng_state(), before)


def test_dyt_checker_reports_a_constructor_error():
    def broken(d, alpha_init_value=0.5):
        raise RuntimeError("boom")
    r = check_dyt_module(broken)
    assert not r.passed and "boom" in r.message


# ---- figures ------------------------------------------------------------------------------

def test_layout_figure_boxes_follow_the_recorded_order():
    import matplotlib
    matplotlib.use("Agg")
    from helpers import transformer_figures as TF
    from helpers.plotting import use_course_style
    use_course_style()  # the bundled CJK font, as in the notebook
    order = ["attn_in_norm", "attn", "attn_out_norm", "ffn_in_norm", "ffn", "ffn_out_norm", "final_norm"]
    assert TF._steps(order, "sandwich") == [("Norm", "norm"), ("Attention", "attn"), ("Norm", "norm"),
                                            ("+ x", "add"), ("Norm", "norm"), ("FFN", "ffn"),
                                            ("Norm", "norm"), ("+ x", "add")]
    assert TF._steps(["attn_in_norm", "attn", "ffn_in_norm", "ffn"], "pre") == [
        ("Norm", "norm"), ("Attention", "attn"), ("+ x", "add"), ("Norm", "norm"), ("FFN", "ffn"),
        ("+ x", "add")]
    assert TF._steps(["attn", "attn_out_norm", "ffn", "ffn_out_norm"], "post") == [
        ("Attention", "attn"), ("+ x", "add"), ("Norm", "norm"), ("FFN", "ffn"), ("+ x", "add"),
        ("Norm", "norm")]
    fig = TF.draw_layouts({"a": ("sandwich", order), "b": ("post", ["attn", "attn_out_norm", "ffn", "ffn_out_norm"])})
    # 8 boxes + '...' + final norm for the first column, 6 for the second
    assert len(fig.axes[0].patches) == 10 + 6
    runs = {"x": [{"loss": [3.0, 2.0], "max_logit": [1.0, 10.0], "entropy": [1.0, 0.5]}]}
    def panels(fig):  # axes with curves (a fourth, empty panel may hold the legend)
        return [ax for ax in fig.axes if ax.lines]
    assert len(panels(TF.plot_runs(runs))) == 3 and len(panels(TF.plot_runs(runs, keys=("loss",)))) == 1
    import matplotlib.pyplot as plt
    plt.close("all")


def test_tanh_fit_tells_a_line_from_an_s_curve():
    x = torch.linspace(-5, 5, 201, dtype=F64)
    line = T.tanh_fit(x, 0.3 * x + 0.1)
    assert line["r2_linear"] == pytest.approx(1.0, abs=1e-12)
    s_curve = T.tanh_fit(x, 2 * torch.tanh(1.5 * x))
    assert s_curve["r2_tanh"] > 0.9999 and s_curve["r2_linear"] < 0.95
    assert s_curve["alpha"] == pytest.approx(1.5, rel=0.15) and s_curve["a"] == pytest.approx(2, rel=0.15)


def test_layer_norm_samples_are_the_normalised_inputs():
    torch.manual_seed(0)
    m = T.LayoutTransformer(7, 8, 2, 2, layout="pre").double()
    idx = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(1))
    samples = T.layer_norm_samples(m, idx)
    assert [n for n, _, _ in samples] == ["blocks.0.attn_in_norm", "blocks.0.ffn_in_norm",
                                          "blocks.1.attn_in_norm", "blocks.1.ffn_in_norm"]
    stream = m.residual_stream(idx)
    name, x, xh = samples[0]
    torch.testing.assert_close(x, stream[0].flatten())
    z = stream[0]
    expected = (z - z.mean(-1, keepdim=True)) / torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(xh, expected.flatten())


# ---- lesson 09's seed grid (helpers.transformer_grids) -------------------------------------

def test_seed_grid_models_have_the_lesson_settings():
    from helpers import transformer_grids as TG
    # the settings the lesson used before the grid existed, written out independently
    torch.manual_seed(3)
    ref = T.LayoutTransformer(16, d_model=32, n_heads=4, num_layers=4, max_len=12, layout="sandwich").double()
    got = TG.layout_model("sandwich", 3)
    assert [n for n, _ in got.named_parameters()] == [n for n, _ in ref.named_parameters()]
    for p, q in zip(got.parameters(), ref.parameters()):
        assert p.dtype == F64 and torch.equal(p, q)
    dyt = TG.dyt_model("DyT, alpha0 2.0", 0)
    alphas = {float(m.alpha.detach()) for m in dyt.modules() if isinstance(m, HN.DyT)}
    assert alphas == {2.0} and sum(isinstance(m, HN.DyT) for m in dyt.modules()) == 9
    skip = TG.no_norm_model("SkipInit (no norm)", 0)
    assert not any(isinstance(m, nn.LayerNorm) for m in skip.modules())
    assert all(float(b.attn_scale.detach()) == 0.0 for b in skip.blocks)
    x, y = TG.eval_batch()
    assert x.shape == (64, 12) and (y[:, :6] == -100).all()
    with pytest.raises(ValueError):
        TG.layout_model("post", 0)


def test_seed_grid_results_file_covers_every_run():
    from helpers import transformer_grids as TG
    from helpers.results import read_all_paths
    records = read_all_paths("lesson09_seeds")
    assert {"avx2", "default"} <= set(records)
    for rec in records.values():
        assert "python -m helpers.transformer_grids" in rec["command"]
        seeds = rec["seeds"]
        for exp, configs in [("stream", TG.LAYOUTS), ("dyt", TG.DYT_KINDS), ("no norm", TG.NO_NORM_VARIANTS)]:
            for c in configs:
                assert sorted(r["seed"] for r in rec["rows"] if r["experiment"] == exp and r["config"] == c) == seeds
    assert len(TG.runs(records, "dyt", "LayerNorm")) == sum(len(r["seeds"]) for r in records.values())
    with pytest.raises(ValueError):
        TG.runs(records, "dyt", "BatchNorm")
