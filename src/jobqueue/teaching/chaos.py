"""The chaos lab of lesson 15: real worker processes killed with SIGKILL, then checked.

:func:`run_chaos` runs one *design* of a worker against a durable queue in a folder:

1. it starts a worker process (a *life*), which opens the queue file
   (:class:`~jobqueue.DurableQueue`) and an effects database, and loops: enqueue one new
   job (the producer, in the same process, since DuckDB lets one process open a file),
   claim one, handle it;
2. once the life has started a seeded number of jobs, and a seeded fraction of a job's
   work after the start of the job it is working on, it kills the process with SIGKILL
   and starts the next life; the last life is not killed: it produces nothing and runs
   until the queue is empty (jobs whose worker died come back when their lease runs out);
3. it reads the :class:`~jobqueue.testing.History` every life wrote and the effects table,
   and returns the :func:`~jobqueue.testing.check_history` report.

:func:`run_chaos_postgres` is the same experiment with several worker processes at once
on one :class:`~jobqueue.backends.postgres.PostgresQueue`, the producer in the calling process,
and one seeded worker at a time killed and replaced. Its leases are longer
(:data:`POSTGRES_VISIBILITY_TIMEOUT_S`): there workers run side by side, and a worker
slowed down by a loaded machine must not lose its job to another, so that only the kills
make jobs run twice.

:func:`lab_folder` makes a folder for the lab's files in the temporary folder, removed
when the process exits.

:func:`crash_test` is the same experiment in one process, on a manual clock, with
simulated kills at seeded points of a handler: fast and deterministic, for exercises.

The handler books an effect (a row in the effects table, keyed by the job id) and then
goes on working for a while (rendering, say), so a kill is likely to land between the
effect and the ack. The three designs differ only in where the ack is and how the effect
is written (see :data:`DESIGNS` and :func:`handle`).

Worker processes are forked from a ``multiprocessing`` fork server that imported this
module (and the PostgreSQL backend) once: a fresh interpreter per life would spend most
of the lab's time importing. Each life is still a process of its own, with its own
connections, killed by PID. As with any ``multiprocessing`` code, a script (not a
notebook) must call the runs under ``if __name__ == "__main__":``, since each new
process imports the script's main module.

Course helper only. Introduced in lesson 15.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import random as random_module
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection as Pipe
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Literal

import duckdb

from jobqueue import db, idempotency
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.backends.memory import JobQueue
from jobqueue.clock import ManualClock, SystemClock
from jobqueue.errors import InvalidSettingError, StaleLeaseError
from jobqueue.job import JobType, Lease
from jobqueue.teaching._processes import ProcessId
from jobqueue.testing import SUFFIX, History, HistoryReport, check_history, read_history

Design = Literal["at-most-once", "at-least-once", "at-least-once + process_once"]
"""Where the worker acks and how it writes the effect."""

DESIGNS: tuple[Design, ...] = ("at-most-once", "at-least-once", "at-least-once + process_once")
"""Every design, in the order lesson 15 compares them."""

VISIBILITY_TIMEOUT_S = 0.3
"""The lease of :func:`run_chaos`'s queue, in seconds: a dead worker's job comes back this soon.
One life runs at a time there, so a job outliving its lease is never handed to another."""

POSTGRES_VISIBILITY_TIMEOUT_S = 1.0
"""The lease of :func:`run_chaos_postgres`'s queue, in seconds: ten times :data:`WORK_S`,
so that a worker slowed down by a loaded machine keeps its job, and only a killed worker's
job is handed out again."""

WORK_S = 0.1
"""How long the handler goes on working after it booked the effect, in seconds."""

PRODUCE_EVERY_S = 0.1
"""How often the producer of :func:`run_chaos_postgres` enqueues a job, in seconds."""

KILL_AFTER_STARTS = (1, 3)
"""A life is killed once it has started this many jobs (drawn between the two, seeded),
a seeded 60-90 % of :data:`WORK_S` after the start of the job it is working on: so the
kills land while a job works, however fast or slow the machine is."""

HANG_GUARD_S = 300.0
"""Longest wait for a life to start, to reach its kill point or to drain the queue, in
seconds, before the run fails: far beyond a slow machine, only a hang gets there."""

QUEUE_FILE = "queue.db"
EFFECTS_FILE = "effects.db"
DRAIN_FILE = "drain"
"""Created in the folder of :func:`run_chaos_postgres` once the producer has stopped:
workers then exit as soon as the queue is empty."""
EFFECTS_TABLE = "CREATE TABLE IF NOT EXISTS effects (job_id VARCHAR NOT NULL)"


@dataclass(frozen=True, kw_only=True)
class ChaosJob:
    """The lab's payload: which job it is."""

    number: int


