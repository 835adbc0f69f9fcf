"""PostgresQueue in odd set-ups: each refused with a jobqueue error that names the problem.

Issue 21, point 8, on the real server: a caller's connection with another row factory,
a URL that does not parse (its password never shown), no URL at all, tables that another
application made, a version record whose table is gone, and a role with too few
privileges. Nothing is stored and nobody else's table is touched; the command line prints
one line and exits 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from test_cli import HANDLERS

import jobqueue as jq
from jobqueue.cli import main
from jobqueue.testing.contract import PLAIN, Ping


def test_a_callers_dict_row_connection_gets_the_same_results(pg_conninfo: str) -> None:
    with jq.PostgresQueue(pg_conninfo) as queue, psycopg.connect(pg_conninfo, row_factory=dict_row) as con:
        job = queue.enqueue(PLAIN, Ping(1), id="ping-1", conn=con)
        assert job.id == "ping-1"
        [again, fresh] = queue.enqueue_batch(PLAIN, [Ping(1), Ping(2)], ids=["ping-1", "ping-2"], conn=con)
        assert (again.job.id, again.added) == ("ping-1", False)
        assert (fresh.job.id, fresh.added) == ("ping-2", True)
        [unnamed] = queue.enqueue_batch(PLAIN, [Ping(3)], conn=con)
        assert unnamed.job.id.startswith("job-") and unnamed.added
        con.commit()
    with jq.PostgresQueue(pg_conninfo) as queue:
        assert sorted(job.id for job in queue.jobs()) == sorted(["ping-1", "ping-2", unnamed.job.id])


def test_a_bad_url_is_refused_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://app:s3cret-pw@[::1/shop"
    with pytest.raises(jq.InvalidSettingError) as refused:
        jq.PostgresQueue(url)
    assert "s3cret-pw" not in str(refused.value) and "app:***@" in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__  # nor in a traceback
    assert main(["stats", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "s3cret-pw" not in err


def test_no_url_at_all_is_an_invalid_setting() -> None:
    with pytest.raises(jq.InvalidSettingError, match="None"):
        jq.PostgresQueue(None)  # type: ignore[arg-type]  # os.environ.get of an unset variable


def test_a_table_another_application_made_is_refused_and_left_alone(pg_conninfo: str) -> None:
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("CREATE TABLE jobqueue_jobs (name text)")
        con.execute("INSERT INTO jobqueue_jobs VALUES ('theirs')")
    with pytest.raises(jq.QueueSchemaError, match="jobqueue_jobs but no jobqueue_schema"):
        jq.PostgresQueue(pg_conninfo)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        assert con.execute("SELECT name FROM jobqueue_jobs").fetchall() == [("theirs",)]
        assert con.execute("SELECT to_regclass('jobqueue_schema')").fetchone() == (None,)


def test_a_version_record_whose_table_is_gone_is_refused_at_open(pg_conninfo: str) -> None:
    jq.PostgresQueue(pg_conninfo).close()
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("DROP TABLE jobqueue_jobs")
    with pytest.raises(jq.QueueSchemaError, match="jobqueue_jobs is gone"):
        jq.PostgresQueue(pg_conninfo)


@pytest.fixture
def reader(pg_conninfo: str) -> Iterator[str]:
    """URL of ``pg_conninfo``'s database as a role that may only SELECT the queue's tables."""
    role, password = f"jq_reader_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
    jq.PostgresQueue(pg_conninfo).close()  # the tables, made by their owner
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), password))
        con.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(sql.Identifier(role)))
    parts = urlsplit(pg_conninfo)
    host = parts.netloc.rpartition("@")[2]
    try:
        yield urlunsplit(parts._replace(netloc=f"{quote(role)}:{password}@{host}"))
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            con.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            con.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_role_without_the_privileges_it_needs_gets_one_named_error(
    reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with jq.PostgresQueue(reader) as queue:
        assert queue.jobs() == []  # reading is allowed
        with pytest.raises(jq.QueuePrivilegeError, match=r"permission denied for (table|sequence) jobqueue_"):
            queue.claim()
        with pytest.raises(jq.QueuePrivilegeError, match="SELECT, INSERT, UPDATE and DELETE"):
            queue.enqueue(PLAIN, Ping(1))
    assert main(["replay", reader, "--all"]) == 0  # no dead letters: nothing to write
    assert main(["worker", reader, "--handlers", HANDLERS, "--burst"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "permission denied" in err


def test_a_role_that_cannot_create_the_tables_is_told_so(pg_conninfo: str) -> None:
    role, password = f"jq_guest_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), password))
    parts = urlsplit(pg_conninfo)
    guest = urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.netloc.rpartition('@')[2]}"))
    try:
        with pytest.raises(jq.QueuePrivilegeError, match="permission denied for schema public"):
            jq.PostgresQueue(guest)
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            con.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
