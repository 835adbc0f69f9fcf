"""One PostgreSQL claim behind a backlog of higher priority that is not yet due, on PostgreSQL 18 and 16.

PostgresQueue's claim index is ``(priority DESC, visible_at, serial) WHERE died_at IS
NULL``. A claim that reads it in that order (``WHERE visible_at <= now ORDER BY priority
DESC, visible_at, serial``) can, on PostgreSQL 17 and older, bound its scan only by the
first column: they read every index entry of every higher priority whose jobs are not yet
due (jobs waiting out a backoff, leased jobs) before the first due job of a lower one;
PostgreSQL 18 skips from one priority to the next (a skip scan) (issue 21, point 9).

Two databases on each server, made by PostgresQueue (its tables and indexes):

- *backlog*: ``--backlog`` jobs (default 100,000) of priority 1 waiting out a backoff (an
  ``UPDATE`` after ``enqueue_many`` moves their ``run_at`` and ``visible_at`` an hour
  ahead and counts one attempt, as a failure would), and ``--due`` jobs (default 1,000)
  due at priority 0;
- *due only*: the same ``--due`` jobs, nothing else.

Both are vacuumed and analysed. In each, a claim of ``--batch`` jobs (default 1) is timed
``--claims`` times (default 200) for each form of the claim, the databases and the forms
taking turns in rounds of 20 (so ``--due`` must hold 3 x (``--claims`` + 5) x ``--batch``
jobs); the median counts.
The time is the CPU time of the server process serving the claim (Linux
``/proc/<pid>/schedstat``, as ``postgres_row_costs.py``), so the server must run on this
machine; on a shared machine the wall-clock time of a claim of well under a millisecond
varies with everyone else's load far more than with the claim. Each claimed job is acked
at once, untimed. The forms, each one statement that picks the job ``FOR UPDATE SKIP
LOCKED`` and writes its lease as PostgresQueue's claim does (attempts, lease end, token,
new serial; committed without waiting for the disk; the ack a ``DELETE`` by id and token),
on a connection set up as PostgresQueue's (prepared statements, generic plans, no
sequential scans):

- ``priority order``: the pick reads the claim index in its order (PostgresQueue's claim
  until issue 21, point 9, and again on PostgreSQL 18 and later since 2026-12-03, where it
  costs less than the walk below; no goal of its own: ``PostgresQueue`` carries the goal);
- ``loose index scan``: a recursive CTE walks the distinct priorities of the live jobs
  from the highest (one index descent each), and for each, a ``LATERAL`` pick of the due
  jobs of exactly that priority (``priority = p AND visible_at <= now ORDER BY
  visible_at, serial``): a range of the same index that starts at the first due job and
  ends at the first one not yet due, so a priority with nothing due costs one descent.
  The outer ``LIMIT`` stops the walk once enough jobs are locked.
- ``PostgresQueue``: its own ``claim_many`` + ``ack_many``, whatever ``postgres.sql`` holds:
  the index in its order on 18, the walk by priority on 16 (``SKIP_SCAN_VERSION``).

Prints, per server and form, the server's median CPU time for one claim in milliseconds
with and without the backlog, and their ratio; goal: the backlog costs at most 1.5x
(``--goal``) for the loose index scan and for PostgresQueue. PostgreSQL 18 is the course's server
(:func:`jobqueue.teaching.postgres_server.database_url`); PostgreSQL 16 is started for the
run from the binaries of PyPI's ``pgserver`` (``--pg16-bin``, default
``/tmp/pg16venv/lib/python3.11/site-packages/pgserver/pginstall/bin``; ``pip install
pgserver`` in a Python 3.11 venv there), as the user ``embedded_postgres`` when run as root,
with its data in a folder of ``/tmp`` removed afterwards, a Unix socket only (in that
folder, mode 700) and ``fsync`` on. Without those binaries the script says so and measures
18 only. Exits 1 when a goal is missed. Run:
``.venv/bin/python benchmarks/postgres_claim_index.py [--backlog N] [--due N] [--claims N]
[--batch N]``; ``--batch 100 --due 25000 --claims 60`` compares the forms at batch 100.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from jobqueue.backends.postgres import PostgresQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.teaching.postgres_server import database_url, scratch_database

PG16_BIN = Path("/tmp/pg16venv/lib/python3.11/site-packages/pgserver/pginstall/bin")
SERVER_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
LEASE_S = 30.0
BACKOFF_S = 3600.0
ROUND = 20  # claims of one form before the next form's turn
ENQUEUE_BATCH = 5_000
FORMS = 3  # each claims its own jobs from the same due ones
WARM_UP = 5  # claims + acks of each form before the timed ones

PRIORITY_ORDER = """
    SELECT ctid FROM jobqueue_jobs
    WHERE died_at IS NULL AND visible_at <= %(now)s
    ORDER BY priority DESC, visible_at, serial
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""
LOOSE_INDEX_SCAN = """
    WITH RECURSIVE priorities AS (
        (SELECT priority FROM jobqueue_jobs WHERE died_at IS NULL ORDER BY priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT priority FROM jobqueue_jobs AS next
                WHERE next.died_at IS NULL AND next.priority < priorities.priority
                ORDER BY next.priority DESC LIMIT 1)
        FROM priorities WHERE priorities.priority IS NOT NULL
    )
    SELECT job.ctid
    FROM priorities, LATERAL (
        SELECT ctid FROM jobqueue_jobs
        WHERE died_at IS NULL AND priority = priorities.priority AND visible_at <= %(now)s
        ORDER BY visible_at, serial
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS job
    LIMIT %(limit)s
"""
CLAIM = """
WITH no_disk_wait AS MATERIALIZED (
    SELECT set_config('synchronous_commit', 'off', true)
), due AS MATERIALIZED ({pick})
UPDATE jobqueue_jobs AS job
SET attempts = job.attempts + 1, leased_until = %(until)s, leased_at = %(now)s, visible_at = %(until)s,
    lease_token = 'lease-' || nextval('jobqueue_lease'), serial = nextval('jobqueue_serial')
FROM no_disk_wait
WHERE job.ctid = ANY(ARRAY(SELECT ctid FROM due))
RETURNING job.id, job.lease_token
"""
ACK = "DELETE FROM jobqueue_jobs WHERE id = ANY(%(ids)s) AND lease_token = ANY(%(tokens)s)"
SESSION = ("SET plan_cache_mode = force_generic_plan", "SET enable_seqscan = off")  # as PostgresQueue's

