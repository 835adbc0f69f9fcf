"""The zombie write of lesson 15: a worker paused with SIGSTOP past its lease, then resumed.

A killed worker (lesson 15's :mod:`~jobqueue.teaching.chaos` lab) stops for good. A paused
one comes back: a stop-the-world garbage collection, a laptop lid closed, a virtual
machine moved to another host, or ``kill -STOP``. While it sleeps its lease runs out and
another worker runs the job. When it wakes it carries on where it was, and writes the
effect of a job that is no longer its own: a *zombie write*. Its ack is refused
(:class:`~jobqueue.errors.StaleLeaseError`), but the effect was written before the ack.

:func:`run_pause` shows it on one :class:`~jobqueue.backends.postgres.PostgresQueue`:

1. it enqueues one job, ``job-000``;
2. a worker process claims it (a lease of :data:`LEASE_S`), records that it started, says
   so through a pipe and waits there; the lab stops it with SIGSTOP at that point (the
   pipe only fixes where in the code the pause lands);
3. once the lease has run out, a second worker (in the calling process) claims the job,
   writes its effect and acks it;
4. the lab resumes the first worker (SIGCONT) and lets it go on: it writes its effect the
   way its design says, then acks;
5. the histories and the effects table go to :func:`~jobqueue.testing.check_history`.

:func:`run_pause_designs` runs several designs side by side, each in a schema of its own.

Three designs (:data:`PAUSE_DESIGNS`): ``"at-least-once"`` writes the effect as it is, so
the zombie books it a second time and the checker reports it; ``"at-least-once + fencing"``
writes the effect in a transaction that first locks the job's row and checks that the
worker's fencing token (:attr:`~jobqueue.job.Job.fencing_token`, the number of Martin
Kleppmann's "How to do distributed locking", 2016, which no claim hands out twice) is still
the job's, so the zombie is refused; ``"at-least-once +
process_once"`` writes it through :func:`~jobqueue.idempotency.process_once` keyed by the
job id, so the zombie finds the id and skips.

Course helper only. Introduced in lesson 15.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any, Literal

from jobqueue import db, idempotency
from jobqueue.backends.contract import Queue
from jobqueue.clock import SystemClock
from jobqueue.errors import InvalidSettingError, QueueUnavailableError, StaleLeaseError
from jobqueue.job import Lease
from jobqueue.teaching.chaos import CHAOS, EFFECTS_TABLE, HANG_GUARD_S, ChaosJob, book_effect
from jobqueue.testing import History, HistoryReport, check_history, read_history

EffectDesign = Literal[
    "at-least-once", "at-least-once + lease check", "at-least-once + fencing", "at-least-once + process_once"
]
"""How a lab's worker writes the effect (see :func:`write_effect`)."""

PauseDesign = Literal["at-least-once", "at-least-once + fencing", "at-least-once + process_once"]
"""How both workers write the effect: as it is, fenced by the lease token, or once per job id."""

PAUSE_DESIGNS: tuple[PauseDesign, ...] = (
    "at-least-once",
    "at-least-once + fencing",
    "at-least-once + process_once",
)
"""Every design, in the order lesson 15 shows them."""

LEASE_S = 0.25
"""The lease of :func:`run_pause`'s queue, in seconds: the paused worker sleeps past it."""

JOB_ID = "job-000"
"""The one job of the run."""

_HOLDS = "SELECT id FROM jobqueue_jobs WHERE id = ? AND {column} = ? FOR UPDATE"
"""Locks the job's row if its ``lease_token`` or ``fencing_token`` is still the one given."""

_GUARDED_BY = {"at-least-once + fencing": "fencing_token", "at-least-once + lease check": "lease_token"}
"""The job's column each guarded design checks in the effect's transaction."""


