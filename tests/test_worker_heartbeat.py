"""Lesson 06: a job slower than the visibility timeout, with and without a heartbeat."""

import asyncio
import math
import re
from typing import Literal

import pytest

from jobqueue import (
    DEFAULT_TIMEOUT_S,
    InvalidSettingError,
    JobQueue,
    JobType,
    LeaseRuleWarning,
    ManualClock,
    StaleLeaseError,
    SystemClock,
    Worker,
)
from jobqueue.examples import shop
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload
from jobqueue.worker import Heartbeat, JobEvent

STALE_1 = (
    "StaleLeaseError: lease lease-1 on job 'invoice-1001' (attempt 1) is stale:"
    " the job is held now as lease-2 (attempt 2)"
)


def setup(
    *,
    heartbeat_s: float | None = None,
    visibility_timeout_s: float = 30,
    latency_s: float = 40,
    timeout_s: float | Literal["auto"] | None = "auto",
) -> tuple[ManualClock, JobQueue, shop.SlowRenderer, list[Worker]]:
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=visibility_timeout_s, random=lambda: 1.0)
    renderer = shop.SlowRenderer(clock=clock, latency_s=latency_s)
    workers = [Worker(queue, heartbeat_s=heartbeat_s, timeout_s=timeout_s) for _ in range(2)]
    for worker in workers:
        worker.register(RENDER_INVOICE, shop.slow_invoice_handler(renderer))
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")
    return clock, queue, renderer, workers


def run(workers: list[Worker], clock: ManualClock, *, until_s: float, run_for_s: float) -> None:
    async def scenario() -> None:
        tasks = [asyncio.create_task(worker.run_until(until_s)) for worker in workers]
        await clock.run_for(run_for_s)
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


def lines(worker: Worker) -> list[str]:
    return [str(event) for event in worker.events]


# -- without a heartbeat, a 40 s job outlives its 30 s lease ------------------------------------

NO_LIMIT_WARNING = (
    "timeout_s=None (no limit), heartbeat_s=None and a visibility timeout of 30 s: an attempt may"
    " outlive its lease and run twice at once. Without a heartbeat, keep the time limit below the"
    " visibility timeout (the default is 0.8 of it), or set heartbeat_s"
)


def unlimited() -> tuple[ManualClock, JobQueue, shop.SlowRenderer, list[Worker]]:
    """Two workers without a heartbeat or a time limit: each warns that it breaks the lease rule."""
    with pytest.warns(LeaseRuleWarning) as caught:
        made = setup(timeout_s=None)
    assert [str(warning.message) for warning in caught] == [NO_LIMIT_WARNING] * 2
    return made


def test_without_heartbeat_a_second_worker_claims_the_job_at_30s_and_both_run_it() -> None:
    clock, queue, renderer, (first, second) = unlimited()
    # Worker 1 stops looking for work at t=35 s, so after t=40 s nobody claims again.
    run([first, second], clock, until_s=35, run_for_s=80)
    assert renderer.runs == [(0.0, 40.0, 1001), (30.0, 70.0, 1001)]
    assert lines(first) == [f"t=40s invoice-1001 attempt 1: lease lost, not acked ({STALE_1})"]
    assert lines(second) == ["t=70s invoice-1001 attempt 2: done"]  # nobody claimed after t=60
    assert first.events[0].outcome == "stale"
    assert (len(queue), queue.dead_letters()) == (0, [])
    assert first.heartbeats == second.heartbeats == []


def test_without_heartbeat_two_busy_workers_never_ack_and_the_job_dies() -> None:
    clock, queue, renderer, (first, second) = unlimited()
    run([first, second], clock, until_s=170, run_for_s=170)
    assert [start for start, _, _ in renderer.runs] == [0, 30, 60, 90, 120]  # five renders
    events = sorted(first.events + second.events, key=lambda event: event.at)
    assert [(event.at, event.attempt, event.outcome) for event in events] == [
        (40, 1, "stale"),
        (70, 2, "stale"),
        (100, 3, "stale"),
        (130, 4, "stale"),
        (160, 5, "stale"),
    ]
    assert events[-1].error is not None and "no longer in the queue" in events[-1].error
    [dead] = queue.dead_letters()
    assert (dead.job.attempts, dead.died_at) == (5, 150.0)
    assert dead.job.last_error == "LeaseExpired: final attempt 5 was neither acked nor failed in time"


