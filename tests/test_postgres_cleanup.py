"""Cleanup held back (issue 24, lesson 16), on the real server.

A transaction left open in another session of the queue's database is reported with its pid,
application name, state and age, and is gone from the report once it ends; while it is open
VACUUM cannot remove the rows the acks deleted, and once it ends it can. ``jobqueue stats``
and the dashboard's snapshot (page and notebook view) show the report; other backends have
none.
"""

import html
import re
from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest
from postgres_support import vacuum_left_no_dead_rows
from waiting import wait_until

from jobqueue import InvalidSettingError, JobQueue, ManualClock
from jobqueue.backends.postgres import PostgresQueue
from jobqueue.cleanup import CleanupReport, OpenTransaction
from jobqueue.cli import main
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.overview import snapshot
from jobqueue.teaching.dashboard_view import tables_html

APP = "forgotten console"


@pytest.fixture
def queue(pg_conninfo: str) -> Iterator[PostgresQueue]:
    with PostgresQueue(pg_conninfo, clock=ManualClock(1_000.0)) as opened:
        yield opened


def server_now(conninfo: str) -> float:
    with psycopg.connect(conninfo, autocommit=True) as con:
        row = con.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])


def open_snapshot(conninfo: str) -> tuple[psycopg.Connection, float]:
    """A session idle in a REPEATABLE READ transaction that has read (so holds a snapshot), and its start."""
    con = psycopg.connect(conninfo, application_name=APP)
    con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    row = con.execute("SELECT extract(epoch FROM transaction_timestamp())::float8").fetchone()
    assert row is not None
    return con, float(row[0])


def churn(queue: PostgresQueue, jobs: int) -> None:
    """Enqueue, claim and ack ``jobs`` jobs: each leaves dead row versions behind.

    Returns once the enqueue's wake-up has gone out too: its NOTIFY's transaction (sent by a
    thread of the queue's) would otherwise count as holding back cleanup while it runs.
    """
    woken = queue._wakeups.sent + queue._wakeups.lost
    queue.enqueue_many(SEND_RECEIPT, [ReceiptPayload(order_id=n, email="a@example.com") for n in range(jobs)])
    wait_until(lambda: queue._wakeups.sent + queue._wakeups.lost > woken, "the enqueue's wake-up")
    leases = queue.claim_many(jobs)
    assert len(leases) == jobs and queue.ack_many(leases) == []


