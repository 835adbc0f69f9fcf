"""Fencing tokens: every claim's token is larger than any handed out before, in every backend.

The attempt count cannot serve: a release gives an attempt back and a replay starts the
count again, so two holders of one job can carry the same attempt number. ``fencing_token``
grows with every claim of any job and is never handed out again: not after a release, a
retry, a death and replay, nor after the store is reopened (a DuckDB file, a new
PostgreSQL connection), nor after a PostgreSQL crash that lost the last claims (the server
stopped with ``pg_ctl stop -m immediate`` between a claim and its holder's late write).
``apply_fenced`` then refuses the late write of the holder whose lease ran out.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from jobqueue import DurableQueue, JobQueue, ManualClock, idempotency
from jobqueue.backends.contract import Queue
from jobqueue.backends.postgres import PostgresQueue
from jobqueue.errors import QueueUnavailableError, StaleLeaseError
from jobqueue.job import Lease
from jobqueue.testing.contract import PLAIN, Ping

T0 = 1_000.0
MakeQueue = Callable[[ManualClock, Any], Queue]
LEASE_S = 30.0


def claim(queue: Queue) -> Lease:
    lease = queue.claim()
    assert lease is not None
    return lease


def tokens_through_release_retry_and_replay(queue: Queue, clock: ManualClock) -> list[Lease]:
    """One job claimed five times: released, lease run out, failed (retry), dead and replayed."""
    queue.enqueue(PLAIN, Ping(number=1), id="a")
    first = claim(queue)
    assert queue.release(first).fencing_token == first.job.fencing_token  # kept while waiting
    second = claim(queue)  # attempt 1 again: the release gave the attempt back
    assert (first.job.attempts, second.job.attempts) == (1, 1)
    clock.advance(LEASE_S)  # its lease runs out
    third = claim(queue)
    assert queue.extend_lease(third).job.fencing_token == third.job.fencing_token
    assert queue.fail(third, "boom").outcome == "retry"
    clock.advance(3_600)
    fourth = claim(queue)
    queue.fail(fourth, "boom", permanent=True)
    [dead] = queue.dead_letters()
    assert dead.job.fencing_token == fourth.job.fencing_token
    assert queue.replay("a").attempts == 0
    fifth = claim(queue)  # attempt 1 once more
    assert fifth.job.attempts == 1
    assert queue.get("a") == fifth.job and queue.get("a").fencing_token == fifth.job.fencing_token  # type: ignore[union-attr]
    return [first, second, third, fourth, fifth]


def assert_growing(leases: list[Lease]) -> None:
    tokens = [lease.job.fencing_token for lease in leases]
    assert tokens[0] > 0 and tokens == sorted(set(tokens)), tokens


@pytest.fixture
def duckdb_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.duckdb"


def in_memory(clock: ManualClock, _: Any) -> Queue:
    return JobQueue(clock=clock, visibility_timeout_s=LEASE_S)


def in_duckdb(clock: ManualClock, path: Path) -> Queue:
    return DurableQueue(path, clock=clock, visibility_timeout_s=LEASE_S)


@pytest.mark.parametrize("make", [in_memory, in_duckdb], ids=["memory", "duckdb"])
def test_a_token_is_never_handed_out_twice(
    make: Callable[[ManualClock, Any], Queue], duckdb_path: Path
) -> None:
    clock = ManualClock(T0)
    assert_growing(tokens_through_release_retry_and_replay(make(clock, duckdb_path), clock))


def test_a_token_is_never_handed_out_twice_on_postgresql(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock, visibility_timeout_s=LEASE_S) as queue:
        assert_growing(tokens_through_release_retry_and_replay(queue, clock))


def test_a_reopened_duckdb_file_goes_on_from_its_last_token(duckdb_path: Path) -> None:
    clock = ManualClock(T0)
    with in_duckdb(clock, duckdb_path) as queue:
        queue.enqueue(PLAIN, Ping(number=1), id="a")
        before = claim(queue)
        queue.release(before)
    with in_duckdb(clock, duckdb_path) as queue:
        after = claim(queue)
    assert after.job.attempts == before.job.attempts and after.job.fencing_token > before.job.fencing_token


def test_a_new_postgresql_connection_goes_on_past_every_token(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue(PLAIN, Ping(number=1), id="a")
        before = claim(queue)
        queue.release(before)
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        after = claim(queue)
    assert after.job.attempts == before.job.attempts and after.job.fencing_token > before.job.fencing_token


def test_the_late_write_of_a_released_holder_is_refused(duckdb_path: Path) -> None:
    # The holders of lesson 06, with tokens from the queue: the released one writes last.
    clock = ManualClock(T0)
    con = duckdb.connect()
    idempotency.create_fencing_table(con)
    con.execute("CREATE TABLE invoices (order_id INTEGER PRIMARY KEY, written_by VARCHAR)")

    def write(lease: Lease) -> bool:
        def effect(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("INSERT OR REPLACE INTO invoices VALUES (1001, ?)", [lease.token])

        return idempotency.apply_fenced(
            con, "invoice-1001", lease.job.fencing_token, effect, holder=lease.token
        )

    with in_duckdb(clock, duckdb_path) as queue:
        queue.enqueue(PLAIN, Ping(number=1001), id="invoice-1001")
        paused = claim(queue)
        queue.release(paused)  # given back, as a worker shutting down does; it still runs
        current = claim(queue)
        assert current.job.attempts == paused.job.attempts  # attempts would not tell them apart
        assert write(current)
        assert not write(paused)
        assert write(current)  # the holder writing again
    assert con.execute("SELECT written_by FROM invoices").fetchall() == [(current.token,)]


# -- a PostgreSQL crash between a claim and a late write ------------------------------------------


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Path]:
    """The folder of a PostgreSQL server of this test's own, which it may crash; stopped afterwards."""
    from jobqueue.teaching.postgres_server import release_local_server

    folder = tmp_path / "pg"
    yield folder
    release_local_server(folder)


