"""One picture of a running queue, for the dashboard and the notebook widget alike.

:func:`snapshot` asks a queue for what an operator looks at first: the jobs by type and
state (:class:`~jobqueue.census.Census`) with the attempts done and failed by type and by
queue (:class:`Row`), throughput and failure rate over the last minutes, the running jobs
with their lease ends, the latest dead letters with their last error, and on PostgreSQL
what holds back cleanup of the queue's table (:class:`~jobqueue.cleanup.CleanupReport`).
The web page (``jobqueue dashboard``, :mod:`jobqueue.dashboard`) and the notebook view
(:mod:`jobqueue.teaching.dashboard_view`) both show a :class:`Snapshot`, so they never
disagree; :meth:`Snapshot.to_json` is what the page polls.

Every read goes through :class:`~jobqueue.backends.contract.ShowsOverview`, which the three
backends implement without reading every job where an index can spare it.

Introduced with the dashboard.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobqueue.backends.contract import Queue, ReportsCleanup, ShowsOverview
from jobqueue.census import EXACT_UP_TO, STATES, Census, State, StateCounts
from jobqueue.cleanup import CleanupReport
from jobqueue.errors import InvalidSettingError
from jobqueue.job import DeadLetter, Job, check_count, check_positive_seconds
from jobqueue.metrics import UNKNOWN, bucket

CHART_S = 600.0
"""How far back the throughput chart goes, in seconds (10 minutes)."""

BIN_S = 10.0
"""Width of one point of the throughput chart, in seconds."""

SHOWN = 20
"""Running jobs, and dead letters, a snapshot lists at most."""


@dataclass(frozen=True, kw_only=True)
class Rate:
    """Outcomes in one bin of the chart: ``[start, start + width)`` seconds.

    Attributes:
        start: the bin's first second, on the queue's clock.
        width_s: the bin's width, in seconds.
        done: attempts acked in the bin.
        failed: attempts failed in the bin (retried or dead-lettered).
    """

    start: float
    width_s: float
    done: int
    failed: int

    @property
    def per_s(self) -> float:
        """Jobs done per second in the bin: the throughput."""
        return self.done / self.width_s

    @property
    def failure_rate(self) -> float:
        """Failed attempts as a share of finished ones, 0.0 to 1.0 (0.0 if none finished)."""
        finished = self.done + self.failed
        return self.failed / finished if finished else 0.0


@dataclass(frozen=True, kw_only=True)
class Row:
    """One row of the dashboard's table by job type, or by named queue.

    Attributes:
        name: the job type, or the queue's name.
        counts: its jobs in each state now (every count 0 once all its jobs are gone).
        done: its attempts acked within the chart's span, as :attr:`Snapshot.done` counts them.
        failed: its attempts failed within the chart's span (retried or dead-lettered).

    Introduced with the counts by type and queue (issue 24).
    """

    name: str
    counts: StateCounts
    done: int
    failed: int

    def count(self, state: State) -> int:
        """Its jobs in ``state`` now."""
        return self.counts.count(state)


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """What a dashboard shows of one queue at time ``at`` (seconds on the queue's clock).

    Attributes:
        at: when it was taken.
        where: the queue's file, or its server and database (never a password).
        census: the jobs by type and state, and the oldest waiting job's age.
        rates: the chart's bins, oldest first, the last one ending at ``at``.
        running: up to :data:`SHOWN` leased jobs, the lease that ends first first.
        dead_letters: up to :data:`SHOWN` dead letters, the latest death first.
        cleanup: what holds back cleanup of the queue's table, for a queue that can tell
            (:class:`~jobqueue.backends.contract.ReportsCleanup`: PostgreSQL); else ``None``.
        outcomes: ``(job type, queue, done, failed)`` within the chart's span, one entry
            per type and queue with an outcome, sorted; outcomes stored before they were
            counted by type and queue are in :attr:`done` and :attr:`failed` only.
    """

    at: float
    where: str
    census: Census
    rates: tuple[Rate, ...]
    running: tuple[Job, ...]
    dead_letters: tuple[DeadLetter, ...]
    cleanup: CleanupReport | None = None
    outcomes: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def span_s(self) -> float:
        """How far back the chart, and the done and failed counts, go: seconds."""
        return self.rates[-1].start + self.rates[-1].width_s - self.rates[0].start if self.rates else 0.0

    def by_type(self) -> tuple[Row, ...]:
        """A row per job type with a job now or an outcome within the chart's span, sorted by type."""
        counts = {counts.job_type: counts for counts in self.census.by_type}
        return _rows(counts, ((kind, done, failed) for kind, _, done, failed in self.outcomes))

    def by_queue(self) -> tuple[Row, ...]:
        """A row per named queue with a job now or an outcome within the chart's span, sorted by name."""
        counts = {counts.queue: counts for counts in self.census.by_queue}
        return _rows(counts, ((queue, done, failed) for _, queue, done, failed in self.outcomes))

    @property
    def done(self) -> int:
        """Attempts acked within the chart's span."""
        return sum(rate.done for rate in self.rates)

    @property
    def failed(self) -> int:
        """Attempts failed within the chart's span."""
        return sum(rate.failed for rate in self.rates)

    @property
    def failure_rate(self) -> float:
        """Failed attempts as a share of finished ones within the chart's span (0.0 if none)."""
        finished = self.done + self.failed
        return self.failed / finished if finished else 0.0

    def summary(self) -> str:
        """One line: the totals by state, done and the failure rate, the oldest waiting job."""
        census = self.census
        counts = ", ".join(
            f"{'~' if state in census.estimated else ''}{census.total(state)} {state}" for state in STATES
        )
        return (
            f"{counts}; {self.done} done and {self.failure_rate:.0%} failed in the last {self.span_s:g} s;"
            f" oldest waiting {census.oldest_waiting_age_s:.1f} s{_since_enqueue(census)}"
        )

    def cleanup_line(self) -> str | None:
        """One line on what holds back cleanup (PostgreSQL), a warning first if any; else ``None``."""
        report = self.cleanup
        if report is None:
            return None
        holder = f"held back by {report.oldest}" if report.oldest else "nothing holds it back"
        line = f"cleanup: {report.dead_rows} dead rows in the queue's table, {holder}"
        return f"WARNING {line}" if report.warning else line

    def to_json(self) -> dict[str, Any]:
        """The snapshot as plain JSON values, what the dashboard's page polls.

        Times stay seconds on the queue's clock (``at`` and the lease ends, deaths and bins
        as numbers); the page shows them relative to ``at``.
        """
        census = self.census
        return {
            "at": self.at,
            "where": self.where,
            "states": list(STATES),
            "estimated": sorted(census.estimated),
            "totals": {state: census.total(state) for state in STATES},
            "by_type": [{"job_type": row.name} | _row_json(row) for row in self.by_type()],
            "by_queue": [{"queue": row.name} | _row_json(row) for row in self.by_queue()],
            "oldest_waiting_age_s": census.oldest_waiting_age_s,
            "oldest_enqueued_age_s": census.oldest_enqueued_age_s,
            "done": self.done,
            "failed": self.failed,
            "failure_rate": self.failure_rate,
            "rates": [
                {
                    "start": rate.start,
                    "per_s": rate.per_s,
                    "failure_rate": rate.failure_rate,
                    "done": rate.done,
                    "failed": rate.failed,
                }
                for rate in self.rates
            ],
            "running": [
                {
                    "id": job.id,
                    "type": job.type,
                    "attempt": job.attempts,
                    "max_attempts": job.max_attempts,
                    "leased_at": job.leased_at,
                    "leased_until": job.leased_until,
                }
                for job in self.running
            ],
            "dead_letters": [
                {
                    "id": letter.job.id,
                    "type": letter.job.type,
                    "attempts": letter.job.attempts,
                    "max_attempts": letter.job.max_attempts,
                    "died_at": letter.died_at,
                    "last_error": letter.job.last_error,
                }
                for letter in self.dead_letters
            ],
            "cleanup": None if self.cleanup is None else self.cleanup.to_json(),
        }


def snapshot(
    queue: Queue,
    *,
    where: str,
    chart_s: float = CHART_S,
    bin_s: float = BIN_S,
    shown: int = SHOWN,
    exact_up_to: int = EXACT_UP_TO,
) -> Snapshot:
    """Take a :class:`Snapshot` of ``queue``.

    Args:
        queue: a queue with the :class:`~jobqueue.backends.contract.ShowsOverview` reads
            (every backend of this package).
        where: how to name the queue: its file, or ``queue.server`` (never a URL, which
            may hold a password).
        chart_s: how far back the chart goes, in seconds (> 0).
        bin_s: the width of one bin of the chart, in seconds (> 0, at most ``chart_s``).
        shown: running jobs and dead letters listed at most (>= 1).
        exact_up_to: passed to the queue's ``census``: jobs counted one by one in a state
            before it may be estimated.

    Raises:
        InvalidSettingError: if ``queue`` lacks the ``ShowsOverview`` reads (naming its
            class), or a number is out of range (naming it).
    """
    if not isinstance(queue, ShowsOverview):
        raise InvalidSettingError(
            f"a {type(queue).__name__} cannot show an overview: it lacks census, leased_jobs,"
            " newest_dead_letters and outcome_sums"
            " (jobqueue.backends.contract.ShowsOverview)"
        )
    check_positive_seconds("chart_s", chart_s)
    check_positive_seconds("bin_s", bin_s)
    if bin_s > chart_s:
        raise InvalidSettingError(f"bin_s ({bin_s!r} s) must be at most chart_s ({chart_s!r} s)")
    check_count("shown", shown)
    census = queue.census(exact_up_to=exact_up_to)
    now = census.at
    bins = int(chart_s // bin_s)
    first = bucket(now) + 1 - bins * bin_s  # the bins end with the current second
    # the seconds the bins hold: from the first whole second in the first bin to the current one
    sums = queue.outcome_sums(math.ceil(first), bucket(now))
    rates = bin_outcomes(sums.per_second, start=first, bin_s=bin_s, bins=bins)
    outcomes = sums.per_key
    return Snapshot(
        at=now,
        where=where,
        census=census,
        rates=rates,
        running=tuple(queue.leased_jobs(shown)),
        dead_letters=tuple(queue.newest_dead_letters(shown)),
        cleanup=queue.cleanup_held_back() if isinstance(queue, ReportsCleanup) else None,
        outcomes=tuple(row for row in outcomes if row[:2] != UNKNOWN),
    )


def bin_outcomes(
    seconds: Sequence[tuple[int, int, int]], *, start: float, bin_s: float, bins: int
) -> tuple[Rate, ...]:
    """Add ``(second, done, failed)`` buckets into ``bins`` bins of ``bin_s`` seconds from ``start``.

    Buckets before ``start`` or past the last bin are left out; a bin without outcomes
    counts zero.
    """
    done = [0] * bins
    failed = [0] * bins
    for second, ok, bad in seconds:
        index = int((second - start) // bin_s)
        if 0 <= index < bins:
            done[index] += ok
            failed[index] += bad
    return tuple(
        Rate(start=start + i * bin_s, width_s=bin_s, done=done[i], failed=failed[i]) for i in range(bins)
    )


def _rows(counts: Mapping[str, StateCounts], outcomes: Iterable[tuple[str, int, int]]) -> tuple[Row, ...]:
    """A :class:`Row` per name of ``counts`` or of the ``(name, done, failed)`` outcomes, sorted by name."""
    added: dict[str, tuple[int, int]] = {}
    for name, done, failed in outcomes:
        before = added.get(name, (0, 0))
        added[name] = (before[0] + done, before[1] + failed)
    return tuple(
        Row(name=name, counts=counts.get(name, StateCounts()), done=done, failed=failed)
        for name in sorted(counts.keys() | added.keys())
        for done, failed in [added.get(name, (0, 0))]
    )


def _row_json(row: Row) -> dict[str, int]:
    """A table row's counts by state, and its done and failed, as the page reads them."""
    return {state: row.count(state) for state in STATES} | {"done": row.done, "failed": row.failed}


def _since_enqueue(census: Census) -> str:
    """The summary's words on the age since enqueue: empty where the census could not tell."""
    age = census.oldest_enqueued_age_s
    return "" if age is None else f", {age:.1f} s since enqueue"
