"""SIGKILL trials on PostgreSQL: 2 producers and 4 workers share one queue; workers die at random.

One run on one database: 2 producer processes enqueue ``JOBS`` jobs in small batches while
4 worker processes (each a :class:`jobqueue.runner.Runner`, 2 jobs at once, a
``VISIBILITY_TIMEOUT_S`` lease kept alive by a heartbeat every ``HEARTBEAT_S``) run them.
``KILLS`` times, at a seeded random moment, a seeded random worker is killed with SIGKILL
and a new one takes its place. Each job's effect (adding 1 to a total) is applied behind an
idempotency key, a row in ``kill_effects`` whose primary key is the job's order id,
written in the same transaction as the effect: the guard :func:`jobqueue.process_once`
keeps on DuckDB, as a PostgreSQL table of the test's own. Every claim is logged (job,
attempt, when, lease end, worker), and so is every extension of its lease. The test waits
until both producers are done and no job is left waiting or leased (no wall-clock
deadline: only a hang guard). Then:

1. no job is lost: every enqueued order has its effect, the queue is empty, nothing is dead;
2. no effect twice: the total equals the number of jobs although some ran twice (killed
   after their effect, before their ack, they were handed out again);
3. a killed worker's job comes back only after its lease: each claim of a job happens at
   or after the end of its previous lease (as last extended), as the next attempt;
4. only kills made jobs run again: every claim of a job but its last was made by a
   worker that was killed. The heartbeat keeps the leases of the jobs a worker runs or
   holds for a free slot, so a worker slowed down by a loaded machine keeps its jobs (it
   would have to stall for most of a lease to lose one).

The jobs get ``KILLS + 1`` attempts: a kill costs a job at most one, so no job runs out of
attempts however the kills fall, and a dead letter would be a bug.

Processes are forked from one parent that imported the package once (a fresh interpreter
per respawn would spend the time budget on imports); each child is a real process with its
own connections, killed by PID.
"""

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from waiting import HANG_GUARD_S, wait_until

from jobqueue.backends.postgres import PostgresQueue

SEED = 13
KILLS = 30
"""Trials: workers killed with SIGKILL (each replaced at once)."""

JOBS_PER_PRODUCER = 250
JOBS = 2 * JOBS_PER_PRODUCER
MAX_ATTEMPTS = KILLS + 1
"""Attempts per job: a kill costs a job at most one, so none is dead-lettered by the kills."""

VISIBILITY_TIMEOUT_S = 4.0
"""Lease length, in seconds: a killed worker's jobs come back this long after its last beat."""

HEARTBEAT_S = 0.4
"""How often a worker extends the leases it holds, running or waiting for a slot, in seconds.

A worker stalled for most of a lease (``VISIBILITY_TIMEOUT_S - HEARTBEAT_S``) on a loaded
machine would lose a job to another: only a kill should do that."""

TABLES = """
CREATE TABLE kill_claims (
    order_id int, attempt int, claimed_at double precision, leased_until double precision, pid int
);
CREATE TABLE kill_runs (order_id int, pid int);
CREATE TABLE kill_effects (order_id int PRIMARY KEY, pid int);
CREATE TABLE kill_totals (applied int NOT NULL);
INSERT INTO kill_totals VALUES (0);
CREATE TABLE kill_producers_done (number int);
"""

PARENT = """
import asyncio, json, os, random, signal, sys, time, traceback

import psycopg

from jobqueue import RetryPolicy, SystemClock, Worker
from jobqueue.backends.postgres import PostgresQueue
from jobqueue.runner import Runner
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload

url, timeout_s, heartbeat_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
per_producer, max_attempts = int(sys.argv[4]), int(sys.argv[5])


def worker() -> None:
    log = psycopg.connect(url, autocommit=True)
    queue = PostgresQueue(url, clock=SystemClock(), visibility_timeout_s=timeout_s)
    claim_many = queue.claim_many

    def logged_claim_many(limit, *, types=None, queues=None):
        leases = claim_many(limit, types=types, queues=queues)
        with log.cursor() as cur:
            cur.executemany(
                "INSERT INTO kill_claims VALUES (%s, %s, %s, %s, %s)",
                [(json.loads(l.job.payload)["order_id"], l.job.attempts, l.expires_at - timeout_s,
                  l.expires_at, os.getpid()) for l in leases],
            )
        return leases

    extend_lease = queue.extend_lease

    def logged_extend_lease(lease, by_s=None):  # the heartbeat, and the runner's for waiting jobs
        extended = extend_lease(lease, by_s)
        log.execute(
            "UPDATE kill_claims SET leased_until = %s WHERE order_id = %s AND attempt = %s",
            (extended.expires_at, json.loads(lease.job.payload)["order_id"], lease.job.attempts),
        )
        return extended

    queue.claim_many = logged_claim_many
    queue.extend_lease = logged_extend_lease

    async def render(payload: InvoicePayload) -> None:
        log.execute("INSERT INTO kill_runs VALUES (%s, %s)", (payload.order_id, os.getpid()))
        await asyncio.sleep(0.02)
        with log.transaction():  # the effect and its idempotency key commit together
            new = log.execute(
                "INSERT INTO kill_effects VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (payload.order_id, os.getpid()),
            ).fetchone()
            if new:
                log.execute("UPDATE kill_totals SET applied = applied + 1")
        await asyncio.sleep(0.06)  # a kill now leaves the effect applied and the job unacked

    worker = Worker(queue, heartbeat_s=heartbeat_s)
    worker.register(RENDER_INVOICE, render)
    runner = Runner(worker, concurrency=2, poll_s=0.05)

    async def main() -> None:
        with runner.signals_stop():
            await runner.run()

    asyncio.run(main())
    queue.close()


def producer(number: int) -> None:
    rng = random.Random(number)
    retry = RetryPolicy(max_attempts=max_attempts)
    with PostgresQueue(url, clock=SystemClock(), visibility_timeout_s=timeout_s, retry=retry) as queue:
        order = number * 10_000
        while order < number * 10_000 + per_producer:
            batch = range(order, min(order + rng.randint(1, 4), number * 10_000 + per_producer))
            queue.enqueue_many(RENDER_INVOICE, [InvoicePayload(order_id=n) for n in batch])
            order = batch[-1] + 1
            time.sleep(0.07)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("INSERT INTO kill_producers_done VALUES (%s)", (number,))


signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped as they die
for line in sys.stdin:
    kind, argument = line.split()
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        continue
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        worker() if kind == "worker" else producer(int(argument))
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)
"""


