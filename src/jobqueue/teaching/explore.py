"""Numbers behind the course's backoff pictures and widgets: backoff strategies and a herd.

Pure functions that return frozen dataclasses or text, so the pictures
(:mod:`jobqueue.teaching.plots`) and widgets (:mod:`jobqueue.teaching.widgets`) only draw,
and tests check the numbers without a browser. Randomness comes from a seeded
:class:`random.Random`, so every result is the same on every run.

- Backoff strategies after Marc Brooker's "Exponential Backoff And Jitter" (AWS
  Architecture Blog, 2015): ``"none"`` (always the ceiling), ``"equal"``, ``"full"`` and
  ``"decorrelated"`` jitter; :func:`delay_spread` draws many delay sequences and
  :func:`simulate_herd` lets a herd of clients retry against a service that comes back.

Job timelines and the job life-cycle live in :mod:`jobqueue.teaching.timeline`.

Introduced in lesson 02 (the explorer and the herd).
"""

from __future__ import annotations

import heapq
import math
import random as random_module
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jobqueue.backoff import Backoff, RandomFn, draw
from jobqueue.errors import InvalidSettingError

Strategy = Literal["none", "equal", "full", "decorrelated"]
"""How a delay is drawn under its ceiling: not at all, equal, full or decorrelated jitter."""

STRATEGIES: tuple[Strategy, ...] = ("none", "equal", "full", "decorrelated")
"""Every strategy, in the order the lessons compare them."""

STRATEGY_NAMES: dict[Strategy, str] = {
    "none": "no jitter",
    "equal": "equal jitter",
    "full": "full jitter",
    "decorrelated": "decorrelated jitter",
}
"""How the lessons name each strategy."""


def _check_strategy(strategy: str) -> Strategy:
    for known in STRATEGIES:
        if strategy == known:
            return known
    raise InvalidSettingError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidSettingError(f"{name} must be an int >= {minimum}, got {value!r}")


