"""A discrete-event simulation of a job queue with ``c`` workers, for lesson 13.

Jobs arrive at random (a Poisson process: exponential gaps between arrivals, mean
``1/arrival_rate_per_s``) and each takes a random time to run (exponential, mean
``service_s``): the M/M/c queue of queueing theory, plus two things real job queues have.

- **Polling.** A worker that finds nothing to do sleeps ``poll_interval_s`` before it
  looks again (worker ``k`` of ``c`` first looks at ``k * poll_interval_s / c``), so a job
  that arrives at a quiet moment waits for the next look. A worker that finishes a job
  looks again at once. With ``poll_interval_s=0`` idle workers are woken on arrival.
- **An outage.** Between ``outage_start_s`` and ``outage_end_s`` no worker claims a job
  (jobs already running finish); arrivals go on, and a backlog builds.

:func:`run_queue` takes the arrival and service times as lists, so small cases can be
worked by hand; :func:`simulate_queue` draws them from a seeded :class:`random.Random`.
Both return a :class:`QueueRun`: each job's wait, and the backlog and the age of the
oldest waiting job sampled over time. The run continues past the last arrival until the
queue is empty, so Little's law ``L = λW`` holds exactly over the run (a test checks it).

Course helper only: the package's queues are not simulated here, the idea is.
Introduced in lesson 13.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random as random_module
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jobqueue.errors import InvalidSettingError

Order = Literal["oldest first", "newest first"]
"""Which waiting job a free worker takes: FIFO, or LIFO (the newest, still-fresh one)."""


@dataclass(frozen=True, kw_only=True)
class QueueRun:
    """The outcome of one simulated run.

    Attributes:
        arrivals_s: when each job arrived, in seconds, in arrival order.
        waits_s: how long each job waited before a worker took it (seconds), per job in
            arrival order; ``nan`` for a job dropped because it expired.
        services_s: each job's running time, in seconds.
        end_s: when the last job finished (or was dropped), in seconds.
        sample_times_s: the times of the samples below, every ``sample_every_s``.
        backlog: jobs waiting (not running) at each sample time, after what happened at
            that instant.
        oldest_age_s: age of the oldest waiting job at each sample time (0 if none).
        dropped: jobs dropped unrun because they waited past ``expires_after_s``.
        busy_s: worker-seconds spent running jobs.
        workers: the number of workers.
    """

    arrivals_s: tuple[float, ...]
    waits_s: tuple[float, ...]
    services_s: tuple[float, ...]
    end_s: float
    sample_times_s: tuple[float, ...]
    backlog: tuple[int, ...]
    oldest_age_s: tuple[float, ...]
    dropped: int
    busy_s: float
    workers: int

    @property
    def run_waits_s(self) -> list[float]:
        """Waits of the jobs that ran (dropped ones left out)."""
        return [w for w in self.waits_s if not math.isnan(w)]

    @property
    def mean_wait_s(self) -> float:
        """Mean wait of the jobs that ran, in seconds (0 if none ran)."""
        waits = self.run_waits_s
        return statistics.fmean(waits) if waits else 0.0

    def wait_quantile_s(self, q: float) -> float:
        """The ``q`` quantile (0 < q < 1, e.g. 0.99) of the waits of jobs that ran, in seconds."""
        waits = sorted(self.run_waits_s)
        if not waits:
            return 0.0
        return waits[min(len(waits) - 1, math.floor(q * len(waits)))]

    @property
    def utilisation(self) -> float:
        """Share of the workers' time spent running jobs over the run (0 to 1)."""
        return self.busy_s / (self.workers * self.end_s) if self.end_s > 0 else 0.0

    def littles_law(self) -> tuple[float, float, float]:
        """``(L, λ, W)`` over the run, for the jobs that ran: Little's law's three numbers.

        ``L`` is the time-average of (waiting + running) jobs, ``λ`` jobs per second,
        ``W`` the mean time from arrival to finish in seconds. Because the run starts
        and ends empty, ``L == λ * W`` up to rounding.
        """
        ran = [(w, s) for w, s in zip(self.waits_s, self.services_s, strict=True) if not math.isnan(w)]
        total_s = sum(w + s for w, s in ran)
        if not ran or self.end_s <= 0:
            return (0.0, 0.0, 0.0)
        return (total_s / self.end_s, len(ran) / self.end_s, total_s / len(ran))

    def drained_at_s(self, after_s: float, threshold: int = 0) -> float | None:
        """First sample time at or after ``after_s`` with at most ``threshold`` jobs waiting."""
        for t, waiting in zip(self.sample_times_s, self.backlog, strict=True):
            if t >= after_s and waiting <= threshold:
                return t
        return None


