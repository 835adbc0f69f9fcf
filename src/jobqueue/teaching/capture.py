"""The checker's side of a check: values come out of the kernel as data, verdicts are made here.

An exercise's check cells call ``check(label, got, expected)`` and ``check_that(label, ok,
explain)``. In the learner's notebook those functions (:mod:`jobqueue.teaching.checks`)
show ✓ or ✗ at once, but a kernel runs the learner's code, so nothing it decides is
trusted. When an exercise is checked (``make check``, ``make grade``), each check cell is
rewritten before it runs (:func:`rewrite_check_cell`): it starts by building capture
functions of its own, from code written into the cell (the plain-data code of
:mod:`jobqueue.teaching.plain` and a few lines more), under a name new for every cell, and
its ``check``/``check_that`` calls go to them. They only turn the value into plain data and
display it, tagged with the cell's nonce; the expected value never reaches the kernel. A
learner's own ``check``, a patched ``checks.same`` or :mod:`json`, or functions put in the
kernel's namespace before the cell are never called.

The checker then reads those records (:func:`captured`) and compares each value with the
value the same check recorded when the solution ran (stored in the solution notebook's
outputs, which the teacher's tools wrote), in its own process (:func:`judge_cell`): for
``check`` the solution's value, compared as :func:`jobqueue.teaching.checks.same` does; for
``check_that``, the condition itself, evaluated here on the operands the kernel reported
(the kernel never says whether a condition holds). A value that is not plain data is a
wrong answer with a one-line reason.
"""

from __future__ import annotations

import ast
import functools
import operator
import secrets
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobqueue.teaching import plain
from jobqueue.teaching.checks import CHECK_FUNCTIONS, VERDICT_KEY, Verdict, same, show

CAPTURE_KEY = "jobqueue.capture"
"""Key of the output metadata that holds one captured record."""

EXPLAIN_CHARS = 300
"""Longest explanation of a failed ``check_that`` kept, in characters."""

_KERNEL_SIDE = """
def check(label, got):
    emit({"label": as_data(label).get("value", '""'), "kind": "check", **as_data(got)})


def check_that(label, ok, explain="", condition=-1):
    del _OPERANDS[:]
    try:
        ok()  # the condition: its operands go through operand() and are reported, not its truth
    except NotPlainError as error:
        emit({"label": as_data(label).get("value", '""'), "kind": "check_that", "error": error.args[0]})
        return
    emit({"label": as_data(label).get("value", '""'), "kind": "check_that", "condition": condition,
          "operands": _OPERANDS[:], "explain": as_data(explain).get("value", '""')})


def operand(value):
    value = normalize(value)
    _APPEND(_OPERANDS, encode(value))
    return value


_OPERANDS = []


def raised(error):
    try:
        from jobqueue.teaching.checks import error_text
        text = error_text(error)
        missing = error.name if isinstance(error, NameError) else None
    except Exception:
        text, missing = _NAME(_type(error)), None
    emit({"raised": as_data(text).get("value", '""'), "missing_name": as_data(missing).get("value")})


def emit(record):
    record["nonce"] = NONCE
    publish({"text/plain": ""}, {KEY: record})


def as_data(value):
    try:
        return {"value": encode(value)}
    except NotPlainError as error:
        return {"error": error.args[0]}
    except Exception as error:
        return {"error": "the value could not be read: " + _NAME(_type(error))}


publish = get_ipython().display_pub.publish
return check, check_that, raised, operand, BUILTINS
"""


def new_nonce() -> str:
    """A fresh name part for one cell's capture functions (``c`` and 16 hex digits)."""
    return "c" + secrets.token_hex(8)


@functools.cache
def _plain_source() -> str:
    """The plain-data module's code, read once, without the lines that only work at module level."""
    module = Path(plain.__file__).read_text(encoding="utf-8")
    module_level = ("from __future__", "from typing")
    return "\n".join(line for line in module.splitlines() if not line.startswith(module_level))


