"""The SQL files of the two database backends: named blocks, the same names for the same operations.

And their numbered migrations: DuckDB's here (PostgreSQL's step from 2 to 3 in
tests/test_postgres.py).
"""

from pathlib import Path

import duckdb
import pytest

from jobqueue import DurableQueue, ManualClock, QueueSchemaError
from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends import postgres as postgres_backend
from jobqueue.backends import sql
from jobqueue.testing.contract import PLAIN, Ping

SHARED = {
    "has_schema",
    "schema_version",
    "migration_2",
    "migration_3",
    "enqueue",
    "enqueue_fresh",
    "enqueue_one",
    "find",
    "claim",
    "ack",
    "holder",
    "retry",
    "bury",
    "bury_unreadable",
    "extend",
    "release",
    "replay",
    "discard",
    "get",
    "jobs",
    "dead_letters",
    "next_visible_at",
    "count",
    "metrics",
    "count_outcomes",
    "forget_outcomes",
}


def test_both_backends_name_every_operation_alike() -> None:
    assert set(duckdb_backend.SQL) >= SHARED
    assert set(postgres_backend.SQL) >= SHARED


def test_blocks_are_statements_without_their_leading_comments_or_holes() -> None:
    for statements in (duckdb_backend.SQL, postgres_backend.SQL):
        for name, text in statements.items():
            assert text and not text.startswith("--"), name
            assert "{job_columns}" not in text and "{dead_columns}" not in text, name


def test_blocks_leave_their_comments_out_and_keep_quoted_dashes_and_markers(tmp_path: Path) -> None:
    for statements in (duckdb_backend.SQL, postgres_backend.SQL):
        for name, text in statements.items():
            assert all(not line.lstrip().startswith("--") for line in text.splitlines()), name
    assert sql._statement("SELECT 'a -- b' AS x,  -- why\n  -- more\n  1 /* types */\n") == (
        "SELECT 'a -- b' AS x,\n  1 /* types */"
    )


def test_every_postgres_statement_is_short_enough_for_psycopg_to_cache_its_parse() -> None:
    # psycopg parses a statement's %(name)s placeholders on every execute unless it is at
    # most MAX_CACHED_STATEMENT_LENGTH long: the claim's comments once took it past that.
    from psycopg import _queries

    for name, text in postgres_backend.SQL.items():
        assert len(text.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, name


def test_an_unfilled_placeholder_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="job_columns"):
        sql.load("duckdb.sql", {})


def test_migrations_run_in_order_from_the_version_a_database_is_at() -> None:
    blocks = {"migration_10": "ten", "migration_2": "two", "migration_1": "one", "get": "g"}
    assert sql.migrations(blocks, 0) == ["one", "two", "ten"]
    assert sql.migrations(blocks, 2) == ["ten"]
    assert sql.migrations(blocks, 10) == []
    assert sql.latest_version(blocks) == 10
    assert (duckdb_backend.SCHEMA_VERSION, postgres_backend.SCHEMA_VERSION) == (11, 11)


def schema_version(path: Path) -> list[tuple[int]]:
    with duckdb.connect(str(path)) as con:
        return con.execute("SELECT version FROM jobqueue_schema").fetchall()


def test_a_lesson_11_file_is_migrated_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:  # the tables as lesson 11 first wrote them
        con.execute(duckdb_backend.SQL["migration_1"])
        con.execute(
            "INSERT INTO jobqueue_jobs (id, type, payload, attempts, max_attempts, base_s, cap_s, run_at,"
            " visible_at, serial) VALUES ('old-1', 'send_receipt', '{}', 0, 5, 1.0, 60.0, 10.0, 10.0, 1)"
        )
    with DurableQueue(path, clock=ManualClock(20)) as queue:
        [job] = queue.jobs()
        assert (job.id, job.priority, job.expires_at, job.leased_at) == ("old-1", 0, None, None)
        assert queue.claim() is not None
    assert schema_version(path) == [(duckdb_backend.SCHEMA_VERSION,)]


