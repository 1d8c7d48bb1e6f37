r"""BatchNorm in practice: the training-recipe questions of lesson 10, as small, fast code.

- Dropout next to BatchNorm (Li, Chen, Hu & Yang, CVPR 2019, "variance shift"):
  :func:`dropout_variance_ratio`, :func:`uniform_noise_variance_ratio`, :class:`UniformNoise`,
  :func:`mlp` (dropout before every BatchNorm, or only after the last one) and
  :func:`variance_shift` (the train/test variance of every BatchNorm input, measured).
- Weight decay and scale invariance (Ioffe & Szegedy 2015 §3.3; van Laarhoven 2017; Arora, Li &
  Lyu 2019): :func:`param_groups_weight_decay` (timm's rule), :func:`weight_norm_trace`.
- Frozen BatchNorm for fine-tuning: :class:`FrozenBatchNorm2d` (torchvision's
  ``torchvision/ops/misc.py`` semantics), :func:`freeze_batch_norm`, :func:`small_convnet`.
- Batch Renormalization (Ioffe 2017, Algorithm 1): :func:`batch_renorm` (from elementary ops),
  :class:`BatchRenormFunction` (hand-written backward), :class:`BatchRenorm1d`,
  :class:`BatchRenorm2d`, :func:`renorm_limits` (the paper's schedule, rescaled).
- Ghost BatchNorm (Hoffer, Hubara & Soudry 2017): :func:`ghost_batch_norm`.
- Zero-initialised last γ of each residual branch (Goyal et al. 2017 §5.1): :func:`residual_mlp`.
- Training and evaluation on scikit-learn's bundled digits (no download): :func:`digits_data`,
  :func:`train`, :func:`test_error`, :func:`recompute_bn_statistics`.
- Figures: :func:`plot_variance_shift`, :func:`plot_weight_norms`.

Everything defaults to float64 and runs on one torch thread, so results are the same on every
CPU path (AVX-512, AVX2, scalar). Used in lesson 10.
"""

from __future__ import annotations

import copy
import math
from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from . import norms
from .progress import Progress
from .experiments import one_thread

__all__ = [
    "digits_data", "dropout_variance_ratio", "uniform_noise_variance_ratio", "UniformNoise",
    "mlp", "variance_shift", "train", "test_error", "recompute_bn_statistics",
    "param_groups_weight_decay", "weight_norm_trace", "FrozenBatchNorm2d", "freeze_batch_norm",
    "small_convnet", "batch_renorm", "renorm_corrections", "batch_renorm_backward", "BatchRenormFunction",
    "BatchRenorm1d", "BatchRenorm2d", "renorm_limits", "ghost_batch_norm", "residual_mlp",
    "plot_variance_shift", "plot_weight_norms", "set_renorm_limits", "spread",
    "dropout_experiment", "weight_decay_experiment", "finetune_experiment", "renorm_experiment",
    "placement_experiment", "train_stacked", "swa_experiment", "quantize_per_tensor",
    "quantize_per_channel",
]

DTYPE = torch.float64




# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------
def digits_data(seed: int = 0, images: bool = False, classes=None, dtype=DTYPE):
    r"""scikit-learn's bundled 8x8 digits, split 1297 / 500 by ``helpers.experiments``'s
    permutation (``seed``), each pixel standardised with the *training* mean and std,
    :math:`x \to (x - \mu_\text{train}) / \sigma_\text{train}` (constant pixels left at 0).

    Returns ``(x_train, y_train, x_test, y_test)``: inputs (n, 64), or (n, 1, 8, 8) with
    ``images=True``, in ``dtype``. ``classes`` (e.g. ``range(5)``) keeps only those digits.
    Used in lesson 10."""
    from sklearn.datasets import load_digits

    from .experiments import digits_split_indices

    data = load_digits()
    x = torch.tensor(data.data, dtype=dtype)
    y = torch.tensor(data.target)
    train_idx, test_idx = digits_split_indices(seed)
    mean, std = x[train_idx].mean(0), x[train_idx].std(0)
    x = (x - mean) / torch.where(std > 0, std, torch.ones_like(std))
    if images:
        x = x.reshape(-1, 1, 8, 8)
    parts = [x[train_idx], y[train_idx], x[test_idx], y[test_idx]]
    if classes is not None:
        keep = torch.tensor(sorted(classes))
        for i in (0, 2):
            mask = torch.isin(parts[i + 1], keep)
            parts[i], parts[i + 1] = parts[i][mask], parts[i + 1][mask]
    return tuple(parts)


# --------------------------------------------------------------------------------------
# dropout and BatchNorm: variance shift
# --------------------------------------------------------------------------------------
def dropout_variance_ratio(keep: float, mean: float = 0.0, var: float = 1.0) -> float:
    r"""Test-time over train-time variance of a unit after inverted dropout with keep ratio
    :math:`p` (Li et al. 2019, §3). Train: :math:`X = a x / p`, :math:`a \sim
    \text{Bernoulli}(p)`; test: :math:`X = x`. For :math:`x` of mean :math:`c` and variance
    :math:`v`,

    .. math:: \frac{\text{Var}_\text{test}}{\text{Var}_\text{train}}
              = \frac{v}{(c^2 + v)/p - c^2},

    which is :math:`p` for :math:`c = 0`. Used in lesson 10."""
    return var / ((mean ** 2 + var) / keep - mean ** 2)


def uniform_noise_variance_ratio(beta: float, mean: float = 0.0, var: float = 1.0) -> float:
    r"""Test-time over train-time variance of a unit after multiplicative uniform noise,
    :math:`X = x (1 + r)`, :math:`r \sim U(-\beta, \beta)` in training and :math:`X = x` at
    test time (the uniform variant of Li et al. 2019). :math:`E[(1+r)^2] = 1 + \beta^2/3`, so

    .. math:: \frac{\text{Var}_\text{test}}{\text{Var}_\text{train}}
              = \frac{v}{(1 + \beta^2/3)(c^2 + v) - c^2},

    :math:`1/(1 + \beta^2/3)` for :math:`c = 0` (0.97 at :math:`\beta = 0.3`, against 0.5 for
    dropout with :math:`p = 0.5`). Used in lesson 10."""
    return var / ((1 + beta ** 2 / 3) * (mean ** 2 + var) - mean ** 2)


class UniformNoise(nn.Module):
    r"""Multiplicative uniform noise: :math:`x (1 + r)`, :math:`r \sim U(-\beta, \beta)`
    independently per element, in training; the identity in eval mode. Its mean is
    :math:`x`, like inverted dropout's, but its variance :math:`x^2\beta^2/3` is far smaller
    (:func:`uniform_noise_variance_ratio`). Used in lesson 10."""

    def __init__(self, beta: float = 0.3) -> None:
        super().__init__()
        self.beta = beta

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.beta == 0:
            return x
        return x * (1 + (torch.rand_like(x) * 2 - 1) * self.beta)

    def extra_repr(self) -> str:
        return f"beta={self.beta}"


def _norm1d(norm: str, width: int, impl: str, renorm: dict | None) -> nn.Module:
    if norm == "batch":
        return (nn if impl == "torch" else norms).BatchNorm1d(width)
    if norm == "renorm":
        return BatchRenorm1d(width, **(renorm or {}))
    if norm == "group":
        return (nn if impl == "torch" else norms).GroupNorm(4, width)
    if norm == "none":
        return nn.Identity()
    raise ValueError(f"norm must be 'batch', 'renorm', 'group' or 'none', got {norm!r}")


