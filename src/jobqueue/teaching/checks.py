"""What an exercise's check cells call: compare an answer and record the verdict as data.

Each :func:`check` or :func:`check_that` shows one line, ``✓ label: value`` or
``✗ label: expected X, got Y``, and never raises, so Run All reaches every check. The
line is a display output whose metadata holds the verdict and the checked value as plain
data (:data:`VERDICT_KEY`, :mod:`jobqueue.teaching.plain`). These lines are the learner's
feedback while they work, and, in the solutions, the record of the expected values: the
checker (``make check``, ``make grade``) never trusts a verdict made in a learner's
kernel; it runs the check cells rewritten and judges the values itself
(:mod:`jobqueue.teaching.capture`). nbval compares the line itself, so a pristine exercise
run with a wrong or missing answer still differs from its expected output.

A check cell's own code calls the learner's functions before :func:`check` sees a
value, and an exception there would stop Run All. Importing this module inside IPython
therefore installs :class:`CheckCellGuard`: a cell that calls ``check``/``check_that``
runs inside ``try``; if it raises, every check of the cell not yet shown is shown as
failed with the exception in one line (``✗ label: NotImplementedError: your answer goes
here (in full_jitter_s, line 4 of its cell)``). :func:`summary` closes an exercise with
``3 of 4 checks pass``.
"""

from __future__ import annotations

import ast
import math
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jobqueue.teaching import plain

VERDICT_KEY = "jobqueue.check"
"""Key of a check line's output metadata that holds its :class:`Verdict` as a dict."""

CHECK_FUNCTIONS = frozenset({"check", "check_that"})
"""Names whose calls make a cell a check cell (for the guard and for counting checks)."""

_PACKAGE = Path(__file__).resolve().parent.parent
_latest: dict[str, bool] = {}  # label -> passed, for summary(); latest run of each check wins
_shown_in_cell: list[str] = []  # labels shown since the running check cell started


@dataclass(frozen=True)
class Verdict:
    """One check's outcome, as the checker reads it back from the notebook.

    Attributes:
        label: what is checked, e.g. ``"random 0, attempts 1..6"``.
        passed: whether the answer is right.
        detail: the value when passed; otherwise why not (``expected X, got Y``, the
            check's explanation, or the exception the cell raised).
        missing_name: the undefined name, when the check failed with a ``NameError``.
        kind: ``"check"`` or ``"check_that"``.
        value: the value checked, as plain data (JSON text, see
            :mod:`jobqueue.teaching.plain`), or None when it is not plain data. The
            solution's stored values are what the checker compares a learner's with.
    """

    label: str
    passed: bool
    detail: str
    missing_name: str | None = None
    kind: str = "check"
    value: str | None = None

    def line(self) -> str:
        """The line a learner sees: ``✓ label: detail`` or ``✗ label: detail``."""
        mark = "✓" if self.passed else "✗"
        return f"{mark} {self.label}: {self.detail}" if self.detail else f"{mark} {self.label}"


def show(value: object) -> str:
    """Format a value for a check line: numbers with ``:g``, containers recursively.

    ``show([0.5, 1.0, 2.0]) == "[0.5, 1, 2]"``; dict keys are sorted so the text is the
    same in every kernel.
    """
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{show(k)}: {show(value[k])}" for k in sorted(value, key=repr)) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return repr(value)


