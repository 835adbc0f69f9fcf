"""How long grading a class takes: ``--learners`` learners × every exercise, on this machine.

Builds a simulated class in a temporary folder: half the learners hand in ``solutions/``
(every notebook is run: a kernel per notebook), the other half ``exercises/`` untouched
(graded without a kernel, see ``grading.not_started``). Times ``grading.run_grading`` (what
``make grade`` runs) with ``time.perf_counter``, one notebook per usable core at a time.
The peer, in the same run: the same exercises checked one after another in this process
by ``check_exercise`` (what ``make check`` runs, no isolation, no parallelism), once, for
one learner who hands in the solutions; the serial estimate for the class is that time ×
the learners who hand in solutions. Prints both, their ratio (the goal: grading the class
takes less than the serial estimate, so the ratio is below 1) and the load average before
and after, since a shared machine's load changes every figure. Checks the gradebook too:
every solution must PASS and every untouched exercise FAIL, or the script exits 1.

Run: ``.venv/bin/python benchmarks/grading_class.py [--learners 40] [--timeout 60]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from jobqueue.teaching.exercises import grade as grading
from jobqueue.teaching.exercises.check import check_exercise

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.0


def build_class(folder: Path, learners: int) -> int:
    """One folder per learner; even ones hand in the solutions. Returns how many do."""
    for number in range(learners):
        source = ROOT / ("solutions" if number % 2 == 0 else "exercises")
        shutil.copytree(source, folder / f"learner{number:02d}")
    return (learners + 1) // 2


def serial_check_s() -> float:
    """Seconds to check every solution once, one after another, in this process."""
    start = time.perf_counter()
    for solution in sorted((ROOT / "solutions").glob("*.ipynb")):
        result = check_exercise(solution, solution)
        assert result.ok, result.verdict()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=grading.GRADE_TIMEOUT_S)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"load average before: {os.getloadavg()[0]:.1f} on {cores} cores")
    with tempfile.TemporaryDirectory() as tmp:
        submissions = Path(tmp) / "class"
        solved = build_class(submissions, args.learners)
        start = time.perf_counter()
        grades = grading.run_grading(
            submissions, ROOT, Path(tmp) / "gradebook.csv", timeout_s=args.timeout, echo=lambda _: None
        )
        class_s = time.perf_counter() - start
    per_learner_s = serial_check_s()
    serial_s = per_learner_s * solved
    wrong = [
        f"{g.student} {g.exercise}: {g.verdict}; "
        + "; ".join([line for line in g.checks if not line.startswith("✓")][:2] + list(g.notes[:2]))
        for g in grades
        if g.verdict != ("PASS" if int(g.student.removeprefix("learner")) % 2 == 0 else "FAIL")
    ]
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    exercises = len(grades) // args.learners
    print(f"class: {args.learners} learners x {exercises} exercises = {len(grades)} notebooks")
    print(f"  ({solved} learners hand in solutions, run in a kernel each; the others untouched exercises)")
    right = len(grades) - len(wrong)
    print(f"gradebook: {right} of {len(grades)} rows right (PASS for a solution, FAIL for an untouched one)")
    print(f"grade the class, {cores} at a time, isolated: {class_s:8.1f} s")
    print(f"check serially, in-process (estimate):   {serial_s:8.1f} s ({per_learner_s:.1f} s per learner)")
    ratio = class_s / serial_s
    print(f"ratio {ratio:.2f} (goal: below {GOAL_RATIO:g}) {'met' if ratio < GOAL_RATIO else 'NOT met'}")
    if wrong:
        print("wrong grades (the run went wrong):", *wrong[:10], sep="\n  ", file=sys.stderr)
    return 1 if wrong or ratio >= GOAL_RATIO else 0


if __name__ == "__main__":
    raise SystemExit(main())
