"""Clocks: where every time-dependent piece of the package reads "now", in seconds.

Passing the clock in (instead of calling :func:`time.time` inside the queue) lets demos
and tests jump ahead with :meth:`ManualClock.advance` instead of waiting.

Introduced in lesson 01.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

from jobqueue.errors import InvalidSettingError


class Clock(Protocol):
    """Anything with a ``now()`` that returns the current time in seconds (float)."""

    def now(self) -> float:
        """Return the current time in seconds."""
        ...


class SystemClock:
    """The real wall clock: ``now()`` is :func:`time.time`, seconds since the Unix epoch.

    Wall-clock time (not :func:`time.monotonic`) because job times are stored and must
    mean the same after a process restart. Introduced in lesson 01.
    """

    def now(self) -> float:
        """Return seconds since the Unix epoch."""
        return time.time()


class ManualClock:
    """A clock that moves only when told to: for demos and tests.

    Args:
        start_s: the time ``now()`` returns before any :meth:`advance`, in seconds
            (default 0).

    Raises:
        InvalidSettingError: if ``start_s`` is not a finite number.

    Introduced in lesson 01.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        if not math.isfinite(start_s):
            raise InvalidSettingError(f"start_s must be a finite number of seconds, got {start_s!r}")
        self._now = float(start_s)

    def now(self) -> float:
        """Return the current time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time in seconds.

        Raises:
            InvalidSettingError: if ``seconds`` is negative or not finite (time never runs
                backwards: leases that had ended would come back to life).
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidSettingError(
                f"advance takes a finite, non-negative number of seconds, got {seconds!r}"
            )
        self._now += seconds
        return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now:g}s)"