def claim_after_restart(queue: PostgresQueue) -> Lease:
    """Claim on a queue whose server restarted: a new connection, which first takes the fencing floor.

    The first call meets the lost connection and raises, unless another thread of the queue
    met it first (the wake-up sent after the enqueue, during the restart): then the queue
    knows and the call connects again at once.
    """
    try:
        return claim(queue)
    except QueueUnavailableError:
        return claim(queue)


def test_a_crash_that_loses_a_claim_hands_out_no_token_again(own_server: Path) -> None:
    from jobqueue.teaching.postgres_server import crash_local_server, hold_local_server

    url = hold_local_server(own_server)
    with psycopg.connect(url, autocommit=True) as con:  # keep a claim's WAL in memory for 10 s
        con.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        con.execute("SELECT pg_reload_conf()")
    clock = ManualClock(T0)
    queue = PostgresQueue(url, clock=clock, visibility_timeout_s=LEASE_S)
    try:
        queue.enqueue(PLAIN, Ping(number=1001), id="invoice-1001")  # waits for the disk
        paused = claim(queue)  # does not wait for the disk
        assert crash_local_server(own_server) == url  # pg_ctl stop -m immediate, then a start
        clock.advance(LEASE_S)  # whether or not the claim survived, the job is due
        current = claim_after_restart(queue)
    finally:
        queue.close()
    assert current.job.attempts == 1, "the claim was not lost in the crash: no test of a lost claim"
    assert current.job.fencing_token > paused.job.fencing_token
    with psycopg.connect(url, autocommit=True) as con:
        idempotency.create_fencing_table(con)
        con.execute("CREATE TABLE invoices (order_id integer PRIMARY KEY, written_by text)")

        def write(lease: Lease) -> bool:
            def effect(con: psycopg.Connection[Any]) -> None:
                con.execute(
                    "INSERT INTO invoices VALUES (1001, %s) ON CONFLICT (order_id)"
                    " DO UPDATE SET written_by = excluded.written_by",
                    [lease.token],
                )

            return idempotency.apply_fenced(
                con, "invoice-1001", lease.job.fencing_token, effect, holder=lease.token
            )

        assert write(current)
        assert not write(paused)  # the late write of the holder from before the crash
        assert con.execute("SELECT written_by FROM invoices").fetchall() == [(current.token,)]


def test_the_holder_of_a_claim_lost_in_a_crash_cannot_settle_the_new_holders_lease(pg_conninfo: str) -> None:
    # Found by the second reviewer of lessons 12-15: a claim lost in a server crash can hand
    # its lease token out again, so the crashed claim's holder A and the new holder B held the
    # same token, and the queue took A's fail or ack for B's. The queue now names a holder by
    # both tokens. The crash is played here without a server: A's claim is undone, and the
    # lease sequence set back, as a crash that lost the claim's WAL leaves them.
    clock = ManualClock(1_000.0)
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue(PLAIN, Ping(1), id="ping-1")
        a = claim(queue)
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            number = int(a.token.removeprefix("lease-"))
            con.execute(
                "UPDATE jobqueue_jobs SET attempts = 0, leased_until = NULL, leased_at = NULL,"
                " lease_token = NULL, visible_at = run_at WHERE id = 'ping-1'"
            )
            con.execute("SELECT setval('jobqueue_lease', %s, false)", (number,))
        b = claim(queue)
        assert (b.token, b.job.attempts) == (a.token, a.job.attempts)  # as after the crash
        assert b.job.fencing_token > a.job.fencing_token
        for settle in (queue.extend_lease, queue.ack, lambda lease: queue.fail(lease, "late"), queue.release):
            with pytest.raises(StaleLeaseError, match="fencing token"):
                settle(a)
        assert queue.ack_many([a]) == [a]  # refused, and counted stale
        queue.ack(b)  # B's lease was never touched
        assert len(queue) == 0
