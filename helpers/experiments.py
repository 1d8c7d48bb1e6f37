r"""Small, fast experiments shared by the lessons.

- ``deep_mlp`` + ``layer_statistics``: the diagnostics of lesson 00 (why normalise): a deep
  tanh MLP's activations and gradients, layer by layer, with and without a normalisation
  layer before each non-linearity, on scikit-learn's bundled digits (no download).
- ``invariance_differences``: the invariance tables of Ba et al. (2016) and Zhang & Sennrich
  (2019), measured (lessons 02 and 04).
- ``small_cnn`` + ``train_and_evaluate`` + ``batch_size_grid`` + ``statistic_noise``:
  BatchNorm against GroupNorm across batch sizes on the digits (Wu & He 2018, Table 2), for
  the BatchNorm lesson. ``python -m helpers.experiments`` runs the full grid (5 batch sizes,
  3 seeds), prints its table and writes it to ``results/`` (:mod:`helpers.results`).
  ``train_small_cnns`` trains the runs of one batch size as one stacked network, bit for bit
  the separate runs.
- ``lr_gain_grid``: lesson 01's learning rates x initial gains, with and without BatchNorm.
- ``worker_pool`` + ``run_jobs``: the lessons' runs in worker processes (one thread each),
  kept for the session.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from . import norms

__all__ = ["digits", "digit_images", "deep_mlp", "LayerStats", "layer_statistics",
           "INVARIANCES", "invariance_differences",
           "small_cnn", "values_per_statistic", "digits_split_indices", "digits_split",
           "train_small_cnn", "train_small_cnns", "train_and_evaluate", "batch_size_grid", "grid_table",
           "statistic_noise", "WU_HE_TABLE2", "one_thread", "run_jobs", "worker_pool",
           "lr_gain_grid"]

SATURATION = 0.97  # |tanh| above this counts as saturated (gradient factor 1 - t^2 < 0.06)


def digits(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits (1797 images): inputs standardised per feature to
    mean 0 and std 1 (constant pixels left at 0), shape (1797, 64), and labels (1797,).

    Lessons 00, 01."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=dtype)
    std = x.std(0)
    x = (x - x.mean(0)) / torch.where(std > 0, std, torch.ones_like(std))
    return x, torch.tensor(data.target)


def digit_images(indices, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The bundled 8x8 digits at ``indices`` as images of shape (n, 1, 8, 8), pixel values
    scaled from 0..16 to 0..1 (no standardisation: lessons show what normalisation removes).

    Lesson 03."""
    from sklearn.datasets import load_digits

    images = torch.tensor(load_digits().images, dtype=dtype) / 16.0
    return images[list(indices)].unsqueeze(1)


def deep_mlp(depth: int = 20, width: int = 256, in_features: int = 64, num_classes: int = 10,
             gain: float = 1.0, norm: str | None = None, seed: int = 0,
             dtype: torch.dtype = torch.float64) -> nn.Sequential:
    r"""``depth`` blocks of Linear -> [norm] -> Tanh, then a Linear classifier.

    Hidden weights are drawn from :math:`\mathcal N(0, \text{gain}^2/\text{fan\_in})`
    (no bias), so ``gain`` sets how much each layer scales its input: a gain below 1
    shrinks the signal layer by layer, a large gain drives tanh into saturation.
    ``norm`` is ``None``, ``"batch"`` (``helpers.norms.BatchNorm1d``) or ``"layer"``
    (``helpers.norms.LayerNorm``), placed before each Tanh.

    Lessons 00, 01.
    """
    if norm not in (None, "batch", "layer"):
        raise ValueError(f"norm must be None, 'batch' or 'layer', got {norm!r}")
    g = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    fan_in = in_features
    for _ in range(depth):
        lin = nn.Linear(fan_in, width, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, fan_in, generator=g, dtype=dtype)
                             * gain / fan_in ** 0.5)
        layers.append(lin)
        if norm == "batch":
            layers.append(norms.BatchNorm1d(width, dtype=dtype))
        elif norm == "layer":
            layers.append(norms.LayerNorm(width, dtype=dtype))
        layers.append(nn.Tanh())
        fan_in = width
    head = nn.Linear(fan_in, num_classes, dtype=dtype)
    with torch.no_grad():
        head.weight.copy_(torch.randn(num_classes, fan_in, generator=g, dtype=dtype)
                          / fan_in ** 0.5)
        head.bias.zero_()
    return nn.Sequential(*layers, head)


