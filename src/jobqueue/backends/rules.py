"""The queue's decisions, once, as plain functions: every backend calls them and stores the result.

A backend keeps jobs; it does not decide what becomes of them. What a failure does (retry
or dead letter, and when), what a release does to the attempt count, when a waiting job
must not run (its final lease ran out, or its deadline passed) and what a replay resets
are decided here, from a job's record and the time, with no storage in sight, so each
rule is tested without a database (``tests/test_rules.py``) and a new backend cannot get
one wrong. Which errors rule out a retry, and how long a job waits for an open circuit
breaker, are decided here too, for the worker. The two reasons a claim dead-letters a job
have a SQL twin each (:func:`lease_lost_reason_sql`, :func:`expiry_reason_sql`), for the
SQL backends that dead-letter such jobs inside their claim statement; a test holds each
twin to its function.

Introduced in lesson 03; deadlines in lesson 13; Retry-After and deferral in lesson 14;
retention and cancelling with issue 24.
"""

from __future__ import annotations

import math
from dataclasses import replace

from jobqueue.backends.contract import CancelOutcome, Failed, check_delay_s
from jobqueue.backoff import RandomFn
from jobqueue.errors import (
    CircuitOpenError,
    PayloadError,
    PermanentJobError,
    UnknownJobTypeError,
    describe_failure,
)
from jobqueue.failures import retry_delay_s
from jobqueue.job import DeadLetter, FinishedJob, Job, deadline


def fail(
    job: Job,
    error: BaseException | str,
    *,
    permanent: bool,
    now: float,
    random: RandomFn,
    cancelled: bool = False,
) -> Failed:
    """What a failed attempt of ``job`` leads to: a retry and its time, a dead letter, or cancelled.

    Cancelled if someone cancelled the job while it was leased (``cancelled``): it is
    finished, never retried, whatever the error. Dead if ``permanent`` or the attempt
    was the job's last (``attempts >= max_attempts``), whatever the error. Otherwise the
    job is due again at ``now +`` :func:`jobqueue.failures.retry_delay_s`: the backoff's
    delay for its attempt count (1, 2, 4, 8 s... with the default policy and no jitter),
    or a :class:`~jobqueue.errors.RetryAfterError`'s wait.

    Args:
        job: the job as leased, ``attempts`` counting the attempt that failed.
        error: what the attempt raised, or a message.
        permanent: whether retrying cannot help.
        now: the time of the failure, in seconds.
        random: the queue's source of jitter, returning floats in ``[0, 1]``.
        cancelled: whether the job is marked cancelled (see :func:`cancel`).

    Raises:
        InvalidSettingError: if ``error`` is neither an exception nor a str, or
            ``random()`` returns a value outside ``[0, 1]``.

    Introduced in lesson 03; Retry-After in lesson 14; ``cancelled`` with cancelling.
    """
    message = describe_failure(error)
    if cancelled:
        return Failed(outcome="cancelled", run_at=None, error=message)
    if permanent or job.attempts >= job.max_attempts:
        return Failed(outcome="dead", run_at=None, error=message)
    return Failed(outcome="retry", run_at=now + retry_delay_s(job, error, random), error=message)


def release(job: Job, *, now: float, delay_s: float) -> Job:
    """The record of a leased ``job`` given back unrun: due at ``now + delay_s``, its attempt not counted.

    Raises:
        InvalidSettingError: if ``delay_s`` is not a finite number of seconds >= 0.

    Introduced in lesson 11; ``delay_s`` in lesson 14.
    """
    run_at = now + check_delay_s(delay_s)
    return replace(job, attempts=job.attempts - 1, run_at=run_at, leased_until=None, leased_at=None)


MAX_SNOOZES = 25
"""Times one job may be snoozed (:class:`~jobqueue.errors.Snooze`) without spending an attempt.

The snooze after the last one counts as a failed attempt, so a handler that snoozes
forever still ends in the dead letters; a replay starts the count afresh. (Oban lets a job
snooze without limit and counts each snooze as an attempt; River does not count them.)
"""


def may_snooze(snoozes: int) -> bool:
    """Whether a job snoozed ``snoozes`` times so far may snooze once more without spending an attempt."""
    return snoozes < MAX_SNOOZES


def snooze_failure(snoozes: int) -> str:
    """The ``last_error`` of a job whose snooze came after its ``snoozes`` allowed ones: a failed attempt."""
    return f"Snooze: snoozed {snoozes} times already, the most a job may (MAX_SNOOZES)"


