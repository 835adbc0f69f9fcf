"""Explicit migrations on PostgreSQL (issue 21, point 4).

A queue never migrates live tables as it opens (the first process of a deploy would
rebuild indexes under traffic): it refuses older tables, naming ``jobqueue migrate``.
:func:`migrate` changes them one step at a time, building indexes ``CONCURRENTLY``
outside any transaction, keeps every job, can run again after being cut short, and gives
up on a table lock it cannot get instead of queueing every claim behind it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

import jobqueue as jq
from jobqueue.backends import postgres, sql
from jobqueue.cli import main
from jobqueue.testing.contract import PLAIN, Ping

OLD_JOB = (
    "INSERT INTO jobqueue_jobs (id, type, payload, max_attempts, base_s, cap_s, run_at, visible_at)"
    " VALUES ('old-1', 'contract_ping', '{\"number\": 1}', 5, 1.0, 60.0, 0, 0)"
)


def make_version_2(conninfo: str) -> None:
    """Lesson 12's first tables (schema version 2), holding one waiting job."""
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.execute(postgres.SQL["migration_2"].encode())
        con.execute(OLD_JOB)


def test_the_plan_builds_and_drops_indexes_concurrently_each_alone() -> None:
    plan = postgres.migration_plan(2)
    assert [(step.version, step.index) for step in plan] == [
        (3, None),
        (3, "jobqueue_jobs_claim"),
        (3, "jobqueue_jobs_claim"),
        (3, None),
        (4, None),
        (4, None),
        (4, None),
        (5, None),
        (5, None),
        (5, "jobqueue_finished_at"),
        (5, None),
        (6, None),
        (6, None),
        (7, None),
        (7, "jobqueue_finished_cancelled"),
        (7, None),
        (8, None),
        (8, None),
        (8, None),
        (8, "jobqueue_held_until"),
        (8, None),
        (9, None),
        (9, None),
        (9, "jobqueue_jobs_queue_claim"),
        (9, None),
        (10, None),
        (10, None),
        (11, None),
        (11, "jobqueue_held_id_bytes"),
        (11, None),
        (11, None),
        (11, None),
        (11, "jobqueue_jobs_id_bytes"),
        (11, "jobqueue_jobs_dead"),
        (11, None),
        (11, None),
        (11, None),
        (11, "jobqueue_jobs_dead"),
        (11, None),
    ]
    assert plan[1].sql == "DROP INDEX CONCURRENTLY IF EXISTS jobqueue_jobs_claim"
    assert plan[2].sql.startswith("CREATE INDEX CONCURRENTLY IF NOT EXISTS jobqueue_jobs_claim ON")
    assert plan[3].sql == "UPDATE jobqueue_schema SET version = 3"  # recorded last
    unique = next(step for step in plan if step.index == "jobqueue_jobs_id_bytes")  # migration 11
    assert unique.sql.startswith("CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobqueue_jobs_id_bytes ON")
    assert postgres.migration_plan(postgres.SCHEMA_VERSION) == []
    assert sql.numbered_migrations(postgres.SQL, 0)[-1][0] == postgres.SCHEMA_VERSION


def steps_after(version: int) -> list[int]:
    """The numbers of the migrations that take tables of ``version`` to the current one."""
    return [number for number, _ in sql.numbered_migrations(postgres.SQL, version)]


def test_an_older_schema_is_refused_until_migrated_then_keeps_its_jobs(
    pg_conninfo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make_version_2(pg_conninfo)
    with pytest.raises(jq.QueueSchemaError, match=r"schema version 2.*jobqueue migrate URL"):
        jq.PostgresQueue(pg_conninfo)
    assert main(["stats", pg_conninfo]) == 1  # the CLI too: one line, the command to run
    assert "jobqueue migrate" in capsys.readouterr().err
    assert main(["migrate", pg_conninfo]) == 0
    assert f"schema version {postgres.SCHEMA_VERSION}" in capsys.readouterr().out
    with jq.PostgresQueue(pg_conninfo, clock=jq.ManualClock()) as queue:
        [job] = queue.jobs()
        assert (job.id, job.priority, job.expires_at) == ("old-1", 0, None)
    with psycopg.connect(pg_conninfo) as con:
        [(definition,)] = con.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index JOIN pg_class ON indexrelid = pg_class.oid"
            " WHERE relname = 'jobqueue_jobs_claim' AND indisvalid"
        ).fetchall()
    assert "priority DESC, visible_at, serial" in definition
    assert main(["migrate", pg_conninfo]) == 0
    assert "already" in capsys.readouterr().out


