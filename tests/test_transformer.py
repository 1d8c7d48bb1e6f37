"""helpers.transformer against independent references: DeepNet's formulas and the numbers
in its text, Xavier-normal's standard deviation, hand-written block equations built from
torch.nn.functional, autograd, and hand-computed task data."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers import transformer as T

SIZES = [1, 2, 6, 12, 18, 100, 1000]


# ---- deepnorm_constants: DeepNet (Wang et al. 2022), Table 1 -------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_constants_encoder_only(n):
    c = T.deepnorm_constants(num_encoder_layers=n)
    assert set(c) == {"encoder"}
    assert c["encoder"] == pytest.approx((math.pow(2 * n, 0.25), 1 / math.pow(8 * n, 0.25)), rel=1e-12)


@pytest.mark.parametrize("m", SIZES)
def test_constants_decoder_only(m):
    c = T.deepnorm_constants(num_decoder_layers=m)
    assert set(c) == {"decoder"}
    assert c["decoder"] == pytest.approx((math.pow(2 * m, 0.25), 1 / math.pow(8 * m, 0.25)), rel=1e-12)


@pytest.mark.parametrize("n,m", [(6, 6), (12, 12), (18, 18), (100, 100), (500, 500), (6, 12), (12, 6)])
def test_constants_encoder_decoder(n, m):
    c = T.deepnorm_constants(n, m)
    assert set(c) == {"encoder", "decoder"}
    enc_alpha = 0.81 * math.pow(n ** 4 * m, 1 / 16)
    enc_beta = 0.87 / math.pow(n ** 4 * m, 1 / 16)
    assert c["encoder"] == pytest.approx((enc_alpha, enc_beta), rel=1e-12)
    assert c["decoder"] == pytest.approx((math.pow(3 * m, 0.25), math.pow(12 * m, -0.25)), rel=1e-12)
    # the encoder of an encoder-decoder model does not use the encoder-only constants
    assert c["encoder"][0] != pytest.approx(math.pow(2 * n, 0.25), rel=1e-3)


def test_constants_match_hand_computed_values():
    # encoder-only N = 6 -> (1.861, 0.380); N = 12 -> (2.213, 0.319) (96^(-1/4) = 0.3195)
    assert T.deepnorm_constants(6)["encoder"] == pytest.approx((1.861, 0.380), abs=5e-4)
    assert T.deepnorm_constants(12)["encoder"] == pytest.approx((2.213, 0.3195), abs=5e-4)
    # decoder-only M = 6: 12^(1/4) = sqrt(3.4641) = 1.8612, 48^(-1/4) = 1/sqrt(6.9282)^(1/2) = 0.3799
    assert T.deepnorm_constants(0, 6)["decoder"] == pytest.approx((1.8612, 0.3799), abs=1e-4)
    # encoder-decoder N = M = 6: N^4 M = 7776, 7776^(1/16) = exp(8.9588 / 16) = 1.7505, so
    # encoder 0.81 * 1.7505 = 1.4179, 0.87 / 1.7505 = 0.4970; decoder 18^(1/4) = 2.0598,
    # 72^(-1/4) = 0.3433
    c = T.deepnorm_constants(6, 6)
    assert c["encoder"] == pytest.approx((1.4179, 0.4970), abs=1e-4)
    assert c["decoder"] == pytest.approx((2.0598, 0.3433), abs=1e-4)


@pytest.mark.parametrize("args", [(0, 0), (-1, 0), (0, -3), (1.5, 0), (True, 0), ("6", 0)])
def test_constants_reject_bad_input(args):
    with pytest.raises(ValueError):
        T.deepnorm_constants(*args)


# ---- DeepNorm initialisation ------------------------------------------------------------

def _xavier_std(w: torch.Tensor, gain: float) -> float:
    fan_out, fan_in = w.shape
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


@pytest.mark.parametrize("beta", [0.3, 1.0])
def test_deepnorm_init_scales_ffn_value_output_only(beta):
    torch.manual_seed(0)
    model = T.TinyTransformer(11, d_model=128, n_heads=4, num_layers=2, d_ff=512,
                              norm_position="deepnorm", alpha=1.7, beta=beta)
    checked = 0
    for i, block in enumerate(model.blocks):
        for name, expected_gain in [("attn.q_proj", 1.0), ("attn.k_proj", 1.0),
                                    ("attn.v_proj", beta), ("attn.out_proj", beta),
                                    ("ffn.fc1", beta), ("ffn.fc2", beta)]:
            lin = block.get_submodule(name)
            std = float(lin.weight.detach().std())
            assert std == pytest.approx(_xavier_std(lin.weight, expected_gain), rel=0.04), (i, name)
            assert abs(float(lin.weight.detach().mean())) < 0.1 * std
            assert torch.count_nonzero(lin.bias) == 0
            checked += 1
        for norm in (block.norm1, block.norm2):
            assert torch.equal(norm.weight, torch.ones(128)) and torch.equal(norm.bias, torch.zeros(128))
    assert checked == 12
    assert float(model.head.weight.detach().std()) == pytest.approx(_xavier_std(model.head.weight, 1.0), rel=0.1)


def test_deepnorm_model_uses_decoder_only_constants_by_default():
    model = T.TinyTransformer(11, d_model=32, num_layers=8, norm_position="deepnorm")
    assert all(b.alpha == pytest.approx(16 ** 0.25) for b in model.blocks)  # (2M)^(1/4), M = 8
    beta = 64 ** -0.25  # (8M)^(-1/4)
    w = model.blocks[0].ffn.fc1.weight
    assert float(w.detach().std()) == pytest.approx(_xavier_std(w, beta), rel=0.1)


def test_deepnorm_init_rejects_bad_beta():
    with pytest.raises(ValueError):
        T.deepnorm_init(nn.Linear(2, 2), beta=0.0)


# ---- blocks against hand-written equations ----------------------------------------------

def _randomise(module: nn.Module, seed: int = 0) -> None:
    """Non-trivial values everywhere (norm gains and biases too), so a wrong order shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 + 0.1)


