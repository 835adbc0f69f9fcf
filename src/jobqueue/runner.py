"""A long-running worker: many jobs at once, an idle poll, and a graceful shutdown.

:class:`Runner` drives a :class:`~jobqueue.worker.Worker` (which knows the handlers) as
a service does in production. It keeps up to ``concurrency`` jobs running as asyncio
tasks, claims free slots in one batch, acks finished jobs in one batch, and looks at an
empty queue again every ``poll_s`` seconds. Leases of running jobs are kept alive by the
worker's heartbeat: give the worker one (``Worker(queue, heartbeat_s=10)``), or a job
slower than the visibility timeout is handed out again while it still runs. With
``prefetch``, it claims jobs ahead, so the queue's round trips overlap with running jobs
instead of coming between them. Finished jobs are settled in groups: their acks are
committed together with the next claim, once as many jobs have finished as one claim
takes, when nothing is left running, or at the latest :data:`ACK_GROUP_S` seconds after
the job ended (sooner if its lease would run out first), so a durable queue commits about
one ack per claim instead of one per wake-up, in the same transaction as the claim
(:meth:`jobqueue.worker.Worker.settle_and_claim`).

With ``queues={"emails": 10, "reports": 2}`` it runs each named queue with slots of its
own: one lane per queue, each claiming only from its queue (Sidekiq's and Oban's queues), so
a backlog of slow reports holds at most the reports' 2 slots and the e-mails keep theirs.

Shutdown follows the usual contract of a process manager (systemd, Kubernetes, Heroku):
on SIGTERM or SIGINT (or :meth:`Runner.stop`) it stops claiming, gives running jobs up
to ``grace_s`` seconds to finish, then cancels the rest and gives their jobs back
(:meth:`~jobqueue.backends.memory.JobQueue.release`), so another worker can take them at once
instead of waiting for the leases to run out. A second signal ends the grace period.

When the queue's server cannot be reached (:class:`~jobqueue.errors.QueueUnavailableError`,
a restart or a dropped connection), the runner logs it, waits a second and carries on;
running jobs go on meanwhile, and any whose outcome could not be recorded run again after
their leases.

A handler cannot stop the runner: its exceptions, its own ``CancelledError``
(:class:`~jobqueue.errors.HandlerCancelledError`) and a run past its time limit
(:class:`~jobqueue.errors.JobTimeoutError`) each fail only that attempt.

Introduced in lesson 11.
"""

from __future__ import annotations

import asyncio
import signal
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from jobqueue.backends.contract import ClaimsAhead, WaitsForWork
from jobqueue.clock import SleepingClock
from jobqueue.errors import InvalidSettingError, QueueUnavailableError, StaleLeaseError
from jobqueue.job import Lease, check_count, check_positive_seconds, check_queue_name
from jobqueue.schedule import Schedule, Scheduler
from jobqueue.worker import Attempt, JobEvent, Worker

DEFAULT_CONCURRENCY = 10
"""Jobs one runner keeps running at once."""

PREFETCH_PER_SLOT = 4
"""Jobs a runner claims ahead per slot unless told otherwise (Celery's prefetch multiplier)."""

ACK_GROUP_S = 0.05
"""Seconds at most that a finished job waits for its ack, so that acks are committed in groups.

A crash in that window loses the ack, not the job: its lease runs out and the job runs
again (at-least-once), as for a crash during the job itself.
"""

UNAVAILABLE_PAUSE_S = 1.0
"""Seconds a runner waits before trying again a queue whose server could not be reached."""

DEFAULT_GRACE_S = 25.0
"""Seconds running jobs get to finish after a shutdown signal.

Below the 30 s that Kubernetes waits between SIGTERM and SIGKILL by default, so that the
jobs still running when the grace period ends are given back before the kill. Docker's
``docker stop`` waits only 10 s: pass ``grace_s`` (or ``--grace``) below your platform's.
"""


