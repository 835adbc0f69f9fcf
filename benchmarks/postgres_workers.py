"""End to end, as users run it: worker processes of jobqueue, pgqueuer and procrastinate on 10,000 no-op jobs.

One server (``JOBQUEUE_DATABASE_URL``, else the course's local embedded server,
:func:`jobqueue.teaching.postgres_server.database_url`; ``fsync`` and ``synchronous_commit``
must be on). A row is one queue with 1, 2 or 4 worker processes: a fresh database gets the
queue's tables and ``--jobs`` jobs (default 10,000) whose handler does nothing, enqueued
before the clock starts; then the worker processes start at once, each the queue's own
documented command, and the clock runs until the last of them has exited, every job done.
So a row counts what a user waits for: the processes' start (Python's imports, the
connection), the claims, the handler calls, the acks, each worker's logging (to
``/dev/null``) and its way out once the queue is empty. Each row runs ``--rounds`` times
(default 3), the queues taking turns in an order drawn afresh each round (a seeded shuffle,
the same in every run, as in ``postgres_throughput.py``: no queue holds a fixed place or
follows a fixed queue); the median counts. Afterwards every row checks that no job is left
and none failed.

Before the first row, the bytecode of jobqueue's modules and of this one is written, as pip
writes the peers' at their install: jobqueue is installed in editable mode, whose bytecode is
written at the first import unless ``PYTHONDONTWRITEBYTECODE`` is set, as it is on the
course's machine; there every jobqueue worker process compiled jobqueue's source anew, about
35 ms of its start that no peer's process spends (and that no user's does twice).

The workers, each with its own defaults but for a batch of 10 jobs at once and an exit
once the queue is empty:

- jobqueue: ``python -m jobqueue worker URL --handlers
  postgres_workers:jobqueue_handlers --burst`` (its ``Runner``: 10 jobs at once, 40
  claimed ahead, by default);
- pgqueuer: ``PgQueuer.run(mode=drain)`` on the PgQueuer that
  ``postgres_workers:pgqueuer_factory`` makes (batches of 10 by default), its default
  tables: what ``pgq run postgres_workers:pgqueuer_factory --mode drain`` runs, less the
  log setup, which fails in pgqueuer 1.6.0 (``AttributeError: 'str' object has no
  attribute 'name'``: its ``--log-level`` parser hands a string where an enum is read);
- procrastinate: ``procrastinate --app postgres_workers.procrastinate_app worker
  --one-shot --concurrency 10 --delete-jobs successful`` (it runs one job at a time by
  default; done jobs are deleted, as in the other two).

Prints each row's seconds and jobs/s and jobqueue's speed against each peer (the peer's
time over jobqueue's) beside the goals: at least 1.5x pgqueuer and 10x procrastinate at
every worker count; exits with status 1 when one is missed (``benchmarks/README.md``, "Exit
status"). Run: ``make bench`` or
``.venv/bin/python benchmarks/postgres_workers.py [--jobs N] [--workers 1 2 4] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from jobqueue import JobType

URL_VARIABLE = "JOBQUEUE_BENCH_WORKERS_URL"
"""Names the row's database to the worker processes (pgqueuer's factory, procrastinate's app)."""
QUEUES = ("jobqueue", "pgqueuer", "procrastinate")
ORDER_SEED = 21  # the rounds' orders: drawn at random, the same in every run
TASK = "send_receipt"
ENQUEUE_BATCH = 1_000
CONCURRENCY = 10
GOALS = {"pgqueuer": 1.5, "procrastinate": 10.0}
HERE = Path(__file__).resolve().parent


def payloads(jobs: int) -> list[dict[str, Any]]:
    return [{"order_id": i, "email": "customer@example.com"} for i in range(jobs)]


# -- the worker processes' handlers, as each library loads them -------------------------


@dataclass(frozen=True)
class Receipt:
    """jobqueue's payload of the no-op jobs: what the peers get as JSON."""

    order_id: int
    email: str


@cache
def send_receipt() -> JobType[Receipt]:
    """jobqueue's job type of the no-op jobs, defined here as a user's module defines its own.

    Made on first use, as jobqueue is imported: pgqueuer's and procrastinate's worker
    processes import this module too, and must not spend jobqueue's imports.
    """
    from jobqueue import JobType

    return JobType(TASK, Receipt)


async def noop_receipt(payload: Receipt) -> None:
    """jobqueue's no-op handler."""


def jobqueue_handlers(worker: Any) -> None:
    """What ``jobqueue worker --handlers`` names: registers the no-op handler."""
    worker.register(send_receipt(), noop_receipt)


