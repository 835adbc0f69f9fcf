"""Database connections and transactions, set up the way every part of the package needs.

Two databases run the course's SQL: DuckDB (in memory or a file, one process) and
PostgreSQL (through psycopg 3, any number of processes). The modules that run on both,
:mod:`jobqueue.idempotency`, :mod:`jobqueue.outbox` and :mod:`jobqueue.examples.shop_db`, write
each statement once, with ``?`` placeholders, and run it through :func:`fetch` or
:func:`count`; this module is the one place that knows how each driver takes it
(:class:`Dialect`).

Every write goes through :func:`transaction`, which commits on success and rolls back
explicitly on any error. The explicit rollback matters: in DuckDB a failed statement
aborts the transaction, and a ``COMMIT`` after that raises nothing and silently discards
the whole transaction. PostgreSQL does the same (its ``COMMIT`` of an aborted transaction
answers ``ROLLBACK``, and psycopg raises nothing), so both are checked.

Introduced in lesson 07; PostgreSQL in lesson 12.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from jobqueue.errors import InvalidSettingError, TransactionAbortedError

if TYPE_CHECKING:  # each driver is imported where a connection of its kind is first met
    import duckdb
    import psycopg

Connection: TypeAlias = "duckdb.DuckDBPyConnection | psycopg.Connection[Any]"
"""A DuckDB connection, or a psycopg 3 connection to PostgreSQL opened with
``autocommit=True`` (see :func:`transaction`)."""

C = TypeVar("C", bound="duckdb.DuckDBPyConnection | psycopg.Connection[Any]")
"""One of the two kinds of :data:`Connection`, the same one throughout a call."""

DEFAULT_CONFLICT_ATTEMPTS = 5
"""How many times a transaction that meets a write conflict is run, the first run included.

DuckDB's concurrency is optimistic: a transaction that collides with another fails and
must be run again. PostgreSQL's row locks make a colliding writer wait instead, except at
the stricter isolation levels (a serialization failure) or in a deadlock. Used by
:func:`jobqueue.idempotency.process_once` and :func:`jobqueue.outbox.mark_sent`.
"""


@dataclass(frozen=True)
class Dialect:
    """What differs between the two databases, for the statements this package shares.

    Attributes:
        name: ``"duckdb"`` or ``"postgresql"``.
        skip_locked: whether ``SELECT ... FOR UPDATE SKIP LOCKED`` exists (PostgreSQL;
            DuckDB 2.0 rejects it with a parser error), so that several workers or relays
            can each take rows the others have not locked.
        conflicts: the exceptions that mean "another transaction collided with this one;
            run it again": DuckDB's optimistic conflicts, PostgreSQL's serialization
            failures and deadlocks.

    Introduced in lesson 12.
    """

    name: str
    skip_locked: bool
    conflicts: tuple[type[Exception], ...]


def dialect(con: object) -> Dialect:
    """The :class:`Dialect` of ``con``: PostgreSQL for a psycopg 3 connection, else DuckDB.

    Anything but a psycopg connection is taken for DuckDB: a DuckDB connection or cursor,
    or an object that behaves like one (lesson 08's checks wrap a connection so that an
    ``INSERT`` fails on cue).

    Introduced in lesson 12.
    """
    return _postgresql() if _is_postgres(con) else _duckdb()


@cache
def _duckdb() -> Dialect:
    """DuckDB's dialect: ``?`` placeholders, no row locks, optimistic conflicts."""
    import duckdb  # only here: a process that works on PostgreSQL alone never loads DuckDB

    return Dialect(
        "duckdb", skip_locked=False, conflicts=(duckdb.TransactionException, duckdb.ConstraintException)
    )


@cache
def _postgresql() -> Dialect:
    import psycopg  # only here: psycopg is needed only by those who bring a PostgreSQL connection

    return Dialect(
        "postgresql",
        skip_locked=True,
        conflicts=(psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected),
    )


