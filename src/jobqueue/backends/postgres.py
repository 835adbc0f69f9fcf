"""A job queue in PostgreSQL that any number of processes share: ``FOR UPDATE SKIP LOCKED``.

:class:`PostgresQueue` keeps the promises of :class:`jobqueue.backends.memory.JobQueue` and
:class:`jobqueue.backends.duckdb.DurableQueue` (the same contract tests run against all three),
and adds what a database server allows and a DuckDB file does not:

- **Many processes.** Producers and workers on any number of processes or machines
  enqueue and claim at once on one database. A claim is one statement that locks the
  due rows it takes and skips rows other claims hold (``FOR UPDATE SKIP LOCKED``), so
  two workers never get the same job and never wait for each other.
- **Lease tokens from a sequence**, unique across every process, checked together with
  the job's id in the same statement as the ack, fail, extension or release: a worker
  whose lease ran out and was claimed again elsewhere is refused
  (:class:`~jobqueue.errors.StaleLeaseError`), wherever it runs.
- **Wake-ups.** Every enqueue sends ``NOTIFY jobqueue_jobs`` once it commits;
  :meth:`PostgresQueue.wait_for_work` returns as soon as one arrives, so a
  :class:`~jobqueue.runner.Runner` starts a new job at once instead of at its next poll.
- **Transactional enqueue.** Pass your own psycopg connection (``conn=``) and the job is
  written in your transaction: it commits, or rolls back, with your order. When the data
  and the queue share a database this replaces the outbox and its relay.
- **Batches in one round trip**, with duplicate ids skipped (``ON CONFLICT DO NOTHING``);
  :meth:`PostgresQueue.enqueue_batch` says which jobs were added.
- **Two synced commits per job**, its enqueue and its ack; a claim and a heartbeat commit
  without waiting for the disk, since a claim lost in a crash only means a second run
  (:meth:`PostgresQueue.claim_many` says what a crash can and cannot cost).

The SQL lives in ``postgres.sql`` beside this module, one named block per statement, with
a comment on each clause that matters. Tables are prefixed ``jobqueue_`` and created on
first use, with a schema version. Times are seconds since the epoch from the queue's
clock, passed as parameters. By default that clock is the server's
(:class:`~jobqueue.clock.ServerClock`: this machine's clock plus an offset measured against
the server when the queue opens and every minute), so workers on machines whose clocks
disagree still agree on every lease; a :class:`~jobqueue.clock.ManualClock` passed in drives
demos and tests.

A dropped connection or a restarted server raises
:class:`~jobqueue.errors.QueueUnavailableError` naming the server; the next call connects
again, and a :class:`~jobqueue.runner.Runner` waits and carries on.

Introduced in lesson 12.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import aclosing, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar, Unpack

import psycopg
import psycopg.sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row

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
    JOB,
    JOB_COLUMNS,
    JOB_FIELDS,
    NEW_COLUMNS,
    Columns,
    new_job_values,
    read_dead,
    salvage,
    stored_values,
)
from jobqueue.backends.sqlqueue import QueueOptions, SqlQueue
from jobqueue.backends.wakeups import Wakeups
from jobqueue.census import EXACT_UP_TO, Census, State, tally_by_queue
from jobqueue.cleanup import WARN_AFTER_S, CleanupReport, OpenTransaction
from jobqueue.clock import ManualClock, ServerClock
from jobqueue.errors import (
    CorruptJobError,
    InvalidSettingError,
    QueuePrivilegeError,
    QueueSchemaError,
    QueueUnavailableError,
    StaleLeaseError,
)
from jobqueue.job import (
    DEFAULT_QUEUE,
    DeadLetter,
    Job,
    JobType,
    Lease,
    check_count,
    check_positive_seconds,
    check_priority,
    check_queue_name,
)

P = TypeVar("P")


CHANNEL = "jobqueue_jobs"
"""The ``LISTEN``/``NOTIFY`` channel on which enqueues wake waiting workers."""


PRIORITIES_IN_USE = """
    (SELECT priority FROM jobqueue_jobs WHERE died_at IS NULL ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT job.priority FROM jobqueue_jobs AS job
            WHERE job.died_at IS NULL AND job.priority < priorities.priority
            ORDER BY job.priority DESC LIMIT 1)
    FROM priorities WHERE priorities.priority IS NOT NULL
"""
"""The body of the recursive CTE ``priorities`` that the claim and ``oldest_waiting`` share: the
priorities of the live jobs, highest first, found by hopping through the claim index."""

QUEUE_PRIORITIES_IN_USE = """
    (SELECT priority FROM jobqueue_jobs WHERE died_at IS NULL AND queue = %(queue)s AND queue <> 'default'
     ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT job.priority FROM jobqueue_jobs AS job
            WHERE job.died_at IS NULL AND job.queue = %(queue)s AND job.queue <> 'default'
              AND job.priority < priorities.priority
            ORDER BY job.priority DESC LIMIT 1)
    FROM priorities WHERE priorities.priority IS NOT NULL
"""
""":data:`PRIORITIES_IN_USE` of one named queue's live jobs, hopping through ``jobqueue_jobs_queue_claim``.

``queue <> 'default'`` is the index's own condition, written out so that a plan made once for
any queue name (a generic plan) may read that partial index."""


SQL = sql.load(
    "postgres.sql",
    {
        "job_columns": JOB_COLUMNS,
        "job_columns_with_error": JOB_COLUMNS.replace("last_error", "coalesce(%(error)s, last_error)"),
        "dead_columns": DEAD_COLUMNS,
        "expiry_reason": rules.expiry_reason_sql("%(now)s"),
        "lease_lost_reason": rules.lease_lost_reason_sql(),
        "live_priorities": PRIORITIES_IN_USE,
        "new_columns": NEW_COLUMNS,
        "new_values": "0, %(max_attempts)s, %(base_s)s, %(cap_s)s, %(now)s, %(now)s,"
        " nextval('jobqueue_serial'), %(priority)s, %(expires_at)s, %(expires_after_s)s, %(now)s,"
        " %(unique_for_s)s, %(queue)s",
    },
)
"""The statements of ``postgres.sql`` by block name: the select lists the row conversion
reads, and the reasons of :func:`jobqueue.backends.rules.refusal`, filled in."""

_TYPES = "AND type = ANY(%(types)b::text[])"
_ONE_QUEUE = "AND queue = %(queue)s AND queue <> 'default'"
_QUEUES = "AND queue = ANY(%(queues)b::text[])"


def _claim_variants(name: str, claim: str) -> dict[str, str]:
    """The claim ``claim`` as ``name``, and as each filter's statement (``name_types``, ``name_queue``...)."""
    one_queue = claim.replace(PRIORITIES_IN_USE, QUEUE_PRIORITIES_IN_USE)
    return {
        name: claim,
        f"{name}_types": claim.replace("/* types */", _TYPES),
        f"{name}_queue": one_queue.replace("/* types */", _ONE_QUEUE),
        f"{name}_queue_types": one_queue.replace("/* types */", f"{_ONE_QUEUE} {_TYPES}"),
        f"{name}_queues": claim.replace("/* types */", _QUEUES),
        f"{name}_queues_types": claim.replace("/* types */", f"{_QUEUES} {_TYPES}"),
    }


_CLAIM, _LEASE_MANY, _LEASE_ONE = SQL.pop("claim"), SQL.pop("lease_in_claim_order"), SQL.pop("lease_one")
for _due, _family in ((SQL.pop("due_in_index_order"), ""), (SQL.pop("due_by_priority"), "_by_priority")):
    _claim = _CLAIM.replace("/* due */", _due)
    SQL |= _claim_variants(f"claim{_family}", _claim.replace("/* lease */", _LEASE_MANY))
    SQL |= _claim_variants(  # the limit written in: a plan that knows it leases one row
        f"claim_one{_family}", _claim.replace("/* lease */", _LEASE_ONE).replace("%(limit)s", "1")
    )

