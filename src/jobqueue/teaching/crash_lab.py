"""The server crash of lesson 15: PostgreSQL stopped with ``pg_ctl stop -m immediate`` after a claim.

A claim on :class:`~jobqueue.backends.postgres.PostgresQueue` commits without waiting for
the disk (``synchronous_commit`` off, lesson 12): a job costs two synced commits, its
enqueue and its ack. The price is paid when the server crashes: the claims of its last
moments are lost. Their jobs are back as they were, claimable at once with the attempt
uncounted, and the lease sequence may hand the lost claim's lease token out again. The
worker that made the claim never hears of it: it runs the job anyway, and writes late,
while another worker holds the job.

:func:`run_crash` shows it on a PostgreSQL server of its own, started in the run's folder
(:func:`~jobqueue.teaching.postgres_server.hold_local_server`): a crash ends every
connection, so the course's shared server must not be the one that crashes.

1. It starts the server, and starts it again with a wider window for a crash to lose
   (a reload would reach the WAL writer only at its next wake-up): ``wal_writer_delay``
   10 s (by default 200 ms, so a crash loses at most the last 0.6 s of claims;
   the lab makes sure its crash lands in that window). It also sets ``fsync`` off: the
   lab kills the server's processes, not the machine, so what was written to the
   operating system survives either way, and fsync would only cost time;
2. for each design, in a database of its own: the producer enqueues ``job-000``;
   worker A claims it (a lease of :data:`LEASE_S`) and starts the work;
3. the server is stopped with ``pg_ctl stop -m immediate`` and started again
   (:func:`~jobqueue.teaching.postgres_server.crash_local_server`): it replays the WAL
   that had left its memory, and A's claim is not in it;
4. worker B claims the job (on a :class:`~jobqueue.clock.ManualClock` moved past A's
   lease, so that the job is due whether the claim was lost or not; :attr:`CrashRun.claim_lost`
   says which) and writes the effect;
5. worker A, which never noticed, writes its effect late and acks; then B acks;
6. the histories and the effects table go to :func:`~jobqueue.testing.check_history`.

The designs are those of :func:`jobqueue.teaching.pause_lab.write_effect`. Lesson 15
shows two (:data:`CRASH_DESIGNS`): ``"at-least-once + lease check"``, which checks in the
effect's transaction that the job's row still carries the worker's lease token, lets A
through, since B holds the same lease token: the checker flags the effect applied twice.
``"at-least-once + fencing"`` checks the fencing token
(:attr:`~jobqueue.job.Job.fencing_token`) instead, which no crash hands out twice: the row
carries B's, so A's late write is refused.

Course helper only. Introduced in lesson 15.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobqueue import db, idempotency
from jobqueue.backends.contract import Queue
from jobqueue.clock import ManualClock
from jobqueue.errors import InvalidSettingError, QueueUnavailableError
from jobqueue.job import Lease
from jobqueue.teaching.chaos import CHAOS, EFFECTS_TABLE, ChaosJob
from jobqueue.teaching.pause_lab import EffectDesign, write_and_ack, write_effect
from jobqueue.testing import History, HistoryReport, check_history, read_history

EFFECT_DESIGNS: tuple[EffectDesign, ...] = (
    "at-least-once",
    "at-least-once + lease check",
    "at-least-once + fencing",
    "at-least-once + process_once",
)
"""Every design :func:`run_crash` takes."""

CRASH_DESIGNS: tuple[EffectDesign, ...] = ("at-least-once + lease check", "at-least-once + fencing")
"""The designs lesson 15 shows, in its order: the lease token's check, then the fencing token's."""

LEASE_S = 30.0
"""The lease of the run's queues, in seconds (on a manual clock: nothing waits for it)."""

JOB_ID = "job-000"
"""The one job of each run."""

WAL_WRITER_DELAY = "10s"
"""The server's ``wal_writer_delay`` during the run: the claim stays in memory until the crash."""


@dataclass(frozen=True, kw_only=True)
class CrashRun:
    """What :func:`run_crash` found for one design.

    Attributes:
        design: how the workers wrote the effect.
        report: the history checker's report (effects read from the effects table).
        claim_lost: whether the crash lost A's claim (B's claim was attempt 1 again).
        same_lease_token: whether B was handed A's lease token again.
        fencing_grew: whether B's fencing token is larger than A's.
        second: what B's effect and ack did, e.g. ``"effect written, ack accepted"``.
        late: what A's late effect and ack did.
    """

    design: EffectDesign
    report: HistoryReport
    claim_lost: bool
    same_lease_token: bool
    fencing_grew: bool
    second: str
    late: str


