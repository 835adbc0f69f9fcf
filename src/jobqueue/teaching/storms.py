"""Retry storms: how retries multiply load, and how a budget or a breaker stops them (lesson 14).

- :func:`layered_calls`: a stack of layers, each retrying the one below, in front of a
  dependency that always fails: 3 layers that make 3 tries each make 27 calls.
- :func:`simulate_storm`: clients send requests to a service with a fixed capacity
  (100 requests a second) and a bounded queue; the service has a short blip (it serves
  nothing for 10 s, while requests keep joining its queue). Requests that wait in its
  queue longer than the clients' timeout are still served, but nobody is waiting for the
  answer: that work is wasted.
  Clients that retry every failure push the load far above capacity, the queue stays
  full of requests whose clients have given up, and the service stays useless long
  after the blip: a *metastable failure*. Backoff with jitter alone only delays each
  retry: while new requests keep arriving, the retries are as many as before, and the
  storm goes on (Marc Brooker, "What is Backoff For?", 2022). A :class:`~jobqueue.retry_budget.RetryBudget`
  or a :class:`~jobqueue.breaker.CircuitBreaker` (the package's own) keeps the extra
  load small, and the service recovers as soon as the blip ends.

The simulation moves in ticks of ``tick_s`` seconds on a :class:`~jobqueue.ManualClock`;
new requests arrive at random (Poisson) from a seeded :class:`random.Random`, so a seed
gives the same run every time. After Marc Brooker's simulations of retries, budgets and
breakers, and the metastable-failure papers (Bronson et al., HotOS 2021).

Course helper only. Introduced in lesson 14.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import random as random_module
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from jobqueue.backoff import Backoff
from jobqueue.breaker import CircuitBreaker, CircuitOpenError
from jobqueue.clock import Clock, ManualClock
from jobqueue.errors import InvalidSettingError
from jobqueue.retry_budget import RetryBudget

Policy = Literal["no budget", "backoff, no budget", "retry budget", "circuit breaker"]
"""How clients retry: every failure at once (up to ``tries``), every failure after a jittered
backoff, within a retry budget, or through a breaker."""

POLICIES: tuple[Policy, ...] = ("no budget", "backoff, no budget", "retry budget", "circuit breaker")
"""Every policy, in the order the lesson compares them."""


class Budget(Protocol):
    """What the simulation needs of a retry budget (:class:`~jobqueue.retry_budget.RetryBudget` has it)."""

    def record_call(self) -> None:
        """Count a first try."""
        ...

    def try_retry(self) -> bool:
        """Whether a retry may go now (spending from the budget if so)."""
        ...


class BudgetFactory(Protocol):
    """Builds a budget on the simulation's clock, passed as ``clock=``; ``RetryBudget`` itself is one."""

    def __call__(self, *, clock: Clock) -> Budget:
        """A new budget that reads time from ``clock``."""
        ...


class _Failed(Exception):
    """The simulated dependency failed."""


def layered_calls(tries_per_layer: Sequence[int]) -> int:
    """Count the calls that reach a dependency that always fails, through retrying layers.

    Args:
        tries_per_layer: for each layer from the top (the app) down to the one that
            calls the dependency, how many tries it makes before it gives up (>= 1).

    Returns:
        Calls the dependency received: the product of the tries. ``[3, 3, 3]``: 27;
        retry at one layer only, ``[1, 1, 3]``: 3.

    Raises:
        InvalidSettingError: if the list is empty or a count is below 1.
    """
    if not tries_per_layer or any(
        isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in tries_per_layer
    ):
        raise InvalidSettingError(
            f"tries_per_layer must be a non-empty list of ints >= 1, got {tries_per_layer!r}"
        )
    calls = 0

    def dependency() -> None:
        nonlocal calls
        calls += 1
        raise _Failed

    def layer(depth: int) -> None:
        below = dependency if depth == len(tries_per_layer) - 1 else (lambda: layer(depth + 1))
        for attempt in range(tries_per_layer[depth]):
            try:
                below()
                return
            except _Failed:
                if attempt == tries_per_layer[depth] - 1:
                    raise

    with contextlib.suppress(_Failed):  # the top layer gives up too: that is the point
        layer(0)
    return calls