def _check(name: str, value: float, *, positive: bool) -> float:
    bad = isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    if bad or value < 0 or (positive and value == 0):
        kind = "> 0" if positive else ">= 0"
        raise InvalidSettingError(f"{name} must be a finite number {kind}, got {value!r}")
    return float(value)


def run_queue(
    arrivals_s: Sequence[float],
    services_s: Sequence[float],
    *,
    workers: int,
    poll_interval_s: float = 0.0,
    outage: tuple[float, float] | None = None,
    order: Order = "oldest first",
    expires_after_s: float | None = None,
    sample_every_s: float = 1.0,
) -> QueueRun:
    """Run the queue on given arrival times and running times (seconds).

    Args:
        arrivals_s: arrival time of each job, non-decreasing, in seconds.
        services_s: running time of each job (same length), in seconds.
        workers: how many workers (int >= 1).
        poll_interval_s: an idle worker's sleep between looks, in seconds (0: woken on
            arrival).
        outage: ``(start_s, end_s)``: no claims in between (jobs running finish).
        order: ``"oldest first"`` (FIFO) or ``"newest first"`` (LIFO).
        expires_after_s: a job still waiting this long when a worker would take it is
            dropped unrun (counted in ``dropped``); ``None`` keeps every job.
        sample_every_s: time between samples of the backlog, in seconds (> 0).

    Returns:
        The run, simulated until every job has run or been dropped.

    Raises:
        InvalidSettingError: naming the bad value (unsorted arrivals, lengths that differ,
            a negative time, ``workers < 1`` ...).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidSettingError(f"workers must be an int >= 1, got {workers!r}")
    if len(arrivals_s) != len(services_s):
        raise InvalidSettingError(f"{len(arrivals_s)} arrival times but {len(services_s)} running times")
    if any(b < a for a, b in itertools.pairwise(arrivals_s)):
        raise InvalidSettingError("arrival times must be in order (non-decreasing)")
    if arrivals_s or services_s:
        _check("the earliest arrival time", min(arrivals_s), positive=False)
        _check("the shortest running time", min(services_s), positive=False)
        _check("the longest running time", max(services_s), positive=False)
    if outage is not None and not 0 <= outage[0] <= outage[1]:
        raise InvalidSettingError(f"an outage must end after it starts, got {outage!r}")
    sim = _Simulation(
        list(arrivals_s),
        list(services_s),
        workers=workers,
        poll_s=_check("poll_interval_s", poll_interval_s, positive=False),
        outage=outage if outage is not None else (math.inf, math.inf),
        newest_first=order == "newest first",
        limit_s=math.inf
        if expires_after_s is None
        else _check("expires_after_s", expires_after_s, positive=True),
        every_s=_check("sample_every_s", sample_every_s, positive=True),
    )
    sim.run()
    return QueueRun(
        arrivals_s=tuple(arrivals_s),
        waits_s=tuple(sim.waits),
        services_s=tuple(services_s),
        end_s=sim.end,
        sample_times_s=tuple(sim.samples_t),
        backlog=tuple(sim.samples_n),
        oldest_age_s=tuple(sim.samples_age),
        dropped=sim.dropped,
        busy_s=sim.busy_s,
        workers=workers,
    )


_FINISH, _LOOK = 1, 2
"""Kinds of worker event; at equal times arrivals come first, then finishes, then looks."""


class _Simulation:
    """The event loop of :func:`run_queue`: arrivals from a sorted list, worker events on a heap."""

    def __init__(
        self,
        arrivals: list[float],
        services: list[float],
        *,
        workers: int,
        poll_s: float,
        outage: tuple[float, float],
        newest_first: bool,
        limit_s: float,
        every_s: float,
    ) -> None:
        self.arrivals, self.services = arrivals, services
        self.poll_s, self.outage, self.newest_first = poll_s, outage, newest_first
        self.limit_s, self.every_s = limit_s, every_s
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, serial, worker)
        self.serial = itertools.count()
        self.waits = [math.nan] * len(arrivals)
        self.waiting: deque[int] = deque()
        self.idle: list[int] = []  # workers woken on arrival (poll 0) with nothing to do
        self.busy_s = 0.0
        self.dropped = 0
        self.now = 0.0
        self.end = 0.0
        self.samples_t: list[float] = []
        self.samples_n: list[int] = []
        self.samples_age: list[float] = []
        for worker in range(workers):
            if poll_s > 0:
                self.push(poll_s * worker / workers, _LOOK, worker)
            else:
                self.idle.append(worker)

    def push(self, time_s: float, kind: int, worker: int) -> None:
        heapq.heappush(self.events, (time_s, kind, next(self.serial), worker))

    def run(self) -> None:
        arrivals, events, waiting = self.arrivals, self.events, self.waiting
        following = 0
        while following < len(arrivals) or waiting:
            if following < len(arrivals) and (not events or arrivals[following] <= events[0][0]):
                self.sample_until(arrivals[following])
                self.now = arrivals[following]
                waiting.append(following)
                following += 1
                while self.idle and waiting and self.start(self.idle[-1]):
                    self.idle.pop()
                continue
            time_s, kind, _, worker = heapq.heappop(events)
            self.sample_until(time_s)
            self.now = time_s
            if kind == _FINISH:
                self.end = max(self.end, time_s)
            if not self.start(worker):
                self.rest(worker)
        finishes = [t for t, kind, _, _ in events if kind == _FINISH]
        self.end = max([self.end, self.now, *finishes])
        self.sample_until(self.end + self.every_s / 2)

    def take(self) -> int | None:
        while self.waiting:
            job = self.waiting.pop() if self.newest_first else self.waiting.popleft()
            if self.now - self.arrivals[job] < self.limit_s:
                return job
            self.dropped += 1
        return None

    def start(self, worker: int) -> bool:
        """Give ``worker`` a job if it may take one; False when there is none."""
        down_from, down_until = self.outage
        if down_from <= self.now < down_until:
            self.push(down_until, _LOOK, worker)
            return True
        job = self.take()
        if job is None:
            return False
        self.waits[job] = self.now - self.arrivals[job]
        self.busy_s += self.services[job]
        self.push(self.now + self.services[job], _FINISH, worker)
        return True

    def rest(self, worker: int) -> None:
        if self.poll_s > 0:
            self.push(self.now + self.poll_s, _LOOK, worker)
        else:
            self.idle.append(worker)

    def sample_until(self, t: float) -> None:
        """Record the samples due before ``t`` (a sample shows the state after the events at its time)."""
        next_t = len(self.samples_t) * self.every_s
        while next_t < t:
            self.samples_t.append(next_t)
            self.samples_n.append(len(self.waiting))
            # Jobs join on the right, so the oldest waiting job is on the left in either order.
            self.samples_age.append(next_t - self.arrivals[self.waiting[0]] if self.waiting else 0.0)
            next_t = len(self.samples_t) * self.every_s


def simulate_queue(
    *,
    arrival_rate_per_s: float,
    workers: int,
    service_s: float,
    duration_s: float,
    poll_interval_s: float = 0.0,
    outage: tuple[float, float] | None = None,
    order: Order = "oldest first",
    expires_after_s: float | None = None,
    sample_every_s: float = 1.0,
    seed: int = 7,
) -> QueueRun:
    """Draw Poisson arrivals for ``duration_s`` seconds and exponential running times; run them.

    Args:
        arrival_rate_per_s: mean arrivals per second (> 0).
        workers: how many workers (int >= 1).
        service_s: mean running time of a job, in seconds (> 0).
        duration_s: how long jobs keep arriving, in seconds (> 0); the run goes on
            until the queue is empty.
        poll_interval_s: as in :func:`run_queue`.
        outage: as in :func:`run_queue`.
        order: as in :func:`run_queue`.
        expires_after_s: as in :func:`run_queue`.
        sample_every_s: as in :func:`run_queue`.
        seed: seed of the :class:`random.Random` that draws every time: same seed, same run.

    Returns:
        The run (:class:`QueueRun`).

    Raises:
        InvalidSettingError: naming the bad value.
    """
    rate = _check("arrival_rate_per_s", arrival_rate_per_s, positive=True)
    mean_s = _check("service_s", service_s, positive=True)
    until_s = _check("duration_s", duration_s, positive=True)
    rng = random_module.Random(seed)
    arrivals: list[float] = []
    t = rng.expovariate(rate)
    while t < until_s:
        arrivals.append(t)
        t += rng.expovariate(rate)
    services = [rng.expovariate(1 / mean_s) for _ in arrivals]
    return run_queue(
        arrivals,
        services,
        workers=workers,
        poll_interval_s=poll_interval_s,
        outage=outage,
        order=order,
        expires_after_s=expires_after_s,
        sample_every_s=sample_every_s,
    )


def drain_time_s(backlog: float, capacity_per_s: float, arrival_rate_per_s: float) -> float:
    """Seconds to clear ``backlog`` jobs when workers do ``capacity_per_s`` and jobs keep arriving.

    ``backlog / (capacity - arrival rate)``: only the spare capacity eats into it. A
    1-hour outage at 80 % utilisation leaves ``3600 λ`` jobs and a spare of ``0.25 λ``
    per second: 4 hours.

    Raises:
        InvalidSettingError: if the capacity is not above the arrival rate (the backlog
            never drains).
    """
    spare = capacity_per_s - arrival_rate_per_s
    if spare <= 0:
        raise InvalidSettingError(
            f"capacity {capacity_per_s:g}/s is not above the arrival rate {arrival_rate_per_s:g}/s:"
            " it never drains"
        )
    return backlog / spare


def time_unit_s(span_s: float) -> float:
    """The unit to show a time span of ``span_s`` seconds in: 1 (s), 60 (min) or 3600 (h).

    Seconds up to half an hour, minutes up to three hours, hours beyond: 13,465 s reads
    3.7 h, and an axis running to 14,000 s is labelled in hours.
    """
    if span_s <= 1800:
        return 1.0
    return 60.0 if span_s <= 3 * 3600 else 3600.0


def format_span(seconds: float) -> str:
    """``seconds`` in the unit :func:`time_unit_s` picks: ``"247 s"``, ``"42 min"``, ``"3.7 h"``."""
    unit = time_unit_s(seconds)
    if unit == 3600.0:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if unit == 60.0 else f"{seconds:.0f} s"


EXPLORER_OUTAGE = (120.0, 180.0)
"""The outage in the simulator widget: no claims from t=120 s to t=180 s."""

EXPLORER_DURATION_S = 600.0
"""How long jobs arrive in the simulator widget, in seconds."""


def explore_backlog(
    arrival_rate_per_s: float,
    workers: int,
    service_s: float,
    poll_interval_s: float,
    *,
    outage: tuple[float, float] = EXPLORER_OUTAGE,
    duration_s: float = EXPLORER_DURATION_S,
    seed: int = 7,
) -> tuple[QueueRun, str]:
    """Simulate the widget's settings; return the run and its one-line summary.

    The summary gives the utilisation (arrival rate × service time / workers), the
    backlog the outage left, how long after the outage it took to clear (down to one job
    per worker) next to what ``backlog / (capacity − arrival rate)`` predicts, and the
    oldest job's worst age; times in seconds, or minutes or hours when long
    (:func:`format_span`).

    Raises:
        InvalidSettingError: naming the bad value, as :func:`simulate_queue`.
    """
    run = simulate_queue(
        arrival_rate_per_s=arrival_rate_per_s,
        workers=workers,
        service_s=service_s,
        duration_s=duration_s,
        poll_interval_s=poll_interval_s,
        outage=outage,
        seed=seed,
    )
    utilisation = arrival_rate_per_s * service_s / workers
    peak = max((n for t, n in zip(run.sample_times_s, run.backlog, strict=True) if t <= outage[1]), default=0)
    cleared = run.drained_at_s(outage[1], threshold=max(1, workers))
    spare = workers / service_s - arrival_rate_per_s
    formula = f"formula {format_span(peak / spare)}" if spare > 0 else "formula: never"
    if cleared is None or cleared >= duration_s:
        after = f"not cleared by t={duration_s:g}s ({formula})"
    else:
        after = f"cleared in {format_span(cleared - outage[1])} ({formula})"
    summary = (
        f"{utilisation:.0%} busy: outage left {peak} waiting, {after}; "
        f"oldest {format_span(max(run.oldest_age_s, default=0))}"
    )
    return run, summary
