r"""Lesson 14 (the atlas): the normalisation methods the earlier lessons do not build, each
from elementary tensor operations, a few lines each, with the formula in its docstring.

Shapes: images are (N, C, H, W); sequences are (..., d) with the features last. Every
function works in the input's dtype (the lesson uses float64 so that its checks are exact).

===============================  =============================================================
function                         method (paper)
===============================  =============================================================
:func:`frn`                      Filter Response Normalisation + TLU (Singh & Krishnan 2020)
:func:`evonorm_b0`               EvoNorm-B0 (Liu, Brock, Simonyan & Le 2020)
:func:`evonorm_s0`               EvoNorm-S0 (same paper)
:func:`switchable_norm`          Switchable Normalisation (Luo et al. 2019)
:func:`batch_instance_norm`      Batch-Instance Normalisation (Nam & Kim 2018)
:func:`zca_whitening_matrix`     Decorrelated BN's ZCA whitening (Huang et al. 2018)
:func:`iternorm_whitening_matrix` IterNorm's Newton iterations (Huang et al. 2019)
:class:`PowerNorm`               PowerNorm's forward pass (Shen et al. 2020)
:func:`scale_norm`               ScaleNorm (Nguyen & Salazar 2019)
:func:`single_scale_rms_norm`    RMSNorm with one scalar gain
:func:`cross_iteration_mean`     Cross-iteration BN's compensated statistics (Yao et al. 2021)
:func:`conditional_batch_norm`   conditional BN (de Vries et al. 2017); FiLM: :func:`film`
:class:`AdaLNZeroBlock`          DiT's adaLN-Zero block (Peebles & Xie 2023)
:func:`mix_ln_layout`            Mix-LN (Li, Yin & Liu 2024)
:func:`layernorm_scaling`        LayerNorm Scaling (Sun et al. 2025)
:func:`local_response_norm`      Local Response Normalisation (Krizhevsky et al. 2012)
===============================  =============================================================

Lesson 14 checks each against ``torch`` where torch has the method (LRN, and BN, LN and IN
inside Switchable Normalisation) and otherwise against a property the paper promises.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

__all__ = ["frn", "evonorm_b0", "evonorm_s0", "switchable_norm", "batch_instance_norm",
           "zca_whitening_matrix", "iternorm_whitening_matrix", "PowerNorm", "scale_norm",
           "single_scale_rms_norm", "cross_iteration_mean", "conditional_batch_norm", "film",
           "AdaLNZeroBlock", "mix_ln_layout", "layernorm_scaling", "local_response_norm",
           "moments", "ATLAS", "pre_ln_stack_variance", "STATUSES", "DECISION_MAP",
           "decision_map_table", "decision_map_figure"]


def _check_4d(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor) or x.dim() != 4:
        raise ValueError(f"{name} expects a tensor of shape (N, C, H, W), got "
                         f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")


def _channel(p: Tensor | float, x: Tensor) -> Tensor | float:
    """A per-channel parameter of shape (C,) viewed as (1, C, 1, 1); scalars pass through."""
    return p.view(1, -1, 1, 1) if isinstance(p, Tensor) and p.dim() == 1 else p


def moments(x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Mean and biased variance over ``dims``, kept for broadcasting:
    $\\mu = \\frac1m\\sum x$, $\\sigma^2 = \\frac1m\\sum (x-\\mu)^2$ (two passes)."""
    mu = x.mean(dims, keepdim=True)
    return mu, ((x - mu) ** 2).mean(dims, keepdim=True)


# --------------------------------------------------------------------------------------
# batch-independent alternatives for convolutions
# --------------------------------------------------------------------------------------
def frn(x: Tensor, gamma: Tensor, beta: Tensor, tau: Tensor, eps: float = 1e-6) -> Tensor:
    r"""Filter Response Normalisation with its Thresholded Linear Unit (Singh & Krishnan,
    CVPR 2020, arXiv 1911.09737):

    $\nu^2 = \frac{1}{HW}\sum_{h,w} x^2$, $\hat x = x/\sqrt{\nu^2 + \epsilon}$,
    $y = \gamma\hat x + \beta$, $z = \max(y, \tau)$,

    per sample and channel; no mean subtracted; $\gamma, \beta, \tau$ per channel, shape (C,).

    Source check: matches the paper's definitions as quoted on
    paperswithcode.com/method/filter-response-normalization ($\nu^2 = \sum_i x_i^2/N$,
    $N = W\times H$; $\hat x = x/\sqrt{\nu^2+\epsilon}$; $z = \max(y, \tau)$). The paper's
    section and equation numbers are not verified.
    """
    _check_4d(x, "frn")
    nu2 = (x * x).mean((2, 3), keepdim=True)
    y = _channel(gamma, x) * x * torch.rsqrt(nu2 + eps) + _channel(beta, x)
    return torch.maximum(y, _channel(tau, x))