def next_delay_s(
    backoff: Backoff, strategy: Strategy, attempt: int, previous_s: float | None, random: RandomFn
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based), under ``strategy``.

    With ``ceiling = backoff.ceiling_s(attempt)`` (``min(cap, base * 2**(n-1))`` s):

    - ``"none"``: the ceiling; ``random`` is not called. Base 1 s, cap 60 s: 1, 2, 4, 8 s.
    - ``"equal"``: ``ceiling/2 + random()*ceiling/2`` (:meth:`Backoff.delay_s`).
    - ``"full"``: ``random() * ceiling``, anywhere from 0 to the ceiling.
    - ``"decorrelated"``: ``min(cap, base + random() * (3*previous - base))``, Brooker's
      ``min(cap, random_between(base, sleep * 3))``; it ignores ``attempt`` and grows from
      the previous delay (``previous_s``, ``None`` for the first, which counts as base).

    Raises:
        InvalidSettingError: for an unknown strategy, a bad attempt, or a ``random()``
            result outside ``[0, 1]``.
    """
    strategy = _check_strategy(strategy)
    ceiling = backoff.ceiling_s(attempt)
    if strategy == "none":
        return ceiling
    if strategy == "equal":
        return backoff.delay_s(attempt, random)
    if strategy == "full":
        return draw(random) * ceiling
    previous = backoff.base_s if previous_s is None else previous_s
    return min(backoff.cap_s, backoff.base_s + draw(random) * (3 * previous - backoff.base_s))


def delays_s(backoff: Backoff, strategy: Strategy, attempts: int, random: RandomFn) -> tuple[float, ...]:
    """One client's delays after failed attempts ``1..attempts``, in seconds.

    Example: ``delays_s(Backoff(base_s=1, cap_s=60), "none", 8, random)`` is
    ``(1, 2, 4, 8, 16, 32, 60, 60)``.

    Raises:
        InvalidSettingError: as :func:`next_delay_s`, or if ``attempts < 1``.
    """
    _check_count("attempts", attempts, 1)
    delays: list[float] = []
    for attempt in range(1, attempts + 1):
        delays.append(next_delay_s(backoff, strategy, attempt, delays[-1] if delays else None, random))
    return tuple(delays)


def delay_range_s(backoff: Backoff, strategy: Strategy, attempt: int) -> tuple[float, float]:
    """Shortest and longest possible delay after failed attempt ``attempt``, in seconds.

    ``"none"``: (ceiling, ceiling); ``"equal"``: (ceiling/2, ceiling); ``"full"``:
    (0, ceiling); ``"decorrelated"``: (base, ``min(cap, base * 3**attempt)``). Base 1 s,
    cap 60 s, attempt 5: 16-16, 8-16, 0-16 and 1-60 s.
    """
    strategy = _check_strategy(strategy)
    ceiling = backoff.ceiling_s(attempt)
    if strategy == "none":
        return ceiling, ceiling
    if strategy == "equal":
        return ceiling / 2, ceiling
    if strategy == "full":
        return 0.0, ceiling
    if attempt >= math.log(backoff.cap_s / backoff.base_s, 3):
        return backoff.base_s, backoff.cap_s
    return backoff.base_s, min(backoff.cap_s, backoff.base_s * 3**attempt)


@dataclass(frozen=True, kw_only=True)
class DelaySpread:
    """Where the delays of many clients fall, attempt by attempt (all in seconds).

    Attributes:
        backoff, strategy: the rule the delays were drawn with.
        draws: how many independent delay sequences were drawn.
        attempts: the attempt numbers, ``1..n``.
        low_s, median_s, high_s: per attempt, the smallest, median and largest delay drawn.
    """

    backoff: Backoff
    strategy: Strategy
    draws: int
    attempts: tuple[int, ...]
    low_s: tuple[float, ...]
    median_s: tuple[float, ...]
    high_s: tuple[float, ...]


def delay_spread(
    backoff: Backoff, strategy: Strategy, attempts: int = 10, *, draws: int = 1000, seed: int = 7
) -> DelaySpread:
    """Draw ``draws`` delay sequences (attempts ``1..attempts``) and summarise each attempt.

    Uses ``random.Random(seed)``, so the result is the same on every run.

    Raises:
        InvalidSettingError: for an unknown strategy, or ``attempts`` or ``draws`` < 1.
    """
    strategy = _check_strategy(strategy)
    _check_count("draws", draws, 1)
    rng = random_module.Random(seed)
    samples = [delays_s(backoff, strategy, attempts, rng.random) for _ in range(draws)]
    columns = list(zip(*samples, strict=True))
    return DelaySpread(
        backoff=backoff,
        strategy=strategy,
        draws=draws,
        attempts=tuple(range(1, attempts + 1)),
        low_s=tuple(min(column) for column in columns),
        median_s=tuple(statistics.median(column) for column in columns),
        high_s=tuple(max(column) for column in columns),
    )


@dataclass(frozen=True, kw_only=True)
class HerdResult:
    """What a service saw while a herd of clients retried against it.

    Attributes:
        backoff, strategy, clients, down_until_s, capacity_per_s: the set-up
            (see :func:`simulate_herd`).
        requests_per_s: requests per 1 s bucket; item ``k`` counts ``k <= t < k+1``,
            failed ones included (the first wave at t=0 is in item 0).
        total_requests: every request, the first wave included.
        peak_rps: the most requests in one bucket once the service is back (the buckets
            from ``floor(down_until_s)`` on): what the recovering service must absorb.
        refused: requests refused once the service was back, because it was full.
        last_through_s: when the last client got through, in seconds (``None`` if none did).
        gave_up: clients that used all their attempts and never got through.
    """

    backoff: Backoff
    strategy: Strategy
    clients: int
    down_until_s: float
    capacity_per_s: int
    requests_per_s: tuple[int, ...]
    total_requests: int
    peak_rps: int
    refused: int
    last_through_s: float | None
    gave_up: int


def simulate_herd(
    backoff: Backoff,
    strategy: Strategy,
    *,
    clients: int = 100,
    down_until_s: float = 10.0,
    capacity_per_s: int = 10,
    max_attempts: int = 100,
    seed: int = 7,
) -> HerdResult:
    """Let ``clients`` clients, all failing at t=0, retry until a recovering service serves them.

    The service fails every request before ``down_until_s``; from then on it serves at
    most ``capacity_per_s`` requests in each 1 s bucket (``k <= t < k+1``), first come
    first served, and refuses the rest. A client whose request fails waits
    :func:`next_delay_s` for that attempt, then tries again, up to ``max_attempts``
    requests in all. Draws come from ``random.Random(seed)``, in the order requests happen.

    Example: 100 clients, down until t=10 s, 10 requests/s, base 1 s, cap 60 s, no
    jitter: all 100 retry at t=1, 3, 7, 15 s; at t=15 s 10 get through, and the rest
    come back together at t=47 s, then every 60 s: the last 10 get through at t=483 s.

    Raises:
        InvalidSettingError: for an unknown strategy, fewer than 1 client, a
            ``down_until_s`` that is not finite and > 0, ``capacity_per_s < 1`` or
            ``max_attempts < 1``.
    """
    strategy = _check_strategy(strategy)
    _check_count("clients", clients, 1)
    _check_count("capacity_per_s", capacity_per_s, 1)
    _check_count("max_attempts", max_attempts, 1)
    if not (math.isfinite(down_until_s) and down_until_s > 0):
        raise InvalidSettingError(
            f"down_until_s must be a finite number of seconds > 0, got {down_until_s!r}"
        )
    rng = random_module.Random(seed)
    due = [(0.0, client, 1, backoff.base_s) for client in range(clients)]  # (t, client, attempt, last delay)
    heapq.heapify(due)
    requests: dict[int, int] = {}
    served: dict[int, int] = {}
    refused = gave_up = 0
    last_through: float | None = None
    while due:
        t, client, attempt, previous = heapq.heappop(due)
        bucket = math.floor(t)
        requests[bucket] = requests.get(bucket, 0) + 1
        if t >= down_until_s:
            if served.get(bucket, 0) < capacity_per_s:
                served[bucket] = served.get(bucket, 0) + 1
                last_through = t
                continue
            refused += 1
        if attempt >= max_attempts:
            gave_up += 1
            continue
        delay = next_delay_s(backoff, strategy, attempt, previous, rng.random)
        heapq.heappush(due, (t + delay, client, attempt + 1, delay))
    series = tuple(requests.get(k, 0) for k in range(max(requests) + 1))
    return HerdResult(
        backoff=backoff,
        strategy=strategy,
        clients=clients,
        down_until_s=down_until_s,
        capacity_per_s=capacity_per_s,
        requests_per_s=series,
        total_requests=sum(series),
        peak_rps=max(series[math.floor(down_until_s) :], default=0),
        refused=refused,
        last_through_s=last_through,
        gave_up=gave_up,
    )


def herd_table(results: Sequence[HerdResult]) -> str:
    """A small text table comparing herds: requests, peak after recovery, last one through.

    One line per result after a header, e.g.
    ``no jitter                 950         100        t=483s``.
    """
    lines = [f"{'strategy':<20} {'requests':>8}  {'peak req/s':>10}  {'last through':>12}"]
    for result in results:
        last = "never" if result.last_through_s is None else f"t={result.last_through_s:.0f}s"
        name = STRATEGY_NAMES[result.strategy]
        lines.append(f"{name:<20} {result.total_requests:>8}  {result.peak_rps:>10}  {last:>12}")
    return "\n".join(lines)


def explorer_summary(herd: HerdResult, attempt: int = 5) -> str:
    """One line saying what ``herd``'s backoff does: a delay range and how the herd fared.

    Example: ``"equal jitter, base 1 s, cap 60 s: attempt 5 waits 8-16 s; herd of 100:
    peak 26 req/s, all through by t=28s"`` for :func:`simulate_herd`'s default herd.
    """
    backoff, strategy = herd.backoff, herd.strategy
    low, high = delay_range_s(backoff, strategy, attempt)
    waits = f"{low:g} s" if low == high else f"{low:g}-{high:g} s"
    head = f"{STRATEGY_NAMES[strategy]}, base {backoff.base_s:g} s, cap {backoff.cap_s:g} s"
    through = "nobody got through" if herd.last_through_s is None else f"t={herd.last_through_s:.0f}s"
    ending = f"all through by {through}" if herd.gave_up == 0 else f"{herd.gave_up} gave up, last {through}"
    herd_text = f"herd of {herd.clients}: peak {herd.peak_rps} req/s, {ending}"
    return f"{head}: attempt {attempt} waits {waits}; {herd_text}"


@dataclass(frozen=True, kw_only=True)
class Exploration:
    """Everything the backoff explorer shows for one setting: spread, herd and summary."""

    spread: DelaySpread
    herd: HerdResult
    summary: str


def explore_backoff(
    base_s: float,
    cap_s: float,
    strategy: Strategy,
    *,
    attempts: int = 10,
    clients: int = 100,
    down_until_s: float = 10.0,
    capacity_per_s: int = 10,
    seed: int = 7,
) -> Exploration:
    """Compute what the backoff explorer shows for ``base_s``, ``cap_s`` (seconds) and ``strategy``.

    :func:`delay_spread` over ``attempts`` attempts, :func:`simulate_herd` with the
    given herd, and :func:`explorer_summary` of the two, all seeded with ``seed``.

    Raises:
        InvalidSettingError: for a bad backoff (``cap_s < base_s``...), strategy or herd.
    """
    backoff = Backoff(base_s=base_s, cap_s=cap_s)
    herd = simulate_herd(
        backoff,
        strategy,
        clients=clients,
        down_until_s=down_until_s,
        capacity_per_s=capacity_per_s,
        seed=seed,
    )
    spread = delay_spread(backoff, strategy, attempts, seed=seed)
    return Exploration(spread=spread, herd=herd, summary=explorer_summary(herd))
