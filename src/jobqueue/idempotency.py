"""Idempotent consumers: a message's effect happens once, however often it is delivered.

A queue delivers at least once (lesson 06), so a consumer sees some messages twice or
more. It makes the *effect* happen once by remembering which message ids it has
processed, in the table ``processed_messages``, and it must remember the id **in the same
transaction** as the effect: recorded after the effect in a separate step, a crash in
between credits twice on redelivery; recorded before it in a separate step, a crash in
between never credits at all. The pattern is the "idempotent consumer" of Hohpe and
Woolf's *Enterprise Integration Patterns* (also called an inbox table).

This module owns only ``processed_messages``; the effect is yours. The course's effect,
the shop's loyalty points, lives in :mod:`jobqueue.examples.shop_db`.

Concurrent deliveries, as measured with DuckDB 2.0.1 (two cursors of one connection, or
two threads each with its own cursor). DuckDB's transactions are optimistic and its
snapshot starts at a transaction's first statement, not at ``BEGIN``. The loser of a race
for the same message id fails with one of:

* ``duckdb.TransactionException: Conflict on update!`` at the effect's ``UPDATE`` (or
  upsert) of a row that the other, still open or since committed, transaction changed;
* ``duckdb.TransactionException: Failed to commit: PRIMARY KEY or UNIQUE constraint
  violation: duplicate key "..."`` at ``COMMIT``, when both inserted the id (each
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` returned a row: neither sees the other's
  uncommitted row) and the other committed first; the transaction is then already gone;
* ``duckdb.ConstraintException: Duplicate key ... violates primary key constraint`` at
  the ``INSERT ... ON CONFLICT DO NOTHING``, when the other transaction committed the id
  after this one's snapshot began (``DO NOTHING`` covers only rows it can see).

In every case the loser's whole transaction is undone, so :func:`process_once` simply
runs it again (a bounded number of times): the retry sees the committed id and skips.
If the other transaction committed before the loser's first statement, the insert returns
no row and the loser skips at once.

On PostgreSQL (a psycopg connection, lesson 12) the same statements run from any number
of processes. There the loser does not fail: its ``INSERT ... ON CONFLICT DO NOTHING``
waits on the winner's row lock until the winner commits, then returns no row, and the
loser skips; if the winner rolls back, the loser's insert goes ahead and it applies the
effect. Only at a stricter isolation level than the default READ COMMITTED (a
serialization failure) or in a deadlock is the transaction run again.

Fencing (:func:`apply_fenced`) guards an effect against a holder whose lease ran out
while it was paused: the effect carries a number that grows with each new holder (the
fencing token of the lease, :attr:`jobqueue.job.Job.fencing_token`), and the resource
refuses an effect older than the newest it has applied. The term and the idea are from
Martin Kleppmann's *Designing Data-Intensive Applications*, chapter 8 ("fencing tokens").
Introduced in lesson 06.

Introduced in lesson 07.
"""

from __future__ import annotations

from collections.abc import Callable

from jobqueue import db
from jobqueue.clock import Clock
from jobqueue.db import DEFAULT_CONFLICT_ATTEMPTS, C, Connection
from jobqueue.errors import InvalidSettingError
from jobqueue.job import check_count