CHAOS = JobType("chaos", ChaosJob)
"""The lab's only job type."""


def book_effect(con: db.Connection, job_id: str) -> None:
    """The effect: one row in ``effects``, keyed by the job id (a double booking shows).

    ``con`` is a DuckDB or a psycopg connection.
    """
    db.fetch(con, "INSERT INTO effects (job_id) VALUES (?)", [job_id])


def handle(design: Design, queue: Queue, effects: db.Connection, lease: Lease, history: History) -> None:
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


def life(design: Design, folder: Path, number: int, *, drain: bool, ready: Pipe) -> None:
    """One life of a worker process: produce and handle jobs until killed (or, drain: until empty).

    Says ``"ready"`` on ``ready`` once the queue and the effects table are open.
    """
    with (
        DurableQueue(folder / QUEUE_FILE, visibility_timeout_s=VISIBILITY_TIMEOUT_S) as queue,
        History(folder, _life_name(number)) as history,
        closing(db.connect(folder / EFFECTS_FILE)) as effects,
    ):
        _create_effects_tables(effects)
        _say_ready(ready)
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
    root = _check_run("run_chaos", design, folder, kills=kills)
    rng = random_module.Random(seed)
    for number in range(kills):
        child = _start(life, design, root, number, drain=False)
        _kill_at_work(child, root / f"{_life_name(number)}{SUFFIX}", rng)
    _join(_start(life, design, root, kills, drain=True))
    with DurableQueue(root / QUEUE_FILE) as queue, closing(db.connect(root / EFFECTS_FILE)) as effects:
        return _report(root, queue, effects)


def run_chaos_postgres(
    url: str,
    folder: Path | str,
    design: Design = "at-least-once + process_once",
    *,
    workers: int = 3,
    kills: int = 4,
    seed: int = 7,
) -> HistoryReport:
    """Run ``design`` with ``workers`` processes at once on one PostgreSQL queue, killing ``kills``.

    The queue (:class:`~jobqueue.backends.postgres.PostgresQueue`), the effects table and
    ``processed_messages`` live in the database at ``url``; the histories in ``folder``.
    A producer thread of this process enqueues a job every :data:`PRODUCE_EVERY_S`
    seconds while, ``kills`` times, a seeded worker is killed with SIGKILL once its life
    has started a seeded number of jobs, booked that job's effect, and worked on it a
    seeded moment, and a new life takes its place. Then the producer stops and the
    workers run until the queue is empty.

    Args:
        url: an empty PostgreSQL database (a URL or a libpq conninfo).
        folder: an empty or missing folder for the history files.
        design: one of :data:`DESIGNS`.
        workers: worker processes running at once (int >= 1).
        kills: workers killed with SIGKILL (int >= 1).
        seed: seeds which worker is killed and when (where in the code a kill lands still
            varies from run to run).

    Returns:
        The history report (effects read from the effects table).

    Raises:
        InvalidSettingError: if ``folder`` holds files already, or ``workers`` or ``kills`` < 1.
        RuntimeError: if a worker fails to start or ends by itself with an error.
        jobqueue.QueueUnavailableError: if the server at ``url`` cannot be reached.
    """
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    root = _check_run("run_chaos_postgres", design, folder, kills=kills, workers=workers)
    with (
        PostgresQueue(url, visibility_timeout_s=POSTGRES_VISIBILITY_TIMEOUT_S) as queue,
        psycopg.connect(url, autocommit=True) as effects,
    ):
        _create_effects_tables(effects)

        def booked(job_id: str) -> bool:
            return bool(db.fetch(effects, "SELECT count(*) FROM effects WHERE job_id = ?", [job_id])[0][0])

        rng = random_module.Random(seed)
        names = [f"worker-{slot}-life-00" for slot in range(workers)]
        running = [_start(postgres_life, design, url, root, name) for name in names]
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(queue, root, stop), daemon=True)
        producer.start()
        try:
            for kill in range(1, kills + 1):
                slot = rng.randrange(workers)
                _kill_at_work(running[slot], root / f"{names[slot]}{SUFFIX}", rng, booked=booked)
                names[slot] = f"worker-{slot}-life-{kill:02d}"
                running[slot] = _start(postgres_life, design, url, root, names[slot])
        finally:
            stop.set()
            producer.join()
            (root / DRAIN_FILE).touch()
        for process in running:
            _join(process)
        return _report(root, queue, effects)


