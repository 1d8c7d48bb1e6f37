r"""Spot the bug in famous code: eight real bugs in public normalisation code, each shown as a
small faithful adaptation of the original lines (in the course's terms), reproduced against
the correct version with a number, and set as a drill graded by a checker of
:mod:`helpers.checks.spot_the_bug` that recognises the original bug and names its source.

======================  =====================================================================
bug                     source (what the course verified there)
======================  =====================================================================
``deepnorm_alpha``      labml.ai's DeepNorm: ``self.layer_norm(x + self.alpha * gx)``
                        (issue 145; still so at commit e6b3c8a, 2025-08-21)
``makemore_variance``   makemore part 3: ``xvar = x.var(0, keepdim=True)`` (nn-zero-to-hero
                        issue 44)
``running_var_bessel``  tinygrad's BatchNorm2d fed the biased variance to ``running_var``
                        (fixed by PR 807); ttnn.batch_norm the same (tt-metal issue 55438,
                        PR 55440)
``reused_linear``       Understanding Deep Learning notebook 11.3: ``self.linear4`` in three
                        residual branches (commit 19ee3af; fixed in 5c10091)
``rmsnorm_for_layernorm``  SGLang's Qwen3-Omni vision merger: ``self.ln_q = RMSNorm(...)``
                        for a checkpoint trained with ``nn.LayerNorm`` (PR 11791)
``plain_attributes``    d2l-zh's from-scratch BatchNorm: ``self.moving_mean = torch.zeros(shape)``,
                        not in the ``state_dict`` (PR 1265)
``bf16_bit_patterns``   Triton's interpreter: ``tl.sum`` of bfloat16 adds the bit patterns
                        (issue 11604; reproduced here with Triton 3.7.1)
``divides_by_rsqrt``    LLM Foundry's ``rms_norm``: ``x / torch.rsqrt(...)`` (PR 372, commit
                        625f263)
======================  =====================================================================

Usage::

    from helpers import spot_the_bug as spot

    spot.reproduce("deepnorm_alpha")        # the buggy lines, the source, and what they cost
    def my_deep_norm(x, gx, alpha, weight, bias, eps): ...
    spot.grade("deepnorm_alpha", my_deep_norm)          # ✔, or ✘ naming the mistake
    spot.grade("deepnorm_alpha", spot.model_solution("deepnorm_alpha"))  # prints no code
    spot.solution("deepnorm_alpha")         # prints the model solution (a spoiler)

Lesson 12, section 8.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .checks import spot_the_bug as C
from .checks.engine import CheckResult
from .kernels import AVAILABLE as TRITON_AVAILABLE
from .kernels import MISSING, tl, triton

__all__ = ["BUGS", "Bug", "show", "reproduce", "grade", "model_solution", "solution",
           "d2l_batch_norm"]


# ======================================================================================
# the buggy lines, adapted (each function's comment names the original file)
# ======================================================================================
def labml_deep_norm(x, gx, alpha, weight, bias, eps):
    # labml_nn/normalization/deep_norm/__init__.py, DeepNorm.forward:
    #     return self.layer_norm(x + self.alpha * gx)
    return F.layer_norm(x + alpha * gx, x.shape[-1:], weight, bias, eps)


def makemore_batch_norm(x, gamma, beta, eps):
    # lectures/makemore/makemore_part3_bn.ipynb, BatchNorm1d.__call__, training branch
    xmean = x.mean(0, keepdim=True)  # batch mean
    xvar = x.var(0, keepdim=True)  # batch variance
    xhat = (x - xmean) / torch.sqrt(xvar + eps)  # normalize to unit variance
    return gamma * xhat + beta


def tinygrad_running_stats(x, running_mean, running_var, momentum):
    # tinygrad/nn/__init__.py, BatchNorm2d.__call__ before PR 807 (any N, C, * input here)
    dims = [0] + list(range(2, x.dim()))
    batch_mean = x.mean(dims)
    y = x - batch_mean.view([1, -1] + [1] * (x.dim() - 2))
    batch_var = (y * y).mean(dims)
    running_mean = (1 - momentum) * running_mean + momentum * batch_mean
    running_var = (1 - momentum) * running_var + momentum * batch_var
    return running_mean, running_var


def udl_residual_net(x, W, b):
    # Notebooks/Chap11/11_3_Batch_Normalization.ipynb, ResidualNetwork.forward at 19ee3af
    # (linear1..linear7 are W[0]..W[6], b[0]..b[6]; print_variance calls left out)
    f = F.linear(x, W[0], b[0])
    res1 = f + F.linear(f.relu(), W[1], b[1])
    res2 = res1 + F.linear(res1.relu(), W[2], b[2])
    res3 = res2 + F.linear(res2.relu(), W[3], b[3])
    res4 = res3 + F.linear(res3.relu(), W[3], b[3])
    res5 = res4 + F.linear(res4.relu(), W[3], b[3])
    return F.linear(res5, W[6], b[6])


def sglang_merger_norm(x, weight, bias, eps):
    # python/sglang/srt/models/qwen3_omni_moe.py, Qwen3OmniMoeVisionPatchMerger:
    #     self.ln_q = RMSNorm(self.hidden_size if use_postshuffle_norm else context_dim, eps=1e-6)
    # the checkpoint's ln_q.bias is never used
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def d2l_batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
    """d2l-zh's ``batch_norm`` (chapter_convolutional-modern/batch-norm.md, PyTorch tab), as
    published: prediction mode is told by ``torch.is_grad_enabled()``, the variance is the
    biased one, and ``momentum`` weights the *old* value (0.9 = PyTorch's 0.1)."""
    if not torch.is_grad_enabled():
        X_hat = (X - moving_mean) / torch.sqrt(moving_var + eps)
    else:
        assert len(X.shape) in (2, 4)
        if len(X.shape) == 2:
            mean = X.mean(dim=0)
            var = ((X - mean) ** 2).mean(dim=0)
        else:
            mean = X.mean(dim=(0, 2, 3), keepdim=True)
            var = ((X - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
        X_hat = (X - mean) / torch.sqrt(var + eps)
        moving_mean = momentum * moving_mean + (1.0 - momentum) * mean
        moving_var = momentum * moving_var + (1.0 - momentum) * var
    Y = gamma * X_hat + beta
    return Y, moving_mean.data, moving_var.data


class D2LBatchNorm(nn.Module):
    # chapter_convolutional-modern/batch-norm.md, class BatchNorm (PyTorch tab; the lines
    # that copy the statistics to X's device are left out)
    def __init__(self, num_features, num_dims):
        super().__init__()
        shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        self.moving_mean = torch.zeros(shape)
        self.moving_var = torch.ones(shape)

    def forward(self, X):
        Y, self.moving_mean, self.moving_var = d2l_batch_norm(
            X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5, momentum=0.9)
        return Y


@triton.jit
def bf16_row_mean_kernel(X, Out, N, BLOCK_N: tl.constexpr):
    # the pattern of triton-lang/triton issue 11604: tl.sum of the loaded (bfloat16) values
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)
    tl.store(Out + row, tl.sum(x, axis=0) / N)


def llmfoundry_rms_norm(x, weight, eps):
    # llmfoundry/models/layers/norm.py, rms_norm before PR 372
    output = x / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return output * weight


# ======================================================================================
# model solutions (spoilers: print them with solution(name))
# ======================================================================================
def deep_norm(x, gx, alpha, weight, bias, eps):
    """DeepNorm: x_{l+1} = LN(alpha * x_l + G(x_l)), the residual up-weighted."""
    return F.layer_norm(alpha * x + gx, x.shape[-1:], weight, bias, eps)


def batch_norm_1d_train(x, gamma, beta, eps):
    """BatchNorm1d in training mode: normalise with the biased batch variance."""
    xmean = x.mean(0, keepdim=True)
    xvar = x.var(0, keepdim=True, unbiased=False)  # divide by N
    return gamma * (x - xmean) / torch.sqrt(xvar + eps) + beta


def running_stats(x, running_mean, running_var, momentum):
    """One step of BatchNorm's buffers: the unbiased batch variance, M = values per channel."""
    dims = [0] + list(range(2, x.dim()))
    m = x.numel() // x.shape[1]
    batch_mean = x.mean(dims)
    batch_var = x.var(dims, unbiased=False) * m / (m - 1)  # Bessel's correction over M
    return ((1 - momentum) * running_mean + momentum * batch_mean,
            (1 - momentum) * running_var + momentum * batch_var)


def residual_net(x, W, b):
    """Five residual branches, each with its own Linear (W[1]..W[5])."""
    h = F.linear(x, W[0], b[0])
    for k in range(1, 6):
        h = h + F.linear(h.relu(), W[k], b[k])
    return F.linear(h, W[6], b[6])


def checkpoint_norm(x, weight, bias, eps):
    """The norm the checkpoint was trained with: LayerNorm, weight and bias."""
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


class BatchNormWithBuffers(nn.Module):
    """d2l's layer with its statistics registered as buffers (what PR 1265 proposes)."""

    def __init__(self, num_features, num_dims):
        super().__init__()
        shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        self.register_buffer("moving_mean", torch.zeros(shape))  # in the state_dict,
        self.register_buffer("moving_var", torch.ones(shape))    # and follows .to()

    def forward(self, X):
        Y, self.moving_mean, self.moving_var = d2l_batch_norm(  # assigning updates the buffers
            X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5, momentum=0.9)
        return Y


@triton.jit
def row_mean_kernel(X, Out, N, BLOCK_N: tl.constexpr):
    """Program r: the mean of row r, reduced in float32."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Out + row, tl.sum(x, axis=0) / N)


def rms_norm(x, weight, eps):
    """RMSNorm: multiply by rsqrt(mean(x**2) + eps)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# ======================================================================================
# the reproductions: the buggy lines against the right ones, with a number
# ======================================================================================
def _ln64(t: Tensor) -> Tensor:
    return F.layer_norm(t, t.shape[-1:], eps=1e-5)


def _corr(a: Tensor, b: Tensor) -> float:
    a, b = a.reshape(-1) - a.mean(), b.reshape(-1) - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def repro_deepnorm_alpha() -> dict:
    """DeepNorm with N = 6 encoder layers, alpha = (2N)^(1/4): the residual's weight against
    the sub-layer's, and how much of LN(x) each version keeps."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 64, generator=g, dtype=torch.float64)
    gx = torch.randn(16, 64, generator=g, dtype=torch.float64)
    alpha = (2 * 6) ** 0.25
    right, theirs = _ln64(alpha * x + gx), labml_deep_norm(x, gx, alpha, None, None, 1e-5)
    inverse = _ln64(x / alpha + gx)
    r = {"alpha": alpha, "corr_right": _corr(right, _ln64(x)), "corr_theirs": _corr(theirs, _ln64(x)),
         "inverse_gap": float((theirs - inverse).abs().max()),
         "max_diff": float((theirs - right).abs().max())}
    print(f"alpha = (2 * 6) ** 0.25 = {alpha:.3f}: the residual x weighs alpha = {alpha:.3f} times "
          f"the sub-layer in DeepNorm, 1 / alpha = {1 / alpha:.3f} times in labml's line")
    print(f"labml's LN(x + alpha * gx) equals LN(x / alpha + gx) but for eps: max difference "
          f"< 1e-4: {r['inverse_gap'] < 1e-4}")
    print(f"correlation of the output with LN(x): DeepNorm {r['corr_right']:.3f}, labml "
          f"{r['corr_theirs']:.3f}; max |labml - DeepNorm| = {r['max_diff']:.2f}")
    return r


def repro_makemore_variance() -> dict:
    """makemore's BatchNorm1d against torch.nn.BatchNorm1d in training mode: the output's
    (biased) standard deviation per feature, batch of 32 (makemore's) and of 4."""
    r = {}
    for n in (32, 4):
        g = torch.Generator().manual_seed(n)
        x = torch.randn(n, 200, generator=g, dtype=torch.float64) * 3 + 1
        gamma, beta = torch.ones(200, dtype=torch.float64), torch.zeros(200, dtype=torch.float64)
        with torch.no_grad():
            ours = makemore_batch_norm(x, gamma, beta, 1e-5)
            ref = nn.BatchNorm1d(200, dtype=torch.float64)(x)
        r[n] = (float(ours.std(0, unbiased=False).mean()), float(ref.std(0, unbiased=False).mean()))
        print(f"batch of {n:2d}: output std per feature: makemore {r[n][0]:.4f}, torch.nn.BatchNorm1d "
              f"{r[n][1]:.4f}; sqrt((n-1)/n) = {math.sqrt((n - 1) / n):.4f}")
    return r


def repro_running_var_bessel() -> dict:
    """500 training steps on (2, 3, 2, 2) batches of N(0, 2^2) values (M = 8 per channel):
    running_var as torch keeps it and as tinygrad kept it before PR 807."""
    g = torch.Generator().manual_seed(0)
    bn = nn.BatchNorm2d(3, dtype=torch.float64)
    rm = torch.zeros(3, dtype=torch.float64)
    rv = torch.ones(3, dtype=torch.float64)
    for _ in range(500):
        x = torch.randn(2, 3, 2, 2, generator=g, dtype=torch.float64) * 2
        bn(x)
        rm, rv = tinygrad_running_stats(x, rm, rv, 0.1)
    torch_var, theirs = float(bn.running_var.mean()), float(rv.mean())
    r = {"torch": torch_var, "theirs": theirs, "ratio": theirs / torch_var}
    print(f"running_var after 500 steps (the data's variance is 4): torch {torch_var:.3f}, tinygrad before "
          f"PR 807 {theirs:.3f}; ratio {r['ratio']:.4f} = (M-1)/M = 7/8")
    print(f"so in eval mode every output is {math.sqrt(torch_var / theirs):.4f} = sqrt(8/7) times "
          f"too large")
    return r


def _udl_model(layers: int) -> tuple[list[nn.Linear], int]:
    torch.manual_seed(0)
    sizes = [(40, 100)] + [(100, 100)] * (layers - 2) + [(100, 10)]
    return [nn.Linear(i, o) for i, o in sizes], sum(i * o + o for i, o in sizes)


def repro_reused_linear() -> dict:
    """The notebook's network (40 inputs, 100 hidden, 10 outputs): at 19ee3af six Linear
    layers with linear4 in three branches, after 5c10091 seven with five distinct branches.
    One backward pass: the parameters count_params() counts that get no gradient."""
    r = {}
    old, n_old = _udl_model(6)
    new, n_new = _udl_model(7)
    x = torch.randn(100, 40, generator=torch.Generator().manual_seed(1))

    def net_19ee3af(x):  # linear6 is the output layer there
        W = [m.weight for m in old] + [old[5].weight]
        b = [m.bias for m in old] + [old[5].bias]
        return udl_residual_net(x, W, b)

    for name, model, net, n in (("19ee3af", old, net_19ee3af, n_old),
                                ("5c10091", new, lambda x: residual_net(x, [m.weight for m in new],
                                                                      [m.bias for m in new]), n_new)):
        net(x).pow(2).mean().backward()
        unused = sum(p.numel() for m in model for p in m.parameters() if p.grad is None)
        r[name] = (unused, n)
        print(f"{name}: {unused} of the {n} parameters count_params() reports get no gradient")
    return r


def repro_rmsnorm_for_layernorm() -> dict:
    """The merger's norm on 64 tokens of width 32 with a checkpoint's LayerNorm weight and
    bias: RMSNorm (bias dropped) against the LayerNorm it was trained with."""
    g = torch.Generator().manual_seed(0)
    w = 1 + 0.1 * torch.randn(32, generator=g, dtype=torch.float64)
    b = 0.1 * torch.randn(32, generator=g, dtype=torch.float64)
    r = {}
    for label, offset, bias in (("tokens with mean 1.5, the checkpoint's bias", 1.5, b),
                                ("zero-mean features, a zero bias", 0.0, torch.zeros_like(b))):
        x = offset + torch.randn(64, 32, generator=g, dtype=torch.float64)
        right = checkpoint_norm(x, w, bias, 1e-6)
        theirs = sglang_merger_norm(x, w, bias, 1e-6)
        r[label] = float((theirs - right).norm() / right.norm())
        print(f"{label}: relative error of RMSNorm {r[label]:.3f}")
    return r


def repro_plain_attributes() -> dict:
    """d2l's layer and the buffered one: three training steps, save, reload into a fresh
    layer, predict (under torch.no_grad(), d2l's prediction mode)."""
    r = {}
    for cls in (D2LBatchNorm, BatchNormWithBuffers):
        torch.manual_seed(0)
        layer = cls(3, 2)
        for _ in range(3):
            layer(torch.randn(8, 3) * 2 + 1)
        fresh = cls(3, 2)
        fresh.load_state_dict(layer.state_dict())
        x = torch.randn(5, 3) * 2 + 1
        with torch.no_grad():
            diff = float((layer(x) - fresh(x)).abs().max())
        r[cls.__name__] = (list(layer.state_dict()), diff)
        print(f"{cls.__name__:<21} state_dict keys {list(layer.state_dict())}; after save and "
              f"reload, max prediction change {diff:.3f}")
    return r


def repro_bf16_bit_patterns() -> dict:
    """The row mean of [1, 2, 3, 4] in Triton's interpreter, the row loaded as bfloat16 and
    as float32, reduced without and with a cast to float32."""
    if not TRITON_AVAILABLE:
        print(MISSING)
        return {}
    r = {}
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=dtype)
        for name, kernel in (("tl.sum(x)", bf16_row_mean_kernel),
                             ("tl.sum(x.to(tl.float32))", row_mean_kernel)):
            out = torch.full((1,), float("nan"))
            kernel[(1,)](x, out, 4, BLOCK_N=4)
            r[(str(dtype).replace("torch.", ""), name)] = float(out)
            print(f"{str(dtype).replace('torch.', ''):<8} row, {name:<25} mean = {float(out):.4g}")
    bits = [int(v) for v in torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.bfloat16).view(torch.int16)]
    print(f"(the bfloat16 bit patterns {bits} sum to {sum(bits)}, which wraps to "
          f"{sum(bits) % 65536} in 16 bits: a denormal near 0, not 10)")
    return r


def repro_divides_by_rsqrt() -> dict:
    """The output's RMS for inputs whose RMS is 0.1, 1 and 10 (width 64, weight 1)."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(8, 64, generator=g, dtype=torch.float64)
    base = base / base.pow(2).mean(-1, keepdim=True).sqrt()      # RMS exactly 1 per row
    w = torch.ones(64, dtype=torch.float64)
    r = {}
    for s in (0.1, 1.0, 10.0):
        rms = lambda t: float(t.pow(2).mean(-1).sqrt().mean())  # noqa: E731
        r[s] = (rms(rms_norm(s * base, w, 1e-5)), rms(llmfoundry_rms_norm(s * base, w, 1e-5)))
        print(f"input RMS {s:>4}: output RMS with x * rsqrt {r[s][0]:.3f}, with x / rsqrt "
              f"{r[s][1]:.4g}")
    return r


# ======================================================================================
# the registry
# ======================================================================================
@dataclass(frozen=True)
class Bug:
    """One bug: where it is, the adapted buggy code, the reproduction, the model solution
    and the checker of its drill."""

    key: str
    source: str            # who, and which issue / pull request / commit
    url: str               # the issue or pull request (or commit) verified
    buggy: object          # the adapted buggy function (or class, or kernel)
    repro: Callable[[], dict]
    solution: object
    checker: Callable[..., CheckResult]
    mistake: str = ""      # the key its checker gives the original bug (default: ``key``)

    @property
    def original(self) -> str:
        return self.mistake or self.key


BUGS: dict[str, Bug] = {b.key: b for b in [
    Bug("deepnorm_alpha", "labml.ai annotated DeepNorm, issue 145 (commit 0eb74d7 added the "
        "LayerNorm; alpha still on gx)",
        "https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/145",
        labml_deep_norm, repro_deepnorm_alpha, deep_norm, C.check_deepnorm_residual,
        "alpha_on_sublayer"),
    Bug("makemore_variance", "makemore part 3 (nn-zero-to-hero), issue 44",
        "https://github.com/karpathy/nn-zero-to-hero/issues/44",
        makemore_batch_norm, repro_makemore_variance, batch_norm_1d_train,
        C.check_makemore_batch_norm, "unbiased_variance"),
    Bug("running_var_bessel", "tinygrad PR 807 (after PR 774); tt-metal issue 55438, PR 55440",
        "https://github.com/tinygrad/tinygrad/pull/807",
        tinygrad_running_stats, repro_running_var_bessel, running_stats,
        C.check_running_var_update, "biased_running_var"),
    Bug("reused_linear", "Understanding Deep Learning, notebook 11.3, commits 19ee3af -> 5c10091",
        "https://github.com/udlbook/udlbook/commit/5c10091b482d1bc490750f2b31ee9bc438a4b80e",
        udl_residual_net, repro_reused_linear, residual_net, C.check_residual_branches),
    Bug("rmsnorm_for_layernorm", "SGLang, Qwen3-Omni vision merger, PR 11791",
        "https://github.com/sgl-project/sglang/pull/11791",
        sglang_merger_norm, repro_rmsnorm_for_layernorm, checkpoint_norm,
        C.check_checkpoint_norm),
    Bug("plain_attributes", "d2l-zh, from-scratch BatchNorm, PR 1265",
        "https://github.com/d2l-ai/d2l-zh/pull/1265",
        D2LBatchNorm, repro_plain_attributes, BatchNormWithBuffers, C.check_module_buffers),
    Bug("bf16_bit_patterns", "Triton interpreter, issue 11604 (also 11584, PR 10945)",
        "https://github.com/triton-lang/triton/issues/11604",
        bf16_row_mean_kernel, repro_bf16_bit_patterns, row_mean_kernel, C.check_bf16_row_mean),
    Bug("divides_by_rsqrt", "LLM Foundry rms_norm, PR 372 (commit 625f263)",
        "https://github.com/mosaicml/llm-foundry/pull/372",
        llmfoundry_rms_norm, repro_divides_by_rsqrt, rms_norm, C.check_rms_norm_rsqrt),
]}


@contextlib.contextmanager
def _one_thread():
    """Tiny tensors: one thread is faster than waking a pool (and much faster on a busy CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _bug(name: str) -> Bug:
    if name not in BUGS:
        raise ValueError(f"unknown bug {name!r}; the bugs are {', '.join(BUGS)}")
    return BUGS[name]


def _source(obj) -> str:
    fn = getattr(obj, "fn", obj)  # a @triton.jit kernel keeps its function in .fn
    return inspect.getsource(fn)


def show(name: str) -> None:
    """Print the buggy code of ``name`` (adapted, its comment names the original file) and the
    link to the issue or pull request. Lesson 12."""
    bug = _bug(name)
    print(f"# {bug.source}\n# {bug.url}")
    print(_source(bug.buggy).rstrip())


def reproduce(name: str) -> None:
    """Print the buggy code of ``name``, then run it against the right version and print the
    numbers (the ``repro_*`` function of each bug returns them). Lesson 12."""
    show(name)
    print()
    with _one_thread():
        _bug(name).repro()


def model_solution(name: str):
    """The model solution of drill ``name`` (its source is not printed). Lesson 12."""
    return _bug(name).solution


def solution(name: str) -> None:
    """Print the model solution of drill ``name`` (a spoiler: try the drill first). Lesson 12."""
    print(_source(_bug(name).solution), end="")


def grade(name: str, fn) -> CheckResult:
    """Grade ``fn`` (a function, a module class, or a Triton kernel, as the drill asks) on
    drill ``name``; the result names the mistake, and the original bug with its source.
    Lesson 12."""
    bug = _bug(name)
    if not callable(fn) and not hasattr(fn, "fn"):
        raise ValueError(f"grade({name!r}, fn): fn must be a function, a class or a kernel, "
                         f"got {type(fn).__name__}")
    with _one_thread():
        return bug.checker(fn, title=name)
