r"""Lesson 09's experiments of sections 3, 4.2 and 5 over more seeds than the lesson can afford
to run, stored in ``results/`` (:mod:`helpers.results`), one file per CPU code path. The lesson
runs seed 0 of each itself, with the same functions and settings, and reads the file for the
other seeds.

- section 3: 4-layer LayerNorm models in the Pre-LN, sandwich (Gemma 2 / Peri-LN) and reordered
  (OLMo 2) layouts, learning rate 0.03: the residual stream's RMS and largest entry after the
  last block, on :func:`eval_batch`, and the final loss;
- section 4.2: the 4-layer Pre-LN model with LayerNorm, and with DyT for
  :math:`\alpha_0` = 0.1, 0.5, 2.0, learning rate 0.01: the final loss (and section 6.2's
  per-channel :math:`\alpha`);
- section 5: no norm, SkipInit (no norm), Pre-LN with LayerScale 0.1, learning rate 0.01:
  the final loss.

Every run trains with :func:`helpers.transformer.train_lm` on the reversal task (:data:`TASK`),
in float64, the model seeded with ``torch.manual_seed(seed)`` before it is built and the data
drawn from a generator seeded with ``seed``. Command line (33 runs, about 40 seconds of one
core's time; ``ATEN_CPU_CAPABILITY=default`` in front runs them on the scalar CPU path)::

    python -m helpers.transformer_grids
    python -m helpers.transformer_grids --seeds 0 1 2 3 4   # more seeds
"""

from __future__ import annotations

import argparse
import sys

import torch

from . import norms as course_norms
from . import transformer as HT
from .results import write_results

__all__ = ["TASK", "LAYOUT_LR", "DYT_LR", "LAYOUTS", "DYT_KINDS", "NO_NORM_VARIANTS",
           "eval_batch", "layout_model", "dyt_model", "no_norm_model", "seed_grid", "runs", "main"]

# the reversal task of lesson 09: 6 symbols from 15 (+ separator), 100 steps, warmup 10
TASK = dict(steps=100, warmup_steps=10, batch_size=16, seq_len=6, vocab_size=16)
LAYOUT_LR, DYT_LR = 0.03, 0.01
LAYOUTS = ("pre", "sandwich", "reordered")
DYT_KINDS = {"LayerNorm": None, "DyT, alpha0 0.1": 0.1, "DyT, alpha0 0.5": 0.5, "DyT, alpha0 2.0": 2.0,
             "DyT, per-channel alpha0 0.5": 0.5}
NO_NORM_VARIANTS = {
    "no norm": dict(norm="layer", layout="none"),
    "SkipInit (no norm)": dict(norm="layer", layout="none", branch_scale="skipinit"),
    "Pre-LN + LayerScale 0.1": dict(norm="layer", layout="pre", branch_scale="layerscale",
                                    branch_scale_init=0.1)}


def eval_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The lesson's fixed evaluation batch: 64 reversal sequences from a generator seeded 99."""
    return HT.reversal_batch(64, TASK["seq_len"], TASK["vocab_size"], torch.Generator().manual_seed(99))


def _model(seed: int, **kw) -> HT.LayoutTransformer:
    torch.manual_seed(seed)
    return HT.LayoutTransformer(TASK["vocab_size"], d_model=32, n_heads=4, num_layers=4,
                                max_len=2 * TASK["seq_len"], **kw).double()


def layout_model(layout: str, seed: int) -> HT.LayoutTransformer:
    """Section 3's model: 4 layers, d = 32, 4 heads, LayerNorm, in ``layout``, float64."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return _model(seed, layout=layout)


def dyt_model(kind: str, seed: int) -> HT.LayoutTransformer:
    """Section 4.2's Pre-LN model with LayerNorm (``"LayerNorm"``) or with every norm replaced by
    DyT (``"DyT, alpha0 A"``, A in 0.1, 0.5, 2.0); ``"DyT, per-channel alpha0 0.5"`` is section
    6.2's mistake, every DyT's alpha replaced by a per-channel vector of 0.5 (shape (32,))."""
    if kind not in DYT_KINDS:
        raise ValueError(f"kind must be one of {list(DYT_KINDS)}, got {kind!r}")
    a0 = DYT_KINDS[kind]
    if a0 is None:
        return _model(seed, layout="pre", norm="layer")
    model = _model(seed, layout="pre", norm="dyt", dyt_alpha=a0)
    if "per-channel" in kind:
        for m in model.modules():
            if isinstance(m, course_norms.DyT):
                m.alpha = torch.nn.Parameter(torch.full((32,), a0, dtype=torch.float64))
    return model


def no_norm_model(variant: str, seed: int) -> HT.LayoutTransformer:
    """Section 5's models: ``"no norm"``, ``"SkipInit (no norm)"``, ``"Pre-LN + LayerScale 0.1"``."""
    if variant not in NO_NORM_VARIANTS:
        raise ValueError(f"variant must be one of {list(NO_NORM_VARIANTS)}, got {variant!r}")
    return _model(seed, **NO_NORM_VARIANTS[variant])


def seed_grid(seeds) -> list[dict]:
    """One row per (experiment, configuration, seed): ``experiment`` ("stream", "dyt",
    "no norm"), ``config``, ``seed``, ``final_loss``, ``accuracy``; the stream rows also
    ``rms`` and ``max`` of the residual stream after the last block on :func:`eval_batch`."""
    x_eval, _ = eval_batch()
    rows = []
    for seed in seeds:
        for layout in LAYOUTS:
            model = layout_model(layout, seed)
            r = HT.train_lm(model, lr=LAYOUT_LR, seed=seed, **TASK)
            last = model.residual_stream(x_eval)[-1]
            rows.append(dict(experiment="stream", config=layout, seed=seed,
                             final_loss=r["final_loss"], accuracy=r["accuracy"],
                             rms=float(last.pow(2).mean().sqrt()), max=float(last.abs().max())))
        for kind in DYT_KINDS:
            r = HT.train_lm(dyt_model(kind, seed), lr=DYT_LR, seed=seed, **TASK)
            rows.append(dict(experiment="dyt", config=kind, seed=seed,
                             final_loss=r["final_loss"], accuracy=r["accuracy"]))
        for variant in NO_NORM_VARIANTS:
            r = HT.train_lm(no_norm_model(variant, seed), lr=DYT_LR, seed=seed, **TASK)
            rows.append(dict(experiment="no norm", config=variant, seed=seed,
                             final_loss=r["final_loss"], accuracy=r["accuracy"]))
        print(f"seed {seed} done", flush=True)
    return rows


def runs(records: dict[str, dict], experiment: str, config: str) -> list[dict]:
    """The rows of ``experiment`` and ``config`` over every seed and every CPU path of
    ``records`` (:func:`helpers.results.read_all_paths`), each with its ``path`` added."""
    out = [dict(r, path=path) for path, rec in records.items() for r in rec["rows"]
           if r["experiment"] == experiment and r["config"] == config]
    if not out:
        raise ValueError(f"no rows for {experiment!r}, {config!r}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = seed_grid(args.seeds)
    path = write_results("lesson09_seeds", rows, seeds=args.seeds,
                         argv=sys.argv[1:] if argv is None else argv,
                         module="helpers.transformer_grids", task=TASK, layout_lr=LAYOUT_LR,
                         dyt_lr=DYT_LR, dtype="float64")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
