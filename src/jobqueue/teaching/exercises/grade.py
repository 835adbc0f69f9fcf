"""Grade a whole class: each learner's exercises checked in isolation, a gradebook and feedback.

``SUBMISSIONS`` holds one folder per learner (the folder's name is the learner) with
exercise notebooks named as in ``exercises/``. Each learner × exercise is checked as
``make check`` checks it (:func:`~jobqueue.teaching.exercises.check.check_exercise`: only the
answer cells are taken, into the pristine exercise, in a fresh kernel), but in a process of
its own, in a temporary folder of its own, with a time limit: a notebook still running
after ``timeout_s`` is killed with its kernel and graded ``TIMEOUT``. Check cells always
come from the pristine exercise; a learner's edited or deleted check cell changes nothing
but a note in the feedback. A notebook with every answer as generated is graded ``FAIL``
without a kernel (see :func:`not_started`). The kernel only hands back the checked values
as plain data; the verdicts are made in the grader (:mod:`jobqueue.teaching.capture`), and
each kernel runs in the run's :class:`~jobqueue.teaching.sandbox.Sandbox`, the strongest
isolation the machine allows, which :func:`run_grading` names first.

The verdicts: ``PASS`` (every check passed), ``FAIL`` (some check did not pass, or none
was started), ``ERROR: <reason>`` (the notebook could not be checked: not a notebook, an
answer cell deleted, not handed in) and ``TIMEOUT``. The model is nbgrader's and
otter-grader's: a gradebook, per-check scores, feedback files and a per-notebook time
limit, with the course's own checker (:mod:`jobqueue.teaching.exercises.check`) as the engine.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from nbformat import NotebookNode
from tqdm import tqdm

from jobqueue.teaching.capture import expected_checks
from jobqueue.teaching.exercises.check import CheckResult
from jobqueue.teaching.exercises.generate import ANSWER_TAG, CHECK_TAG, make_exercise
from jobqueue.teaching.exercises.isolation import check_isolated, unreadable
from jobqueue.teaching.notebooks import read
from jobqueue.teaching.sandbox import Sandbox, SandboxError

DATABASE_MARK = "postgres_server"
"""Text in an exercise's code that says it uses the course's PostgreSQL server."""

GRADE_TIMEOUT_S = 60.0
"""Longest one learner's notebook may take to check (kernel start and every cell), in seconds."""

REASON_CHARS = 200
"""Longest one-line reason or check line kept in a gradebook or feedback file, in characters."""

COLUMNS = ("student", "exercise", "passed", "total", "verdict")
"""The gradebook's CSV header."""

_SPACE = re.compile(r"\s+")


class GradingError(Exception):
    """The grading run cannot start: a bad submissions folder, exercise name or option."""


@dataclass(frozen=True, kw_only=True)
class Grade:
    """One learner's grade for one exercise: a gradebook row and its feedback.

    Attributes:
        student: the learner (their folder's name).
        exercise: the exercise, e.g. ``"02_backoff"``.
        passed: checks passed.
        total: checks in the exercise.
        verdict: ``PASS``, ``FAIL``, ``ERROR: <one-line reason>`` or ``TIMEOUT``.
        checks: one line per check, ``"✓ label: value"`` or ``"✗ label: expected X, got Y"``.
        notes: what else the learner should know (tampered check cells, earlier errors).
    """

    student: str
    exercise: str
    passed: int
    total: int
    verdict: str
    checks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def row(self) -> tuple[str, str, int, int, str]:
        """The gradebook row, in :data:`COLUMNS` order."""
        return (self.student, self.exercise, self.passed, self.total, self.verdict)


