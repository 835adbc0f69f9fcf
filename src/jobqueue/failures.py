"""Is a failure worth retrying? A rule of thumb for HTTP answers and exceptions.

Permanent (retrying cannot help): a payload that does not validate, a job type without a
handler, a :class:`PermanentJobError` raised by the handler, and 4xx answers other than
408 (request timeout) and 429 (too many requests). Transient (retrying may help):
everything else, timeouts, connection errors, 5xx answers, 408 and 429 among them. When
unsure, call it transient: the job's attempt limit still ends the loop, while a wrong
"permanent" drops a job that would have succeeded.

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
