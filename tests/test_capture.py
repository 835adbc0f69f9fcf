"""Plain data out of a kernel, and verdicts made by the checker: no kernel needed here."""

from __future__ import annotations

import ast
import math
import subprocess
import sys

import pytest
from waiting import HANG_GUARD_S

from jobqueue.teaching import capture, plain
from jobqueue.teaching.capture import Expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**70,
        0.1,
        -0.0,
        math.inf,
        'a"b\\c\n',
        "é€😀",
        [1, [2.5, "x"]],
        {7: 204, "k": [None]},
    ],
)
def test_plain_values_survive_the_trip(value: object) -> None:
    text = plain.encode(value)
    assert text.isascii()
    assert plain.decode(text) == value


def test_tuples_arrive_as_lists_and_dict_keys_keep_their_type() -> None:
    assert plain.decode(plain.encode([(2, 1), (4, 1)])) == [[2, 1], [4, 1]]
    assert plain.decode(plain.encode({(1, 2): "a", 3: "b", "3": "c"})) == {(1, 2): "a", 3: "b", "3": "c"}


def test_a_number_that_lies_about_itself_is_read_as_the_number_it_holds() -> None:
    class Liar(int):
        def __repr__(self) -> str:
            return "4"

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    assert plain.encode([Liar(-1)]) == "[-1]"


def test_patched_builtins_and_json_do_not_change_what_is_encoded() -> None:
    # In a process of its own: patching builtins here would break pytest's own workers.
    script = (
        "import builtins, json\n"
        "from jobqueue.teaching import plain\n"  # loaded first, as the kernel's start-up file is
        "builtins.repr = lambda value: '0'\n"
        "builtins.len = lambda value: 0\n"
        "json.dumps = lambda *args, **kwargs: '[0]'\n"
        "print(plain.encode([-1.0, 'x', {2: 3}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.stdout.strip() == '[-1.0,"x",{"dict":[[2,3]]}]', done.stderr


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (object(), "the value is of type object, not plain data"),
        ({1, 2}, "the value is of type set, not plain data"),
        ("y" * (plain.MAX_CHARS + 1), "too large to check"),
        (10**5000, "the number is too large to check"),
    ],
    ids=["object", "set", "long text", "huge number"],
)
def test_what_is_not_plain_data_is_refused_with_a_reason(value: object, reason: str) -> None:
    with pytest.raises(plain.NotPlainError, match=reason):
        plain.encode(value)


def test_a_list_that_holds_itself_is_refused() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(plain.NotPlainError, match="nested more than"):
        plain.encode(looped)


