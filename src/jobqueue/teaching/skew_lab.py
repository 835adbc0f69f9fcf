"""The skewed clock of lesson 15: a worker whose clock runs 31 s ahead, on one PostgreSQL queue.

A lease is a time: "this job is mine until t". Where each worker decides with its own
clock, a worker whose clock runs ahead of the one that wrote the lease sees it over
early: 31 s ahead, it takes a job whose 30 s lease was written a moment ago, and both
workers run it. Where the server's clock decides (:class:`~jobqueue.clock.ServerClock`,
the default of :class:`~jobqueue.backends.postgres.PostgresQueue`, lesson 12), each
queue measures its machine's offset from the server and takes it out: the skew changes
nothing.

:func:`run_skew` shows it on one job (:func:`run_skews`: for both deciders at once):

1. an on-time worker enqueues ``job-000`` and claims it (a lease of :data:`LEASE_S`);
2. a worker whose clock runs :data:`AHEAD_S` ahead
   (:class:`~jobqueue.testing.SkewedClock`) asks for a job: with its own clock deciding
   it takes ``job-000``, writes the effect and acks; with the server's, it finds nothing;
3. the on-time worker writes the effect and acks;
4. the histories and the effects table go to :func:`~jobqueue.testing.check_history`.

Both workers write the effect as it is (at-least-once, as
:func:`jobqueue.teaching.pause_lab.write_and_ack` does): the point is whose clock
decides, not how the effect is guarded.

Course helper only. Introduced in lesson 15.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from jobqueue import db
from jobqueue.clock import Clock, ServerClock, SystemClock
from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.chaos import CHAOS, EFFECTS_TABLE, ChaosJob
from jobqueue.teaching.pause_lab import write_and_ack
from jobqueue.testing import History, HistoryReport, SkewedClock, check_history, read_history

Decider = Literal["each worker's clock", "the server's clock"]
"""Whose clock the queues read: the machine's own, or the server's (:class:`ServerClock`)."""

DECIDERS: tuple[Decider, ...] = ("each worker's clock", "the server's clock")
"""Both, in the order lesson 15 shows them."""

LEASE_S = 30.0
"""The lease of :func:`run_skew`'s queues, in seconds."""

AHEAD_S = 31.0
"""How far the second worker's clock runs ahead, in seconds: past a whole lease."""

JOB_ID = "job-000"
"""The one job of the run."""


@dataclass(frozen=True, kw_only=True)
class SkewRun:
    """What :func:`run_skew` found.

    Attributes:
        decider: whose clock the queues read.
        report: the history checker's report (effects read from the effects table).
        ahead: what the worker whose clock runs ahead did, e.g. ``"found nothing due"``.
        on_time: what the on-time worker's effect and ack did.
    """

    decider: Decider
    report: HistoryReport
    ahead: str
    on_time: str


def run_skews(folder: Path | str, deciders: Sequence[Decider] = DECIDERS) -> dict[Decider, SkewRun]:
    """:func:`run_skew` for each decider side by side, each in a schema of its own.

    The schemas are made in a scratch database on the course's server, dropped afterwards
    (:func:`~jobqueue.teaching.postgres_server.in_scratch_schemas`); each run's
    histories go to a numbered subfolder of ``folder``.

    Returns:
        The runs, by decider.
    """
    from jobqueue.teaching.postgres_server import in_scratch_schemas

    root = Path(folder)
    runs = {
        decider: partial(run_skew, folder=root / str(number), decider=decider)
        for number, decider in enumerate(deciders)
    }
    return in_scratch_schemas("skew_lab", runs)


def run_skew(url: str, folder: Path | str, decider: Decider) -> SkewRun:
    """Let a worker whose clock runs :data:`AHEAD_S` ahead ask for the job an on-time worker holds.

    Args:
        url: an empty PostgreSQL database (a URL or a libpq conninfo).
        folder: an empty or missing folder for the history files.
        decider: one of :data:`DECIDERS`.

    Returns:
        The run (:class:`SkewRun`).

    Raises:
        InvalidSettingError: for an unknown decider, or a folder that holds files already.
        jobqueue.QueueUnavailableError: if the server at ``url`` cannot be reached.
    """
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    if decider not in DECIDERS:
        raise InvalidSettingError(f"decider must be one of {', '.join(DECIDERS)}; got {decider!r}")
    root = Path(folder)
    if root.exists() and any(root.iterdir()):
        raise InvalidSettingError(f"run_skew needs a fresh folder, {str(root)!r} is not empty")

    def clock(machine: Clock) -> Clock:
        return machine if decider == "each worker's clock" else ServerClock(machine)

    with (
        PostgresQueue(url, clock=clock(SystemClock()), visibility_timeout_s=LEASE_S) as on_time,
        PostgresQueue(url, clock=clock(SkewedClock(AHEAD_S)), visibility_timeout_s=LEASE_S) as ahead,
        psycopg.connect(url, autocommit=True) as effects,
        History(root, "producer") as producer,
        History(root, "on-time") as on_time_history,
        History(root, "ahead") as ahead_history,
    ):
        with db.transaction(effects):
            db.fetch(effects, EFFECTS_TABLE)
        on_time.enqueue(CHAOS, ChaosJob(number=0), id=JOB_ID)
        producer.enqueued(JOB_ID)
        held = on_time.claim()
        if held is None:
            raise RuntimeError(f"run_skew: the on-time worker could not claim {JOB_ID}")
        on_time_history.started(held.job.id)
        taken = ahead.claim()
        if taken is None:
            ahead_said = "found nothing due"
        else:
            ahead_history.started(taken.job.id)
            done = write_and_ack("at-least-once", ahead, effects, taken, ahead_history)
            ahead_said = f"took the job under a live lease; {done}"
        on_time_said = write_and_ack("at-least-once", on_time, effects, held, on_time_history)
        booked = [row[0] for row in db.fetch(effects, "SELECT job_id FROM effects")]
        dead = [letter.job.id for letter in on_time.dead_letters()]
    report = check_history(read_history(root), dead=dead, effects=booked)
    return SkewRun(decider=decider, report=report, ahead=ahead_said, on_time=on_time_said)
