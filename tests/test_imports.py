"""Each database's driver is loaded only by the processes that use that database.

A worker on PostgreSQL starts as many processes as a deployment wants, and each pays for
its imports: DuckDB was a third of ``import jobqueue.cli`` (benchmarks/postgres_workers.py
counts the processes' start in its seconds). And ``import jobqueue`` must work for a DuckDB
course without psycopg. That benchmark's own module, which every worker process it starts
imports, must not load the peer queues either.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from waiting import HANG_GUARD_S


def loaded_after(code: str) -> set[str]:
    """The top-level modules of the two drivers that a fresh interpreter has loaded after ``code``."""
    drivers = "sorted({'duckdb', 'psycopg'} & set(sys.modules))"
    script = f"{code}\nimport json, sys\nprint(json.dumps({drivers}))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=HANG_GUARD_S
    ).stdout
    return set(json.loads(out))


def test_a_postgresql_worker_process_never_loads_duckdb() -> None:
    code = (
        "import jobqueue as jq, jobqueue.cli, jobqueue.outbox, jobqueue.idempotency, jobqueue.db\n"
        "from jobqueue.backends.postgres import PostgresQueue\n"
        "assert jq.PostgresQueue is PostgresQueue"
    )
    assert loaded_after(code) == {"psycopg"}


def test_import_jobqueue_loads_no_driver_and_durable_queue_loads_duckdb_on_first_use() -> None:
    assert loaded_after("import jobqueue, jobqueue.cli") == set()
    code = "import jobqueue as jq\nfrom jobqueue import DurableQueue\nassert jq.DurableQueue is DurableQueue"
    assert loaded_after(code) == {"duckdb"}


def test_the_benchmarks_jobqueue_worker_processes_load_no_peer_queue() -> None:
    """benchmarks/postgres_workers.py times worker processes from their start, imports included.

    Each worker process of the three queues imports that module for its handlers, with the
    row's database named in its environment; procrastinate's app, which only procrastinate's
    worker asks for, must be made then and not at import: before, jobqueue's and pgqueuer's
    processes loaded procrastinate too (about 37 ms of CPU each, counted as theirs).
    """
    benchmarks = Path(__file__).resolve().parent.parent / "benchmarks"
    script = (
        f"import sys; sys.path.insert(0, {str(benchmarks)!r})\n"
        "import postgres_workers\n"
        "postgres_workers.jobqueue_handlers\n"
        "import json; print(json.dumps(sorted({'procrastinate', 'pgqueuer'} & set(sys.modules))))"
    )
    env = os.environ | {"JOBQUEUE_BENCH_WORKERS_URL": "postgresql://nobody@127.0.0.1:1/none"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=HANG_GUARD_S,
    ).stdout
    assert json.loads(out) == []
