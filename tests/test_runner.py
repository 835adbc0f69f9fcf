"""Lesson 11: the Runner keeps N jobs running, polls an idle queue and shuts down gracefully.

Every test but the signal ones runs on a :class:`ManualClock`: the runner runs as a task
and time moves with ``await clock.run_for(s)``, so each claim, finish and shutdown
happens at an exact time. The signal tests use the real event loop and wall clock.
"""

import asyncio
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

import pytest
from waiting import within_hang_guard

from jobqueue import (
    Backoff,
    InvalidSettingError,
    JobEvent,
    JobQueue,
    JobType,
    Lease,
    LeaseRuleWarning,
    ManualClock,
    PermanentJobError,
    RetryPolicy,
    SleepingClock,
    SystemClock,
    Worker,
)
from jobqueue.backends.contract import JobTypes, QueueNames
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.runner import ACK_GROUP_S, DEFAULT_CONCURRENCY, DEFAULT_GRACE_S, Runner


@dataclass(frozen=True, kw_only=True)
class Work:
    """Payload of a test job: its number, how long it runs (s), and how it fails, if it does.

    ``failure`` is ``""`` (it succeeds), ``"transient"`` (a ConnectionError once the work
    is done) or ``"permanent"`` (a PermanentJobError at once).
    """

    n: int
    work_s: float = 10.0
    failure: str = ""


WORK = JobType("work", Work)


