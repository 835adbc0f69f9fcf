"""An in-memory job queue with leases (visibility timeouts), retries and dead letters.

The life of a job: ``enqueue`` makes it *waiting*; ``claim`` hands it to one worker and
hides it for the visibility timeout (it is *leased*); the worker then ``ack``s it (done,
deleted) or ``fail``s it (waiting again after a backoff delay, or *dead*). A worker that
crashes does neither: when the lease runs out the job is waiting again and the next claim
hands it out as a new attempt. Only an ack removes a job, so delivery is at-least-once.
The model is Amazon SQS's (visibility timeout, receipt handle, maxReceiveCount and a
dead-letter queue).

Everything is kept in this process's memory and lost when it ends. It keeps the contract
of :class:`jobqueue.backends.contract.Queue`, as the DuckDB and PostgreSQL queues do, and
asks :mod:`jobqueue.backends.rules` what a failure, a release or a replay does: this
module only stores the answer.

Introduced in lesson 03; batches, ``release`` and ``metrics`` in lesson 11; ``Retry-After``
and ``release(delay_s=...)`` in lesson 14.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random as _random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from jobqueue.backends import rules
from jobqueue.backends.contract import (
    DEFAULT_VISIBILITY_TIMEOUT_S,
    CancelOutcome,
    Failed,
    JobIds,
    JobTypes,
    QueueNames,
    check_dead_retain_s,
    check_delay_s,
    check_holder,
    check_ids,
    check_queues,
    check_seconds,
    check_types,
    check_unique_for_s,
)
from jobqueue.backoff import RandomFn
from jobqueue.census import EXACT_UP_TO, Census, live_state, tally_by_queue
from jobqueue.clock import Clock
from jobqueue.errors import DeadLetterNotFoundError, InvalidSettingError, JobNotFoundError, StaleLeaseError
from jobqueue.job import (
    DEFAULT_QUEUE,
    DeadLetter,
    FinishedJob,
    FinishedOutcome,
    Job,
    JobType,
    Lease,
    RetryPolicy,
    check_count,
    check_job_id,
    check_positive_seconds,
    check_priority,
    check_queue_name,
    check_retry,
)
from jobqueue.metrics import (
    DEFAULT_WINDOW_S,
    OutcomeLog,
    OutcomeSums,
    QueueMetrics,
    check_window,
    measure,
    outcome_key,
)

P = TypeVar("P")
_Entry = TypeVar("_Entry", tuple[float, int, str], tuple[int, float, int, str])
_Due = tuple[int, float, int, str]
"""The entry of a due job: ``(-priority, visible_at, serial, id)``."""
_Fifo = deque[tuple[float, int, str]]


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
        retain_s: how long an acked job is kept for :meth:`finished`, in seconds (>= 0).
            Default 0: deleted at its ack, as before retention existed, so the ack stays
            one delete in every backend and a queue that nobody inspects grows by nothing;
            give e.g. 86,400 (a day, River's default for completed jobs) to look back.
            Kept jobs are pruned by the acks, :data:`~jobqueue.backends.rules.PRUNE_BATCH`
            at a time, at most every :data:`~jobqueue.backends.rules.PRUNE_EVERY_S`
            seconds, so one may outlive ``retain_s`` by a little.
        dead_retain_s: how long a dead letter is kept after it died, in seconds (> 0),
            unless replayed or discarded first; pruned by the acks as the finished jobs
            are. Default :data:`~jobqueue.backends.rules.DEAD_RETAIN_S`, 7 days (River's
            ``DiscardedJobRetentionPeriod`` is 7 days too); ``None`` keeps dead letters
            until replayed or discarded. A pruned dead letter frees its id as a discard
            does.

    Raises:
        InvalidSettingError: if ``visibility_timeout_s`` is not a finite number > 0,
            ``retry`` is not a :class:`RetryPolicy`, ``retain_s`` is not a finite
            number >= 0, or ``dead_retain_s`` is neither ``None`` nor a finite number > 0.

    Cost: ``enqueue``, ``claim``, ``ack`` and ``fail`` take O(log n) time for n jobs in the
    queue (times the few priorities in use): a heap of the jobs not yet due, ordered by the
    time each becomes claimable, and a heap of those that came due, by priority then that
    time; a claim moves the jobs that have come due from the first to the second. Jobs due
    when they are stored (enqueued, released) cost O(1), in a FIFO per priority beside the
    heaps. Each named queue has FIFOs and a heap of due jobs of its own, so a claim from
    one queue never steps over the jobs of another. Introduced in lesson 03; priorities
    and deadlines in lesson 13; named queues with issue 24.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        random: RandomFn = _random.random,
        new_id: Callable[[], str] | None = None,
        retain_s: float = 0.0,
        dead_retain_s: float | None = rules.DEAD_RETAIN_S,
    ) -> None:
        self.clock = clock
        self.retain_s = check_seconds("retain_s", retain_s)
        self.dead_retain_s = check_dead_retain_s(dead_retain_s)
        self._finished: deque[FinishedJob] = deque()  # oldest finish first
        self._pruned_at: float | None = None
        self.visibility_timeout_s = check_positive_seconds("visibility_timeout_s", visibility_timeout_s)
        self.retry = check_retry(retry)
        self._random = random
        counter = itertools.count(1)
        self._new_id = new_id if new_id is not None else (lambda: f"job-{next(counter)}")
        self._own_ids = new_id is None  # the default counter never repeats, so it may skip taken ids
        self._jobs: dict[str, Job] = {}
        self._tokens: dict[str, str] = {}  # job id -> token of the lease now held
        self._dead: dict[str, DeadLetter] = {}
        # Entries end in (serial, job id), serials unique for the queue's life. A job due
        # when stored (enqueued, released) has one entry (visible_at, serial, id) in the FIFO
        # `_fresh[queue name, priority]`, appended in order. A job not yet due has one in
        # `_later`, a min-heap; when a claim finds it due, it moves to two: (-priority,
        # visible_at, serial, id) in `_ready[queue name]`, which claims pop, and
        # (visible_at, serial, id) in `_ready_at`, for next_visible_at. An entry whose
        # serial is not its job's current one is stale: skipped when it surfaces, and all
        # dropped at once when they outnumber the live ones, so acked jobs leave nothing
        # behind for long.
        self._fresh: dict[tuple[str, int], _Fifo] = {}
        self._later: list[tuple[float, int, str]] = []
        self._ready: dict[str, list[_Due]] = {}
        self._ready_at: list[tuple[float, int, str]] = []
        self._current: dict[str, int] = {}
        self._serial = itertools.count()
        self._lease_serial = itertools.count(1)
        self._outcomes = OutcomeLog()
        self._snoozes: dict[str, int] = {}  # job id -> times snoozed, while it lives
        self._holds: dict[str, tuple[float, Job]] = {}  # finished job's id -> (held until, its record)
        self._holds_pruned_at: float | None = None
        self._cancelling: set[str] = set()  # leased jobs marked cancelled (see cancel)

    # -- producer side -------------------------------------------------------------

    def enqueue(
        self,
        job_type: JobType[P],
        payload: P,
        *,
        id: str | None = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Job:
        """Add a job, waiting from now on, and return its record.

        Args:
            job_type: the job's type; its retry policy (or the queue's), its priority and
                its deadline (``expires_after_s`` from now) are stored with it.
            payload: an instance of ``job_type.payload_type``.
            id: the job's id, a non-empty str. If the queue already holds a job with this
                id (waiting, leased or dead), nothing is added and that job is returned:
                a producer that retries its enqueue makes no duplicate.
            priority: this job's priority, in place of the type's (``None``); see
                :attr:`Job.priority`.
            unique_for_s: keep the id held this many seconds after the job finished
                (acked, cancelled, or discarded from the dead letters: the window then
                counts from its death), so that a repeat adds nothing until then; it
                returns the finished job's id, type and payload (a :class:`Job` with nothing
                else kept); see :func:`~jobqueue.backends.rules.held_until`. ``None``
                (default): the id is free again at the ack. Oban's ``unique: [period: ...]``
                counts its window from the insert instead; counted from the finish, a
                re-publish that comes after a long job is refused too.
            queue: the named queue the job waits in (default ``"default"``); a claim may
                take only some queues (see :meth:`claim_many`). A job already held under
                ``id`` stays in its own queue.

        Raises:
            PayloadError: if the payload is of the wrong class or not JSON-serialisable.
            InvalidSettingError: if ``id`` is not a non-empty str, ``priority`` is not an
                int within the bounds, ``unique_for_s`` is not a finite number of seconds
                >= 0, ``queue`` cannot name a queue (see
                :func:`~jobqueue.job.check_queue_name`), or ``new_id`` made an id the queue
                already holds.
        """
        ids = None if id is None else [id]
        return self.enqueue_many(
            job_type, [payload], ids=ids, priority=priority, unique_for_s=unique_for_s, queue=queue
        )[0]

    def enqueue_many(
        self,
        job_type: JobType[P],
        payloads: Sequence[P],
        *,
        ids: JobIds = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> list[Job]:
        """Enqueue several jobs of one type, in order; see :meth:`enqueue`.

        Args:
            job_type: the type of every job.
            payloads: one payload per job.
            ids: one id per payload, or ``None`` for fresh ids.
            priority: the priority of every job, or ``None`` for the type's.
            unique_for_s: the unique window of every job (see :meth:`enqueue`).
            queue: the named queue of every job.

        Raises:
            PayloadError: if any payload is invalid; then no job is added.
            InvalidSettingError: if ``ids`` and ``payloads`` differ in length,
                ``priority`` is not an int within the bounds, ``unique_for_s`` is not
                a finite number of seconds >= 0, or ``queue`` cannot name a queue.
        """
        wanted: Sequence[str | None] = check_ids(ids, payloads) or [None] * len(payloads)
        window = check_unique_for_s(unique_for_s)
        data = [job_type.dump(payload) for payload in payloads]  # all checked before any is added
        if priority is not None:
            check_priority(priority)  # before any job is added
        check_queue_name(queue)
        return [
            self._held(job_id) or self._add(job_type, text, job_id, priority, window, queue)
            for text, job_id in zip(data, wanted, strict=True)
        ]

    # -- worker side ---------------------------------------------------------------

    def claim(self, *, types: JobTypes = None, queues: QueueNames = None) -> Lease | None:
        """Lease the due job of highest priority, claimable longest among equals; or ``None``.

        The claim counts as an attempt (a worker that crashes mid-job still used one),
        hides the job for :attr:`visibility_timeout_s` and gives it a new
        :attr:`~jobqueue.job.Job.fencing_token`, larger than any before. On its way to that job the claim
        dead-letters, instead of handing out, a job whose final attempt's lease ran out, and
        a job past its deadline (:attr:`Job.expires_at`: ``"expired: ..."``, no attempt
        used). Jobs behind the one claimed wait for a later claim, even if expired. With
        ``types``, only jobs of those job types are claimed (or dead-lettered), and with
        ``queues`` only jobs of those named queues; see :meth:`claim_many`.

        Raises:
            InvalidSettingError: if ``types`` is not a collection of job type names, or
                ``queues`` not one of queue names.
        """
        leases = self.claim_many(1, types=types, queues=queues)
        return leases[0] if leases else None

    def claim_many(self, limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        """Claim up to ``limit`` due jobs at once, in the order :meth:`claim` would.

        Args:
            limit: how many jobs at most (>= 1).
            types: the names of the job types to claim (a worker's handlers), or ``None``
                for any; jobs of other types are passed over and keep their places. Each
                claim with a filter steps over the due jobs of other types ahead of the ones
                it takes (this queue keeps one order for all types of a named queue).
            queues: the named queues to claim from, or ``None`` for every queue; the
                others are not looked at (each named queue keeps its due jobs apart).

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1, ``types`` is not a
                collection of job type names, or ``queues`` not one of queue names.
        """
        check_count("limit", limit)
        wanted = check_types(types)
        names = check_queues(queues)
        if wanted == frozenset() or names == frozenset():
            return []
        now = self.clock.now()
        self._promote(now)
        leases: list[Lease] = []
        passed: list[tuple[_Due, _Fifo | list[_Due]]] = []
        while len(leases) < limit and (popped := self._pop_due(now, names)) is not None:
            job_id = popped[0][3]
            job = self._jobs[job_id]
            if wanted is not None and job.type not in wanted:
                passed.append(popped)  # put back below, where it was
                continue
            del self._current[job_id]  # its entries are stale from now on
            if job_id in self._cancelling:  # marked while leased, and its lease ran out
                self._finish(job, "cancelled", now)
                continue
            if (reason := rules.refusal(job, now)) is not None:
                self._bury(replace(job, leased_until=None, leased_at=None, last_error=reason), now)
                continue
            leases.append(self._lease(job, now))
        for entry, source in reversed(passed):
            name = self._jobs[entry[3]].queue
            if isinstance(source, list):  # its queue's heap (a compaction may have made a new one)
                heapq.heappush(self._ready.setdefault(name, []), entry)
            else:  # into its FIFO, which _pop_due drops from _fresh once it looks empty
                self._fresh.setdefault((name, -entry[0]), source).appendleft(entry[1:])
        return leases

    def _lease(self, job: Job, now: float) -> Lease:
        """Lease the due ``job`` (its entries already stale): an attempt more, hidden for the lease."""
        until = now + self.visibility_timeout_s
        serial = next(self._lease_serial)  # also the fencing token: never handed out again
        leased = job.changed(
            attempts=job.attempts + 1, leased_until=until, leased_at=now, fencing_token=serial
        )
        token = f"lease-{serial}"
        self._tokens[job.id] = token
        self._store(leased)
        return Lease.of(leased, token)

    def ack(self, lease: Lease) -> None:
        """Mark the leased job done: it leaves the queue for good.

        An ack after the lease ran out still counts as long as no other worker claimed the
        job in between (as with SQS receipt handles). A job cancelled while leased (see
        :meth:`cancel`) is finished as ``"cancelled"`` instead, and not counted as done.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
        """
        job = self._holder(lease)
        now = self.clock.now()
        if job.id in self._cancelling:
            self._finish(job, "cancelled", now)
        else:
            self._finish(job, "done", now)
            self._outcomes.record(now, outcome_key(job), failed=False)
        if (self._finished or self._dead) and rules.prune_due(now, self._pruned_at):
            self._pruned_at = now
            self._prune(now)
            self._prune_dead(now)

    def _finish(self, job: Job, outcome: FinishedOutcome, now: float) -> None:
        """Take the live ``job`` out of the queue, kept as ``outcome`` (done: only with ``retain_s``)."""
        del self._jobs[job.id]
        self._tokens.pop(job.id, None)
        self._current.pop(job.id, None)
        self._snoozes.pop(job.id, None)
        self._cancelling.discard(job.id)
        self._compact_if_stale()
        self._finished_holding(job, now)
        if self.retain_s or outcome == "cancelled":
            self._finished.append(FinishedJob(job=job, outcome=outcome, finished_at=now))

    def _prune(self, now: float) -> None:
        """Delete up to PRUNE_BATCH kept jobs past their time (see :func:`rules.is_pruned`), oldest first."""
        before = rules.prune_before(now, self.retain_s)
        cancelled_before = rules.prune_cancelled_before(now, self.retain_s)
        gone = 0
        kept: deque[FinishedJob] = deque()
        for finished in self._finished:
            if gone < rules.PRUNE_BATCH and rules.is_pruned(
                finished, before=before, cancelled_before=cancelled_before
            ):
                gone += 1
            else:
                kept.append(finished)
        self._finished = kept

    def _prune_dead(self, now: float) -> None:
        """Delete up to PRUNE_BATCH dead letters past ``dead_retain_s`` (see :func:`rules.is_dead_pruned`).

        The oldest deaths go first; each frees its id as :meth:`discard` does (a unique
        window counts from its death).
        """
        before = rules.prune_dead_before(now, self.dead_retain_s)
        due = [letter for letter in self._dead.values() if rules.is_dead_pruned(letter, before=before)]
        for letter in heapq.nsmallest(rules.PRUNE_BATCH, due, key=lambda dead: (dead.died_at, dead.job.id)):
            del self._dead[letter.job.id]
            self._finished_holding(letter.job, letter.died_at)

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

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> Failed:
        """Record a failed attempt; retry the job later or move it to the dead letters.

        Args:
            lease: what :meth:`claim` returned.
            error: the exception (stored as ``"ErrorClass: message"``) or a message.
            permanent: ``True`` when retrying cannot help: the job dies now.

        Returns:
            What became of the job (:func:`jobqueue.backends.rules.fail` decides):
            ``outcome`` ``"retry"``, waiting again and claimable at ``run_at``, after
            ``backoff.delay_s(attempts)`` seconds, or after the error's ``retry_after_s``
            if it is a :class:`~jobqueue.errors.RetryAfterError` (at most
            :data:`~jobqueue.errors.MAX_RETRY_AFTER_S`); or ``"dead"``, moved to the
            dead-letter queue (permanent, or its last attempt, whatever the error); or
            ``"cancelled"`` if the job was cancelled while leased (:meth:`cancel`): finished,
            not retried, not counted as a failure.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``error`` is neither an exception nor a str (``None``,
                say); nothing changes.
        """
        job = self._holder(lease)
        now = self.clock.now()
        cancelled = job.id in self._cancelling
        failed = rules.fail(
            job, error, permanent=permanent, now=now, random=self._random, cancelled=cancelled
        )  # may raise
        stored = replace(job, leased_until=None, leased_at=None, last_error=failed.error)
        if failed.outcome == "cancelled":
            self._finish(replace(job, last_error=failed.error), "cancelled", now)
            return failed
        if failed.run_at is None:
            self._bury(stored, now)
        else:
            del self._tokens[job.id]
            self._store(replace(stored, run_at=failed.run_at))
        self._outcomes.record(now, outcome_key(job), failed=True)
        return failed

    def extend_lease(self, lease: Lease, by_s: float | None = None) -> Lease:
        """Heartbeat: push the lease's end to ``now + by_s`` so a long job is not handed out again.

        Args:
            lease: what :meth:`claim` returned (or a previous ``extend_lease``).
            by_s: seconds from now the lease should last (> 0); default the visibility
                timeout. Like SQS ``ChangeMessageVisibility``.

        Returns:
            The lease with its new end; the token is unchanged. Its ``cancelled`` is true
            once the job was cancelled (:meth:`cancel`): the holder should stop.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``by_s`` is not a finite number > 0.

        Introduced in lesson 06.
        """
        extra_s = self.visibility_timeout_s if by_s is None else check_positive_seconds("by_s", by_s)
        extended = replace(self._holder(lease), leased_until=self.clock.now() + extra_s)
        self._store(extended)
        return Lease(job=extended, token=lease.token, cancelled=extended.id in self._cancelling)

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

        Introduced in lesson 11; ``delay_s`` in lesson 14.
        """
        check_delay_s(delay_s)
        given_back = rules.release(self._holder(lease), now=self.clock.now(), delay_s=delay_s)
        del self._tokens[given_back.id]
        self._store(given_back)
        return given_back

    def snooze(self, lease: Lease, *, delay_s: float) -> Job | None:
        """Give a claimed job back unrun, due after ``delay_s``, the attempt not counted: a snooze.

        What a :class:`~jobqueue.worker.Worker` does when a handler raises
        :class:`~jobqueue.errors.Snooze`: like :meth:`release`, but counted, and only
        :data:`~jobqueue.backends.rules.MAX_SNOOZES` times per job (a replay starts the
        count afresh).

        Returns:
            The job's record, waiting again; or ``None`` if the job has used its snoozes:
            nothing changed, and the caller fails the attempt instead.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``delay_s`` is not a finite number >= 0; nothing
                changes.

        Introduced with snoozing (issue 24).
        """
        check_delay_s(delay_s)
        job = self._holder(lease)
        snoozes = self._snoozes.get(job.id, 0)
        if not rules.may_snooze(snoozes):
            return None
        self._snoozes[job.id] = snoozes + 1
        return self.release(lease, delay_s=delay_s)

    def cancel(self, job_id: str) -> CancelOutcome:
        """Cancel a job: a waiting one now, a leased one when its holder acks or fails it.

        What :func:`jobqueue.backends.rules.cancel` decides: a job waiting or scheduled
        leaves the queue at once and is kept by :meth:`finished` as ``"cancelled"``
        (:data:`~jobqueue.backends.rules.KEEP_CANCELLED_S` at least); a leased job is marked,
        its heartbeat (:meth:`extend_lease`) returns ``Lease.cancelled``, and its ack or fail
        finishes it as ``"cancelled"``, never retried. Cancelling again is harmless.

        Returns:
            ``"cancelled"`` or ``"cancelling"`` (see :data:`~jobqueue.backends.contract.CancelOutcome`);
            ``"dead"`` for a dead letter and ``"done"`` for a kept finished job, left as they
            are (discard a dead letter to be rid of it).

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id (see :func:`check_job_id`).
            JobNotFoundError: naming ``job_id``, if the queue holds no such job, live, dead or
                kept.

        Introduced with cancelling (issue 24).
        """
        job = self._jobs.get(check_job_id(job_id))
        if job is not None:
            outcome = rules.cancel(leased=job_id in self._tokens)
            if outcome == "cancelled":
                self._finish(job, "cancelled", self.clock.now())
            else:
                self._cancelling.add(job_id)
            return outcome
        if job_id in self._dead:
            return "dead"
        kept = next((finished for finished in reversed(self._finished) if finished.job.id == job_id), None)
        if kept is None:
            raise JobNotFoundError(f"no job with id {job_id!r} to cancel: not waiting, leased, dead or kept")
        return kept.outcome

    # -- dead letters --------------------------------------------------------------

    def replay(self, job_id: str) -> Job:
        """Move a dead job back to waiting, due now, with a fresh budget of attempts.

        The attempt count restarts at 0 (as after SQS's dead-letter redrive; pg-boss's retry
        grants one attempt more instead): a job is replayed after its cause was fixed, so
        the attempts it used on the bug say nothing about its chances now. A job with a
        deadline gets a fresh one, ``expires_after_s`` from now (an expired job replayed on
        purpose is wanted now). Its priority is kept. ``last_error`` is kept until the next
        failure, for the record.

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id (see :func:`check_job_id`).
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.

        Introduced in lesson 05.
        """
        if check_job_id(job_id) not in self._dead:
            raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to replay")
        job = rules.replay(self._dead.pop(job_id).job, now=self.clock.now())
        self._store(job)
        return job

    def discard(self, job_id: str) -> DeadLetter:
        """Delete a dead letter that has been dealt with, and return it.

        Its id is free again afterwards: a corrected job may be enqueued under it.

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id (see :func:`check_job_id`).
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.

        Introduced in lesson 05.
        """
        if check_job_id(job_id) not in self._dead:
            raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to discard")
        letter = self._dead.pop(job_id)
        self._finished_holding(letter.job, letter.died_at)
        return letter

    # -- looking inside ------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        """The record of a waiting or leased job, or ``None`` (done, dead or never seen).

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id (see :func:`check_job_id`).
        """
        return self._jobs.get(check_job_id(job_id))

    def jobs(self) -> list[Job]:
        """Records of every waiting or leased job, in the order they become claimable."""
        return [self._jobs[job_id] for _, _, job_id in sorted(self._live())]

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter queue: jobs that will not be retried, oldest death first."""
        return sorted(self._dead.values(), key=lambda dead: (dead.died_at, dead.job.id))

    def finished(self, limit: int = 100) -> list[FinishedJob]:
        """Up to ``limit`` finished jobs kept (acked with ``retain_s``, and cancelled), the latest first.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        return list(itertools.islice(reversed(self._finished), check_count("limit", limit)))

    def next_visible_at(self) -> float | None:
        """Earliest time (seconds) at which some job can be claimed; ``None`` if empty."""
        firsts = [entry[0] for entry in (self._top(self._ready_at), self._top(self._later)) if entry]
        firsts += [head[0] for fifo in self._fresh.values() if (head := self._head(fifo))]
        return min(firsts, default=None)

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
            cancelled=sum(kept.outcome == "cancelled" for kept in self._finished),
        )

    def __len__(self) -> int:
        """Number of waiting or leased jobs (dead ones not included)."""
        return len(self._jobs)

    def __repr__(self) -> str:
        return f"JobQueue({len(self._jobs)} jobs, {len(self._dead)} dead, now={self.clock.now():g}s)"

    # -- internals -----------------------------------------------------------------

    def _held(self, job_id: str | None) -> Job | None:
        """The waiting, leased or dead job with ``job_id``, or the finished one whose window holds it."""
        if job_id is None:
            return None
        if job_id in self._jobs:
            return self._jobs[job_id]
        if job_id in self._dead:
            return self._dead[job_id].job
        until, finished = self._holds.get(job_id, (-math.inf, None))
        return finished if until > self.clock.now() else None

    def _add(
        self,
        job_type: JobType[P],
        data: str,
        job_id: str | None,
        priority: int | None,
        window: float | None,
        queue: str,
    ) -> Job:
        """Store a new waiting job (payload ``data``, JSON) in ``queue``, due now; window: unique_for_s."""
        job = job_type.new_job(
            id=job_id if job_id is not None else self._fresh_id(),
            payload=data,
            retry=job_type.retry or self.retry,
            now=self.clock.now(),
            priority=priority,
            unique_for_s=window,
            queue=queue,
        )
        self._holds.pop(job.id, None)  # a window that ran out
        self._store(job)
        return job

    def _finished_holding(self, job: Job, finished_at: float) -> None:
        """``job`` finished at ``finished_at`` (acked, cancelled, discarded dead): hold its id for its window.

        The one place every way of finishing goes through. Holds past their end are
        dropped here too, at most :data:`~jobqueue.backends.rules.PRUNE_BATCH` at a time.
        """
        window = job.unique_for_s
        if window is not None:
            kept = Job(id=job.id, type=job.type, payload=job.payload)  # what the SQL queues keep too
            self._holds[job.id] = (rules.held_until(finished_at, window), kept)
        if self._holds and rules.prune_due(finished_at, self._holds_pruned_at):
            self._holds_pruned_at = finished_at
            ended = [job_id for job_id, (until, _) in self._holds.items() if until <= finished_at]
            for job_id in ended[: rules.PRUNE_BATCH]:
                del self._holds[job_id]

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
        """Keep ``job`` under new entries; the job's previous entries, if any, go stale."""
        serial = next(self._serial)
        entry = (job.visible_at(), serial, job.id)
        self._current[job.id] = serial
        self._jobs[job.id] = job
        if entry[0] > self.clock.now():
            heapq.heappush(self._later, entry)
        elif not (fifo := self._fresh.setdefault((job.queue, job.priority), deque())) or fifo[-1] < entry:
            fifo.append(entry)
        else:  # due before the FIFO's last (the clock went back): out of its order
            self._make_ready(job, entry)
        self._compact_if_stale()

    def _make_ready(self, job: Job, entry: tuple[float, int, str]) -> None:
        heapq.heappush(self._ready.setdefault(job.queue, []), (-job.priority, *entry))
        heapq.heappush(self._ready_at, entry)

    def _promote(self, now: float) -> None:
        """Move the jobs that have come due by ``now`` from ``_later`` to the due heaps."""
        later = self._later
        while (entry := self._top(later)) is not None and entry[0] <= now:
            heapq.heappop(later)
            self._make_ready(self._jobs[entry[2]], entry)

    def _pop_due(self, now: float, names: frozenset[str] | None) -> tuple[_Due, _Fifo | list[_Due]] | None:
        """Take the entry of the job to claim next from the queues ``names`` (``None``: all), or ``None``.

        That is the live entry first by (-priority, visible_at, serial) among the heads of
        those queues' FIFOs and the tops of their heaps in ``_ready``, if it is due at
        ``now`` (it may not be, after the clock went back). Returns that entry as
        ``(-priority, visible_at, serial, id)`` and the FIFO or heap it came from, so it
        can be put back.
        """
        best: _Due | None = None
        source: _Fifo | list[_Due] | None = None
        heaps = self._ready.items()
        fifos = list(self._fresh.items())
        if names is not None:
            heaps = {name: heap for name, heap in heaps if name in names}.items()
            fifos = [(key, fifo) for key, fifo in fifos if key[0] in names]
        for _, heap in heaps:
            top = self._top(heap)
            if top is not None and (best is None or top < best):
                best, source = top, heap
        for key, fifo in fifos:
            head = self._head(fifo)
            if head is None:
                del self._fresh[key]
            elif best is None or (-key[1], *head) < best:
                best, source = (-key[1], *head), fifo
        if best is None or source is None or best[1] > now:
            return None
        if isinstance(source, list):
            heapq.heappop(source)
        else:
            source.popleft()
        return best, source

    def _bury(self, job: Job, now: float) -> None:
        self._current.pop(job.id, None)
        del self._jobs[job.id]
        self._tokens.pop(job.id, None)
        self._snoozes.pop(job.id, None)  # a replay starts the count afresh
        self._cancelling.discard(job.id)
        self._dead[job.id] = DeadLetter(job=job, died_at=now)
        self._compact_if_stale()

    def _top(self, heap: list[_Entry]) -> _Entry | None:
        """The first live entry of ``heap``, or ``None``; stale entries in front are dropped."""
        current = self._current
        while heap and current.get(heap[0][-1]) != heap[0][-2]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _head(self, fifo: deque[tuple[float, int, str]]) -> tuple[float, int, str] | None:
        """The first live entry of ``fifo``, or ``None``; stale entries in front are dropped."""
        current = self._current
        while fifo and current.get(fifo[0][2]) != fifo[0][1]:
            fifo.popleft()
        return fifo[0] if fifo else None

    def _live(self) -> list[tuple[float, int, str]]:
        """The time entries that are their job's current one, in no particular order."""
        return self._kept(itertools.chain(self._later, self._ready_at, *self._fresh.values()))

    def _compact_if_stale(self) -> None:
        """Drop every stale entry once they outnumber the live ones (amortised O(1) a call)."""
        entries = len(self._later) + len(self._ready_at)
        entries += sum(map(len, self._ready.values())) + sum(map(len, self._fresh.values()))
        if entries > 4 * len(self._current) + 2:  # a live job has one or two entries
            fresh = {key: deque(self._kept(fifo)) for key, fifo in self._fresh.items()}
            self._fresh = {key: fifo for key, fifo in fresh.items() if fifo}
            self._later, self._ready_at = self._kept(self._later), self._kept(self._ready_at)
            ready = {name: self._kept(heap) for name, heap in self._ready.items()}
            self._ready = {name: heap for name, heap in ready.items() if heap}
            heapq.heapify(self._later)
            heapq.heapify(self._ready_at)
            for heap in self._ready.values():
                heapq.heapify(heap)

    def _kept(self, entries: Iterable[_Entry]) -> list[_Entry]:
        """The live ones of ``entries``, in their order."""
        current = self._current
        return [entry for entry in entries if current.get(entry[-1]) == entry[-2]]

    def _holder(self, lease: Lease) -> Job:
        """The job's record if ``lease`` is its current lease; else raise StaleLeaseError."""
        return check_holder(lease, self._jobs.get(lease.job.id), self._tokens.get(lease.job.id))

    # -- the dashboard's reads (ShowsOverview) ------------------------------------------

    def census(self, *, exact_up_to: int = EXACT_UP_TO) -> Census:
        """The jobs by type and state now; every count exact (memory is read, not a table).

        ``exact_up_to`` is accepted for the contract and changes nothing here.
        """
        check_count("exact_up_to", exact_up_to)
        now = self.clock.now()
        states = [(job, live_state(job, now)) for job in self._jobs.values()]
        rows = [(state, job.queue, job.type, 1) for job, state in states]
        rows += [("dead", letter.job.queue, letter.job.type, 1) for letter in self._dead.values()]
        rows += [
            ("cancelled", kept.job.queue, kept.job.type, 1)
            for kept in self._finished
            if kept.outcome == "cancelled"
        ]
        ages = [now - job.visible_at() for job, state in states if state == "waiting"]
        enqueued = [
            now - (job.run_at if job.enqueued_at is None else job.enqueued_at)
            for job, state in states
            if state != "leased"
        ]
        by_type, by_queue = tally_by_queue(rows)
        return Census(
            at=now,
            by_type=by_type,
            by_queue=by_queue,
            estimated=frozenset(),
            oldest_waiting_age_s=max(ages, default=0.0),
            oldest_enqueued_age_s=max(enqueued, default=0.0),
        )

    def leased_jobs(self, limit: int) -> list[Job]:
        """Up to ``limit`` jobs under an unexpired lease, the lease that ends first first.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        check_count("limit", limit)
        now = self.clock.now()
        leased = [job for job in self._jobs.values() if live_state(job, now) == "leased"]
        return heapq.nsmallest(limit, leased, key=lambda job: (job.leased_until, job.id))

    def newest_dead_letters(self, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` dead letters, the latest death first.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        check_count("limit", limit)
        return heapq.nlargest(limit, self._dead.values(), key=lambda dead: (dead.died_at, dead.job.id))

    def outcome_sums(self, since: int, until: int) -> OutcomeSums:
        """The outcomes of the seconds ``since`` to ``until`` (both in), by second and by key."""
        return self._outcomes.sums(since, until)
