"""The outbox of lesson 08 on PostgreSQL: relays that lock their batch with SKIP LOCKED.

Each relay run locks up to ``batch_size`` unsent rows ``FOR UPDATE SKIP LOCKED``,
publishes them, marks them sent and commits, so relays on separate connections (threads
here, processes in production) share one outbox and publish every row once.
"""

import threading
from collections.abc import Iterator

import psycopg
import pytest
from waiting import HANG_GUARD_S, hang

import jobqueue as jq
from jobqueue import db, outbox
from jobqueue.examples import shop, shop_db


def open_con(conninfo: str) -> psycopg.Connection:
    return psycopg.connect(conninfo, autocommit=True)


@pytest.fixture
def con(pg_conninfo: str) -> Iterator[psycopg.Connection]:
    with open_con(pg_conninfo) as con:
        outbox.create_tables(con)
        yield con


def add_receipts(con: psycopg.Connection, clock: jq.ManualClock, order_ids: range) -> list[int]:
    with db.transaction(con):
        return [
            outbox.add_message(
                con, shop.SEND_RECEIPT, shop.ReceiptPayload(order_id=i, email="customer@example.com"), clock
            )
            for i in order_ids
        ]


class Collect:
    """A publish function that records the job ids it was given (thread-safe)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, message: outbox.OutboxMessage) -> None:
        with self._lock:
            self.ids.append(message.job_id)


def test_a_relay_publishes_in_id_order_and_marks_the_rows_sent(
    con: psycopg.Connection, clock: jq.ManualClock
) -> None:
    ids = add_receipts(con, clock, range(1001, 1004))
    queue = jq.JobQueue(clock=clock)
    relay = outbox.Relay(con, outbox.publisher(queue, [shop.SEND_RECEIPT]), clock=clock, batch_size=2)
    clock.advance(5)
    assert [relay.run_once(), relay.run_once(), relay.run_once()] == [2, 1, 0]
    assert [job.id for job in queue.jobs()] == [f"outbox-{i}" for i in ids]
    assert [m.sent_at for m in outbox.messages(con)] == [5.0, 5.0, 5.0]
    first = outbox.messages(con)[0]
    assert first.payload == shop.SEND_RECEIPT.dump(
        shop.ReceiptPayload(order_id=1001, email="customer@example.com")
    )
    assert first.created_at == 0.0


def test_a_second_relay_skips_the_batch_the_first_holds(
    con: psycopg.Connection, pg_conninfo: str, clock: jq.ManualClock
) -> None:
    # Staged: relay A has locked rows 1-3 and is publishing row 1 when relay B runs; B skips
    # A's locked rows, takes 4-6 and commits; then A finishes. Each row is published once.
    add_receipts(con, clock, range(1, 7))
    b_con = open_con(pg_conninfo)
    b_published = Collect()
    relay_b = outbox.Relay(b_con, b_published, clock=clock, batch_size=3)
    a_published = Collect()
    b_counts: list[int] = []

    def publish_a(message: outbox.OutboxMessage) -> None:
        if not b_counts:
            b_counts.append(relay_b.run_once())
        a_published(message)

    relay_a = outbox.Relay(con, publish_a, clock=clock, batch_size=3)
    assert relay_a.run_once() == 3
    b_con.close()
    assert b_counts == [3]
    assert a_published.ids == ["outbox-1", "outbox-2", "outbox-3"]
    assert b_published.ids == ["outbox-4", "outbox-5", "outbox-6"]
    assert outbox.unsent(con) == []


def test_two_relays_running_at_once_publish_every_row_once(
    con: psycopg.Connection, pg_conninfo: str, clock: jq.ManualClock
) -> None:
    add_receipts(con, clock, range(300))
    published = Collect()
    start = threading.Barrier(2)
    totals: list[int] = []
    errors: list[BaseException] = []

    def relay_until_empty() -> None:
        try:
            with open_con(pg_conninfo) as mine:
                relay = outbox.Relay(mine, published, clock=jq.ManualClock(), batch_size=10)
                start.wait()
                total = 0
                while count := relay.run_once():
                    total += count
                totals.append(total)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=relay_until_empty) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_GUARD_S)
        assert not thread.is_alive(), hang("a relay's end")
    assert errors == []
    assert sorted(published.ids) == sorted(f"outbox-{i}" for i in range(1, 301))  # each once
    assert sum(totals) == 300
    assert outbox.unsent(con) == []


def test_a_publish_failure_marks_what_was_published_and_stops(
    con: psycopg.Connection, clock: jq.ManualClock
) -> None:
    add_receipts(con, clock, range(1, 5))
    done: list[str] = []

    def publish(message: outbox.OutboxMessage) -> None:
        if message.id == 3:
            raise ConnectionError("queue unreachable")
        done.append(message.job_id)

    relay = outbox.Relay(con, publish, clock=clock)
    assert relay.run_once() == 2
    assert relay.last_error == "outbox-3: ConnectionError: queue unreachable"
    assert [m.id for m in outbox.unsent(con)] == [3, 4]
    assert done == ["outbox-1", "outbox-2"]


def test_a_crash_before_the_commit_leaves_the_batch_unsent_and_unlocked(
    con: psycopg.Connection, pg_conninfo: str, clock: jq.ManualClock
) -> None:
    class Crash(BaseException):
        pass

    add_receipts(con, clock, range(1, 4))

    def publish(message: outbox.OutboxMessage) -> None:
        if message.id == 2:
            raise Crash

    with pytest.raises(Crash):
        outbox.Relay(con, publish, clock=clock).run_once()
    assert [m.id for m in outbox.unsent(con)] == [1, 2, 3]
    with open_con(pg_conninfo) as other:  # nothing is still locked
        again = Collect()
        assert outbox.Relay(other, again, clock=clock).run_once() == 3
    assert again.ids == ["outbox-1", "outbox-2", "outbox-3"]


def test_mark_sent_and_delete_sent_work_on_postgresql(con: psycopg.Connection, clock: jq.ManualClock) -> None:
    (row,) = add_receipts(con, clock, range(1, 2))
    assert outbox.mark_sent(con, row, clock) is True
    assert outbox.mark_sent(con, row, clock) is False
    clock.advance(outbox.DEFAULT_RETENTION_S)
    assert outbox.delete_sent(con, clock) == 1
    assert outbox.messages(con) == []


def test_save_order_commits_the_order_and_its_row_or_neither(
    con: psycopg.Connection, clock: jq.ManualClock
) -> None:
    shop_db.create_tables(con)
    order = shop.Order(id=1001, customer_id=7, email="customer@example.com", total_kobo=2_042_500)
    assert shop_db.save_order(con, order, clock) == 1
    with pytest.raises(psycopg.errors.UniqueViolation):
        shop_db.save_order(con, order, clock)
    assert [m.id for m in outbox.messages(con)] == [1]
    assert con.execute("SELECT count(*) FROM orders").fetchone() == (1,)
