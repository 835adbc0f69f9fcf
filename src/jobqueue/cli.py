"""The command line for a durable queue: run a worker, show its numbers, handle dead letters.

Run as ``jobqueue …`` (installed with the package) or ``python -m jobqueue …``::

    jobqueue worker shop.db --handlers jobqueue.examples.shop_worker:register --concurrency 20
    jobqueue worker shop.db --handlers jobqueue.examples.shop_worker:register --queues emails=10,reports=2
    jobqueue stats shop.db
    jobqueue dead shop.db
    jobqueue replay shop.db receipt-1001        # or: --all
    jobqueue cancel shop.db report-7            # waiting: now; running: at its ack or fail
    jobqueue migrate postgresql://app@db/shop    # a deploy's step, before the new workers
    jobqueue dashboard postgresql://shop@db/shop --port 8000
    jobqueue worker shop.db --handlers jobqueue.examples.shop_worker:register --dashboard

Every command takes a DuckDB file or a PostgreSQL URL (``postgresql://user@host/db``,
a :class:`~jobqueue.backends.postgres.PostgresQueue`). On PostgreSQL any number of worker processes
share one queue, and ``stats``, ``dead`` and ``replay`` work while they run.

``worker`` loads handlers from ``MODULE:FUNCTION``, a function that takes a
:class:`~jobqueue.worker.Worker` and registers handlers on it; it logs one line per job
to standard output and shuts down gracefully on SIGTERM or SIGINT (see
:class:`~jobqueue.runner.Runner`). DuckDB lets one process hold the file, so while a
worker runs no other process can enqueue, list or replay (see :mod:`jobqueue.backends.duckdb`);
``stats`` then reads the figures the worker writes next to the file (``FILE.stats.json``)
every ``--stats-every`` seconds. On PostgreSQL ``stats`` adds what holds back cleanup of the
queue's table (:mod:`jobqueue.cleanup`): the oldest open transaction, the dead rows, a warning.

``dashboard`` serves a live page of the queue (:mod:`jobqueue.dashboard`) on 127.0.0.1
(``--host``, ``--port``); ``--read-only`` hides its replay, discard and cancel buttons and refuses
their requests. A DuckDB file held by a worker cannot be opened by a dashboard process:
run ``jobqueue worker FILE --dashboard``, which serves the page from the worker's own
process and event loop.

Exit status: 0 on success; 1 when the queue file cannot be used (held by another
process, not a DuckDB file), the PostgreSQL server cannot be reached, ``replay``
names an id that is not a dead letter, or ``cancel`` one the queue does not hold; 2 for a
usage error, such as a bad option value or a missing file (argparse's convention).

Introduced in lesson 11.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import pydantic

from jobqueue.backends.contract import (
    DEFAULT_VISIBILITY_TIMEOUT_S,
    NamesServer,
    Queue,
    ReportsCleanup,
    ShowsOverview,
)
from jobqueue.census import STATES, Census
from jobqueue.clock import SystemClock
from jobqueue.errors import InvalidSettingError, JobNotFoundError, QueueFileLockedError, StorageError
from jobqueue.job import DEFAULT_QUEUE, check_count, check_positive_seconds, check_queue_name
from jobqueue.metrics import DEFAULT_WINDOW_S, QueueMetrics
from jobqueue.runner import DEFAULT_CONCURRENCY, DEFAULT_GRACE_S, Runner
from jobqueue.worker import DEFAULT_TIMEOUT_S, JobEvent, Worker

if TYPE_CHECKING:
    import uvicorn

    from jobqueue.backends.duckdb import DurableQueue
    from jobqueue.backends.postgres import PostgresQueue

DEFAULT_PORT = 8000
"""The dashboard's TCP port unless ``--port`` (``--dashboard-port``) says otherwise."""

Register = Callable[[Worker], object]
"""A function that registers handlers on a worker (what ``--handlers`` names)."""


