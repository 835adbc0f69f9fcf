"""The chaos lab of lesson 16: real worker processes killed with SIGKILL, then checked.

:func:`run_chaos` runs one *design* of a worker against a durable queue in a folder:

1. it starts a worker process (``python -m jobqueue.teaching.chaos life ...``), which opens
   the queue file (:class:`~jobqueue.DurableQueue`) and an effects database, and loops:
   enqueue one new job (the producer, in the same process, since DuckDB lets one process
   open a file), claim one, handle it;
2. once the life has started a seeded number of jobs, and a seeded fraction of a job's
   work later, it kills the process with SIGKILL, wherever it is, and starts the next
   life; the last life is not killed: it produces nothing and runs until
   the queue is empty (jobs whose worker died come back when their lease runs out);
3. it reads the :class:`~jobqueue.testing.History` every life wrote and the effects table,
   and returns the :func:`~jobqueue.testing.check_history` report.

:func:`crash_test` is the same experiment in one process, on a manual clock, with
simulated kills at seeded points of a handler: fast and deterministic, for exercises.

The handler books an effect (a row in the effects table, keyed by the job id) and then
goes on working for a while (rendering, say), so a kill is likely to land between the
effect and the ack. The three designs differ only in where the ack is and how the effect
is written (see :data:`DESIGNS` and :func:`handle`).

Course helper only. Introduced in lesson 16.
"""

from __future__ import annotations

import argparse
import random as random_module
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import duckdb

from jobqueue import db, idempotency
from jobqueue.clock import ManualClock, SystemClock
from jobqueue.durable import DurableQueue
from jobqueue.errors import InvalidSettingError
from jobqueue.job import JobType, Lease
from jobqueue.queue import JobQueue
from jobqueue.testing import SUFFIX, History, HistoryReport, check_history, read_history

Design = Literal["at-most-once", "at-least-once", "at-least-once + process_once"]
"""Where the worker acks and how it writes the effect."""

DESIGNS: tuple[Design, ...] = ("at-most-once", "at-least-once", "at-least-once + process_once")
"""Every design, in the order lesson 16 compares them."""

VISIBILITY_TIMEOUT_S = 0.3
"""The lease of the lab's queue, in seconds: a dead worker's job comes back this soon."""

WORK_S = 0.3
"""How long the handler goes on working after it booked the effect, in seconds."""

KILL_AFTER_STARTS = (1, 3)
"""A life is killed once it has started this many jobs (drawn between the two, seeded),
plus a seeded 60-90 % of :data:`WORK_S`: so the kills land while a job works, however
fast or slow the machine is."""

START_WAIT_S = 60.0
"""Longest wait for a life to start its jobs before the run fails, in seconds."""

QUEUE_FILE = "queue.db"
EFFECTS_FILE = "effects.db"


@dataclass(frozen=True, kw_only=True)
class ChaosJob:
    """The lab's payload: which job it is."""

    number: int


CHAOS = JobType("chaos", ChaosJob)
"""The lab's only job type."""


def book_effect(con: duckdb.DuckDBPyConnection, job_id: str) -> None:
    """The effect: one row in ``effects``, keyed by the job id (a double booking shows)."""
    con.execute("INSERT INTO effects (job_id) VALUES (?)", [job_id])


def handle(
    design: Design, queue: DurableQueue, effects: duckdb.DuckDBPyConnection, lease: Lease, history: History
) -> None:
    """Handle one claimed job the way ``design`` does; every step is recorded in ``history``.

    - ``"at-most-once"``: ack first, then work. A crash after the ack loses the job.
    - ``"at-least-once"``: work, then ack. A crash before the ack runs it again, and
      the effect is booked twice.
    - ``"at-least-once + process_once"``: the same, with the effect written through
      :func:`~jobqueue.idempotency.process_once` keyed by the job id: a second run
      finds the id and skips the effect.
    """
    job_id = lease.job.id
    if design == "at-most-once":
        queue.ack(lease)
    history.started(job_id)
    if design == "at-least-once + process_once":
        idempotency.process_once(effects, job_id, partial(book_effect, job_id=job_id), clock=SystemClock())
    else:
        with db.transaction(effects):
            book_effect(effects, job_id)
    time.sleep(WORK_S)  # the rest of the work: render, upload...
    history.finished(job_id)
    if design != "at-most-once":
        queue.ack(lease)


