"""Periodic jobs (issue 24): ``jq.Schedule`` ticks, enqueued once each by any number of workers.

- a bad cron expression, both or neither of ``cron`` and ``every_s``, a bad period or
  payload, and two schedules of one name are refused, naming the bad value;
- ticks fall where cron (in UTC) or the period says, and each tick's job id names it;
- on every backend: a tick is enqueued once whoever offers it, also by a process that
  comes after its job ran; after downtime only the latest tick missed is enqueued;
- three runners on one queue (in memory, and on PostgreSQL with a connection each), one of
  them started after a tick's job ran, run each tick's job once, waking for the ticks;
- on PostgreSQL, three schedulers in threads of their own (a connection each) offering
  every tick at once enqueue each once.
"""

import asyncio
import math
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import jobqueue as jq
from jobqueue import InvalidSettingError, JobQueue, JobType, ManualClock, PayloadError, Schedule
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.schedule import Scheduler


@dataclass(frozen=True)
class Report:
    kind: str


REPORT = JobType("report", Report)
T0 = datetime(2026, 12, 2, 10, 7, tzinfo=UTC).timestamp()  # 10:07 UTC
EVERY_5 = Schedule(job_type=REPORT, payload=Report("sales"), cron="*/5 * * * *")


@pytest.mark.parametrize("bad", ["*/5 * * *", "61 * * * *", "every minute", ""])
def test_a_bad_cron_expression_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(f"cron '{bad}' is not a cron expression: ")):
        Schedule(job_type=REPORT, payload=Report("sales"), cron=bad)


def test_a_schedule_needs_one_time_rule_a_good_period_and_payload() -> None:
    with pytest.raises(InvalidSettingError, match="exactly one of cron and every_s, got cron=None"):
        Schedule(job_type=REPORT, payload=Report("sales"))
    with pytest.raises(InvalidSettingError, match="got cron='\\* \\* \\* \\* \\*' and every_s=60"):
        Schedule(job_type=REPORT, payload=Report("sales"), cron="* * * * *", every_s=60)
    for bad in (0, -5, math.nan, math.inf):
        with pytest.raises(InvalidSettingError, match=f"every_s .* got {bad}"):
            Schedule(job_type=REPORT, payload=Report("sales"), every_s=bad)
    with pytest.raises(InvalidSettingError, match="cron must be a cron expression"):
        Schedule(job_type=REPORT, payload=Report("sales"), cron=5)  # type: ignore[arg-type]
    with pytest.raises(PayloadError):
        Schedule(job_type=REPORT, payload="sales", every_s=60)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="two schedules are named 'report'"):
        Scheduler([EVERY_5, Schedule(job_type=REPORT, payload=Report("stock"), every_s=60)])
    Scheduler([EVERY_5, Schedule(job_type=REPORT, payload=Report("stock"), every_s=60, name="stock")])


