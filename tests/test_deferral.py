"""A worker defers jobs while their dependency's circuit breaker is open (lesson 14).

A handler guarded by a :class:`CircuitBreaker` raises :class:`CircuitOpenError` while the
breaker is open. The worker (and a :class:`Runner`, which settles through it) does not
fail the job: it releases it until the breaker's ``retry_at_s``, the attempt not counted,
and records a ``"deferred"`` event. When the breaker turns half-open, the first job
claimed is its trial; if that succeeds, the others run. A :class:`RetryAfterError` from a
handler is a failure whose retry comes when the dependency asked. All on a manual clock.
"""

import asyncio
import math
import re
from dataclasses import dataclass
from typing import get_args

import pytest

from jobqueue import (
    Backoff,
    CircuitBreaker,
    CircuitOpenError,
    InvalidSettingError,
    JobEvent,
    JobQueue,
    JobType,
    ManualClock,
    RetryAfterError,
    RetryPolicy,
    Runner,
    Worker,
)
from jobqueue.cli import summary
from jobqueue.teaching.plots import OUTCOME_LABELS, OUTCOME_STYLE
from jobqueue.worker import Outcome


@dataclass(frozen=True)
class Mail:
    n: int


MAIL = JobType("mail", Mail)


class Scene:
    """Jobs ``mail-1`` ... that each send one mail through a breaker to a provider that may be down."""

    def __init__(self, jobs: int, *, threshold: int = 2, reset_s: float = 30.0) -> None:
        self.clock = ManualClock()
        self.queue = JobQueue(
            clock=self.clock,
            retry=RetryPolicy(max_attempts=3, backoff=Backoff(base_s=1.0, cap_s=60.0)),
            random=lambda: 1.0,
        )
        self.breaker = CircuitBreaker(
            "mail provider", clock=self.clock, failure_threshold=threshold, reset_timeout_s=reset_s
        )
        self.down = True
        self.calls: list[tuple[int, str]] = []  # (job, breaker state) of each call that reached the provider
        self.worker = Worker(self.queue)
        self.worker.register(MAIL, self.send)
        for n in range(1, jobs + 1):
            self.queue.enqueue(MAIL, Mail(n), id=f"mail-{n}")

    async def send(self, mail: Mail) -> None:
        state = self.breaker.state
        async with self.breaker:
            self.calls.append((mail.n, state))
            if self.down:
                raise ConnectionError("mail provider down")

    def drain(self) -> list[str]:
        return [str(event) for event in asyncio.run(self.worker.drain())]

    def attempts(self) -> dict[str, tuple[int, float]]:
        """Each waiting job's attempts so far and when it is due (seconds)."""
        return {job.id: (job.attempts, job.run_at) for job in self.queue.jobs()}


def test_an_open_breaker_defers_jobs_without_spending_attempts_then_the_probe_lets_them_run() -> None:
    scene = Scene(jobs=4)
    opened = "CircuitOpenError: circuit open for 'mail provider': try again at t=30s"
    assert scene.drain() == [
        "t=0s mail-1 attempt 1: failed, retry at t=1s (ConnectionError: mail provider down)",
        "t=0s mail-2 attempt 1: failed, retry at t=1s (ConnectionError: mail provider down)",
        f"t=0s mail-3 attempt 1: deferred to t=30s, attempt not counted ({opened})",
        f"t=0s mail-4 attempt 1: deferred to t=30s, attempt not counted ({opened})",
    ]
    assert scene.breaker.state == "open"
    assert scene.attempts() == {"mail-1": (1, 1), "mail-2": (1, 1), "mail-3": (0, 30), "mail-4": (0, 30)}

    scene.down = False  # back, but the breaker does not know yet
    scene.clock.advance(1)
    assert [event.split(":")[0] for event in scene.drain()] == [
        "t=1s mail-1 attempt 2",
        "t=1s mail-2 attempt 2",
    ]
    assert [event.outcome for event in scene.worker.events[-2:]] == ["deferred", "deferred"]
    assert scene.attempts() == {"mail-3": (0, 30), "mail-4": (0, 30), "mail-1": (1, 30), "mail-2": (1, 30)}
    assert scene.calls == [(1, "closed"), (2, "closed")], "a deferred job never reached the provider"

    scene.clock.advance(29)
    assert scene.breaker.state == "half-open"
    assert scene.drain() == [
        "t=30s mail-3 attempt 1: done",
        "t=30s mail-4 attempt 1: done",
        "t=30s mail-1 attempt 2: done",
        "t=30s mail-2 attempt 2: done",
    ]
    assert scene.calls[2:] == [(3, "half-open"), (4, "closed"), (1, "closed"), (2, "closed")]
    assert len(scene.queue) == 0 and scene.queue.dead_letters() == []


