import math
import re
import time

import pytest

import jobqueue as jq
from jobqueue import InvalidSettingError, ManualClock, SystemClock


def test_manual_clock_starts_at_zero() -> None:
    clock = ManualClock()
    assert clock.now() == 0.0
    assert isinstance(clock.now(), float)


def test_manual_clock_can_start_elsewhere() -> None:
    assert ManualClock(100).now() == 100.0
    assert ManualClock(start_s=2.5).now() == 2.5


@pytest.mark.parametrize("start_s", [math.nan, math.inf, -math.inf])
def test_manual_clock_rejects_a_start_that_is_not_finite(start_s: float) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {start_s!r}")):
        ManualClock(start_s)


def test_advance_moves_forward_and_returns_the_new_time() -> None:
    clock = ManualClock()
    assert clock.advance(1.5) == 1.5
    assert clock.advance(0) == 1.5
    assert clock.advance(28.5) == 30.0
    assert clock.now() == 30.0


@pytest.mark.parametrize(
    ("seconds", "shown"), [(-1, "-1"), (-0.001, "-0.001"), (math.nan, "nan"), (math.inf, "inf")]
)
def test_advance_rejects_negative_or_non_finite_seconds_and_leaves_the_clock(
    seconds: float, shown: str
) -> None:
    clock = ManualClock(10)
    with pytest.raises(InvalidSettingError) as info:
        clock.advance(seconds)
    assert shown in str(info.value)
    assert clock.now() == 10.0


def test_invalid_setting_error_is_a_value_error_under_the_package_root() -> None:
    with pytest.raises(ValueError):
        ManualClock().advance(-1)
    with pytest.raises(jq.JobQueueError):
        ManualClock().advance(-1)


def test_system_clock_reads_the_wall_clock_in_seconds() -> None:
    before = time.time()
    now = SystemClock().now()
    after = time.time()
    assert before <= now <= after


def test_manual_clock_repr_shows_the_time() -> None:
    clock = ManualClock()
    clock.advance(2.5)
    assert repr(clock) == "ManualClock(now=2.5s)"


def test_a_queue_reads_time_from_any_clock() -> None:
    queue = jq.JobQueue(SystemClock())
    job = queue.enqueue(jq.JobType("noop", int), 1)
    assert abs(job.run_at - time.time()) < 60