SKIP_SCAN_VERSION = 180000
"""The first PostgreSQL version (``server_version_num``) whose claims read the claim index in
its own order (``due_in_index_order`` in ``postgres.sql``: 18's skip scan). Claims on older
servers walk it one priority at a time (``due_by_priority``), and so do claims behind a
transaction pooler: without the session's planner settings (``generic_plans``), a claim
planned on a table never analysed could read every due job and sort them."""

SCHEMA_VERSION = sql.latest_version(SQL)
"""Version of the ``jobqueue_`` tables this module reads and writes: its last migration's.

2: lesson 12's tables. 3: priorities and deadlines (lesson 13). 4: fencing tokens (lesson
06). 5: the enqueue time (lesson 13's age since enqueue). 6: snoozes. 7: cancelled while
leased. 8: unique windows. 9: named queues. 10: outcomes by job type and queue. Older
tables are migrated when a queue opens them (``migration_N`` blocks of ``postgres.sql``).
"""


CLAIMED = Columns(*JOB_FIELDS, "lease_token", "serial", "ended", "cancelled")
"""A row of the claim: a job it leased, its lease token and its new serial, which claims give
in claim order; or a due job it found spent or expired (``ended``: ``bury_due`` dead-letters
it) or cancelled while leased (``cancelled``: ``drop_cancelled`` finishes it), which it did
not lease."""

ENQUEUED = Columns("given_id", "added", "gated", *JOB_FIELDS)
"""A row of the enqueue: the job's id, whether it was added, whether a unique window's gate
let it through, and the record of the job held under that id if it was not added (NULL when
added, or when the job that holds it has finished)."""


class BatchOptions(TypedDict, total=False):
    """The options of :meth:`PostgresQueue.enqueue_batch` and :meth:`PostgresQueue.enqueue_many`."""

    ids: JobIds
    conn: psycopg.Connection[Any] | None
    priority: int | None
    unique_for_s: float | None
    queue: str


@dataclass(frozen=True, kw_only=True)
class Enqueued:
    """One entry of :meth:`PostgresQueue.enqueue_batch`: the job's record, and whether it is new.

    ``added`` is ``False`` when the queue already held a job with that id (waiting, leased
    or dead); ``job`` is then that job's record. Introduced in lesson 12.
    """

    job: Job
    added: bool


