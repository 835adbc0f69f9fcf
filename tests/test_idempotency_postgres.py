"""The idempotent consumer of lesson 07 on PostgreSQL: deliveries from several connections.

On PostgreSQL a second delivery of the same id does not fail as in DuckDB: its
``INSERT ... ON CONFLICT DO NOTHING`` waits for the first delivery's transaction, then
returns no row (or, if the first rolled back, inserts and applies the effect).
"""

import contextlib
import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from waiting import HANG_GUARD_S, hang, wait_until

from jobqueue import db, idempotency
from jobqueue.clock import ManualClock
from jobqueue.errors import InvalidSettingError, TransactionAbortedError
from jobqueue.examples import shop_db

MESSAGE = "order-paid-1001"


def open_con(conninfo: str) -> psycopg.Connection:
    return psycopg.connect(conninfo, autocommit=True)


@pytest.fixture
def con(pg_conninfo: str) -> Iterator[psycopg.Connection]:
    with open_con(pg_conninfo) as con:
        idempotency.create_tables(con)
        shop_db.create_tables(con)
        yield con


def credit_8(c: psycopg.Connection) -> None:
    shop_db.credit_points(c, 8, 204)


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``target`` in a thread; its result (or exception) lands in the returned list."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def wait_while_it_waits_for_a_lock(conninfo: str, thread: threading.Thread, con: psycopg.Connection) -> None:
    """Return once ``con``'s statement waits for a lock another transaction holds, or ``thread`` ended."""
    pid = con.info.backend_pid
    with open_con(conninfo) as watcher:

        def waits() -> bool:
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
            return row == ("Lock",)

        wait_until(lambda: waits() or not thread.is_alive(), "delivery B waiting for A's row lock")


def join(thread: threading.Thread) -> None:
    thread.join(timeout=HANG_GUARD_S)
    assert not thread.is_alive(), hang("the delivery thread's end")


def test_three_deliveries_credit_once_and_the_id_is_recorded(
    con: psycopg.Connection, clock: ManualClock
) -> None:
    results = [idempotency.process_once(con, MESSAGE, credit_8, clock=clock) for _ in range(3)]
    assert results == [True, False, False]
    assert shop_db.points_balance(con, 8) == 204
    assert idempotency.is_processed(con, MESSAGE) is True
    assert idempotency.is_processed(con, "order-paid-1002") is False
    assert idempotency.mark_processed(con, "sms-1", clock=clock) is True
    assert idempotency.mark_processed(con, "sms-1", clock=clock) is False


def test_an_error_in_the_effect_rolls_back_the_id_too(con: psycopg.Connection, clock: ManualClock) -> None:
    def credit_then_fail(c: psycopg.Connection) -> None:
        credit_8(c)
        raise RuntimeError("mail server down")

    with pytest.raises(RuntimeError, match="mail server down"):
        idempotency.process_once(con, MESSAGE, credit_then_fail, clock=clock)
    assert idempotency.is_processed(con, MESSAGE) is False
    assert shop_db.points_balance(con, 8) == 0


def test_a_swallowed_failed_statement_commits_neither_id_nor_credit(
    con: psycopg.Connection, clock: ManualClock
) -> None:
    def sloppy(c: psycopg.Connection) -> None:
        credit_8(c)
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            c.execute("SELECT 1 / 0")

    with pytest.raises(TransactionAbortedError):
        idempotency.process_once(con, MESSAGE, sloppy, clock=clock)
    assert idempotency.is_processed(con, MESSAGE) is False
    assert shop_db.points_balance(con, 8) == 0


def test_a_second_connection_waits_for_the_first_delivery_and_skips(
    con: psycopg.Connection, pg_conninfo: str, clock: ManualClock
) -> None:
    # Staged: delivery A has inserted the id and is inside its effect when delivery B, on
    # its own connection, starts. B's insert waits on A's row lock; A commits; B skips.
    b_con = open_con(pg_conninfo)

    def effect_a(c: psycopg.Connection) -> None:
        credit_8(c)
        thread, out = in_thread(lambda: idempotency.process_once(b_con, MESSAGE, credit_8, clock=clock))
        holder.extend([thread, out])
        wait_while_it_waits_for_a_lock(pg_conninfo, thread, b_con)
        assert thread.is_alive(), "B should wait for A's transaction"

    holder: list[object] = []
    assert idempotency.process_once(con, MESSAGE, effect_a, clock=clock) is True
    thread, out = holder
    assert isinstance(thread, threading.Thread) and isinstance(out, list)
    join(thread)
    b_con.close()
    assert out == [False]
    assert shop_db.points_balance(con, 8) == 204


