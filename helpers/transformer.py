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
(:func:`check_block_forward`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import norms as course_norms
from .progress import Progress

__all__ = ["NORM_POSITIONS", "make_norm", "CausalSelfAttention", "FeedForward", "Block",
           "TinyTransformer", "deepnorm_constants", "deepnorm_init", "layer_gradient_norms",
           "reversal_batch", "markov_tokens", "warmup_factor", "train_reversal",
           "model_update", "check_block_forward", "norm_input_rms"]

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
    future, heads concatenated and projected by ``out_proj``."""

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
    r""":math:`\mathrm{FFN}(x) = W_2\,\mathrm{ReLU}(W_1 x + b_1) + b_2` (``fc1``, ``fc2``)."""

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
    ``loss.backward()``; raises ``ValueError`` if a gradient is missing."""
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
    tokens); the first token is uniform. Everything is drawn from ``generator``."""
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
    Chance accuracy is :math:`1/(V-1)`."""
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
    ``warmup_steps = 0``."""
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
    the head reads, which leaves out the head's own update."""
    if output not in ("logits", "features"):
        raise ValueError(f"output must be 'logits' or 'features', got {output!r}")
    model_0.eval()
    model_t.eval()
    with torch.no_grad():
        if output == "features":
            return float((model_t.features(x) - model_0.features(x)).pow(2).mean().sqrt())
        return float((model_t(x) - model_0(x)).pow(2).mean().sqrt())


def _block_variants(block: Block, x: Tensor) -> dict[str, Tensor]:
    """The outputs a block's parts give under each placement, and two common slips."""
    a, f, n1, n2 = block.attn, block.ffn, block.norm1, block.norm2
    y = n1(x + a(x))
    post = n2(y + f(y))
    y = x + a(n1(x))
    pre = y + f(n2(y))
    y = n1(a(x))
    no_residual = n2(f(y))
    y = x + n1(a(x))
    norm_on_branch_output = y + n2(f(y))
    return {"post": post, "pre": pre, "no_residual": no_residual,
            "norm_on_branch_output": norm_on_branch_output}


def _deepnorm_variants(block: Block, x: Tensor) -> dict[str, Tensor]:
    """The outputs of a DeepNorm block's parts under DeepNorm and three common slips."""
    a, f, n1, n2, al = block.attn, block.ffn, block.norm1, block.norm2, block.alpha
    y = n1(al * x + a(x))
    deepnorm = n2(al * y + f(y))
    y = n1(x + al * a(x))
    alpha_on_branch = n2(y + al * f(y))
    y = al * x + a(n1(x))
    alpha_in_pre_ln = al * y + f(n2(y))
    variants = _block_variants(block, x)
    return {"deepnorm": deepnorm, "alpha_on_branch": alpha_on_branch,
            "alpha_in_pre_ln": alpha_in_pre_ln, "post": variants["post"]}


_LABEL = {"post": "post-LN", "pre": "pre-LN", "deepnorm": "DeepNorm"}

_DIAGNOSES = {
    "post": "this is Post-LN: LN(x + F(x)), the norm after the residual sum",
    "pre": "this is Pre-LN: x + F(LN(x)), the norm inside the branch",
    "no_residual": "the residual connection is missing: LN(F(x))",
    "norm_on_branch_output": "the norm is applied to the branch output: x + LN(F(x))",
    "deepnorm": "this is DeepNorm: LN(alpha * x + F(x)), alpha on the shortcut",
    "alpha_on_branch": "alpha scales the branch instead of the shortcut: LN(x + alpha * F(x))",
    "alpha_in_pre_ln": "alpha is put into a Pre-LN block: alpha * x + F(LN(x))",
}


def check_block_forward(fn, norm_position: str) -> bool:
    r"""Exercise checker: ``fn(x, attn, ffn, norm1, norm2)`` should compute one block with the
    given ``norm_position`` (``"post"`` or ``"pre"``, sub-layers in the order attention then
    FFN); for ``"deepnorm"`` the function takes a sixth argument ``alpha`` (the checker
    passes 2.0) and should compute :math:`\mathrm{LN}(\alpha x + G(x))` per sub-layer. Compares with :class:`Block` on random float64 inputs and non-trivial norm
    parameters, prints ``correct`` or which placement the function computes instead, and
    returns whether it is correct. The caller's global random state is left unchanged."""
    if norm_position not in NORM_POSITIONS:
        raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {norm_position!r}")
    alpha = 2.0 if norm_position == "deepnorm" else 1.0
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(0)
        block = Block(8, 2, 16, norm_position=norm_position, alpha=alpha).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 + 0.2)
    x = torch.randn(2, 5, 8, generator=g, dtype=torch.float64) * 3
    with torch.no_grad():
        args = (x, block.attn, block.ffn, block.norm1, block.norm2)
        got = fn(*args, alpha) if norm_position == "deepnorm" else fn(*args)
        if not isinstance(got, Tensor) or got.shape != x.shape:
            print(f"expected a tensor of shape {list(x.shape)}, got "
                  f"{list(got.shape) if isinstance(got, Tensor) else type(got).__name__}")
            return False
        variants = (_deepnorm_variants(block, x) if norm_position == "deepnorm"
                    else _block_variants(block, x))
        if torch.allclose(got, variants[norm_position]):
            print(f"correct: {_DIAGNOSES[norm_position]}")
            return True
        for name, out in variants.items():
            if torch.allclose(got, out):
                print(f"not {_LABEL[norm_position]} yet: {_DIAGNOSES[name]}")
                return False
    print(f"not {_LABEL[norm_position]} yet: max difference "
          f"{float((got - variants[norm_position]).abs().max()):.3g} from the expected output")
    return False


def norm_input_rms(model: TinyTransformer, idx: Tensor) -> list[float]:
    r"""Root mean square of the input of every norm layer inside the blocks (``norm1``, then
    ``norm2``, block by block), for token ids ``idx``, no gradients. Under Post-LN and DeepNorm
    that input is the residual sum :math:`\alpha x + F(x)`; under Pre-LN it is the residual
    stream :math:`x` itself, so the list shows how the stream grows with depth."""
    found: list[float] = []
    hooks = [norm.register_forward_pre_hook(
        lambda _m, args: found.append(float(args[0].detach().pow(2).mean().sqrt())))
        for block in model.blocks for norm in (block.norm1, block.norm2)]
    try:
        with torch.no_grad():
            model(idx)
    finally:
        for h in hooks:
            h.remove()
    return found