@dataclass(frozen=True)
class Exercise:
    """An exercise as the grader needs it: its solution and the pristine check cells.

    Attributes:
        name: e.g. ``"02_backoff"``.
        solution: path of the solution notebook.
        total: number of checks (``check``/``check_that`` calls in its check cells).
        check_sources: each check cell's source, by cell id.
        answer_sources: each answer cell's source as generated (the stub), by cell id.
        cell_ids: the ids of all its cells.
        needs_database: whether its notebook uses the course's PostgreSQL server.
    """

    name: str
    solution: Path
    total: int
    check_sources: dict[str, str] = field(repr=False)
    answer_sources: dict[str, str] = field(repr=False)
    cell_ids: frozenset[str] = field(repr=False)
    needs_database: bool = False

    @classmethod
    def load(cls, solution: Path) -> Exercise:
        """Read a solution and the check cells of the exercise it generates.

        Raises:
            ExerciseError: if the solution is malformed (see ``make_exercise``).
        """
        pristine = make_exercise(read(solution), expected_outputs=True)
        check_cells = [c for c in pristine.cells if CHECK_TAG in c.metadata.get("tags", [])]
        checks = {c.id: c.source for c in check_cells}
        total = sum(len(expected_checks(c.outputs)) for c in check_cells)
        answers = {c.id: c.source for c in pristine.cells if ANSWER_TAG in c.metadata.get("tags", [])}
        ids = frozenset(c.id for c in pristine.cells)
        database = any(DATABASE_MARK in c.source for c in pristine.cells if c.cell_type == "code")
        return cls(solution.stem, solution, total, checks, answers, ids, database)


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` on one line (whitespace runs become one space), cut to ``limit`` characters."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def course_exercises(root: Path, names: Sequence[str] = ()) -> list[Exercise]:
    """The exercises of the course at ``root`` (all, or those named), in order.

    Raises:
        GradingError: naming the exercise, if a name has no solution in ``root/solutions``.
    """
    solutions = {p.stem: p for p in sorted((root / "solutions").glob("*.ipynb"))}
    unknown = [name for name in names if name not in solutions]
    if unknown:
        raise GradingError(f"no exercise named {unknown[0]!r} (exercises: {', '.join(solutions)})")
    return [Exercise.load(solutions[name]) for name in (names or list(solutions))]


def tampering(exercise: Exercise, learner: NotebookNode) -> list[str]:
    """Notes on check cells the learner edited or deleted (the pristine ones run anyway)."""
    cells = {c.get("id"): c.source for c in learner.cells}
    notes = []
    for cell_id, source in exercise.check_sources.items():
        if cell_id not in cells:
            notes.append(f"check cell {cell_id!r} is missing from your notebook; the original was run")
        elif cells[cell_id] != source:
            notes.append(f"check cell {cell_id!r} was edited in your notebook; the original was run")
    return notes


def grade(
    student: str,
    folder: Path,
    exercise: Exercise,
    timeout_s: float = GRADE_TIMEOUT_S,
    sandbox: Sandbox | None = None,
) -> Grade:
    """Grade one learner's notebook for one exercise; every outcome is a grade, never a raise.

    Args:
        student: the learner's name, as the gradebook shows it.
        folder: the learner's folder; the notebook is ``folder / f"{exercise.name}.ipynb"``.
        exercise: the exercise.
        timeout_s: time limit for the whole notebook, in seconds.
        sandbox: where the kernel runs (None: as the caller, for a learner's own work).
    """
    path = folder / f"{exercise.name}.ipynb"
    row = functools.partial(Grade, student=student, exercise=exercise.name, total=exercise.total)
    if path.is_symlink() or folder.is_symlink():  # a link could hand in another's work, or a solution
        return row(passed=0, verdict=f"ERROR: {path.name} is a link, not a notebook handed in")
    if not path.is_file():
        return row(passed=0, verdict=f"ERROR: no {path.name} handed in")
    try:
        learner = read(path)
    except Exception as exc:  # not a notebook: no need to start a kernel
        return row(passed=0, verdict=f"ERROR: {one_line(unreadable(exc))}")
    notes = tuple(tampering(exercise, learner))
    if not_started(exercise, learner):
        return row(passed=0, verdict="FAIL", notes=(*notes, "not started: every answer cell is as generated"))
    status, value = check_isolated(path, exercise.solution, timeout_s, sandbox)
    if status == "timeout":
        note = f"the notebook was still running after {timeout_s:g} s and was stopped (an endless loop?)"
        return row(passed=0, verdict="TIMEOUT", notes=(*notes, note))
    if status == "error" or not isinstance(value, CheckResult):
        return row(passed=0, verdict=f"ERROR: {one_line(str(value))}", notes=notes)
    checks = tuple(one_line(v.line()) for v in value.verdicts)
    shown = tuple(f"{v.label}: {v.detail}" for v in value.verdicts)
    others = [one_line(p) for p in value.problems if not p.startswith(shown)]  # failed cells
    notes += tuple([*others, *(one_line(n) for n in value.notes)])
    verdict = "PASS" if value.ok else "FAIL"
    return row(passed=value.passed, total=value.checks, verdict=verdict, checks=checks, notes=notes)


def learners(submissions: Path) -> list[tuple[str, Path]]:
    """The learners' folders in ``submissions``, by name (hidden folders skipped).

    Raises:
        GradingError: if ``submissions`` is not a folder or holds no learner folder.
    """
    if not submissions.is_dir():
        raise GradingError(f"submissions folder {str(submissions)!r} does not exist or is not a folder")
    found = [(p.name, p) for p in sorted(submissions.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not found:
        raise GradingError(f"{str(submissions)!r} holds no learner folder (one folder per learner)")
    return found


def grade_all(
    tasks: Iterable[tuple[str, Path, Exercise]],
    timeout_s: float = GRADE_TIMEOUT_S,
    jobs: int | None = None,
    progress: bool | None = None,
    sandbox: Sandbox | None = None,
) -> list[Grade]:
    """Grade each ``(student, folder, exercise)``, ``jobs`` at a time, in the order given.

    Args:
        tasks: what to grade.
        timeout_s: time limit per notebook, in seconds.
        jobs: notebooks checked at once; by default the number of usable cores.
        progress: show a progress bar on stderr; by default only on a terminal.
        sandbox: where the kernels run (see :func:`grade`).

    Raises:
        GradingError: if ``timeout_s`` is not positive or ``jobs`` is below 1.
    """
    if not timeout_s > 0:
        raise GradingError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers < 1:
        raise GradingError(f"jobs must be at least 1, got {workers!r}")
    todo = list(tasks)
    grades: dict[int, Grade] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(grade, s, f, e, timeout_s, sandbox): i for i, (s, f, e) in enumerate(todo)}
        bar = tqdm(total=len(todo), unit="notebook", disable=None if progress is None else not progress)
        with bar:
            for future in as_completed(futures):
                grades[futures[future]] = _result(future, todo[futures[future]])
                bar.update()
    return [grades[i] for i in range(len(todo))]


def _result(future: Future[Grade], task: tuple[str, Path, Exercise]) -> Grade:
    """The grade, or ``ERROR`` naming the grader's own failure: one bad task never stops a run."""
    try:
        return future.result()
    except Exception as exc:
        student, _, exercise = task
        reason = one_line(f"the grader failed: {type(exc).__name__}: {exc}")
        return Grade(
            student=student,
            exercise=exercise.name,
            passed=0,
            total=exercise.total,
            verdict=f"ERROR: {reason}",
        )


def write_gradebook(grades: Sequence[Grade], out: Path) -> None:
    """Write the gradebook CSV (:data:`COLUMNS`), replacing ``out`` only once it is complete."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    with partial.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS)
        writer.writerows(grade.row() for grade in grades)
    partial.replace(out)


def feedback(student: str, grades: Sequence[Grade]) -> str:
    """One learner's feedback in markdown: per exercise its verdict, each check ✓/✗, notes."""
    lines = [f"# Feedback for {student}", ""]
    for g in grades:
        lines += [f"## {g.exercise}: {g.verdict}, {g.passed} of {g.total} checks passed", ""]
        lines += [f"- {line}" for line in g.checks]
        lines += [f"- note: {note}" for note in g.notes]
        lines.append("")
    return "\n".join(lines)


def write_feedback(grades: Sequence[Grade], folder: Path) -> list[Path]:
    """Write ``folder/<student>.md`` for each learner; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for student in dict.fromkeys(g.student for g in grades):
        path = folder / f"{student}.md"
        path.write_text(feedback(student, [g for g in grades if g.student == student]), encoding="utf-8")
        written.append(path)
    return written


def _cell(g: Grade) -> str:
    if g.verdict in ("PASS", "TIMEOUT"):
        return g.verdict
    if g.verdict == "FAIL":
        return f"{g.passed}/{g.total}"
    return "MISSING" if g.verdict.endswith("handed in") else "ERROR"


def summary(grades: Sequence[Grade]) -> str:
    """A plain-text table, learners × exercises (by number): ``PASS``, ``2/4`` (failed), ``ERROR``..."""
    students = list(dict.fromkeys(g.student for g in grades))
    names = list(dict.fromkeys(g.exercise for g in grades))
    cells = {(g.student, g.exercise): _cell(g) for g in grades}
    width = max(len("student"), *(len(s) for s in students))
    heads = [name.split("_", 1)[0] for name in names]
    wide = [
        max(len(h), *(len(cells.get((s, n), "")) for s in students))
        for h, n in zip(heads, names, strict=True)
    ]
    rows = ["  ".join([f"{'student':<{width}}", *(f"{h:<{w}}" for h, w in zip(heads, wide, strict=True))])]
    for s in students:
        row = [f"{cells.get((s, n), ''):<{w}}" for n, w in zip(names, wide, strict=True)]
        rows.append("  ".join([f"{s:<{width}}", *row]).rstrip())
    return "\n".join(rows)


def run_grading(
    submissions: Path,
    root: Path,
    out: Path,
    *,
    exercises: Sequence[str] = (),
    feedback_dir: Path | None = None,
    timeout_s: float = GRADE_TIMEOUT_S,
    jobs: int | None = None,
    echo: Callable[[str], None] = print,
) -> list[Grade]:
    """Grade every learner in ``submissions``; write the gradebook and feedback; print a summary.

    Args:
        submissions: one folder per learner.
        root: the teacher's course folder (its ``solutions/`` define the exercises).
        out: the gradebook CSV to write.
        exercises: exercise names to grade (default: all).
        feedback_dir: where ``<student>.md`` files go (default: ``feedback/`` beside ``out``).
        timeout_s: time limit per notebook, in seconds.
        jobs: notebooks checked at once (default: the usable cores).
        echo: where the summary is printed.

    Raises:
        GradingError: on a bad folder, exercise name or option, before anything is written.
    """
    folders = learners(submissions.resolve())
    chosen = course_exercises(root, exercises)
    tasks = [(name, folder, exercise) for name, folder in folders for exercise in chosen]
    try:
        sandbox = Sandbox.create()
    except SandboxError as error:
        raise GradingError(str(error)) from None
    try:
        if any(exercise.needs_database for exercise in chosen):
            learner_database(sandbox)
        echo(sandbox.describe())
        grades = grade_all(tasks, timeout_s=timeout_s, jobs=jobs, sandbox=sandbox)
    finally:
        sandbox.close()
    write_gradebook(grades, out)
    written = write_feedback(grades, feedback_dir if feedback_dir is not None else out.parent / "feedback")
    echo(summary(grades))
    passed = sum(g.verdict == "PASS" for g in grades)
    echo(f"{passed} of {len(grades)} notebooks passed; gradebook: {out}; feedback: {written[0].parent}/")
    return grades


def learner_database(sandbox: Sandbox) -> None:
    """Let ``sandbox``'s kernels reach the course's PostgreSQL server, each as a role of its own.

    The grader keeps the server's own URL; each kernel gets a URL with a role and a password
    of its own (:meth:`jobqueue.teaching.sandbox.Sandbox.kernel_database_url`).

    Raises:
        GradingError: if the server cannot be started or reached.
    """
    try:
        import psycopg

        from jobqueue.teaching.postgres_server import database_url

        url = database_url()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT 1")
    except Exception as error:  # the server is part of the course: say why it failed
        raise GradingError(
            f"the PostgreSQL server for the exercises: {type(error).__name__}: {error}"
        ) from None
    sandbox.with_database(url)


def not_started(exercise: Exercise, learner: NotebookNode) -> bool:
    """Whether the learner's notebook has every answer cell as generated and no added code cell.

    Such a notebook fails every check (the meta-tests of the exercises prove it for each),
    so it is graded without a kernel.
    """
    code = {c.get("id"): c.source for c in learner.cells if c.cell_type == "code"}
    unchanged = all(code.get(cell_id) == source for cell_id, source in exercise.answer_sources.items())
    return unchanged and code.keys() <= exercise.cell_ids


def _started(exercise: Exercise, path: Path) -> bool:
    try:
        return not not_started(exercise, read(path))
    except Exception:  # missing or not a notebook: started, and graded ERROR
        return True


def verdict_table(exercises: Sequence[Exercise], checked: dict[str, Grade]) -> str:
    """Markdown: a row per exercise (``not started`` unless in ``checked``), then what failed."""
    lines = ["| exercise | verdict | checks passed |", "|---|---|---|"]
    for exercise in exercises:
        g = checked.get(exercise.name)
        if g is None:
            lines.append(f"| {exercise.name} | not started | |")
        else:
            lines.append(f"| {exercise.name} | {g.verdict.replace('|', '/')} | {g.passed} of {g.total} |")
    for g in checked.values():
        if g.verdict != "PASS":
            lines += ["", f"**{g.exercise}**", ""]
            lines += [f"- {line}" for line in (*g.checks, *g.notes) if not line.startswith("✓")]
    return "\n".join(lines)


def check_all(root: Path, *, timeout_s: float = GRADE_TIMEOUT_S, jobs: int | None = None) -> int:
    """Check each started exercise in ``root/exercises``; print (and add to CI's summary) a table.

    An exercise whose answer cells are all as generated is not started: listed, not checked,
    not failed. The table also goes to ``$GITHUB_STEP_SUMMARY`` when that is set.

    Returns:
        The exit status: 1 if any started exercise did not pass, else 0.
    """
    folder = root / "exercises"
    chosen = course_exercises(root)
    started = [e for e in chosen if _started(e, folder / f"{e.name}.ipynb")]
    checked = {g.exercise: g for g in grade_all([("you", folder, e) for e in started], timeout_s, jobs)}
    table = verdict_table(chosen, checked)
    print(table)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as file:
            file.write(f"## Exercises\n\n{table}\n")
    failing = [g.exercise for g in checked.values() if g.verdict != "PASS"]
    tail = f"; failing: {', '.join(failing)}" if failing else ""
    print(f"{len(chosen) - len(checked)} not started, {len(checked) - len(failing)} passing{tail}")
    return 1 if failing else 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``grade`` and ``check-all`` sub-commands to the exercises command line."""
    grade_cmd = sub.add_parser("grade", help="grade a class: one folder per learner in SUBMISSIONS")
    grade_cmd.add_argument("submissions", type=Path, help="a folder with one folder per learner")
    grade_cmd.add_argument("--out", type=Path, default=Path("gradebook.csv"), help="gradebook CSV to write")
    grade_cmd.add_argument("--feedback", type=Path, help="folder for <learner>.md (default: beside --out)")
    grade_cmd.add_argument("--exercise", action="append", default=[], help="grade only this one (repeatable)")
    for command in (grade_cmd, sub.add_parser("check-all", help="check every started exercise (for CI)")):
        command.add_argument("--timeout", type=float, default=GRADE_TIMEOUT_S, help="seconds per notebook")
        command.add_argument("--jobs", type=int, help="notebooks at once (default: the usable cores)")


def run_command(args: argparse.Namespace, root: Path) -> int:
    """Run ``grade`` or ``check-all`` parsed by :func:`add_commands`; returns the exit status.

    Raises:
        GradingError: on a bad folder, exercise name or option.
    """
    if args.command == "check-all":
        return check_all(root, timeout_s=args.timeout, jobs=args.jobs)
    run_grading(
        args.submissions,
        root,
        args.out,
        exercises=args.exercise,
        feedback_dir=args.feedback,
        timeout_s=args.timeout,
        jobs=args.jobs,
    )
    return 0
