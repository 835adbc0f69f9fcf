"""How long one refresh of the dashboard takes on a long backlog: goal under 200 ms.

A refresh is what the page asks for every 2 s: ``GET /api/snapshot`` of the dashboard's app
(:mod:`jobqueue.dashboard`), served in this process through Starlette's TestClient: the
census by type and state, the throughput bins, the running jobs and the latest dead
letters, as JSON. Timed on

- a DuckDB file with ``--duckdb-jobs`` jobs waiting (default 100,000), and
- a scratch database on the course's PostgreSQL server (or ``JOBQUEUE_DATABASE_URL``) with
  ``--postgres-jobs`` jobs waiting (default 1,000,000),

each also with 50 jobs leased, 20 dead letters and outcomes in the last minutes, of three job
types. The jobs are enqueued through the queue itself, in batches of 10,000. Prints the
median and the slowest of ``--rounds`` refreshes (default 20) beside the goal, and whether
PostgreSQL counted the waiting jobs exactly or estimated them from a sample.

Run: ``make bench`` or ``.venv/bin/python benchmarks/dashboard_refresh.py`` (about a minute
on 2 cores, most of it enqueueing the million jobs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from starlette.testclient import TestClient

from jobqueue import DurableQueue
from jobqueue.backends.contract import Queue
from jobqueue.dashboard import create_app
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.job import JobType

GOAL_MS = 200.0
BATCH = 10_000


def fill(queue: Queue, jobs: int) -> None:
    """``jobs`` waiting jobs of two types, then 50 leased, 20 dead and some outcomes."""
    for start in range(0, jobs, BATCH):
        count = min(BATCH, jobs - start)
        if start % (2 * BATCH) == 0:
            queue.enqueue_many(
                SEND_RECEIPT,
                [ReceiptPayload(order_id=start + i, email="ada@example.com") for i in range(count)],
            )
        else:
            queue.enqueue_many(
                BUILD_REPORT, [ReportPayload(report_id=start + i, work_s=1.0) for i in range(count)]
            )
    poison: JobType[ReceiptPayload] = JobType("charge_card", ReceiptPayload)
    queue.enqueue_many(poison, [ReceiptPayload(order_id=i, email="x") for i in range(20)], priority=10)
    for lease in queue.claim_many(20):  # the poison jobs first: their priority is higher
        queue.fail(lease, "ValueError: card declined", permanent=True)
    queue.ack_many(queue.claim_many(100))
    queue.claim_many(50)  # left leased: the running jobs


def time_refreshes(queue: Queue, where: str, rounds: int) -> tuple[list[float], dict[str, object]]:
    """Milliseconds of each of ``rounds`` refreshes (after one untimed), and the last answer."""
    # One event loop for every request, as uvicorn serves the page (without the `with`, the
    # test client starts a loop, and the server's threads, afresh for each request).
    with TestClient(create_app(queue, where=where), base_url="http://127.0.0.1") as client:
        client.get("/api/snapshot")  # warm up: imports, prepared statements
        times = []
        answer: dict[str, object] = {}
        for _ in range(rounds):
            start = time.perf_counter()
            response = client.get("/api/snapshot")
            times.append((time.perf_counter() - start) * 1000)
            response.raise_for_status()
            answer = response.json()
    return times, answer


def report(label: str, times: list[float], answer: dict[str, object]) -> bool:
    median = statistics.median(times)
    met = median < GOAL_MS
    totals = answer["totals"]
    estimated = answer["estimated"]
    how = f"estimated from a sample: {', '.join(estimated)}" if estimated else "every count exact"  # type: ignore[arg-type]
    print(
        f"{label}: refresh {median:.1f} ms median, {max(times):.1f} ms slowest of {len(times)}"
        f" (goal < {GOAL_MS:g} ms: {'met' if met else 'NOT met'}); {totals}; {how}"
    )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duckdb-jobs", type=int, default=100_000)
    parser.add_argument("--postgres-jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "queue.db"
        with DurableQueue(path) as durable:
            start = time.perf_counter()
            fill(durable, args.duckdb_jobs)
            print(
                f"DuckDB: {args.duckdb_jobs:,} jobs enqueued in {time.perf_counter() - start:.1f} s",
                flush=True,
            )
            times, answer = time_refreshes(durable, str(path), args.rounds)
        results.append(report(f"DuckDB, {args.duckdb_jobs:,} jobs waiting", times, answer))

    from jobqueue.backends.postgres import PostgresQueue
    from jobqueue.teaching.postgres_server import database_url, scratch_database

    with scratch_database(f"jobqueue_bench_{uuid.uuid4().hex[:12]}", database_url()) as url:
        with PostgresQueue(url) as postgres:
            start = time.perf_counter()
            fill(postgres, args.postgres_jobs)
            print(
                f"PostgreSQL: {args.postgres_jobs:,} jobs enqueued in {time.perf_counter() - start:.1f} s",
                flush=True,
            )
            times, answer = time_refreshes(postgres, postgres.server, args.rounds)
        results.append(report(f"PostgreSQL, {args.postgres_jobs:,} jobs waiting", times, answer))
    if not all(results):
        print("dashboard_refresh: a refresh goal was NOT met", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