def mlp(width: int = 32, depth: int = 3, norm: str = "batch", dropout: float = 0.0,
        where: str = "every", noise: str = "bernoulli", order: str = "bn_relu", seed: int = 0,
        in_features: int = 64, num_classes: int = 10, impl: str = "torch",
        renorm: dict | None = None, dtype=DTYPE) -> nn.Sequential:
    r"""A ``depth``-block MLP for the digits. Block :math:`i`: ``[noise] -> Linear -> norm ->
    ReLU`` (``order="bn_relu"``, the placement of Ioffe & Szegedy §3.2) or ``Linear -> ReLU ->
    norm`` (``order="relu_bn"``), then ``[noise] -> Linear(width, num_classes)``.

    Noise (``dropout`` > 0): ``nn.Dropout(dropout)`` (``noise="bernoulli"``, keep ratio
    :math:`p = 1 - \text{dropout}`) or :class:`UniformNoise` with :math:`\beta` = ``dropout``
    (``noise="uniform"``), placed ``where="every"``: before every hidden Linear but the first
    and before the classifier, so BatchNorm layers 2 and 3 see dropped-out units mixed by a
    Linear (dropout -> Linear -> BN: Li et al.'s case (b)); ``where="before_bn"``: directly
    before BatchNorm layers 2 and 3 (Linear -> dropout -> BN, their case (a), the one whose
    variance ratio is :func:`dropout_variance_ratio`) and before the classifier;
    ``where="after_last_bn"``: only before the classifier, after the last BatchNorm (their
    first remedy).

    ``norm``: ``"batch"`` (``torch.nn`` or ``helpers.norms`` BatchNorm1d, by ``impl``),
    ``"renorm"`` (:class:`BatchRenorm1d`, keyword arguments ``renorm``), ``"group"`` (GroupNorm
    with 4 groups), ``"none"``. The hidden Linears have no bias when a norm directly follows
    them (β takes its role). Weights drawn under ``torch.manual_seed(seed)`` in a forked RNG
    (the global RNG is left as it was): He-normal for hidden layers, torch's default for the
    classifier. Used in lesson 10."""
    if where not in ("every", "before_bn", "after_last_bn"):
        raise ValueError(f"where must be 'every', 'before_bn' or 'after_last_bn', got {where!r}")
    if order not in ("bn_relu", "relu_bn"):
        raise ValueError(f"order must be 'bn_relu' or 'relu_bn', got {order!r}")

    def noise_layer():
        return UniformNoise(dropout) if noise == "uniform" else nn.Dropout(dropout)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        fan_in = in_features
        for i in range(depth):
            if dropout > 0 and where == "every" and i > 0:
                layers.append(noise_layer())
            lin = nn.Linear(fan_in, width, bias=(norm == "none" or order == "relu_bn"))
            nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
            layers.append(lin)
            if dropout > 0 and where == "before_bn" and i > 0:
                layers.append(noise_layer())
            pair = [_norm1d(norm, width, impl, renorm), nn.ReLU()]
            layers.extend(pair if order == "bn_relu" else pair[::-1])
            fan_in = width
        if dropout > 0:
            layers.append(noise_layer())
        layers.append(nn.Linear(fan_in, num_classes))
    return nn.Sequential(*layers).to(dtype)


_BATCH_NORMS = (nn.modules.batchnorm._BatchNorm, norms._BatchNorm)


def _batch_norms(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, _BATCH_NORMS)]


