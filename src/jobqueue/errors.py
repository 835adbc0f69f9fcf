"""Every error the package raises, under one root class, in two families and the rest.

- :class:`JobSignal`: what a handler raises to tell the worker what to do with its job
  (:class:`PermanentJobError`, :class:`RetryAfterError`, :class:`CircuitOpenError`).
- :class:`StorageError`: the storage under a queue failed or refused (its file, its
  server, its schema, a row that cannot be read, an aborted transaction). Code that keeps
  a service up catches this family and tries again later.
- The rest say that a call was wrong or came too late: a bad argument or payload, an
  unknown job type, a stale lease, a dead letter or a job that is not there; and what the
  worker records of an attempt it had to stop (a time limit, a stray cancellation, a job
  cancelled by ``queue.cancel``).

Each class's docstring says when it is raised. Errors caused by a bad argument also
subclass :class:`ValueError` (or :class:`LookupError`), so code that catches the
built-in kinds keeps working.

Introduced in lesson 03 (the queue) and lesson 04 (the worker).
"""

from __future__ import annotations

import math


class JobQueueError(Exception):
    """Root of every error raised by :mod:`jobqueue`."""


class JobSignal(JobQueueError):
    """Raised by a handler to tell the worker what to do with its job, instead of a plain failure.

    Introduced in lesson 04 (:class:`PermanentJobError`); the others in lesson 14.
    """


class StorageError(JobQueueError):
    """The storage under a queue failed or refused; the message names the file or server.

    Introduced in lesson 11 (the DuckDB file); the server's errors in lesson 12.
    """


class InvalidSettingError(JobQueueError, ValueError):
    """A setting or argument is outside its allowed range.

    Raised, for example, for ``max_attempts < 1``, a visibility timeout ``<= 0`` s, a
    backoff base ``<= 0`` s or a cap below the base, a ``random()`` result outside
    ``[0, 1]``, or a clock moved by a negative number of seconds. The message names the
    bad value.
    """


class PayloadError(JobQueueError, ValueError):
    """A payload cannot be stored or read back.

    Raised at enqueue when the payload is not an instance of the job type's payload class
    or is not JSON-serialisable, and by :meth:`JobType.parse` when stored data does not
    validate. The worker treats it as a permanent failure: the job goes to the
    dead-letter queue with this message as its reason.
    """


class UnknownJobTypeError(JobQueueError, LookupError):
    """A worker was handed a job whose type has no registered handler.

    The worker records it as a permanent failure (the job is dead-lettered) instead of
    crashing, so one stray job cannot stop the worker.
    """


class StaleLeaseError(JobQueueError):
    """An ack or fail came from a worker that no longer holds the job's lease.

    The lease expired, and the job was claimed again (or already finished), so the first
    worker's word no longer counts. Like an outdated SQS receipt handle or BullMQ lock
    token. Nothing in the queue changes.
    """


class DeadLetterNotFoundError(JobQueueError, LookupError):
    """A dead letter was asked for by an id that is not in the dead-letter queue."""


class JobNotFoundError(JobQueueError, LookupError):
    """A job was asked for by an id the queue does not hold: not live, not dead, not kept as finished.

    Raised by ``cancel``; the message names the id. Introduced with cancelling (issue 24).
    """


class PermanentJobError(JobSignal):
    """Raised by a handler when retrying cannot help (bad address, order not found...).

    The worker fails the job as permanent: it goes straight to the dead-letter queue
    whatever attempts are left. Any other exception counts as transient and is retried.
    """


MAX_RETRY_AFTER_S = 43_200.0
"""Longest wait a :class:`RetryAfterError` can impose, in seconds (12 hours).

A longer ``Retry-After`` is clamped to this when the retry is scheduled: a misconfigured
server (or a date a year ahead) must not park a job out of sight for a year. 12 hours is
the longest SQS lets a message stay invisible (``ChangeMessageVisibility``).
"""