@functools.lru_cache(maxsize=1)
def _digits64() -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`digits` in float64, loaded once per process (a worker runs many jobs)."""
    return digits(torch.float64)


def _lr_gain_run(job: tuple) -> float:
    """One run of :func:`lr_gain_grid` (top level, so a worker process can unpickle it)."""
    from .training import train_classifier

    norm, gain, lr, seed, depth, width, steps = job
    x, y = _digits64()
    with one_thread():
        model = deep_mlp(depth=depth, width=width, gain=gain, norm=norm, seed=seed)
        return train_classifier(model, x, y, lr=lr, steps=steps, seed=seed)["loss"]


def _stacked_mlps(runs: list[tuple], depth: int, width: int, steps: int,
                  batch_size: int = 64, momentum: float = 0.9) -> list[float]:
    r""":func:`helpers.training.train_classifier` for several runs of :func:`deep_mlp` that
    share one ``norm`` (``None`` or ``"batch"``), trained together: ``runs`` is a list of
    ``(norm, gain, lr, seed)``. Every run keeps its own initial weights
    (``deep_mlp(..., gain, norm, seed)``), its own minibatches (a generator seeded with its
    seed, 64 indices drawn with replacement per step), its own BatchNorm statistics and its
    own SGD momentum buffer and learning rate; a run whose loss becomes NaN or infinite stops
    there (``inf``), as in ``train_classifier``. The R runs' layers are batched matrix
    products over a run dimension, and run r's BatchNorm is torch's ``batch_norm`` over the
    batch for run r's block of channels (the same statistics, updates and defaults as
    :class:`helpers.norms.BatchNorm1d`), so each run computes the function of its own model; the summed loss :math:`\sum_r L_r` gives each run exactly the gradient of its
    own loss. The products are grouped differently from R separate models, so the losses
    agree with the separate runs to rounding, not bit for bit (``tests/test_batchsize.py``).
    Returns the final loss of each run on all the digits in eval mode (running statistics)."""
    norm = {r[0] for r in runs}
    if len(norm) != 1 or next(iter(norm)) not in (None, "batch"):
        raise ValueError(f"stacked runs share one norm, None or 'batch', got {sorted(map(str, norm))}")
    bn = runs[0][0] == "batch"
    x, y = _digits64()
    R, f = len(runs), nn.functional
    models = [deep_mlp(depth=depth, width=width, gain=g, norm=n, seed=s) for n, g, _, s in runs]
    linears = [[m for m in model if isinstance(m, nn.Linear)] for model in models]
    params = [torch.stack([ls[k].weight.detach() for ls in linears]).requires_grad_()
              for k in range(depth + 1)]                             # (R, out, in)
    head_b = torch.stack([ls[-1].bias.detach() for ls in linears]).requires_grad_()  # (R, 10)
    gammas = [torch.ones(R * width, dtype=x.dtype, requires_grad=True) for _ in range(depth)] if bn else []
    betas = [torch.zeros(R * width, dtype=x.dtype, requires_grad=True) for _ in range(depth)] if bn else []
    stats = [(torch.zeros(R * width, dtype=x.dtype), torch.ones(R * width, dtype=x.dtype))
             for _ in range(depth)]
    tensors = params + [head_b] + gammas + betas
    buffers = [None] * len(tensors)
    lr = torch.tensor([r[2] for r in runs], dtype=x.dtype)
    gens = [torch.Generator().manual_seed(r[3]) for r in runs]
    alive = torch.ones(R, dtype=torch.bool)

    def forward(inputs: torch.Tensor, training: bool) -> torch.Tensor:  # (R, B, 64) -> (R, B, 10)
        h = inputs
        for k in range(depth):
            h = torch.bmm(h, params[k].transpose(1, 2))               # (R, B, width)
            if bn:  # per run and channel over the batch: columns r * width + c of (B, R * width)
                B = h.shape[1]
                flat = h.transpose(0, 1).reshape(B, R * width)
                flat = f.batch_norm(flat, *stats[k], gammas[k], betas[k], training, 0.1, 1e-5)
                h = flat.reshape(B, R, width).transpose(0, 1)
            h = torch.tanh(h)
        return torch.baddbmm(head_b.unsqueeze(1), h, params[depth].transpose(1, 2))

    def per_run_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        R_, B = labels.shape
        return f.cross_entropy(logits.reshape(R_ * B, -1), labels.reshape(-1),
                               reduction="none").view(R_, B).mean(1)

    final = [math.inf] * R
    with one_thread():
        for _ in range(steps):
            idx = torch.stack([torch.randint(0, len(x), (batch_size,), generator=g) for g in gens])
            losses = per_run_loss(forward(x[idx], True), y[idx])
            alive &= torch.isfinite(losses.detach())
            if not alive.any():
                break
            torch.where(alive, losses, torch.zeros_like(losses)).sum().backward()
            with torch.no_grad():
                for i, t in enumerate(tensors):
                    grad = t.grad
                    buffers[i] = grad.clone() if buffers[i] is None else buffers[i].mul_(momentum).add_(grad)
                    step = lr * alive  # a diverged run is left where it stopped
                    if t.dim() == 1:  # a BatchNorm gamma/beta: (R * width,)
                        t.sub_(step.repeat_interleave(width) * buffers[i])
                    else:
                        t.sub_(step.view(-1, *[1] * (t.dim() - 1)) * buffers[i])
                    t.grad = None
        with torch.no_grad():
            logits = forward(x.expand(R, *x.shape), False)
            losses = per_run_loss(logits, y.expand(R, *y.shape))
    for r in range(R):
        if alive[r] and math.isfinite(losses[r].item()):
            final[r] = losses[r].item()
    return final


def _stacked_mlps_job(job: tuple) -> dict:
    """``{run: final loss}`` of :func:`_stacked_mlps` (top level, for worker processes)."""
    runs, depth, width, steps = job
    return dict(zip(runs, _stacked_mlps(runs, depth, width, steps)))


def lr_gain_grid(norms=(None, "batch"), gains=(1.0, 3.0), lrs=(0.03, 0.3, 1.0), seeds=(0, 1),
                 depth: int = 8, width: int = 64, steps: int = 100,
                 workers: int = 1, stacked: bool = True) -> dict[tuple, list[float]]:
    """Final training loss of :func:`helpers.training.train_classifier` (SGD with momentum
    0.9, ``steps`` minibatches of 64) for :func:`deep_mlp` (``depth``, ``width``, ``gain``,
    ``norm``, ``seed``) on all 1797 digits in float64, for every (norm, gain, lr) and seed:
    ``{(norm, gain, lr): [loss of each seed]}`` (``inf`` for a run that diverged).

    ``stacked`` (the default): the runs of one norm and gain are trained together as one job
    (:func:`_stacked_mlps`: batched matrix products over the runs, every run with its own
    seeds, learning rate, statistics and momentum), equal to the separate runs to rounding;
    ``stacked=False``: one ``train_classifier`` run per job, bit for bit the runs one after
    the other. The jobs go to ``workers`` processes (:func:`run_jobs`), one thread each.
    ``python -m tools.bench_experiments mlp_grid`` times both.

    Lesson 01."""
    from itertools import product

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if stacked:  # one job per norm and gain (BatchNorm's first: they take longest)
        found = {}
        jobs = [([(norm, g, lr, s) for lr in lrs for s in seeds], depth, width, steps)
                for norm in sorted(norms, key=lambda n: n is None) for g in gains]
        run_jobs(_stacked_mlps_job, jobs, workers, found.update)
        return {(n, g, lr): [found[n, g, lr, s] for s in seeds]
                for n, g, lr in product(norms, gains, lrs)}
    # BatchNorm's runs first: they take longest
    keys = sorted(product(norms, gains, lrs), key=lambda k: k[0] is None)
    jobs = [(n, g, lr, s, depth, width, steps) for n, g, lr in keys for s in seeds]
    found = {}
    run_jobs(_lr_gain_run_keyed, jobs, workers, lambda kv: found.__setitem__(*kv))
    return {(n, g, lr): [found[n, g, lr, s, depth, width, steps] for s in seeds]
            for n, g, lr in product(norms, gains, lrs)}


def _lr_gain_run_keyed(job: tuple) -> tuple:
    """``(job, loss)`` of :func:`_lr_gain_run` (top level, for worker processes)."""
    return job, _lr_gain_run(job)


@dataclass
class LayerStats:
    """Per hidden layer (index 1..depth): the tanh outputs and their gradients."""

    activations: list[torch.Tensor]  # tanh outputs, flattened
    gradients: list[torch.Tensor]    # dLoss/d(tanh output), flattened

    @property
    def std(self) -> list[float]:
        return [float(a.std()) for a in self.activations]

    @property
    def saturation(self) -> list[float]:
        """Fraction of |tanh| > 0.97 in each layer."""
        return [float((a.abs() > SATURATION).double().mean()) for a in self.activations]

    @property
    def grad_std(self) -> list[float]:
        return [float(g.std()) for g in self.gradients]


def layer_statistics(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor) -> LayerStats:
    """One forward and backward pass (cross-entropy on ``y``) in training mode, recording
    every Tanh's output and the gradient of the loss with respect to it.

    Lesson 00."""
    model.train()
    acts: list[torch.Tensor] = []

    def keep(_module, _inp, out):
        out.retain_grad()
        acts.append(out)

    hooks = [m.register_forward_hook(keep) for m in model if isinstance(m, nn.Tanh)]
    try:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    finally:
        for h in hooks:
            h.remove()
    return LayerStats([a.detach().flatten() for a in acts],
                      [a.grad.detach().flatten() for a in acts])


# --------------------------------------------------------------------------------------
# Invariances of a normalisation (Ba et al. 2016, Table 1)
# --------------------------------------------------------------------------------------
INVARIANCES = [
    "weight matrix re-scaling",
    "weight matrix re-centering",
    "weight vector re-scaling",
    "dataset re-scaling",
    "dataset re-centering",
    "single training case re-scaling",
]


def invariance_differences(norm, batch: int = 8, d_in: int = 16, d_out: int = 32,
                           seed: int = 0) -> dict[str, float]:
    r"""For a layer :math:`h = \mathrm{norm}(W x + b)` on a batch of inputs (rows of ``x``),
    apply each transformation of Ba et al. (2016), Table 1, and return the largest absolute
    change of :math:`h` (0 up to rounding means invariant):

    - weight matrix re-scaling: :math:`W, b \to \delta W, \delta b` (:math:`\delta = 3`);
    - weight matrix re-centering: :math:`W \to W + \mathbf 1 \gamma^\top` (every row of W
      plus the same vector :math:`\gamma`);
    - weight vector re-scaling: one row :math:`w_i, b_i \to \delta w_i, \delta b_i`;
    - dataset re-scaling: every input :math:`x \to \delta x`, with :math:`b \to \delta b`
      (so that every summed input scales by :math:`\delta`);
    - dataset re-centering: every input :math:`x \to x + \gamma`, so every case's summed
      inputs shift by the same vector :math:`W\gamma`;
    - single training case re-scaling: one input :math:`x_n \to \delta x_n` (bias-free layer).

    ``norm`` maps the (batch, d_out) summed inputs to normalised outputs, e.g.
    ``lambda a: F.layer_norm(a, (a.shape[-1],), eps=0.0)``; use eps = 0 so that only the
    transformation matters (with eps > 0, "invariant" holds up to a term of order eps/var).

    Lessons 02, 04.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, d_in, generator=g, dtype=torch.float64)
    w = torch.randn(d_out, d_in, generator=g, dtype=torch.float64)
    b = torch.randn(d_out, generator=g, dtype=torch.float64)
    gamma_in = torch.randn(d_in, generator=g, dtype=torch.float64)
    delta = 3.0

    def out(x_, w_, b_):
        return norm(x_ @ w_.T + b_)

    base = out(x, w, b)
    base_nobias = out(x, w, torch.zeros_like(b))
    one_row = torch.ones(d_out, 1, dtype=torch.float64)
    row_scale = torch.ones(d_out, dtype=torch.float64)
    row_scale[0] = delta
    case_scale = torch.ones(batch, 1, dtype=torch.float64)
    case_scale[0] = delta
    changed = {
        "weight matrix re-scaling": (out(x, delta * w, delta * b), base),
        "weight matrix re-centering": (out(x, w + one_row * gamma_in, b), base),
        "weight vector re-scaling": (out(x, w * row_scale[:, None], b * row_scale), base),
        "dataset re-scaling": (out(delta * x, w, delta * b), base),
        "dataset re-centering": (out(x + gamma_in, w, b), base),
        "single training case re-scaling": (out(case_scale * x, w, torch.zeros_like(b)),
                                            base_nobias),
    }
    return {k: float((a - c).abs().max()) for k, (a, c) in changed.items()}


