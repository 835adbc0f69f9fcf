"""What the two SQL backends share: the contract's methods, written once above their stores.

:class:`SqlQueue` is the base of :class:`~jobqueue.backends.duckdb.DurableQueue` and
:class:`~jobqueue.backends.postgres.PostgresQueue`. It asks :mod:`jobqueue.backends.rules`
what a failure, a release or a replay does, runs the statement of the same name from its
backend's ``.sql`` file (``self.sql``, whose blocks share their names) and reads the rows
back through :mod:`jobqueue.backends.rows`. A backend adds only what its database makes
different: how it connects and commits, how it enqueues, claims and acks (its hot paths,
tuned to its database), and how it writes what a failure, a replay or an unreadable row
leads to (one table in PostgreSQL, a table of jobs and one of dead letters in DuckDB).

Introduced in lesson 11 (DuckDB); PostgreSQL in lesson 12.
"""

from __future__ import annotations

import random as _random
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self, TypedDict

from jobqueue.backends import rules
from jobqueue.backends.contract import (
    DEFAULT_VISIBILITY_TIMEOUT_S,
    CancelOutcome,
    Failed,
    JobTypes,
    QueueNames,
    check_dead_retain_s,
    check_delay_s,
    check_holder,
    check_seconds,
    not_acked,
)
from jobqueue.backends.rows import EXTENDED, FINISHED, HOLDER, JOB, Columns, read_dead, salvage
from jobqueue.backoff import RandomFn
from jobqueue.clock import Clock, SystemClock
from jobqueue.errors import CorruptJobError, DeadLetterNotFoundError, JobNotFoundError
from jobqueue.job import (
    DeadLetter,
    FinishedJob,
    Job,
    Lease,
    RetryPolicy,
    check_count,
    check_job_id,
    check_positive_seconds,
    check_retry,
)
from jobqueue.metrics import (
    DEFAULT_WINDOW_S,
    OutcomeSums,
    PendingOutcomes,
    QueueMetrics,
    bucket,
    check_window,
    outcome_key,
)


class QueueOptions(TypedDict, total=False):
    """The settings of a SQL queue besides where its database is; see :class:`SqlQueue`."""

    clock: Clock | None
    visibility_timeout_s: float
    retry: RetryPolicy | None
    random: RandomFn
    retain_s: float
    dead_retain_s: float | None


