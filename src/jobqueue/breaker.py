"""A circuit breaker per dependency: stop calling a service that keeps failing.

A breaker watches the calls to one dependency (the mail provider, the payment API) and
moves between three states:

- **closed**: calls go through; consecutive failures are counted, a success resets the
  count. At ``failure_threshold`` failures in a row the breaker *opens*.
- **open**: calls are refused at once with :class:`CircuitOpenError`, without touching
  the dependency, until ``reset_timeout_s`` seconds after it opened.
- **half-open**: after the timeout one trial call goes through (others are still
  refused). Its success closes the breaker; its failure opens it again for another
  ``reset_timeout_s``.

The idea is Michael Nygard's (*Release It!*, 2007); Marc Brooker's simulations of retry
storms show why it helps: while the dependency is down, callers stop adding load, so it
can come back.

Use it around the call inside a handler, one breaker per dependency shared by every job
that uses it::

    MAIL = CircuitBreaker("mail provider", clock=clock, failure_threshold=5, reset_timeout_s=30)

    async def send_receipt(payload: ReceiptPayload) -> None:
        async with MAIL:
            await mailer.send(payload.email, ...)

While the breaker is open the handler raises :class:`CircuitOpenError` (defined in
:mod:`jobqueue.errors`, re-exported here), which carries ``retry_at_s``. The
:class:`~jobqueue.worker.Worker` catches it and gives the job back to wait until
``retry_at_s`` without spending an attempt (:meth:`jobqueue.JobQueue.release` with
``delay_s``; the event's outcome is ``"deferred"``), so an outage of one dependency does
not push its jobs into the dead-letter queue.

Introduced in lesson 14.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Literal, TypeVar

from jobqueue.clock import Clock
from jobqueue.errors import CircuitOpenError, InvalidSettingError
from jobqueue.job import check_count, check_positive_seconds

__all__ = [
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_RESET_TIMEOUT_S",
    "BreakerState",
    "CircuitBreaker",
    "CircuitOpenError",
]

T = TypeVar("T")

BreakerState = Literal["closed", "open", "half-open"]
"""Where a :class:`CircuitBreaker` is: calls pass, calls are refused, or one trial passes."""

DEFAULT_FAILURE_THRESHOLD = 5
"""Consecutive failures that open a breaker."""

DEFAULT_RESET_TIMEOUT_S = 30.0
"""Seconds a breaker stays open before it lets a trial call through."""


class CircuitBreaker:
    """Closed → open → half-open → closed, for the calls to one dependency.

    Args:
        name: the dependency, used in messages (``"mail provider"``).
        clock: where the time comes from (a :class:`~jobqueue.ManualClock` in tests).
        failure_threshold: consecutive failures that open the breaker (int >= 1,
            default 5).
        reset_timeout_s: seconds the breaker stays open before one trial call (> 0,
            default 30 s).
        counts: exception classes that count as failures of the dependency (default
            every :class:`Exception`). Others (say, a bad address: the dependency
            answered) pass through without counting. :class:`CircuitOpenError` itself
            never counts.

    Raises:
        InvalidSettingError: if ``failure_threshold`` or ``reset_timeout_s`` is out of
            range, or ``name`` is empty.

    Guard a call with ``async with breaker:`` or ``with breaker:`` (the block is the
    call; an exception leaving it is a failure), or ``await breaker.call(fn, ...)``. For
    code that cannot use a block, :meth:`before_call` then :meth:`record_success` or
    :meth:`record_failure` do the same in three steps.

    Introduced in lesson 14.
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S,
        counts: tuple[type[BaseException], ...] = (Exception,),
    ) -> None:
        if not name:
            raise InvalidSettingError("a circuit breaker needs a name (the dependency it guards), got ''")
        self.name = name
        self.clock = clock
        self.failure_threshold = check_count("failure_threshold", failure_threshold)
        self.reset_timeout_s = check_positive_seconds("reset_timeout_s", reset_timeout_s)
        self.counts = counts
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_running = False

    @property
    def state(self) -> BreakerState:
        """The state now: ``"closed"``, ``"open"`` or ``"half-open"`` (read from the clock)."""
        if self._opened_at is None:
            return "closed"
        if self.clock.now() < self.retry_at_s:
            return "open"
        return "half-open"

    @property
    def failures(self) -> int:
        """Consecutive failures counted while closed (0 after a success)."""
        return self._failures

    @property
    def retry_at_s(self) -> float:
        """When the open breaker lets a trial through (seconds); ``-inf`` when closed."""
        if self._opened_at is None:
            return -math.inf
        return self._opened_at + self.reset_timeout_s

    def before_call(self) -> None:
        """Ask to make a call: return if it may go through, raise if not.

        In the half-open state the first caller becomes the trial; until it reports back
        with :meth:`record_success` or :meth:`record_failure`, others are refused.

        Raises:
            CircuitOpenError: while open, or half-open with a trial already running;
                ``retry_at_s`` is when the breaker next lets a trial through (for a
                refusal during a trial, one ``reset_timeout_s`` from now).
        """
        state = self.state
        if state == "closed":
            return
        if state == "open":
            raise CircuitOpenError(self.name, self.retry_at_s)
        if self._trial_running:
            raise CircuitOpenError(self.name, self.clock.now() + self.reset_timeout_s)
        self._trial_running = True

    def record_success(self) -> None:
        """Report that a call went through: the count restarts, a half-open breaker closes."""
        self._failures = 0
        self._opened_at = None
        self._trial_running = False

    def record_failure(self) -> None:
        """Report that a call failed: count it; open at the threshold or after a failed trial."""
        if self._opened_at is not None:  # a failed trial (or a late report): open again
            self._open()
            return
        self._failures += 1
        if self._failures >= self.failure_threshold:
            self._open()

    def record_ignored(self) -> None:
        """Report that a call ended without saying anything about the dependency.

        For an exception outside ``counts`` (or a cancelled call): a running trial is
        over, so the next caller may try, and nothing else changes.
        """
        self._trial_running = False

    def _open(self) -> None:
        self._opened_at = self.clock.now()
        self._failures = 0
        self._trial_running = False

    def _finish(self, error: BaseException | None) -> None:
        if error is None:
            self.record_success()
        elif isinstance(error, self.counts) and not isinstance(error, CircuitOpenError):
            self.record_failure()
        else:
            self.record_ignored()

    def __enter__(self) -> CircuitBreaker:
        self.before_call()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish(error)

    async def __aenter__(self) -> CircuitBreaker:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish(error)

    async def call(self, fn: Callable[..., Awaitable[T]], *args: object, **kwargs: object) -> T:
        """Await ``fn(*args, **kwargs)`` through the breaker and return its result.

        Raises:
            CircuitOpenError: if the breaker refuses the call (``fn`` is not called).
            Exception: whatever ``fn`` raises, after it has been recorded.
        """
        async with self:
            return await fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.name!r}, state={self.state!r}, failures={self._failures})"
