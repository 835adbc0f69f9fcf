"""Is a failure worth retrying? A rule of thumb for HTTP answers and exceptions.

Permanent (retrying cannot help): validation failures, "not found", and 4xx answers other
than 408 (request timeout) and 429 (too many requests). Transient (retrying may help):
timeouts, connection errors, 5xx answers, 408 and 429. When unsure, call it transient:
the job's attempt limit still ends the loop, while a wrong "permanent" drops a job that
would have succeeded.

Introduced in lesson 05.
"""

from __future__ import annotations

from typing import Literal

from jobqueue.errors import InvalidSettingError, PayloadError, PermanentJobError, UnknownJobTypeError

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

    Permanent: :class:`PermanentJobError`, :class:`PayloadError` (invalid payload),
    :class:`UnknownJobTypeError`, :class:`ValueError` (bad data) and :class:`LookupError`
    ("not found"), and anything with an int ``status`` attribute that
    :func:`classify_status` calls permanent. Everything else, timeouts and connection
    errors included, is transient.
    """
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599:
        return classify_status(status)
    if isinstance(error, TimeoutError | ConnectionError):
        return "transient"
    permanent = (PermanentJobError, PayloadError, UnknownJobTypeError, ValueError, LookupError)
    return "permanent" if isinstance(error, permanent) else "transient"
