"""Transactional outbox: save a change and the jobs it causes in one transaction, then relay.

Saving an order and then enqueueing its receipt job are two writes to two systems, and no
transaction spans both: if the queue is unreachable after the order is saved, the job is
lost (the "dual write" problem). The outbox makes the job a row of the same database,
written by :func:`add_message` in the *same* transaction as the change, so both are saved
or neither is (the course's example: :func:`jobqueue.examples.shop_db.save_order`). A
:class:`Relay` then publishes the unsent rows and marks each sent only after its publish
succeeded. The pattern is Chris Richardson's "transactional outbox" (microservices.io);
Debezium's outbox router relays by reading the database's log instead of polling. This
module owns only the ``outbox`` table.

The relay is at-least-once: a crash between publishing and marking publishes the row
again, with the same job id (``"outbox-17"``, :func:`outbox_job_id`), which
:meth:`jobqueue.backends.memory.JobQueue.enqueue` ignores while it holds the job: until the
job is acked, or, with a unique window (:func:`publisher`'s ``unique_for_s``), that long
after it finished. Without a window, a repeat after the ack is a new job: a relay that
crashed and came back minutes later runs the job again. It selects
``WHERE sent_at IS NULL`` on every run, never "ids above the last one sent": a sequence
hands out ids at insert, but transactions commit in any order, so a *lower* id can
become visible after a higher one was published.

Concurrency. On PostgreSQL (a psycopg connection, lesson 12) relays share one outbox: each
run selects its batch ``WHERE sent_at IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP
LOCKED`` in one transaction, publishes the rows, marks the published ones sent and
commits. A second relay skips the rows the first has locked and takes the next ones, and
once the first commits, the rows it marked no longer match ``sent_at IS NULL``: two
relays at once publish each row once. The locks are held while the batch is published,
so keep ``publish`` quick (it enqueues; it does not run the job). DuckDB (2.0.1,
measured) has no such clause (a parser error), and lets only one process open a file
read-write (a second fails with "Could not set lock on file"): the
relay runs inside the application's process, one per file, and goes faster with bigger
batches, not more relays. Within the process, transactions are optimistic: an ``UPDATE``
of a row that another open (or since committed) transaction updated fails with
``duckdb.TransactionException: Conflict on update!``; :func:`mark_sent` rolls back,
pauses (:data:`Pause`) and runs again, a bounded number of times, and the rerun finds the
row marked and changes nothing. Every ``UPDATE`` of the outbox has the same plain form
(no ``RETURNING``): on a table with a primary key, DuckDB 2.0.1 missed the conflict
between an ``UPDATE ... RETURNING`` and a plain one. Two relays may both publish a row (a
repeated job id, never a lost row); each marks only what it published, so correctness
does not rest on the conflict check.

Introduced in lesson 08.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jobqueue import db
from jobqueue.backends.contract import check_unique_for_s
from jobqueue.clock import Clock
from jobqueue.db import DEFAULT_CONFLICT_ATTEMPTS, Connection
from jobqueue.errors import InvalidSettingError, UnknownJobTypeError, describe_error
from jobqueue.job import JobType, check_count, check_positive_seconds

if TYPE_CHECKING:
    import duckdb

P = TypeVar("P")

JOB_ID_PREFIX = "outbox-"
"""Prefix of the job id a row is published with: row 17 becomes job ``"outbox-17"``."""

DEFAULT_BATCH_SIZE = 100
"""Rows a :class:`Relay` reads per run, at most."""

DEFAULT_RETENTION_S = 7 * 24 * 60 * 60.0
"""How long sent rows are kept before :func:`delete_sent` removes them: 7 days, in seconds."""

SCHEMA = (
    "CREATE SEQUENCE IF NOT EXISTS outbox_id_seq START 1",
    "CREATE TABLE IF NOT EXISTS outbox ("
    " id BIGINT PRIMARY KEY DEFAULT nextval('outbox_id_seq'), type VARCHAR NOT NULL,"
    " payload JSON NOT NULL, created_at DOUBLE PRECISION NOT NULL, sent_at DOUBLE PRECISION)",
)
"""The ``outbox`` and its id sequence. Times are seconds from a
:class:`~jobqueue.clock.Clock`; ``sent_at`` is ``NULL`` until the row is published. The
sequence never hands out an id twice (not even after :func:`delete_sent`), so a job id
``"outbox-N"`` always means the same row."""

CONFLICT_PAUSE_S = 0.001
"""Real time :func:`mark_sent` waits after its first conflicted attempt, in seconds (1 ms),
doubling after each further one (1, 2, 4, 8 ms): time for the other transaction to end."""

Pause = Callable[[float], None]
"""Waits that many seconds of *real* time (default :func:`time.sleep`), not a Clock's: the
pause lets another thread's transaction end, which needs real time to pass (a
:class:`~jobqueue.clock.ManualClock` advancing would not), and it reads no time (``sent_at``
comes from the Clock). Tests that stage the conflict themselves pass a no-op."""

OnConflict = Callable[[int, Exception], object]
"""Called with the attempt number (1-based) and the exception after each conflicted attempt
of :func:`mark_sent` but the last, before the pause (for logging)."""

_INSERT = "INSERT INTO outbox (type, payload, created_at) VALUES (?, ?, ?) RETURNING id"
_SELECT = "SELECT id, type, CAST(payload AS VARCHAR), created_at, sent_at FROM outbox"  # JSON as text
_CLAIM = _SELECT + " WHERE sent_at IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED"
_MARK_ALL_SENT = "UPDATE outbox SET sent_at = ? WHERE id = ANY(?)"
_MARK_SENT = "UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL"
_DELETE_SENT = "DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at <= ?"


@dataclass(frozen=True, kw_only=True)
class OutboxMessage:
    """One row of the outbox: a job waiting to be published, or already published.

    Attributes:
        id: the row id, from the sequence ``outbox_id_seq``.
        type: the :attr:`JobType.name <jobqueue.job.JobType.name>` of the job.
        payload: the payload as JSON text.
        created_at: when the row was written, in seconds.
        sent_at: when the relay marked it published, in seconds; ``None`` until then.

    Introduced in lesson 08.
    """

    id: int
    type: str
    payload: str
    created_at: float
    sent_at: float | None = None

    @property
    def job_id(self) -> str:
        """The id the row is published with, ``"outbox-<id>"``."""
        return outbox_job_id(self.id)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> OutboxMessage:
        """Build a message from a row ``(id, type, payload, created_at, sent_at)``."""
        id_, type_, payload, created_at, sent_at = row
        return cls(id=id_, type=type_, payload=payload, created_at=created_at, sent_at=sent_at)


Publish = Callable[[OutboxMessage], object]
"""Hands one outbox message to the queue; raises if it could not (queue unreachable...)."""


class Enqueuer(Protocol):
    """Anything with :meth:`JobQueue.enqueue <jobqueue.backends.memory.JobQueue.enqueue>`'s signature."""

    def enqueue(
        self, job_type: JobType[P], payload: P, *, id: str | None = None, unique_for_s: float | None = None
    ) -> object:
        """Add a job, or ignore it if ``id`` is held (by a job, or ``unique_for_s`` after one finished)."""
        ...


