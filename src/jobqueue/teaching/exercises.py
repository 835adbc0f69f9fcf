"""Exercises: generated from the solutions, checked against the solutions' outputs.

A solution notebook (``solutions/NN_topic.ipynb``) marks the learner's part of a code
cell between ``### BEGIN SOLUTION`` and ``### END SOLUTION``. :func:`make_exercise`
replaces each marked part with a stub (see :func:`strip_solution`) and tags the cell
``answer``. Every other cell keeps its stored outputs, except that the learner's copy
shows the cells tagged ``check`` and ``summary`` unrun (so an unsolved exercise does not
look solved); the copy the checker uses keeps them: they are the expected outputs, which
nbval compares when the solutions are tested.

:func:`check_exercise` takes the answer cells from the learner's notebook, and the code
cells the learner added next to them, puts them into that pristine exercise, runs every
cell in a fresh kernel and reads back the verdict each check recorded as data (see
:mod:`jobqueue.teaching.checks`). What the learner's code prints is never compared, and
the learner's saved outputs are never read, so a saved wrong run cannot pass, and a
right answer passes whatever it prints and whatever outputs were saved. It reports one
line per failed check or failed cell (a syntax error with its line, a missing name with
the cell that should define it), notes that do not fail, and a verdict line.

Usage::

    python -m jobqueue.teaching.exercises check 02_backoff   # one exercise, with a verdict
    python -m jobqueue.teaching.exercises build              # regenerate exercises/
    python -m jobqueue.teaching.exercises verify             # fail if exercises/ is stale
    python -m jobqueue.teaching.exercises grade SUBMISSIONS --out gradebook.csv  # a class
    python -m jobqueue.teaching.exercises check-all          # every started exercise (CI)
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient
from nbformat import NotebookNode

from jobqueue.teaching import capture, output_cap
from jobqueue.teaching.checks import Verdict, check_labels
from jobqueue.teaching.notebooks import CELL_TIMEOUT_S, dumps, normalize, read, write
from jobqueue.teaching.sandbox import Sandbox, Seat, kernel_manager

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("your answer goes here")'
ANSWER_TAG = "answer"
TOP_LEVEL_STUB = "pass  # your answer goes here"
CHECK_TAG = "check"
SUMMARY_TAG = "summary"
ADDED_TAG = "added"
"""Tag of a cell the learner added next to an answer, in the checker's merged copy."""
IGNORE_OUTPUT_TAG = "nbval-ignore-output"

_IPYTHON_SYNTAX = TransformerManager()  # type: ignore[no-untyped-call]  # IPython is untyped


class ExerciseError(Exception):
    """An exercise or solution notebook is malformed, or a learner's answer cell is missing."""


