import duckdb
import pytest

from jobqueue import db
from jobqueue.errors import TransactionAbortedError


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = db.connect()
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    return con


def rows(con: duckdb.DuckDBPyConnection) -> list[tuple[int]]:
    return con.execute("SELECT id FROM t ORDER BY id").fetchall()


def test_connect_sets_utc_and_no_progress_bar() -> None:
    con = db.connect()
    assert con.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
    assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)


def test_transaction_commits_the_block(con: duckdb.DuckDBPyConnection) -> None:
    with db.transaction(con):
        con.execute("INSERT INTO t VALUES (1), (2)")
    assert rows(con) == [(1,), (2,)]


def test_an_exception_rolls_back_everything_and_propagates(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(RuntimeError, match="crash"), db.transaction(con):
        con.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("crash")
    assert rows(con) == []
    with db.transaction(con):  # the connection is usable again
        con.execute("INSERT INTO t VALUES (3)")
    assert rows(con) == [(3,)]


def test_a_swallowed_failed_statement_is_not_committed_silently(con: duckdb.DuckDBPyConnection) -> None:
    # DuckDB's own COMMIT after a failed statement discards the transaction without a word.
    with pytest.raises(TransactionAbortedError), db.transaction(con):
        con.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO t VALUES (1)")
    assert rows(con) == []
    with db.transaction(con):
        con.execute("INSERT INTO t VALUES (2)")
    assert rows(con) == [(2,)]


def test_plain_duckdb_commit_after_a_failed_statement_loses_the_write(con: duckdb.DuckDBPyConnection) -> None:
    # Pins the DuckDB behaviour the helper guards against; if DuckDB changes, revisit db.transaction.
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(duckdb.ConstraintException):
        con.execute("INSERT INTO t VALUES (1)")
    con.execute("COMMIT")
    assert rows(con) == []