def test_a_migration_cut_short_runs_again_to_the_end(pg_conninfo: str) -> None:
    make_version_2(pg_conninfo)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # as if cut short after its first steps
        con.execute(postgres.migration_plan(2)[0].sql.encode())
        con.execute("DROP INDEX jobqueue_jobs_claim")
        con.execute("CREATE INDEX jobqueue_jobs_claim ON jobqueue_jobs (id)")  # stands in for an invalid one
        con.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'jobqueue_jobs_claim'::regclass"
        )
    assert postgres.migrate(pg_conninfo) == steps_after(2)
    with psycopg.connect(pg_conninfo) as con:
        [(definition, valid)] = con.execute(
            "SELECT pg_get_indexdef(indexrelid), indisvalid FROM pg_index"
            " WHERE indexrelid = 'jobqueue_jobs_claim'::regclass"
        ).fetchall()
    assert valid and "priority DESC" in definition


def test_the_enqueue_time_migration_runs_again_and_old_jobs_count_from_their_run_at(pg_conninfo: str) -> None:
    make_version_2(pg_conninfo)
    assert postgres.migrate(pg_conninfo) == steps_after(2)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # as if cut short before its version
        con.execute("UPDATE jobqueue_schema SET version = 4")
    assert postgres.migrate(pg_conninfo) == steps_after(4)
    with jq.PostgresQueue(pg_conninfo, clock=jq.ManualClock(30.0)) as queue:
        [job] = queue.jobs()
        assert (job.id, job.enqueued_at) == ("old-1", None)
        assert queue.metrics().oldest_enqueued_age_s == 30.0  # its run_at is 0


ID_COLLATIONS = (  # of each id column, and of each index on one
    "SELECT attrelid::regclass::text, collname FROM pg_attribute JOIN pg_collation"
    " ON pg_collation.oid = attcollation WHERE attname = 'id'"
    " AND attrelid IN ('jobqueue_jobs'::regclass, 'jobqueue_held'::regclass, 'jobqueue_finished'::regclass)"
    " UNION ALL SELECT indexrelid::regclass::text, collname"
    " FROM pg_index CROSS JOIN LATERAL unnest(indkey::int2[], indcollation::oid[]) AS key(attnum, coll)"
    " JOIN pg_attribute ON attrelid = indrelid AND pg_attribute.attnum = key.attnum AND attname = 'id'"
    " JOIN pg_collation ON pg_collation.oid = key.coll"
    " WHERE indrelid IN ('jobqueue_jobs'::regclass, 'jobqueue_held'::regclass) AND indisvalid"
    " ORDER BY 1"
)
BYTE_ORDER = [
    ("jobqueue_finished", "C"),
    ("jobqueue_held", "C"),
    ("jobqueue_held_pkey", "C"),
    ("jobqueue_jobs", "C"),
    ("jobqueue_jobs_dead", "C"),
    ("jobqueue_jobs_pkey", "C"),
]
VERSION_10_ROWS = (
    "INSERT INTO jobqueue_jobs (id, type, payload, max_attempts, base_s, cap_s, run_at, visible_at,"
    " died_at, last_error, unique_for_s)"
    " VALUES ('dead-1', 'contract_ping', '{\"number\": 4}', 5, 1.0, 60.0, 0, 0, 5.0, 'boom', 60.0)",
    "INSERT INTO jobqueue_held (id, type, payload, unique_for_s, held_until)"
    " VALUES ('dead-1', 'contract_ping', '{\"number\": 4}', 60.0, 'Infinity')",
)


def make_version_10(conninfo: str) -> None:
    """Tables of schema version 10: a waiting job, and a dead one whose id a unique window holds."""
    with psycopg.connect(conninfo, autocommit=True) as con:
        for number, step in sql.numbered_migrations(postgres.SQL, 0):
            if number <= 10:
                con.execute(step.encode())
        for statement in (OLD_JOB, *VERSION_10_ROWS):
            con.execute(statement)


