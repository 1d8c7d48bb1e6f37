r"""A small decoder-only Transformer whose blocks put the normalisation in one of three places,
shared by the lessons on Pre-LN/Post-LN (05) and DeepNorm (06).

Each block has a causal self-attention sub-layer and a feed-forward (FFN) sub-layer
:math:`F`, combined with the residual stream :math:`x` as

- ``"post"`` (Post-LN, Vaswani et al. 2017): :math:`x \leftarrow \mathrm{LN}(x + F(x))`;
- ``"pre"`` (Pre-LN, analysed by Xiong et al. 2020): :math:`x \leftarrow x + F(\mathrm{LN}(x))`, and the
  model applies one **final** norm after the last block;
- ``"deepnorm"`` (Wang et al. 2022): :math:`x \leftarrow \mathrm{LN}(\alpha x + F(x))`, a
  Post-LN block whose shortcut is up-scaled by :math:`\alpha`, together with the DeepNorm
  initialisation (:func:`deepnorm_init`).

The norm is LayerNorm or RMSNorm, from :mod:`helpers.norms` (the course's from-scratch
modules) or from ``torch.nn``. Also here: :func:`deepnorm_constants` (DeepNet's table),
per-layer gradient norms (:func:`layer_gradient_norms`), the early model update
(:func:`model_update`), the inputs of the norm layers (:func:`norm_input_rms`), the
sequence-reversal task (:func:`reversal_batch`), text-like token streams
(:func:`markov_tokens`), a short training loop with optional linear warmup and a progress
bar on stdout (:func:`train_reversal`), and an exercise checker for hand-written blocks
(:func:`helpers.checks.check_block_forward`).

For lesson 09 (today's Transformers): the layouts of current open models
(:data:`LAYOUTS`, :class:`LayoutBlock`, :class:`LayoutTransformer`: LLaMA's pre-norm,
Gemma 2's sandwich / Peri-LN, OLMo 2's reordered norm, no norm with LayerScale or SkipInit),
Gemma's :class:`GemmaRMSNorm`, attention with QK-norm per head or over the whole projection
that records its largest logit and entropy (:class:`QKNormAttention`), the order in which a
block's modules run (:func:`module_order`), an AdamW training loop with z-loss
(:func:`train_lm`), and LayerNorm input/output samples with tanh fits
(:func:`layer_norm_samples`, :func:`tanh_fit`). These leave the classes above unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import norms as course_norms
from .progress import Progress

__all__ = ["NORM_POSITIONS", "make_norm", "CausalSelfAttention", "FeedForward", "Block",
           "TinyTransformer", "deepnorm_constants", "deepnorm_init", "layer_gradient_norms",
           "reversal_batch", "markov_tokens", "warmup_factor", "train_reversal",
           "model_update", "norm_input_rms",
           "LAYOUTS", "QK_NORMS", "GemmaRMSNorm", "make_norm_layer", "QKNormAttention",
           "LayoutBlock", "LayoutTransformer", "module_order", "residual_reads", "rope",
           "cosine_lr", "train_lm",
           "train_lm_batch", "layer_norm_samples", "tanh_fit"]

NORM_POSITIONS = ("post", "pre", "deepnorm")


def make_norm(norm: str, d_model: int, impl: str = "torch") -> nn.Module:
    """``"layer"`` -> LayerNorm(d_model), ``"rms"`` -> RMSNorm(d_model), from ``torch.nn``
    (``impl="torch"``) or from :mod:`helpers.norms` (``impl="course"``); torch's defaults
    (eps 1e-5 for LayerNorm, eps=None for RMSNorm, gain 1, bias 0)."""
    if norm not in ("layer", "rms"):
        raise ValueError(f"norm must be 'layer' or 'rms', got {norm!r}")
    if impl not in ("torch", "course"):
        raise ValueError(f"impl must be 'torch' or 'course', got {impl!r}")
    lib = nn if impl == "torch" else course_norms
    return lib.LayerNorm(d_model) if norm == "layer" else lib.RMSNorm(d_model)


class CausalSelfAttention(nn.Module):
    r"""Multi-head causal self-attention with separate ``q_proj``, ``k_proj``, ``v_proj`` and
    ``out_proj`` (so an initialisation can treat them differently):
    :math:`\mathrm{softmax}(QK^\top/\sqrt{d_h} + M)\,V` per head, :math:`M` masking the
    future, heads concatenated and projected by ``out_proj``.

    Lesson 05."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        h = self.n_heads

        def split(z: Tensor) -> Tensor:  # (B, T, d) -> (B, h, T, d/h)
            return z.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        # softmax(q k^T / sqrt(d/h) + causal mask) v, torch's fused kernel
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    r""":math:`\mathrm{FFN}(x) = W_2\,\mathrm{ReLU}(W_1 x + b_1) + b_2` (``fc1``, ``fc2``).

    Lesson 05."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Block(nn.Module):
    r"""One Transformer block, the norm placed by ``norm_position``:

    - ``"post"``:     :math:`y = \mathrm{LN}_1(x + \mathrm{Attn}(x))`,
      :math:`\ \mathrm{out} = \mathrm{LN}_2(y + \mathrm{FFN}(y))`;
    - ``"pre"``:      :math:`y = x + \mathrm{Attn}(\mathrm{LN}_1(x))`,
      :math:`\ \mathrm{out} = y + \mathrm{FFN}(\mathrm{LN}_2(y))`;
    - ``"deepnorm"``: :math:`y = \mathrm{LN}_1(\alpha x + \mathrm{Attn}(x))`,
      :math:`\ \mathrm{out} = \mathrm{LN}_2(\alpha y + \mathrm{FFN}(y))`.

    ``alpha`` must be 1 unless ``norm_position="deepnorm"``.

    Lessons 05, 06.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, norm_position: str = "pre",
                 norm: str = "layer", alpha: float = 1.0, norm_impl: str = "torch") -> None:
        super().__init__()
        if norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {norm_position!r}")
        if not alpha > 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        if norm_position != "deepnorm" and alpha != 1.0:
            raise ValueError(f"alpha={alpha} only applies to norm_position='deepnorm'")
        self.norm_position = norm_position
        self.alpha = float(alpha)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = make_norm(norm, d_model, norm_impl)
        self.norm2 = make_norm(norm, d_model, norm_impl)

    def forward(self, x: Tensor) -> Tensor:
        if self.norm_position == "pre":
            x = x + self.attn(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        # "post" is "deepnorm" with alpha = 1
        x = self.norm1(self.alpha * x + self.attn(x))
        return self.norm2(self.alpha * x + self.ffn(x))


class TinyTransformer(nn.Module):
    r"""Decoder-only language model: token + learned position embeddings, ``num_layers``
    :class:`Block` s, a final norm **only for Pre-LN** (``final_norm`` is ``None`` otherwise),
    and a linear head to ``vocab_size`` logits. Input (B, T) token ids, output (B, T, V).

    ``norm_position="deepnorm"`` uses the decoder-only constants of
    :func:`deepnorm_constants` (alpha for the blocks, beta for :func:`deepnorm_init`) unless
    ``alpha``/``beta`` are given. Every model starts from the same initialisation
    (:func:`deepnorm_init` with beta = 1, i.e. Xavier-normal weights, zero biases,
    N(0, 1) embeddings), so that only the placement differs; DeepNorm then uses its beta.

    Lessons 05, 06.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4,
                 num_layers: int = 6, d_ff: int | None = None, max_len: int = 64,
                 norm_position: str = "pre", norm: str = "layer", norm_impl: str = "torch",
                 alpha: float | None = None, beta: float | None = None) -> None:
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("d_model", d_model),
                        ("num_layers", num_layers), ("max_len", max_len)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {norm_position!r}")
        if norm_position != "deepnorm" and (alpha is not None or beta is not None):
            raise ValueError("alpha and beta only apply to norm_position='deepnorm'")
        d_ff = 4 * d_model if d_ff is None else d_ff
        if norm_position == "deepnorm":
            a, b = deepnorm_constants(num_decoder_layers=num_layers)["decoder"]
            alpha = a if alpha is None else alpha
            beta = b if beta is None else beta
        else:
            alpha, beta = 1.0, 1.0
        self.norm_position = norm_position
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff, norm_position, norm, alpha, norm_impl)
            for _ in range(num_layers))
        self.final_norm = make_norm(norm, d_model, norm_impl) if norm_position == "pre" else None
        self.head = nn.Linear(d_model, vocab_size)
        deepnorm_init(self, beta)

    def forward(self, idx: Tensor) -> Tensor:
        """Logits (B, T, V): ``head(features(idx))``."""
        return self.head(self.features(idx))

    def features(self, idx: Tensor) -> Tensor:
        """The representation the head reads, (B, T, d): the last block's output, after the
        final norm for Pre-LN."""
        if idx.dim() != 2 or idx.shape[1] > self.max_len:
            raise ValueError(f"expected (B, T) token ids with T <= {self.max_len}, "
                             f"got shape {list(idx.shape)}")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x


def deepnorm_constants(num_encoder_layers: int = 0, num_decoder_layers: int = 0
                       ) -> dict[str, tuple[float, float]]:
    r"""DeepNorm's :math:`(\alpha, \beta)` (Wang et al. 2022, DeepNet, Table 1), for N encoder
    and M decoder layers; only the sides that exist appear in the result:

    - encoder-only (M = 0): encoder :math:`\alpha = (2N)^{1/4},\ \beta = (8N)^{-1/4}`;
    - decoder-only (N = 0): decoder :math:`\alpha = (2M)^{1/4},\ \beta = (8M)^{-1/4}`;
    - encoder-decoder: encoder :math:`\alpha = 0.81 (N^4 M)^{1/16},\ \beta = 0.87 (N^4 M)^{-1/16}`,
      decoder :math:`\alpha = (3M)^{1/4},\ \beta = (12M)^{-1/4}`.

    >>> {k: tuple(round(v, 3) for v in ab) for k, ab in deepnorm_constants(6).items()}
    {'encoder': (1.861, 0.38)}

    Lessons 06, 12.
    """
    n, m = num_encoder_layers, num_decoder_layers
    for name, v in (("num_encoder_layers", n), ("num_decoder_layers", m)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    if n == 0 and m == 0:
        raise ValueError("need at least one encoder or decoder layer")
    if m == 0:
        return {"encoder": ((2 * n) ** 0.25, (8 * n) ** -0.25)}
    if n == 0:
        return {"decoder": ((2 * m) ** 0.25, (8 * m) ** -0.25)}
    return {"encoder": (0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16)),
            "decoder": ((3 * m) ** 0.25, (12 * m) ** -0.25)}


def deepnorm_init(model: nn.Module, beta: float = 1.0) -> nn.Module:
    r"""DeepNet's initialisation (Wang et al. 2022, Figure 2) on every block of ``model``:
    Xavier-normal with gain ``beta`` for the FFN weights (``fc1``, ``fc2``) and the attention
    value and output projections (``v_proj``, ``out_proj``); Xavier-normal with gain 1 for the
    query and key projections (``q_proj``, ``k_proj``), which beta leaves untouched. Xavier
    normal: :math:`W_{ij} \sim \mathcal N(0,\ \text{gain}^2 \cdot 2/(\text{fan\_in} + \text{fan\_out}))`.
    All biases are set to 0, embeddings to N(0, 1), the head to Xavier-normal (gain 1).
    Norm layers keep gain 1, bias 0. ``beta = 1`` is the common baseline initialisation.
    Returns ``model``.
    """
    if not beta > 0:
        raise ValueError(f"beta must be positive, got {beta}")
    scaled = ("fc1", "fc2", "v_proj", "out_proj")
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            gain = beta if name.rsplit(".", 1)[-1] in scaled else 1.0
            nn.init.xavier_normal_(module.weight, gain=gain)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight)
    return model


def layer_gradient_norms(model: TinyTransformer, parameter: str = "ffn.fc2.weight") -> list[float]:
    r""":math:`\lVert \partial \mathcal L / \partial W \rVert_F` of ``parameter`` (a name inside
    a block, e.g. ``"ffn.fc2.weight"``, the FFN's second weight :math:`W^{2}` of Xiong et al.
    2020, or ``"attn.v_proj.weight"``) for each block, first to last. Call after
    ``loss.backward()``; raises ``ValueError`` if a gradient is missing.

    Lesson 05."""
    out = []
    for i, block in enumerate(model.blocks):
        p = block.get_parameter(parameter)
        if p.grad is None:
            raise ValueError(f"block {i}: {parameter} has no gradient; call loss.backward() first")
        out.append(float(p.grad.norm()))
    return out


def markov_tokens(batch_size: int, length: int, vocab_size: int, generator: torch.Generator,
                  sharpness: float = 3.0) -> Tensor:
    r"""(B, T) token streams from a random first-order Markov chain, a stand-in for text
    (neighbouring tokens are correlated, some tokens are much more frequent than others).
    Transition probabilities :math:`P(j \mid i) = \mathrm{softmax}_j(s\,Z_{ij})` with
    :math:`Z_{ij} \sim \mathcal N(0, 1)` and ``sharpness`` s (s = 0 gives i.i.d. uniform
    tokens); the first token is uniform. Everything is drawn from ``generator``.

    Lesson 05."""
    if sharpness < 0:
        raise ValueError(f"sharpness must be >= 0, got {sharpness}")
    z = torch.randn(vocab_size, vocab_size, generator=generator, dtype=torch.float64)
    probs = (sharpness * z).softmax(1)
    x = torch.empty(batch_size, length, dtype=torch.long)
    x[:, 0] = torch.randint(0, vocab_size, (batch_size,), generator=generator)
    for t in range(1, length):
        x[:, t] = torch.multinomial(probs[x[:, t - 1]], 1, generator=generator).squeeze(1)
    return x


def reversal_batch(batch_size: int, seq_len: int, vocab_size: int, generator: torch.Generator
                   ) -> tuple[Tensor, Tensor]:
    r"""The sequence-reversal task as language modelling. Symbols are drawn uniformly from
    ``1 .. vocab_size-1`` (token 0 is the separator); the model reads
    ``[a_1 .. a_n, 0, a_n .. a_2]`` and must predict, at the separator and after it, the
    reversed sequence :math:`a_n, \dots, a_1`. Returns ``(inputs, targets)`` of shape
    (B, 2n) with ``targets = -100`` (ignored by cross-entropy) on the first n positions.
    Chance accuracy is :math:`1/(V-1)`.

    Lessons 05, 06."""
    if vocab_size < 3 or seq_len < 2:
        raise ValueError(f"need vocab_size >= 3 and seq_len >= 2, got {vocab_size}, {seq_len}")
    a = torch.randint(1, vocab_size, (batch_size, seq_len), generator=generator)
    rev = a.flip(1)
    sep = torch.zeros(batch_size, 1, dtype=torch.long)
    inputs = torch.cat([a, sep, rev[:, :-1]], 1)
    targets = torch.cat([torch.full_like(a, -100), rev], 1)
    return inputs, targets


def warmup_factor(step: int, warmup_steps: int) -> float:
    r"""Linear warmup: the learning rate at optimiser step ``step`` (0-based) is
    :math:`\eta \cdot \min(1, (\text{step}+1)/\text{warmup\_steps})`; no warmup when
    ``warmup_steps = 0``.

    Lesson 05."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    return 1.0 if warmup_steps == 0 else min(1.0, (step + 1) / warmup_steps)


def train_reversal(model: nn.Module, steps: int = 300, lr: float = 3e-3, warmup_steps: int = 0,
                   batch_size: int = 32, seq_len: int = 8, vocab_size: int = 16,
                   seed: int = 0, eval_size: int = 512, betas=(0.9, 0.98),
                   label: str | None = None, log_every: int = 10) -> dict:
    r"""Train ``model`` on :func:`reversal_batch` with Adam (``lr`` peak, ``betas``, as in
    Vaswani et al. 2017) and cross-entropy, for ``steps`` steps, the learning rate following
    :func:`warmup_factor` (constant after the warmup). The data comes from a generator
    seeded with ``seed``. With ``label`` set, shows one progress line
    (:class:`helpers.progress.Progress`: live in a notebook, a single final line in the saved
    output), ending with the final loss and accuracy (deterministic text, no timings).

    Returns ``{"steps": [...], "loss": [...], "accuracy": float, "final_loss": float}``: the
    training loss every ``log_every`` steps (averaged over those steps) and the token
    accuracy on a fresh evaluation set of ``eval_size`` sequences.

    Lessons 05, 06.
    """
    if steps < 1 or log_every < 1:
        raise ValueError(f"steps and log_every must be >= 1, got {steps}, {log_every}")
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_factor(s, warmup_steps))
    model.train()
    logged_steps, losses, acc_loss = [], [], 0.0
    bar = Progress(label, steps) if label is not None else None
    for step in range(steps):
        x, y = reversal_batch(batch_size, seq_len, vocab_size, g)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        acc_loss += float(loss.detach())
        if bar is not None:
            bar.update(step + 1)
        if (step + 1) % log_every == 0:
            logged_steps.append(step + 1)
            losses.append(acc_loss / log_every)
            acc_loss = 0.0
    model.eval()
    with torch.no_grad():
        x, y = reversal_batch(eval_size, seq_len, vocab_size, g)
        logits = model(x)
        mask = y != -100
        final_loss = float(nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()))
        accuracy = float((logits.argmax(-1)[mask] == y[mask]).float().mean())
    if bar is not None:
        bar.close(f"loss {final_loss:.2f}  accuracy {accuracy:.2f}")
    return {"steps": logged_steps, "loss": losses, "accuracy": accuracy,
            "final_loss": final_loss}