@dataclass(frozen=True, kw_only=True)
class PauseRun:
    """What :func:`run_pause` found.

    Attributes:
        design: how the workers wrote the effect.
        report: the history checker's report (effects read from the effects table).
        second: what the second worker's effect and ack did, e.g. ``"effect written, ack
            accepted"``.
        zombie: what the resumed worker's effect and ack did, e.g. ``"effect written, ack
            refused (stale lease)"``.
    """

    design: PauseDesign
    report: HistoryReport
    second: str
    zombie: str


def run_pause(url: str, folder: Path | str, design: PauseDesign) -> PauseRun:
    """Pause a worker holding the one job past its lease, let another finish it, resume the first.

    Args:
        url: an empty PostgreSQL database (a URL or a libpq conninfo).
        folder: an empty or missing folder for the history files.
        design: one of :data:`PAUSE_DESIGNS`.

    Returns:
        The run (:class:`PauseRun`).

    Raises:
        InvalidSettingError: for an unknown design, or a folder that holds files already.
        RuntimeError: if the paused worker fails to start or to answer within
            :data:`~jobqueue.teaching.chaos.HANG_GUARD_S` seconds.
        jobqueue.QueueUnavailableError: if the server at ``url`` cannot be reached.
    """
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    if design not in PAUSE_DESIGNS:
        raise InvalidSettingError(f"design must be one of {', '.join(PAUSE_DESIGNS)}; got {design!r}")
    root = Path(folder)
    if root.exists() and any(root.iterdir()):
        raise InvalidSettingError(f"run_pause needs a fresh folder, {str(root)!r} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    with (
        PostgresQueue(url, visibility_timeout_s=LEASE_S) as queue,
        psycopg.connect(url, autocommit=True) as effects,
    ):
        with db.transaction(effects):
            db.fetch(effects, EFFECTS_TABLE)
        idempotency.create_tables(effects)
        with History(root, "producer") as producer:
            queue.enqueue(CHAOS, ChaosJob(number=0), id=JOB_ID)
            producer.enqueued(JOB_ID)
        context = multiprocessing.get_context("forkserver")
        here, there = context.Pipe()
        worker = context.Process(target=paused_worker, args=(design, url, root, there), daemon=True)
        worker.start()
        there.close()
        try:
            _expect(here, JOB_ID, "claim the job")
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGSTOP)  # paused, holding the job
            second = _finish_elsewhere(design, queue, effects, root)
            os.kill(worker.pid, signal.SIGCONT)
            here.send("go on")
            zombie = _expect(here, None, "go on after the pause")
            worker.join(HANG_GUARD_S)
        finally:
            if worker.is_alive():
                worker.kill()
                worker.join()
            here.close()
        booked = [row[0] for row in db.fetch(effects, "SELECT job_id FROM effects")]
        dead = [letter.job.id for letter in queue.dead_letters()]
        report = check_history(read_history(root), dead=dead, effects=booked)
        return PauseRun(design=design, report=report, second=second, zombie=zombie)


def run_pause_designs(
    folder: Path | str, designs: Sequence[PauseDesign] = PAUSE_DESIGNS
) -> dict[PauseDesign, PauseRun]:
    """:func:`run_pause` for each design side by side, each in a schema of its own.

    The schemas are made in a scratch database on the course's server, dropped afterwards
    (:func:`~jobqueue.teaching.postgres_server.in_scratch_schemas`); each design's
    histories go to a subfolder of ``folder``.

    Returns:
        The runs, by design.
    """
    from jobqueue.teaching.postgres_server import in_scratch_schemas

    root = Path(folder)
    runs = {
        design: partial(run_pause, folder=root / design.replace(" + ", "_"), design=design)
        for design in designs
    }
    return in_scratch_schemas("pause_lab", runs)


def paused_worker(design: PauseDesign, url: str, folder: Path, pipe: Pipe) -> None:
    """The worker that is paused: claim the job, say so, wait for the word, then write and ack."""
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    with (
        PostgresQueue(url, visibility_timeout_s=LEASE_S) as queue,
        psycopg.connect(url, autocommit=True) as effects,
        History(folder, "paused") as history,
    ):
        lease = queue.claim()
        if lease is None:
            pipe.send("no job to claim")
            return
        history.started(lease.job.id)
        pipe.send(lease.job.id)
        pipe.recv()  # the lab stops this process here, and later says "go on"
        pipe.send(write_and_ack(design, queue, effects, lease, history))