@dataclass(frozen=True)
class WorkerStats:
    """What a running worker writes to ``FILE.stats.json``: who, when (epoch s) and the figures."""

    pid: int
    written_at: float
    metrics: QueueMetrics

    def to_json(self) -> str:
        """This report as the JSON text of the stats file."""
        return _stats_json().dump_json(self).decode()

    @classmethod
    def from_json(cls, text: str) -> WorkerStats:
        """The report in a stats file's JSON ``text``.

        Raises:
            pydantic.ValidationError: if ``text`` is not such a report.
        """
        return _stats_json().validate_json(text)


@cache
def _stats_json() -> pydantic.TypeAdapter[WorkerStats]:
    """The stats file's JSON reader and writer, built on first use.

    Building it costs a worker process about 35 ms of its start (pydantic's schema), and
    only a DuckDB worker writes a stats file.
    """
    return pydantic.TypeAdapter(WorkerStats)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = _parser().parse_args(argv)
    command: argparse.ArgumentParser = args.command
    if not is_url(args.file) and not Path(args.file).exists() and not getattr(args, "create", False):
        hint = " (add --create to start a new queue)" if args.run is _worker else ""
        command.error(f"no queue file {args.file!r}{hint}")
    if args.run is _worker and args.queues is not None and args.concurrency is not None:
        command.error("--concurrency and --queues do not go together: --queues gives each queue its slots")
    if args.run is _worker and args.heartbeat >= args.visibility_timeout:
        command.error(
            f"--heartbeat ({args.heartbeat:g} s) must be below --visibility-timeout"
            f" ({args.visibility_timeout:g} s), or leases run out between beats"
        )
    if args.run is _replay and bool(args.ids) == args.all:
        command.error("replay takes either dead-letter ids or --all")
    try:
        status: int = args.run(args)
    except (StorageError, InvalidSettingError) as exc:  # their messages never hold a password
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return status


def is_url(target: str) -> bool:
    """Whether a command's queue argument is a PostgreSQL URL rather than a DuckDB file."""
    return target.startswith(("postgresql://", "postgres://"))


def open_queue(
    target: str,
    *,
    visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
    transaction_pooler: bool = False,
) -> DurableQueue | PostgresQueue:
    """The queue ``target`` names: a :class:`PostgresQueue` for a URL, else a :class:`DurableQueue`.

    ``transaction_pooler`` is passed to :class:`PostgresQueue` (a DuckDB file ignores it).

    Raises:
        QueueUnavailableError: if the PostgreSQL server cannot be reached.
        QueueFileError: if the file is not a DuckDB database or another process holds it.
    """
    if is_url(target):
        from jobqueue.backends.postgres import PostgresQueue

        return PostgresQueue(
            target,
            clock=SystemClock(),
            visibility_timeout_s=visibility_timeout_s,
            transaction_pooler=transaction_pooler,
        )
    from jobqueue.backends.duckdb import DurableQueue  # here: a PostgreSQL worker never loads DuckDB

    return DurableQueue(target, clock=SystemClock(), visibility_timeout_s=visibility_timeout_s)


def is_duckdb_file(queue: Queue) -> TypeGuard[DurableQueue]:
    """Whether ``queue`` is a :class:`DurableQueue`, without loading DuckDB to ask.

    (If the DuckDB backend is not loaded, no DurableQueue exists.)
    """
    module = sys.modules.get("jobqueue.backends.duckdb")
    return module is not None and isinstance(queue, module.DurableQueue)


def where(queue: Queue, target: str) -> str:
    """How log lines name the queue: the file, or the server (never a URL's password)."""
    return queue.server if isinstance(queue, NamesServer) else target


def stats_path(queue_file: str | Path) -> Path:
    """Where a worker on ``queue_file`` writes its figures: ``<queue_file>.stats.json``."""
    return Path(f"{queue_file}.stats.json")


def seconds(text: str) -> float:
    """Parse a command-line number of seconds > 0 (argparse names the option on error)."""
    try:
        return check_positive_seconds("seconds", float(text))
    except ValueError:  # not a number, or InvalidSettingError (a ValueError too)
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None