async def pgqueuer_factory() -> Any:
    """What ``pgq run`` names: a PgQueuer on the row's database with the no-op entrypoint."""
    from pgqueuer import PgQueuer
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job

    connection = await psycopg.AsyncConnection.connect(os.environ[URL_VARIABLE], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(connection))

    @pgq.entrypoint(TASK)
    async def send_receipt(job: Job) -> None:
        pass

    return pgq


async def run_pgqueuer() -> None:
    """A pgqueuer worker in drain mode, as ``pgq run`` would start it (see the module's docstring)."""
    from pgqueuer.types import QueueExecutionMode

    pgq = await pgqueuer_factory()
    await pgq.run(mode=QueueExecutionMode.drain)


def make_procrastinate_app(url: str) -> Any:
    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.ERROR)  # not its note that the app lives in __main__
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name=TASK)
    async def send_receipt(order_id: int, email: str) -> None:
        pass

    return app


def __getattr__(name: str) -> Any:
    """``procrastinate_app``, made on first use: what a procrastinate worker's ``--app`` names.

    Made here rather than at import: jobqueue's and pgqueuer's worker processes import this
    module too, for their handlers, and must not spend procrastinate's imports (about 37 ms
    of CPU in each process).
    """
    if name == "procrastinate_app" and URL_VARIABLE in os.environ:
        app = make_procrastinate_app(os.environ[URL_VARIABLE])
        globals()[name] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- a row -----------------------------------------------------------------------------


def fill_jobqueue(url: str, jobs: int) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    with PostgresQueue(url) as queue:
        items = [Receipt(**p) for p in payloads(jobs)]
        for start in range(0, jobs, ENQUEUE_BATCH):
            queue.enqueue_many(send_receipt(), items[start : start + ENQUEUE_BATCH])


def left_jobqueue(url: str) -> str | None:
    from jobqueue.backends.postgres import PostgresQueue

    with PostgresQueue(url) as queue:
        waiting, dead = len(queue), len(queue.dead_letters())
    return None if waiting == dead == 0 else f"{waiting} jobs left, {dead} dead"


def fill_pgqueuer(url: str, jobs: int) -> None:
    from pgqueuer.queries import Queries

    async def fill() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as con:
            queries = Queries.from_psycopg_connection(con)
            await queries.install()
            data: list[bytes | None] = [json.dumps(p).encode() for p in payloads(jobs)]
            for start in range(0, jobs, ENQUEUE_BATCH):
                part = data[start : start + ENQUEUE_BATCH]
                await queries.enqueue([TASK] * len(part), part, [0] * len(part))

    asyncio.run(fill())


def left_pgqueuer(url: str) -> str | None:
    with psycopg.connect(url) as con:
        row = con.execute(
            "SELECT (SELECT count(*) FROM pgqueuer),"
            " (SELECT count(*) FROM pgqueuer_log WHERE status NOT IN ('queued', 'picked', 'successful'))"
        ).fetchone()
    waiting, failed = row if row else (-1, -1)
    return None if waiting == failed == 0 else f"{waiting} jobs left, {failed} not successful"


def fill_procrastinate(url: str, jobs: int) -> None:
    app = make_procrastinate_app(url)

    async def fill() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            task = app.tasks[TASK]
            items = payloads(jobs)
            for start in range(0, jobs, ENQUEUE_BATCH):
                await task.batch_defer_async(*items[start : start + ENQUEUE_BATCH])

    asyncio.run(fill())


def left_procrastinate(url: str) -> str | None:
    with psycopg.connect(url) as con:
        row = con.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()
    left = row[0] if row else -1
    return None if left == 0 else f"{left} jobs left (done ones are deleted)"


def command(name: str, url: str) -> list[str]:
    """The worker process of queue ``name``, as its documentation starts one."""
    bin_folder = Path(sys.executable).parent
    if name == "jobqueue":
        return [
            sys.executable,
            "-m",
            "jobqueue",
            "worker",
            url,
            "--handlers",
            "postgres_workers:jobqueue_handlers",
            "--burst",
        ]
    if name == "pgqueuer":
        return [
            sys.executable,
            "-c",
            "import asyncio, postgres_workers; asyncio.run(postgres_workers.run_pgqueuer())",
        ]
    return [
        str(bin_folder / "procrastinate"),
        "--app",
        "postgres_workers.procrastinate_app",
        "worker",
        "--one-shot",
        "--concurrency",
        str(CONCURRENCY),
        "--delete-jobs",
        "successful",
    ]