def model_update(model_0: nn.Module, model_t: nn.Module, x: Tensor, output: str = "logits") -> float:
    r"""The model update of DeepNet section 3, :math:`\lVert F(x;\theta_t) - F(x;\theta_0)\rVert`,
    as a root mean square over all entries (so it does not grow with the batch size), both
    models in eval mode, no gradients. ``output="logits"`` compares the models' outputs;
    ``output="features"`` compares :meth:`TinyTransformer.features`, the representation
    the head reads, which leaves out the head's own update.

    Lessons 05, 06."""
    if output not in ("logits", "features"):
        raise ValueError(f"output must be 'logits' or 'features', got {output!r}")
    model_0.eval()
    model_t.eval()
    with torch.no_grad():
        if output == "features":
            return float((model_t.features(x) - model_0.features(x)).pow(2).mean().sqrt())
        return float((model_t(x) - model_0(x)).pow(2).mean().sqrt())


def norm_input_rms(model: TinyTransformer, idx: Tensor) -> list[float]:
    r"""Root mean square of the input of every norm layer inside the blocks (``norm1``, then
    ``norm2``, block by block), for token ids ``idx``, no gradients. Under Post-LN and DeepNorm
    that input is the residual sum :math:`\alpha x + F(x)`; under Pre-LN it is the residual
    stream :math:`x` itself, so the list shows how the stream grows with depth.

    Lessons 05, 06."""
    found: list[float] = []
    _forward_with_hooks(model, idx, [norm.register_forward_pre_hook(
        lambda _m, args: found.append(float(args[0].detach().pow(2).mean().sqrt())))
        for block in model.blocks for norm in (block.norm1, block.norm2)])
    return found


