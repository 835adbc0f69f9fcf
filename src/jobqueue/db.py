"""DuckDB connections and transactions, set up the way every part of the package needs.

Every DuckDB write in :mod:`jobqueue` goes through :func:`transaction`, which commits on
success and rolls back explicitly on any error. The explicit rollback matters: in DuckDB
a failed statement aborts the transaction, and a ``COMMIT`` after that raises nothing and
silently discards the whole transaction.

Introduced in lesson 07.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from jobqueue.errors import TransactionAbortedError

DEFAULT_CONFLICT_ATTEMPTS = 5
"""How many times a transaction that meets a write conflict is run, the first run included.

DuckDB's concurrency is optimistic: a transaction that collides with another fails and
must be run again. Used by :func:`jobqueue.idempotency.process_once` and
:func:`jobqueue.outbox.mark_sent`.
"""


def connect(path: str | Path = ":memory:") -> duckdb.DuckDBPyConnection:
    """Open a DuckDB database (in memory by default) with the course's settings.

    The progress bar is off (it would print a widget into notebooks on slow queries) and
    the time zone is UTC. Times are passed in from a :class:`~jobqueue.clock.Clock` as
    parameters, never taken from DuckDB's ``now()``.

    Raises:
        duckdb.IOException: if the file is held by another process (DuckDB allows one
            writing process per file).
    """
    con = duckdb.connect(str(path))
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the ``with`` block in one transaction: commit at the end, roll back on error.

    Yields:
        ``con``, inside ``BEGIN TRANSACTION``.

    Raises:
        TransactionAbortedError: if a statement failed inside the block and the block
            swallowed the exception: the transaction is rolled back, not committed.
        Exception: whatever the block raised, after an explicit ``ROLLBACK``.
    """
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
