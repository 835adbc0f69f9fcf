"""An in-memory job queue with leases (visibility timeouts), retries and dead letters.

The life of a job: ``enqueue`` makes it *waiting*; ``claim`` hands it to one worker and
hides it for the visibility timeout (it is *leased*); the worker then ``ack``s it (done,
deleted) or ``fail``s it (waiting again after a backoff delay, or *dead*). A worker that
crashes does neither: when the lease runs out the job is waiting again and the next claim
hands it out as a new attempt. Only an ack removes a job, so delivery is at-least-once.
The model is Amazon SQS's (visibility timeout, receipt handle, maxReceiveCount and a
dead-letter queue).

Everything is kept in this process's memory and lost when it ends; :class:`Queue` is the
interface it shares with :class:`jobqueue.durable.DurableQueue`, which keeps jobs in a
DuckDB file.

Introduced in lesson 03; batches, ``release`` and ``metrics`` in lesson 11; ``Retry-After``
and ``release(delay_s=...)`` in lesson 15.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random as _random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Literal, Protocol, TypeVar

from jobqueue.backoff import RandomFn
from jobqueue.clock import Clock
from jobqueue.errors import DeadLetterNotFoundError, InvalidSettingError, StaleLeaseError, describe_failure
from jobqueue.failures import retry_delay_s
from jobqueue.job import (
    DeadLetter,
    Job,
    JobType,
    Lease,
    RetryPolicy,
    check_count,
    check_job_id,
    check_positive_seconds,
    check_retry,
)
from jobqueue.metrics import DEFAULT_WINDOW_S, OutcomeLog, QueueMetrics, check_window, measure

P = TypeVar("P")

FailOutcome = Literal["retry", "dead"]
"""What :meth:`JobQueue.fail` did with the job."""

DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
"""How long a claimed job stays hidden from other workers, in seconds (SQS's default)."""


class Queue(Protocol):
    """What every job queue of this package offers: :class:`JobQueue` and ``DurableQueue``.

    The methods keep the same promises in both (``tests/queue_contract.py`` checks them
    against each); the docstrings of :class:`JobQueue` give the details. Workers
    (:class:`jobqueue.worker.Worker`, :class:`jobqueue.runner.Runner`) accept any of them.
    """

    @property
    def clock(self) -> Clock:
        """Where the queue reads the time (seconds)."""

    @property
    def visibility_timeout_s(self) -> float:
        """How long a claim hides a job, in seconds."""

    def enqueue(self, job_type: JobType[P], payload: P, *, id: str | None = None) -> Job:
        """Add one job, waiting from now; an id already held adds nothing."""

    def enqueue_many(
        self, job_type: JobType[P], payloads: Sequence[P], *, ids: Sequence[str] | None = None
    ) -> list[Job]:
        """Add several jobs of one type; all or none if a payload is invalid."""

    def claim(self) -> Lease | None:
        """Lease the job claimable longest, or ``None``."""

    def claim_many(self, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due jobs."""

    def ack(self, lease: Lease) -> None:
        """Mark a leased job done; ``StaleLeaseError`` if the lease is stale."""

    def ack_many(self, leases: Sequence[Lease]) -> list[Lease]:
        """Ack every lease still held; return the stale ones."""

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> FailOutcome:
        """Record a failed attempt: ``"retry"`` after the backoff (or Retry-After), or ``"dead"``."""

    def extend_lease(self, lease: Lease, by_s: float | None = None) -> Lease:
        """Push a lease's end to ``now + by_s`` seconds (heartbeat)."""

    def release(self, lease: Lease, *, delay_s: float = 0.0) -> Job:
        """Give a claimed job back unrun, due after ``delay_s`` seconds, the attempt not counted."""

    def replay(self, job_id: str) -> Job:
        """Move a dead job back to waiting with a fresh attempt budget."""

    def discard(self, job_id: str) -> DeadLetter:
        """Delete a dead letter and return it."""

    def get(self, job_id: str) -> Job | None:
        """The record of a waiting or leased job, or ``None``."""

    def jobs(self) -> list[Job]:
        """Every waiting or leased job, in the order they become claimable."""

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter queue, oldest death first."""

    def next_visible_at(self) -> float | None:
        """Earliest time (seconds) some job can be claimed, or ``None``."""

    def metrics(self, window_s: float = DEFAULT_WINDOW_S) -> QueueMetrics:
        """The numbers to watch, failure rate over the last ``window_s`` seconds."""

    def __len__(self) -> int:
        """Number of waiting or leased jobs."""


class JobQueue:
    """A job queue held in memory, with leases, retries with backoff, and dead letters.

    Args:
        clock: where the queue reads the time (seconds).
        visibility_timeout_s: how long a claim hides a job, in seconds (> 0); must exceed
            the slowest normal run of a job, or healthy jobs run twice. Default 30 s.
        retry: retry policy of job types that do not bring their own.
        random: source of jitter for retry delays, returning floats in ``[0, 1]``.
        new_id: makes ids for jobs enqueued without one; default ``"job-1"``,
            ``"job-2"``... (skipping ids given by hand). Each call must return a fresh
            non-empty str: an id the queue already holds raises, rather than loop.

    Raises:
        InvalidSettingError: if ``visibility_timeout_s`` is not a finite number > 0, or
            ``retry`` is not a :class:`RetryPolicy`.

    Cost: ``enqueue``, ``claim``, ``ack`` and ``fail`` take O(log n) time for n jobs in the
    queue (a heap ordered by the time each job becomes claimable), and jobs due when they
    are stored (enqueued, released) O(1), in a FIFO beside the heap. Introduced in lesson 03.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        random: RandomFn = _random.random,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        self.clock = clock
        self.visibility_timeout_s = check_positive_seconds("visibility_timeout_s", visibility_timeout_s)
        self.retry = check_retry(retry)
        self._random = random
        counter = itertools.count(1)
        self._new_id = new_id if new_id is not None else (lambda: f"job-{next(counter)}")
        self._own_ids = new_id is None  # the default counter never repeats, so it may skip taken ids
        self._jobs: dict[str, Job] = {}
        self._tokens: dict[str, str] = {}  # job id -> token of the lease now held
        self._dead: dict[str, DeadLetter] = {}
        # Entries (visible_at, serial, job id), serials unique for the queue's life, in two
        # orders: a FIFO of jobs due when stored, appended in order (enqueues, releases: O(1)),
        # and a heap of the rest (leases, retries). An entry whose serial is not its job's
        # current one is stale: skipped when it surfaces, and all dropped at once when they
        # outnumber the live ones, so acked jobs leave nothing behind for long.
        self._due: deque[tuple[float, int, str]] = deque()
        self._heap: list[tuple[float, int, str]] = []
        self._current: dict[str, int] = {}
        self._serial = itertools.count()
        self._lease_serial = itertools.count(1)
        self._outcomes = OutcomeLog()

    # -- producer side -------------------------------------------------------------

    def enqueue(self, job_type: JobType[P], payload: P, *, id: str | None = None) -> Job:
        """Add a job, waiting from now on, and return its record.

        Args:
            job_type: the job's type; its retry policy (or the queue's) is stored with it.
            payload: an instance of ``job_type.payload_type``.
            id: the job's id, a non-empty str. If the queue already holds a job with this
                id (waiting, leased or dead), nothing is added and that job is returned:
                a producer that retries its enqueue makes no duplicate.

        Raises:
            PayloadError: if the payload is of the wrong class or not JSON-serialisable.
            InvalidSettingError: if ``id`` is not a non-empty str, or ``new_id`` made an
                id the queue already holds.
        """
        if id is not None:
            check_job_id(id)
        return self._held(id) or self._add(job_type, job_type.dump(payload), id)

    def enqueue_many(
        self, job_type: JobType[P], payloads: Sequence[P], *, ids: Sequence[str] | None = None
    ) -> list[Job]:
        """Enqueue several jobs of one type, in order; see :meth:`enqueue`.

        Args:
            job_type: the type of every job.
            payloads: one payload per job.
            ids: one id per payload, or ``None`` for fresh ids.

        Raises:
            PayloadError: if any payload is invalid; then no job is added.
            InvalidSettingError: if ``ids`` and ``payloads`` differ in length.
        """
        wanted: Sequence[str | None] = check_ids(ids, payloads) or [None] * len(payloads)
        data = [job_type.dump(payload) for payload in payloads]  # all checked before any is added
        return [
            self._held(job_id) or self._add(job_type, text, job_id)
            for text, job_id in zip(data, wanted, strict=True)
        ]

    # -- worker side ---------------------------------------------------------------

    def claim(self) -> Lease | None:
        """Lease the job that has been claimable longest, or return ``None`` if none is due.

        The claim counts as an attempt (a worker that crashes mid-job still used one) and
        hides the job for :attr:`visibility_timeout_s`. A job whose final attempt's lease
        ran out is dead-lettered here instead of being handed out again.
        """
        now = self.clock.now()
        while (entry := self._first()) is not None and entry[0] <= now:
            job_id = entry[2]
            del self._current[job_id]  # its entry is stale from now on
            job = self._jobs[job_id]
            if job.attempts >= job.max_attempts:
                lost = f"LeaseExpired: final attempt {job.attempts} was neither acked nor failed in time"
                self._bury(replace(job, leased_until=None, leased_at=None, last_error=lost), now)
                continue
            until = now + self.visibility_timeout_s
            leased = replace(job, attempts=job.attempts + 1, leased_until=until, leased_at=now)
            token = f"lease-{next(self._lease_serial)}"
            self._tokens[job_id] = token
            self._store(leased)
            return Lease(job=leased, token=token)
        return None

    def claim_many(self, limit: int) -> list[Lease]:
        """Claim up to ``limit`` due jobs at once, in the order :meth:`claim` would.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        check_count("limit", limit)
        leases: list[Lease] = []
        while len(leases) < limit and (lease := self.claim()) is not None:
            leases.append(lease)
        return leases

    def ack(self, lease: Lease) -> None:
        """Mark the leased job done: it leaves the queue for good.

        An ack after the lease ran out still counts as long as no other worker claimed the
        job in between (as with SQS receipt handles).

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
        """
        self._check_holder(lease)
        job_id = lease.job.id
        del self._jobs[job_id], self._tokens[job_id], self._current[job_id]
        self._compact_if_stale()
        self._outcomes.record(self.clock.now(), failed=False)

    def ack_many(self, leases: Sequence[Lease]) -> list[Lease]:
        """Ack every lease still held; return the stale ones, which change nothing.

        Unlike :meth:`ack`, a stale lease does not raise: in a batch from a busy worker one
        lost lease must not refuse the others.
        """
        stale = []
        for lease in leases:
            try:
                self.ack(lease)
            except StaleLeaseError:
                stale.append(lease)
        return stale

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> FailOutcome:
        """Record a failed attempt; retry the job later or move it to the dead letters.

        Args:
            lease: what :meth:`claim` returned.
            error: the exception (stored as ``"ErrorClass: message"``) or a message.
            permanent: ``True`` when retrying cannot help: the job dies now.

        Returns:
            ``"retry"``: waiting again, claimable after ``backoff.delay_s(attempts)``
            seconds, or after the error's ``retry_after_s`` if it is a
            :class:`~jobqueue.errors.RetryAfterError` (at most
            :data:`~jobqueue.errors.MAX_RETRY_AFTER_S`; see
            :func:`jobqueue.failures.retry_delay_s`); ``"dead"``: moved to the dead-letter
            queue (permanent, or its last attempt, whatever the error).

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``error`` is neither an exception nor a str (``None``,
                say); nothing changes.
        """
        message = describe_failure(error)
        self._check_holder(lease)
        now = self.clock.now()
        job = self._jobs[lease.job.id]
        failed = replace(job, leased_until=None, leased_at=None, last_error=message)
        if permanent or job.attempts >= job.max_attempts:
            self._bury(failed, now)
            self._outcomes.record(now, failed=True)
            return "dead"
        run_at = now + retry_delay_s(job, error, self._random)  # may raise: change nothing before
        del self._tokens[job.id]
        self._store(replace(failed, run_at=run_at))
        self._outcomes.record(now, failed=True)
        return "retry"

    def extend_lease(self, lease: Lease, by_s: float | None = None) -> Lease:
        """Heartbeat: push the lease's end to ``now + by_s`` so a long job is not handed out again.

        Args:
            lease: what :meth:`claim` returned (or a previous ``extend_lease``).
            by_s: seconds from now the lease should last (> 0); default the visibility
                timeout. Like SQS ``ChangeMessageVisibility``.

        Returns:
            The lease with its new end; the token is unchanged.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``by_s`` is not a finite number > 0.

        Introduced in lesson 06.
        """
        extra_s = self.visibility_timeout_s if by_s is None else check_positive_seconds("by_s", by_s)
        self._check_holder(lease)
        extended = replace(self._jobs[lease.job.id], leased_until=self.clock.now() + extra_s)
        self._store(extended)
        return Lease(job=extended, token=lease.token)

    def release(self, lease: Lease, *, delay_s: float = 0.0) -> Job:
        """Give a claimed job back unrun: waiting again, due after ``delay_s``, the attempt not counted.

        For a worker that shuts down before it could run (or finish) the job: unlike a
        failure this uses up no attempt and waits out no backoff, and unlike a crash the
        next worker need not wait for the lease to run out (as SQS
        ``ChangeMessageVisibility`` to 0, or Sidekiq's push-back on shutdown). A handler
        that was interrupted may have done part of its work, which at-least-once delivery
        already allows for. With ``delay_s``, for a job that could not run yet: the worker
        defers a job whose dependency's circuit breaker is open until the breaker lets a
        trial through (SQS ``ChangeMessageVisibility`` to that many seconds).

        Args:
            lease: what :meth:`claim` returned.
            delay_s: seconds from now until the job is due again (a finite number >= 0;
                default 0, due at once).

        Returns:
            The job's record, waiting again.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``delay_s`` is not a finite number >= 0; nothing
                changes.

        Introduced in lesson 11; ``delay_s`` in lesson 15.
        """
        run_at = self.clock.now() + check_delay_s(delay_s)
        self._check_holder(lease)
        job = self._jobs[lease.job.id]
        given_back = replace(job, attempts=job.attempts - 1, run_at=run_at, leased_until=None, leased_at=None)
        del self._tokens[job.id]
        self._store(given_back)
        return given_back

    # -- dead letters --------------------------------------------------------------

    def replay(self, job_id: str) -> Job:
        """Move a dead job back to waiting, due now, with a fresh budget of attempts.

        The attempt count restarts at 0 (as SQS redrive and pg-boss do): a job is replayed
        after its cause was fixed, so the attempts it used on the bug say nothing about
        its chances now. ``last_error`` is kept until the next failure, for the record.

        Raises:
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.

        Introduced in lesson 05.
        """
        if job_id not in self._dead:
            raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to replay")
        job = replace(self._dead.pop(job_id).job, attempts=0, run_at=self.clock.now(), leased_until=None)
        self._store(job)
        return job

    def discard(self, job_id: str) -> DeadLetter:
        """Delete a dead letter that has been dealt with, and return it.

        Its id is free again afterwards: a corrected job may be enqueued under it.

        Raises:
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.

        Introduced in lesson 05.
        """
        if job_id not in self._dead:
            raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to discard")
        return self._dead.pop(job_id)

    # -- looking inside ------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        """The record of a waiting or leased job, or ``None`` (done, dead or never seen)."""
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        """Records of every waiting or leased job, in the order they become claimable."""
        return [self._jobs[job_id] for _, _, job_id in sorted(self._live())]

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter queue: jobs that will not be retried, oldest death first."""
        return sorted(self._dead.values(), key=lambda dead: (dead.died_at, dead.job.id))

    def next_visible_at(self) -> float | None:
        """Earliest time (seconds) at which some job can be claimed; ``None`` if empty."""
        entry = self._first()
        return None if entry is None else entry[0]

    def metrics(self, window_s: float = DEFAULT_WINDOW_S) -> QueueMetrics:
        """The numbers to watch now, with the failure rate over the last ``window_s`` seconds.

        Raises:
            InvalidSettingError: if ``window_s`` is not > 0 s or longer than a day.

        Introduced in lesson 11.
        """
        check_window(window_s)
        now = self.clock.now()
        done, failed = self._outcomes.counts(now, window_s)
        return measure(
            self._jobs.values(),
            now=now,
            window_s=window_s,
            done=done,
            failed=failed,
            dead_letters=len(self._dead),
        )

    def __len__(self) -> int:
        """Number of waiting or leased jobs (dead ones not included)."""
        return len(self._jobs)

    def __repr__(self) -> str:
        return f"JobQueue({len(self._jobs)} jobs, {len(self._dead)} dead, now={self.clock.now():g}s)"

    # -- internals -----------------------------------------------------------------

    def _held(self, job_id: str | None) -> Job | None:
        """The waiting, leased or dead job with ``job_id``, if the queue holds one."""
        if job_id is None:
            return None
        return self._jobs.get(job_id) or (self._dead[job_id].job if job_id in self._dead else None)

    def _add(self, job_type: JobType[P], data: str, job_id: str | None) -> Job:
        """Store a new waiting job with payload ``data`` (JSON text), due now."""
        policy = job_type.retry or self.retry
        job = Job(
            id=job_id if job_id is not None else self._fresh_id(),
            type=job_type.name,
            payload=data,
            max_attempts=policy.max_attempts,
            backoff=policy.backoff,
            run_at=self.clock.now(),
        )
        self._store(job)
        return job

    def _fresh_id(self) -> str:
        job_id = check_job_id(self._new_id(), "id made by new_id")
        while job_id in self._jobs or job_id in self._dead:
            if not self._own_ids:
                raise InvalidSettingError(
                    f"new_id made {job_id!r}, an id the queue already holds: new_id must make a fresh"
                    " id on every call"
                )
            job_id = self._new_id()
        return job_id

    def _store(self, job: Job) -> None:
        """Keep ``job`` under a new entry; the job's previous entry, if any, goes stale."""
        serial = next(self._serial)
        entry = (job.visible_at(), serial, job.id)
        self._current[job.id] = serial
        self._jobs[job.id] = job
        if entry[0] <= self.clock.now() and (not self._due or self._due[-1] < entry):
            self._due.append(entry)
        else:
            heapq.heappush(self._heap, entry)
        self._compact_if_stale()

    def _bury(self, job: Job, now: float) -> None:
        self._current.pop(job.id, None)
        del self._jobs[job.id]
        self._tokens.pop(job.id, None)
        self._dead[job.id] = DeadLetter(job=job, died_at=now)
        self._compact_if_stale()

    def _first(self) -> tuple[float, int, str] | None:
        """The live entry claimable first, or ``None``; stale entries in front are dropped."""
        due, heap, current = self._due, self._heap, self._current
        while due and current.get(due[0][2]) != due[0][1]:
            due.popleft()
        while heap and current.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)
        if due and (not heap or due[0] < heap[0]):
            return due[0]
        return heap[0] if heap else None

    def _live(self) -> Iterator[tuple[float, int, str]]:
        """The entries that are their job's current one, in no particular order."""
        current = self._current
        return (
            entry for entry in itertools.chain(self._due, self._heap) if current.get(entry[2]) == entry[1]
        )

    def _compact_if_stale(self) -> None:
        """Drop every stale entry once they outnumber the live ones (amortised O(1) a call)."""
        if len(self._due) + len(self._heap) > 2 * len(self._current) + 1:
            current = self._current
            self._due = deque(entry for entry in self._due if current.get(entry[2]) == entry[1])
            self._heap = [entry for entry in self._heap if current.get(entry[2]) == entry[1]]
            heapq.heapify(self._heap)

    def _check_holder(self, lease: Lease) -> None:
        current = self._tokens.get(lease.job.id)
        if current != lease.token:
            raise stale_lease(lease, self._jobs.get(lease.job.id), current)


def stale_lease(lease: Lease, job: Job | None, current: str | None) -> StaleLeaseError:
    """The error for ``lease`` when the queue holds ``job`` under the token ``current``.

    Args:
        lease: the lease a worker presented.
        job: the job's record now, or ``None`` if it left the queue.
        current: the token of the job's lease now, or ``None`` if it is not leased.
    """
    job_id = lease.job.id
    if job is None:
        return StaleLeaseError(
            f"lease {lease.token} on job {job_id!r} is stale: the job is no longer in the queue"
            " (acked or dead-lettered)"
        )
    held = f"held now as {current} (attempt {job.attempts})" if current else "not leased now"
    return StaleLeaseError(
        f"lease {lease.token} on job {job_id!r} (attempt {lease.job.attempts}) is stale: the job is {held}"
    )


def check_delay_s(delay_s: float) -> float:
    """Return ``delay_s`` if it is a finite number of seconds >= 0; every queue's ``release`` calls it.

    Raises:
        InvalidSettingError: naming the bad value.
    """
    if (
        isinstance(delay_s, bool)
        or not isinstance(delay_s, int | float)
        or not (math.isfinite(delay_s) and delay_s >= 0)
    ):
        raise InvalidSettingError(f"delay_s must be a finite number of seconds >= 0, got {delay_s!r}")
    return float(delay_s)


def check_ids(ids: Sequence[str] | None, payloads: Sequence[object]) -> Sequence[str] | None:
    """Return ``ids`` if it is ``None`` or has one valid id per payload (see :func:`check_job_id`).

    Every queue's ``enqueue_many`` calls it before storing anything.

    Raises:
        InvalidSettingError: if ``ids`` is a single str (not a sequence of ids), the
            lengths differ (naming both), or an id is not a non-empty str (naming it).
    """
    if ids is None:
        return None
    if isinstance(ids, str | bytes):
        raise InvalidSettingError(f"ids must be a sequence of ids, not one {type(ids).__name__}: {ids!r}")
    if len(ids) != len(payloads):
        raise InvalidSettingError(
            f"ids must give one id per payload: {len(ids)} ids for {len(payloads)} payloads"
        )
    for job_id in ids:
        check_job_id(job_id)
    return ids
