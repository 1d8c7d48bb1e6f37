r"""Training grids too long for a lesson's time budget, run by a script and stored in
``results/`` (:mod:`helpers.results`), one file per CPU code path. The lessons read the files
and plot them; each lesson also runs a few of the same runs itself.

- :func:`warmup_grid` (lesson 05, section 4): Post-LN and Pre-LN on the reversal task over
  peak learning rates x warmup lengths x seeds, the settings of lesson 05 otherwise.
- :func:`deepnorm_grid` (lesson 06, section 6): at 12 layers, Post-LN, Pre-LN, DeepNorm and
  its two halves, alpha only (beta = 1) and beta only (alpha = 1), over seeds, the settings of
  lesson 06 otherwise.
- :func:`reversal_runs`: the few runs that lessons 05 and 06 train themselves, two at a time
  in worker processes, bit for bit the lessons' loops.

Command line (120 and 48 runs, about 7 and 2 minutes of one core's time; ``ATEN_CPU_CAPABILITY=default`` in front
runs them on the scalar CPU path)::

    python -m helpers.grids warmup
    python -m helpers.grids deepnorm

A run "trains" when its token accuracy ends above :data:`TRAINS` and "fails" when it ends
below :data:`FAILS`; a run in between is neither, and the lessons say so.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch

from . import transformer as HT
from .results import write_results

__all__ = ["WARMUP_CONFIG", "DEEPNORM_CONFIG", "TRAINS", "FAILS", "warmup_run", "warmup_grid",
           "reversal_runs",
           "deepnorm_model", "deepnorm_run", "deepnorm_grid", "outcome", "warmup_summary",
           "warmup_grid_figure"]

TRAINS, FAILS = 0.95, 0.25

# lesson 05, section 4: 6 layers, d = 64, 4 heads, 11 symbols + separator, 6 to reverse
WARMUP_CONFIG = dict(steps=100, batch_size=16, seq_len=6, vocab_size=12, eval_size=256,
                     betas=(0.9, 0.98), log_every=5)
WARMUP_MODEL = dict(d_model=64, n_heads=4, num_layers=6)

# lesson 06, section 6: d = 32, 4 heads, 9 symbols + separator, 5 to reverse, warmup 20
DEEPNORM_CONFIG = dict(steps=100, lr=3e-3, warmup_steps=20, batch_size=8, seq_len=5,
                       vocab_size=10, eval_size=256, log_every=5)
DEEPNORM_KINDS = ("post", "pre", "deepnorm", "alpha only", "beta only")


def outcome(accuracy: float) -> str:
    """``"trains"`` above :data:`TRAINS`, ``"fails"`` below :data:`FAILS`, else ``"partial"``."""
    return "trains" if accuracy > TRAINS else "fails" if accuracy < FAILS else "partial"


def warmup_run(position: str, lr: float, warmup_steps: int, seed: int) -> dict:
    """One run of lesson 05's warmup experiment: the model seeded with ``seed`` (as the lesson
    does, ``torch.manual_seed(seed)`` before building it), trained by
    :func:`helpers.transformer.train_reversal`; returns accuracy and final loss."""
    torch.manual_seed(seed)
    model = HT.TinyTransformer(WARMUP_CONFIG["vocab_size"], max_len=2 * WARMUP_CONFIG["seq_len"],
                               norm_position=position, **WARMUP_MODEL)
    r = HT.train_reversal(model, lr=lr, warmup_steps=warmup_steps, seed=seed, **WARMUP_CONFIG)
    return {"accuracy": r["accuracy"], "final_loss": r["final_loss"]}


def warmup_grid(lrs=(1e-3, 3e-3, 6e-3), warmups=(0, 10, 20, 40), seeds=range(8),
                progress: bool = True) -> list[dict]:
    """:func:`warmup_run` for Post-LN at every (lr, warmup, seed) and for Pre-LN without
    warmup at every (lr, seed); one row per run with keys position, lr, warmup, seed,
    accuracy, final_loss, outcome."""
    rows = []
    jobs = (list(itertools.product(["post"], lrs, warmups, seeds))
            + list(itertools.product(["pre"], lrs, [0], seeds)))
    for i, (position, lr, warmup, seed) in enumerate(jobs, 1):
        r = warmup_run(position, lr, warmup, seed)
        rows.append({"position": position, "lr": lr, "warmup": warmup, "seed": seed, **r,
                     "outcome": outcome(r["accuracy"])})
        if progress:
            print(f"[{i:>3}/{len(jobs)}] {position:>4}-LN lr {lr:g} warmup {warmup:>2} seed {seed}: "
                  f"accuracy {r['accuracy']:.3f}", flush=True)
    return rows


def deepnorm_model(kind: str, num_layers: int, seed: int, d: int = 32, vocab: int = 10,
                   max_len: int = 10) -> HT.TinyTransformer:
    """Lesson 06's model (``torch.manual_seed(seed)``, then a TinyTransformer of d = 32 with 4
    heads) for ``kind`` in ``"post"``, ``"pre"``, ``"deepnorm"`` (the decoder-only alpha and
    beta of :func:`helpers.transformer.deepnorm_constants`), ``"alpha only"`` (DeepNorm's alpha
    on the shortcut, beta = 1) or ``"beta only"`` (alpha = 1, DeepNorm's beta)."""
    if kind not in DEEPNORM_KINDS:
        raise ValueError(f"kind must be one of {DEEPNORM_KINDS}, got {kind!r}")
    alpha, beta = HT.deepnorm_constants(num_decoder_layers=num_layers)["decoder"]
    torch.manual_seed(seed)
    extra = {"alpha only": dict(alpha=alpha, beta=1.0), "beta only": dict(alpha=1.0, beta=beta)}
    position = kind if kind in ("post", "pre") else "deepnorm"
    return HT.TinyTransformer(vocab, d, n_heads=4, num_layers=num_layers, max_len=max_len,
                              norm_position=position, **extra.get(kind, {}))


def deepnorm_run(kind: str, num_layers: int, seed: int) -> dict:
    """One run of lesson 06's training experiment (:data:`DEEPNORM_CONFIG`)."""
    r = HT.train_reversal(deepnorm_model(kind, num_layers, seed), seed=seed, **DEEPNORM_CONFIG)
    return {"accuracy": r["accuracy"], "final_loss": r["final_loss"]}


def deepnorm_grid(kinds=DEEPNORM_KINDS, num_layers=(12,), seeds=range(8),
                  extra=(("post", 6),), progress: bool = True) -> list[dict]:
    """:func:`deepnorm_run` for every (kind, num_layers, seed), then for every (kind, layers)
    of ``extra`` and every seed (by default Post-LN at 6 layers, where lesson 06 shows it
    learning slowly); rows with keys kind, layers, seed, accuracy, final_loss, outcome."""
    rows = []
    jobs = (list(itertools.product(kinds, num_layers, seeds))
            + [(kind, layers, seed) for kind, layers in extra for seed in seeds])
    for i, (kind, layers, seed) in enumerate(jobs, 1):
        r = deepnorm_run(kind, layers, seed)
        rows.append({"kind": kind, "layers": layers, "seed": seed, **r,
                     "outcome": outcome(r["accuracy"])})
        if progress:
            print(f"[{i:>3}/{len(jobs)}] {kind:<10} L = {layers} seed {seed}: "
                  f"accuracy {r['accuracy']:.3f}", flush=True)
    return rows



def _reversal_job(job: tuple) -> tuple:
    """One run of :func:`reversal_runs` (top level, so a worker process can unpickle it)."""
    key, model_kwargs, seed, train_kwargs = job
    torch.manual_seed(seed)
    model = HT.TinyTransformer(**model_kwargs)
    result = HT.train_reversal(model, seed=seed, **train_kwargs)
    return key, result, model.state_dict()


def reversal_runs(runs: dict, train_kwargs: dict, workers: int = 2,
                  label: str = "runs") -> tuple[dict, dict]:
    """Train every run of ``runs``, ``{key: (model_kwargs, seed)}`` or
    ``{key: (model_kwargs, seed, run_kwargs)}``, as the lessons' loops do:
    ``torch.manual_seed(seed)``, ``HT.TinyTransformer(**model_kwargs)``, then
    :func:`helpers.transformer.train_reversal` with ``seed``, ``train_kwargs`` and the run's
    own ``run_kwargs`` (such as its ``warmup_steps``), on one thread. With ``workers > 1`` the runs go to that many worker processes
    (:func:`helpers.experiments.run_jobs`, longest first); each run still has its own seeds
    and one thread, so the numbers are bit for bit those of the loop (``workers=1``), and
    two cores train two runs at a time. A :class:`helpers.progress.Progress` line counts the
    finished runs and shows the last one.

    Returns ``(results, models)``: ``train_reversal``'s dict and the trained model (in eval
    mode, built again here with the same seed and loaded with the worker's weights) per key,
    in the order of ``runs``.

    Lessons 05 and 06."""
    from .experiments import run_jobs
    from .progress import Progress

    # deeper and wider models first, so that none is left to run alone at the end
    size = lambda item: item[1][0].get("num_layers", 6) * item[1][0].get("d_model", 64)  # noqa: E731
    jobs = [(key, run[0], run[1], {**train_kwargs, **(run[2] if len(run) > 2 else {})})
            for key, run in sorted(runs.items(), key=size, reverse=True)]
    bar = Progress(label, len(jobs), label_width=4)
    done = {}

    def report(answer):
        key, result, _ = answer
        done[key] = answer
        bar.update(len(done), f"{key}: loss {result['final_loss']:.2f}  accuracy {result['accuracy']:.2f}")

    if workers == 1:
        with torch.random.fork_rng(devices=[]):
            for job in jobs:
                report(_reversal_job(job))
    else:
        run_jobs(_reversal_job, jobs, workers, report)
    bar.close(f"{len(jobs)} runs")
    results, models = {}, {}
    for key, (model_kwargs, seed, *_) in runs.items():  # the loop's order and global RNG state
        torch.manual_seed(seed)
        model = HT.TinyTransformer(**model_kwargs)
        model.load_state_dict(done[key][2])
        results[key], models[key] = done[key][1], model.eval()
    return results, models

def _main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m helpers.grids", description=__doc__.split("\n\n")[0])
    parser.add_argument("grid", choices=["warmup", "deepnorm"])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as in the lessons
    if args.grid == "warmup":
        rows = warmup_grid(seeds=args.seeds)
        path = write_results("warmup_grid", rows, seeds=args.seeds, argv=argv,
                             module="helpers.grids", model=WARMUP_MODEL,
                             config={**WARMUP_CONFIG, "betas": list(WARMUP_CONFIG["betas"])},
                             trains_above=TRAINS, fails_below=FAILS)
    else:
        rows = deepnorm_grid(seeds=args.seeds)
        path = write_results("deepnorm_grid", rows, seeds=args.seeds, argv=argv,
                             module="helpers.grids", config=DEEPNORM_CONFIG,
                             trains_above=TRAINS, fails_below=FAILS)
    print(f"written: {path}")


if __name__ == "__main__":
    _main()


def _rows_by_path(records: dict[str, dict]) -> list[dict]:
    """Every row of every CPU path's record, with the path added."""
    return [{**row, "path": path} for path, record in records.items() for row in record["rows"]]


def warmup_summary(records: dict[str, dict]) -> dict[tuple, dict]:
    """Per (position, lr, warmup): how many runs (seeds x CPU paths) train, fail or neither,
    and the lowest and highest accuracy; ``records`` as read by
    :func:`helpers.results.read_all_paths` ``("warmup_grid")``."""
    summary: dict[tuple, dict] = {}
    for row in _rows_by_path(records):
        cell = summary.setdefault((row["position"], row["lr"], row["warmup"]),
                                  {"trains": 0, "fails": 0, "partial": 0, "accuracies": []})
        cell[row["outcome"]] += 1
        cell["accuracies"].append(row["accuracy"])
    for cell in summary.values():
        cell["runs"] = len(cell["accuracies"])
        cell["min"], cell["max"] = min(cell["accuracies"]), max(cell["accuracies"])
    return summary


def warmup_grid_figure(records: dict[str, dict]):
    """Lesson 05's warmup grid as a picture: one square per (peak learning rate, warmup), its
    colour the fraction of runs that train (accuracy above :data:`TRAINS`), its text
    ``trained/runs``; Post-LN on the left, Pre-LN without warmup in a column of its own."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap

    summary = warmup_summary(records)
    lrs = sorted({k[1] for k in summary})
    warmups = sorted({k[2] for k in summary if k[0] == "post"})
    columns = [("post", w) for w in warmups] + [("pre", 0)]
    cmap = LinearSegmentedColormap.from_list("fails-trains", ["#c44e52", "#f2f2f2", "#55a868"])
    fig, ax = plt.subplots(figsize=(10.6, 4.6))  # wide enough for the one-line title
    for x, (position, warmup) in enumerate(columns):
        for y, lr in enumerate(lrs):
            cell = summary[position, lr, warmup]
            ax.add_patch(plt.Rectangle((x - 0.45, y - 0.45), 0.9, 0.9,
                                       color=cmap(cell["trains"] / cell["runs"])))
            ax.text(x, y, f"{cell['trains']}/{cell['runs']}", ha="center", va="center", fontsize=17)
    ax.axvline(len(warmups) - 0.5, color="black", lw=1.5)
    ax.set_xticks(range(len(columns)),
                  [f"Post-LN\n{w}" for _, w in columns[:-1]] + ["Pre-LN\n0"])
    ax.set_yticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(-0.5, len(lrs) - 0.5)
    ax.grid(False)
    ax.set_xlabel("warmup steps · 预热步数")
    ax.set_ylabel("peak learning rate · 峰值学习率")
    ax.set_title(f"runs that train (accuracy > {TRAINS}) · 训练成功的运行数（准确率 > {TRAINS}）")
    fig.tight_layout()
    return fig
