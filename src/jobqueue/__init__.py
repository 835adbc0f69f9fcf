"""jobqueue: background jobs with leases, retries with jittered backoff and dead letters.

Built one piece per lesson of the course in ``lessons/``; notebooks do
``import jobqueue as jq``. The names below are the public surface; ``jobqueue.shop`` is
the course's running example and ``jobqueue.teaching`` holds course helpers only.
"""

from jobqueue.backoff import DEFAULT_BASE_S, DEFAULT_CAP_S, Backoff, RandomFn
from jobqueue.clock import Clock, ManualClock, SystemClock
from jobqueue.errors import (
    DeadLetterNotFoundError,
    InvalidSettingError,
    JobQueueError,
    PayloadError,
    PermanentJobError,
    StaleLeaseError,
    TransactionAbortedError,
    UnknownJobTypeError,
)
from jobqueue.job import DEFAULT_MAX_ATTEMPTS, DeadLetter, Job, JobType, Lease, RetryPolicy
from jobqueue.queue import DEFAULT_VISIBILITY_TIMEOUT_S, FailOutcome, JobQueue
from jobqueue.worker import Handler, JobEvent, Worker

__all__ = [
    "DEFAULT_BASE_S",
    "DEFAULT_CAP_S",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_VISIBILITY_TIMEOUT_S",
    "Backoff",
    "Clock",
    "DeadLetter",
    "DeadLetterNotFoundError",
    "FailOutcome",
    "Handler",
    "InvalidSettingError",
    "Job",
    "JobEvent",
    "JobQueue",
    "JobQueueError",
    "JobType",
    "Lease",
    "ManualClock",
    "PayloadError",
    "PermanentJobError",
    "RandomFn",
    "RetryPolicy",
    "StaleLeaseError",
    "SystemClock",
    "TransactionAbortedError",
    "UnknownJobTypeError",
    "Worker",
]