def _attention_by_hand(attn: T.CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    b, t, d = x.shape
    h = attn.n_heads
    q = F.linear(x, attn.q_proj.weight, attn.q_proj.bias).view(b, t, h, d // h).transpose(1, 2)
    k = F.linear(x, attn.k_proj.weight, attn.k_proj.bias).view(b, t, h, d // h).transpose(1, 2)
    v = F.linear(x, attn.v_proj.weight, attn.v_proj.bias).view(b, t, h, d // h).transpose(1, 2)
    out = torch.empty(b, h, t, d // h, dtype=x.dtype)
    for i in range(t):  # position i attends to positions 0..i
        s = (q[:, :, i:i + 1] @ k[:, :, :i + 1].transpose(-2, -1)) / math.sqrt(d // h)
        out[:, :, i] = (torch.softmax(s, -1) @ v[:, :, :i + 1]).squeeze(2)
    return F.linear(out.transpose(1, 2).reshape(b, t, d), attn.out_proj.weight, attn.out_proj.bias)


def _ffn_by_hand(ffn: T.FeedForward, x: torch.Tensor) -> torch.Tensor:
    return F.linear(F.relu(F.linear(x, ffn.fc1.weight, ffn.fc1.bias)), ffn.fc2.weight, ffn.fc2.bias)


def _ln(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, 1e-5)


@pytest.mark.parametrize("position,alpha", [("post", 1.0), ("pre", 1.0), ("deepnorm", 2.3)])
@pytest.mark.parametrize("impl", ["torch", "course"])
def test_block_matches_equations(position, alpha, impl):
    torch.manual_seed(0)
    block = T.Block(16, 4, 24, norm_position=position, alpha=alpha, norm_impl=impl).double()
    _randomise(block)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    a, f, n1, n2 = block.attn, block.ffn, block.norm1, block.norm2
    if position == "pre":  # x + F(LN(x))
        y = x + _attention_by_hand(a, _ln(n1, x))
        expected = y + _ffn_by_hand(f, _ln(n2, y))
    else:  # LN(alpha x + F(x)), alpha = 1 for Post-LN
        y = _ln(n1, alpha * x + _attention_by_hand(a, x))
        expected = _ln(n2, alpha * y + _ffn_by_hand(f, y))
    torch.testing.assert_close(block(x), expected)


def test_rms_block_uses_rms_norm():
    torch.manual_seed(0)
    block = T.Block(16, 2, 32, norm_position="pre", norm="rms").double()
    _randomise(block)
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    rms = lambda n, z: F.rms_norm(z, z.shape[-1:], n.weight)  # noqa: E731
    y = x + _attention_by_hand(block.attn, rms(block.norm1, x))
    torch.testing.assert_close(block(x), y + _ffn_by_hand(block.ffn, rms(block.norm2, y)))


@pytest.mark.parametrize("position", ["post", "pre", "deepnorm"])
def test_model_final_norm_only_for_pre_ln_and_causal(position):
    torch.manual_seed(0)
    model = T.TinyTransformer(13, d_model=16, n_heads=2, num_layers=3, max_len=10,
                              norm_position=position).double()
    assert (model.final_norm is not None) == (position == "pre")
    idx = torch.randint(0, 13, (2, 10))
    # by hand: embeddings, blocks, [final LN], head
    x = model.tok_emb.weight[idx] + model.pos_emb.weight[:10]
    for b in model.blocks:
        x = b(x)
    if position == "pre":
        x = _ln(model.final_norm, x)
    torch.testing.assert_close(model(idx), F.linear(x, model.head.weight, model.head.bias))
    # causal: changing the last token leaves every earlier position's logits unchanged
    idx2 = idx.clone()
    idx2[:, -1] = (idx2[:, -1] + 1) % 13
    out1, out2 = model(idx), model(idx2)
    torch.testing.assert_close(out1[:, :-1], out2[:, :-1])
    assert not torch.allclose(out1[:, -1], out2[:, -1])


@pytest.mark.parametrize("kwargs", [
    dict(norm_position="middle"), dict(norm_position="post", alpha=2.0),
    dict(norm_position="pre", beta=0.5), dict(d_model=30, n_heads=4), dict(num_layers=0),
    dict(norm="batch"), dict(norm_impl="numpy"),
])
def test_model_rejects_bad_config(kwargs):
    with pytest.raises(ValueError):
        T.TinyTransformer(10, **kwargs)


def test_block_rejects_alpha_outside_deepnorm_and_long_input():
    with pytest.raises(ValueError):
        T.Block(8, 2, 16, norm_position="pre", alpha=2.0)
    with pytest.raises(ValueError):
        T.Block(8, 2, 16, norm_position="deepnorm", alpha=-1.0)
    model = T.TinyTransformer(10, d_model=8, n_heads=2, num_layers=1, max_len=4)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_course_and_torch_norms_agree():
    x = torch.randn(4, 6, 8)
    for norm in ("layer", "rms"):
        a, b = T.make_norm(norm, 8, "torch"), T.make_norm(norm, 8, "course")
        torch.testing.assert_close(a(x), b(x))
        assert type(a).__name__ == type(b).__name__


# ---- measurements ----------------------------------------------------------------------

def test_layer_gradient_norms_match_autograd():
    torch.manual_seed(0)
    model = T.TinyTransformer(12, d_model=16, n_heads=2, num_layers=3, max_len=8, norm_position="post")
    idx = torch.randint(0, 12, (4, 8))
    with pytest.raises(ValueError):
        T.layer_gradient_norms(model)
    loss = F.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
    params = [b.ffn.fc2.weight for b in model.blocks] + [b.attn.v_proj.weight for b in model.blocks]
    grads = torch.autograd.grad(loss, params, retain_graph=True)
    loss.backward()
    assert T.layer_gradient_norms(model) == pytest.approx([float(g.norm()) for g in grads[:3]])
    assert T.layer_gradient_norms(model, "attn.v_proj.weight") == pytest.approx(
        [float(g.norm()) for g in grads[3:]])


def test_model_update():
    torch.manual_seed(0)
    m0 = T.TinyTransformer(9, d_model=8, n_heads=2, num_layers=2, max_len=6)
    m1 = T.TinyTransformer(9, d_model=8, n_heads=2, num_layers=2, max_len=6)
    m1.load_state_dict(m0.state_dict())
    x = torch.randint(0, 9, (3, 6))
    assert T.model_update(m0, m1, x) == 0.0
    with torch.no_grad():
        m1.head.bias += 0.25  # every logit moves by exactly 0.25
    assert T.model_update(m0, m1, x) == pytest.approx(0.25, rel=1e-5)
    assert T.model_update(m0, m1, x, output="features") == 0.0  # the head is not a feature
    with torch.no_grad():
        m1.final_norm.bias += 0.5  # shifts every feature by exactly 0.5
    assert T.model_update(m0, m1, x, output="features") == pytest.approx(0.5, rel=1e-5)
    torch.testing.assert_close(m1(x), F.linear(m1.features(x), m1.head.weight, m1.head.bias))
    with pytest.raises(ValueError):
        T.model_update(m0, m1, x, output="hidden")


def test_reversal_batch():
    g = torch.Generator().manual_seed(0)
    x, y = T.reversal_batch(5, 4, 7, g)
    assert x.shape == y.shape == (5, 8)
    a = x[:, :4]
    assert int(a.min()) >= 1 and int(a.max()) <= 6
    assert torch.equal(x[:, 4], torch.zeros(5, dtype=torch.long))
    assert (y[:, :4] == -100).all()
    for row in range(5):
        assert y[row, 4:].tolist() == list(reversed(a[row].tolist()))
        # teacher forcing: input after the separator is the target shifted by one
        assert x[row, 5:].tolist() == y[row, 4:7].tolist()
    with pytest.raises(ValueError):
        T.reversal_batch(2, 1, 7, g)


def test_markov_tokens_are_correlated():
    g = torch.Generator().manual_seed(0)
    x = T.markov_tokens(64, 40, 10, g)
    assert x.shape == (64, 40) and int(x.min()) >= 0 and int(x.max()) <= 9
    # next-token entropy given the previous token is well below log(10) for a peaked chain
    counts = torch.zeros(10, 10)
    counts.index_put_((x[:, :-1].flatten(), x[:, 1:].flatten()), torch.ones(64 * 39), accumulate=True)
    p = counts / counts.sum(1, keepdim=True).clamp_min(1)
    h = -(p * p.clamp_min(1e-12).log()).sum(1)
    weights = counts.sum(1) / counts.sum()
    assert float((weights * h).sum()) < 0.8 * math.log(10)
    with pytest.raises(ValueError):
        T.markov_tokens(2, 3, 4, g, sharpness=-1.0)


def test_warmup_factor_and_schedule():
    assert [T.warmup_factor(s, 4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert T.warmup_factor(0, 0) == 1.0
    with pytest.raises(ValueError):
        T.warmup_factor(0, -1)


@pytest.fixture
def one_thread():
    """Run a test with one thread and restore the caller's thread count afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_train_reversal_applies_the_warmup_schedule(monkeypatch):
    lrs = []

    class RecordingAdam(torch.optim.Adam):
        def step(self, closure=None):
            lrs.append(self.param_groups[0]["lr"])
            return super().step(closure)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    torch.manual_seed(0)
    model = T.TinyTransformer(8, d_model=16, n_heads=2, num_layers=1, max_len=8)
    T.train_reversal(model, steps=6, lr=1e-3, warmup_steps=4, seq_len=4, vocab_size=8,
                     eval_size=4, log_every=1)
    # linear warmup over 4 steps: 1/4, 2/4, 3/4 of the peak, then the peak
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3], rel=1e-12)


def test_train_reversal_learns_and_prints_progress(capsys, one_thread):
    torch.manual_seed(0)
    model = T.TinyTransformer(8, d_model=32, n_heads=2, num_layers=2, max_len=8, norm_position="pre")
    out = T.train_reversal(model, steps=150, lr=3e-3, warmup_steps=10, seq_len=4, vocab_size=8,
                           label="pre", eval_size=256)
    line = capsys.readouterr().out
    assert line.count("#") == 20 and "accuracy" in line
    assert out["steps"] == list(range(10, 151, 10)) and len(out["loss"]) == 15
    assert out["loss"][0] > 1.5 and out["accuracy"] > 0.9  # chance is 1/7
    with pytest.raises(ValueError):
        T.train_reversal(model, steps=0)


def test_committed_ln_placement_is_up_to_date(tmp_path):
    """images/ln_placement.png is what helpers.figures.ln_placement draws today (pixels),
    and drawing it raises no warning (no missing glyphs)."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    from helpers import figures
    from helpers.plotting import IMAGES_DIR, savefig

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = figures.ln_placement()
        fresh = savefig(fig, "ln_placement", directory=tmp_path)
    plt.close(fig)
    committed = mpimg.imread(IMAGES_DIR / "ln_placement.png")
    new = mpimg.imread(fresh)
    assert committed.shape == new.shape, "regenerate with: python -m helpers.figures"
    assert float(abs(committed - new).mean()) < 1e-3, "regenerate with: python -m helpers.figures"


@pytest.mark.parametrize("position", ["post", "pre"])
def test_norm_input_rms_by_hand(position):
    torch.manual_seed(0)
    model = T.TinyTransformer(10, d_model=16, n_heads=2, num_layers=2, max_len=6,
                              norm_position=position).double()
    idx = torch.randint(0, 10, (3, 6))
    rms = lambda z: float(z.pow(2).mean().sqrt())  # noqa: E731
    expected = []
    with torch.no_grad():
        x = model.tok_emb.weight[idx] + model.pos_emb.weight[:6]
        for b in model.blocks:
            if position == "pre":
                expected.append(rms(x))
                x = x + _attention_by_hand(b.attn, _ln(b.norm1, x))
                expected.append(rms(x))
                x = x + _ffn_by_hand(b.ffn, _ln(b.norm2, x))
            else:
                s = x + _attention_by_hand(b.attn, x)
                expected.append(rms(s))
                x = _ln(b.norm1, s)
                s = x + _ffn_by_hand(b.ffn, x)
                expected.append(rms(s))
                x = _ln(b.norm2, s)
    assert T.norm_input_rms(model, idx) == pytest.approx(expected, rel=1e-9)