def test_ids_compare_byte_by_byte_after_the_migration_and_in_new_tables(pg_conninfo: str) -> None:
    make_version_10(pg_conninfo)
    with psycopg.connect(pg_conninfo) as con:  # the database's own collation before
        assert ("jobqueue_jobs_pkey", "C") not in con.execute(ID_COLLATIONS).fetchall()
    assert postgres.migrate(pg_conninfo) == [11]
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        assert con.execute(ID_COLLATIONS).fetchall() == BYTE_ORDER
        pkey = con.execute(
            "SELECT conindid::regclass::text FROM pg_constraint WHERE conname = 'jobqueue_jobs_pkey'"
        ).fetchall()
        dead = con.execute("SELECT pg_get_indexdef('jobqueue_jobs_dead'::regclass)").fetchall()[0][0]
    assert pkey == [("jobqueue_jobs_pkey",)]
    assert "(died_at, id) WHERE (died_at IS NOT NULL)" in dead
    with jq.PostgresQueue(pg_conninfo, clock=jq.ManualClock()) as queue:
        assert queue.enqueue(PLAIN, Ping(number=2), id="old-1").payload == '{"number": 1}'  # held
        assert [job.id for job in queue.jobs()] == ["old-1"]  # kept, and the only one


def test_the_id_migration_cut_short_at_the_jobs_table_runs_again_and_keeps_everything(
    pg_conninfo: str,
) -> None:
    make_version_10(pg_conninfo)
    with psycopg.connect(pg_conninfo) as reader:
        reader.execute("SELECT count(*) FROM jobqueue_jobs")  # a transaction left open holds its lock
        with pytest.raises(jq.QueueUnavailableError, match=r"lock did not come within 0\.2 s"):
            postgres.migrate(pg_conninfo, lock_timeout_s=0.2)
        swapped = reader.execute(ID_COLLATIONS).fetchall()
    # the smaller tables were done in transactions of their own, jobqueue_jobs not
    assert [row for row in swapped if row[0].startswith(("jobqueue_finished", "jobqueue_held"))] == [
        ("jobqueue_finished", "C"),
        ("jobqueue_held", "C"),
        ("jobqueue_held_pkey", "C"),
    ]
    assert ("jobqueue_jobs", "C") not in swapped
    with psycopg.connect(pg_conninfo) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [(10,)]
    assert postgres.migrate(pg_conninfo) == [11]
    with psycopg.connect(pg_conninfo) as con:
        assert con.execute(ID_COLLATIONS).fetchall() == BYTE_ORDER
    with jq.PostgresQueue(pg_conninfo, clock=jq.ManualClock(100.0)) as queue:
        assert [job.id for job in queue.jobs()] == ["old-1"]
        [letter] = queue.dead_letters()
        assert (letter.job.id, letter.job.last_error) == ("dead-1", "boom")
        # its id is still held while it is dead: a repeat adds nothing
        assert queue.enqueue(PLAIN, Ping(number=5), id="dead-1", unique_for_s=60.0).payload == '{"number": 4}'
        assert len(queue) == 1


def test_a_migration_gives_up_on_a_lock_held_by_a_long_transaction(pg_conninfo: str) -> None:
    make_version_2(pg_conninfo)
    with psycopg.connect(pg_conninfo) as reader:
        reader.execute("SELECT count(*) FROM jobqueue_jobs")  # a transaction left open holds its lock
        with pytest.raises(jq.QueueUnavailableError, match=r"lock did not come within 0\.2 s"):
            postgres.migrate(pg_conninfo, lock_timeout_s=0.2)
    with psycopg.connect(pg_conninfo) as con:  # nothing of version 3 was recorded
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [(2,)]
    assert postgres.migrate(pg_conninfo) == steps_after(2)  # once it ended


def test_an_empty_database_is_made_current_by_a_queue_or_by_migrate(pg_conninfo: str) -> None:
    assert postgres.migrate(pg_conninfo) == steps_after(1)
    assert postgres.migrate(pg_conninfo) == []
    jq.PostgresQueue(pg_conninfo).close()
    with psycopg.connect(pg_conninfo) as con:
        assert con.execute(ID_COLLATIONS).fetchall() == BYTE_ORDER


def test_two_migrations_at_once_take_turns(pg_conninfo: str) -> None:
    make_version_2(pg_conninfo)
    results: list[list[int]] = []
    threads = [
        threading.Thread(target=lambda: results.append(postgres.migrate(pg_conninfo))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [[], steps_after(2)]


def test_migrate_on_a_duckdb_file_opens_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "shop.db"
    jq.DurableQueue(path).close()
    assert main(["migrate", str(path)]) == 0
    assert "current schema version" in capsys.readouterr().out