def postgres_life(design: Design, url: str, folder: Path, name: str, *, ready: Pipe) -> None:
    """One life of a worker process of :func:`run_chaos_postgres`: handle jobs until killed.

    Once :data:`DRAIN_FILE` exists in ``folder``, it exits when the queue is empty (no
    job waiting or leased).
    """
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    with (
        PostgresQueue(url, visibility_timeout_s=POSTGRES_VISIBILITY_TIMEOUT_S) as queue,
        psycopg.connect(url, autocommit=True) as effects,
        History(folder, name) as history,
    ):
        _say_ready(ready)
        while True:
            lease = queue.claim()
            if lease is not None:
                # A worker that stalled past its lease (a loaded machine) has its ack refused:
                # the job's new holder acks it.
                with suppress(StaleLeaseError):
                    handle(design, queue, effects, lease, history)
            elif (folder / DRAIN_FILE).exists() and len(queue) == 0:
                break
            else:
                time.sleep(0.02)


def _produce(queue: Queue, folder: Path, stop: threading.Event) -> None:
    """Enqueue a job every :data:`PRODUCE_EVERY_S` seconds until ``stop`` is set."""
    with History(folder, "producer") as history:
        number = 0
        while not stop.wait(PRODUCE_EVERY_S):
            job_id = f"job-{number:03d}"
            queue.enqueue(CHAOS, ChaosJob(number=number), id=job_id)
            history.enqueued(job_id)  # only now has the producer seen it succeed
            number += 1


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


LAB_PREFIX = "chaos-lab-"
"""Name prefix of the folders :func:`lab_folder` makes in the temporary folder."""

LAB_OWNER_FILE = ".owner.json"
"""In a lab folder: the process that made it (PID and start time), for :func:`lab_folder`."""


def lab_folder() -> Path:
    """A new, empty folder for the lab's files in the temporary folder, removed when this process exits.

    Lesson 15's runs leave about 4.5 MB of queue, effects and history files in it. It is
    removed at a normal exit (``atexit``: a kernel that shuts down or restarts); a process
    killed with SIGKILL cannot do that, so each call first removes the lab folders of this
    user whose process no longer runs.

    Returns:
        The folder (``chaos-lab-*``; it holds only a hidden :data:`LAB_OWNER_FILE`).
    """
    _remove_orphaned_labs()
    folder = Path(tempfile.mkdtemp(prefix=LAB_PREFIX))
    (folder / LAB_OWNER_FILE).write_text(json.dumps(ProcessId.current().to_json()), encoding="utf-8")
    atexit.register(_remove_lab, folder, os.getpid())
    return folder


