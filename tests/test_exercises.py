"""Meta-tests of the exercises: generated == committed, unsolved fails, solved passes.

The checker is run as a learner runs it (``python -m jobqueue.teaching.exercises check``),
in a subprocess, so each test sees the real command line, exit status and verdict line.
"""

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jobqueue.teaching import exercises
from jobqueue.teaching.notebooks import read, write

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))


def run_check(target: str | Path, cwd: Path = ROOT) -> tuple[int, list[str]]:
    result = subprocess.run(
        [sys.executable, "-m", "jobqueue.teaching.exercises", "check", str(target)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout.strip().splitlines()


def check_count(name: str) -> int:
    nb = read(ROOT / "solutions" / f"{name}.ipynb")
    return sum(exercises.CHECK_TAG in c.metadata.get("tags", []) for c in nb.cells)


def test_there_are_exercises() -> None:
    assert len(NAMES) >= 3


def test_committed_exercises_are_generated_from_solutions() -> None:
    assert exercises.stale_exercises(ROOT) == []


@pytest.mark.parametrize("name", NAMES)
def test_unsolved_exercise_fails_every_check(name: str) -> None:
    code, lines = run_check(name)
    assert code == 1
    assert lines[-1] == f"FAIL {name}: 0 of {check_count(name)} checks passed"
    assert any("NotImplementedError: your answer goes here" in line for line in lines)


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_its_checks(name: str) -> None:
    code, lines = run_check(f"solutions/{name}.ipynb")
    assert lines[-1] == f"PASS {name}: {check_count(name)} of {check_count(name)} checks passed"
    assert code == 0


def learner_copy(tmp_path: Path, name: str) -> Path:
    """A course folder with the real solution and the pristine exercise, as a learner has it."""
    (tmp_path / "solutions").mkdir()
    (tmp_path / "exercises").mkdir()
    shutil.copy(ROOT / "solutions" / f"{name}.ipynb", tmp_path / "solutions")
    target = tmp_path / "exercises" / f"{name}.ipynb"
    shutil.copy(ROOT / "exercises" / f"{name}.ipynb", target)
    return target


WRONG_SCHEDULE = """
def retry_schedule_s(policy, random=lambda: 1.0):
    return [float(2**n - 1) for n in range(policy.max_attempts)]  # forgets the cap
"""


def test_saved_wrong_answer_fails_even_with_expected_outputs_pasted_in(tmp_path: Path) -> None:
    name = "04_worker_retries"
    target = learner_copy(tmp_path, name)
    nb = read(target)
    answers = [c for c in nb.cells if exercises.ANSWER_TAG in c.metadata.get("tags", [])]
    answers[0].source = WRONG_SCHEDULE
    answers[1].source = "LOGIN_CODE_POLICY = jq.RetryPolicy(max_attempts=7, backoff=jq.Backoff(cap_s=10))"
    client_nb = copy.deepcopy(nb)
    NotebookClient(client_nb, kernel_name="python3", allow_errors=True).execute()
    # The learner ran the wrong answer, then pasted the solution's outputs into every cell.
    solution = read(ROOT / "solutions" / f"{name}.ipynb")
    for cell, solved in zip(client_nb.cells, solution.cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs = copy.deepcopy(solved.outputs)
    write(client_nb, target)

    code, lines = run_check(target, cwd=tmp_path)
    assert code == 1
    assert "  ✗ 6 attempts, base 2 s, cap 10 s: expected [0, 2, 6, 14, 24, 34], got [0, 1, 3, 7, 15, 31]" in (
        lines
    )
    assert (
        "  ✗ login codes: every attempt starts by t=30 s:"
        " your attempts start at t = [0, 1, 3, 7, 15, 31, 63] s; the last one is too late"
    ) in lines
    assert lines[-1].startswith(f"FAIL {name}: ")


def test_right_answer_passes_whatever_outputs_were_saved(tmp_path: Path) -> None:
    name = "04_worker_retries"
    target = learner_copy(tmp_path, name)
    nb = read(target)
    solution = read(ROOT / "solutions" / f"{name}.ipynb")
    by_id = {c.id: c for c in solution.cells}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if exercises.ANSWER_TAG in cell.metadata.get("tags", []):
            cell.source = by_id[cell.id].source  # the solution's code, markers and all
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="whatever the learner saved\n")]
    write(nb, target)

    code, lines = run_check(target, cwd=tmp_path)
    assert lines[-1] == f"PASS {name}: {check_count(name)} of {check_count(name)} checks passed"
    assert code == 0


def test_unknown_exercise_names_the_known_ones() -> None:
    code, lines = run_check("02_nope")
    assert code == 2
    assert lines[-1].startswith("error: no exercise named '02_nope' (exercises: ")
    assert "04_worker_retries" in lines[-1]
