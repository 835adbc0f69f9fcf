"""The idempotent consumer of lesson 07: one effect per message id, however often delivered.

Numbers from the spec: a paid order of 2,042,500 kobo earns 204 points; delivered 3
times, the idempotent consumer credits 204 (the naive one's 612: test_shop_db.py). The
effect is the shop's loyalty credit (jobqueue.examples.shop_db); the module itself owns only
``processed_messages``.
"""

import ast
import asyncio
import contextlib
import inspect
import threading

import duckdb
import pytest

from jobqueue import db, idempotency
from jobqueue.clock import ManualClock
from jobqueue.errors import InvalidSettingError, TransactionAbortedError
from jobqueue.examples import shop, shop_db

POINTS = shop.loyalty_points(2_042_500)
MESSAGE = "order-paid-1002"


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = db.connect()
    idempotency.create_tables(con)
    shop_db.create_tables(con)
    return con


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_s=7)


def credit_8(con: duckdb.DuckDBPyConnection) -> None:
    shop_db.credit_points(con, 8, POINTS)


def processed(con: duckdb.DuckDBPyConnection) -> list[tuple[str, float]]:
    return con.execute("SELECT message_id, processed_at FROM processed_messages ORDER BY 1").fetchall()


def test_three_deliveries_credit_once(con: duckdb.DuckDBPyConnection, clock: ManualClock) -> None:
    ran = [idempotency.process_once(con, MESSAGE, credit_8, clock=clock) for _ in range(3)]
    assert ran == [True, False, False]
    assert shop_db.points_balance(con, 8) == 204
    assert processed(con) == [(MESSAGE, 7.0)]  # processed_at in seconds, from the clock


def test_later_deliveries_keep_the_first_processed_at(
    con: duckdb.DuckDBPyConnection, clock: ManualClock
) -> None:
    idempotency.process_once(con, MESSAGE, credit_8, clock=clock)
    clock.advance(30)
    assert idempotency.process_once(con, MESSAGE, credit_8, clock=clock) is False
    assert processed(con) == [(MESSAGE, 7.0)]


def test_different_messages_each_credit(con: duckdb.DuckDBPyConnection, clock: ManualClock) -> None:
    for message_id in ("order-paid-1001", "order-paid-1002", "order-paid-1001"):
        idempotency.process_once(con, message_id, credit_8, clock=clock)
    assert shop_db.points_balance(con, 8) == 408
    assert shop_db.points_balance(con, 99) == 0


def test_an_error_in_the_effect_rolls_back_the_id_too(
    con: duckdb.DuckDBPyConnection, clock: ManualClock
) -> None:
    def crash_after_credit(c: duckdb.DuckDBPyConnection) -> None:
        credit_8(c)
        raise RuntimeError("worker crashed")

    with pytest.raises(RuntimeError, match="worker crashed"):
        idempotency.process_once(con, MESSAGE, crash_after_credit, clock=clock)
    assert processed(con) == []
    assert shop_db.points_balance(con, 8) == 0
    assert idempotency.process_once(con, MESSAGE, credit_8, clock=clock) is True  # the redelivery
    assert shop_db.points_balance(con, 8) == 204


def test_a_swallowed_failed_statement_commits_neither_id_nor_credit(
    con: duckdb.DuckDBPyConnection, clock: ManualClock
) -> None:
    # DuckDB's own COMMIT would discard the credit silently and report success; with the id
    # recorded by that same transaction, a bare BEGIN/COMMIT would look like "done".
    def sloppy(c: duckdb.DuckDBPyConnection) -> None:
        credit_8(c)
        with contextlib.suppress(duckdb.ConstraintException):
            c.execute("INSERT INTO loyalty VALUES (8, 1)")  # duplicate key: the statement fails

    with pytest.raises(TransactionAbortedError):
        idempotency.process_once(con, MESSAGE, sloppy, clock=clock)
    assert processed(con) == []
    assert idempotency.is_processed(con, MESSAGE) is False
    assert shop_db.points_balance(con, 8) == 0
    assert idempotency.process_once(con, MESSAGE, credit_8, clock=clock) is True
    assert shop_db.points_balance(con, 8) == 204


def test_a_delivery_racing_inside_another_is_retried_and_skips(
    con: duckdb.DuckDBPyConnection, clock: ManualClock
) -> None:
    # Deterministic race: delivery A has recorded the id (uncommitted) when delivery B, on
    # another cursor, runs start to finish. B cannot see A's row, credits and commits; A's
    # credit then conflicts, A is rolled back, retried, sees B's id and skips.
    a, b = con.cursor(), con.cursor()
    seen: list[bool] = []

    def effect_a(c: duckdb.DuckDBPyConnection) -> None:
        seen.append(idempotency.process_once(b, MESSAGE, credit_8, clock=clock))
        credit_8(c)

    assert idempotency.process_once(a, MESSAGE, effect_a, clock=clock) is False
    assert seen == [True]
    assert shop_db.points_balance(con, 8) == 204
    assert len(processed(con)) == 1