def _is_postgres(con: object) -> bool:
    if not type(con).__module__.startswith("psycopg"):
        return False  # psycopg is not imported for a DuckDB connection
    import psycopg

    return isinstance(con, psycopg.Connection)


def connect(path: str | Path = ":memory:") -> duckdb.DuckDBPyConnection:
    """Open a DuckDB database (in memory by default) with the course's settings.

    The progress bar is off (it would print a widget into notebooks on slow queries) and
    the time zone is UTC. Times are passed in from a :class:`~jobqueue.clock.Clock` as
    parameters, never taken from DuckDB's ``now()``.

    Raises:
        duckdb.IOException: if the file is held by another process (DuckDB allows one
            writing process per file).
    """
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")
    return con


@contextmanager
def transaction(con: C) -> Iterator[C]:
    """Run the ``with`` block in one transaction: commit at the end, roll back on error.

    On PostgreSQL this is psycopg's ``con.transaction()`` (a savepoint when nested), on
    a connection opened with ``psycopg.connect(url, autocommit=True)``: without
    autocommit, psycopg opens a transaction at the first statement and keeps it open,
    and a block inside it would commit nothing until the caller commits.

    Yields:
        ``con``, inside the transaction.

    Raises:
        TransactionAbortedError: if a statement failed inside the block and the block
            swallowed the exception: the transaction is rolled back, not committed.
        InvalidSettingError: if ``con`` is a psycopg connection without autocommit.
        Exception: whatever the block raised, after an explicit rollback.
    """
    if _is_postgres(con):
        with _postgres_transaction(cast("psycopg.Connection[Any]", con)):
            yield con
        return
    import duckdb  # imported by whoever opened this connection; here, not at the top, so
    # that a process on PostgreSQL alone never loads DuckDB

    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        try:
            con.execute("SELECT 1").fetchall()  # fails if a statement aborted the transaction
        except duckdb.TransactionException as exc:
            raise TransactionAbortedError(
                "a statement failed inside the transaction, so nothing was committed"
            ) from exc
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


@contextmanager
def _postgres_transaction(con: psycopg.Connection[Any]) -> Iterator[None]:
    """Psycopg's own transaction block, checked for autocommit and for an aborted transaction."""
    if not con.autocommit:
        raise InvalidSettingError(
            f"open the PostgreSQL connection with autocommit=True (psycopg.connect(url,"
            f" autocommit=True)), so that each transaction block commits; got {con!r}"
        )
    from psycopg.pq import TransactionStatus

    with con.transaction():
        yield
        if con.info.transaction_status == TransactionStatus.INERROR:  # COMMIT would roll back silently
            raise TransactionAbortedError(
                "a statement failed inside the transaction, so nothing was committed"
            )


def fetch(con: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement with ``?`` placeholders and return its rows (``[]`` if it has none).

    On PostgreSQL each ``?`` becomes psycopg's ``%s`` (the statements of this package
    hold no other ``?`` or ``%``); values always travel as parameters.

    Raises:
        duckdb.Error | psycopg.Error: whatever the database raised.
    """
    if not _is_postgres(con):
        return cast("duckdb.DuckDBPyConnection", con).execute(sql, params).fetchall()
    cursor = cast("psycopg.Connection[Any]", con).execute(sql.replace("?", "%s"), params)
    return cursor.fetchall() if cursor.description is not None else []


def count(con: Connection, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one ``UPDATE`` or ``DELETE`` with ``?`` placeholders; return how many rows it changed.

    DuckDB answers such a statement with one row holding the count; psycopg reports it as
    the cursor's ``rowcount``.

    Raises:
        duckdb.Error | psycopg.Error: whatever the database raised.
    """
    if not _is_postgres(con):
        return int(cast("duckdb.DuckDBPyConnection", con).execute(sql, params).fetchall()[0][0])
    return cast("psycopg.Connection[Any]", con).execute(sql.replace("?", "%s"), params).rowcount