@dataclass(frozen=True, kw_only=True)
class StormRun:
    """A simulated storm, counted per second.

    Attributes:
        policy: how the clients retried.
        capacity_per_s: requests the service can serve per second.
        blip: ``(start_s, end_s)`` of the blip.
        new_per_s: first tries sent in each second.
        load_per_s: requests that reached the service in each second (first tries and
            retries; requests a breaker refused never reach it).
        served_per_s: answers the clients received in time, per second (goodput).
        wasted_per_s: requests served after their client had timed out, per second.
        failed_per_s: tries that failed for their client, per second: timed out,
            refused by a full queue, or refused by the breaker.
    """

    policy: str
    capacity_per_s: int
    blip: tuple[float, float]
    new_per_s: tuple[int, ...]
    load_per_s: tuple[int, ...]
    served_per_s: tuple[int, ...]
    wasted_per_s: tuple[int, ...]
    failed_per_s: tuple[int, ...]

    @property
    def recovered_at_s(self) -> int | None:
        """First second after the blip from which no try fails until the end of the run.

        ``None`` if tries still fail in the last second: the service never recovered.
        """
        start = math.ceil(self.blip[1])
        for second in range(len(self.failed_per_s) - 1, start - 1, -1):
            if self.failed_per_s[second]:
                return second + 1 if second + 1 < len(self.failed_per_s) else None
        return start

    def peak_load_after_blip(self) -> int:
        """Highest load in a second after the blip ended, in requests."""
        return max(self.load_per_s[math.ceil(self.blip[1]) :], default=0)

    def summary(self) -> str:
        """One line: ``no budget: peak 240 req/s after the blip, never recovered``."""
        recovered = self.recovered_at_s
        ending = "never recovered" if recovered is None else f"recovered at t={recovered}s"
        return (
            f"{self.policy}: {sum(self.load_per_s)} requests sent, peak {self.peak_load_after_blip()} "
            f"req/s after the blip, {ending}"
        )


@dataclass
class _Attempt:
    request: int
    try_number: int
    sent_at: float
    state: Literal["waiting", "served", "timed out"] = "waiting"


