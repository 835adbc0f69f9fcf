"""A prefetched job starts with the lease its attempt needs, so it cannot run twice meanwhile.

Without a heartbeat the Worker's time limit keeps an attempt inside its lease (lesson 06);
with one, the first beat must come before the lease ends. A Runner claims ahead (prefetch)
and extends a waiting job's lease only every third of the visibility timeout (or every
``heartbeat_s``): a job that had waited could start on two-thirds of its lease (or less),
run within its time limit, and be claimed by another worker meanwhile: a healthy job run
twice. Found by the reviewers of lessons 00-11 (a 23 s job behind a 19.9 s one; a limit of
28 s on a 30 s lease; a 20 s heartbeat on a 30 s lease; the CLI's 10 s heartbeat on a 15 s
lease). Each scene: a one-slot Runner, and another worker that polls every second. Every
time is on a ManualClock.
"""

import asyncio
from dataclasses import dataclass

import pytest

from jobqueue import JobQueue, JobType, ManualClock, Worker
from jobqueue.runner import Runner
from jobqueue.worker import START_ROOM_SHARE


@dataclass(frozen=True)
class Build:
    n: int
    work_s: float


BUILD = JobType("build", Build)


@dataclass(frozen=True)
class Scene:
    """Two jobs, the second waiting in the prefetch while the first runs."""

    jobs: tuple[float, float]
    lease_s: float = 30.0
    heartbeat_s: float | None = None
    timeout_s: float | None = None  # None: the worker's default


def run_scene(scene: Scene) -> tuple[list[int], list[tuple[float, str]], list[str]]:
    """Returns which jobs started, what the other worker claimed and when, and the outcomes."""

    async def play() -> tuple[list[int], list[tuple[float, str]], list[str]]:
        clock = ManualClock()
        queue = JobQueue(clock=clock, visibility_timeout_s=scene.lease_s)
        starts: list[int] = []

        async def build(job: Build) -> None:
            starts.append(job.n)
            await clock.sleep(job.work_s)

        options = {} if scene.timeout_s is None else {"timeout_s": scene.timeout_s}
        worker = Worker(queue, heartbeat_s=scene.heartbeat_s, **options)  # type: ignore[arg-type]
        worker.register(BUILD, build)
        for n, work_s in enumerate(scene.jobs, start=1):
            queue.enqueue(BUILD, Build(n, work_s), id=f"b{n}")
        runner = Runner(worker, concurrency=1, poll_s=1.0, grace_s=5.0)
        task = asyncio.create_task(runner.run())
        other: list[tuple[float, str]] = []
        for _ in range(90):
            await clock.run_for(1.0)
            lease = queue.claim()
            if lease is not None:
                other.append((clock.now(), lease.job.id))
        runner.stop()
        await clock.run_for(10.0)
        events = await task
        return starts, other, [f"{event.job_id}:{event.outcome}" for event in events]

    return asyncio.run(asyncio.wait_for(play(), timeout=60))


SCENES = {
    "no heartbeat, default limit 24 s: 19.9 s then 23 s": Scene(jobs=(19.9, 23.0)),
    "no heartbeat, limit 28 s: 2.5 s then 27.8 s": Scene(jobs=(2.5, 27.8), timeout_s=28.0),
    "heartbeat 20 s on a 30 s lease: 19 s then 25 s": Scene(jobs=(19.0, 25.0), heartbeat_s=20.0),
    "the CLI's 10 s heartbeat on a 15 s lease: 8 s then 20 s": Scene(
        jobs=(8.0, 20.0), lease_s=15.0, heartbeat_s=10.0
    ),
}


@pytest.mark.parametrize("scene", SCENES.values(), ids=SCENES.keys())
def test_a_prefetched_job_is_never_claimed_by_another_worker_while_it_runs(scene: Scene) -> None:
    starts, other, outcomes = run_scene(scene)
    assert starts == [1, 2]
    assert other == []
    assert outcomes == ["b1:done", "b2:done"]


def test_a_job_needs_its_limit_or_first_beat_plus_room_and_at_most_a_whole_lease() -> None:
    queue = JobQueue(clock=ManualClock(), visibility_timeout_s=30.0)
    job = queue.enqueue(BUILD, Build(1, 1.0))
    room = START_ROOM_SHARE * 30.0

    async def build(_: Build) -> None:
        return None

    def needed(**options: float | None) -> float:
        worker = Worker(queue, **options)  # type: ignore[arg-type]
        worker.register(BUILD, build)
        return worker.lease_needed_s(job)

    assert needed() == pytest.approx(24.0 + room)
    assert needed(timeout_s=29.0) == 30.0  # never more than a whole lease
    assert needed(heartbeat_s=10.0) == pytest.approx(10.0 + room)
    assert Worker(queue).lease_needed_s(job) == 0.0  # no handler here: given back at once