def _remove_lab(folder: Path, owner: int) -> None:
    """At exit: remove ``folder`` if this process made it (not in a forked child)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_orphaned_labs() -> None:
    """Remove this user's lab folders whose process no longer runs (a killed kernel's)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{LAB_PREFIX}*"):
        try:
            if folder.lstat().st_uid != os.getuid() or not folder.is_dir():
                continue
            owner = ProcessId.from_json(json.loads((folder / LAB_OWNER_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError):  # gone meanwhile, or not made by lab_folder
            continue
        if owner is not None and not owner.alive():
            shutil.rmtree(folder, ignore_errors=True)


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
    queue = JobQueue(clock=clock, visibility_timeout_s=30)
    effects = db.connect()
    _create_effects_tables(effects)

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
        return _report(Path(folder), queue, effects)


def _life_name(number: int) -> str:
    return f"life-{number:02d}"


def _check_run(name: str, design: Design, folder: Path | str, *, kills: int, workers: int = 1) -> Path:
    """Check a run's settings; return its folder, created if missing."""
    for setting, value in (("kills", kills), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidSettingError(f"{setting} must be an int >= 1, got {value!r}")
    if design not in DESIGNS:
        raise InvalidSettingError(f"design must be one of {', '.join(DESIGNS)}; got {design!r}")
    root = Path(folder)
    if root.exists() and any(root.iterdir()):
        raise InvalidSettingError(f"{name} needs a fresh folder, {str(root)!r} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _create_effects_tables(con: db.Connection) -> None:
    with db.transaction(con):
        db.fetch(con, EFFECTS_TABLE)
    idempotency.create_tables(con)


def _report(folder: Path, queue: Queue, effects: db.Connection) -> HistoryReport:
    """The history of ``folder`` checked against the dead letters and the effects table."""
    dead = [letter.job.id for letter in queue.dead_letters()]
    booked = [row[0] for row in db.fetch(effects, "SELECT job_id FROM effects")]
    return check_history(read_history(folder), dead=dead, effects=booked)


_PROCESSES = multiprocessing.get_context("forkserver")


def _start(target: Callable[..., None], *args: Any, **kwargs: Any) -> BaseProcess:
    """Start ``target(*args, **kwargs, ready=pipe)`` in a forked process; return once it is ready."""
    _PROCESSES.set_forkserver_preload([__name__, "jobqueue.backends.postgres"])  # skipped without psycopg
    receive, send = _PROCESSES.Pipe(duplex=False)
    process = _PROCESSES.Process(target=target, args=args, kwargs={**kwargs, "ready": send}, daemon=True)
    process.start()
    send.close()
    with receive:
        try:
            ready = receive.poll(HANG_GUARD_S) and receive.recv() == "ready"
        except EOFError:  # it died before it was ready
            ready = False
    if not ready:
        process.kill()
        process.join()
        raise RuntimeError(
            f"{target.__name__}{args} did not start (exit code {process.exitcode}; the hang guard"
            f" waits {HANG_GUARD_S:g} s)"
        )
    return process


def _say_ready(ready: Pipe) -> None:
    ready.send("ready")
    ready.close()


def _kill_at_work(
    process: BaseProcess,
    history_file: Path,
    rng: random_module.Random,
    *,
    booked: Callable[[str], bool] | None = None,
) -> None:
    """SIGKILL ``process`` in the middle of a job's work, once it has started a seeded number of jobs.

    The kill comes a seeded 60-90 % of :data:`WORK_S` after the job started (the time of
    the ``"started"`` line in ``history_file``) and, if ``booked`` is given, not before
    ``booked(job_id)`` says the job's effect is committed: well into the handler's work,
    however fast or slow the machine is. Should the job have finished by then (this
    process was slowed down), the kill waits for the life's next job instead.

    Raises:
        RuntimeError: if the life ends by itself, or reaches no kill point within
            :data:`HANG_GUARD_S` (a hang).
    """
    starts = rng.randint(*KILL_AFTER_STARTS)
    fraction = rng.uniform(0.6, 0.9)
    guard = time.monotonic() + HANG_GUARD_S
    while True:
        job_id = _working_on(history_file, starts)
        if job_id is not None and (booked is None or booked(job_id)):
            started_at = history_file.stat().st_mtime  # its last line, "started", was written then
            time.sleep(max(0.0, started_at + fraction * WORK_S - time.time()))
            if _working_on(history_file, starts) == job_id:  # still at work on it
                process.kill()  # SIGKILL
                process.join()
                return
            continue  # it got there first: kill it in its next job
        if not process.is_alive():
            raise RuntimeError(f"a life ended by itself with exit code {process.exitcode}")
        if time.monotonic() > guard:
            process.kill()
            process.join()
            raise RuntimeError(
                f"hang guard: {history_file} shows no job at work after {starts} started"
                f" within {HANG_GUARD_S:g} s"
            )
        time.sleep(0.005)


def _working_on(history_file: Path, starts: int) -> str | None:
    """The job a life is working on, if its history records ``starts`` started jobs; else ``None``.

    The job is the last one started, if nothing was recorded after its start.
    """
    if not history_file.exists():
        return None
    *lines, _partial = history_file.read_bytes().split(b"\n")  # a line being written is left out
    started = [line for line in lines if b'"started"' in line]
    if len(started) < starts or not lines or lines[-1] != started[-1]:
        return None
    key: str = json.loads(started[-1])["key"]
    return key


def _join(process: BaseProcess) -> None:
    """Wait for a draining life to end by itself (at most :data:`HANG_GUARD_S`)."""
    process.join(timeout=HANG_GUARD_S)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise RuntimeError(f"hang guard: a draining life still ran after {HANG_GUARD_S:g} s")
    if process.exitcode != 0:
        raise RuntimeError(f"a draining life ended with exit code {process.exitcode}")