class Parent:
    """The process that forks producers and workers on request and says their PIDs."""

    def __init__(self, url: str, errors: Path) -> None:
        self._errors = errors.open("w")
        args = [url, str(VISIBILITY_TIMEOUT_S), str(HEARTBEAT_S), str(JOBS_PER_PRODUCER), str(MAX_ATTEMPTS)]
        self.process = subprocess.Popen(
            [sys.executable, "-W", "error", "-c", PARENT, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
        )

    def fork(self, kind: str, argument: int = 0) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{kind} {argument}\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=HANG_GUARD_S)
        self.process.stdout.close()
        self._errors.close()


def count(con: psycopg.Connection, query: str) -> int:
    row = con.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_workers_killed_at_random_lose_no_job_and_apply_no_effect_twice(
    pg_conninfo: str, tmp_path: Path
) -> None:
    PostgresQueue(pg_conninfo).close()  # the queue's tables, before six processes race for them
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute(TABLES.encode())
    errors = tmp_path / "children.err"
    parent = Parent(pg_conninfo, errors)
    rng = random.Random(SEED)
    workers: list[int] = []
    producers: list[int] = []
    killed: set[int] = set()
    try:
        workers = [parent.fork("worker") for _ in range(4)]
        producers = [parent.fork("producer", number) for number in (1, 2)]
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.4))
            slot = rng.randrange(len(workers))
            os.kill(workers[slot], signal.SIGKILL)
            killed.add(workers[slot])
            workers[slot] = parent.fork("worker")
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            # Every job enqueued and none left waiting or leased: acked, or dead (a failure below).
            wait_until(
                lambda: (
                    count(con, "SELECT count(*) FROM kill_producers_done") == 2
                    and count(con, "SELECT count(*) FROM jobqueue_jobs WHERE died_at IS NULL") == 0
                ),
                "the producers' jobs all acked or dead",
                poll_s=0.1,
                details=lambda: (
                    f"effects: {count(con, 'SELECT count(*) FROM kill_effects')}, "
                    f"children's errors: {errors.read_text()!r}"
                ),
            )
    finally:
        for pid in [*workers, *producers]:
            with contextlib.suppress(ProcessLookupError):  # a producer that had finished
                os.kill(pid, signal.SIGKILL)
        parent.close()
    assert errors.read_text() == ""

    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        # 1. No job lost: every order's effect is there, and the queue holds nothing.
        dead = con.execute("SELECT id, attempts, last_error FROM jobqueue_jobs").fetchall()
        assert dead == []  # none waiting, leased or dead
        effects = {row[0] for row in con.execute("SELECT order_id FROM kill_effects")}
        assert effects == {n for p in (1, 2) for n in range(p * 10_000, p * 10_000 + JOBS_PER_PRODUCER)}
        # 2. No effect twice, although killed workers' jobs ran again.
        assert count(con, "SELECT applied FROM kill_totals") == JOBS
        runs = count(con, "SELECT count(*) FROM kill_runs")
        rerun = count(
            con,
            "SELECT count(*) FROM (SELECT order_id FROM kill_claims GROUP BY order_id HAVING count(*) > 1)",
        )
        assert runs > JOBS and rerun > 0, "no kill hit a running job: the trials proved nothing"
        claims = con.execute(
            "SELECT order_id, attempt, claimed_at, leased_until, pid FROM kill_claims"
            " ORDER BY order_id, attempt"
        ).fetchall()
    previous: dict[int, tuple[int, float, int]] = {}
    for order_id, attempt, claimed_at, leased_until, pid in claims:
        if order_id in previous:
            last_attempt, last_until, last_pid = previous[order_id]
            # 3. Each claim of a job comes at or after the end of its previous lease, as the next attempt.
            assert attempt > last_attempt, (order_id, attempt, last_attempt)
            assert claimed_at >= last_until, f"order {order_id} claimed before its lease ran out"
            # 4. ... and only because the worker that held it was killed.
            assert last_pid in killed, f"order {order_id} was handed out again, but worker {last_pid} lived"
        previous[order_id] = (attempt, leased_until, pid)
    print(f"{KILLS} workers killed; {runs} runs for {JOBS} jobs, {rerun} jobs run again, every effect once")