def outbox_job_id(outbox_id: int) -> str:
    """The job id of outbox row ``outbox_id``: ``outbox_job_id(17) == "outbox-17"``.

    Introduced in lesson 08.
    """
    return f"{JOB_ID_PREFIX}{outbox_id}"


def create_tables(con: Connection) -> None:
    """Create ``outbox`` and its sequence ``outbox_id_seq`` if they do not exist; nothing else.

    Introduced in lesson 08.
    """
    with db.transaction(con):
        for statement in SCHEMA:
            db.fetch(con, statement)


def add_message(con: Connection, job_type: JobType[P], payload: P, clock: Clock) -> int:
    """Insert a job for ``job_type`` into the outbox and return its row id.

    One statement and no transaction of its own: call it inside the same
    ``with jobqueue.db.transaction(con):`` as the change that causes the job. That is the
    whole point: the change and the job are committed together or not at all.

    Args:
        con: the connection whose transaction the row joins.
        job_type: the job's type; its name is stored in ``type``.
        payload: an instance of ``job_type.payload_type``, stored as JSON.
        clock: where ``created_at`` (seconds) comes from.

    Raises:
        PayloadError: if the payload is of the wrong class or not JSON-serialisable;
            nothing is inserted.

    Introduced in lesson 08.
    """
    rows = db.fetch(con, _INSERT, [job_type.name, job_type.dump(payload), clock.now()])
    return int(rows[0][0])