def replay(job: Job, *, now: float) -> Job:
    """The record of a dead ``job`` replayed at ``now``: due now, no attempt used, a fresh deadline.

    Its priority is kept, and its ``last_error`` until the next failure, for the record. Its
    ``enqueued_at`` becomes ``now``: an operator's replay is a new start, so a dead letter
    of last week replayed today does not set off the age-since-enqueue alarm. Introduced in
    lesson 05; the fresh deadline in lesson 13.
    """
    return replace(
        job,
        attempts=0,
        run_at=now,
        leased_until=None,
        leased_at=None,
        expires_at=deadline(now, job.expires_after_s),
        enqueued_at=now,
    )


def refusal(job: Job, now: float) -> str | None:
    """Why a claim at ``now`` must dead-letter the due ``job`` instead of leasing it, or ``None``.

    Two reasons: its final attempt's lease ran out (``attempts >= max_attempts``:
    :func:`lease_lost_reason`), or it has waited past its deadline (:func:`expiry_reason`;
    no attempt is used). Introduced in lesson 03; deadlines in lesson 13.
    """
    if job.attempts >= job.max_attempts:
        return lease_lost_reason(job.attempts)
    if is_expired(job, now):
        return expiry_reason(job, now)
    return None


def lease_lost_reason(attempts: int) -> str:
    """The ``last_error`` of a job whose final attempt (number ``attempts``) was never acked nor failed."""
    return f"LeaseExpired: final attempt {attempts} was neither acked nor failed in time"


def lease_lost_reason_sql() -> str:
    """:func:`lease_lost_reason` as a SQL expression of the row's ``attempts`` (DuckDB and PostgreSQL)."""
    return "'LeaseExpired: final attempt ' || attempts || ' was neither acked nor failed in time'"


def is_expired(job: Job, now: float) -> bool:
    """Whether ``job``, if waiting, is past its deadline at ``now`` (seconds): it must not run."""
    return job.expires_at is not None and now > job.expires_at


def expiry_reason(job: Job, now: float) -> str:
    """The ``last_error`` of a job dead-lettered at ``now`` for waiting past its deadline.

    How late it is, in whole seconds rounded up: ``"expired: still waiting 60 s past its
    deadline"``.
    """
    assert job.expires_at is not None  # only a job with a deadline expires
    return f"expired: still waiting {math.ceil(now - job.expires_at)} s past its deadline"


def expiry_reason_sql(now: str) -> str:
    """:func:`expiry_reason` as a SQL expression of the row's ``expires_at``, ``now`` the claim's time.

    ``now`` is the placeholder of that time in the backend's own syntax (``$now``,
    ``%(now)s``). DuckDB and PostgreSQL both read it.
    """
    return f"'expired: still waiting ' || CAST(ceil({now} - expires_at) AS BIGINT) || ' s past its deadline'"


def is_permanent(error: BaseException) -> bool:
    """Whether a handler's ``error`` rules out a retry: the job is dead-lettered at once.

    True for :class:`~jobqueue.errors.PermanentJobError` (the handler said so) and
    :class:`~jobqueue.errors.PayloadError` (the stored payload does not validate). Not
    for :class:`~jobqueue.errors.UnknownJobTypeError`: a job this worker has no handler
    for is another version's (see :func:`is_given_back`). Introduced in lesson 04.
    """
    return isinstance(error, PermanentJobError | PayloadError)


UNKNOWN_TYPE_DELAY_S = 10.0
"""Seconds a job of a type the worker has no handler for waits, given back unrun.

A worker claims only its own types, so such a job reaches one only through a claim without
a filter. During a rolling deploy that is a job of the new version met by an old worker:
given back (its attempt not counted), it waits this long, so that the old workers do not
claim it again at once, and a new worker runs it. Burying it, as before, lost the job to
the dead letters until someone replayed it.
"""


def is_given_back(error: BaseException) -> bool:
    """Whether a handler's ``error`` gives the job back unrun instead of failing it.

    True for :class:`~jobqueue.errors.UnknownJobTypeError` (no handler here: wait
    :data:`UNKNOWN_TYPE_DELAY_S`) and :class:`~jobqueue.errors.CircuitOpenError` (the
    dependency's breaker is open: wait :func:`deferral_s`); neither spends an attempt.
    """
    return isinstance(error, UnknownJobTypeError | CircuitOpenError)


def given_back_s(error: BaseException, now: float) -> float:
    """Seconds a job given back for ``error`` (see :func:`is_given_back`) waits before it is due again."""
    if isinstance(error, CircuitOpenError):
        return deferral_s(error, now)
    return UNKNOWN_TYPE_DELAY_S


