"""Checking one exercise: the learner's answers run in the pristine exercise, judged by its stored outputs.

:func:`check_exercise` takes the answer cells from the learner's notebook, and the code
cells the learner added next to them, puts them into the pristine exercise (generated from
the solution with its expected outputs, :func:`~jobqueue.teaching.exercises.generate.make_exercise`),
runs every cell in a fresh kernel and reads back the verdict each check recorded as data
(see :mod:`jobqueue.teaching.checks`). What the learner's code prints is never compared,
and the learner's saved outputs are never read, so a saved wrong run cannot pass, and a
right answer passes whatever it prints and whatever outputs were saved. It reports one
line per failed check or failed cell (a syntax error with its line, a missing name with
the cell that should define it), notes that do not fail, and a verdict line.
"""

from __future__ import annotations

import ast
import copy
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient
from nbformat import NotebookNode

from jobqueue.teaching import capture, output_cap
from jobqueue.teaching.checks import Verdict, check_labels
from jobqueue.teaching.exercises.generate import (
    ANSWER_TAG,
    BEGIN,
    CHECK_TAG,
    ExerciseError,
    find_root,
    make_exercise,
)
from jobqueue.teaching.notebooks import CELL_TIMEOUT_S, read
from jobqueue.teaching.sandbox import Sandbox, Seat, kernel_manager

ADDED_TAG = "added"
"""Tag of a cell the learner added next to an answer, in the checker's merged copy."""

_IPYTHON_SYNTAX = TransformerManager()  # type: ignore[no-untyped-call]  # IPython is untyped


def merge_answers(pristine: NotebookNode, learner: NotebookNode, learner_path: Path) -> NotebookNode:
    """Copy of ``pristine`` whose answer cells hold the learner's code (matched by cell id).

    Code cells the learner added next to an answer cell (with only other added cells in
    between) are part of the answer: they are copied in at the same place. Other added
    cells are left out (see :func:`stray_cells`); edits to other cells are ignored.

    Raises:
        ExerciseError: naming the cell, if an answer cell is missing from ``learner``.
    """
    sources = {cell.get("id"): cell.source for cell in learner.cells if cell.cell_type == "code"}
    before, after = _added_cells(pristine, learner)
    merged = copy.deepcopy(pristine)
    cells: list[NotebookNode] = []
    for cell in merged.cells:
        if ANSWER_TAG in cell.metadata.get("tags", []):
            if cell.id not in sources:
                raise ExerciseError(
                    f"{learner_path} has no answer cell {cell.id!r}; answer in the cells that"
                    " raise NotImplementedError, and don't delete them"
                )
            cell.source = sources[cell.id]
            cells += [_added(c) for c in before.get(cell.id, [])] + [cell]
            cells += [_added(c) for c in after.get(cell.id, [])]
        else:
            cells.append(cell)
    merged.cells = cells
    return merged


def stray_cells(pristine: NotebookNode, learner: NotebookNode) -> list[NotebookNode]:
    """Code cells the learner added away from every answer cell: the checker skips them."""
    before, after = _added_cells(pristine, learner)
    attached = {id(c) for group in (*before.values(), *after.values()) for c in group}
    known = {cell.id for cell in pristine.cells}
    return [
        cell
        for cell in learner.cells
        if cell.cell_type == "code" and cell.get("id") not in known and id(cell) not in attached
    ]


def _added(cell: NotebookNode) -> NotebookNode:
    added = copy.deepcopy(cell)
    added.outputs = []
    added.execution_count = None
    added.metadata["tags"] = [ADDED_TAG]
    return added


def _added_cells(
    pristine: NotebookNode, learner: NotebookNode
) -> tuple[dict[str, list[NotebookNode]], dict[str, list[NotebookNode]]]:
    """Added code cells just before and just after each answer cell, by the answer's id.

    A run of added cells between two exercise cells belongs after the first if it is an
    answer cell, else before the second if that one is.
    """
    by_id = {cell.id: cell for cell in pristine.cells}
    before: dict[str, list[NotebookNode]] = {}
    after: dict[str, list[NotebookNode]] = {}
    previous: str | None = None
    run: list[NotebookNode] = []
    for cell in [*learner.cells, None]:
        if cell is not None and cell.get("id") not in by_id:
            if cell.cell_type == "code":
                run.append(cell)
            continue
        following = None if cell is None else cell.id
        if run:
            if previous is not None and _is_answer(by_id[previous]):
                after.setdefault(previous, []).extend(run)
            elif following is not None and _is_answer(by_id[following]):
                before.setdefault(following, []).extend(run)
        previous, run = following, []
    return before, after


def _is_answer(cell: NotebookNode) -> bool:
    return ANSWER_TAG in cell.metadata.get("tags", [])


def _is_check(cell: NotebookNode) -> bool:
    return CHECK_TAG in cell.metadata.get("tags", [])


