"""The check functions and the check-cell guard: verdicts as lines and data, never an exception."""

import ast

import pytest

from jobqueue.teaching import checks


def run_guarded(source: str) -> dict[str, object]:
    """Run ``source`` as IPython would after the guard transformed it."""
    tree = checks.CheckCellGuard().visit(ast.parse(source))
    namespace: dict[str, object] = {"check": checks.check, "check_that": checks.check_that}
    exec(compile(tree, "cell.py", "exec"), namespace)  # the test runs a cell's code, as IPython does
    return namespace


def test_check_shows_a_pass_and_a_failure_without_raising(capsys: pytest.CaptureFixture[str]) -> None:
    checks.check("halves", [0.5, 1.0], [0.5, 1])
    checks.check("doubles", [1, 2], [2, 4])
    checks.check_that("in time", False, "the last attempt starts at t=31 s")
    assert capsys.readouterr().out.splitlines() == [
        "✓ halves: [0.5, 1]",
        "✗ doubles: expected [2, 4], got [1, 2]",
        "✗ in time: the last attempt starts at t=31 s",
    ]


def test_labels_are_the_cells_own_check_calls() -> None:
    cell = ast.parse(
        'x = 1\ncheck("a", x, 1)\ndef f():\n    check("inside", 1, 1)\ncheck_that("b", f() is None, "")'
    )
    assert checks.check_labels(cell) == ["a", "b"]


def test_guard_turns_an_exception_into_failed_checks(capsys: pytest.CaptureFixture[str]) -> None:
    source = (
        "def answer():\n"
        "    raise NotImplementedError('your answer goes here')\n"
        "check('first', 1, 1)\n"
        "check('second', answer(), 2)\n"
        "check('third', 3, 3)\n"
    )
    run_guarded(source)  # does not raise
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "✓ first: 1"
    assert lines[1].startswith(
        "✗ second: NotImplementedError: your answer goes here (in answer, line 2 of its"
    )
    assert lines[2] == "✗ third: not run: the cell stopped at the error above"


def test_guard_records_a_missing_name_as_data(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[checks.Verdict] = []
    monkeypatch.setattr(checks, "record", shown.append)
    run_guarded("check('uses top', top(2), 1)")
    assert shown == [
        checks.Verdict("uses top", False, "NameError: name 'top' is not defined", missing_name="top")
    ]


def test_guard_leaves_cells_without_checks_alone() -> None:
    tree = ast.parse("x = 1\nraise ValueError(x)")
    assert ast.dump(checks.CheckCellGuard().visit(ast.parse("x = 1\nraise ValueError(x)"))) == ast.dump(tree)


def test_summary_counts_the_latest_run_of_each_check(capsys: pytest.CaptureFixture[str]) -> None:
    checks._latest.clear()
    checks.check("a", 1, 2)
    checks.check("b", 1, 1)
    checks.check("a", 2, 2)  # fixed and run again
    checks.check_that("c", False, "no")
    capsys.readouterr()
    checks.summary()
    assert capsys.readouterr().out == "2 of 3 checks pass\n"