def test_by_default_without_heartbeat_the_time_limit_ends_each_attempt_inside_its_lease() -> None:
    clock, queue, renderer, (first, second) = setup()  # no warning: pytest makes warnings errors
    assert first.timeout_s == 24.0  # 0.8 of the 30 s visibility timeout
    run([first, second], clock, until_s=170, run_for_s=170)
    events = sorted(first.events + second.events, key=lambda event: event.at)
    assert renderer.runs == []  # a 40 s render never finishes within 24 s ...
    assert {event.outcome for event in events} == {"retry", "dead"}  # ... but never runs twice at once
    assert all(event.error is not None and event.error.startswith("JobTimeoutError") for event in events)
    assert [event.at for event in events] == [24, 49, 75, 103, 135]  # 24 s after each claim: inside the lease
    [dead] = queue.dead_letters()
    assert dead.job.attempts == 5


def test_with_a_heartbeat_the_default_time_limit_is_300_s() -> None:
    _, _, _, (first, _) = setup(heartbeat_s=10)
    assert first.timeout_s == DEFAULT_TIMEOUT_S == 300.0


@pytest.mark.parametrize(("timeout_s", "heartbeat_s"), [(29.9, None), (300, 10), (None, 10), ("auto", None)])
def test_settings_that_keep_the_lease_rule_do_not_warn(
    timeout_s: float | Literal["auto"] | None, heartbeat_s: float | None
) -> None:
    setup(timeout_s=timeout_s, heartbeat_s=heartbeat_s)  # a warning would fail the test


def test_a_worker_time_limit_not_below_the_lease_warns_with_the_three_settings() -> None:
    with pytest.warns(LeaseRuleWarning) as caught:
        setup(timeout_s=30)
    assert str(caught[0].message).startswith(
        "timeout_s=30 s, heartbeat_s=None and a visibility timeout of 30 s: an attempt may outlive its"
        " lease and run twice at once."
    )
    assert caught[0].filename == __file__  # points at the line that made the worker


def test_a_job_type_limit_not_below_the_lease_warns_at_register_unless_a_heartbeat_is_set() -> None:
    slow = JobType("render_report", InvoicePayload, timeout_s=120)
    _, _, renderer, (first, _) = setup()
    with pytest.warns(LeaseRuleWarning, match="^job type 'render_report': timeout_s=120 s, heartbeat_s=None"):
        first.register(slow, shop.slow_invoice_handler(renderer))
    _, _, renderer, (beating, _) = setup(heartbeat_s=10)
    beating.register(slow, shop.slow_invoice_handler(renderer))  # no warning


def test_a_longer_visibility_timeout_also_runs_it_once() -> None:
    clock, queue, renderer, (first, second) = setup(visibility_timeout_s=60)
    run([first, second], clock, until_s=100, run_for_s=100)
    assert len(queue) == 0
    assert renderer.runs == [(0.0, 40.0, 1001)]
    assert lines(first) == ["t=40s invoice-1001 attempt 1: done"]
    assert second.events == []


# -- with a heartbeat ---------------------------------------------------------------------------


def test_with_heartbeat_every_10s_the_second_worker_gets_nothing_until_the_first_acks() -> None:
    clock, queue, renderer, (first, second) = setup(heartbeat_s=10)
    leases: list[float | None] = []

    async def scenario() -> None:
        tasks = [asyncio.create_task(worker.run_until(100)) for worker in (first, second)]
        for _ in range(4):  # look at the lease just after each beat
            await clock.run_for(10)
            job = queue.get("invoice-1001")
            leases.append(None if job is None else job.leased_until)
        await clock.run_for(60)
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert leases == [40.0, 50.0, 60.0, None]  # acked at t=40
    assert renderer.runs == [(0.0, 40.0, 1001)]
    assert lines(first) == ["t=40s invoice-1001 attempt 1: done"]
    assert second.events == [] and second.heartbeats == []
    assert [str(beat) for beat in first.heartbeats] == [
        "t=10s invoice-1001 attempt 1: heartbeat, lease extended to t=40s",
        "t=20s invoice-1001 attempt 1: heartbeat, lease extended to t=50s",
        "t=30s invoice-1001 attempt 1: heartbeat, lease extended to t=60s",
    ]  # and none after the ack, though the workers ran on until t=100
    assert (len(queue), queue.dead_letters()) == (0, [])


