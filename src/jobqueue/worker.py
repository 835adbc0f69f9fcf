"""A worker: claims one job at a time, runs its async handler, then acks or fails it.

A handler raises :class:`~jobqueue.errors.PermanentJobError` when retrying cannot help;
any other exception is treated as transient and retried after the job's backoff delay,
until its attempts run out. A job whose stored payload does not validate fails
permanently: the worker itself never crashes on a bad job. A worker claims only the job
types it has handlers for (:attr:`Worker.job_types`); a job of another type that reaches
it anyway (a claim without that filter) is given back unrun for
:data:`~jobqueue.backends.rules.UNKNOWN_TYPE_DELAY_S`, its attempt not counted (a
``"deferred"`` event), not dead-lettered: in a rolling deploy it is the new version's.

Every attempt runs within a time limit: the job type's ``timeout_s``, or the worker's
(by default :data:`DEFAULT_TIMEOUT_S` with a heartbeat, else :data:`LEASE_SHARE` of the
visibility timeout). An attempt past it is cancelled and fails with
:class:`~jobqueue.errors.JobTimeoutError`, a transient error, so a handler that never
returns cannot hold its job forever (Celery's ``time_limit``; SQS caps a message's
visibility at 12 hours for the same reason). A handler that raises
:class:`asyncio.CancelledError` on its own fails its attempt with
:class:`~jobqueue.errors.HandlerCancelledError` instead of stopping the worker.

A worker given a heartbeat interval extends the running job's lease every
``heartbeat_s`` seconds while the handler runs, so a job slower than the visibility
timeout is not handed to a second worker. Without a heartbeat, the time limit is what
keeps an attempt inside its lease: a worker whose time limit (its own or a job type's)
is not below the visibility timeout warns with a :class:`LeaseRuleWarning`. A worker
that finds its lease lost (the job was claimed again after the lease ran out) neither
acks nor fails it: it records a ``"stale"`` event instead.

A handler that raises :class:`~jobqueue.errors.CircuitOpenError` (its dependency's
:class:`~jobqueue.breaker.CircuitBreaker` is open) never called the dependency: the
worker gives the job back to wait until the breaker's ``retry_at_s`` without spending an
attempt (a ``"deferred"`` event), instead of failing it. A handler that raises
:class:`~jobqueue.errors.RetryAfterError` fails the attempt as usual, but its retry is
due when the dependency asked, not after the backoff. A handler that raises
:class:`~jobqueue.errors.Snooze` gives its job back for the snooze's delay without
spending an attempt (a ``"snoozed"`` event), up to
:data:`~jobqueue.backends.rules.MAX_SNOOZES` times; the snooze after that fails the attempt.

A job cancelled while it runs (``queue.cancel``) is stopped cooperatively: the heartbeat
that finds ``Lease.cancelled`` cancels the handler's task, so the handler sees
:class:`asyncio.CancelledError` at its next ``await`` (its ``finally`` blocks run; it may
catch it to clean up), and the attempt ends with :class:`~jobqueue.errors.JobCancelledError`:
a ``"cancelled"`` event, the job finished as cancelled, never retried. Without a heartbeat
the handler runs to its end, and its ack or fail finishes the job as cancelled all the same.

Introduced in lesson 04; the heartbeat, the time limit and :meth:`Worker.run_until` in
lesson 06; deferral on an open circuit breaker in lesson 14.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from jobqueue.backends import rules
from jobqueue.backends.contract import AcksAndClaims, CallsBlock, Queue, QueueNames, ack_then_claim
from jobqueue.clock import ServerClock, SleepingClock, SystemClock
from jobqueue.errors import (
    HandlerCancelledError,
    InvalidSettingError,
    JobCancelledError,
    JobTimeoutError,
    QueueUnavailableError,
    Snooze,
    StaleLeaseError,
    UnknownJobTypeError,
    describe_error,
)
from jobqueue.job import Job, JobType, Lease, check_positive_seconds

P = TypeVar("P")
R = TypeVar("R")

Handler = Callable[[P], Awaitable[None]]
"""An async function that does one job's work, given its payload."""

DEFAULT_TIMEOUT_S = 300.0
"""Time limit of one attempt, in seconds, for job types without their own ``timeout_s``,
on a worker with a heartbeat (without one, see :data:`LEASE_SHARE`).

Five minutes, as arq's default ``job_timeout`` (RQ's is 180 s). A job type that runs
longer by design sets its own :attr:`~jobqueue.job.JobType.timeout_s`.
"""

