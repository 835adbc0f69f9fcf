"""Throughput of the in-memory JobQueue: enqueue + claim + ack, against stdlib queue.Queue.

Prints jobs/s for 1k, 10k, 100k and 1M jobs and the ratio to ``queue.Queue`` put + get on
the same count. Flat jobs/s as n grows shows claim does not scan the queue (it pops a
heap: O(log n)). Run: ``make bench`` or ``.venv/bin/python benchmarks/queue_throughput.py``.
"""

from __future__ import annotations

import argparse
import queue as stdlib_queue
import time
from dataclasses import dataclass

import jobqueue as jq


@dataclass(frozen=True, kw_only=True)
class Ping:
    n: int


PING = jq.JobType("ping", Ping)


def jobqueue_rate(n: int) -> float:
    queue = jq.JobQueue(jq.ManualClock())
    payloads = [Ping(n=i) for i in range(n)]
    start = time.perf_counter()
    for payload in payloads:
        queue.enqueue(PING, payload)
    while (lease := queue.claim()) is not None:
        queue.ack(lease)
    elapsed = time.perf_counter() - start
    assert len(queue) == 0
    return n / elapsed


def stdlib_rate(n: int) -> float:
    q: stdlib_queue.Queue[int] = stdlib_queue.Queue()
    start = time.perf_counter()
    for i in range(n):
        q.put(i)
    for _ in range(n):
        q.get()
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    print(f"{'jobs':>9}  {'JobQueue jobs/s':>15}  {'queue.Queue jobs/s':>18}  {'ratio':>6}")
    for n in args.sizes:
        ours, stdlib = jobqueue_rate(n), stdlib_rate(n)
        print(f"{n:>9,}  {ours:>15,.0f}  {stdlib:>18,.0f}  {ours / stdlib:>6.3f}")


if __name__ == "__main__":
    main()