def test_the_heartbeat_stops_when_the_handler_fails_and_the_failure_is_recorded() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=30, random=lambda: 1.0)
    beats: list[Heartbeat] = []
    worker = Worker(queue, heartbeat_s=10, on_heartbeat=beats.append)

    async def crash_after_25s(payload: InvoicePayload) -> None:
        await clock.sleep(25)
        raise shop.RendererCrashed(f"renderer crashed on order {payload.order_id}")

    worker.register(RENDER_INVOICE, crash_after_25s)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1003), id="invoice-1003")

    async def scenario() -> JobEvent | None:
        task = asyncio.create_task(worker.run_one())
        await clock.run_for(100)
        return await task

    event = asyncio.run(scenario())
    assert str(event) == (
        "t=25s invoice-1003 attempt 1: failed, retry at t=26s"
        " (RendererCrashed: renderer crashed on order 1003)"
    )
    assert [beat.at for beat in beats] == [10.0, 20.0] == [beat.at for beat in worker.heartbeats]
    job = queue.get("invoice-1003")
    assert job is not None and (job.attempts, job.leased_until, job.run_at) == (1, None, 26.0)


def test_a_refused_heartbeat_stops_and_the_worker_does_not_ack() -> None:
    # Worker 1's process is paused for 31 s (a long GC pause, a suspended VM): no beat runs,
    # its lease ends at t=30 and worker 2, elsewhere, claims the job at t=36.
    clock, queue, renderer, (first, _) = setup(heartbeat_s=10)

    async def scenario() -> tuple[JobEvent | None, str]:
        task = asyncio.create_task(first.run_one())
        await clock.run_for(5)
        clock.advance(31)  # the pause: time jumps, nothing runs
        other = queue.claim()
        assert other is not None
        await clock.run_for(10)  # worker 1 wakes, beats (refused), finishes its render at t=40
        return await task, other.token

    event, other_token = asyncio.run(scenario())
    assert other_token == "lease-2"
    [beat] = first.heartbeats
    assert beat == Heartbeat(at=36.0, job_id="invoice-1001", attempt=1, leased_until=None, error=STALE_1)
    assert str(beat) == f"t=36s invoice-1001 attempt 1: heartbeat refused, lease lost ({STALE_1})"
    assert event == JobEvent(
        at=40.0, job_id="invoice-1001", job_type="render_invoice", attempt=1, outcome="stale", error=STALE_1
    )
    assert renderer.runs == [(0.0, 40.0, 1001)]  # the work was done, the ack was not sent
    job = queue.get("invoice-1001")
    assert job is not None and (job.attempts, job.leased_until) == (2, 66.0)  # worker 2's lease, untouched


def test_a_handler_failing_after_its_lease_was_taken_leaves_the_new_holder_alone() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=30, random=lambda: 1.0)
    worker = Worker(queue)
    holder: list[str] = []

    async def slow_then_crash(payload: InvoicePayload) -> None:
        clock.advance(31)
        lease = queue.claim()  # another worker takes the job meanwhile
        assert lease is not None
        holder.append(lease.token)
        raise shop.RendererCrashed("renderer crashed")

    worker.register(RENDER_INVOICE, slow_then_crash)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1003), id="invoice-1003")
    event = asyncio.run(worker.run_one())
    assert event is not None and event.outcome == "stale"
    assert event.error is not None and event.error.startswith("StaleLeaseError: lease lease-1")
    job = queue.get("invoice-1003")
    assert holder == ["lease-2"]
    assert job is not None and (job.attempts, job.leased_until, job.last_error) == (2, 61.0, None)


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("heartbeat_s", [0, -1, 30, 45, math.nan, math.inf, True])
def test_a_heartbeat_outside_0_to_the_visibility_timeout_is_refused(heartbeat_s: float) -> None:
    queue = JobQueue(clock=ManualClock(), visibility_timeout_s=30)
    with pytest.raises(InvalidSettingError) as info:
        Worker(queue, heartbeat_s=heartbeat_s)
    message = str(info.value)
    assert "heartbeat_s" in message and "visibility timeout (30 s)" in message
    assert message.endswith(f"got {heartbeat_s!r}")


