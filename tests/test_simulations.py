import math

import pytest

from jobqueue import InvalidSettingError
from jobqueue.backoff import Backoff
from jobqueue.clock import Clock
from jobqueue.retry_budget import RetryBudget
from jobqueue.teaching.backlog import drain_time_s, run_queue, simulate_queue
from jobqueue.teaching.storms import POLICIES, layered_calls, simulate_storm

# --- the queueing simulation, small cases worked by hand ---------------------------------


def test_three_jobs_at_once_one_worker_wait_0_1_2() -> None:
    run = run_queue([0, 0, 0], [1, 1, 1], workers=1)
    assert run.waits_s == (0, 1, 2)
    assert run.end_s == 3
    assert run.backlog == (2, 1, 0, 0)  # sampled at t=0, 1, 2, 3 (after the events there)
    assert run.littles_law() == (2, 1, 2)  # L = 6 job-seconds / 3 s; λ = 3 / 3 s; W = 6 / 3


def test_two_workers_share_the_work() -> None:
    run = run_queue([0, 0, 0, 0], [2, 2, 2, 2], workers=2)
    assert run.waits_s == (0, 0, 2, 2)
    assert (run.end_s, run.utilisation) == (4, 1)


def test_polling_worker_sees_a_job_at_its_next_look() -> None:
    run = run_queue([0.25], [1], workers=1, poll_interval_s=1)
    assert run.waits_s == (0.75,)
    # worker 1 of 2 first looks at t=0.5: it takes the job
    assert run_queue([0.25], [1], workers=2, poll_interval_s=1).waits_s == (0.25,)


def test_a_worker_that_finishes_looks_again_at_once() -> None:
    run = run_queue([0, 0.5], [1, 1], workers=1, poll_interval_s=10)
    assert run.waits_s == (0, 0.5)


def test_no_claims_during_an_outage_then_the_backlog_drains() -> None:
    run = run_queue([0, 1, 2, 3], [0.5] * 4, workers=1, outage=(0.5, 4))
    assert run.waits_s == (0, 3, 2.5, 2)  # jobs 1-3 start at t=4, 4.5, 5
    assert run.end_s == 5.5
    assert run.backlog == (0, 1, 2, 3, 2, 0)  # at t=0 .. 5, after what happens at that instant
    assert run.oldest_age_s == (0, 0, 1, 2, 2, 0)


def test_newest_first_and_expired_jobs_dropped() -> None:
    lifo = run_queue([0, 0.1, 0.2], [1, 1, 1], workers=1, order="newest first")
    assert lifo.waits_s == pytest.approx((0, 1.9, 0.8))
    dropped = run_queue([0, 0.1, 0.2], [1, 1, 1], workers=1, expires_after_s=1)
    assert dropped.waits_s[:2] == pytest.approx((0, 0.9))
    assert math.isnan(dropped.waits_s[2])  # waited 1.8 s by t=2 when the worker came back
    assert dropped.dropped == 1
    assert dropped.run_waits_s == pytest.approx([0, 0.9])


def test_littles_law_holds_in_a_seeded_run() -> None:
    run = simulate_queue(arrival_rate_per_s=20, workers=3, service_s=0.12, duration_s=200, seed=3)
    busy, rate, wait = run.littles_law()
    assert busy == pytest.approx(rate * wait, rel=1e-9)
    assert rate == pytest.approx(20, rel=0.05)
    assert run.utilisation == pytest.approx(20 * 0.12 / 3, rel=0.05)


def test_the_shops_numbers_50_per_second_2_seconds_100_in_the_system() -> None:
    run = simulate_queue(arrival_rate_per_s=50, workers=125, service_s=2, duration_s=100, seed=7)
    in_system, rate, time_in_system = run.littles_law()
    assert in_system == pytest.approx(rate * time_in_system)
    assert 90 < in_system < 110


def test_same_seed_same_run_other_seed_other_run() -> None:
    def once(seed: int) -> tuple[float, ...]:
        return simulate_queue(
            arrival_rate_per_s=5, workers=1, service_s=0.1, duration_s=20, seed=seed
        ).waits_s

    assert once(1) == once(1)
    assert once(1) != once(2)


def test_wait_grows_past_the_knee() -> None:
    waits = [
        simulate_queue(arrival_rate_per_s=rate, workers=2, service_s=0.1, duration_s=300, seed=1).mean_wait_s
        for rate in (10, 16, 19)  # utilisation 50 %, 80 %, 95 %
    ]
    assert waits[0] < waits[1] < waits[2]
    assert waits[2] > 3 * waits[1]


def test_drain_time_one_hour_outage_at_80_percent_takes_4_hours() -> None:
    arrival = 40.0
    assert drain_time_s(arrival * 3600, capacity_per_s=arrival / 0.8, arrival_rate_per_s=arrival) == 4 * 3600
    with pytest.raises(InvalidSettingError, match="never drains"):
        drain_time_s(10, capacity_per_s=5, arrival_rate_per_s=5)


def test_quantiles_and_drained_at() -> None:
    run = run_queue([0, 0, 0, 0], [1, 1, 1, 1], workers=1)
    assert run.wait_quantile_s(0.5) == 2
    assert run.wait_quantile_s(0.99) == 3
    assert run.drained_at_s(0) == 3
    assert run.drained_at_s(0, threshold=2) == 1


