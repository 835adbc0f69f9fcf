"""Faults a chaos test injects into a worker, beside killing it: a clock that is off.

:class:`SkewedClock` is a machine's wall clock running ``offset_s`` seconds ahead (or
behind, if negative). Passed to a queue as its clock, it decides that worker's leases
and due times: 31 s ahead, it takes a job whose 30 s lease another worker holds. Wrapped
in :class:`~jobqueue.clock.ServerClock` (the default clock of
:class:`~jobqueue.backends.postgres.PostgresQueue`), the skew is measured against the
server and taken out, and changes nothing.

Introduced in lesson 15 (lesson 12 shows the same skew with a class of its own).
"""

from __future__ import annotations

import math

from jobqueue.clock import Clock, SystemClock
from jobqueue.errors import InvalidSettingError


class SkewedClock:
    """A clock ``offset_s`` seconds off another (default: the wall clock, :class:`SystemClock`).

    Args:
        offset_s: seconds added to every reading (> 0: ahead, < 0: behind); finite.
        base: the clock it is off from.

    Raises:
        InvalidSettingError: if ``offset_s`` is not a finite number.
    """

    def __init__(self, offset_s: float, base: Clock | None = None) -> None:
        if isinstance(offset_s, bool) or not isinstance(offset_s, int | float) or not math.isfinite(offset_s):
            raise InvalidSettingError(f"offset_s must be a finite number of seconds, got {offset_s!r}")
        self.offset_s = float(offset_s)
        self.base: Clock = base if base is not None else SystemClock()

    def now(self) -> float:
        """The base clock's time plus :attr:`offset_s`, in seconds."""
        return self.base.now() + self.offset_s

    def __repr__(self) -> str:
        return f"SkewedClock(offset_s={self.offset_s:+g})"
