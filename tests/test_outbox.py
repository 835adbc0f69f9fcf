"""The transactional outbox of lesson 08: only the ``outbox`` table and its relay.

The shop's ``orders`` and ``save_order`` are tested in test_shop_db.py; here rows are added
with :func:`outbox.add_message` alone, as a reusing engineer would.
"""

import ast
import inspect
import time

import duckdb
import pytest

import jobqueue as jq
from jobqueue import db, outbox
from jobqueue.examples import shop


def no_pause(seconds: float) -> None:
    """Conflicts in these tests are staged on cue: nothing to wait for."""


class Crash(BaseException):
    """Stands for the process dying: no `except Exception` catches it."""


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = db.connect()
    outbox.create_tables(con)
    return con


@pytest.fixture
def queue(clock: jq.ManualClock) -> jq.JobQueue:
    return jq.JobQueue(clock=clock, random=lambda: 1.0)


def receipt(order_id: int) -> shop.ReceiptPayload:
    return shop.ReceiptPayload(order_id=order_id, email="customer@example.com")


def add_receipt(con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, order_id: int) -> int:
    """One ``send_receipt`` row in a transaction of its own; returns the row id."""
    with db.transaction(con):
        return outbox.add_message(con, shop.SEND_RECEIPT, receipt(order_id), clock)


def sent(con: duckdb.DuckDBPyConnection) -> list[tuple[int, float | None]]:
    return [(m.id, m.sent_at) for m in outbox.messages(con)]


def relay_for(
    con: duckdb.DuckDBPyConnection, target: outbox.Enqueuer, clock: jq.ManualClock, **kwargs: object
) -> outbox.Relay:
    kwargs.setdefault("pause", no_pause)
    return outbox.Relay(con, outbox.publisher(target, [shop.SEND_RECEIPT]), clock=clock, **kwargs)  # type: ignore[arg-type]


# -- relaying ------------------------------------------------------------------------