@pytest.mark.parametrize(
    ("arrivals", "services", "options", "message"),
    [
        ([0], [1], {"workers": 0}, "workers must be an int >= 1, got 0"),
        ([0, 1], [1], {"workers": 1}, "2 arrival times but 1 running times"),
        ([1, 0], [1, 1], {"workers": 1}, "in order"),
        ([-1], [1], {"workers": 1}, "the earliest arrival time must be a finite number >= 0, got -1"),
        ([0], [math.nan], {"workers": 1}, "running time"),
        ([0], [1], {"workers": 1, "poll_interval_s": -1}, "poll_interval_s"),
        ([0], [1], {"workers": 1, "outage": (5, 1)}, "an outage must end after it starts"),
        ([0], [1], {"workers": 1, "sample_every_s": 0}, "sample_every_s must be a finite number > 0"),
    ],
)
def test_bad_settings_name_the_value(
    arrivals: list[float], services: list[float], options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        run_queue(arrivals, services, **options)  # type: ignore[arg-type]


# --- retry storms -------------------------------------------------------------------------


def test_three_layers_of_three_tries_make_27_calls() -> None:
    assert layered_calls([3, 3, 3]) == 27
    assert layered_calls([1, 1, 3]) == 3  # retry at one layer only
    assert layered_calls([4, 2]) == 8
    with pytest.raises(InvalidSettingError, match="tries_per_layer"):
        layered_calls([3, 0])


def test_without_a_blip_nobody_retries() -> None:
    for policy in POLICIES:
        run = simulate_storm(policy, blip=(0, 0), duration_s=20)
        assert run.load_per_s == run.new_per_s
        assert sum(run.failed_per_s) == 0
        assert run.recovered_at_s == 0


def test_no_budget_stays_down_budget_and_breaker_recover() -> None:
    storms = {policy: simulate_storm(policy) for policy in POLICIES}
    assert storms["no budget"].recovered_at_s is None
    assert storms["no budget"].peak_load_after_blip() > 2 * 100
    assert sum(storms["no budget"].served_per_s[25:]) == 0  # every answer comes too late
    for policy in ("retry budget", "circuit breaker"):
        recovered = storms[policy].recovered_at_s
        assert recovered is not None and recovered < 40, policy
        assert storms[policy].peak_load_after_blip() <= 100


def test_backoff_without_a_budget_delays_retries_but_sends_nearly_as_many() -> None:
    at_once, backed_off = simulate_storm("no budget"), simulate_storm("backoff, no budget")
    assert at_once.new_per_s == backed_off.new_per_s  # the jitter draws leave the arrivals alone
    assert backed_off.load_per_s[12] < at_once.load_per_s[12] / 2  # the first retries come later...
    retries = [sum(run.load_per_s) - sum(run.new_per_s) for run in (at_once, backed_off)]
    assert retries[1] > 0.9 * retries[0]  # ...but nearly all of them come (Brooker's point)
    assert backed_off.recovered_at_s is None


def test_backoff_delays_come_from_the_backoff_given() -> None:
    short = simulate_storm("backoff, no budget", backoff=Backoff(base_s=0.1, cap_s=0.1))
    assert short.load_per_s[12] > simulate_storm("backoff, no budget").load_per_s[12]
    assert simulate_storm("backoff, no budget", seed=3) == simulate_storm("backoff, no budget", seed=3)


def test_a_budget_keeps_retries_near_a_tenth_of_first_tries() -> None:
    run = simulate_storm("retry budget", budget=lambda clock: RetryBudget(clock=clock, min_retries_per_s=0))
    retries = sum(run.load_per_s) - sum(run.new_per_s)
    assert 0 < retries <= 0.1 * sum(run.new_per_s) + 10


def test_a_budget_that_never_allows_a_retry_sends_only_first_tries() -> None:
    class Never:
        def __init__(self, *, clock: Clock) -> None:
            self.calls = 0

        def record_call(self) -> None:
            self.calls += 1

        def try_retry(self) -> bool:
            return False

    run = simulate_storm("retry budget", budget=Never)
    assert run.load_per_s == run.new_per_s


def test_storms_are_deterministic_with_a_seed() -> None:
    assert simulate_storm("no budget", seed=3) == simulate_storm("no budget", seed=3)
    assert simulate_storm("no budget", seed=3) != simulate_storm("no budget", seed=4)


def test_storm_summary() -> None:
    run = simulate_storm("circuit breaker")
    assert run.summary().startswith("circuit breaker: ")
    assert "recovered at t=" in run.summary()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policy": "hope"}, "policy must be one of"),
        ({"tries": 0}, "tries must be an int >= 1"),
        ({"tick_s": 0.3}, "tick_s must divide 1 s"),
        ({"capacity_per_s": 105}, "tick_s must divide"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
    ],
)
def test_storm_settings_are_checked(options: dict[str, object], message: str) -> None:
    policy = options.pop("policy", "no budget")
    with pytest.raises(InvalidSettingError, match=message):
        simulate_storm(policy, **options)  # type: ignore[arg-type]
