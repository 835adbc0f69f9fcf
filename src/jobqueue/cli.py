"""The command line for a durable queue: run a worker, show its numbers, handle dead letters.

Run as ``jobqueue …`` (installed with the package) or ``python -m jobqueue …``::

    jobqueue worker shop.db --handlers jobqueue.shop_worker:register --concurrency 20
    jobqueue stats shop.db
    jobqueue dead shop.db
    jobqueue replay shop.db receipt-1001        # or: --all

``worker`` loads handlers from ``MODULE:FUNCTION``, a function that takes a
:class:`~jobqueue.worker.Worker` and registers handlers on it; it logs one line per job
to standard output and shuts down gracefully on SIGTERM or SIGINT (see
:class:`~jobqueue.runner.Runner`). DuckDB lets one process hold the file, so while a
worker runs, ``stats`` reads the figures the worker writes next to the file
(``FILE.stats.json``) every ``--stats-every`` seconds; ``dead`` and ``replay`` need the
worker stopped.

Exit status: 0 on success, 1 when the queue file is held by another process, 2 for a
usage error (argparse's convention).

Introduced in lesson 11.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pydantic

from jobqueue.clock import SystemClock
from jobqueue.durable import DurableQueue
from jobqueue.errors import DeadLetterNotFoundError, InvalidSettingError, QueueFileLockedError
from jobqueue.metrics import DEFAULT_WINDOW_S, QueueMetrics
from jobqueue.runner import DEFAULT_CONCURRENCY, DEFAULT_GRACE_S, Runner
from jobqueue.worker import JobEvent, Worker

Register = Callable[[Worker], object]
"""A function that registers handlers on a worker (what ``--handlers`` names)."""


class WorkerStats(pydantic.BaseModel):
    """What a running worker writes to ``FILE.stats.json``: who, when (epoch s) and the figures."""

    pid: int
    written_at: float
    metrics: QueueMetrics


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.run is not _worker and not Path(args.file).exists():
        parser.error(f"no queue file {args.file!r}")
    if args.run is _replay and bool(args.ids) == args.all:
        parser.error("replay takes either dead-letter ids or --all")
    try:
        status: int = args.run(args)
    except InvalidSettingError as exc:
        parser.error(str(exc))
    except QueueFileLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return status


def stats_path(queue_file: str | Path) -> Path:
    """Where a worker on ``queue_file`` writes its figures: ``<queue_file>.stats.json``."""
    return Path(f"{queue_file}.stats.json")


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
    with DurableQueue(args.file, SystemClock(), visibility_timeout_s=args.visibility_timeout) as queue:
        worker = Worker(queue, on_event=_log, heartbeat_s=args.heartbeat)
        args.handlers(worker)
        runner = Runner(
            worker, concurrency=args.concurrency, poll_s=args.poll, grace_s=args.grace, prefetch=args.prefetch
        )
        asyncio.run(_serve(runner, queue, args))
    return 0


async def _serve(runner: Runner, queue: DurableQueue, args: argparse.Namespace) -> None:
    reporter = asyncio.create_task(_report_stats(queue, args.stats_every))
    try:
        with runner.signals_stop():
            _log(f"worker {os.getpid()} ready: up to {runner.concurrency} jobs at once from {args.file}")
            events = await runner.run(until_idle=args.burst)
    finally:
        reporter.cancel()
        stats_path(args.file).unlink(missing_ok=True)
    counts = {outcome: sum(event.outcome == outcome for event in events) for outcome in ("done", "released")}
    _log(f"worker {os.getpid()} stopped: {counts['done']} done, {counts['released']} given back")


async def _report_stats(queue: DurableQueue, every_s: float) -> None:
    target = stats_path(queue.path)
    while True:
        report = WorkerStats(pid=os.getpid(), written_at=queue.clock.now(), metrics=queue.metrics())
        partial = target.with_suffix(".partial")
        partial.write_text(report.model_dump_json())
        partial.replace(target)  # readers never see half a file
        await asyncio.sleep(every_s)


def _stats(args: argparse.Namespace) -> int:
    try:
        with DurableQueue(args.file) as queue:
            print(queue.metrics(args.window))
        return 0
    except QueueFileLockedError:
        path = stats_path(args.file)
        if not path.exists():
            raise
        report = WorkerStats.model_validate_json(path.read_text())
        age_s = SystemClock().now() - report.written_at
        print(f"(the file is held by worker {report.pid}; its figures from {age_s:.0f} s ago)")
        print(report.metrics)
        return 0


def _dead(args: argparse.Namespace) -> int:
    with DurableQueue(args.file) as queue:
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
    with DurableQueue(args.file) as queue:
        ids = [letter.job.id for letter in queue.dead_letters()] if args.all else args.ids
        for job_id in ids:
            try:
                queue.replay(job_id)
            except DeadLetterNotFoundError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"replayed {job_id}")
    if not ids:
        print("no dead letters to replay")
    return 0


def _log(line: object) -> None:
    """Print a log line at once (a service's output is read while it runs)."""
    text = line.describe(_iso) if isinstance(line, JobEvent) else str(line)
    print(text, flush=True)


def _iso(at: float) -> str:
    """Epoch seconds as UTC ISO 8601, to the second."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="seconds")


# -- argument parsing ----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobqueue", description="Work a durable job queue (a DuckDB file).")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    worker = commands.add_parser("worker", help="run jobs until SIGTERM or SIGINT")
    worker.add_argument("file", help="the queue's DuckDB file")
    worker.add_argument(
        "--handlers",
        required=True,
        type=load_handlers,
        metavar="MODULE:FUNCTION",
        help="function that registers handlers on a Worker, e.g. jobqueue.shop_worker:register",
    )
    worker.add_argument(
        "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="jobs at once (default 10)"
    )
    worker.add_argument("--poll", type=float, default=1.0, help="seconds between looks at an idle queue")
    worker.add_argument(
        "--prefetch", type=int, default=0, help="jobs to claim ahead of a free slot (default 0)"
    )
    worker.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE_S, help="seconds to finish jobs at shutdown"
    )
    worker.add_argument("--heartbeat", type=float, default=10.0, help="seconds between lease extensions")
    worker.add_argument("--visibility-timeout", type=float, default=30.0, help="lease length in seconds")
    worker.add_argument("--stats-every", type=float, default=10.0, help="seconds between stats files")
    worker.add_argument("--burst", action="store_true", help="exit once the queue has no due job")
    worker.set_defaults(run=_worker)

    stats = commands.add_parser("stats", help="show waiting, leased, oldest age, failure rate, dead letters")
    stats.add_argument("file", help="the queue's DuckDB file")
    stats.add_argument(
        "--window", type=float, default=DEFAULT_WINDOW_S, help="failure-rate window in seconds"
    )
    stats.set_defaults(run=_stats)

    dead = commands.add_parser("dead", help="list the dead letters")
    dead.add_argument("file", help="the queue's DuckDB file")
    dead.set_defaults(run=_dead)

    replay = commands.add_parser("replay", help="move dead letters back to waiting, with fresh attempts")
    replay.add_argument("file", help="the queue's DuckDB file")
    replay.add_argument("ids", nargs="*", metavar="ID", help="ids of dead jobs")
    replay.add_argument("--all", action="store_true", help="every dead letter instead")
    replay.set_defaults(run=_replay)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