def write_and_ack(
    design: EffectDesign,
    queue: Queue,
    effects: Any,
    lease: Lease,
    history: History,
    *,
    written: str | None = None,
) -> str:
    """Write the job's effect the way ``design`` says, record it finished, ack; say what happened.

    ``effects`` is a psycopg connection to the queue's own database (the fence reads the
    job's row there). A refused effect is not acked. ``written``: what
    :func:`write_effect` said, for an effect written earlier (then only the ack is left).
    """
    effect = written if written is not None else write_effect(design, effects, lease)
    if effect.startswith("effect refused"):
        return f"{effect}, no ack sent"
    return f"{effect}, {finish_and_ack(queue, lease, history)}"


def write_effect(design: EffectDesign, effects: Any, lease: Lease) -> str:
    """Write the job's effect the way ``design`` says, through ``effects``; say what happened.

    - ``"at-least-once"``: as it is;
    - ``"at-least-once + fencing"``: in a transaction that first locks the job's row and
      checks that ``lease.job.fencing_token`` is still the job's, else refused;
    - ``"at-least-once + lease check"``: the same with ``lease.token``, which a server
      crash can hand out again (:mod:`~jobqueue.teaching.crash_lab` shows it let a late
      write through);
    - ``"at-least-once + process_once"``: through
      :func:`~jobqueue.idempotency.process_once` keyed by the job id, skipped if recorded.
    """
    job_id = lease.job.id
    book = partial(book_effect, job_id=job_id)
    if design == "at-least-once + process_once":
        if not idempotency.process_once(effects, job_id, book, clock=SystemClock()):
            return "effect skipped (its job id was recorded)"
    else:
        column = _GUARDED_BY.get(design)
        with db.transaction(effects):
            if column is not None:
                token = lease.job.fencing_token if column == "fencing_token" else lease.token
                if not db.fetch(effects, _HOLDS.format(column=column), [job_id, token]):
                    return f"effect refused (its {column.replace('_', ' ')} is no longer the job's)"
            book_effect(effects, job_id)
    return "effect written"


def finish_and_ack(queue: Queue, lease: Lease, history: History) -> str:
    """Record the job finished, then ack it; say whether the ack was accepted.

    A queue whose connection broke (its server restarted) raises
    :class:`~jobqueue.errors.QueueUnavailableError` and connects again at its next call:
    the ack is then sent once more.
    """
    history.finished(lease.job.id)
    try:
        try:
            queue.ack(lease)
        except QueueUnavailableError:
            queue.ack(lease)
    except StaleLeaseError:
        return "ack refused (stale lease)"
    return "ack accepted"


def _finish_elsewhere(design: PauseDesign, queue: Queue, effects: Any, folder: Path) -> str:
    """Claim the job once its lease has run out, as a second worker, and handle it."""
    guard = time.monotonic() + HANG_GUARD_S
    while (lease := queue.claim()) is None:
        if time.monotonic() > guard:
            raise RuntimeError(f"hang guard: the job was not claimable again within {HANG_GUARD_S:g} s")
        time.sleep(0.02)
    with History(folder, "second") as history:
        history.started(lease.job.id)
        return write_and_ack(design, queue, effects, lease, history)


def _expect(pipe: Pipe, wanted: str | None, doing: str) -> str:
    """The next message of the paused worker (``wanted``, if given).

    Raises:
        RuntimeError: if it sends something else, dies, or says nothing within the hang guard.
    """
    try:
        said = pipe.recv() if pipe.poll(HANG_GUARD_S) else None
    except EOFError:
        said = None
    if not isinstance(said, str) or (wanted is not None and said != wanted):
        raise RuntimeError(f"the paused worker did not {doing}: it said {said!r}")
    return said
