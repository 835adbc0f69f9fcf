import asyncio
import math

import pytest

from jobqueue import InvalidSettingError, JobQueueError, ManualClock
from jobqueue.breaker import CircuitBreaker, CircuitOpenError


class Down(Exception):
    pass


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        with pytest.raises(Down), breaker:
            raise Down("provider down")


def succeed(breaker: CircuitBreaker) -> None:
    with breaker:
        pass


def make(threshold: int = 3, reset_s: float = 10.0) -> tuple[ManualClock, CircuitBreaker]:
    clock = ManualClock()
    return clock, CircuitBreaker("mail", clock=clock, failure_threshold=threshold, reset_timeout_s=reset_s)


def test_closed_until_the_threshold_of_consecutive_failures() -> None:
    _, breaker = make(threshold=3)
    fail(breaker, 2)
    assert (breaker.state, breaker.failures) == ("closed", 2)
    fail(breaker)
    assert breaker.state == "open"


def test_a_success_resets_the_count() -> None:
    _, breaker = make(threshold=3)
    fail(breaker, 2)
    succeed(breaker)
    fail(breaker, 2)
    assert (breaker.state, breaker.failures) == ("closed", 2)


def test_open_refuses_without_calling_and_says_when_to_try_again() -> None:
    clock, breaker = make(threshold=1, reset_s=10)
    clock.advance(5)
    fail(breaker)
    clock.advance(3)
    called = []
    with pytest.raises(CircuitOpenError) as refused, breaker:
        called.append(1)
    assert called == []
    assert refused.value.retry_at_s == 15
    assert refused.value.retry_after_s(clock.now()) == 7
    assert refused.value.dependency == "mail"
    assert str(refused.value) == "circuit open for 'mail': try again at t=15s"
    assert isinstance(refused.value, JobQueueError)


def test_half_open_exactly_at_the_reset_timeout_not_before() -> None:
    clock, breaker = make(threshold=1, reset_s=10)
    fail(breaker)
    clock.advance(9.999)
    assert breaker.state == "open"
    clock.advance(0.001)
    assert breaker.state == "half-open"


def test_one_trial_at_a_time_when_half_open_and_its_success_closes() -> None:
    clock, breaker = make(threshold=1, reset_s=10)
    fail(breaker)
    clock.advance(10)
    breaker.before_call()  # the trial
    with pytest.raises(CircuitOpenError) as refused:
        breaker.before_call()
    assert refused.value.retry_at_s == 20  # one reset timeout from now
    breaker.record_success()
    assert (breaker.state, breaker.failures) == ("closed", 0)
    succeed(breaker)


def test_a_failed_trial_opens_again_for_a_full_timeout() -> None:
    clock, breaker = make(threshold=2, reset_s=10)
    fail(breaker, 2)
    clock.advance(12)
    fail(breaker)
    assert breaker.state == "open"
    assert breaker.retry_at_s == 22
    clock.advance(9.999)
    assert breaker.state == "open"
    clock.advance(0.001)
    assert breaker.state == "half-open"


def test_exceptions_outside_counts_do_not_count_and_free_the_trial() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker("mail", clock=clock, failure_threshold=1, reset_timeout_s=10, counts=(Down,))
    with pytest.raises(KeyError), breaker:
        raise KeyError("bad address")
    assert breaker.state == "closed"
    fail(breaker)
    clock.advance(10)
    with pytest.raises(KeyError), breaker:
        raise KeyError("bad address")
    assert breaker.state == "half-open"
    breaker.before_call()  # the trial slot is free again


def test_a_nested_circuit_open_error_never_counts() -> None:
    _, outer = make(threshold=1)
    _, inner = make(threshold=1)
    fail(inner)
    with pytest.raises(CircuitOpenError), outer, inner:
        pass
    assert outer.state == "closed"


def test_async_with_and_call() -> None:
    clock, breaker = make(threshold=2, reset_s=5)

    async def send(ok: bool) -> str:
        if not ok:
            raise Down("down")
        return "sent"

    async def scenario() -> list[str]:
        seen = [await breaker.call(send, True)]
        for _ in range(2):
            with pytest.raises(Down):
                await breaker.call(send, False)
        try:
            async with breaker:
                seen.append("not reached")
        except CircuitOpenError as error:
            seen.append(f"refused until t={error.retry_at_s:g}s")
        clock.advance(5)
        seen.append(await breaker.call(send, True))
        seen.append(breaker.state)
        return seen

    assert asyncio.run(scenario()) == ["sent", "refused until t=5s", "sent", "closed"]


def test_cancelled_trial_frees_the_slot() -> None:
    clock, breaker = make(threshold=1, reset_s=5)
    fail(breaker)
    clock.advance(5)

    async def scenario() -> None:
        async def hang() -> None:
            await asyncio.sleep(3600)

        task = asyncio.create_task(breaker.call(hang))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert breaker.state == "half-open"
    breaker.before_call()


def test_closed_breaker_has_no_retry_time() -> None:
    _, breaker = make()
    assert breaker.retry_at_s == -math.inf
    assert repr(breaker) == "CircuitBreaker('mail', state='closed', failures=0)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"failure_threshold": 0}, "failure_threshold must be an int >= 1, got 0"),
        ({"reset_timeout_s": 0}, "reset_timeout_s must be a finite number of seconds > 0, got 0"),
        ({"reset_timeout_s": math.inf}, "got inf"),
    ],
)
def test_bad_settings_are_refused_by_name(options: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        CircuitBreaker("mail", clock=ManualClock(), **options)  # type: ignore[arg-type]


def test_a_breaker_needs_a_name() -> None:
    with pytest.raises(InvalidSettingError, match="needs a name"):
        CircuitBreaker("", clock=ManualClock())