def test_a_file_from_before_versions_is_recorded_as_current(tmp_path: Path) -> None:
    path = tmp_path / "unversioned.duckdb"
    with DurableQueue(path, clock=ManualClock(0)) as queue:
        queue.enqueue(PLAIN, Ping(number=1), id="kept", priority=2)
    with duckdb.connect(str(path)) as con:  # as the file was before the tables had versions
        con.execute("DROP TABLE jobqueue_schema")
    with DurableQueue(path, clock=ManualClock(0)) as queue:
        assert [(job.id, job.priority) for job in queue.jobs()] == [("kept", 2)]
    assert schema_version(path) == [(duckdb_backend.SCHEMA_VERSION,)]


def test_a_file_of_a_newer_version_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "newer.duckdb"
    DurableQueue(path, clock=ManualClock(0)).close()
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE jobqueue_schema SET version = 99")
    reads = duckdb_backend.SCHEMA_VERSION
    with pytest.raises(QueueSchemaError, match=rf"newer.duckdb.*version 99.*reads version {reads}"):
        DurableQueue(path, clock=ManualClock(0))


def test_a_file_of_version_4_is_migrated_and_its_leases_get_fencing_tokens(tmp_path: Path) -> None:
    path = tmp_path / "v4.duckdb"
    clock = ManualClock(0)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(PLAIN, [Ping(number=1), Ping(number=2)], ids=["held", "waiting"])
        held = queue.claim()
    with duckdb.connect(str(path)) as con:  # back to the tables of version 4
        for table in ("jobqueue_jobs", "jobqueue_dead"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN fencing_token")
            con.execute(f"ALTER TABLE {table} DROP COLUMN enqueued_at")
        con.execute("DROP SEQUENCE jobqueue_fencing")
        con.execute("UPDATE jobqueue_schema SET version = 4")
    with DurableQueue(path, clock=clock) as queue:
        assert sorted((job.id, job.fencing_token) for job in queue.jobs()) == [("held", 0), ("waiting", 0)]
        assert held is not None
        queue.ack(held)  # a lease from before the migration still acks
        lease = queue.claim()
        assert lease is not None and lease.job.id == "waiting" and lease.job.fencing_token == 1
    assert schema_version(path) == [(duckdb_backend.SCHEMA_VERSION,)]


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_file_of_version_5_gets_enqueue_times_and_old_jobs_count_from_their_run_at(
    tmp_path: Path, cut_short: bool
) -> None:
    path = tmp_path / "v5.duckdb"
    clock = ManualClock(10)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(PLAIN, [Ping(number=1), Ping(number=2)], ids=["dead", "waiting"])
        doomed = queue.claim()
        assert doomed is not None and doomed.job.id == "dead"
        queue.fail(doomed, "ValueError: boom", permanent=True)
    with duckdb.connect(str(path)) as con:  # back to the tables of version 5
        if not cut_short:  # cut short: the columns were added, the version not yet recorded
            for table in ("jobqueue_jobs", "jobqueue_dead"):
                con.execute(f"ALTER TABLE {table} DROP COLUMN enqueued_at")
        con.execute("UPDATE jobqueue_schema SET version = 5")
    clock.advance(40)
    with DurableQueue(path, clock=clock) as queue:
        [job] = queue.jobs()
        [letter] = queue.dead_letters()
        if not cut_short:
            assert (job.enqueued_at, letter.job.enqueued_at) == (None, None)
        assert queue.metrics().oldest_enqueued_age_s == 40.0  # from its run_at, 10, or its enqueue
        fresh = queue.enqueue(PLAIN, Ping(number=3), id="fresh")
        assert fresh.enqueued_at == 50.0 == queue.jobs()[-1].enqueued_at
    assert schema_version(path) == [(duckdb_backend.SCHEMA_VERSION,)]


def test_a_new_file_refuses_a_null_priority(tmp_path: Path) -> None:
    # Migration 3 adds the priorities; DuckDB cannot add NOT NULL with a column, migration 4 does.
    path = tmp_path / "new.duckdb"
    DurableQueue(path, clock=ManualClock(0)).close()
    with duckdb.connect(str(path)) as con:
        for table in ("jobqueue_jobs", "jobqueue_dead"):
            nullable = con.execute(
                "SELECT is_nullable FROM information_schema.columns"
                " WHERE table_name = ? AND column_name = 'priority'",
                [table],
            ).fetchall()
            assert nullable == [("NO",)], table
