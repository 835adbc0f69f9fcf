"""PostgresQueue of another commit against this checkout's: throughput and CPU per job, taking turns.

"Nothing gets slower" (issue 20) compares the same queue before and after a change, so this
script runs two copies of ``PostgresQueue``: the one at ``--before`` (a commit, checked out
with ``git worktree add --detach`` into a temporary folder, and removed afterwards) and the
one of this checkout. Each row: ``--workers`` processes enqueue ``--jobs`` jobs between them
(``enqueue_many`` at ``--batch``), then claim and ack them all (``claim_many`` and
``ack_many`` at ``--batch``), in a fresh database of one server (``JOBQUEUE_DATABASE_URL``,
else the course's local embedded server); every process first puts one batch through,
untimed. The two copies take turns, ``--rounds`` times, and the medians count.

Measured for each row: jobs per second from the first enqueue to the last ack (wall clock),
the CPU seconds of the server's backends of that database per job (``/proc/<pid>/stat``: the
server must run on this machine), and the CPU seconds of the client processes per job
(``getrusage``). CPU per job moves less than throughput when other work loads the machine.

Run: ``.venv/bin/python benchmarks/postgres_before_after.py --before 6b58660`` (no goal of its
own: the figure is the ratio, read against the issue's bar). ``--before HEAD`` on a clean
working tree runs the same code twice, an A/A test of the run's own spread: on the course's
2-core machine (2026-12-03) it printed jobs/s ratios of 0.95 / 1.11 / 0.99 (5 rounds) and
0.88 / 1.03 / 0.99 (9 rounds) with 1 / 2 / 4 processes, so a single run cannot tell 10 %
apart there.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CHILD = "child"


@dataclass(frozen=True)
class Receipt:
    """The payload of the jobs: what lesson 00's receipt job carries."""

    order_id: int
    email: str


def child(url: str, batch: int, share: list[int]) -> None:
    """One worker process: warm up, then enqueue its share and drain, each on a line from stdin."""
    import jobqueue as jq
    from jobqueue.backends.postgres import PostgresQueue

    receipt = jq.JobType("send_receipt", Receipt)
    queue = PostgresQueue(url)
    queue.enqueue_many(receipt, [Receipt(-1 - i, "warm@example.com") for i in range(batch)])
    while leases := queue.claim_many(batch):
        queue.ack_many(leases)
    print("ready", flush=True)
    sys.stdin.readline()
    used = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    for at in range(0, len(share), batch):
        queue.enqueue_many(receipt, [Receipt(n, "customer@example.com") for n in share[at : at + batch]])
    print("enqueued", flush=True)
    sys.stdin.readline()
    done = 0
    while leases := queue.claim_many(batch):
        queue.ack_many(leases)
        done += len(leases)
    now = resource.getrusage(resource.RUSAGE_SELF)
    cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
    print(done, start, time.monotonic(), cpu, flush=True)
    sys.stdin.readline()
    queue.close()


def backend_cpu_s(pid: int) -> float:
    """CPU seconds used so far by the server process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_row(server: str, src: str, jobs: int, batch: int, workers: int) -> tuple[float, float, float]:
    """(jobs/s, server CPU us per job, client CPU us per job) of the queue whose code is in ``src``."""
    import psycopg

    from jobqueue.teaching.postgres_server import scratch_database

    with scratch_database(f"before_after_{uuid.uuid4().hex[:10]}", server) as url:
        env = {**os.environ, "PYTHONPATH": src}
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, CHILD, url, str(batch), str(w), str(jobs), str(workers)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(workers)
        ]

        def tell_all() -> None:
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("\n")
                proc.stdin.flush()

        def hear_all() -> list[str]:
            return [proc.stdout.readline().strip() for proc in procs if proc.stdout is not None]

        assert hear_all() == ["ready"] * workers
        with psycopg.connect(url, autocommit=True) as con:
            pids = [
                row[0]
                for row in con.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"  # not autovacuum
                )
            ]
            before = sum(backend_cpu_s(pid) for pid in pids)
            tell_all()
            assert hear_all() == ["enqueued"] * workers
            tell_all()
            outcomes = [line.split() for line in hear_all()]
            server_s = sum(backend_cpu_s(pid) for pid in pids) - before
        tell_all()
        for proc in procs:
            proc.wait()
        if sum(int(outcome[0]) for outcome in outcomes) != jobs:
            raise RuntimeError(f"{src}: not every job was acked once: {outcomes}")
        took = max(float(o[2]) for o in outcomes) - min(float(o[1]) for o in outcomes)
        client_s = sum(float(o[3]) for o in outcomes)
        return jobs / took, server_s * 1e6 / jobs, client_s * 1e6 / jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", required=True, help="the commit to compare this checkout with")
    parser.add_argument("--jobs", type=int, default=30_000, help="jobs per row (default 30,000)")
    parser.add_argument("--batch", type=int, default=100, help="jobs per call (default 100)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker processes")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the two taking turns (default 5)")
    args = parser.parse_args()

    from jobqueue.teaching.postgres_server import database_url

    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as scratch:
        before_tree = Path(scratch) / "before"
        subprocess.run(
            ["git", "-C", str(here), "worktree", "add", "--quiet", "--detach", str(before_tree), args.before],
            check=True,
        )
        try:
            trees = {"before": str(before_tree / "src"), "after": str(here / "src")}
            server = database_url()
            samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
            for number in range(args.rounds):
                for workers in args.workers:
                    order = list(trees.items()) if number % 2 == 0 else list(trees.items())[::-1]
                    for name, src in order:
                        row = one_row(server, src, args.jobs, args.batch, workers)
                        samples.setdefault((name, workers), []).append(row)
        finally:
            subprocess.run(
                ["git", "-C", str(here), "worktree", "remove", "--force", str(before_tree)], check=True
            )
    print(f"PostgresQueue at {args.before} (before) and this checkout (after), batch {args.batch}, medians")
    print(f"{'workers':>7}  {'measure':<24} {'before':>9} {'after':>9}  after/before")
    for workers in args.workers:
        for index, measure in enumerate(("jobs/s", "server CPU us per job", "client CPU us per job")):
            before = statistics.median(sample[index] for sample in samples["before", workers])
            after = statistics.median(sample[index] for sample in samples["after", workers])
            print(f"{workers:>7}  {measure:<24} {before:>9.1f} {after:>9.1f}  {after / before:.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        url, batch, worker, jobs, workers = sys.argv[2], *map(int, sys.argv[3:7])
        child(url, batch, list(range(jobs))[worker::workers])
    else:
        main()
