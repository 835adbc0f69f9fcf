"""Exponential backoff with a cap and "equal jitter".

For attempt ``n`` (1-based) the ceiling is ``min(cap_s, base_s * 2**(n-1))`` and the
delay before the next try is ``ceiling/2 + random()*ceiling/2``: never less than half the
ceiling, never more than all of it. With base 1 s, cap 60 s and ``random`` always 1 the
delays are 1, 2, 4, 8 ... 60, 60 s. The jitter spreads out retries of jobs that failed
together, so they do not all hit a recovering service at once (the thundering herd).
The formulas follow Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture
Blog, 2015).

Introduced in lesson 02.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from jobqueue.errors import InvalidSettingError

RandomFn = Callable[[], float]
"""A source of randomness: returns a float in ``[0, 1]`` (``random.random`` or a constant)."""

DEFAULT_BASE_S = 1.0
"""Delay ceiling of the first retry, in seconds."""

DEFAULT_CAP_S = 60.0
"""Largest delay between two attempts, in seconds."""


def _is_number(value: object) -> bool:
    """Whether ``value`` is an int or float, and not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_attempt(attempt: int) -> None:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidSettingError(f"attempt must be an int >= 1 (attempts count from 1), got {attempt!r}")


def draw(random: RandomFn) -> float:
    """Call ``random()`` once and check the result is in ``[0, 1]``.

    Raises:
        InvalidSettingError: if the result is outside ``[0, 1]`` (or NaN).
    """
    value = random()
    if not 0.0 <= value <= 1.0:
        raise InvalidSettingError(f"random() must return a float in [0, 1], got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """Delay rule between attempts: exponential, capped, with equal jitter.

    Args:
        base_s: ceiling of the first delay, in seconds (> 0). Default 1 s.
        cap_s: largest ceiling, in seconds (>= ``base_s``). Default 60 s.

    Raises:
        InvalidSettingError: if ``base_s <= 0``, ``cap_s < base_s``, or either is not
            a finite number (``True`` is not a number of seconds).

    Example: ``Backoff(base_s=1, cap_s=4)`` with ``random`` always 1 gives 1, 2, 4, 4, 4 s
    for attempts 1..5. Introduced in lesson 02.
    """

    base_s: float = DEFAULT_BASE_S
    cap_s: float = DEFAULT_CAP_S

    def __post_init__(self) -> None:
        if not (_is_number(self.base_s) and math.isfinite(self.base_s) and self.base_s > 0):
            raise InvalidSettingError(f"backoff base_s must be a finite number > 0 s, got {self.base_s!r}")
        if not (_is_number(self.cap_s) and math.isfinite(self.cap_s) and self.cap_s >= self.base_s):
            raise InvalidSettingError(
                f"backoff cap_s must be finite and >= base_s ({self.base_s!r} s), got {self.cap_s!r}"
            )

    def ceiling_s(self, attempt: int) -> float:
        """Largest delay after failed attempt ``attempt`` (1-based): ``min(cap, base*2**(n-1))`` s.

        Any attempt number works, however large: past the cap it returns the cap (no
        overflow).

        Raises:
            InvalidSettingError: if ``attempt`` is not an int >= 1.
        """
        _check_attempt(attempt)
        doublings = attempt - 1
        if doublings >= math.log2(self.cap_s) - math.log2(self.base_s):
            return self.cap_s
        return min(self.cap_s, math.ldexp(self.base_s, doublings))  # below the cap: no overflow

    def delay_s(self, attempt: int, random: RandomFn) -> float:
        """Seconds to wait after failed attempt ``attempt``: ``ceiling/2 + random()*ceiling/2``.

        Args:
            attempt: the attempt that just failed, counted from 1.
            random: returns a float in ``[0, 1]``; pass ``lambda: 1.0`` for the largest
                delays, as the lessons do.

        Raises:
            InvalidSettingError: for a bad ``attempt`` or a ``random()`` result outside
                ``[0, 1]``.
        """
        ceiling = self.ceiling_s(attempt)
        return ceiling / 2 + draw(random) * ceiling / 2