class RetryAfterError(JobSignal):
    """Raised by a handler when the dependency said when to try again (a 429 or 503 with ``Retry-After``).

    A transient failure: the attempt counts, and the job is dead-lettered on its last
    attempt as after any failure; but its next attempt is scheduled ``retry_after_s``
    seconds after the failure instead of after the job's backoff (at most
    :data:`MAX_RETRY_AFTER_S`, longer waits are clamped). The server knows its own load
    better than the backoff guesses it. Build it from the header with
    :func:`jobqueue.failures.parse_retry_after`::

        if response.status in (429, 503) and "Retry-After" in response.headers:
            raise RetryAfterError(parse_retry_after(response.headers["Retry-After"]), "rate limited")

    Args:
        retry_after_s: seconds to wait before the next attempt (a finite number >= 0).
        reason: what the dependency answered, for the job's ``last_error``.

    Raises:
        InvalidSettingError: naming the value, if ``retry_after_s`` is not a finite
            number of seconds >= 0.

    Introduced in lesson 14.
    """

    def __init__(self, retry_after_s: float, reason: str = "the dependency asked to wait") -> None:
        if (
            isinstance(retry_after_s, bool)
            or not isinstance(retry_after_s, int | float)
            or not (math.isfinite(retry_after_s) and retry_after_s >= 0)
        ):
            raise InvalidSettingError(
                f"retry_after_s must be a finite number of seconds >= 0, got {retry_after_s!r}"
            )
        super().__init__(f"{reason}: try again after {retry_after_s:g} s")
        self.retry_after_s = float(retry_after_s)
        self.reason = reason


class CircuitOpenError(JobSignal):
    """A call was refused because the circuit breaker of its dependency is open.

    Raised by :class:`~jobqueue.breaker.CircuitBreaker` instead of calling the
    dependency. Nothing was sent, so retrying before ``retry_at_s`` cannot help. A
    :class:`~jobqueue.worker.Worker` whose handler raises it does not fail the job: it
    gives the job back to wait until ``retry_at_s`` without spending an attempt (the
    event's outcome is ``"deferred"``), so an outage of one dependency does not push its
    jobs into the dead-letter queue.

    Attributes:
        dependency: the breaker's name, e.g. ``"mail provider"``.
        retry_at_s: the clock time (seconds) from which the breaker lets a trial call
            through; a job should wait until then, without spending an attempt.

    Raises:
        InvalidSettingError: naming the value, if ``retry_at_s`` is not a finite number
            (a worker could not schedule the job then).

    Introduced in lesson 14.
    """

    def __init__(self, dependency: str, retry_at_s: float) -> None:
        if (
            isinstance(retry_at_s, bool)
            or not isinstance(retry_at_s, int | float)
            or not math.isfinite(retry_at_s)
        ):
            raise InvalidSettingError(f"retry_at_s must be a finite time in seconds, got {retry_at_s!r}")
        super().__init__(f"circuit open for {dependency!r}: try again at t={retry_at_s:g}s")
        self.dependency = dependency
        self.retry_at_s = retry_at_s

    def retry_after_s(self, now_s: float) -> float:
        """Seconds from ``now_s`` until ``retry_at_s`` (0 if that time has come)."""
        return max(0.0, self.retry_at_s - now_s)


class Snooze(JobSignal):
    """Raised by a handler to say "not now, again in ``delay_s`` seconds", without spending an attempt.

    A :class:`~jobqueue.worker.Worker` gives the job back, due ``delay_s`` seconds from
    now, its attempt not counted (the event's outcome is ``"snoozed"``), up to
    :data:`~jobqueue.backends.rules.MAX_SNOOZES` times per job; the snooze after that
    counts as a failed attempt (retried or dead-lettered as any failure). For work that
    is not ready yet (a file not uploaded, a rate limit's window), as Oban's ``{:snooze,
    seconds}`` and River's ``JobSnooze``.

    Attributes:
        delay_s: seconds until the job is due again (a finite number >= 0).

    Raises:
        InvalidSettingError: naming the value, if ``delay_s`` is not a finite number >= 0.

    Introduced with snoozing (issue 24).
    """

    def __init__(self, delay_s: float) -> None:
        if (
            isinstance(delay_s, bool)
            or not isinstance(delay_s, int | float)
            or not (math.isfinite(delay_s) and delay_s >= 0)
        ):
            raise InvalidSettingError(f"delay_s must be a finite number of seconds >= 0, got {delay_s!r}")
        super().__init__(f"snoozed for {delay_s:g} s")
        self.delay_s = float(delay_s)


class JobTimeoutError(JobQueueError, TimeoutError):
    """An attempt ran past its time limit (``timeout_s``), so the worker cancelled it.

    The attempt fails as transient, so the job is retried after its backoff like any
    timeout, until its attempts run out. The limit is the job type's ``timeout_s``, or the
    worker's default (Celery's ``time_limit``, arq's ``job_timeout``). The message names
    the job, its attempt and the limit in seconds. Introduced in lesson 06.
    """


