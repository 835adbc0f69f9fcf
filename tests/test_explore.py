import math

import pytest

import jobqueue as jq
from jobqueue.teaching import explore
from jobqueue.teaching.explore import (
    STRATEGIES,
    delay_range_s,
    delay_spread,
    delays_s,
    explore_backoff,
    explorer_summary,
    herd_table,
    simulate_herd,
)

BACKOFF = jq.Backoff(base_s=1, cap_s=60)


def constant(value: float) -> jq.RandomFn:
    return lambda: value


def test_no_jitter_waits_the_ceiling_and_never_draws() -> None:
    def never() -> float:
        raise AssertionError("no jitter must not call random()")

    assert delays_s(BACKOFF, "none", 8, never) == (1, 2, 4, 8, 16, 32, 60, 60)


def test_equal_jitter_is_the_packages_backoff() -> None:
    for value in (0.0, 0.3, 1.0):
        expected = tuple(BACKOFF.delay_s(n, constant(value)) for n in range(1, 9))
        assert delays_s(BACKOFF, "equal", 8, constant(value)) == expected
    assert delays_s(BACKOFF, "equal", 4, constant(0.0)) == (0.5, 1, 2, 4)


def test_full_jitter_matches_the_course_spec() -> None:
    backoff = jq.Backoff(base_s=1, cap_s=20)
    assert delays_s(backoff, "full", 6, constant(0.0)) == (0, 0, 0, 0, 0, 0)
    assert delays_s(backoff, "full", 6, constant(0.5)) == (0.5, 1, 2, 4, 8, 10)
    assert delays_s(backoff, "full", 6, constant(1.0)) == (1, 2, 4, 8, 16, 20)


def test_decorrelated_jitter_grows_from_the_previous_delay() -> None:
    # Brooker: sleep = min(cap, random_between(base, sleep * 3)), sleep starting at base
    assert delays_s(BACKOFF, "decorrelated", 6, constant(1.0)) == (3, 9, 27, 60, 60, 60)
    assert delays_s(BACKOFF, "decorrelated", 4, constant(0.0)) == (1, 1, 1, 1)
    assert delays_s(jq.Backoff(base_s=2, cap_s=100), "decorrelated", 2, constant(0.5)) == (4, 7)


def test_delay_range_per_strategy() -> None:
    assert delay_range_s(BACKOFF, "none", 5) == (16, 16)
    assert delay_range_s(BACKOFF, "equal", 5) == (8, 16)
    assert delay_range_s(BACKOFF, "full", 5) == (0, 16)
    assert delay_range_s(BACKOFF, "decorrelated", 2) == (1, 9)
    assert delay_range_s(BACKOFF, "decorrelated", 5) == (1, 60)
    assert delay_range_s(BACKOFF, "decorrelated", 10_000) == (1, 60)  # no overflow


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_spread_stays_in_range_and_is_seeded(strategy: explore.Strategy) -> None:
    spread = delay_spread(BACKOFF, strategy, 10, draws=300, seed=3)
    assert spread.attempts == tuple(range(1, 11))
    assert spread.draws == 300
    for n, low, median, high in zip(
        spread.attempts, spread.low_s, spread.median_s, spread.high_s, strict=True
    ):
        smallest, largest = delay_range_s(BACKOFF, strategy, n)
        assert smallest <= low <= median <= high <= largest
    assert delay_spread(BACKOFF, strategy, 10, draws=300, seed=3) == spread


def test_spread_shows_how_wide_each_strategy_is() -> None:
    none = delay_spread(BACKOFF, "none", 6)
    assert none.low_s == none.median_s == none.high_s == (1, 2, 4, 8, 16, 32)
    full = delay_spread(BACKOFF, "full", 6)
    assert full.low_s[5] < 1 and full.high_s[5] > 31  # 1,000 draws cover almost all of 0..32 s
    assert delay_spread(BACKOFF, "full", 6, seed=8) != full