@pytest.mark.parametrize("existing_row", [False, True], ids=["new customer", "existing customer"])
def test_a_race_detected_at_commit_is_retried_too(
    con: duckdb.DuckDBPyConnection, clock: ManualClock, existing_row: bool
) -> None:
    # The effects touch no common row, so DuckDB finds the duplicate id only at A's COMMIT.
    con.execute("CREATE TABLE log (delivery VARCHAR)")
    if existing_row:
        with db.transaction(con):
            credit_8(con)
    a, b = con.cursor(), con.cursor()

    def effect_a(c: duckdb.DuckDBPyConnection) -> None:
        idempotency.process_once(
            b, MESSAGE, lambda cb: cb.execute("INSERT INTO log VALUES ('b')"), clock=clock
        )
        c.execute("INSERT INTO log VALUES ('a')")

    assert idempotency.process_once(a, MESSAGE, effect_a, clock=clock) is False
    assert con.execute("SELECT delivery FROM log").fetchall() == [("b",)]


def test_concurrent_threads_credit_exactly_once(con: duckdb.DuckDBPyConnection) -> None:
    # 20 trials, each a new message delivered twice at the same moment by two threads, each
    # thread with its own cursor (a DuckDB connection must not be shared across threads).
    cursors = [con.cursor(), con.cursor()]
    for trial in range(20):
        start = threading.Barrier(2)
        results: list[bool] = []
        errors: list[BaseException] = []

        def deliver(
            cursor: duckdb.DuckDBPyConnection,
            trial: int = trial,
            start: threading.Barrier = start,
            results: list[bool] = results,
            errors: list[BaseException] = errors,
        ) -> None:
            start.wait()
            try:
                credit = lambda c: shop_db.credit_points(c, trial, POINTS)  # noqa: E731
                results.append(idempotency.process_once(cursor, f"paid-{trial}", credit, clock=ManualClock()))
            except BaseException as exc:  # reported by the assert below
                errors.append(exc)

        threads = [threading.Thread(target=deliver, args=(cursor,)) for cursor in cursors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sorted(results) == [False, True]
        assert shop_db.points_balance(con, trial) == 204
    assert len(processed(con)) == 20


def test_retries_are_bounded_and_leave_nothing(con: duckdb.DuckDBPyConnection, clock: ManualClock) -> None:
    calls: list[int] = []

    def always_conflicts(c: duckdb.DuckDBPyConnection) -> None:
        calls.append(1)
        credit_8(c)
        raise duckdb.TransactionException("Conflict on update!")

    with pytest.raises(duckdb.TransactionException, match="Conflict"):
        idempotency.process_once(con, MESSAGE, always_conflicts, clock=clock, max_attempts=3)
    assert len(calls) == 3
    assert processed(con) == []
    assert shop_db.points_balance(con, 8) == 0


@pytest.mark.parametrize("bad", ["", "   ", None, 1002])
def test_a_bad_message_id_is_rejected_and_nothing_is_written(
    con: duckdb.DuckDBPyConnection, clock: ManualClock, bad: object
) -> None:
    calls: list[int] = []
    with pytest.raises(InvalidSettingError, match=f"message_id must be a non-empty string, got {bad!r}"):
        idempotency.process_once(con, bad, lambda c: calls.append(1), clock=clock)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="message_id"):
        idempotency.mark_processed(con, bad, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="message_id"):
        idempotency.is_processed(con, bad)  # type: ignore[arg-type]
    assert calls == []
    assert processed(con) == []
    con.execute("SELECT 1").fetchall()  # no transaction was left open or aborted


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_bad_max_attempts_is_rejected(
    con: duckdb.DuckDBPyConnection, clock: ManualClock, bad: object
) -> None:
    with pytest.raises(InvalidSettingError, match=f"max_attempts must be an int >= 1, got {bad!r}"):
        idempotency.process_once(con, MESSAGE, credit_8, clock=clock, max_attempts=bad)  # type: ignore[arg-type]
    assert processed(con) == []


def test_create_tables_is_repeatable(con: duckdb.DuckDBPyConnection, clock: ManualClock) -> None:
    idempotency.process_once(con, MESSAGE, credit_8, clock=clock)
    idempotency.create_tables(con)
    assert processed(con) == [(MESSAGE, 7.0)]
    assert shop_db.points_balance(con, 8) == 204


def test_create_tables_makes_only_processed_messages() -> None:
    con = db.connect()
    idempotency.create_tables(con)
    assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("processed_messages",)]


def test_any_effect_on_your_own_table_works_without_the_shop() -> None:
    con = db.connect()
    idempotency.create_tables(con)
    con.execute("CREATE TABLE sent_mail (message_id VARCHAR)")
    clock = ManualClock()

    def effect(c: duckdb.DuckDBPyConnection) -> None:
        c.execute("INSERT INTO sent_mail VALUES (?)", [MESSAGE]).fetchall()

    assert [idempotency.process_once(con, MESSAGE, effect, clock=clock) for _ in range(2)] == [True, False]
    assert con.execute("SELECT count(*) FROM sent_mail").fetchone() == (1,)


