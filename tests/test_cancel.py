"""Cancel (issue 24): ``queue.cancel(id)`` in every backend, and a worker that stops its handler.

- a waiting (or scheduled) job is finished at once as ``"cancelled"``, kept with the finished
  jobs and counted by the census; cancelling it again is harmless;
- a leased job is marked (``"cancelling"``): a heartbeat returns ``Lease.cancelled``, and its
  ack or fail finishes it as cancelled, never retried nor counted as done or failed; if its
  holder never comes back, the claim that finds its lease ran out finishes it;
- a worker with a heartbeat cancels the handler of a cancelled job (the handler sees
  ``CancelledError``), and records a ``"cancelled"`` event;
- an unknown id raises ``JobNotFoundError`` naming it; a dead letter or a kept finished job
  is left as it is, and its state returned;
- cancelled jobs are kept ``rules.KEEP_CANCELLED_S`` at least, whatever ``retain_s``;
- on PostgreSQL a cancel racing claims on another connection never lets a job run *and* be
  cancelled outright; the tables gain the mark by a migration that can run again.

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, on a manual clock.
"""

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from backends_support import clock_of

from jobqueue import (
    InvalidSettingError,
    JobNotFoundError,
    JobQueue,
    JobType,
    Lease,
    ManualClock,
    RetryPolicy,
    StaleLeaseError,
    Worker,
)
from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends import rules
from jobqueue.backends.contract import KeepsFinished, Queue, ShowsOverview
from jobqueue.backends.duckdb import DurableQueue

T0 = 1_000.0


@dataclass(frozen=True)
class Report:
    n: int


BUILD_REPORT = JobType("build_report", Report, retry=RetryPolicy(max_attempts=3))


@pytest.fixture(scope="module")
def shared_pg(pg_url: str) -> Iterator[str]:
    """One database for this module's PostgreSQL queue tests, emptied before each (a fresh one costs ~1 s)."""
    from jobqueue.teaching.postgres_server import scratch_database

    with scratch_database(f"jobqueue_test_cancel_{uuid.uuid4().hex[:12]}", pg_url) as url:
        yield url


def make_queue(kind: str, request: pytest.FixtureRequest, tmp_path: Path, retain_s: float = 0.0) -> Queue:
    clock = ManualClock(T0)
    if kind == "memory":
        return JobQueue(clock=clock, random=lambda: 1.0, retain_s=retain_s)
    if kind == "duckdb":
        return DurableQueue(tmp_path / "q.duckdb", clock=clock, random=lambda: 1.0, retain_s=retain_s)
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    conninfo = request.getfixturevalue("shared_pg")
    queue = PostgresQueue(conninfo, clock=clock, random=lambda: 1.0, retain_s=retain_s)  # makes the tables
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.execute("TRUNCATE jobqueue_jobs, jobqueue_finished, jobqueue_outcomes, jobqueue_outcomes_by_key")
    return queue


@pytest.fixture(params=["memory", "duckdb", "postgres"])
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    made = make_queue(request.param, request, tmp_path)
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


def kept(queue: Queue) -> list[tuple[str, str]]:
    """``(id, outcome)`` of the finished jobs the queue keeps, sorted by id."""
    assert isinstance(queue, KeepsFinished)
    return sorted((finished.job.id, finished.outcome) for finished in queue.finished(1_000))


def cancelled_count(queue: Queue) -> int:
    assert isinstance(queue, ShowsOverview)
    return queue.census().total("cancelled")


def claim(queue: Queue) -> Lease:
    lease = queue.claim()
    assert lease is not None
    return lease


def test_a_waiting_or_scheduled_job_is_cancelled_at_once_and_kept(queue: Queue) -> None:
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")
    queue.enqueue(BUILD_REPORT, Report(2), id="r2")
    assert queue.cancel("r1") == "cancelled"
    assert queue.get("r1") is None and len(queue) == 1
    assert queue.cancel("r1") == "cancelled"  # again: harmless, same answer
    lease = claim(queue)
    assert lease.job.id == "r2"  # r1 is never handed out
    assert queue.fail(lease, "timeout").outcome == "retry"  # r2 now waits out its backoff
    assert queue.cancel("r2") == "cancelled"  # scheduled: cancelled at once too
    assert len(queue) == 0 and queue.claim() is None
    clock_of(queue).advance(3600)
    assert queue.claim() is None and queue.dead_letters() == []
    assert kept(queue) == [("r1", "cancelled"), ("r2", "cancelled")]
    assert cancelled_count(queue) == 2


