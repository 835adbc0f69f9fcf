"""Meta-tests of the exercises: generated == committed, unsolved fails, solved passes.

The checker runs through its command line's entry point (``cli.main``, what
``python -m jobqueue.teaching.exercises check`` calls), so each test sees the exit status
and every printed line, verdict last. Most tests call it in this process: a fresh
interpreter per check would add its start and imports (about 3 s of CPU on this machine)
to each of the ~40 checks, which all run their notebook in a fresh kernel either way. The
tests of a learner's saved notebook and of an unknown name run the real command in a
subprocess, so the ``-m`` entry itself stays covered.
"""

import contextlib
import copy
import io
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jobqueue.teaching.exercises import check, cli, generate
from jobqueue.teaching.notebooks import read, write

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))


def run_check(target: str | Path, cwd: Path = ROOT) -> tuple[int, list[str]]:
    """``check target`` through ``cli.main`` in this process: (exit status, printed lines)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["check", str(target)], cwd=cwd)
    return code, out.getvalue().strip().splitlines()


def run_command(target: str | Path, cwd: Path = ROOT) -> tuple[int, list[str]]:
    """``python -m jobqueue.teaching.exercises check target`` in a subprocess, as a learner runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "jobqueue.teaching.exercises", "check", str(target)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout.strip().splitlines()


def check_count(name: str) -> int:
    """Checks an exercise makes: the check/check_that calls of its check cells."""
    nb = read(ROOT / "solutions" / f"{name}.ipynb")
    return sum(
        len(check.expected_labels(c)) for c in nb.cells if generate.CHECK_TAG in c.metadata.get("tags", [])
    )


def test_there_are_exercises() -> None:
    assert len(NAMES) >= 3


def test_committed_exercises_are_generated_from_solutions() -> None:
    assert generate.stale_exercises(ROOT) == []


@pytest.mark.parametrize("name", NAMES)
def test_unsolved_exercise_fails_every_check(name: str) -> None:
    code, lines = run_check(name)
    assert code == 1
    assert lines[-1] == f"FAIL {name}: 0 of {check_count(name)} checks passed"
    failures = [line for line in lines if line.startswith("  ✗ ")]
    assert len(failures) == check_count(name), lines  # every check has its own verdict line
    unanswered = (
        "NotImplementedError: your answer goes here",
        "is not defined (define it in your answer cell",
    )
    assert any(reason in line for reason in unanswered for line in failures), lines


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_its_checks(name: str) -> None:
    code, lines = run_check(f"solutions/{name}.ipynb")
    assert lines[-1] == f"PASS {name}: {check_count(name)} of {check_count(name)} checks passed"
    assert code == 0


def learner_copy(tmp_path: Path, name: str) -> Path:
    """A course folder with the real solution and the pristine exercise, as a learner has it."""
    (tmp_path / "solutions").mkdir(parents=True)
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
    answers = [c for c in nb.cells if generate.ANSWER_TAG in c.metadata.get("tags", [])]
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

    code, lines = run_command(target, cwd=tmp_path)
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
        if generate.ANSWER_TAG in cell.metadata.get("tags", []):
            cell.source = by_id[cell.id].source  # the solution's code, markers and all
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="whatever the learner saved\n")]
    write(nb, target)

    code, lines = run_command(target, cwd=tmp_path)
    assert lines[-1] == f"PASS {name}: {check_count(name)} of {check_count(name)} checks passed"
    assert code == 0


def test_unknown_exercise_names_the_known_ones() -> None:
    code, lines = run_command("02_nope")
    assert code == 2
    assert lines[-1].startswith("error: no exercise named '02_nope' (exercises: ")
    assert "04_worker_retries" in lines[-1]


def answered(tmp_path: Path, name: str, answers: list[str], added: dict[int, str] | None = None) -> Path:
    """The learner's exercise with ``answers`` in its answer cells and code cells added.

    ``added`` maps a position in the notebook (before the added cell) to the added code.
    """
    target = learner_copy(tmp_path, name)
    nb = read(target)
    cells = [c for c in nb.cells if generate.ANSWER_TAG in c.metadata.get("tags", [])]
    for cell, source in zip(cells, answers, strict=True):
        cell.source = source
    for position, source in sorted((added or {}).items(), reverse=True):
        nb.cells.insert(position, nbformat.v4.new_code_cell(source))
    write(nb, target)
    return target


def answer_position(name: str, number: int = 0) -> int:
    nb = read(ROOT / "exercises" / f"{name}.ipynb")
    return [i for i, c in enumerate(nb.cells) if generate.ANSWER_TAG in c.metadata.get("tags", [])][number]


def solved(name: str, number: int) -> str:
    """The source of the solution's answer cell ``number`` (0-based), markers and all."""
    nb = read(ROOT / "solutions" / f"{name}.ipynb")
    return [c.source for c in nb.cells if generate.BEGIN in c.source][number]


