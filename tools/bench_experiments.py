"""Time the lessons' training experiments the way they ran before and the way they run now, in
one process on this machine, check that both give the same numbers, and print the ratio.

    python -m tools.bench_experiments                  # every experiment
    python -m tools.bench_experiments cnn_grid mlp_grid

Experiments (lesson, section: before -> now):

- ``mlp_grid`` (01, 6): the 24 runs of an 8-layer MLP, one job per run in 2 worker processes
  (``lr_gain_grid(stacked=False)``) -> the runs of one norm trained together with batched
  matrix products, one job per norm and gain (:func:`helpers.experiments._stacked_mlps`); equal to
  rounding, not bit for bit (the comparison column says how close).
- ``cnn_grid`` (01, 7): the 12 runs of batch sizes 32, 8, 2 x 2 seeds x 2 norms, the runs of a
  batch size as one stacked network with both norms side by side, one job per batch size
  (``batch_size_grid(stacked="batch_size")``) -> one stacked network per batch size and norm,
  6 jobs (:func:`helpers.experiments.train_small_cnns`); bit for bit the same runs.
- ``warmup_runs`` (05, 4): 9 runs of the reversal task one after the other ->
  :func:`helpers.grids.reversal_runs` in 2 worker processes.
- ``deepnorm_runs`` (06, 6): 12 runs, likewise.

Every "now", and the "before" of lesson 01's grids, runs in 2 worker processes started before
the wall clock starts, as the lessons start them in their first cell; the CPU time includes
starting them (the other "before"s ran one run after the other in the kernel). Wall times
depend on what else the machine is doing: the load average is printed before and after; run
it on a quiet machine for numbers to quote (on a busy one the second core is not free, and the
workers gain little). The CPU time of every process (this one and its workers) shows what the
stacking saves; two workers add the cost of starting them and save only wall time. The "same
numbers" column compares every result bit for bit, or says how close they are where the
arithmetic is grouped differently. (Unix only: CPU times from getrusage.)"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import torch

from helpers import experiments, grids
from helpers import transformer as HT
from helpers.training import train_classifier


def _fresh_pools() -> None:
    """Stop the kept worker pools, so that the next timing includes starting its workers."""
    for pool in experiments._POOLS.values():
        pool.shutdown(wait=True)
    experiments._POOLS.clear()


def mlp_grid():
    kwargs = dict(norms=(None, "batch"), gains=(1.0, 3.0), lrs=[0.03, 0.3, 1.0], seeds=(0, 1),
                  depth=8, width=64, steps=100, workers=2)
    return (lambda: experiments.lr_gain_grid(stacked=False, **kwargs),
            lambda: experiments.lr_gain_grid(stacked=True, **kwargs), _to_rounding)


def _to_rounding(old: dict, new: dict) -> tuple[bool, str]:
    """The stacked MLP runs group their products differently: equal to rounding, except
    where training is chaotic and rounding differences grow over the steps (lesson 01,
    section 6, says which). ``True`` when every run ends on the same side of the lesson's
    thresholds: every loss below 0.3, between 0.3 and 5, or above 5, in both."""
    pairs = [(a, b) for k in old for a, b in zip(old[k], new[k])]
    rel = [abs(a - b) / abs(a) for a, b in pairs if a != float("inf")]
    close = sum(r < 1e-6 for r in rel)
    side = lambda v: 0 if v < 0.3 else 1 if v <= 5 else 2  # noqa: E731
    same_side = all(side(a) == side(b) for a, b in pairs)
    return same_side, (f"{close} of {len(pairs)} within 1e-6, largest difference "
                       f"{max(rel):.1e}; {'every' if same_side else 'NOT every'} run on the "
                       f"same side of 0.3 and 5")


def cnn_grid():
    kwargs = dict(batch_sizes=(32, 8, 2), seeds=(0, 1), workers=2, progress=False)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    return (lambda: strip(experiments.batch_size_grid(stacked="batch_size", **kwargs)),
            lambda: strip(experiments.batch_size_grid(stacked=True, **kwargs)))


def _reversal(runs, config):
    def before():
        out = {}
        for key, (model_kwargs, seed, *extra) in runs.items():
            torch.manual_seed(seed)
            model = HT.TinyTransformer(**model_kwargs)
            out[key] = HT.train_reversal(model, seed=seed, **config, **(extra[0] if extra else {}))
        return out

    return before, lambda: grids.reversal_runs(runs, config, workers=2)[0]


def warmup_runs():
    config = dict(steps=100, lr=3e-3, batch_size=16, seq_len=6, vocab_size=12, eval_size=256,
                  betas=(0.9, 0.98), log_every=5)
    runs = {(name, seed): (dict(vocab_size=12, d_model=64, n_heads=4, num_layers=6, max_len=12,
                                norm_position=position), seed, dict(warmup_steps=warmup))
            for name, (position, warmup) in {"Post-LN, no warmup": ("post", 0),
                                              "Post-LN, warmup 20": ("post", 20),
                                              "Pre-LN, no warmup": ("pre", 0)}.items()
            for seed in (0, 1, 2)}
    return _reversal(runs, config)


def deepnorm_runs():
    config = dict(steps=100, lr=3e-3, warmup_steps=20, batch_size=8, seq_len=5, vocab_size=10,
                  eval_size=256, log_every=5)
    runs = {(kind, L, seed): (dict(vocab_size=10, d_model=32, n_heads=4, num_layers=L,
                                   max_len=10, norm_position=kind), seed)
            for kind, L in [("post", 6), ("post", 12), ("pre", 12), ("deepnorm", 12)]
            for seed in (0, 1, 2)}
    return _reversal(runs, config)


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn, warm: bool = False):
    """(wall seconds, CPU seconds of every process, result) of ``fn()``. With ``warm``, the 2
    worker processes are started (and their imports done) before the wall clock starts, as a
    lesson's first cell does; their CPU time, start included, is counted (they are stopped
    before the CPU clock is read)."""
    cpu = _cpu()
    if warm:
        pool = experiments.worker_pool(2)
        for future in [pool.submit(experiments._pid) for _ in range(4)]:
            future.result()
    start = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    _fresh_pools()
    return wall, _cpu() - cpu, result


# the "before" of these ran in the lessons' 2 worker processes too
BEFORE_IN_WORKERS = {"mlp_grid", "cnn_grid"}
EXPERIMENTS = {"mlp_grid": mlp_grid, "cnn_grid": cnn_grid, "warmup_runs": warmup_runs,
               "deepnorm_runs": deepnorm_runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"experiments to time: {', '.join(EXPERIMENTS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    torch.set_num_threads(1)  # as in the lessons
    experiments.digits(torch.float64)  # the data set's first load is not the experiment's
    print(f"cpus: {os.cpu_count()}, torch {torch.__version__}, "
          f"{torch.backends.cpu.get_cpu_capability()} code path, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':<16}{'wall time':^26}   {'CPU time (all processes)':^26}")
    print(f"{'experiment':<16}{'before':>9}{'now':>9}{'ratio':>8}   {'before':>9}{'now':>9}{'ratio':>8}"
          f"   same numbers")
    failed = False
    _fresh_pools()
    for name in args.names or EXPERIMENTS:
        before, now, *compare = EXPERIMENTS[name]()
        (t_old, c_old, old), (t_new, c_new, new) = _timed(before, warm=name in BEFORE_IN_WORKERS), _timed(now, warm=True)
        if compare:
            same, text = compare[0](old, new)
        else:
            same = old == new
            text = "yes" if same else "NO"
        failed |= not same
        print(f"{name:<16}{t_old:>7.1f} s{t_new:>7.1f} s{t_old / t_new:>7.2f}x   "
              f"{c_old:>7.1f} s{c_new:>7.1f} s{c_old / c_new:>7.2f}x   {text}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
