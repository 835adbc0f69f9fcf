"""Exercises: generated from the solutions, checked against the solutions' outputs.

A solution notebook (``solutions/NN_topic.ipynb``) marks the learner's part of a code
cell between ``### BEGIN SOLUTION`` and ``### END SOLUTION``. :func:`make_exercise`
replaces each marked part with a stub that raises :class:`NotImplementedError` and tags
the cell ``answer``. Every other cell keeps its stored outputs, except that the learner's
copy shows the cells tagged ``check`` unrun (so an unsolved exercise does not look
solved); the copy the checker uses keeps their outputs: they are the expected outputs.

:func:`check_exercise` takes only the answer cells from the learner's notebook, puts
them into that pristine exercise, runs it under nbval and reports one line per problem
and a verdict line. The learner's saved outputs are never read, so a saved wrong run
cannot pass, and a right answer passes whatever outputs were saved.

Usage::

    python -m jobqueue.teaching.exercises check 02_backoff   # one exercise, with a verdict
    python -m jobqueue.teaching.exercises build              # regenerate exercises/
    python -m jobqueue.teaching.exercises verify             # fail if exercises/ is stale
    python -m jobqueue.teaching.exercises grade SUBMISSIONS --out gradebook.csv  # a class
    python -m jobqueue.teaching.exercises check-all          # every started exercise (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nbformat import NotebookNode

from jobqueue.teaching.checks import CheckFailed
from jobqueue.teaching.notebooks import dumps, normalize, read, write

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("your answer goes here")'
ANSWER_TAG = "answer"
CHECK_TAG = "check"
IGNORE_OUTPUT_TAG = "nbval-ignore-output"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"^(\w+(?:Error|Exception|Failed|Interrupt)): ?(.*)$")


class ExerciseError(Exception):
    """An exercise or solution notebook is malformed, or a learner's answer cell is missing."""


def strip_solution(source: str) -> str:
    """Replace every marked solution block in ``source`` with the stub, keeping indentation.

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
            lines.append(line[: len(line) - len(line.lstrip())] + STUB)
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
        if not expected_outputs and CHECK_TAG in cell.metadata.get("tags", []):
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

    Raises:
        ExerciseError: naming the cell, if an answer cell is missing from ``learner``.
    """
    sources = {cell.get("id"): cell.source for cell in learner.cells if cell.cell_type == "code"}
    merged = copy.deepcopy(pristine)
    for cell in merged.cells:
        if ANSWER_TAG in cell.metadata.get("tags", []):
            if cell.id not in sources:
                raise ExerciseError(
                    f"{learner_path} has no answer cell {cell.id!r}; answer in the cells that"
                    " raise NotImplementedError, and don't delete them"
                )
            cell.source = sources[cell.id]
    return merged


@dataclass(frozen=True)
class CheckOutcome:
    """One check cell's outcome, as a learner's feedback shows it.

    Attributes:
        ok: whether the cell ran and printed its expected output.
        text: if ``ok``, what it printed (``"label: value"``, the ``✓`` dropped; one line
            per check in the cell); else the one-line problem (``"label: expected X, got Y"``).
    """

    ok: bool
    text: str


@dataclass
class CheckResult:
    """Outcome of checking one exercise.

    Attributes:
        name: the exercise, e.g. ``"02_backoff"``.
        checks: number of check cells.
        passed: check cells that passed.
        problems: one line per failed cell, in notebook order.
        outcomes: one per check cell, in notebook order.
    """

    name: str
    checks: int
    passed: int
    problems: list[str] = field(default_factory=list)
    outcomes: list[CheckOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every cell ran and every check passed."""
        return not self.problems and self.passed == self.checks

    def verdict(self) -> str:
        """The closing line: ``PASS 02_backoff: 3 of 3 checks passed`` (or ``FAIL ...``)."""
        word = "PASS" if self.ok else "FAIL"
        return f"{word} {self.name}: {self.passed} of {self.checks} checks passed"


def _problem_text(longrepr: str) -> str:
    lines = [_ANSI.sub("", line).strip() for line in longrepr.splitlines()]
    for line in reversed(lines):
        match = _ERROR_LINE.match(line)
        if match:
            return f"{match[1]}: {match[2]}".rstrip(": ")
    return "its output differs from the expected output"


class _Collector:
    def __init__(self) -> None:
        self.failed: dict[int, str] = {}
        self.passed: set[int] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        index = int(report.nodeid.rsplit("Cell ", 1)[1])
        if report.failed:
            self.failed.setdefault(index, _problem_text(report.longreprtext))
        elif report.when == "call" and report.passed:
            self.passed.add(index)


def run_checks(nb: NotebookNode, name: str) -> CheckResult:
    """Run ``nb`` under nbval (fresh kernel) and collect the outcome of each cell."""
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    collector = _Collector()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.ipynb"
        path.write_text(dumps(nb), encoding="utf-8")
        args = [str(path), "--nbval", "--nbval-current-env", "-p", "no:cacheprovider", "-q"]
        args += ["--rootdir", tmp, "-o", "addopts=", "-W", "ignore::DeprecationWarning"]
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args, plugins=[collector])
    checks = [i for i, cell in enumerate(code_cells) if CHECK_TAG in cell.metadata.get("tags", [])]
    problems = []
    described: dict[int, str] = {}
    for number, index in enumerate(sorted(collector.failed)):
        problem = collector.failed[index]
        if number > 0 and problem.startswith("NameError"):
            problem += " (an earlier cell failed: fix that one first)"
        failed_check = problem.removeprefix(f"{CheckFailed.__name__}: ")  # its message names the check
        if failed_check == problem:
            failed_check = f"{_describe(code_cells[index])}: {problem}"
        problems.append(failed_check)
        described[index] = failed_check
    ok = {i for i in checks if i in collector.passed and i not in collector.failed}
    texts = {i: _printed(code_cells[i]) if i in ok else described.get(i, "not run") for i in checks}
    outcomes = [CheckOutcome(i in ok, texts[i]) for i in checks]
    return CheckResult(name=name, checks=len(checks), passed=len(ok), problems=problems, outcomes=outcomes)


def _printed(cell: NotebookNode) -> str:
    """The expected printed text of a check cell, without its ``✓`` marks."""
    text = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")
    return "\n".join(line.removeprefix("✓ ") for line in text.strip().splitlines())


_CHECK_LABEL = re.compile(r"""check(?:_that)?\(\s*(?:f?)(["'])(.+?)\1""")


def _describe(cell: NotebookNode) -> str:
    """Name a cell as a learner sees it: by its check's label or its first line of code."""
    tags = cell.metadata.get("tags", [])
    label = _CHECK_LABEL.search(cell.source)
    if CHECK_TAG in tags and label:
        return f"check {label[2]!r}"
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    role = "your answer" if ANSWER_TAG in tags else "check" if CHECK_TAG in tags else "the cell"
    return f"{role} starting {first[:50]!r}"


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


def check_exercise(learner_path: Path, solution_path: Path) -> CheckResult:
    """Check the learner's notebook against the exercise generated from the solution."""
    pristine = make_exercise(read(solution_path), expected_outputs=True)
    merged = merge_answers(pristine, read(learner_path), learner_path)
    return run_checks(merged, learner_path.stem)


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