# --------------------------------------------------------------------------------------
# BatchNorm against GroupNorm as the batch shrinks (Wu & He 2018, Table 2)
# --------------------------------------------------------------------------------------
# Wu & He (2018), Table 2: ResNet-50 ImageNet val error (%) by images per GPU
WU_HE_TABLE2 = {"batch": {32: 23.6, 16: 23.7, 8: 24.8, 4: 27.3, 2: 34.7},
                "group": {32: 24.1, 16: 24.2, 8: 24.0, 4: 24.2, 2: 24.1}}
NUM_TRAIN, NUM_TEST = 1297, 500  # of the 1797 bundled digits
GROUPS = 4                       # GroupNorm's groups in small_cnn
SPATIAL = (8 * 8, 4 * 4, 1)      # positions per channel at small_cnn's three norm layers


def _norm_layer(norm: str, channels: int, dims: int, impl: str) -> nn.Module:
    """BatchNorm{dims}d, GroupNorm (4 groups) or Identity, from ``helpers.norms``
    (``impl="course"``) or ``torch.nn`` (``impl="torch"``)."""
    lib = norms if impl == "course" else nn
    if norm == "batch":
        return lib.BatchNorm2d(channels) if dims == 2 else lib.BatchNorm1d(channels)
    if norm == "group":
        return lib.GroupNorm(GROUPS, channels)
    return nn.Identity()


