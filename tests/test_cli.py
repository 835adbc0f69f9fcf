"""Lesson 11: the ``jobqueue`` command line over a durable queue file.

``stats``, ``dead``, ``replay`` and a burst ``worker`` run in-process through
:func:`jobqueue.cli.main`; one test starts a real worker process, reads its log, asks
``jobqueue stats`` for its figures while it holds the file, and stops it with SIGTERM.
"""

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import IO

import pytest
from waiting import HANG_GUARD_S, hang, wait_until

from jobqueue import ManualClock
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.cli import WorkerStats, main, stats_path
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.metrics import QueueMetrics

EPOCH_S = 1_700_000_000.0
"""2023-11-14T22:13:20+00:00, where the manual clocks below start."""

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"

HANDLERS = "jobqueue.examples.shop_worker:register"


def receipt(order_id: int, email: str = "customer@example.com") -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email=email)


def bury(queue: DurableQueue, job_id: str, order_id: int, error: str) -> None:
    """Enqueue a receipt and fail its first attempt permanently."""
    queue.enqueue(SEND_RECEIPT, receipt(order_id), id=job_id)
    lease = queue.claim()
    assert lease is not None and lease.job.id == job_id
    assert queue.fail(lease, error, permanent=True).outcome == "dead"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A queue file with no jobs."""
    file = tmp_path / "shop.db"
    DurableQueue(file).close()
    return file


@pytest.fixture
def dead_file(path: Path) -> Path:
    """A queue file with two dead letters (died at EPOCH_S and 60 s later) and one waiting job."""
    clock = ManualClock(EPOCH_S)
    with DurableQueue(path, clock=clock) as queue:
        bury(queue, "receipt-2", 2, "PermanentJobError: invalid e-mail address 'nobody'")
        clock.advance(60)
        bury(queue, "receipt-3", 3, "ConnectionError: the mail provider is down")
        queue.enqueue(SEND_RECEIPT, receipt(4), id="receipt-4")
    return path


# -- stats --------------------------------------------------------------------------------------


def test_stats_prints_the_figures_of_a_queue_file(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    began = time.time()
    clock = ManualClock(began - 120)  # two minutes ago on the wall clock
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(SEND_RECEIPT, [receipt(1), receipt(2), receipt(3)], ids=["r-1", "r-2", "r-3"])
        first, second = queue.claim_many(2)
        queue.ack(first)
        queue.fail(second, "PermanentJobError: no", permanent=True)
    assert main(["stats", str(path)]) == 0
    took_s = time.time() - began
    out, err = capsys.readouterr()
    assert err == ""
    shown = re.fullmatch(
        "waiting                   1\n"
        "scheduled \\(retry delay\\)   0\n"
        "leased                    0\n"
        "oldest waiting job        (\\d+\\.\\d) s\n"  # r-3, waiting for two minutes
        "oldest leased job         0\\.0 s\n"
        "oldest since enqueue      (\\d+\\.\\d) s\n"  # r-3 again: enqueued then, never claimed
        "failure rate, last 300 s  50% \\(1 failed, 1 done\\)\n"
        "dead letters              1\n"
        "cancelled                 0\n",
        out,
    )
    assert shown is not None, out
    assert 120 <= float(shown[1]) <= 120 + took_s + 0.05, (shown[1], took_s)  # + the test's own time
    assert shown[2] == shown[1]
    assert main(["stats", str(path), "--window", "60"]) == 0  # both outcomes are older
    assert "\nfailure rate, last 60 s  0% (0 failed, 0 done)\n" in capsys.readouterr().out


# -- dead letters -------------------------------------------------------------------------------


def test_dead_lists_the_dead_letters_oldest_first(
    dead_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dead", str(dead_file)]) == 0
    assert capsys.readouterr() == (
        "receipt-2  send_receipt  attempts 1/5  died 2023-11-14T22:13:20+00:00\n"
        "    PermanentJobError: invalid e-mail address 'nobody'\n"
        '    payload {"order_id":2,"email":"customer@example.com"}\n'
        "receipt-3  send_receipt  attempts 1/5  died 2023-11-14T22:14:20+00:00\n"
        "    ConnectionError: the mail provider is down\n"
        '    payload {"order_id":3,"email":"customer@example.com"}\n',
        "",
    )


def test_dead_on_a_queue_without_dead_letters(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dead", str(path)]) == 0
    assert capsys.readouterr() == ("no dead letters\n", "")


def test_replay_moves_the_named_dead_letters_back_with_fresh_attempts(
    dead_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(dead_file), "receipt-3"]) == 0
    assert capsys.readouterr() == ("replayed receipt-3\n", "")
    with DurableQueue(dead_file) as queue:
        assert [letter.job.id for letter in queue.dead_letters()] == ["receipt-2"]
        job = queue.get("receipt-3")
        assert job is not None and (job.attempts, job.leased_until) == (0, None)
        assert job.last_error == "ConnectionError: the mail provider is down"  # kept for the record
        assert len(queue) == 2


def test_replay_all(dead_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(dead_file), "--all"]) == 0
    assert capsys.readouterr() == ("replayed receipt-2\nreplayed receipt-3\n", "")
    with DurableQueue(dead_file) as queue:
        assert queue.dead_letters() == []
        assert [(job.id, job.attempts) for job in queue.jobs()] == [
            ("receipt-4", 0),
            ("receipt-2", 0),
            ("receipt-3", 0),
        ]
    assert main(["replay", str(dead_file), "--all"]) == 0
    assert capsys.readouterr() == ("no dead letters to replay\n", "")


def test_replay_of_an_unknown_id_exits_1_naming_it(
    dead_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = [letter.job.id for letter in DurableQueue(dead_file).dead_letters()]
    assert main(["replay", str(dead_file), dead[0], "receipt-4"]) == 1  # receipt-4 is waiting, not dead
    out, err = capsys.readouterr()
    assert (out, err) == ("", "error: no dead job with id 'receipt-4'; nothing replayed\n")
    with DurableQueue(dead_file) as queue:
        assert [letter.job.id for letter in queue.dead_letters()] == dead  # all or nothing


@pytest.mark.parametrize("args", [[], ["receipt-2", "--all"]])
def test_replay_takes_ids_or_all_but_not_both_or_neither(
    dead_file: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(dead_file), *args])
    assert exited.value.code == 2
    assert "error: replay takes either dead-letter ids or --all" in capsys.readouterr().err
    with DurableQueue(dead_file) as queue:
        assert len(queue.dead_letters()) == 2


# -- usage errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["stats"], ["dead"], ["replay", "--all"]])
def test_a_missing_queue_file_exits_2_naming_it(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(SystemExit) as exited:
        main([command[0], str(missing), *command[1:]])
    assert exited.value.code == 2
    assert f"error: no queue file '{missing}'" in capsys.readouterr().err
    assert not missing.exists()  # not created by looking


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jobqueue.examples.shop_worker", "expected MODULE:FUNCTION, got 'jobqueue.examples.shop_worker'"),
        (":register", "expected MODULE:FUNCTION, got ':register'"),
        ("jobqueue.no_such_module:register", "cannot import 'jobqueue.no_such_module'"),
        (
            "jobqueue.examples.shop_worker:nope",
            "'jobqueue.examples.shop_worker:nope': jobqueue.examples.shop_worker has no function 'nope'",
        ),
        (  # not callable
            "jobqueue.examples.shop_worker:MAIL_LATENCY_S",
            "'jobqueue.examples.shop_worker:MAIL_LATENCY_S': jobqueue.examples.shop_worker"
            " has no function 'MAIL_LATENCY_S'",
        ),
    ],
)
def test_bad_handlers_exit_2_naming_them(
    path: Path, spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", str(path), "--handlers", spec])
    assert exited.value.code == 2
    assert f"error: argument --handlers: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--concurrency", "0"], "argument --concurrency: expected a whole number >= 1, got '0'"),
        (["--concurrency", "two"], "argument --concurrency: expected a whole number >= 1, got 'two'"),
        (["--prefetch", "-1"], "argument --prefetch: expected a whole number >= 0, got '-1'"),
        (["--poll", "0"], "argument --poll: expected a number of seconds > 0, got '0'"),
        (["--grace", "nan"], "argument --grace: expected a number of seconds > 0, got 'nan'"),
        (["--stats-every", "-1"], "argument --stats-every: expected a number of seconds > 0, got '-1'"),
        (["--timeout", "0"], "argument --timeout: expected a number of seconds > 0, got '0'"),
        (
            ["--heartbeat", "30"],
            "--heartbeat (30 s) must be below --visibility-timeout (30 s), or leases run out between beats",
        ),
        (
            ["--visibility-timeout", "5"],
            "--heartbeat (10 s) must be below --visibility-timeout (5 s), or leases run out between beats",
        ),
    ],
)
def test_bad_worker_settings_exit_2_naming_the_option(
    tmp_path: Path, option: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(SystemExit) as exited:
        main(["worker", str(path), "--handlers", HANDLERS, "--burst", "--create", *option])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: jobqueue worker ")  # the worker command's usage, not the top level
    assert f"jobqueue worker: error: {message}\n" in err
    assert not path.exists()  # refused before the file was created


def test_a_worker_refuses_a_missing_file_unless_told_to_create_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(SystemExit) as exited:
        main(["worker", str(path), "--handlers", HANDLERS, "--burst"])
    assert exited.value.code == 2
    assert f"no queue file {str(path)!r} (add --create to start a new queue)" in capsys.readouterr().err
    assert not path.exists()
    assert main(["worker", str(path), "--handlers", HANDLERS, "--burst", "--create"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"creating queue file {path}"
    assert path.exists()


def test_a_file_that_is_not_a_database_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a queue\n")
    assert main(["stats", str(notes)]) == 1
    expected = f"error: {str(notes)!r} is not a DuckDB database file, so not a queue file\n"
    assert capsys.readouterr().err == expected


# -- the worker ---------------------------------------------------------------------------------


def without_times(out: str) -> list[str]:
    return [re.sub(f"^{ISO} ", "", line) for line in out.splitlines()]


def test_a_burst_worker_exits_by_itself_once_the_queue_is_empty(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with DurableQueue(path) as queue:
        queue.enqueue(SEND_RECEIPT, receipt(1), id="receipt-1")
        queue.enqueue(SEND_RECEIPT, receipt(2, email="nobody"), id="receipt-2")
        queue.enqueue(SEND_RECEIPT, receipt(3), id="receipt-3")
    args = ["worker", str(path), "--handlers", HANDLERS, "--burst", "--poll", "0.05", "--stats-every", "0.1"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = without_times(out)
    assert re.fullmatch(rf"worker \d+ ready: up to 10 jobs at once from {re.escape(str(path))}", lines[0])
    assert sorted(lines[1:-1]) == [
        "mailed the receipt for order 1",
        "mailed the receipt for order 3",
        "receipt-1 attempt 1: done",
        "receipt-2 attempt 1: dead (PermanentJobError: invalid e-mail address 'nobody')",
        "receipt-3 attempt 1: done",
    ]
    assert re.fullmatch(r"worker \d+ stopped: 2 done, 1 dead, 0 given back", lines[-1])
    assert not stats_path(path).exists()
    with DurableQueue(path) as queue:
        assert len(queue) == 0
        assert [letter.job.id for letter in queue.dead_letters()] == ["receipt-2"]


class Lines:
    """Reads a process's output lines on a thread, so a test can wait for one with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._lines: SimpleQueue[str | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_until(self, enough: Callable[[list[str]], bool], timeout_s: float = HANG_GUARD_S) -> None:
        """Read lines until ``enough(seen)``; fail with the output so far after ``timeout_s`` (a hang)."""
        deadline = time.monotonic() + timeout_s
        while not enough(self.seen):
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise AssertionError(
                    f"{hang('the line waited for', timeout_s)}; output so far: {self.seen}"
                ) from None
            if line is None:
                raise AssertionError(f"the output ended early: {self.seen}")
            self.seen.append(line)

    def arrived(self) -> list[str]:
        """Read the lines that have arrived, without waiting; return every line seen."""
        while True:
            try:
                line = self._lines.get_nowait()
            except Empty:
                return self.seen
            if line is None:
                self._lines.put(None)  # the end stays for the next reader
                return self.seen
            self.seen.append(line)

    def to_end(self, timeout_s: float = HANG_GUARD_S) -> list[str]:
        """Read the remaining lines until the stream closes; return every line seen."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise AssertionError(
                    f"{hang('the end of the output', timeout_s)}; so far: {self.seen}"
                ) from None
            if line is None:
                break
            self.seen.append(line)
        self._thread.join(timeout_s)
        return self.seen


def worker_figures(queue_file: Path, *, done: int) -> WorkerStats:
    """What a running worker last wrote to its stats file, once that counts ``done`` acks."""
    last: list[WorkerStats] = []

    def counts_done() -> bool:
        if not stats_path(queue_file).exists():
            return False
        last[:] = [WorkerStats.from_json(stats_path(queue_file).read_text())]  # replaced whole
        return last[0].metrics.done == done

    wait_until(counts_done, f"figures with {done} done in the stats file", details=lambda: last)
    return last[0]


def jobqueue_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "jobqueue", *args]


def test_a_worker_process_logs_reports_stats_and_gives_back_its_job_on_sigterm(path: Path) -> None:
    with DurableQueue(path) as queue:
        ids = [f"receipt-{order_id}" for order_id in (1001, 1002, 1003)]
        queue.enqueue_many(SEND_RECEIPT, [receipt(1001), receipt(1002), receipt(1003)], ids=ids)
        queue.enqueue(BUILD_REPORT, ReportPayload(report_id=7, work_s=60), id="report-7")
    stats_file = stats_path(path)
    command = jobqueue_command(
        "worker", str(path), "--handlers", HANDLERS, "--grace", "1", "--stats-every", "0.2", "--poll", "0.05"
    )
    stderr_file = path.with_name("worker.stderr")
    with (
        stderr_file.open("w") as stderr,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True) as worker,
    ):
        try:
            assert worker.stdout is not None
            lines = Lines(worker.stdout)
            lines.wait_until(lambda seen: sum(line.endswith(": done") for line in seen) == 3)
            report = worker_figures(path, done=3)
            stats = subprocess.run(
                jobqueue_command("stats", str(path)),
                capture_output=True,
                text=True,
                timeout=HANG_GUARD_S,
                check=False,
            )
            worker.send_signal(signal.SIGTERM)
            status = worker.wait(timeout=HANG_GUARD_S)
            output = lines.to_end()
        finally:
            if worker.poll() is None:
                worker.kill()
    assert stderr_file.read_text() == ""
    assert status == 0

    # The figures: jobqueue stats could not open the file, so it showed the worker's.
    assert report.pid == worker.pid
    assert (report.metrics.waiting, report.metrics.leased, report.metrics.dead_letters) == (0, 1, 0)
    assert (stats.returncode, stats.stderr) == (0, "")
    head, *table = stats.stdout.splitlines()
    assert re.fullmatch(rf"\(the file is held by worker {worker.pid}; its figures from \d+ s ago\)", head)
    assert re.fullmatch(r"oldest leased job         \d+\.\d s", table.pop(4))  # wall-clock seconds
    assert table == [
        "waiting                   0",
        "scheduled (retry delay)   0",
        "leased                    1",
        "oldest waiting job        0.0 s",
        "oldest since enqueue      0.0 s",  # the one job left is leased
        "failure rate, last 300 s  0% (0 failed, 3 done)",
        "dead letters              0",
        "cancelled                 0",
    ]

    # The log: three receipts done, the report given back at shutdown.
    logged = without_times("\n".join(output))
    assert logged[0] == f"worker {worker.pid} ready: up to 10 jobs at once from {path}"
    assert sorted(line for line in logged if line.startswith("receipt-")) == [
        f"{job_id} attempt 1: done" for job_id in ids
    ]
    assert logged[-2:] == [
        "report-7 attempt 1: given back unfinished at shutdown",
        f"worker {worker.pid} stopped: 3 done, 1 given back",
    ]
    assert "built report 7" not in logged
    assert not stats_file.exists()

    with DurableQueue(path) as queue:
        job = queue.get("report-7")
        assert job is not None and (job.attempts, job.leased_until) == (0, None)
        assert [job.id for job in queue.jobs()] == ["report-7"]
        assert queue.dead_letters() == []
        assert queue.metrics().done == 3  # the counts outlived the process


# -- a file held by another process -------------------------------------------------------------

HOLD = """
import sys, time
from jobqueue.backends.duckdb import DurableQueue
queue = DurableQueue(sys.argv[1])
print("holding", flush=True)
time.sleep(3600)  # killed by the test
"""


def test_commands_on_a_file_another_process_holds(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            Lines(holder.stdout).wait_until(lambda seen: seen == ["holding"])
            statuses = [main(["dead", str(path)]), main(["replay", str(path), "--all"])]
            statuses.append(main(["stats", str(path)]))  # no worker figures to show
            out, err = capsys.readouterr()
            figures = QueueMetrics(
                at=0, waiting=4, scheduled=0, leased=2, oldest_waiting_age_s=3.5,
                oldest_leased_age_s=12.0, window_s=300, done=10, failed=1, dead_letters=0,
            )  # fmt: skip
            written = WorkerStats(pid=holder.pid, written_at=time.time() - 5, metrics=figures)
            stats_path(path).write_text(written.to_json())
            statuses.append(main(["stats", str(path)]))
            took_s = time.time() - written.written_at - 5
            shown, shown_err = capsys.readouterr()
        finally:
            holder.kill()
    assert statuses == [1, 1, 1, 0]
    assert out == ""
    assert err.count(f"error: cannot open queue file '{path}': another process has it open") == 3
    assert shown_err == ""
    head = rf"\(the file is held by worker {holder.pid}; its figures from (\d+) s ago\)"
    match = re.fullmatch(rf"{head}\n{re.escape(str(figures))}\n", shown)
    assert match is not None, shown
    assert 5 <= int(match[1]) <= round(5 + took_s), (match[1], took_s)  # 5 s, and the test's own time
