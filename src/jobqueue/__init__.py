"""jobqueue: background jobs with leases, retries with jittered backoff and dead letters.

Built one piece per lesson of the course in ``lessons/``; notebooks do
``import jobqueue as jq``. The names below are the public surface. The DuckDB pieces are
modules of their own: :mod:`jobqueue.db`, :mod:`jobqueue.idempotency`,
:mod:`jobqueue.outbox`; so is :mod:`jobqueue.fanout`. Lesson 11 adds
:class:`DurableQueue` (jobs in a DuckDB file), :class:`Runner` (a worker service) and
:class:`QueueMetrics`; :mod:`jobqueue.cli` is the ``jobqueue`` command line. Lesson 12 adds
:class:`PostgresQueue` (jobs in PostgreSQL, shared by many processes; needs ``psycopg``,
imported on first use). Lesson 14 adds :class:`CircuitBreaker` (with
:class:`CircuitOpenError`, on which a worker defers a job without spending an attempt),
:class:`RetryBudget`, and :class:`RetryAfterError` (a retry scheduled when the dependency
asked, see :func:`parse_retry_after`); lesson 15 the chaos tests' history checker,
:class:`History` and :func:`check_history`. :class:`Schedule` makes periodic jobs, which a
:class:`Runner` enqueues (issue 24). ``jobqueue.examples`` holds the course's
running example, the shop (which nothing here imports), and ``jobqueue.teaching`` holds
course helpers only.
"""

from typing import TYPE_CHECKING, Any

from jobqueue import db, fanout, idempotency, outbox
from jobqueue.backends.contract import DEFAULT_VISIBILITY_TIMEOUT_S, CancelOutcome, Failed, FailOutcome, Queue
from jobqueue.backends.memory import JobQueue
from jobqueue.backoff import DEFAULT_BASE_S, DEFAULT_CAP_S, Backoff, RandomFn
from jobqueue.breaker import CircuitBreaker
from jobqueue.clock import Clock, ManualClock, ServerClock, SleepingClock, SystemClock
from jobqueue.errors import (
    MAX_RETRY_AFTER_S,
    CircuitOpenError,
    CorruptJobError,
    DeadLetterNotFoundError,
    HandlerCancelledError,
    InvalidSettingError,
    JobCancelledError,
    JobNotFoundError,
    JobQueueError,
    JobSignal,
    JobTimeoutError,
    PayloadError,
    PermanentJobError,
    QueueFileError,
    QueueFileLockedError,
    QueuePrivilegeError,
    QueueSchemaError,
    QueueUnavailableError,
    RetryAfterError,
    Snooze,
    StaleLeaseError,
    StorageError,
    TransactionAbortedError,
    UnknownJobTypeError,
)
from jobqueue.failures import classify_exception, classify_status, parse_retry_after
from jobqueue.fanout import Published, Topic
from jobqueue.idempotency import process_once
from jobqueue.job import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_ATTEMPTS_LIMIT,
    PRIORITY_LIMIT,
    DeadLetter,
    FinishedJob,
    Job,
    JobType,
    Lease,
    RetryPolicy,
)
from jobqueue.metrics import QueueMetrics
from jobqueue.outbox import Relay
from jobqueue.retry_budget import RetryBudget
from jobqueue.runner import Runner
from jobqueue.schedule import Schedule
from jobqueue.testing import History, HistoryReport, check_history
from jobqueue.worker import (
    DEFAULT_TIMEOUT_S,
    LEASE_SHARE,
    Handler,
    Heartbeat,
    JobEvent,
    LeaseRuleWarning,
    Worker,
)

if TYPE_CHECKING:
    from jobqueue.backends.duckdb import DurableQueue
    from jobqueue.backends.postgres import PostgresQueue


def __getattr__(name: str) -> Any:
    """``PostgresQueue`` and ``DurableQueue`` on first use, each with its driver.

    ``import jobqueue`` loads neither psycopg nor DuckDB, and a process that works on one
    database never loads the other's.
    """
    if name == "PostgresQueue":
        from jobqueue.backends.postgres import PostgresQueue

        return PostgresQueue
    if name == "DurableQueue":
        from jobqueue.backends.duckdb import DurableQueue

        return DurableQueue
    raise AttributeError(f"module 'jobqueue' has no attribute {name!r}")


__all__ = [
    "DEFAULT_BASE_S",
    "DEFAULT_CAP_S",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_VISIBILITY_TIMEOUT_S",
    "LEASE_SHARE",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_RETRY_AFTER_S",
    "PRIORITY_LIMIT",
    "Backoff",
    "CancelOutcome",
    "CircuitBreaker",
    "CircuitOpenError",
    "Clock",
    "CorruptJobError",
    "DeadLetter",
    "DeadLetterNotFoundError",
    "DurableQueue",
    "FailOutcome",
    "Failed",
    "FinishedJob",
    "Handler",
    "HandlerCancelledError",
    "Heartbeat",
    "History",
    "HistoryReport",
    "InvalidSettingError",
    "Job",
    "JobCancelledError",
    "JobEvent",
    "JobNotFoundError",
    "JobQueue",
    "JobQueueError",
    "JobSignal",
    "JobTimeoutError",
    "JobType",
    "Lease",
    "LeaseRuleWarning",
    "ManualClock",
    "PayloadError",
    "PermanentJobError",
    "PostgresQueue",
    "Published",
    "Queue",
    "QueueFileError",
    "QueueFileLockedError",
    "QueueMetrics",
    "QueuePrivilegeError",
    "QueueSchemaError",
    "QueueUnavailableError",
    "RandomFn",
    "Relay",
    "RetryAfterError",
    "RetryBudget",
    "RetryPolicy",
    "Runner",
    "Schedule",
    "ServerClock",
    "SleepingClock",
    "Snooze",
    "StaleLeaseError",
    "StorageError",
    "SystemClock",
    "Topic",
    "TransactionAbortedError",
    "UnknownJobTypeError",
    "Worker",
    "check_history",
    "classify_exception",
    "classify_status",
    "db",
    "fanout",
    "idempotency",
    "outbox",
    "parse_retry_after",
    "process_once",
]