class SqlQueue(ABC):
    """A job queue whose jobs are rows of a SQL database; see the module docstring.

    Args:
        sql: the backend's statements by block name (:func:`jobqueue.backends.sql.load`).
        clock: where the queue reads the time; default :class:`SystemClock` (seconds
            since the epoch).
        visibility_timeout_s: how long a claim hides a job, in seconds (> 0).
        retry: retry policy of job types that do not bring their own.
        random: source of jitter for retry delays, returning floats in ``[0, 1]``.
        retain_s: how long acked jobs are kept in ``jobqueue_finished``, in seconds;
            default 0, deleted at the ack (see :class:`~jobqueue.backends.memory.JobQueue`).
        dead_retain_s: how long a dead letter is kept after it died, in seconds (> 0);
            default :data:`~jobqueue.backends.rules.DEAD_RETAIN_S`, 7 days (River's
            ``DiscardedJobRetentionPeriod`` is 7 days too); ``None`` keeps dead letters
            until replayed or discarded (see :class:`~jobqueue.backends.memory.JobQueue`).

    Raises:
        InvalidSettingError: if ``visibility_timeout_s`` is not a finite number > 0,
            ``retry`` is not a :class:`RetryPolicy`, ``retain_s`` is not a finite
            number >= 0, or ``dead_retain_s`` is neither ``None`` nor a finite number > 0.

    Every method is one transaction; calls are serialised by one lock, so threads and the
    tasks of an event loop may share the queue. Introduced in lesson 11.
    """

    def __init__(
        self,
        sql: Mapping[str, str],
        *,
        clock: Clock | None = None,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        random: RandomFn = _random.random,
        retain_s: float = 0.0,
        dead_retain_s: float | None = rules.DEAD_RETAIN_S,
    ) -> None:
        self.retain_s = check_seconds("retain_s", retain_s)
        self.dead_retain_s = check_dead_retain_s(dead_retain_s)
        self._pruned_at: float | None = None
        self.visibility_timeout_s = check_positive_seconds("visibility_timeout_s", visibility_timeout_s)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.retry = check_retry(retry)
        self.sql = sql
        self._random = random
        self._lock = threading.RLock()
        self._outcomes = PendingOutcomes(self._lock)  # counted, not yet in jobqueue_outcomes
        self._closed = False

    # -- what each backend provides --------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Write pending counts and close the database; closing twice is harmless."""

    @abstractmethod
    def _connection(self) -> AbstractContextManager[Any]:
        """The connection, under the queue's lock, for statements that each commit on their own."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """The connection inside one transaction: committed at the end, or rolled back."""

    @abstractmethod
    def _delete_acked(self, con: Any, leases: Sequence[Lease], now: float) -> set[str]:
        """Delete the jobs still held under ``leases``; return the tokens acked.

        With ``retain_s`` > 0, the rows go to ``jobqueue_finished`` first, done at ``now``.
        """

    @abstractmethod
    def _store_failure(self, con: Any, lease: Lease, failed: Failed, now: float) -> None:
        """Inside a transaction, store what ``failed`` says of the leased job: a retry, or dead at ``now``."""

    @abstractmethod
    def _finish_cancelled(self, con: Any, leases: Sequence[Lease], now: float, error: str | None) -> set[str]:
        """Inside a transaction, finish the jobs held under ``leases`` and cancelled while leased.

        They move to ``jobqueue_finished`` as ``"cancelled"`` at ``now``, ``error`` (if not
        ``None``) as their ``last_error``. Returns the tokens of the jobs finished.
        """

    @abstractmethod
    def _mark_cancelled(self, con: Any, job_id: str) -> None:
        """Inside a transaction, mark the leased job ``job_id`` cancelled."""

    @abstractmethod
    def _cancel_waiting(self, con: Any, job_id: str, now: float) -> None:
        """Inside a transaction, move the waiting job ``job_id`` to ``jobqueue_finished`` as cancelled."""

    @abstractmethod
    def _store_replay(self, con: Any, job: Job) -> Sequence[Any]:
        """Inside the replay's transaction, store the replayed ``job`` as waiting; return its row."""

    @abstractmethod
    def _bury_corrupt(self, con: Any, job: Job, now: float) -> None:
        """Dead-letter the live job whose row could not be read, as its salvaged stand-in ``job``."""

    # -- the contract, once ------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @abstractmethod
    def claim_many(self, limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        """Lease up to ``limit`` due jobs (of ``types``, from ``queues``); see :meth:`JobQueue.claim_many`."""

    def claim(self, *, types: JobTypes = None, queues: QueueNames = None) -> Lease | None:
        """Lease the job that has been claimable longest, or ``None``; see :meth:`JobQueue.claim`."""
        leases = self.claim_many(1, types=types, queues=queues)
        return leases[0] if leases else None

    def ack(self, lease: Lease) -> None:
        """Mark the leased job done: its row is deleted (kept, with ``retain_s``); see :meth:`JobQueue.ack`.

        The ack statement leaves a job cancelled while leased alone; only then (or for a
        stale lease) does a second transaction look again, and finish it as cancelled.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
        """
        now = self.clock.now()
        with self._transaction() if self._ack_writes_twice([lease]) else self._connection() as con:
            acked = self._finish(con, [lease], now)  # committed on its own (kept and deleted at once)
        if acked:
            self._outcomes.record(now, {outcome_key(lease.job): 1}, failed=False, store=self._store_outcomes)
            return
        with self._transaction() as con:
            if not (self._may_be_cancelled([lease]) and self._cancelled_finished(con, [lease], now, None)):
                self._check_holder(con, lease)  # raises StaleLeaseError, saying why

    def ack_many(self, leases: Sequence[Lease]) -> list[Lease]:
        """Ack every lease still held, in one statement; return the stale ones.

        A stale lease changes nothing and does not stop the others being acked. A lease
        passed twice is acked once; its second copy is stale, as with :meth:`JobQueue.ack_many`.
        """
        if not leases:
            return []
        now = self.clock.now()
        with self._transaction() if self._ack_writes_twice(leases) else self._connection() as con:
            acked = self._finish(con, leases, now)
        return self._count_acked(leases, acked)

    def _ack_writes_twice(self, leases: Sequence[Lease]) -> bool:
        """Whether acking ``leases`` takes more than one statement, so a transaction.

        With ``retain_s`` (a copy to ``jobqueue_finished`` on DuckDB), or for a job enqueued
        with a unique window (``hold_finished``); without either an ack is one statement.
        """
        return bool(self.retain_s) or any(lease.job.unique_for_s is not None for lease in leases)

    def _finish(self, con: Any, leases: Sequence[Lease], now: float) -> set[str]:
        """Ack the jobs held under ``leases`` at ``now``; return the tokens acked.

        Every :data:`~jobqueue.backends.rules.PRUNE_EVERY_S` seconds the ack also deletes up
        to :data:`~jobqueue.backends.rules.PRUNE_BATCH` finished jobs kept longer than
        ``retain_s`` (with ``retain_s`` 0, those a past setting kept), as many dead letters
        that died longer than ``dead_retain_s`` ago (:meth:`_prune_dead`), and as many ids
        whose unique window has ended.
        """
        acked = self._delete_acked(con, leases, now)
        windowed = [
            lease.job.id for lease in leases if lease.job.unique_for_s is not None and lease.token in acked
        ]
        if windowed:
            self._hold_finished(con, windowed, now)
        if rules.prune_due(now, self._pruned_at):
            self._pruned_at = now
            before = {
                "before": rules.prune_before(now, self.retain_s),
                "cancelled_before": rules.prune_cancelled_before(now, self.retain_s),
            }
            con.execute(self.sql["prune_finished"], before | {"limit": rules.PRUNE_BATCH})
            dead_before = rules.prune_dead_before(now, self.dead_retain_s)
            if dead_before is not None:
                self._prune_dead(con, dead_before)
            con.execute(self.sql["prune_held"], {"before": now, "limit": rules.PRUNE_BATCH})
        return acked

    def _prune_dead(self, con: Any, before: float) -> None:
        """Delete up to PRUNE_BATCH dead letters that died before ``before``, oldest death first.

        The rows :func:`~jobqueue.backends.rules.is_dead_pruned` picks. Each frees its id as
        a discard does: a unique window then counts from its death (``prune_dead`` starts
        it in the same statement on PostgreSQL).
        """
        con.execute(self.sql["prune_dead"], {"before": before, "limit": rules.PRUNE_BATCH})

    def _cancelled_finished(
        self, con: Any, leases: Sequence[Lease], now: float, error: str | None
    ) -> set[str]:
        """Inside a transaction: :meth:`_finish_cancelled`, and the unique windows of the jobs finished."""
        finished = self._finish_cancelled(con, leases, now, error)
        if finished:
            self._hold_finished(con, [lease.job.id for lease in leases if lease.token in finished], now)
        return finished

    def _hold_finished(self, con: Any, ids: Sequence[str], now: float) -> None:
        """Inside the transaction that finishes the jobs ``ids`` at ``now``: start their unique windows.

        Every way a job enqueued with a window finishes (an ack, a cancel, a discard from the
        dead letters) goes through here; a job without a window has no row to change.
        """
        con.execute(self.sql["hold_finished"], {"ids": list(ids), "now": now})

    def _held(self, con: Any, ids: Sequence[str], now: float) -> dict[str, Job]:
        """The ids of ``ids`` a unique window holds at ``now``, each with what is kept of its job.

        That is its id, type and payload: the record an enqueue of a held id returns once
        the job is gone.
        """
        rows = con.execute(self.sql["held"], {"ids": list(ids), "now": now}).fetchall()
        return {job_id: Job(id=job_id, type=kind, payload=payload) for job_id, kind, payload in rows}

    def finished(self, limit: int = 100) -> list[FinishedJob]:
        """Up to ``limit`` finished jobs kept (acked with ``retain_s``, and cancelled), the latest first.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        with self._connection() as con:
            rows = con.execute(self.sql["finished"], {"limit": check_count("limit", limit)}).fetchall()
        return [
            FinishedJob(
                job=FINISHED.read(row),
                outcome=FINISHED.value(row, "outcome"),
                finished_at=float(FINISHED.value(row, "finished_at")),
            )
            for row in rows
        ]

    def _count_acked(self, leases: Sequence[Lease], acked: set[str]) -> list[Lease]:
        """Count the committed acks (the tokens ``acked``) of ``leases``; return the stale leases.

        The leases the ack left alone are looked at again, in a transaction of their own, only
        if there are any (rare): those of jobs cancelled while leased are finished as
        cancelled (not counted as done), and the others are stale.
        """
        now = self.clock.now()
        # by token first: a lease passed twice is acked (and counted) once
        keys = {lease.token: outcome_key(lease.job) for lease in leases if lease.token in acked}
        done = Counter(keys.values())
        self._outcomes.record(now, done, failed=False, store=self._store_outcomes)
        stale = not_acked(leases, acked)
        if stale and self._may_be_cancelled(stale):
            with self._transaction() as con:
                cancelled = self._cancelled_finished(con, stale, now, None)
            stale = [lease for lease in stale if lease.token not in cancelled]
        return stale

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> Failed:
        """Record a failed attempt: retry after a delay, or dead; see :meth:`JobQueue.fail`.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease; nothing
                changes.
            InvalidSettingError: if ``error`` is neither an exception nor a str.
        """
        with self._transaction() as con:
            job, cancelled = self._holder_state(con, lease)
            now = self.clock.now()
            failed = rules.fail(
                job, error, permanent=permanent, now=now, random=self._random, cancelled=cancelled
            )
            if failed.outcome == "cancelled":
                self._cancelled_finished(con, [lease], now, failed.error)
                return failed  # not counted as a failure
            self._store_failure(con, lease, failed, now)
        # Counted once committed: a rollback counts nothing.
        self._outcomes.record(
            self.clock.now(), {outcome_key(lease.job): 1}, failed=True, store=self._store_outcomes
        )
        return failed

    def extend_lease(self, lease: Lease, by_s: float | None = None) -> Lease:
        """Heartbeat: push the lease's end to ``now + by_s``; see :meth:`JobQueue.extend_lease`.

        One statement, which changes the row only while ``lease`` is its current lease.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease.
            InvalidSettingError: if ``by_s`` is not a finite number > 0.
        """
        extra_s = self.visibility_timeout_s if by_s is None else check_positive_seconds("by_s", by_s)
        with self._connection() as con:
            held = self._held_by(lease) | {"until": self.clock.now() + extra_s}
            rows = con.execute(self.sql["extend"], held).fetchall()
            if not rows:
                self._check_holder(con, lease)  # raises StaleLeaseError, saying why
        row = rows[0]
        return Lease(job=EXTENDED.read(row), token=lease.token, cancelled=EXTENDED.value(row, "cancelled"))

    def release(self, lease: Lease, *, delay_s: float = 0.0) -> Job:
        """Give a claimed job back unrun, due in ``delay_s``; see :meth:`JobQueue.release`.

        One statement, which changes the row only while ``lease`` is its current lease (so
        ``lease.job`` is the record :func:`jobqueue.backends.rules.release` starts from).

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease.
            InvalidSettingError: if ``delay_s`` is not a finite number >= 0.
        """
        given_back = rules.release(lease.job, now=self.clock.now(), delay_s=check_delay_s(delay_s))
        values = {"attempts": given_back.attempts, "run_at": given_back.run_at} | self._release_extras(
            delay_s
        )
        with self._connection() as con:
            rows = con.execute(self.sql["release"], values | self._held_by(lease))
            found = rows.fetchall()
            if not found:
                self._check_holder(con, lease)  # raises StaleLeaseError, saying why
        return JOB.read(found[0])

    def snooze(self, lease: Lease, *, delay_s: float) -> Job | None:
        """Give a claimed job back for ``delay_s`` unless out of snoozes; see :meth:`JobQueue.snooze`.

        One statement, which changes the row only while ``lease`` is its current lease and
        the row's ``snoozes`` count is below :data:`~jobqueue.backends.rules.MAX_SNOOZES`.

        Raises:
            StaleLeaseError: if ``lease`` is no longer the job's current lease.
            InvalidSettingError: if ``delay_s`` is not a finite number >= 0.
        """
        given_back = rules.release(lease.job, now=self.clock.now(), delay_s=check_delay_s(delay_s))
        values = {"attempts": given_back.attempts, "run_at": given_back.run_at, "most": rules.MAX_SNOOZES}
        with self._connection() as con:
            found = con.execute(self.sql["snooze"], values | self._held_by(lease)).fetchall()
            if not found:
                self._check_holder(con, lease)  # raises StaleLeaseError, saying why
                return None  # held, so its snoozes are used up
        return JOB.read(found[0])

    def cancel(self, job_id: str) -> CancelOutcome:
        """Cancel a job: a waiting one now, a leased one at its ack or fail; see :meth:`JobQueue.cancel`.

        One transaction: the job's row is read (locked, on PostgreSQL, so a claim running
        at the same moment either leased it first, and the cancel marks it, or finds it
        gone), :func:`jobqueue.backends.rules.cancel` decides, and the row is marked or
        moved to ``jobqueue_finished``. A job no longer live is looked up among the dead
        letters and the kept finished jobs (by id, without an index: cancel is no hot path).

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id.
            JobNotFoundError: naming ``job_id``, if no job with that id is live, dead or kept.
        """
        check_job_id(job_id)
        with self._transaction() as con:
            now = self.clock.now()
            found = con.execute(self.sql["cancel_lock"], {"id": job_id}).fetchall()
            if found:
                outcome = rules.cancel(leased=bool(found[0][0]))
                if outcome == "cancelled":
                    self._cancel_waiting(con, job_id, now)
                    self._hold_finished(con, [job_id], now)
                else:
                    self._mark_cancelled(con, job_id)
                return outcome
            ended = con.execute(self.sql["ended"], {"id": job_id}).fetchall()
        if not ended:
            raise JobNotFoundError(f"no job with id {job_id!r} to cancel: not waiting, leased, dead or kept")
        state: CancelOutcome = ended[0][0]
        return state

    def replay(self, job_id: str) -> Job:
        """Move a dead job back to waiting with a fresh budget; see :meth:`JobQueue.replay`.

        Raises:
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.
        """
        check_job_id(job_id)
        with self._transaction() as con:
            now = self.clock.now()
            found = con.execute(self.sql["dead_letter"], {"id": job_id}).fetchall()
            if not found:
                raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to replay")
            row = self._store_replay(con, rules.replay(read_dead(found[0], now).job, now=now))
        return JOB.read(row)

    def discard(self, job_id: str) -> DeadLetter:
        """Delete a dead letter that has been dealt with, and return it.

        Raises:
            DeadLetterNotFoundError: naming ``job_id``, if no dead job has that id.
        """
        check_job_id(job_id)
        with self._transaction() as con:
            rows = con.execute(self.sql["discard"], {"id": job_id}).fetchall()
            if not rows:
                raise DeadLetterNotFoundError(f"no dead job with id {job_id!r} to discard")
            letter = read_dead(rows[0], self.clock.now())
            if letter.job.unique_for_s is not None:
                self._hold_finished(con, [job_id], letter.died_at)  # a window counts from the death
        return letter

    def get(self, job_id: str) -> Job | None:
        """The record of a waiting or leased job, or ``None`` (done, dead or never seen).

        A row that cannot be read is dead-lettered (:class:`~jobqueue.errors.CorruptJobError`).

        Raises:
            InvalidSettingError: if ``job_id`` cannot be an id (see :func:`check_job_id`).
        """
        jobs = self._select_jobs("get", {"id": check_job_id(job_id)})
        return jobs[0] if jobs else None

    def jobs(self) -> list[Job]:
        """Records of every waiting or leased job, in the order they become claimable.

        Rows that cannot be read are dead-lettered with the reason
        (:class:`~jobqueue.errors.CorruptJobError`) and left out.
        """
        return self._select_jobs("jobs", {})

    def next_visible_at(self) -> float | None:
        """Earliest time (seconds) at which some job can be claimed; ``None`` if empty."""
        with self._connection() as con:
            value = con.execute(self.sql["next_visible_at"]).fetchall()[0][0]
        return None if value is None else float(value)

    def metrics(self, window_s: float = DEFAULT_WINDOW_S) -> QueueMetrics:
        """The numbers to watch now, with the failure rate over the last ``window_s`` seconds.

        ``done`` and ``failed`` add up the counts of every process that shares the
        database, each written within about a second of the outcome (this process's
        are written first).

        Raises:
            InvalidSettingError: if ``window_s`` is not > 0 s or longer than a day.
        """
        check_window(window_s)
        now = self.clock.now()
        self._outcomes.write(now, self._store_outcomes)
        with self._connection() as con:
            found = con.execute(self.sql["metrics"], {"now": now, "since": bucket(now - window_s)})
            row = found.fetchall()[0]
        return QueueMetrics.from_row(now, window_s, row)

    def __len__(self) -> int:
        """Number of waiting or leased jobs (dead ones not included)."""
        with self._connection() as con:
            count: int = con.execute(self.sql["count"]).fetchall()[0][0]
        return count

    # -- the dashboard's reads (ShowsOverview; each backend counts its census itself) -----

    def leased_jobs(self, limit: int) -> list[Job]:
        """Up to ``limit`` jobs under an unexpired lease, the lease that ends first first.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        check_count("limit", limit)
        with self._connection() as con:
            rows = con.execute(self.sql["leased_jobs"], {"now": self.clock.now(), "limit": limit}).fetchall()
        return [JOB.read(row) for row in rows]

    def newest_dead_letters(self, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` dead letters, the latest death first (unreadable ones salvaged, not rewritten).

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1.
        """
        check_count("limit", limit)
        with self._connection() as con:  # nothing is rewritten: no transaction to commit
            rows = con.execute(self.sql["newest_dead_letters"], {"limit": limit}).fetchall()
        now = self.clock.now()
        return [read_dead(row, now) for row in rows]

    def outcome_sums(self, since: int, until: int) -> OutcomeSums:
        """The outcomes of the seconds ``since`` to ``until`` (both in), by second and by key.

        Every process's counts, each written within about a second of the outcome (this
        process's are written first, so the last second is complete). One statement adds
        them up both ways (``outcome_sums`` in the backend's SQL).
        """
        self._outcomes.write(self.clock.now(), self._store_outcomes)
        with self._connection() as con:
            rows = con.execute(self.sql["outcome_sums"], {"since": since, "until": until}).fetchall()
        return OutcomeSums(
            per_second=sorted(
                (int(second), int(done), int(failed))
                for second, _, _, done, failed in rows
                if second is not None
            ),
            per_key=sorted(
                (kind, queue, int(done), int(failed))
                for second, kind, queue, done, failed in rows
                if second is None
            ),
        )

    # -- internals ---------------------------------------------------------------------

    def _held_by(self, lease: Lease) -> dict[str, Any]:
        """The values that name a leased job and its lease in the statements that change it."""
        return {"id": lease.job.id, "token": lease.token}

    def _release_extras(self, delay_s: float) -> dict[str, Any]:
        """Parameters a backend's ``release`` statement takes besides the shared ones (none here)."""
        return {}

    def _check_holder(self, con: Any, lease: Lease) -> Job:
        """The job's record if ``lease`` is its current lease; else raise StaleLeaseError."""
        return self._holder_state(con, lease)[0]

    def _may_be_cancelled(self, leases: Sequence[Lease]) -> bool:
        """Whether a job held under ``leases`` may have been cancelled while leased.

        Asked of the leases an ack left alone, before looking at them again. Here always
        ``True``: another process may have cancelled it. A backend that knows every cancel
        (one process per file) answers exactly, so a stale lease costs no statement more.
        """
        return True

    def _holder_state(self, con: Any, lease: Lease) -> tuple[Job, bool]:
        """The job's record and whether it was cancelled while leased, if ``lease`` is its current lease.

        Raises:
            StaleLeaseError: saying why, if it is not.
        """
        rows = con.execute(self.sql["holder"], {"id": lease.job.id}).fetchall()
        if not rows:
            return check_holder(lease, None, None), False
        row = rows[0]
        job = check_holder(lease, HOLDER.read(row), HOLDER.value(row, "lease_token"))
        return job, bool(HOLDER.value(row, "cancelled"))

    def _select_jobs(self, name: str, params: dict[str, Any]) -> list[Job]:
        """The jobs the SELECT ``name`` finds; rows that cannot be read are dead-lettered instead."""
        query = self.sql[name]
        with self._connection() as con:
            rows = con.execute(query, params).fetchall()
        try:
            return [JOB.job(row) for row in rows]
        except CorruptJobError:  # rare: read again in a transaction that buries the bad rows
            with self._transaction() as con:
                rows = con.execute(query, params).fetchall()
                return self._readable(con, rows, JOB, self.clock.now())

    def _readable(self, con: Any, rows: Sequence[Sequence[Any]], columns: Columns, now: float) -> list[Job]:
        """The jobs of live ``rows`` (of ``columns``), in order; unreadable rows are dead-lettered."""
        jobs = []
        for row in rows:
            try:
                jobs.append(columns.job(row))
            except CorruptJobError as exc:  # rare: one statement each is fine
                self._bury_corrupt(con, salvage(columns.job_row(row), exc), now)
        return jobs

    def _store_outcomes(self, columns: dict[str, list[Any]], before: int) -> None:
        """Add counted outcomes (``count_outcomes``); forget seconds before ``before``."""
        with self._transaction() as con:
            con.execute(self.sql["count_outcomes"], columns)
            con.execute(self.sql["forget_outcomes"], {"before": before})
