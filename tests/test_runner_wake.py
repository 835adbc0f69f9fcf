"""The Runner's two backend-neutral hooks, on the in-memory queue and a manual clock.

- a queue with an async ``wait_for_work(timeout_s)`` (as PostgresQueue has, through
  LISTEN/NOTIFY) wakes an idle runner at once: the new job starts with the clock unmoved,
  long before the next poll;
- a queue whose server is away (:class:`QueueUnavailableError`) does not stop the runner:
  it waits ``UNAVAILABLE_PAUSE_S`` on its clock and looks again, and the running job
  goes on meanwhile.
"""

import asyncio

from waiting import within_hang_guard

from jobqueue import JobQueue, Lease, ManualClock, QueueUnavailableError, Worker
from jobqueue.backends.contract import JobTypes, QueueNames
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload
from jobqueue.runner import UNAVAILABLE_PAUSE_S, Runner


class WakingQueue(JobQueue):
    """An in-memory queue that says when a job arrives, as a database's NOTIFY would."""

    def __init__(self, *, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.arrived = asyncio.Event()
        self.waits: list[float] = []

    async def wait_for_work(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        await self.arrived.wait()
        self.arrived.clear()
        return True


def test_a_queue_that_says_when_work_arrives_wakes_an_idle_runner_at_once() -> None:
    clock = ManualClock()
    started: list[tuple[int, float]] = []

    async def scenario() -> None:
        queue = WakingQueue(clock=clock)

        async def render(payload: InvoicePayload) -> None:
            started.append((payload.order_id, clock.now()))

        worker = Worker(queue)
        worker.register(RENDER_INVOICE, render)
        runner = Runner(worker, poll_s=60)
        task = asyncio.create_task(runner.run())
        await clock.run_for(10)  # idle: one look at t=0, the next poll would be at t=60
        queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=7))
        queue.arrived.set()
        for _ in range(20):
            await asyncio.sleep(0)  # no time passes on the clock
        runner.stop()
        await task
        assert queue.waits and set(queue.waits) == {60}  # it waited at most poll_s each time

    asyncio.run(scenario())
    assert started == [(7, 10.0)]


def test_a_runner_waits_out_an_unavailable_queue_and_carries_on() -> None:
    clock = ManualClock()
    done: list[tuple[int, float]] = []
    logged: list[str] = []

    async def scenario() -> None:
        queue = JobQueue(clock=clock)
        claim_many = queue.claim_many
        down = [2.0, 3.5]  # the server is away from t=2 to t=3.5

        def flaky(limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
            if down[0] <= clock.now() < down[1]:
                raise QueueUnavailableError("cannot reach PostgreSQL at db:5432, database shop")
            return claim_many(limit, types=types, queues=queues)

        queue.claim_many = flaky  # type: ignore[method-assign]

        async def render(payload: InvoicePayload) -> None:
            await clock.sleep(5)
            done.append((payload.order_id, clock.now()))

        worker = Worker(queue)
        worker.register(RENDER_INVOICE, render)
        runner = Runner(worker, concurrency=2, poll_s=1, log=logged.append)
        queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1))
        task = asyncio.create_task(runner.run())
        await clock.run_for(3)
        queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=2))  # while the server is away
        await clock.run_for(7)
        runner.stop()
        await task

    asyncio.run(scenario())
    # Job 1 ran through the outage; job 2 started at the first look after it (t=4: the
    # failed look at t=3 paused a second), and ended at t=9.
    assert done == [(1, 5.0), (2, 9.0)]
    assert UNAVAILABLE_PAUSE_S == 1.0
    assert (
        logged[:2]
        == ["queue unavailable, trying again in 1 s: cannot reach PostgreSQL at db:5432, database shop"] * 2
    )


class SlowToCancelQueue(JobQueue):
    """A queue whose wait for work takes a while to end once cancelled, as PostgresQueue's does
    when the cancel comes while its LISTEN runs (psycopg then asks the server to stop it)."""

    CLEANUP_S = 1.0

    def __init__(self, *, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.waits: list[asyncio.Task[object]] = []

    async def wait_for_work(self, timeout_s: float) -> bool:
        task = asyncio.current_task()
        assert task is not None
        self.waits.append(task)
        try:
            await asyncio.Event().wait()  # nothing arrives
        except asyncio.CancelledError:
            await asyncio.sleep(self.CLEANUP_S)
            raise
        return True


def test_the_runner_lets_a_cancelled_wait_for_work_end_before_it_goes_on() -> None:
    """Left running, a cancelled wait can meet the shutdown's own cancel halfway through its
    cleanup, the one path found to psycopg's 'query cancellation interrupted' on a worker's
    stderr."""

    async def scenario() -> list[asyncio.Task[object]]:
        queue = SlowToCancelQueue(clock=ManualClock())
        runner = Runner(Worker(queue), poll_s=60)
        task = asyncio.create_task(runner.run())
        while not queue.waits:
            await asyncio.sleep(0)
        runner.stop()
        await within_hang_guard(task, "the runner's stop")
        return [wait for wait in queue.waits if not wait.done()]

    assert asyncio.run(scenario()) == []