def _forward_with_hooks(model: nn.Module, idx: Tensor, hooks: list) -> None:
    """Run ``model(idx)`` without gradients, then remove ``hooks`` (also if it raises)."""
    try:
        with torch.no_grad():
            model(idx)
    finally:
        for h in hooks:
            h.remove()


# ===================================================================================

# Lesson 09: where today's open models put the norm, QK-norm, DyT, and no norm at all
# ==========================================================================================
# Placements, each as written in the model's ``forward`` in Hugging Face ``transformers``
# (read the forward, not the module names):
#   "pre"       LLaMA, ``models/llama/modeling_llama.py``: x + F(N(x)), a final norm;
#   "sandwich"  Gemma 2, ``models/gemma2/modeling_gemma2.py`` (four norms per layer), the same
#               layout as Peri-LN (Kim et al. 2025) and CogView's sandwich-LN: x + N_out(F(N_in(x))),
#               a final norm;
#   "reordered" OLMo 2, ``models/olmo2/modeling_olmo2.py``: x + N_out(F(x)), a final norm;
#   "post"      the original Transformer: N(x + F(x)), no final norm;
#   "none"      x + F(x): no norm in the blocks (LayerScale / SkipInit scale the branch instead).

LAYOUTS = ("pre", "sandwich", "reordered", "post", "none")
QK_NORMS = (None, "head", "whole")