def _group_std(x: Tensor, groups: int, eps: float) -> Tensor:
    n, c, h, w = x.shape
    if c % groups:
        raise ValueError(f"{c} channels do not divide into {groups} groups")
    _, var = moments(x.reshape(n, groups, c // groups, h, w), (2, 3, 4))
    return (var + eps).sqrt().expand(n, groups, c // groups, h, w).reshape(n, c, h, w)


def evonorm_b0(x: Tensor, v1: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    r"""EvoNorm-B0 in training mode (Liu, Brock, Simonyan & Le, NeurIPS 2020, arXiv 2004.02967):

    $y = \dfrac{x}{\max\big(\sqrt{s^2_{b,w,h}(x)+\epsilon},\ v_1 x + \sqrt{s^2_{w,h}(x)+\epsilon}\big)}\,\gamma + \beta$,

    $s^2_{b,w,h}$ the batch variance per channel (BatchNorm's), $s^2_{w,h}$ the variance per
    sample and channel (InstanceNorm's), both biased; $v_1, \gamma, \beta$ per channel.
    (At evaluation the batch variance is replaced by a moving average, as in BatchNorm.)
    Term by term as the authors' TensorFlow code (``tensorflow/tpu``,
    ``models/official/resnet/resnet_model.py``, ``evonorm``)."""
    _check_4d(x, "evonorm_b0")
    _, batch_var = moments(x, (0, 2, 3))
    _, inst_var = moments(x, (2, 3))
    den = torch.maximum((batch_var + eps).sqrt(), _channel(v1, x) * x + (inst_var + eps).sqrt())
    return x / den * _channel(gamma, x) + _channel(beta, x)


def evonorm_s0(x: Tensor, v1: Tensor, gamma: Tensor, beta: Tensor, groups: int,
               eps: float = 1e-5) -> Tensor:
    r"""EvoNorm-S0 (same paper): batch-independent,

    $y = \dfrac{x\,\sigma(v_1 x)}{\sqrt{s^2_{w,h,c/g}(x)+\epsilon}}\,\gamma + \beta$,

    $\sigma$ the logistic sigmoid, $s^2_{w,h,c/g}$ GroupNorm's biased variance over the
    group's channels and positions of one sample."""
    _check_4d(x, "evonorm_s0")
    return x * torch.sigmoid(_channel(v1, x) * x) / _group_std(x, groups, eps) * _channel(gamma, x) \
        + _channel(beta, x)


# --------------------------------------------------------------------------------------
# mixing statistics: Switchable Normalisation, Batch-Instance Normalisation
# --------------------------------------------------------------------------------------
def switchable_norm(x: Tensor, mean_weights: Tensor, var_weights: Tensor, gamma: Tensor,
                    beta: Tensor, eps: float = 1e-5) -> Tensor:
    r"""Switchable Normalisation, training mode (Luo, Ren, Peng, Zhang & Li, ICLR 2019,
    arXiv 1806.10779):

    $\hat x = \dfrac{x - \sum_k w_k\mu_k}{\sqrt{\sum_k w'_k\sigma_k^2 + \epsilon}}$,
    $y = \gamma\hat x + \beta$, $k \in$ (IN, LN, BN),

    with $\mu_k, \sigma_k^2$ the biased moments over (H, W), (C, H, W) and (N, H, W). The
    paper's weights are softmaxes of learnable logits, so they are positive and sum to 1;
    here ``mean_weights`` and ``var_weights`` (shape (3,), order IN, LN, BN as in the authors'
    ``models/switchable_norm.py``) are those softmaxes, so a one-hot vector (the limit of the
    softmax) selects one norm exactly. The authors' code takes IN's variance unbiased
    (``x.var(-1)``); here every variance is biased, as in torch's BN, LN and IN."""
    _check_4d(x, "switchable_norm")
    stats = [moments(x, dims) for dims in ((2, 3), (1, 2, 3), (0, 2, 3))]
    mu = sum(w * m for w, (m, _) in zip(mean_weights, stats))
    var = sum(w * v for w, (_, v) in zip(var_weights, stats))
    return (x - mu) / (var + eps).sqrt() * _channel(gamma, x) + _channel(beta, x)


def batch_instance_norm(x: Tensor, rho: Tensor, gamma: Tensor, beta: Tensor,
                        eps: float = 1e-5) -> Tensor:
    r"""Batch-Instance Normalisation, training mode (Nam & Kim, NeurIPS 2018, arXiv 1805.07925):

    $y = \big(\rho\,\hat x^{(B)} + (1-\rho)\,\hat x^{(I)}\big)\gamma + \beta$,
    $\rho \in [0, 1]$ per channel (clipped after each update in the paper),

    $\hat x^{(B)}$ BatchNorm's and $\hat x^{(I)}$ InstanceNorm's normalised activations."""
    _check_4d(x, "batch_instance_norm")
    mb, vb = moments(x, (0, 2, 3))
    mi, vi = moments(x, (2, 3))
    r = _channel(rho.clamp(0, 1), x)
    mixed = r * (x - mb) / (vb + eps).sqrt() + (1 - r) * (x - mi) / (vi + eps).sqrt()
    return mixed * _channel(gamma, x) + _channel(beta, x)


# --------------------------------------------------------------------------------------
# whitening: Decorrelated BN (eigendecomposition) and IterNorm (Newton's iterations)
# --------------------------------------------------------------------------------------
def _covariance(x: Tensor) -> tuple[Tensor, Tensor]:
    if x.dim() != 2:
        raise ValueError(f"whitening expects (m, d) samples, got shape {tuple(x.shape)}")
    mu = x.mean(0, keepdim=True)
    xc = x - mu
    return xc, xc.T @ xc / x.shape[0]


def zca_whitening_matrix(x: Tensor, eps: float = 0.0) -> tuple[Tensor, Tensor]:
    r"""Decorrelated BatchNorm's ZCA whitening (Huang, Yang, Lang & Deng, CVPR 2018,
    arXiv 1804.08450): for centred samples $X_c$ (m, d) with covariance
    $\Sigma = \frac1m X_c^\top X_c = D\Lambda D^\top$,

    $W_{ZCA} = D(\Lambda + \epsilon I)^{-1/2}D^\top = (\Sigma + \epsilon I)^{-1/2}$,
    $\hat X = X_c W_{ZCA}$ (the matrix is symmetric).

    Returns (the whitened samples, $W_{ZCA}$).

    Source check: matches the authors' code (``princeton-vl/DecorrelatedBN``,
    ``module/DecorelateBN_Advance.lua``: covariance over $m$, SVD, $\epsilon$ added to the
    eigenvalues, $D\Lambda^{-1/2}D^\top$ applied on the right), which whitens channels in
    groups (``m_perGroup``, default half the channels); here all channels are whitened jointly.
    The paper's text was not found: equation number not verified."""
    xc, cov = _covariance(x)
    lam, d = torch.linalg.eigh(cov)
    w = d @ torch.diag((lam + eps).rsqrt()) @ d.T
    return xc @ w, w


def iternorm_whitening_matrix(x: Tensor, iterations: int = 5, eps: float = 0.0
                              ) -> tuple[Tensor, Tensor]:
    r"""IterNorm (Huang, Zhou, Zhu, Liu & Shao, CVPR 2019, arXiv 1904.03441, Algorithm 1):
    whitening without an eigendecomposition. With $\Sigma_N = \Sigma/\mathrm{tr}(\Sigma)$,

    $P_0 = I$, $P_k = \tfrac12\,(3P_{k-1} - P_{k-1}^3\Sigma_N)$, $k = 1..T$,
    $W = P_T/\sqrt{\mathrm{tr}(\Sigma)}$,

    Newton's iterations for $\Sigma_N^{-1/2}$; they converge because the eigenvalues of
    $\Sigma_N$ lie in (0, 1]. $T$ finite gives an approximate whitening (the paper uses
    $T = 5$). Returns (the whitened samples, $W$).

    Source check: the steps match Algorithm 1 as reproduced in Sensors 23(17):7486, 2023
    (its Algorithm 1, citing the paper), including $\Sigma = \frac1m X_c^\top X_c + \epsilon I$
    before the trace; the authors' code (``huangleiBuaa/IterNorm``,
    ``module/DecorelateBN_PowerIter_GPU.lua``) runs the same loop (``nIter`` = 5 by default)."""
    xc, cov = _covariance(x)
    cov = cov + eps * torch.eye(cov.shape[0], dtype=cov.dtype)
    trace = torch.trace(cov)
    sigma_n = cov / trace
    p = torch.eye(cov.shape[0], dtype=cov.dtype)
    for _ in range(iterations):
        p = 0.5 * (3 * p - p @ p @ p @ sigma_n)
    w = p / trace.sqrt()
    return xc @ w, w


# --------------------------------------------------------------------------------------
# scaling only: PowerNorm, ScaleNorm, single-scale RMSNorm
# --------------------------------------------------------------------------------------
class PowerNorm(nn.Module):
    r"""PowerNorm's forward pass (Shen, Yao, Gholami, Mahoney & Keutzer, ICML 2020,
    arXiv 2003.07845) for (B, d) or (B, T, d) inputs, features last:

    training: $\hat x = x/\psi_{t-1}$ with the running quadratic mean $\psi$, then
    $\psi_t^2 = \alpha\,\psi_{t-1}^2 + (1-\alpha)\,\frac1B\sum_b x_b^2$; $y = \gamma\hat x + \beta$.

    No mean is subtracted (the quadratic mean $\psi^2 = \mathbb E[x^2]$, not the variance), and
    the forward pass divides by the *running* statistic, so one sample's output does not depend
    on the rest of its batch. (The paper's backward pass also uses an approximate gradient
    through $\psi$; not built here.) The update with $\alpha = 0.9$ is that of the authors'
    ``sIncerass/powernorm`` (``mask_powernorm.py``), which also rescales each token by its RMS
    over channel groups first and uses batch statistics during a warmup (not built here)."""

    def __init__(self, num_features: int, alpha: float = 0.9, eps: float = 1e-5,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.alpha, self.eps = alpha, eps
        self.weight = nn.Parameter(torch.ones(num_features, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(num_features, dtype=dtype))
        self.register_buffer("running_phi", torch.ones(num_features, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        y = x / (self.running_phi + self.eps).sqrt()
        if self.training:
            with torch.no_grad():
                batch = (x.detach() ** 2).reshape(-1, x.shape[-1]).mean(0)
                self.running_phi.mul_(self.alpha).add_((1 - self.alpha) * batch)
        return y * self.weight + self.bias


def scale_norm(x: Tensor, g: Tensor | float, eps: float = 1e-5) -> Tensor:
    r"""ScaleNorm (Nguyen & Salazar 2019, arXiv 1910.05895):
    $y = g\,x/\max(\lVert x\rVert_2, \epsilon)$ over the last dim, with **one** learned scalar
    $g$ per layer (the paper initialises it to $\sqrt d$).

    Source check: matches the authors' code (``tnq177/transformers_without_tears``,
    ``layers.py``, ``ScaleNorm``): ``x * scale / torch.norm(x, dim=-1, keepdim=True).clamp(min=eps)``
    with ``eps=1e-5`` and ``scale`` initialised to ``embed_dim ** 0.5``; there each norm
    position (before attention, before the feed-forward block) has its own scalar. In the
    paper's text (arXiv 1910.05895v2): section 2.3, Eq. (5), $\mathrm{ScaleNorm}(x; g) =
    g\,x/\lVert x\rVert$; section 3.2: all $g$ initialised to $\sqrt d$."""
    return g * x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def single_scale_rms_norm(x: Tensor, g: Tensor | float, eps: float = 1e-6) -> Tensor:
    r"""RMSNorm with one scalar gain instead of a per-channel $\gamma$:
    $y = g\,x/\sqrt{\frac1d\sum_i x_i^2 + \epsilon}$.
    With $\epsilon = 0$ it equals ScaleNorm with gain $g\sqrt d$, since
    $\mathrm{RMS}(x) = \lVert x\rVert/\sqrt d$."""
    return g * x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)


# --------------------------------------------------------------------------------------
# fixing the estimate: Cross-iteration BN
# --------------------------------------------------------------------------------------
def cross_iteration_mean(past: list[tuple[Tensor, Tensor]], weight_now: Tensor,
                         compensate: bool = True) -> Tensor:
    r"""Cross-iteration BN's idea (Yao, Cao, Zheng, Huang & Lin, CVPR 2021, arXiv 2002.05712) for the mean of a linear layer's output $z = Wx$: average the means of the
    last $k$ batches, each moved to the *current* weights by a first-order Taylor step,

    $\mu_{t-\tau}(W_t) \approx \mu_{t-\tau}(W_{t-\tau}) +
    \frac{\partial\mu_{t-\tau}}{\partial W}\,(W_t - W_{t-\tau})$,
    $\bar\mu_t = \frac1k\sum_\tau \mu_{t-\tau}(W_t)$.

    ``past`` holds (x batch (m, d_in), the weight $W_{t-\tau}$ (d_out, d_in) it was seen with);
    the derivative is taken by autograd. ``compensate=False`` averages the stale means (the
    naive alternative). For a linear layer $\mu = W\bar x$ is linear in $W$, so the Taylor
    step is exact; the paper applies it to the mean and second moment of deep layers, where it
    is an approximation.

    Source check: the abstract (arXiv 2002.05712) confirms compensation by Taylor polynomials;
    the authors' code (``Howal/Cross-iterationBatchNorm``, ``mmdet/models/utils/CBN.py``,
    ``CBatchNorm2d``) takes the derivative only with respect to the preceding layer's weight,
    scales the step by ``rho`` (default 1.0), averages the current batch's statistics with the
    compensated buffered ones and drops a buffered batch whose compensated variance is
    negative. The paper's text was not found (equation number not verified)."""
    means = []
    for x, w_old in past:
        mean_of = lambda w, x=x: x.mean(0) @ w.T                      # (d_out,)
        mu = mean_of(w_old)
        if compensate:
            jac = torch.autograd.functional.jacobian(mean_of, w_old)   # (d_out, d_out, d_in)
            mu = mu + (jac * (weight_now - w_old).unsqueeze(0)).flatten(1).sum(1)
        means.append(mu.detach())
    return torch.stack(means).mean(0)


# --------------------------------------------------------------------------------------
# conditional recovery: conditional BN, FiLM, adaLN-Zero
# --------------------------------------------------------------------------------------
def film(h: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
    r"""FiLM (Perez, Strub, de Vries, Dumoulin & Courville, AAAI 2018, arXiv 1709.07871): $\mathrm{FiLM}(h) = \gamma(c)\odot h + \beta(c)$, with $\gamma, \beta$
    of shape (N, C) predicted from the conditioning input $c$, broadcast over (H, W).

    Source check, the paper's section 2.1: Eq. (1) $\gamma_{i,c} = f_c(x_i)$,
    $\beta_{i,c} = h_c(x_i)$; Eq. (2)
    $\mathrm{FiLM}(F_{i,c}\mid\gamma_{i,c},\beta_{i,c}) = \gamma_{i,c}F_{i,c} + \beta_{i,c}$."""
    view = (h.shape[0], h.shape[1]) + (1,) * (h.dim() - 2)
    return gamma.view(view) * h + beta.view(view)


def conditional_batch_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    r"""Conditional BatchNorm (de Vries, Strub, Mary, Larochelle, Pietquin & Courville,
    NeurIPS 2017, arXiv 1707.00683): BatchNorm without its own affine step, then
    FiLM with a per-sample $\gamma(c), \beta(c)$ of shape (N, C):
    $y = \gamma(c)\,\hat x^{(B)} + \beta(c)$.

    Source check: the paper predicts changes to pretrained, frozen parameters with a
    one-hidden-layer MLP of the question embedding, $\hat\beta_c = \beta_c + \Delta\beta_c$,
    $\hat\gamma_c = \gamma_c + \Delta\gamma_c$ (the paper's section 3, Eqs. (4) and (5));
    ``gamma`` and ``beta`` here are those sums."""
    _check_4d(x, "conditional_batch_norm")
    mu, var = moments(x, (0, 2, 3))
    return film((x - mu) / (var + eps).sqrt(), gamma, beta)


class AdaLNZeroBlock(nn.Module):
    r"""DiT's adaLN-Zero block (Peebles & Xie, ICCV 2023, arXiv 2212.09748, section 3.2),
    with one branch $F$ (an MLP) for brevity:

    $(\beta, \gamma, \alpha) = \mathrm{Linear}(\mathrm{SiLU}(c))$,
    $y = x + \alpha \odot F\big(\mathrm{LN}(x)\,(1 + \gamma) + \beta\big)$,

    LN without affine parameters, the Linear **initialised to zero**, so that $\alpha = 0$ and
    each block is the identity at initialisation ("adaLN-Zero")."""

    def __init__(self, dim: int, cond_dim: int, hidden: int = 16,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.dim = dim
        self.modulation = nn.Linear(cond_dim, 3 * dim, dtype=dtype)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden, dtype=dtype), nn.GELU(),
                                 nn.Linear(hidden, dim, dtype=dtype))

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale, gate = self.modulation(nn.functional.silu(c)).unsqueeze(1).chunk(3, dim=-1)
        mu, var = moments(x, (-1,))
        h = (x - mu) / (var + 1e-6).sqrt()
        return x + gate * self.mlp(h * (1 + scale) + shift)


# --------------------------------------------------------------------------------------
# where the norm goes, by depth: Mix-LN, LayerNorm Scaling
# --------------------------------------------------------------------------------------
def mix_ln_layout(num_layers: int, alpha: float = 0.25) -> list[str]:
    r"""Mix-LN (Li, Yin & Liu, arXiv 2412.13795): Post-LN in the first
    $\lfloor\alpha L\rfloor$ layers, Pre-LN in the remaining ones. Returns the layout,
    e.g. ``["post", "post", "pre", ...]``."""
    if num_layers < 1 or not 0 <= alpha <= 1:
        raise ValueError(f"need num_layers >= 1 and 0 <= alpha <= 1, got {num_layers}, {alpha}")
    k = math.floor(alpha * num_layers)
    return ["post"] * k + ["pre"] * (num_layers - k)


def layernorm_scaling(normed: Tensor, layer: int) -> Tensor:
    r"""LayerNorm Scaling (Sun, Song, Li, Yin, Zheng & Liu, "The Curse of Depth in Large
    Language Models", arXiv 2502.05795): the output of the Pre-LN norm in layer
    $\ell$ (counted from 1) is multiplied by $1/\sqrt{\ell}$:
    $h = \mathrm{LN}(x)/\sqrt{\ell}$.

    Source check: the abstract, and the authors' code (``lmsdss/LayerNorm-Scaling``,
    ``peft_pretraining/modeling_llama.py``, branch ``LNS``: both pre-norm outputs of a block
    times ``1 / math.sqrt(self.layer_index + 1)``, index from 0; the norm there is RMSNorm).
    The method is the paper's section 4 (arXiv HTML v2 to v4, table of contents); its
    equation number is not verified."""
    if layer < 1:
        raise ValueError(f"layers are counted from 1, got {layer}")
    return normed / math.sqrt(layer)


def pre_ln_stack_variance(num_layers: int, dim: int = 64, tokens: int = 256, scaled: bool = False,
                          seed: int = 0, dtype: torch.dtype = torch.float64) -> list[float]:
    r"""The variance of the residual stream after each layer of a Pre-LN stack of random MLP
    branches at initialisation, $x_{\ell} = x_{\ell-1} + F_\ell(\mathrm{LN}(x_{\ell-1}))$,
    with LayerNorm Scaling when ``scaled``. Each branch is Linear-GELU-Linear with
    PyTorch's default init, drawn from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, dim, generator=g, dtype=dtype)
    out = []
    for layer in range(1, num_layers + 1):
        w1 = (torch.rand(4 * dim, dim, generator=g, dtype=dtype) * 2 - 1) / math.sqrt(dim)
        w2 = (torch.rand(dim, 4 * dim, generator=g, dtype=dtype) * 2 - 1) / math.sqrt(4 * dim)
        mu, var = moments(x, (-1,))
        h = (x - mu) / (var + 1e-5).sqrt()
        if scaled:
            h = layernorm_scaling(h, layer)
        x = x + nn.functional.gelu(h @ w1.T) @ w2.T
        out.append(float(x.var()))
    return out


# --------------------------------------------------------------------------------------
# the oldest one: Local Response Normalisation
# --------------------------------------------------------------------------------------
def local_response_norm(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    r"""Local Response Normalisation across channels, with ``torch.nn.LocalResponseNorm``'s
    conventions:

    $b_c = a_c\Big/\Big(k + \frac{\alpha}{n}\sum_{c'} a_{c'}^2\Big)^{\beta}$,

    the sum over the $n$ = ``size`` channels $c' \in [c - \lfloor n/2\rfloor,
    c + \lceil n/2\rceil - 1]$ that exist (zero padding). Krizhevsky, Sutskever & Hinton
    (NeurIPS 2012, section 3.3) write $\alpha$ without the $1/n$ and use
    $k = 2, n = 5, \alpha = 10^{-4}, \beta = 0.75$."""
    if x.dim() < 3:
        raise ValueError(f"local_response_norm expects (N, C, ...), got shape {tuple(x.shape)}")
    sq = x * x
    c = x.shape[1]
    total = torch.zeros_like(x)
    for offset in range(-(size // 2), (size - 1) // 2 + 1):
        lo, hi = max(0, -offset), min(c, c - offset)
        if lo < hi:
            total[:, lo:hi] += sq[:, lo + offset:hi + offset]
    return x / (k + alpha / size * total) ** beta


# --------------------------------------------------------------------------------------
# the map of lesson 14, section 1, as data the lesson prints
# --------------------------------------------------------------------------------------
#: (method, lesson or "14", what shares statistics, operation, recovery)
ATLAS: list[tuple[str, str, str, str, str]] = [
    ("BatchNorm", "01", "(N, H, W) per channel", "standardise", "affine"),
    ("LayerNorm", "02", "(C, H, W) / features of one token", "standardise", "affine (per element)"),
    ("InstanceNorm", "03", "(H, W) per sample and channel", "standardise", "affine (optional)"),
    ("GroupNorm", "03", "(C/G, H, W) per sample", "standardise", "affine"),
    ("AdaIN", "03", "(H, W) per sample and channel", "standardise", "conditional (style statistics)"),
    ("RMSNorm", "04", "features of one token", "scale only (RMS)", "gain, no bias"),
    ("SyncBN", "08", "(N, H, W) over all processes", "standardise", "affine"),
    ("ghost BN", "10", "(n_ghost, H, W) per channel", "standardise", "affine"),
    ("Batch Renorm", "10", "(N, H, W) + moving averages", "standardise, corrected by r, d", "affine"),
    ("FrozenBN", "10", "none (stored statistics)", "fixed affine map", "affine (frozen)"),
    ("QK-norm", "09", "head_dim of q and k", "standardise or RMS", "gain"),
    ("DyT", "09", "none (element-wise)", "tanh(alpha x), no statistics", "affine"),
    ("WeightNorm", "11", "weights: one output unit", "weight reparametrisation", "gain g"),
    ("Weight Standardisation", "11", "weights: fan-in of a unit", "standardise the weights", "none"),
    ("Spectral Norm", "11", "weights: whole matrix", "divide by sigma_max", "none"),
    ("Pre-LN / Post-LN / DeepNorm", "05, 06", "(where LN sits)", "standardise", "affine"),
    ("Peri-LN / sandwich-LN", "09", "features of one token", "standardise or RMS", "affine, on branch in and out"),
    ("LayerScale / ReZero / SkipInit", "09", "none (no statistics)", "scale the branch", "learned diagonal or scalar"),
    ("mean-only BN", "11", "(N, H, W) per channel", "centre only", "bias"),
    ("Batch-Channel Norm", "11", "BN's set, then GN's groups", "standardise twice", "affine"),
    ("scaled WS (NFNets)", "11", "weights: fan-in of a unit", "standardise / sqrt(fan-in)", "gain"),
    ("adaptive gradient clipping", "11", "gradients: one output unit", "clip ||G|| / ||W||", "none"),
    ("fused LN / RMSNorm kernels", "13", "one row of features", "standardise / RMS", "affine / gain"),
    ("FRN + TLU", "14", "(H, W) per sample and channel", "scale only (mean square)", "affine + learned threshold"),
    ("EvoNorm-B0", "14", "(N, H, W) and (H, W)", "scale only (max of two stds)", "affine"),
    ("EvoNorm-S0", "14", "(C/G, H, W) per sample", "scale only (x sigmoid(v x)/std)", "affine"),
    ("Switchable Norm", "14", "IN, LN and BN sets, mixed", "standardise", "affine"),
    ("Batch-Instance Norm", "14", "BN and IN sets, mixed", "standardise", "affine"),
    ("Decorrelated BN", "14", "(N, H, W), all channels jointly", "whiten (ZCA)", "affine"),
    ("IterNorm", "14", "(N, H, W), all channels jointly", "whiten (Newton)", "affine"),
    ("PowerNorm", "14", "batch, running average", "scale only (quadratic mean)", "affine"),
    ("ScaleNorm", "14", "features of one token", "scale only (L2 norm)", "one scalar g"),
    ("single-scale RMSNorm", "14", "features of one token", "scale only (RMS)", "one scalar g"),
    ("Cross-iteration BN", "14", "(N, H, W) of the last k batches", "standardise", "affine"),
    ("conditional BN / FiLM", "14", "(N, H, W) per channel / none", "standardise / none", "conditional"),
    ("adaLN-Zero", "14", "features of one token", "standardise", "conditional, zero-initialised gate"),
    ("Mix-LN", "14", "features of one token", "standardise", "affine (Post-LN early, Pre-LN late)"),
    ("LayerNorm Scaling", "14", "features of one token", "standardise, then 1/sqrt(l)", "affine"),
    ("Local Response Norm", "14", "n neighbouring channels", "scale only (divisive)", "none"),
]


# --------------------------------------------------------------------------------------
# the decision map of lesson 14, section 9: the table and the figure drawn from one list
# --------------------------------------------------------------------------------------
#: Status of one arrow: measured in a lesson and/or reproduced across papers; one paper's
#: claim not reproduced here; measured, but the answer depends on the kernel.
STATUSES = {
    "established": ("established", "已确立", "-"),
    "speculative": ("speculative", "推测", "--"),
    "kernel": ("kernel-dependent", "取决于内核", ":"),
}

#: One row per setting of section 9's table: ``panel`` ("cnn" for convolutional networks,
#: "seq" for sequence models and the rest), the setting, the arrows (one per method the
#: table's "reach for" cell lists, separated by ";" there, each with its status), what backs
#: the row, and the row's status as the table prints it; English and Chinese side by side.
DECISION_MAP: list[dict] = [
    dict(panel="cnn", setting=("CNN, batch of 16 or more per device", "CNN，每个设备的批大小为 16 或更大"),
         arrows=[("BatchNorm", "BatchNorm", "established")],
         backed=("Wu & He 2018, Table 2 (BN's error flat from batch 32 to 16); lesson 01, §7",
                 "Wu 和 He 2018，表 2（批大小从 32 到 16，BN 的误差几乎不变）；第 01 课第 7 节"),
         status=("established", "已确立")),
    dict(panel="cnn", setting=("CNN, batch of 1 to 4 per device", "CNN，每个设备的批大小为 1 到 4"),
         arrows=[("GroupNorm (+ WS)", "GroupNorm（+ WS）", "established"),
                 ("SyncBN across devices", "多设备时用 SyncBN", "established")],
         backed=("Wu & He 2018, Table 2; lesson 11, §6; lesson 08, §8",
                 "Wu 和 He 2018，表 2；第 11 课第 6 节；第 08 课第 8 节"),
         status=("established", "已确立")),
    dict(panel="cnn", setting=("same, without GN", "同上，不用 GN 时"),
         arrows=[("FRN + TLU, EvoNorm-S0", "FRN + TLU、EvoNorm-S0", "speculative")],
         backed=("their papers' ImageNet runs only", "仅有它们论文中的 ImageNet 实验"),
         status=("speculative", "推测")),
    dict(panel="cnn", setting=("BN kept, tiny or non-i.i.d. batches", "保留 BN，批极小或非独立同分布"),
         arrows=[("Batch Renorm", "Batch Renorm（批重归一化）", "established"),
                 ("Cross-iteration BN", "Cross-iteration BN（跨迭代 BN）", "speculative")],
         backed=("lesson 10, §5 (Ioffe 2017); the CBN paper", "第 10 课第 5 节（Ioffe 2017）；CBN 论文"),
         status=("established (Renorm); speculative (CBN)", "已确立（Renorm）；推测（CBN）")),
    dict(panel="seq", setting=("Transformer, sequence model", "Transformer、序列模型"),
         arrows=[("Pre-LN with LayerNorm or RMSNorm, final norm",
                  "Pre-LN，配 LayerNorm 或 RMSNorm，加最终归一化", "established")],
         backed=("lesson 05, §§3 and 4; lesson 04", "第 05 课第 3 节和第 4 节；第 04 课"),
         status=("established", "已确立")),
    dict(panel="seq", setting=("very deep Post-LN", "极深的 Post-LN"),
         arrows=[("DeepNorm", "DeepNorm", "established")],
         backed=("lesson 06, §6", "第 06 课第 6 节"), status=("established", "已确立")),
    dict(panel="seq", setting=("attention logits growing", "注意力 logits 持续增大"),
         arrows=[("QK-norm", "QK-norm", "established")],
         backed=("lesson 09, §2", "第 09 课第 2 节"), status=("established", "已确立")),
    dict(panel="seq", setting=("deep Pre-LN LLM, weak deep layers", "深层 Pre-LN 大模型，深层作用弱"),
         arrows=[("Mix-LN, LayerNorm Scaling", "Mix-LN、LayerNorm Scaling（按深度缩放）", "speculative")],
         backed=("their papers; §8 at initialisation only", "它们的论文；第 8 节（仅在初始化时）"),
         status=("speculative", "推测")),
    dict(panel="seq", setting=("conditional generation", "条件生成"),
         arrows=[("AdaIN, conditional BN, FiLM, adaLN-Zero", "AdaIN、条件 BN、FiLM、adaLN-Zero",
                  "established")],
         backed=("lesson 03, §3; §7 (identity at start); DiT", "第 03 课第 3 节；第 7 节（开始时为恒等映射）；DiT"),
         status=("established", "已确立")),
    dict(panel="cnn", setting=("style or contrast to remove", "需要去掉风格或对比度"),
         arrows=[("InstanceNorm", "InstanceNorm", "established"),
                 ("Batch-Instance Norm", "Batch-Instance Norm（混合 BN 与 IN 的输出）", "speculative")],
         backed=("lesson 03, §3; Nam & Kim 2018", "第 03 课第 3 节；Nam 和 Kim 2018"),
         status=("established (IN); speculative (BIN)", "已确立（IN）；推测（BIN）")),
    dict(panel="seq", setting=("low precision", "低精度"),
         arrows=[("statistics accumulated in float32", "统计量用 float32 累加", "established")],
         backed=("lesson 07, §6; lesson 04, §4", "第 07 课第 6 节；第 04 课第 4 节"),
         status=("established", "已确立")),
    dict(panel="seq", setting=("inference cost", "推理开销"),
         arrows=[("fold BN into the conv", "把 BN 折叠进卷积", "established"),
                 ("RMSNorm or DyT", "RMSNorm 或 DyT", "kernel")],
         backed=("lesson 07, §§5 and 7; lesson 09, §4", "第 07 课第 5 节和第 7 节；第 09 课第 4 节"),
         status=("established (folding); measured per kernel (RMSNorm, DyT)",
                 "已确立（折叠）；按内核测量（RMSNorm、DyT）")),
    dict(panel="cnn", setting=("whitening wanted", "需要白化"),
         arrows=[("IterNorm rather than DBN", "用 IterNorm 而非 DBN", "speculative")],
         backed=("§4 (convergence); the IterNorm paper", "第 4 节（收敛性）；IterNorm 论文"),
         status=("speculative at scale", "大规模下为推测")),
    dict(panel="cnn", setting=("several norms, unsure which", "有多种归一化，不知选哪个"),
         arrows=[("Switchable Norm", "Switchable Norm（可切换归一化）", "speculative")],
         backed=("§3; the SN paper", "第 3 节；SN 论文"), status=("speculative", "推测")),
]

_PANEL_TITLES = {"cnn": "convolutional networks · 卷积网络",
                 "seq": "sequence models, generation, precision, cost · 序列模型、生成、精度与开销"}


def decision_map_table(lang: str = "en") -> list[list[str]]:
    """The rows of section 9's table in ``lang`` ("en" or "zh"): setting, the methods to
    reach for (the arrows' labels joined by "; " or "；"), what backs them, the status."""
    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh', not {lang!r}")
    i, sep = (0, "; ") if lang == "en" else (1, "；")
    return [[row["setting"][i], sep.join(a[i] for a in row["arrows"]), row["backed"][i],
             row["status"][i]] for row in DECISION_MAP]


def _arrow_label(en: str, zh: str, one_line: bool) -> str:
    from helpers.plotting import is_bilingual_or_neutral

    if is_bilingual_or_neutral(en):
        return en
    if en in zh:  # the name with a Chinese gloss already holds both
        return zh
    return f"{en} · {zh}" if one_line else f"{en}\n{zh}"


def decision_map_figure(panel: str, rows: list[dict] | None = None):
    """Section 9's decision map as a picture, for the rows of one ``panel`` ("cnn" or
    "seq") of :data:`DECISION_MAP` (or the given ``rows``): each setting on the left, an
    arrow to each method the table lists for it, solid when established, dashed when
    speculative, dotted when measured but kernel-dependent (:data:`STATUSES`). Laid out in
    inches (a row 0.6 in, text 16 pt) so that it fits a slide at full size."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if panel not in _PANEL_TITLES:
        raise ValueError(f"panel must be one of {sorted(_PANEL_TITLES)}, not {panel!r}")
    rows = [r for r in DECISION_MAP if r["panel"] == panel] if rows is None else rows
    if not rows:
        raise ValueError("no rows to draw")
    pitch, top, bottom, width = 0.6, 0.36, 0.44, 11.8
    height = top + bottom + pitch * len(rows)
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    x_set, x_from, x_to = 0.1, 4.75, 5.55
    colors = {"established": "#2f6f4f", "speculative": "#b5651d", "kernel": "#4c72b0"}
    for k, row in enumerate(rows):
        y = height - top - pitch * (k + 0.5)
        if k % 2 == 0:
            ax.add_patch(plt.Rectangle((0.02, y - pitch / 2), width - 0.04, pitch, fc="#f2f2f2",
                                       ec="none", zorder=0))
        en, zh = row["setting"]
        ax.text(x_set, y, f"{en}\n{zh}", ha="left", va="center", fontsize=16, linespacing=1.15)
        n = len(row["arrows"])
        offsets = [0.0] if n == 1 else [0.16, -0.16]
        if n > 2:
            raise ValueError(f"at most two arrows per row: {row['setting'][0]!r}")
        for (a_en, a_zh, status), dy in zip(row["arrows"], offsets):
            style = STATUSES[status][2]
            ax.annotate("", (x_to, y + dy), (x_from, y),
                        arrowprops=dict(arrowstyle="-|>", color=colors[status], lw=2.2,
                                        linestyle=style, shrinkA=0, shrinkB=2, mutation_scale=16))
            ax.text(x_to + 0.08, y + dy, _arrow_label(a_en, a_zh, one_line=n > 1), ha="left",
                    va="center", fontsize=16, color=colors[status], linespacing=1.15)
    ax.text(x_set, height - 0.08, _PANEL_TITLES[panel], ha="left", va="top", fontsize=17,
            fontweight="bold")
    used = [s for s in STATUSES if any(a[2] == s for row in rows for a in row["arrows"])]
    handles = [Line2D([], [], color=colors[s], lw=2.2, linestyle=STATUSES[s][2]) for s in used]
    labels = [f"{STATUSES[s][0]} · {STATUSES[s][1]}" for s in used]
    fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 0.0), ncol=len(used),
               fontsize=16, frameon=False, handlelength=2.2, columnspacing=1.2)
    return fig