def deferral_s(error: CircuitOpenError, now: float) -> float:
    """Seconds a job waits, given back unrun, when its handler met an open circuit breaker.

    Until the breaker's trial time (:meth:`~jobqueue.errors.CircuitOpenError.retry_after_s`).
    Introduced in lesson 14.
    """
    return error.retry_after_s(now)


PRUNE_EVERY_S = 10.0
"""Seconds between two prunes, at least (finished jobs past ``retain_s``, dead past ``dead_retain_s``)."""

PRUNE_BATCH = 100
"""Most finished jobs, and most dead letters, one prune deletes: short statements, which hold no lock long."""


def prune_due(now: float, pruned_at: float | None) -> bool:
    """Whether a queue that last pruned finished jobs at ``pruned_at`` (``None``: never) prunes at ``now``.

    Once every :data:`PRUNE_EVERY_S` seconds, piggy-backed on an ack: the workers prune
    as they go, with no process of its own (as Oban's pruner, but without its timer).
    """
    return pruned_at is None or now - pruned_at >= PRUNE_EVERY_S


def held_until(finished_at: float, unique_for_s: float) -> float:
    """Until when (seconds) the id of a job enqueued with ``unique_for_s`` stays held, once it finished.

    A job finishes when it is acked, or when it leaves the dead letters (discarded; while
    dead its id is held anyway, and the window counts from its death). Until then an
    enqueue of its id adds nothing; afterwards the id is free. Without ``unique_for_s`` the
    id is free at the ack (as SQS's deduplication id, whose window is 5 minutes from the
    send, not from the finish). Introduced with unique windows (issue 24).
    """
    return finished_at + unique_for_s


def prune_before(now: float, retain_s: float) -> float:
    """The time (seconds) before which a finished job has been kept ``retain_s`` and may go, at ``now``."""
    return now - retain_s


def prune_cancelled_before(now: float, retain_s: float) -> float:
    """The time before which a cancelled job has been kept long enough and may go, at ``now``.

    A cancelled job is kept :data:`KEEP_CANCELLED_S` at least, or ``retain_s`` if longer:
    with the default ``retain_s`` of 0 it would otherwise be gone at the next prune.
    """
    return now - max(retain_s, KEEP_CANCELLED_S)


def is_pruned(finished: FinishedJob, *, before: float, cancelled_before: float) -> bool:
    """Whether a prune deletes ``finished``: kept since before ``before`` (or ``cancelled_before``)."""
    return finished.finished_at < (cancelled_before if finished.outcome == "cancelled" else before)


DEAD_RETAIN_S = 604_800.0
"""Seconds a dead letter is kept after it died, by default (7 days), unless replayed or discarded first.

River's default for discarded jobs (``DiscardedJobRetentionPeriod``) is 7 days too: a week
to notice a dead letter, fix its cause and replay it, without the table growing for good.
"""


def prune_dead_before(now: float, dead_retain_s: float | None) -> float | None:
    """The time (seconds) before which a dead letter has been kept ``dead_retain_s`` and may go, at ``now``.

    ``None`` when ``dead_retain_s`` is ``None``: dead letters are kept until replayed or discarded.
    """
    return None if dead_retain_s is None else now - dead_retain_s


def is_dead_pruned(letter: DeadLetter, *, before: float | None) -> bool:
    """Whether a prune deletes the dead ``letter``: it died before ``before`` (``None``: never).

    The SQL backends delete the same rows, ``died_at < before``, oldest death first.
    Introduced with retention of dead letters (issue 24).
    """
    return before is not None and letter.died_at < before


KEEP_CANCELLED_S = 86_400.0
"""Seconds a cancelled job is kept with the finished jobs at least, whatever ``retain_s`` says.

A day, River's default for cancelled jobs (``CancelledJobRetentionPeriod``): long enough
to look up what was cancelled, like a dead letter, without the table growing for good.
"""


def cancel(*, leased: bool) -> CancelOutcome:
    """What ``queue.cancel`` does to a live job: finish it now, or mark it for its holder.

    A job that is waiting or scheduled (``leased`` false) is finished at once as
    ``"cancelled"`` and kept with the finished jobs (:data:`KEEP_CANCELLED_S`). A job under a
    lease (its holder may still ack it, even past the lease's end) is only marked
    (``"cancelling"``): a heartbeat tells the holder (``Lease.cancelled``), and its ack or
    fail finishes it as cancelled, with no retry; if the holder never comes back, the claim
    that finds its lease ran out finishes it. Sidekiq and Oban cancel running jobs the same
    way, by a flag the job checks. Introduced with cancelling (issue 24).
    """
    return "cancelling" if leased else "cancelled"
