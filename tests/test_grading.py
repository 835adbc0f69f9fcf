"""Grading a class: the gradebook, feedback and summary of a real run over seven learners.

One run of the real command (``python -m jobqueue.teaching.exercises grade``) over three
exercises: alice hands in the worked solutions, bob the untouched exercises, carol a file
that is not JSON, a notebook whose check cells she edited and deleted, and an endless loop;
dave one answer that returns a huge value, writes files next to itself, prints megabytes
and calls ``sys.exit``, and no other notebook. mallory hands in wrong answers that try to
pass anyway: patched check helpers, ``json`` and ``builtins``, her own ``check`` and
``check_that``, forged results written to every descriptor she can find under ``/proc``,
another learner's answer read from the submissions, and writes into the course folder,
two levels above it and into the package's source. nina (a wrong answer) and zoe (the
solution) of exercise 02 are graded after her and must keep their verdicts. The run is
shared by the tests below (about 20 s on two cores); carol's endless loop is graded in a run
of its own, with a short time limit.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo
from waiting import HANG_GUARD_S

from jobqueue.teaching.exercises import grade as grading
from jobqueue.teaching.exercises.check import check_exercise
from jobqueue.teaching.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ("02_backoff", "03_job_queue", "04_worker_retries")
TIMEOUT_S = 300  # a hang guard for the class's notebooks: each takes seconds
LOOP_TIMEOUT_S = 5  # carol's endless loop is graded apart, with a limit it can only reach
TOTALS = {"02_backoff": 8, "03_job_queue": 5, "04_worker_retries": 8}
# mallory's attacks are only safe to run where kernels are isolated (else they reach this run).
ISOLATED = bool(shutil.which("bwrap")) or bool(os.environ.get("CI"))
LEARNERS = ("alice", "bob", "carol", "dave", *(("mallory",) if ISOLATED else ()), "nina", "zoe")
needs_isolation = pytest.mark.skipif(
    not ISOLATED, reason="needs bubblewrap (apt-get install bubblewrap): without it kernels run as you"
)
PWNED = (ROOT / "PWNED.txt", ROOT.parent.parent / "gradebook.csv", ROOT / "src" / "jobqueue" / "PWNED.txt")

# Runs in mallory's kernel before her wrong answers: every way she has to be graded PASS.
CHEAT = r"""
import builtins, json, os, pickle, struct, sys
import jobqueue.teaching.checks as checks
from pathlib import Path

checks.same = lambda *a, **k: True
for name, value in list(globals().items()):  # the checker's functions, if they were lying around
    if callable(value) and name.endswith(("_check", "_check_that")):
        globals()[name] = (lambda label, got, expected=None: None)
def check(label, got, expected):
    checks.record(checks.Verdict(label, True, checks.show(expected), value=checks._plain(expected)))
def check_that(label, ok, explain=""):
    checks.record(checks.Verdict(label, True, "", kind="check_that", value="true"))
_dumps = json.dumps
json.dumps = lambda *a, **k: _dumps(*a, **k).replace('"passed": false', '"passed": true')
_repr = builtins.repr
builtins.repr = lambda value: "0" if value == -1 else _repr(value)
len = sum = lambda *a, **k: 0  # a check cell's own len(...) or sum(...) would now say 0
_publish = get_ipython().display_pub.publish
def _forge(data, metadata=None, **kwargs):  # every condition reported as holding
    record = (metadata or {}).get("jobqueue.capture")
    if isinstance(record, dict) and record.get("kind") == "check_that":
        record.pop("error", None)
        record.update(value="true", operands=[])
    return _publish(data, metadata, **kwargs)
get_ipython().display_pub.publish = _forge
for path in (%(pwned)r):
    try:
        Path(path).write_text("pwned")
    except OSError:
        pass
for source in (%(checks_py)r, checks.__file__):
    try:
        with open(source, "a") as file:
            file.write("\nsame = lambda *a, **k: True\n")
    except OSError:
        pass
