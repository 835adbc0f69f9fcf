"""The contract every queue backend keeps, and the optional abilities a backend may add.

:class:`Queue` is what the in-memory :class:`~jobqueue.backends.memory.JobQueue`, the DuckDB
:class:`~jobqueue.backends.duckdb.DurableQueue` and the PostgreSQL
:class:`~jobqueue.backends.postgres.PostgresQueue` all offer; workers, runners and the command
line accept any of them. A backend that can do more says so by having the members of
an ability protocol (:class:`AcksAndClaims`, :class:`ClaimsAhead`, :class:`WaitsForWork`,
:class:`NamesServer`, :class:`ShowsOverview`, :class:`ReportsCleanup`); callers test for an
ability with ``isinstance``, which mypy follows, instead of probing with ``getattr`` (as
Oban's engine declares its optional callbacks). The small functions at the end are the
checks and messages every backend shares, so that a bad argument or a stale lease reads
the same whatever the storage.

Introduced in lesson 03 (the queue); the abilities in lessons 11 and 12.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar, runtime_checkable

from jobqueue.census import EXACT_UP_TO, Census
from jobqueue.cleanup import WARN_AFTER_S, CleanupReport
from jobqueue.clock import Clock
from jobqueue.errors import InvalidSettingError, StaleLeaseError
from jobqueue.job import (
    DEFAULT_QUEUE,
    DeadLetter,
    FinishedJob,
    Job,
    JobType,
    Lease,
    check_count,
    check_job_id,
    check_positive_seconds,
    check_queue_name,
)
from jobqueue.metrics import DEFAULT_WINDOW_S, OutcomeSums, QueueMetrics

P = TypeVar("P")

DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
"""How long a claimed job stays hidden from other workers, in seconds (SQS's default)."""

JobIds = Sequence[str] | None
"""The ids of the jobs ``enqueue_many`` adds, one per payload, or ``None`` for fresh ids."""

JobTypes = Collection[str] | None
"""The job type names a claim may take (``None``: any type); see :func:`check_types`."""

QueueNames = Collection[str] | None
"""The named queues a claim may take from (``None``: every queue); see :func:`check_queues`."""

FailOutcome = Literal["retry", "dead", "cancelled"]
"""What :meth:`Queue.fail` did with the job: waiting to run again, dead-lettered, or
finished as cancelled (someone cancelled it while it was leased: no retry)."""

CancelOutcome = Literal["cancelled", "cancelling", "dead", "done"]
"""What :meth:`Queue.cancel` found or did.

``"cancelled"``: the job is finished as cancelled (it was waiting or scheduled, and is
now kept with the finished jobs; or it was cancelled before). ``"cancelling"``: the job
is leased; it is marked, and its holder's ack or fail will finish it as cancelled.
``"dead"`` and ``"done"``: the job had already ended (a dead letter, or a finished job
kept by ``retain_s``), and nothing changed.
"""


@dataclass(frozen=True, kw_only=True)
class Failed:
    """What :meth:`Queue.fail` did with a failed attempt.

    Attributes:
        outcome: ``"retry"`` (waiting again), ``"dead"`` (moved to the dead letters) or
            ``"cancelled"`` (the job was cancelled while leased: finished, no retry).
        run_at: for a retry, when the job is due again (seconds on the queue's clock);
            ``None`` when dead.
        error: the reason stored as the job's ``last_error`` (``"ErrorClass: message"``,
            or the message given).

    ``str()`` gives the outcome alone (``"retry"``), as a log line shows it. Introduced in
    lesson 03; ``run_at`` spares a worker from reading the job again to learn it.
    """

    outcome: FailOutcome
    run_at: float | None
    error: str

    def __str__(self) -> str:
        return self.outcome


class Queue(Protocol):
    """What every job queue of this package offers, whatever keeps its jobs.

    The methods keep the same promises in every backend (:mod:`jobqueue.testing.contract`
    checks them against each); the docstrings of :class:`~jobqueue.backends.memory.JobQueue` give
    the details. Workers (:class:`jobqueue.worker.Worker`, :class:`jobqueue.runner.Runner`)
    accept any of them.
    """

    @property
    def clock(self) -> Clock:
        """Where the queue reads the time (seconds)."""

    @property
    def visibility_timeout_s(self) -> float:
        """How long a claim hides a job, in seconds."""

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
        """Add one job to ``queue``, waiting from now; a held id (see ``unique_for_s``) adds nothing."""

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
        """Add several jobs of one type to ``queue``; all or none if a payload is invalid."""

    def claim(self, *, types: JobTypes = None, queues: QueueNames = None) -> Lease | None:
        """Lease the due job of highest priority claimable longest, or ``None``; filtered as claim_many."""

    def claim_many(self, limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        """Lease up to ``limit`` due jobs, only of the job types ``types`` and from ``queues`` if given."""

    def ack(self, lease: Lease) -> None:
        """Mark a leased job done; ``StaleLeaseError`` if the lease is stale."""

    def ack_many(self, leases: Sequence[Lease]) -> list[Lease]:
        """Ack every lease still held; return the stale ones."""

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> Failed:
        """Record a failed attempt: a retry after the backoff (or Retry-After), or dead."""

    def extend_lease(self, lease: Lease, by_s: float | None = None) -> Lease:
        """Push a lease's end to ``now + by_s`` seconds (heartbeat)."""

    def release(self, lease: Lease, *, delay_s: float = 0.0) -> Job:
        """Give a claimed job back unrun, due after ``delay_s`` seconds, the attempt not counted."""

    def snooze(self, lease: Lease, *, delay_s: float) -> Job | None:
        """Give a claimed job back for ``delay_s``, the attempt not counted; ``None`` past the limit."""

    def cancel(self, job_id: str) -> CancelOutcome:
        """Cancel a job: at once if waiting, at its ack or fail if leased; ``JobNotFoundError`` if unknown."""

    def replay(self, job_id: str) -> Job:
        """Move a dead job back to waiting with a fresh attempt budget (and deadline)."""

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


@runtime_checkable
class AcksAndClaims(Protocol):
    """A queue that acks finished jobs and claims new ones in one transaction (one commit).

    :class:`~jobqueue.backends.duckdb.DurableQueue` has it; a :class:`~jobqueue.worker.Worker` uses
    it when present, else :func:`ack_then_claim`. Introduced in lesson 11.
    """

    def ack_and_claim(
        self, leases: Sequence[Lease], limit: int, *, types: JobTypes = None, queues: QueueNames = None
    ) -> tuple[list[Lease], list[Lease]]:
        """Ack ``leases``, claim up to ``limit`` jobs (``types``, ``queues``): ``(stale, claimed)``."""


@runtime_checkable
class CallsBlock(Protocol):
    """A queue whose calls wait on a server: a Worker makes them in threads, off its event loop.

    While a call waits (a lock held elsewhere, a slow network, a server gone), handlers and
    heartbeats on the event loop go on. :class:`~jobqueue.backends.postgres.PostgresQueue`
    has it. Introduced in lesson 12.
    """

    def calls_block(self) -> bool:
        """Whether calls should run in threads now; ``False`` (a demo's manual clock): in the caller's."""


@runtime_checkable
class ClaimsAhead(Protocol):
    """A queue whose calls cost so much that a runner should claim at least this many jobs at once.

    Introduced in lesson 11 (:class:`~jobqueue.backends.duckdb.DurableQueue`).
    """

    @property
    def claim_batch(self) -> int:
        """Jobs a :class:`~jobqueue.runner.Runner` claims ahead by default, at least."""


@runtime_checkable
class WaitsForWork(Protocol):
    """A queue that can say when a job arrives, so an idle runner need not wait for its poll.

    Introduced in lesson 12 (:class:`~jobqueue.backends.postgres.PostgresQueue`: LISTEN/NOTIFY).
    """

    async def wait_for_work(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` seconds for work; ``True`` if some may have arrived."""


@runtime_checkable
class NamesServer(Protocol):
    """A queue on a database server, which log lines name (never with a password).

    Introduced in lesson 12.
    """

    @property
    def server(self) -> str:
        """The server and database, e.g. ``"PostgreSQL at db:5432, database shop"``."""


def ack_then_claim(
    queue: Queue, leases: Sequence[Lease], limit: int, *, types: JobTypes = None, queues: QueueNames = None
) -> tuple[list[Lease], list[Lease]]:
    """Ack ``leases`` (all succeeded) with :meth:`Queue.ack_many`, then claim up to ``limit`` jobs.

    What a :class:`~jobqueue.worker.Worker` does for a queue without :class:`AcksAndClaims`
    (with it, the queue's own ``ack_and_claim`` does both in one transaction). Either way
    an ack is written before the claim that follows it, so a crash between them can only
    make a finished job run again.

    Returns:
        ``(stale, claimed)``: the leases no longer held, and the new leases (only of the
        job types ``types`` and from the named queues ``queues``, if given).

    Raises:
        InvalidSettingError: if ``limit`` is not an int >= 0, ``types`` is not a
            collection of job type names, or ``queues`` not one of queue names.
    """
    check_count("limit", limit, least=0)
    check_types(types)
    check_queues(queues)
    stale = queue.ack_many(leases) if leases else []
    return stale, queue.claim_many(limit, types=types, queues=queues) if limit else []


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
    if current == lease.token and job.fencing_token != lease.job.fencing_token:
        return StaleLeaseError(
            f"lease {lease.token} on job {job_id!r} (fencing token {lease.job.fencing_token}) is stale:"
            f" a later claim holds the same lease token with fencing token {job.fencing_token}"
            " (a claim lost in a server crash handed the token out again)"
        )
    held = f"held now as {current} (attempt {job.attempts})" if current else "not leased now"
    return StaleLeaseError(
        f"lease {lease.token} on job {job_id!r} (attempt {lease.job.attempts}) is stale: the job is {held}"
    )


def check_holder(lease: Lease, job: Job | None, current: str | None) -> Job:
    """Return ``job`` if ``lease`` is its current lease (``current``: its token now; same fencing token).

    Raises:
        StaleLeaseError: saying why (see :func:`stale_lease`), if it is not.
    """
    if job is None or current != lease.token or job.fencing_token != lease.job.fencing_token:
        raise stale_lease(lease, job, current)
    return job


def not_acked(leases: Sequence[Lease], acked: set[str]) -> list[Lease]:
    """The leases of ``leases`` whose ack did not happen: the database queues' ``ack_many`` result.

    Args:
        leases: the leases passed to ``ack_many``, in order.
        acked: the tokens whose jobs the ack deleted; used up by this call.

    A lease passed twice counts once: its later copies are stale, as the job is gone.
    """
    stale = []
    for lease in leases:
        if lease.token in acked:
            acked.discard(lease.token)  # a later copy finds the job gone
        else:
            stale.append(lease)
    return stale


def check_delay_s(delay_s: float) -> float:
    """Return ``delay_s`` if it is a finite number of seconds >= 0; every queue's ``release`` calls it.

    Raises:
        InvalidSettingError: naming the bad value.
    """
    return check_seconds("delay_s", delay_s)


def check_seconds(name: str, value: float) -> float:
    """Return ``value`` as a float if it is a finite number of seconds >= 0.

    Raises:
        InvalidSettingError: naming ``name`` and the bad value.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value >= 0)
    ):
        raise InvalidSettingError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_dead_retain_s(dead_retain_s: float | None) -> float | None:
    """Return ``dead_retain_s`` as a float if it is a finite number of seconds > 0, or ``None`` (keep).

    Every queue's constructor calls it; see :data:`~jobqueue.backends.rules.DEAD_RETAIN_S`.

    Raises:
        InvalidSettingError: naming the bad value (0, negative, NaN, infinite, not a number).
    """
    if dead_retain_s is None:
        return None
    return float(check_positive_seconds("dead_retain_s", dead_retain_s))


def check_unique_for_s(unique_for_s: float | None) -> float | None:
    """Return ``unique_for_s`` as a float (or ``None``) if it is ``None`` or a finite number of seconds >= 0.

    Every queue's ``enqueue_many`` calls it before storing anything.

    Raises:
        InvalidSettingError: naming the bad value (negative, NaN, infinite, not a number).
    """
    return None if unique_for_s is None else check_seconds("unique_for_s", unique_for_s)


def check_types(types: JobTypes) -> frozenset[str] | None:
    """The job type names of a claim's filter as a set, or ``None`` for any type.

    Every queue's ``claim_many`` calls it. A worker claims only the types it has handlers
    for (as graphile-worker's ``task_identifiers``), so that during a rolling deploy a
    worker of the old version never takes a job type only the new version knows. An empty
    collection claims nothing.

    Raises:
        InvalidSettingError: if ``types`` is a single str (not a collection of names), or a
            name in it is not a non-empty str (naming it).

    Introduced with claim filters (issue 21, rolling deploys).
    """
    if types is None:
        return None
    if isinstance(types, str | bytes) or not isinstance(types, Collection):
        raise InvalidSettingError(f"types must be a collection of job type names, got {types!r}")
    for name in types:
        if not isinstance(name, str) or not name:
            raise InvalidSettingError(f"types must hold non-empty job type names, got {name!r}")
    return frozenset(types)


def check_queues(queues: QueueNames) -> frozenset[str] | None:
    """The queue names of a claim's filter as a set, or ``None`` for every queue.

    Every queue's ``claim_many`` calls it. A :class:`~jobqueue.runner.Runner` given
    ``queues={"emails": 10, "reports": 2}`` claims for each queue apart, with its own
    slots (Sidekiq's and Oban's queues), so a backlog of slow reports cannot take the
    slots of the e-mails. An empty collection claims nothing.

    Raises:
        InvalidSettingError: if ``queues`` is a single str (not a collection of names), or a
            name in it cannot name a queue (see :func:`~jobqueue.job.check_queue_name`).

    Introduced with named queues (issue 24).
    """
    if queues is None:
        return None
    if isinstance(queues, str | bytes) or not isinstance(queues, Collection):
        raise InvalidSettingError(f"queues must be a collection of queue names, got {queues!r}")
    for name in queues:
        check_queue_name(name)
    return frozenset(queues)


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


@runtime_checkable
class ShowsOverview(Protocol):
    """A queue that answers a dashboard's reads, each without reading every job where it can help it.

    :func:`jobqueue.overview.snapshot` builds the dashboard's picture from these reads; all
    three backends have them. A database queue counts a state one by one up to
    ``exact_up_to`` jobs, and past that may estimate it (:attr:`Census.estimated`).
    Introduced with the dashboard.
    """

    def census(self, *, exact_up_to: int = EXACT_UP_TO) -> Census:
        """The jobs by type and state now, and the oldest waiting job's age."""

    def leased_jobs(self, limit: int) -> list[Job]:
        """Up to ``limit`` jobs under an unexpired lease, the lease that ends first first."""

    def newest_dead_letters(self, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` dead letters, the latest death first."""

    def outcome_sums(self, since: int, until: int) -> OutcomeSums:
        """The outcomes of the seconds ``since`` to ``until`` (both in), by second and by key.

        See :class:`~jobqueue.metrics.OutcomeSums`: the dashboard's chart reads the first,
        its tables the second.
        """


@runtime_checkable
class KeepsFinished(Protocol):
    """A queue that keeps finished jobs for ``retain_s`` seconds (0: not at all), to look at what ran.

    Dead letters are kept ``dead_retain_s`` seconds after they died. All three backends
    have it. Introduced with retention (issue 24).
    """

    @property
    def retain_s(self) -> float:
        """How long a finished job is kept, in seconds; 0 deletes it at its ack."""

    @property
    def dead_retain_s(self) -> float | None:
        """How long a dead letter is kept after it died, in seconds; ``None``: until replayed or discarded."""

    def finished(self, limit: int = 100) -> list[FinishedJob]:
        """Up to ``limit`` finished jobs kept, the latest first."""


@runtime_checkable
class ReportsCleanup(Protocol):
    """A queue on a database whose cleanup (vacuum) other sessions' transactions can hold back.

    :class:`~jobqueue.backends.postgres.PostgresQueue` has it; ``jobqueue stats`` and the
    dashboard show its report. Introduced in lesson 16.
    """

    def cleanup_held_back(self, *, warn_after_s: float = WARN_AFTER_S) -> CleanupReport:
        """The oldest transaction holding back cleanup, and the queue table's dead rows."""
