"""A process named by its PID and its start time (jobqueue.teaching._processes)."""

from __future__ import annotations

import os
from dataclasses import replace

import psutil
import pytest

from jobqueue.teaching._processes import ProcessId


def test_a_live_process_stays_alive_when_the_machines_boot_time_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On Linux every start time since the epoch is the boot time plus the time since boot, and
    the kernel's boot time follows the wall clock in whole seconds: one move of a second made
    every holder look ended (the likely cause of a local server stopped mid-run)."""
    me = ProcessId.current()
    boot_time, create_time = psutil.boot_time, psutil.Process.create_time
    monkeypatch.setattr(psutil, "boot_time", lambda: boot_time() + 1.0)
    monkeypatch.setattr(psutil.Process, "create_time", lambda process: create_time(process) + 1.0)
    assert me.alive()
    assert ProcessId.from_json(me.to_json()) == me  # kept as written, since boot included


def test_a_pid_handed_out_again_is_not_the_process_recorded() -> None:
    me = ProcessId.current()
    assert me.since_boot is not None
    earlier = replace(me, started=me.started - 3600, since_boot=me.since_boot - 3600)
    assert not earlier.alive()
    assert not ProcessId(os.getpid(), me.started - 3600).alive()  # a record without since_boot


def test_a_record_written_before_since_boot_was_kept_still_names_its_live_process() -> None:
    me = ProcessId.current()
    old = ProcessId.from_json({"pid": me.pid, "started": me.started})
    assert old is not None and old.since_boot is None and old.alive()
