"""Every error the package raises, under one root class.

Each class's docstring says when it is raised. Errors caused by a bad argument also
subclass :class:`ValueError` (or :class:`LookupError`), so code that catches the
built-in kinds keeps working.

Introduced in lesson 03 (the queue) and lesson 04 (the worker).
"""

from __future__ import annotations


class JobQueueError(Exception):
    """Root of every error raised by :mod:`jobqueue`."""


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


class PermanentJobError(JobQueueError):
    """Raised by a handler when retrying cannot help (bad address, order not found...).

    The worker fails the job as permanent: it goes straight to the dead-letter queue
    whatever attempts are left. Any other exception counts as transient and is retried.
    """


class TransactionAbortedError(JobQueueError):
    """A statement inside a DuckDB transaction failed and the transaction was rolled back.

    DuckDB marks a transaction aborted after any failed statement, and a later ``COMMIT``
    then discards everything silently. :func:`jobqueue.db.transaction` checks for this
    before committing and raises this error instead, so a lost write is never mistaken
    for a saved one.
    """


class QueueFileError(JobQueueError):
    """A durable queue's file cannot be used: it is not a DuckDB database, or it is locked.

    The message names the file.
    """


class QueueFileLockedError(QueueFileError):
    """A durable queue's DuckDB file is open in another process.

    DuckDB lets one process at a time open a file for writing, so every worker of one
    queue file runs in one process (use the worker's concurrency instead of more
    processes). The message names the file and, as DuckDB reports it, the process that
    holds it.
    """


def describe_error(error: BaseException) -> str:
    """Render an exception as the queue stores it: ``"ErrorClass: message"``."""
    return f"{type(error).__name__}: {error}"


class QueueUnavailableError(JobQueueError):
    """A queue's database server cannot be reached: the connection dropped or the server restarted.

    The message names the server (host, port, database; never a password). Nothing is
    known to have changed by the call that raised it (a claim whose answer was lost leaves
    its jobs leased until their leases run out). The queue connects again on its next
    call; a :class:`~jobqueue.runner.Runner` waits a second and carries on. Introduced
    in lesson 13.
    """


class QueueSchemaError(JobQueueError):
    """A database holds ``jobqueue_`` tables of a schema version this jobqueue cannot read."""