LEASE_SHARE = 0.8
"""Without a heartbeat, the worker's default time limit is this share of the queue's
visibility timeout (24 s of the default 30 s).

Without a heartbeat nothing extends the lease, so an attempt must end (be cancelled and
fail) while its lease still holds, or a second worker claims the job and both run it.
The fifth of the lease left over is room for the fail to reach the queue. AWS asks for
more room still when Lambda consumes SQS: a visibility timeout of at least six times the
function's timeout, so that Lambda has time to retry a batch when the function is throttled.
"""


START_ROOM_SHARE = 0.1
"""Room an attempt keeps at its end for its ack or fail to reach the queue, as a share of
the visibility timeout (3 s of the default 30 s): see :meth:`Worker.lease_needed_s`."""


class LeaseRuleWarning(UserWarning):
    """A worker without a heartbeat has a time limit that is not below the visibility timeout.

    Such an attempt may outlive its lease: the job is claimed again and runs twice at
    once (lesson 06). Set ``heartbeat_s``, or a time limit below the visibility timeout.
    """


Outcome = Literal["done", "retry", "dead", "stale", "released", "deferred", "snoozed", "cancelled"]
"""What became of an attempt; ``"stale"``: the lease was lost, so it was neither acked nor
failed; ``"released"``: given back unfinished at shutdown (:meth:`JobQueue.release`);
``"deferred"``: given back to wait (an open circuit breaker, or a job type with no handler
here), the attempt not counted; ``"snoozed"``: the handler raised
:class:`~jobqueue.errors.Snooze`, given back for its delay, the attempt not counted;
``"cancelled"``: the job was cancelled while it ran (``queue.cancel``), finished, not retried."""


@dataclass(frozen=True, kw_only=True)
class JobEvent:
    """What happened to one attempt of one job; ``str()`` gives a log line.

    Attributes:
        at: when the attempt ended, in seconds on the queue's clock.
        job_id, job_type, attempt: which job and which attempt (1-based).
        outcome: ``"done"`` (acked), ``"retry"`` (waiting to run again), ``"dead"``,
            ``"stale"`` (the worker lost its lease while the handler ran, so the queue
            would not take its ack or fail; the job belongs to another attempt now),
            ``"released"`` (given back unfinished when a :class:`~jobqueue.runner.Runner`
            shut down; the attempt does not count), ``"deferred"`` (the handler
            raised :class:`~jobqueue.errors.CircuitOpenError`: given back to wait for the
            breaker's trial time; or no handler here knows the job's type: given back for
            :data:`~jobqueue.backends.rules.UNKNOWN_TYPE_DELAY_S`; the attempt does not count),
            ``"snoozed"`` (see :data:`Outcome`), or ``"cancelled"`` (the job was
            cancelled before or while it ran, and its attempt ended with
            :class:`~jobqueue.errors.JobCancelledError`: finished, no retry).
        error: the failure as ``"ErrorClass: message"`` (for ``"stale"``, the
            :class:`~jobqueue.errors.StaleLeaseError`; for ``"deferred"``, the
            :class:`~jobqueue.errors.CircuitOpenError` or
            :class:`~jobqueue.errors.UnknownJobTypeError`), or ``None`` when done.
        retry_at: for a retry or a deferral, when the job becomes claimable again
            (seconds).

    Introduced in lesson 04; ``"stale"`` in lesson 06; ``"released"`` in lesson 11;
    ``"deferred"`` in lesson 14; ``"cancelled"`` with cancelling (issue 24).
    """

    at: float
    job_id: str
    job_type: str
    attempt: int
    outcome: Outcome
    error: str | None = None
    retry_at: float | None = None

    def __str__(self) -> str:
        return self.describe()

    def describe(self, when: Callable[[float], str] = lambda at: f"t={at:g}s") -> str:
        """The log line, with times written by ``when`` (default ``t=7s``; the CLI uses ISO 8601)."""
        head = f"{when(self.at)} {self.job_id} attempt {self.attempt}:"
        if self.outcome == "done":
            return f"{head} done"
        if self.outcome == "retry":
            assert self.retry_at is not None  # a retry always has its time
            return f"{head} failed, retry at {when(self.retry_at)} ({self.error})"
        if self.outcome == "stale":
            return f"{head} lease lost, not acked ({self.error})"
        if self.outcome == "released":
            return f"{head} given back unfinished at shutdown"
        if self.outcome == "cancelled":
            return f"{head} cancelled ({self.error})"
        if self.outcome == "snoozed":
            assert self.retry_at is not None  # a snooze always has its time
            return f"{head} snoozed to {when(self.retry_at)}, attempt not counted"
        if self.outcome == "deferred":
            assert self.retry_at is not None  # a deferral always has its time
            return f"{head} deferred to {when(self.retry_at)}, attempt not counted ({self.error})"
        return f"{head} dead ({self.error})"


