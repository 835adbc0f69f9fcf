"""The PostgreSQL server the course and the tests use (jobqueue.teaching.postgres_server)."""

import os
import subprocess
import sys

import pytest

from jobqueue.teaching import postgres_server


def test_the_server_runs_skip_locked(pg_conninfo: str) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo) as con:
        con.execute("CREATE TABLE t (id int PRIMARY KEY)")
        con.execute("INSERT INTO t SELECT generate_series(1, 3)")
        con.commit()
        with psycopg.connect(pg_conninfo) as other:
            held = other.execute("SELECT id FROM t ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED").fetchall()
            free = con.execute("SELECT id FROM t ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED").fetchall()
        assert (held, free) == ([(1,)], [(2,)])


def test_each_test_gets_its_own_empty_database(pg_url: str, pg_conninfo: str) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo) as con:
        name = con.execute("SELECT current_database()").fetchone()
        tables = con.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert name is not None and name[0].startswith("jobqueue_test_")
    assert tables == (0,)


@pytest.mark.skipif(bool(os.environ.get(postgres_server.ENV_VAR)), reason="a server of your own is in use")
def test_the_local_server_is_postgresql_18_on_a_socket_and_shared_with_subprocesses(pg_url: str) -> None:
    import psycopg

    assert pg_url.startswith("postgresql://") and "host=/" in pg_url  # a Unix socket, no TCP
    with psycopg.connect(pg_url) as con:
        version = con.execute("SHOW server_version_num").fetchone()
        listen = con.execute("SHOW listen_addresses").fetchone()
    assert version is not None and int(version[0]) // 10000 == 18
    assert listen == ("",)
    code = "from jobqueue.teaching.postgres_server import database_url; print(database_url())"
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True
    )
    assert (child.returncode, child.stderr, child.stdout.strip()) == (0, "", pg_url)


def test_the_local_server_wants_its_superusers_password(pg_url: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if os.environ.get(postgres_server.ENV_VAR):
        pytest.skip("the server named by JOBQUEUE_DATABASE_URL keeps its own rules")
    password = (postgres_server.course_folder() / ".postgres" / "password").read_text().strip()
    assert conninfo_to_dict(pg_url)["password"] == password
    mode = (postgres_server.course_folder() / ".postgres" / "password").stat().st_mode & 0o777
    assert mode == 0o600  # the course's own user reads it, and no one else
    with psycopg.connect(pg_url) as con:  # random passwords: one hashing round, fast connections
        assert con.execute("SHOW scram_iterations").fetchone() == ("1",)
    for guess in ("", "postgres", password[:-1]):
        with pytest.raises(psycopg.OperationalError, match=r"password authentication failed|no password"):
            psycopg.connect(make_conninfo(pg_url, password=guess)).close()


def test_the_environment_variable_names_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(postgres_server.ENV_VAR, "postgresql://app@db.example:5433/shop")
    assert postgres_server.database_url() == "postgresql://app@db.example:5433/shop"


def test_with_database_keeps_the_server_and_changes_the_database() -> None:
    assert (
        postgres_server.with_database("postgresql://postgres:@/postgres?host=/tmp/x", "other")
        == "postgresql://postgres:@/other?host=/tmp/x"
    )
    from psycopg.conninfo import conninfo_to_dict

    other = postgres_server.with_database("host=db port=5433 dbname=shop", "other")
    assert conninfo_to_dict(other) == {"host": "db", "port": "5433", "dbname": "other"}


def test_scratch_database_is_fresh_and_dropped_afterwards(pg_url: str) -> None:
    import psycopg
    from psycopg import sql

    name = f"scratch_{os.getpid()}"
    with psycopg.connect(postgres_server.with_database(pg_url, "postgres"), autocommit=True) as admin:
        # a database left over from a kernel that died
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(postgres_server.with_database(pg_url, name), autocommit=True) as old:
            old.execute("CREATE TABLE stale (n int)")
        with postgres_server.scratch_database(name) as url, psycopg.connect(url) as con:
            tables = con.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'stale'").fetchone()
            assert tables == (0,), "the left-over database was replaced by an empty one"
        exists = admin.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone()
    assert exists == (0,)