class Scene:
    """A queue, a worker whose handler runs :class:`Work` on the clock, and a runner over them.

    The handler records when each job started, and how many ran at once at most; the
    queue's ``claim_many`` is wrapped to record when the runner looked for work.
    """

    def __init__(
        self,
        *,
        clock: SleepingClock | None = None,
        concurrency: int = 3,
        poll_s: float = 1.0,
        grace_s: float = DEFAULT_GRACE_S,
        heartbeat_s: float | None = None,
        visibility_timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        prefetch: int = 0,
        timeout_s: float | Literal["auto"] | None = "auto",
    ) -> None:
        self.clock: SleepingClock = clock if clock is not None else ManualClock()
        self.queue = JobQueue(
            clock=self.clock, visibility_timeout_s=visibility_timeout_s, retry=retry, random=lambda: 1.0
        )
        self.worker = Worker(self.queue, heartbeat_s=heartbeat_s, timeout_s=timeout_s)
        self.worker.register(WORK, self.handle)
        self.runner = Runner(
            self.worker, concurrency=concurrency, poll_s=poll_s, grace_s=grace_s, prefetch=prefetch
        )
        self.started: list[tuple[int, float]] = []
        self.running = 0
        self.most_running = 0
        self.looks: list[float] = []
        claim_many = self.queue.claim_many

        def looking(limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
            self.looks.append(self.clock.now())
            return claim_many(limit, types=types, queues=queues)

        self.queue.claim_many = looking  # type: ignore[method-assign]

    def add(self, *works: Work) -> None:
        for work in works:
            self.queue.enqueue(WORK, work, id=f"work-{work.n}")

    async def handle(self, work: Work) -> None:
        self.started.append((work.n, self.clock.now()))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if work.failure == "permanent":
                raise PermanentJobError(f"job {work.n} can never work")
            await self.clock.sleep(work.work_s)
            if work.failure == "transient":
                raise ConnectionError(f"job {work.n} lost its connection")
        finally:
            self.running -= 1


def outcomes(events: list[JobEvent]) -> list[tuple[float, str, int, str]]:
    return [(event.at, event.job_id, event.attempt, event.outcome) for event in events]


def manual(scene: Scene) -> ManualClock:
    assert isinstance(scene.clock, ManualClock)
    return scene.clock


# -- concurrency ----------------------------------------------------------------------------


def test_seven_jobs_of_10s_three_at_a_time_take_three_rounds_in_claim_order() -> None:
    scene = Scene(concurrency=3)
    scene.add(*(Work(n=n) for n in range(1, 8)))
    clock = manual(scene)
    left: list[int] = []

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(29)
        left.append(len(scene.queue))
        await clock.run_for(1)
        left.append(len(scene.queue))
        scene.runner.stop()
        return await task

    events = asyncio.run(scenario())
    assert left == [1, 0]  # the seventh job ends at t=30, not before
    assert scene.started == [(1, 0), (2, 0), (3, 0), (4, 10), (5, 10), (6, 10), (7, 20)]
    assert scene.most_running == 3
    assert outcomes(events) == [(10 * ((n + 2) // 3), f"work-{n}", 1, "done") for n in range(1, 8)]
    assert scene.worker.events == events


def test_one_job_at_a_time_runs_them_one_after_another() -> None:
    scene = Scene(concurrency=1)
    scene.add(*(Work(n=n, work_s=5) for n in range(1, 4)))

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await manual(scene).run_for(15)
        scene.runner.stop()
        return await task

    events = asyncio.run(scenario())
    assert scene.started == [(1, 0), (2, 5), (3, 10)]
    assert scene.most_running == 1
    assert [(event.at, event.outcome) for event in events] == [(5, "done"), (10, "done"), (15, "done")]


# -- the idle poll ----------------------------------------------------------------------------


def test_an_idle_runner_looks_every_poll_s_and_starts_a_new_job_at_the_next_look() -> None:
    scene = Scene(poll_s=5)
    clock = manual(scene)
    started_by: list[list[tuple[int, float]]] = []

    async def scenario() -> None:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(12)
        scene.add(Work(n=1, work_s=1))
        await clock.run_for(2.5)  # t=14.5
        started_by.append(list(scene.started))
        await clock.run_for(0.5)  # t=15, the next look
        started_by.append(list(scene.started))
        await clock.run_for(1.5)  # t=16.5: done at t=16, then a look
        scene.runner.stop()
        await task

    asyncio.run(scenario())
    assert started_by == [[], [(1, 15.0)]]
    assert scene.looks == [0, 5, 10, 15, 16]
    assert [str(event) for event in scene.worker.events] == ["t=16s work-1 attempt 1: done"]


# -- heartbeats -------------------------------------------------------------------------------


def test_with_a_heartbeat_a_job_longer_than_the_lease_runs_once() -> None:
    scene = Scene(concurrency=2, poll_s=1, heartbeat_s=10, visibility_timeout_s=30)
    scene.add(Work(n=1, work_s=100))

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await manual(scene).run_for(130)
        scene.runner.stop()
        return await task

    events = asyncio.run(scenario())
    assert scene.started == [(1, 0)]  # the runner looked every second, but never got it again
    assert len(scene.looks) > 100
    assert outcomes(events) == [(100, "work-1", 1, "done")]
    beats = scene.worker.heartbeats
    assert [beat.at for beat in beats[:9]] == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert all(beat.error is None for beat in beats)
    assert (len(scene.queue), scene.queue.dead_letters()) == (0, [])


def test_without_a_heartbeat_the_same_job_is_handed_out_again_when_its_lease_runs_out() -> None:
    with pytest.warns(LeaseRuleWarning):  # no time limit either: the default would end it at 24 s
        scene = Scene(concurrency=2, poll_s=1, visibility_timeout_s=30, timeout_s=None)
    scene.add(Work(n=1, work_s=100))

    async def scenario() -> None:
        task = asyncio.create_task(scene.runner.run())
        await manual(scene).run_for(31)
        scene.runner.stop()
        scene.runner.stop()
        await task

    asyncio.run(scenario())
    assert scene.started == [(1, 0), (1, 30)]  # what the heartbeat test above rules out


# -- graceful shutdown ------------------------------------------------------------------------


def test_stop_claims_nothing_more_lets_running_jobs_finish_and_gives_back_the_rest_after_grace() -> None:
    scene = Scene(concurrency=3, heartbeat_s=10, grace_s=30)
    scene.add(Work(n=1, work_s=20), Work(n=2, work_s=100))
    clock = manual(scene)
    seen: dict[str, Any] = {}

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(10)
        scene.runner.stop()
        scene.add(Work(n=3, work_s=1))  # after the stop: stays waiting
        await clock.run_for(10)  # t=20: job 1 finishes within the grace period
        seen["at 20"] = outcomes(scene.worker.events)
        await clock.run_for(19)  # t=39
        seen["done at 39"] = task.done()
        await clock.run_for(1)  # t=40: the grace period is over
        seen["done at 40"] = task.done()
        return await task

    events = asyncio.run(scenario())
    assert seen == {"at 20": [(20, "work-1", 1, "done")], "done at 39": False, "done at 40": True}
    assert outcomes(events) == [(20, "work-1", 1, "done"), (40, "work-2", 1, "released")]
    assert str(events[1]) == "t=40s work-2 attempt 1: given back unfinished at shutdown"
    assert (events[1].error, events[1].retry_at) == (None, None)
    assert scene.started == [(1, 0), (2, 0)]
    assert scene.running == 0  # the cancelled handler was unwound
    assert max(scene.looks) == 10  # no claim after the stop
    given_back = scene.queue.get("work-2")
    assert given_back is not None
    assert (given_back.attempts, given_back.run_at, given_back.leased_until) == (0, 40.0, None)
    waiting = scene.queue.get("work-3")
    assert waiting is not None and (waiting.attempts, waiting.leased_until) == (0, None)
    assert [job.id for job in scene.queue.jobs()] == ["work-3", "work-2"]
    assert len(scene.queue) == 2 and scene.queue.dead_letters() == []
    assert scene.queue.claim() is not None  # claimable at once, not after a lease runs out


def test_a_second_stop_ends_the_grace_period_at_once() -> None:
    scene = Scene(concurrency=2, grace_s=30)
    scene.add(Work(n=1, work_s=100), Work(n=2, work_s=100))
    clock = manual(scene)
    done_by: list[bool] = []

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(10)
        scene.runner.stop()
        await clock.run_for(5)
        done_by.append(task.done())
        scene.runner.stop()
        await clock.run_for(0)
        done_by.append(task.done())
        return await task

    events = asyncio.run(scenario())
    assert done_by == [False, True]
    assert outcomes(events) == [(15, "work-1", 1, "released"), (15, "work-2", 1, "released")]
    assert [(job.id, job.attempts, job.run_at) for job in scene.queue.jobs()] == [
        ("work-1", 0, 15.0),
        ("work-2", 0, 15.0),
    ]


def test_stop_with_nothing_running_returns_without_waiting_for_the_grace_period() -> None:
    scene = Scene(grace_s=30)
    clock = manual(scene)

    async def scenario() -> tuple[bool, list[JobEvent]]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(3)
        scene.runner.stop()
        await clock.run_for(0)
        return task.done(), await task

    assert asyncio.run(scenario()) == (True, [])
    assert clock.now() == 3


# -- burst mode -------------------------------------------------------------------------------


def test_until_idle_returns_once_all_is_settled_with_retries_and_dead_letters_as_the_worker_does() -> None:
    retry = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=1, cap_s=4))  # delays 1 s, then 2 s
    scene = Scene(concurrency=2, poll_s=1, retry=retry)
    scene.add(
        Work(n=1, work_s=10),
        Work(n=2, work_s=1, failure="transient"),
        Work(n=3, failure="permanent"),
    )
    clock = manual(scene)
    finished_at: list[float] = []

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run(until_idle=True))
        task.add_done_callback(lambda _: finished_at.append(clock.now()))
        await clock.run_for(60)
        return await task

    events = asyncio.run(scenario())
    assert finished_at == [10]
    assert outcomes(events) == [
        (1, "work-2", 1, "retry"),
        (1, "work-3", 1, "dead"),  # claimed into the slot job 2 freed
        (3, "work-2", 2, "retry"),  # retried at t=2, after its 1 s delay
        (6, "work-2", 3, "dead"),  # retried at t=5; the third attempt was its last
        (10, "work-1", 1, "done"),
    ]
    assert [event.retry_at for event in events[:3:2]] == [2, 5]
    assert scene.started == [(1, 0), (2, 0), (3, 1), (2, 2), (2, 5)]
    assert len(scene.queue) == 0
    assert [(dead.job.id, dead.job.last_error) for dead in scene.queue.dead_letters()] == [
        ("work-3", "PermanentJobError: job 3 can never work"),
        ("work-2", "ConnectionError: job 2 lost its connection"),
    ]


def test_until_idle_does_not_wait_for_a_retry_that_is_not_due_yet() -> None:
    scene = Scene(retry=RetryPolicy(max_attempts=3, backoff=Backoff(base_s=10, cap_s=10)))
    scene.add(Work(n=1, work_s=1, failure="transient"))
    clock = manual(scene)

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run(until_idle=True))
        await clock.run_for(1)
        return await task

    assert outcomes(asyncio.run(scenario())) == [(1, "work-1", 1, "retry")]
    job = scene.queue.get("work-1")
    assert job is not None and (job.attempts, job.run_at) == (1, 11)


