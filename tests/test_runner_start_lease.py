"""A prefetched job starts on a whole lease, so the worker's time limit still ends before it.

Without a heartbeat the Worker's default time limit is LEASE_SHARE (0.8) of the visibility
timeout, so that an attempt ends, and its fail reaches the queue, before the lease does
(lesson 06). A Runner claims ahead (prefetch) and extends a waiting job's lease only every
third of the visibility timeout; a job that had waited could start with two-thirds of its
lease left, run within its time limit, and be claimed by another worker meanwhile: a healthy
job run twice (found by the reviewer of lessons 00-11: a 23 s job behind a 19.9 s one).
Every time is on a ManualClock.
"""

import asyncio
from dataclasses import dataclass

from jobqueue import JobQueue, JobType, ManualClock, Worker
from jobqueue.runner import Runner


@dataclass(frozen=True)
class Build:
    n: int
    work_s: float


BUILD = JobType("build", Build)


def run_scene(
    *, heartbeat_s: float | None
) -> tuple[list[tuple[int, float]], list[tuple[float, str]], list[str]]:
    """Two jobs (19.9 s, 23 s) through a one-slot Runner; another worker polls every second.

    Returns when each job started, what the other worker claimed and when, and the runner's
    outcomes.
    """

    async def scene() -> tuple[list[tuple[int, float]], list[tuple[float, str]], list[str]]:
        clock = ManualClock()
        queue = JobQueue(clock=clock, visibility_timeout_s=30.0)
        starts: list[tuple[int, float]] = []

        async def build(job: Build) -> None:
            starts.append((job.n, clock.now()))
            await clock.sleep(job.work_s)

        worker = Worker(queue, heartbeat_s=heartbeat_s)
        worker.register(BUILD, build)
        assert worker.timeout_s == (24.0 if heartbeat_s is None else worker.timeout_s)
        for n, work_s in [(1, 19.9), (2, 23.0)]:
            queue.enqueue(BUILD, Build(n, work_s), id=f"b{n}")
        runner = Runner(worker, concurrency=1, poll_s=1.0, grace_s=5.0)
        task = asyncio.create_task(runner.run())
        other: list[tuple[float, str]] = []
        for _ in range(60):
            await clock.run_for(1.0)
            lease = queue.claim()
            if lease is not None:
                other.append((clock.now(), lease.job.id))
        runner.stop()
        await clock.run_for(10.0)
        events = await task
        return starts, other, [f"{event.job_id}:{event.outcome}" for event in events]

    return asyncio.run(asyncio.wait_for(scene(), timeout=60))


def test_without_a_heartbeat_a_prefetched_job_starts_on_a_whole_lease_and_runs_once() -> None:
    starts, other, outcomes = run_scene(heartbeat_s=None)
    assert starts == [(1, 0.0), (2, 19.9)]
    assert other == []  # nobody else could take job 2 while it ran within its 24 s limit
    assert outcomes == ["b1:done", "b2:done"]


def test_with_a_heartbeat_the_same_jobs_run_once_too() -> None:
    starts, other, outcomes = run_scene(heartbeat_s=10.0)
    assert [n for n, _ in starts] == [1, 2]
    assert other == []
    assert outcomes == ["b1:done", "b2:done"]