try:
    from jobqueue.teaching.exercises.check import CheckResult
    forged = pickle.dumps(("ok", CheckResult("%(exercise)s", %(total)d, %(total)d)))
    frame = struct.pack("!i", len(forged)) + forged
    pid = os.getppid()  # the process that started the kernel: the grader's side of the pipe
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as file:
                file.write(frame)
        except OSError:
            pass
except Exception:
    pass
try:  # alice's answer, copied from the submissions
    alice = json.loads(Path(%(alice)r).read_text())
    exec(next("".join(c["source"]) for c in alice["cells"] if c.get("id") == %(answer_id)r))
except Exception:
    pass
"""


def notebook(folder: str, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((ROOT / folder / f"{name}.ipynb").read_text(encoding="utf-8"))
    return data


def cells(nb: dict[str, object]) -> list[dict[str, object]]:
    found = nb["cells"]
    assert isinstance(found, list)
    return found


def tagged(nb: dict[str, object], tag: str) -> list[dict[str, object]]:
    return [c for c in cells(nb) if tag in c["metadata"].get("tags", [])]  # type: ignore[attr-defined]


def save(nb: dict[str, object], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")


def make_class(submissions: Path) -> None:
    for name in EXERCISES:
        (submissions / "alice").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", submissions / "alice")
        (submissions / "bob").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "exercises" / f"{name}.ipynb", submissions / "bob")

    carol = submissions / "carol"
    carol.mkdir()
    (carol / "02_backoff.ipynb").write_text('{"cells": [', encoding="utf-8")  # cut off mid-save
    tampered = notebook("exercises", "03_job_queue")
    first, second = tagged(tampered, "check")[:2]
    first["source"] = (
        "print(\"✓ fresh, t=0: three new jobs, all due: {'due': 3, 'leased': 0, 'scheduled': 0}\")"
    )
    cells(tampered).remove(second)
    save(tampered, carol / "03_job_queue.ipynb")
    looping = notebook("exercises", "04_worker_retries")
    # Endless, but asleep: a busy loop would take a core from the rest of the run.
    tagged(looping, "answer")[0]["source"] = "import time\nwhile True:\n    time.sleep(0.5)"
    save(looping, submissions.parent / "loop" / "carol" / "04_worker_retries.ipynb")

    dave = submissions / "dave"
    loud = notebook("exercises", "02_backoff")
    tagged(loud, "answer")[0]["source"] = (
        "import sys\n"
        "from pathlib import Path\n"
        "def decorrelated_s(previous_s, *, backoff, random):\n"
        "    return 'y' * 1_000_000\n"
        "Path('gradebook.csv').write_text('dave,02_backoff,8,8,PASS\\n')\n"
        "Path('../alice.md').write_text('forged')\n"
        "print('x' * 5_000_000)\n"
        "sys.exit(0)\n"
    )
    save(loud, dave / "02_backoff.ipynb")

    wrong = {
        "02_backoff": "def decorrelated_s(previous_s, *, backoff, random):\n    return -1.0\n",
        "03_job_queue": "def job_states(jobs, now):\n    return {'due': 9, 'scheduled': 9, 'leased': 9}\n",
        "04_worker_retries": "def retry_schedule_s(policy, random=lambda: 1.0):\n    return [-1.0]\n",
    }
    for name in EXERCISES if ISOLATED else ():
        cheat = notebook("exercises", name)
        answer = tagged(cheat, "answer")[0]
        keep = "".join(answer["source"]) if name == "04_worker_retries" else ""  # its other answers
        answer["source"] = (
            wrong[name]
            + (keep if name == "04_worker_retries" else "")
            + CHEAT
            % {
                "pwned": tuple(str(p) for p in PWNED),
                "checks_py": str(ROOT / "src" / "jobqueue" / "teaching" / "checks.py"),
                "exercise": name,
                "total": TOTALS[name],
                "alice": str(submissions / "alice" / f"{name}.ipynb"),
                "answer_id": answer["id"],
            }
        )
        save(cheat, submissions / "mallory" / f"{name}.ipynb")
    linked = submissions / "nina" / "03_job_queue.ipynb"  # a link to a solution is no hand-in
    linked.parent.mkdir(parents=True)
    linked.symlink_to(ROOT / "solutions" / "03_job_queue.ipynb")
    nina = notebook("exercises", "02_backoff")
    tagged(nina, "answer")[0]["source"] = wrong["02_backoff"]
    save(nina, submissions / "nina" / "02_backoff.ipynb")
    (submissions / "zoe").mkdir()
    shutil.copy(ROOT / "solutions" / "02_backoff.ipynb", submissions / "zoe")


def git_status() -> str:
    command = ["git", "status", "--porcelain", "--untracked-files=no"]  # lesson 10 makes a file a while
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


class Run:
    def __init__(self, base: Path) -> None:
        self.submissions = base / "submissions"
        make_class(self.submissions)
        self.before = digest(self.submissions)
        self.course_before = git_status()
        self.source_before = digest(ROOT / "src")
        self.out = base / "teacher" / "gradebook.csv"
        self.loop_out = base / "loop-teacher" / "gradebook.csv"
        loop = [sys.executable, "-m", "jobqueue.teaching.exercises", "grade", str(base / "loop")]
        loop += ["--out", str(self.loop_out), "--timeout", str(LOOP_TIMEOUT_S)]
        looping = subprocess.Popen(
            [*loop, "--exercise", "04_worker_retries"], cwd=ROOT, stdout=subprocess.DEVNULL
        )
        args = [sys.executable, "-m", "jobqueue.teaching.exercises", "grade", str(self.submissions)]
        args += ["--out", str(self.out), "--timeout", str(TIMEOUT_S)]
        for name in EXERCISES:
            args += ["--exercise", name]
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S * 2)
        self.status, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr
        assert looping.wait(timeout=HANG_GUARD_S) == 0, "hang guard: the loop's grading did not end"
        self.course_after = git_status()
        self.source_after = digest(ROOT / "src")
        with self.out.open(encoding="utf-8", newline="") as file:
            self.rows = list(csv.reader(file))
        with self.loop_out.open(encoding="utf-8", newline="") as file:
            self.rows += list(csv.reader(file))[1:]

    def verdicts(self) -> dict[tuple[str, str], tuple[str, str, str]]:
        return {(r[0], r[1]): (r[2], r[3], r[4]) for r in self.rows[1:]}

    def feedback(self, student: str) -> str:
        return (self.out.parent / "feedback" / f"{student}.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run(tmp_path_factory.mktemp("class"))


def test_gradebook_has_a_row_per_learner_and_exercise(run: Run) -> None:
    assert run.status == 0, run.stdout + run.stderr
    assert run.rows[0] == ["student", "exercise", "passed", "total", "verdict"]
    rows = [(s, e) for s in LEARNERS for e in EXERCISES]
    assert [(r[0], r[1]) for r in run.rows[1:]] == [*rows, ("carol", "04_worker_retries")]  # + the loop's run


def test_solutions_pass_and_untouched_exercises_fail_every_check(run: Run) -> None:
    got = run.verdicts()
    for name, total in TOTALS.items():
        assert got["alice", name] == (str(total), str(total), "PASS")
        assert got["bob", name] == ("0", str(total), "FAIL")


def test_broken_file_tampered_checks_and_endless_loop(run: Run) -> None:
    got = run.verdicts()
    assert got["carol", "02_backoff"] == ("0", "8", "ERROR: not a notebook: the file is not JSON")
    assert got["carol", "03_job_queue"] == ("0", "5", "FAIL")  # the pristine checks ran
    assert got["carol", "04_worker_retries"] == ("0", "8", "TIMEOUT")  # from the loop's own run
    text = run.feedback("carol") + (run.loop_out.parent / "feedback" / "carol.md").read_text(encoding="utf-8")
    assert "check cell 'n03-07' was edited in your notebook; the original was run" in text
    assert "check cell 'n03-08' is missing from your notebook; the original was run" in text
    assert f"still running after {LOOP_TIMEOUT_S} s and was stopped" in text


def test_output_exit_and_stray_files_are_contained(run: Run) -> None:
    got = run.verdicts()
    assert got["dave", "02_backoff"] == ("0", "8", "FAIL")
    assert got["dave", "03_job_queue"] == ("0", "5", "ERROR: no 03_job_queue.ipynb handed in")
    assert got["dave", "04_worker_retries"] == ("0", "8", "ERROR: no 04_worker_retries.ipynb handed in")
    text = run.feedback("dave")
    assert max(len(line) for line in text.splitlines()) <= grading.REASON_CHARS + 10
    too_large = (
        "✗ one delay after 1 s, 5 s and 30 s: random 1, 0, 1: wrong answer: the value is too large to check"
    )
    assert too_large in text
    assert run.feedback("alice") != "forged"
    assert digest(run.submissions) == run.before  # nobody's hand-in changed
    assert sorted(p.name for p in run.out.parent.iterdir()) == ["feedback", "gradebook.csv"]


def test_feedback_shows_each_check_with_expected_and_got(run: Run) -> None:
    alice = run.feedback("alice")
    assert "## 02_backoff: PASS, 8 of 8 checks passed" in alice
    assert "- ✓ a schedule of 6, random always 1: [3, 9, 27, 60, 60, 60]" in alice
    bob = run.feedback("bob")
    not_started = "## 02_backoff: FAIL, 0 of 8 checks passed\n\n- note: not started: every answer cell is as"
    assert not_started in bob


def test_summary_table_is_printed(run: Run) -> None:
    isolation, *lines = run.stdout.splitlines()
    assert isolation.startswith("isolation: ")
    assert lines[0].split() == ["student", "02", "03", "04"]
    assert lines[1].split() == ["alice", "PASS", "PASS", "PASS"]
    assert lines[2].split() == ["bob", "0/8", "0/5", "0/8"]
    assert lines[3].split() == ["carol", "ERROR", "0/5", "MISSING"]  # the loop is graded apart
    assert lines[4].split() == ["dave", "0/8", "MISSING", "MISSING"]


@needs_isolation
def test_grades_in_isolation_where_the_machine_allows(run: Run) -> None:
    isolation = run.stdout.splitlines()[0]
    if os.environ.get("CI") or shutil.which("bwrap"):  # CI installs bubblewrap: it must be used
        assert isolation.startswith("isolation: bubblewrap (")
        if os.geteuid() == 0:
            assert "each kernel as a user id of its own" in isolation


@needs_isolation
def test_wrong_answers_that_cheat_are_graded_wrong(run: Run) -> None:
    got = run.verdicts()
    for name in EXERCISES:
        verdict = got["mallory", name][2]
        assert verdict == "FAIL" or verdict.startswith("ERROR"), (name, got["mallory", name])
    feedback = run.feedback("mallory")
    assert "✓" not in feedback  # no check shown as passed beside a wrong value
    wrong = "✗ one delay after 1 s, 5 s and 30 s: random 1, 0, 1: expected [3, 1, 60], got [-1, -1, -1]"
    assert wrong in feedback


def test_learners_graded_after_a_cheat_keep_their_verdicts(run: Run) -> None:
    got = run.verdicts()
    assert got["nina", "02_backoff"] == ("0", "8", "FAIL")
    assert got["nina", "03_job_queue"] == (
        "0",
        "5",
        "ERROR: 03_job_queue.ipynb is a link, not a notebook handed in",
    )
    assert got["zoe", "02_backoff"] == ("8", "8", "PASS")


def test_nothing_of_the_teacher_changed_and_no_traceback_shown(run: Run) -> None:
    for path in PWNED:
        assert not path.exists(), path
    assert run.source_after == run.source_before  # the package's source, byte for byte
    assert run.course_after == run.course_before  # git status of the course folder's files
    assert digest(run.submissions) == run.before
    assert "Traceback" not in run.stderr and "Error" not in run.stderr, run.stderr


@pytest.mark.parametrize("student", ["alice", "bob", "nina", "zoe"])
def test_make_check_agrees_with_the_grader(run: Run, student: str) -> None:
    path = run.submissions / student / "02_backoff.ipynb"
    result = check_exercise(path, ROOT / "solutions" / "02_backoff.ipynb")  # in-process, as make check
    passed, total, verdict = run.verdicts()[student, "02_backoff"]
    mine = (str(result.passed), str(result.checks), "PASS" if result.ok else "FAIL")
    assert mine == (passed, total, verdict)


def test_bad_submissions_folder_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    code = grading_main(["grade", str(missing), "--out", str(tmp_path / "g.csv")])
    assert code == 2
    assert not (tmp_path / "g.csv").exists()


def grading_main(argv: list[str]) -> int:
    from jobqueue.teaching.exercises.cli import main

    return main(argv, cwd=ROOT)


def test_unknown_exercise_and_bad_timeout_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "someone").mkdir()
    out = ["--out", str(tmp_path / "g.csv")]
    assert grading_main(["grade", str(tmp_path), *out, "--exercise", "99_nope"]) == 2
    assert "no exercise named '99_nope'" in capsys.readouterr().out
    assert grading_main(["grade", str(tmp_path), *out, "--timeout", "0", "--exercise", "02_backoff"]) == 2
    assert "timeout must be a positive number of seconds, got 0.0" in capsys.readouterr().out


def test_each_graded_kernel_reaches_postgresql_as_a_role_of_its_own(pg_url: str, tmp_path: Path) -> None:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    from jobqueue.teaching import kernel_database

    sandbox = Sandbox("none", tmp_path, as_root=False)
    sandbox.with_database(pg_url)
    assert sandbox.admin_url is not None and sandbox.database_url is not None
    assert "password" not in conninfo_to_dict(sandbox.database_url)
    first = kernel_database.make_role(sandbox.admin_url, sandbox.database_url)
    second = kernel_database.make_role(sandbox.admin_url, sandbox.database_url)
    assert first.name != second.name
    database = f"grading_test_{os.getpid()}"
    name = sql.Identifier(database)
    mine = "SELECT current_user, rolsuper, rolconnlimit FROM pg_roles WHERE rolname = current_user"
    with (
        psycopg.connect(first.url, autocommit=True) as learner,
        psycopg.connect(second.url, autocommit=True) as other,
    ):
        assert learner.execute(mine).fetchone() == (first.name, False, kernel_database.CONNECTION_LIMIT)
        member = "SELECT pg_has_role(current_user, 'pg_signal_autovacuum_worker', 'MEMBER')"
        assert learner.execute(member).fetchone() == (True,)  # DROP ... WITH (FORCE) may end autovacuum
        learner.execute(sql.SQL("CREATE DATABASE {}").format(name))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # not another kernel's database
            other.execute(sql.SQL("DROP DATABASE {}").format(name))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            learner.execute("COPY (SELECT 1) TO PROGRAM 'true'")
        learner.execute("ALTER ROLE CURRENT_USER SET default_transaction_read_only = on")
        # A kernel knows its own password only, not the superuser's.
        for stolen in (make_conninfo(first.url, user="postgres"), make_conninfo(first.url, password="")):
            with pytest.raises(psycopg.OperationalError, match=r"password authentication failed|no password"):
                psycopg.connect(stolen).close()
        with psycopg.connect(make_conninfo(first.url, dbname=database)) as inside:
            # The kernel ends: its sessions end, its databases and its role go.
            kernel_database.drop_role(sandbox.admin_url, first.name)
            with pytest.raises(psycopg.OperationalError):
                inside.execute("SELECT 1")
        with psycopg.connect(sandbox.admin_url) as admin:
            role = admin.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (first.name,))
            assert role.fetchone() == (0,)
            left = admin.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (database,))
            assert left.fetchone() == (0,)
        assert other.execute("SELECT 1").fetchone() == (1,)  # the other kernel's role is untouched
    kernel_database.drop_role(sandbox.admin_url, second.name)
    with pytest.raises(ValueError, match="'postgres' is not a kernel's role"):
        kernel_database.drop_role(sandbox.admin_url, "postgres")


@pytest.mark.skipif(
    os.geteuid() != 0, reason="kernels get user ids of their own only when the grader is root"
)
@pytest.mark.parametrize("mode", ["bubblewrap", "unprivileged user"])
def test_what_a_kernel_leaves_running_ends_with_its_seat(mode: str) -> None:
    import tempfile

    import nbformat
    import psutil

    from jobqueue.teaching.exercises.check import execute_all

    sandbox = Sandbox.create()
    folder = Path(tempfile.mkdtemp(prefix="jq-leftover-"))
    try:
        if mode == "bubblewrap" and sandbox.mode != "bubblewrap":
            pytest.skip("bubblewrap does not work here")
        sandbox.mode = mode
        # A process in a session of its own: not in the kernel's process group, so the kernel's
        # end does not end it. Popen returns once the child has called setsid and exec'd sleep;
        # `setsid -f` (used before) returned at once, and a kernel stopped before its forked
        # child called setsid took the child with it (one run, on a loaded machine).
        escape = (
            "import os, subprocess\n"
            "sleeper = subprocess.Popen(['sleep', '600'], start_new_session=True, stdin=subprocess.DEVNULL,"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print('left running', os.getsid(sleeper.pid) == sleeper.pid)\n"
        )
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(escape)])
        with sandbox.seat() as seat:
            assert seat.uid is not None
            execute_all(nb, folder, sandbox=sandbox, seat=seat)
            assert nb.cells[0].outputs[0].get("text") == "left running True\n", nb.cells[0].outputs
            if mode == "unprivileged user":  # the kernel has ended, and this has not (bubblewrap's has)

                def seat_cmdlines() -> list[object]:
                    return [
                        p.info["cmdline"]
                        for p in psutil.process_iter(["uids", "cmdline"])
                        if p.info["uids"].real == seat.uid
                    ]

                assert ["sleep", "600"] in seat_cmdlines(), seat_cmdlines()
        left = [p for p in psutil.process_iter(["uids", "cmdline"]) if p.info["uids"].real == seat.uid]
        assert [p.info["cmdline"] for p in left] == []
    finally:
        sandbox.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="kernels get user ids of their own only under root")
def test_a_user_id_another_grading_run_holds_is_not_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from jobqueue.teaching import sandbox as module

    # Ids no kernel of a real run uses, and a lock folder of this test's own.
    monkeypatch.setattr(module, "FIRST_UID", 70000)
    monkeypatch.setattr(module, "PROBE_UID", 70002)
    monkeypatch.setattr(module, "UID_LOCKS", tmp_path / "locks")
    (tmp_path / "locks").mkdir()
    hold = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path / "locks" / "70000")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as other_run:
        assert other_run.stdout is not None and other_run.stdout.readline() == "held\n"
        box = Sandbox("bubblewrap", tmp_path, as_root=True)
        with box.seat() as seat:
            assert seat.uid == 70001
            with pytest.raises(module.SandboxError, match="every kernel user id"), box.seat():
                pass
        with box.seat() as again:  # given back when its seat ended
            assert again.uid == 70001
        other_run.kill()