ClaimAndAck = Callable[[], float]
"""Claims one job and acks it; returns the server's CPU seconds for the claim (the ack not counted)."""


def fill(url: str, backlog: int, due: int) -> None:
    """``backlog`` jobs of priority 1 an hour from due (one attempt used), ``due`` due ones of priority 0."""
    with PostgresQueue(url) as queue:
        for start in range(0, backlog, ENQUEUE_BATCH):
            items = [
                ReceiptPayload(order_id=i, email="customer@example.com")
                for i in range(start, min(start + ENQUEUE_BATCH, backlog))
            ]
            queue.enqueue_many(SEND_RECEIPT, items, priority=1)
        items = [ReceiptPayload(order_id=i, email="customer@example.com") for i in range(due)]
        queue.enqueue_many(SEND_RECEIPT, items, priority=0)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(
            "UPDATE jobqueue_jobs SET attempts = 1, run_at = run_at + %(s)s, visible_at = visible_at + %(s)s"
            " WHERE priority = 1",
            {"s": BACKOFF_S},
        )
        con.execute("VACUUM ANALYZE jobqueue_jobs")


def server_seconds(pid: int) -> float:
    """CPU seconds server process ``pid`` has used so far (Linux ``/proc/<pid>/schedstat``)."""
    stat = Path(f"/proc/{pid}/schedstat")
    if not stat.exists():
        raise SystemExit(f"no process {pid} here: run with a PostgreSQL server on this machine")
    return int(stat.read_text().split()[0]) / 1e9


def raw_form(con: psycopg.Connection[Any], pick: str, batch: int) -> ClaimAndAck:
    statement = CLAIM.format(pick=pick)
    pid = con.info.backend_pid

    def claim_and_ack() -> float:
        start = server_seconds(pid)
        now = time.time()
        rows = con.execute(
            statement, {"now": now, "until": now + LEASE_S, "limit": batch}, prepare=True
        ).fetchall()
        took = server_seconds(pid) - start
        if len(rows) != batch:
            raise RuntimeError(f"a claim returned {len(rows)} jobs, not {batch}")
        ids, tokens = [list(column) for column in zip(*rows, strict=True)]
        if con.execute(ACK, {"ids": ids, "tokens": tokens}, prepare=True).rowcount != batch:
            raise RuntimeError(f"the ack of {ids} deleted too little")
        return took

    return claim_and_ack


def queue_form(queue: PostgresQueue, pid: int, batch: int) -> ClaimAndAck:
    """PostgresQueue's claim, timed on ``pid``, the server process of the queue's own connection."""

    def claim_and_ack() -> float:
        start = server_seconds(pid)
        leases = queue.claim_many(batch)
        took = server_seconds(pid) - start
        if len(leases) != batch or any(lease.job.priority != 0 for lease in leases):
            raise RuntimeError(f"PostgresQueue claimed {leases}, not {batch} due jobs of priority 0")
        queue.ack_many(leases)
        return took

    return claim_and_ack


@contextmanager
def claim_forms(url: str, batch: int) -> Iterator[dict[str, ClaimAndAck]]:
    """The three forms of the claim on database ``url``, each warmed up (plans made, pages read)."""
    with psycopg.connect(url, autocommit=True) as con, PostgresQueue(url) as queue:
        for setting in SESSION:
            con.execute(setting)
        len(queue)  # the queue opens its connection: the one server process besides ours
        (queue_pid,) = con.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
        forms = {
            "priority order": raw_form(con, PRIORITY_ORDER, batch),
            "loose index scan": raw_form(con, LOOSE_INDEX_SCAN, batch),
            "PostgresQueue": queue_form(queue, queue_pid[0], batch),
        }
        for form in forms.values():
            for _ in range(WARM_UP):
                form()
        yield forms


