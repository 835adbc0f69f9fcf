"""Exercises generated from the solutions: the learner's part of each answer cell replaced by a stub.

A solution notebook (``solutions/NN_topic.ipynb``) marks the learner's part of a code
cell between ``### BEGIN SOLUTION`` and ``### END SOLUTION``. :func:`make_exercise`
replaces each marked part with a stub (see :func:`strip_solution`) and tags the cell
``answer``. Every other cell keeps its stored outputs, except that the learner's copy
shows the cells tagged ``check`` and ``summary`` unrun (so an unsolved exercise does not
look solved); the copy the checker uses keeps them: they are the expected outputs, which
nbval compares when the solutions are tested. The model is nbgrader's: a solution with
marked answers is the source of the student's version.
"""

from __future__ import annotations

import copy
from pathlib import Path

from nbformat import NotebookNode

from jobqueue.teaching.notebooks import dumps, normalize, read

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("your answer goes here")'
ANSWER_TAG = "answer"
TOP_LEVEL_STUB = "pass  # your answer goes here"
CHECK_TAG = "check"
SUMMARY_TAG = "summary"
IGNORE_OUTPUT_TAG = "nbval-ignore-output"


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


def find_root(start: Path) -> Path:
    """The course folder: the nearest of ``start`` and its parents holding ``solutions/``.

    Raises:
        ExerciseError: if there is none.
    """
    for folder in (start, *start.parents):
        if (folder / "solutions").is_dir():
            return folder
    raise ExerciseError(f"no solutions/ folder in {start} or above: run this from the course folder")


def stale_exercises(root: Path) -> list[Path]:
    """Exercises in ``root/exercises`` that differ from what their solution generates."""
    stale = []
    for solution in sorted((root / "solutions").glob("*.ipynb")):
        target = root / "exercises" / solution.name
        expected = dumps(make_exercise(read(solution)))
        if not target.exists() or target.read_text(encoding="utf-8") != expected:
            stale.append(target)
    return stale
