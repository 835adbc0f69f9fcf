"""A worker: claims one job at a time, runs its async handler, then acks or fails it.

A handler raises :class:`~jobqueue.errors.PermanentJobError` when retrying cannot help;
any other exception is treated as transient and retried after the job's backoff delay,
until its attempts run out. A job whose type has no handler, or whose stored payload
does not validate, fails permanently: the worker itself never crashes on a bad job.

Introduced in lesson 04.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from jobqueue.errors import (
    InvalidSettingError,
    PayloadError,
    PermanentJobError,
    UnknownJobTypeError,
    describe_error,
)
from jobqueue.job import JobType
from jobqueue.queue import JobQueue

P = TypeVar("P")

Handler = Callable[[P], Awaitable[None]]
"""An async function that does one job's work, given its payload."""

Outcome = Literal["done", "retry", "dead"]


@dataclass(frozen=True, kw_only=True)
class JobEvent:
    """What happened to one attempt of one job; ``str()`` gives a log line.

    Attributes:
        at: when the attempt ended, in seconds on the queue's clock.
        job_id, job_type, attempt: which job and which attempt (1-based).
        outcome: ``"done"`` (acked), ``"retry"`` (waiting to run again) or ``"dead"``.
        error: the failure as ``"ErrorClass: message"``, or ``None`` when done.
        retry_at: for a retry, when the job becomes claimable again (seconds).

    Introduced in lesson 04.
    """

    at: float
    job_id: str
    job_type: str
    attempt: int
    outcome: Outcome
    error: str | None = None
    retry_at: float | None = None

    def __str__(self) -> str:
        head = f"t={self.at:g}s {self.job_id} attempt {self.attempt}:"
        if self.outcome == "done":
            return f"{head} done"
        if self.outcome == "retry":
            return f"{head} failed, retry at t={self.retry_at:g}s ({self.error})"
        return f"{head} dead ({self.error})"


class Worker:
    """Runs jobs from one queue, one at a time, with a handler per job type.

    Args:
        queue: where jobs are claimed, acked and failed.
        on_event: called with each :class:`JobEvent` as it happens (``print`` gives a
            log). Every event is also kept in :attr:`events`.

    Introduced in lesson 04.
    """

    def __init__(self, queue: JobQueue, *, on_event: Callable[[JobEvent], object] | None = None) -> None:
        self.queue = queue
        self.events: list[JobEvent] = []
        self._on_event = on_event
        self._handlers: dict[str, tuple[JobType[Any], Handler[Any]]] = {}

    def register(self, job_type: JobType[P], handler: Handler[P]) -> None:
        """Run ``handler`` for jobs of ``job_type``; mypy checks the payload classes match.

        Raises:
            InvalidSettingError: if ``job_type`` already has a handler.
        """
        if job_type.name in self._handlers:
            raise InvalidSettingError(f"job type {job_type.name!r} already has a handler")
        self._handlers[job_type.name] = (job_type, handler)

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

    async def run_one(self) -> JobEvent | None:
        """Claim one due job and run it; return what happened, or ``None`` if none was due."""
        lease = self.queue.claim()
        if lease is None:
            return None
        job = lease.job
        error: BaseException | None = None
        outcome: Outcome
        try:
            job_type, handler = self.handler_for(job.type)
            await handler(job_type.parse(job.payload))
        except (PermanentJobError, PayloadError, UnknownJobTypeError) as exc:
            error, outcome = exc, self.queue.fail(lease, exc, permanent=True)
        except Exception as exc:  # any other failure is transient: retry it
            error, outcome = exc, self.queue.fail(lease, exc)
        else:
            self.queue.ack(lease)
            outcome = "done"
        retried = self.queue.get(job.id) if outcome == "retry" else None
        event = JobEvent(
            at=self.queue.clock.now(),
            job_id=job.id,
            job_type=job.type,
            attempt=job.attempts,
            outcome=outcome,
            error=None if error is None else describe_error(error),
            retry_at=None if retried is None else retried.run_at,
        )
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    async def drain(self) -> list[JobEvent]:
        """Run jobs until none is due at the clock's current time (burst mode)."""
        events = []
        while (event := await self.run_one()) is not None:
            events.append(event)
        return events