FILL: dict[str, Callable[[str, int], None]] = {
    "jobqueue": fill_jobqueue,
    "pgqueuer": fill_pgqueuer,
    "procrastinate": fill_procrastinate,
}
LEFT: dict[str, Callable[[str], str | None]] = {
    "jobqueue": left_jobqueue,
    "pgqueuer": left_pgqueuer,
    "procrastinate": left_procrastinate,
}


def compile_bytecode() -> None:
    """Write the bytecode of jobqueue's modules and of this module, where imports look for it."""
    import compileall

    import jobqueue

    compileall.compile_dir(Path(jobqueue.__file__).parent, quiet=1)
    compileall.compile_file(__file__, quiet=1)


def run_row(server: str, name: str, jobs: int, workers: int) -> float:
    """Seconds from starting ``workers`` processes of ``name`` to the last one's exit, every job done."""
    # Here, not at the top: every worker process of the three queues imports this module for its
    # handlers, and need not load the course's server helpers.
    from jobqueue.teaching.postgres_server import scratch_database

    with scratch_database(f"bench_{uuid.uuid4().hex[:12]}", server) as url, ExitStack() as files:
        FILL[name](url, jobs)
        python_path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
        env = os.environ | {URL_VARIABLE: url, "PYTHONPATH": python_path}
        # stderr to files, not pipes: a worker blocked on a full pipe would wait for us
        logs = [files.enter_context(tempfile.TemporaryFile()) for _ in range(workers)]
        start = time.monotonic()
        procs = [
            subprocess.Popen(
                command(name, url), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
            for log in logs
        ]
        for proc in procs:
            proc.wait(timeout=1_800)
        took = time.monotonic() - start
        for proc, log in zip(procs, logs, strict=True):
            if proc.returncode != 0:
                log.seek(0)
                error = log.read().decode(errors="replace")
                raise RuntimeError(f"{name}: a worker exited {proc.returncode}: {error[-2_000:]}")
        problem = LEFT[name](url)
        if problem is not None:
            raise RuntimeError(f"{name}: {problem}")
        return took


def server_settings(url: str) -> str:
    with psycopg.connect(url) as con:
        version, fsync, sync = (
            con.execute(f"SHOW {setting}").fetchone()[0]  # type: ignore[index]
            for setting in ("server_version", "fsync", "synchronous_commit")
        )
    if fsync != "on" or sync != "on":
        raise SystemExit(f"fsync={fsync}, synchronous_commit={sync}: turn both on for a fair run")
    return f"PostgreSQL {version}, fsync={fsync}, synchronous_commit={sync}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=10_000, help="no-op jobs per row (default 10,000)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker processes")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each row, the queues taking turns; the median counts"
    )
    args = parser.parse_args()
    from jobqueue.teaching.postgres_server import database_url

    server = database_url()
    compile_bytecode()
    print(f"{server_settings(server)}; {args.jobs:,} no-op jobs a row; {os.cpu_count()} CPU cores")
    print(
        "seconds from starting the worker processes to the last one's exit, every job done;"
        f" median of {args.rounds} rounds, the queues taking turns in a shuffled order"
    )
    print(f"{'queue':<13}  {'workers':>7}  {'seconds':>8}  {'jobs/s':>7}  jobqueue's speed against it")
    seconds: dict[tuple[str, int], float] = {}
    order = random.Random(ORDER_SEED)
    for workers in args.workers:
        samples: dict[str, list[float]] = {name: [] for name in QUEUES}
        for _ in range(args.rounds):  # a burst of load elsewhere hits one round, not one queue
            for name in order.sample(QUEUES, len(QUEUES)):
                samples[name].append(run_row(server, name, args.jobs, workers))
        for name in QUEUES:
            seconds[name, workers] = took = statistics.median(samples[name])
            against = "" if name == "jobqueue" else f"  {took / seconds['jobqueue', workers]:.2f}x"
            print(f"{name:<13}  {workers:>7}  {took:>8.2f}  {args.jobs / took:>7,.0f}{against}", flush=True)
    missed: list[str] = []
    print("goals (jobqueue's speed: the peer's seconds over jobqueue's, the worst over the worker counts):")
    for peer, goal in GOALS.items():
        worst = min(seconds[peer, w] / seconds["jobqueue", w] for w in args.workers)
        ok = worst >= goal
        print(
            f"  jobqueue >= {goal}x {peer} at every worker count: {worst:.2f}x, {'met' if ok else 'NOT met'}"
        )
        if not ok:
            missed.append(f">= {goal}x {peer}")
    if missed:
        print(f"goals NOT met: {', '.join(missed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
