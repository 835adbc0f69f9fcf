"""failures: the API's error code before the status, "depends" for 401 and 409, Retry-After honoured."""

import asyncio
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

import jobqueue as jq
from jobqueue.backends.rules import is_given_back
from jobqueue.errors import InvalidSettingError, PermanentJobError, RetryAfterError, UnknownJobTypeError
from jobqueue.failures import (
    DEPENDS_ON,
    HttpFailure,
    classify_exception,
    classify_status,
    http_failure,
)


@pytest.mark.parametrize(
    ("status", "code", "verdict"),
    [
        (400, "ThrottlingException", "transient"),  # AWS throttles with a 400
        (400, "RequestLimitExceeded", "transient"),  # EC2's throttling, a 400 too
        (400, None, "permanent"),
        (400, "SomeCodeNobodyKnows", "permanent"),  # an unknown code leaves it to the status
        (409, "idempotency_key_in_use", "transient"),  # Stripe: the first request still runs
        (409, None, "depends"),
        (401, None, "depends"),
        (429, "insufficient_quota", "permanent"),  # OpenAI: the month's quota is spent
        (429, None, "transient"),
        (503, "card_declined", "permanent"),  # the code decides, whatever the status
    ],
)
def test_the_error_code_decides_before_the_status(status: int, code: str | None, verdict: str) -> None:
    assert classify_status(status, code) == verdict


def test_depends_says_on_what() -> None:
    assert set(DEPENDS_ON) == {401, 409}
    assert "refresh" in DEPENDS_ON[401]
    assert "idempotency key" in DEPENDS_ON[409] and "optimistic" in DEPENDS_ON[409]


def test_a_code_that_is_not_a_str_is_refused() -> None:
    with pytest.raises(InvalidSettingError, match="got 5"):
        classify_status(400, 5)  # type: ignore[arg-type]


class AwsError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"{status} {code}")
        self.status, self.code = status, code


def test_classify_exception_reads_the_code_too() -> None:
    assert classify_exception(AwsError(400, "ThrottlingException")) == "transient"
    assert classify_exception(AwsError(400, "ValidationException")) == "permanent"


def test_http_failure_picks_the_exception_a_handler_raises() -> None:
    permanent = http_failure(404, what="the warehouse")
    assert isinstance(permanent, PermanentJobError) and str(permanent) == "the warehouse answered 404"
    throttled = http_failure(400, code="ThrottlingException")
    assert isinstance(throttled, HttpFailure)
    assert (throttled.status, throttled.code, throttled.verdict) == (400, "ThrottlingException", "transient")
    conflict = http_failure(409)
    assert isinstance(conflict, HttpFailure) and conflict.verdict == "depends"
    assert str(conflict) == f"the dependency answered 409 ({DEPENDS_ON[409]})"
    assert classify_exception(conflict) == "depends"  # retried: not a PermanentJobError


def test_http_failure_honours_retry_after_unless_the_failure_is_permanent() -> None:
    wait = http_failure(503, retry_after="120")
    assert isinstance(wait, RetryAfterError) and wait.retry_after_s == 120
    assert str(wait) == "the dependency answered 503: try again after 120 s"
    assert isinstance(http_failure(429, code="insufficient_quota", retry_after="60"), PermanentJobError)
    with pytest.raises(InvalidSettingError, match="'soon'"):
        http_failure(503, retry_after="soon")


class Ping(BaseModel):
    n: int


PING = jq.JobType("ping", Ping)


@dataclass
class TokenApi:
    """Answers 401 to an expired token; a client refreshes its token after a 401."""

    clock: jq.ManualClock
    token_expires_at: float = 0.0
    calls: int = 0

    def call(self, token_valid_until: float) -> int:
        self.calls += 1
        return 401 if token_valid_until <= self.clock.now() else 200


def run(queue: jq.JobQueue, worker: jq.Worker) -> list[jq.JobEvent]:
    async def scenario() -> list[jq.JobEvent]:
        events = []
        while (due := queue.next_visible_at()) is not None:
            queue.clock.advance(max(0.0, due - queue.clock.now()))  # type: ignore[attr-defined]
            events += await worker.drain()
        return events

    return asyncio.run(scenario())


def test_a_401_after_the_token_expired_is_fixed_by_a_refresh_and_a_retry() -> None:
    clock = jq.ManualClock()
    queue = jq.JobQueue(clock=clock, random=lambda: 1.0)
    api = TokenApi(clock)
    token = {"valid_until": 0.0}  # expired already

    async def handler(payload: Ping) -> None:
        status = api.call(token["valid_until"])
        if status == 401:
            token["valid_until"] = clock.now() + 3600  # refresh, then let the retry use it
        if status >= 400:
            raise http_failure(status, what="the api")

    worker = jq.Worker(queue)
    worker.register(PING, handler)
    queue.enqueue(PING, Ping(n=1), id="ping-1")
    events = run(queue, worker)
    assert [(event.attempt, event.outcome) for event in events] == [(1, "retry"), (2, "done")]
    assert events[0].error is not None and events[0].error.startswith("HttpFailure: the api answered 401")


def test_the_worker_waits_as_long_as_retry_after_says() -> None:
    clock = jq.ManualClock()
    queue = jq.JobQueue(clock=clock, random=lambda: 1.0)
    answers = ["120", None]

    async def handler(payload: Ping) -> None:
        if (retry_after := answers.pop(0)) is not None:
            raise http_failure(503, retry_after=retry_after)

    worker = jq.Worker(queue)
    worker.register(PING, handler)
    queue.enqueue(PING, Ping(n=1), id="ping-1")
    events = run(queue, worker)
    assert [(event.at, event.outcome, event.retry_at) for event in events] == [
        (0.0, "retry", 120.0),  # the backoff alone would have said t=1
        (120.0, "done", None),
    ]


def test_a_job_type_without_a_handler_is_not_permanent_as_the_worker_gives_it_back() -> None:
    # The Worker gives such a job back unrun (rules.is_given_back): another worker, or this
    # one after a deploy, may know the type. Calling it permanent contradicted that.
    error = UnknownJobTypeError("no handler for job type 'report'")
    assert is_given_back(error)
    assert classify_exception(error) == "transient"
    assert classify_exception(PermanentJobError("bad address")) == "permanent"