def messages(con: Connection) -> list[OutboxMessage]:
    """Every row of the outbox (committed), sent or not, in id order.

    Introduced in lesson 08.
    """
    rows = db.fetch(con, _SELECT + " ORDER BY id")
    return [OutboxMessage.from_row(row) for row in rows]


def unsent(con: Connection, *, limit: int = DEFAULT_BATCH_SIZE) -> list[OutboxMessage]:
    """Up to ``limit`` committed rows not yet published (``sent_at IS NULL``), lowest id first.

    Raises:
        InvalidSettingError: if ``limit`` is not an int >= 1.

    Introduced in lesson 08.
    """
    check_count("limit", limit)
    rows = db.fetch(con, _SELECT + " WHERE sent_at IS NULL ORDER BY id LIMIT ?", [limit])
    return [OutboxMessage.from_row(row) for row in rows]


def mark_sent(
    con: Connection,
    outbox_id: int,
    clock: Clock,
    *,
    max_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
    on_conflict: OnConflict | None = None,
    pause: Pause = time.sleep,
) -> bool:
    """Set ``sent_at = clock.now()`` on row ``outbox_id`` if it is unsent, in its own transaction.

    On a write conflict with another transaction (``duckdb.TransactionException`` saying
    "Conflict", at the ``UPDATE``) it rolls back, pauses :data:`CONFLICT_PAUSE_S` (doubling
    each time) and runs the transaction again, up to ``max_attempts`` times in all. On
    PostgreSQL a second ``UPDATE`` of the row waits for the first to commit and then finds
    it marked; only a serialization failure or a deadlock is run again.

    Args:
        con: the connection to use; give each thread its own (``con.cursor()`` on DuckDB).
        outbox_id: the row to mark.
        clock: where ``sent_at`` (seconds) comes from.
        max_attempts: runs of the transaction when it meets conflicts (>= 1, default 5).
        on_conflict: see :data:`OnConflict`.
        pause: waits between conflicted runs, in real seconds (see :data:`Pause`).

    Returns:
        ``True`` if this call marked the row, ``False`` if it was already marked (or absent).

    Raises:
        InvalidSettingError: if ``max_attempts`` is not an int >= 1.
        duckdb.TransactionException: if the conflict persists after ``max_attempts``
            runs (the row stays unsent and will be published again), or for any other
            transaction error, which is not retried. On PostgreSQL, the conflicts of
            :attr:`jobqueue.db.Dialect.conflicts` after ``max_attempts`` runs.

    Introduced in lesson 08.
    """
    check_count("max_attempts", max_attempts)
    conflicts = db.dialect(con).conflicts
    for attempt in range(1, max_attempts + 1):
        try:
            with db.transaction(con):
                changed = db.count(con, _MARK_SENT, [clock.now(), outbox_id])
            return changed > 0
        except conflicts as exc:
            if not _is_conflict(exc) or attempt == max_attempts:
                raise
            if on_conflict is not None:
                on_conflict(attempt, exc)
            pause(CONFLICT_PAUSE_S * 2 ** (attempt - 1))
    raise AssertionError("unreachable: the loop returns or raises")


