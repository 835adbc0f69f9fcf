"""Clocks: where every time-dependent piece of the package reads "now", in seconds.

Passing the clock in (instead of calling :func:`time.time` inside the queue) lets demos
and tests jump ahead with :meth:`ManualClock.advance` instead of waiting.

A clock that can also *wait* (``await clock.sleep(seconds)``) is a :class:`SleepingClock`;
the worker's heartbeat and polling loop sleep on it, so with a :class:`ManualClock` they
wake when the demo moves time on, never by the wall clock.

Introduced in lesson 01; sleeping in lesson 06.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from jobqueue.errors import InvalidSettingError

SETTLE_TURNS = 50
"""Turns of the event loop :meth:`ManualClock.run_for` gives woken tasks before time moves on."""


class Clock(Protocol):
    """Anything with a ``now()`` that returns the current time in seconds (float)."""

    def now(self) -> float:
        """Return the current time in seconds."""
        ...


@runtime_checkable
class SleepingClock(Clock, Protocol):
    """A :class:`Clock` that can also wait: ``await clock.sleep(seconds)``.

    Only code that waits needs one (the worker's heartbeat and :meth:`Worker.run_until`);
    everything that merely reads the time keeps taking a plain :class:`Clock`. Both
    :class:`SystemClock` and :class:`ManualClock` are sleeping clocks.

    Introduced in lesson 06.
    """

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` seconds have passed on this clock."""
        ...


def _check_wait(name: str, seconds: float) -> float:
    if isinstance(seconds, bool) or not math.isfinite(seconds) or seconds < 0:
        raise InvalidSettingError(f"{name} takes a finite, non-negative number of seconds, got {seconds!r}")
    return float(seconds)


class SystemClock:
    """The real wall clock: ``now()`` is :func:`time.time`, seconds since the Unix epoch.

    Wall-clock time (not :func:`time.monotonic`) because job times are stored and must
    mean the same after a process restart. Introduced in lesson 01.
    """

    def now(self) -> float:
        """Return seconds since the Unix epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` seconds of real time (:func:`asyncio.sleep`).

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite.

        Introduced in lesson 06.
        """
        await asyncio.sleep(_check_wait("sleep", seconds))


class ServerClock:
    """The database server's clock, read without a round trip: this machine's clock plus an offset.

    Where several machines share one queue, a lease written with one machine's clock is
    compared with another's: a worker whose clock runs 31 s ahead takes a live 30 s lease at
    once, one 30 s behind writes leases already over by everyone else's time. With one time
    source, the server's, that cannot happen, whatever NTP does on each machine.

    :class:`~jobqueue.backends.postgres.PostgresQueue` makes one by default and keeps it in
    step: when it opens, and then at its first call after ``resync_s`` seconds, it reads the
    server's time in one round trip and sets :attr:`offset_s` so that ``now()`` gives the
    server's time at the middle of that round trip (off by at most half of it: well under
    a millisecond on a local network). Between syncs ``now()`` costs what the local clock
    costs. Sleeping sleeps on the local clock.

    The local clock is by default this machine's monotonic clock (:func:`time.monotonic`),
    which nothing steps: a step of the wall clock between two syncs (NTP correcting a large
    error, an operator's ``date -s``) would otherwise move the server's time with it until
    the next sync, and bring back the stolen leases above.

    Args:
        local: this machine's clock (default: its monotonic clock); a skewed stand-in
            shows what the offset corrects.
        resync_s: seconds between syncs (> 0; default 60): local clocks drift by about
            0.05 ms a second at most, 3 ms a minute.

    Raises:
        InvalidSettingError: if ``resync_s`` is not a finite number > 0.

    Introduced in lesson 12.
    """

    def __init__(self, local: Clock | None = None, *, resync_s: float = 60.0) -> None:
        if isinstance(resync_s, bool) or not math.isfinite(resync_s) or resync_s <= 0:
            raise InvalidSettingError(f"resync_s must be a finite number of seconds > 0, got {resync_s!r}")
        self.local: Clock = local if local is not None else _MonotonicClock()
        self.resync_s = float(resync_s)
        self.offset_s = 0.0
        """Seconds to add to the local clock's time to get the server's."""
        self._synced_at: float | None = None  # local time of the last sync

    def now(self) -> float:
        """Return the server's time in seconds (since the epoch): local time plus the offset."""
        return self.local.now() + self.offset_s

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` seconds on the local clock (a :class:`SleepingClock`'s, else real time).

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite.
        """
        if isinstance(self.local, SleepingClock):
            await self.local.sleep(seconds)
        else:
            await asyncio.sleep(_check_wait("sleep", seconds))

    def sync_due(self) -> bool:
        """Whether the offset was never measured, or ``resync_s`` seconds have passed since."""
        return self._synced_at is None or abs(self.local.now() - self._synced_at) >= self.resync_s

    def sync(self, read_server: Callable[[], float]) -> float:
        """Measure the offset: ``read_server()`` returns the server's time in seconds.

        Returns:
            The new offset, in seconds.
        """
        before = self.local.now()
        server = read_server()
        after = self.local.now()
        self.offset_s = server - (before + after) / 2
        self._synced_at = after
        return self.offset_s

    def __repr__(self) -> str:
        return f"ServerClock(offset_s={self.offset_s:+.3f})"


class _MonotonicClock:
    """This machine's monotonic clock (:func:`time.monotonic`): seconds from an unspecified start.

    Never stepped, only slewed; meaningless on its own, so only :class:`ServerClock` uses it,
    with an offset to the server's time.
    """

    def now(self) -> float:
        """Return the monotonic clock's seconds."""
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: for demos and tests.

    Args:
        start_s: the time ``now()`` returns before any :meth:`advance`, in seconds
            (default 0).

    Raises:
        InvalidSettingError: if ``start_s`` is not a finite number.

    Tasks that ``await clock.sleep(s)`` wake when the clock is moved to or past their
    deadline: by :meth:`advance` (a jump: every sleeper due by the new time wakes, late)
    or by :meth:`run_for` (time flows: the clock stops at each deadline on the way and
    lets the woken tasks run before it moves on, like ``tokio::time::advance``).

    Introduced in lesson 01; :meth:`sleep` and :meth:`run_for` in lesson 06.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        if not math.isfinite(start_s):
            raise InvalidSettingError(f"start_s must be a finite number of seconds, got {start_s!r}")
        self._now = float(start_s)
        # Heap of (deadline in seconds, serial, future of the sleeping task).
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._serial = itertools.count()

    def now(self) -> float:
        """Return the current time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time in seconds.

        Sleepers whose deadline is at or before the new time are woken; they run at the
        caller's next ``await`` and see the new time (a jump, as if the whole process had
        been paused). To let time *flow* through each deadline, use :meth:`run_for`.

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite (time never runs
                backwards: leases that had ended would come back to life).
        """
        self._now += _check_wait("advance", seconds)
        self._wake_due()
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Return once the clock has been moved to ``now() + seconds`` or later.

        Never returns before its deadline, whatever the wall clock does; ``sleep(0)``
        just lets other tasks run once. Cancelling the sleeping task is safe.

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite.

        Introduced in lesson 06.
        """
        deadline = self._now + _check_wait("sleep", seconds)
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._serial), woken))
        await woken

    async def run_for(self, seconds: float) -> float:
        """Let ``seconds`` seconds pass, waking every sleeper at its own deadline.

        The clock moves to the earliest pending deadline, wakes the tasks sleeping until
        then, gives them :data:`SETTLE_TURNS` turns of the event loop to react (claim a
        job, extend a lease, go back to sleep), and repeats up to ``now() + seconds``.
        Tasks that wait on real I/O (a socket, a thread) are not waited for.

        Returns:
            The new time, in seconds.

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite.

        Introduced in lesson 06.
        """
        target = self._now + _check_wait("run_for", seconds)
        await _settle()
        while (deadline := self._next_deadline()) is not None and deadline <= target:
            self._now = max(self._now, deadline)
            self._wake_due()
            await _settle()
        self._now = max(self._now, target)
        return self._now

    def _next_deadline(self) -> float | None:
        while self._sleepers and _gone(self._sleepers[0][2]):
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, woken = heapq.heappop(self._sleepers)
            if not _gone(woken):
                woken.set_result(None)

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now:g}s)"


def _gone(woken: asyncio.Future[None]) -> bool:
    """Whether nobody waits on ``woken`` any more (cancelled, or its event loop closed)."""
    return woken.done() or woken.get_loop().is_closed()


async def _settle() -> None:
    for _ in range(SETTLE_TURNS):
        await asyncio.sleep(0)
