"""A process named by its PID and its start time, so that a reused PID is not taken for it.

The system hands a PID out again once its process has ended: a PID alone, written to a file
by a process that was later killed, may name some other process by the time it is read.
The course's helpers that record who holds something (the local PostgreSQL server, the chaos
lab's folders) record the start time too, and count a process as alive only while a
process with that PID and that start time runs. A zombie (ended, not yet reaped by its
parent) counts as ended.

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


def start_time(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch; None if none runs (or a zombie)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except psutil.Error:  # no such process, or not ours to look at
        return None


@dataclass(frozen=True)
class ProcessId:
    """A process: its PID and its start time (seconds since the epoch)."""

    pid: int
    started: float

    @classmethod
    def current(cls) -> ProcessId:
        """This process.

        Raises:
            RuntimeError: if the system does not say when this process started.
        """
        started = start_time(os.getpid())
        if started is None:
            raise RuntimeError("cannot read this process's start time")
        return cls(os.getpid(), started)

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        """The process running as ``pid`` now, or None if there is none."""
        started = start_time(pid)
        return None if started is None else cls(pid, started)

    def alive(self) -> bool:
        """Whether this process still runs (not a zombie, and its PID not handed to another)."""
        started = start_time(self.pid)
        return started is not None and abs(started - self.started) < SAME_START_S

    def to_json(self) -> dict[str, Any]:
        """As stored in a JSON file: ``{"pid": ..., "started": ...}``."""
        return {"pid": self.pid, "started": self.started}

    @classmethod
    def from_json(cls, value: Any) -> ProcessId | None:
        """What :meth:`to_json` stored; None for anything else (such as a bare PID)."""
        if (
            isinstance(value, dict)
            and isinstance(value.get("pid"), int)
            and isinstance(value.get("started"), int | float)
        ):
            return cls(value["pid"], float(value["started"]))
        return None