class GemmaRMSNorm(nn.Module):
    r"""Gemma's RMSNorm (``models/gemma/modeling_gemma.py``, ``GemmaRMSNorm``):
    :math:`y = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \epsilon}} \odot (1 + w)`, the stored
    ``weight`` :math:`w` **initialised to 0**, so the effective gain starts at 1; eps 1e-6.
    (In Gemma the product is computed in float32, then cast to the input dtype.)"""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.to(out.dtype))).to(x.dtype)


def make_norm_layer(kind: str, dim: int, impl: str = "torch", dyt_alpha: float = 0.5) -> nn.Module:
    """A norm layer over the last dim of size ``dim``: ``"layer"`` (LayerNorm), ``"rms"``
    (RMSNorm), both from ``torch.nn`` (``impl="torch"``) or :mod:`helpers.norms`
    (``impl="course"``); ``"gemma_rms"`` (:class:`GemmaRMSNorm`); ``"dyt"``
    (:class:`helpers.norms.DyT` with ``alpha_init_value=dyt_alpha``); ``"identity"``."""
    if kind in ("layer", "rms"):
        return make_norm(kind, dim, impl)
    if kind == "gemma_rms":
        return GemmaRMSNorm(dim)
    if kind == "dyt":
        return course_norms.DyT(dim, alpha_init_value=dyt_alpha)
    if kind == "identity":
        return nn.Identity()
    raise ValueError(f"unknown norm kind {kind!r}")