def _setup_source(nonce: str) -> str:
    """A function that builds one cell's capture functions from nothing the learner's code touched.

    The plain-data code (:mod:`jobqueue.teaching.plain`) and the capture functions are
    written into the check cell itself, inside a function, so they are made fresh as the
    cell starts: nothing defined before it (by the learner's cells) is theirs to replace.
    """
    kernel = _KERNEL_SIDE.replace("NONCE", repr(nonce)).replace("KEY", repr(CAPTURE_KEY))
    inner = textwrap.indent(_plain_source() + "\n" + kernel, "    ")
    return f"def _{nonce}_setup():\n{inner}\n"


_COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    # Plain data has no identity of its own: ``is`` holds only between the same singleton.
    ast.Is: lambda a, b: a is b and (a is None or a is True or a is False),
    ast.IsNot: lambda a, b: not (a is b and (a is None or a is True or a is False)),
}


class _ReportedOperands(ast.NodeTransformer):
    """The operands of a condition (each side of a comparison, and every other test) are reported.

    The condition keeps its shape (``and``, ``or``, ``not``, chained comparisons), so the
    kernel evaluates what the checker will evaluate, in the same order and with the same
    short cuts; each operand is replaced by a call that turns it into plain data, records
    it, and hands the plain copy on.
    """

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce

    def report(self, node: ast.expr) -> ast.expr:
        call = ast.Call(ast.Name(f"_{self.nonce}_operand", ast.Load()), [node], [])
        return ast.copy_location(call, node)

    def condition(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.BoolOp):
            node.values = [self.condition(value) for value in node.values]
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = self.condition(node.operand)
            return node
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARISONS for op in node.ops):
            node.left = self.report(node.left)
            node.comparators = [self.report(c) for c in node.comparators]
            return node
        return self.report(node)


def holds(condition: ast.expr, operands: Sequence[object]) -> bool:
    """Whether ``condition`` holds for these reported operands, evaluated here, not in a kernel.

    ``condition`` is a check's condition as the exercise wrote it; ``operands`` are the
    plain values the kernel reported for it, in the order it met them.

    Raises:
        plain.NotPlainError: if there are more or fewer operands than the condition takes,
            or two of them cannot be compared (``None <= 5``).
    """
    left = list(operands)

    def take() -> object:
        if not left:
            raise plain.NotPlainError("the kernel reported fewer values than the condition uses")
        return left.pop(0)

    def value(node: ast.expr) -> object:
        if isinstance(node, ast.BoolOp):
            result: object = None
            for part in node.values:
                result = value(part)
                if bool(result) is isinstance(node.op, ast.Or):
                    return result
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not value(node.operand)
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARISONS for op in node.ops):
            first = take()
            for op in node.ops:
                second = take()
                try:
                    if not _COMPARISONS[type(op)](first, second):
                        return False
                except TypeError as error:
                    raise plain.NotPlainError(f"the values could not be compared: {error}") from None
                first = second
            return True
        return take()

    result = bool(value(condition))
    if left:
        raise plain.NotPlainError("the kernel reported more values than the condition uses")
    return result


def conditions(source: str) -> list[ast.expr]:
    """The conditions of a check cell's ``check_that`` calls, numbered as the rewrite numbers them.

    Raises:
        SyntaxError: if ``source`` is not Python.
    """
    return _conditions(ast.parse(source))


def _conditions(tree: ast.AST) -> list[ast.expr]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id == "check_that" and len(node.args) >= 2:
            found.append(node.args[1])
    return found


class _Redirect(ast.NodeTransformer):
    def __init__(self, nonce: str, conditions: list[ast.expr]) -> None:
        self.nonce = nonce
        self.conditions = conditions

    def visit_Call(self, node: ast.Call) -> ast.AST:  # the ast visitor's naming
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in CHECK_FUNCTIONS:
            if node.func.id == "check_that" and len(node.args) >= 2:
                number = ast.Constant(self.conditions.index(node.args[1]))
                condition = _ReportedOperands(self.nonce).condition(node.args[1])
                given = [k.value for k in node.keywords if k.arg == "explain"]
                explain = node.args[2] if len(node.args) > 2 else (given or [ast.Constant("")])[0]
                function = ast.copy_location(ast.Lambda(_NO_ARGUMENTS, condition), condition)
                node.args = [node.args[0], function, explain, number]
                node.keywords = []
            else:
                node.args = node.args[:2]  # the expected value never reaches the kernel
                node.keywords = [k for k in node.keywords if k.arg != "expected"]
            node.func = ast.copy_location(ast.Name(f"_{self.nonce}_{node.func.id}", ast.Load()), node.func)
        return node