@dataclass(frozen=True, kw_only=True)
class Heartbeat:
    """One beat of a worker's heartbeat; ``str()`` gives a log line.

    Attributes:
        at: when the beat happened, in seconds on the queue's clock.
        job_id, attempt: the job whose lease the beat extended.
        leased_until: the lease's new end (seconds), or ``None`` if the beat was refused.
        error: ``None``, or the :class:`~jobqueue.errors.StaleLeaseError` that refused
            the beat (``"ErrorClass: message"``); the heartbeat stops after it.

    Introduced in lesson 06.
    """

    at: float
    job_id: str
    attempt: int
    leased_until: float | None
    error: str | None = None

    def __str__(self) -> str:
        head = f"t={self.at:g}s {self.job_id} attempt {self.attempt}:"
        if self.error is None:
            return f"{head} heartbeat, lease extended to t={self.leased_until:g}s"
        return f"{head} heartbeat refused, lease lost ({self.error})"


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """A handler run that has ended, before its ack or fail (see :meth:`Worker.settle`).

    Attributes:
        lease: the lease the job was claimed with.
        error: what the handler raised, or ``None`` on success.
        permanent: whether ``error`` rules out a retry (a
            :class:`~jobqueue.errors.PermanentJobError`, an invalid payload or an unknown
            job type).
        lost: the :class:`~jobqueue.errors.StaleLeaseError` that refused a heartbeat, if
            the lease was lost while the handler ran.

    Introduced in lesson 11.
    """

    lease: Lease
    error: Exception | None
    permanent: bool
    lost: StaleLeaseError | None


