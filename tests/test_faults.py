"""jobqueue.testing's faults: a clock that runs ahead or behind, and what ServerClock makes of it."""

import math

import pytest

import jobqueue as jq
from jobqueue.testing import SkewedClock


def test_a_skewed_clock_is_its_base_plus_the_offset() -> None:
    base = jq.ManualClock(1_000.0)
    ahead, behind = SkewedClock(31.0, base), SkewedClock(-30, base)
    assert (ahead.now(), behind.now()) == (1_031.0, 970.0)
    base.advance(5)
    assert (ahead.now(), behind.now()) == (1_036.0, 975.0)
    assert repr(ahead) == "SkewedClock(offset_s=+31)"


def test_the_servers_clock_takes_the_skew_out() -> None:
    server = jq.ManualClock(5_000.0)
    clock = jq.ServerClock(SkewedClock(31.0, server))
    clock.sync(server.now)
    assert clock.now() == server.now() and clock.offset_s == -31.0


@pytest.mark.parametrize("offset", [math.nan, math.inf, True, "31"])
def test_a_skew_must_be_a_finite_number(offset: object) -> None:
    with pytest.raises(jq.InvalidSettingError, match="offset_s must be a finite number"):
        SkewedClock(offset)  # type: ignore[arg-type]
