"""The shop's tables of lessons 07-08: loyalty points, and orders saved through the outbox.

Numbers from the spec: a paid order of 2,042,500 kobo earns 204 points, and a naive
consumer that credits every one of 3 deliveries gives 612. Lesson 08's run: order 1001
saved the naive way loses its receipt job while the queue is down; order 1002, saved
through the outbox, becomes exactly one job once the queue is back.
"""

import duckdb
import pytest

import jobqueue as jq
from jobqueue import db, outbox
from jobqueue.examples import shop, shop_db

POINTS = shop.loyalty_points(2_042_500)
ORDER_1001 = shop.Order(id=1001, customer_id=7, email="customer@example.com", total_kobo=2_042_500)
ORDER_1002 = shop.Order(id=1002, customer_id=8, email="customer@example.com", total_kobo=2_042_500)


class Crash(BaseException):
    """Stands for the process dying: no `except Exception` catches it."""


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = db.connect()
    outbox.create_tables(con)
    shop_db.create_tables(con)
    return con


def order_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [row[0] for row in con.execute("SELECT id FROM orders ORDER BY id").fetchall()]


def receipt(order_id: int) -> shop.ReceiptPayload:
    return shop.ReceiptPayload(order_id=order_id, email="customer@example.com")


# -- loyalty (lesson 07) ---------------------------------------------------------------


def test_points_of_the_spec_order() -> None:
    assert POINTS == 204


def test_naive_consumer_credits_every_delivery(con: duckdb.DuckDBPyConnection) -> None:
    for _ in range(3):
        with db.transaction(con):
            shop_db.credit_points(con, 7, POINTS)
    assert shop_db.points_balance(con, 7) == 612
    assert shop_db.points_balance(con, 8) == 0  # no row yet: 0, not an error


@pytest.mark.parametrize(
    ("customer_id", "points", "message"),
    [
        (8, -5, "points must be >= 0, got -5"),
        (8, 2.5, "points must be an int"),
        (8, True, "points must be an int, got True"),
        ("8", 5, "customer_id must be an int"),
    ],
)
def test_credit_points_rejects_bad_values(
    con: duckdb.DuckDBPyConnection, customer_id: object, points: object, message: str
) -> None:
    with pytest.raises(jq.InvalidSettingError, match=message), db.transaction(con):
        shop_db.credit_points(con, customer_id, points)  # type: ignore[arg-type]
    assert con.execute("SELECT count(*) FROM loyalty").fetchone() == (0,)


# -- orders through the outbox (lesson 08) ---------------------------------------------


def test_spec_naive_order_loses_its_job_outbox_order_gets_exactly_one(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    queue = jq.JobQueue(clock=clock, random=lambda: 1.0)
    remote = shop.RemoteQueue(queue=queue, down=True)
    # Order 1001, the naive way: saved, then the enqueue fails and the job is gone.
    with db.transaction(con):
        shop_db.insert_order(con, ORDER_1001, clock)
    with pytest.raises(shop.QueueUnreachable, match="receipt-1001"):
        remote.enqueue(shop.SEND_RECEIPT, receipt(1001), id="receipt-1001")
    # Order 1002 through the outbox.
    assert shop_db.save_order(con, ORDER_1002, clock) == 1
    relay = outbox.Relay(con, outbox.publisher(remote, [shop.SEND_RECEIPT]), clock=clock)
    assert relay.run_once() == 0  # the queue is still down
    remote.down = False
    clock.advance(5)
    assert relay.run_once() == 1
    assert order_ids(con) == [1001, 1002]
    assert [(job.id, job.type, job.payload) for job in queue.jobs()] == [
        ("outbox-1", "send_receipt", '{"order_id":1002,"email":"customer@example.com"}')
    ]
    assert [(m.id, m.created_at, m.sent_at) for m in outbox.messages(con)] == [(1, 0.0, 5.0)]


def test_insert_order_stamps_the_clock(con: duckdb.DuckDBPyConnection, clock: jq.ManualClock) -> None:
    clock.advance(3)
    with db.transaction(con):
        shop_db.insert_order(con, ORDER_1001, clock)
    assert con.execute("SELECT * FROM orders").fetchall() == [
        (1001, 7, "customer@example.com", 2_042_500, 3.0)
    ]


def test_a_crash_between_the_two_inserts_leaves_neither(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object) -> int:
        raise Crash("killed after the order insert")

    monkeypatch.setattr(outbox, "add_message", crash)
    with pytest.raises(Crash):
        shop_db.save_order(con, ORDER_1002, clock)
    monkeypatch.undo()
    assert order_ids(con) == []
    assert outbox.messages(con) == []
    assert shop_db.save_order(con, ORDER_1002, clock) == 1  # the connection is usable again
    assert order_ids(con) == [1002]


def test_a_duplicate_order_saves_nothing_and_names_the_id(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    shop_db.save_order(con, ORDER_1002, clock)
    with pytest.raises(duckdb.ConstraintException, match="1002"):
        shop_db.save_order(con, ORDER_1002, clock)
    assert order_ids(con) == [1002]
    assert [m.id for m in outbox.messages(con)] == [1]


def test_a_bad_payload_rolls_back_the_order_too(
    con: duckdb.DuckDBPyConnection, clock: jq.ManualClock
) -> None:
    with pytest.raises(jq.PayloadError, match="InvoicePayload"), db.transaction(con):
        shop_db.insert_order(con, ORDER_1002, clock)
        outbox.add_message(con, shop.SEND_RECEIPT, shop.InvoicePayload(order_id=1002), clock)  # type: ignore[misc]
    assert order_ids(con) == []
    assert outbox.messages(con) == []


# -- the tables ------------------------------------------------------------------------


def test_create_tables_makes_only_the_shops_tables() -> None:
    con = db.connect()
    shop_db.create_tables(con)
    assert con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == [
        ("loyalty",),
        ("orders",),
    ]


def test_create_tables_twice_keeps_the_rows(con: duckdb.DuckDBPyConnection, clock: jq.ManualClock) -> None:
    shop_db.save_order(con, ORDER_1001, clock)
    with db.transaction(con):
        shop_db.credit_points(con, 7, POINTS)
    shop_db.create_tables(con)
    assert order_ids(con) == [1001]
    assert shop_db.points_balance(con, 7) == 204
    assert shop_db.save_order(con, ORDER_1002, clock) == 2