@dataclass
class CheckResult:
    """Outcome of checking one exercise.

    Attributes:
        name: the exercise, e.g. ``"02_backoff"``.
        checks: number of checks (``check``/``check_that`` calls in the check cells).
        passed: checks that passed.
        problems: one line per failed check or failed cell, in notebook order.
        notes: lines that explain but do not fail (extra printing, skipped cells).
        verdicts: every check's verdict, in notebook order (a check that did not run too).
    """

    name: str
    checks: int
    passed: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every cell ran and every check passed."""
        return not self.problems and self.passed == self.checks

    def verdict(self) -> str:
        """The closing line: ``PASS 02_backoff: 3 of 3 checks passed`` (or ``FAIL ...``)."""
        word = "PASS" if self.ok else "FAIL"
        return f"{word} {self.name}: {self.passed} of {self.checks} checks passed"


def execute_all(
    nb: NotebookNode,
    folder: Path,
    *,
    sandbox: Sandbox | None = None,
    seat: Seat | None = None,
) -> NotebookNode:
    """Run every cell of ``nb`` in a fresh kernel in ``folder``, going on past errors.

    The kernel runs an IPython start-up file that caps each cell's output
    (:mod:`jobqueue.teaching.output_cap`). It talks to this process over sockets in
    ``folder``, and starts inside ``sandbox`` when one is given (see
    :mod:`jobqueue.teaching.sandbox`).
    """
    ipython_dir = folder / "ipython"
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-output-cap.py").write_text(output_cap.STARTUP, encoding="utf-8")
    client = NotebookClient(
        nb,
        kernel_manager_class=kernel_manager(folder, ipython_dir, sandbox, seat),
        timeout=CELL_TIMEOUT_S,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
        store_widget_state=False,
    )
    client.execute()
    return nb


def expected_labels(cell: NotebookNode) -> list[str]:
    """The labels of the checks a check cell makes (empty if it does not parse)."""
    try:
        return check_labels(ast.parse(_python_source(cell.source)))
    except SyntaxError:
        return []


def _python_source(source: str) -> str:
    """A cell's code with IPython syntax (magics, ``!``) turned into Python."""
    text: str = _IPYTHON_SYNTAX.transform_cell(source)
    return text