def test_check_calls_go_to_the_cells_own_capture_functions_without_the_expected_value() -> None:
    source = 'x = f(1)\ncheck("one", x, 2)\nfor n in range(2):\n    check_that(f"n{n}", n < 5, "big")\n'
    rewritten = capture.rewrite_check_cell(source, "abc123")
    tree = ast.parse(rewritten)
    guard = tree.body[-1]
    assert isinstance(guard, ast.Try)  # the cell's own statements, guarded
    calls = [
        node for node in ast.walk(guard) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    assert {call.func.id for call in calls} >= {"f", "range", "_abc123_check", "_abc123_check_that"}
    [check] = [call for call in calls if call.func.id == "_abc123_check"]  # type: ignore[attr-defined]
    assert len(check.args) == 2  # label and value: the expected 2 stays with the checker
    assert isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == "_abc123_setup"


def record(label: str, value: object, kind: str = "check") -> dict[str, object]:
    return {"label": plain.encode(label), "kind": kind, "value": plain.encode(value)}


EXPECTED = [Expected("sum", "check", plain.encode([1.0, 2.0])), Expected("small", "check_that", "true")]


def test_values_are_judged_against_the_solutions_values() -> None:
    right = capture.judge_cell(EXPECTED, [record("sum", [1, 2]), record("small", True, "check_that")])
    assert [(v.passed, v.detail) for v in right] == [(True, "[1, 2]"), (True, "")]
    wrong = capture.judge_cell(EXPECTED, [record("sum", [1, 3]), record("small", 1, "check_that")])
    assert [(v.passed, v.detail) for v in wrong] == [
        (False, "expected [1, 2], got [1, 3]"),
        (False, "the condition does not hold"),
    ]


def test_a_value_that_is_not_plain_data_is_a_wrong_answer() -> None:
    bad = {"label": plain.encode("sum"), "kind": "check", "error": "the value is of type Job, not plain data"}
    [verdict, _] = capture.judge_cell(EXPECTED, [bad, record("small", True, "check_that")])
    assert (verdict.passed, verdict.detail) == (
        False,
        "wrong answer: the value is of type Job, not plain data",
    )


def test_a_kernel_that_reports_more_values_than_checks_fails_the_cell() -> None:
    forged = [record("sum", [1, 2]), record("sum", [1, 2]), record("small", True, "check_that")]
    verdicts = capture.judge_cell(EXPECTED, forged)
    assert [v.passed for v in verdicts] == [False, False]
    assert "reported 3 values for the cell's 2 checks" in verdicts[0].detail
    unknown = capture.judge_cell(EXPECTED, [record("something else", 1)])
    assert not any(v.passed for v in unknown)


def test_an_exception_fails_the_first_unmade_check_and_skips_the_rest() -> None:
    raised = {"raised": plain.encode("NameError: name 'f' is not defined"), "missing_name": plain.encode("f")}
    verdicts = capture.judge_cell(EXPECTED, [raised])
    assert [(v.passed, v.detail, v.missing_name) for v in verdicts] == [
        (False, "NameError: name 'f' is not defined", "f"),
        (False, "not run: the cell stopped at the error above", None),
    ]
    assert [v.detail for v in capture.judge_cell(EXPECTED, [])] == ["did not run", "did not run"]


def test_records_of_another_run_are_ignored() -> None:
    outputs = [
        {"metadata": {capture.CAPTURE_KEY: {"nonce": "other", **record("sum", [1, 2])}}},
        {"metadata": {capture.CAPTURE_KEY: {"nonce": "mine", **record("sum", [9])}}},
    ]
    assert [r["value"] for r in capture.captured(outputs, "mine")] == ["[9]"]


class Sneaky(int):
    """An answer of the learner's own that claims to be small, equal and true."""

    def __le__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def run_rewritten(source: str, names: dict[str, object]) -> list[tuple[str, object]]:
    made: list[tuple[str, object]] = []

    def check_that(label: str, ok: object, explain: str = "") -> None:
        try:
            made.append((label, ok()))  # type: ignore[operator]
        except plain.NotPlainError as error:
            made.append((label, str(error)))

    def raised(error: BaseException) -> None:
        made.append(("raised", repr(error)))

    rewritten = capture.rewrite_check_cell(source, "n")
    setup = "_n_check, _n_check_that, _n_raised, _n_plain = _n_setup()"
    assert setup in rewritten
    # This test's recorders stand in for the functions the cell builds; the rest runs as written.
    namespace = {"_n_setup": lambda: (None, check_that, raised, plain.normalize), **names}
    exec(rewritten[rewritten.index(setup) :], namespace)
    return made


def test_a_check_that_compares_plain_copies_so_a_sneaky_number_is_judged_by_its_value() -> None:
    source = 'check_that("by t=30", schedule[-1] <= 30, "late")\ncheck_that("none", x is None, "")\n'
    assert run_rewritten(source, {"schedule": [Sneaky(99)], "x": None}) == [
        ("by t=30", False),
        ("none", True),
    ]
    assert run_rewritten(source, {"schedule": [Sneaky(29)], "x": 1}) == [("by t=30", True), ("none", False)]
    [(_, reason), _] = run_rewritten(source, {"schedule": [object()], "x": None})
    assert reason.startswith("the value is of type object, not plain data")


def test_normalize_keeps_plain_values_and_drops_subclasses() -> None:
    value = plain.normalize([Sneaky(3), (1, "a"), {"k": 2.5}])
    assert value == [3, (1, "a"), {"k": 2.5}]
    assert type(value[0]) is int  # type: ignore[index]
