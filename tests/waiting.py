"""Waiting in tests: for an event, never for a moment on the clock.

A test that runs processes or threads decides nothing by a wall-clock deadline, which a
loaded machine (pytest-xdist on 2 cores, a neighbour's build) can reach. It waits for the
event itself: a count reaching its target, a process exiting, a line of output. The only
timeout is an outer one, :data:`HANG_GUARD_S`, far beyond any slow run, that turns a hang
into a failure instead of a stuck test run; its message says that it is a hang guard.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

HANG_GUARD_S = 300.0
"""How long a test waits for an event before it reports a hang, in seconds.

Far above what any event in these tests takes on a slow, busy machine (seconds at most):
reaching it means something hangs, not that the machine is slow.
"""


def hang(what: str, timeout_s: float = HANG_GUARD_S) -> str:
    """The failure message of a hang guard: ``what`` did not happen within ``timeout_s``."""
    return f"hang guard: {what} has not happened after {timeout_s:g} s, far beyond a slow machine"


def wait_until(
    done: Callable[[], object],
    what: str,
    *,
    poll_s: float = 0.02,
    timeout_s: float = HANG_GUARD_S,
    details: Callable[[], object] | None = None,
) -> None:
    """Poll ``done()`` every ``poll_s`` s until it is true; fail with :func:`hang` after ``timeout_s``.

    ``details()``, if given, is added to the failure message (the output so far, a log).
    """
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(hang(what, timeout_s) + extra)
        time.sleep(poll_s)


async def wait_until_async(
    done: Callable[[], object],
    what: str,
    *,
    poll_s: float = 0.01,
    timeout_s: float = HANG_GUARD_S,
    details: Callable[[], object] | None = None,
) -> None:
    """:func:`wait_until` inside an event loop: the loop runs on while it polls."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(hang(what, timeout_s) + extra)
        await asyncio.sleep(poll_s)


async def within_hang_guard(awaitable: Awaitable[T], what: str, timeout_s: float = HANG_GUARD_S) -> T:
    """Await ``awaitable``; fail with :func:`hang` if it has not finished after ``timeout_s``."""
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except TimeoutError:
        raise AssertionError(hang(what, timeout_s)) from None
