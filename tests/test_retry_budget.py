import math

import pytest

from jobqueue import InvalidSettingError, ManualClock
from jobqueue.retry_budget import RetryBudget


def drain(budget: RetryBudget) -> int:
    allowed = 0
    while budget.try_retry():
        allowed += 1
    return allowed


def test_starts_full_then_ten_calls_earn_one_retry() -> None:
    budget = RetryBudget(clock=ManualClock(), ratio=0.1, max_tokens=10, min_retries_per_s=0)
    assert drain(budget) == 10
    for _ in range(9):
        budget.record_call()
    assert not budget.try_retry()
    budget.record_call()  # the tenth: 10 x 0.1 is one token, despite float rounding
    assert budget.try_retry()
    assert not budget.try_retry()
    assert (budget.retries, budget.refused) == (11, 3)


def test_retries_stay_within_ten_percent_of_calls_plus_the_burst() -> None:
    budget = RetryBudget(clock=ManualClock(), ratio=0.1, max_tokens=5, min_retries_per_s=0)
    retries = 0
    for _ in range(1000):
        budget.record_call()
        retries += budget.try_retry()  # every call fails and wants a retry
    assert retries == 104  # 5 at the start + 999 x 0.1 (the first deposit overflows the full bucket)
    assert retries <= 0.1 * 1000 + 5


def test_the_bucket_never_holds_more_than_max_tokens() -> None:
    budget = RetryBudget(clock=ManualClock(), ratio=0.5, max_tokens=2, min_retries_per_s=0)
    for _ in range(100):
        budget.record_call()
    assert budget.tokens == 2
    assert drain(budget) == 2


def test_refills_with_time_on_the_clock() -> None:
    clock = ManualClock()
    budget = RetryBudget(clock=clock, ratio=0.1, max_tokens=3, min_retries_per_s=0.5)
    assert drain(budget) == 3
    clock.advance(1.999)
    assert not budget.try_retry()
    clock.advance(0.001)  # 2 s at 0.5 tokens/s: one token
    assert budget.try_retry()
    clock.advance(3600)
    assert budget.tokens == 3


def test_repr_counts() -> None:
    budget = RetryBudget(clock=ManualClock(), max_tokens=1, min_retries_per_s=0)
    budget.try_retry()
    budget.try_retry()
    assert repr(budget) == "RetryBudget(tokens=0, retries=1, refused=1)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ratio": 1.5}, "ratio must be a number between 0 and 1, got 1.5"),
        ({"ratio": -0.1}, "ratio must be a number between 0 and 1, got -0.1"),
        ({"max_tokens": 0.5}, "max_tokens must be a number >= 1, got 0.5"),
        ({"max_tokens": math.inf}, "max_tokens must be finite, got inf"),
        ({"min_retries_per_s": -1}, "min_retries_per_s must be a number >= 0, got -1"),
        ({"ratio": True}, "got True"),
        ({"ratio": math.nan}, "got nan"),
    ],
)
def test_bad_settings_are_refused_by_name(options: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        RetryBudget(clock=ManualClock(), **options)
