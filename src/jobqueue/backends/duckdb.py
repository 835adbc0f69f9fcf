"""A durable job queue: the same leases, retries and dead letters, kept in a DuckDB file.

:class:`DurableQueue` keeps the promises of :class:`jobqueue.backends.memory.JobQueue` (the same
contract tests run against both) but every change is a committed DuckDB transaction, so
the jobs outlive the process. A worker killed mid-job (even by SIGKILL) leaves its job
leased; once the lease runs out the next claim hands it out again as a new attempt.

Two things follow from DuckDB and shape the design:

- **One process per file.** DuckDB lets one process open a file for writing; a second
  gets :class:`~jobqueue.errors.QueueFileLockedError`. That goes for producers too: while
  a worker process holds the file, no other process can enqueue. So producers and workers
  share one process (an app that runs a :class:`jobqueue.runner.Runner` as a background
  task next to the code that enqueues), and concurrency comes from running many jobs at
  once in it, not from more processes. Within the process, share one ``DurableQueue``
  object per file: a second one on the same file is refused while the first is open.
  The ``jobqueue worker`` command suits jobs queued before it starts, or by its own
  handlers. PostgreSQL-backed queues (``SELECT … FOR
  UPDATE SKIP LOCKED``) lift this limit; DuckDB has no row locks.
- **Batches.** Every DuckDB statement costs 0.1-0.4 ms before it does any work (SQLite's:
  a few microseconds) and every commit syncs the file, so the hot calls are as few
  statements as possible: an enqueue under a fresh id, an ack and an ``ack_many`` are one
  statement each, which DuckDB commits on its own; a claim is a read, then one
  transaction that updates the rows in place and reads them back.
  :meth:`~DurableQueue.enqueue_many`, :meth:`~DurableQueue.claim_many` and
  :meth:`~DurableQueue.ack_many` move many jobs in those same statements: thousands a
  second in batches of 100 (``benchmarks/durable_throughput.py`` measures both).

The SQL lives in ``duckdb.sql`` beside this module, one named block per statement; a
block does what the block of the same name in ``postgres.sql`` does.

Times are seconds since the epoch from the queue's clock (wall-clock time, so they mean
the same after a restart). Tables are prefixed ``jobqueue_``, so the queue can share a
database file with an application's own tables (and an outbox).

Introduced in lesson 11.
"""

from __future__ import annotations

import re
import secrets
import threading
import traceback
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, Unpack

import duckdb

from jobqueue import db
from jobqueue.backends import rules, sql
from jobqueue.backends.contract import (
    Failed,
    JobIds,
    JobTypes,
    QueueNames,
    check_ids,
    check_queues,
    check_types,
    check_unique_for_s,
)
from jobqueue.backends.rows import (
    DEAD_COLUMNS,
    DEAD_STORED,
    HELD,
    JOB,
    JOB_COLUMNS,
    NEW_COLUMNS,
    dead_from_row,
    new_job_values,
    salvage_dead,
    stored_values,
)
from jobqueue.backends.sqlqueue import QueueOptions, SqlQueue
from jobqueue.census import EXACT_UP_TO, Census, tally_by_queue
from jobqueue.errors import (
    CorruptJobError,
    InvalidSettingError,
    QueueFileError,
    QueueFileLockedError,
    QueueSchemaError,
)
from jobqueue.job import (
    DEFAULT_QUEUE,
    DeadLetter,
    Job,
    JobType,
    Lease,
    RetryPolicy,
    check_count,
    check_priority,
    check_queue_name,
)

P = TypeVar("P")

_Filter = tuple[list[str] | None, list[str] | None]
"""A claim's filter as the ``due`` statements take it: the job types and the queue names (``None``: any)."""

SQL = sql.load(
    "duckdb.sql",
    {
        "job_columns": JOB_COLUMNS,
        "job_columns_with_error": JOB_COLUMNS.replace("last_error", "coalesce($error, last_error)"),
        "dead_columns": DEAD_COLUMNS,
        "dead_job_columns": DEAD_COLUMNS.removesuffix(", died_at"),
        "dead_stored": DEAD_STORED,
        "dead_stored_with_error": DEAD_STORED.replace("last_error", "$error"),
        "dead_stored_spent": DEAD_STORED.replace(
            "last_error",
            f"CASE WHEN attempts >= max_attempts THEN {rules.lease_lost_reason_sql()}"
            f" ELSE {rules.expiry_reason_sql('$now')} END",
        ),
        "new_columns": NEW_COLUMNS,
        "new_values": "0, $max_attempts, $base_s, $cap_s, $now, $now, nextval('jobqueue_serial'), $priority,"
        " $expires_at, $expires_after_s, $now, $unique_for_s, $queue",
    },
)
"""The statements of ``duckdb.sql`` by block name; the blocks share postgres.sql's names.

The schema stores job ids uncompressed. Left to choose, DuckDB compresses them (DICT_FSST)
once written to the file, and then each deleted job costs its commit the reading back of
its id from the compressed block, to take it out of the primary key: an ack of 100 jobs
committed in 0.7 ms with 1k jobs waiting and 4.8 ms with 100k (0.7 ms uncompressed).
DuckDB cannot change a column's compression later, so a file made before keeps its own."""

