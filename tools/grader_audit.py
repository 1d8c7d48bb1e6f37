"""The grader audit: every checker and every drill run on the bank of learner solutions in
``tests/grader_bank/``, printing one row per checker or drill: wrong solutions rejected,
rejected with the right diagnosis (the mistake key the bank expects; where it expects none,
the result must show the smallest failing case), and right solutions accepted.

    python -m tools.grader_audit            # the table; exit status 1 below 100 % / 100 %
    python -m tools.grader_audit -v         # also every solution that is misjudged or misdiagnosed
    python -m tools.grader_audit --only check_rms_norm drill:rms_norm

``make audit-graders`` runs it; ``tests/test_grader_audit.py`` runs it in ``make test``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import grader_bank  # noqa: E402  (tests/grader_bank)
from grader_bank import PASS, Sol  # noqa: E402

CHECKERS = ["check_layer_norm", "check_batch_norm", "check_group_norm", "check_rms_norm",
            "check_block_forward", "check_variance", "check_merge", "check_batch_norm_eval",
            "check_bn_backward", "check_ln_backward", "check_bn_running_stats", "check_fold_bn",
            "check_sync_bn_merge", "check_qk_norm_attention", "check_dyt_module",
            "check_weight_decay_groups", "check_frozen_batch_norm", "check_batch_renorm",
            "check_weight_norm", "check_weight_norm_grad", "check_power_iteration",
            "check_switchable_norm", "check_frn"]
# lesson 12, section 8: spot the bug in famous code
CHECKERS += ["check_deepnorm_residual", "check_makemore_batch_norm", "check_running_var_update",
             "check_residual_branches", "check_checkpoint_norm", "check_module_buffers",
             "check_bf16_row_mean", "check_rms_norm_rsqrt"]


# Checkers whose bank lives beside the code they grade, because their learner solutions are
# Triton kernels run in Triton's interpreter (seconds per case): the same rule (every wrong one
# rejected with its mistake named, every right one accepted) is enforced there.
AUDITED_ELSEWHERE = {
    "check_rms_norm_kernel": "tests/test_kernels.py",
    "check_layer_norm_backward_kernel": "tests/test_kernels.py",
}


def _drills() -> list[str]:
    from helpers import drills
    return [f"drill:{name}" for name in drills.DRILLS]


def grade(sol: Sol):
    """The checker's (or drill's) result for ``sol``, called as its exercise calls it."""
    if sol.target.startswith("drill:"):
        from helpers import drills
        return drills.grade(sol.target.split(":", 1)[1], sol.fn)
    import helpers.checks as checks
    return getattr(checks, sol.target)(sol.fn, **sol.kwargs)


@dataclass
class Row:
    target: str
    wrong: int = 0
    rejected: int = 0
    diagnosed: int = 0
    right: int = 0
    accepted: int = 0
    problems: list[str] = field(default_factory=list)

    def pct(self, a: int, b: int) -> str:
        return f"{100 * a / b:5.1f} %" if b else "    –  "


def judge(sol: Sol, row: Row) -> None:
    try:
        r = grade(sol)
    except Exception as e:  # a checker must never raise on a learner's code
        row.problems.append(f"{sol.name}: the checker raised {type(e).__name__}: {e}")
        if sol.right:
            row.right += 1
        else:
            row.wrong += 1
        return
    if sol.right:
        row.right += 1
        if r.passed:
            row.accepted += 1
        else:
            row.problems.append(f"RIGHT REJECTED  {sol.name}: {r.message.splitlines()[0]}"
                                f" [{r.mistake}]")
        return
    row.wrong += 1
    if r.passed:
        row.problems.append(f"WRONG ACCEPTED  {sol.name}: {r.message.splitlines()[0]}")
        return
    row.rejected += 1
    if sol.expect is None:
        ok = r.mistake is None and ("Smallest failing case" in r.message
                                    or "No known mistake" in r.message)
    else:
        ok = r.mistake == sol.expect
    if ok:
        row.diagnosed += 1
    else:
        row.problems.append(f"misdiagnosed   {sol.name}: expected {sol.expect}, got {r.mistake}")


def audit(only: list[str] | None = None) -> list[Row]:
    """Every bank entry judged by its checker or drill, in one thread (the inputs are tiny:
    more threads only contend)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _audit(only)
    finally:
        torch.set_num_threads(threads)


def _audit(only: list[str] | None) -> list[Row]:
    targets = CHECKERS + _drills()
    rows = {t: Row(t) for t in targets if not only or t in only}
    for sol in grader_bank.all_solutions():
        if sol.target not in rows:
            if sol.target not in targets:
                raise ValueError(f"bank entry {sol.name!r} names an unknown target {sol.target!r}")
            continue
        judge(sol, rows[sol.target])
    return list(rows.values())


def table(rows: list[Row]) -> str:
    head = (f"{'checker / drill':32s} {'wrong':>5s} {'rejected':>9s} {'right diagnosis':>16s} "
            f"{'right':>5s} {'accepted':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.target:32s} {r.wrong:5d} {r.pct(r.rejected, r.wrong):>9s} "
                     f"{r.pct(r.diagnosed, r.wrong):>16s} {r.right:5d} {r.pct(r.accepted, r.right):>9s}")
    w = sum(r.wrong for r in rows)
    lines.append("-" * len(head))
    lines.append(f"{'all':32s} {w:5d} {Row('').pct(sum(r.rejected for r in rows), w):>9s} "
                 f"{Row('').pct(sum(r.diagnosed for r in rows), w):>16s} "
                 f"{sum(r.right for r in rows):5d} "
                 f"{Row('').pct(sum(r.accepted for r in rows), sum(r.right for r in rows)):>9s}")
    return "\n".join(lines)


def failures(rows: list[Row]) -> list[str]:
    """Why the audit fails: a wrong solution accepted, a right one rejected, a checker that
    raised, or a checker or drill with fewer than 8 wrong or 3 right solutions."""
    out = []
    for r in rows:
        if r.rejected < r.wrong or r.accepted < r.right:
            out.append(f"{r.target}: {r.wrong - r.rejected} wrong accepted, "
                       f"{r.right - r.accepted} right rejected")
        if r.wrong < 8 or r.right < 3:
            out.append(f"{r.target}: the bank holds {r.wrong} wrong and {r.right} right solutions "
                       f"(at least 8 and 3)")
        out.extend(f"{r.target}: {p}" for p in r.problems if "raised" in p and "checker raised" in p)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="list every misjudged solution")
    ap.add_argument("--only", nargs="*", help="only these checkers or drills")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = audit(args.only)
    print(table(rows))
    if args.verbose:
        for r in rows:
            for p in r.problems:
                print(f"  {r.target}: {p}")
    bad = failures(rows)
    print(f"({sum(r.wrong + r.right for r in rows)} solutions in {time.perf_counter() - t0:.1f} s)")
    if bad:
        print("AUDIT FAILED:\n  " + "\n  ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