def run_crash(
    folder: Path | str, designs: Sequence[EffectDesign] = CRASH_DESIGNS
) -> dict[EffectDesign, CrashRun]:
    """Crash a PostgreSQL server of the run's own just after a claim, once per design.

    Args:
        folder: an empty or missing folder: the server's files go to ``server/``, each
            design's histories to a subfolder of its own.
        designs: some of :data:`EFFECT_DESIGNS`, each once.

    Returns:
        The runs, by design.

    Raises:
        InvalidSettingError: for an unknown or repeated design, or a folder that holds
            files already.
        jobqueue.teaching.postgres_server.PostgresCommandError: if the server fails to
            start, stop or start again.
        RuntimeError: if a worker finds the job not claimable (a hang or a bug: after the
            crash the job is due whether its claim was lost or not).
    """
    import psycopg
    from psycopg import sql

    from jobqueue.teaching.postgres_server import (
        crash_local_server,
        hold_local_server,
        release_local_server,
        with_database,
    )

    unknown = [design for design in designs if design not in EFFECT_DESIGNS]
    if unknown or not designs or len(set(designs)) != len(designs):
        known = ", ".join(EFFECT_DESIGNS)
        raise InvalidSettingError(f"designs must be distinct, at least one, of {known}; got {designs!r}")
    root = Path(folder)
    if root.exists() and any(root.iterdir()):
        raise InvalidSettingError(f"run_crash needs a fresh folder, {str(root)!r} is not empty")
    server = root / "server"
    url = hold_local_server(server)
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"ALTER SYSTEM SET wal_writer_delay = '{WAL_WRITER_DELAY}'")
            admin.execute("ALTER SYSTEM SET fsync = off")  # see the module's docstring
        # A reload would reach the WAL writer only when it next wakes; a start reads the settings.
        crash_local_server(server)
        with psycopg.connect(url, autocommit=True) as admin:
            for number, _ in enumerate(designs):
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(f"crash_{number}")))
        return {
            design: _crash_once(
                server, with_database(url, f"crash_{number}"), root / design.replace(" + ", "_"), design
            )
            for number, design in enumerate(designs)
        }
    finally:
        release_local_server(server)


def describe(runs: Mapping[EffectDesign, CrashRun]) -> str:
    """The runs in a few lines each: the checker's summary, the lost claim's tokens, each worker's writes."""
    lines = []
    for design, run in runs.items():
        lines += [
            f"{design}: {run.report.summary()}",
            f"  claim lost: {run.claim_lost} | B got A's lease token: {run.same_lease_token}"
            f" | B's fencing token larger: {run.fencing_grew}",
            f"  worker B:       {run.second}",
            f"  worker A, late: {run.late}",
        ]
    return "\n".join(lines)


RECORDED = """\
at-least-once + lease check: 1 enqueued: 0 lost, 1 run more than once, 1 effects applied twice
  claim lost: True | B got A's lease token: True | B's fencing token larger: True
  worker B:       effect written, ack accepted
  worker A, late: effect written, ack refused (stale lease)
at-least-once + fencing: 1 enqueued: 0 lost, 1 run more than once, 0 effects applied twice
  claim lost: True | B got A's lease token: True | B's fencing token larger: True
  worker B:       effect written, ack accepted
  worker A, late: effect refused (its fencing token is no longer the job's), no ack sent"""
"""What :func:`describe` says of ``run_crash(folder)`` (:data:`CRASH_DESIGNS`), as
``tests/test_crash_lab.py`` checks: lesson 15 prints it instead of starting a server of
its own in the notebook, which costs seconds."""


def _crash_once(server: Path, url: str, folder: Path, design: EffectDesign) -> CrashRun:
    """One design's run on the database at ``url`` of the server in ``server``."""
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue
    from jobqueue.teaching.postgres_server import crash_local_server

    with psycopg.connect(url, autocommit=True) as con:
        with db.transaction(con):
            db.fetch(con, EFFECTS_TABLE)
        idempotency.create_tables(con)
        idempotency.create_fencing_table(con)
    clock = ManualClock()
    first_worker = PostgresQueue(url, clock=clock, visibility_timeout_s=LEASE_S)
    second_worker = None
    try:
        with History(folder, "producer") as producer:
            first_worker.enqueue(CHAOS, ChaosJob(number=0), id=JOB_ID)  # waits for the disk
            producer.enqueued(JOB_ID)
        with History(folder, "worker-a") as history_a, History(folder, "worker-b") as history_b:
            first = _claimed(first_worker)  # does not wait for the disk
            history_a.started(first.job.id)
            crash_local_server(server)
            clock.advance(LEASE_S)  # lost or not, the claim's lease is over: the job is due
            second_worker = PostgresQueue(url, clock=clock, visibility_timeout_s=LEASE_S)
            with psycopg.connect(url, autocommit=True) as effects:  # opened after the crash
                second = _claimed(second_worker)
                history_b.started(second.job.id)
                written = write_effect(design, effects, second)
                late = write_and_ack(design, first_worker, effects, first, history_a)
                ours = write_and_ack(design, second_worker, effects, second, history_b, written=written)
                booked = [row[0] for row in db.fetch(effects, "SELECT job_id FROM effects")]
        dead = [letter.job.id for letter in second_worker.dead_letters()]
    finally:
        first_worker.close()
        if second_worker is not None:
            second_worker.close()
    return CrashRun(
        design=design,
        report=check_history(read_history(folder), dead=dead, effects=booked),
        claim_lost=second.job.attempts == first.job.attempts,
        same_lease_token=second.token == first.token,
        fencing_grew=second.job.fencing_token > first.job.fencing_token,
        second=ours,
        late=late,
    )


def _claimed(queue: Queue) -> Lease:
    """The job, claimed by ``queue``; a first call that meets a broken connection is made again."""
    try:
        lease = queue.claim()
    except QueueUnavailableError:
        lease = queue.claim()
    if lease is None:
        raise RuntimeError(f"run_crash: {JOB_ID} was not claimable")
    return lease
