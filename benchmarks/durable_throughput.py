"""Throughput of DurableQueue on a DuckDB file: enqueue + claim + ack, against persist-queue.

Each implementation gets a fresh temporary directory and a file in it; the clock runs from
the first enqueue to the last ack (opening and closing the file are not timed). Measured:

- ``DurableQueue`` in batches (``--batch`` jobs per ``enqueue_many``, ``claim_many`` and
  ``ack_many``, so one transaction moves a whole batch), on ``--jobs`` jobs;
- ``DurableQueue`` one call per job (``enqueue``, ``claim``, ``ack``: three transactions a
  job), on ``--single-jobs`` jobs, to show why the batches matter;
- persist-queue's ``SQLiteAckQueue``, with its normal API ``put``, ``get``, ``ack``, on
  ``--jobs`` jobs.

Every job is a ``send_receipt`` job with ``ReceiptPayload(order_id=i, ...)``; persist-queue
stores the same payload objects. ``SQLiteAckQueue`` settings: ``auto_commit=True``, the
only mode the ack queue supports (it warns and forces it back on ``False``), so each put,
get and ack is its own commit; ``multithreading=False`` (one SQLite connection, enough for
one thread and the less work); its default pickle serializer (its fastest built-in one) and
its default WAL journal. It has no batch API. An ack only marks a row acked, and ``get``
scans past acked rows to the first unacked one, so the benchmark calls its
``clear_acked_data(max_delete=None, keep_latest=None)`` every 1,000 acks (timed): like
``DurableQueue``, which deletes a job on ack, it then keeps only unfinished jobs; without
this its ``get`` slows as acked rows pile up. Both libraries make each commit durable
(DuckDB syncs its WAL on commit; SQLite's default ``synchronous=FULL`` syncs its WAL).

Prints jobs/s per row and its ratio to ``SQLiteAckQueue``, then whether the target of
``DurableQueue`` in batches at least 2x ``SQLiteAckQueue`` is met. Run: ``make bench`` or
``.venv/bin/python benchmarks/durable_throughput.py [--jobs N] [--batch N] [--single-jobs N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import persistqueue

from jobqueue.durable import DurableQueue
from jobqueue.shop import SEND_RECEIPT, ReceiptPayload

TARGET_RATIO = 2.0
CLEAR_ACKED_EVERY = 1_000


def payloads(n: int) -> list[ReceiptPayload]:
    return [ReceiptPayload(order_id=i, email="customer@example.com") for i in range(n)]


def durable_batched_seconds(n: int, batch: int) -> float:
    items = payloads(n)
    with (
        tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp,
        DurableQueue(Path(tmp) / "queue.duckdb") as queue,
    ):
        start = time.perf_counter()
        for i in range(0, n, batch):
            queue.enqueue_many(SEND_RECEIPT, items[i : i + batch])
        done = 0
        while leases := queue.claim_many(batch):
            stale = queue.ack_many(leases)
            assert not stale, stale
            done += len(leases)
        elapsed = time.perf_counter() - start
        assert done == n and len(queue) == 0, (done, len(queue))
    return elapsed


def durable_single_seconds(n: int) -> float:
    items = payloads(n)
    with (
        tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp,
        DurableQueue(Path(tmp) / "queue.duckdb") as queue,
    ):
        start = time.perf_counter()
        for payload in items:
            queue.enqueue(SEND_RECEIPT, payload)
        done = 0
        while (lease := queue.claim()) is not None:
            queue.ack(lease)
            done += 1
        elapsed = time.perf_counter() - start
        assert done == n and len(queue) == 0, (done, len(queue))
    return elapsed


def persistqueue_seconds(n: int) -> float:
    items = payloads(n)
    with tempfile.TemporaryDirectory(prefix="bench-persistqueue-") as tmp:
        queue = persistqueue.SQLiteAckQueue(str(Path(tmp) / "queue"), auto_commit=True, multithreading=False)
        try:
            start = time.perf_counter()
            for payload in items:
                queue.put(payload)
            for i in range(1, n + 1):
                item = queue.get(block=False)
                queue.ack(item)
                if i % CLEAR_ACKED_EVERY == 0:
                    queue.clear_acked_data(max_delete=None, keep_latest=None)
            elapsed = time.perf_counter() - start
            assert queue.size == 0 and queue.unack_count() == 0, (queue.size, queue.unack_count())
        finally:
            queue.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the batched and persist-queue rows")
    parser.add_argument("--batch", type=int, default=100, help="jobs per DurableQueue batch")
    parser.add_argument("--single-jobs", type=int, default=1_000, help="jobs in the one-call-per-job row")
    args = parser.parse_args()

    rows = [
        (f"DurableQueue, batches of {args.batch}", args.jobs, durable_batched_seconds(args.jobs, args.batch)),
        ("DurableQueue, one call per job", args.single_jobs, durable_single_seconds(args.single_jobs)),
        ("persistqueue.SQLiteAckQueue", args.jobs, persistqueue_seconds(args.jobs)),
    ]
    baseline = args.jobs / rows[-1][2]
    print(f"{'implementation':<34}  {'jobs':>7}  {'seconds':>8}  {'jobs/s':>9}  {'vs SQLiteAckQueue':>17}")
    for name, n, seconds in rows:
        rate = n / seconds
        print(f"{name:<34}  {n:>7,}  {seconds:>8.3f}  {rate:>9,.0f}  {rate / baseline:>16.2f}x")
    ratio = args.jobs / rows[0][2] / baseline
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(
        f"target DurableQueue (batches of {args.batch}) >= {TARGET_RATIO:g}x SQLiteAckQueue:"
        f" {verdict} ({ratio:.2f}x)"
    )


if __name__ == "__main__":
    main()