def test_when_the_first_delivery_rolls_back_the_waiting_one_applies_the_effect(
    con: psycopg.Connection, pg_conninfo: str, clock: ManualClock
) -> None:
    b_con = open_con(pg_conninfo)
    holder: list[object] = []

    def effect_a(c: psycopg.Connection) -> None:
        credit_8(c)
        thread, out = in_thread(lambda: idempotency.process_once(b_con, MESSAGE, credit_8, clock=clock))
        holder.extend([thread, out])
        wait_while_it_waits_for_a_lock(pg_conninfo, thread, b_con)
        assert thread.is_alive(), "B should wait for A's transaction"
        raise RuntimeError("A crashed before commit")

    with pytest.raises(RuntimeError, match="A crashed"):
        idempotency.process_once(con, MESSAGE, effect_a, clock=clock)
    thread, out = holder
    assert isinstance(thread, threading.Thread)
    join(thread)
    b_con.close()
    assert out == [True]
    assert shop_db.points_balance(con, 8) == 204


def test_deliveries_racing_from_four_connections_credit_exactly_once(
    con: psycopg.Connection, pg_conninfo: str
) -> None:
    # 10 messages, each delivered at the same moment by 4 threads with their own connections.
    cons = [open_con(pg_conninfo) for _ in range(4)]
    try:
        for trial in range(10):
            start = threading.Barrier(len(cons))

            def deliver(c: psycopg.Connection, trial: int = trial, start: threading.Barrier = start) -> bool:
                start.wait()
                return idempotency.process_once(
                    c, f"paid-{trial}", lambda cc: shop_db.credit_points(cc, trial, 1), clock=ManualClock()
                )

            runs = [in_thread(lambda c=c: deliver(c)) for c in cons]
            for thread, _ in runs:
                join(thread)
            results = [out[0] for _, out in runs]
            assert sorted(results, key=str) == [False, False, False, True], results
            assert shop_db.points_balance(con, trial) == 1
    finally:
        for c in cons:
            c.close()


def test_a_serialization_failure_is_run_again(
    con: psycopg.Connection, pg_conninfo: str, clock: ManualClock
) -> None:
    # At REPEATABLE READ, B's insert fails once A commits; process_once runs B again, and B
    # then sees A's id and skips.
    b_con = open_con(pg_conninfo)
    b_con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    holder: list[object] = []

    def effect_a(c: psycopg.Connection) -> None:
        credit_8(c)
        thread, out = in_thread(lambda: idempotency.process_once(b_con, MESSAGE, credit_8, clock=clock))
        holder.extend([thread, out])
        wait_while_it_waits_for_a_lock(pg_conninfo, thread, b_con)
        assert thread.is_alive(), "B should wait for A's transaction"

    assert idempotency.process_once(con, MESSAGE, effect_a, clock=clock) is True
    thread, out = holder
    assert isinstance(thread, threading.Thread)
    join(thread)
    b_con.close()
    assert out == [False]
    assert shop_db.points_balance(con, 8) == 204


def test_a_connection_without_autocommit_is_refused_by_name(pg_conninfo: str, clock: ManualClock) -> None:
    with psycopg.connect(pg_conninfo) as plain, pytest.raises(InvalidSettingError, match="autocommit=True"):
        idempotency.create_tables(plain)


def test_the_dialect_tells_the_two_databases_apart(con: psycopg.Connection) -> None:
    assert (db.dialect(con).name, db.dialect(con).skip_locked) == ("postgresql", True)
    assert (db.dialect(db.connect()).name, db.dialect(db.connect()).skip_locked) == ("duckdb", False)