class _TrustedBuiltins(ast.NodeTransformer):
    """Built-in names the cell reads (and never binds) point to the cell's own copies of them."""

    def __init__(self, nonce: str, bound: set[str]) -> None:
        self.nonce = nonce
        self.bound = bound

    def visit_Name(self, node: ast.Name) -> ast.AST:  # the ast visitor's naming
        if isinstance(node.ctx, ast.Load) and node.id in plain.BUILTINS and node.id not in self.bound:
            table = ast.Name(f"_{self.nonce}_builtins", ast.Load())
            return ast.copy_location(ast.Subscript(table, ast.Constant(node.id), ast.Load()), node)
        return node


def bound_names(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds: assigned, deleted, defined, imported or taken as a parameter."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def rewrite_check_cell(source: str, nonce: str) -> str:
    """``source`` with its ``check``/``check_that`` calls sent to this cell's capture functions.

    The cell first builds its own capture functions (:func:`_setup_source`), named with
    ``nonce``, which is new for every cell: the learner's earlier cells cannot know them in
    advance or replace them before the cell starts. ``check`` gets the label and the value
    only: the expected value stays with the checker.

    A ``check_that``'s condition is passed as a function whose operands are turned into
    plain data and reported, with the condition's number in the cell: each side of each
    comparison at the condition's top level (joined by ``and``, ``or``, ``not``), and each
    other test there. The kernel reports what the condition compares, never whether it
    holds: the checker evaluates the condition on those values (:func:`holds`), so an
    object of the learner's own that claims to be smaller or equal is a wrong answer, not
    a pass. A comparison inside a call (``all(a <= b for ...)``) runs in the kernel like
    the rest of its operand, so check cells keep comparisons at the top level (a test of
    the course's checks makes sure).

    The cell runs inside ``try``: an exception is captured as a record (the checks not yet
    made then fail with it) instead of stopping the cell; the capture functions are deleted
    at its end. The built-in names the cell reads (``len``, ``sum``, ``range``…) are the
    cell's own copies (:data:`jobqueue.teaching.plain.BUILTINS`), not whatever the learner
    bound them to before the cell; they stay after it (for the functions it defined that
    later cells call), where later code can reach them as it can any global.

    Raises:
        SyntaxError: if ``source`` is not Python (check cells come from the solution).
    """
    names = [f"_{nonce}_{part}" for part in ("check", "check_that", "raised", "operand", "builtins")]
    tree = ast.parse(source)
    numbered = _conditions(tree)
    tree = _TrustedBuiltins(nonce, bound_names(tree)).visit(tree)
    tree = _Redirect(nonce, numbered).visit(tree)
    wrapper = ast.parse(
        _setup_source(nonce)
        + f"{', '.join(names)} = _{nonce}_setup()\n"
        + f"del _{nonce}_setup\n"
        + f"try:\n    pass\nexcept Exception as _{nonce}_error:\n    _{nonce}_raised(_{nonce}_error)\n"
        + f"finally:\n    del {', '.join(names[:-1])}\n"  # functions the cell defines keep its built-ins
    )
    guard = wrapper.body[-1]
    assert isinstance(guard, ast.Try)
    guard.body = tree.body or [ast.Pass()]
    return ast.unparse(ast.fix_missing_locations(wrapper))


@dataclass(frozen=True)
class Expected:
    """One check as the solution made it: its label, kind and value (plain data as JSON text)."""

    label: str
    kind: str
    value: str | None


def expected_checks(outputs: Sequence[Any]) -> list[Expected]:
    """The checks a check cell made when the solution ran, from its stored outputs."""
    found = []
    for out in outputs:
        record = out.get("metadata", {}).get(VERDICT_KEY)
        if record is not None:
            found.append(Expected(record["label"], record.get("kind", "check"), record.get("value")))
    return found


def captured(outputs: Sequence[Any], nonce: str) -> list[dict[str, Any]]:
    """The records this run's capture functions displayed in a cell, in order."""
    records = []
    for out in outputs:
        record = out.get("metadata", {}).get(CAPTURE_KEY)
        if isinstance(record, dict) and record.get("nonce") == nonce:
            records.append(record)
    return records


def _text(encoded: object, default: str = "") -> str:
    try:
        value = plain.decode(encoded) if isinstance(encoded, str) else default
    except plain.NotPlainError:
        return default
    return value if isinstance(value, str) else show(value)


def judge(expected: Expected, record: dict[str, Any], conditions: Sequence[ast.expr] = ()) -> Verdict:
    """The verdict on one captured record, against the solution's value for the same check.

    A ``check`` passes if the value is the solution's; a ``check_that`` if its condition
    (one of the cell's ``conditions``, by the number the record gives) holds for the
    operands the record reports, evaluated here (:func:`holds`).
    """
    label = expected.label
    if "error" in record:
        return Verdict(label, False, f"wrong answer: {str(record['error'])[:EXPLAIN_CHARS]}")
    if expected.kind == "check_that":
        number = record.get("condition")
        operands = record.get("operands")
        if not (isinstance(number, int) and 0 <= number < len(conditions) and isinstance(operands, list)):
            return Verdict(label, False, "wrong answer: the kernel did not report the condition's values")
        try:
            ok = holds(conditions[number], [plain.decode(str(text)) for text in operands])
        except plain.NotPlainError as error:
            return Verdict(label, False, f"wrong answer: {error}")
        if ok:
            return Verdict(label, True, "")
        explain = _text(record.get("explain"))[:EXPLAIN_CHARS]
        return Verdict(label, False, explain or "the condition does not hold")
    try:
        got = plain.decode(str(record.get("value")))
    except plain.NotPlainError as error:
        return Verdict(label, False, f"wrong answer: {error}")
    want = plain.decode(expected.value) if expected.value is not None else None
    if expected.value is not None and same(got, want):
        return Verdict(label, True, show(got))
    return Verdict(label, False, f"expected {show(want)}, got {show(got)}")


def judge_cell(
    expected: Sequence[Expected], records: Sequence[dict[str, Any]], conditions: Sequence[ast.expr] = ()
) -> list[Verdict]:
    """A verdict for each check the solution made in a cell, from the records of this run.

    ``conditions`` are the cell's ``check_that`` conditions (:func:`conditions`).

    Records are matched to checks by label, in order. A check with no record failed with
    the exception the cell raised (the first one) or did not run. A cell whose kernel
    reported more values than the cell has checks, or a label the cell does not check,
    fails every check: something in the kernel spoke for the checks.
    """
    values: dict[str, list[dict[str, Any]]] = {}
    raised = None
    labels = [check.label for check in expected]
    made = 0
    for record in records:
        if "raised" in record:
            raised = raised or record
            continue
        made += 1
        values.setdefault(_text(record.get("label"), "?"), []).append(record)
    if made > len(expected) or not set(values) <= set(labels):
        reason = f"the kernel reported {made} values for the cell's {len(expected)} checks: wrong answer"
        return [Verdict(label, False, reason) for label in labels]
    verdicts = []
    reported = False
    for check in expected:
        queue = values.get(check.label, [])
        if queue:
            verdicts.append(judge(check, queue.pop(0), conditions))
        elif raised is not None and not reported:
            missing = _text(raised.get("missing_name")) or None
            verdicts.append(Verdict(check.label, False, _text(raised.get("raised")), missing_name=missing))
            reported = True
        elif raised is not None:
            verdicts.append(Verdict(check.label, False, "not run: the cell stopped at the error above"))
        else:
            verdicts.append(Verdict(check.label, False, "did not run"))
    return verdicts
