import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobqueue import DEFAULT_BASE_S, DEFAULT_CAP_S, Backoff, InvalidSettingError


def one() -> float:
    return 1.0


def test_defaults_are_one_second_base_and_sixty_second_cap() -> None:
    assert (DEFAULT_BASE_S, DEFAULT_CAP_S) == (1.0, 60.0)
    assert Backoff() == Backoff(base_s=1.0, cap_s=60.0)


def test_default_backoff_with_random_one_doubles_up_to_the_cap() -> None:
    backoff = Backoff()
    assert [backoff.delay_s(n, one) for n in range(1, 10)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_cap_four_gives_1_2_4_4_4() -> None:
    backoff = Backoff(base_s=1, cap_s=4)
    assert [backoff.delay_s(n, one) for n in range(1, 6)] == [1, 2, 4, 4, 4]


def test_ceiling_is_min_of_cap_and_doubled_base() -> None:
    backoff = Backoff(base_s=3, cap_s=10)
    assert [backoff.ceiling_s(n) for n in range(1, 6)] == [3, 6, 10, 10, 10]


@pytest.mark.parametrize(
    ("random_value", "expected"),
    [(0.0, [0.5, 1, 2, 2, 2]), (0.5, [0.75, 1.5, 3, 3, 3]), (1.0, [1, 2, 4, 4, 4])],
)
def test_equal_jitter_is_half_the_ceiling_plus_random_times_half(
    random_value: float, expected: list[float]
) -> None:
    backoff = Backoff(base_s=1, cap_s=4)
    assert [backoff.delay_s(n, lambda: random_value) for n in range(1, 6)] == expected


def test_delay_calls_random_exactly_once() -> None:
    calls: list[int] = []

    def counting() -> float:
        calls.append(1)
        return 0.25

    assert Backoff(base_s=8, cap_s=8).delay_s(3, counting) == 5.0
    assert len(calls) == 1


@pytest.mark.parametrize("attempt", [10**6, 10**400])
def test_a_huge_attempt_number_returns_the_cap_without_overflow(attempt: int) -> None:
    backoff = Backoff(base_s=1, cap_s=4)
    assert backoff.ceiling_s(attempt) == 4.0
    assert backoff.delay_s(attempt, one) == 4.0
    assert Backoff().delay_s(attempt, lambda: 0.0) == 30.0


def test_a_tiny_base_with_a_huge_cap_does_not_overflow() -> None:
    backoff = Backoff(base_s=1e-300, cap_s=1e300)
    # 1e-300 * 2**1099 is about 1.4e31, far below the cap: a normal float, no overflow needed.
    assert backoff.ceiling_s(1100) == math.ldexp(1e-300, 1099)


@pytest.mark.parametrize("attempt", [0, -1, True, 1.5])
def test_bad_attempt_numbers_are_rejected_by_name(attempt: object) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {attempt!r}")):
        Backoff().ceiling_s(attempt)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {attempt!r}")):
        Backoff().delay_s(attempt, one)  # type: ignore[arg-type]


@pytest.mark.parametrize("base_s", [0, -1, math.nan, math.inf])
def test_base_must_be_a_finite_positive_number(base_s: float) -> None:
    with pytest.raises(InvalidSettingError) as info:
        Backoff(base_s=base_s, cap_s=60)
    assert "base_s" in str(info.value)
    assert repr(base_s) in str(info.value)


@pytest.mark.parametrize(
    ("base_s", "cap_s"), [(2, 1), (1, 0.5), (1, 0), (1, -1), (1, math.nan), (1, math.inf)]
)
def test_cap_must_be_finite_and_at_least_the_base(base_s: float, cap_s: float) -> None:
    with pytest.raises(InvalidSettingError) as info:
        Backoff(base_s=base_s, cap_s=cap_s)
    assert "cap_s" in str(info.value)
    assert repr(cap_s) in str(info.value)


def test_cap_equal_to_base_is_a_constant_delay() -> None:
    backoff = Backoff(base_s=5, cap_s=5)
    assert [backoff.delay_s(n, one) for n in (1, 2, 3, 100)] == [5, 5, 5, 5]


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf])
def test_random_outside_zero_one_is_rejected_by_name(bad: float) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {bad!r}")):
        Backoff().delay_s(1, lambda: bad)


@settings(max_examples=200, deadline=None)
@given(
    attempt=st.integers(min_value=1, max_value=5000),
    random_value=st.floats(min_value=0, max_value=1),
    base_s=st.sampled_from([0.001, 0.5, 1.0, 3.0]),
    cap_s=st.sampled_from([3.0, 60.0, 3600.0]),
)
def test_delay_lies_between_half_the_ceiling_and_the_ceiling(
    attempt: int, random_value: float, base_s: float, cap_s: float
) -> None:
    backoff = Backoff(base_s=base_s, cap_s=cap_s)
    ceiling = backoff.ceiling_s(attempt)
    assert ceiling == min(cap_s, base_s * 2.0 ** min(attempt - 1, 100))
    assert ceiling / 2 <= backoff.delay_s(attempt, lambda: random_value) <= ceiling <= cap_s
    assert backoff.ceiling_s(attempt + 1) >= ceiling
