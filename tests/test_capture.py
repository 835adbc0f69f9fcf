"""Plain data out of a kernel, and verdicts made by the checker: no kernel needed here."""

from __future__ import annotations

import ast
import builtins
import math
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

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
    assert {call.func.id for call in calls} >= {"f", "_abc123_check", "_abc123_check_that", "_abc123_operand"}
    assert "range" not in {call.func.id for call in calls}  # the cell's own range, not the kernel's
    [check] = [call for call in calls if call.func.id == "_abc123_check"]  # type: ignore[attr-defined]
    assert len(check.args) == 2  # label and value: the expected 2 stays with the checker
    [check_that] = [call for call in calls if call.func.id == "_abc123_check_that"]  # type: ignore[attr-defined]
    assert isinstance(check_that.args[1], ast.Lambda)  # the condition is evaluated by the checker
    assert ast.literal_eval(check_that.args[3]) == 0  # its number in the cell
    assert isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == "_abc123_setup"


def record(label: str, value: object, kind: str = "check") -> dict[str, object]:
    if kind == "check_that":  # ``value`` is the list of operands the kernel met
        operands = [plain.encode(v) for v in value]  # type: ignore[attr-defined]
        return {"label": plain.encode(label), "kind": kind, "condition": 0, "operands": operands}
    return {"label": plain.encode(label), "kind": kind, "value": plain.encode(value)}


EXPECTED = [Expected("sum", "check", plain.encode([1.0, 2.0])), Expected("small", "check_that", "true")]
CONDITIONS = capture.conditions('check("sum", s)\ncheck_that("small", x <= 3, "too big")\n')


def judge_cell(records: list[dict[str, object]]) -> list[capture.Verdict]:
    return capture.judge_cell(EXPECTED, records, CONDITIONS)


def test_values_are_judged_against_the_solutions_values() -> None:
    right = judge_cell([record("sum", [1, 2]), record("small", [2, 3], "check_that")])
    assert [(v.passed, v.detail) for v in right] == [(True, "[1, 2]"), (True, "")]
    wrong = judge_cell([record("sum", [1, 3]), record("small", [4, 3], "check_that")])
    assert [(v.passed, v.detail) for v in wrong] == [
        (False, "expected [1, 2], got [1, 3]"),
        (False, "the condition does not hold"),
    ]


def test_the_checker_evaluates_a_condition_so_a_kernel_that_says_true_is_not_believed() -> None:
    claims_true = {"label": plain.encode("small"), "kind": "check_that", "value": "true", "condition": 0}
    [_, verdict] = judge_cell([record("sum", [1, 2]), claims_true])
    assert (verdict.passed, verdict.detail) == (
        False,
        "wrong answer: the kernel did not report the condition's values",
    )
    for operands in ([], [2], [2, 3, 4]):
        [_, verdict] = judge_cell([record("sum", [1, 2]), record("small", operands, "check_that")])
        assert not verdict.passed and "values than the condition uses" in verdict.detail
    [_, verdict] = judge_cell(
        [record("sum", [1, 2]), {**record("small", [2, 3], "check_that"), "condition": 5}]
    )
    assert not verdict.passed


@pytest.mark.parametrize(
    ("condition", "operands", "holds"),
    [
        ("a is not None and 5 <= a <= b - 5", [10, None, 5, 10, 10], True),
        ("a is not None and 5 <= a <= b - 5", [10, None, 5, 10, 4], False),
        ("a is not None and 5 <= a <= b - 5", [None, None], False),  # stopped at the first test
        ("a <= 0.5 < b", [0.4, 0.5, 0.6], True),
        ("a <= 0.5 < b", [0.6, 0.5], False),  # a chain stops at its first false link
        ("not a or b in c", [True, 2, [1, 2]], True),
        ("len(xs) > 0", [0, 0], False),
        ("flag", [1], True),
        ("a is b", [[], []], False),  # lists have no identity once they are data
    ],
)
def test_a_condition_is_evaluated_on_the_reported_operands(
    condition: str, operands: list[object], holds: bool
) -> None:
    [node] = capture.conditions(f"check_that('c', {condition}, '')")
    assert capture.holds(node, operands) is holds


def test_not_a_number_equals_nothing_once_decoded_either() -> None:
    [node] = capture.conditions("check_that('c', [a] == [b], '')")
    operands = [plain.decode(plain.encode([math.nan]))[0] for _ in range(2)]  # type: ignore[index]
    assert capture.holds(node, [[operands[0]], [operands[1]]]) is False
    assert plain.decode("[NaN, NaN]") != plain.decode("[NaN, NaN]")


def test_operands_that_cannot_be_compared_are_a_wrong_answer() -> None:
    [node] = capture.conditions("check_that('c', a <= 5, '')")
    with pytest.raises(plain.NotPlainError, match="could not be compared"):
        capture.holds(node, [None, 5])


def test_a_value_that_is_not_plain_data_is_a_wrong_answer() -> None:
    bad = {"label": plain.encode("sum"), "kind": "check", "error": "the value is of type Job, not plain data"}
    [verdict, _] = judge_cell([bad, record("small", [1, 3], "check_that")])
    assert (verdict.passed, verdict.detail) == (
        False,
        "wrong answer: the value is of type Job, not plain data",
    )


def test_a_kernel_that_reports_more_values_than_checks_fails_the_cell() -> None:
    forged = [record("sum", [1, 2]), record("sum", [1, 2]), record("small", [1, 3], "check_that")]
    verdicts = judge_cell(forged)
    assert [v.passed for v in verdicts] == [False, False]
    assert "reported 3 values for the cell's 2 checks" in verdicts[0].detail
    unknown = judge_cell([record("something else", 1)])
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