def small_cnn(norm: str, seed: int = 0, width: int = 16, impl: str = "course") -> nn.Sequential:
    r"""A CNN with three norm layers for the 8x8 digits, ``norm`` in ``"batch"``,
    ``"group"``, ``"none"``:

    conv3x3(1 -> w) -> norm -> ReLU -> conv3x3(w -> 2w, stride 2) -> norm -> ReLU
    -> global average pool -> flatten -> Linear(2w, 2w) -> norm -> ReLU -> Linear(2w, 10).

    For a batch of :math:`B` images the three norm layers get (B, w, 8, 8), (B, 2w, 4, 4)
    and (B, 2w) inputs, so BatchNorm estimates each channel's mean and variance from

    .. math:: 64B,\qquad 16B,\qquad B

    values (:func:`values_per_statistic`): at :math:`B = 2` the last BatchNorm normalises
    two numbers per channel: its output is :math:`\pm 1` before the affine (the sign of the
    difference), and it passes back almost no gradient except where the two nearly tie:
    with half-difference :math:`d`, :math:`\hat x = d/\sqrt{d^2+\epsilon}` and
    :math:`\partial\hat x/\partial d = \epsilon/(d^2+\epsilon)^{3/2}`. GroupNorm (4 groups)
    uses :math:`\tfrac{w}{4}\cdot 64`, :math:`\tfrac{2w}{4}\cdot 16` and
    :math:`\tfrac{2w}{4}` values of one image, whatever :math:`B`.

    The norm layers come from ``helpers.norms`` (``impl="course"``, the from-scratch
    modules) or ``torch.nn`` (``impl="torch"``, about twice as fast per step on a CPU);
    both compute the same function and hold the same parameters and buffers.

    Convolutions and the hidden Linear get He initialisation,
    :math:`W \sim \mathcal N(0, 2/\text{fan\_in})` (as in the ResNets of the paper), and
    a bias only for ``"none"`` (a norm layer's shift makes it redundant); the classifier
    keeps torch's default. Everything is drawn under ``torch.manual_seed(seed)`` in a
    forked RNG, so the global RNG is left as it was, and the weights do not depend on
    ``impl``.
    """
    if norm not in ("batch", "group", "none"):
        raise ValueError(f"norm must be 'batch', 'group' or 'none', got {norm!r}")
    if impl not in ("course", "torch"):
        raise ValueError(f"impl must be 'course' or 'torch', got {impl!r}")
    bias = norm == "none"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=bias), _norm_layer(norm, width, 2, impl),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=bias),
            _norm_layer(norm, 2 * width, 2, impl), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(2 * width, 2 * width, bias=bias), _norm_layer(norm, 2 * width, 1, impl),
            nn.ReLU(),
            nn.Linear(2 * width, 10),
        )
        weighted = [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
        for layer in weighted[:-1]:  # not the classifier
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    return model


def values_per_statistic(batch_size: int) -> list[int]:
    """How many values each of small_cnn's three BatchNorm layers averages over per channel
    in training: batch_size times 8*8, 4*4 and 1 positions."""
    return [batch_size * s for s in SPATIAL]


def digits_split_indices(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random permutation of the 1797 digit indices (generator seeded by ``seed``), cut into
    1297 training and 500 test indices."""
    perm = torch.randperm(NUM_TRAIN + NUM_TEST, generator=torch.Generator().manual_seed(seed))
    return perm[:NUM_TRAIN], perm[NUM_TRAIN:]


def digits_split(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""(x_train, y_train, x_test, y_test): the digits of :func:`digits_split_indices` as
    float32 images (n, 1, 8, 8), both sets standardised with the training set's global
    statistics, :math:`x \to (x - \mu_\text{train}) / \sigma_\text{train}` (one mean and one
    std over all training pixels).

    Lesson 01."""
    from sklearn.datasets import load_digits

    train, test = digits_split_indices(seed)
    images = digit_images(range(NUM_TRAIN + NUM_TEST), dtype=torch.float32)
    labels = torch.tensor(load_digits().target)
    mean, std = images[train].mean(), images[train].std()
    return ((images[train] - mean) / std, labels[train],
            (images[test] - mean) / std, labels[test])


def _chunks(n: int, size: int) -> list[slice]:
    """Consecutive slices of ``size`` covering range(n); a last slice of a single element is
    merged into the one before (BatchNorm cannot train on one value per channel)."""
    starts = list(range(0, n, size))
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return [slice(a, b) for a, b in zip(starts, starts[1:] + [n])]


def _test_error(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> float:
    """Error in % of ``model``, in whatever mode it is, on (x, y) fed in batches of
    batch_size, without gradients."""
    with torch.no_grad():
        wrong = sum(int((model(x[s]).argmax(1) != y[s]).sum())
                    for s in _chunks(len(x), batch_size))
    return 100.0 * wrong / len(x)


_BATCH_NORMS = (norms._BatchNorm, nn.modules.batchnorm._BatchNorm)


def _batch_norm_layers(model: nn.Module) -> list[nn.Module]:
    """The BatchNorm modules of ``model`` (from ``helpers.norms`` or ``torch.nn``), in order."""
    return [m for m in model.modules() if isinstance(m, _BATCH_NORMS)]


def _recompute_bn_statistics(model: nn.Module, x: torch.Tensor, batch_size: int) -> nn.Module:
    r"""A copy of ``model`` whose BatchNorm running statistics are reset and re-estimated
    over ``x`` in training mode, in batches of batch_size, with ``momentum=None``: the
    cumulative average :math:`\hat\mu = \tfrac1K\sum_k \mu_k` of the K batches' statistics
    instead of an exponential one dominated by the last steps. Returned in eval mode."""
    model = copy.deepcopy(model)
    bns = _batch_norm_layers(model)
    if not bns:  # nothing to re-estimate
        return model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for s in _chunks(len(x), batch_size):
            model(x[s])
    return model.eval()


def _copy_in_train_mode(model: nn.Module) -> nn.Module:
    """A deep copy in training mode (evaluating it updates the copy's running statistics,
    not the model's)."""
    return copy.deepcopy(model).train()


@contextlib.contextmanager
def one_thread():
    """Run the block with one torch thread, then restore the previous count. Small models
    train fastest on one thread, and a sum's rounding then does not depend on the machine's
    core count: the results are the same whatever OMP_NUM_THREADS says. Used by the training
    loops of lessons 01, 10 and 11."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_small_cnn(norm: str, batch_size: int, seed: int = 0, epochs: int = 6,
                    base_lr: float = 0.1, data: tuple | None = None,
                    impl: str = "torch",
                    dtype: torch.dtype = torch.float64) -> tuple[nn.Module, float]:
    r"""Train :func:`small_cnn` (``norm``, ``seed``, ``impl``) on the training half of
    :func:`digits_split` (or of ``data``, the same 4-tuple); return the model (in training
    mode) and the mean training loss of the last epoch.

    Cross-entropy, SGD with momentum 0.9, and the linear scaling rule of Goyal et al. (2017)
    that Wu & He (2018) follow, annealed to 0 over the :math:`T` steps by a cosine (the paper
    divides it by 10 three times instead):

    .. math::

        \text{lr} = \text{base\_lr}\cdot\frac{\text{batch\_size}}{32},\qquad
        \text{lr}_t = \text{lr}\cdot\tfrac12\left(1 + \cos\frac{\pi t}{T}\right).

    The same number of ``epochs`` for every batch size (so smaller batches take more,
    smaller steps), shuffled every epoch by a generator seeded with ``seed``, dropping the
    last incomplete batch so that every step sees exactly ``batch_size`` images. Runs on one
    torch thread (see :func:`one_thread`).

    ``dtype`` float64 by default (the model and the images): on a CPU a model this small
    trains as fast in float64 as in float32, and the rounding differences between CPU code
    paths (AVX-512, AVX2 or scalar kernels sum in a different order) start about 1e-16 instead
    of 1e-7. That makes the stable runs (batch 8 and more) agree across paths to the test
    image, but not the chaotic ones: at batch 2 a difference in the last bit grows over the
    thousands of steps until the runs part, and the same seed ends at different errors on
    different paths (``results/batch_size_grid.*.json`` keeps one file per path; lesson 01
    shows the spread).

    Defaults: base_lr 0.1 per 32 images is the paper's; 6 epochs is about the least with
    which GroupNorm, slower to train than BatchNorm here, gets within a few points of its
    converged error at batch 32 (which takes the fewest steps).

    Lesson 01.
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2 (BatchNorm needs two values per "
                         f"channel in training), got {batch_size}")
    x_train, y_train = (digits_split() if data is None else data)[:2]
    x_train = x_train.to(dtype)
    model = small_cnn(norm, seed=seed, impl=impl).to(dtype)
    steps = len(x_train) // batch_size  # drop_last=True
    opt = torch.optim.SGD(model.parameters(), lr=base_lr * batch_size / 32, momentum=0.9)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps)
    g = torch.Generator().manual_seed(seed)
    model.train()
    with one_thread():
        for _ in range(epochs):
            perm = torch.randperm(len(x_train), generator=g)
            total = 0.0
            for i in range(steps):
                idx = perm[i * batch_size:(i + 1) * batch_size]
                loss = nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                schedule.step()
                total += float(loss.detach())
    return model, total / steps


# --------------------------------------------------------------------------------------
# Many runs of small_cnn trained as one stacked model (same batch size, any norms and seeds)
# --------------------------------------------------------------------------------------
def _norm_segments(norm_list: list[str]) -> list[tuple[str, int, int]]:
    """Consecutive runs with the same norm: (norm, first run, end run)."""
    segments = []
    for r, n in enumerate(norm_list):
        if segments and segments[-1][0] == n:
            segments[-1] = (n, segments[-1][1], r + 1)
        else:
            segments.append((n, r, r + 1))
    return segments


class _StackedSmallCNN(nn.Module):
    r"""R copies of :func:`small_cnn` (one per run, each with its own weights, norm and
    statistics) computed as one network: run r's channels are the r-th block of every
    layer's channels, each convolution is a grouped convolution (``groups=R``, so no run sees
    another's channels), the two Linear layers are batched matrix products over the run
    dimension, BatchNorm normalises each channel over the batch of its own run, and GroupNorm
    with :math:`4R` groups over :math:`R` blocks of channels is each run's GroupNorm with 4.

    Input (B, R, 8, 8): image r of a sample is run r's. Output (B, R, 10). The function is
    run by run the one of the R separate models (``tests/test_batchsize.py`` checks it against
    them); the training loop drives all R with one Python step instead of R."""

    def __init__(self, models: list[nn.Sequential], norm_list: list[str]) -> None:
        super().__init__()
        if any(n not in ("batch", "group") for n in norm_list):
            raise ValueError(f"stacked training takes norms 'batch' and 'group', got {norm_list}")
        self.runs = len(models)
        self.segments = _norm_segments(norm_list)
        cat = lambda ts: nn.Parameter(torch.cat([t.detach() for t in ts]).clone())
        self.conv1 = cat([m[0].weight for m in models])          # (R*w, 1, 3, 3)
        self.conv2 = cat([m[3].weight for m in models])          # (R*2w, w, 3, 3)
        self.fc = nn.Parameter(torch.stack([m[8].weight.detach() for m in models]).clone())
        self.head_w = nn.Parameter(torch.stack([m[11].weight.detach() for m in models]).clone())
        self.head_b = nn.Parameter(torch.stack([m[11].bias.detach() for m in models]).clone())
        self.norm_w, self.norm_b = nn.ParameterList(), nn.ParameterList()
        self.stats = []  # per norm layer and BatchNorm segment: [running_mean, running_var]
        for layer in (1, 4, 9):
            for n, a, b in self.segments:
                self.norm_w.append(cat([models[r][layer].weight for r in range(a, b)]))
                self.norm_b.append(cat([models[r][layer].bias for r in range(a, b)]))
                if n == "batch":
                    self.stats.append([torch.cat([models[r][layer].running_mean for r in range(a, b)]),
                                       torch.cat([models[r][layer].running_var for r in range(a, b)])])
                else:
                    self.stats.append(None)
        self.momentum, self.eps = 0.1, 1e-5  # torch's BatchNorm2d/1d and GroupNorm defaults
        for m in models:
            for layer in (1, 4, 9):
                if getattr(m[layer], "momentum", self.momentum) != self.momentum or m[layer].eps != self.eps:
                    raise ValueError("stacked training expects torch's default momentum and eps")

    def _norm(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        channels = x.shape[1] // self.runs
        parts = []
        for k, (n, a, b) in enumerate(self.segments):
            i = layer * len(self.segments) + k
            z = x if len(self.segments) == 1 else x[:, a * channels:b * channels]
            if n == "batch":  # (a contiguous block: the same sums as the separate model's)
                z = z.contiguous()
                mean, var = self.stats[i]
                out = nn.functional.batch_norm(z, mean, var, self.norm_w[i], self.norm_b[i],
                                               True, self.momentum, self.eps)
                if len(self.segments) > 1 and out.requires_grad:  # its gradient contiguous too
                    out.register_hook(lambda g: g.contiguous())
                parts.append(out)
            else:
                parts.append(nn.functional.group_norm(z, GROUPS * (b - a), self.norm_w[i],
                                                      self.norm_b[i], self.eps))
        return parts[0] if len(parts) == 1 else torch.cat(parts, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        R, B = self.runs, x.shape[0]
        f = nn.functional
        h = f.relu(self._norm(f.conv2d(x, self.conv1, padding=1, groups=R), 0))
        h = f.relu(self._norm(f.conv2d(h, self.conv2, stride=2, padding=1, groups=R), 1))
        h = f.adaptive_avg_pool2d(h, 1).flatten(1)                         # (B, R*2w)
        # the Linear layers run by run (the same matrix products as the separate models)
        h = torch.cat([f.linear(z, w) for z, w in zip(h.view(B, R, -1).unbind(1), self.fc)], 1)
        h = f.relu(self._norm(h, 2))                                        # (B, R*2w)
        return torch.stack([f.linear(z, w, b) for z, w, b in
                            zip(h.view(B, R, -1).unbind(1), self.head_w, self.head_b)], 1)

    def unstack(self, models: list[nn.Sequential], steps: int) -> None:
        """Copy the trained weights and running statistics back into the R models."""
        with torch.no_grad():
            for r, m in enumerate(models):
                m[0].weight.copy_(self.conv1.chunk(self.runs)[r])
                m[3].weight.copy_(self.conv2.chunk(self.runs)[r])
                m[8].weight.copy_(self.fc[r])
                m[11].weight.copy_(self.head_w[r])
                m[11].bias.copy_(self.head_b[r])
            for layer_k, layer in enumerate((1, 4, 9)):
                for k, (n, a, b) in enumerate(self.segments):
                    i = layer_k * len(self.segments) + k
                    for j, r in enumerate(range(a, b)):
                        norm = models[r][layer]
                        norm.weight.copy_(self.norm_w[i].chunk(b - a)[j])
                        norm.bias.copy_(self.norm_b[i].chunk(b - a)[j])
                        if n == "batch":
                            norm.running_mean.copy_(self.stats[i][0].chunk(b - a)[j])
                            norm.running_var.copy_(self.stats[i][1].chunk(b - a)[j])
                            norm.num_batches_tracked.fill_(steps)


def train_small_cnns(runs: list[tuple[str, int]], batch_size: int, epochs: int = 6,
                     base_lr: float = 0.1, data: tuple | None = None,
                     dtype: torch.dtype = torch.float64) -> list[tuple[nn.Module, float]]:
    r""":func:`train_small_cnn` for several ``(norm, seed)`` runs at one ``batch_size``
    (norms ``"batch"`` and ``"group"``, ``impl="torch"``), trained together as one stacked
    network (:class:`_StackedSmallCNN`): every run keeps its own initialisation
    (``small_cnn(norm, seed)``), its own shuffling (a generator seeded with its seed), its own
    BatchNorm statistics and its own momentum buffers, and the same SGD, learning rate and
    cosine schedule as :func:`train_small_cnn`; the summed loss
    :math:`\sum_r L_r` gives each run exactly the gradient of its own loss. One Python step
    trains all runs, which is what costs time with a model this small. The arithmetic is
    grouped differently (grouped convolutions, batched matrix products), so the results agree
    with :func:`train_small_cnn` to rounding, not bit for bit; over thousands of steps a
    chaotic run (batch 2) can end elsewhere. Returns ``[(model, final_train_loss), ...]`` in
    the order of ``runs``, models in training mode.

    Lesson 01."""
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2 (BatchNorm needs two values per "
                         f"channel in training), got {batch_size}")
    if not runs:
        raise ValueError("no runs")
    order = sorted(range(len(runs)), key=lambda i: runs[i][0] != "batch")  # BatchNorm first
    norm_list = [runs[i][0] for i in order]
    seeds = [runs[i][1] for i in order]
    x_train, y_train = (digits_split() if data is None else data)[:2]
    x_train = x_train.to(dtype)
    models = [small_cnn(n, seed=s, impl="torch").to(dtype) for n, s in zip(norm_list, seeds)]
    net = _StackedSmallCNN(models, norm_list)
    steps = len(x_train) // batch_size  # drop_last=True
    opt = torch.optim.SGD(net.parameters(), lr=base_lr * batch_size / 32, momentum=0.9,
                          foreach=True)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps)
    gens = {s: torch.Generator().manual_seed(s) for s in dict.fromkeys(seeds)}
    images = x_train[:, 0]  # (N, 8, 8)
    with one_thread():
        for _ in range(epochs):
            perms = {s: torch.randperm(len(x_train), generator=g) for s, g in gens.items()}
            perm = torch.stack([perms[s] for s in seeds], 1)  # (N, R)
            total = torch.zeros(len(seeds), dtype=dtype)
            for i in range(steps):
                idx = perm[i * batch_size:(i + 1) * batch_size]  # (B, R)
                logits = net(images[idx])                         # (B, R, 10)
                labels = y_train[idx]
                losses = torch.stack([nn.functional.cross_entropy(logits[:, r], labels[:, r])
                                      for r in range(len(seeds))])
                opt.zero_grad()
                losses.sum().backward()
                opt.step()
                schedule.step()
                total += losses.detach()
    net.unstack(models, epochs * steps)
    final = (total / steps).tolist()
    out = [None] * len(runs)
    for k, i in enumerate(order):
        out[i] = (models[k].train(), final[k])
    return out


def train_and_evaluate(norm: str, batch_size: int, seed: int = 0, epochs: int = 6,
                       base_lr: float = 0.1, data: tuple | None = None,
                       impl: str = "torch",
                       dtype: torch.dtype = torch.float64) -> dict[str, float]:
    r"""Train with :func:`train_small_cnn` (same arguments) and return the test error in %
    three ways, with the mean training loss of the last epoch (``"final_train_loss"``):

    - ``"eval"``: ``model.eval()``, BatchNorm uses its running statistics (what one deploys);
    - ``"train_mode"``: a copy in ``train()`` mode fed test batches of ``batch_size``, so
      BatchNorm normalises with each test batch's own statistics, as in training;
    - ``"recomputed"``: a copy whose running statistics are re-estimated as a plain average
      over the whole training set (batches of ``batch_size``, training mode), then ``eval()``.

    GroupNorm and ``"none"`` have no batch statistics: the three errors coincide.
    """
    data = digits_split() if data is None else data
    model, final_loss = train_small_cnn(norm, batch_size, seed, epochs, base_lr, data, impl,
                                        dtype)
    return _evaluate_small_cnn(model, final_loss, batch_size, data, dtype)


def _evaluate_small_cnn(model: nn.Module, final_loss: float, batch_size: int, data: tuple,
                        dtype: torch.dtype) -> dict[str, float]:
    """The three test errors of :func:`train_and_evaluate` for a trained ``model``."""
    x_train, _, x_test, y_test = (t.to(dtype) if t.is_floating_point() else t for t in data)
    everything = len(x_test)  # in eval mode the batching does not matter: one pass
    with one_thread():
        return {
            "eval": _test_error(model.eval(), x_test, y_test, everything),
            "train_mode": _test_error(_copy_in_train_mode(model), x_test, y_test, batch_size),
            "recomputed": _test_error(_recompute_bn_statistics(model, x_train, batch_size),
                                      x_test, y_test, everything),
            "final_train_loss": final_loss,
        }


def _grid_run(job: tuple) -> dict:
    """One run of :func:`batch_size_grid` (top level, so a worker process can unpickle it)."""
    norm, batch_size, seed, kwargs = job
    start = time.perf_counter()
    result = train_and_evaluate(norm, batch_size, seed=seed, **kwargs)
    return {"norm": norm, "batch_size": batch_size, "seed": seed, **result,
            "seconds": time.perf_counter() - start}


def _stacked_grid_job(job: tuple) -> list[dict]:
    """Every (norm, seed) run of :func:`batch_size_grid` at one batch size, trained as one
    stacked network (:func:`train_small_cnns`), then evaluated run by run; ``seconds`` is the
    time of the whole job (top level, so a worker process can unpickle it)."""
    runs, batch_size, kwargs = job
    start = time.perf_counter()
    kwargs = dict(kwargs)
    data = kwargs.pop("data")
    dtype = kwargs.pop("dtype", torch.float64)
    keep = kwargs.pop("keep", ())
    if kwargs.pop("impl", "torch") != "torch":
        raise ValueError("stacked training uses torch.nn's norm layers (impl='torch')")
    trained = train_small_cnns(runs, batch_size, data=data, dtype=dtype, **kwargs)
    rows = [{"norm": n, "batch_size": batch_size, "seed": s,
             **_evaluate_small_cnn(model, loss, batch_size, data, dtype),
             **({"model": model.train()} if (n, batch_size, s) in keep else {})}
            for (n, s), (model, loss) in zip(runs, trained)]
    seconds = time.perf_counter() - start
    return [{**row, "seconds": seconds} for row in rows]


def batch_size_grid(norms=("batch", "group"), batch_sizes=(32, 16, 8, 4, 2), seeds=(0, 1),
                    workers: int = 1, progress: bool = True, stacked: bool | str = True,
                    keep=(), **kwargs) -> list[dict]:
    """:func:`train_and_evaluate` for every (norm, batch_size, seed), on one data split; one
    row per run with keys norm, batch_size, seed, eval, train_mode, recomputed,
    final_train_loss and seconds, in the order of the loops (norm, then batch size, then
    seed), whatever order the runs finish in. ``kwargs`` (epochs, base_lr, dtype, impl) go to
    train_and_evaluate.

    ``stacked`` (the default): the runs of one batch size and norm, every seed, are trained
    together as one stacked network (:func:`train_small_cnns`; for norms "batch" and
    "group" with ``impl="torch"``, otherwise the runs go one by one), one job per batch size
    and norm; ``seconds`` is then that job's time (``stacked="batch_size"``: one job per
    batch size, its norms side by side in one network, as lesson 01 ran it before). The
    numbers are bit for bit those of separate runs (``stacked=False``, one job per run;
    ``tests/test_batchsize.py`` checks it), only faster: with a model this small a step's
    time is mostly Python and dispatch overhead, paid once for all runs instead of once per
    run (``python -m tools.bench_experiments`` times both).

    ``keep``: ``(norm, batch_size, seed)`` runs whose trained model (in training mode) the
    row also holds under ``"model"``, so that a later cell need not train it again (stacked
    only).

    ``workers > 1`` runs that many worker processes (started with ``spawn``, which works
    from a notebook on every OS); every job uses one thread and its own seeds, so the numbers
    do not depend on ``workers``. With ``progress``, a :class:`helpers.progress.Progress`
    line: live in a notebook (the saved notebook keeps one final line), one line per finished
    run on stdout in a script (stderr stays empty).

    Lesson 01."""
    from itertools import product

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    from .progress import Progress

    kwargs = {"data": digits_split(), **kwargs}
    order = [(n, b, s) for n, b, s in product(norms, batch_sizes, seeds)]
    done = {}
    bar = Progress("runs", len(order), label_width=4, steps_to_stdout=True) if progress else None

    def report(row):
        done[(row["norm"], row["batch_size"], row["seed"])] = row
        if bar is not None:
            bar.update(len(done), f"{row['norm']:<5} batch {row['batch_size']:>2} seed {row['seed']}: "
                                  f"eval error {row['eval']:5.1f}%  ({row['seconds']:.1f} s)")

    start = time.perf_counter()
    if stacked and (set(norms) - {"batch", "group"} or kwargs.get("impl", "torch") != "torch"):
        stacked = False  # stacking covers torch's BatchNorm and GroupNorm only
    if keep:
        if not stacked:
            raise ValueError("keep needs stacked training (stacked=True)")
        kwargs["keep"] = {tuple(k) for k in keep}
    if stacked:
        # one job per batch size and norm: a stack of one norm has no per-norm segments to
        # split and join, and two jobs can share the smallest batch size's many steps;
        # the longest jobs (smallest batches: most steps; BatchNorm's) first, so that none
        # is left to run alone at the end
        jobs = [([(n, s) for s in seeds], b, kwargs)
                for b in sorted(batch_sizes) for n in sorted(norms, key=lambda n: n != "batch")]
        if stacked == "batch_size":  # as lesson 01 ran it before: every norm in one job
            jobs = [([(n, s) for n, s in product(norms, seeds)], b, kwargs)
                    for b in sorted(batch_sizes)]
        run_jobs(_stacked_grid_job, jobs, workers, lambda rows: [report(r) for r in rows])
    else:
        run_jobs(_grid_run, [(n, b, s, kwargs) for n, b, s in order], workers, report)
    if bar is not None:
        bar.close(f"{len(order)} runs ({len(norms)} norms x {len(batch_sizes)} batch sizes x "
                  f"{len(seeds)} seeds) in {time.perf_counter() - start:.0f} s")
    return [done[key] for key in order]


_POOLS: dict = {}  # workers -> a ProcessPoolExecutor kept for the next call (see worker_pool)


def _init_worker(modules: tuple[str, ...]) -> None:
    """A worker's start: one torch thread for every job (as in the lessons, whose numbers
    were measured with one thread), and ``modules`` imported before the first job arrives
    (top level, so a worker process can unpickle it)."""
    import importlib
    import signal

    # an interrupt (Jupyter's stop button, a kernel's shutdown) is the parent's to handle; the
    # workers end when the parent's pool shuts down or the parent exits
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    for name in modules:
        importlib.import_module(name)


def _pid(_=None) -> int:
    import os

    return os.getpid()


def worker_pool(workers: int = 2, warm: tuple[str, ...] = ("helpers.experiments",
                                                         "helpers.transformer")):
    """A pool of ``workers`` processes started with ``spawn`` (which works from a notebook on
    every OS), kept for the rest of the session and shared by :func:`run_jobs`: starting a
    process and importing torch in it takes a second or two, paid once instead of once per
    grid. The first call starts the processes and imports ``warm`` in each, in the
    background, so a lesson can call it early and find the workers ready when a grid starts.
    Every worker runs its jobs on one torch thread. The processes exit with this one."""
    import concurrent.futures
    import multiprocessing

    if workers < 2:
        raise ValueError(f"a pool needs at least 2 workers, got {workers}")
    pool = _POOLS.get(workers)
    if pool is None:
        pool = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(tuple(warm),))
        _POOLS[workers] = pool
        for _ in range(workers):  # start every process now (the pool starts them on demand)
            pool.submit(_pid)
    return pool


def run_jobs(run, jobs: list, workers: int, report) -> None:
    """Call ``report(run(job))`` for every job, in this process (``workers == 1``) or in that
    many worker processes (:func:`worker_pool`: started with ``spawn`` and kept for the next
    call; ``run`` must then be a module-level function), submitted in the order of ``jobs``
    (put the longest first, so that none is left to run alone at the end), reporting each
    result as it finishes. Used by the grids of lessons 01, 05, 06 and 11."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1:
        for job in jobs:
            report(run(job))
        return
    import concurrent.futures

    pool = worker_pool(workers)
    try:
        futures = [pool.submit(run, j) for j in jobs]
        for future in concurrent.futures.as_completed(futures):
            report(future.result())
    except concurrent.futures.process.BrokenProcessPool:
        _POOLS.pop(workers, None)  # a worker died: the next call starts a fresh pool
        raise


def statistic_noise(model: nn.Module, x: torch.Tensor, batch_sizes=(32, 16, 8, 4, 2)) -> list[dict]:
    r"""How far a batch's statistics fall from the population's, at each BatchNorm layer of
    ``model``, for each batch size.

    The inputs each BatchNorm layer receives are recorded with forward hooks while ``model``
    runs over all of ``x`` in eval mode. For a layer whose input holds, per channel, the
    population mean :math:`\mu` and standard deviation :math:`\sigma` (over all samples and
    positions of ``x``), ``x`` is cut into consecutive batches of :math:`B` samples and each
    batch's per-channel mean :math:`\mu_B` is compared with :math:`\mu`:

    .. math:: \text{noise} = \sqrt{\operatorname{mean}_{B\text{-batches},\,c}
              \left(\frac{\mu_B - \mu}{\sigma}\right)^2}.

    For :math:`n` independent values per statistic this is about :math:`1/\sqrt n`. A
    convolutional layer's :math:`n = B \cdot H \cdot W` values are not independent draws:
    every batch holds all :math:`H \cdot W` positions, so the part of :math:`\sigma^2` that
    comes from differences between positions adds no noise to :math:`\mu_B` (this pushes the
    noise below :math:`1/\sqrt n`), while correlations between neighbouring positions of one
    image add some (pushing it above).

    Returns one row per (layer, batch size): ``layer`` (0, 1, ...), ``batch_size``,
    ``values`` (:math:`n`, values per statistic), ``noise``. The model is left unchanged.

    Lesson 01.
    """
    bns = _batch_norm_layers(model)
    if not bns:
        raise ValueError("the model has no BatchNorm layer")
    inputs = []
    hooks = [m.register_forward_hook(lambda _m, inp, _out: inputs.append(inp[0].detach()))
             for m in bns]
    was_training = model.training
    dtypes = [p.dtype for p in model.parameters()]
    x = x.to(dtypes[0]) if dtypes and x.is_floating_point() else x  # the model's precision
    try:
        with torch.no_grad():
            model.eval()(x)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    rows = []
    for layer, z in enumerate(inputs):
        z = z.double().reshape(z.shape[0], z.shape[1], -1)  # (N, C, positions)
        mu, sigma = z.mean((0, 2)), z.std((0, 2), unbiased=False)
        for b in batch_sizes:
            k = len(z) // b
            batch_means = z[:k * b].reshape(k, b, z.shape[1], -1).mean((1, 3))  # (k, C)
            noise = (((batch_means - mu) / sigma) ** 2).mean().sqrt()
            rows.append({"layer": layer, "batch_size": b, "values": b * z.shape[2],
                         "noise": float(noise)})
    return rows


def grid_table(rows: list[dict]) -> str:
    """The rows of :func:`batch_size_grid` as a table: test errors (%) and last-epoch
    training losses, the mean over seeds with the spread (max - min) in brackets, one column
    per batch size, next to Wu & He's Table 2 (ResNet-50 on ImageNet, :data:`WU_HE_TABLE2`).

    Lesson 01."""
    sizes = sorted({r["batch_size"] for r in rows}, reverse=True)
    seeds = sorted({r["seed"] for r in rows})
    lines = [f"{'mean (spread) of ' + str(len(seeds)) + ' seeds':<40}"
             + "".join(f"{'batch ' + str(b):>14}" for b in sizes)]
    labels = {("batch", "eval"): "BN error %, eval()",
              ("batch", "train_mode"): "BN error %, train-mode batches",
              ("batch", "recomputed"): "BN error %, recomputed statistics",
              ("group", "eval"): "GN error %", ("none", "eval"): "no-norm error %",
              ("batch", "final_train_loss"): "BN last-epoch training loss",
              ("group", "final_train_loss"): "GN last-epoch training loss",
              ("none", "final_train_loss"): "no-norm last-epoch training loss"}
    for (norm, key), label in labels.items():
        cells = []
        digits = 2 if key == "final_train_loss" else 1
        for b in sizes:
            values = [r[key] for r in rows if r["norm"] == norm and r["batch_size"] == b]
            if not values:
                break
            cells.append(f"{sum(values) / len(values):.{digits}f} "
                         f"({max(values) - min(values):.{digits}f})")
        if len(cells) == len(sizes):
            lines.append(f"{label:<40}" + "".join(f"{c:>14}" for c in cells))
    for norm, name in (("batch", "BN"), ("group", "GN")):
        if all(b in WU_HE_TABLE2[norm] for b in sizes):
            lines.append(f"{'Wu & He ' + name + ' error %, ImageNet':<40}"
                         + "".join(f"{WU_HE_TABLE2[norm][b]:>14.1f}" for b in sizes))
    return "\n".join(lines)


def _main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m helpers.experiments",
        description="BatchNorm vs GroupNorm across batch sizes on the digits (Wu & He 2018, "
                    "Table 2): train, evaluate and print the error table.")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 16, 8, 4, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-save", action="store_true",
                        help="print the table only; by default the rows are also written to "
                             "results/batch_size_grid.<cpu path>.json (helpers.results)")
    args = parser.parse_args(argv)
    rows = batch_size_grid(batch_sizes=args.batch_sizes, seeds=args.seeds,
                           workers=args.workers, epochs=args.epochs)
    print(grid_table(rows))
    if not args.no_save:
        from .results import write_results
        for r in rows:
            r.pop("seconds", None)  # timings are not results
        path = write_results("batch_size_grid", rows, seeds=args.seeds, argv=argv,
                             module="helpers.experiments", batch_sizes=args.batch_sizes,
                             epochs=args.epochs, dtype="float64", threads_per_run=1)
        print(f"written: {path}")


if __name__ == "__main__":
    _main()