Effect = Callable[[C], None]
"""A message's effect: writes made through the connection it is given (DuckDB or
PostgreSQL, the one passed to :func:`process_once`), inside the transaction that also
records the message id. Only writes to this database belong here."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS processed_messages"
    " (message_id VARCHAR PRIMARY KEY, processed_at DOUBLE PRECISION NOT NULL)",
)
"""The module's one table: the ids of processed messages, with the time (seconds, from a
:class:`~jobqueue.clock.Clock`) each was processed."""

FENCING_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fencing_tokens"
    " (resource VARCHAR PRIMARY KEY, token BIGINT NOT NULL, holder VARCHAR)",
)
"""The table of :func:`apply_fenced`: the highest fencing token applied to each resource, and
the holder that applied it (``NULL`` for a caller that names none)."""


def create_tables(con: Connection) -> None:
    """Create ``processed_messages`` if it does not exist yet.

    Only this module's table: the tables your effects write to are yours to create
    (the course's, with :func:`jobqueue.examples.shop_db.create_tables`).

    Introduced in lesson 07.
    """
    with db.transaction(con):
        for statement in SCHEMA:
            db.fetch(con, statement)


def process_once(
    con: C,
    message_id: str,
    effect: Effect[C],
    *,
    clock: Clock,
    max_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
) -> bool:
    """Apply ``effect`` for the first delivery of ``message_id``; skip every later one.

    In one transaction (:func:`jobqueue.db.transaction`), the id is inserted into
    ``processed_messages`` with ``INSERT ... ON CONFLICT DO NOTHING RETURNING``; only if
    a row comes back (the first delivery) is ``effect(con)`` run. Both are committed
    together or not at all: any error rolls back the id as well, so a redelivery tries
    again. A concurrent delivery of the same id that collides with this one (see the
    module docstring for DuckDB's exceptions) is retried, and then sees the id and skips.

    Args:
        con: the connection to use: DuckDB (give each thread its own, ``con.cursor()``)
            or PostgreSQL (a psycopg connection with ``autocommit=True``, one per thread).
        message_id: the message's unique id, a non-empty string (the queue's job id or
            the event id, never something computed from the delivery).
        effect: the writes to make, through the connection it is passed. It must not
            touch other systems: a retry after a collision runs it again. For an e-mail
            or a payment, pass ``message_id`` to that system as its idempotency key.
        clock: where ``processed_at`` (seconds) comes from.
        max_attempts: how many times to run the transaction when deliveries collide
            (>= 1, default 5).

    Returns:
        ``True`` if the effect ran (first delivery), ``False`` if the id was already
        recorded.

    Raises:
        InvalidSettingError: if ``message_id`` is empty or not a string, or
            ``max_attempts`` is not an int >= 1; nothing is written.
        TransactionAbortedError: if a statement inside ``effect`` failed and ``effect``
            swallowed the error; nothing is written (not even the id).
        duckdb.TransactionException | duckdb.ConstraintException: if deliveries still
            collide after ``max_attempts`` runs; nothing of this delivery is written.
            On PostgreSQL, ``psycopg.errors.SerializationFailure`` or
            ``psycopg.errors.DeadlockDetected`` after ``max_attempts`` runs.
        Exception: whatever ``effect`` raised, after rolling back the id and the effect.

    Introduced in lesson 07.
    """
    _check_message_id(message_id)
    check_count("max_attempts", max_attempts)

    def step() -> bool:
        if not _record(con, message_id, clock.now()):
            return False
        effect(con)
        return True

    return _retried(con, max_attempts, step)


def mark_processed(con: Connection, message_id: str, *, clock: Clock) -> bool:
    """Record ``message_id`` as processed, in its own transaction.

    For effects in other systems (an SMS, an e-mail), which no database transaction can
    undo: check :func:`is_processed`, call the other system, then record the id only
    after it accepted. A crash between the call and the record makes a rare duplicate on
    redelivery, never a loss; passing ``message_id`` as the other system's idempotency
    key removes the duplicate too.

    Returns:
        ``True`` if the id was new, ``False`` if it was already recorded.

    Raises:
        InvalidSettingError: if ``message_id`` is empty or not a string.

    Introduced in lesson 07.
    """
    _check_message_id(message_id)
    with db.transaction(con):
        return _record(con, message_id, clock.now())


def is_processed(con: Connection, message_id: str) -> bool:
    """Whether ``message_id`` is recorded in ``processed_messages`` (committed).

    Raises:
        InvalidSettingError: if ``message_id`` is empty or not a string.

    Introduced in lesson 07.
    """
    _check_message_id(message_id)
    rows = db.fetch(con, "SELECT count(*) FROM processed_messages WHERE message_id = ?", [message_id])
    return bool(rows[0][0] > 0)


def _record(con: Connection, message_id: str, now_s: float) -> bool:
    """Insert the id inside the caller's transaction; ``True`` if it was new."""
    rows = db.fetch(
        con,
        "INSERT INTO processed_messages (message_id, processed_at) VALUES (?, ?)"
        " ON CONFLICT DO NOTHING RETURNING message_id",
        [message_id, now_s],
    )
    return len(rows) == 1


def _check_message_id(message_id: object) -> None:
    if not isinstance(message_id, str) or not message_id.strip():
        raise InvalidSettingError(f"message_id must be a non-empty string, got {message_id!r}")


def create_fencing_table(con: Connection) -> None:
    """Create ``fencing_tokens`` (:data:`FENCING_SCHEMA`) if it does not exist yet.

    Introduced in lesson 06.
    """
    with db.transaction(con):
        for statement in FENCING_SCHEMA:
            con.execute(statement)


def apply_fenced(
    con: C,
    resource: str,
    token: int,
    effect: Effect[C],
    *,
    holder: str | None = None,
    max_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
) -> bool:
    """Apply ``effect`` to ``resource`` unless an effect with a newer token was applied to it.

    In one transaction the highest token applied to ``resource`` is read from
    ``fencing_tokens``. A greater ``token`` wins: it becomes the highest, with its
    ``holder``, and ``effect(con)`` runs, all committed together. A lower one is refused.
    An equal one is let through only from the holder that applied it (the same holder
    writing again), and refused from another. A lease cannot stop a holder that was
    paused (a long garbage collection, a suspended VM) and wakes after its lease ran out
    and the job was claimed again; the resource can refuse its late effect.

    Args:
        con: the connection to use; the effect writes through it.
        resource: what the effect changes, e.g. ``"order-1001"``: a non-empty string.
        token: the fencing token, an int >= 0 that grows with each new holder: the
            lease's :attr:`~jobqueue.job.Job.fencing_token` (``lease.job.fencing_token``),
            which no queue hands out twice, even after a release or a replay; after a
            restart only the DuckDB and PostgreSQL queues go on from their stored counter
            (an in-memory ``JobQueue`` starts again at 1, below a token kept in a table
            that outlived it, so its effects would be refused).
        effect: the writes to make, through the connection it is passed.
        holder: who writes, e.g. the lease's token (``lease.token``); ``None`` for a
            caller that names none (all such callers count as one holder).
        max_attempts: how many times to run the transaction when writers collide
            (>= 1, default 5), as :func:`process_once` does.

    Returns:
        ``True`` if the effect ran, ``False`` if it was refused as older than one applied.

    Raises:
        InvalidSettingError: if ``resource`` is not a non-empty string, ``token`` is not
            an int >= 0, or ``holder`` is neither ``None`` nor a str; nothing is written.
        Exception: whatever ``effect`` raised, after rolling back the token and the effect.

    Introduced in lesson 06.
    """
    if not isinstance(resource, str) or not resource:
        raise InvalidSettingError(f"resource must be a non-empty string, got {resource!r}")
    check_count("token", token, least=0)
    if holder is not None and not isinstance(holder, str):
        raise InvalidSettingError(f"holder must be a str or None, got {holder!r}")
    check_count("max_attempts", max_attempts)

    def step() -> bool:
        found = db.fetch(con, "SELECT token, holder FROM fencing_tokens WHERE resource = ?", [resource])
        if found and not _fenced_wins(token, holder, *found[0]):
            return False
        if found:
            update = "UPDATE fencing_tokens SET token = ?, holder = ? WHERE resource = ?"
            db.count(con, update, [token, holder, resource])
        else:
            db.count(con, "INSERT INTO fencing_tokens VALUES (?, ?, ?)", [resource, token, holder])
        effect(con)
        return True

    return _retried(con, max_attempts, step)


def _fenced_wins(token: int, holder: str | None, applied: int, applied_by: str | None) -> bool:
    """Whether an effect of ``token`` from ``holder`` may follow one of ``applied`` by ``applied_by``.

    A greater token wins; an equal one only from the same holder (writing again).
    """
    return token > applied or (token == applied and holder == applied_by)


def _retried(con: Connection, max_attempts: int, step: Callable[[], bool]) -> bool:
    """Run ``step`` in one transaction of ``con``, again when it collides with another; its result.

    The transaction commits whatever ``step`` returns, and rolls back if it raises.

    Raises:
        Exception: a conflict of the database (:attr:`jobqueue.db.Dialect.conflicts`) from
            the last of ``max_attempts`` runs, or whatever ``step`` raised.
    """
    conflicts = db.dialect(con).conflicts
    for attempt in range(1, max_attempts + 1):
        try:
            with db.transaction(con):
                return step()
        except conflicts:
            if attempt == max_attempts:
                raise
    raise AssertionError("unreachable: the loop returns or raises")
