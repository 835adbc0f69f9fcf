"""The numbers to watch on a running queue: backlog, lag, failure rate, dead letters.

A queue that is falling behind shows it first in the *age of the oldest waiting job*
(how long work has been ready without a worker taking it), then in the count of waiting
jobs; a broken dependency shows in the *failure rate*; and every *dead letter* is a job
someone has to look at. A *stuck* job (a handler that never returns while its heartbeat
keeps the lease alive) shows in none of these: it shows in the *age of the oldest leased
job*, counted from its claim. SQS publishes the counts as ``ApproximateNumberOfMessagesVisible``
and ``NotVisible``, and Sidekiq's and BullMQ's dashboards put the same figures first.

The age here is measured from when the job last became claimable (enqueued, retry delay
over, lease expired, given back): it says how far the workers lag behind the work that is
ready. SQS's ``ApproximateAgeOfOldestMessage`` counts from the first send instead, so it
also grows while a message waits out retries: that is the *age since enqueue*, reported
beside it, which keeps growing during an outage while every job waits out a backoff (when
the age since it became claimable stays near 0).

A job a :class:`~jobqueue.runner.Runner` has claimed ahead (its ``prefetch``, on by default)
is leased from its claim, though it has not started: it is not *waiting*, so neither
waiting age sees its wait, and the age of the oldest leased job counts that wait as well
as its run. So a stuck-job limit must exceed the longest a job waits in a prefetch plus its
run (about ``1 + prefetch / concurrency`` times the slowest normal run), and the ages are
read with the prefetch in mind: a runner's claimed-ahead jobs can be late unseen.

Both queues report these with ``queue.metrics(window_s)``; the failure rate counts the
acks and fails each queue records in one-second buckets, per job type and named queue
(:class:`OutcomeLog`; the database queues write theirs to a table once a second through
:class:`PendingOutcomes`). The dashboard shows the counts per type and per queue; the
metrics add them up.

Introduced in lesson 11.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobqueue.errors import InvalidSettingError
from jobqueue.job import Job, check_positive_seconds

DEFAULT_WINDOW_S = 300.0
"""Window of the failure rate, in seconds (5 minutes)."""

RETENTION_S = 86_400.0
"""How far back outcomes are kept, in seconds (one day); the longest window allowed."""


@dataclass(frozen=True, kw_only=True)
class QueueMetrics:
    """A snapshot of one queue's health at time ``at`` (seconds on the queue's clock).

    Attributes:
        at: when the snapshot was taken.
        waiting: jobs a worker could claim now (new, retry delay over, or lease expired).
        scheduled: jobs waiting out a retry delay.
        leased: jobs held by a worker under an unexpired lease.
        oldest_waiting_age_s: how long the longest-waiting claimable job has been
            claimable, in seconds; ``0.0`` when none is waiting. Growing means the workers
            are not keeping up.
        oldest_leased_age_s: how long the longest-held unexpired lease has been held,
            since its claim (heartbeats do not reset it), in seconds; ``0.0`` when none is
            leased. The stuck-job alarm: a handler that never returns, kept alive by its
            heartbeat, shows here and nowhere else. A job waiting in a runner's prefetch
            counts here from its claim too (see above).
        oldest_enqueued_age_s: how long ago the oldest job not under a lease (waiting,
            or scheduled: waiting out a backoff or a delay) was enqueued, in seconds;
            ``0.0`` when there is none. Retries and releases keep a job's enqueue time, so
            this grows through an outage in which every job is in backoff (SQS's
            ``ApproximateAgeOfOldestMessage``). A job stored before the queue recorded
            enqueue times counts from its ``run_at``. A job a runner has claimed ahead is
            under a lease, so it is left out here (see above).
        window_s: the window of ``done`` and ``failed``, in seconds before ``at``.
        done: attempts acked within the window.
        failed: attempts failed within the window (retried or dead-lettered).
        dead_letters: jobs in the dead-letter queue now.
        cancelled: cancelled jobs the queue keeps now (with the finished jobs, a day at
            least: see :data:`~jobqueue.backends.rules.KEEP_CANCELLED_S`); ``0`` in a
            snapshot built without it, such as a worker's stats file written before it
            was counted.

    Introduced in lesson 11; ``cancelled`` with cancelling (issue 24).
    """

    at: float
    waiting: int
    scheduled: int
    leased: int
    oldest_waiting_age_s: float
    oldest_leased_age_s: float
    oldest_enqueued_age_s: float = 0.0
    window_s: float
    done: int
    failed: int
    dead_letters: int
    cancelled: int = 0

    @classmethod
    def from_row(cls, at: float, window_s: float, row: Sequence[Any]) -> QueueMetrics:
        """Build a snapshot from a database row, as the DuckDB and PostgreSQL queues read it.

        Args:
            at: when the row was read, seconds on the queue's clock.
            window_s: the window of ``done`` and ``failed``, seconds.
            row: ``(waiting, scheduled, leased, oldest_waiting_age_s, oldest_leased_age_s,
                oldest_enqueued_age_s, dead_letters, done, failed, cancelled)``, each a number of
                whatever type the database returns (a PostgreSQL ``sum`` is a ``Decimal``),
                converted here.
        """
        (
            waiting,
            scheduled,
            leased,
            oldest_s,
            oldest_leased_s,
            oldest_enqueued_s,
            dead,
            done,
            failed,
            cancelled,
        ) = row
        return cls(
            at=at,
            waiting=int(waiting),
            scheduled=int(scheduled),
            leased=int(leased),
            oldest_waiting_age_s=float(oldest_s),
            oldest_leased_age_s=float(oldest_leased_s),
            oldest_enqueued_age_s=float(oldest_enqueued_s),
            window_s=window_s,
            done=int(done),
            failed=int(failed),
            dead_letters=int(dead),
            cancelled=int(cancelled),
        )

    @property
    def failure_rate(self) -> float:
        """Failed attempts as a share of finished ones in the window, 0.0 to 1.0 (0.0 if none)."""
        finished = self.done + self.failed
        return self.failed / finished if finished else 0.0

    def __str__(self) -> str:
        rows = [
            ("waiting", f"{self.waiting}"),
            ("scheduled (retry delay)", f"{self.scheduled}"),
            ("leased", f"{self.leased}"),
            ("oldest waiting job", f"{self.oldest_waiting_age_s:.1f} s"),
            ("oldest leased job", f"{self.oldest_leased_age_s:.1f} s"),
            ("oldest since enqueue", f"{self.oldest_enqueued_age_s:.1f} s"),
            (
                f"failure rate, last {self.window_s:g} s",
                f"{self.failure_rate:.0%} ({self.failed} failed, {self.done} done)",
            ),
            ("dead letters", f"{self.dead_letters}"),
            ("cancelled", f"{self.cancelled}"),
        ]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def check_window(window_s: float) -> float:
    """Return ``window_s`` if it is a number of seconds > 0 and at most :data:`RETENTION_S`.

    Raises:
        InvalidSettingError: naming the bad value.
    """
    check_positive_seconds("window_s", window_s)
    if window_s > RETENTION_S:
        raise InvalidSettingError(
            f"window_s must be at most {RETENTION_S:g} s (the outcomes kept), got {window_s!r}"
        )
    return window_s


def bucket(at: float) -> int:
    """The one-second bucket an outcome at time ``at`` (seconds) is counted in."""
    return math.floor(at)


OutcomeKey = tuple[str, str]
"""``(job type, queue name)``: what an outcome is counted under, besides its second.

