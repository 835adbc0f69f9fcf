"""PostgresQueue behind a transaction pooler: a real PgBouncer with ``pool_mode = transaction``.

A transaction pooler hands a client's server connection to another client at each commit.
The queue's usual session state (prepared statements, ``SET`` of planner settings,
``LISTEN``) would then be lost or, worse, left for other clients. With
``transaction_pooler=True`` the queue keeps none.

PgBouncer is Debian's ``pgbouncer`` (``.ci/run`` installs it); without it these tests skip
and say so, except in CI, where they fail.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator

import psycopg
import pytest
from pgbouncer_support import missing_piece, transaction_pooler
from psycopg.conninfo import conninfo_to_dict
from test_cli import HANDLERS, SEND_RECEIPT, receipt

import jobqueue as jq
from jobqueue.cli import main
from jobqueue.testing.contract import PLAIN, Ping


@pytest.fixture
def pooled(pg_conninfo: str) -> Iterator[str]:
    """URL of a fresh database through a PgBouncer whose one server connection all share."""
    missing = missing_piece()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    with transaction_pooler(pg_conninfo, pool_size=1) as url:
        yield url


def _settings(url: str) -> tuple[str, str]:
    """plan_cache_mode and enable_seqscan as a new client of the pooler sees them."""
    with psycopg.connect(url, autocommit=True) as con:
        mode = con.execute("SHOW plan_cache_mode").fetchone()
        seqscan = con.execute("SHOW enable_seqscan").fetchone()
    assert mode is not None and seqscan is not None
    return str(mode[0]), str(seqscan[0])


def test_the_default_mode_breaks_behind_a_transaction_pooler(pooled: str) -> None:
    """Why the mode exists: the queue's prepared statements collide on the shared connection."""
    queues = [jq.PostgresQueue(pooled, clock=jq.ManualClock()) for _ in range(2)]
    try:
        with pytest.raises(jq.JobQueueError, match="transaction_pooler"):
            for n in range(12):
                queues[n % 2].enqueue(PLAIN, Ping(n), id=f"ping-{n}")
    finally:
        for queue in queues:
            queue.close()


def test_queues_share_one_pooled_connection_and_leave_no_session_state(pooled: str) -> None:
    before = _settings(pooled)
    clock = jq.ManualClock()
    queues = [jq.PostgresQueue(pooled, clock=clock, transaction_pooler=True) for _ in range(3)]
    try:
        for n in range(30):
            queues[n % 3].enqueue(PLAIN, Ping(n), id=f"ping-{n}")
        done = []
        for n in range(30):
            lease = queues[n % 3].claim()
            assert lease is not None
            queues[n % 3].ack(lease)
            done.append(lease.job.id)
        assert sorted(done) == sorted(f"ping-{n}" for n in range(30))
        assert queues[0].claim() is None
        assert _settings(pooled) == before  # nothing the queue set reached the next client
    finally:
        for queue in queues:
            queue.close()


def test_enqueue_in_the_callers_transaction_through_the_pooler(pooled: str) -> None:
    with jq.PostgresQueue(pooled, clock=jq.ManualClock(), transaction_pooler=True) as queue:
        with psycopg.connect(pooled) as con:
            queue.enqueue(PLAIN, Ping(1), id="kept", conn=con)
            con.commit()
            queue.enqueue(PLAIN, Ping(2), id="rolled-back", conn=con)
            con.rollback()
        lease = queue.claim()
        assert lease is not None and lease.job.id == "kept"
        assert queue.claim() is None


def test_waiting_for_work_polls_instead_of_listening(pooled: str) -> None:
    """LISTEN does not survive a transaction pooler: the queue says so, and the Runner polls."""
    with jq.PostgresQueue(pooled, clock=jq.ManualClock(), transaction_pooler=True) as queue:
        assert asyncio.run(queue.wait_for_work(0.01)) is False
        with psycopg.connect(pooled, autocommit=True) as con:
            listening = con.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query ILIKE 'LISTEN%'"  # this test's database
            ).fetchone()
        assert listening == (0,)


def test_the_command_line_takes_the_pooler_flag(pooled: str, capsys: pytest.CaptureFixture[str]) -> None:
    with jq.PostgresQueue(pooled, transaction_pooler=True) as queue:
        queue.enqueue_many(SEND_RECEIPT, [receipt(1001), receipt(1002)])
    with jq.PostgresQueue(pooled) as queue:  # the default mode leaves its prepared statements
        queue.enqueue(SEND_RECEIPT, receipt(1003))
        # without the flag the worker's claim clashes with them: one line naming the flag,
        # exit status 1, no password shown, no job lost
        assert main(["worker", pooled, "--handlers", HANDLERS, "--burst"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "--transaction-pooler" in err
        assert str(conninfo_to_dict(pooled)["password"]) not in err
        flag = "--transaction-pooler"
        assert main(["worker", pooled, "--handlers", HANDLERS, "--burst", flag]) == 0
        assert main(["stats", pooled, flag]) == 0
    assert re.search(r"^waiting +0$", capsys.readouterr().out, re.MULTILINE)
