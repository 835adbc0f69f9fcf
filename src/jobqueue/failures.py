"""Is a failure worth retrying? A rule of thumb for HTTP answers and exceptions.

Permanent (retrying cannot help): a payload that does not validate, a job type without a
handler, a :class:`PermanentJobError` raised by the handler, and 4xx answers other than
408 (request timeout) and 429 (too many requests). Transient (retrying may help):
everything else, timeouts, connection errors, 5xx answers, 408 and 429 among them. When
unsure, call it transient: the job's attempt limit still ends the loop, while a wrong
"permanent" drops a job that would have succeeded.

When to retry: :func:`retry_delay_s` is the one place every queue's ``fail`` asks, the
backoff's delay or, for a :class:`RetryAfterError`, the wait the dependency asked for;
:func:`parse_retry_after` reads that wait from an HTTP ``Retry-After`` header.

Introduced in lesson 05; ``Retry-After`` in lesson 14.
"""

from __future__ import annotations

import re
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
    UnknownJobTypeError,
)
from jobqueue.job import Job

Verdict = Literal["permanent", "transient"]

RETRYABLE_4XX = frozenset({408, 429})
"""Client-error statuses that still deserve a retry: 408 Request Timeout, 429 Too Many Requests."""


def classify_status(status: int) -> Verdict:
    """Classify an HTTP status code of a failed call.

    Returns:
        ``"permanent"`` for 4xx other than 408 and 429; ``"transient"`` for 5xx, 408, 429.

    Raises:
        InvalidSettingError: if ``status`` is not an int from 400 to 599 (not a failure).
    """
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise InvalidSettingError(f"expected a failed HTTP status (400-599), got {status!r}")
    if status < 500 and status not in RETRYABLE_4XX:
        return "permanent"
    return "transient"


def classify_exception(error: BaseException) -> Verdict:
    """Classify an exception raised by a handler.

    Permanent only where the package knows retrying cannot help:
    :class:`PermanentJobError` (the handler said so), :class:`PayloadError` (the stored
    payload does not validate), :class:`UnknownJobTypeError` (no handler), and anything
    with an int ``status`` attribute that :func:`classify_status` calls permanent (a 4xx
    answer other than 408 and 429). Everything else is transient: timeouts and
    connection errors, and also ``ValueError``, ``LookupError`` and their kin.

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
        return classify_status(status)
    permanent = (PermanentJobError, PayloadError, UnknownJobTypeError)
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