def test_a_leased_job_is_marked_told_by_its_heartbeat_and_finished_as_cancelled_by_its_ack(
    queue: Queue,
) -> None:
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")
    lease = claim(queue)
    assert queue.extend_lease(lease).cancelled is False
    assert queue.cancel("r1") == "cancelling"
    assert queue.cancel("r1") == "cancelling"  # idempotent
    job = queue.get("r1")
    assert job is not None and job.leased_until is not None  # still leased, its holder still runs
    assert cancelled_count(queue) == 0
    told = queue.extend_lease(lease)
    assert told.cancelled is True and told.token == lease.token
    done_before = queue.metrics().done
    queue.ack(told)
    assert len(queue) == 0 and queue.dead_letters() == []
    assert kept(queue) == [("r1", "cancelled")]
    assert queue.metrics().done == done_before  # not counted as done
    assert cancelled_count(queue) == 1
    assert queue.cancel("r1") == "cancelled"


def test_a_cancelled_jobs_failure_finishes_it_with_no_retry(queue: Queue) -> None:
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")
    lease = claim(queue)
    assert queue.cancel("r1") == "cancelling"
    failed = queue.fail(lease, ValueError("half built"))
    assert (failed.outcome, failed.run_at, failed.error) == ("cancelled", None, "ValueError: half built")
    assert str(failed) == "cancelled"
    assert len(queue) == 0 and queue.dead_letters() == [] and queue.metrics().failed == 0
    assert isinstance(queue, KeepsFinished)
    [finished] = queue.finished()
    assert (finished.outcome, finished.job.last_error) == ("cancelled", "ValueError: half built")


def test_a_cancelled_job_whose_holder_never_returns_is_finished_by_the_next_claim(queue: Queue) -> None:
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")
    queue.enqueue(BUILD_REPORT, Report(2), id="r2")
    lost = claim(queue)
    assert queue.cancel("r1") == "cancelling"
    clock_of(queue).advance(queue.visibility_timeout_s + 1)  # the holder crashed: its lease ran out
    [lease] = queue.claim_many(5)
    assert lease.job.id == "r2"  # r1 was finished on the way, not handed out again
    assert queue.get("r1") is None and kept(queue) == [("r1", "cancelled")]
    with pytest.raises(StaleLeaseError, match="no longer in the queue"):
        queue.ack(lost)
    queue.ack(lease)


def test_unknown_ids_dead_letters_and_finished_jobs(queue: Queue) -> None:
    with pytest.raises(JobNotFoundError, match="'nope'"):
        queue.cancel("nope")
    with pytest.raises(InvalidSettingError):
        queue.cancel("")
    queue.enqueue(BUILD_REPORT, Report(1), id="poison")
    queue.fail(claim(queue), "bad", permanent=True)
    assert queue.cancel("poison") == "dead"  # left as it is: discard it to be rid of it
    assert [letter.job.id for letter in queue.dead_letters()] == ["poison"]
    queue.enqueue(BUILD_REPORT, Report(2), id="gone")
    queue.ack(claim(queue))  # retain_s 0: forgotten at its ack
    with pytest.raises(JobNotFoundError, match="'gone'"):
        queue.cancel("gone")