class Runner:
    """Runs a worker's jobs concurrently until stopped, then shuts down gracefully.

    Args:
        worker: the worker whose handlers run the jobs; its queue's clock must be able to
            sleep (:class:`~jobqueue.clock.SystemClock`, or a
            :class:`~jobqueue.clock.ManualClock` in tests).
        concurrency: how many jobs may run at once (>= 1; default
            :data:`DEFAULT_CONCURRENCY`). Suited to jobs that await I/O; CPU-bound handlers
            block the event loop and gain nothing.
        queues: instead of ``concurrency``, the named queues to run and the jobs each may
            run at once, e.g. ``{"emails": 10, "reports": 2}``: each queue gets its own
            slots, its own claims (``claim_many(queues=[name])``) and its own prefetch, so
            that a backlog in one cannot take the slots of another. Jobs of queues not
            named are left alone. ``None`` (the default): one pool for every queue.
        poll_s: seconds to wait before looking again at a queue with no due job (> 0).
            A queue that can say when work arrives
            (:class:`~jobqueue.backends.contract.WaitsForWork`, as
            :class:`~jobqueue.backends.postgres.PostgresQueue` is through LISTEN/NOTIFY) wakes an
            idle runner at once; polling stays the fallback.
        grace_s: seconds running jobs get to finish after :meth:`stop` (> 0).
        prefetch: jobs to claim ahead of a free slot (>= 0; default ``None``: four times
            ``concurrency``, Celery's default multiplier, or the queue's ``claim_batch``
            if it has one (:class:`~jobqueue.backends.contract.ClaimsAhead`) and that is
            more; 0 for none). When a job ends, a
            prefetched one starts at once and the ack and the next claim happen while it
            runs, which hides the queue's round trips (RabbitMQ's prefetch count, Celery's
            prefetch multiplier); and the runner claims again only once fewer than
            ``concurrency`` jobs wait, so it claims in batches of about ``prefetch``: fewer
            commits per job on a durable queue. The leases of prefetched jobs are extended
            while they wait, at the worker's heartbeat interval (a third of the visibility
            timeout without one); a job that waits long is still held from other workers
            all that time, so prefetch suits many short jobs. Prefetched jobs are given
            back at shutdown. With ``queues``, per queue.
        log: called with a line when the shutdown starts and when the grace period ends
            with jobs still running (``print`` will do); the CLI logs these.
        schedules: periodic jobs (:class:`~jobqueue.schedule.Schedule`) this runner
            enqueues at their ticks, waking for each; give every worker process the same
            ones: each tick is enqueued once, whatever the number of processes, and after
            downtime only the latest tick missed is (see :mod:`jobqueue.schedule`).

    Raises:
        InvalidSettingError: if a number is out of range, the clock cannot sleep, both
            ``concurrency`` and ``queues`` are given, ``queues`` is empty or holds a bad
            name or count (naming it), or a schedule is not a
            :class:`~jobqueue.schedule.Schedule` (or two share a name).

    A runner runs once: after it has stopped, make a new one to run again. Introduced in
    lesson 11; ``queues`` with named queues (issue 24).
    """

    def __init__(
        self,
        worker: Worker,
        *,
        concurrency: int | None = None,
        queues: Mapping[str, int] | None = None,
        poll_s: float = 1.0,
        grace_s: float = DEFAULT_GRACE_S,
        prefetch: int | None = None,
        log: Callable[[str], object] | None = None,
        schedules: Sequence[Schedule[Any]] = (),
    ) -> None:
        self.worker = worker
        self.scheduler = Scheduler(schedules)
        self.clock: SleepingClock = worker.sleeping_clock("a runner")
        self.queues = None if queues is None else _check_queue_slots(queues, concurrency)
        """The named queues this runner runs and the jobs each may run at once; ``None``: one pool."""
        if self.queues is None:
            self.concurrency = (
                DEFAULT_CONCURRENCY if concurrency is None else check_count("concurrency", concurrency)
            )
        else:
            self.concurrency = sum(self.queues.values())
        self.poll_s = check_positive_seconds("poll_s", poll_s)
        self.grace_s = check_positive_seconds("grace_s", grace_s)
        queue = worker.queue
        least = queue.claim_batch if isinstance(queue, ClaimsAhead) else 0
        self.prefetch = (
            max(PREFETCH_PER_SLOT * self.concurrency, least)
            if prefetch is None
            else check_count("prefetch", prefetch, least=0)
        )
        self._log = log
        # How long a claim or an extension holds a job, and how often a prefetched lease is
        # extended while it waits for a slot, in seconds.
        self._lease_s = queue.visibility_timeout_s
        self._refresh_s = worker.heartbeat_s if worker.heartbeat_s is not None else self._lease_s / 3
        # Finished attempts not settled yet, and when the first of them must be settled by.
        self._finished: list[Attempt] = []
        self._settle_by = float("inf")
        # No prefetched lease needs extending before this time (seconds on the clock); it may
        # be early (a lease started since), never late: until then no step looks at them all.
        self._refresh_by = float("inf")
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        # A queue that can tell when work arrives (PostgresQueue: LISTEN/NOTIFY) wakes an
        # idle runner at once; polling every poll_s stays the fallback.
        self._wait_for_work: Callable[[float], Awaitable[bool]] | None = (
            queue.wait_for_work if isinstance(queue, WaitsForWork) else None
        )
        # The named queue this runner claims from (a lane of a runner given `queues`), and
        # the lanes of a runner given `queues`, one per queue.
        self._claim_from: list[str] | None = None
        self._lanes: list[Runner] = []
        for number, (name, slots) in enumerate((self.queues or {}).items()):
            lane = Runner(
                worker,
                concurrency=slots,
                poll_s=poll_s,
                grace_s=grace_s,
                prefetch=prefetch,
                log=None if log is None else _prefixed(log, f"queue {name!r}: "),
                schedules=schedules if number == 0 else (),  # the first lane enqueues the ticks
            )
            lane._claim_from = [name]
            self._lanes.append(lane)

    def stop(self) -> None:
        """Ask the runner to shut down: stop claiming, then finish or give back running jobs.

        Safe to call from a signal handler. A second call ends the grace period at once.
        """
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        for lane in self._lanes:
            lane.stop()

    @contextmanager
    def signals_stop(self) -> Iterator[None]:
        """Within the block, SIGTERM and SIGINT call :meth:`stop` instead of killing the process.

        The previous handlers are put back on leaving. Needs a running event loop on the
        main thread (signal handlers are a Unix feature of asyncio).
        """
        loop = asyncio.get_running_loop()
        caught = (signal.SIGTERM, signal.SIGINT)
        previous = {signum: signal.getsignal(signum) for signum in caught}
        for signum in caught:
            loop.add_signal_handler(signum, self.stop)
        try:
            yield
        finally:
            for signum in caught:
                loop.remove_signal_handler(signum)  # sets the default handler, not the previous one
                handler = previous[signum]
                if handler is not None:  # None: installed outside Python, cannot be put back
                    signal.signal(signum, handler)

    async def run(self, *, until_idle: bool = False) -> list[JobEvent]:
        """Run jobs until :meth:`stop` is called (or, with ``until_idle``, the queue runs dry).

        Args:
            until_idle: stop on its own once nothing is running and no job is due (burst
                mode, like RQ's ``--burst``): for batch runs, tests and benchmarks.

        Returns:
            The events of this run, in the order jobs were settled (with ``queues``: by
            time, each queue's in its order); jobs given back at shutdown have the
            outcome ``"released"``.
        """
        if self._lanes:
            return await self._run_lanes(until_idle=until_idle)
        running: dict[asyncio.Task[Attempt], Lease] = {}
        waiting: deque[Lease] = deque()  # prefetched, not started yet
        events: list[JobEvent] = []
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                try:
                    idle = await self._step(running, waiting, events, stopping, until_idle=until_idle)
                except QueueUnavailableError as lost:
                    # The queue's server is away (restart, dropped connection): wait, then
                    # try again; the jobs running now carry on.
                    if self._log is not None:
                        self._log(f"queue unavailable, trying again in {UNAVAILABLE_PAUSE_S:g} s: {lost}")
                    pause = asyncio.ensure_future(self.clock.sleep(UNAVAILABLE_PAUSE_S))
                    await asyncio.wait({pause, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    pause.cancel()
                    continue
                if idle:
                    break
            events += await self._shut_down(running, waiting)
        except BaseException as exc:
            # A failing queue, or this task cancelled: stop the jobs, leave their leases to
            # run out (the queue may be unusable, so nothing is given back), and re-raise.
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)
            if isinstance(exc, asyncio.CancelledError):  # the queue still works: ack the jobs done
                attempts, self._finished = self._finished, []
                self.worker.settle(attempts)  # here, not in a thread: this task is being cancelled
            raise
        finally:
            stopping.cancel()
        return events

    async def _step(
        self,
        running: dict[asyncio.Task[Attempt], Lease],
        waiting: deque[Lease],
        events: list[JobEvent],
        stopping: asyncio.Task[bool],
        *,
        until_idle: bool,
    ) -> bool:
        """Enqueue due ticks, claim for free slots, start jobs, wait for the next thing; True once idle."""
        if self.clock.now() >= self.scheduler.due_at:
            await self.worker.call(self.scheduler.enqueue_due, self.worker.queue)
        events.extend(await self._keep_alive(waiting))
        wanted = self.concurrency - len(running) + self.prefetch - len(waiting)
        if len(waiting) >= self.concurrency:
            wanted = 0  # enough claimed ahead: claim later, in a bigger batch
        if (
            wanted > 0
            or not running
            or len(self._finished) >= self.concurrency + self.prefetch
            or self.clock.now() >= self._settle_by
        ):
            settled, claimed = await self._settle_finished(claim=max(wanted, 0))  # acks and claim: one commit
            events.extend(settled)
        else:
            claimed = []
        waiting.extend(claimed)
        if claimed:
            self._refresh_by = min(self._refresh_by, min(map(self._refresh_due, claimed)))
        events.extend((await self._start(waiting, running))[0])
        if until_idle and not running:
            return True
        # Wake when a slot frees; with no more due jobs also after poll_s (or when the
        # queue says work arrived), and in time to extend the leases of prefetched jobs.
        short = len(claimed) < wanted
        nap_s = [self.poll_s] if short else []
        if self.scheduler.schedules:
            nap_s.append(self.scheduler.due_at - self.clock.now())
        if waiting:
            nap_s.append(self._refresh_by - self.clock.now())
        if self._finished:
            nap_s.append(self._settle_by - self.clock.now())
        nap = self.clock.sleep(max(0.0, min(nap_s))) if nap_s else None
        watch: set[asyncio.Task[bool]] = {stopping}
        if short and self._wait_for_work is not None:
            watch.add(asyncio.ensure_future(self._wait_for_work(self.poll_s)))
        try:
            events.extend(await self._settle_next(running, waiting, watch, nap))
        finally:
            listening = watch - {stopping}
            for task in listening:
                task.cancel()
            if listening:  # until each has ended: a LISTEN cancelled while it runs asks the
                await asyncio.wait(listening)  # server to stop it, which a second cancel cuts short
        for task in listening:
            if task.done() and not task.cancelled() and task.exception() is not None:
                task.result()  # a lost listening connection: raise QueueUnavailableError
        return False

    async def _run_lanes(self, *, until_idle: bool) -> list[JobEvent]:
        """Run every queue's lane at once until all have stopped; if one fails, stop the others and raise."""
        lanes = [asyncio.create_task(lane.run(until_idle=until_idle)) for lane in self._lanes]
        try:
            settled = await asyncio.gather(*lanes)
        finally:
            for lane in lanes:
                lane.cancel()  # only those still running: after a failure of another
            await asyncio.wait(lanes)
        return sorted((event for events in settled for event in events), key=lambda event: event.at)

    def _refresh_due(self, lease: Lease) -> float:
        """When a waiting prefetched ``lease`` should be extended (seconds on the clock)."""
        return lease.expires_at - self._lease_s + self._refresh_s

    async def _keep_alive(self, waiting: deque[Lease]) -> list[JobEvent]:
        """Extend the leases of prefetched jobs that are due for it; drop any found lost or cancelled.

        A job found cancelled (``queue.cancel``) while it waited is never started: it is
        finished as cancelled at once (a ``"cancelled"`` event).
        """
        now = self.clock.now()
        if now < self._refresh_by:  # none is due yet: no need to look at each
            return []
        events = []
        for _ in range(len(waiting)):
            lease = waiting.popleft()
            if now >= self._refresh_due(lease):
                try:
                    lease = await self.worker.call(self.worker.keep, lease)
                except StaleLeaseError as stale:
                    events.append(self.worker.record(lease, "stale", stale))
                    continue
                if lease.cancelled:
                    events += await self.worker.call(self.worker.settle, [self.worker.unstarted(lease)])
                    continue
            waiting.append(lease)
        self._refresh_by = min(map(self._refresh_due, waiting), default=float("inf"))
        return events

    async def _whole_leases(
        self, waiting: deque[Lease], running: dict[asyncio.Task[Attempt], Lease]
    ) -> list[JobEvent]:
        """Extend the leases of the prefetched jobs about to start that have waited; drop lost ones.

        A job starts only with the lease its attempt needs left
        (:meth:`~jobqueue.worker.Worker.lease_needed_s`: its time limit, or the first
        heartbeat, plus room for the ack). A prefetched lease is extended while it waits only
        every third of the visibility timeout (or every ``heartbeat_s``), so a job that waited
        could start on two-thirds of its lease (or less), run within its time limit, and be
        claimed by another worker meanwhile. A lease just claimed has enough left, so a
        runner whose prefetched jobs wait little makes no extra call.
        """
        now = self.clock.now()
        events: list[JobEvent] = []
        ready: list[Lease] = []
        while waiting and len(running) + len(ready) < self.concurrency:
            lease = waiting.popleft()
            if lease.expires_at - now < self.worker.lease_needed_s(lease.job):
                try:
                    lease = await self.worker.call(self.worker.keep, lease)
                except StaleLeaseError as stale:
                    events.append(self.worker.record(lease, "stale", stale))
                    continue
            ready.append(lease)
        waiting.extendleft(reversed(ready))
        return events

    async def _start(
        self, waiting: deque[Lease], running: dict[asyncio.Task[Attempt], Lease]
    ) -> tuple[list[JobEvent], int]:
        """Start claimed jobs, oldest claim first, while there are free slots.

        Returns the events of leases found lost on the way (see :meth:`_whole_leases`) and
        how many jobs started.
        """
        lost = await self._whole_leases(waiting, running)
        started = 0
        while waiting and len(running) < self.concurrency:
            lease = waiting.popleft()
            running[asyncio.create_task(self.worker.execute(lease))] = lease
            started += 1
        return lost, started

    async def _settle_next(
        self,
        running: dict[asyncio.Task[Attempt], Lease],
        waiting: deque[Lease],
        watch: set[asyncio.Task[bool]],
        nap: Coroutine[object, object, None] | None,
    ) -> list[JobEvent]:
        """Wait for a running job to end, one of ``watch``, or ``nap``; set the jobs done by then aside.

        They wait in ``_finished`` for :meth:`_settle_finished`, which acks them in a group.
        Prefetched jobs take the freed slots at once, so they run during the settling.
        """
        napping = None if nap is None else asyncio.ensure_future(nap)
        waits: set[asyncio.Future[Any]] = {*running, *watch}
        if napping is not None:
            waits.add(napping)
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if napping is not None:
            napping.cancel()
        finished = [task for task in running if task.done()]
        now = self.clock.now()
        for task in finished:
            attempt = task.result()
            del running[task]
            self._finished.append(attempt)
            self._settle_by = min(self._settle_by, now + ACK_GROUP_S, attempt.lease.expires_at - ACK_GROUP_S)
        events = await self._keep_alive(waiting)
        lost, started = await self._start(waiting, running)
        events += lost
        if started:
            await asyncio.sleep(0)  # let the new jobs reach their first await before the acks
        return events

    async def _settle_finished(self, claim: int = 0) -> tuple[list[JobEvent], list[Lease]]:
        """Ack (in one batch) or fail the finished attempts not settled yet, and claim up to ``claim`` jobs.

        The acks and the claim go to the queue together (one transaction on a DurableQueue).
        Returns the events of the settled attempts and the claimed leases.
        """
        attempts, self._finished, self._settle_by = self._finished, [], float("inf")
        return await self.worker.call(self.worker.settle_and_claim, attempts, claim, queues=self._claim_from)

    async def _shut_down(
        self, running: dict[asyncio.Task[Attempt], Lease], waiting: deque[Lease]
    ) -> list[JobEvent]:
        """Give back prefetched jobs; let running ones finish within the grace period; give back the rest."""
        if self._log is not None and self._stopping.is_set():
            self._log(f"stopping: no new claims; {len(running)} running job(s) get up to {self.grace_s:g} s")
        events = (await self._settle_finished())[0]
        events += [await self.worker.call(self.worker.give_back, lease) for lease in waiting]
        waiting.clear()
        grace = asyncio.create_task(self._grace_over())
        hurry = asyncio.create_task(self._hurry.wait())
        try:
            while running and not grace.done() and not hurry.done():
                events += await self._settle_next(running, waiting, {grace, hurry}, None)
                events += (await self._settle_finished())[0]
        finally:
            grace.cancel()
            hurry.cancel()
        if not running:
            return events
        if self._log is not None:
            self._log(f"grace period over: giving back {len(running)} unfinished job(s)")
        for task in running:
            task.cancel()
        await asyncio.wait(running)
        for task, lease in running.items():
            if not task.cancelled() and task.exception() is None:
                events += await self.worker.call(self.worker.settle, [task.result()])  # finished meanwhile
            else:
                events.append(await self.worker.call(self.worker.give_back, lease))
        return events

    async def _grace_over(self) -> bool:
        await self.clock.sleep(self.grace_s)
        return True


def _check_queue_slots(queues: Mapping[str, int], concurrency: int | None) -> dict[str, int]:
    """``queues`` as a dict, if it maps at least one queue name to a count of slots >= 1.

    Raises:
        InvalidSettingError: naming the bad value, or if ``concurrency`` is given too.
    """
    if concurrency is not None:
        raise InvalidSettingError(
            f"give a runner concurrency or queues, not both: concurrency={concurrency!r}, queues={queues!r}"
        )
    if not isinstance(queues, Mapping) or not queues:
        raise InvalidSettingError(
            f"queues must map queue names to the jobs each runs at once, e.g. {{'emails': 10}},"
            f" got {queues!r}"
        )
    for name, slots in queues.items():
        check_queue_name(name)
        check_count(f"queues[{name!r}]", slots)
    return dict(queues)


def _prefixed(log: Callable[[str], object], prefix: str) -> Callable[[str], object]:
    """``log`` with ``prefix`` before every line (a lane's lines name its queue)."""
    return lambda line: log(prefix + line)