class Worker:
    """Runs jobs from one queue, one at a time, with a handler per job type.

    Args:
        queue: where jobs are claimed, acked and failed.
        on_event: called with each :class:`JobEvent` as it happens (``print`` gives a
            log). Every event is also kept in :attr:`events`.
        heartbeat_s: if given, while a handler runs the worker extends the job's lease
            to ``now + visibility timeout`` every ``heartbeat_s`` seconds
            (:meth:`JobQueue.extend_lease`, like SQS ``ChangeMessageVisibility``), so a
            job slower than the visibility timeout is not handed out again. Must be
            > 0 and below the queue's visibility timeout; a third of it or less
            survives a late beat. The queue's clock must be a
            :class:`~jobqueue.clock.SleepingClock`.
        on_heartbeat: called with each :class:`Heartbeat`; all are kept in
            :attr:`heartbeats`.
        timeout_s: time limit of one attempt, in seconds (> 0), for job types without
            their own :attr:`~jobqueue.job.JobType.timeout_s`; ``None`` for none.
            ``"auto"`` (the default): :data:`DEFAULT_TIMEOUT_S` with a heartbeat, else
            :data:`LEASE_SHARE` of the visibility timeout. Measured on the queue's clock (on the event loop's
            if that clock cannot sleep), so it holds for every kind of queue. An attempt
            past it is cancelled and fails with
            :class:`~jobqueue.errors.JobTimeoutError` (transient). A handler that
            swallows the cancellation cannot be stopped this way: asyncio has no
            forced kill.

    Warns:
        LeaseRuleWarning: naming the three settings, if there is no heartbeat and the
            time limit is ``None`` or not below the queue's visibility timeout (see
            :meth:`register` for a job type's own limit).

    Raises:
        InvalidSettingError: if ``heartbeat_s`` is not a number of seconds > 0 and below
            the visibility timeout, the queue's clock cannot sleep while a heartbeat is
            set, or ``timeout_s`` is not a finite number of seconds > 0.

    Introduced in lesson 04; the heartbeat and the time limit in lesson 06.
    """

    def __init__(
        self,
        queue: Queue,
        *,
        on_event: Callable[[JobEvent], object] | None = None,
        heartbeat_s: float | None = None,
        on_heartbeat: Callable[[Heartbeat], object] | None = None,
        timeout_s: float | Literal["auto"] | None = "auto",
    ) -> None:
        self.queue = queue
        self.heartbeat_s = None if heartbeat_s is None else _check_heartbeat(heartbeat_s, queue)
        self.timeout_s: float | None
        if timeout_s == "auto":
            lease_s = queue.visibility_timeout_s
            self.timeout_s = DEFAULT_TIMEOUT_S if self.heartbeat_s is not None else LEASE_SHARE * lease_s
        else:
            self.timeout_s = None if timeout_s is None else check_positive_seconds("timeout_s", timeout_s)
            self._check_lease_rule(self.timeout_s, "timeout_s")
        self.events: list[JobEvent] = []
        self.heartbeats: list[Heartbeat] = []
        self._on_event = on_event
        self._on_heartbeat = on_heartbeat
        self._handlers: dict[str, tuple[JobType[Any], Handler[Any]]] = {}
        self._job_types: frozenset[str] = frozenset()
        # What a time limit sleeps on: the queue's clock if it can sleep, else the loop's.
        # Decided once: a Protocol isinstance check costs ~8 us, per job on a busy runner.
        clock = queue.clock
        self._sleep: Callable[[float], Awaitable[None]] = (
            clock.sleep if isinstance(clock, SleepingClock) else asyncio.sleep
        )
        # Whether that sleep is the event loop's own (real time): then a heartbeat or a time
        # limit waits as a timer of the loop, and becomes a task only if it fires (_later).
        self._loop_timed = _sleeps_in_real_time(clock)
        # Queue calls in threads when they wait on a server (decided once, too).
        self._in_threads = isinstance(queue, CallsBlock) and queue.calls_block()
        # Acks and the next claim: in one transaction if the queue can (decided once, too).
        self._ack_and_claim: Callable[[Sequence[Lease], int, QueueNames], tuple[list[Lease], list[Lease]]] = (
            (
                lambda leases, limit, queues: queue.ack_and_claim(
                    leases, limit, types=self.job_types, queues=queues
                )
            )
            if isinstance(queue, AcksAndClaims)
            else lambda leases, limit, queues: ack_then_claim(
                queue, leases, limit, types=self.job_types, queues=queues
            )
        )

    def register(self, job_type: JobType[P], handler: Handler[P]) -> None:
        """Run ``handler`` for jobs of ``job_type``; mypy checks the payload classes match.

        Warns:
            LeaseRuleWarning: if the worker has no heartbeat and ``job_type`` has its own
                ``timeout_s``, not below the queue's visibility timeout.

        Raises:
            InvalidSettingError: if ``job_type`` already has a handler.
        """
        if job_type.name in self._handlers:
            raise InvalidSettingError(f"job type {job_type.name!r} already has a handler")
        if job_type.timeout_s is not None:
            self._check_lease_rule(job_type.timeout_s, f"job type {job_type.name!r}: timeout_s")
        self._handlers[job_type.name] = (job_type, handler)
        self._job_types = frozenset(self._handlers)

    def _check_lease_rule(self, limit_s: float | None, name: str) -> None:
        """Warn if, without a heartbeat, the limit ``limit_s`` (called ``name``) may outlive the lease."""
        lease_s = self.queue.visibility_timeout_s
        if self.heartbeat_s is not None or (limit_s is not None and limit_s < lease_s):
            return
        limit = "None (no limit)" if limit_s is None else f"{limit_s:g} s"
        warnings.warn(
            LeaseRuleWarning(
                f"{name}={limit}, heartbeat_s=None and a visibility timeout of {lease_s:g} s: an attempt"
                " may outlive its lease and run twice at once. Without a heartbeat, keep the"
                f" time limit below the visibility timeout (the default is {LEASE_SHARE:g} of it),"
                " or set heartbeat_s"
            ),
            stacklevel=3,
        )

    @property
    def job_types(self) -> frozenset[str]:
        """The names of the job types with a handler: the only types this worker claims.

        So a worker never claims a job it cannot run: during a rolling deploy the old
        version's workers leave the new version's job types to the new workers (as
        graphile-worker's workers claim only their task identifiers). A worker with no
        handler claims nothing. Introduced with claim filters (issue 21).
        """
        return self._job_types

    def lease_needed_s(self, job: Job) -> float:
        """Seconds of lease an attempt of ``job`` needs left when it starts, at most a whole lease.

        Without a heartbeat, nothing extends the lease while the handler runs, so the lease
        must outlast the job's time limit; with one, it must last until the first beat,
        ``heartbeat_s`` after the start. Either way plus :data:`START_ROOM_SHARE` of the
        visibility timeout for the ack or fail; a whole lease when no time limit bounds the
        attempt, and nothing for a job of a type without a handler here (it is given back
        at once). A :class:`~jobqueue.runner.Runner` extends a prefetched job's lease before
        starting it when less than this is left: a job claimed ahead that waited could
        otherwise start on two-thirds of its lease, run within its time limit, and be
        claimed by another worker meanwhile.
        """
        lease_s = self.queue.visibility_timeout_s
        try:
            job_type, _ = self.handler_for(job.type)
        except UnknownJobTypeError:
            return 0.0
        if self.heartbeat_s is not None:
            bound_s: float | None = self.heartbeat_s
        else:
            bound_s = job_type.timeout_s if job_type.timeout_s is not None else self.timeout_s
        if bound_s is None:
            return lease_s
        return min(lease_s, bound_s + START_ROOM_SHARE * lease_s)

    def handler_for(self, type_name: str) -> tuple[JobType[Any], Handler[Any]]:
        """The job type and handler registered under ``type_name``.

        Raises:
            UnknownJobTypeError: naming the type, if no handler was registered for it.
        """
        try:
            return self._handlers[type_name]
        except KeyError:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise UnknownJobTypeError(
                f"no handler registered for job type {type_name!r} (registered: {known})"
            ) from None

    async def call(self, method: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run ``method(*args, **kwargs)``, a call that reaches the queue, without blocking the event loop.

        In a thread (:func:`asyncio.to_thread`) when the queue's calls wait on a server
        (:class:`~jobqueue.backends.contract.CallsBlock`), so handlers and heartbeats go on
        while it waits; else right here. A :class:`~jobqueue.runner.Runner` makes its
        settles, claims, extensions and give-backs through it. Introduced in lesson 12.
        """
        if self._in_threads:
            return await asyncio.to_thread(method, *args, **kwargs)
        return method(*args, **kwargs)

    async def run_one(self) -> JobEvent | None:
        """Claim one due job and run it; return what happened, or ``None`` if none was due.

        With a heartbeat, the lease is extended while the handler runs; the heartbeat
        stops before the ack or fail. If the lease was lost meanwhile (the heartbeat was
        refused, or the ack or fail raised :class:`~jobqueue.errors.StaleLeaseError`),
        the event's outcome is ``"stale"`` and the queue is left as the new holder has it.
        """
        lease = await self.call(self.queue.claim, types=self.job_types)
        if lease is None:
            return None
        attempt = await self.execute(lease)
        return (await self.call(self.settle, [attempt]))[0]

    async def execute(self, lease: Lease) -> Attempt:
        """Run the handler of a claimed job (with the heartbeat, if set), but neither ack nor fail.

        Pass the result to :meth:`settle`. Cancelling this coroutine cancels the handler
        and the heartbeat; the lease is then still held (give it back with
        :meth:`~jobqueue.backends.memory.JobQueue.release`). Introduced in lesson 11.
        """
        lost: list[StaleLeaseError] = []
        task = asyncio.current_task()
        assert task is not None  # a coroutine awaited by the event loop runs in a task
        stop = _Stop(task)
        beats: list[asyncio.Task[None]] = []  # the heartbeat's task, once it has one
        stop_beats = None
        if self.heartbeat_s is not None:
            if self._loop_timed:  # a timer until the first beat: most jobs end before it
                stop_beats = self._later(
                    self.heartbeat_s, lambda: beats.append(asyncio.create_task(self._beat(lease, lost, stop)))
                )
            else:
                beats.append(asyncio.create_task(self._beat(lease, lost, stop, sleep_first=True)))
        try:
            error, permanent = await self._run_handler(lease.job, stop)
        finally:
            if stop_beats is not None:
                stop_beats()
            for beat in beats:
                beat.cancel()
        if beats:
            await asyncio.wait(beats)
            if not beats[0].cancelled():
                beats[0].result()  # re-raise a bug in the heartbeat, never swallow it
        return Attempt(lease=lease, error=error, permanent=permanent, lost=lost[0] if lost else None)

    def settle(self, attempts: Sequence[Attempt]) -> list[JobEvent]:
        """Ack the attempts that succeeded (in one batch) and fail the others; return the events.

        Events are recorded (and passed to ``on_event``) in the order of ``attempts``.
        Introduced in lesson 11; :meth:`run_one` settles one attempt at a time.
        """
        return self.settle_and_claim(attempts, 0)[0]

    def settle_and_claim(
        self, attempts: Sequence[Attempt], limit: int, *, queues: QueueNames = None
    ) -> tuple[list[JobEvent], list[Lease]]:
        """:meth:`settle` the ``attempts``, claiming up to ``limit`` jobs along with the batch ack.

        The claim takes only the job types this worker has handlers for, and with ``queues``
        only jobs of those named queues (a :class:`~jobqueue.runner.Runner` claims for each
        of its queues apart).

        The batch ack and the claim are one transaction on a queue that can
        (:class:`~jobqueue.backends.contract.AcksAndClaims`), else
        :func:`~jobqueue.backends.contract.ack_then_claim`; failed attempts are recorded
        after it.
        A :class:`~jobqueue.runner.Runner` calls this before it claims.

        Returns:
            ``(events, leases)``: the events, as :meth:`settle` returns them, and the
            claimed leases.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 0, or ``queues`` is not a
                collection of queue names.
        """
        succeeded = [a.lease for a in attempts if a.error is None and a.lost is None]
        batch = len(succeeded) > 1
        stale, claimed = self._ack_and_claim(succeeded if batch else [], limit, queues)
        refused = {lease.token for lease in stale}
        events = []
        for attempt in attempts:
            acked = batch and attempt.lease.token not in refused
            outcome, error, retry_at = self._finish(attempt, acked=acked)
            events.append(self.record(attempt.lease, outcome, error, retry_at=retry_at))
        return events, claimed

    def record(
        self,
        lease: Lease,
        outcome: Outcome,
        error: BaseException | None = None,
        *,
        retry_at: float | None = None,
    ) -> JobEvent:
        """Record (and report to ``on_event``) what became of the attempt held by ``lease``.

        ``retry_at`` is when a retried or deferred job is due again (seconds), as the
        queue's ``fail`` or ``release`` returned it.
        """
        event = JobEvent(
            at=self.queue.clock.now(),
            job_id=lease.job.id,
            job_type=lease.job.type,
            attempt=lease.job.attempts,
            outcome=outcome,
            error=None if error is None else describe_error(error),
            retry_at=retry_at,
        )
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def unstarted(self, lease: Lease) -> Attempt:
        """The attempt of a claimed job found cancelled before its handler started, for :meth:`settle`.

        It ends with :class:`~jobqueue.errors.JobCancelledError`, so that settling it
        finishes the job as cancelled. Introduced with cancelling (issue 24), for a
        :class:`~jobqueue.runner.Runner` whose prefetched job was cancelled while it waited.
        """
        job = lease.job
        error = JobCancelledError(
            f"job {job.id!r} attempt {job.attempts} was cancelled (queue.cancel) before its handler started"
        )
        return Attempt(lease=lease, error=error, permanent=True, lost=None)

    def keep(self, lease: Lease) -> Lease:
        """Extend the lease of a claimed job not started yet, for the visibility timeout from now.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease.
        """
        return self.queue.extend_lease(lease)

    def give_back(self, lease: Lease) -> JobEvent:
        """Release a claimed job unrun (its attempt not counted) and record it as ``"released"``.

        A lease found lost on the way is recorded as ``"stale"`` instead. Introduced in
        lesson 11, for a :class:`~jobqueue.runner.Runner` that shuts down.
        """
        try:
            self.queue.release(lease)
        except StaleLeaseError as stale:
            return self.record(lease, "stale", stale)
        return self.record(lease, "released")

    def sleeping_clock(self, needed_by: str) -> SleepingClock:
        """The queue's clock, if it can sleep.

        Raises:
            InvalidSettingError: saying that ``needed_by`` (``"a runner"``, say) needs a
                clock that can sleep, and naming the clock's class, if it cannot.
        """
        return _sleeping_clock(self.queue, needed_by)

    async def drain(self) -> list[JobEvent]:
        """Run jobs until none is due at the clock's current time (burst mode)."""
        events = []
        while (event := await self.run_one()) is not None:
            events.append(event)
        return events

    async def run_until(self, until_s: float, *, poll_s: float = 1.0) -> list[JobEvent]:
        """Work like a long-running worker until the clock reads ``until_s``.

        Runs due jobs one after another; when none is due, sleeps ``poll_s`` seconds on
        the queue's clock and looks again. A job still running at ``until_s`` is finished
        first. With a :class:`~jobqueue.clock.ManualClock`, run this as a task and move
        time with :meth:`~jobqueue.clock.ManualClock.run_for`.

        Args:
            until_s: when to stop claiming, in seconds on the queue's clock.
            poll_s: how long to wait between looks at an empty queue, in seconds (> 0).

        Returns:
            The events of this run, in order.

        Raises:
            InvalidSettingError: if ``poll_s`` is not a finite number > 0, or the queue's
                clock cannot sleep.

        Introduced in lesson 06.
        """
        clock = self.sleeping_clock("run_until")
        check_positive_seconds("poll_s", poll_s)
        events: list[JobEvent] = []
        while (now := clock.now()) < until_s:
            event = await self.run_one()
            if event is None:
                await clock.sleep(min(poll_s, until_s - now))
            else:
                events.append(event)
        return events

    async def _run_handler(self, job: Job, stop: _Stop) -> tuple[Exception | None, bool]:
        """Run the handler of ``job``; return ``(error or None, whether it is permanent)``."""
        try:
            job_type, handler = self.handler_for(job.type)
            payload = job_type.parse(job.payload)
            limit_s = job_type.timeout_s if job_type.timeout_s is not None else self.timeout_s
            await self._call(handler(payload), job, limit_s, stop)
        except Exception as exc:  # any failure but a permanent one is transient: retry it
            return exc, rules.is_permanent(exc)
        return None, False

    async def _call(self, work: Awaitable[None], job: Job, limit_s: float | None, stop: _Stop) -> None:
        """Await a handler's ``work`` here, cancelled past ``limit_s`` seconds or when its job is cancelled.

        A watchdog task sleeps ``limit_s`` on the queue's clock, then cancels this task
        (as :func:`asyncio.timeout` does on the loop's clock) through ``stop``, as the
        heartbeat does when it finds the job cancelled. A ``CancelledError`` is then told
        apart by who asked for it: ``stop`` (the time limit, or the job's cancel), someone
        else (a runner shutting down: it goes on up), or nobody (the handler raised it itself).

        Raises:
            JobTimeoutError: if ``limit_s`` seconds passed first on the queue's clock.
            JobCancelledError: if the job was cancelled (``queue.cancel``) while it ran.
            HandlerCancelledError: if the handler raised ``CancelledError`` on its own.
            Exception: whatever else the handler raised.
        """
        task = stop.task
        stop_watchdog = None if limit_s is None else self._later(limit_s, stop.timeout)
        try:
            await work
        except asyncio.CancelledError:
            if stop.why is not None and task.uncancel() == 0:
                raise self._stopped(job, limit_s, stop.why) from None
            if stop.why is None and task.cancelling() == 0:
                raise HandlerCancelledError(
                    f"the handler of job {job.id!r} (type {job.type!r}) raised CancelledError,"
                    " though nothing had cancelled it"
                ) from None
            raise
        finally:
            stop.done = True  # a late beat or watchdog must not cancel what follows
            if stop_watchdog is not None:
                stop_watchdog()
        if stop.why is not None:  # the handler swallowed the cancellation (or it came as it ended)
            task.uncancel()
            raise self._stopped(job, limit_s, stop.why)

    @staticmethod
    def _stopped(job: Job, limit_s: float | None, why: str) -> JobTimeoutError | JobCancelledError:
        """The error that ends an attempt ``stop`` cancelled: past its time limit, or its job cancelled."""
        if why == "cancelled":
            return JobCancelledError(
                f"job {job.id!r} attempt {job.attempts} was cancelled (queue.cancel) while its handler ran,"
                " so the handler was stopped"
            )
        return JobTimeoutError(
            f"job {job.id!r} attempt {job.attempts} ran past its time limit of {limit_s:g} s"
            f" (job type {job.type!r}), so it was cancelled"
        )

    def _later(self, seconds: float, then: Callable[[], object]) -> Callable[[], object]:
        """Call ``then`` once ``seconds`` have passed on the queue's clock; return what calls it off.

        On a clock of real time (its sleep is the event loop's), a timer of the loop: a
        task for each job's time limit and heartbeat, most of which never fire, took about
        a fifth of a busy worker's time per job. On any other clock (a ManualClock), a
        task that sleeps on it.
        """
        if self._loop_timed:
            return asyncio.get_running_loop().call_later(seconds, then).cancel
        return asyncio.ensure_future(self._after(seconds, then)).cancel

    async def _after(self, seconds: float, then: Callable[[], object]) -> None:
        """Sleep ``seconds`` on the queue's clock (on the loop's if it cannot sleep), then call ``then``."""
        await self._sleep(seconds)
        then()

    def _finish(self, attempt: Attempt, *, acked: bool) -> tuple[Outcome, BaseException | None, float | None]:
        """Ack (unless ``acked`` already), defer or fail ``attempt``, unless its lease is stale.

        Returns the outcome, the error, and when the job is due again (for a retry or a
        deferral, as the queue said; else ``None``).

        A success a batch ack refused is acked once more on its own: that changes nothing
        and raises the queue's StaleLeaseError, which says why. A
        :class:`~jobqueue.errors.CircuitOpenError` is not a failure of the job: it is
        released until the breaker's ``retry_at_s``, the attempt not counted; so is a job
        of a type with no handler here, for :data:`~jobqueue.backends.rules.UNKNOWN_TYPE_DELAY_S`
        (see :func:`~jobqueue.backends.rules.is_given_back`).
        """
        lease, error = attempt.lease, attempt.error
        if attempt.lost is not None:
            return "stale", attempt.lost, None
        try:
            if error is None:
                if not acked:
                    self.queue.ack(lease)
                return "done", None, None
            if isinstance(error, Snooze):
                snoozed = self.queue.snooze(lease, delay_s=error.delay_s)
                if snoozed is not None:
                    return "snoozed", error, snoozed.run_at
                failed = self.queue.fail(lease, rules.snooze_failure(rules.MAX_SNOOZES))
                return failed.outcome, error, failed.run_at
            if rules.is_given_back(error):
                delay_s = rules.given_back_s(error, self.queue.clock.now())
                return "deferred", error, self.queue.release(lease, delay_s=delay_s).run_at
            failed = self.queue.fail(lease, error, permanent=attempt.permanent)
            return failed.outcome, error, failed.run_at
        except StaleLeaseError as stale:
            return "stale", stale, None

    async def _beat(
        self, lease: Lease, lost: list[StaleLeaseError], stop: _Stop, *, sleep_first: bool = False
    ) -> None:
        """Extend ``lease`` now, then every ``heartbeat_s`` seconds, until cancelled or refused.

        With ``sleep_first``, the first beat comes after ``heartbeat_s`` seconds too.

        A beat that finds the job cancelled (``Lease.cancelled``) stops the handler through
        ``stop``, and the beats go on until the handler has ended, so that its lease holds
        while it cleans up.
        """
        assert self.heartbeat_s is not None  # only started when a heartbeat is set
        clock = self.sleeping_clock("a heartbeat")
        job = lease.job
        while True:
            if sleep_first:
                await clock.sleep(self.heartbeat_s)
            sleep_first = True
            try:
                lease = await self.call(self.queue.extend_lease, lease)
            except QueueUnavailableError:
                continue  # the queue's server is away: try again at the next beat
            except StaleLeaseError as stale:
                lost.append(stale)
                beat = Heartbeat(
                    at=clock.now(),
                    job_id=job.id,
                    attempt=job.attempts,
                    leased_until=None,
                    error=describe_error(stale),
                )
                self._record_beat(beat)
                return
            self._record_beat(
                Heartbeat(at=clock.now(), job_id=job.id, attempt=job.attempts, leased_until=lease.expires_at)
            )
            if lease.cancelled:
                stop.cancelled()

    def _record_beat(self, beat: Heartbeat) -> None:
        self.heartbeats.append(beat)
        if self._on_heartbeat is not None:
            self._on_heartbeat(beat)


class _Stop:
    """Stops one running handler on the worker's behalf: past its time limit, or its job cancelled.

    Either cancels the handler's ``task`` (the first reason wins, once, and only while the
    handler runs) and records why, for :meth:`Worker._call` to raise the matching error.
    """

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.why: Literal["timeout", "cancelled"] | None = None
        self.done = False

    def timeout(self) -> None:
        """The attempt ran past its time limit."""
        self._stop("timeout")

    def cancelled(self) -> None:
        """The job was cancelled (``queue.cancel``), as a heartbeat found."""
        self._stop("cancelled")

    def _stop(self, why: Literal["timeout", "cancelled"]) -> None:
        if self.why is None and not self.done:
            self.why = why
            self.task.cancel()


def _check_heartbeat(heartbeat_s: float, queue: Queue) -> float:
    """Return ``heartbeat_s`` if it is > 0 s and below the queue's visibility timeout."""
    timeout_s = queue.visibility_timeout_s
    if isinstance(heartbeat_s, bool) or not (math.isfinite(heartbeat_s) and 0 < heartbeat_s < timeout_s):
        raise InvalidSettingError(
            f"heartbeat_s must be a number of seconds > 0 and below the queue's visibility timeout"
            f" ({timeout_s:g} s), got {heartbeat_s!r}"
        )
    _sleeping_clock(queue, "a heartbeat")
    return float(heartbeat_s)


def _sleeps_in_real_time(clock: object) -> bool:
    """Whether a wait on ``clock`` is the event loop's own sleep (a :class:`SystemClock`'s, or none)."""
    if isinstance(clock, ServerClock):
        clock = clock.local
    return isinstance(clock, SystemClock) or not isinstance(clock, SleepingClock)


def _sleeping_clock(queue: Queue, needed_by: str) -> SleepingClock:
    """The queue's clock, if it can sleep; else an error saying who needed it to."""
    clock = queue.clock
    if not isinstance(clock, SleepingClock):
        raise InvalidSettingError(
            f"{needed_by} needs a clock that can sleep (with an async sleep(seconds), like"
            f" SystemClock or ManualClock), got {type(clock).__name__}"
        )
    return clock