def strip_solution(source: str) -> str:
    """Replace every marked solution block in ``source`` with the stub, keeping indentation.

    Inside a function the stub raises :class:`NotImplementedError`; at the top of a cell
    it is :data:`TOP_LEVEL_STUB`, which does nothing, so Run All goes on to the checks
    (which then say which name is not defined yet).

    Raises:
        ExerciseError: if a ``### BEGIN SOLUTION`` has no matching ``### END SOLUTION``.
    """
    lines: list[str] = []
    inside = False
    for line in source.splitlines():
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ExerciseError(f"nested {BEGIN!r} in:\n{source}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(indent + (STUB if indent else TOP_LEVEL_STUB))
        elif marker == END:
            if not inside:
                raise ExerciseError(f"{END!r} without {BEGIN!r} in:\n{source}")
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise ExerciseError(f"{BEGIN!r} without {END!r} in:\n{source}")
    return "\n".join(lines)


def _tags(cell: NotebookNode) -> list[str]:
    tags: list[str] = cell.metadata.setdefault("tags", [])
    return tags


def make_exercise(solution: NotebookNode, *, expected_outputs: bool = False) -> NotebookNode:
    """Return the exercise generated from ``solution`` (which is left unchanged).

    Args:
        solution: the solution notebook, with marked answers and ``check`` cells.
        expected_outputs: keep the check cells' outputs (the checker's pristine copy);
            by default they are cleared, as in the learner's ``exercises/`` file.

    Raises:
        ExerciseError: if the solution has no marked answer or no ``check`` cell.
    """
    nb = copy.deepcopy(solution)
    answers = 0
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if not expected_outputs and (CHECK_TAG in tags or SUMMARY_TAG in tags):
            cell.outputs = []
            cell.execution_count = None
        if cell.cell_type != "code" or BEGIN not in cell.source:
            continue
        answers += 1
        cell.source = strip_solution(cell.source)
        cell.outputs = []
        cell.execution_count = None
        tags = _tags(cell)
        for tag in (ANSWER_TAG, IGNORE_OUTPUT_TAG):
            if tag not in tags:
                tags.append(tag)
    checks = sum(CHECK_TAG in cell.metadata.get("tags", []) for cell in nb.cells)
    if answers == 0 or checks == 0:
        raise ExerciseError(f"a solution needs marked answers and check cells (found {answers} and {checks})")
    return normalize(nb)


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

    def hint(self, name: str | None, where: NotebookNode) -> str:
        if name is None:
            return ""
        for kind, cell in self.places:
            if name not in _defined_names(cell.source):
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


def find_root(start: Path) -> Path:
    """The course folder: the nearest of ``start`` and its parents holding ``solutions/``.

    Raises:
        ExerciseError: if there is none.
    """
    for folder in (start, *start.parents):
        if (folder / "solutions").is_dir():
            return folder
    raise ExerciseError(f"no solutions/ folder in {start} or above: run this from the course folder")


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


def stale_exercises(root: Path) -> list[Path]:
    """Exercises in ``root/exercises`` that differ from what their solution generates."""
    stale = []
    for solution in sorted((root / "solutions").glob("*.ipynb")):
        target = root / "exercises" / solution.name
        expected = dumps(make_exercise(read(solution)))
        if not target.exists() or target.read_text(encoding="utf-8") != expected:
            stale.append(target)
    return stale


def main(argv: Sequence[str] | None = None, cwd: Path | None = None) -> int:
    """Command line: ``check NAME``, ``build``, ``verify``, ``grade`` or ``check-all``; returns the status."""
    parser = argparse.ArgumentParser(prog="python -m jobqueue.teaching.exercises")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check one exercise and print a verdict")
    check.add_argument("exercise", help="a name such as 02_backoff, or a notebook path")
    sub.add_parser("build", help="regenerate exercises/ from solutions/")
    sub.add_parser("verify", help="fail if a committed exercise differs from its generated form")
    from jobqueue.teaching import grading  # here: grading builds on this module

    grading.add_commands(sub)
    args = parser.parse_args(argv)
    here = cwd if cwd is not None else Path.cwd()
    try:
        if args.command in ("grade", "check-all"):
            return grading.run_command(args, find_root(here))
        if args.command == "check":
            learner, solution = resolve(args.exercise, here)
            print(f"Checking {learner.name} against the expected outputs...")
            result = check_exercise(learner, solution)
            for line in result.problems:
                print(f"  ✗ {line}")
            for line in result.notes:
                print(f"  · {line}")
            print(result.verdict())
            return 0 if result.ok else 1
        root = find_root(here)
        if args.command == "build":
            (root / "exercises").mkdir(exist_ok=True)
            for solution in sorted((root / "solutions").glob("*.ipynb")):
                write(make_exercise(read(solution)), root / "exercises" / solution.name)
                print(f"wrote exercises/{solution.name}")
            return 0
        stale = stale_exercises(root)
        for path in stale:
            print(f"stale: {path.relative_to(root)} (run: python -m jobqueue.teaching.exercises build)")
        return 1 if stale else 0
    except (ExerciseError, grading.GradingError) as exc:
        print(f"error: {exc}")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