def _is_conflict(exc: Exception) -> bool:
    """Whether a failed mark met another writer: DuckDB says "Conflict"; PostgreSQL's are all."""
    duckdb = sys.modules.get("duckdb")  # loaded if exc is DuckDB's: a PostgreSQL process never loads it
    return (
        duckdb is None
        or not isinstance(exc, duckdb.Error)
        or (isinstance(exc, duckdb.TransactionException) and "Conflict" in str(exc))
    )


class Relay:
    """Publishes the outbox's unsent rows to a queue, in id order, then marks them sent.

    Each run reads up to ``batch_size`` unsent rows (:func:`unsent`, every time) and, one
    at a time, calls ``publish``, then :func:`mark_sent`: a row is marked only after its
    publish returned, so a crash in between publishes it again (at-least-once).

    On PostgreSQL a run is one transaction instead: it locks its batch with ``FOR UPDATE
    SKIP LOCKED`` (rows another relay holds are skipped), publishes them one at a time,
    marks the published ones in one ``UPDATE`` and commits; a crash before the commit
    leaves them all unsent, to be published again. Any number of relays, in any
    processes, can run at once.

    When ``publish`` raises (queue unreachable...), the run **stops**: that row and the
    rest stay unsent for the next run, and :attr:`last_error` says why. Stopping rather
    than skipping keeps id order and does not hammer a queue that is down; the cost is
    that a row that can never be published (an unregistered job type) holds up the rows
    behind it until fixed, so alert on :attr:`last_error`.

    Args:
        con: the connection to read and mark with: DuckDB (in a thread of its own, a
            cursor) or PostgreSQL (a psycopg connection with ``autocommit=True``).
        publish: hands one message to the queue (see :func:`publisher`); any
            :class:`Exception` it raises counts as "not published".
        clock: where ``sent_at`` (seconds) comes from.
        batch_size: rows read per run, at most (>= 1, default 100).
        max_attempts: runs of each mark's transaction on write conflicts (>= 1).
        on_conflict: passed to :func:`mark_sent`.
        pause: passed to :func:`mark_sent` (real time; see :data:`Pause`).

    Raises:
        InvalidSettingError: if ``publish`` is not callable, or ``batch_size`` or
            ``max_attempts`` is not an int >= 1.

    Introduced in lesson 08.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        publish: Publish,
        *,
        clock: Clock,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
        on_conflict: OnConflict | None = None,
        pause: Pause = time.sleep,
    ) -> None:
        if not callable(publish):
            raise InvalidSettingError(f"publish must be callable, got {publish!r}")
        self.con = con
        self.clock = clock
        self._skip_locked = db.dialect(con).skip_locked
        self.batch_size = check_count("batch_size", batch_size)
        self.max_attempts = check_count("max_attempts", max_attempts)
        self._publish = publish
        self._mark = partial(mark_sent, max_attempts=max_attempts, on_conflict=on_conflict, pause=pause)
        self.published = 0
        """Rows published by this relay so far (repeats included)."""
        self.last_error: str | None = None
        """Why the last run stopped early (``"outbox-3: ErrorClass: message"``), or ``None``."""

    def run_once(self) -> int:
        """Publish up to :attr:`batch_size` unsent rows, lowest id first; return how many.

        Returns:
            Rows published and marked in this run (0 if none was unsent or the first publish failed).

        Raises:
            duckdb.TransactionException: if marking a published row still conflicts after
                :attr:`max_attempts` runs; the row stays unsent and is published again.
        """
        self.last_error = None
        if self._skip_locked:
            return self._run_locked()
        count = 0
        for message in unsent(self.con, limit=self.batch_size):
            if not self._publish_one(message):
                break
            self._mark(self.con, message.id, self.clock)
            count += 1
        return count

    def _run_locked(self) -> int:
        """One PostgreSQL run: lock a batch no other relay holds, publish, mark, commit."""
        sent: list[int] = []
        with db.transaction(self.con):
            for row in db.fetch(self.con, _CLAIM, [self.batch_size]):
                message = OutboxMessage.from_row(row)
                if not self._publish_one(message):
                    break
                sent.append(message.id)
            if sent:
                db.count(self.con, _MARK_ALL_SENT, [self.clock.now(), sent])
        return len(sent)

    def _publish_one(self, message: OutboxMessage) -> bool:
        """Publish ``message``; on failure record why in :attr:`last_error` and return ``False``."""
        try:
            self._publish(message)
        except Exception as exc:  # not published: leave this row and the rest unsent
            self.last_error = f"{message.job_id}: {describe_error(exc)}"
            return False
        self.published += 1
        return True

    def __repr__(self) -> str:
        return f"Relay(published={self.published}, last_error={self.last_error!r})"


def publisher(
    target: Enqueuer, job_types: Sequence[JobType[Any]], *, unique_for_s: float | None = None
) -> Publish:
    """A ``publish`` function for :class:`Relay` that enqueues into ``target``.

    Each message is enqueued as a job of the type named by its ``type``, with its payload
    validated on the way (:meth:`JobType.parse <jobqueue.job.JobType.parse>`) and its id
    :attr:`OutboxMessage.job_id`, so a message published twice while its job is held is
    one job.

    Args:
        target: a :class:`~jobqueue.backends.memory.JobQueue`, or anything with its ``enqueue``.
        job_types: the job types the outbox may hold, with distinct names.
        unique_for_s: keep each job's id held this many seconds after its job finished
            (``enqueue``'s unique window), so that a re-publish after the ack (a relay that
            crashed between publishing and marking, back later) adds nothing. Choose it
            longer than a relay can stay down; ``None`` (default): the id is free at the ack.

    Raises:
        InvalidSettingError: if ``job_types`` is empty or two share a name, or
            ``unique_for_s`` is not ``None`` or a finite number of seconds >= 0.

    The returned function raises :class:`~jobqueue.errors.UnknownJobTypeError` for a
    type not in ``job_types``, :class:`~jobqueue.errors.PayloadError` for a payload
    that does not validate, and whatever ``target.enqueue`` raises.

    Introduced in lesson 08.
    """
    by_name: dict[str, JobType[Any]] = {}
    for job_type in job_types:
        if job_type.name in by_name:
            raise InvalidSettingError(f"two job types are named {job_type.name!r}")
        by_name[job_type.name] = job_type
    if not by_name:
        raise InvalidSettingError(f"publisher needs at least one job type, got {job_types!r}")
    window = check_unique_for_s(unique_for_s)

    def publish(message: OutboxMessage) -> None:
        job_type = by_name.get(message.type)
        if job_type is None:
            raise UnknownJobTypeError(
                f"outbox row {message.id} has job type {message.type!r}; known: {sorted(by_name)}"
            )
        payload = job_type.parse(message.payload)
        if window is None:  # an enqueue of its own may take no window: ask for none
            target.enqueue(job_type, payload, id=message.job_id)
        else:
            target.enqueue(job_type, payload, id=message.job_id, unique_for_s=window)

    return publish


def delete_sent(con: Connection, clock: Clock, *, retention_s: float = DEFAULT_RETENTION_S) -> int:
    """Delete rows sent at least ``retention_s`` seconds ago; return how many went.

    Unsent rows are never deleted, however old. Sent rows are kept a while so you can
    see what was published and when.

    Args:
        con: the connection to use.
        clock: where "now" (seconds) comes from.
        retention_s: how long to keep a sent row, in seconds (> 0, default 7 days): a row
            goes once ``sent_at <= now - retention_s``.

    Raises:
        InvalidSettingError: if ``retention_s`` is not a finite number > 0; nothing is
            deleted.

    Introduced in lesson 08.
    """
    check_positive_seconds("retention_s", retention_s)
    with db.transaction(con):
        return db.count(con, _DELETE_SENT, [clock.now() - retention_s])