class QKNormAttention(nn.Module):
    r"""Causal multi-head self-attention written out (no fused kernel), with optional QK-norm:

    - ``qk_norm=None``: :math:`\mathrm{softmax}(q k^\top/\sqrt{d_h} + M)\,v` per head;
    - ``qk_norm="head"``: one norm over ``head_dim`` applied to every head's q (and one to k),
      its gain shared by the heads (Wortsman et al. 2023 section 3.1.1; Gemma 3, Qwen3
      ``models/qwen3/modeling_qwen3.py``);
    - ``qk_norm="whole"``: one norm over the whole ``d_model`` projection before the split
      into heads (OLMo 2, ``models/olmo2/modeling_olmo2.py``).

    The scale :math:`1/\sqrt{d_h}` is kept in all three. With ``record=True`` the forward
    stores, without gradients, ``last_max_logit`` (the largest pre-softmax logit
    :math:`q\cdot k/\sqrt{d_h}` over the unmasked positions) and ``last_entropy`` (the mean
    attention entropy in nats over heads and query positions 2..T; position 1 can only
    attend to itself). :func:`train_lm_batch` sets ``stats`` to a list, and the forward then
    appends the same two numbers as tensors (what :func:`torch.func.vmap` can return)."""

    def __init__(self, d_model: int, n_heads: int, qk_norm: str | None = None,
                 qk_norm_kind: str = "layer", impl: str = "torch") -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm must be one of {QK_NORMS}, got {qk_norm!r}")
        self.n_heads, self.head_dim, self.qk_norm = n_heads, d_model // n_heads, qk_norm
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        if qk_norm is not None:
            dim = self.head_dim if qk_norm == "head" else d_model
            self.q_norm = make_norm_layer(qk_norm_kind, dim, impl)
            self.k_norm = make_norm_layer(qk_norm_kind, dim, impl)
        self.record = False
        self.last_max_logit = float("nan")
        self.last_entropy = float("nan")
        self.stats: list[Tensor] | None = None  # set by train_lm_batch: tensors, not floats

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        h, dh = self.n_heads, self.head_dim
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk_norm == "whole":  # OLMo 2: over all heads' channels at once
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (z.view(b, t, h, dh).transpose(1, 2) for z in (q, k, v))  # (B, h, T, dh)
        if self.qk_norm == "head":  # per head, over head_dim
            q, k = self.q_norm(q), self.k_norm(k)
        logits = q @ k.transpose(-2, -1) / dh ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        p = logits.masked_fill(mask, float("-inf")).softmax(-1)
        if self.record or self.stats is not None:
            with torch.no_grad():
                top = logits.masked_fill(mask, float("-inf")).max()
                ent = -(p * p.clamp_min(1e-300).log()).sum(-1)[..., 1:].mean()  # (B, h, T) -> mean
                if self.stats is not None:  # inside torch.func.vmap: keep tensors
                    self.stats.extend([top, ent])
                else:
                    self.last_max_logit, self.last_entropy = float(top), float(ent)
        out = (p @ v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(out)


class LayoutBlock(nn.Module):
    r"""A Transformer block with the norms of one of :data:`LAYOUTS`. Norm slots (``None``
    where the layout has none): ``attn_in_norm``, ``attn_out_norm``, ``ffn_in_norm``,
    ``ffn_out_norm``; with :math:`N_\mathrm{in}`, :math:`N_\mathrm{out}` those of each
    sub-layer :math:`F` (attention, then FFN):

    - ``"pre"``:       :math:`x + s \odot F(N_\mathrm{in}(x))`;
    - ``"sandwich"``:  :math:`x + s \odot N_\mathrm{out}(F(N_\mathrm{in}(x)))`;
    - ``"reordered"``: :math:`x + s \odot N_\mathrm{out}(F(x))`;
    - ``"post"``:      :math:`N_\mathrm{out}(x + s \odot F(x))`;
    - ``"none"``:      :math:`x + s \odot F(x)`.

    :math:`s` is 1 unless ``branch_scale`` is ``"layerscale"`` (a per-channel vector,
    Touvron et al. 2021, initialised to ``branch_scale_init``) or ``"skipinit"`` (one scalar
    per branch, De & Smith 2020, initialised to ``branch_scale_init``, 0 in the paper).
    ``qk_norm`` as in :class:`QKNormAttention`, its norm of kind ``qk_norm_kind`` (default:
    ``norm``, or LayerNorm when ``norm`` is ``"dyt"`` or ``"identity"``).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, layout: str = "pre",
                 norm: str = "layer", impl: str = "torch", qk_norm: str | None = None,
                 qk_norm_kind: str | None = None, dyt_alpha: float = 0.5,
                 branch_scale: str | None = None, branch_scale_init: float = 0.0) -> None:
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if branch_scale not in (None, "layerscale", "skipinit"):
            raise ValueError(f"branch_scale must be None, 'layerscale' or 'skipinit', got {branch_scale!r}")
        if qk_norm_kind is None:
            qk_norm_kind = norm if norm in ("layer", "rms", "gemma_rms") else "layer"
        self.layout = layout
        self.attn = QKNormAttention(d_model, n_heads, qk_norm, qk_norm_kind, impl)
        self.ffn = FeedForward(d_model, d_ff)
        has_in = layout in ("pre", "sandwich")
        has_out = layout in ("sandwich", "reordered", "post")

        def slot(present: bool) -> nn.Module | None:
            return make_norm_layer(norm, d_model, impl, dyt_alpha) if present else None

        self.attn_in_norm, self.attn_out_norm = slot(has_in), slot(has_out)
        self.ffn_in_norm, self.ffn_out_norm = slot(has_in), slot(has_out)
        self.branch_scale = branch_scale
        if branch_scale is not None:
            shape = (d_model,) if branch_scale == "layerscale" else (1,)
            self.attn_scale = nn.Parameter(torch.full(shape, float(branch_scale_init)))
            self.ffn_scale = nn.Parameter(torch.full(shape, float(branch_scale_init)))

    def _sub(self, x: Tensor, f: nn.Module, n_in, n_out, scale) -> Tensor:
        if self.layout == "post":
            y = f(x)
            return n_out(x + (y if scale is None else scale * y))
        y = f(n_in(x) if n_in is not None else x)
        if n_out is not None:
            y = n_out(y)
        return x + (y if scale is None else scale * y)

    def forward(self, x: Tensor) -> Tensor:
        s1 = self.attn_scale if self.branch_scale else None
        s2 = self.ffn_scale if self.branch_scale else None
        x = self._sub(x, self.attn, self.attn_in_norm, self.attn_out_norm, s1)
        return self._sub(x, self.ffn, self.ffn_in_norm, self.ffn_out_norm, s2)


class LayoutTransformer(nn.Module):
    r"""Decoder-only language model built from :class:`LayoutBlock` s: token + learned
    position embeddings, ``num_layers`` blocks, a final norm (by default for every layout
    except ``"post"`` and ``"none"``; ``final_norm=False`` removes it, ``True`` forces it), a
    linear head. Initialisation as :class:`TinyTransformer`'s baseline (Xavier-normal
    weights, zero biases, N(0, 1) embeddings), then the norms' and branch scales' own
    initial values. Input (B, T) token ids, output (B, T, V) logits."""

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 4, num_layers: int = 2,
                 d_ff: int | None = None, max_len: int = 64, layout: str = "pre",
                 norm: str = "layer", impl: str = "torch", qk_norm: str | None = None,
                 qk_norm_kind: str | None = None, dyt_alpha: float = 0.5,
                 branch_scale: str | None = None, branch_scale_init: float = 0.0,
                 final_norm: bool | None = None) -> None:
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("d_model", d_model),
                        ("num_layers", num_layers), ("max_len", max_len)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            LayoutBlock(d_model, n_heads, d_ff, layout, norm, impl, qk_norm, qk_norm_kind,
                        dyt_alpha, branch_scale, branch_scale_init) for _ in range(num_layers))
        if final_norm is None:
            final_norm = layout not in ("post", "none")
        self.final_norm = make_norm_layer(norm, d_model, impl, dyt_alpha) if final_norm else None
        self.head = nn.Linear(d_model, vocab_size)
        deepnorm_init(self, 1.0)

    def residual_stream(self, idx: Tensor) -> list[Tensor]:
        """The residual stream after the embeddings and after every block (num_layers + 1
        tensors of shape (B, T, d)), no gradients."""
        with torch.no_grad():
            x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
            out = [x]
            for block in self.blocks:
                x = block(x)
                out.append(x)
        return out

    # the same embeddings, stack of blocks and optional final norm as TinyTransformer
    features = TinyTransformer.features

    def forward(self, idx: Tensor) -> Tensor:
        """Logits (B, T, V): ``head(features(idx))``."""
        return self.head(self.features(idx))


def module_order(model: nn.Module, idx: Tensor, block: int = 0) -> list[str]:
    """The order in which the sub-modules of one block (``attn``, ``ffn`` and the norm
    slots) run during a forward pass on ``idx``, recorded with forward hooks, followed by
    ``final_norm`` when the model has one: how the layout is read from the running code
    rather than from module names."""
    target = model.blocks[block]
    names = ["attn", "ffn", "attn_in_norm", "attn_out_norm", "ffn_in_norm", "ffn_out_norm"]
    order: list[str] = []
    hooks = [getattr(target, n).register_forward_hook(lambda *_a, n=n: order.append(n))
             for n in names if getattr(target, n, None) is not None]
    if getattr(model, "final_norm", None) is not None:
        hooks.append(model.final_norm.register_forward_hook(
            lambda *_a: order.append("final_norm")))
    _forward_with_hooks(model, idx, hooks)
    return order


def residual_reads(model: nn.Module, idx: Tensor, block: int = 0, tol: float = 1e-9) -> dict[str, str]:
    r"""What each output norm of one block receives, measured in a forward pass on ``idx``
    with hooks (not read from the layout's name): for the sub-layer ``"attn"`` and ``"ffn"``
    with an output norm, ``"F(x)"`` when that norm's input equals the sub-layer's output
    :math:`F(\cdot)` alone (the norm sits inside the branch: :math:`x + \mathrm N(F(x))`), or
    ``"x + F(x)"`` when it equals the residual stream plus that output (the norm sits on the
    stream: :math:`\mathrm N(x + F(x))`, Post-LN). The stream :math:`x` is what enters the
    sub-layer's input norm, or the sub-layer itself when it has none. Sub-layers without an
    output norm are left out; anything else raises ``ValueError``."""
    target = model.blocks[block]
    seen: dict[str, Tensor] = {}

    def keep(key):
        def hook(_m, args, out=None):
            seen[key] = (args[0] if out is None else out).detach().clone()
        return hook

    hooks = []
    for sub in ("attn", "ffn"):
        f, n_in, n_out = (getattr(target, sub), getattr(target, f"{sub}_in_norm", None),
                          getattr(target, f"{sub}_out_norm", None))
        if n_out is None:
            continue
        hooks.append((n_in if n_in is not None else f).register_forward_pre_hook(keep(f"{sub}.x")))
        hooks.append(f.register_forward_hook(lambda _m, _a, out, sub=sub: seen.__setitem__(
            f"{sub}.F", out.detach().clone())))
        hooks.append(n_out.register_forward_pre_hook(keep(f"{sub}.norm_in")))
    _forward_with_hooks(model, idx, hooks)
    reads = {}
    for sub in ("attn", "ffn"):
        if f"{sub}.norm_in" not in seen:
            continue
        u, y, x = seen[f"{sub}.norm_in"], seen[f"{sub}.F"], seen[f"{sub}.x"]
        scale = tol * (1 + float(u.abs().max()))
        if float((u - y).abs().max()) <= scale:
            reads[sub] = "F(x)"
        elif float((u - (x + y)).abs().max()) <= scale:
            reads[sub] = "x + F(x)"
        else:
            raise ValueError(f"{sub}'s output norm reads neither F(x) nor x + F(x)")
    return reads


def rope(x: Tensor, base: float = 10000.0) -> Tensor:
    r"""Rotary position embedding (Su et al. 2021) in the "rotate half" form of Hugging
    Face's LLaMA, Qwen3 and Gemma code, for x of shape (..., T, d) with d even: channel
    :math:`i < d/2` and channel :math:`i + d/2` of position :math:`t` form a pair rotated by
    the angle :math:`t\,	heta_i`, :math:`	heta_i = 	ext{base}^{-2i/d}`:

    .. math::
        \mathrm{RoPE}(x) = x \odot \cos(t	heta) + \mathrm{rotate\_half}(x) \odot \sin(t	heta),
        \quad \mathrm{rotate\_half}([x_1, x_2]) = [-x_2, x_1].

    A rotation of each pair: it keeps every vector's norm."""
    t, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"the last dimension must be even, got {d}")
    theta = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * theta[None, :]  # (T, d/2)
    cos = torch.cat([angle.cos()] * 2, -1).to(x.dtype)
    sin = torch.cat([angle.sin()] * 2, -1).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def cosine_lr(step: int, steps: int, warmup_steps: int) -> float:
    r"""Learning-rate factor at optimiser step ``step`` (0-based): linear warmup to 1 over
    ``warmup_steps``, then cosine decay to 0 at ``steps`` (the schedule of Wortsman et al.
    2023, section 2, without their final floor)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return 0.5 * (1.0 + torch.cos(torch.tensor(torch.pi * progress, dtype=torch.float64)).item())


def train_lm(model: nn.Module, steps: int = 200, lr: float = 1e-2, warmup_steps: int = 20,
             weight_decay: float = 0.0, z_loss: float = 0.0, batch_size: int = 32,
             seq_len: int = 8, vocab_size: int = 16, seed: int = 0, betas=(0.9, 0.95),
             record_attention: bool = False, eval_size: int = 256,
             label: str | None = None) -> dict:
    r"""Train ``model`` on the reversal task (:func:`reversal_batch`, data from a generator
    seeded with ``seed``) with AdamW (``betas`` (0.9, 0.95) and no biases' exception, as
    Wortsman et al. 2023 use; decoupled ``weight_decay``), :func:`cosine_lr` schedule, and
    cross-entropy plus ``z_loss`` :math:`\cdot \log^2 Z` (Z the softmax normaliser of the
    output logits, averaged over the predicted positions). With ``label`` set prints one line.

    Returns, per step: ``loss`` (cross-entropy), ``log_z`` (mean :math:`\log Z`),
    ``mean_logit`` (the output logits' mean over the vocabulary, averaged over positions),
    ``top_logit`` (the largest output logit, averaged over positions) and, with
    ``record_attention``, ``max_logit`` (largest attention logit over all layers) and
    ``entropy`` (the lowest of the layers' mean attention entropies); then ``final_loss``
    and ``accuracy`` on ``eval_size`` fresh sequences. A non-finite loss stops training
    (``diverged`` True; the remaining steps are not run)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay,
                            foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_lr(s, steps, warmup_steps))
    attns = [m for m in model.modules() if isinstance(m, QKNormAttention)]
    for a in attns:
        a.record = record_attention
    hist = {"loss": [], "log_z": [], "mean_logit": [], "top_logit": [], "max_logit": [], "entropy": []}
    diverged = False
    model.train()
    for _ in range(steps):
        x, y = reversal_batch(batch_size, seq_len, vocab_size, g)
        logits = model(x)[y != -100]
        ce = nn.functional.cross_entropy(logits, y[y != -100])
        log_z = torch.logsumexp(logits, -1)
        loss = ce + z_loss * log_z.pow(2).mean() if z_loss else ce
        if not torch.isfinite(loss):
            diverged = True
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        hist["loss"].append(float(ce.detach()))
        hist["log_z"].append(float(log_z.detach().mean()))
        hist["mean_logit"].append(float(logits.detach().mean()))
        hist["top_logit"].append(float(logits.detach().max(-1).values.mean()))
        if record_attention:
            hist["max_logit"].append(max(a.last_max_logit for a in attns))
            hist["entropy"].append(min(a.last_entropy for a in attns))
    for a in attns:
        a.record = False
    model.eval()
    with torch.no_grad():
        x, y = reversal_batch(eval_size, seq_len, vocab_size, g)
        logits = model(x)
        mask = y != -100
        final_loss = float(nn.functional.cross_entropy(logits[mask], y[mask]))
        accuracy = float((logits.argmax(-1)[mask] == y[mask]).double().mean())
    if diverged or final_loss != final_loss:
        final_loss, diverged = float("nan"), True
    if label is not None:
        print(f"{label:<34s} loss {final_loss:.3f}  accuracy {accuracy:.2f}"
              + ("  (diverged)" if diverged else ""))
    return {**hist, "final_loss": final_loss, "accuracy": accuracy, "diverged": diverged}


def _per_model(value, n: int, name: str) -> list[float]:
    values = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(values) != n:
        raise ValueError(f"{name}: expected one value or {n} values, got {len(values)}")
    return [float(v) for v in values]


def train_lm_batch(models: list[nn.Module], steps: int = 200, lr=1e-2, warmup_steps: int = 20,
                   weight_decay=0.0, z_loss=0.0, batch_size: int = 32, seq_len: int = 8,
                   vocab_size: int = 16, seeds=0, betas=(0.9, 0.95), eps: float = 1e-8,
                   record_attention: bool = False, eval_size: int = 256,
                   labels: list[str] | None = None) -> list[dict]:
    r""":func:`train_lm` for several models of the same architecture at once: their
    parameters are stacked (:func:`torch.func.stack_module_state`) and one forward pass,
    vectorised over the models with :func:`torch.func.vmap`, serves them all, which on a CPU
    costs far less than running them one after the other. The models stay independent:
    model :math:`i` reads its own data (a generator seeded with ``seeds[i]``) and has its own
    ``lr``, ``weight_decay`` and ``z_loss`` (each one value for all or a list with one per
    model). Its AdamW step is torch's (``torch.optim.AdamW``, decoupled decay) written out
    for a learning rate per model: with :math:`t` the step, :math:`g` the gradient,

    .. math::
        p \leftarrow p\,(1 - \eta_t \lambda), \quad m \leftarrow eta_1 m + (1 - eta_1) g,
        \quad v \leftarrow eta_2 v + (1 - eta_2) g^2,\quad
        p \leftarrow p - rac{\eta_t}{1 - eta_1^t}\,
        rac{m}{\sqrt{v / (1 - eta_2^t)} + \epsilon},

    :math:`\eta_t` = ``lr`` :math:`\cdot` :func:`cosine_lr`. The loss of each model is its
    cross-entropy plus ``z_loss`` :math:`\cdot` mean :math:`\log^2 Z`; a model whose loss is
    not finite stops (``diverged``; its parameters are kept from the step before). The
    trained parameters are copied back into ``models``. Returns one dict per model with the
    keys of :func:`train_lm`; with ``labels`` prints one line per model."""
    from torch.func import functional_call, stack_module_state, vmap

    n = len(models)
    if n < 1:
        raise ValueError("need at least one model")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    names = [[k for k, _ in m.named_parameters()] for m in models]
    if any(nm != names[0] for nm in names) or any(
            [tuple(p.shape) for p in m.parameters()] != [tuple(p.shape) for p in models[0].parameters()]
            for m in models):
        raise ValueError("the models must have the same parameter names and shapes")
    lrs = _per_model(lr, n, "lr")
    wds = _per_model(weight_decay, n, "weight_decay")
    zs = _per_model(z_loss, n, "z_loss")
    seed_list = [int(v) for v in _per_model(seeds, n, "seeds")]
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels: expected {n}, got {len(labels)}")
    params, buffers = stack_module_state(models)
    base = models[0]
    attns = [m for m in base.modules() if isinstance(m, QKNormAttention)]
    dtype = next(iter(params.values())).dtype

    def column(values):  # (n,) -> broadcastable against a stacked parameter
        return torch.tensor(values, dtype=dtype)

    lr0, wd, z = column(lrs), column(wds), column(zs)
    gens = [torch.Generator().manual_seed(s) for s in seed_list]

    def run(p, b, x):
        stats: list[Tensor] = []
        for a in attns:
            a.stats = stats if record_attention else None
        try:
            logits = functional_call(base, (p, b), (x,))
        finally:
            for a in attns:
                a.stats = None
        if record_attention and stats:
            st = torch.stack(stats).view(-1, 2)
            return logits, st[:, 0].max(), st[:, 1].min()
        return logits, logits.new_zeros(()), logits.new_zeros(())

    def batch():
        xs, ys = zip(*(reversal_batch(batch_size, seq_len, vocab_size, g) for g in gens))
        return torch.stack(xs), torch.stack(ys)

    keys = ("loss", "log_z", "mean_logit", "top_logit", "max_logit", "entropy")
    rows: list[Tensor] = []  # per step: (n, 6) statistics, and which models were still training
    alive: list[Tensor] = []
    active = torch.ones(n, dtype=torch.bool)
    names_p = list(params)
    plist = [params[k] for k in names_p]

    def full(col):  # a per-model value broadcast to every stacked parameter's shape
        return [col.view((n,) + (1,) * (q.dim() - 1)).expand_as(q).contiguous() for q in plist]

    lr_full = full(lr0)
    lrwd_full = full(lr0 * wd) if bool((wd != 0).any()) else None
    m1 = [torch.zeros_like(q) for q in plist]
    v2 = [torch.zeros_like(q) for q in plist]
    for m in models:
        m.train()
    b1, b2 = betas
    for step in range(steps):
        x, y = batch()
        logits, top_attn, min_ent = vmap(run)(params, buffers, x)
        mask = y[0] != -100  # the same positions in every model's batch
        logits = logits[:, mask]  # (n, P, V)
        ce = nn.functional.cross_entropy(logits.transpose(1, 2), y[:, mask], reduction="none").mean(1)
        log_z = torch.logsumexp(logits, -1)  # (n, P)
        loss = ce + z * log_z.pow(2).mean(1)
        finite = torch.isfinite(loss)
        if not bool(finite.all()):
            active &= finite
            if not bool(active.any()):
                break
        everyone = bool(active.all())
        total = loss.sum() if everyone else torch.where(active, loss, torch.zeros_like(loss)).sum()
        grads = list(torch.autograd.grad(total, plist))
        with torch.no_grad():
            rows.append(torch.stack([ce, log_z.mean(1), logits.mean((1, 2)),
                                     logits.max(-1).values.mean(1), top_attn, min_ent], 1))
            alive.append(active.clone())
            factor = cosine_lr(step, steps, warmup_steps)
            if not everyone:  # a stopped model: no gradient, no step, no decay
                keep = active.to(dtype)
                grads = [torch.nan_to_num(g) * keep.view((n,) + (1,) * (g.dim() - 1)) for g in grads]
                factor_full = torch._foreach_mul(full(keep), factor)
            else:
                factor_full = None
            t = step + 1
            # torch.optim.AdamW: decay, first and second moments, bias-corrected step
            if lrwd_full is not None:
                decay = torch._foreach_mul(lrwd_full, -factor)
                if factor_full is not None:
                    decay = torch._foreach_mul(decay, full(active.to(dtype)))
                torch._foreach_add_(decay, 1.0)
                torch._foreach_mul_(plist, decay)
            torch._foreach_lerp_(m1, grads, 1 - b1)
            torch._foreach_mul_(v2, b2)
            torch._foreach_addcmul_(v2, grads, grads, 1 - b2)
            denom = torch._foreach_sqrt(v2)
            torch._foreach_div_(denom, (1 - b2 ** t) ** 0.5)
            torch._foreach_add_(denom, eps)
            upd = torch._foreach_div(m1, denom)
            rate = torch._foreach_mul(lr_full, factor / (1 - b1 ** t))
            if factor_full is not None:
                rate = torch._foreach_mul(rate, full(active.to(dtype)))
            torch._foreach_mul_(upd, rate)
            torch._foreach_sub_(plist, upd)
    hist = [{k: [] for k in keys} for _ in range(n)]
    if rows:
        stats, live = torch.stack(rows).tolist(), torch.stack(alive).tolist()  # (steps, n, 6), (steps, n)
        for step_stats, step_live in zip(stats, live):
            for i in range(n):
                if step_live[i]:
                    for key, v in zip(keys, step_stats[i]):
                        if record_attention or key not in ("max_logit", "entropy"):
                            hist[i][key].append(v)
    with torch.no_grad():
        for i, m in enumerate(models):
            for k, p in m.named_parameters():
                p.copy_(params[k][i])
            m.eval()
        xs, ys = zip(*(reversal_batch(eval_size, seq_len, vocab_size, g) for g in gens))
        x, y = torch.stack(xs), torch.stack(ys)
        logits = vmap(run)(params, buffers, x)[0]
    out = []
    for i in range(n):
        mask = y[i] != -100
        final_loss = float(nn.functional.cross_entropy(logits[i][mask], y[i][mask]))
        accuracy = float((logits[i].argmax(-1)[mask] == y[i][mask]).double().mean())
        diverged = not bool(active[i]) or final_loss != final_loss
        if diverged:
            final_loss = float("nan")
        if labels is not None:
            print(f"{labels[i]:<34s} loss {final_loss:.3f}  accuracy {accuracy:.2f}"
                  + ("  (diverged)" if diverged else ""))
        out.append({**hist[i], "final_loss": final_loss, "accuracy": accuracy, "diverged": diverged})
    return out


def layer_norm_samples(model: nn.Module, idx: Tensor) -> list[tuple[str, Tensor, Tensor]]:
    r"""For every ``nn.LayerNorm`` / :class:`helpers.norms.LayerNorm` inside ``model``'s
    blocks, in order: ``(name, x, x_hat)`` with ``x`` the layer's input and
    :math:`\hat x = (x - \mu)/\sqrt{\sigma^2 + \epsilon}` its output **before** the affine
    step (as Zhu et al. 2025, Figure 2, plot it), both flattened to 1-D, for token ids
    ``idx``, no gradients."""
    found: list[tuple[str, Tensor, Tensor]] = []

    def hook(name):
        def record(mod, args):
            x = args[0].detach()
            xh = nn.functional.layer_norm(x, mod.normalized_shape, eps=mod.eps)
            found.append((name, x.flatten(), xh.flatten()))
        return record

    hooks = [m.register_forward_pre_hook(hook(n)) for n, m in model.named_modules()
             if n.startswith("blocks.") and isinstance(m, (nn.LayerNorm, course_norms.LayerNorm))]
    _forward_with_hooks(model, idx, hooks)
    return found


def tanh_fit(x: Tensor, y: Tensor, alphas: Tensor | None = None) -> dict:
    r"""Least-squares fits of ``y`` against ``x`` by a line :math:`a x + b` and by
    :math:`a \tanh(\alpha x) + b` (``alpha`` searched on a log grid, ``a``, ``b`` solved in
    closed form for each), in float64. Returns ``{"r2_linear", "r2_tanh", "alpha", "a",
    "b"}`` with :math:`R^2 = 1 - \mathrm{SSE}/\mathrm{SST}`."""
    x, y = x.double(), y.double()
    sst = float(((y - y.mean()) ** 2).sum())

    def fit(f):
        a_mat = torch.stack([f, torch.ones_like(f)], 1)
        sol = torch.linalg.lstsq(a_mat, y.unsqueeze(1)).solution.squeeze(1)
        return 1 - float(((a_mat @ sol - y) ** 2).sum()) / sst, sol

    r2_lin, _ = fit(x)
    alphas = torch.logspace(-3, 1, 81, dtype=torch.float64) if alphas is None else alphas
    best = max(((fit(torch.tanh(a * x)), float(a)) for a in alphas), key=lambda t: t[0][0])
    (r2_tanh, sol), alpha = best
    return {"r2_linear": r2_lin, "r2_tanh": r2_tanh, "alpha": alpha,
            "a": float(sol[0]), "b": float(sol[1])}
