"""The grader audit (``python -m tools.grader_audit``, ``make audit-graders``) in the test
suite: every wrong solution of ``tests/grader_bank`` rejected, every right one accepted, at
least 8 wrong and 3 right solutions per checker and drill, and the right diagnosis on at
least 90 % of the wrong ones, for every checker and every drill."""

import pytest

from tools import grader_audit as A


@pytest.fixture(scope="module")
def rows():
    return A.audit()


def test_every_checker_and_drill_is_audited(rows):
    from helpers import drills
    assert [r.target for r in rows] == A.CHECKERS + [f"drill:{d}" for d in drills.DRILLS]
    import helpers.checks
    checkers = {n for n in helpers.checks.__all__ if n.startswith("check_")}
    assert set(A.CHECKERS) | set(A.AUDITED_ELSEWHERE) == checkers
    assert not set(A.CHECKERS) & set(A.AUDITED_ELSEWHERE)


def test_checkers_audited_elsewhere_have_their_bank_there():
    import pathlib
    root = pathlib.Path(A.__file__).resolve().parents[1]
    for name, where in A.AUDITED_ELSEWHERE.items():
        assert name in (root / where).read_text(encoding="utf-8"), (name, where)


def test_no_wrong_solution_passes_and_no_right_one_fails(rows):
    problems = [f"{r.target}: {p}" for r in rows for p in r.problems
                if p.startswith(("WRONG ACCEPTED", "RIGHT REJECTED")) or "checker raised" in p]
    assert not problems, "\n".join(problems)
    assert not A.failures(rows), "\n".join(A.failures(rows))


def test_right_diagnosis_rate(rows):
    low = [f"{r.target}: {r.diagnosed}/{r.wrong}" for r in rows if r.diagnosed < 0.9 * r.wrong]
    assert not low, f"below 90 % right diagnosis: {low}"


def test_the_audit_fails_on_a_bad_bank(monkeypatch):  # the audit itself can fail
    import grader_bank
    from grader_bank import PASS, Sol

    def wrong_but_called_right(x, w, b, eps):
        return x * 0

    bank = [Sol("check_layer_norm", "a zero output marked right", wrong_but_called_right, PASS)]
    monkeypatch.setattr(grader_bank, "all_solutions", lambda: bank)
    rows = A.audit(["check_layer_norm"])
    assert rows[0].right == 1 and rows[0].accepted == 0
    assert A.failures(rows)
    assert A.main(["--only", "check_layer_norm"]) == 1


def test_the_table_prints_every_target(rows):
    text = A.table(rows)
    for r in rows:
        assert r.target in text
    assert "right diagnosis" in text
