"""Snooze (issue 24): a handler says "not now, again in N seconds" without spending an attempt.

- :class:`Snooze` refuses a delay that is not a finite number of seconds >= 0, naming it;
- a handler that raises it gives its job back for the delay, the attempt not counted (a
  ``"snoozed"`` event), and the job runs again once due;
- the snooze after :data:`rules.MAX_SNOOZES` counts as a failed attempt; a replay starts the
  count afresh; a stale lease's snooze is refused and changes nothing;
- the SQL tables gain the count by a migration that can run again (PostgreSQL's
  ``jobqueue migrate``, DuckDB's on open).

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, on a manual clock.
"""

import asyncio
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from backends_support import BACKENDS, open_queue

from jobqueue import (
    InvalidSettingError,
    JobType,
    ManualClock,
    RetryPolicy,
    Snooze,
    StaleLeaseError,
    Worker,
)
from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends import rules
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue

T0 = 1_000.0


@dataclass(frozen=True)
class Upload:
    n: int


PROCESS_UPLOAD = JobType("process_upload", Upload, retry=RetryPolicy(max_attempts=2))


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    with open_queue(
        request.param, request, tmp_path / "q.duckdb", clock=ManualClock(T0), random=lambda: 1.0
    ) as opened:
        yield opened


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, True, "30", None])
def test_snooze_refuses_a_delay_that_is_not_seconds(bad: object) -> None:
    with pytest.raises(InvalidSettingError, match=repr(bad).replace("(", r"\(")):
        Snooze(bad)  # type: ignore[arg-type]


def test_a_snoozed_job_runs_again_after_its_delay_without_spending_an_attempt(queue: Queue) -> None:
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    ready: list[bool] = [False]
    runs: list[float] = []

    async def process(upload: Upload) -> None:
        runs.append(clock.now())
        if not ready[0]:
            raise Snooze(30)

    worker = Worker(queue)
    worker.register(PROCESS_UPLOAD, process)
    queue.enqueue(PROCESS_UPLOAD, Upload(1), id="upload-1")
    [event] = asyncio.run(worker.drain())
    assert (event.outcome, event.attempt, event.retry_at) == ("snoozed", 1, T0 + 30)
    assert str(event) == f"t={T0:g}s upload-1 attempt 1: snoozed to t={T0 + 30:g}s, attempt not counted"
    job = queue.get("upload-1")
    assert job is not None and job.attempts == 0 and job.run_at == T0 + 30
    clock.advance(29)
    assert asyncio.run(worker.drain()) == []  # not due yet
    clock.advance(1)
    ready[0] = True
    [event] = asyncio.run(worker.drain())
    assert (event.outcome, event.attempt) == ("done", 1)  # still its first counted attempt
    assert runs == [T0, T0 + 30] and len(queue) == 0 and queue.dead_letters() == []


def test_the_snooze_after_the_most_allowed_is_a_failed_attempt_and_a_replay_starts_afresh(
    queue: Queue,
) -> None:
    async def never_ready(upload: Upload) -> None:
        raise Snooze(0)

    worker = Worker(queue)
    worker.register(PROCESS_UPLOAD, never_ready)
    queue.enqueue(PROCESS_UPLOAD, Upload(1), id="upload-1")
    events = asyncio.run(worker.drain())  # due again at once each time: the limit ends it
    outcomes = [event.outcome for event in events]
    assert outcomes == ["snoozed"] * rules.MAX_SNOOZES + ["retry"]  # attempt 1 of 2 spent
    assert events[-1].attempt == 1
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    clock.advance(60)  # past the backoff
    [event] = asyncio.run(worker.drain())
    assert (event.outcome, event.attempt) == ("dead", 2)  # still out of snoozes: the last attempt
    [dead] = queue.dead_letters()
    assert dead.job.last_error == rules.snooze_failure(rules.MAX_SNOOZES)
    queue.replay("upload-1")
    lease = queue.claim()
    assert lease is not None
    assert queue.snooze(lease, delay_s=5) is not None  # a fresh count


def test_a_stale_leases_snooze_is_refused_and_changes_nothing(queue: Queue) -> None:
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    queue.enqueue(PROCESS_UPLOAD, Upload(1), id="upload-1")
    old = queue.claim()
    assert old is not None
    clock.advance(queue.visibility_timeout_s + 1)
    new = queue.claim()
    assert new is not None
    with pytest.raises(StaleLeaseError):
        queue.snooze(old, delay_s=10)
    with pytest.raises(InvalidSettingError, match="-1"):
        queue.snooze(new, delay_s=-1)
    job = queue.get("upload-1")
    assert job is not None and job.attempts == 2 and job.leased_until is not None
    queue.ack(new)


def test_a_duckdb_file_of_version_5_gains_the_count_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "v5.duckdb"
    clock = ManualClock(T0)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue(PROCESS_UPLOAD, Upload(1), id="kept")
    with duckdb.connect(str(path)) as con:  # back to the tables of version 5
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN snoozes")
        con.execute("UPDATE jobqueue_schema SET version = 5")
    with DurableQueue(path, clock=clock) as queue:
        lease = queue.claim()
        assert lease is not None and lease.job.id == "kept"
        assert queue.snooze(lease, delay_s=1) is not None
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [
            (duckdb_backend.SCHEMA_VERSION,)
        ]
        assert con.execute("SELECT snoozes FROM jobqueue_jobs").fetchall() == [(1,)]


def test_postgres_tables_of_version_5_gain_the_count_and_the_step_runs_again(pg_conninfo: str) -> None:
    import psycopg

    from jobqueue.backends import postgres

    clock = ManualClock(T0)
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue(PROCESS_UPLOAD, Upload(1), id="kept")
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # back to version 5
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN snoozes")
        con.execute("UPDATE jobqueue_schema SET version = 5")
    plan = postgres.migration_plan(5)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # cut short after the new column
        con.execute(plan[0].sql.encode())
    applied = postgres.migrate(pg_conninfo)
    assert (applied[0], applied[-1]) == (6, postgres.SCHEMA_VERSION)  # 6 again, then those after it
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        lease = queue.claim()
        assert lease is not None and lease.job.id == "kept"
        assert queue.snooze(lease, delay_s=1) is not None