def test_the_module_holds_no_course_example() -> None:
    tree = ast.parse(inspect.getsource(idempotency))
    imported = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert not [name for name in imported if name.startswith(("jobqueue.examples", "jobqueue.teaching"))]
    assert not hasattr(idempotency, "credit_points")
    assert not hasattr(idempotency, "points_balance")


# -- effects in other systems: record the id only after the other system accepted ------


def test_mark_processed_reports_whether_the_id_was_new(
    con: duckdb.DuckDBPyConnection, clock: ManualClock
) -> None:
    assert idempotency.is_processed(con, MESSAGE) is False
    assert idempotency.mark_processed(con, MESSAGE, clock=clock) is True
    assert idempotency.mark_processed(con, MESSAGE, clock=clock) is False
    assert idempotency.is_processed(con, MESSAGE) is True
    assert processed(con) == [(MESSAGE, 7.0)]


def test_sms_provider_fails_on_demand_and_sends_nothing_then() -> None:
    clock = ManualClock()
    sms = shop.SmsProvider(clock=clock, latency_s=0.5, fail_next=1)
    with pytest.raises(shop.SmsProviderDown, match="nothing sent to '\\+2348000000008'"):
        asyncio.run(sms.send("+2348000000008", "Order 1002 paid"))
    assert sms.sent == []
    assert asyncio.run(sms.send("+2348000000008", "Order 1002 paid")) == "sms-1"
    assert sms.sent == [(1.0, "+2348000000008", "Order 1002 paid")]


def test_sms_provider_honours_idempotency_keys() -> None:
    sms = shop.SmsProvider(clock=ManualClock())
    first = asyncio.run(sms.send("+2348000000008", "hi", idempotency_key=MESSAGE))
    again = asyncio.run(sms.send("+2348000000008", "hi", idempotency_key=MESSAGE))
    other = asyncio.run(sms.send("+2348000000008", "hi"))
    assert (first, again, other) == ("sms-1", "sms-1", "sms-2")
    assert len(sms.sent) == 2


# -- fencing (lesson 06) ---------------------------------------------------------------------


def fenced_db() -> duckdb.DuckDBPyConnection:
    con = db.connect()
    idempotency.create_fencing_table(con)
    con.execute("CREATE TABLE shipments (order_id INTEGER, attempt INTEGER)")
    return con


def ship(attempt: int) -> idempotency.Effect:
    def effect(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("INSERT INTO shipments VALUES (1001, ?)", [attempt])

    return effect


def test_a_late_effect_with_an_older_token_is_refused() -> None:
    con = fenced_db()
    assert idempotency.apply_fenced(con, "order-1001", 2, ship(2))  # the second holder writes first
    assert not idempotency.apply_fenced(con, "order-1001", 1, ship(1))  # the paused first holder wakes
    assert idempotency.apply_fenced(con, "order-1001", 2, ship(2))  # the same holder may write again
    assert idempotency.apply_fenced(con, "order-1002", 1, ship(1))  # another resource has its own token
    assert con.execute("SELECT attempt FROM shipments ORDER BY attempt").fetchall() == [(1,), (2,), (2,)]
    assert con.execute("SELECT * FROM fencing_tokens ORDER BY resource").fetchall() == [
        ("order-1001", 2, None),
        ("order-1002", 1, None),
    ]


def test_an_equal_token_is_applied_again_by_its_holder_only() -> None:
    con = fenced_db()
    assert idempotency.apply_fenced(con, "order-1001", 5, ship(1), holder="lease-5")
    assert idempotency.apply_fenced(con, "order-1001", 5, ship(1), holder="lease-5")  # writing again
    assert not idempotency.apply_fenced(
        con, "order-1001", 5, ship(2), holder="lease-9"
    )  # same token, not its
    assert not idempotency.apply_fenced(con, "order-1001", 5, ship(2))  # nor a caller that names no holder
    assert idempotency.apply_fenced(con, "order-1001", 6, ship(2), holder="lease-9")  # a greater one wins
    assert con.execute("SELECT attempt FROM shipments ORDER BY attempt").fetchall() == [(1,), (1,), (2,)]
    assert con.execute("SELECT * FROM fencing_tokens").fetchall() == [("order-1001", 6, "lease-9")]


def test_a_failing_fenced_effect_leaves_the_token_unchanged() -> None:
    con = fenced_db()

    def broken(con: duckdb.DuckDBPyConnection) -> None:
        raise RuntimeError("warehouse down")

    with pytest.raises(RuntimeError):
        idempotency.apply_fenced(con, "order-1001", 3, broken)
    assert con.execute("SELECT count(*) FROM fencing_tokens").fetchall() == [(0,)]
    assert idempotency.apply_fenced(con, "order-1001", 1, ship(1))


@pytest.mark.parametrize(
    ("resource", "token", "holder"),
    [("", 1, None), ("order-1", -1, None), ("order-1", True, None), (7, 1, None), ("order-1", 1, 7)],
)
def test_apply_fenced_checks_its_arguments(resource: object, token: object, holder: object) -> None:
    con = fenced_db()
    with pytest.raises(InvalidSettingError):
        idempotency.apply_fenced(con, resource, token, ship(1), holder=holder)  # type: ignore[arg-type]
