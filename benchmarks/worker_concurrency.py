"""How close a Runner gets to ideal concurrency on jobs that await I/O.

Enqueues ``--jobs`` ``send_receipt`` jobs (one ``enqueue_many``, before the clock starts)
whose handler does ``await asyncio.sleep(--sleep-ms / 1000)``, then times
``Runner(worker, concurrency=--concurrency, poll_s=0.05, prefetch=P).run(until_idle=True)``
with ``time.perf_counter``, on (a) the in-memory ``JobQueue`` and (b) ``DurableQueue`` on a
file in a fresh temporary directory: with the Runner's default prefetch (P left out), and
for comparison without prefetch (P=0), when each claim and ack comes between jobs. Ideal
time: ``jobs / concurrency * sleep`` (0.2 s with the defaults: 1,000 jobs, 50 at once,
10 ms each); the rest is the queue's and the runner's overhead, which blocks the event
loop while it runs.

Prints seconds and the ratio to ideal per run, and how long the run spent inside the
queue's methods (claims, acks, fails, lease extensions: the event loop waits meanwhile, so
this is the part of the overhead that is the queue's own); the goal (at most 1.3x ideal)
is for the default settings, and the P=0 rows are shown without one. Checks that every job was done
(the queue is empty and the run reported one ``"done"`` event per job). Exits with status 1
if a goal is not met or a run went wrong (see ``benchmarks/README.md``). Run: ``make bench`` or
``.venv/bin/python benchmarks/worker_concurrency.py [--jobs N] [--concurrency N] [--sleep-ms MS]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jobqueue as jq
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.runner import Runner

TARGET_RATIO = 1.3
POLL_S = 0.05


async def timed_run(
    queue: Queue, concurrency: int, prefetch: int | None, sleep_s: float
) -> tuple[float, list[jq.JobEvent], int]:
    async def send_receipt(payload: ReceiptPayload) -> None:
        await asyncio.sleep(sleep_s)

    worker = jq.Worker(queue)
    worker.register(SEND_RECEIPT, send_receipt)
    runner = (
        Runner(worker, concurrency=concurrency, poll_s=POLL_S)
        if prefetch is None
        else Runner(worker, concurrency=concurrency, poll_s=POLL_S, prefetch=prefetch)
    )
    start = time.perf_counter()
    events = await runner.run(until_idle=True)
    return time.perf_counter() - start, events, runner.prefetch


Outcome = tuple[float, str | None, int, float]
"""Seconds, what went wrong (if anything), the prefetch used, seconds spent in queue calls."""

QUEUE_CALLS = ("claim_many", "ack_and_claim", "ack_many", "ack", "fail", "release", "extend_lease", "get")
"""The queue methods a Runner and its Worker call: while one runs, the event loop waits."""


def time_queue_calls(queue: Queue) -> list[float]:
    """Time every call of :data:`QUEUE_CALLS` on ``queue`` from now on; returns the list of durations."""
    spent: list[float] = []
    for name in QUEUE_CALLS:
        method = getattr(queue, name, None)
        if method is None:
            continue

        def timed(*args: Any, __method: Callable[..., Any] = method, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return __method(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        setattr(queue, name, timed)  # shadows the class's method on this object only
    return spent


def measure(queue: Queue, jobs: int, concurrency: int, prefetch: int | None, sleep_s: float) -> Outcome:
    """Run ``jobs`` jobs from ``queue``; return the seconds, what went wrong, and the prefetch."""
    payloads = [ReceiptPayload(order_id=i, email="customer@example.com") for i in range(jobs)]
    queue.enqueue_many(SEND_RECEIPT, payloads)
    spent = time_queue_calls(queue)
    seconds, events, used = asyncio.run(timed_run(queue, concurrency, prefetch, sleep_s))
    done = sum(event.outcome == "done" for event in events)
    problem = None
    if done != jobs or len(events) != jobs or len(queue) != 0:
        problem = f"{done} done of {jobs}, {len(events)} events, {len(queue)} left in the queue"
    return seconds, problem, used, sum(spent)


def in_memory(jobs: int, concurrency: int, prefetch: int | None, sleep_s: float) -> Outcome:
    return measure(jq.JobQueue(clock=jq.SystemClock()), jobs, concurrency, prefetch, sleep_s)


def durable(jobs: int, concurrency: int, prefetch: int | None, sleep_s: float) -> Outcome:
    with (
        tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp,
        DurableQueue(Path(tmp) / "queue.duckdb") as queue,
    ):
        return measure(queue, jobs, concurrency, prefetch, sleep_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--sleep-ms", type=float, default=10.0, help="awaited sleep per job, in milliseconds")
    args = parser.parse_args()
    sleep_s = args.sleep_ms / 1000
    ideal = args.jobs / args.concurrency * sleep_s

    Run = Callable[[int, int, int | None, float], Outcome]
    runs: list[tuple[str, Run, int | None]] = [
        ("JobQueue (in memory)", in_memory, None),
        ("JobQueue (in memory)", in_memory, 0),
        ("DurableQueue (DuckDB file)", durable, None),
        ("DurableQueue (DuckDB file)", durable, 0),
    ]
    print(
        f"{args.jobs:,} jobs of {args.sleep_ms:g} ms awaited I/O, concurrency {args.concurrency}:"
        f" ideal {ideal:.3f} s, goal <= {TARGET_RATIO:g}x ideal with the default prefetch"
    )
    columns = f"{'seconds':>8}  {'x ideal':>7}  {'in queue calls':>14}  {'goal':>7}"
    print(f"{'queue':<28}  {'prefetch':>16}  {columns}")
    failures = []
    for name, run, prefetch in runs:
        seconds, problem, used, in_calls = run(args.jobs, args.concurrency, prefetch, sleep_s)
        ratio = seconds / ideal
        shown = "0 (none)" if prefetch == 0 else f"default ({used})"
        verdict = "" if prefetch == 0 else ("met" if ratio <= TARGET_RATIO else "NOT met")
        print(f"{name:<28}  {shown:>16}  {seconds:>8.3f}  {ratio:>7.2f}  {in_calls:>13.3f}s  {verdict:>7}")
        if problem is not None:
            failures.append(f"{name}: {problem}")
        if verdict == "NOT met":
            failures.append(f"{name}: goal NOT met, {ratio:.2f}x ideal")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