def server_version(url: str) -> str:
    with psycopg.connect(url) as con:
        version, fsync = (con.execute(f"SHOW {name}").fetchone()[0] for name in ("server_version", "fsync"))  # type: ignore[index]
    return f"PostgreSQL {version} (fsync={fsync})"


@contextmanager
def pg16_server(bin_path: Path) -> Iterator[str]:
    """A throwaway server run from ``bin_path``; yields its URL. Raises OSError if it cannot start."""
    user = SERVER_USER if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="jobqueue-pg16-", dir="/tmp"))
    data = folder / "data"
    if user is not None:
        shutil.chown(folder, user, user)

    def run(program: str, *args: str) -> None:
        done = subprocess.run(
            [str(bin_path / program), "-D", str(data), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            user=user,
            check=False,
        )
        if done.returncode != 0:
            raise OSError(f"{program} failed: {done.stderr.decode(errors='replace').strip()}")

    try:
        # Trust is safe here: the socket is in a folder (mode 700) only its owner and root can reach.
        run("initdb", "-U", "postgres", "--auth=trust", "--encoding=utf8")
        run("pg_ctl", "-w", "-o", '-h ""', "-o", f"-k {folder}", "-l", str(folder / "log"), "start")
        try:
            yield f"postgresql://postgres@/postgres?host={folder}"
        finally:
            run("pg_ctl", "-w", "-m", "fast", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure(server: str, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Per form: (median ms with the backlog, median ms with the due jobs only).

    Both databases are filled first; then the scenarios and the forms take turns, so that
    a burst of load elsewhere falls on every figure alike.
    """
    names = [f"bench_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    with scratch_database(names[0], server) as with_backlog, scratch_database(names[1], server) as due_only:
        fill(with_backlog, args.backlog, args.due)
        fill(due_only, 0, args.due)
        with (
            claim_forms(with_backlog, args.batch) as backlog_forms,
            claim_forms(due_only, args.batch) as due_forms,
        ):
            scenarios = {"backlog": backlog_forms, "due only": due_forms}
            samples = {(scenario, form): [] for scenario in scenarios for form in backlog_forms}
            for _ in range(0, args.claims, ROUND):
                for scenario, forms in scenarios.items():
                    for form, claim in forms.items():
                        samples[scenario, form].extend(claim() * 1000 for _ in range(ROUND))
    median = {key: statistics.median(values) for key, values in samples.items()}
    return {form: (median["backlog", form], median["due only", form]) for form in backlog_forms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backlog", type=int, default=100_000, help="jobs of priority 1 not yet due")
    parser.add_argument("--due", type=int, default=1_000, help="due jobs of priority 0")
    parser.add_argument("--claims", type=int, default=200, help="claims + acks timed per form")
    parser.add_argument("--batch", type=int, default=1, help="jobs per claim (default 1)")
    parser.add_argument("--pg16-bin", type=Path, default=PG16_BIN, help="PostgreSQL 16's bin folder")
    parser.add_argument("--goal", type=float, default=1.5, help="most the backlog may cost, as a ratio")
    args = parser.parse_args()
    needed = FORMS * (args.claims + WARM_UP) * args.batch
    if args.due < needed:
        parser.error(f"--claims {args.claims} takes {needed} due jobs, more than --due {args.due}")
    print(
        f"server CPU time of one claim of {args.batch} (ms, median of {args.claims}) with"
        f" {args.backlog:,} jobs of priority 1 not yet due and {args.due:,} due at priority 0,"
        f" against the {args.due:,} due only"
    )
    missed: list[str] = []

    def report(server: str) -> None:
        print(server_version(server))
        print(f"  {'form':<17}  {'backlog':>8}  {'due only':>8}  {'ratio':>6}  goal <= {args.goal}x")
        for form, (backlog, due) in measure(server, args).items():
            ratio = backlog / due
            judged = form != "priority order"
            ok = ratio <= args.goal
            verdict = ("met" if ok else "NOT met") if judged else "(no goal)"
            print(f"  {form:<17}  {backlog:>8.3f}  {due:>8.3f}  {ratio:>5.2f}x  {verdict}", flush=True)
            if judged and not ok:
                missed.append(f"{form} on {server_version(server)}")

    report(database_url())
    if not (args.pg16_bin / "postgres").exists():
        print(f"PostgreSQL 16: no binaries in {args.pg16_bin} (pip install pgserver): measured 18 only")
    else:
        try:
            with pg16_server(args.pg16_bin) as url:
                report(url)
        except OSError as exc:
            print(f"PostgreSQL 16 did not start ({exc}): measured 18 only")
    if missed:
        print(f"goals NOT met: {', '.join(missed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
