"""How many jobs a queue holds, by job type and state: the first table of a dashboard.

A job that is not done is in one of four states at time ``now`` (seconds on the queue's
clock): *waiting* (a worker could claim it now), *scheduled* (waiting out a retry delay or
a release's delay), *leased* (held by a worker under an unexpired lease) or *dead* (in the
dead letters). The same states as :class:`~jobqueue.metrics.QueueMetrics`, counted per job
type and per named queue, as Sidekiq's and Oban's web dashboards split their counts. A fifth
count, *cancelled*, is of the cancelled jobs the queue keeps (``queue.cancel``; kept a day at
least).

On a big table, counting every row on each refresh costs more than a dashboard may (a
PostgreSQL count of 1,000,000 jobs took about 150 ms here): a queue may then count a state
from a sample of the table instead and say so in :attr:`Census.estimated`; the page shows
such a count as approximate.

Introduced with the dashboard (``jobqueue dashboard``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from jobqueue.job import Job

State = Literal["waiting", "scheduled", "leased", "dead", "cancelled"]
"""The state of a job not done, or cancelled; :data:`STATES` in the order a dashboard shows them."""

STATES: tuple[State, ...] = ("waiting", "scheduled", "leased", "dead", "cancelled")

EXACT_UP_TO = 10_000
"""Jobs a database queue counts one by one in a state before it estimates that state."""


@dataclass(frozen=True, kw_only=True)
class StateCounts:
    """How many jobs are in each state (:data:`STATES`).

    What :class:`TypeCounts` and :class:`QueueCounts` count, for a job type and for a named queue.

    Attributes:
        waiting, scheduled, leased, dead: how many jobs are in that state.
        cancelled: how many cancelled jobs the queue keeps.
    """

    waiting: int = 0
    scheduled: int = 0
    leased: int = 0
    dead: int = 0
    cancelled: int = 0

    def count(self, state: State) -> int:
        """The jobs in ``state``."""
        value: int = getattr(self, state)
        return value


@dataclass(frozen=True, kw_only=True)
class TypeCounts(StateCounts):
    """The jobs of one job type in each state (see :class:`StateCounts`).

    Attributes:
        job_type: the :attr:`~jobqueue.job.JobType.name`.
    """

    job_type: str


@dataclass(frozen=True, kw_only=True)
class QueueCounts(StateCounts):
    """The jobs of one named queue in each state (see :class:`StateCounts`).

    Attributes:
        queue: the queue's name (:attr:`~jobqueue.job.Job.queue`).

    Introduced with named queues (issue 24).
    """

    queue: str


@dataclass(frozen=True, kw_only=True)
class Census:
    """The jobs of a queue by type and state at time ``at`` (seconds on the queue's clock).

    Attributes:
        at: when the counts were taken.
        by_type: one entry per job type with at least one job, sorted by type.
        estimated: the states counted from a sample of the table (approximate); empty
            when every count is exact.
        oldest_waiting_age_s: how long the longest-waiting claimable job has been
            claimable, in seconds; ``0.0`` when none is waiting (as
            :attr:`~jobqueue.metrics.QueueMetrics.oldest_waiting_age_s`).
        by_queue: the same jobs by named queue, one entry per queue with a job, sorted by
            name (the same counts, split the other way: estimated alike).
        oldest_enqueued_age_s: how long ago the oldest job not under a lease (waiting, or
            waiting out a backoff) was enqueued, in seconds, as
            :attr:`~jobqueue.metrics.QueueMetrics.oldest_enqueued_age_s`; ``None`` where
            finding it would read every job (PostgreSQL once a count is estimated: no
            index orders the jobs by enqueue time, and a refresh must not scan them all).
    """

    at: float
    by_type: tuple[TypeCounts, ...]
    estimated: frozenset[State]
    oldest_waiting_age_s: float
    by_queue: tuple[QueueCounts, ...] = ()
    oldest_enqueued_age_s: float | None = None

    def total(self, state: State) -> int:
        """The jobs of every type in ``state``."""
        return sum(counts.count(state) for counts in self.by_type)


def live_state(job: Job, now: float) -> State:
    """The state at ``now`` (seconds) of a job that is waiting, scheduled or leased.

    Leased while its lease has not run out; scheduled while it is not yet claimable; else
    waiting (a lease that ran out makes the job claimable again).
    """
    if job.leased_until is not None and job.leased_until > now:
        return "leased"
    return "scheduled" if job.visible_at() > now else "waiting"


def tally(rows: Iterable[tuple[str, str, float]]) -> tuple[TypeCounts, ...]:
    """Turn ``(state, job_type, count)`` rows into :class:`TypeCounts`, sorted by job type.

    Rows of the same state and type add up; a count that is a float (an estimate scaled
    from a sample) is rounded.

    Raises:
        ValueError: naming the state, if a row's state is not one of :data:`STATES`.
    """
    counts = _add_up(rows)
    return tuple(TypeCounts(job_type=job_type, **counts[job_type]) for job_type in sorted(counts))


def tally_by_queue(
    rows: Iterable[tuple[str, str, str, float]],
) -> tuple[tuple[TypeCounts, ...], tuple[QueueCounts, ...]]:
    """Turn ``(state, queue, job_type, count)`` rows into counts by job type and by queue.

    Every backend's census counts by state, queue and type at once and splits the counts
    here, both ways (see :func:`tally`).

    Raises:
        ValueError: naming the state, if a row's state is not one of :data:`STATES`.
    """
    rows = list(rows)
    by_queue = _add_up((state, queue, count) for state, queue, _, count in rows)
    return (
        tally((state, job_type, count) for state, _, job_type, count in rows),
        tuple(QueueCounts(queue=queue, **by_queue[queue]) for queue in sorted(by_queue)),
    )


def _add_up(rows: Iterable[tuple[str, str, float]]) -> dict[str, dict[str, int]]:
    """The counts of ``(state, key, count)`` rows by key and state, each rounded."""
    counts: dict[str, dict[str, int]] = {}
    for state, key, count in rows:
        if state not in STATES:
            raise ValueError(f"unknown job state {state!r}; expected one of {', '.join(STATES)}")
        of_key = counts.setdefault(key, {})
        of_key[state] = of_key.get(state, 0) + round(count)
    return counts
