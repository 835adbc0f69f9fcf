"""Claim + ack of 100 jobs on PostgreSQL after 100,000 jobs passed, with and without an idle transaction.

Issue 24's measurement: one transaction left open in another session of the queue's
database keeps every row version deleted or replaced after it began (vacuum may not remove
what it can still see), so the dead rows of 100,000 claims and acks stay in the table and
in the claim index, and every claim walks over them. Without such a transaction vacuum
removes them and the claim stays as fast as on a fresh table.

Two runs, each in a fresh database of the course's server (PostgreSQL 18; since
PostgreSQL 14 a transaction holds back vacuum in its own database only):

- *idle transaction*: a session opens a ``REPEATABLE READ`` transaction, reads one row (so
  it holds a snapshot) and stays idle in it for the whole run;
- *no open transaction*: nothing else.

In each, ``claim_many(100)`` + ``ack_many`` of 100 waiting jobs is timed ``--rounds`` times
(default 20) on the fresh table; then ``--passed`` jobs (default 100,000) pass through
the queue (enqueued 1,000 at a time, claimed and acked 100 at a time); then ``VACUUM`` runs
on the queue's table (as autovacuum would, without waiting for it); then the claim + ack is
timed again. The figure is the median wall-clock time of one claim + ack, after over before,
per run, and the two runs' ratio. Also printed: the dead rows left in the table
(:meth:`PostgresQueue.cleanup_held_back`) and what it reports as holding cleanup back. No
goal: it shows the cost the report is there to catch. Run:
``.venv/bin/python benchmarks/postgres_held_back.py [--passed N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg

from jobqueue.backends.postgres import PostgresQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.teaching.postgres_server import database_url, scratch_database

BATCH = 100
ENQUEUE_BATCH = 1_000


def payloads(count: int) -> list[ReceiptPayload]:
    return [ReceiptPayload(order_id=n, email="customer@example.com") for n in range(count)]


def claim_and_ack(queue: PostgresQueue) -> float:
    """Seconds for one claim + ack of ``BATCH`` jobs (enqueued beforehand, untimed)."""
    queue.enqueue_many(SEND_RECEIPT, payloads(BATCH))
    started = time.perf_counter()
    leases = queue.claim_many(BATCH)
    stale = queue.ack_many(leases)
    elapsed = time.perf_counter() - started
    if len(leases) != BATCH or stale:
        raise SystemExit(f"claimed {len(leases)} of {BATCH}, {len(stale)} stale acks: a run went wrong")
    return elapsed


def median_ms(queue: PostgresQueue, rounds: int) -> float:
    claim_and_ack(queue)  # warm up: prepared statements, caches
    return 1000 * statistics.median(claim_and_ack(queue) for _ in range(rounds))


def pass_jobs(queue: PostgresQueue, count: int) -> None:
    for start in range(0, count, ENQUEUE_BATCH):
        queue.enqueue_many(SEND_RECEIPT, payloads(min(ENQUEUE_BATCH, count - start)))
        while leases := queue.claim_many(BATCH):
            queue.ack_many(leases)


def run(url: str, *, hold: bool, passed: int, rounds: int) -> tuple[float, float, str]:
    """``(before_ms, after_ms, what the cleanup report said)`` in a fresh database."""
    database = f"jobqueue_bench_{uuid.uuid4().hex[:12]}"
    with scratch_database(database, url) as conninfo, PostgresQueue(conninfo) as queue:
        holder = None
        if hold:
            holder = psycopg.connect(conninfo, application_name="idle session")
            holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            holder.execute("SELECT 1").fetchall()
        try:
            before = median_ms(queue, rounds)
            pass_jobs(queue, passed)
            with psycopg.connect(conninfo, autocommit=True) as con:
                con.execute("VACUUM jobqueue_jobs")
            report = queue.cleanup_held_back()
            after = median_ms(queue, rounds)
        finally:
            if holder is not None:
                holder.close()
    holder_text = (
        "nothing" if report.oldest is None else f"{report.oldest.state} ({report.oldest.application_name})"
    )
    return before, after, f"{report.dead_rows:,} dead rows after VACUUM, held back by {holder_text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passed", type=int, default=100_000, help="jobs passed through between the timings")
    parser.add_argument("--rounds", type=int, default=20, help="timed claims + acks, before and after")
    args = parser.parse_args()
    url = database_url()
    print(
        f"claim_many({BATCH}) + ack_many, median of {args.rounds},"
        f" before and after {args.passed:,} jobs passed"
    )
    ratios = {}
    for name, hold in (("idle transaction", True), ("no open transaction", False)):
        before, after, said = run(url, hold=hold, passed=args.passed, rounds=args.rounds)
        ratios[name] = after / before
        print(f"  {name:<20} {before:6.2f} ms -> {after:6.2f} ms: {after / before:5.2f}x  ({said})")
    slower = ratios["idle transaction"] / ratios["no open transaction"]
    print(f"the idle transaction's slow-down against none: {slower:.2f}x")


if __name__ == "__main__":
    main()