HERD = solved("02_backoff", 1)  # exercise 02's second answer: the herd report
SCHEDULE = """
def decorrelated_schedule_s(retries, *, backoff, random):
    delays, previous = [], backoff.base_s
    for _ in range(retries):
        previous = decorrelated_s(previous, backoff=backoff, random=random)
        delays.append(previous)
    return delays
"""
PRINTING_JITTER = (
    """
def decorrelated_s(previous_s, *, backoff, random):
    delay = min(backoff.cap_s, backoff.base_s + random() * (3 * previous_s - backoff.base_s))
    print("debug: after", previous_s, "waits", delay)
    return delay
"""
    + SCHEDULE
)


def test_debug_print_does_not_fail_a_right_answer(tmp_path: Path) -> None:
    code, lines = run_check(answered(tmp_path, "02_backoff", [PRINTING_JITTER, HERD]), cwd=tmp_path)
    assert lines[-1] == "PASS 02_backoff: 8 of 8 checks passed"
    assert code == 0
    assert any(line.startswith("  · your code printed output of its own") for line in lines), lines


HELPER = "def top(backoff, previous_s):\n    return 3 * previous_s - backoff.base_s"
USES_HELPER = (
    "def decorrelated_s(previous_s, *, backoff, random):\n"
    "    return min(backoff.cap_s, backoff.base_s + random() * top(backoff, previous_s))\n" + SCHEDULE
)


def test_helper_in_a_cell_added_next_to_the_answer_is_part_of_it(tmp_path: Path) -> None:
    position = answer_position("02_backoff")
    for added_at in (position, position + 1):  # just before the answer cell, and just after it
        answers = [USES_HELPER, HERD]
        target = answered(tmp_path / str(added_at), "02_backoff", answers, {added_at: HELPER})
        code, lines = run_check(target, cwd=target.parent.parent)
        assert lines[-1] == "PASS 02_backoff: 8 of 8 checks passed", lines
        assert code == 0


def test_helper_far_from_the_answer_is_named_with_the_fix(tmp_path: Path) -> None:
    at_the_end = len(read(ROOT / "exercises" / "02_backoff.ipynb").cells)
    target = answered(tmp_path, "02_backoff", [USES_HELPER, HERD], {at_the_end: HELPER})
    code, lines = run_check(target, cwd=tmp_path)
    assert code == 1
    assert (
        "  ✗ one delay after 1 s, 5 s and 30 s: random 1, 0, 1: NameError: name 'top' is not defined (in"
        " decorrelated_s, line 2 of its cell) (the cell you added starting 'def top(backoff, previous_s):'"
        " defines it: move it next to an answer cell)"
    ) in lines
    skipped = "  · skipped the cell you added starting 'def top(backoff, previous_s):'"
    assert f"{skipped}: it is not next to an answer cell" in lines


def test_syntax_error_names_its_line(tmp_path: Path) -> None:
    answer = (
        "def decorrelated_s(previous_s, *, backoff, random):\n    return min(backoff.cap_s, (3 * previous_s\n"
    )
    code, lines = run_check(answered(tmp_path, "02_backoff", [answer, HERD]), cwd=tmp_path)
    assert code == 1
    assert (
        "  ✗ syntax error in your answer cell starting 'def decorrelated_s(previous_s, *, backoff, random)'"
        in (lines[1])
    )
    assert "line 2: '(' was never closed" in lines[1]
    assert lines[-1] == "FAIL 02_backoff: 4 of 8 checks passed"  # the herd's answer is right


def test_top_level_answer_missing_names_its_cell(tmp_path: Path) -> None:
    code, lines = run_check("04_worker_retries")
    assert code == 1
    assert (
        "  ✗ login codes: base 1 s, cap 10 s: NameError: name 'LOGIN_CODE_POLICY' is not defined"
        " (define it in your answer cell starting 'pass  # your answer goes here')"
    ) in lines


WRONG_JITTER = (  # forgets the base: draws from 0 up to three times the previous delay
    "def decorrelated_s(previous_s, *, backoff, random):\n"
    "    return min(backoff.cap_s, random() * 3 * previous_s)\n" + SCHEDULE
)


def test_run_all_of_a_wrong_answer_shows_every_verdict(tmp_path: Path) -> None:
    """As in the browser: no cell raises, every check shows one ✗ line, the summary counts."""
    nb = read(answered(tmp_path, "02_backoff", [WRONG_JITTER, HERD]))
    NotebookClient(nb, kernel_name="python3").execute()  # raises CellExecutionError if a cell fails
    shown = [
        "".join(o.get("data", {}).get("text/plain", o.get("text", "")))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    ]
    assert "✗ one delay after 1 s, 5 s and 30 s: random 1, 0, 1: expected [3, 1, 60], got [3, 0, 60]" in shown
    assert "✓ a schedule of 6, random always 1: [3, 9, 27, 60, 60, 60]" in shown
    assert sum(line.startswith(("✓", "✗")) for line in shown) == 8
    assert "5 of 8 checks pass\n" in shown  # the schedule of 3s and the herd's four checks
    assert not any("Traceback" in line or "checks.py" in line for line in shown)