def table_counter(conninfo: str, column: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as con:
        row = con.execute(
            f"SELECT {column} FROM pg_stat_user_tables WHERE relid = 'jobqueue_jobs'::regclass"
        ).fetchone()
    assert row is not None
    return int(row[0])


def vacuum(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.execute("VACUUM jobqueue_jobs")


def test_an_idle_transaction_is_reported_with_its_pid_and_age_until_it_ends(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    assert queue.cleanup_held_back().oldest is None
    holder, started = open_snapshot(pg_conninfo)
    try:
        before = server_now(pg_conninfo)
        report = queue.cleanup_held_back()
        after = server_now(pg_conninfo)
        oldest = report.oldest
        assert oldest is not None
        assert (oldest.pid, oldest.application_name, oldest.state) == (
            holder.info.backend_pid,
            APP,
            "idle in transaction",
        )
        assert before - started <= oldest.age_s <= after - started
        assert report.warning is None  # opened a moment ago, far below the 60 s default
    finally:
        holder.rollback()
    assert queue.cleanup_held_back().oldest is None
    holder.close()


def test_a_transaction_that_wrote_holds_back_cleanup_and_one_that_only_read_does_not(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    with psycopg.connect(pg_conninfo, application_name=APP) as reader:  # READ COMMITTED: no snapshot kept
        reader.execute("SELECT count(*) FROM jobqueue_jobs").fetchall()
        assert queue.cleanup_held_back().oldest is None
        reader.execute("SELECT pg_current_xact_id()").fetchall()  # a transaction id: now it holds
        oldest = queue.cleanup_held_back().oldest
        assert oldest is not None and oldest.pid == reader.info.backend_pid
    assert queue.cleanup_held_back().oldest is None


def test_vacuum_keeps_the_dead_rows_while_a_transaction_is_open_and_removes_them_after(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    holder, _ = open_snapshot(pg_conninfo)
    try:
        with PostgresQueue(pg_conninfo, clock=ManualClock(1_000.0)) as churner:
            churn(churner, 200)
        # A session sends its counts to the statistics as it ends (else when idle, up to 10 s
        # later): wait for that event.
        wait_until(lambda: table_counter(pg_conninfo, "n_tup_del") >= 200, "the acks' deletes counted")
        vacuum(pg_conninfo)
        assert queue.cleanup_held_back().dead_rows >= 200  # still visible to the open snapshot
    finally:
        holder.close()
    # The server ends the session a moment after the client closes it: wait for that event.
    wait_until(lambda: queue.cleanup_held_back().oldest is None, "the holder's session to end")
    wait_until(lambda: vacuum_left_no_dead_rows(pg_conninfo), "a VACUUM that frees every dead row")
    report = queue.cleanup_held_back()
    assert (report.oldest, report.dead_rows, report.live_rows) == (None, 0, 0)


def test_the_warning_names_the_holder_past_the_threshold() -> None:
    holder = OpenTransaction(pid=4242, application_name="psql", state="idle in transaction", age_s=75.0)
    report = CleanupReport(oldest=holder, dead_rows=9_000, live_rows=10, last_autovacuum_age_s=None)
    assert report.warning is not None and "pg_terminate_backend(4242)" in report.warning
    assert report.lines() == [
        "oldest transaction holding back cleanup  pid 4242 (psql, idle in transaction), open 75 s",
        "dead rows in the queue's table           9000 (live 10)",
        "last autovacuum of the table             never",
        f"WARNING: {report.warning}",
    ]
    calm = CleanupReport(
        oldest=holder, dead_rows=9_000, live_rows=10, last_autovacuum_age_s=3.0, warn_after_s=120.0
    )
    assert calm.warning is None and calm.lines()[-1] == "last autovacuum of the table             3 s ago"


def test_a_bad_threshold_is_refused_by_name(queue: PostgresQueue) -> None:
    for bad in (0, -1.0, float("nan"), True, "60"):
        with pytest.raises(InvalidSettingError, match=f"warn_after_s .*got {re.escape(repr(bad))}"):
            queue.cleanup_held_back(warn_after_s=bad)  # type: ignore[arg-type]


def test_stats_prints_the_holder(pg_conninfo: str, capsys: pytest.CaptureFixture[str]) -> None:
    PostgresQueue(pg_conninfo).close()  # the tables
    holder, _ = open_snapshot(pg_conninfo)
    pid = holder.info.backend_pid
    try:
        assert main(["stats", pg_conninfo]) == 0
    finally:
        holder.close()
    out = capsys.readouterr().out.splitlines()
    cleanup = out[out.index("") + 1 :]
    assert cleanup[0].startswith(
        f"oldest transaction holding back cleanup  pid {pid} ({APP}, idle in transaction)"
    )
    assert cleanup[1:] == [
        "dead rows in the queue's table           0 (live 0)",
        "last autovacuum of the table             never",
    ]


def test_the_dashboard_snapshot_carries_the_report_on_postgres_only(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    holder, _ = open_snapshot(pg_conninfo)
    pid = holder.info.backend_pid
    try:
        taken = snapshot(queue, where=queue.server)
    finally:
        holder.close()
    shown = taken.to_json()["cleanup"]
    assert shown["oldest"]["pid"] == pid and shown["warning"] is None
    line = f"cleanup: 0 dead rows in the queue's table, held back by pid {pid} ({APP}"
    assert (taken.cleanup_line() or "").startswith(line)
    assert html.escape(line) in tables_html(taken)

    elsewhere = snapshot(JobQueue(clock=ManualClock()), where="memory")
    assert elsewhere.cleanup is None and elsewhere.to_json()["cleanup"] is None
    assert "cleanup" not in tables_html(elsewhere)


def test_a_warning_leads_the_dashboard_line_in_red() -> None:
    holder = OpenTransaction(pid=4242, application_name="", state="active", age_s=3_600.0)
    report = CleanupReport(oldest=holder, dead_rows=12, live_rows=3, last_autovacuum_age_s=None)
    taken = replace(snapshot(JobQueue(clock=ManualClock()), where="x"), cleanup=report)
    assert taken.cleanup_line() == (
        "WARNING cleanup: 12 dead rows in the queue's table,"
        " held back by pid 4242 (no application_name, active), open 3600 s"
    )
    assert "<p style='color:#c0392b'>WARNING cleanup" in tables_html(taken)
    assert taken.to_json()["cleanup"]["warning"] == report.warning


def test_a_transaction_left_open_after_a_notify_is_still_named(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    # The queue's own wake-ups are left out while they run (over in microseconds); a session
    # that sent the same NOTIFY and then left its transaction open holds cleanup back.
    with psycopg.connect(pg_conninfo, application_name=APP) as other:
        other.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # its snapshot stays
        other.execute("SELECT pg_notify('jobqueue_jobs', '')")  # and then nobody commits
        oldest = queue.cleanup_held_back().oldest
        assert oldest is not None
        assert (oldest.pid, oldest.state) == (other.info.backend_pid, "idle in transaction")