def test_until_idle_on_an_empty_queue_returns_at_once() -> None:
    scene = Scene()
    assert asyncio.run(scene.runner.run(until_idle=True)) == []
    assert scene.looks == [0]


# -- prefetch ---------------------------------------------------------------------------------


def test_prefetched_jobs_are_leased_ahead_and_start_the_moment_a_slot_frees() -> None:
    scene = Scene(concurrency=2, prefetch=2)
    scene.add(*(Work(n=n) for n in range(1, 7)))
    clock = manual(scene)
    leased_at_5: list[str] = []

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(5)
        leased_at_5.extend(job.id for job in scene.queue.jobs() if job.attempts == 1)
        await clock.run_for(25)
        scene.runner.stop()
        return await task

    events = asyncio.run(scenario())
    assert sorted(leased_at_5) == ["work-1", "work-2", "work-3", "work-4"]  # 2 running, 2 ahead
    assert scene.started == [(1, 0), (2, 0), (3, 10), (4, 10), (5, 20), (6, 20)]
    assert scene.most_running == 2
    assert outcomes(events) == [(10 * ((n + 1) // 2), f"work-{n}", 1, "done") for n in range(1, 7)]


def test_with_prefetch_the_runner_claims_again_only_once_fewer_than_concurrency_jobs_wait() -> None:
    scene = Scene(concurrency=2, prefetch=4)
    scene.add(*(Work(n=n) for n in range(1, 11)))
    clock = manual(scene)
    claimed: list[tuple[float, int, int]] = []
    claim_many = scene.queue.claim_many

    def counting(limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        leases = claim_many(limit, types=types, queues=queues)
        claimed.append((clock.now(), limit, len(leases)))
        return leases

    scene.queue.claim_many = counting  # type: ignore[method-assign]

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run(until_idle=True))
        await clock.run_for(60)
        return await task

    events = asyncio.run(scenario())
    # t=0: 2 run, 4 wait; t=10: 2 of those start, 2 still wait (not fewer than 2): no claim;
    # t=20: none waits: one batch for the 4 left; from t=40 on, idle polls find nothing.
    assert claimed[:3] == [(0, 6, 6), (20, 4, 4), (40, 4, 0)]
    assert all(got == 0 for _, _, got in claimed[3:])
    assert [event.outcome for event in events] == ["done"] * 10
    assert scene.started == [(n, 10 * ((n - 1) // 2)) for n in range(1, 11)]


def test_a_prefetched_job_waiting_longer_than_its_lease_is_kept_and_runs_once() -> None:
    scene = Scene(
        concurrency=1,
        prefetch=1,
        heartbeat_s=10,
        visibility_timeout_s=30,
        retry=RetryPolicy(max_attempts=1),
    )
    scene.add(Work(n=1, work_s=100), Work(n=2, work_s=5))
    clock = manual(scene)

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(110)
        scene.runner.stop()
        return await task

    events = asyncio.run(scenario())
    assert scene.started == [(1, 0), (2, 100)]  # work-2 waited 100 s for the slot, and ran once
    assert outcomes(events) == [(100, "work-1", 1, "done"), (105, "work-2", 1, "done")]
    assert scene.queue.dead_letters() == []


def test_at_shutdown_prefetched_jobs_are_given_back_at_once_and_running_ones_finish() -> None:
    scene = Scene(concurrency=1, prefetch=2, grace_s=30)
    scene.add(*(Work(n=n) for n in range(1, 4)))
    clock = manual(scene)

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(4)
        scene.runner.stop()
        await clock.run_for(10)
        return await task

    events = asyncio.run(scenario())
    assert outcomes(events) == [
        (4, "work-2", 1, "released"),
        (4, "work-3", 1, "released"),
        (10, "work-1", 1, "done"),
    ]
    assert [(job.id, job.attempts, job.run_at) for job in scene.queue.jobs()] == [
        ("work-2", 0, 4),
        ("work-3", 0, 4),
    ]


# -- acks in groups ---------------------------------------------------------------------------


def counted_acks(scene: Scene) -> list[tuple[float, list[str]]]:
    """Wrap the queue's ``ack_many`` to record when it was called and with which jobs."""
    calls: list[tuple[float, list[str]]] = []
    ack_many = scene.queue.ack_many

    def counting(leases: Sequence[Lease]) -> list[Lease]:
        calls.append((scene.clock.now(), [lease.job.id for lease in leases]))
        return ack_many(leases)

    scene.queue.ack_many = counting  # type: ignore[method-assign]
    return calls


def test_jobs_that_end_one_by_one_are_acked_in_one_batch_just_before_the_next_claim() -> None:
    tick_s = 2**-7  # 7.8 ms: four jobs end well within ACK_GROUP_S of the first
    scene = Scene(concurrency=1, prefetch=4)
    scene.add(*(Work(n=n, work_s=tick_s) for n in range(1, 6)))
    acks = counted_acks(scene)
    clock = manual(scene)

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run(until_idle=True))
        await clock.run_for(1)
        return await task

    events = asyncio.run(scenario())
    # t=0: job 1 runs, 2-5 wait. Jobs 1-4 end one tick apart; when job 5 starts, none
    # waits, so the runner claims again, and acks 1-4 in one batch first. Job 5 is the
    # last one running: it is acked (on its own) the moment it ends.
    assert acks == [(4 * tick_s, ["work-1", "work-2", "work-3", "work-4"])]
    assert outcomes(events) == [(4 * tick_s, f"work-{n}", 1, "done") for n in range(1, 5)] + [
        (5 * tick_s, "work-5", 1, "done")
    ]
    assert len(scene.queue) == 0


def test_a_finished_job_is_acked_at_the_latest_ack_group_s_after_it_ended() -> None:
    scene = Scene(concurrency=1, prefetch=3)
    scene.add(Work(n=1, work_s=1), *(Work(n=n, work_s=100) for n in range(2, 5)))
    clock = manual(scene)

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(1)
        assert scene.queue.get("work-1") is not None  # ended at t=1, ack not committed yet
        await clock.run_for(ACK_GROUP_S)
        assert scene.queue.get("work-1") is None  # no claim came (2 jobs still wait): acked anyway
        scene.runner.stop()
        await clock.run_for(DEFAULT_GRACE_S)
        return await task

    events = asyncio.run(scenario())
    assert outcomes(events)[0] == (1 + ACK_GROUP_S, "work-1", 1, "done")


def test_a_cancelled_runner_still_acks_the_jobs_that_had_ended() -> None:
    scene = Scene(concurrency=1, prefetch=3)
    scene.add(Work(n=1, work_s=1), *(Work(n=n, work_s=100) for n in range(2, 5)))
    clock = manual(scene)

    async def scenario() -> None:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert scene.queue.get("work-1") is None  # done before the cancel: not run again
    assert scene.queue.get("work-2") is not None  # cancelled mid-run: its lease runs out


# -- a failing queue ----------------------------------------------------------------------------


def test_when_the_queue_fails_the_runner_stops_its_jobs_and_raises() -> None:
    scene = Scene(concurrency=3)  # a free slot: the runner looks for work every second
    scene.add(Work(n=1, work_s=100), Work(n=2, work_s=100))
    clock = manual(scene)
    claim_many = scene.queue.claim_many

    def broken(limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        if clock.now() >= 5:
            raise OSError("disk full")
        return claim_many(limit, types=types, queues=queues)

    scene.queue.claim_many = broken  # type: ignore[method-assign]
    left_running: list[int] = []

    async def scenario() -> None:
        task = asyncio.create_task(scene.runner.run())
        await clock.run_for(6)  # the look at t=5 fails
        with pytest.raises(OSError, match="disk full"):
            await task
        left_running.append(scene.running)

    asyncio.run(scenario())
    assert left_running == [0]  # both 100 s jobs were cancelled, not left behind
    assert [(job.id, job.attempts) for job in scene.queue.jobs()] == [("work-1", 1), ("work-2", 1)]
    assert scene.worker.events == []  # their leases are left to run out


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"concurrency": 0}, "concurrency must be an int >= 1, got 0"),
        ({"concurrency": True}, "concurrency must be an int >= 1, got True"),
        ({"concurrency": 2.5}, "concurrency must be an int >= 1, got 2.5"),
        ({"poll_s": 0}, "poll_s must be a finite number of seconds > 0, got 0"),
        ({"poll_s": float("inf")}, "poll_s must be a finite number of seconds > 0, got inf"),
        ({"grace_s": -1}, "grace_s must be a finite number of seconds > 0, got -1"),
        ({"prefetch": -1}, "prefetch must be an int >= 0, got -1"),
        ({"prefetch": True}, "prefetch must be an int >= 0, got True"),
        ({"prefetch": 1.5}, "prefetch must be an int >= 0, got 1.5"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(setting: dict[str, Any], message: str) -> None:
    worker = Worker(JobQueue(clock=ManualClock()))
    with pytest.raises(InvalidSettingError) as refused:
        Runner(worker, **setting)
    assert str(refused.value) == message


def test_a_clock_that_cannot_sleep_is_refused() -> None:
    class NowOnly:
        def now(self) -> float:
            return 0.0

    with pytest.raises(InvalidSettingError) as refused:
        Runner(Worker(JobQueue(clock=NowOnly())))
    assert str(refused.value) == (
        "a runner needs a clock that can sleep (with an async sleep(seconds), like SystemClock or"
        " ManualClock), got NowOnly"
    )


def test_the_defaults() -> None:
    runner = Runner(Worker(JobQueue(clock=ManualClock())))
    assert (runner.concurrency, runner.poll_s, runner.grace_s, runner.prefetch) == (
        DEFAULT_CONCURRENCY,
        1.0,
        DEFAULT_GRACE_S,
        4 * DEFAULT_CONCURRENCY,  # Celery's prefetch multiplier
    )
    assert Runner(Worker(JobQueue(clock=ManualClock())), concurrency=3).prefetch == 12
    assert Runner(Worker(JobQueue(clock=ManualClock())), prefetch=0).prefetch == 0


def test_a_durable_queue_asks_for_bigger_claims_by_default() -> None:
    with DurableQueue(":memory:", clock=ManualClock()) as queue:
        assert Runner(Worker(queue)).prefetch == DurableQueue.claim_batch == 200
        assert Runner(Worker(queue), concurrency=100).prefetch == 400  # four per slot is more
        assert Runner(Worker(queue), prefetch=3).prefetch == 3
    assert (DEFAULT_CONCURRENCY, DEFAULT_GRACE_S) == (10, 25.0)  # below Kubernetes' 30 s


# -- signals (real event loop, wall clock) ----------------------------------------------------


async def terminate(times: int, *, after_s: float = 0.05) -> None:
    """Send this process SIGTERM ``times`` times, ``after_s`` seconds apart."""
    for _ in range(times):
        await asyncio.sleep(after_s)
        os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_stops_the_runner_gracefully_and_the_default_handler_is_back_afterwards() -> None:
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    grace_s = 120  # far beyond a slow machine: a runner that sat out the grace period shows
    scene = Scene(clock=SystemClock(), poll_s=0.01, grace_s=grace_s)
    scene.add(Work(n=1, work_s=0.3))
    inside: list[object] = []

    async def scenario() -> list[JobEvent]:
        with scene.runner.signals_stop():
            inside.append(signal.getsignal(signal.SIGTERM))
            killer = asyncio.create_task(terminate(1))
            events = await within_hang_guard(scene.runner.run(), "the runner's stop")
            await killer
        return events

    began = time.monotonic()
    events = asyncio.run(scenario())
    took_s = time.monotonic() - began
    assert [event.outcome for event in events] == ["done"]  # finished within the grace period
    assert 0.3 <= took_s < grace_s  # it waited for the job, and stopped as soon as it was done
    assert inside != [signal.SIG_DFL]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_second_sigterm_gives_back_the_running_job_and_previous_handlers_are_put_back() -> None:
    terms: list[int] = []

    def previous(signum: int, frame: FrameType | None) -> None:
        terms.append(signum)

    grace_s = 120  # far beyond a slow machine: a runner that sat out the grace period shows
    scene = Scene(clock=SystemClock(), poll_s=0.01, grace_s=grace_s)
    scene.add(Work(n=1, work_s=3600))
    sigint: list[object] = []

    async def scenario() -> list[JobEvent]:
        sigint.append(signal.getsignal(signal.SIGINT))  # asyncio.run's own handler
        with scene.runner.signals_stop():
            killer = asyncio.create_task(terminate(2))
            events = await within_hang_guard(scene.runner.run(), "the runner's stop")
            await killer
        sigint.append(signal.getsignal(signal.SIGINT))
        return events

    signal.signal(signal.SIGTERM, previous)
    try:
        began = time.monotonic()
        events = asyncio.run(scenario())
        assert time.monotonic() - began < grace_s  # the second SIGTERM ended the grace period at once
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert [(event.job_id, event.outcome) for event in events] == [("work-1", "released")]
    assert terms == []  # both signals went to the runner, not to the handler it replaced
    assert sigint[0] == sigint[1] != signal.default_int_handler
    job = scene.queue.get("work-1")
    assert job is not None and (job.attempts, job.leased_until) == (0, None)