def test_bad_arguments_are_refused_with_the_bad_value() -> None:
    with pytest.raises(jq.InvalidSettingError, match="'jittery'"):
        delays_s(BACKOFF, "jittery", 3, constant(1.0))  # type: ignore[arg-type]
    with pytest.raises(jq.InvalidSettingError, match="attempts"):
        delays_s(BACKOFF, "full", 0, constant(1.0))
    with pytest.raises(jq.InvalidSettingError, match=r"\[0, 1\]"):
        delays_s(BACKOFF, "full", 2, constant(1.5))
    with pytest.raises(jq.InvalidSettingError, match="draws"):
        delay_spread(BACKOFF, "full", draws=0)
    with pytest.raises(jq.InvalidSettingError, match="capacity_per_s"):
        simulate_herd(BACKOFF, "full", capacity_per_s=0)
    with pytest.raises(jq.InvalidSettingError, match="down_until_s"):
        simulate_herd(BACKOFF, "full", down_until_s=math.inf)
    with pytest.raises(jq.InvalidSettingError, match="cap_s"):
        explore_backoff(10, 5, "equal")


def test_herd_without_jitter_comes_back_in_lockstep() -> None:
    herd = simulate_herd(BACKOFF, "none", clients=100, down_until_s=10, capacity_per_s=10)
    # all 100 at t=0, 1, 3, 7 (down), 15 (10 served), then 90 at 31, 80 at 63, 70 at 123 ...
    for t, count in [(0, 100), (1, 100), (3, 100), (7, 100), (15, 100), (31, 90), (63, 80), (123, 70)]:
        assert herd.requests_per_s[t] == count
    assert sum(1 for count in herd.requests_per_s if count) == 14
    assert herd.total_requests == 4 * 100 + sum(range(10, 101, 10)) == 950
    assert herd.peak_rps == 100
    assert herd.last_through_s == 483
    assert herd.refused == 450
    assert herd.gave_up == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_herd_books_balance(strategy: explore.Strategy) -> None:
    herd = simulate_herd(BACKOFF, strategy, clients=100, down_until_s=10, capacity_per_s=10, seed=5)
    assert sum(herd.requests_per_s) == herd.total_requests
    while_down = sum(herd.requests_per_s[:10])
    # every request is a failure while down, a refusal, or one of the 100 that got through
    assert herd.total_requests == while_down + herd.refused + 100
    assert herd.last_through_s is not None and herd.last_through_s >= 10
    assert herd.gave_up == 0
    assert simulate_herd(BACKOFF, strategy, clients=100, down_until_s=10, capacity_per_s=10, seed=5) == herd


def test_jitter_breaks_up_the_herd() -> None:
    results = {s: simulate_herd(BACKOFF, s) for s in STRATEGIES}
    for strategy in ("equal", "full", "decorrelated"):
        assert results[strategy].peak_rps < results["none"].peak_rps / 3
        assert results[strategy].total_requests < results["none"].total_requests
        last, lockstep_last = results[strategy].last_through_s, results["none"].last_through_s
        assert last is not None and lockstep_last is not None and last < lockstep_last / 5


def test_herd_clients_give_up_after_max_attempts() -> None:
    herd = simulate_herd(BACKOFF, "none", clients=5, down_until_s=100, max_attempts=3)
    assert herd.gave_up == 5
    assert herd.total_requests == 15
    assert herd.last_through_s is None


def test_herd_table_and_summary_text() -> None:
    results = [simulate_herd(BACKOFF, s) for s in STRATEGIES]
    lines = herd_table(results).splitlines()
    assert lines[0].split() == ["strategy", "requests", "peak", "req/s", "last", "through"]
    assert lines[1].split() == ["no", "jitter", "950", "100", "t=483s"]
    assert [line.split()[0] for line in lines[1:]] == ["no", "equal", "full", "decorrelated"]

    assert explorer_summary(results[0]) == (
        "no jitter, base 1 s, cap 60 s: attempt 5 waits 16 s; "
        "herd of 100: peak 100 req/s, all through by t=483s"
    )
    equal = explorer_summary(results[1])
    assert equal.startswith("equal jitter, base 1 s, cap 60 s: attempt 5 waits 8-16 s; herd of 100: peak ")
    assert explore_backoff(1, 60, "equal").summary == equal
    gave_up = explorer_summary(simulate_herd(BACKOFF, "none", clients=5, down_until_s=100, max_attempts=3))
    assert gave_up.endswith("5 gave up, last nobody got through")