class Publisher:
    """Stands in for IPython's display publisher: keeps what a check cell displays."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def publish(self, data: object, metadata: dict[str, Any]) -> None:
        self.records.append(metadata[capture.CAPTURE_KEY])


def run_cell(source: str, names: dict[str, object], patched: dict[str, object] | None = None) -> list[object]:
    """Run a check cell as the checker rewrites it; each check's verdict, made as the checker makes it.

    ``patched`` replaces built-ins in the cell's namespace, as a learner's earlier cell could.
    """
    publisher = Publisher()
    shell = SimpleNamespace(display_pub=publisher)
    kernel_builtins = {**vars(builtins), **(patched or {})}
    namespace = {"__builtins__": kernel_builtins, "get_ipython": lambda: shell, **names, **(patched or {})}
    exec(capture.rewrite_check_cell(source, "n"), namespace)
    conditions = capture.conditions(source)
    made: list[object] = []
    for record in publisher.records:
        if "raised" in record:
            made.append(plain.decode(record["raised"]))
        elif "error" in record:
            made.append(record["error"])
        elif record["kind"] == "check":
            made.append(plain.decode(record["value"]))
        else:
            operands = [plain.decode(text) for text in record["operands"]]
            made.append(capture.holds(conditions[record["condition"]], operands))
    return made


def test_a_check_that_compares_plain_copies_so_a_sneaky_number_is_judged_by_its_value() -> None:
    source = 'check_that("by t=30", schedule[-1] <= 30, "late")\ncheck_that("none", x is None, "")\n'
    assert run_cell(source, {"schedule": [Sneaky(99)], "x": None}) == [False, True]
    assert run_cell(source, {"schedule": [Sneaky(29)], "x": 1}) == [True, False]
    [reason, _] = run_cell(source, {"schedule": [object()], "x": None})
    assert str(reason).startswith("the value is of type object, not plain data")


def test_built_ins_the_learner_rebound_do_not_change_what_a_check_cell_computes() -> None:
    source = (
        "total = sum(x for x in range(4))\n"
        'check("sum", [total, len(xs), float(1), str(2), list((3,)), type(xs).__name__])\n'
        'check_that("short", len(xs) <= 2, "")\n'
    )
    names: dict[str, object] = {"xs": [1, 2, 3]}
    honest = [[6, 3, 1.0, "2", [3], "list"], False]
    assert run_cell(source, names) == honest
    lies = {
        name: (lambda *args, **kwargs: 0) for name in ("sum", "len", "range", "float", "str", "list", "type")
    }
    assert run_cell(source, names, lies) == honest


def test_explain_may_be_given_by_keyword() -> None:
    source = 'check_that("small", x <= 3, explain="too big")\ncheck_that("tiny", x <= 1)\n'
    assert run_cell(source, {"x": 2}) == [True, False]


def solution_check_cells() -> list[str]:
    import json
    from pathlib import Path

    from jobqueue.teaching.checks import CHECK_FUNCTIONS

    found = []
    for solution in sorted(Path(__file__).parents[1].glob("solutions/*.ipynb")):
        for cell in json.loads(solution.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and any(f"{name}(" in source for name in CHECK_FUNCTIONS):
                found.append(source)
    assert found, "no check cell found"
    return found


def test_solution_conditions_compare_at_their_top_level_where_the_checker_sees_it() -> None:
    def nested(node: ast.expr) -> list[str]:
        if isinstance(node, ast.BoolOp):
            return [n for value in node.values for n in nested(value)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return nested(node.operand)
        parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) else [node]
        return [ast.unparse(c) for part in parts for c in ast.walk(part) if isinstance(c, ast.Compare)]

    hidden = [
        found for source in solution_check_cells() for c in capture.conditions(source) for found in nested(c)
    ]
    assert hidden == []  # a comparison inside a call would be made in the kernel


def test_every_built_in_a_solution_check_cell_reads_is_one_the_checker_supplies() -> None:
    used = set()
    for source in solution_check_cells():
        tree = ast.parse(source)
        bound = capture.bound_names(tree)
        used |= {
            node.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and hasattr(builtins, node.id) and node.id not in bound
        }
    assert used <= set(plain.BUILTINS), used - set(plain.BUILTINS)


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("any", ([0, "", 3],), {}),
        ("any", ([0, ""],), {}),
        ("abs", (-2.5,), {}),
        ("round", (2.675, 2), {}),
        ("round", (7.5,), {}),
        ("min", ([3, 1, 2],), {}),
        ("min", (3, 1, 2), {}),
        ("min", (["bb", "a", "ccc"],), {"key": len}),
        ("sorted", ([3, 1, 2],), {"reverse": True}),
        ("sorted", (["bb", "a"],), {"key": len}),
        ("set", ([1, 1, 2],), {}),
    ],
)
def test_the_supplied_built_ins_do_what_python_s_do(
    name: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    assert plain.BUILTINS[name](*args, **kwargs) == getattr(builtins, name)(*args, **kwargs)


def test_normalize_keeps_plain_values_and_drops_subclasses() -> None:
    value = plain.normalize([Sneaky(3), (1, "a"), {"k": 2.5}])
    assert value == [3, (1, "a"), {"k": 2.5}]
    assert type(value[0]) is int  # type: ignore[index]
