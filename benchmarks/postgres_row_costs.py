"""Where a PostgreSQL claim's time goes: the server's CPU time per job for each part of it.

``postgres_throughput.py`` sets PostgresQueue against a bare ``SKIP LOCKED`` loop. This
script says why the two differ at batch 100: it times, on the server, what each does to a
job's row, in batches of 100 (each statement its own transaction, as the queues run them),
on two tables of ``--jobs`` rows each:

- the bare loop: ``SELECT … FOR UPDATE SKIP LOCKED`` of a batch, then ``DELETE`` of it, in
  one transaction;
- the same lock and delete on PostgresQueue's table (its wider rows and its two indexes);
- PostgresQueue's own ``claim_many(100)`` and ``ack_many``, timed apart;
- the lease alone: an ``UPDATE`` of a locked batch's lease columns (attempts, lease end,
  token, place in the claim order), which PostgresQueue writes and the bare loop does not.
  ``visible_at`` and ``serial`` are in the claim index, so the new row version needs new
  index entries (no HOT update): the part of a lease that a queue with visibility timeouts
  cannot leave out.

The time is the CPU time of the server process serving the connection (Linux
``/proc/<pid>/schedstat``, nanoseconds), so the server must run on this machine: the
course's local server, or ``JOBQUEUE_DATABASE_URL`` naming one here. Client time is not
counted. Prints microseconds per job, the median of ``--rounds`` rounds taking turns; no
goal. Run: ``make bench`` or ``.venv/bin/python benchmarks/postgres_row_costs.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

from jobqueue.backends.postgres import PostgresQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.teaching.postgres_server import database_url, scratch_database

BATCH = 100
BARE_LOCK = "SELECT id FROM bare_jobs ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
BARE_DELETE = "DELETE FROM bare_jobs WHERE id = ANY(%s)"
QUEUE_LOCK = (
    "SELECT ctid FROM jobqueue_jobs WHERE died_at IS NULL AND visible_at <= %s"
    " ORDER BY priority DESC, visible_at, serial LIMIT %s FOR UPDATE SKIP LOCKED"
)
QUEUE_DELETE = "DELETE FROM jobqueue_jobs WHERE ctid = ANY(%s::tid[])"
LEASE = (
    "UPDATE jobqueue_jobs SET attempts = attempts + 1, leased_until = %(until)s, leased_at = %(now)s,"
    " visible_at = %(until)s, lease_token = 'lease-' || nextval('jobqueue_lease'),"
    " serial = nextval('jobqueue_serial') WHERE ctid = ANY(%(rows)s::tid[])"
)
NOW = 2e9  # seconds since the epoch, past every job's enqueue time


def server_seconds(con: psycopg.Connection[tuple[object, ...]]) -> float:
    """CPU seconds the server process of ``con`` has used so far (it must run on this machine)."""
    stat = Path(f"/proc/{con.info.backend_pid}/schedstat")
    if not stat.exists():
        raise SystemExit(
            f"no process {con.info.backend_pid} here: the server is on another machine, and its"
            " CPU time cannot be read; run with the course's local server"
        )
    return int(stat.read_text().split()[0]) / 1e9


def fill(url: str, jobs: int) -> None:
    """PostgresQueue's tables with ``jobs`` waiting jobs, and the bare loop's table with as many rows."""
    with PostgresQueue(url) as queue:
        for start in range(0, jobs, BATCH):
            items = [
                ReceiptPayload(order_id=i, email="customer@example.com") for i in range(start, start + BATCH)
            ]
            queue.enqueue_many(SEND_RECEIPT, items)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE bare_jobs (id BIGSERIAL PRIMARY KEY, payload JSONB NOT NULL)")
        payload = json.dumps({"order_id": 1, "email": "customer@example.com"})
        con.execute(
            "INSERT INTO bare_jobs (payload) SELECT %s::jsonb FROM generate_series(1, %s)", [payload, jobs]
        )


def lock_and_delete(url: str, lock: str, lock_args: list[object], delete: str) -> float:
    """Server seconds per row to lock batches with ``lock`` and delete them with ``delete``, to the last.

    Each batch is one transaction: the lock, then the delete of the rows it returned (by
    their first column), then the commit.
    """
    with psycopg.connect(url, autocommit=True) as con:
        spent, done = 0.0, 0
        while True:
            before = server_seconds(con)
            with con.transaction():
                keys = [row[0] for row in con.execute(lock, lock_args, prepare=True)]
                if keys:
                    con.execute(delete, [keys], prepare=True)
            spent += server_seconds(con) - before
            if not keys:
                return spent / done
            done += len(keys)


def bare_claim_and_delete(url: str) -> dict[str, float]:
    return {"bare loop: lock + delete": lock_and_delete(url, BARE_LOCK, [BATCH], BARE_DELETE)}


def queue_table_lock_and_delete(url: str) -> dict[str, float]:
    return {"queue's table: lock + delete": lock_and_delete(url, QUEUE_LOCK, [NOW, BATCH], QUEUE_DELETE)}


def lease_alone(url: str) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as con:
        locking, leasing, done = 0.0, 0.0, 0
        while True:
            before = server_seconds(con)
            with con.transaction():  # the lock, then the lease write and the commit
                rows = [str(row[0]) for row in con.execute(QUEUE_LOCK, [NOW, BATCH], prepare=True)]
                middle = server_seconds(con)
                if rows:
                    con.execute(LEASE, {"rows": rows, "now": NOW, "until": NOW + 30}, prepare=True)
            locking, leasing = locking + middle - before, leasing + server_seconds(con) - middle
            if not rows:
                return {
                    "queue's table: lock": locking / done,
                    "queue's table: lease write + commit": leasing / done,
                }
            done += len(rows)


def postgres_queue(url: str) -> dict[str, float]:
    with PostgresQueue(url) as queue:
        con = queue._own()  # this thread's connection of the queue: its server process does the work
        assert con is not None
        claiming, acking, done = 0.0, 0.0, 0
        while True:
            before = server_seconds(con)
            leases = queue.claim_many(BATCH)
            middle = server_seconds(con)
            queue.ack_many(leases)
            claiming, acking = claiming + middle - before, acking + server_seconds(con) - middle
            if not leases:
                return {
                    "PostgresQueue: claim_many": claiming / done,
                    "PostgresQueue: ack_many": acking / done,
                }
            done += len(leases)


PARTS: list[Callable[[str], dict[str, float]]] = [
    bare_claim_and_delete,
    queue_table_lock_and_delete,
    lease_alone,
    postgres_queue,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=10_000, help="rows in each table (default 10,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the parts taking turns (default 3)")
    args = parser.parse_args()
    server = database_url()
    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for part in PARTS:
            with scratch_database(f"bench_{uuid.uuid4().hex[:12]}", server) as url:
                fill(url, args.jobs)
                for name, seconds in part(url).items():
                    samples.setdefault(name, []).append(seconds)
    print(
        f"server CPU time per job, batches of {BATCH}, {args.jobs:,} jobs waiting;"
        f" median of {args.rounds} rounds"
    )
    for name, seconds in samples.items():
        print(f"  {name:<36} {statistics.median(seconds) * 1e6:6.2f} us")


if __name__ == "__main__":
    main()