def count(text: str, *, least: int = 1) -> int:
    """Parse a command-line whole number >= ``least`` (argparse names the option on error)."""
    try:
        return check_count("count", int(text), least=least)
    except ValueError:  # not a whole number, or InvalidSettingError (a ValueError too)
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") from None


def queue_slots(text: str) -> dict[str, int]:
    """Parse ``emails=10,reports=2``: the named queues a worker runs and the slots of each."""
    slots: dict[str, int] = {}
    for part in text.split(","):
        name, _, number = part.partition("=")
        try:
            slots[check_queue_name(name.strip())] = count(number.strip())
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(
                f"expected queue=slots[,queue=slots...] (e.g. emails=10,reports=2), got {text!r}"
            ) from None
    return slots


def port(text: str) -> int:
    """Parse a command-line TCP port, 1 to 65535 (argparse names the option on error)."""
    number = count(text)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 1 to 65535, got {text!r}")
    return number


def load_handlers(spec: str) -> Register:
    """Import ``"package.module:function"`` and return the function.

    Raises:
        argparse.ArgumentTypeError: naming ``spec``, if it is not of that form, the module
            cannot be imported, or the attribute is missing or not callable.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise argparse.ArgumentTypeError(f"expected MODULE:FUNCTION, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise argparse.ArgumentTypeError(f"cannot import {module_name!r} (from {spec!r}): {exc}") from exc
    register = getattr(module, attribute, None)
    if not callable(register):
        raise argparse.ArgumentTypeError(f"{spec!r}: {module_name} has no function {attribute!r}")
    return register  # type: ignore[no-any-return]


# -- commands ------------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> int:
    if not is_url(args.file) and not Path(args.file).exists():
        _log(f"creating queue file {args.file}")
    with open_queue(
        args.file, visibility_timeout_s=args.visibility_timeout, transaction_pooler=args.transaction_pooler
    ) as queue:
        worker = Worker(queue, on_event=_log, heartbeat_s=args.heartbeat, timeout_s=args.timeout)
        args.handlers(worker)
        runner = Runner(
            worker,
            concurrency=args.concurrency,
            queues=args.queues,
            poll_s=args.poll,
            grace_s=args.grace,
            prefetch=args.prefetch,
            log=_log,
        )
        asyncio.run(_serve(runner, queue, args))
    return 0


async def _serve(runner: Runner, queue: Queue, args: argparse.Namespace) -> None:
    # A DuckDB file is held by this process, so `stats` reads what it writes beside the
    # file; PostgreSQL answers `stats` itself.
    file = queue if is_duckdb_file(queue) else None
    reporter = None if file is None else asyncio.create_task(_report_stats(file, args.stats_every))
    source = where(queue, args.file)
    page = None
    if args.dashboard:  # on the same event loop; the runner keeps the signals
        from jobqueue.dashboard import create_app, hosts_for, server

        app = create_app(
            queue,
            where=source,
            read_only=args.dashboard_read_only,
            allowed_hosts=hosts_for(args.dashboard_host),
        )
        page = server(app, host=args.dashboard_host, port=args.dashboard_port)
        serving = asyncio.create_task(page.serve())
        _log(_dashboard_line(source, args.dashboard_host, args.dashboard_port, args.dashboard_read_only))
    try:
        with runner.signals_stop():
            _log(f"worker {os.getpid()} ready: up to {runner.concurrency} jobs at once from {source}")
            events = await runner.run(until_idle=args.burst)
    finally:
        if reporter is not None:
            reporter.cancel()
            stats_path(args.file).unlink(missing_ok=True)
        if page is not None:
            page.should_exit = True
            await serving
    _log(f"worker {os.getpid()} stopped: {summary(events)}")


def summary(events: Sequence[JobEvent]) -> str:
    """Count events by outcome, e.g. ``"3 done, 1 retried, 1 dead, 1 given back, 2 deferred"``."""
    names = {
        "done": "done",
        "retry": "retried",
        "dead": "dead",
        "stale": "lease lost",
        "released": "given back",
        "deferred": "deferred",
        "snoozed": "snoozed",
        "cancelled": "cancelled",
    }
    counts = {name: sum(event.outcome == outcome for event in events) for outcome, name in names.items()}
    shown = [f"{n} {name}" for name, n in counts.items() if n or name in ("done", "given back")]
    return ", ".join(shown)


async def _report_stats(queue: DurableQueue, every_s: float) -> None:
    target = stats_path(queue.path)
    while True:
        report = WorkerStats(pid=os.getpid(), written_at=queue.clock.now(), metrics=queue.metrics())
        partial = target.with_suffix(".partial")
        partial.write_text(report.to_json())
        partial.replace(target)  # readers never see half a file
        await asyncio.sleep(every_s)


def _stats(args: argparse.Namespace) -> int:
    try:
        with open_queue(args.file, transaction_pooler=args.transaction_pooler) as queue:
            print(queue.metrics(args.window))
            if isinstance(queue, ShowsOverview):
                for line in per_queue(queue.census()):
                    print(line)
            if isinstance(queue, ReportsCleanup):  # PostgreSQL: what holds back vacuum
                print("\n".join(["", *queue.cleanup_held_back().lines()]))
        return 0
    except QueueFileLockedError:
        path = stats_path(args.file)
        if not path.exists():
            raise
        report = WorkerStats.from_json(path.read_text())
        age_s = SystemClock().now() - report.written_at
        print(f"(the file is held by worker {report.pid}; its figures from {age_s:.0f} s ago)")
        print(report.metrics)
        return 0


def per_queue(census: Census) -> list[str]:
    """A line per named queue with its counts by state, or none while every job is in ``"default"``.

    ``jobqueue stats`` prints them below the figures: ``queue emails: 3 waiting, 0 scheduled,
    1 leased, 0 dead`` (``~`` before an estimated count).
    """
    if all(counts.queue == DEFAULT_QUEUE for counts in census.by_queue):
        return []
    return [
        f"queue {counts.queue}: "
        + ", ".join(
            f"{'~' if state in census.estimated else ''}{counts.count(state)} {state}" for state in STATES
        )
        for counts in census.by_queue
    ]


def _dead(args: argparse.Namespace) -> int:
    with open_queue(args.file, transaction_pooler=args.transaction_pooler) as queue:
        letters = queue.dead_letters()
    if not letters:
        print("no dead letters")
        return 0
    for letter in letters:
        job = letter.job
        print(
            f"{job.id}  {job.type}  attempts {job.attempts}/{job.max_attempts}  died {_iso(letter.died_at)}"
        )
        print(f"    {job.last_error}")
        print(f"    payload {job.payload}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    with open_queue(args.file, transaction_pooler=args.transaction_pooler) as queue:
        dead = [letter.job.id for letter in queue.dead_letters()]
        ids = dead if args.all else list(dict.fromkeys(args.ids))
        unknown = [job_id for job_id in ids if job_id not in dead]
        if unknown:  # replay all or nothing
            print(
                f"error: no dead job with id {', '.join(map(repr, unknown))}; nothing replayed",
                file=sys.stderr,
            )
            return 1
        for job_id in ids:
            queue.replay(job_id)
            print(f"replayed {job_id}")
    if not ids:
        print("no dead letters to replay")
    return 0


CANCELLED = {
    "cancelled": "cancelled",
    "cancelling": "cancelling: it is running; its worker learns at its next heartbeat, and its ack"
    " or fail finishes it as cancelled",
    "dead": "not cancelled: it is a dead letter already",
    "done": "not cancelled: it is done already",
}
"""What ``jobqueue cancel`` prints after the id, for each answer of ``queue.cancel``."""


def _cancel(args: argparse.Namespace) -> int:
    with open_queue(args.file, transaction_pooler=args.transaction_pooler) as queue:
        try:
            outcome = queue.cancel(args.id)
        except JobNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"{args.id}: {CANCELLED[outcome]}")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    if is_url(args.file):
        from jobqueue.backends.postgres import SCHEMA_VERSION, migrate

        if not migrate(args.file, lock_timeout_s=args.lock_timeout, log=print):
            print(f"the jobqueue tables are at schema version {SCHEMA_VERSION} already")
        return 0
    from jobqueue.backends.duckdb import DurableQueue

    with DurableQueue(args.file, clock=SystemClock()):  # one process per file: it migrates on open
        print(f"{args.file}: jobqueue tables at the current schema version")
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from jobqueue.dashboard import create_app, hosts_for, server

    try:
        opened = open_queue(args.file, transaction_pooler=args.transaction_pooler)
    except QueueFileLockedError as exc:
        raise QueueFileLockedError(
            f"{exc} To watch a file a worker holds, start that worker with --dashboard."
        ) from exc
    with opened as queue:
        source = where(queue, args.file)
        app = create_app(queue, where=source, read_only=args.read_only, allowed_hosts=hosts_for(args.host))
        _log(_dashboard_line(source, args.host, args.port, args.read_only))
        asyncio.run(_serve_until_signal(server(app, host=args.host, port=args.port)))
    return 0


async def _serve_until_signal(page: uvicorn.Server) -> None:
    """Serve until SIGINT or SIGTERM, then stop taking requests and finish the open ones."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, setattr, page, "should_exit", True)
    await page.serve()


