"""Done and failed counted per job type and per named queue (issue 24), on every backend.

Each outcome is counted under its second, its job type and its queue; the metrics and the
dashboard's totals add them up as before, and the dashboard's tables by type and by queue
show them over the chart's span. On PostgreSQL several processes add to the same rows;
outcomes stored before a database counted them by type and queue stay in the totals.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from backends_support import BACKENDS, clock_of, queue_at

from jobqueue import Backoff, DurableQueue, Lease, ManualClock, RetryPolicy
from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends import postgres, sql
from jobqueue.backends.contract import Queue, ShowsOverview
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.metrics import RETENTION_S, OutcomeKey, OutcomeLog
from jobqueue.overview import CHART_S, Row, snapshot
from jobqueue.teaching.dashboard_view import tables_html

T0 = 1_000.0
POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=60.0, cap_s=600.0))


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    yield from queue_at(request, T0, POLICY)


def receipt(order_id: int) -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email="ada@example.com")


def report(report_id: int) -> ReportPayload:
    return ReportPayload(report_id=report_id, work_s=1.0)


def claimed(queue: Queue, count: int) -> list[Lease]:
    leases = queue.claim_many(count)
    assert len(leases) == count
    return leases


def outcomes(rows: tuple[Row, ...]) -> list[tuple[str, int, int]]:
    return [(row.name, row.done, row.failed) for row in rows]


def test_outcomes_count_per_type_and_per_queue_within_the_window_and_add_up_to_the_totals(
    queue: Queue,
) -> None:
    clock = clock_of(queue)
    # Three receipts acked before the chart's span: at T0, and a second before its first second.
    queue.enqueue_many(SEND_RECEIPT, [receipt(i) for i in (1, 2)], queue="emails")
    queue.ack_many(claimed(queue, 2))
    now = T0 + 700.0
    first = now + 1 - CHART_S  # the first second the chart (and its done) counts
    clock.advance(first - 1 - clock.now())
    queue.enqueue(SEND_RECEIPT, receipt(3), queue="emails")
    queue.ack_many(claimed(queue, 1))
    clock.advance(1.0)  # the first second of the span: counted
    queue.enqueue(SEND_RECEIPT, receipt(4), queue="emails")
    queue.ack_many(claimed(queue, 1))
    clock.advance(now - clock.now())
    queue.enqueue_many(SEND_RECEIPT, [receipt(i) for i in (5, 6)], queue="emails")
    queue.enqueue(SEND_RECEIPT, receipt(7))  # the queue "default"
    queue.enqueue_many(BUILD_REPORT, [report(i) for i in (1, 2)], queue="reports")
    queue.ack_many(claimed(queue, 2))  # receipts 5 and 6, one batch
    [bad] = claimed(queue, 1)
    assert queue.fail(bad, "ValueError: no such order", permanent=True).outcome == "dead"
    ok, flaky = claimed(queue, 2)
    queue.ack(ok)
    assert queue.fail(flaky, "ConnectionError: down").outcome == "retry"

    assert isinstance(queue, ShowsOverview)
    taken = snapshot(queue, where="here")
    assert outcomes(taken.by_type()) == [("build_report", 1, 1), ("send_receipt", 3, 1)]
    assert outcomes(taken.by_queue()) == [("default", 0, 1), ("emails", 3, 0), ("reports", 1, 1)]
    assert taken.by_type()[1].count("dead") == 1  # beside the counts by state
    # The totals stay the sums: the card, and the metrics over any window (a window of
    # 599 s reads the 600 whole seconds the chart shows).
    assert (taken.done, taken.failed) == (4, 2)
    assert (queue.metrics(CHART_S - 1).done, queue.metrics(CHART_S - 1).failed) == (4, 2)
    assert queue.metrics(RETENTION_S).done == 7  # with the three receipts before the span
    assert queue.outcome_sums(0, int(now)).per_key == [
        ("build_report", "reports", 1, 1),
        ("send_receipt", "default", 0, 1),
        ("send_receipt", "emails", 6, 0),
    ]
    by_type = {entry["job_type"]: (entry["done"], entry["failed"]) for entry in taken.to_json()["by_type"]}
    assert by_type == {"build_report": (1, 1), "send_receipt": (3, 1)}


def test_a_type_whose_jobs_all_finished_keeps_its_row_until_its_outcomes_leave_the_span(
    queue: Queue,
) -> None:
    queue.enqueue(BUILD_REPORT, report(1), queue="reports")
    [lease] = claimed(queue, 1)
    assert queue.ack_many([lease, lease]) == [lease]  # passed twice: acked, and counted, once
    assert isinstance(queue, ShowsOverview)
    assert queue.census().by_type == ()
    [row] = snapshot(queue, where="here").by_type()
    assert (row.name, row.done, row.failed, row.count("waiting")) == ("build_report", 1, 0, 0)
    clock_of(queue).advance(CHART_S)
    assert snapshot(queue, where="here").by_type() == ()


def test_the_notebook_tables_show_done_and_failed_by_queue_and_by_type() -> None:
    from jobqueue import JobQueue

    queue = JobQueue(clock=ManualClock(T0), retry=POLICY, random=lambda: 1.0)
    queue.enqueue(BUILD_REPORT, report(1), queue="<reports>")
    queue.ack_many(claimed(queue, 1))
    text = tables_html(snapshot(queue, where="x", chart_s=60.0, bin_s=5.0))
    assert "<th style='text-align:left;padding-right:12px'>done, 60 s</th>" in text
    row = "".join(
        f"<td style='padding-right:12px'>{value}</td>"
        for value in ("build_report", "0", "0", "0", "0", "0", "1", "0")
    )
    assert row in text
    assert "&lt;reports&gt;" in text and "<reports>" not in text


def test_a_batch_ack_counts_once_per_type_and_queue_and_writes_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys: list[OutcomeKey] = []
    stored: list[int] = []
    record = OutcomeLog.record

    def counting(self: OutcomeLog, at: float, key: OutcomeKey, *, failed: bool, count: int = 1) -> None:
        keys.append(key)
        record(self, at, key, failed=failed, count=count)

    monkeypatch.setattr(OutcomeLog, "record", counting)
    clock = ManualClock(T0)
    with DurableQueue(":memory:", clock=clock) as durable:
        store = durable._store_outcomes

        def store_counting(columns: dict[str, list[Any]], before: int) -> None:
            stored.append(len(columns["seconds"]))
            store(columns, before)

        monkeypatch.setattr(durable, "_store_outcomes", store_counting)
        durable.enqueue_many(SEND_RECEIPT, [receipt(i) for i in range(60)], queue="emails")
        durable.enqueue_many(BUILD_REPORT, [report(i) for i in range(40)])
        assert durable.ack_many(claimed(durable, 100)) == []
        assert sorted(keys) == [("build_report", "default"), ("send_receipt", "emails")]
        assert stored == [2]  # the second's first outcomes: written at once, one row per key
        durable.enqueue_many(SEND_RECEIPT, [receipt(i) for i in range(10)], queue="emails")
        clock.advance(0.5)
        durable.ack_many(claimed(durable, 10))
        assert len(keys) == 3 and stored == [2]  # the same second: counted, not written
        durable.enqueue(SEND_RECEIPT, receipt(10), queue="emails")
        clock.advance(0.5)
        durable.ack_many(claimed(durable, 1))
        assert stored == [2, 2]  # a new second: one write of both seconds' rows
        assert durable.metrics().done == 111


def test_two_postgres_queues_add_to_the_same_rows(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with (
        postgres.PostgresQueue(pg_conninfo, clock=clock) as one,
        postgres.PostgresQueue(pg_conninfo, clock=clock) as other,  # as a second process
    ):
        one.enqueue_many(SEND_RECEIPT, [receipt(i) for i in range(5)], queue="emails")
        one.ack_many(one.claim_many(2))
        other.ack_many(other.claim_many(3))
        one.metrics()  # each writes its pending counts
        other.metrics()
        with psycopg.connect(pg_conninfo) as con:
            rows = con.execute(
                "SELECT second, type, queue, done, failed FROM jobqueue_outcomes_by_key"
            ).fetchall()
        assert rows == [(int(T0), "send_receipt", "emails", 5, 0)]
        assert outcomes(snapshot(one, where="here").by_queue()) == [("emails", 5, 0)]


OLD_COUNT_OUTCOMES = (  # the count_outcomes of version 9: every process adds to one row a second
    "INSERT INTO jobqueue_outcomes SELECT * FROM unnest(%(seconds)s::bigint[], %(done)s::bigint[],"
    " %(failed)s::bigint[]) ON CONFLICT (second) DO UPDATE SET done = jobqueue_outcomes.done"
    " + excluded.done, failed = jobqueue_outcomes.failed + excluded.failed"
)


def test_the_postgres_migration_keeps_old_outcomes_in_the_totals(pg_conninfo: str) -> None:
    """And an older worker still running during a rolling deploy goes on writing its counts."""
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # tables of version 9
        for number, step in sql.numbered_migrations(postgres.SQL, 0):
            if number <= 9:
                con.execute(step.encode())
        con.execute("INSERT INTO jobqueue_outcomes (second, done, failed) VALUES (1000, 4, 2)")
    assert postgres.migrate(pg_conninfo) == [10, 11]
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # a worker of version 9, still running
        con.execute(OLD_COUNT_OUTCOMES, {"seconds": [1000], "done": [1], "failed": [0]})
    with postgres.PostgresQueue(pg_conninfo, clock=ManualClock(T0 + 0.5)) as queue:
        queue.enqueue(SEND_RECEIPT, receipt(1))
        queue.ack_many(queue.claim_many(1))  # the same second as the old row, a row of its own
        metrics = queue.metrics(60.0)
        assert (metrics.done, metrics.failed) == (6, 2)
        taken = snapshot(queue, where="here")
        assert (taken.done, taken.failed) == (6, 2)
        assert outcomes(taken.by_type()) == [("send_receipt", 1, 0)]  # the old counts: no type
        old_and_new = [("", "", 5, 2), ("send_receipt", "default", 1, 0)]
        assert queue.outcome_sums(0, 2000).per_key == old_and_new


def test_the_duckdb_migration_keeps_old_outcomes_in_the_totals(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with duckdb.connect(str(path)) as con:  # a file of version 10
        for number, step in sql.numbered_migrations(duckdb_backend.SQL, 0):
            if number <= 10:
                con.execute(step)
        con.execute("INSERT INTO jobqueue_outcomes VALUES (1000, 5, 2)")
    with DurableQueue(path, clock=ManualClock(T0 + 0.5)) as queue:
        queue.enqueue(SEND_RECEIPT, receipt(1))
        queue.ack_many(queue.claim_many(1))
        metrics = queue.metrics(60.0)
        assert (metrics.done, metrics.failed) == (6, 2)
        old_and_new = [("", "", 5, 2), ("send_receipt", "default", 1, 0)]
        assert queue.outcome_sums(0, 2000).per_key == old_and_new
        assert outcomes(snapshot(queue, where="here").by_type()) == [("send_receipt", 1, 0)]
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [
            (duckdb_backend.SCHEMA_VERSION,)
        ]