def test_good_heartbeats_are_kept_in_seconds() -> None:
    assert Worker(JobQueue(clock=ManualClock()), heartbeat_s=10).heartbeat_s == 10.0
    assert (
        Worker(JobQueue(clock=SystemClock(), visibility_timeout_s=30), heartbeat_s=29.5).heartbeat_s == 29.5
    )
    assert Worker(JobQueue(clock=ManualClock())).heartbeat_s is None


class WallOnly:
    def now(self) -> float:
        return 0.0


def test_a_heartbeat_or_a_polling_loop_needs_a_clock_that_can_sleep() -> None:
    queue = JobQueue(clock=WallOnly())
    with pytest.raises(InvalidSettingError, match=re.escape("a heartbeat needs a clock that can sleep")):
        Worker(queue, heartbeat_s=10)
    with pytest.raises(InvalidSettingError, match="got WallOnly"):
        asyncio.run(Worker(queue).run_until(10))


@pytest.mark.parametrize("poll_s", [0, -1, math.nan])
def test_run_until_refuses_a_bad_poll_interval(poll_s: float) -> None:
    expected = f"poll_s must be a finite number of seconds > 0, got {poll_s!r}"
    with pytest.raises(InvalidSettingError, match=re.escape(expected)):
        asyncio.run(Worker(JobQueue(clock=ManualClock())).run_until(10, poll_s=poll_s))


# -- the polling loop ---------------------------------------------------------------------------


def test_run_until_polls_an_empty_queue_and_picks_up_a_job_enqueued_later() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock)
    mail = shop.MailProvider(clock=clock)
    worker = Worker(queue)
    worker.register(shop.SEND_RECEIPT, shop.receipt_handler(mail))

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(worker.run_until(10, poll_s=2))
        await clock.run_for(4.5)
        receipt = shop.ReceiptPayload(order_id=1001, email="customer@example.com")
        queue.enqueue(shop.SEND_RECEIPT, receipt, id="receipt-1001")
        await clock.run_for(20)
        return await task

    events = asyncio.run(scenario())
    assert [str(event) for event in events] == ["t=6s receipt-1001 attempt 1: done"]  # next poll after 4.5
    assert mail.sent == [(6.0, "customer@example.com", "Your receipt for order 1001")]
    assert clock.now() == 24.5


def test_run_until_finishes_the_job_it_is_running() -> None:
    clock, _, renderer, (first, _) = setup(latency_s=40, visibility_timeout_s=60)
    run([first], clock, until_s=10, run_for_s=50)
    assert lines(first) == ["t=40s invoice-1001 attempt 1: done"]
    assert renderer.runs == [(0.0, 40.0, 1001)]


def test_without_heartbeat_run_one_is_unchanged_and_creates_no_task() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock)
    with pytest.warns(LeaseRuleWarning):  # no time limit, no heartbeat: the lease rule is broken
        worker = Worker(queue, timeout_s=None)  # a time limit has its watchdog task (tests/test_hardening.py)
    worker.register(RENDER_INVOICE, shop.invoice_handler(shop.InvoiceRenderer(clock=clock, latency_s=2)))
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")

    async def scenario() -> tuple[JobEvent | None, int]:
        event = await worker.run_one()
        return event, len(asyncio.all_tasks())

    event, tasks = asyncio.run(scenario())
    assert str(event) == "t=2s invoice-1001 attempt 1: done"
    assert tasks == 1  # just this scenario


def test_stale_lease_error_is_what_a_heartbeat_on_a_lost_lease_meets() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=30)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    clock.advance(30)
    assert queue.claim() is not None
    with pytest.raises(StaleLeaseError, match=re.escape(STALE_1.removeprefix("StaleLeaseError: "))):
        queue.extend_lease(lease)


