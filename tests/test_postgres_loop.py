"""A Runner on PostgreSQL never blocks its event loop on a queue call (issue 21, point 2).

A claim that waits for a lock held in another session (here: the lease-token sequence,
altered in a transaction left open) waits in a thread of its own, on a connection of its
own: the running job's handler goes on, and its heartbeats keep its lease alive well past
the lease's length. The queue's statements have a timeout, its connections a connect
timeout and TCP keepalives.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from waiting import HANG_GUARD_S, hang, wait_until, wait_until_async, within_hang_guard

import jobqueue as jq
from jobqueue.backends.postgres import _connect_options
from jobqueue.runner import Runner
from jobqueue.testing.contract import PLAIN, Ping

LEASE_S = 1.0
BEAT_S = 0.2


def _claim_waits_for_a_lock(url: str) -> bool:
    """Whether a session of the queue waits for a lock (the blocked claim)."""
    with psycopg.connect(url, autocommit=True) as con:
        row = con.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%no_disk_wait%'"  # the claim (its text is cut)
        ).fetchone()
    return row is not None and row[0] > 0


def _activity(url: str) -> object:
    with psycopg.connect(url, autocommit=True) as con:
        return con.execute(
            "SELECT state, wait_event_type, wait_event, left(query, 80) FROM pg_stat_activity"
            " WHERE datname = current_database()"
        ).fetchall()


def test_a_claim_blocked_by_a_lock_leaves_handlers_and_heartbeats_running(pg_conninfo: str) -> None:
    with jq.PostgresQueue(pg_conninfo, visibility_timeout_s=LEASE_S) as queue:
        assert queue.calls_block()
        queue.enqueue(PLAIN, Ping(1), id="ping-1")
        worker = jq.Worker(queue, heartbeat_s=BEAT_S)
        ticks: list[int] = []
        finish = asyncio.Event()

        async def handler(payload: Ping) -> None:
            while not finish.is_set():  # the handler goes on while the claim waits
                ticks.append(payload.number)
                await asyncio.sleep(0.05)

        worker.register(PLAIN, handler)
        runner = Runner(worker, concurrency=2, prefetch=0, poll_s=0.1)

        async def scenario() -> list[jq.JobEvent]:
            run = asyncio.create_task(runner.run())
            await wait_until_async(lambda: ticks, "the first job to start")
            with psycopg.connect(pg_conninfo) as locker:
                locker.execute("ALTER SEQUENCE jobqueue_lease INCREMENT BY 1")  # held until the commit
                with jq.PostgresQueue(pg_conninfo) as producer:
                    producer.enqueue(PLAIN, Ping(2), id="ping-2")
                await wait_until_async(
                    lambda: _claim_waits_for_a_lock(pg_conninfo),
                    "the claim to wait",
                    details=lambda: _activity(pg_conninfo),
                )
                beats, seen = len(worker.heartbeats), len(ticks)
                # Five lease lengths of beats while the claim waits: the loop was never held up.
                await wait_until_async(
                    lambda: len(worker.heartbeats) >= beats + 5 * round(LEASE_S / BEAT_S),
                    "beats during the wait",
                )
                assert len(ticks) > seen
                assert _claim_waits_for_a_lock(pg_conninfo)  # still waiting all that time
                assert all(beat.leased_until is not None for beat in worker.heartbeats)  # none refused
                locker.commit()
            await wait_until_async(lambda: 2 in ticks, "the second job, once the lock is gone")
            finish.set()
            await wait_until_async(lambda: len(worker.events) >= 2, "both jobs settled")
            runner.stop()
            return await within_hang_guard(run, "the runner to stop")

        events = asyncio.run(scenario())
    assert sorted((event.job_id, event.outcome) for event in events) == [
        ("ping-1", "done"),
        ("ping-2", "done"),
    ]


def test_a_statement_past_its_timeout_is_cancelled_and_reported(pg_conninfo: str) -> None:
    with (
        jq.PostgresQueue(pg_conninfo, statement_timeout_s=0.3) as queue,
        psycopg.connect(pg_conninfo) as locker,
    ):
        queue.enqueue(PLAIN, Ping(1), id="ping-1")
        locker.execute("ALTER SEQUENCE jobqueue_lease INCREMENT BY 1")
        with pytest.raises(jq.QueueUnavailableError, match=r"statement_timeout_s=0\.3"):
            queue.claim()
        locker.rollback()
        lease = queue.claim()  # the same connection goes on
        assert lease is not None and lease.job.id == "ping-1"


def test_connections_get_a_connect_timeout_and_keepalives_unless_the_url_sets_them() -> None:
    options = _connect_options("postgresql://app@db/shop", connect_timeout_s=10, keepalive_idle_s=30)
    assert options == {
        "connect_timeout": 10,
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }
    mine = _connect_options(
        "postgresql://app@db/shop?connect_timeout=3&keepalives_idle=5",
        connect_timeout_s=10,
        keepalive_idle_s=30,
    )
    assert "connect_timeout" not in mine and "keepalives_idle" not in mine


def test_the_connection_of_a_thread_that_ended_is_closed_when_another_thread_connects(
    pg_conninfo: str,
) -> None:
    # Each thread that calls the queue gets a connection of its own. A server's worker
    # threads come and go (anyio retires an idle one after 10 s; Starlette's test client
    # starts new ones for each request): the connection of a thread that ended must not stay
    # open on the server until the queue closes. Before, every one of them did.
    def used_by_a_new_thread() -> tuple[psycopg.Connection[object], int]:
        """The connection a new thread used for a call, and its server process."""
        used: list[tuple[psycopg.Connection[object], int]] = []

        def call() -> None:
            len(queue)  # a read on this thread's connection
            con = queue._own()
            used.append((con, con.info.backend_pid))

        thread = threading.Thread(target=call)
        thread.start()
        thread.join(timeout=HANG_GUARD_S)
        assert not thread.is_alive() and len(used) == 1, hang("a call on a new thread")
        return used[0]

    with jq.PostgresQueue(pg_conninfo) as queue:
        earlier = [used_by_a_new_thread() for _ in range(4)]
        last, last_pid = used_by_a_new_thread()
        assert all(con.closed for con, _ in earlier)  # each closed as the next thread connected
        assert not last.closed  # its thread has ended, but no other thread has connected since
        pids = {pid for _, pid in earlier}
        wait_until(lambda: not _backends(pg_conninfo) & pids, "the ended threads' backends exiting")
        assert last_pid in _backends(pg_conninfo)


def _backends(url: str) -> set[int]:
    """The server processes of the other sessions on this database."""
    with psycopg.connect(url, autocommit=True) as con:
        rows = con.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {pid for (pid,) in rows}


def test_a_connection_opened_while_another_thread_found_its_own_lost_is_opened_again(
    pg_conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server restart kills every connection; the first thread to meet its dead one counts
    # the loss (_lost), and every thread's connection opened before that count is opened
    # again on its next call. A thread that was connecting at that moment may hold a killed
    # connection too: it must not count as opened after the loss. (Seen beside a CPU hog:
    # a Runner's ack met a killed connection that had been marked as opened after it.)
    from jobqueue.backends import postgres

    with jq.PostgresQueue(pg_conninfo) as queue:
        connect = postgres.psycopg.connect

        def connect_while_a_loss_is_counted(*args: object, **kwargs: object) -> object:
            con = connect(*args, **kwargs)  # type: ignore[arg-type]
            queue._lost += 1  # another thread, meanwhile, found its connection lost
            return con

        monkeypatch.setattr(postgres.psycopg, "connect", connect_while_a_loss_is_counted)
        queue._lost += 1  # a loss found: this thread's next call opens its connection again
        first = queue._own()
        monkeypatch.setattr(postgres.psycopg, "connect", connect)
        assert queue._own() is not first and first.closed
