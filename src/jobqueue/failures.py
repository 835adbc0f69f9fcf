"""Is a failure worth retrying? A rule of thumb for HTTP answers and exceptions.

An HTTP failure is classified by the API's own error code first and its status second:
the status is coarse, and APIs bend it. AWS sends throttling as 400
(``ThrottlingException``, ``RequestLimitExceeded``), which a status-only rule would call
permanent; OpenAI sends an exhausted monthly quota as 429 (``insufficient_quota``), which
a status-only rule would retry for hours. So known codes decide (:data:`TRANSIENT_CODES`,
:data:`PERMANENT_CODES`), then the status:

- permanent (retrying cannot help): 4xx other than those below;
- transient (retrying may help): 5xx, 408 (request timeout), 429 (too many requests);
- ``"depends"`` (:data:`DEPENDS_ON`): 401, retried after the credentials are refreshed
  (an expired token), permanent if fresh ones are refused too; 409, retried later when
  the conflict passes (Stripe's answer while a request with the same idempotency key is
  still running, an optimistic-lock conflict), permanent when the state conflicts for
  good. The package retries it (when unsure, transient); a handler that knows which
  case it met says so.

Beyond the HTTP answer: a payload that does not validate, a job type without a handler
and a :class:`PermanentJobError` raised by the handler are permanent; every other
exception is transient. When unsure, call it transient: the job's attempt limit still
ends the loop, while a wrong "permanent" drops a job that would have succeeded.

When to retry: a ``Retry-After`` header is honoured (:func:`http_failure` turns it into
a :class:`RetryAfterError`); :func:`retry_delay_s` is the one place every queue's
``fail`` asks, the backoff's delay or, for a :class:`RetryAfterError`, the wait the
dependency asked for; :func:`parse_retry_after` reads that wait from the header.

Introduced in lesson 05; ``Retry-After`` in lesson 14.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal

from jobqueue.backoff import RandomFn
from jobqueue.errors import (
    MAX_RETRY_AFTER_S,
    InvalidSettingError,
    PayloadError,
    PermanentJobError,
    RetryAfterError,
)
from jobqueue.job import Job

Verdict = Literal["permanent", "transient", "depends"]

RETRYABLE_4XX = frozenset({408, 429})
"""Client-error statuses that still deserve a retry: 408 Request Timeout, 429 Too Many Requests."""

DEPENDS_ON: Mapping[int, str] = {
    401: "an expired token: refresh it and retry; refused with fresh credentials: permanent",
    409: "a conflict that passes (the same idempotency key still in progress, an optimistic"
    " lock): retry later; one that stays (the state forbids it): permanent",
}
"""Statuses whose verdict depends on the case, and what it depends on."""

TRANSIENT_CODES = frozenset(
    {
        # AWS, sent with HTTP 400 (some services 503 or 429): throttling, not a bad request
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "PriorRequestNotComplete",
        # Stripe: 409 while another request with the same idempotency key runs, or
        # another request holds the object's lock; 429 for its rate limit
        "idempotency_key_in_use",
        "lock_timeout",
        "rate_limit",
    }
)
"""API error codes that mean "try again later", whatever status came with them."""

PERMANENT_CODES = frozenset(
    {
        # OpenAI: 429, but the monthly quota is spent; retrying waits for a person
        "insufficient_quota",
        # AWS: the request itself is wrong
        "ValidationException",
        "AccessDeniedException",
        "InvalidParameterValue",
        # Stripe: the card said no; the same charge will be declined again
        "card_declined",
    }
)
"""API error codes that mean "retrying cannot help", whatever status came with them."""


def classify_status(status: int, code: str | None = None) -> Verdict:
    """Classify a failed HTTP call by the API's error ``code`` first, its ``status`` second.

    Args:
        status: the answer's status code, 400 to 599.
        code: the API's error code from the body (AWS's ``__type``/``Code``, Stripe's
            ``error.code``), or ``None``. A code in :data:`TRANSIENT_CODES` or
            :data:`PERMANENT_CODES` decides; an unknown code leaves it to the status.

    Returns:
        By the code if known; else ``"depends"`` for 401 and 409 (:data:`DEPENDS_ON`),
        ``"transient"`` for 5xx, 408 and 429, ``"permanent"`` for other 4xx.

    Raises:
        InvalidSettingError: if ``status`` is not an int from 400 to 599 (not a failure),
            or ``code`` is neither a str nor ``None``.
    """
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise InvalidSettingError(f"expected a failed HTTP status (400-599), got {status!r}")
    if code is not None and not isinstance(code, str):
        raise InvalidSettingError(f"an API error code must be a str or None, got {code!r}")
    if code in TRANSIENT_CODES:
        return "transient"
    if code in PERMANENT_CODES:
        return "permanent"
    if status in DEPENDS_ON:
        return "depends"
    if status < 500 and status not in RETRYABLE_4XX:
        return "permanent"
    return "transient"


class HttpFailure(Exception):
    """A failed HTTP answer worth retrying (or that may be): what :func:`http_failure` raises.

    Attributes:
        status: the answer's status code.
        code: the API's error code, or ``None``.
        verdict: ``"transient"`` or ``"depends"``, as :func:`classify_status` said.
    """

    def __init__(self, status: int, code: str | None, verdict: Verdict, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.verdict = verdict


def http_failure(
    status: int,
    *,
    code: str | None = None,
    retry_after: str | None = None,
    now: datetime | None = None,
    what: str = "the dependency",
) -> Exception:
    """The exception a handler raises for a failed HTTP answer.

    Args:
        status: the answer's status code, 400 to 599.
        code: the API's error code, or ``None`` (as for :func:`classify_status`).
        retry_after: the answer's ``Retry-After`` header, or ``None``.
        now: the answer's ``Date``, needed if ``retry_after`` is an HTTP-date
            (:func:`parse_retry_after`).
        what: who answered, for the message (``"the warehouse"``).

    Returns:
        :class:`PermanentJobError` if the verdict is permanent (a ``Retry-After`` does
        not save it); else :class:`RetryAfterError` with the header's wait, if there is
        one; else :class:`HttpFailure` (retried after the job's backoff). The message
        names the status, the code and, for ``"depends"``, what it depends on.

    Raises:
        InvalidSettingError: for a bad ``status``, ``code`` or ``retry_after``.
    """
    verdict = classify_status(status, code)
    message = f"{what} answered {status}" + ("" if code is None else f" {code}")
    if verdict == "depends" and code is None:
        message += f" ({DEPENDS_ON[status]})"
    if verdict == "permanent":
        return PermanentJobError(message)
    if retry_after is not None:
        return RetryAfterError(parse_retry_after(retry_after, now=now), message)
    return HttpFailure(status, code, verdict, message)


def classify_exception(error: BaseException) -> Verdict:
    """Classify an exception raised by a handler.

    An exception with an int ``status`` attribute (an HTTP error) gets
    :func:`classify_status`'s verdict, given its ``code`` attribute too if it has a str
    one: ``"depends"`` for 401 and 409. Otherwise permanent only where the package knows
    retrying cannot help: :class:`PermanentJobError` (the handler said so),
    :class:`PayloadError` (the stored payload does not validate). Everything else is
    transient: timeouts and connection errors, and also ``ValueError``, ``LookupError``
    and their kin. So is :class:`~jobqueue.errors.UnknownJobTypeError` (no handler here): another worker, or
    this one after a deploy, may have the handler, and the Worker gives such a job back
    without spending an attempt (:func:`jobqueue.backends.rules.is_given_back`).

    Why so narrow: the kind of a built-in exception says where it was raised, not
    whether a retry could help. A :class:`json.JSONDecodeError` (a ``ValueError``) is
    what parsing a proxy's HTML "502 Bad Gateway" page raises; a ``UnicodeDecodeError``
    comes from a truncated answer; a ``KeyError`` from a reply that lacked a field for a
    moment. Calling those permanent would dead-letter a job on the first blip of a flaky
    upstream. Misjudged the other way, a truly permanent error costs only the job's
    remaining attempts, then it is dead-lettered anyway. So when unsure, transient; a
    handler that knows better raises :class:`PermanentJobError`.

    Introduced in lesson 05.
    """
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599:
        code = getattr(error, "code", None)
        return classify_status(status, code if isinstance(code, str) else None)
    permanent = (PermanentJobError, PayloadError)
    return "permanent" if isinstance(error, permanent) else "transient"


_DELAY_SECONDS = re.compile(r"[0-9]+")
"""RFC 9110's ``delay-seconds``: one or more ASCII digits, nothing else (no sign, no dot)."""


def parse_retry_after(value: str, *, now: datetime | None = None) -> float:
    """Seconds to wait, read from an HTTP ``Retry-After`` header value (RFC 9110, section 10.2.3).

    Both forms of the header are read:

    - ``delay-seconds``, e.g. ``"120"``: that many seconds;
    - an ``HTTP-date``, e.g. ``"Sun, 06 Nov 1994 08:49:37 GMT"`` (the two obsolete date
      forms too): the seconds from ``now`` until then, 0 if it has passed. A date needs
      ``now``, the wall-clock time the answer came (the response's ``Date`` header is the
      best choice, since the date is on the server's clock); the queue's clock cannot
      stand in, as a :class:`~jobqueue.ManualClock` does not read calendar time.

    Args:
        value: the header's value; whitespace around it is ignored.
        now: a timezone-aware :class:`~datetime.datetime`, needed for the date form only.

    Returns:
        Seconds (float >= 0), for :class:`~jobqueue.errors.RetryAfterError`. Not clamped
        here: the queue clamps the wait to :data:`~jobqueue.errors.MAX_RETRY_AFTER_S`.

    Raises:
        InvalidSettingError: naming the value, if it is neither form (``"-5"``, ``"1.5"``,
            ``""``), or it is a date and ``now`` is missing or has no timezone.

    Introduced in lesson 14.
    """
    if not isinstance(value, str):
        raise InvalidSettingError(f"a Retry-After value must be a str, got {value!r}")
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError):
        raise InvalidSettingError(
            f"Retry-After must be a number of seconds or an HTTP-date, got {value!r}"
        ) from None
    if now is None or now.tzinfo is None:
        raise InvalidSettingError(
            f"Retry-After {value!r} is a date: pass now= as a timezone-aware datetime (the"
            f" response's Date), got {now!r}"
        )
    if when.tzinfo is None:  # the asctime form carries no zone; HTTP-dates are in UTC
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def retry_delay_s(job: Job, error: BaseException | str, random: RandomFn) -> float:
    """Seconds from now until a failed job's next attempt; every queue's ``fail`` asks here.

    Args:
        job: the job as leased, ``attempts`` counting the attempt that failed.
        error: what the attempt raised (or a message).
        random: the queue's source of jitter for the backoff.

    Returns:
        For a :class:`~jobqueue.errors.RetryAfterError`, its ``retry_after_s``, clamped to
        :data:`~jobqueue.errors.MAX_RETRY_AFTER_S` (the dependency's word replaces the
        backoff, even when shorter: it knows when it will take calls again); for anything
        else ``job.backoff.delay_s(job.attempts, random)``.

    Raises:
        InvalidSettingError: if ``random()`` returns a value outside ``[0, 1]``.

    Introduced in lesson 14.
    """
    if isinstance(error, RetryAfterError):
        return min(error.retry_after_s, MAX_RETRY_AFTER_S)
    return job.backoff.delay_s(job.attempts, random)