def test_ticks_fall_where_cron_in_utc_or_the_period_says() -> None:
    tick = EVERY_5.latest_tick(T0)
    assert EVERY_5.tick_id(tick) == "report@2026-12-02T10:05Z"
    assert EVERY_5.latest_tick(tick) == tick  # a tick is its own latest
    assert EVERY_5.tick_id(EVERY_5.next_tick(tick)) == "report@2026-12-02T10:10Z"
    nightly = Schedule(job_type=REPORT, payload=Report("sales"), cron="30 2 * * *", name="nightly")
    assert nightly.tick_id(nightly.latest_tick(T0)) == "nightly@2026-12-02T02:30Z"
    assert nightly.tick_id(nightly.next_tick(nightly.latest_tick(T0))) == "nightly@2026-12-03T02:30Z"
    every_90 = Schedule(job_type=REPORT, payload=Report("sales"), every_s=90)
    assert every_90.latest_tick(T0 + 0.5) == 90 * (T0 // 90)
    assert every_90.next_tick(every_90.latest_tick(T0)) == 90 * (T0 // 90) + 90
    assert every_90.tick_id(T0 + 7) == "report@2026-12-02T10:07:07Z"
    assert every_90.tick_id(T0 + 7.25) == "report@2026-12-02T10:07:07.250000Z"


@pytest.fixture(params=["memory", "duckdb", "postgres"])
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    clock = ManualClock(T0)
    if request.param == "memory":
        yield JobQueue(clock=clock)
    elif request.param == "duckdb":
        with DurableQueue(tmp_path / "q.duckdb", clock=clock) as durable:
            yield durable
    else:
        from jobqueue.backends.postgres import PostgresQueue

        with PostgresQueue(request.getfixturevalue("pg_conninfo"), clock=clock) as postgres:
            yield postgres


def advance_to(queue: Queue, hour: int, minute: int, second: int = 0) -> None:
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    clock.advance(datetime(2026, 12, 2, hour, minute, second, tzinfo=UTC).timestamp() - clock.now())


def run_all(queue: Queue) -> list[str]:
    """Claim and ack every due job; return their ids."""
    ran = []
    while (lease := queue.claim()) is not None:
        queue.ack(lease)
        ran.append(lease.job.id)
    return ran


def test_each_tick_is_enqueued_once_whoever_offers_it(queue: Queue) -> None:
    first, second = Scheduler([EVERY_5]), Scheduler([EVERY_5])  # two worker processes
    assert [job.id for job in first.enqueue_due(queue)] == ["report@2026-12-02T10:05Z"]
    assert first.due_at == datetime(2026, 12, 2, 10, 10, tzinfo=UTC).timestamp()
    assert first.enqueue_due(queue) == []  # not due again before 10:10
    assert [job.id for job in second.enqueue_due(queue)] == ["report@2026-12-02T10:05Z"]  # the same job
    assert run_all(queue) == ["report@2026-12-02T10:05Z"]
    advance_to(queue, 10, 9, 59)
    late = Scheduler([EVERY_5])  # a third process starts after the tick's job ran
    late.enqueue_due(queue)
    assert run_all(queue) == []
    advance_to(queue, 10, 10)
    for scheduler in (late, second, first):
        scheduler.enqueue_due(queue)
    assert run_all(queue) == ["report@2026-12-02T10:10Z"]


def test_after_downtime_only_the_latest_missed_tick_is_enqueued(queue: Queue) -> None:
    scheduler = Scheduler([EVERY_5])
    scheduler.enqueue_due(queue)
    assert run_all(queue) == ["report@2026-12-02T10:05Z"]
    advance_to(queue, 10, 23)  # 10:10, 10:15 and 10:20 missed
    scheduler.enqueue_due(queue)
    scheduler.enqueue_due(queue)
    assert run_all(queue) == ["report@2026-12-02T10:20Z"]


def test_three_runners_on_one_queue_run_each_tick_once() -> None:
    clock = ManualClock(T0)
    queue = JobQueue(clock=clock)
    ran: list[tuple[str, float]] = []
    minutely = Schedule(job_type=REPORT, payload=Report("sales"), every_s=60)
    runners = []
    for name in ("a", "b", "c"):
        worker = jq.Worker(queue)

        async def handle(report: Report, name: str = name) -> None:
            ran.append((name, clock.now()))

        worker.register(REPORT, handle)
        runners.append(jq.Runner(worker, poll_s=3600, schedules=[minutely]))  # woken by the ticks alone

    async def scenario() -> None:
        tasks = [asyncio.create_task(runner.run()) for runner in runners[:2]]
        await clock.run_for(30)  # 10:07's job has run when the third worker starts
        tasks.append(asyncio.create_task(runners[2].run()))
        await clock.run_for(4 * 60)
        for runner in runners:
            runner.stop()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    start = 60 * (T0 // 60)
    assert [at for _, at in ran] == [start + 60 * n for n in range(5)]  # 10:07 (at start) ... 10:11


def test_three_schedulers_in_threads_on_postgres_enqueue_each_tick_once(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    clock = ManualClock(T0)
    schedulers = [Scheduler([EVERY_5]) for _ in range(3)]
    offered: list[str] = []
    with PostgresQueue(pg_conninfo, clock=clock) as queue, ThreadPoolExecutor(3) as pool:
        ran: list[str] = []
        for tick in range(6):
            start = threading.Barrier(3)

            def offer(scheduler: Scheduler, start: threading.Barrier = start) -> None:
                start.wait(timeout=30)
                offered.extend(job.id for job in scheduler.enqueue_due(queue))

            for future in [pool.submit(offer, scheduler) for scheduler in schedulers]:
                future.result(timeout=60)
            ran += run_all(queue)
            if tick % 2:  # every other tick, a late offer after its job ran
                offer(Scheduler([EVERY_5]), threading.Barrier(1))
                ran += run_all(queue)
            clock.advance(300)
    assert ran == [f"report@2026-12-02T{10 + minute // 60}:{minute % 60:02}Z" for minute in range(5, 35, 5)]
    assert len(offered) == 3 * 6 + 3


def test_three_runners_on_postgres_run_each_tick_once(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    clock = ManualClock(T0)
    ran: list[tuple[str, float]] = []
    minutely = Schedule(job_type=REPORT, payload=Report("sales"), every_s=60)
    queues = [PostgresQueue(pg_conninfo, clock=clock) for _ in range(3)]  # three workers' connections
    runners = []
    for name, queue in zip("abc", queues, strict=True):
        worker = jq.Worker(queue)

        async def handle(report: Report, name: str = name) -> None:
            ran.append((name, clock.now()))

        worker.register(REPORT, handle)
        runners.append(jq.Runner(worker, poll_s=3600, schedules=[minutely]))

    async def scenario() -> None:
        tasks = [asyncio.create_task(runner.run()) for runner in runners[:2]]
        await clock.run_for(30)  # 10:07's job has run when the third worker starts
        tasks.append(asyncio.create_task(runners[2].run()))
        await clock.run_for(4 * 60)
        for runner in runners:
            runner.stop()
        await asyncio.gather(*tasks)

    try:
        asyncio.run(scenario())
    finally:
        for queue in queues:
            queue.close()
    start = 60 * (T0 // 60)
    assert sorted(at for _, at in ran) == [start + 60 * n for n in range(5)]