def same(got: object, expected: object, *, rel_tol: float = 1e-9) -> bool:
    """Whether ``got`` equals ``expected``, numbers compared with ``math.isclose``."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=1e-12)
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
    if isinstance(expected, Sequence) and not isinstance(expected, str):
        if not isinstance(got, Sequence) or isinstance(got, str) or len(got) != len(expected):
            return False
        return all(same(g, e) for g, e in zip(got, expected, strict=True))
    return got == expected


def record(verdict: Verdict) -> None:
    """Show ``verdict``'s line, with the verdict itself in the output's metadata.

    Outside IPython the line is printed. The verdict also counts for :func:`summary`.
    """
    _latest[verdict.label] = verdict.passed
    _shown_in_cell.append(verdict.label)
    shell = _shell()
    if shell is None:
        print(verdict.line())
        return
    from IPython.display import display

    bundle = {"text/plain": verdict.line()}
    display(bundle, raw=True, metadata={VERDICT_KEY: asdict(verdict)})  # type: ignore[no-untyped-call]


def check(label: str, got: object, expected: object) -> None:
    """Show ``✓ label: got`` if ``got`` matches ``expected`` (see :func:`same`), else ``✗``.

    The failure line reads ``✗ label: expected X, got Y``. Never raises.
    """
    value = _plain(got)
    if same(got, expected):
        record(Verdict(label, True, show(got), value=value))
    else:
        record(Verdict(label, False, f"expected {show(expected)}, got {show(got)}", value=value))


def check_that(label: str, ok: bool, explain: str) -> None:
    """Show ``✓ label`` if ``ok``, else ``✗ label: explain``. Never raises.

    For answers that may differ from learner to learner (a policy with a property), where
    showing the value would make the expected output depend on the answer.
    """
    value = _plain(ok)
    kind = "check_that"
    record(
        Verdict(label, True, "", kind=kind, value=value)
        if ok
        else Verdict(label, False, explain, kind=kind, value=value)
    )


def _plain(value: object) -> str | None:
    try:
        return plain.encode(value)
    except plain.NotPlainError:
        return None


def summary() -> None:
    """Print how many of the checks run in this kernel pass: ``3 of 4 checks pass``.

    The latest run of each check counts (a check is known by its label).
    """
    print(f"{sum(_latest.values())} of {len(_latest)} checks pass")


def check_labels(cell: ast.Module) -> list[str]:
    """Labels of the ``check``/``check_that`` calls a cell makes itself, in source order.

    Calls inside function or class bodies are left out: they run when called, not as part
    of this cell. A label that is not a plain string is given as ``"check N"``.
    """
    labels: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CHECK_FUNCTIONS:
            first = node.args[0] if node.args else None
            is_text = isinstance(first, ast.Constant) and isinstance(first.value, str)
            labels.append(first.value if is_text else f"check {len(labels) + 1}")  # type: ignore[union-attr]
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in cell.body:
        visit(statement)
    return labels


def cell_started() -> None:
    """Called by the guard as a check cell starts: forget which labels were shown."""
    _shown_in_cell.clear()


def cell_raised(error: BaseException, labels: Sequence[str]) -> None:
    """Called by the guard when a check cell raised: fail each of its checks not yet shown."""
    shown = set(_shown_in_cell)
    missing = error.name if isinstance(error, NameError) else None
    text = error_text(error)
    unshown = [label for label in labels if label not in shown]
    for number, label in enumerate(unshown):
        if number == 0:
            record(Verdict(label, False, text, missing_name=missing))
        else:
            record(Verdict(label, False, "not run: the cell stopped at the error above"))


def error_text(error: BaseException) -> str:
    """``NotImplementedError: your answer goes here (in f, line 4 of its cell)``: one line."""
    return f"{type(error).__name__}: {error}".rstrip(": ") + _where(error)


def _where(error: BaseException) -> str:
    """`` (in f, line 4 of its cell)`` for the innermost frame outside Python and jobqueue."""
    inner = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        path = frame.f_code.co_filename
        if not (path.startswith((sys.prefix, sys.base_prefix, str(_PACKAGE))) or path.startswith("<")):
            inner = (frame.f_code.co_name, line)
    if inner is None or inner[0] == "<module>":
        return ""
    return f" (in {inner[0]}, line {inner[1]} of its cell)"


class CheckCellGuard(ast.NodeTransformer):
    """IPython AST transformer: a cell that calls ``check`` runs inside ``try``.

    ``cell body`` becomes ``try: cell_started(); body`` / ``except Exception as e:
    cell_raised(e, labels)``, so an exception in a check cell becomes failed checks and
    Run All goes on. Cells without a check call are left unchanged.
    """

    def visit_Module(self, node: ast.Module) -> ast.Module:  # the ast visitor's naming
        """Wrap the cell if it makes check calls."""
        labels = check_labels(node)
        if not labels:
            return node
        module = f"__import__({__name__!r}, fromlist=['_'])"
        guard = ast.parse(
            f"try:\n    {module}.cell_started()\n"
            f"except Exception as __check_error:\n    {module}.cell_raised(__check_error, {labels!r})\n"
        )
        wrapper = guard.body[0]
        assert isinstance(wrapper, ast.Try)
        wrapper.body.extend(node.body)
        node.body = [wrapper]
        return ast.fix_missing_locations(node)


def _shell() -> Any:
    """The running IPython shell, or None outside IPython."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    return get_ipython()


def install_guard() -> None:
    """Add :class:`CheckCellGuard` to the running IPython shell once (no-op outside IPython)."""
    shell = _shell()
    if shell is None:
        return
    if not any(isinstance(t, CheckCellGuard) for t in shell.ast_transformers):
        shell.ast_transformers.append(CheckCellGuard())


install_guard()
