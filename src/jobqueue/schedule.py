"""Periodic jobs: a :class:`Schedule` says when, a :class:`Scheduler` enqueues each tick once.

A schedule is a job type, a payload and its times: a cron expression (five fields, read by
the ``cronsim`` library, in UTC) or a period ``every_s`` (ticks at whole multiples of it
since the epoch, so every process computes the same ones). A :class:`~jobqueue.runner.Runner`
given ``schedules=[...]`` asks its :class:`Scheduler` to enqueue the ticks due, and wakes
for the next one.

**Once per tick, with many workers.** Each tick is a job whose id names the schedule and the
tick's time, ``"report@2026-12-02T10:05Z"``, enqueued with a unique window
(:meth:`~jobqueue.backends.memory.JobQueue.enqueue`'s ``unique_for_s``) of the time to the
next tick. Every worker process enqueues the tick; the queue adds it once and refuses the
others, also a process that comes late, after the tick's job already ran: its id stays
held until the next tick, after which nobody enqueues that tick any more.

**Missed ticks** (every worker down, or stopped longer than a period): only the latest tick
due is enqueued, once, when a worker looks again; the earlier ones are skipped, not run in
a burst that a long outage would pile up. A worker that starts enqueues the latest tick at
or before now if nobody has: a schedule every 5 minutes started at 10:07 runs its 10:05
job at once, then 10:10's.

Time comes from the queue's clock (seconds since the epoch): a
:class:`~jobqueue.clock.ManualClock` in tests and demos, the server's clock on PostgreSQL.

Introduced with periodic jobs (issue 24).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from cronsim import CronSim, CronSimError

from jobqueue.backends.contract import Queue
from jobqueue.errors import InvalidSettingError
from jobqueue.job import Job, JobType, check_positive_seconds

P = TypeVar("P")


@dataclass(frozen=True, kw_only=True)
class Schedule(Generic[P]):
    """Enqueue a job of ``job_type`` with ``payload`` at every tick of ``cron`` or ``every_s``.

    Attributes:
        job_type: the type of the jobs enqueued.
        payload: the payload of each (checked at once: a bad one raises here).
        cron: a five-field cron expression in UTC (``"*/5 * * * *"``: every 5 minutes), or
            ``None``.
        every_s: a period in seconds (> 0), ticks at its whole multiples since the epoch,
            or ``None``. Exactly one of ``cron`` and ``every_s`` is given.
        name: the start of each tick's job id; default the job type's name. Two
            schedules of one job type need names of their own.

    Raises:
        InvalidSettingError: naming the bad value, if both or neither of ``cron`` and
            ``every_s`` are given, ``cron`` is not a valid expression (with cronsim's
            reason), ``every_s`` is not a finite number > 0, or ``name`` is empty.
        PayloadError: if ``payload`` is not a valid payload of ``job_type``.

    Introduced with periodic jobs (issue 24).
    """

    job_type: JobType[P]
    payload: P
    cron: str | None = None
    every_s: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_s is None):
            raise InvalidSettingError(
                "a schedule needs exactly one of cron and every_s,"
                f" got cron={self.cron!r} and every_s={self.every_s!r}"
            )
        if self.every_s is not None:
            check_positive_seconds("every_s", self.every_s)
        elif not isinstance(self.cron, str):
            raise InvalidSettingError(f"cron must be a cron expression (a str), got {self.cron!r}")
        else:
            try:
                CronSim(self.cron, datetime.fromtimestamp(0, UTC))
            except CronSimError as exc:
                raise InvalidSettingError(f"cron {self.cron!r} is not a cron expression: {exc}") from exc
        if not isinstance(self.name, str):
            raise InvalidSettingError(f"a schedule's name must be a str, got {self.name!r}")
        object.__setattr__(self, "name", self.name or self.job_type.name)
        self.job_type.dump(self.payload)

    def latest_tick(self, now: float) -> float:
        """The schedule's last tick at or before ``now`` (seconds since the epoch)."""
        if self.every_s is not None:
            return math.floor(now / self.every_s) * self.every_s
        assert self.cron is not None
        after = datetime.fromtimestamp(math.floor(now) + 1, UTC)  # cron ticks fall on whole seconds
        return next(CronSim(self.cron, after, reverse=True)).timestamp()

    def next_tick(self, tick: float) -> float:
        """The schedule's first tick after ``tick`` (seconds since the epoch)."""
        if self.every_s is not None:
            return (math.floor(tick / self.every_s) + 1) * self.every_s
        assert self.cron is not None
        return next(CronSim(self.cron, datetime.fromtimestamp(tick, UTC))).timestamp()

    def tick_id(self, tick: float) -> str:
        """The id of the job of ``tick``: the name, ``@`` and its UTC time, ``"report@2026-12-02T10:05Z"``.

        Seconds are shown only when the tick has some, fractions of a second likewise.
        """
        at = datetime.fromtimestamp(tick, UTC)
        shape = "%Y-%m-%dT%H:%M" if at.second == 0 and not at.microsecond else "%Y-%m-%dT%H:%M:%S"
        if at.microsecond:
            shape += ".%f"
        return f"{self.name}@{at.strftime(shape)}Z"


class Scheduler:
    """Enqueues the ticks of some schedules into a queue, each at most once per process.

    Args:
        schedules: the schedules; their names must differ.

    Raises:
        InvalidSettingError: if an entry is not a :class:`Schedule`, or two share a name.

    A process keeps the latest tick it enqueued per schedule, and the time of the next; the
    queue's unique windows keep the ticks single across processes (see the module
    docstring). Introduced with periodic jobs (issue 24).
    """

    def __init__(self, schedules: Sequence[Schedule[Any]]) -> None:
        names: set[str] = set()
        for schedule in schedules:
            if not isinstance(schedule, Schedule):
                raise InvalidSettingError(f"schedules must hold Schedule objects, got {schedule!r}")
            if schedule.name in names:
                raise InvalidSettingError(
                    f"two schedules are named {schedule.name!r}: give each of them a name of its own"
                )
            names.add(schedule.name)
        self.schedules = list(schedules)
        # Per schedule: when its next tick is due (-inf: look at once).
        self._due_at = [-math.inf] * len(self.schedules)

    @property
    def due_at(self) -> float:
        """When the next tick is due (seconds on the queue's clock); ``inf`` with no schedules."""
        return min(self._due_at, default=math.inf)

    def enqueue_due(self, queue: Queue) -> list[Job]:
        """Enqueue the latest tick of each schedule that is due and this process has not enqueued.

        Returns:
            The records the queue returned, one per tick offered: the new job's, or that of
            the job another process enqueued for the same tick (its id names the tick).
        """
        now = queue.clock.now()
        offered = []
        for index, schedule in enumerate(self.schedules):
            if now < self._due_at[index]:
                continue
            tick = schedule.latest_tick(now)
            following = schedule.next_tick(tick)
            offered.append(
                queue.enqueue(
                    schedule.job_type,
                    schedule.payload,
                    id=schedule.tick_id(tick),
                    unique_for_s=following - tick,  # held until the next tick at least
                )
            )
            self._due_at[index] = following
        return offered