class JobCancelledError(JobQueueError):
    """The job was cancelled (``queue.cancel``) while its handler ran, so the worker stopped the handler.

    A worker with a heartbeat learns of the cancel at its next beat and cancels the
    handler's task: the handler sees :class:`asyncio.CancelledError` at its next ``await``
    (clean up in ``finally``, or catch it and return early). The attempt then ends with
    this error, and the queue records the job as ``"cancelled"``, not retried, whatever
    the handler did. The message names the job and its attempt. Introduced with cancelling
    (issue 24).
    """


class HandlerCancelledError(JobQueueError):
    """A handler raised :class:`asyncio.CancelledError` though nothing had cancelled it.

    A ``CancelledError`` is how asyncio stops a task; raised by a handler on its own (an
    inner task it awaited was cancelled, say) it would stop the worker and every job
    running beside it. The worker fails only that attempt instead, as transient.
    Introduced in lesson 11.
    """


class CorruptJobError(StorageError):
    """A stored job row cannot be read back as a job (a backoff of 0 s, a NULL count...).

    Someone edited the table by hand, or an old version wrote it. The queue dead-letters
    the row with this error's message as its reason instead of failing the call, so the
    jobs beside it are claimed and listed as usual. The message names the job and the bad
    value. Introduced in lesson 11.
    """


class TransactionAbortedError(StorageError):
    """A statement inside a DuckDB transaction failed and the transaction was rolled back.

    DuckDB marks a transaction aborted after any failed statement, and a later ``COMMIT``
    then discards everything silently. :func:`jobqueue.db.transaction` checks for this
    before committing and raises this error instead, so a lost write is never mistaken
    for a saved one.
    """


class QueueFileError(StorageError):
    """A durable queue's file cannot be used: not a DuckDB database (SQLite, text...), corrupt, or locked.

    The message names the file.
    """


class QueueFileLockedError(QueueFileError):
    """A durable queue's DuckDB file is open in another process, or already in this one.

    In this process, a second :class:`~jobqueue.backends.duckdb.DurableQueue` on a file that one
    still holds open is refused as well: two objects on one file would race each other's
    transactions. The message then names where the first one was opened.

    DuckDB lets one process at a time open a file for writing, so every worker of one
    queue file runs in one process (use the worker's concurrency instead of more
    processes). The message names the file and, as DuckDB reports it, the process that
    holds it.
    """


def describe_error(error: BaseException) -> str:
    """Render an exception as the queue stores it: ``"ErrorClass: message"``."""
    return f"{type(error).__name__}: {error}"


def describe_failure(error: BaseException | str) -> str:
    """What ``fail(lease, error)`` stores: a message as it is, an exception as ``"ErrorClass: message"``.

    Every queue's ``fail`` calls it before changing anything. A NUL character, which
    PostgreSQL's text cannot hold, is stored as U+FFFD (the replacement character): a
    handler's odd message fails its job like any other instead of failing the ``fail``.

    Raises:
        InvalidSettingError: naming the value, if ``error`` is neither (``None``, say).
    """
    if isinstance(error, str):
        message = error
    elif isinstance(error, BaseException):
        message = describe_error(error)
    else:
        raise InvalidSettingError(f"fail() needs the exception or a message, got {error!r}")
    return message.replace("\x00", "\ufffd")


class QueueUnavailableError(StorageError):
    """A queue's database server cannot be reached: the connection dropped or the server restarted.

    The message names the server (host, port, database; never a password). Nothing is
    known to have changed by the call that raised it (a claim whose answer was lost leaves
    its jobs leased until their leases run out). The queue connects again on its next
    call; a :class:`~jobqueue.runner.Runner` waits a second and carries on. Introduced
    in lesson 12.
    """


class QueueSchemaError(StorageError):
    """A database holds ``jobqueue_`` tables this jobqueue cannot use.

    Of a schema version it cannot read (the message names the server and both versions),
    or tables it did not create, or a version record whose tables are gone. Nothing is
    changed in them. Introduced in lesson 12.
    """


class QueuePrivilegeError(StorageError):
    """The database refused the queue's role a privilege it needs (PostgreSQL's ``42501``).

    The message names the server and what was refused (``permission denied for table
    jobqueue_jobs``), and what the role needs: to create the tables on first use, then
    SELECT, INSERT, UPDATE and DELETE on the ``jobqueue_`` tables and USAGE on their
    sequences. Nothing was changed by the call that raised it. Introduced in lesson 12.
    """
