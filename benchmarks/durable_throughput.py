"""DurableQueue on a DuckDB file against embedded queues on SQLite, like for like.

Every queue gets a fresh temporary directory and syncs every commit to disk: DuckDB syncs
its WAL at each commit; the SQLite peers run in WAL mode with ``synchronous=FULL``
(persist-queue's ``SQLiteAckQueue`` and huey's ``SqliteStorage(fsync=True)`` by their own
settings; litequeue sets NORMAL when it opens, so the benchmark sets FULL after). Every job
carries the same JSON text (a ``ReceiptPayload``); DurableQueue also validates it.

1. **One job per call**, ``--single-jobs`` jobs each: the enqueue rate, then the rate of a
   whole life (enqueue, claim, ack: each call its own commit). Peers: persist-queue
   (``put``, ``get``, ``ack``), litequeue (``put``, ``pop``, ``done``), huey's storage
   (``enqueue``, ``dequeue``; it has no ack: a dequeue deletes the job) and plain
   ``sqlite3`` (an INSERT, an ``UPDATE … RETURNING`` claim, a DELETE ack: the embedded
   limit). Goal: DurableQueue's one-job enqueue at least 0.25x persist-queue's put, measured
   again with the two taking turns (``--turns`` rounds), so a change in load hits both.
2. **Batches** of ``--batch`` jobs, ``--jobs`` jobs each, one commit per batch: DurableQueue
   (``enqueue_many``, ``claim_many``, ``ack_many``) and ``sqlite3`` (a transaction per
   batched INSERT and DELETE, one ``UPDATE … RETURNING`` per batch claim). persist-queue and
   huey have no batch API, and litequeue's ``pop`` commits each job on its own. No goal.
3. **Cost of one statement**: ``SELECT 1`` and a one-row INSERT committed on its own,
   DuckDB against SQLite, microseconds: where the per-call figures above come from.
4. **Backlog**: ``claim_many(100)`` + ``ack_many`` with 1k, 100k and 1M jobs waiting
   (``--backlog``), median of ``--rounds`` rounds in which the sizes take turns (each size
   its own file, all open). Goals: at most 1.5x the 1k cost at 100k, 2x at 1M.
5. **Runner drain**: a ``Runner`` with its default settings drains ``--drain-jobs``
   trivial jobs (their handler returns at once) from a DuckDB file, against persist-queue's
   ``get`` + ``ack`` loop over as many jobs, taking turns in ``--turns`` rounds. Both
   queues are filled before the clock starts.
   persist-queue's ack only marks a row, and ``get`` scans past acked rows, so the loop
   calls ``clear_acked_data`` every 1,000 acks (timed): like DurableQueue, which deletes a
   job on ack, it then keeps only unfinished jobs. Goal: at least 3x.

Prints each figure with its goal, met or NOT met, and exits with status 1 if a goal is
not met (see ``benchmarks/README.md``). Run: ``make bench`` or ``.venv/bin/python
benchmarks/durable_throughput.py [--single-jobs N] [--jobs N] [--batch N] [--backlog N ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import duckdb
import litequeue
import persistqueue
from huey.storage import SqliteStorage

import jobqueue as jq
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.runner import Runner

ENQUEUE_GOAL = 0.25  # DurableQueue one-job enqueue / persist-queue put
BACKLOG_GOALS = {100_000: 1.5, 1_000_000: 2.0}  # claim_many + ack_many cost / the 1k cost
DRAIN_GOAL = 3.0  # Runner drain / persist-queue get + ack
CLEAR_ACKED_EVERY = 1_000

Timings = tuple[float, float]  # seconds to enqueue every job, then to claim and ack them all


def payloads(n: int) -> list[ReceiptPayload]:
    return [ReceiptPayload(order_id=i, email="customer@example.com") for i in range(n)]


def texts(n: int) -> list[str]:
    return [SEND_RECEIPT.dump(payload) for payload in payloads(n)]


@contextmanager
def folder(name: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)


# -- one job per call ------------------------------------------------------------------------


def durable_single(n: int) -> Timings:
    items = payloads(n)
    with folder("durable") as tmp, DurableQueue(tmp / "queue.duckdb") as queue:
        start = time.perf_counter()
        for payload in items:
            queue.enqueue(SEND_RECEIPT, payload)
        enqueued = time.perf_counter()
        while (lease := queue.claim()) is not None:
            queue.ack(lease)
        done = time.perf_counter()
        assert len(queue) == 0
    return enqueued - start, done - enqueued


def persistqueue_single(n: int) -> Timings:
    items = texts(n)
    with folder("persistqueue") as tmp:
        queue = persistqueue.SQLiteAckQueue(str(tmp / "queue"), auto_commit=True, multithreading=False)
        try:
            start = time.perf_counter()
            for text in items:
                queue.put(text)
            enqueued = time.perf_counter()
            for i in range(1, n + 1):
                queue.ack(queue.get(block=False))
                if i % CLEAR_ACKED_EVERY == 0:
                    queue.clear_acked_data(max_delete=None, keep_latest=None)
            done = time.perf_counter()
            assert queue.size == 0
        finally:
            queue.close()
    return enqueued - start, done - enqueued


def open_litequeue(path: Path) -> litequeue.LiteQueue:
    queue = litequeue.LiteQueue(str(path))
    queue.conn.execute("PRAGMA synchronous = FULL")  # it opens with NORMAL: no sync per commit
    return queue


def litequeue_single(n: int) -> Timings:
    items = texts(n)
    with folder("litequeue") as tmp:
        queue = open_litequeue(tmp / "queue.sqlite")
        start = time.perf_counter()
        for text in items:
            queue.put(text)
        enqueued = time.perf_counter()
        while (message := queue.pop()) is not None:
            queue.done(message.message_id)
        done = time.perf_counter()
        assert queue.qsize() == 0
        queue.close()
    return enqueued - start, done - enqueued


def huey_single(n: int) -> Timings:
    items = [text.encode() for text in texts(n)]
    with folder("huey") as tmp:
        storage = SqliteStorage(name="bench", filename=str(tmp / "huey.db"), fsync=True)
        start = time.perf_counter()
        for data in items:
            storage.enqueue(data)
        enqueued = time.perf_counter()
        while storage.dequeue() is not None:
            pass
        done = time.perf_counter()
        assert storage.queue_size() == 0
        storage.close()
    return enqueued - start, done - enqueued


class PlainSqlite:
    """The least an SQLite queue with leases does: a table, an index, three statements."""

    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.execute("PRAGMA synchronous = FULL")
        self.con.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, visible_at REAL NOT NULL,"
            " token INTEGER)"
        )
        self.con.execute("CREATE INDEX jobs_visible ON jobs (visible_at, id)")
        self.tokens = 0

    def enqueue_many(self, items: list[str]) -> None:
        now = time.time()
        self.con.executemany(
            "INSERT INTO jobs (payload, visible_at) VALUES (?, ?)", [(t, now) for t in items]
        )

    def claim_many(self, limit: int) -> list[tuple[int, str, int]]:
        now = time.time()
        self.tokens += 1
        return self.con.execute(
            "UPDATE jobs SET visible_at = ?, token = ? WHERE id IN"
            " (SELECT id FROM jobs WHERE visible_at <= ? ORDER BY visible_at, id LIMIT ?)"
            " RETURNING id, payload, token",
            (now + 30, self.tokens, now, limit),
        ).fetchall()

    def ack_many(self, claimed: list[tuple[int, str, int]]) -> None:
        with self.transaction():  # one commit for the batch
            self.con.executemany(
                "DELETE FROM jobs WHERE id = ? AND token = ?", [(i, tok) for i, _, tok in claimed]
            )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN IMMEDIATE")
        yield
        self.con.execute("COMMIT")

    def __len__(self) -> int:
        count: int = self.con.execute("SELECT count(*) FROM jobs").fetchone()[0]
        return count


def sqlite_single(n: int) -> Timings:
    items = texts(n)
    with folder("sqlite") as tmp:
        queue = PlainSqlite(tmp / "queue.sqlite")
        start = time.perf_counter()
        for text in items:
            queue.enqueue_many([text])
        enqueued = time.perf_counter()
        while claimed := queue.claim_many(1):
            queue.ack_many(claimed)
        done = time.perf_counter()
        assert len(queue) == 0
    return enqueued - start, done - enqueued


# -- batches ---------------------------------------------------------------------------------


def durable_batches(n: int, batch: int) -> Timings:
    items = payloads(n)
    with folder("durable") as tmp, DurableQueue(tmp / "queue.duckdb") as queue:
        start = time.perf_counter()
        for i in range(0, n, batch):
            queue.enqueue_many(SEND_RECEIPT, items[i : i + batch])
        enqueued = time.perf_counter()
        while leases := queue.claim_many(batch):
            assert not queue.ack_many(leases)
        done = time.perf_counter()
        assert len(queue) == 0
    return enqueued - start, done - enqueued


def sqlite_batches(n: int, batch: int) -> Timings:
    items = texts(n)
    with folder("sqlite") as tmp:
        queue = PlainSqlite(tmp / "queue.sqlite")
        start = time.perf_counter()
        for i in range(0, n, batch):
            with queue.transaction():
                queue.enqueue_many(items[i : i + batch])
        enqueued = time.perf_counter()
        while claimed := queue.claim_many(batch):
            queue.ack_many(claimed)  # claim and ack: one statement and one commit each
        done = time.perf_counter()
        assert len(queue) == 0
    return enqueued - start, done - enqueued


# -- one statement ---------------------------------------------------------------------------


def statement_costs(repeat: int = 300) -> dict[str, tuple[float, float]]:
    """Microseconds of ``SELECT 1`` and of a one-row INSERT committed on its own, per database."""

    def best(run: Callable[[], object]) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    with folder("statements") as tmp:
        duck = duckdb.connect(str(tmp / "x.duckdb"))
        duck.execute("CREATE TABLE t (v INTEGER)")
        lite = sqlite3.connect(tmp / "x.sqlite", isolation_level=None)
        lite.execute("PRAGMA journal_mode = WAL")
        lite.execute("PRAGMA synchronous = FULL")
        lite.execute("CREATE TABLE t (v INTEGER)")
        costs = {
            "DuckDB": (
                best(lambda: duck.execute("SELECT 1").fetchall()),
                best(lambda: duck.execute("INSERT INTO t VALUES (1)")),
            ),
            "SQLite": (
                best(lambda: lite.execute("SELECT 1").fetchall()),
                best(lambda: lite.execute("INSERT INTO t VALUES (1)")),
            ),
        }
        duck.close()
        lite.close()
    return costs


# -- backlog ---------------------------------------------------------------------------------


def backlog_round_seconds(sizes: list[int], rounds: int) -> dict[int, float]:
    """Median seconds of claim_many(100) + ack_many per backlog size, the sizes taking turns.

    Every size has its own file, all open at once; each round times one claim + ack on each
    in turn, so a change in the machine's load hits every size alike.
    """
    chunk = 10_000
    times: dict[int, list[float]] = {waiting: [] for waiting in sizes}
    with ExitStack() as stack:
        queues = {}
        for waiting in sizes:
            tmp = stack.enter_context(folder("backlog"))
            queue = stack.enter_context(DurableQueue(tmp / "queue.duckdb"))
            total = waiting + rounds * 100
            items = payloads(min(chunk, total))
            for i in range(0, total, chunk):
                queue.enqueue_many(SEND_RECEIPT, items[: min(chunk, total - i)])
            queues[waiting] = queue
        for _ in range(rounds):
            for waiting, queue in queues.items():
                start = time.perf_counter()
                leases = queue.claim_many(100)
                assert len(leases) == 100 and not queue.ack_many(leases)
                times[waiting].append(time.perf_counter() - start)
        assert all(len(queue) == waiting for waiting, queue in queues.items())
    return {waiting: statistics.median(seconds) for waiting, seconds in times.items()}


# -- taking turns ----------------------------------------------------------------------------


def enqueue_turns(n: int, turns: int) -> tuple[float, float]:
    """Seconds for ``n`` one-job enqueues on DurableQueue and ``n`` persist-queue puts, in turns."""
    items, data = payloads(n), texts(n)
    step = n // turns
    ours = theirs = 0.0
    with folder("durable") as tmp, DurableQueue(tmp / "queue.duckdb") as queue, folder("pq") as other:
        peer = persistqueue.SQLiteAckQueue(str(other / "queue"), auto_commit=True, multithreading=False)
        try:
            for i in range(0, step * turns, step):
                start = time.perf_counter()
                for payload in items[i : i + step]:
                    queue.enqueue(SEND_RECEIPT, payload)
                middle = time.perf_counter()
                for text in data[i : i + step]:
                    peer.put(text)
                ours, theirs = ours + middle - start, theirs + time.perf_counter() - middle
        finally:
            peer.close()
    return ours, theirs


def drain_turns(n: int, turns: int) -> tuple[float, float]:
    """Seconds for a default Runner to drain ``n`` trivial jobs, and persist-queue's get + ack of ``n``.

    In turns of ``n / turns`` jobs each: the Runner drains a batch enqueued before its clock
    starts, then persist-queue gets and acks as many (filled beforehand).
    """

    async def send_receipt(payload: ReceiptPayload) -> None:
        return None

    async def drain(queue: DurableQueue) -> list[jq.JobEvent]:
        worker = jq.Worker(queue)
        worker.register(SEND_RECEIPT, send_receipt)
        return await Runner(worker).run(until_idle=True)

    step = n // turns
    items, data = payloads(step), texts(n)
    ours = theirs = 0.0
    done = 0
    with folder("runner") as tmp, DurableQueue(tmp / "queue.duckdb") as queue, folder("pq") as other:
        peer = persistqueue.SQLiteAckQueue(str(other / "queue"), auto_commit=True, multithreading=False)
        try:
            for text in data:
                peer.put(text)
            for _ in range(turns):
                queue.enqueue_many(SEND_RECEIPT, items)
                start = time.perf_counter()
                events = asyncio.run(drain(queue))
                middle = time.perf_counter()
                for _ in range(step):
                    peer.ack(peer.get(block=False))
                    done += 1
                    if done % CLEAR_ACKED_EVERY == 0:
                        peer.clear_acked_data(max_delete=None, keep_latest=None)
                ours, theirs = ours + middle - start, theirs + time.perf_counter() - middle
                assert len(queue) == 0 and [event.outcome for event in events] == ["done"] * step
        finally:
            peer.close()
    return ours, theirs


# -- report ----------------------------------------------------------------------------------


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--single-jobs", type=int, default=500, help="jobs in the one-job-per-call table")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the batch table")
    parser.add_argument("--batch", type=int, default=100, help="jobs per batch")
    parser.add_argument("--backlog", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=30, help="claim + ack rounds timed per backlog")
    parser.add_argument("--drain-jobs", type=int, default=5_000, help="jobs the Runner drains")
    parser.add_argument(
        "--turns", type=int, default=10, help="rounds in which the goal's two sides take turns"
    )
    args = parser.parse_args()
    missed: list[str] = []

    n = args.single_jobs
    print(f"1. One job per call, {n:,} jobs, every commit synced; x = against persist-queue")
    print(f"{'queue':<34}  {'enqueue/s':>9}  {'x':>6}  {'enqueue+claim+ack/s':>19}  {'x':>6}")
    single = {
        "DurableQueue (DuckDB)": durable_single(n),
        "persist-queue SQLiteAckQueue": persistqueue_single(n),
        "litequeue (synchronous=FULL)": litequeue_single(n),
        "huey SqliteStorage (no ack)": huey_single(n),
        "sqlite3, three statements": sqlite_single(n),
    }
    base_put, base_all = (
        n / single["persist-queue SQLiteAckQueue"][0],
        n / sum(single["persist-queue SQLiteAckQueue"]),
    )
    for name, (put_s, rest_s) in single.items():
        put, whole = n / put_s, n / (put_s + rest_s)
        print(
            f"{name:<34}  {put:>9,.0f}  {put / base_put:>5.2f}x  {whole:>19,.0f}  {whole / base_all:>5.2f}x"
        )
    ours, theirs = enqueue_turns(n, args.turns)
    ratio = theirs / ours
    met = ratio >= ENQUEUE_GOAL
    print(
        f"goal: DurableQueue one-job enqueue >= {ENQUEUE_GOAL:g}x persist-queue put, {n:,} each, taking"
        f" turns in {args.turns} rounds: {verdict(met)} ({n / ours:,.0f}/s against {n / theirs:,.0f}/s,"
        f" {ratio:.2f}x)"
    )
    if not met:
        missed.append("one-job enqueue")

    n, b = args.jobs, args.batch
    print(f"\n2. Batches of {b}, {n:,} jobs, one commit per batch (no goal); x = against sqlite3")
    print(f"{'queue':<34}  {'enqueue/s':>9}  {'x':>6}  {'enqueue+claim+ack/s':>19}  {'x':>6}")
    batched = {
        "DurableQueue (DuckDB)": durable_batches(n, b),
        "sqlite3, three statements": sqlite_batches(n, b),
    }
    base_put, base_all = (
        n / batched["sqlite3, three statements"][0],
        n / sum(batched["sqlite3, three statements"]),
    )
    for name, (put_s, rest_s) in batched.items():
        put, whole = n / put_s, n / (put_s + rest_s)
        print(
            f"{name:<34}  {put:>9,.0f}  {put / base_put:>5.2f}x  {whole:>19,.0f}  {whole / base_all:>5.2f}x"
        )

    print("\n3. One statement, median microseconds (no goal)")
    print(f"{'database':<10}  {'SELECT 1':>9}  {'INSERT, committed':>17}")
    for name, (select_us, insert_us) in statement_costs().items():
        print(f"{name:<10}  {select_us:>9,.1f}  {insert_us:>17,.1f}")

    print(f"\n4. Backlog: claim_many(100) + ack_many, median of {args.rounds} rounds, the sizes taking turns")
    print(f"{'waiting':>10}  {'ms':>7}  {'x smallest':>10}  goal")
    costs = backlog_round_seconds(args.backlog, args.rounds)
    smallest = min(costs)
    for waiting, seconds in costs.items():
        ratio = seconds / costs[smallest]
        goal = BACKLOG_GOALS.get(waiting)
        shown = f"<= {goal:g}x: {verdict(ratio <= goal)}" if goal is not None else ""
        print(f"{waiting:>10,}  {seconds * 1000:>7.2f}  {ratio:>9.2f}x  {shown}")
        if goal is not None and ratio > goal:
            missed.append(f"backlog of {waiting:,}")

    n = args.drain_jobs
    ours_s, theirs_s = drain_turns(n, args.turns)
    ours, theirs = n / ours_s, n / theirs_s
    ratio = ours / theirs
    print(
        f"\n5. Drain of {n:,} trivial jobs, taking turns in {args.turns} rounds: Runner (defaults) on DuckDB"
        f" {ours:,.0f} jobs/s, persist-queue get + ack {theirs:,.0f} jobs/s"
    )
    print(
        f"goal: Runner drain >= {DRAIN_GOAL:g}x persist-queue: {verdict(ratio >= DRAIN_GOAL)} ({ratio:.2f}x)"
    )
    if ratio < DRAIN_GOAL:
        missed.append("runner drain")

    if missed:
        print(f"goals NOT met: {', '.join(missed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
