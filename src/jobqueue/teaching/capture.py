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
``check_that``, the plain ``True``. A value that is not plain data is a wrong answer with
a one-line reason.
"""

from __future__ import annotations

import ast
import functools
import secrets
import textwrap
from collections.abc import Sequence
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


def check_that(label, ok, explain=""):
    try:
        ok = ok()  # the condition, its comparisons made on plain copies of their operands
    except NotPlainError as error:
        emit({"label": as_data(label).get("value", '""'), "kind": "check_that", "error": error.args[0]})
        return
    emit({"label": as_data(label).get("value", '""'), "kind": "check_that", **as_data(ok),
          "explain": as_data(explain).get("value", '""')})


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
return check, check_that, raised, normalize
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


class _PlainOperands(ast.NodeTransformer):
    """Each operand of each comparison goes through the kernel's ``normalize`` first."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce

    def wrap(self, node: ast.expr) -> ast.expr:
        call = ast.Call(ast.Name(f"_{self.nonce}_plain", ast.Load()), [node], [])
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:  # the ast visitor's naming
        self.generic_visit(node)
        if all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            return node  # identity (``x is None``) cannot be faked
        node.left = self.wrap(node.left)
        node.comparators = [self.wrap(c) for c in node.comparators]
        return node


class _Redirect(ast.NodeTransformer):
    def __init__(self, nonce: str) -> None:
        self.nonce = nonce

    def visit_Call(self, node: ast.Call) -> ast.AST:  # the ast visitor's naming
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in CHECK_FUNCTIONS:
            if node.func.id == "check_that" and len(node.args) >= 2:
                condition = _PlainOperands(self.nonce).visit(node.args[1])
                node.args[1] = ast.copy_location(ast.Lambda(_NO_ARGUMENTS, condition), condition)
            else:
                node.args = node.args[:2]  # the expected value never reaches the kernel
                node.keywords = [k for k in node.keywords if k.arg != "expected"]
            node.func = ast.copy_location(ast.Name(f"_{self.nonce}_{node.func.id}", ast.Load()), node.func)
        return node


_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def rewrite_check_cell(source: str, nonce: str) -> str:
    """``source`` with its ``check``/``check_that`` calls sent to this cell's capture functions.

    The cell first builds its own capture functions (:func:`_setup_source`), named with
    ``nonce``, which is new for every cell: the learner's earlier cells cannot know or
    replace them. ``check`` gets the label and the value only: the expected value stays
    with the checker. A ``check_that``'s condition is passed as a function, and each
    comparison in it is made on plain copies of its operands
    (:func:`jobqueue.teaching.plain.normalize`), so that an object of the learner's own that
    claims to be smaller or equal is a wrong answer, not a pass. The cell runs inside
    ``try``: an exception is captured as a record (the checks not yet made then fail with
    it) instead of stopping the cell; the capture functions are deleted at its end.

    Raises:
        SyntaxError: if ``source`` is not Python (check cells come from the solution).
    """
    names = [f"_{nonce}_{part}" for part in ("check", "check_that", "raised", "plain")]
    tree = _Redirect(nonce).visit(ast.parse(source))
    wrapper = ast.parse(
        _setup_source(nonce)
        + f"{', '.join(names)} = _{nonce}_setup()\n"
        + f"del _{nonce}_setup\n"
        + f"try:\n    pass\nexcept Exception as _{nonce}_error:\n    _{nonce}_raised(_{nonce}_error)\n"
        + f"finally:\n    del {', '.join(names)}\n"
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


def judge(expected: Expected, record: dict[str, Any]) -> Verdict:
    """The verdict on one captured record, against the solution's value for the same check."""
    label = expected.label
    if "error" in record:
        return Verdict(label, False, f"wrong answer: {str(record['error'])[:EXPLAIN_CHARS]}")
    try:
        got = plain.decode(str(record.get("value")))
    except plain.NotPlainError as error:
        return Verdict(label, False, f"wrong answer: {error}")
    if expected.kind == "check_that":
        if got is True:
            return Verdict(label, True, "")
        explain = _text(record.get("explain"))[:EXPLAIN_CHARS]
        return Verdict(label, False, explain or "the condition does not hold")
    want = plain.decode(expected.value) if expected.value is not None else None
    if expected.value is not None and same(got, want):
        return Verdict(label, True, show(got))
    return Verdict(label, False, f"expected {show(want)}, got {show(got)}")


def judge_cell(expected: Sequence[Expected], records: Sequence[dict[str, Any]]) -> list[Verdict]:
    """A verdict for each check the solution made in a cell, from the records of this run.

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
            verdicts.append(judge(check, queue.pop(0)))
        elif raised is not None and not reported:
            missing = _text(raised.get("missing_name")) or None
            verdicts.append(Verdict(check.label, False, _text(raised.get("raised")), missing_name=missing))
            reported = True
        elif raised is not None:
            verdicts.append(Verdict(check.label, False, "not run: the cell stopped at the error above"))
        else:
            verdicts.append(Verdict(check.label, False, "did not run"))
    return verdicts