def test_a_failed_probe_defers_the_others_again_still_without_spending_attempts() -> None:
    scene = Scene(jobs=3, threshold=1, reset_s=30)
    scene.drain()  # mail-1 fails and opens the breaker; mail-2 and mail-3 are deferred to t=30
    scene.clock.advance(30)
    events = scene.drain()  # mail-1, due since t=1, is claimed first: the trial
    assert events[0] == "t=30s mail-1 attempt 2: failed, retry at t=32s (ConnectionError: mail provider down)"
    assert [event.outcome for event in scene.worker.events[-2:]] == ["deferred", "deferred"]
    assert scene.breaker.retry_at_s == 60
    assert scene.attempts() == {"mail-1": (2, 32), "mail-2": (0, 60), "mail-3": (0, 60)}


def test_a_deferral_whose_lease_was_lost_is_stale_and_changes_nothing() -> None:
    scene = Scene(jobs=1, threshold=1, reset_s=100)
    scene.breaker.record_failure()  # open from t=0 to t=100
    lease = scene.queue.claim()
    assert lease is not None
    scene.clock.advance(scene.queue.visibility_timeout_s)
    newer = scene.queue.claim()  # the lease ran out and another worker took the job
    assert newer is not None
    attempt = asyncio.run(scene.worker.execute(lease))
    assert isinstance(attempt.error, CircuitOpenError)
    [event] = scene.worker.settle([attempt])
    assert event.outcome == "stale"
    job = scene.queue.get("mail-1")
    assert job is not None and (job.attempts, job.leased_until) == (2, newer.expires_at)


async def run_until_idle(runner: Runner) -> list[JobEvent]:
    return await runner.run(until_idle=True)


def test_a_runner_defers_through_its_worker() -> None:
    scene = Scene(jobs=3, threshold=1, reset_s=45)
    scene.breaker.record_failure()  # open from t=0 to t=45
    events = asyncio.run(run_until_idle(Runner(scene.worker, concurrency=3)))
    assert [(event.job_id, event.outcome, event.retry_at) for event in events] == [
        ("mail-1", "deferred", 45),
        ("mail-2", "deferred", 45),
        ("mail-3", "deferred", 45),
    ]
    assert scene.attempts() == {"mail-1": (0, 45), "mail-2": (0, 45), "mail-3": (0, 45)}
    assert summary(events) == "0 done, 0 given back, 3 deferred"


def test_a_handlers_retry_after_schedules_its_retry_when_asked() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    worker = Worker(queue)

    async def rate_limited(mail: Mail) -> None:
        raise RetryAfterError(30, "429 Too Many Requests")

    worker.register(MAIL, rate_limited)
    queue.enqueue(MAIL, Mail(1), id="mail-1")
    [event] = asyncio.run(worker.drain())
    assert str(event) == (
        "t=0s mail-1 attempt 1: failed, retry at t=30s"
        " (RetryAfterError: 429 Too Many Requests: try again after 30 s)"
    )


@pytest.mark.parametrize("outcome", get_args(Outcome))
def test_every_outcome_can_be_drawn_on_a_timeline(outcome: str) -> None:
    assert outcome in OUTCOME_STYLE and outcome in OUTCOME_LABELS


@pytest.mark.parametrize("bad", [math.inf, math.nan, True, "30"])
def test_a_circuit_open_error_needs_a_finite_time(bad: object) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(repr(bad))):
        CircuitOpenError("mail provider", bad)  # type: ignore[arg-type]