def _dashboard_line(source: str, host: str, port: int, read_only: bool) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"dashboard of {source} on http://{shown}:{port}/" + (" (read-only)" if read_only else "")


def _log(line: object) -> None:
    """Print a log line at once (a service's output is read while it runs)."""
    text = line.describe(_iso) if isinstance(line, JobEvent) else str(line)
    print(text, flush=True)


def _iso(at: float) -> str:
    """Epoch seconds as UTC ISO 8601, to the second."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="seconds")


# -- argument parsing ----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobqueue",
        description="Work a durable job queue: a DuckDB file (one process at a time may open it) or a"
        " PostgreSQL database, given as a URL (any number of processes).",
        epilog="Exit status: 0 success, 1 queue file unusable, server unreachable, a setting the server"
        " refuses or unknown id, 2 usage error.",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str, run: Callable[[argparse.Namespace], int]) -> Any:
        sub = commands.add_parser(
            name, help=help, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
        )
        sub.add_argument("file", metavar="FILE", help="the queue's DuckDB file, or a postgresql:// URL")
        sub.add_argument(
            "--transaction-pooler",
            action="store_true",
            help="the URL leads to a pooler in transaction mode (PgBouncer, RDS Proxy, Supavisor):"
            " keep no session state, poll instead of LISTEN",
        )
        sub.set_defaults(run=run, command=sub)
        return sub

    worker = command(
        "worker",
        "run jobs until SIGTERM or SIGINT",
        "Run jobs from FILE, many at once, until SIGTERM or SIGINT; then stop claiming, let running"
        " jobs finish within --grace seconds and give the rest back. While it runs, no other process"
        " can open FILE (enqueue from the worker's own process, or before it starts). Given a"
        " postgresql:// URL, run as many workers, on as many machines, as you like.",
        _worker,
    )
    worker.add_argument(
        "--handlers",
        required=True,
        type=load_handlers,
        metavar="MODULE:FUNCTION",
        help="function that registers handlers on a Worker, e.g. jobqueue.examples.shop_worker:register",
    )
    worker.add_argument("--create", action="store_true", help="create FILE if it does not exist")
    worker.add_argument(
        "--concurrency", type=count, default=None, help=f"jobs at once (default {DEFAULT_CONCURRENCY})"
    )
    worker.add_argument(
        "--queues",
        type=queue_slots,
        default=None,
        metavar="QUEUE=SLOTS,...",
        help="run only these named queues, each with its own slots, e.g. emails=10,reports=2",
    )
    worker.add_argument(
        "--prefetch",
        type=partial(count, least=0),
        default=None,
        help="jobs to claim ahead of free slots (default: 4 x --concurrency, 200+ on a file; 0: none)",
    )
    worker.add_argument("--poll", type=seconds, default=1.0, help="seconds between looks at an idle queue")
    worker.add_argument(
        "--grace", type=seconds, default=DEFAULT_GRACE_S, help="seconds to finish jobs after SIGTERM"
    )
    worker.add_argument(
        "--heartbeat", type=seconds, default=10.0, help="seconds between lease extensions of a running job"
    )
    worker.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        help="time limit of one attempt in seconds, for job types without their own timeout_s",
    )
    worker.add_argument(
        "--visibility-timeout",
        type=seconds,
        default=DEFAULT_VISIBILITY_TIMEOUT_S,
        help="lease length in seconds",
    )
    worker.add_argument(
        "--stats-every", type=seconds, default=10.0, help="seconds between writes of FILE.stats.json"
    )
    worker.add_argument("--burst", action="store_true", help="exit once the queue has no due job")
    worker.add_argument(
        "--dashboard",
        action="store_true",
        help="also serve the live dashboard from this process (the way to watch a DuckDB file)",
    )
    worker.add_argument("--dashboard-host", default="127.0.0.1", help="address the dashboard listens on")
    worker.add_argument("--dashboard-port", type=port, default=DEFAULT_PORT, help="the dashboard's TCP port")
    worker.add_argument(
        "--dashboard-read-only",
        action="store_true",
        help="the dashboard shows no buttons and refuses actions",
    )

    dashboard = command(
        "dashboard",
        "serve a live web page of the queue",
        "Serve a live page of the queue: jobs by type and state, throughput and failure rate, the"
        " running jobs and the dead letters, with buttons to cancel, replay or discard them. A DuckDB file"
        " held by a worker cannot be opened here: use `jobqueue worker FILE --dashboard` instead.",
        _dashboard,
    )
    dashboard.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; the page asks for no login, so beyond localhost put it behind your own",
    )
    dashboard.add_argument("--port", type=port, default=DEFAULT_PORT, help="TCP port to listen on")
    dashboard.add_argument(
        "--read-only", action="store_true", help="show no buttons and refuse replay, discard and cancel"
    )

    stats = command(
        "stats",
        "show waiting, scheduled, leased, oldest waiting, failure rate, dead letters, cancelled",
        "Show the numbers to watch (of every process, on PostgreSQL, with the oldest transaction"
        " holding back cleanup of the queue's table and its dead rows). While a worker holds FILE, show"
        " the figures it last wrote to"
        " FILE.stats.json instead (with its default 300 s window; --window does not apply).",
        _stats,
    )
    stats.add_argument(
        "--window", type=seconds, default=DEFAULT_WINDOW_S, help="failure-rate window in seconds"
    )

    command("dead", "list the dead letters", "List the dead letters, oldest first.", _dead)

    replay = command(
        "replay",
        "move dead letters back to waiting, with fresh attempts",
        "Move dead letters back to waiting, due now, with a fresh budget of attempts. All or nothing:"
        " if an id is not a dead letter, nothing is replayed.",
        _replay,
    )
    replay.add_argument("ids", nargs="*", metavar="ID", help="ids of dead jobs")
    replay.add_argument("--all", action="store_true", help="every dead letter instead")

    cancel = command(
        "cancel",
        "cancel a job: a waiting one now, a running one at its ack or fail",
        "Cancel a job: a waiting or scheduled job is finished at once as cancelled (kept a day for"
        " a look); a running one is marked, its worker is told at its next heartbeat, and its ack or"
        " fail finishes it as cancelled, with no retry. A dead letter or a finished job is left as"
        " it is.",
        _cancel,
    )
    cancel.add_argument("id", metavar="ID", help="the job's id")

    migrate = command(
        "migrate",
        "bring the queue's tables to this jobqueue's schema version (a deploy's step)",
        "Bring the jobqueue tables to the schema version this jobqueue reads, before its workers"
        " start: on PostgreSQL a queue refuses older tables, and this changes them one migration at"
        " a time, building indexes concurrently (claims and acks go on meanwhile). A DuckDB file is"
        " migrated when it is opened; this opens it.",
        _migrate,
    )
    migrate.add_argument(
        "--lock-timeout", type=seconds, default=10.0, help="seconds a statement waits for a table lock"
    )
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