def test_a_row_waits_out_a_queue_outage_and_becomes_exactly_one_job(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    remote = shop.RemoteQueue(queue=queue, down=True)
    assert add_receipt(con, clock, 1002) == 1
    relay = relay_for(con, remote, clock)
    assert relay.run_once() == 0  # the queue is down
    assert relay.last_error == (
        "outbox-1: QueueUnreachable: job queue unreachable, could not enqueue 'outbox-1'"
    )
    assert sent(con) == [(1, None)]
    remote.down = False
    clock.advance(5)
    assert relay.run_once() == 1
    assert relay.last_error is None
    assert relay.run_once() == 0
    assert [(job.id, job.type, job.payload) for job in queue.jobs()] == [
        ("outbox-1", "send_receipt", '{"order_id":1002,"email":"customer@example.com"}')
    ]
    assert sent(con) == [(1, 5.0)]


def test_rows_are_published_in_id_order_with_ids_from_the_row(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    for order_id in (1001, 1002, 1003):
        add_receipt(con, clock, order_id)
    seen: list[str] = []
    relay = outbox.Relay(con, lambda m: seen.append(m.job_id), clock=clock, batch_size=2)
    assert relay.run_once() == 2
    assert relay.run_once() == 1
    assert seen == ["outbox-1", "outbox-2", "outbox-3"]
    assert relay.published == 3


# -- adding rows ----------------------------------------------------------------------


def test_a_bad_payload_rolls_back_the_whole_transaction(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    with pytest.raises(jq.PayloadError, match="InvoicePayload"), db.transaction(con):
        outbox.add_message(con, shop.SEND_RECEIPT, receipt(1002), clock)
        outbox.add_message(con, shop.SEND_RECEIPT, shop.InvoicePayload(order_id=1002), clock)  # type: ignore[misc]
    assert outbox.messages(con) == []


def test_the_outbox_row_holds_type_payload_and_creation_time(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    clock.advance(3)
    add_receipt(con, clock, 1001)
    assert outbox.messages(con) == [
        outbox.OutboxMessage(
            id=1,
            type="send_receipt",
            payload='{"order_id":1001,"email":"customer@example.com"}',
            created_at=3.0,
            sent_at=None,
        )
    ]
    assert outbox.outbox_job_id(17) == "outbox-17"


# -- out-of-order commits --------------------------------------------------------------


def test_a_row_committed_after_a_higher_id_was_published_is_still_published(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    relay = relay_for(con, queue, clock)
    a, b = con.cursor(), con.cursor()
    with db.transaction(a):
        assert outbox.add_message(a, shop.SEND_RECEIPT, receipt(1001), clock) == 1
        assert add_receipt(b, clock, 1002) == 2
        assert relay.run_once() == 1  # sees only row 2: row 1 is not committed yet
        assert [job.id for job in queue.jobs()] == ["outbox-2"]
    assert relay.run_once() == 1  # row 1, committed after row 2 was published
    assert sorted(job.id for job in queue.jobs()) == ["outbox-1", "outbox-2"]
    assert outbox.unsent(con) == []


def test_a_rolled_back_transaction_leaves_a_gap_in_the_ids(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    with pytest.raises(Crash), db.transaction(con):
        outbox.add_message(con, shop.SEND_RECEIPT, receipt(1001), clock)
        raise Crash
    add_receipt(con, clock, 1002)
    assert [m.id for m in outbox.messages(con)] == [2]


# -- publish failures and repeats ------------------------------------------------------


def test_a_publish_failure_stops_the_run_and_marks_nothing_unpublished(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    for order_id in (1001, 1002, 1003):
        add_receipt(con, clock, order_id)
    calls: list[int] = []

    def publish(message: outbox.OutboxMessage) -> None:
        calls.append(message.id)
        if message.id == 2:
            raise ConnectionError("broker hiccup")

    relay = outbox.Relay(con, publish, clock=clock)
    assert relay.run_once() == 1
    assert calls == [1, 2]  # stopped at row 2; row 3 was not tried
    assert relay.last_error == "outbox-2: ConnectionError: broker hiccup"
    assert sent(con) == [(1, 0.0), (2, None), (3, None)]


def test_a_crash_after_publishing_publishes_again_and_the_queue_ignores_the_repeat(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    add_receipt(con, clock, 1002)
    to_queue = outbox.publisher(queue, [shop.SEND_RECEIPT])
    published: list[str] = []

    def publish_then_die(message: outbox.OutboxMessage) -> None:
        to_queue(message)
        published.append(message.job_id)
        raise Crash("killed before marking it sent")

    with pytest.raises(Crash):
        outbox.Relay(con, publish_then_die, clock=clock).run_once()
    assert sent(con) == [(1, None)]
    restarted = relay_for(con, queue, clock)
    assert restarted.run_once() == 1
    assert published == ["outbox-1"]
    assert [job.id for job in queue.jobs()] == ["outbox-1"]  # one job, not two
    assert sent(con) == [(1, 0.0)]


def test_publisher_rejects_an_unknown_type_and_the_row_stays_unsent(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    with db.transaction(con):
        outbox.add_message(con, shop.PICK_ORDER, shop.PickPayload(order_id=1001), clock)
    relay = relay_for(con, queue, clock)
    assert relay.run_once() == 0
    assert relay.last_error is not None
    assert "UnknownJobTypeError: outbox row 1 has job type 'pick_order'" in relay.last_error
    assert len(queue) == 0
    assert sent(con) == [(1, None)]


# -- conflicts -------------------------------------------------------------------------


def open_rival_mark(con: duckdb.DuckDBPyConnection, outbox_id: int) -> duckdb.DuckDBPyConnection:
    """Another transaction marks the row and stays open."""
    rival = con.cursor()
    rival.execute("BEGIN TRANSACTION")
    rival.execute("UPDATE outbox SET sent_at = 99 WHERE id = ? AND sent_at IS NULL", [outbox_id]).fetchall()
    return rival


def test_duckdb_raises_a_conflict_at_the_update_of_a_row_another_transaction_marked(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    add_receipt(con, clock, 1002)
    rival = open_rival_mark(con, 1)
    mine = con.cursor()
    mine.execute("BEGIN TRANSACTION")
    with pytest.raises(duckdb.TransactionException, match="Conflict on update"):
        mine.execute("UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL", [1.0, 1])
    mine.execute("ROLLBACK")
    rival.execute("COMMIT")


def test_a_conflicting_mark_is_retried_and_finds_the_row_already_marked(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    add_receipt(con, clock, 1002)
    rival = open_rival_mark(con, 1)
    conflicts: list[tuple[int, str]] = []

    def on_conflict(attempt: int, error: duckdb.TransactionException) -> None:
        conflicts.append((attempt, type(error).__name__))
        rival.execute("COMMIT")  # the other relay finishes while we wait

    relay = relay_for(con, queue, clock, on_conflict=on_conflict)
    assert relay.run_once() == 1
    assert conflicts == [(1, "TransactionException")]
    assert sent(con) == [(1, 99.0)]  # the rival's mark stands
    assert [job.id for job in queue.jobs()] == ["outbox-1"]


def test_a_conflict_that_persists_raises_after_max_attempts_and_the_row_stays_unsent(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    add_receipt(con, clock, 1002)
    rival = open_rival_mark(con, 1)
    attempts: list[int] = []
    pauses: list[float] = []
    with pytest.raises(duckdb.TransactionException, match="Conflict"):
        outbox.mark_sent(
            con, 1, clock, max_attempts=3, on_conflict=lambda n, _: attempts.append(n), pause=pauses.append
        )
    assert attempts == [1, 2]
    assert pauses == [0.001, 0.002]  # CONFLICT_PAUSE_S, doubling; none after the last attempt
    rival.execute("ROLLBACK")
    assert sent(con) == [(1, None)]
    assert outbox.mark_sent(con, 1, clock) is True  # the connection is usable again
    assert outbox.mark_sent(con, 1, clock) is False


# -- clean-up --------------------------------------------------------------------------


def test_delete_sent_removes_only_sent_rows_past_the_retention(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, queue: jq.JobQueue
) -> None:
    add_receipt(con, clock, 1001)
    relay_for(con, queue, clock).run_once()  # row 1 sent at t=0
    clock.advance(3600)
    add_receipt(con, clock, 1002)
    relay_for(con, queue, clock).run_once()  # row 2 sent at t=3600
    add_receipt(con, clock, 1003)  # row 3 never sent
    week_s = 7 * 24 * 3600
    assert week_s == outbox.DEFAULT_RETENTION_S
    clock.advance(week_s - 3600 - 1)
    assert outbox.delete_sent(con, clock) == 0
    clock.advance(1)  # row 1 is exactly 7 days old
    assert outbox.delete_sent(con, clock) == 1
    assert [m.id for m in outbox.messages(con)] == [2, 3]
    clock.advance(365 * 24 * 3600)
    assert outbox.delete_sent(con, clock, retention_s=60) == 1
    assert [(m.id, m.sent_at) for m in outbox.messages(con)] == [(3, None)]  # unsent rows stay
    add_receipt(con, clock, 1004)
    assert [m.id for m in outbox.messages(con)] == [3, 4]  # ids are never reused


# -- bad inputs ------------------------------------------------------------------------


@pytest.mark.parametrize("retention_s", [0, -1, float("inf"), float("nan")])
def test_delete_sent_rejects_a_bad_retention_and_deletes_nothing(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, retention_s: float
) -> None:
    add_receipt(con, clock, 1001)
    outbox.mark_sent(con, 1, clock)
    clock.advance(10 * outbox.DEFAULT_RETENTION_S)
    with pytest.raises(jq.InvalidSettingError, match=rf"retention_s must be .* got {retention_s!r}"):
        outbox.delete_sent(con, clock, retention_s=retention_s)
    assert [m.id for m in outbox.messages(con)] == [1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be an int >= 1, got 0"),
        ({"batch_size": 2.5}, "batch_size must be an int >= 1, got 2.5"),
        ({"batch_size": True}, "batch_size must be an int >= 1, got True"),
        ({"max_attempts": 0}, "max_attempts must be an int >= 1, got 0"),
    ],
)
def test_relay_rejects_bad_settings(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(jq.InvalidSettingError, match=message):
        outbox.Relay(con, lambda m: None, clock=clock, **kwargs)  # type: ignore[arg-type]


def test_relay_rejects_a_publish_that_is_not_callable(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    with pytest.raises(jq.InvalidSettingError, match="publish must be callable, got 'queue'"):
        outbox.Relay(con, "queue", clock=clock)  # type: ignore[arg-type]


def test_unsent_and_mark_sent_reject_bad_counts(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    with pytest.raises(jq.InvalidSettingError, match="limit must be an int >= 1, got 0"):
        outbox.unsent(con, limit=0)
    with pytest.raises(jq.InvalidSettingError, match="max_attempts must be an int >= 1, got -1"):
        outbox.mark_sent(con, 1, clock, max_attempts=-1)


def test_publisher_rejects_no_job_types_and_duplicate_names(queue: jq.JobQueue) -> None:
    with pytest.raises(jq.InvalidSettingError, match=r"at least one job type, got \[\]"):
        outbox.publisher(queue, [])
    with pytest.raises(jq.InvalidSettingError, match="two job types are named 'send_receipt'"):
        outbox.publisher(queue, [shop.SEND_RECEIPT, shop.SEND_RECEIPT])


def test_create_tables_twice_keeps_the_rows(con: duckdb.DuckDBPyConnection, clock: jq.ManualClock) -> None:
    add_receipt(con, clock, 1001)
    outbox.create_tables(con)
    assert [m.id for m in outbox.messages(con)] == [1]
    assert add_receipt(con, clock, 1002) == 2


def test_create_tables_makes_only_the_outbox(con: duckdb.DuckDBPyConnection) -> None:
    assert con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == [("outbox",)]
    assert con.execute("SELECT sequence_name FROM duckdb_sequences()").fetchall() == [("outbox_id_seq",)]


def imported_names(module: object) -> set[str]:
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_module_holds_no_course_example() -> None:
    assert not [
        name for name in imported_names(outbox) if name.startswith(("jobqueue.examples", "jobqueue.teaching"))
    ]
    assert not hasattr(outbox, "save_order")
    assert not hasattr(outbox, "insert_order")


def test_the_conflict_pause_is_real_time_by_default() -> None:
    # It waits for another thread's transaction, not for a Clock: see outbox.Pause.
    assert inspect.signature(outbox.mark_sent).parameters["pause"].default is time.sleep
    assert inspect.signature(outbox.Relay).parameters["pause"].default is time.sleep


def test_duckdb_has_no_skip_locked() -> None:
    # Pins the reason the relay does not claim rows the PostgreSQL way; revisit if DuckDB adds it.
    con = db.connect()
    outbox.create_tables(con)
    with pytest.raises(duckdb.ParserException, match='syntax error at or near "FOR"'):
        con.execute("SELECT id FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED")


# -- a re-publish after the ack (issue 24: unique windows) ---------------------------------


def republish_after_the_ack(con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, **options: float) -> int:
    """A row published and its job acked; the relay crashed before marking the row sent, and
    runs again a minute later: how many jobs does the queue then hold for it?"""
    queue = jq.JobQueue(clock=clock)
    publish = outbox.publisher(queue, [shop.SEND_RECEIPT], **options)
    add_receipt(con, clock, 1001)
    (message,) = outbox.unsent(con)
    publish(message)  # the crash comes here: the row stays unsent
    lease = queue.claim()
    assert lease is not None and lease.job.id == "outbox-1"
    queue.ack(lease)
    clock.advance(60.0)
    publish(message)  # the relay's next run publishes the row again
    return len(queue)


def test_without_a_window_a_republish_after_the_ack_is_a_second_job(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    assert republish_after_the_ack(con, clock) == 1


def test_with_a_unique_window_a_republish_after_the_ack_adds_nothing(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    assert republish_after_the_ack(con, clock, unique_for_s=3600.0) == 0


@pytest.mark.parametrize("window", [-1.0, float("nan"), float("inf")])
def test_a_bad_window_is_refused_naming_it(window: float) -> None:
    with pytest.raises(jq.InvalidSettingError, match="unique_for_s"):
        outbox.publisher(jq.JobQueue(clock=jq.ManualClock()), [shop.SEND_RECEIPT], unique_for_s=window)
