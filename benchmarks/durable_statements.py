"""Where DurableQueue's time goes: each DuckDB statement of a one-job enqueue and of a Runner's ack + claim.

``durable_throughput.py`` and ``worker_concurrency.py`` time DurableQueue as a whole. This
script times the statements inside two calls, on a DuckDB file in a fresh temporary folder:

1. ``enqueue`` of one job (the one-job enqueue goal), beside the least DuckDB can do for
   one committed job: a one-row ``INSERT`` with literal values into the queue's own table,
   and into a table of two columns;
2. ``ack_and_claim`` of 200 leases and 200 new jobs, with 1,000 waiting: what a Runner with
   the default prefetch does between jobs, while its event loop waits.

Each figure is the median of ``--rounds`` calls, in milliseconds; the statements are named
by their first words. No goal: the figures explain the goals of the other two scripts
(``benchmarks/README.md``). Run: ``make bench`` or
``.venv/bin/python benchmarks/durable_statements.py``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from jobqueue.backends.duckdb import DurableQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

ROW_OF_THE_QUEUE = (
    "INSERT INTO jobqueue_jobs (id, type, payload, attempts, max_attempts, base_s, cap_s, run_at,"
    " visible_at, serial, priority) VALUES ('job-' || nextval('jobqueue_job_id'), 'send_receipt',"
    " '{}', 0, 3, 1.0, 60.0, 0.0, 0.0, nextval('jobqueue_serial'), 0)"
)


class TimedConnection:
    """A DuckDB connection that times each statement it runs, by the statement's first words."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.times: dict[str, list[float]] = {}

    def execute(self, sql: str, *args: Any) -> duckdb.DuckDBPyConnection:
        start = time.perf_counter()
        try:
            return self.con.execute(sql, *args)
        finally:
            name = " ".join(sql.split()[:4])
            self.times.setdefault(name, []).append(time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def profile(
    queue: DurableQueue, call: Callable[[], object], rounds: int, before: Callable[[], object] = lambda: None
) -> tuple[float, dict[str, float]]:
    """Median ms of ``call``, and the median ms of each statement it ran (per call).

    ``before`` runs ahead of each call, untimed and unwatched.
    """
    plain = queue._con
    timed = TimedConnection(plain)  # the queue's own connection, watched
    seconds = []
    try:
        for _ in range(rounds):
            before()
            queue._con = timed  # type: ignore[assignment]
            start = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - start)
            queue._con = plain
    finally:
        queue._con = plain
    per_call = {
        name: statistics.median(times) * len(times) / rounds * 1e3
        for name, times in timed.times.items()
        if len(times) >= rounds / 2  # not the outcome counts, written once a second
    }
    return statistics.median(seconds) * 1e3, per_call


def show(title: str, total_ms: float, parts: dict[str, float]) -> None:
    print(f"{title}: {total_ms:.2f} ms")
    for name, ms in parts.items():
        print(f"    {ms:6.2f} ms  {name} ...")
    print(f"    {total_ms - sum(parts.values()):6.2f} ms  Python around them")


def floor_ms(con: duckdb.DuckDBPyConnection, sql: str, rounds: int) -> float:
    """Median ms of ``sql``, run and committed on its own."""
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        con.execute(sql)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=50, help="calls per figure (default 50)")
    args = parser.parse_args()
    payload = ReceiptPayload(order_id=1, email="customer@example.com")
    with tempfile.TemporaryDirectory(prefix="bench-statements-") as tmp:
        with DurableQueue(Path(tmp) / "one.duckdb") as queue:
            total, parts = profile(queue, lambda: queue.enqueue(SEND_RECEIPT, payload), args.rounds)
            show("1. enqueue of one job", total, parts)
            queue_row = floor_ms(queue._con, ROW_OF_THE_QUEUE, args.rounds)
            queue._con.execute("CREATE TABLE two_columns (id VARCHAR, payload VARCHAR)")
            two = floor_ms(queue._con, "INSERT INTO two_columns VALUES ('job-1', '{}')", args.rounds)
            print(
                f"    least for one committed row: {queue_row:.2f} ms in the queue's table,"
                f" {two:.2f} ms in a table of two columns"
            )
        with DurableQueue(Path(tmp) / "batch.duckdb") as queue:
            waiting = [ReceiptPayload(order_id=i, email="customer@example.com") for i in range(1_000)]
            queue.enqueue_many(SEND_RECEIPT, waiting)
            held = queue.claim_many(200)

            def ack_and_claim() -> None:
                nonlocal held
                _, held = queue.ack_and_claim(held, 200)

            def refill() -> None:  # 1,000 waiting again
                queue.enqueue_many(SEND_RECEIPT, waiting[:200])

            total, parts = profile(queue, ack_and_claim, args.rounds, before=refill)
            show("2. ack_and_claim of 200 leases and 200 new jobs, 1,000 waiting", total, parts)


if __name__ == "__main__":
    main()