def test_nbval_against_the_pristine_exercise_fails_a_wrong_answer(tmp_path: Path) -> None:
    solution = read(ROOT / "solutions" / "02_backoff.ipynb")
    pristine = generate.make_exercise(solution, expected_outputs=True)
    answers = {"wrong": WRONG_JITTER, "unanswered": None, "solved": "from_solution"}
    for folder, source in answers.items():  # one nbval run below checks the three notebooks
        nb = copy.deepcopy(pristine)
        for cell, solved in zip(nb.cells, solution.cells, strict=True):
            if generate.ANSWER_TAG in cell.metadata.get("tags", []):
                cell.source = solved.source if source == "from_solution" else source or cell.source
        (tmp_path / folder).mkdir()
        write(nb, tmp_path / folder / "02_backoff.ipynb")
    args = ["--nbval", "--nbval-current-env", "-q", "-rA", "-p", "no:cacheprovider", *answers]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    lines = result.stdout.splitlines()
    outcomes = [line.split()[:2] for line in lines if line.startswith(("PASSED", "FAILED"))]
    failed = {path.split("/")[0] for outcome, path in outcomes if outcome == "FAILED"}
    passed = {path.split("/")[0] for outcome, path in outcomes if outcome == "PASSED"}
    assert failed == {"wrong", "unanswered"}, result.stdout[-2000:]
    assert "solved" in passed and result.returncode == 1, result.stdout[-2000:]


def test_make_check_prints_the_verdict_and_nothing_on_stderr() -> None:
    # The kernel talks over Unix sockets: no "Kernel is running over TCP without encryption".
    command = [sys.executable, "-m", "jobqueue.teaching.exercises", "check", "solutions/02_backoff.ipynb"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "PASS 02_backoff: 8 of 8 checks passed"
    assert done.stderr == ""


def shown(outputs: list[nbformat.NotebookNode]) -> list[str]:
    """What a learner reads of a cell's outputs: printed text, plain values, error names."""
    texts = []
    for out in outputs:
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type == "error":
            texts.append(f"{out.ename}: {out.evalue}")
        else:
            texts.append(out.get("data", {}).get("text/plain", ""))
    return texts


@pytest.mark.parametrize("name", NAMES)
def test_no_output_sits_between_a_predict_question_and_its_answer(name: str) -> None:
    """A cell run between "predict ..." and the cell where the learner writes the prediction shows nothing.

    Its output would be the answer to the prediction, read before it is made.
    """
    cells = read(ROOT / "exercises" / f"{name}.ipynb").cells
    leaks = []
    question: int | None = None
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            question = index if "predict" in cell.source.lower() else None  # the question's own text
        elif generate.ANSWER_TAG in cell.metadata.get("tags", []):
            if question is not None:
                leaks += [c.id for c in cells[question:index] if c.cell_type == "code" and c.outputs]
            question = None
    assert leaks == [], f"{name}: outputs shown before the prediction is made: {leaks}"


@pytest.mark.parametrize("name", NAMES)
def test_no_saved_output_shows_what_a_check_expects(name: str) -> None:
    """No output the learner sees before solving shows the value a check will ask for.

    The checks' expected values are the details the solution's check cells recorded
    (``"[True, False, True]"``); a saved output elsewhere that prints one of them (a
    table computed by the course's own code, which an unsolved run shows too) gives the
    answer away. Values shorter than 8 characters (``"1"``, ``"True"``) are too common
    to tell.
    """
    solution = read(ROOT / "solutions" / f"{name}.ipynb")
    expected = {
        out.metadata["jobqueue.check"]["detail"]
        for cell in solution.cells
        if generate.CHECK_TAG in cell.metadata.get("tags", [])
        for out in cell.outputs
        if "jobqueue.check" in out.get("metadata", {})
    }
    expected = {value for value in expected if len(value) >= 8}
    exercise = read(ROOT / "exercises" / f"{name}.ipynb")
    leaks = [
        (cell.id, value)
        for cell in exercise.cells
        if cell.cell_type == "code"
        for value in sorted(expected)
        if value in "".join(shown(cell.outputs))
    ]
    assert leaks == [], f"{name}: saved outputs show what a check expects: {leaks}"


def test_the_hints_of_one_check_parse_each_cell_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing check's NameError asks which cell defines the name; every cell is parsed once.

    An unsolved exercise has a NameError in most checks, and parsing every cell again for each
    one cost the checker seconds of CPU per exercise.
    """
    nb = read(ROOT / "exercises" / "05_dead_letters.ipynb")
    parsed: list[str] = []
    parse = check._defined_names

    def counted(source: str) -> set[str]:
        parsed.append(source)
        return parse(source)

    monkeypatch.setattr(check, "_defined_names", counted)
    namer = check._Namer(nb.cells, {}, [])
    assert all(namer.hint("nowhere_defined", cell) == "" for cell in nb.cells)
    assert len(parsed) == len(namer.places) > 1
