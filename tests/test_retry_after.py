"""Retry-After honoured, and ``release(delay_s)``, on every backend (lesson 14).

- :class:`RetryAfterError` validates its wait; :func:`parse_retry_after` reads both forms
  of the header (RFC 9110, section 10.2.3) and refuses anything else, naming it;
- a ``fail`` with a :class:`RetryAfterError` schedules the retry at now + its wait, not
  after the backoff, clamped to ``MAX_RETRY_AFTER_S``; it still counts as an attempt and
  still dead-letters on the last attempt or a permanent failure;
- ``release(lease, delay_s=...)`` makes the job due ``delay_s`` later, the attempt not
  counted; a bad ``delay_s`` changes nothing.

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, all on a
manual clock with the backoff's jitter fixed (``random=lambda: 1.0``): the backoff would
retry after 1 s, so a retry at 30 s can only come from the error.
"""

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from backends_support import BACKENDS, clock_of, queue_at

from jobqueue import (
    MAX_RETRY_AFTER_S,
    Backoff,
    InvalidSettingError,
    JobQueue,
    ManualClock,
    RetryAfterError,
    RetryPolicy,
    classify_exception,
    parse_retry_after,
)
from jobqueue.backends.contract import Queue
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload
from jobqueue.failures import retry_delay_s

T0 = 1_000.0
POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=1.0, cap_s=60.0))

# -- the error and the header ----------------------------------------------------------


def test_retry_after_error_carries_its_wait_and_says_it() -> None:
    error = RetryAfterError(30, "429 Too Many Requests")
    assert error.retry_after_s == 30.0
    assert str(error) == "429 Too Many Requests: try again after 30 s"
    assert classify_exception(error) == "transient"


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, True, "30", None])
def test_retry_after_error_refuses_a_wait_that_is_not_seconds(bad: object) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(repr(bad))):
        RetryAfterError(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "seconds"), [("120", 120.0), (" 0 ", 0.0), ("007", 7.0)])
def test_parse_retry_after_reads_delay_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value) == seconds


NOW = datetime(1994, 11, 6, 8, 49, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate, the form senders must use
        "Sunday, 06-Nov-94 08:49:37 GMT",  # obsolete RFC 850 form
        "Sun Nov  6 08:49:37 1994",  # obsolete asctime form, no zone: UTC
    ],
)
def test_parse_retry_after_reads_an_http_date_against_now(value: str) -> None:
    assert parse_retry_after(value, now=NOW) == 30.0
    in_paris = NOW.astimezone(timezone(timedelta(hours=1)))
    assert parse_retry_after(value, now=in_paris) == 30.0


def test_a_date_in_the_past_means_now() -> None:
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=NOW + timedelta(hours=1)) == 0.0


@pytest.mark.parametrize("now", [None, datetime(1994, 11, 6, 8, 49, 7)])
def test_a_date_needs_an_aware_now(now: datetime | None) -> None:
    with pytest.raises(InvalidSettingError, match=r"Sun, 06 Nov 1994 08:49:37 GMT.*now="):
        parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=now)


@pytest.mark.parametrize("value", ["-5", "1.5", "", "soon", "+30", "30s"])
def test_parse_retry_after_refuses_anything_else(value: str) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(repr(value))):
        parse_retry_after(value, now=NOW)


def test_retry_delay_is_the_errors_wait_clamped_else_the_backoff() -> None:
    queue = JobQueue(clock=ManualClock(), retry=POLICY, random=lambda: 1.0)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1))
    lease = queue.claim()
    assert lease is not None
    job = lease.job
    assert retry_delay_s(job, RetryAfterError(30), lambda: 1.0) == 30.0
    assert retry_delay_s(job, RetryAfterError(0.5), lambda: 1.0) == 0.5  # shorter than the backoff too
    assert retry_delay_s(job, RetryAfterError(10 * MAX_RETRY_AFTER_S), lambda: 1.0) == MAX_RETRY_AFTER_S
    assert retry_delay_s(job, RuntimeError("boom"), lambda: 1.0) == 1.0
    assert retry_delay_s(job, "boom", lambda: 1.0) == 1.0


# -- every backend ---------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    yield from queue_at(request, T0, POLICY)


def test_fail_with_retry_after_schedules_the_retry_then_not_by_the_backoff(queue: Queue) -> None:
    clock = clock_of(queue)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    lease = queue.claim()
    assert lease is not None
    clock.advance(2)
    assert queue.fail(lease, RetryAfterError(30, "503 Service Unavailable")).outcome == "retry"
    job = queue.get("invoice-1")
    assert job is not None
    assert (job.run_at, job.visible_at(), job.attempts) == (T0 + 32, T0 + 32, 1)  # the attempt counted
    assert job.last_error == "RetryAfterError: 503 Service Unavailable: try again after 30 s"
    clock.advance(29.5)
    assert queue.claim() is None, "the backoff (1 s) would have made it due by now"
    clock.advance(0.5)
    again = queue.claim()
    assert again is not None and again.job.attempts == 2


def test_a_plain_error_still_waits_out_the_backoff(queue: Queue) -> None:
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, ConnectionError("reset"))
    job = queue.get("invoice-1")
    assert job is not None and job.run_at == T0 + 1


def test_a_retry_after_beyond_the_cap_is_clamped(queue: Queue) -> None:
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, RetryAfterError(7 * 86_400))
    job = queue.get("invoice-1")
    assert job is not None and job.run_at == T0 + MAX_RETRY_AFTER_S == T0 + 43_200


def test_retry_after_on_the_last_attempt_or_permanent_still_dead_letters(queue: Queue) -> None:
    clock = clock_of(queue)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    for _ in range(POLICY.max_attempts - 1):
        lease = queue.claim()
        assert lease is not None
        assert queue.fail(lease, RetryAfterError(5)).outcome == "retry"
        clock.advance(5)
    last = queue.claim()
    assert last is not None and last.job.attempts == POLICY.max_attempts
    assert queue.fail(last, RetryAfterError(5)).outcome == "dead"
    [dead] = queue.dead_letters()
    assert (dead.job.id, dead.job.attempts) == ("invoice-1", 3)

    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=2), id="invoice-2")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, RetryAfterError(5), permanent=True).outcome == "dead"


def test_release_with_a_delay_makes_the_job_due_later_without_spending_the_attempt(queue: Queue) -> None:
    clock = clock_of(queue)
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    lease = queue.claim()
    assert lease is not None and lease.job.attempts == 1
    clock.advance(3)
    given_back = queue.release(lease, delay_s=20)
    assert (given_back.attempts, given_back.run_at, given_back.leased_until) == (0, T0 + 23, None)
    assert queue.get("invoice-1") == given_back
    assert queue.next_visible_at() == T0 + 23
    clock.advance(19.5)
    assert queue.claim() is None
    clock.advance(0.5)
    again = queue.claim()
    assert again is not None and again.job.attempts == 1


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, True, "5"])
def test_release_refuses_a_bad_delay_and_changes_nothing(queue: Queue, bad: object) -> None:
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1), id="invoice-1")
    lease = queue.claim()
    assert lease is not None
    with pytest.raises(InvalidSettingError, match=re.escape(repr(bad))):
        queue.release(lease, delay_s=bad)  # type: ignore[arg-type]
    queue.ack(lease)  # still the holder
    assert len(queue) == 0