class PostgresQueue(SqlQueue):
    """A job queue in PostgreSQL tables, with leases, retries with backoff, and dead letters.

    Args:
        conninfo: where the database is: a URL (``postgresql://user@host:5432/db``) or a
            libpq ``key=value`` string.
        clock: where the queue reads the time; default a :class:`ServerClock` that this
            queue keeps in step with the server (seconds since the epoch), so every process
            reads one clock whatever its machine's says. A clock passed in is used as it
            is: every process sharing the database must then read the same time.
        visibility_timeout_s: how long a claim hides a job, in seconds (> 0).
        retry: retry policy of job types that do not bring their own.
        random: source of jitter for retry delays, returning floats in ``[0, 1]``.
        retain_s, dead_retain_s: how long finished jobs and dead letters are kept (7 days
            for dead letters by default); see :class:`~jobqueue.backends.sqlqueue.SqlQueue`.
        connect_timeout_s: seconds a connection attempt may take (libpq's
            ``connect_timeout``, whole seconds, at least 2; default 10), unless ``conninfo``
            sets its own: without one libpq waits for TCP, minutes for a server that is gone.
        statement_timeout_s: seconds any one of the queue's statements may run, waiting for
            a lock included (default 30; ``None``: no limit). Past it the server cancels the
            statement and the call raises :class:`QueueUnavailableError`, which a
            :class:`~jobqueue.runner.Runner` waits out. Set on the queue's own connections
            only, never on a caller's ``conn``; behind a transaction pooler, set it on the
            role instead (``ALTER ROLE ... SET statement_timeout``).
        keepalive_idle_s: seconds a connection may be silent before TCP keepalives probe
            the server (default 30; probes every 10 s, given up after 3), unless ``conninfo``
            sets its own: a server or network that vanished is noticed in about a minute,
            not the two hours of Linux's default.
        transaction_pooler: ``True`` when ``conninfo`` leads to a pooler in transaction
            mode (PgBouncer's ``pool_mode = transaction``, RDS Proxy, Supavisor), which
            hands the server connection to another client after each transaction. The
            queue then keeps no session state there: no prepared statements, no ``SET``
            (its statements are planned at each run, about 0.5 ms more per call), and no
            ``LISTEN`` (:meth:`wait_for_work` only waits out its timeout, so a
            :class:`~jobqueue.runner.Runner` finds new jobs by polling every ``poll_s``).
            Its claims wait for the disk, so that fencing tokens hold across a crash of
            the server (see :meth:`claim_many`). In the default mode (``False``: a direct
            connection, or a pooler in session mode) a transaction pooler is detected at
            the first clash of prepared statements and refused with an
            :class:`InvalidSettingError` naming this flag.

    Raises:
        QueueUnavailableError: if the server cannot be reached (the message names it).
        QueueSchemaError: if the database holds ``jobqueue_`` tables of another version
            than :data:`SCHEMA_VERSION`: an older one (the message names ``jobqueue
            migrate``, see :func:`migrate`), or a newer one. An empty database gets the
            tables at once.
        InvalidSettingError: if ``visibility_timeout_s`` is not a finite number > 0.

    Every method is one transaction. One queue object holds a connection per thread that
    calls it, so calls made from several threads at once (a
    :class:`~jobqueue.runner.Runner` makes its calls in threads, beside its event loop) do
    not wait for each other: a claim that waits for a lock does not hold up a heartbeat.
    Two more, each opened at its first use: one that listens while a worker waits for work
    (:meth:`wait_for_work`), and one from which a thread of the queue's sends the wake-ups
    after enqueues (a ``NOTIFY`` after the commit: at once after a quiet spell, else at most
    one per 10 ms, shared by every enqueue committed meanwhile, and the last at once when the
    queue closes: ``backends/wakeups.py``).
    Open one queue per process and as many processes as you like. A claim costs O(log n) in
    the backlog (an index on the visible time). Use it as a context manager, or call
    :meth:`close`.

    Introduced in lesson 12.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        connect_timeout_s: float = 10.0,
        statement_timeout_s: float | None = 30.0,
        keepalive_idle_s: float = 30.0,
        transaction_pooler: bool = False,
        **options: Unpack[QueueOptions],
    ) -> None:
        if options.get("clock") is None:  # the server's clock decides (see ServerClock)
            options["clock"] = ServerClock()
        super().__init__(SQL, **options)
        self.transaction_pooler = transaction_pooler
        self._conninfo = conninfo  # may hold a password: messages use self.server
        self.server = describe_server(conninfo)
        # .con: this thread's connection; .fenced: its floor raised; .lost: self._lost when it
        # opened; .skip_scan: the claim's form for its server (see SKIP_SCAN_VERSION)
        self._local = threading.local()
        # every connection open, with the thread it serves: to close at close(), or once its thread ends
        self._cons: list[tuple[threading.Thread, psycopg.Connection[Any]]] = []
        self._lost = 0  # how many times a connection was found lost: the others are suspect too
        self._connect_options = _connect_options(
            conninfo,
            connect_timeout_s=check_positive_seconds("connect_timeout_s", connect_timeout_s),
            keepalive_idle_s=check_positive_seconds("keepalive_idle_s", keepalive_idle_s),
        )
        self.statement_timeout_s = (
            None
            if statement_timeout_s is None
            else check_positive_seconds("statement_timeout_s", statement_timeout_s)
        )
        self._listener: psycopg.AsyncConnection[tuple[Any, ...]] | None = None
        self._listener_loop: asyncio.AbstractEventLoop | None = None
        self._wakeups = Wakeups(self.notify_workers, f"jobqueue wake-ups ({self.server})")
        try:
            with self._transaction() as con:
                _create_schema(con, self.server)
        except BaseException:
            self.close()
            raise

    # -- opening and closing ---------------------------------------------------------

    def close(self) -> None:
        """Send the wake-up still due, write pending counts, close the connections; twice is harmless."""
        self._wakeups.close()  # its thread sends on a connection of its own, before they close
        with self._lock:
            if self._closed:
                return
            with suppress(QueueUnavailableError):  # counts lost with the server: only metrics use them
                self._outcomes.write(self.clock.now(), self._store_outcomes)
            for _, con in self._cons:
                con.close()
            if self._listener is not None:
                self._listener.pgconn.finish()  # an async connection's socket, closed without a loop
            self._closed = True

    # -- producer side -----------------------------------------------------------------

    def enqueue(
        self,
        job_type: JobType[P],
        payload: P,
        *,
        id: str | None = None,
        conn: psycopg.Connection[Any] | None = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Job:
        """Add a job, waiting from now on, and return its record; see :meth:`JobQueue.enqueue`.

        Args:
            job_type: the job's type.
            payload: an instance of ``job_type.payload_type``.
            id: the job's id; an id the queue already holds (waiting, leased or dead) adds
                nothing and that job's record is returned.
            conn: your own psycopg connection: the job is written in its current
                transaction and becomes visible when you commit (gone if you roll back).
                Without it the queue commits the job at once. Its row factory does not
                matter (``dict_row`` is fine). No wake-up is sent from your transaction:
                a ``NOTIFY`` there would make its commit take PostgreSQL's one lock for
                all notifying commits of the server (held until the commit is on disk),
                and a full notification queue would fail your commit. Idle workers find
                the job at their next poll (a Runner's ``poll_s``); to start it at once,
                call :meth:`notify_workers` after your commit.
            priority: this job's priority, in place of the type's (``None``).
            unique_for_s: hold the id this many seconds after the job finished; see
                :meth:`JobQueue.enqueue`. Producers racing to enqueue the same id (also
                with the ack of its job) leave one job.
            queue: the named queue the job waits in (default ``"default"``).

        Raises:
            PayloadError: if the payload is of the wrong class or not JSON-serialisable.
            InvalidSettingError: if ``priority`` is not an int within the bounds, or
                ``unique_for_s`` not a finite number of seconds >= 0, or ``queue`` cannot
                name a queue.
        """
        ids = None if id is None else [id]
        return self.enqueue_batch(
            job_type, [payload], ids=ids, conn=conn, priority=priority, unique_for_s=unique_for_s, queue=queue
        )[0].job

    def enqueue_many(
        self, job_type: JobType[P], payloads: Sequence[P], **options: Unpack[BatchOptions]
    ) -> list[Job]:
        """Enqueue several jobs of one type in one statement, in order; see :meth:`enqueue_batch`.

        Returns:
            One record per payload: the new job's, or that of the job already held under
            its id.

        Raises:
            PayloadError: if any payload is invalid; then no job is added.
            InvalidSettingError: if ``ids`` and ``payloads`` differ in length.
        """
        return [entry.job for entry in self.enqueue_batch(job_type, payloads, **options)]

    def enqueue_batch(
        self,
        job_type: JobType[P],
        payloads: Sequence[P],
        *,
        ids: JobIds = None,
        conn: psycopg.Connection[Any] | None = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> list[Enqueued]:
        """Like :meth:`enqueue_many`, saying of each job whether this call added it.

        One round trip for the whole batch (``INSERT … ON CONFLICT DO NOTHING``). An id
        repeated within the batch is added once, with its first payload. ``priority``
        overrides the type's for every job, ``unique_for_s`` gives each its unique window
        (see :meth:`enqueue`); every job goes to the named ``queue``.

        Raises:
            PayloadError: if any payload is invalid; then no job is added.
            InvalidSettingError: if ``ids`` and ``payloads`` differ in length,
                ``priority`` is not an int within the bounds, ``unique_for_s`` not a
                finite number of seconds >= 0, or ``queue`` cannot name a queue.
        """
        check_ids(ids, payloads)
        window = check_unique_for_s(unique_for_s)
        check_queue_name(queue)
        chosen = job_type.priority if priority is None else check_priority(priority)
        data = [job_type.dump(payload) for payload in payloads]  # all checked before any is written
        wanted: list[str | None] = list(ids) if ids is not None else [None] * len(data)
        first: dict[str, int] = {}
        rows: list[int] = []  # indexes of the payloads to send: fresh ids, first copy of each id
        for index, job_id in enumerate(wanted):
            if job_id is None or first.setdefault(job_id, index) == index:
                rows.append(index)
        results: dict[int, Enqueued] = {}
        with self._connection(conn) as con:
            if ids is None and window is None and self._is_own(con):
                rows = self._insert_fresh(con, job_type, data, results, chosen, queue)
            while rows:  # more than once only when a fresh id was taken meanwhile
                batch = [(i, wanted[i], data[i]) for i in rows]
                rows = self._insert(con, job_type, batch, results, chosen, window, queue)
            if self._is_own(con) and any(entry.added for entry in results.values()):
                self._wakeups.request()  # a NOTIFY after this commit, from a thread (wakeups.py)
        for index, job_id in enumerate(wanted):
            if index not in results:  # a repeated id: the first copy's record, not added by it
                assert job_id is not None
                results[index] = Enqueued(job=results[first[job_id]].job, added=False)
        return [results[index] for index in range(len(wanted))]

    def notify_workers(self) -> None:
        """Wake idle workers now: a ``NOTIFY`` in a transaction of its own.

        For jobs enqueued with ``conn=``: call it after your commit, and workers waiting in
        :meth:`wait_for_work` look at once instead of at their next poll. A hint only: a
        call before the commit wakes them to find nothing. Behind a transaction pooler
        nobody listens, and it does nothing.
        """
        with self._connection() as con:
            con.execute(SQL["notify"], prepare=self._prepare(con))

    # -- worker side -------------------------------------------------------------------

    def claim_many(self, limit: int, *, types: JobTypes = None, queues: QueueNames = None) -> list[Lease]:
        """Claim up to ``limit`` due jobs, by priority then longest-claimable, skipping others' claims.

        Each claim counts as an attempt and hides its job for the visibility timeout. Jobs
        whose final attempt's lease ran out, or whose deadline has passed (``"expired:
        ..."``, no attempt used), are dead-lettered on the way; a row that cannot be read
        back as a job is dead-lettered with the reason.

        A claim commits without waiting for the disk (``synchronous_commit`` off for its own
        transaction; :meth:`extend_lease` too), so a job costs two synced commits, its
        enqueue and its ack, as in a bare ``SKIP LOCKED`` loop. What a server crash can then
        cost: the claims of its last moments (at most three ``wal_writer_delay``, 0.6 s by
        default) may be lost. Their jobs are back as they were, claimable at once with the
        attempt uncounted, while the workers holding them may still run them: a second run,
        which at-least-once delivery allows (``process_once`` makes it harmless). No job is
        lost: its row is written by a synced enqueue and deleted only by a synced ack.
        Lease tokens: the lease sequence may hand out a lost claim's number again (its WAL
        went with the claim), and if the same job gets the same token, the old holder's ack
        or fail is taken for the new holder's. The worst case is a job acked or failed while
        its second run goes on (that run's ack is then refused as stale): a duplicate run, or
        a dead letter to replay, never a lost job. A token stored in a row that survived the
        crash cannot repeat: WAL is replayed in order, and the sequence's record precedes
        the row that holds the token. (PostgreSQL's "Asynchronous Commit".) Fencing tokens
        (:attr:`Job.fencing_token`) never repeat, crash or not: before its first claim,
        each connection moves their sequence 2^24 numbers on in a commit that waits for the
        disk (``fencing_floor`` in ``postgres.sql``), past every number a crash could lose.
        With ``transaction_pooler``, the connection to the pooler outlives a crash of the
        server, so that step is not taken again: there every claim waits for the disk (run
        all the workers of a queue in one mode).

        With ``types``, only jobs of those job types are claimed (or dead-lettered on the
        way): the others are passed over in the claim index, so a claim with a filter
        reads the due jobs of other types ahead of the ones it takes. With ``queues``, only
        jobs of those named queues: a claim from one named queue (a
        :class:`~jobqueue.runner.Runner`'s, for each of its queues) reads that queue's due
        jobs in an index of its own (``jobqueue_jobs_queue_claim``) and no job of another
        queue. That index leaves out ``"default"``, so jobs there
        cost no index entry more: a claim from ``"default"`` alone, or from several queues,
        passes over the due jobs of the others in the claim index, as a type filter does.
        Name every queue whose backlog must not slow another's claims.

        Jobs of a higher priority that are not yet due (in backoff, leased) cost a claim
        almost nothing: on PostgreSQL 18 and later the claim reads the claim index in its own
        order, which the server's skip scan crosses by hopping from one priority to the next;
        older servers have no skip scan, and there (and behind a transaction pooler, see
        :data:`SKIP_SCAN_VERSION`) the claim walks the priorities itself
        (``due_in_index_order`` and ``due_by_priority`` in ``postgres.sql``).

        Raises:
            InvalidSettingError: if ``limit`` is not an int >= 1, ``types`` is not a
                collection of job type names, or ``queues`` not one of queue names.
        """
        check_count("limit", limit)
        wanted, among = check_types(types), check_queues(queues)
        if wanted == frozenset() or among == frozenset():
            return []
        names = None if wanted is None else sorted(wanted)
        leases: list[Lease] = []
        with self._connection() as con:
            if not getattr(self._local, "fenced", False):  # a new connection: pass over lost tokens
                with con.transaction():
                    con.execute(SQL["fencing_floor"])
                self._local.fenced = True
            buried = 1
            while buried and len(leases) < limit:  # buried jobs took up places: look again
                now = self.clock.now()
                statement, queue_names = _claim_statement(
                    limit - len(leases), names is not None, among, skip_scan=self._local.skip_scan
                )
                rows = con.execute(
                    statement,
                    {
                        "now": now,
                        "until": now + self.visibility_timeout_s,
                        "limit": limit - len(leases),
                        "types": names,
                        "commit": "on" if self.transaction_pooler else "off",
                        "queue": queue_names[0] if queue_names else None,
                        "queues": queue_names,
                    },
                    prepare=self._prepare(con),
                    binary=True,  # numbers as they are stored, not as decimal text to parse
                ).fetchall()
                buried = 0  # due jobs that took up places without being leased
                if unleased := [row for row in rows if _ENDED(row) or _CANCELLED(row)]:  # rare
                    rows = [row for row in rows if not (_ENDED(row) or _CANCELLED(row))]
                    if ended := [CLAIMED.value(row, "id") for row in unleased if _ENDED(row)]:
                        con.execute(SQL["bury_due"], {"ids": ended, "now": now})
                    if cancelled := [CLAIMED.value(row, "id") for row in unleased if _CANCELLED(row)]:
                        con.execute(SQL["drop_cancelled"], {"ids": cancelled, "now": now})
                    buried += len(unleased)
                rows.sort(key=_CLAIM_ORDER)
                for row in rows:
                    lease = self._lease(con, row, now)
                    if lease is not None:
                        leases.append(lease)
                    else:
                        buried += 1
        return self._renewed_if_late(leases, now)

    def _renewed_if_late(self, leases: list[Lease], asked_at: float) -> list[Lease]:
        """``leases``, extended from now if their claim waited (a lock) past a third of its lease.

        The lease end was computed before the statement ran: a claim that waited long for a
        lock hands out leases already over or nearly, which another worker could take at
        once. Such leases are extended from now; one taken meanwhile is dropped (its new
        holder runs the job).
        """
        if not leases or self.clock.now() - asked_at < self.visibility_timeout_s / 3:
            return leases
        renewed = []
        for lease in leases:
            with suppress(StaleLeaseError):
                renewed.append(self.extend_lease(lease))
        return renewed

    def calls_block(self) -> bool:
        """Whether a :class:`~jobqueue.worker.Worker` should make this queue's calls in threads.

        Yes, unless the clock is a :class:`~jobqueue.clock.ManualClock`: a demo or a test
        drives time by hand, and its calls stay in order on one thread.
        """
        return not isinstance(self.clock, ManualClock)

    def _held_by(self, lease: Lease) -> dict[str, Any]:
        """The job and its lease, named by the lease token and the fencing token both.

        A claim lost in a server crash can hand its lease token out again (see
        :meth:`claim_many`), never its fencing token: so the holder of the crashed claim,
        which still holds the same lease token, is refused when it acks, fails, extends or
        gives back the new holder's lease.
        """
        return super()._held_by(lease) | {"fencing": lease.job.fencing_token}

    def _release_extras(self, delay_s: float) -> dict[str, Any]:
        """``wake``: a job given back due now wakes a listening worker; one deferred does not."""
        return {"wake": not delay_s}

    def _store_failure(self, con: psycopg.Connection[Any], lease: Lease, failed: Failed, now: float) -> None:
        """Inside the failure's transaction: the job waits for its retry, or is marked dead at ``now``."""
        held = self._held_by(lease) | {"error": failed.error}
        if failed.run_at is None:
            changed = con.execute(SQL["bury"], held | {"now": now}).fetchall()
        else:
            changed = con.execute(SQL["retry"], held | {"run_at": failed.run_at}).fetchall()
        if not changed:  # claimed again since the holder was read
            self._check_holder(con, lease)

    async def wait_for_work(self, timeout_s: float) -> bool:
        """Wait until a job is enqueued (a ``NOTIFY`` at its commit), at most ``timeout_s`` seconds.

        A :class:`~jobqueue.runner.Runner` calls this while its queue is empty, beside its
        poll, so a new job starts within milliseconds without polling faster. Uses a second
        connection that listens (``LISTEN``), opened on the first call.

        Returns:
            ``True`` if a notification arrived, or if this call had to start listening
            (jobs enqueued before then sent their notifications to nobody: look again);
            ``False`` after the timeout. A notification is a hint, not a promise: another
            worker may claim the job first.

        Raises:
            QueueUnavailableError: if the server cannot be reached.
        """
        self._check_open()
        if self.transaction_pooler:  # LISTEN would not stay on a pooled connection
            await asyncio.sleep(timeout_s)
            return False
        loop = asyncio.get_running_loop()
        try:
            if self._listener is None or self._listener.closed or self._listener_loop is not loop:
                if self._listener is not None:
                    self._listener.pgconn.finish()
                    self._listener = None
                listener = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                try:
                    await listener.execute(f"LISTEN {CHANNEL}")
                except BaseException:  # cancelled (the Runner does so routinely) or failed
                    listener.pgconn.finish()
                    raise
                # kept only once it listens: a connection cancelled before would never wake anyone
                self._listener, self._listener_loop = listener, loop
                return True  # the caller's last look came before the LISTEN: look again
            async with aclosing(self._listener.notifies(timeout=timeout_s, stop_after=1)) as notes:
                async for _ in notes:
                    return True
            return False
        except psycopg.OperationalError as exc:
            if self._listener is not None:
                self._listener.pgconn.finish()
            self._listener = None
            raise self._unavailable(exc) from exc

    # -- dead letters ------------------------------------------------------------------

    def _store_replay(self, con: psycopg.Connection[Any], job: Job) -> Sequence[Any]:
        """Mark the replayed ``job`` waiting again (its dead letter is locked); return its row."""
        values = {
            "attempts": job.attempts,
            "run_at": job.run_at,
            "expires_at": job.expires_at,
            "enqueued_at": job.enqueued_at,
            "id": job.id,
        }
        row: Sequence[Any] = con.execute(SQL["replay"], values).fetchall()[0]
        return row

    # -- looking inside ----------------------------------------------------------------

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter queue: jobs that will not be retried, oldest death first."""
        with self._connection() as con:
            rows = con.execute(SQL["dead_letters"]).fetchall()
        now = self.clock.now()
        return [read_dead(row, now) for row in rows]

    def __repr__(self) -> str:
        return f"PostgresQueue({self.server})"

    # -- internals ---------------------------------------------------------------------

    @contextmanager
    def _connection(self, conn: psycopg.Connection[Any] | None = None) -> Iterator[psycopg.Connection[Any]]:
        """The queue's connection (reconnecting if it was lost), or the caller's ``conn``.

        The queue's connection is in autocommit mode: each statement is a transaction of
        its own (one round trip), which is all most methods need, since each of their
        writes is one statement that checks what it relies on. On the caller's ``conn``
        nothing is committed here: the caller's transaction decides.
        """
        if conn is not None:
            yield conn
            return
        self._check_open()
        own = self._own()
        try:
            if isinstance(self.clock, ServerClock) and self.clock.sync_due():
                self.clock.sync(lambda: float(own.execute(SQL["server_time"]).fetchall()[0][0]))
            yield own
        except (psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName) as exc:
            raise InvalidSettingError(
                f"{self.server} lost this queue's prepared statements ({exc.sqlstate}): it looks"
                " like a pooler in transaction mode; open the queue with transaction_pooler=True"
                " (jobqueue's CLI: --transaction-pooler)"
            ) from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise QueuePrivilegeError(
                f"{self.server} refused this queue's role: {exc.diag.message_primary}. The role"
                " needs to create the jobqueue_ tables on first use, then SELECT, INSERT, UPDATE"
                " and DELETE on them and USAGE on their sequences"
            ) from exc
        except psycopg.errors.QueryCanceled as exc:
            raise QueueUnavailableError(
                f"{self.server} cancelled a statement of this queue after statement_timeout_s="
                f"{self.statement_timeout_s} s (a lock held elsewhere, or an overloaded server);"
                " nothing of it was kept"
            ) from exc
        except psycopg.OperationalError as exc:
            if not (own.broken or own.closed):
                raise  # the server answered (a cancelled query, say): not a lost connection
            own.close()
            with self._lock:
                self._lost += 1  # a restart took the other threads' connections too: reopen them
            raise self._unavailable(exc) from exc

    def _own(self) -> psycopg.Connection[Any]:
        """This thread's connection to the queue, opened (or opened again) as needed."""
        con: psycopg.Connection[Any] | None = getattr(self._local, "con", None)
        if con is not None and not con.closed and getattr(self._local, "lost", 0) == self._lost:
            return con
        if con is not None:
            con.close()  # opened before a connection was lost: likely lost too
        # Read before connecting: a connection another thread finds lost while this one
        # connects may have been lost with it, so this one must not count as opened after.
        lost = self._lost
        try:
            if self.transaction_pooler:  # no session state: see __init__
                con = psycopg.connect(
                    self._conninfo, autocommit=True, prepare_threshold=None, **self._connect_options
                )
            else:
                con = psycopg.connect(self._conninfo, autocommit=True, **self._connect_options)
                con.execute(SQL["generic_plans"].encode())  # three statements, no parameters
                if self.statement_timeout_s is not None:
                    ms = str(round(self.statement_timeout_s * 1000))
                    con.execute(SQL["set_statement_timeout"], {"ms": ms})
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        with self._lock:
            # The connections of threads that have ended are closed here: no thread can use
            # them again, and a server's worker threads come and go (anyio retires one idle
            # for 10 s), so they would pile up on the server until the queue closed.
            kept: list[tuple[threading.Thread, psycopg.Connection[Any]]] = []
            ended: list[psycopg.Connection[Any]] = []
            for thread, other in self._cons:  # one look at each thread: it may end meanwhile
                if not thread.is_alive():
                    ended.append(other)
                elif not other.closed:
                    kept.append((thread, other))
            self._cons = [*kept, (threading.current_thread(), con)]
        for other in ended:
            other.close()
        skip_scan = not self.transaction_pooler and con.info.server_version >= SKIP_SCAN_VERSION
        self._local.con, self._local.fenced, self._local.lost, self._local.skip_scan = (
            con,
            False,
            lost,
            skip_scan,
        )
        return con

    def _is_own(self, con: psycopg.Connection[Any]) -> bool:
        """Whether ``con`` is this thread's connection of the queue (not a caller's ``conn``)."""
        return con is getattr(self._local, "con", None)

    def _check_open(self) -> None:
        """Raise :class:`QueueUnavailableError` if the queue was closed."""
        if self._closed:
            raise QueueUnavailableError(f"the queue on {self.server} is closed")

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The queue's connection inside one transaction: committed at the end, or rolled back."""
        with self._connection() as con, con.transaction():
            yield con

    def _insert(
        self,
        con: psycopg.Connection[Any],
        job_type: JobType[P],
        rows: list[tuple[int, str | None, str]],
        results: dict[int, Enqueued],
        priority: int,
        window: float | None,
        queue: str,
    ) -> list[int]:
        """Insert ``(index, id or None, payload)`` rows in one statement; fill ``results`` by index.

        With a unique ``window`` (seconds), the ids are held as the ``enqueue`` statement says.

        Returns:
            The indexes to send again: a fresh ``job-N`` already taken by an id chosen by
            hand, or an id acked between the insert and its lookup.
        """
        policy = job_type.retry or self.retry
        now = self.clock.now()
        rows_of = con.cursor(row_factory=tuple_row)  # whatever the caller's connection's factory
        found = rows_of.execute(
            SQL["enqueue"],
            new_job_values(job_type, policy, now, priority, window, queue)
            | {
                "ids": [job_id for _, job_id, _ in rows],
                "payloads": [payload for _, _, payload in rows],
            },
            prepare=self._prepare(con),
        ).fetchall()
        again = []
        given_back = [
            ENQUEUED.value(row, "given_id")
            for row in found
            if ENQUEUED.value(row, "gated") and not ENQUEUED.value(row, "added")
        ]
        if given_back:  # rare: a job enqueued without a window holds the id
            rows_of.execute(SQL["unhold_live"], {"ids": given_back})
        for (index, wanted, payload), row in zip(rows, found, strict=True):
            job_id = ENQUEUED.value(row, "given_id")
            if ENQUEUED.value(row, "added"):
                new = job_type.new_job(
                    id=job_id,
                    payload=payload,
                    retry=policy,
                    now=now,
                    priority=priority,
                    unique_for_s=window,
                    queue=queue,
                )
                results[index] = Enqueued(job=new, added=True)
            elif wanted is None:
                again.append(index)  # a job-N already taken by a chosen id: draw another
            elif ENQUEUED.value(row, "id") is not None:
                results[index] = Enqueued(job=ENQUEUED.read(row), added=False)
            elif held := rows_of.execute(SQL["find"], {"ids": [job_id]}).fetchall():
                results[index] = Enqueued(job=JOB.read(held[0]), added=False)  # committed just after
            elif finished := self._held(rows_of, [job_id], now):
                results[index] = Enqueued(job=finished[job_id], added=False)  # in its unique window
            else:
                again.append(index)  # and acked since: the id is free again
        return again

    def _insert_fresh(
        self,
        con: psycopg.Connection[Any],
        job_type: JobType[P],
        payloads: list[str],
        results: dict[int, Enqueued],
        priority: int,
        queue: str,
    ) -> list[int]:
        """Insert jobs that all take fresh ids, on the queue's own connection; fill ``results``.

        One statement: ``enqueue_one`` for one job, ``enqueue_fresh`` for more.

        Returns:
            ``[]``, or every index when a fresh ``job-N`` was already taken by an id chosen
            by hand: the statement then wrote nothing, and the batch is for :meth:`_insert`.
        """
        policy = job_type.retry or self.retry
        now = self.clock.now()
        statement, values = (
            (SQL["enqueue_one"], {"payload": payloads[0]})
            if len(payloads) == 1
            else (SQL["enqueue_fresh"], {"payloads": payloads})
        )
        try:
            found = con.execute(
                statement,
                new_job_values(job_type, policy, now, priority, None, queue) | values,
                prepare=self._prepare(con),
            ).fetchall()
        except psycopg.errors.UniqueViolation:
            return list(range(len(payloads)))
        for index, ((job_id,), payload) in enumerate(zip(found, payloads, strict=True)):
            new = job_type.new_job(
                id=job_id, payload=payload, retry=policy, now=now, priority=priority, queue=queue
            )
            results[index] = Enqueued(job=new, added=True)
        return []

    def _unavailable(self, exc: psycopg.OperationalError) -> QueueUnavailableError:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return QueueUnavailableError(
            f"cannot reach {self.server}, or lost the connection to it ({reason}); the next call"
            " connects again"
        )

    def _lease(self, con: psycopg.Connection[Any], row: Sequence[Any], now: float) -> Lease | None:
        """The lease of a claimed ``row`` (of :data:`CLAIMED`); ``None`` if unreadable.

        An unreadable row (corrupted in the table) is dead-lettered with the reason.
        """
        try:
            return Lease.of(CLAIMED.job(row), _LEASE_TOKEN_OF(row))
        except CorruptJobError as exc:
            self._bury_corrupt(con, salvage(CLAIMED.job_row(row), exc), now)
            return None

    def _finish_cancelled(
        self, con: psycopg.Connection[Any], leases: Sequence[Lease], now: float, error: str | None
    ) -> set[str]:
        """Move the jobs held under ``leases`` and cancelled to ``jobqueue_finished``, one statement."""
        held = {
            "ids": [lease.job.id for lease in leases],
            "tokens": [lease.token for lease in leases],
            "fencings": [lease.job.fencing_token for lease in leases],
            "now": now,
            "error": error,
        }
        rows = con.execute(SQL["finish_cancelled"], held).fetchall()
        return {token for (token,) in rows}

    def _mark_cancelled(self, con: psycopg.Connection[Any], job_id: str) -> None:
        """Mark the leased job ``job_id`` (locked by ``cancel_lock``) cancelled."""
        con.execute(SQL["mark_cancelled"], {"id": job_id})

    def _cancel_waiting(self, con: psycopg.Connection[Any], job_id: str, now: float) -> None:
        """Move the waiting job ``job_id`` (locked by ``cancel_lock``) to ``jobqueue_finished``."""
        con.execute(SQL["cancel_waiting"], {"id": job_id, "now": now})

    def _bury_corrupt(self, con: psycopg.Connection[Any], job: Job, now: float) -> None:
        """Dead-letter the job whose row could not be read, as its salvaged stand-in ``job``."""
        con.execute(SQL["bury_unreadable"], stored_values(job) | {"now": now})

    def _delete_acked(self, con: psycopg.Connection[Any], leases: Sequence[Lease], now: float) -> set[str]:
        """Delete the jobs held under ``leases`` (id and token both match); return the tokens acked.

        With ``retain_s``, one statement (``ack_keep``) moves them to ``jobqueue_finished``.
        One lease without it: ``ack_one``, its values without lists.
        """
        if not self.retain_s and len(leases) == 1:
            (lease,) = leases
            statement, values = SQL["ack_one"], self._held_by(lease)
        else:
            values = {
                "ids": [lease.job.id for lease in leases],
                "tokens": [lease.token for lease in leases],
                "fencings": [lease.job.fencing_token for lease in leases],
            }
            statement = SQL["ack"]
            if self.retain_s:
                statement, values = SQL["ack_keep"], values | {"now": now}
        rows = con.execute(statement, values, prepare=self._prepare(con)).fetchall()
        return {token for (token,) in rows}

    def _prepare(self, con: psycopg.Connection[Any]) -> bool | None:
        """Whether to prepare a hot statement (enqueue, claim, ack) on ``con`` from its first run.

        On the queue's own connection, yes: psycopg would prepare it only at its sixth run,
        and until then the server plans the statement's CTEs afresh every time (measured:
        0.8 ms to plan a claim of 100 jobs that took 2 ms to run), and a worker that claims
        a few batches never gets there. That connection also plans each prepared statement
        once (``generic_plans`` in ``postgres.sql``). On a caller's connection (``conn=``),
        psycopg's setting decides (it may be off, for a pooler that cannot keep prepared
        statements). Behind a transaction pooler (``transaction_pooler``), never.
        """
        if self.transaction_pooler:
            return False
        return True if self._is_own(con) else None

    # -- the dashboard's reads (ShowsOverview) ------------------------------------------

    def census(self, *, exact_up_to: int = EXACT_UP_TO) -> Census:
        """The jobs by type and state now, each state exact up to ``exact_up_to`` jobs, else estimated.

        Each state is counted one by one, through an index where one serves, until it
        holds more than ``exact_up_to`` jobs (waiting; scheduled and leased together;
        dead); such a state is estimated from a sample of about :data:`SAMPLED_ROWS` rows
        of the table (``TABLESAMPLE SYSTEM``) and named in :attr:`Census.estimated`. So a
        refresh reads a bounded number of rows however long the backlog
        (``benchmarks/dashboard_refresh.py``: 1,000,000 jobs waiting).

        Raises:
            InvalidSettingError: if ``exact_up_to`` is not an int >= 1.
        """
        check_count("exact_up_to", exact_up_to)
        now = self.clock.now()
        with self._connection() as con:
            rows = con.execute(SQL["census_bounded"], {"now": now, "bound": exact_up_to + 1}).fetchall()
            estimated = _overflowing(rows, exact_up_to)
            if estimated:
                pages, rows_per_page = con.execute(SQL["table_pages"]).fetchall()[0]
                percent = _sample_percent(int(pages), float(rows_per_page), rows=SAMPLED_ROWS)
                sampled = con.execute(SQL["census_sampled"], {"now": now, "percent": percent}).fetchall()
                rows = [row for row in rows if row[0] not in estimated]
                rows += [row for row in sampled if row[0] in estimated]
            oldest = con.execute(SQL["oldest_waiting"], {"now": now}).fetchall()[0][0]
            enqueued = None  # with a count estimated, finding it would read every job
            if not estimated:
                enqueued = float(con.execute(SQL["oldest_enqueued"], {"now": now}).fetchall()[0][0])
        by_type, by_queue = tally_by_queue(rows)
        return Census(
            at=now,
            by_type=by_type,
            by_queue=by_queue,
            estimated=estimated,
            oldest_waiting_age_s=float(oldest),
            oldest_enqueued_age_s=enqueued,
        )

    # -- cleanup held back (ReportsCleanup) ----------------------------------------------

    def cleanup_held_back(self, *, warn_after_s: float = WARN_AFTER_S) -> CleanupReport:
        """The oldest transaction of another session holding back vacuum, and the table's dead rows.

        One statement on ``pg_stat_activity`` and ``pg_stat_user_tables`` (block
        ``cleanup_held_back`` of ``postgres.sql``); this queue's own session is left out.
        Ages are seconds on the server's clock, whatever the queue's clock. Sessions of
        another role are seen only if this queue's role has ``pg_read_all_stats``. See
        :mod:`jobqueue.cleanup`.

        Args:
            warn_after_s: the age, in seconds (> 0), past which the report warns
                (:attr:`CleanupReport.warning`).

        Raises:
            InvalidSettingError: if ``warn_after_s`` is not a finite number > 0.
            QueueUnavailableError: if the server cannot be reached.
        """
        check_positive_seconds("warn_after_s", warn_after_s)
        with self._connection() as con:
            dead, live, autovacuum_age, pid, name, state, age = con.execute(
                SQL["cleanup_held_back"]
            ).fetchall()[0]
        oldest = (
            None
            if pid is None
            else OpenTransaction(pid=pid, application_name=name, state=state, age_s=float(age))
        )
        return CleanupReport(
            oldest=oldest,
            dead_rows=int(dead),
            live_rows=int(live),
            last_autovacuum_age_s=None if autovacuum_age is None else float(autovacuum_age),
            warn_after_s=float(warn_after_s),
        )


def _claim_statement(
    limit: int, typed: bool, queues: frozenset[str] | None, *, skip_scan: bool
) -> tuple[str, list[str] | None]:
    """The claim of ``limit`` jobs with a filter (by type if ``typed``; from ``queues``), and its queue names.

    A claim of one job has statements of its own (``claim_one``: ``lease_one`` in ``postgres.sql``).
    With ``skip_scan`` (a server of :data:`SKIP_SCAN_VERSION` or later, on the queue's own
    connection, not behind a transaction pooler), the claim reads the claim index in its own
    order; without, one priority at a time (``_by_priority``).
    """
    kind = ("claim_one" if limit == 1 else "claim") + ("" if skip_scan else "_by_priority")
    names = None
    if queues is not None:
        # One named queue: its own index. 'default', which that index leaves out, or several
        # queues: the claim index, passing over the other queues' due jobs.
        kind += "_queue" if len(queues) == 1 and DEFAULT_QUEUE not in queues else "_queues"
        names = sorted(queues)
    return SQL[f"{kind}_types" if typed else kind], names


_CLAIM_ORDER = CLAIMED.getter("serial")
"""Sort key of a row of the claim that leased a job: its new serial, which the claim gave in claim order."""

_LEASE_TOKEN_OF = CLAIMED.getter("lease_token")
"""The lease token of a row of the claim."""

_ENDED, _CANCELLED = CLAIMED.getter("ended"), CLAIMED.getter("cancelled")
"""Whether a row of the claim is a job to bury, or one to drop as cancelled (neither: leased)."""


def describe_server(conninfo: str) -> str:
    """Name the server and database of ``conninfo`` for messages, never its password.

    >>> describe_server("postgresql://app:secret@db.example:5433/shop")
    'PostgreSQL at db.example:5433, database shop'

    Raises:
        InvalidSettingError: if ``conninfo`` is not a valid URL or ``key=value`` string (the
            message shows it with its password hidden), or not a str at all (``None`` from
            an unset environment variable, say).
    """
    if not isinstance(conninfo, str):
        raise InvalidSettingError(
            f"a PostgreSQL URL or conninfo string is needed, got {conninfo!r}"
            " (an unset environment variable?)"
        )
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        shown = str(exc).strip().replace(conninfo, hide_password(conninfo))
        raise InvalidSettingError(f"not a PostgreSQL URL or conninfo string: {shown}") from None
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    database = params.get("dbname") or params.get("user") or "postgres"
    return f"PostgreSQL at {host}:{port}, database {database}"


KEEPALIVE_INTERVAL_S = 10
"""Seconds between TCP keepalive probes of a silent connection."""

KEEPALIVE_COUNT = 3
"""Unanswered keepalive probes after which the connection counts as lost."""


def _connect_options(conninfo: str, *, connect_timeout_s: float, keepalive_idle_s: float) -> dict[str, Any]:
    """The libpq settings of the queue's connections: a connect timeout and TCP keepalives.

    A setting ``conninfo`` gives itself is left to it.
    """
    given = conninfo_to_dict(conninfo)
    options: dict[str, Any] = {
        "connect_timeout": max(2, round(connect_timeout_s)),  # libpq: whole seconds, at least 2
        "keepalives": 1,
        "keepalives_idle": max(1, round(keepalive_idle_s)),
        "keepalives_interval": KEEPALIVE_INTERVAL_S,
        "keepalives_count": KEEPALIVE_COUNT,
    }
    return {key: value for key, value in options.items() if key not in given}


def hide_password(conninfo: str) -> str:
    """``conninfo`` with its password, if any, replaced by ``***``, for messages.

    >>> hide_password("postgresql://app:s3cret@db/shop")
    'postgresql://app:***@db/shop'
    >>> hide_password("host=db password='s e' user=app")
    'host=db password=*** user=app'
    """
    conninfo = re.sub(r"(://[^/@]*?:)[^@/]*@", r"\1***@", conninfo)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", conninfo)


def _create_schema(con: psycopg.Connection[Any], server: str) -> None:
    """Create the ``jobqueue_`` tables in an empty database, or check those found.

    An empty database gets every migration in this one transaction, under an advisory lock
    held to its end (its tables are empty: nothing waits). Tables of an older version are
    never migrated here, where a deploy's first process would rebuild indexes under live
    traffic: that is :func:`migrate`'s explicit step. A queue opened on current tables
    takes no lock.

    Raises:
        QueueSchemaError: naming the server and both versions, if the tables are of an
            older version (and the command that migrates them) or a newer one; or if
            ``jobqueue_`` tables were not made by jobqueue, or some are missing.
    """
    versions = _versions(con)
    if not versions:
        con.execute(SQL["lock_schema"])
        versions = _versions(con)  # another process may have made them meanwhile
        if not versions and (found := _relations(con)):  # under the lock: nobody is making them
            raise QueueSchemaError(
                f"{server} holds {', '.join(found)} but no jobqueue_schema: jobqueue did not make"
                " them (another application's?); use another database or schema, nothing was changed"
            )
        if not versions:
            for step in sql.migrations(SQL, 0):
                con.execute(step.encode())  # several statements, no parameters
            versions = _versions(con)
    if len(versions) == 1 and versions[0] < SCHEMA_VERSION:
        raise QueueSchemaError(
            f"{server} holds jobqueue tables of schema version {versions[0]}, and this jobqueue"
            f" reads version {SCHEMA_VERSION}: migrate them first, as a step of the deploy"
            " (`jobqueue migrate URL`, or jobqueue.backends.postgres.migrate(url))"
        )
    if versions != [SCHEMA_VERSION]:
        raise QueueSchemaError(
            f"{server} holds jobqueue tables of schema version {versions}, and this jobqueue"
            f" reads version {SCHEMA_VERSION}: use a matching jobqueue, or another database"
        )
    if missing := sorted(QUEUE_RELATIONS - set(_relations(con))):
        raise QueueSchemaError(
            f"{server} records jobqueue schema version {SCHEMA_VERSION}, but {', '.join(missing)}"
            " is gone: restore it from a backup, or drop the jobqueue_ tables to start afresh"
        )


MIGRATE_TURN_S = 0.1
"""Seconds between two tries of a :func:`migrate` waiting for another to finish."""


@dataclass(frozen=True)
class MigrationStatement:
    """One statement of a migration as :func:`migrate` runs it.

    ``version`` is the migration's number. ``index`` names the index a statement builds
    or drops: such a statement runs alone, outside any transaction (``CONCURRENTLY``, as
    PostgreSQL requires); the others run in a transaction with their neighbours.
    """

    version: int
    sql: str
    index: str | None = None


_INDEX = re.compile(r"^(CREATE|DROP) (UNIQUE )?INDEX (\w+)")


def migration_plan(version: int) -> list[MigrationStatement]:
    """The statements that take tables of ``version`` to :data:`SCHEMA_VERSION`, in order.

    The ``migration_N`` blocks of ``postgres.sql`` are written as plain SQL (an empty
    database runs them as they are, in one transaction). On live tables an index is built
    with ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` and dropped with ``DROP INDEX
    CONCURRENTLY IF EXISTS``: neither blocks claims, acks or enqueues meanwhile, and a
    migration cut short can be run again.
    """
    plan = []
    for number, step in sql.numbered_migrations(SQL, version):
        for statement in re.split(r";[ \t]*(?:--[^\n]*)?(?:\n|$)", step):
            lines = [line for line in statement.splitlines() if not line.lstrip().startswith("--")]
            text = "\n".join(lines).strip()
            index = _INDEX.match(text)
            if not text:
                continue
            if index is None:
                plan.append(MigrationStatement(number, text))
            else:
                how = (
                    f"CREATE {index[2] or ''}INDEX CONCURRENTLY IF NOT EXISTS"
                    if index[1] == "CREATE"
                    else "DROP INDEX CONCURRENTLY IF EXISTS"
                )
                plan.append(MigrationStatement(number, f"{how} {index[3]}{text[index.end() :]}", index[3]))
    return plan


def migrate(
    conninfo: str, *, lock_timeout_s: float = 10.0, log: Callable[[str], object] | None = None
) -> list[int]:
    """Bring the ``jobqueue_`` tables at ``conninfo`` to :data:`SCHEMA_VERSION`: a deploy's step.

    Run it once, before the new code's workers start (``jobqueue migrate URL``). An empty
    database gets the tables as a queue would make them. Live tables are changed one
    migration at a time: indexes are built and dropped concurrently (see
    :func:`migration_plan`), and every other statement waits at most ``lock_timeout_s``
    seconds for its table lock, so a long transaction elsewhere makes the migration fail
    (run it again later) instead of queueing every claim behind it. Two ``migrate`` calls
    at once take turns (a session advisory lock).

    Args:
        conninfo: where the database is (as :class:`PostgresQueue` takes it).
        lock_timeout_s: seconds a statement waits for a table lock (> 0).
        log: called with a line per migration applied (``print`` will do).

    Returns:
        The versions applied, in order (``[]``: the tables were current).

    Raises:
        QueueSchemaError: if the tables are of a newer version, or not jobqueue's.
        QueueUnavailableError: if the server cannot be reached, or a lock did not come
            within ``lock_timeout_s`` (nothing of that migration's version is recorded;
            running again resumes it).
        InvalidSettingError: if ``lock_timeout_s`` is not a finite number > 0.
    """
    check_positive_seconds("lock_timeout_s", lock_timeout_s)
    server = describe_server(conninfo)
    try:
        con = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise QueueUnavailableError(f"cannot reach {server}: {str(exc).strip()}") from exc
    with con:
        # A session lock, held until the connection closes, taken by trying: a statement
        # waiting for it would be a transaction that the other's CREATE INDEX CONCURRENTLY
        # waits for in turn (a deadlock).
        while not con.execute(SQL["lock_migrations"]).fetchall()[0][0]:
            time.sleep(MIGRATE_TURN_S)
        con.execute(SQL["set_lock_timeout"], {"ms": str(round(lock_timeout_s * 1000))})
        before = _versions(con)
        if before and before[0] < SCHEMA_VERSION and len(before) == 1:
            try:
                _run_plan(con, migration_plan(before[0]))
            except psycopg.errors.LockNotAvailable as exc:
                raise QueueUnavailableError(
                    f"{server}: a table lock did not come within {lock_timeout_s:g} s"
                    f" ({exc.diag.message_primary}); a long transaction holds it: migrate again once it ends"
                ) from exc
        with con.transaction():
            _create_schema(con, server)  # makes the tables of an empty database; checks the rest
        applied = [number for number, _ in sql.numbered_migrations(SQL, before[0] if before else 0)]
        if log is not None:
            for number in applied:
                log(f"{server}: jobqueue tables at schema version {number}")
        return applied


def _run_plan(con: psycopg.Connection[Any], plan: list[MigrationStatement]) -> None:
    """Run ``plan`` on ``con`` (autocommit): index statements alone, the rest in transactions."""
    pending: list[MigrationStatement] = []
    for statement in [*plan, None]:
        if statement is not None and statement.index is None:
            pending.append(statement)
            continue
        if pending:
            with con.transaction():
                for queued in pending:
                    con.execute(queued.sql.encode())
            pending = []
        if statement is None:
            return
        index = psycopg.sql.Identifier(statement.index or "")
        if (
            statement.sql.startswith("CREATE")
            and con.execute(SQL["invalid_index"], {"name": statement.index}).fetchall()
        ):
            # a concurrent build cut short leaves an invalid index behind: build it anew
            con.execute(psycopg.sql.SQL("DROP INDEX CONCURRENTLY {}").format(index))
        con.execute(statement.sql.encode())


QUEUE_RELATIONS = frozenset(
    {
        "jobqueue_schema",
        "jobqueue_jobs",
        "jobqueue_outcomes",
        "jobqueue_outcomes_by_key",
        "jobqueue_finished",
        "jobqueue_held",
        "jobqueue_serial",
        "jobqueue_lease",
        "jobqueue_job_id",
        "jobqueue_fencing",
    }
)
"""The tables and sequences of the current schema version: each must be there."""


def _relations(con: psycopg.Connection[Any]) -> list[str]:
    """The tables and sequences of the current schema whose names start ``jobqueue_``."""
    return [row[0] for row in con.execute(SQL["queue_relations"]).fetchall()]


def _versions(con: psycopg.Connection[Any]) -> list[int]:
    """The versions recorded in ``jobqueue_schema`` (one, normally); ``[]`` if there are no tables."""
    if not con.execute(SQL["has_schema"]).fetchall()[0][0]:
        return []
    return [version for (version,) in con.execute(SQL["schema_version"]).fetchall()]


SAMPLED_ROWS = 20_000
"""Rows a census that estimates reads, about. The sample is of whole pages, so its spread is
about 1 / sqrt(pages read): some 5 % with 20,000 rows of about 60 a page, which the page
shows as an estimate to 3 digits. Measured with 1,000,000 jobs waiting: a refresh took
51 ms and counted 954,494 (4.5 % low); with 50,000 rows, 190 ms on a busier machine and
1,038,322 (3.8 % high): not worth its time."""

_RANGES: tuple[frozenset[State], ...] = (
    frozenset({"waiting"}),
    frozenset({"scheduled", "leased"}),
    frozenset({"dead"}),
)
"""The states ``census_bounded`` counts together, each range up to its bound."""


def _overflowing(rows: Sequence[Sequence[Any]], exact_up_to: int) -> frozenset[State]:
    """The states of the ranges in which ``census_bounded`` found more than ``exact_up_to`` jobs."""
    over: set[State] = set()
    for states in _RANGES:
        if sum(row[3] for row in rows if row[0] in states) > exact_up_to:
            over |= states
    return frozenset(over)


def _sample_percent(pages: int, rows_per_page: float, *, rows: int) -> float:
    """The share of the table's ``pages``, in per cent, to sample: about ``rows`` rows, at least 100 pages.

    ``rows_per_page`` comes from the last ANALYZE; before one, 50 (a job row takes about
    150 bytes of an 8 kB page) is assumed. The estimate is unbiased whatever the share;
    its spread shrinks with the rows sampled, and a sample of few pages would swing with
    the page it happens to take, so a table of 100 pages or fewer is read whole.
    """
    expected = max(pages, 1) * (rows_per_page or 50.0)
    return min(100.0, max(100.0 * _LEAST_SAMPLED_PAGES / max(pages, 1), 100.0 * rows / expected))


_LEAST_SAMPLED_PAGES = 100
"""Pages a sampled census reads at least (about 5,000 jobs)."""
