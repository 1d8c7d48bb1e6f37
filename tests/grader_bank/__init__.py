"""The bank of learner solutions that proves the checkers (``python -m tools.grader_audit``).

Each topic module lists :class:`Sol` entries: a solution written the way a learner writes it,
for one checker or drill (``target``), and what the checker must answer: ``PASS`` for a right
solution (it must be accepted), or the key of the mistake a wrong one must be rejected with
(``None``: no known mistake, the result must show the smallest failing case instead). The
wrong ones are the mistakes each checker claims to name, the mistakes that circulate in
tutorials on its topic, and mutants of the model solution (a wrong axis, the biased and
unbiased variance swapped, eps outside the root or missing, a missing keepdim, a flipped sign,
a dropped term of a backward, statistics in 16 bits, a transposed layout, a dropped mask, ...).

Targets: a checker by its name (``"check_layer_norm"``), with keyword arguments in
``Sol.kwargs`` as its exercise passes them; a drill as ``"drill:layer_norm"``, graded by
:func:`helpers.drills.grade` (from scratch: torch's own norms and autograd are refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

PASS = "pass"


@dataclass(frozen=True)
class Sol:
    """One learner solution: ``fn`` for ``target``, and what the checker must answer."""

    target: str
    name: str
    fn: Callable
    expect: str | None = PASS
    kwargs: dict = field(default_factory=dict)

    @property
    def right(self) -> bool:
        return self.expect == PASS


def collector(bank: list):
    """``add = collector(S)``: a decorator factory, ``@add(target, name, expect)`` appends the
    decorated function to ``bank`` as a :class:`Sol` (keyword arguments go to the checker)."""
    def add(target, name, expect=PASS, **kwargs):
        def deco(fn):
            bank.append(Sol(target, name, fn, expect, kwargs))
            return fn
        return deco
    return add


def drill_copies(sols, mapping: dict[str, str], *, exclude=()) -> list[Sol]:
    """The entries of checker targets re-targeted at their drills (``mapping``: checker ->
    drill), for solutions that are written from scratch (names in ``exclude`` are left out:
    those that call torch's own norm, which a drill refuses)."""
    out = []
    for s in sols:
        if s.target in mapping and s.name not in exclude and not s.kwargs:
            out.append(Sol(mapping[s.target], s.name, s.fn, s.expect))
    return out


def all_solutions() -> list[Sol]:
    from . import (backprop, blocks, bn_practice, merges, norms, todays_transformers, variance,
                   weight_norms)
    sols: list[Sol] = []
    for mod in (norms, blocks, variance, merges, todays_transformers, bn_practice, weight_norms,
                backprop):
        sols.extend(mod.SOLUTIONS)
    from . import atlas  # lesson 14
    sols.extend(atlas.SOLUTIONS)
    from . import interview_drills  # lesson 12, drills 11 to 16
    sols.extend(interview_drills.SOLUTIONS)
    from . import spot_the_bug  # lesson 12, section 8
    sols.extend(spot_the_bug.SOLUTIONS)
    return sols