def _bn_inputs(model: nn.Module, x: Tensor) -> list[Tensor]:
    inputs: list[Tensor] = []
    hooks = [m.register_forward_hook(lambda _m, inp, _o: inputs.append(inp[0].detach()))
             for m in _batch_norms(model)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return inputs


def _channel_var(z: Tensor) -> Tensor:
    dims = [0] + list(range(2, z.dim()))
    return z.var(dims, unbiased=False)


def variance_shift(model: nn.Module, x: Tensor, seed: int = 0) -> list[dict]:
    r"""For every BatchNorm layer of ``model``, the per-channel variance of its input over all
    of ``x``, three ways, averaged over channels as ratios:

    - ``train_var``: in training mode (dropout active), :math:`\text{Var}_\text{train}`;
    - ``test_var``: in eval mode (dropout off), :math:`\text{Var}_\text{test}`;
    - ``running_var``: the layer's stored ``running_var`` (what eval mode divides by).

    Returns one row per layer: ``layer``, ``test_over_train`` (mean over channels of
    :math:`\text{Var}_\text{test}/\text{Var}_\text{train}`) and ``shift``, the mean over
    channels of :math:`\max(\text{Var}_\text{test}/\hat\sigma^2, \hat\sigma^2/\text{Var}_\text{test})`
    (Li et al. 2019, Figure 1's measure: 1 means the stored variance fits the test-time
    input). The model is deep-copied (its running statistics stay unchanged); dropout draws
    use a forked RNG seeded with ``seed``. Used in lesson 10."""
    with one_thread(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        train_copy = copy.deepcopy(model).train()
        for m in _batch_norms(train_copy):
            m.momentum = 0.0  # keep the stored statistics as they are
        train_in = _bn_inputs(train_copy, x)
        eval_copy = copy.deepcopy(model).eval()
        test_in = _bn_inputs(eval_copy, x)
    rows = []
    for i, (bn, a, b) in enumerate(zip(_batch_norms(model), train_in, test_in)):
        v_train, v_test = _channel_var(a), _channel_var(b)
        rv = bn.running_var
        rows.append({"layer": i + 1,
                     "test_over_train": float((v_test / v_train).mean()),
                     "shift": float(torch.maximum(v_test / rv, rv / v_test).mean())})
    return rows


# --------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------
def _batches(y: Tensor, batch_size: int, steps: int, sampler: str, classes_per_batch: int,
             g: torch.Generator):
    """Index tensors for ``steps`` batches: ``"iid"`` = reshuffled epochs (last incomplete
    batch dropped); ``"class_sorted"`` = each batch holds ``classes_per_batch`` random classes
    with ``batch_size // classes_per_batch`` random images of each."""
    if sampler == "iid":
        per_epoch = len(y) // batch_size
        done = 0
        while done < steps:
            perm = torch.randperm(len(y), generator=g)
            for i in range(min(per_epoch, steps - done)):
                yield perm[i * batch_size:(i + 1) * batch_size]
            done += per_epoch
    elif sampler == "class_sorted":
        labels = y.unique()
        by_class = [torch.nonzero(y == c).flatten() for c in labels]
        each = batch_size // classes_per_batch
        for _ in range(steps):
            chosen = torch.randperm(len(labels), generator=g)[:classes_per_batch]
            yield torch.cat([by_class[c][torch.randint(len(by_class[c]), (each,), generator=g)]
                             for c in chosen.tolist()])
    else:
        raise ValueError(f"sampler must be 'iid' or 'class_sorted', got {sampler!r}")


def _sgd(groups: list[dict], momentum: float):
    r"""A step function for SGD with momentum and L2 weight decay per group, as
    ``torch.optim.SGD`` computes it (dampening 0, no Nesterov): :math:`d = g + \lambda w`,
    :math:`b \leftarrow d` at the first step and :math:`b \leftarrow \mu b + d` after,
    :math:`w \leftarrow w - \eta b`. Written out so that a lesson's training loop does
    not import torch's compiler stack (which ``torch.optim`` loads on its first step).
    ``step(lr)`` updates in place; each group may carry ``"weight_decay"`` (default 0) and a
    per-run ``"decay_scale"`` tensor that multiplies it."""
    buffers: dict[int, Tensor] = {}

    @torch.no_grad()
    def step(lr: float) -> None:
        for group in groups:
            wd = group.get("weight_decay", 0.0)
            for p in group["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                if isinstance(wd, Tensor) or wd != 0:
                    d = d.add(p * (wd.view((-1,) + (1,) * (p.dim() - 1)) if isinstance(wd, Tensor) else wd))
                if momentum:
                    b = buffers.get(id(p))
                    if b is None:
                        b = buffers[id(p)] = d.clone()
                    else:
                        b.mul_(momentum).add_(d)
                    d = b
                p.sub_(lr * d)
    return step


def _cosine(lr: float, t: int, steps: int) -> float:
    r"""The learning rate of step ``t`` (from 0) of a cosine annealing to 0 over ``steps``:
    :math:`\eta_t = \eta\,\tfrac12(1 + \cos(\pi t/T))` (``CosineAnnealingLR``'s closed form)."""
    return lr * 0.5 * (1 + math.cos(math.pi * t / steps))


def train(model: nn.Module, x: Tensor, y: Tensor, steps: int, lr: float = 0.05,
          batch_size: int = 32, momentum: float = 0.9, weight_decay: float = 0.0,
          param_groups: list[dict] | None = None, sampler: str = "iid",
          classes_per_batch: int = 2, seed: int = 0, cosine: bool = True,
          on_step: Callable[[nn.Module, int, int], None] | None = None) -> float:
    r"""Train ``model`` in place with SGD (``lr``, ``momentum``, ``weight_decay``, or the
    optimiser groups ``param_groups``; the update of ``torch.optim.SGD``, written out in
    :func:`_sgd`) and cross-entropy for ``steps`` batches from
    :func:`_batches` (``sampler``), learning rate annealed by a cosine to 0 when ``cosine``:
    :math:`\eta_t = \eta\,\tfrac12(1 + \cos(\pi t/T))`. ``on_step(model, t, T)`` is called
    before each step (e.g. to set :class:`BatchRenorm1d` limits, or record weight norms).
    Batches drawn from a generator seeded with ``seed``; one torch thread. Returns the mean
    training loss of the last 10% of steps; the model is left in training mode. Used in
    lesson 10."""
    g = torch.Generator().manual_seed(seed)
    if param_groups is None:
        param_groups = [{"params": list(model.parameters())}]
    groups = [{"weight_decay": weight_decay, **grp, "params": list(grp["params"])} for grp in param_groups]
    step = _sgd(groups, momentum)
    params = [p for grp in groups for p in grp["params"]]
    model.train()
    tail, losses = max(1, steps // 10), []
    with one_thread(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout draws
        for t, idx in enumerate(_batches(y, batch_size, steps, sampler, classes_per_batch, g)):
            if on_step is not None:
                on_step(model, t, steps)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            for p in params:
                p.grad = None
            loss.backward()
            step(_cosine(lr, t, steps) if cosine else lr)
            if t >= steps - tail:
                losses.append(float(loss.detach()))
    return sum(losses) / len(losses)


def test_error(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Error in % of ``model`` in eval mode on (x, y), in one batch, without gradients; the
    model's mode is restored afterwards. Used in lesson 10."""
    was = model.training
    with one_thread(), torch.no_grad():
        wrong = int((model.eval()(x).argmax(1) != y).sum())
    model.train(was)
    return 100.0 * wrong / len(y)


def recompute_bn_statistics(model: nn.Module, x: Tensor, batch_size: int = 64) -> nn.Module:
    r"""A copy of ``model`` whose BatchNorm running statistics are re-estimated over ``x`` with
    dropout (and every other module) in eval mode and only the BatchNorm layers in training
    mode, as a plain average over the batches (``momentum=None``): the remedy of Li et al.
    2019 of recomputing the statistics with dropout off. Returned in eval mode. Used in
    lesson 10."""
    model = copy.deepcopy(model).eval()
    for m in _batch_norms(model):
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with one_thread(), torch.no_grad():
        for start in range(0, len(x) - batch_size + 1, batch_size):
            model(x[start:start + batch_size])
    return model.eval()


# --------------------------------------------------------------------------------------
# weight decay
# --------------------------------------------------------------------------------------
def param_groups_weight_decay(model: nn.Module, weight_decay: float = 1e-5,
                              no_weight_decay_list=()) -> list[dict]:
    r"""Two optimiser groups, with timm's rule (``timm/optim/_param_groups.py``,
    ``param_groups_weight_decay``): a trainable parameter gets **no** weight decay when
    ``param.ndim <= 1`` (norm gains and shifts, biases, scalars), or its name ends with
    ``".bias"``, or its name is in ``no_weight_decay_list`` (current timm matches wildcard
    patterns there); every other one (weight matrices,
    conv kernels, embeddings) gets ``weight_decay``. Frozen parameters are left out.
    Returns ``[{"params": no_decay, "weight_decay": 0.0}, {"params": decay,
    "weight_decay": weight_decay}]``. Used in lesson 10."""
    skip = set(no_weight_decay_list)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim <= 1 or name.endswith(".bias") or name in skip:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": no_decay, "weight_decay": 0.0},
            {"params": decay, "weight_decay": weight_decay}]


def weight_norm_trace(layer: nn.Module, every: int = 1):
    r"""A recorder for :func:`train`'s ``on_step``: returns ``(on_step, trace)``; ``trace`` is a
    list that receives ``(t, ||W||)`` for ``layer.weight`` every ``every`` steps, from
    which the effective learning rate of a scale-invariant weight,

    .. math:: \eta_\text{eff} = \eta_t / \lVert W \rVert^2,

    follows (the angular step of SGD on a weight that BatchNorm makes scale-invariant, a
    derivation from Ioffe & Szegedy §3.3; van Laarhoven 2017). Used in lesson 10."""
    trace: list[tuple[int, float]] = []

    def on_step(model, t, steps):
        if t % every == 0:
            trace.append((t, float(layer.weight.detach().norm())))
    return on_step, trace


# --------------------------------------------------------------------------------------
# frozen BatchNorm
# --------------------------------------------------------------------------------------
class FrozenBatchNorm2d(nn.Module):
    r"""BatchNorm with fixed statistics and affine parameters, as torchvision's
    ``torchvision/ops/misc.py`` ``FrozenBatchNorm2d(num_features, eps=1e-5)``: ``weight``,
    ``bias``, ``running_mean`` and ``running_var`` are all **buffers** (no parameter, so no
    optimiser, weight decay or ``train()`` can change them), and

    .. math:: s = w\,(\hat\sigma^2 + \epsilon)^{-1/2},\qquad y = x\,s + (b - \hat\mu\,s)

    per channel (dim 1), in training and eval mode alike. Loading a BatchNorm ``state_dict``
    drops its ``num_batches_tracked``. Accepts (N, C) and (N, C, ...) input. Used in lesson
    10."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, x: Tensor) -> Tensor:
        shape = (1, -1) + (1,) * (x.dim() - 2)
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.reshape(shape) + shift.reshape(shape)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def freeze_batch_norm(model: nn.Module) -> nn.Module:
    """Replace, in place, every BatchNorm module of ``model`` by a :class:`FrozenBatchNorm2d`
    holding copies of its weight, bias, running statistics and eps (what detection code does
    before fine-tuning a pretrained backbone); returns ``model``. Used in lesson 10."""
    for name, child in list(model.named_children()):
        if isinstance(child, _BATCH_NORMS):
            frozen = FrozenBatchNorm2d(child.num_features, child.eps)
            frozen.load_state_dict(child.state_dict())
            setattr(model, name, frozen.to(child.running_mean.dtype))
        else:
            freeze_batch_norm(child)
    return model


def small_convnet(width: int = 8, norm: str = "batch", seed: int = 0,
                  num_classes: int = 10, dtype=DTYPE) -> nn.Sequential:
    r"""A small CNN for (N, 1, 8, 8) digit images: conv3x3(1 -> w) -> norm -> ReLU ->
    conv3x3(w -> 2w, stride 2) -> norm -> ReLU -> global average pool -> Linear(2w, classes).
    ``norm`` is ``"batch"`` (``nn.BatchNorm2d``) or ``"none"``; convolutions He-initialised,
    without bias when a norm follows; weights drawn in a forked RNG seeded with ``seed``.
    Its classifier is ``model[-1]``. Used in lesson 10."""
    bias = norm == "none"

    def nl(c):
        return nn.BatchNorm2d(c) if norm == "batch" else nn.Identity()

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=bias), nl(width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=bias), nl(2 * width),
            nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, num_classes))
        for m in model:
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    return model.to(dtype)


# --------------------------------------------------------------------------------------
# Batch Renormalization (Ioffe 2017, Algorithm 1)
# --------------------------------------------------------------------------------------
def _dims(x: Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


def _ch(v: Tensor, x: Tensor) -> Tensor:
    return v.reshape((1, -1) + (1,) * (x.dim() - 2))


def batch_renorm(x: Tensor, running_mean: Tensor, running_std: Tensor, weight: Tensor | None,
                 bias: Tensor | None, training: bool, rmax: float = 1.0, dmax: float = 0.0,
                 momentum: float = 0.01, eps: float = 1e-5) -> Tensor:
    r"""Batch Renormalization (Ioffe 2017, Algorithm 1), per channel (dim 1) over every other
    dim, from elementary tensor operations. In training:

    .. math::

        \mu_B = \tfrac1m \textstyle\sum x,\quad
        \sigma_B = \sqrt{\epsilon + \tfrac1m \textstyle\sum (x - \mu_B)^2},\quad
        r = \text{sg}\big(\text{clip}_{[1/r_\max,\, r_\max]}(\sigma_B/\sigma)\big),\quad
        d = \text{sg}\big(\text{clip}_{[-d_\max,\, d_\max]}((\mu_B - \mu)/\sigma)\big),

    .. math:: \hat x = \frac{x - \mu_B}{\sigma_B}\, r + d,\qquad y = \gamma \hat x + \beta,

    with sg = stop-gradient (``detach``): r and d are treated as constants in the backward
    pass. Then, in place, :math:`\mu \mathrel{+}= \alpha(\mu_B - \mu)` and
    :math:`\sigma \mathrel{+}= \alpha(\sigma_B - \sigma)`, :math:`\alpha` = ``momentum`` (the
    paper's rate 0.01): the moving average is of the **standard deviation**, not the
    variance. In eval mode :math:`\hat x = (x - \mu)/\sigma`. With :math:`r_\max = 1,
    d_\max = 0` the training output is BatchNorm's. Used in lesson 10."""
    if training:
        dims = _dims(x)
        mu = x.mean(dims)
        sigma = ((x - _ch(mu, x)) ** 2).mean(dims).add(eps).sqrt()
        r, d = renorm_corrections(x.detach(), running_mean, running_std, rmax, dmax, eps)
        x_hat = (x - _ch(mu, x)) / _ch(sigma, x) * _ch(r, x) + _ch(d, x)
        with torch.no_grad():
            running_mean.add_(momentum * (mu.detach() - running_mean))
            running_std.add_(momentum * (sigma.detach() - running_std))
    else:
        x_hat = (x - _ch(running_mean, x)) / _ch(running_std, x)
    if weight is not None:
        x_hat = x_hat * _ch(weight, x)
    if bias is not None:
        x_hat = x_hat + _ch(bias, x)
    return x_hat


def renorm_corrections(x: Tensor, running_mean: Tensor, running_std: Tensor, rmax: float,
                       dmax: float, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    r"""Batch Renorm's corrections for a batch, as constants (no graph):
    :math:`r = \text{clip}_{[1/r_\max, r_\max]}(\sigma_B/\sigma)`,
    :math:`d = \text{clip}_{[-d_\max, d_\max]}((\mu_B - \mu)/\sigma)`, per channel, with
    :math:`\sigma_B = \sqrt{\epsilon + \text{biased var}}`. Used in lesson 10."""
    with torch.no_grad():
        dims = _dims(x)
        mu = x.mean(dims)
        sigma = ((x - _ch(mu, x)) ** 2).mean(dims).add(eps).sqrt()
        return ((sigma / running_std).clamp(1 / rmax, rmax),
                ((mu - running_mean) / running_std).clamp(-dmax, dmax))


def batch_renorm_backward(grad_out: Tensor, x: Tensor, weight: Tensor, r: Tensor, d: Tensor,
                          eps: float = 1e-5):
    r"""The hand-derived backward pass of Batch Renorm in training mode, r and d given
    (:func:`renorm_corrections`). With :math:`\hat x_0 = (x - \mu_B)/\sigma_B` and r, d
    constants, :math:`y = \gamma(r\hat x_0 + d) + \beta`, so the input gradient is :math:`r`
    times BatchNorm's (with :math:`h = \gamma\,\partial L/\partial y`, means over the m
    values of a channel):

    .. math:: \frac{\partial L}{\partial x} = \frac{r}{\sigma_B}\Big(h - \overline{h}
              - \hat x_0\,\overline{h\,\hat x_0}\Big),\qquad
              \frac{\partial L}{\partial\gamma} = \textstyle\sum \frac{\partial L}{\partial y}\,\hat x,
              \qquad \frac{\partial L}{\partial\beta} = \textstyle\sum \frac{\partial L}{\partial y}.

    Returns ``(grad_x, grad_weight, grad_bias)``. Used in lesson 10."""
    dims = _dims(x)
    mu = x.mean(dims)
    sigma = ((x - _ch(mu, x)) ** 2).mean(dims).add(eps).sqrt()
    x0 = (x - _ch(mu, x)) / _ch(sigma, x)
    h = grad_out * _ch(weight, x)
    grad_x = _ch(r / sigma, x) * (h - _ch(h.mean(dims), x) - x0 * _ch((h * x0).mean(dims), x))
    x_hat = x0 * _ch(r, x) + _ch(d, x)
    return grad_x, (grad_out * x_hat).sum(dims), grad_out.sum(dims)


class BatchRenormFunction(torch.autograd.Function):
    r"""Batch Renorm's training-mode forward with r and d given as constants,
    :math:`y = \gamma\,((x - \mu_B)/\sigma_B \cdot r + d) + \beta`, and the hand-written
    backward :func:`batch_renorm_backward`, for ``gradcheck``:
    ``BatchRenormFunction.apply(x, weight, bias, r, d, eps)``. Used in lesson 10."""

    @staticmethod
    def forward(ctx, x, weight, bias, r, d, eps):
        ctx.save_for_backward(x, weight, r, d)
        ctx.eps = eps
        dims = _dims(x)
        mu = x.mean(dims)
        sigma = ((x - _ch(mu, x)) ** 2).mean(dims).add(eps).sqrt()
        x_hat = (x - _ch(mu, x)) / _ch(sigma, x) * _ch(r, x) + _ch(d, x)
        return x_hat * _ch(weight, x) + _ch(bias, x)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, r, d = ctx.saved_tensors
        gx, gw, gb = batch_renorm_backward(grad_out, x, weight, r, d, ctx.eps)
        return gx, gw, gb, None, None, None


class _BatchRenorm(nn.Module):
    r"""Batch Renormalization module: parameters ``weight`` (1) and ``bias`` (0), buffers
    ``running_mean`` (0), ``running_std`` (1) and ``num_batches_tracked``; ``rmax`` and
    ``dmax`` are plain attributes that a schedule changes during training
    (:func:`renorm_limits`). Math in :func:`batch_renorm`."""

    _ranks: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.01,
                 rmax: float = 1.0, dmax: float = 0.0) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.rmax, self.dmax = rmax, dmax
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_std", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() not in self._ranks:
            raise ValueError(f"expected {' or '.join(f'{r}D' for r in self._ranks)} input, "
                             f"got {x.dim()}D input")
        if self.training:
            if x.numel() // x.shape[1] < 2:
                raise ValueError("Expected more than 1 value per channel when training, got "
                                 f"input size {list(x.shape)}")
            self.num_batches_tracked.add_(1)
        return batch_renorm(x, self.running_mean, self.running_std, self.weight, self.bias,
                            self.training, self.rmax, self.dmax, self.momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"rmax={self.rmax}, dmax={self.dmax}")


class BatchRenorm1d(_BatchRenorm):
    """Batch Renormalization for (N, C) or (N, C, L) input. Used in lesson 10."""

    _ranks = (2, 3)


class BatchRenorm2d(_BatchRenorm):
    """Batch Renormalization for (N, C, H, W) input. Used in lesson 10."""

    _ranks = (4,)


def renorm_limits(step: int, total: int, warmup: float = 5 / 40, r_full: float = 1.0,
                  d_full: float = 25 / 40, rmax_end: float = 3.0,
                  dmax_end: float = 5.0) -> tuple[float, float]:
    r"""``(rmax, dmax)`` at ``step`` of ``total``: Ioffe 2017 (experiments) keeps :math:`r_\max = 1,
    d_\max = 0` for the first 5k steps, then relaxes them to reach :math:`r_\max = 3` at 40k
    steps and :math:`d_\max = 5` at 25k. Here the same shape rescaled to ``total`` steps
    (40k -> ``total``; fractions ``warmup``, ``d_full``, ``r_full`` of it), relaxed linearly
    (the paper says "gradually"; linear is our choice). Used in lesson 10."""
    f = step / max(total, 1)

    def ramp(end_fraction, top, bottom):
        if f <= warmup:
            return bottom
        return bottom + (top - bottom) * min(1.0, (f - warmup) / (end_fraction - warmup))

    return ramp(r_full, rmax_end, 1.0), ramp(d_full, dmax_end, 0.0)


def set_renorm_limits(model: nn.Module, t: int, steps: int) -> None:
    """``on_step`` for :func:`train`: set every Batch Renorm layer's rmax and dmax from
    :func:`renorm_limits`. Used in lesson 10."""
    rmax, dmax = renorm_limits(t, steps)
    for m in model.modules():
        if isinstance(m, _BatchRenorm):
            m.rmax, m.dmax = rmax, dmax


# --------------------------------------------------------------------------------------
# ghost BatchNorm (Hoffer, Hubara & Soudry 2017)
# --------------------------------------------------------------------------------------
def ghost_batch_norm(x: Tensor, ghost_size: int, weight: Tensor | None = None,
                     bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    r"""Training-mode BatchNorm over "ghost" batches: the batch of N samples is cut into
    N / ``ghost_size`` consecutive groups and each group is normalised with its own
    per-channel mean and biased variance, :math:`\hat x = (x - \mu_g)/\sqrt{\sigma_g^2 +
    \epsilon}`, then :math:`\gamma\hat x + \beta`. ``ghost_size = N`` is BatchNorm. Used in
    lesson 10."""
    n = x.shape[0]
    if n % ghost_size:
        raise ValueError(f"batch size {n} is not a multiple of ghost_size {ghost_size}")
    g = x.reshape(n // ghost_size, ghost_size, *x.shape[1:])
    dims = [1] + list(range(3, g.dim()))
    mu = g.mean(dims, keepdim=True)
    var = ((g - mu) ** 2).mean(dims, keepdim=True)
    y = ((g - mu) / (var + eps).sqrt()).reshape(x.shape)
    if weight is not None:
        y = y * _ch(weight, x)
    if bias is not None:
        y = y + _ch(bias, x)
    return y


# --------------------------------------------------------------------------------------
# zero-init the last gamma of each residual branch (Goyal et al. 2017, §5.1)
# --------------------------------------------------------------------------------------
class ResidualBlock(nn.Module):
    r""":math:`\text{ReLU}(x + \text{BN}_2(W_2\,\text{ReLU}(\text{BN}_1(W_1 x))))`, the shape
    of torchvision's BasicBlock with Linear layers; ``zero_init`` sets :math:`\gamma` of
    ``bn2`` to 0, so the block starts as ``ReLU(x)``. Used in lesson 10."""

    def __init__(self, width: int, zero_init: bool) -> None:
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(width, width, bias=False), nn.BatchNorm1d(width)
        self.fc2, self.bn2 = nn.Linear(width, width, bias=False), nn.BatchNorm1d(width)
        for fc in (self.fc1, self.fc2):
            nn.init.kaiming_normal_(fc.weight, nonlinearity="relu")
        if zero_init:
            nn.init.zeros_(self.bn2.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x + self.bn2(self.fc2(F.relu(self.bn1(self.fc1(x))))))


def residual_mlp(depth: int, width: int = 32, zero_init: bool = False, seed: int = 0,
                 in_features: int = 64, num_classes: int = 10, dtype=DTYPE) -> nn.Sequential:
    """Linear(in, width) -> ReLU -> ``depth`` :class:`ResidualBlock` s -> Linear(width,
    classes), drawn in a forked RNG seeded with ``seed``. Used in lesson 10."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(in_features, width), nn.ReLU(),
                              *[ResidualBlock(width, zero_init) for _ in range(depth)],
                              nn.Linear(width, num_classes))
    return model.to(dtype)


# --------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------
# the lesson's English labels and their Chinese (helpers.plotting.bilingual)
_GLOSSARY = [("uniform noise", "均匀噪声"), ("no dropout", "无 dropout"),
             ("before every BN", "在每个 BN 之前"), ("after the last BN", "在最后一个 BN 之后"),
             ("weight decay", "权重衰减"), ("case (a): ", "情形 (a)："), ("case (b): ", "情形 (b)：")]


def plot_variance_shift(ratio_rows: list[tuple[str, list[dict]]], keep: float):
    """Left: the measured test/train variance ratio of every BatchNorm input, per layer, for
    each labelled model, with the keep ratio p dashed (the prediction for dropout directly
    before BatchNorm on a zero-mean unit, Li et al.'s case (a)). Right: the
    shift max(test/running, running/test) per layer, with 1 (no shift) dotted. One legend for both,
    beside them (English above Chinese in each entry). Returns the figure. Used in lesson 10."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from .plotting import bilingual, use_course_style

    use_course_style()
    fig, axes = plt.subplots(1, 2, figsize=(11.6, 4.9))
    for (label, rows), marker in zip(ratio_rows, "osD^v"):
        label = bilingual(label, _GLOSSARY).replace(" · ", "\n", 1)
        layers = [r["layer"] for r in rows]
        axes[0].plot(layers, [r["test_over_train"] for r in rows], marker + "-", label=label)
        axes[1].plot(layers, [r["shift"] for r in rows], marker + "-", label=label)
    axes[0].axhline(keep, color="k", ls="--", lw=1.5,
                    label=f"p = {keep}: dropout directly\nbefore BN, zero-mean unit\n紧挨 BN 的 dropout，零均值单元")
    axes[1].axhline(1.0, color="0.45", ls=":", lw=2.0, label="1 = no shift\n1 = 无偏移")
    axes[0].set_ylabel(r"$\mathrm{Var}_\mathrm{test}\,/\,\mathrm{Var}_\mathrm{train}$")
    axes[1].set_ylabel(r"$\max(\mathrm{Var}_\mathrm{test}/\hat\sigma^2,\ "
                       r"\hat\sigma^2/\mathrm{Var}_\mathrm{test})$")
    axes[1].yaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    for ax, title in zip(axes, ["variance, train → test\n方差：训练 → 测试",
                                "variance shift\n方差偏移"]):
        ax.set_xlabel("BatchNorm layer · 层")
        ax.set_title(title)
        ax.set_xticks(sorted({r["layer"] for _, rows in ratio_rows for r in rows}))
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(axes[1].get_lines()[-1])  # the right panel's reference line
    labels.append(handles[-1].get_label())
    legend = fig.legend(handles, labels, loc="center right", bbox_to_anchor=(1.0, 0.5),
                        frameon=False, labelspacing=0.8)
    fig.canvas.draw()
    share = legend.get_window_extent().width / fig.bbox.width  # the legend's part of the width
    fig.tight_layout(rect=(0, 0, 1 - share - 0.01, 1), w_pad=2.0)
    return fig


def plot_weight_norms(traces: dict[str, list[tuple[int, float]]], lr: float, steps: int):
    """Left: ||W|| of one BatchNorm'd layer over training, one curve per weight-decay setting.
    Right: the effective learning rate lr_t/||W||^2 (cosine-annealed lr_t), log scale. One
    legend above both panels (same colours). Returns the figure. Used in lesson 10."""
    import matplotlib.pyplot as plt

    from .plotting import bilingual, use_course_style

    use_course_style()
    fig, axes = plt.subplots(1, 2, figsize=(11.6, 4.9))
    for label, trace in traces.items():
        label = bilingual(label, _GLOSSARY)
        t = [a for a, _ in trace]
        w = [b for _, b in trace]
        lr_t = [lr * 0.5 * (1 + math.cos(math.pi * s / steps)) for s in t]
        axes[0].plot(t, w, label=label)
        axes[1].semilogy(t, [a / b ** 2 for a, b in zip(lr_t, w)], label=label)
    axes[0].set_ylabel(r"$\|W\|$")
    axes[1].set_ylabel(r"$\eta_t\,/\,\|W\|^2$")
    for ax, title in zip(axes, ["weight norm · 权重范数", "effective learning rate · 有效学习率"]):
        ax.set_xlabel("step · 步数")
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               columnspacing=2.5)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / fig.get_figheight()), w_pad=2.0)
    return fig


# --------------------------------------------------------------------------------------
# the lesson's experiments (each a few seconds on one CPU thread)
# --------------------------------------------------------------------------------------
def spread(values: list[float], digits: int = 1) -> str:
    """``"mean (min-max)"`` of ``values``, e.g. ``"3.5 (2.8-4.2)"``. Used in lesson 10."""
    return (f"{sum(values) / len(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def dropout_experiment(configs: dict[str, dict], seeds=(0, 1, 2), steps: int = 200,
                       lr: float = 0.05, batch_size: int = 64, progress: bool = True) -> list[dict]:
    """For each labelled :func:`mlp` configuration and seed: train on the digits
    (:func:`train`), then measure the test error in eval mode, the test error after
    :func:`recompute_bn_statistics` over the training set (dropout off), and
    :func:`variance_shift` on the test set before and after recomputing. The seeds of one
    configuration train together (:func:`train_stacked`). One row per run:
    ``label``, ``seed``, ``error``, ``recomputed``, ``shift`` (list per BN layer),
    ``shift_after``, ``ratio`` (test/train variance per layer), ``rows`` (the raw
    :func:`variance_shift` rows). Used in lesson 10."""
    x, y, xt, yt = digits_data()
    bar = Progress("dropout runs", len(configs) * len(seeds), label_width=12, enabled=progress)
    out = []
    for label, kw in configs.items():
        models = [mlp(seed=seed, **kw) for seed in seeds]  # the seeds of a config: one batched run
        train_stacked(models, x, y, steps, lr=lr, batch_size=batch_size, seeds=seeds)
        for seed, model in zip(seeds, models):
            fixed = recompute_bn_statistics(model, x)
            rows = variance_shift(model, xt, seed=seed)
            out.append({"label": label, "seed": seed, "error": test_error(model, xt, yt),
                        "recomputed": test_error(fixed, xt, yt),
                        "shift": [r["shift"] for r in rows],
                        "shift_after": [r["shift"] for r in variance_shift(fixed, xt, seed=seed)],
                        "ratio": [r["test_over_train"] for r in rows], "rows": rows})
            bar.step()
    bar.close(f"{bar.total} runs")
    return out


def weight_decay_experiment(settings: dict[str, tuple[float, bool]], seeds=(0, 1, 2),
                            steps: int = 200, lr: float = 0.05, batch_size: int = 64,
                            progress: bool = True) -> list[dict]:
    """For each labelled ``(weight_decay, exclude)`` and seed, train :func:`mlp` with weight
    decay on every parameter (``exclude=False``) or with :func:`param_groups_weight_decay`
    (``exclude=True``; :func:`train_stacked`, the seeds of a setting together). One row per
    run: ``label``, ``seed``, ``error``, ``gamma_first`` and
    ``gamma_last`` (mean |γ| of the first and last BatchNorm), ``w_norm`` (‖W‖ of the second
    hidden Linear). Used in lesson 10."""
    x, y, xt, yt = digits_data()
    bar = Progress("weight-decay runs", len(settings) * len(seeds), label_width=17, enabled=progress)
    out = []
    for label, (wd, exclude) in settings.items():
        models = [mlp(seed=seed) for seed in seeds]
        train_stacked(models, x, y, steps, lr=lr, batch_size=batch_size, seeds=seeds,
                      weight_decay=wd, exclude_1d=exclude)
        for seed, model in zip(seeds, models):
            bns = _batch_norms(model)
            out.append({"label": label, "seed": seed, "error": test_error(model, xt, yt),
                        "gamma_first": float(bns[0].weight.detach().abs().mean()),
                        "gamma_last": float(bns[-1].weight.detach().abs().mean()),
                        "w_norm": float(model[3].weight.detach().norm())})
            bar.step()
    bar.close(f"{bar.total} runs")
    return out


def finetune_experiment(modes=("train", "eval", "frozen"), seeds=(0, 1, 2),
                        pretrain_steps: int = 300, steps: int = 300, lr: float = 0.01,
                        batch_size: int = 2, progress: bool = True) -> tuple[float, list[dict]]:
    r"""Pretrain :func:`small_convnet` (BatchNorm, seed 0) on digits 0-4 (batch 32, lr 0.1,
    ``pretrain_steps``), then for each mode and seed replace the classifier by a new
    Linear(16, 5) (drawn with seed 100 + seed) and fine-tune everything trainable on digits
    5-9 at ``batch_size`` for ``steps`` steps (lr ``lr``):

    - ``"train"``: BatchNorm in training mode (batch statistics, running statistics updated);
    - ``"eval"``: BatchNorm layers put in ``eval()`` before every step (running statistics
      fixed, γ and β still trained);
    - ``"frozen"``: :func:`freeze_batch_norm` (statistics, γ and β all fixed buffers).

    Returns the pretrained model's test error on 0-4 and one row per run: ``mode``,
    ``seed``, ``error`` (test error % on digits 5-9, eval mode). Used in lesson 10."""
    a = digits_data(images=True, classes=range(5))
    b = digits_data(images=True, classes=range(5, 10))
    base = small_convnet(seed=0)
    train(base, a[0], a[1], pretrain_steps, lr=0.1, batch_size=32, seed=0)
    base_error = test_error(base, a[2], a[3])
    bar = Progress("fine-tuning runs", len(modes) * len(seeds), label_width=16, enabled=progress)
    rows = []
    for mode in modes:
        for seed in seeds:
            model = copy.deepcopy(base)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(100 + seed)
                model[-1] = nn.Linear(model[-1].in_features, 5).to(DTYPE)
            if mode == "frozen":
                freeze_batch_norm(model)

            def bn_eval(m, _t, _T, mode=mode):
                if mode == "eval":
                    for layer in _batch_norms(m):
                        layer.eval()
            params = [p for p in model.parameters() if p.requires_grad]
            train(model, b[0], b[1] - 5, steps, lr=lr, batch_size=batch_size, seed=seed,
                  param_groups=[{"params": params}], on_step=bn_eval)
            rows.append({"mode": mode, "seed": seed, "error": test_error(model, b[2], b[3] - 5)})
            bar.step()
    bar.close(f"{bar.total} runs")
    return base_error, rows


def renorm_experiment(settings: dict[str, dict], norms_=("batch", "renorm", "group"),
                      seeds=(0, 1), steps: int = 300, lr: float = 0.05,
                      renorm: dict | None = None, progress: bool = True) -> list[dict]:
    """For each labelled batch setting (keyword arguments of :func:`train_stacked`:
    ``batch_size``, ``sampler``, ``stats_size``), norm and seed, train :func:`mlp` (``norm``;
    Batch Renorm with the keyword arguments ``renorm``, e.g. its moving-average rate, and
    the schedule of :func:`renorm_limits`) for ``steps`` steps, the seeds together; one row
    per run: ``setting``, ``norm``, ``seed``, ``error`` (eval mode). Used in lesson 10."""
    x, y, xt, yt = digits_data()
    bar = Progress("normalisation runs", len(settings) * len(norms_) * len(seeds), label_width=18, enabled=progress)
    rows = []
    for label, kw in settings.items():
        for norm in norms_:
            models = [mlp(norm=norm, seed=seed, renorm=renorm) for seed in seeds]
            train_stacked(models, x, y, steps, lr=lr, seeds=seeds,
                          renorm_schedule=norm == "renorm", **kw)
            for seed, model in zip(seeds, models):
                rows.append({"setting": label, "norm": norm, "seed": seed,
                             "error": test_error(model, xt, yt)})
                bar.step()
    bar.close(f"{bar.total} runs")
    return rows


def placement_experiment(seeds=(0, 1, 2, 3, 4), steps: int = 200, lr: float = 0.05,
                         batch_size: int = 64, progress: bool = True) -> list[dict]:
    """:func:`mlp` with ``order="bn_relu"`` (Linear -> BN -> ReLU) and ``"relu_bn"`` (Linear ->
    ReLU -> BN), same seeds and batches (:func:`train_stacked`); one row per run: ``order``, ``seed``, ``error``,
    ``loss`` (training loss over the last 10% of steps). Used in lesson 10."""
    x, y, xt, yt = digits_data()
    bar = Progress("placement runs", 2 * len(seeds), label_width=14, enabled=progress)
    rows = []
    for order in ("bn_relu", "relu_bn"):
        models = [mlp(order=order, seed=seed) for seed in seeds]
        losses = train_stacked(models, x, y, steps, lr=lr, batch_size=batch_size, seeds=seeds)
        for seed, model, loss in zip(seeds, models, losses):
            rows.append({"order": order, "seed": seed, "error": test_error(model, xt, yt),
                         "loss": loss})
            bar.step()
    bar.close(f"{bar.total} runs")
    return rows



# --------------------------------------------------------------------------------------
# several runs of one MLP at once (the lesson's grids in one batched model)
# --------------------------------------------------------------------------------------
def _stack(models: list[nn.Module], index: int, name: str) -> Tensor | None:
    tensors = [getattr(m[index], name) for m in models]
    if tensors[0] is None:
        return None
    return torch.stack([t.detach() for t in tensors]).clone()


def train_stacked(models: list[nn.Sequential], x: Tensor, y: Tensor, steps: int,
                  lr: float = 0.05, batch_size: int = 32, momentum: float = 0.9,
                  weight_decay=0.0, exclude_1d: bool = False, sampler: str = "iid",
                  classes_per_batch: int = 2, seeds=None, cosine: bool = True,
                  stats_size: int | None = None, renorm_schedule: bool = False,
                  on_step: Callable[[dict, int, int], None] | None = None) -> list[float]:
    r"""Train R models of one :func:`mlp` layout (different seeds or weight decays) at once, as
    one batched model, and write the trained parameters and running statistics back into
    ``models`` (left in training mode). Run :math:`r` is the run of :func:`train` with
    ``seed = seeds[r]``: the same initial weights (those of ``models[r]``), the same batches,
    SGD with momentum and the cosine schedule, computed with batched matrix products
    (:math:`h_r \leftarrow h_r W_r^\top`) so that one Python step serves every run. Without
    dropout the result equals R calls of :func:`train` up to float64 rounding; dropout and
    uniform-noise masks come from one generator per call, so they differ from
    :func:`train`'s draws.

    ``weight_decay``: a number or one per run; added to the gradient as SGD does
    (:math:`g + \lambda w`), on every parameter, or with ``exclude_1d`` only on parameters
    that :func:`param_groups_weight_decay` decays (Linear weights). ``stats_size``: BatchNorm
    and Batch Renorm statistics over consecutive groups of that many examples of a batch
    (micro-batches, as in Ioffe 2017's micro-batch experiment: statistics over 4 examples,
    gradient over the whole batch); their running statistics move once per step, by the
    mean over the groups of the group means and (unbiased) variances, or standard
    deviations for Batch Renorm. ``renorm_schedule``: Batch Renorm limits from
    :func:`renorm_limits` at every step. ``on_step(state, t, T)`` is called before each step
    with ``state[i]`` the dict of stacked tensors of layer ``i`` (e.g. ``"weight"`` of shape
    (R, out, in)). Returns each run's mean training loss over the last 10% of steps. Used in
    lesson 10."""
    R = len(models)
    seeds = list(range(R)) if seeds is None else list(seeds)
    if len(seeds) != R:
        raise ValueError(f"{R} models but {len(seeds)} seeds")
    layers = list(models[0])
    kinds = [type(m) for m in layers]
    if any([type(l) for l in m] != kinds for m in models):
        raise ValueError("every model must have the same layout (one mlp configuration)")
    state: dict[int, dict] = {}
    params, decayed = [], []
    for i, layer in enumerate(layers):
        if isinstance(layer, (nn.Linear, nn.BatchNorm1d, nn.GroupNorm, _BatchRenorm)):
            s = {"weight": _stack(models, i, "weight"), "bias": _stack(models, i, "bias")}
            for name in ("running_mean", "running_var", "running_std"):
                if getattr(layer, name, None) is not None:
                    s[name] = _stack(models, i, name)
            for name in ("weight", "bias"):
                if s[name] is not None:
                    s[name].requires_grad_()
                    params.append(s[name])
                    if not exclude_1d or (isinstance(layer, nn.Linear) and name == "weight"):
                        decayed.append(s[name])
            state[i] = s
        elif not isinstance(layer, (nn.ReLU, nn.Dropout, UniformNoise)):
            raise TypeError(f"train_stacked does not know {type(layer).__name__}")
    wd = torch.as_tensor(weight_decay, dtype=x.dtype).expand(R).contiguous()
    step = _sgd([{"params": decayed, "weight_decay": wd},
                 {"params": [p for p in params if all(p is not q for q in decayed)]}], momentum)
    streams = [_batches(y, batch_size, steps, sampler, classes_per_batch,
                        torch.Generator().manual_seed(s)) for s in seeds]
    noise = torch.Generator().manual_seed(seeds[0])
    tail, losses = max(1, steps // 10), []

    def grouped(h):  # (R, B, C) -> (R, groups, m, C)
        m = stats_size or h.shape[1]
        if h.shape[1] % m:
            raise ValueError(f"batch {h.shape[1]} is not a multiple of stats_size {m}")
        return h.reshape(R, h.shape[1] // m, m, h.shape[2])

    def forward(h, t):
        for i, layer in enumerate(layers):
            s = state.get(i)
            if isinstance(layer, nn.Linear):
                h = torch.bmm(h, s["weight"].transpose(1, 2))
                if s["bias"] is not None:
                    h = h + s["bias"].unsqueeze(1)
            elif isinstance(layer, nn.BatchNorm1d) and stats_size is None:
                B = h.shape[1]  # one fused call: the R x C columns of (B, R C) are independent
                h = F.batch_norm(h.transpose(0, 1).reshape(B, -1), s["running_mean"].view(-1),
                                 s["running_var"].view(-1), s["weight"].reshape(-1),
                                 s["bias"].reshape(-1), True, layer.momentum, layer.eps)
                h = h.view(B, R, -1).transpose(0, 1)
            elif isinstance(layer, nn.BatchNorm1d):
                g = grouped(h)
                mu = g.mean(2, keepdim=True)
                var = ((g - mu) ** 2).mean(2, keepdim=True)
                h = ((g - mu) / (var + layer.eps).sqrt()).reshape(h.shape)
                h = h * s["weight"].unsqueeze(1) + s["bias"].unsqueeze(1)
                with torch.no_grad():
                    m = g.shape[2]
                    a = layer.momentum
                    s["running_mean"].mul_(1 - a).add_(a * mu.mean(1).squeeze(1))
                    s["running_var"].mul_(1 - a).add_(a * (var * m / (m - 1)).mean(1).squeeze(1))
            elif isinstance(layer, _BatchRenorm):
                g = grouped(h)
                mu = g.mean(2, keepdim=True)
                sigma = (((g - mu) ** 2).mean(2, keepdim=True) + layer.eps).sqrt()
                rmax, dmax = renorm_limits(t, steps) if renorm_schedule else (layer.rmax, layer.dmax)
                with torch.no_grad():
                    rm, rs = s["running_mean"].view(R, 1, 1, -1), s["running_std"].view(R, 1, 1, -1)
                    r = (sigma / rs).clamp(1 / rmax, rmax)
                    d = ((mu - rm) / rs).clamp(-dmax, dmax)
                h = ((g - mu) / sigma * r + d).reshape(h.shape)
                h = h * s["weight"].unsqueeze(1) + s["bias"].unsqueeze(1)
                with torch.no_grad():
                    a = layer.momentum
                    s["running_mean"].add_(a * (mu.mean(1).squeeze(1) - s["running_mean"]))
                    s["running_std"].add_(a * (sigma.mean(1).squeeze(1) - s["running_std"]))
            elif isinstance(layer, nn.GroupNorm):
                h = F.group_norm(h.reshape(-1, h.shape[2]), layer.num_groups, eps=layer.eps).view(h.shape)
                h = h * s["weight"].unsqueeze(1) + s["bias"].unsqueeze(1)
            elif isinstance(layer, nn.ReLU):
                h = h.clamp_min(0)
            elif isinstance(layer, nn.Dropout):
                if layer.p > 0:
                    keep = 1 - layer.p
                    mask = torch.rand(h.shape, generator=noise, dtype=h.dtype) < keep
                    h = h * mask / keep
            elif isinstance(layer, UniformNoise):
                if layer.beta > 0:
                    h = h * (1 + (torch.rand(h.shape, generator=noise, dtype=h.dtype) * 2 - 1) * layer.beta)
        return h

    with one_thread():
        for t in range(steps):
            idx = torch.stack([next(st) for st in streams])          # (R, B)
            if on_step is not None:
                on_step(state, t, steps)
            logits = forward(x[idx], t)                              # (R, B, classes)
            per_run = F.cross_entropy(logits.flatten(0, 1), y[idx].flatten(),
                                      reduction="none").view(R, -1).mean(1)
            for p in params:
                p.grad = None
            per_run.sum().backward()
            step(_cosine(lr, t, steps) if cosine else lr)
            if t >= steps - tail:
                losses.append(per_run.detach())
    with torch.no_grad():
        for r, model in enumerate(models):
            for i, s in state.items():
                for name, tensor in s.items():
                    if tensor is not None:
                        getattr(model[i], name).copy_(tensor[r])
                if hasattr(model[i], "num_batches_tracked"):
                    model[i].num_batches_tracked.add_(steps)
            model.train()
    return [float(v) for v in torch.stack(losses).mean(0)]


# --------------------------------------------------------------------------------------
# statistics after weight averaging; int8 weights after folding
# --------------------------------------------------------------------------------------
def swa_experiment(seeds=(0, 1, 2), steps: int = 300, start: int = 100, lr: float = 0.05,
                   weight_decay: float = 5e-3, batch_size: int = 64) -> tuple[list[dict], list]:
    r"""Stochastic weight averaging on :func:`mlp` (BatchNorm): train with a constant learning
    rate ``lr`` and ``weight_decay`` for ``steps`` steps (:func:`train_stacked`, the seeds
    together) and average the weights from step ``start`` to the end with equal weights,
    :math:`\bar W = \frac1K\sum_k W_k` (the default of ``torch.optim.swa_utils.AveragedModel``).
    The averaged model is an ``AveragedModel`` of the last model whose parameters are set to
    :math:`\bar W`; its buffers are the last model's, as ``AveragedModel`` (``use_buffers=False``)
    keeps them. Its running statistics therefore describe the last weights, not
    :math:`\bar W`, until ``torch.optim.swa_utils.update_bn`` recomputes them over the
    training set (batches of ``batch_size``, a plain average: ``momentum=None``).

    Returns rows (``seed``, ``last``, ``averaged_stale``, ``averaged_recomputed``: test errors
    in %) and the list of ``(last model, averaged model)`` pairs. Used in lesson 10."""
    from torch.optim import swa_utils

    x, y, xt, yt = digits_data()
    models = [mlp(seed=seed) for seed in seeds]
    sums: dict = {}
    count = [0]

    def accumulate(state, t, T):
        if t >= start:
            for i, s in state.items():
                for name in ("weight", "bias"):
                    if s[name] is not None:
                        key = (i, name)
                        sums[key] = sums.get(key, 0) + s[name].detach().clone()
            count[0] += 1

    train_stacked(models, x, y, steps, lr=lr, batch_size=batch_size, seeds=seeds,
                  weight_decay=weight_decay, cosine=False, on_step=accumulate)
    rows, pairs = [], []
    loader = [x[i:i + batch_size] for i in range(0, len(x) - batch_size + 1, batch_size)]
    for r, (seed, model) in enumerate(zip(seeds, models)):
        averaged = swa_utils.AveragedModel(model)
        with torch.no_grad():
            for (i, name), total in sums.items():  # the last weights count once more
                getattr(averaged.module[i], name).copy_(
                    (total[r] + getattr(model[i], name)) / (count[0] + 1))
        stale = test_error(averaged, xt, yt)
        with one_thread():
            swa_utils.update_bn(loader, averaged)
        rows.append({"seed": seed, "last": test_error(model, xt, yt), "averaged_stale": stale,
                     "averaged_recomputed": test_error(averaged, xt, yt)})
        pairs.append((model, averaged))
    return rows, pairs


def quantize_per_tensor(w: Tensor, bits: int = 8) -> Tensor:
    r"""Symmetric fake quantisation with one scale for the whole tensor:
    :math:`s = \max|w| / (2^{b-1} - 1)`, :math:`\hat w = s\cdot\text{clamp}(\text{round}(w/s),
    -(2^{b-1}-1), 2^{b-1}-1)` (127 levels each side for int8). Returns :math:`\hat w` in
    ``w``'s dtype. Used in lesson 10."""
    top = 2 ** (bits - 1) - 1
    scale = w.abs().max() / top
    return (w / scale).round().clamp(-top, top) * scale


def quantize_per_channel(w: Tensor, bits: int = 8) -> Tensor:
    r"""As :func:`quantize_per_tensor`, with one scale per output channel (row ``w[c]``):
    :math:`s_c = \max|w_c| / (2^{b-1} - 1)` (the weight scheme of ``torch.ao.quantization``'s
    default x86 configuration, ``per_channel_symmetric``). Used in lesson 10."""
    top = 2 ** (bits - 1) - 1
    scale = w.abs().flatten(1).amax(1).reshape((-1,) + (1,) * (w.dim() - 1)) / top
    return (w / scale).round().clamp(-top, top) * scale
