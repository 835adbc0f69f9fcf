"""Lesson 12: the ``jobqueue`` command line on a PostgreSQL URL.

Two real worker processes share one queue (each job done once, both doing some), and
``stats``, ``dead`` and ``replay`` take the URL while nothing holds a file.
"""

import re
import signal
import subprocess
from pathlib import Path

import pytest
from test_cli import HANDLERS, Lines, jobqueue_command, receipt, without_times
from waiting import HANG_GUARD_S, wait_until

from jobqueue.backends.postgres import PostgresQueue
from jobqueue.cli import main
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReportPayload


def test_two_worker_processes_share_the_work_of_one_queue(pg_conninfo: str, tmp_path: Path) -> None:
    reports = [f"report-{n}" for n in range(24)]
    # No prefetch: a worker holds at most the 2 jobs it runs, so the other need not be quick
    # (a loaded machine) to get some; it has until the first has run 22 jobs, 2.2 s.
    options = ["--concurrency", "2", "--prefetch", "0", "--poll", "0.5", "--grace", "1"]
    command = jobqueue_command("worker", pg_conninfo, "--handlers", HANDLERS, *options)
    stderr = [(tmp_path / f"worker-{n}.stderr").open("w") for n in range(2)]
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True) for err in stderr]
    try:
        outputs = []
        for worker in workers:
            assert worker.stdout is not None
            outputs.append(Lines(worker.stdout))
        for lines in outputs:
            try:
                lines.wait_until(lambda seen: any(" ready: " in line for line in seen))
            except AssertionError:
                for err in stderr:
                    err.flush()
                raise AssertionError([p.read_text() for p in sorted(tmp_path.glob("*.stderr"))]) from None
        with PostgresQueue(pg_conninfo) as queue:  # 2.4 s of work for one worker: both take some
            queue.enqueue_many(
                BUILD_REPORT, [ReportPayload(report_id=n, work_s=0.2) for n in range(24)], ids=reports
            )

        def done(lines: Lines) -> int:
            return sum(line.endswith(": done") for line in lines.arrived())

        wait_until(
            lambda: sum(done(lines) for lines in outputs) >= len(reports),
            f"{len(reports)} jobs done",
            details=lambda: [lines.seen for lines in outputs],
        )
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        statuses = [worker.wait(timeout=HANG_GUARD_S) for worker in workers]
        logs = [without_times("\n".join(lines.to_end())) for lines in outputs]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            if worker.stdout is not None:
                worker.stdout.close()
        for err in stderr:
            err.close()
    errors = [(tmp_path / f"worker-{n}.stderr").read_text() for n in range(2)]
    assert statuses == [0, 0] and errors == ["", ""]
    done_ids = [[line.split()[0] for line in log if line.endswith(": done")] for log in logs]
    assert sorted(done_ids[0] + done_ids[1]) == sorted(reports)  # every job once, none twice
    assert all(done_ids), f"one worker did all the work: {done_ids}"
    for worker, log, ids in zip(workers, logs, done_ids, strict=True):
        source = r"PostgreSQL at .*, database jobqueue_\w+"
        assert re.fullmatch(rf"worker {worker.pid} ready: up to 2 jobs at once from {source}", log[0])
        assert log[-1].startswith(f"worker {worker.pid} stopped: {len(ids)} done")
    with PostgresQueue(pg_conninfo) as queue:
        assert len(queue) == 0 and queue.metrics().done == len(reports)


def test_stats_dead_and_replay_take_a_url(pg_conninfo: str, capsys: pytest.CaptureFixture[str]) -> None:
    with PostgresQueue(pg_conninfo) as queue:
        queue.enqueue(SEND_RECEIPT, receipt(2, email="nobody"), id="receipt-2")
        queue.enqueue(SEND_RECEIPT, receipt(3), id="receipt-3")
    assert main(["worker", pg_conninfo, "--handlers", HANDLERS, "--burst", "--poll", "0.05"]) == 0
    capsys.readouterr()

    assert main(["stats", pg_conninfo]) == 0
    stats = capsys.readouterr().out.splitlines()
    assert stats[0] == "waiting                   0"
    metrics = stats[: stats.index("")]  # then what holds back cleanup (tests/test_postgres_cleanup.py)
    assert metrics[-3:] == [
        "failure rate, last 300 s  50% (1 failed, 1 done)",
        "dead letters              1",
        "cancelled                 0",
    ]

    assert main(["dead", pg_conninfo]) == 0
    dead = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"receipt-2  send_receipt  attempts 1/5  died \S+", dead[0])
    assert dead[1:] == [
        "    PermanentJobError: invalid e-mail address 'nobody'",
        '    payload {"order_id":2,"email":"nobody"}',
    ]

    assert main(["replay", pg_conninfo, "receipt-9"]) == 1
    assert "no dead job with id 'receipt-9'" in capsys.readouterr().err
    assert main(["replay", pg_conninfo, "--all"]) == 0
    assert capsys.readouterr().out == "replayed receipt-2\n"
    with PostgresQueue(pg_conninfo) as queue:
        assert [job.id for job in queue.jobs()] == ["receipt-2"] and queue.dead_letters() == []


def test_an_unreachable_server_exits_1_naming_it(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://app:secret@/shop?host=/nonexistent-folder&connect_timeout=2"
    assert main(["stats", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "PostgreSQL at /nonexistent-folder:5432, database shop" in err
    assert "secret" not in err
