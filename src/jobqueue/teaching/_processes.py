"""A process named by its PID and its start time, so that a reused PID is not taken for it.

The system hands a PID out again once its process has ended: a PID alone, written to a file
by a process that was later killed, may name some other process by the time it is read.
The course's helpers that record who holds something (the local PostgreSQL server, the chaos
lab's folders) record the start time too, and count a process as alive only while a
process with that PID and that start time runs. A zombie (ended, not yet reaped by its
parent) counts as ended.

The start time is kept two ways, as the system gives it (seconds since the epoch) and as
seconds since the machine booted, and either agreeing is enough. On Linux the first is
the second plus the boot time, which the kernel derives from the wall clock, in whole
seconds: when the clock is set or slewed (NTP, a virtual machine resumed) the boot time
moves, and every live process's start time with it. Compared alone, a move of one second
makes every holder of the local PostgreSQL server look ended at once (the likely cause of a
server stopped under a running test suite). On macOS the start time since the epoch is the one
that stays put.

Course helper only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psutil

SAME_START_S = 1.0
"""Start times closer than this, in seconds, are the same start (the system's clock ticks
and its boot time, from which they are computed, are read with some rounding)."""


def _start(pid: int) -> tuple[float, float] | None:
    """(seconds since the epoch, seconds since boot) at the start of ``pid``; None if none runs."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        started = process.create_time()
        return started, started - psutil.boot_time()
    except psutil.Error:  # no such process, or not ours to look at
        return None


@dataclass(frozen=True)
class ProcessId:
    """A process: its PID and its start time (seconds since the epoch, and since boot)."""

    pid: int
    started: float
    since_boot: float | None = None  # None in a record written before it was kept

    @classmethod
    def current(cls) -> ProcessId:
        """This process.

        Raises:
            RuntimeError: if the system does not say when this process started.
        """
        found = cls.of(os.getpid())
        if found is None:
            raise RuntimeError("cannot read this process's start time")
        return found

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        """The process running as ``pid`` now, or None if there is none."""
        started = _start(pid)
        return None if started is None else cls(pid, *started)

    def alive(self) -> bool:
        """Whether this process still runs (not a zombie, and its PID not handed to another)."""
        now = _start(self.pid)
        if now is None:
            return False
        same_since_boot = self.since_boot is not None and abs(now[1] - self.since_boot) < SAME_START_S
        return same_since_boot or abs(now[0] - self.started) < SAME_START_S

    def to_json(self) -> dict[str, Any]:
        """As stored in a JSON file: ``{"pid": ..., "started": ..., "since_boot": ...}``."""
        return {"pid": self.pid, "started": self.started, "since_boot": self.since_boot}

    @classmethod
    def from_json(cls, value: Any) -> ProcessId | None:
        """What :meth:`to_json` stored; None for anything else (such as a bare PID)."""
        if (
            isinstance(value, dict)
            and isinstance(value.get("pid"), int)
            and isinstance(value.get("started"), int | float)
        ):
            since_boot = value.get("since_boot")
            known = float(since_boot) if isinstance(since_boot, int | float) else None
            return cls(value["pid"], float(value["started"]), known)
        return None