Outcomes stored before they were counted by type and queue (a database migrated from an
older version) are under :data:`UNKNOWN`."""

UNKNOWN: OutcomeKey = ("", "")
"""The key of outcomes counted before they were counted by type and queue: in the totals only."""


def outcome_key(job: Job) -> OutcomeKey:
    """What an ack or a failure of ``job`` is counted under: its type and its named queue."""
    return (job.type, job.queue)


@dataclass(frozen=True)
class OutcomeSums:
    """The acked and failed attempts of a span of seconds, added up two ways: a chart's and a table's.

    Attributes:
        per_second: ``(second, done, failed)`` for each one-second bucket with an outcome,
            every job type and queue together, oldest first (seconds since the epoch on the
            queue's clock, rounded down).
        per_key: ``(job type, queue, done, failed)`` for each :data:`OutcomeKey` with an
            outcome in the span, sorted by type and queue; outcomes counted before they were
            counted by type and queue come under :data:`UNKNOWN`.
    """

    per_second: list[tuple[int, int, int]]
    per_key: list[tuple[str, str, int, int]]


class OutcomeLog:
    """Counts of acked and failed attempts per one-second bucket and per job type and queue, for the last day.

    Used by :class:`~jobqueue.backends.memory.JobQueue`; the durable queues keep the same buckets in
    a table. Memory is bounded: one entry per second and :data:`OutcomeKey` that saw an
    outcome, for at most :data:`RETENTION_S` seconds.
    """

    def __init__(self) -> None:
        self._buckets: dict[int, dict[OutcomeKey, list[int]]] = {}

    def record(self, at: float, key: OutcomeKey, *, failed: bool, count: int = 1) -> None:
        """Count ``count`` outcomes of ``key`` at ``at`` seconds, and forget buckets older than a day."""
        counts = self._buckets.setdefault(bucket(at), {}).setdefault(key, [0, 0])
        counts[1 if failed else 0] += count
        # A window of RETENTION_S needs RETENTION_S + 1 buckets; trimming only beyond that
        # scans the buckets once per new second, not on every record.
        if len(self._buckets) > RETENTION_S + 1:
            horizon = bucket(at - RETENTION_S)
            for old in [second for second in self._buckets if second < horizon]:
                del self._buckets[old]

    def rows(self) -> list[tuple[int, str, str, int, int]]:
        """Every count as ``(second, job type, queue, done, failed)``, in that order."""
        return sorted(
            (second, *key, done, failed)
            for second, keys in self._buckets.items()
            for key, (done, failed) in keys.items()
        )

    def sums(self, since: int, until: int) -> OutcomeSums:
        """The counts of the seconds ``since`` to ``until`` (both in), added up by second and by key."""
        per_second = []
        per_key: dict[OutcomeKey, list[int]] = {}
        # the span's buckets only, then sorted: the log keeps a day of them, a chart reads minutes
        for second, keys in sorted(item for item in self._buckets.items() if since <= item[0] <= until):
            per_second.append(
                (second, sum(ok for ok, _ in keys.values()), sum(bad for _, bad in keys.values()))
            )
            for key, (ok, bad) in keys.items():
                counts = per_key.setdefault(key, [0, 0])
                counts[0] += ok
                counts[1] += bad
        return OutcomeSums(
            per_second=per_second, per_key=[(*key, ok, bad) for key, (ok, bad) in sorted(per_key.items())]
        )

    def clear(self) -> None:
        """Forget every count (once they are stored elsewhere)."""
        self._buckets.clear()

    def counts(self, now: float, window_s: float) -> tuple[int, int]:
        """``(done, failed)`` of every type and queue in the buckets from ``now - window_s`` to ``now``."""
        start = bucket(now - window_s)
        done = failed = 0
        for second, keys in self._buckets.items():
            if start <= second <= now:
                for ok, bad in keys.values():
                    done, failed = done + ok, failed + bad
        return done, failed


class PendingOutcomes:
    """Outcomes a database queue has counted but not yet written to its outcomes table.

    The DuckDB and PostgreSQL queues count acks and failures in memory and write them once a
    second, one upsert a second instead of one per ack: an upsert costs DuckDB several
    milliseconds. A crash loses at most a second of counts, which only the metrics read.
    It counts and writes under the queue's own ``lock``, so threads may share the queue.

    The queue passes its ``store`` on each call rather than at construction, so that this
    object holds no reference back to the queue: a queue nobody refers to any more is freed
    at once (and a DuckDB queue's file released), not at the next garbage collection.
    ``store(columns, before)`` adds the counts to the table in one transaction: ``columns``
    maps ``"seconds"``, ``"types"``, ``"queues"``, ``"done"`` and ``"failed"`` to lists with
    one entry per one-second bucket and :data:`OutcomeKey`, sorted (so that two processes
    adding to the same rows lock them in the same order); rows older than the second
    ``before`` may go.
    """

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._log = OutcomeLog()
        self._written_at: int | None = None

    def record(
        self, now: float, counts: Mapping[OutcomeKey, int], *, failed: bool, store: StoreOutcomes
    ) -> None:
        """Count the outcomes ``counts`` (how many per key) at ``now`` (seconds); write once a second.

        ``failed``: they are failures, else acks. A batch is counted once per key, not per job.
        """
        with self._lock:
            for key, count in counts.items():
                self._log.record(now, key, failed=failed, count=count)
            if bucket(now) != self._written_at:
                self.write(now, store)

    def write(self, now: float, store: StoreOutcomes) -> None:
        """Store the pending counts now. They leave memory only once ``store`` has returned."""
        with self._lock:
            rows = self._log.rows()
            if rows:
                seconds, types, queues, done, failed = (list(column) for column in zip(*rows, strict=True))
                store(
                    {"seconds": seconds, "types": types, "queues": queues, "done": done, "failed": failed},
                    bucket(now - RETENTION_S),
                )
                self._log.clear()
            self._written_at = bucket(now)


StoreOutcomes = Callable[[dict[str, list[Any]], int], None]
"""``store(columns, before)``: how a database queue writes :class:`PendingOutcomes`."""


def measure(
    live: Iterable[Job],
    *,
    now: float,
    window_s: float,
    done: int,
    failed: int,
    dead_letters: int,
    cancelled: int,
) -> QueueMetrics:
    """Build a :class:`QueueMetrics` from the records of every waiting or leased job and the counts given."""
    waiting = scheduled = leased = 0
    oldest_s = oldest_leased_s = oldest_enqueued_s = 0.0
    for job in live:
        if job.leased_until is not None and job.leased_until > now:
            leased += 1
            if job.leased_at is not None:
                oldest_leased_s = max(oldest_leased_s, now - job.leased_at)
            continue
        enqueued_at = job.run_at if job.enqueued_at is None else job.enqueued_at
        oldest_enqueued_s = max(oldest_enqueued_s, now - enqueued_at)
        if job.visible_at() > now:
            scheduled += 1
        else:
            waiting += 1
            oldest_s = max(oldest_s, now - job.visible_at())
    return QueueMetrics(
        at=now,
        waiting=waiting,
        scheduled=scheduled,
        leased=leased,
        oldest_waiting_age_s=oldest_s,
        oldest_leased_age_s=oldest_leased_s,
        oldest_enqueued_age_s=oldest_enqueued_s,
        window_s=window_s,
        done=done,
        failed=failed,
        dead_letters=dead_letters,
        cancelled=cancelled,
    )