def test_a_heartbeat_changes_nothing_for_jobs_faster_than_a_beat() -> None:
    # Lesson 04's outage replay, with a heartbeat: same log, no beat.
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=30, random=lambda: 1.0)
    mail = shop.MailProvider(clock=clock, down_until_s=5)
    worker = Worker(queue, heartbeat_s=10)
    worker.register(shop.SEND_RECEIPT, shop.receipt_handler(mail))
    worker.register(RENDER_INVOICE, shop.invoice_handler(shop.InvoiceRenderer(clock=clock)))
    receipt = shop.ReceiptPayload(order_id=1001, email="customer@example.com")
    queue.enqueue(shop.SEND_RECEIPT, receipt, id="receipt-1001")
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")

    async def loop() -> None:
        for _ in range(10):
            await worker.drain()
            clock.advance(1)

    asyncio.run(loop())
    down = "MailProviderDown: mail provider unreachable until t=5s"
    assert lines(worker) == [
        f"t=0s receipt-1001 attempt 1: failed, retry at t=1s ({down})",
        "t=0s invoice-1001 attempt 1: done",
        f"t=1s receipt-1001 attempt 2: failed, retry at t=3s ({down})",
        f"t=3s receipt-1001 attempt 3: failed, retry at t=7s ({down})",
        "t=7s receipt-1001 attempt 4: done",
    ]
    assert worker.heartbeats == []


# On a clock of real time the heartbeat and the time limit wait as timers of the event loop
# (Worker._later), not as tasks. Each test waits for an event, under an outer timeout that
# only catches a hang.

HANG_S = 30.0


def real_time_worker(
    *, heartbeat_s: float, timeout_s: float, after_beat: asyncio.Event | None = None, beats_before: int = 0
) -> tuple[JobQueue, Worker, list[Heartbeat]]:
    """A worker on a SystemClock and one waiting job; ``after_beat`` is set at beat ``beats_before``."""
    queue = JobQueue(clock=SystemClock(), visibility_timeout_s=30)
    beats: list[Heartbeat] = []

    def record(beat: Heartbeat) -> None:
        beats.append(beat)
        if after_beat is not None and len(beats) >= beats_before:
            after_beat.set()

    worker = Worker(queue, on_heartbeat=record, heartbeat_s=heartbeat_s, timeout_s=timeout_s)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")
    return queue, worker, beats


def test_on_a_real_clock_a_handler_outliving_its_beat_gets_its_lease_extended_again_and_again() -> None:
    third_beat = asyncio.Event()
    queue, worker, beats = real_time_worker(
        heartbeat_s=0.01, timeout_s=HANG_S, after_beat=third_beat, beats_before=3
    )

    async def handler(payload: InvoicePayload) -> None:
        await third_beat.wait()  # ends only once the heartbeat has extended the lease three times

    worker.register(RENDER_INVOICE, handler)

    async def scenario() -> JobEvent | None:
        return await asyncio.wait_for(worker.run_one(), HANG_S)

    event = asyncio.run(scenario())
    assert event is not None and event.outcome == "done"
    assert len(beats) >= 3 and all(beat.leased_until is not None for beat in beats)
    assert [beat.leased_until for beat in beats] == sorted(beat.leased_until or 0 for beat in beats)
    assert len(queue) == 0


def test_on_a_real_clock_a_fast_handler_runs_beside_no_heartbeat_or_time_limit_task() -> None:
    _, worker, beats = real_time_worker(heartbeat_s=5, timeout_s=10)
    tasks_seen: list[int] = []

    async def handler(payload: InvoicePayload) -> None:
        tasks_seen.append(len(asyncio.all_tasks()))

    worker.register(RENDER_INVOICE, handler)

    async def scenario() -> tuple[JobEvent | None, int]:
        event = await worker.run_one()
        return event, len(asyncio.all_tasks())

    event, tasks_after = asyncio.run(scenario())
    assert event is not None and event.outcome == "done"
    # only the scenario's own task: the heartbeat and the time limit are timers until they fire
    assert beats == [] and tasks_seen == [1] and tasks_after == 1


def test_on_a_real_clock_the_time_limit_cancels_a_handler_that_never_ends() -> None:
    _, worker, beats = real_time_worker(heartbeat_s=5, timeout_s=0.01)

    async def handler(payload: InvoicePayload) -> None:
        await asyncio.Event().wait()  # nothing sets it: only the time limit ends this

    worker.register(RENDER_INVOICE, handler)

    async def scenario() -> JobEvent | None:
        return await asyncio.wait_for(worker.run_one(), HANG_S)

    event = asyncio.run(scenario())
    assert event is not None and event.outcome == "retry"
    assert "JobTimeoutError" in str(event) and "time limit of 0.01 s" in str(event)
    assert beats == []