_TYPES, _QUEUES = "AND list_contains($types, type)", "AND list_contains($queues, queue)"
for _name in ("due", "due_by_priority"):
    _due = SQL[_name]
    SQL[f"{_name}_types"] = _due.replace("/* types */", _TYPES)
    SQL[f"{_name}_queues"] = _due.replace("/* types */", _QUEUES)
    SQL[f"{_name}_queues_types"] = _due.replace("/* types */", f"{_QUEUES} {_TYPES}")

SCHEMA_VERSION = sql.latest_version(SQL)
"""Version of the ``jobqueue_`` tables this module reads and writes: its last migration's.

1: lesson 11's tables. 2: when a lease was claimed. 3: priorities and deadlines (lesson
13). 4: priorities NOT NULL. 5: fencing tokens (lesson 06). 6: the enqueue time (lesson
13's age since enqueue). 7: snoozes. 8: cancelled while leased. 9: unique windows. 10:
named queues. 11: outcomes by job type and queue. Older files are migrated when a queue
opens them (``migration_N`` of ``duckdb.sql``).
"""

_DUCKDB_MAGIC = b"DUCK"
"""The bytes at offset 8 of every DuckDB database file."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

_open_files: dict[str, tuple[str, object]] = {}  # resolved path -> (where it was opened, owner mark)
_open_files_lock = threading.Lock()


class DurableQueue(SqlQueue):
    """A job queue in a DuckDB file, with leases, retries with backoff, and dead letters.

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a
            throwaway queue (tests, demos).
        clock: where the queue reads the time; default :class:`SystemClock` (seconds
            since the epoch). A restart must use a clock on the same scale.
        visibility_timeout_s: how long a claim hides a job, in seconds (> 0).
        retry: retry policy of job types that do not bring their own.
        random: source of jitter for retry delays, returning floats in ``[0, 1]``.
        retain_s, dead_retain_s: how long finished jobs and dead letters are kept (7 days
            for dead letters by default); see :class:`~jobqueue.backends.sqlqueue.SqlQueue`.

    Raises:
        QueueFileLockedError: if another process has the file open, or another
            ``DurableQueue`` of this process does (the message says where it was opened).
        QueueFileError: if the file exists but is not a DuckDB database (a SQLite file
            is recognised by its header, without asking DuckDB, which would try to
            download an extension), or is corrupt; the message names the file.
        InvalidSettingError: if ``path`` is not a non-empty str or :class:`~pathlib.Path`,
            ``retry`` is not a :class:`RetryPolicy`, or ``visibility_timeout_s`` is not a
            finite number > 0.

    Every method is one transaction: it commits whole or changes nothing. One queue object
    may be shared by the tasks of an event loop or by threads (calls are serialised).
    Use it as a context manager, or call :meth:`close`, to release the file. Each claim
    looks for the longest-claimable jobs with a top-N scan that skips blocks of rows whose
    times are all later (DuckDB's zone maps), so a backlog in enqueue order costs a claim
    little; it is not O(log n) like :class:`~jobqueue.backends.memory.JobQueue`.

    Introduced in lesson 11.
    """

    claim_batch = 200
    """Jobs a :class:`~jobqueue.runner.Runner` claims ahead by default, at least.

    A claim or an ack costs this queue several milliseconds a call (statements, a synced
    commit) and little more per job, so big batches pay: a runner draining trivial jobs
    ran about 2,000 jobs/s with its usual prefetch of 40 and 7,000-8,000 with 200 (on a
    loaded 2-core machine). Holding jobs ahead takes them from no one, since one process
    at a time has the file; their leases are kept alive while they wait.
    """

    def __init__(self, path: str | Path, **options: Unpack[QueueOptions]) -> None:
        super().__init__(SQL, **options)
        self.path = _check_path(path)
        # Lease tokens carry this queue object's random tag, so a lease cannot ack a job
        # of another queue whose file numbers its tokens the same way.
        self._tag = secrets.token_hex(4)
        # Every priority a live job may have (a superset: enqueues and replays add theirs),
        # so that claims know when one order by time is enough. This object is the file's
        # only writer while it is open.
        self._priorities: set[int | None] = set()
        # Whether the file may hold ids under a unique window: until one is enqueued, an
        # enqueue under a chosen id does not look in jobqueue_held.
        self._windows = False
        # The jobs marked cancelled while leased (a superset: this object is the file's only
        # writer), so that an ack that finds a lease stale knows whether to look again.
        self._marked: set[str] = set()
        self._forget = _hold(self, self.path)
        try:
            self._con = _open(self.path)
            try:
                with self._transaction() as con:
                    self._migrate(con)
                    self._reserve_ids(con, con.execute(SQL["highest_given_id"]).fetchall()[0][0])
                    found = con.execute(SQL["priorities"]).fetchall()
                    self._priorities = {priority for (priority,) in found}
                    self._windows = bool(con.execute(SQL["holds_any"]).fetchall()[0][0])
                    self._marked = {job_id for (job_id,) in con.execute(SQL["marked"]).fetchall()}
            except duckdb.Error as exc:
                self._con.close()
                raise QueueFileError(f"cannot set up queue file {self.path!r}: {exc}") from exc
        except BaseException:
            self._forget()
            raise

    # -- opening and closing ---------------------------------------------------------

    def close(self) -> None:
        """Write pending counts and close the file; the queue cannot be used afterwards.

        Closing twice is harmless.
        """
        with self._lock:
            if not self._closed:
                try:
                    self._outcomes.write(self.clock.now(), self._store_outcomes)
                finally:
                    self._con.close()
                    self._closed = True
                    self._forget()

    # -- producer side -----------------------------------------------------------------

    def enqueue(
        self,
        job_type: JobType[P],
        payload: P,
        *,
        id: str | None = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Job:
        """Add a job to the named ``queue``, waiting from now on; see :meth:`JobQueue.enqueue`.

        Raises:
            PayloadError: if the payload is of the wrong class or not JSON-serialisable.
            InvalidSettingError: if ``priority`` is not an int within the bounds, or
                ``unique_for_s`` not a finite number of seconds >= 0, or ``queue`` cannot
                name a queue.
        """
        ids = None if id is None else [id]
        return self.enqueue_many(
            job_type, [payload], ids=ids, priority=priority, unique_for_s=unique_for_s, queue=queue
        )[0]

    def enqueue_many(
        self,
        job_type: JobType[P],
        payloads: Sequence[P],
        *,
        ids: JobIds = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> list[Job]:
        """Enqueue several jobs of one type to the named ``queue`` in one transaction, in order.

        An id the queue already holds (waiting, leased or dead, or finished within its
        unique window: see :meth:`JobQueue.enqueue`) adds nothing; that job's record is
        returned in its place. ``priority`` overrides the type's for every job.

        Raises:
            PayloadError: if any payload is invalid; then no job is added.
            InvalidSettingError: if ``ids`` and ``payloads`` differ in length,
                ``priority`` is not an int within the bounds, ``unique_for_s`` is not a
                finite number of seconds >= 0, or ``queue`` cannot name a queue.
        """
        check_ids(ids, payloads)
        window = check_unique_for_s(unique_for_s)
        check_queue_name(queue)
        data = [job_type.dump(payload) for payload in payloads]
        policy = job_type.retry or self.retry
        priority = job_type.priority if priority is None else check_priority(priority)
        self._priorities.add(priority)
        if ids is None:
            return self._enqueue_fresh(job_type, data, policy, priority, window, queue)
        with self._transaction() as con:
            now = self.clock.now()
            wanted = list(ids)
            existing = {job.id: job for job in self._find(con, wanted)}
            if self._windows:
                existing = self._held(con, wanted, now) | existing
            new_rows: dict[str, str] = {}
            for job_id, payload in zip(wanted, data, strict=True):
                if job_id not in existing and job_id not in new_rows:
                    new_rows[job_id] = payload
            if new_rows:
                con.execute(
                    SQL["enqueue"],
                    {"ids": list(new_rows), "payloads": list(new_rows.values())}
                    | new_job_values(job_type, policy, now, priority, window, queue),
                )
                numbers = [number for job_id in new_rows if (number := _id_number(job_id)) is not None]
                self._reserve_ids(con, max(numbers, default=None))
                if window is not None:
                    self._hold(con, job_type, list(new_rows), list(new_rows.values()), window)
            added = {
                job_id: job_type.new_job(
                    id=job_id,
                    payload=payload,
                    retry=policy,
                    now=now,
                    priority=priority,
                    unique_for_s=window,
                    queue=queue,
                )
                for job_id, payload in new_rows.items()
            }
        return [existing.get(job_id) or added[job_id] for job_id in wanted]

    def _enqueue_fresh(
        self,
        job_type: JobType[P],
        data: list[str],
        policy: RetryPolicy,
        priority: int,
        window: float | None,
        queue: str,
    ) -> list[Job]:
        """Insert jobs under fresh ids ``job-N``, in one statement that DuckDB commits on its own.

        One statement: ``enqueue_one`` for one job, ``enqueue_fresh`` for more.

        No id check is needed: N comes from a sequence that :meth:`_reserve_ids` keeps above
        every id of that form given explicitly, so no other job can hold it. With a unique
        ``window``, their ids are held too, in the same transaction.
        """
        if not data:
            return []
        with self._transaction() if window is not None else self._connection() as con:
            now = self.clock.now()
            statement, values = (
                (SQL["enqueue_one"], {"payload": data[0]})
                if len(data) == 1
                else (SQL["enqueue_fresh"], {"payloads": data})
            )
            rows = con.execute(
                statement, values | new_job_values(job_type, policy, now, priority, window, queue)
            ).fetchall()
            if window is not None:
                self._hold(
                    con, job_type, [job_id for job_id, _, _ in rows], [text for _, text, _ in rows], window
                )
        ids_by_payload: dict[str, list[str]] = {}
        made = sorted(((serial, job_id, payload) for job_id, payload, serial in rows), reverse=True)
        for _, job_id, payload in made:
            ids_by_payload.setdefault(payload, []).append(job_id)  # equal payloads: first made first
        return [
            job_type.new_job(
                id=ids_by_payload[payload].pop(),
                payload=payload,
                retry=policy,
                now=now,
                priority=priority,
                unique_for_s=window,
                queue=queue,
            )
            for payload in data
        ]

    # -- worker side -------------------------------------------------------------------

    def claim_many(self, limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        """Claim up to ``limit`` due jobs in one transaction: highest priority, then longest-claimable, first.

        Each claim counts as an attempt and hides its job for the visibility timeout.
        Jobs met on the way whose final attempt's lease ran out, or whose deadline has
        passed (``"expired: ..."``, no attempt used), are dead-lettered instead. A claimed row
        that cannot be read back is dead-lettered in the same transaction, its reason a
        :class:`~jobqueue.errors.CorruptJobError`, and the others are handed out. With
        ``types``, only jobs of those job types are claimed (or dead-lettered on the way),
        and with ``queues`` only jobs of those named queues.

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1, ``types`` is not a
                collection of job type names, or ``queues`` not one of queue names.
        """
        check_count("limit", limit)
        names = _filter(types, queues)
        with self._lock:
            now = self.clock.now()
            # outside a transaction: an empty queue costs one read
            due = self._due(self._con, now, limit, names) if [] not in names else []
            if not due:
                return []
            with self._transaction() as con:
                return self._claim_due(con, due, now, limit, names)

    def ack_and_claim(
        self, leases: Sequence[Lease], limit: int, *, types: JobTypes = None, queues: QueueNames = None
    ) -> tuple[list[Lease], list[Lease]]:
        """Ack ``leases`` and claim up to ``limit`` due jobs, in one transaction (one commit).

        What :meth:`ack_many` then :meth:`claim_many` do, for the price of one synced commit
        instead of two (about 0.7 ms each on a file here): a :class:`~jobqueue.runner.Runner`
        acks the jobs it finished just before it claims more. At-least-once holds: if the
        process dies before the commit, neither the acks nor the claims happened, and the
        finished jobs run again once their leases run out. ``limit`` 0 only acks.

        Returns:
            ``(stale, claimed)``: the leases that were no longer held (as :meth:`ack_many`
            returns them), and the new leases (as :meth:`claim_many` returns them, of
            ``types`` and from ``queues`` only if given).

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 0, ``types`` is not a
                collection of job type names, or ``queues`` not one of queue names.
        """
        check_count("limit", limit, least=0)
        names = _filter(types, queues)
        if not leases:
            return [], self.claim_many(limit, types=types, queues=queues) if limit else []
        with self._lock:
            now = self.clock.now()
            with self._transaction() as con:
                acked = self._finish(con, leases, now)
                due = self._due(con, now, limit, names) if limit and [] not in names else []
                claimed = self._claim_due(con, due, now, limit, names) if due else []
        return self._count_acked(leases, acked), claimed

    def _claim_due(
        self,
        con: duckdb.DuckDBPyConnection,
        due: list[tuple[int, str, bool]],
        now: float,
        limit: int,
        names: _Filter,
    ) -> list[Lease]:
        """Inside a transaction, bury the final jobs of ``due`` (looking again), lease the rest."""
        while expired := [job_id for _, job_id, final in due if final]:
            self._bury_expired(con, expired, now)
            due = self._due(con, now, limit, names)  # look again: they took up places
        rows = self._lease(con, due, now)
        jobs = self._readable(con, rows, HELD, now)
        return _in_order(due, rows, jobs)

    def _due(
        self, con: duckdb.DuckDBPyConnection, now: float, limit: int, names: _Filter
    ) -> list[tuple[int, str, bool]]:
        """``(rowid, id, final)`` of up to ``limit`` due jobs (of the filter ``names``) in claim order.

        ``final``: the job must not run: it has used its last attempt (its final lease ran
        out), or its deadline has passed. While the live jobs have one priority (the usual
        case) the order is ``visible_at, serial``, which lets DuckDB's top-N skip blocks of
        later rows; ``priority DESC`` first makes it read every due row: 16 ms against 4 ms
        for 100 of 1M due jobs here.
        """
        types, queues = names
        statement = _due_statement(len(self._priorities) > 1, types is not None, queues is not None)
        values: dict[str, Any] = {"now": now, "limit": limit}
        if types is not None:
            values["types"] = types
        if queues is not None:
            values["queues"] = queues
        return con.execute(statement, values).fetchall()

    def _lease(
        self, con: duckdb.DuckDBPyConnection, due: list[tuple[int, str, bool]], now: float
    ) -> list[Any]:
        """Lease the ``due`` jobs (none of them final); return their rows and new lease tokens.

        Call inside a transaction. The rows are targeted by ``rowid``, which DuckDB looks up
        directly, where ``id IN (…)`` becomes a hash join over the whole table. A plain
        UPDATE, then a SELECT of the same rows: DuckDB runs an ``UPDATE … RETURNING`` as a
        delete and an insert, which moves the rows and costs 5 ms per 100 at 1k jobs
        waiting, 26 ms at 1M (profiled with ``EXPLAIN ANALYZE``); the plain UPDATE changes
        them in place in 0.1-0.2 ms at either size. The conditions repeat the claim's, so a
        row that changed since ``due`` was read is not taken; ``leased_until`` then picks
        out the rows this UPDATE leased (a row it skipped is due, so its lease, if any,
        ended before ``now``).
        """
        if not due:
            return []
        until = now + self.visibility_timeout_s
        rowids = [rowid for rowid, _, _ in due]
        con.execute(SQL["claim"], {"until": until, "now": now, "tag": self._tag, "rowids": rowids})
        rows: list[Any] = con.execute(SQL["claimed"], {"until": until, "rowids": rowids}).fetchall()
        return rows

    def _store_failure(
        self, con: duckdb.DuckDBPyConnection, lease: Lease, failed: Failed, now: float
    ) -> None:
        """Inside the failure's transaction: the job waits for its retry, or moves to ``jobqueue_dead``."""
        job_id = lease.job.id
        if failed.run_at is None:
            con.execute(SQL["bury"], {"id": job_id, "error": failed.error, "now": now})
            con.execute(SQL["delete"], {"id": job_id})
        else:
            con.execute(SQL["retry"], {"run_at": failed.run_at, "error": failed.error, "id": job_id})

    # -- dead letters ------------------------------------------------------------------

    def _store_replay(self, con: duckdb.DuckDBPyConnection, job: Job) -> Sequence[Any]:
        """Insert the replayed ``job`` (its dead letter was taken out by ``dead_letter``); return its row."""
        self._priorities.add(job.priority)
        row: Sequence[Any] = con.execute(SQL["replay"], stored_values(job)).fetchall()[0]
        return row

    # -- looking inside ----------------------------------------------------------------

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter queue: jobs that will not be retried, oldest death first.

        A dead row that cannot be read is rewritten with readable values, its reason
        prefixed with the :class:`~jobqueue.errors.CorruptJobError` that says what was wrong.
        """
        query = SQL["dead_letters"]
        with self._connection() as con:
            rows = con.execute(query).fetchall()
        try:
            return [dead_from_row(row) for row in rows]
        except CorruptJobError:  # rare: rewrite the bad rows, in a transaction
            with self._transaction() as con:
                rows = con.execute(query).fetchall()
                return self._rewrite_dead(con, rows, self.clock.now())

    def __repr__(self) -> str:
        return f"DurableQueue({self.path!r})"

    # -- internals ---------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock, db.transaction(self._con) as con:
            yield con

    @contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection, for statements that DuckDB commits each on its own (reads see committed data)."""
        with self._lock:
            yield self._con

    def _find(self, con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> list[Job]:
        """Records of the given ids, live or dead, in no particular order (corrupt ones salvaged)."""
        rows = con.execute(SQL["find"], {"ids": list(ids)}).fetchall()
        return [JOB.read(row) for row in rows]

    def _bury_corrupt(self, con: duckdb.DuckDBPyConnection, job: Job, now: float) -> None:
        """Move the job whose row could not be read to ``jobqueue_dead``, as its salvaged stand-in ``job``."""
        con.execute(SQL["delete"], {"id": job.id})
        con.execute(SQL["bury_unreadable"], stored_values(job) | {"now": now})

    def _rewrite_dead(
        self, con: duckdb.DuckDBPyConnection, rows: Sequence[Sequence[Any]], now: float
    ) -> list[DeadLetter]:
        """The dead letters of ``rows``, in order; rows that cannot be read are salvaged and rewritten."""
        letters = []
        for row in rows:
            try:
                letters.append(dead_from_row(row))
            except CorruptJobError as exc:
                letter = salvage_dead(row, exc, now)
                con.execute(SQL["rewrite_dead"], stored_values(letter.job) | {"now": letter.died_at})
                letters.append(letter)
        return letters

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bring the file's tables to :data:`SCHEMA_VERSION`, creating them in a new file.

        A file runs the migrations it lacks: a new file all of them, and so does one
        written before its tables recorded a version, each step skipping what the file has
        (``IF NOT EXISTS``).

        Raises:
            QueueSchemaError: naming the file and both versions, if its tables are of a
                newer version than this jobqueue knows.
        """
        version = 0
        if con.execute(SQL["has_schema"]).fetchall()[0][0]:
            version = max((found for (found,) in con.execute(SQL["schema_version"]).fetchall()), default=0)
        if version > SCHEMA_VERSION:
            raise QueueSchemaError(
                f"queue file {self.path!r} holds jobqueue tables of schema version {version}, and this"
                f" jobqueue reads version {SCHEMA_VERSION}: use a matching jobqueue"
            )
        for step in sql.migrations(SQL, version):
            con.execute(step)  # several statements, no parameters

    def _reserve_ids(self, con: duckdb.DuckDBPyConnection, highest: int | None) -> None:
        """Move the fresh-id sequence past ``job-{highest}``, if it has not passed it, so it never makes it.

        Called for every id ``job-N`` given explicitly (and at opening, for files written
        before), so fresh ids need no look-up: one statement fewer per enqueue. DDL takes no
        parameters, so the new start, an int, is formatted into the statement.
        """
        if highest is None:
            return
        upcoming = con.execute(SQL["next_job_id"]).fetchall()[0][0]
        if highest >= upcoming:
            con.execute(f"{SQL['restart_job_ids']} {int(highest) + 1}")

    def _delete_acked(self, con: duckdb.DuckDBPyConnection, leases: Sequence[Lease], now: float) -> set[str]:
        """Delete the jobs held under the tokens of ``leases``; return the tokens that matched.

        With ``retain_s``, they are copied to ``jobqueue_finished`` first, in the caller's transaction.
        """
        tokens = [lease.token for lease in leases]
        if self.retain_s:
            con.execute(SQL["keep_acked"], {"tokens": tokens, "now": now})
        rows = con.execute(SQL["ack"], {"tokens": tokens}).fetchall()
        return {token for (token,) in rows}

    def _prune_dead(self, con: duckdb.DuckDBPyConnection, before: float) -> None:
        """Delete up to PRUNE_BATCH dead letters that died before ``before``; see ``SqlQueue._prune_dead``.

        DuckDB has no DELETE inside a WITH: the windows of the letters to go start first
        (only in a file that may hold ids under one), so an ack that commits each statement
        alone and stops between the two leaves a letter that still holds its id, and a
        window already counting, which the next prune finds as it was.
        """
        limits = {"before": before, "limit": rules.PRUNE_BATCH}
        if self._windows:
            con.execute(SQL["hold_pruned_dead"], limits)
        con.execute(SQL["prune_dead"], limits)

    def _hold(
        self,
        con: duckdb.DuckDBPyConnection,
        job_type: JobType[P],
        ids: list[str],
        data: list[str],
        window: float,
    ) -> None:
        """Hold the ids of new jobs enqueued with the unique ``window`` (s) while they live (see ``hold``)."""
        self._windows = True
        con.execute(SQL["unhold"], {"ids": ids})  # ended windows of the same ids
        con.execute(
            SQL["hold"], {"ids": ids, "type": job_type.name, "payloads": data, "unique_for_s": window}
        )

    def _bury_expired(self, con: duckdb.DuckDBPyConnection, ids: list[str], now: float) -> None:
        """Dead-letter the jobs ``ids``, whose final attempt's lease, or deadline, has run out at ``now``.

        Those of them cancelled while leased (their lease ran out) are finished as cancelled instead.
        """
        con.execute(SQL["bury_spent"], {"ids": ids, "now": now})
        con.execute(SQL["keep_cancelled_spent"], {"ids": ids, "now": now})
        con.execute(SQL["delete_spent"], {"ids": ids})
        cancelled = [job_id for job_id in ids if job_id in self._marked]
        if cancelled:  # finished as cancelled: their unique windows start (the dead keep theirs held)
            self._hold_finished(con, cancelled, now)
        self._marked.difference_update(ids)

    def _finish_cancelled(
        self, con: duckdb.DuckDBPyConnection, leases: Sequence[Lease], now: float, error: str | None
    ) -> set[str]:
        """Inside a transaction: move the cancelled jobs held under ``leases`` to ``jobqueue_finished``."""
        tokens = [lease.token for lease in leases]
        con.execute(SQL["keep_cancelled"], {"tokens": tokens, "now": now, "error": error})
        finished = {token for (token,) in con.execute(SQL["delete_cancelled"], {"tokens": tokens}).fetchall()}
        self._marked.difference_update(lease.job.id for lease in leases if lease.token in finished)
        return finished

    def _may_be_cancelled(self, leases: Sequence[Lease]) -> bool:
        """Whether a job held under ``leases`` was marked cancelled (this object knows every mark)."""
        return any(lease.job.id in self._marked for lease in leases)

    def _mark_cancelled(self, con: duckdb.DuckDBPyConnection, job_id: str) -> None:
        """Inside a transaction: mark the leased job ``job_id`` cancelled."""
        self._marked.add(job_id)
        con.execute(SQL["mark_cancelled"], {"id": job_id})

    def _cancel_waiting(self, con: duckdb.DuckDBPyConnection, job_id: str, now: float) -> None:
        """Inside a transaction: move the waiting job ``job_id`` to ``jobqueue_finished`` as cancelled."""
        con.execute(SQL["keep_cancelled_waiting"], {"id": job_id, "now": now})
        con.execute(SQL["delete"], {"id": job_id})

    # -- the dashboard's reads (ShowsOverview) ------------------------------------------

    def census(self, *, exact_up_to: int = EXACT_UP_TO) -> Census:
        """The jobs by type and state now, every count exact: DuckDB reads a column fast.

        ``exact_up_to`` is accepted for the contract and changes nothing here: the census
        of 100,000 jobs takes DuckDB about 3.5 ms (``benchmarks/README.md``, the session of
        2026-12-03 18:59).

        Raises:
            InvalidSettingError: if ``exact_up_to`` is not an int >= 1.
        """
        check_count("exact_up_to", exact_up_to)
        with self._connection() as con:  # one read, no commit to wait for
            now = self.clock.now()
            rows = con.execute(SQL["census"], {"now": now}).fetchall()
        by_type, by_queue = tally_by_queue([row[:4] for row in rows])
        return Census(
            at=now,
            by_type=by_type,
            by_queue=by_queue,
            estimated=frozenset(),
            oldest_waiting_age_s=now - min((row[4] for row in rows if row[0] == "waiting"), default=now),
            oldest_enqueued_age_s=now
            - min((row[5] for row in rows if row[0] in ("waiting", "scheduled")), default=now),
        )


def _due_statement(by_priority: bool, typed: bool, queued: bool) -> str:
    """The ``due`` statement (``due_by_priority`` if ``by_priority``), with the filters asked for."""
    kind = (
        ("due_by_priority" if by_priority else "due")
        + ("_queues" if queued else "")
        + ("_types" if typed else "")
    )
    return SQL[kind]


def _filter(types: JobTypes, queues: QueueNames) -> _Filter:
    """A claim's filter (:func:`check_types`, :func:`check_queues`) as the ``due`` statements take it."""
    wanted, names = check_types(types), check_queues(queues)
    return (None if wanted is None else sorted(wanted)), (None if names is None else sorted(names))


def _check_path(path: object) -> str:
    """``path`` as text, if it names a file or is exactly ``":memory:"``."""
    if not isinstance(path, str | Path):
        raise InvalidSettingError(f"a queue's path must be a str or Path (or ':memory:'), got {path!r}")
    text = str(path)
    if not text or (text.startswith(":memory:") and text != ":memory:"):
        raise InvalidSettingError(
            f"a queue's path must name a file, or be exactly ':memory:' for a throwaway queue, got {text!r}"
        )
    return text


def _hold(queue: DurableQueue, path: str) -> weakref.finalize[Any, Any]:
    """Mark ``path`` as held by ``queue`` in this process; the result lets it go (once).

    Raises:
        QueueFileLockedError: naming the file and where its holder was opened, if another
            open ``DurableQueue`` of this process holds it.
    """
    if path == ":memory:":
        return weakref.finalize(queue, lambda: None)  # every ":memory:" queue is its own database
    key = str(Path(path).resolve())
    caller = next(
        (frame for frame in reversed(traceback.extract_stack()[:-2]) if frame.filename != __file__),
        None,
    )
    where = "an unknown place" if caller is None else f"{Path(caller.filename).name}:{caller.lineno}"
    mark = object()
    with _open_files_lock:
        held = _open_files.get(key)
        if held is not None:
            raise QueueFileLockedError(
                f"queue file {path!r} is already open in this process: a DurableQueue opened at"
                f" {held[0]} holds it and was not closed. Share that one object (it is safe across"
                " tasks and threads), or close it first."
            )
        _open_files[key] = (where, mark)
    return weakref.finalize(queue, _let_go, key, mark)


def _let_go(key: str, mark: object) -> None:
    with _open_files_lock:
        if _open_files.get(key, (None, None))[1] is mark:
            del _open_files[key]


QUERY_THREADS = 1
"""Threads DuckDB may use for a statement on the queue file. DuckDB keeps this setting for the
whole database, so another connection this process opens to the same file runs with it too.
The queue's statements are small (a batch of jobs through the primary key, a few rows of
outcomes), and handing one out to a pool of threads cost more than it gave on the course's
2-core machine. With DuckDB's default of one thread per core, taking turns with this
setting, an enqueue of one job ran 4-5 % slower, ``claim_many(100)`` + ``ack_many`` 11-16 %
slower, a ``Runner`` drain 10-12 % slower, and a dashboard refresh 0.6-1.5 ms of 11-12 ms
slower (benchmarks/README.md, the session of 2026-12-03 18:59). The census, the one read of
every job, took as long either way at 100,000 jobs (about one of DuckDB's row groups, which
one thread reads anyway); a table of millions was not measured."""


def _open(path: str) -> duckdb.DuckDBPyConnection:
    """Connect to the queue file, refusing a file that is not a DuckDB database before DuckDB reads it."""
    file = Path(path)
    if path != ":memory:" and file.is_file():
        with file.open("rb") as stream:
            head = stream.read(16)
        if head == _SQLITE_MAGIC:
            raise QueueFileError(f"{path!r} is a SQLite database, not a queue file (a DuckDB database)")
        if head[8:12] != _DUCKDB_MAGIC:
            raise QueueFileError(f"{path!r} is not a DuckDB database file, so not a queue file")
    try:
        con = db.connect(path)
    except duckdb.IOException as exc:
        if "lock" not in str(exc).lower():
            raise QueueFileError(f"cannot open queue file {path!r}: {exc}") from exc
        raise QueueFileLockedError(
            f"cannot open queue file {path!r}: another process has it open, and DuckDB lets"
            f" one process at a time open a file for writing. Stop that process first (and run one"
            f" worker process per queue file, with more concurrency, not two). DuckDB said: {exc}"
        ) from exc
    except duckdb.Error as exc:  # "Corrupt database file: ..." names no file
        raise QueueFileError(f"cannot open queue file {path!r}, it is damaged: {exc}") from exc
    con.execute(f"SET threads = {QUERY_THREADS}")
    return con


_FRESH_ID = re.compile(r"job-([1-9][0-9]{0,17})")
"""The form of the ids the queue makes itself; N below 10**18, within the sequence's range."""


def _id_number(job_id: str) -> int | None:
    """N if ``job_id`` is ``job-N``, an id the queue's sequence could make; else ``None``."""
    match = _FRESH_ID.fullmatch(job_id)
    return int(match[1]) if match else None


def _in_order(due: list[tuple[int, str, bool]], rows: list[Any], jobs: list[Job]) -> list[Lease]:
    """The leases of the readable ``jobs`` among the claimed ``rows``, in the order of ``due``."""
    tokens = {HELD.value(row, "id"): HELD.value(row, "lease_token") for row in rows}
    by_id = {job.id: job for job in jobs}
    return [Lease.of(by_id[job_id], tokens[job_id]) for _, job_id, _ in due if job_id in by_id]
