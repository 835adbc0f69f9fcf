import asyncio
import math
import re
import time

import pytest

import jobqueue as jq
from jobqueue import InvalidSettingError, ManualClock, SystemClock
from jobqueue.clock import SleepingClock


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
    queue = jq.JobQueue(clock=SystemClock())
    job = queue.enqueue(jq.JobType("noop", int), 1)
    assert abs(job.run_at - time.time()) < 60


# -- sleeping (lesson 06) ----------------------------------------------------------------------


def woken_at(clock: ManualClock, seconds: float, log: list[float]) -> "asyncio.Task[None]":
    async def sleeper() -> None:
        await clock.sleep(seconds)
        log.append(clock.now())

    return asyncio.create_task(sleeper())


def test_manual_sleep_wakes_exactly_at_its_deadline_and_not_before() -> None:
    async def scenario() -> list[list[float]]:
        clock = ManualClock()
        woke: list[float] = []
        task = woken_at(clock, 10, woke)
        seen = []
        await clock.run_for(0)  # the task is now asleep
        for step in (9, 0.5, 0.25, 0.25):
            clock.advance(step)
            await clock.run_for(0)  # let any woken task run
            seen.append(list(woke))
        await task
        return seen

    assert asyncio.run(scenario()) == [[], [], [], [10.0]]


def test_manual_sleep_never_wakes_without_the_clock_moving() -> None:
    async def scenario() -> bool:
        clock = ManualClock()
        task = woken_at(clock, 1, [])
        for _ in range(1000):
            await asyncio.sleep(0)
        asleep = not task.done()
        task.cancel()
        return asleep

    assert asyncio.run(scenario()) is True


def test_an_advance_past_the_deadline_wakes_the_sleeper_late_at_the_new_time() -> None:
    async def scenario() -> list[float]:
        clock = ManualClock()
        woke: list[float] = []
        task = woken_at(clock, 10, woke)
        await clock.run_for(0)
        clock.advance(25)  # a jump, as if the process had been paused
        await task
        return woke

    assert asyncio.run(scenario()) == [25.0]


def test_run_for_stops_at_every_deadline_on_the_way() -> None:
    async def scenario() -> tuple[list[float], list[float], float]:
        clock = ManualClock(100)
        woke: list[float] = []
        ticks: list[float] = []

        async def ticker() -> None:  # sleeps 10 s, three times
            for _ in range(3):
                await clock.sleep(10)
                ticks.append(clock.now())

        tasks = [woken_at(clock, 25, woke), woken_at(clock, 7.5, woke), asyncio.create_task(ticker())]
        end = await clock.run_for(40)
        await asyncio.gather(*tasks)
        return woke, ticks, end

    assert asyncio.run(scenario()) == ([107.5, 125.0], [110.0, 120.0, 130.0], 140.0)


def test_run_for_leaves_later_sleepers_asleep() -> None:
    async def scenario() -> tuple[float, bool, list[float]]:
        clock = ManualClock()
        woke: list[float] = []
        task = woken_at(clock, 30, woke)
        end = await clock.run_for(29.5)
        still_asleep = not task.done()
        await clock.run_for(0.5)
        await task
        return end, still_asleep, woke

    assert asyncio.run(scenario()) == (29.5, True, [30.0])


def test_sleep_zero_returns_without_moving_the_clock() -> None:
    async def scenario() -> float:
        clock = ManualClock(3)
        await clock.sleep(0)
        await SystemClock().sleep(0)
        return clock.now()

    assert asyncio.run(scenario()) == 3.0


def test_a_cancelled_sleeper_is_forgotten() -> None:
    async def scenario() -> tuple[list[float], float]:
        clock = ManualClock()
        woke: list[float] = []
        cancelled = woken_at(clock, 5, woke)
        kept = woken_at(clock, 8, woke)
        await clock.run_for(0)
        cancelled.cancel()
        end = await clock.run_for(10)
        await kept
        return woke, end

    assert asyncio.run(scenario()) == ([8.0], 10.0)


def test_a_sleeper_left_behind_by_a_finished_event_loop_does_not_break_advance() -> None:
    clock = ManualClock()

    async def leave_a_sleeper() -> None:
        woken_at(clock, 5, [])
        await asyncio.sleep(0)

    asyncio.run(leave_a_sleeper())  # asyncio.run cancels the sleeping task on the way out
    assert clock.advance(10) == 10.0
    assert asyncio.run(clock.run_for(1)) == 11.0


@pytest.mark.parametrize(("seconds", "shown"), [(-1, "-1"), (math.nan, "nan"), (math.inf, "inf")])
def test_sleep_and_run_for_reject_negative_or_non_finite_seconds(seconds: float, shown: str) -> None:
    clock = ManualClock(10)
    for name, wait in (
        ("sleep", clock.sleep),
        ("run_for", clock.run_for),
        ("sleep", SystemClock().sleep),
    ):
        with pytest.raises(InvalidSettingError, match=re.escape(name)) as info:
            asyncio.run(wait(seconds))
        assert f"got {shown}" in str(info.value)
    assert clock.now() == 10.0


def test_both_clocks_can_sleep_but_a_bare_clock_cannot() -> None:
    class WallOnly:
        def now(self) -> float:
            return 0.0

    assert isinstance(ManualClock(), SleepingClock)
    assert isinstance(SystemClock(), SleepingClock)
    assert not isinstance(WallOnly(), SleepingClock)
    jq.JobQueue(clock=WallOnly())  # a queue only reads the time: a bare Clock is enough


def test_a_server_clock_gives_the_servers_time_through_a_skewed_local_clock() -> None:
    local = ManualClock(1000.0)  # this machine's clock, 31 s ahead of the server
    clock = jq.ServerClock(local, resync_s=60)
    assert clock.sync_due()

    def server_time() -> float:  # the round trip takes 0.2 s of local time, the server answers midway
        local.advance(0.1)
        answer = local.now() - 31.0
        local.advance(0.1)
        return answer

    assert clock.sync(server_time) == pytest.approx(-31.0)
    assert clock.now() == pytest.approx(1000.2 - 31.0)
    assert not clock.sync_due()
    local.advance(59.0)
    assert not clock.sync_due()
    local.advance(1.0)
    assert clock.sync_due()
    assert isinstance(clock, SleepingClock)
    asyncio.run(clock.sleep(0))  # sleeps on the local clock


@pytest.mark.parametrize("resync_s", [0, -1, math.inf, math.nan, True])
def test_a_server_clock_checks_its_resync_period(resync_s: float) -> None:
    with pytest.raises(InvalidSettingError, match="resync_s"):
        jq.ServerClock(resync_s=resync_s)


def test_a_server_clock_ignores_a_step_of_this_machines_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by the reviewer of lessons 12-16: built on time.time(), a step of the local wall
    # clock (NTP, an operator) between two syncs moved the "server's" time with it, for up to
    # resync_s: a 31 s step forward gave back the stolen-lease case of lesson 12. The default
    # local clock is the monotonic one, which nothing steps.
    clock = jq.ServerClock(resync_s=60)
    server_now = 1_800_000_000.0
    clock.sync(lambda: server_now)
    before = clock.now()
    wall = time.time()
    monkeypatch.setattr(time, "time", lambda: wall + 31.0)  # the wall clock steps 31 s forward
    assert clock.now() - before == pytest.approx(0.0, abs=5.0)  # the server's time did not jump
    assert not clock.sync_due()