def syntax_problem(cell: NotebookNode) -> str | None:
    """``syntax error in <cell>, line 3: '(' was never closed``, or None if the code parses."""
    try:
        compile(_python_source(cell.source), "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as error:
        return f"syntax error in {_describe(cell)}, line {error.lineno}: {error.msg}"
    return None


def run_checks(
    nb: NotebookNode,
    name: str,
    *,
    definitions: Mapping[str, NotebookNode] | None = None,
    stray: Sequence[NotebookNode] = (),
    sandbox: Sandbox | None = None,
    seat: Seat | None = None,
) -> CheckResult:
    """Run ``nb`` (fresh kernel, every cell) and judge each check's value in this process.

    Each check cell runs rewritten (:func:`jobqueue.teaching.capture.rewrite_check_cell`):
    the kernel only hands back the values as plain data, and each is compared here with
    the value the same check recorded when the solution ran (the check cells' stored
    outputs in ``nb``). The kernel hands back values; the verdicts are made here.

    Args:
        nb: the merged exercise: pristine cells with expected outputs, the learner's answers.
        name: the exercise's name for the verdict line.
        definitions: the solution's answer cells by id, to say which cell should define
            a missing name.
        stray: cells the learner added away from the answers, named when they define a
            missing name.
        sandbox: the grader's isolation for the kernel (None: the caller's environment).
        seat: what the kernel is given in ``sandbox`` (:meth:`Sandbox.seat`).
    """
    expected = {cell.id: copy.deepcopy(cell.outputs) for cell in nb.cells if cell.cell_type == "code"}
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    syntax = {cell.id: problem for cell in code_cells if (problem := syntax_problem(cell)) is not None}
    wanted = {}
    nonces = {}
    conditions = {}
    for cell in code_cells:
        if _is_check(cell):
            wanted[cell.id] = capture.expected_checks(cell.outputs)
            nonces[cell.id] = capture.new_nonce()
            conditions[cell.id] = capture.conditions(_python_source(cell.source))
            cell.source = capture.rewrite_check_cell(_python_source(cell.source), nonces[cell.id])
    with tempfile.TemporaryDirectory(prefix="jq-check-") as tmp:
        execute_all(nb, Path(tmp), sandbox=sandbox, seat=seat)
    namer = _Namer(code_cells, definitions or {}, stray)
    problems: list[str] = []
    printed: list[str] = []
    every: list[Verdict] = []
    for cell in code_cells:
        errors = [out for out in cell.outputs if out.output_type == "error"]
        if cell.id in syntax:
            problems.append(syntax[cell.id])
        elif errors:
            error = errors[0]
            text = f"{_describe(cell)}: {error.ename}: {error.evalue}"
            problems.append(text + namer.hint(_missing_name(error.ename, error.evalue), cell))
        if _is_check(cell):
            records = capture.captured(cell.outputs, nonces[cell.id])
            verdicts = capture.judge_cell(wanted[cell.id], records, conditions[cell.id])
            problems += [
                f"{v.label}: {v.detail}" + namer.hint(v.missing_name, cell) for v in verdicts if not v.passed
            ]
            every += verdicts
        if _stdout(cell.outputs) != _stdout(expected[cell.id]) and (_is_check(cell) or _is_answer(cell)):
            printed.append(_describe(cell))
    notes = []
    if printed:
        notes.append(
            f"your code printed output of its own ({', '.join(printed[:2])}{', ...' * (len(printed) > 2)}):"
            " that is fine, the checks judge the values, not the printing"
        )
    notes += [
        f"skipped the cell you added starting {_first_line(c)!r}: it is not next to an answer cell"
        for c in stray
    ]
    passed = sum(verdict.passed for verdict in every)
    return CheckResult(name, len(every), passed, problems=problems, notes=notes, verdicts=every)


def _stdout(outputs: Sequence[NotebookNode]) -> str:
    return "".join(out.text for out in outputs if out.output_type == "stream" and out.name == "stdout")


_MISSING = re.compile(r"^name '(\w+)' is not defined")


def _missing_name(ename: str, evalue: str) -> str | None:
    match = _MISSING.match(evalue) if ename == "NameError" else None
    return match[1] if match else None


class _Namer:
    """Says which cell should define a missing name."""

    def __init__(
        self,
        cells: Sequence[NotebookNode],
        definitions: Mapping[str, NotebookNode],
        stray: Sequence[NotebookNode],
    ) -> None:
        self.cells = {cell.id: cell for cell in cells}
        self.places: list[tuple[str, NotebookNode]] = [("stray", cell) for cell in stray]
        self.places += [("answer", cell) for cell in definitions.values()]
        self.places += [("cell", cell) for cell in cells if not _is_answer(cell)]

    @cached_property
    def _defined(self) -> list[tuple[str, NotebookNode, set[str]]]:
        """Each place with the names its cell defines, parsed once for every hint of a run."""
        return [(kind, cell, _defined_names(cell.source)) for kind, cell in self.places]

    def hint(self, name: str | None, where: NotebookNode) -> str:
        if name is None:
            return ""
        for kind, cell, names in self._defined:
            if name not in names:
                continue
            if kind == "stray":
                added = f"the cell you added starting {_first_line(cell)!r}"
                return f" ({added} defines it: move it next to an answer cell)"
            if kind == "answer":
                return f" (define it in {_describe(self.cells.get(cell.id, cell))})"
            if cell.id != where.id:
                return f" ({_describe(cell)} defines it: fix that cell first)"
        return ""


def _defined_names(source: str) -> set[str]:
    try:
        tree = ast.parse(_python_source(source))
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _first_line(cell: NotebookNode) -> str:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return first[:50]


_CHECK_LABEL = re.compile(r"""check(?:_that)?\(\s*(?:f?)(["'])(.+?)\1""")


def _describe(cell: NotebookNode) -> str:
    """Name a cell as a learner sees it: by its check's label or its first line of code."""
    tags = cell.metadata.get("tags", [])
    label = _CHECK_LABEL.search(cell.source)
    if CHECK_TAG in tags and label:
        return f"check {label[2]!r}"
    role = (
        "your answer cell"
        if ANSWER_TAG in tags
        else "the cell you added"
        if ADDED_TAG in tags
        else "check"
        if CHECK_TAG in tags
        else "the cell"
    )
    return f"{role} starting {_first_line(cell)!r}"


def resolve(exercise: str, cwd: Path) -> tuple[Path, Path]:
    """Map ``02_backoff`` or ``exercises/02_backoff.ipynb`` to (learner file, solution file).

    Raises:
        ExerciseError: naming the exercise, if no such solution exists.
    """
    given = Path(exercise)
    path = given if given.is_absolute() else cwd / given
    if given.suffix == ".ipynb" and path.exists():
        learner = path
        root = find_root(learner.resolve().parent)
    else:
        root = find_root(cwd)
        learner = root / "exercises" / f"{given.name.removesuffix('.ipynb')}.ipynb"
    solution = root / "solutions" / learner.name
    if not solution.exists():
        known = ", ".join(sorted(p.stem for p in (root / "solutions").glob("*.ipynb")))
        raise ExerciseError(f"no exercise named {learner.stem!r} (exercises: {known})")
    return learner, solution


def check_exercise(
    learner_path: Path, solution_path: Path, *, sandbox: Sandbox | None = None, seat: Seat | None = None
) -> CheckResult:
    """Check the learner's notebook against the exercise generated from the solution.

    Args:
        learner_path: the learner's notebook.
        solution_path: the solution it is checked against.
        sandbox: the grader's isolation for the kernel (None for ``make check``).
        seat: what the kernel is given in ``sandbox`` (:meth:`Sandbox.seat`).
    """
    solution = read(solution_path)
    pristine = make_exercise(solution, expected_outputs=True)
    learner = read(learner_path)
    merged = merge_answers(pristine, learner, learner_path)
    definitions = {cell.id: cell for cell in solution.cells if BEGIN in cell.source}
    stray = stray_cells(pristine, learner)
    return run_checks(
        merged, learner_path.stem, definitions=definitions, stray=stray, sandbox=sandbox, seat=seat
    )
