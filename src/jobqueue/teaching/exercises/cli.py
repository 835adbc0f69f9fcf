"""The exercises' command line: ``python -m jobqueue.teaching.exercises COMMAND``.

Usage::

    python -m jobqueue.teaching.exercises check 02_backoff   # one exercise, with a verdict
    python -m jobqueue.teaching.exercises build              # regenerate exercises/
    python -m jobqueue.teaching.exercises verify             # fail if exercises/ is stale
    python -m jobqueue.teaching.exercises grade SUBMISSIONS --out gradebook.csv  # a class
    python -m jobqueue.teaching.exercises check-all          # every started exercise (CI)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from jobqueue.teaching.exercises import grade
from jobqueue.teaching.exercises.check import check_exercise, resolve
from jobqueue.teaching.exercises.generate import ExerciseError, find_root, make_exercise, stale_exercises
from jobqueue.teaching.notebooks import read, write


def main(argv: Sequence[str] | None = None, cwd: Path | None = None) -> int:
    """Command line: ``check NAME``, ``build``, ``verify``, ``grade`` or ``check-all``; returns the status."""
    parser = argparse.ArgumentParser(prog="python -m jobqueue.teaching.exercises")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check one exercise and print a verdict")
    check.add_argument("exercise", help="a name such as 02_backoff, or a notebook path")
    sub.add_parser("build", help="regenerate exercises/ from solutions/")
    sub.add_parser("verify", help="fail if a committed exercise differs from its generated form")
    grade.add_commands(sub)
    args = parser.parse_args(argv)
    here = cwd if cwd is not None else Path.cwd()
    try:
        if args.command in ("grade", "check-all"):
            return grade.run_command(args, find_root(here))
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
    except (ExerciseError, grade.GradingError) as exc:
        print(f"error: {exc}")
        return 2