@pytest.mark.parametrize("kind", ["memory", "duckdb", "postgres"])
def test_cancelled_jobs_outlive_retain_s_until_keep_cancelled_s(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    queue = make_queue(kind, request, tmp_path, retain_s=60.0)
    try:
        clock = clock_of(queue)
        queue.enqueue(BUILD_REPORT, Report(1), id="cancelled")
        queue.enqueue(BUILD_REPORT, Report(2), id="done")
        assert queue.cancel("cancelled") == "cancelled"
        queue.ack(claim(queue))
        assert queue.cancel("done") == "done"  # kept by retain_s: its state, nothing changed
        clock.advance(120)  # past retain_s, and past PRUNE_EVERY_S: the next ack prunes
        queue.enqueue(BUILD_REPORT, Report(3), id="later")
        queue.ack(claim(queue))
        assert kept(queue) == [("cancelled", "cancelled"), ("later", "done")]
        clock.advance(rules.KEEP_CANCELLED_S)
        queue.enqueue(BUILD_REPORT, Report(4), id="last")
        queue.ack(claim(queue))
        assert kept(queue) == [("last", "done")]
    finally:
        getattr(queue, "close", lambda: None)()


def test_a_worker_with_a_heartbeat_stops_the_handler_of_a_cancelled_job(queue: Queue) -> None:
    clock = clock_of(queue)
    seen: list[str] = []

    async def build(report: Report) -> None:
        try:
            await clock.sleep(100)
            seen.append("finished")
        except asyncio.CancelledError:
            seen.append(f"stopped at t={clock.now():g}")  # the handler may clean up here
            raise

    worker = Worker(queue, heartbeat_s=10)
    worker.register(BUILD_REPORT, build)
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")

    async def scenario() -> None:
        running = asyncio.create_task(worker.run_one())
        await clock.run_for(15)  # one beat, at t+10: not cancelled yet
        assert queue.cancel("r1") == "cancelling"
        await clock.run_for(10)  # the beat at t+20 finds the mark
        event = await asyncio.wait_for(running, timeout=30)
        assert event is not None
        assert (event.outcome, event.attempt) == ("cancelled", 1)
        assert event.error is not None and event.error.startswith("JobCancelledError: job 'r1' attempt 1")
        assert str(event).startswith(f"t={T0 + 20:g}s r1 attempt 1: cancelled (JobCancelledError")

    asyncio.run(scenario())
    assert seen == [f"stopped at t={T0 + 20:g}"]
    assert [beat.leased_until is not None for beat in worker.heartbeats] == [True, True]
    assert len(queue) == 0 and queue.dead_letters() == [] and kept(queue) == [("r1", "cancelled")]


def test_without_a_heartbeat_the_handler_runs_on_and_its_ack_finishes_the_job_as_cancelled(
    queue: Queue,
) -> None:
    async def build(report: Report) -> None:
        assert queue.cancel("r1") == "cancelling"  # cancelled while it runs

    worker = Worker(queue)
    worker.register(BUILD_REPORT, build)
    queue.enqueue(BUILD_REPORT, Report(1), id="r1")
    [event] = asyncio.run(worker.drain())
    assert event.outcome == "done"  # the worker did not know: the queue records the cancel
    assert len(queue) == 0 and kept(queue) == [("r1", "cancelled")]


def test_a_batch_ack_finishes_the_cancelled_jobs_and_acks_the_others(queue: Queue) -> None:
    queue.enqueue_many(BUILD_REPORT, [Report(n) for n in range(3)], ids=["a", "b", "c"])
    leases = queue.claim_many(3)
    assert queue.cancel("b") == "cancelling"
    assert queue.ack_many(leases) == []
    assert len(queue) == 0 and kept(queue) == [("b", "cancelled")]


@pytest.mark.parametrize("kind", ["memory", "duckdb", "postgres"])
def test_with_retain_s_a_cancelled_jobs_ack_keeps_it_once_as_cancelled(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    queue = make_queue(kind, request, tmp_path, retain_s=60.0)
    try:
        queue.enqueue_many(BUILD_REPORT, [Report(1), Report(2)], ids=["a", "b"])
        leases = queue.claim_many(2)
        assert queue.cancel("a") == "cancelling"
        queue.ack(leases[0])
        assert queue.ack_many(leases[1:]) == []
        assert kept(queue) == [("a", "cancelled"), ("b", "done")]
    finally:
        getattr(queue, "close", lambda: None)()


def test_duckdb_ack_and_claim_finishes_a_cancelled_job_and_claims_the_next(tmp_path: Path) -> None:
    with DurableQueue(tmp_path / "q.duckdb", clock=ManualClock(T0)) as queue:
        queue.enqueue_many(BUILD_REPORT, [Report(n) for n in range(3)], ids=["a", "b", "c"])
        leases = queue.claim_many(2)
        assert queue.cancel("b") == "cancelling"
        stale, claimed = queue.ack_and_claim(leases, 5)
        assert stale == [] and [lease.job.id for lease in claimed] == ["c"]
        assert kept(queue) == [("b", "cancelled")] and queue.metrics().done == 1


def test_a_duckdb_file_of_version_7_gains_the_mark_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "v7.duckdb"
    clock = ManualClock(T0)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue(BUILD_REPORT, Report(1), id="kept")
    with duckdb.connect(str(path)) as con:  # back to the tables of version 7
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN cancelled")
        con.execute("UPDATE jobqueue_schema SET version = 7")
    with DurableQueue(path, clock=clock) as queue:
        lease = claim(queue)
        assert queue.cancel("kept") == "cancelling"
        queue.ack(lease)
        assert kept(queue) == [("kept", "cancelled")]
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [
            (duckdb_backend.SCHEMA_VERSION,)
        ]


def test_a_reopened_duckdb_file_remembers_the_marks(tmp_path: Path) -> None:
    path = tmp_path / "q.duckdb"
    clock = ManualClock(T0)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue(BUILD_REPORT, Report(1), id="r1")
        lease = claim(queue)
        assert queue.cancel("r1") == "cancelling"
    with DurableQueue(path, clock=clock) as queue:  # a restart: the worker's late ack
        assert queue.ack_many([lease]) == []
        assert kept(queue) == [("r1", "cancelled")]


def test_postgres_tables_of_version_6_gain_the_mark_and_the_step_runs_again(pg_conninfo: str) -> None:
    import psycopg

    from jobqueue.backends import postgres

    clock = ManualClock(T0)
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue(BUILD_REPORT, Report(1), id="kept")
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # back to version 6
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN cancelled")
        con.execute("DROP INDEX jobqueue_finished_cancelled")
        con.execute("UPDATE jobqueue_schema SET version = 6")
    plan = postgres.migration_plan(6)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # cut short after the new column
        con.execute(plan[0].sql.encode())
    assert postgres.migrate(pg_conninfo) == list(range(7, postgres.SCHEMA_VERSION + 1))
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        lease = claim(queue)
        assert queue.cancel("kept") == "cancelling"
        assert queue.fail(lease, "boom").outcome == "cancelled"
        assert queue.census().total("cancelled") == 1


def test_postgres_a_cancel_racing_claims_on_another_connection_never_runs_a_cancelled_job(
    pg_conninfo: str,
) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    clock = ManualClock(T0)
    ids = [f"r{n}" for n in range(150)]
    with PostgresQueue(pg_conninfo, clock=clock) as producer:
        producer.enqueue_many(BUILD_REPORT, [Report(n) for n in range(len(ids))], ids=ids)
    start = threading.Barrier(2)
    claimed: list[Lease] = []
    answers: dict[str, str] = {}
    errors: list[BaseException] = []

    def claim_all() -> None:
        try:
            with PostgresQueue(pg_conninfo, clock=clock) as worker:
                start.wait()
                while leases := worker.claim_many(3):
                    claimed.extend(leases)
        except BaseException as exc:  # reported below, never lost in the thread
            errors.append(exc)

    def cancel_all() -> None:
        try:
            with PostgresQueue(pg_conninfo, clock=clock) as operator:
                start.wait()
                for job_id in reversed(ids):  # from the back: the two meet, and contend, on the way
                    answers[job_id] = operator.cancel(job_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claim_all), threading.Thread(target=cancel_all)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and not any(thread.is_alive() for thread in threads)
    taken = {lease.job.id for lease in claimed}
    assert len(taken) == len(claimed)  # no job claimed twice
    assert set(answers.values()) <= {"cancelled", "cancelling"}
    assert {job_id for job_id, answer in answers.items() if answer == "cancelling"} == taken
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        assert queue.ack_many(claimed) == []
        assert len(queue) == 0
        assert kept(queue) == [(job_id, "cancelled") for job_id in sorted(ids)]
        assert queue.census().total("cancelled") == len(ids)


# -- the command line ----------------------------------------------------------------------


def test_jobqueue_cancel_answers_with_the_state_and_fails_on_an_unknown_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobqueue.cli import main

    path = tmp_path / "shop.db"
    with DurableQueue(path) as queue:
        queue.enqueue(BUILD_REPORT, Report(1), id="report-7")
    assert main(["cancel", str(path), "report-7"]) == 0
    assert main(["cancel", str(path), "report-7"]) == 0
    assert main(["cancel", str(path), "report-8"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["report-7: cancelled", "report-7: cancelled"]
    assert err.strip() == "error: no job with id 'report-8' to cancel: not waiting, leased, dead or kept"


def test_a_runner_never_starts_a_prefetched_job_cancelled_while_it_waited() -> None:
    from jobqueue import Runner

    clock = ManualClock(T0)
    queue = JobQueue(clock=clock, visibility_timeout_s=30)
    started: list[int] = []

    async def build(report: Report) -> None:
        started.append(report.n)
        await clock.sleep(100)

    worker = Worker(queue, heartbeat_s=10)
    worker.register(BUILD_REPORT, build)
    runner = Runner(worker, concurrency=1, prefetch=1)
    queue.enqueue_many(BUILD_REPORT, [Report(1), Report(2)], ids=["slow", "waits"])

    async def scenario() -> None:
        running = asyncio.create_task(runner.run())
        await clock.run_for(5)  # "slow" runs, "waits" is claimed ahead and waits for the slot
        assert queue.cancel("waits") == "cancelling"
        await clock.run_for(105)
        runner.stop()
        await asyncio.wait_for(running, timeout=30)

    asyncio.run(scenario())
    assert started == [1]  # "waits" was never started
    assert [(event.job_id, event.outcome) for event in worker.events] == [
        ("waits", "cancelled"),
        ("slow", "done"),
    ]
    assert kept(queue) == [("waits", "cancelled")]