def life(design: Design, folder: Path, number: int, *, drain: bool) -> None:
    """One life of a worker process: produce and handle jobs until killed (or, drain: until empty)."""
    with (
        DurableQueue(folder / QUEUE_FILE, visibility_timeout_s=VISIBILITY_TIMEOUT_S) as queue,
        History(folder, _life_name(number)) as history,
    ):
        effects = db.connect(folder / EFFECTS_FILE)
        with db.transaction(effects):
            effects.execute("CREATE TABLE IF NOT EXISTS effects (job_id VARCHAR NOT NULL)")
        idempotency.create_tables(effects)
        print("ready", flush=True)
        produced = 0
        while True:
            if not drain:
                job_id = f"job-{number:02d}-{produced:03d}"
                queue.enqueue(CHAOS, ChaosJob(number=produced), id=job_id)
                history.enqueued(job_id)  # only now has the producer seen it succeed
                produced += 1
            lease = queue.claim()
            if lease is not None:
                handle(design, queue, effects, lease, history)
            elif drain and len(queue) == 0:
                break
            else:
                time.sleep(0.02)
        effects.close()


def run_chaos(design: Design, folder: Path | str, *, kills: int = 4, seed: int = 7) -> HistoryReport:
    """Run ``design`` in ``folder`` (fresh) with ``kills`` SIGKILLed lives, then one that drains.

    Args:
        design: one of :data:`DESIGNS`.
        folder: an empty or missing folder for the queue, effects and history files.
        kills: lives killed with SIGKILL (int >= 1).
        seed: seeds the kill times (the moments in the code where they land still vary
            from run to run: the lesson prints only what cannot vary).

    Returns:
        The history report (effects read from the effects table).

    Raises:
        InvalidSettingError: if ``folder`` holds files already or ``kills`` < 1.
        RuntimeError: if a life fails to start or the draining life fails.
    """
    if isinstance(kills, bool) or not isinstance(kills, int) or kills < 1:
        raise InvalidSettingError(f"kills must be an int >= 1, got {kills!r}")
    if design not in DESIGNS:
        raise InvalidSettingError(f"design must be one of {', '.join(DESIGNS)}; got {design!r}")
    root = Path(folder)
    if root.exists() and any(root.iterdir()):
        raise InvalidSettingError(f"run_chaos needs a fresh folder, {str(root)!r} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    rng = random_module.Random(seed)
    for number in range(kills):
        child = _start(design, root, number, drain=False)
        _wait_for_starts(root / f"{_life_name(number)}{SUFFIX}", rng.randint(*KILL_AFTER_STARTS), child)
        time.sleep(rng.uniform(0.6, 0.9) * WORK_S)  # well into the handler's work
        child.send_signal(signal.SIGKILL)
        child.wait()
    last = _start(design, root, kills, drain=True)
    if last.wait(timeout=120) != 0:
        raise RuntimeError(f"the draining life ended with status {last.returncode}")
    with DurableQueue(root / QUEUE_FILE) as queue:
        dead = [letter.job.id for letter in queue.dead_letters()]
    con = db.connect(root / EFFECTS_FILE)
    try:
        effects = [row[0] for row in con.execute("SELECT job_id FROM effects").fetchall()]
    finally:
        con.close()
    return check_history(read_history(root), dead=dead, effects=effects)


def run_designs(
    folder: Path | str, designs: Sequence[Design] = DESIGNS, *, kills: int = 4, seed: int = 7
) -> dict[Design, HistoryReport]:
    """Run each design in its own subfolder of ``folder``, all at once (threads), as :func:`run_chaos`.

    The lives spend most of their time asleep in the handler, so running the designs side
    by side takes little longer than one. Returns the reports by design.
    """
    root = Path(folder)
    with ThreadPoolExecutor(max_workers=len(designs)) as pool:
        futures = {
            design: pool.submit(
                run_chaos, design, root / design.replace(" ", "").replace("+", "_"), kills=kills, seed=seed
            )
            for design in designs
        }
        return {design: future.result() for design, future in futures.items()}


class Killed(BaseException):
    """The simulated SIGKILL of :func:`crash_test`: a ``BaseException``, so no handler catches it.

    A transaction open when it is raised is rolled back, as a real kill would leave it.
    """


Step = Callable[[str], None]
"""A handler's crash point: ``step("after the effect")`` may raise :class:`Killed` there."""

CrashHandler = Callable[[duckdb.DuckDBPyConnection, Lease, Step], None]
"""A handler under :func:`crash_test`: the effects connection, the lease, the crash point."""


def crash_test(
    handler: CrashHandler, *, jobs: int = 20, crash_chance: float = 0.3, seed: int = 7
) -> HistoryReport:
    """Run ``handler`` over ``jobs`` jobs in one process, killing the "worker" at seeded crash points.

    A fast, deterministic cousin of :func:`run_chaos` for exercises: an in-memory queue
    on a manual clock and an in-memory effects database (table ``effects``, see
    :func:`book_effect`; ``processed_messages`` for :mod:`~jobqueue.idempotency`). Each
    time the handler calls its ``step`` argument, the worker dies there with probability
    ``crash_chance`` (raising :class:`Killed`): nothing is acked, and the job comes back
    when its lease runs out, to a new worker "life" (the clock jumps ahead). The worker
    acks after the handler returns (at-least-once).

    Returns:
        The history report, effects read from the ``effects`` table.

    Raises:
        InvalidSettingError: if ``jobs`` < 1 or ``crash_chance`` is not below 1.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidSettingError(f"jobs must be an int >= 1, got {jobs!r}")
    if not 0 <= crash_chance < 1:
        raise InvalidSettingError(f"crash_chance must be at least 0 and below 1, got {crash_chance!r}")
    rng = random_module.Random(seed)
    clock = ManualClock()
    queue = JobQueue(clock, visibility_timeout_s=30)
    effects = db.connect()
    effects.execute("CREATE TABLE effects (job_id VARCHAR NOT NULL)")
    idempotency.create_tables(effects)

    def step(name: str) -> None:
        if rng.random() < crash_chance:
            raise Killed(name)

    with tempfile.TemporaryDirectory() as folder:
        with History(folder, "producer") as producer:
            for number in range(jobs):
                job_id = f"job-{number:03d}"
                queue.enqueue(CHAOS, ChaosJob(number=number), id=job_id)
                producer.enqueued(job_id)
        lives = 0
        history = History(folder, _life_name(lives))
        while len(queue):
            lease = queue.claim()
            if lease is None:
                clock.advance(queue.visibility_timeout_s)  # the dead workers' leases run out
                continue
            history.started(lease.job.id)
            try:
                handler(effects, lease, step)
            except Killed:
                history.close()
                lives += 1
                history = History(folder, _life_name(lives))
                continue
            history.finished(lease.job.id)
            queue.ack(lease)
        history.close()
        rows = effects.execute("SELECT job_id FROM effects").fetchall()
        return check_history(
            read_history(folder),
            dead=[d.job.id for d in queue.dead_letters()],
            effects=[row[0] for row in rows],
        )


def _life_name(number: int) -> str:
    return f"life-{number:02d}"


def _wait_for_starts(history_file: Path, starts: int, child: subprocess.Popen[bytes]) -> None:
    """Return once ``history_file`` records ``starts`` started jobs (polling every 5 ms)."""
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if history_file.exists() and history_file.read_bytes().count(b'"started"') >= starts:
            return
        if child.poll() is not None:
            raise RuntimeError(f"a life ended by itself with status {child.returncode}")
        time.sleep(0.005)
    child.kill()
    child.wait()
    raise RuntimeError(f"no {starts} started jobs in {history_file} after {START_WAIT_S:g} s")


def _start(design: Design, folder: Path, number: int, *, drain: bool) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "jobqueue.teaching.chaos", "life", design, str(folder), str(number)]
    child = subprocess.Popen([*command, *(["--drain"] if drain else [])], stdout=subprocess.PIPE)
    assert child.stdout is not None
    if child.stdout.readline() != b"ready\n":
        child.kill()
        child.wait()
        raise RuntimeError(f"life {number} of {design!r} did not start (status {child.returncode})")
    child.stdout.close()
    return child


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of a life: ``life DESIGN FOLDER NUMBER [--drain]``."""
    parser = argparse.ArgumentParser(prog="python -m jobqueue.teaching.chaos")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("life", help="run one life of a worker process")
    one.add_argument("design", choices=DESIGNS)
    one.add_argument("folder", type=Path)
    one.add_argument("number", type=int)
    one.add_argument("--drain", action="store_true", help="produce nothing; stop when the queue is empty")
    args = parser.parse_args(argv)
    life(args.design, args.folder, args.number, drain=args.drain)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