def _poisson(rng: random_module.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method: fine for the small means of one tick)."""
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


def simulate_storm(
    policy: Policy,
    *,
    capacity_per_s: int = 100,
    arrival_rate_per_s: float = 80.0,
    blip: tuple[float, float] = (10.0, 20.0),
    duration_s: int = 60,
    tries: int = 3,
    timeout_s: float = 1.0,
    queue_limit: int = 200,
    tick_s: float = 0.1,
    budget: BudgetFactory = RetryBudget,
    backoff: Backoff = Backoff(),  # noqa: B008  # frozen: one shared default is safe
    failure_threshold: int = 5,
    reset_timeout_s: float = 2.0,
    seed: int = 7,
) -> StormRun:
    """Simulate clients with ``policy`` against a service with a blip; count the load per second.

    Each tick: the service serves up to ``capacity_per_s * tick_s`` requests from the
    head of its queue (during the blip it serves none); requests older than
    ``timeout_s`` count as failed for their client, which may retry; then new requests
    and retries are sent. A request that finds the queue full
    (``queue_limit``) fails at once. A failed try is retried at the next tick while the
    request has tries left and the policy allows it; with ``"backoff, no budget"``, at
    the first tick after ``backoff.delay_s(try)`` seconds (1 s of backoff and 50 % of
    jitter for the first retry, 2 s for the second, by default).

    Args:
        policy: ``"no budget"`` (retry every failure at once), ``"backoff, no budget"``
            (retry every failure after a jittered backoff), ``"retry budget"`` (a retry only
            if the budget allows it), ``"circuit breaker"`` (every call through one
            breaker; a refused call is given up, it never reaches the service).
        capacity_per_s: requests served per second (int >= 1).
        arrival_rate_per_s: mean new requests per second (> 0).
        blip: ``(start_s, end_s)`` when the service serves nothing (a stall: its queue
            still takes requests).
        duration_s: seconds simulated (int >= 1).
        tries: tries per request, the first included (>= 1).
        timeout_s: how long a client waits for an answer, in seconds (> 0).
        queue_limit: most requests the service's queue holds (>= 1).
        tick_s: the simulation step, in seconds (> 0, dividing 1 s evenly).
        budget: builds the retry budget on the simulation's clock (default
            :class:`~jobqueue.retry_budget.RetryBudget`, 10 % of first tries).
        backoff: the delays of ``"backoff, no budget"`` (default 1 s doubling, equal
            jitter); its random draws come from a generator of their own, so the arrivals
            are the same for every policy.
        failure_threshold: the breaker's consecutive failures before it opens.
        reset_timeout_s: seconds the breaker stays open before a trial call.
        seed: seeds the arrivals: same seed, same run.

    Returns:
        The run, per second (:class:`StormRun`).

    Raises:
        InvalidSettingError: naming the bad setting.
    """
    if policy not in POLICIES:
        raise InvalidSettingError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    for name, count in (("capacity_per_s", capacity_per_s), ("duration_s", duration_s), ("tries", tries)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidSettingError(f"{name} must be an int >= 1, got {count!r}")
    ticks_per_s = round(1 / tick_s) if tick_s > 0 else 0
    if ticks_per_s < 1 or not math.isclose(ticks_per_s * tick_s, 1.0) or capacity_per_s % ticks_per_s:
        raise InvalidSettingError(
            f"tick_s must divide 1 s and capacity_per_s into whole steps, got tick_s={tick_s!r}"
        )
    if not (arrival_rate_per_s > 0 and timeout_s > 0 and queue_limit >= 1 and blip[0] <= blip[1]):
        raise InvalidSettingError(
            "arrival_rate_per_s and timeout_s must be > 0, queue_limit >= 1 and the blip must end after it "
            f"starts; got {arrival_rate_per_s!r}, {timeout_s!r}, {queue_limit!r}, {blip!r}"
        )
    storm = _Storm(
        policy, capacity_per_tick=capacity_per_s // ticks_per_s, tries=tries, timeout_s=timeout_s,
        queue_limit=queue_limit, blip=blip, budget=budget, failure_threshold=failure_threshold,
        reset_timeout_s=reset_timeout_s, duration_s=duration_s,
        backoff=backoff if policy == "backoff, no budget" else None,
        jitter=random_module.Random(f"jitter {seed}"),
    )  # fmt: skip
    rng = random_module.Random(seed)
    for tick in range(duration_s * ticks_per_s):
        storm.step(tick * tick_s, tick // ticks_per_s, _poisson(rng, arrival_rate_per_s * tick_s))
    return StormRun(
        policy=policy,
        capacity_per_s=capacity_per_s,
        blip=blip,
        new_per_s=tuple(storm.new),
        load_per_s=tuple(storm.load),
        served_per_s=tuple(storm.served),
        wasted_per_s=tuple(storm.wasted),
        failed_per_s=tuple(storm.failures),
    )


class _Storm:
    """The state of :func:`simulate_storm` between ticks."""

    def __init__(
        self,
        policy: Policy,
        *,
        capacity_per_tick: int,
        tries: int,
        timeout_s: float,
        queue_limit: int,
        blip: tuple[float, float],
        budget: BudgetFactory,
        failure_threshold: int,
        reset_timeout_s: float,
        duration_s: int,
        backoff: Backoff | None,
        jitter: random_module.Random,
    ) -> None:
        self.policy = policy
        self.capacity_per_tick, self.tries, self.timeout_s = capacity_per_tick, tries, timeout_s
        self.queue_limit, self.blip = queue_limit, blip
        self.clock = ManualClock()
        self.budget = budget(clock=self.clock) if policy == "retry budget" else None
        self.breaker = (
            CircuitBreaker(
                "service",
                clock=self.clock,
                failure_threshold=failure_threshold,
                reset_timeout_s=reset_timeout_s,
            )
            if policy == "circuit breaker"
            else None
        )
        self.queue: deque[_Attempt] = deque()  # the service's queue
        self.in_flight: deque[_Attempt] = deque()  # sent, answer not yet seen, oldest first
        self.backoff, self.jitter = backoff, jitter
        # failed tries to send again: (when, order of failing, try), earliest first
        self.retries: list[tuple[float, int, _Attempt]] = []
        self.failed_count = 0
        self.next_request = 0
        self.new = [0] * duration_s
        self.load = [0] * duration_s
        self.served = [0] * duration_s
        self.wasted = [0] * duration_s
        self.failures = [0] * duration_s

    def step(self, now: float, second: int, arrivals: int) -> None:
        self.clock.advance(now - self.clock.now())
        self.serve(now, second)
        while self.in_flight and (
            self.in_flight[0].state != "waiting" or self.in_flight[0].sent_at + self.timeout_s <= now
        ):
            attempt = self.in_flight.popleft()
            if attempt.state == "waiting":
                attempt.state = "timed out"
                self.failed(attempt)
        sending: list[_Attempt] = []
        while self.retries and self.retries[0][0] <= now + 1e-9:
            sending.append(heapq.heappop(self.retries)[2])
        for _ in range(arrivals):
            sending.append(_Attempt(self.next_request, 1, now))
            self.next_request += 1
            self.new[second] += 1
            if self.budget is not None:
                self.budget.record_call()
        for attempt in sending:
            attempt.sent_at = now
            self.send(attempt, now, second)

    def serve(self, now: float, second: int) -> None:
        if self.blip[0] <= now < self.blip[1]:
            return
        for _ in range(min(self.capacity_per_tick, len(self.queue))):
            attempt = self.queue.popleft()
            if attempt.state == "timed out" or now - attempt.sent_at > self.timeout_s:
                self.wasted[second] += 1
                continue
            attempt.state = "served"
            self.served[second] += 1
            if self.breaker is not None:
                self.breaker.record_success()

    def send(self, attempt: _Attempt, now: float, second: int) -> None:
        if self.breaker is not None:
            try:
                self.breaker.before_call()
            except CircuitOpenError:
                self.failures[second] += 1  # refused by the breaker: given up, never sent
                return
        self.load[second] += 1
        if len(self.queue) >= self.queue_limit:
            self.failed(attempt)  # queue full: an error at once
            return
        self.queue.append(attempt)
        self.in_flight.append(attempt)

    def failed(self, attempt: _Attempt) -> None:
        self.failures[int(self.clock.now() + 1e-9)] += 1
        if self.breaker is not None:
            self.breaker.record_failure()
        if attempt.try_number >= self.tries:
            return
        if self.budget is not None and not self.budget.try_retry():
            return
        due = self.clock.now()  # the next tick
        if self.backoff is not None:
            due += self.backoff.delay_s(attempt.try_number, self.jitter.random)
        self.failed_count += 1
        retry = _Attempt(attempt.request, attempt.try_number + 1, attempt.sent_at)
        heapq.heappush(self.retries, (due, self.failed_count, retry))
