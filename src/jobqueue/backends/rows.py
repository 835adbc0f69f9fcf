"""Stored rows to job records, for every SQL backend: one set of columns, one conversion.

:class:`JobRow` names the columns of a job row, in order: the one column list, which every
select list of job columns is made from (:data:`JOB_COLUMNS`). A statement's rows are read
by column name through its :class:`Columns` (:data:`JOB`, :data:`HELD`, :data:`DEAD`, or a
backend's own), never by position.

A row that cannot be read back (edited by hand, written by an old version) must not take
the rows beside it down: :func:`job_from_row` raises :class:`CorruptJobError` naming the
bad value, and :func:`salvage` turns the row into a readable record that carries that
reason, so the queue can dead-letter it. Backends select :data:`JOB_COLUMNS` (live jobs)
or :data:`DEAD_COLUMNS` (dead letters, ``leased_until`` and ``leased_at`` given as NULL).

Introduced in lesson 11.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from jobqueue.backoff import Backoff
from jobqueue.errors import CorruptJobError, InvalidSettingError
from jobqueue.job import (
    DEFAULT_QUEUE,
    MAX_ATTEMPTS_LIMIT,
    PRIORITY_LIMIT,
    DeadLetter,
    Job,
    JobType,
    RetryPolicy,
    check_priority,
    deadline,
)


class JobRow(NamedTuple):
    """A job's row as stored, one value per column, unchecked: :func:`job_from_row` checks them.

    Its fields are the columns of a job row, in the order of every select list of them.
    """

    id: Any
    type: Any
    payload: Any
    attempts: Any
    max_attempts: Any
    base_s: Any
    cap_s: Any
    run_at: Any
    leased_until: Any
    leased_at: Any
    last_error: Any
    priority: Any
    expires_at: Any
    expires_after_s: Any
    fencing_token: Any
    enqueued_at: Any
    unique_for_s: Any
    queue: Any


JOB_FIELDS = JobRow._fields
"""The columns of a job row, in order (:class:`JobRow`'s fields)."""

JOB_COLUMNS = ", ".join(JOB_FIELDS)
"""``JOB_FIELDS`` as a SQL select list."""

DEAD_COLUMNS = JOB_COLUMNS.replace("leased_until, leased_at", "NULL, NULL") + ", died_at"
"""The select list of a dead-letter row: a job row (never leased) and ``died_at``."""

DEAD_STORED = JOB_COLUMNS.replace("leased_until, leased_at, ", "")
"""The columns a dead letter stores besides ``died_at``: a job's, but its lease."""


class Columns:
    """The select list of a statement, by name: reads its rows by column name.

    Args:
        names: the columns in the order the statement returns them; those of
            :data:`JOB_FIELDS` must all be among them, for :meth:`job_row`.
    """

    def __init__(self, *names: str) -> None:
        self.names = names
        self._at = {name: index for index, name in enumerate(names)}
        self._job: Callable[[Sequence[Any]], Sequence[Any]] = (
            operator.itemgetter(slice(len(JOB_FIELDS)))  # a slice: the job's columns come first
            if names[: len(JOB_FIELDS)] == JOB_FIELDS
            else operator.itemgetter(*(self._at[name] for name in JOB_FIELDS))
        )

    def job_row(self, row: Sequence[Any]) -> JobRow:
        """The job columns of ``row``, by name."""
        return _new_row(JobRow, self._job(row))

    def job(self, row: Sequence[Any]) -> Job:
        """The job of ``row``, every value checked (:func:`job_from_row`), for a hot loop.

        Raises:
            CorruptJobError: as :func:`job_from_row`.
        """
        return job_from_row(self._job(row))

    def value(self, row: Sequence[Any], name: str) -> Any:
        """The value of column ``name`` in ``row``."""
        return row[self._at[name]]

    def getter(self, name: str) -> Callable[[Sequence[Any]], Any]:
        """What reads column ``name`` of a row, for a hot loop (:meth:`value` looks the name up each time)."""
        return operator.itemgetter(self._at[name])

    def read(self, row: Sequence[Any]) -> Job:
        """The job of ``row``, or its salvaged stand-in if it cannot be read (:func:`read_job`)."""
        return read_job(self.job_row(row))


_new_row = tuple.__new__  # a JobRow from a tuple of its values, without NamedTuple's __new__ call


JOB = Columns(*JOB_FIELDS)
"""A row of :data:`JOB_COLUMNS`."""

HELD = Columns(*JOB_FIELDS, "lease_token")
"""A row of :data:`JOB_COLUMNS`, then the token of the job's lease (``NULL`` if not leased)."""

HOLDER = Columns(*JOB_FIELDS, "lease_token", "cancelled")
"""A row of :data:`JOB_COLUMNS`, the token of the job's lease, and whether it was cancelled while leased."""

EXTENDED = Columns(*JOB_FIELDS, "cancelled")
"""A row of :data:`JOB_COLUMNS`, then whether the job was cancelled while leased (a heartbeat's answer)."""

DEAD = Columns(*JOB_FIELDS, "died_at")
"""A row of :data:`DEAD_COLUMNS`."""

FINISHED = Columns(*JOB_FIELDS, "outcome", "finished_at")
"""A row of a kept finished job: :data:`JOB_COLUMNS`, its outcome and when it finished."""

NEW_COLUMNS = (
    "id, type, payload, attempts, max_attempts, base_s, cap_s, run_at, visible_at, serial,"
    " priority, expires_at, expires_after_s, enqueued_at, unique_for_s, queue"
)
"""The columns an enqueue fills, in order; the others start NULL."""


def stored_values(job: Job) -> dict[str, Any]:
    """The values of ``job`` a statement stores, by parameter name (``last_error`` as ``error``).

    Keyed ``id``, ``type``, ``payload``, ``attempts``, ``max_attempts``, ``base_s``,
    ``cap_s``, ``run_at`` (seconds), ``error``, ``priority``, ``expires_at``,
    ``expires_after_s``, ``fencing_token``, ``enqueued_at``, ``unique_for_s`` and ``queue``.
    """
    return {
        "id": job.id,
        "type": job.type,
        "payload": job.payload,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "base_s": job.backoff.base_s,
        "cap_s": job.backoff.cap_s,
        "run_at": job.run_at,
        "error": job.last_error,
        "priority": job.priority,
        "expires_at": job.expires_at,
        "expires_after_s": job.expires_after_s,
        "fencing_token": job.fencing_token,
        "enqueued_at": job.enqueued_at,
        "unique_for_s": job.unique_for_s,
        "queue": job.queue,
    }


def new_job_values(
    job_type: JobType[Any],
    policy: RetryPolicy,
    now: float,
    priority: int,
    unique_for_s: float | None,
    queue: str,
) -> dict[str, Any]:
    """The values every SQL backend stores in a new job of ``job_type`` enqueued at ``now`` in ``queue``.

    Keyed by the statements' parameter names: ``type``, ``max_attempts``, ``base_s``,
    ``cap_s``, ``now`` (seconds), ``priority``, ``expires_at``, ``expires_after_s``,
    ``unique_for_s`` (seconds or ``None``) and ``queue``.
    """
    return {
        "type": job_type.name,
        "max_attempts": policy.max_attempts,
        "base_s": policy.backoff.base_s,
        "cap_s": policy.backoff.cap_s,
        "now": now,
        "priority": priority,
        "expires_at": deadline(now, job_type.expires_after_s),
        "expires_after_s": job_type.expires_after_s,
        "unique_for_s": unique_for_s,
        "queue": queue,
    }


def job_from_row(row: Sequence[Any]) -> Job:
    """The :class:`Job` of a job row (its values in :class:`JobRow`'s order), every value checked.

    Raises:
        CorruptJobError: naming the job and the first value that cannot be part of a job
            (a text where a count belongs, ``max_attempts`` of 0, a backoff of 0 s...).
    """
    (
        id,
        type_name,
        payload,
        attempts,
        max_attempts,
        base_s,
        cap_s,
        run_at,
        leased_until,
        leased_at,
        last_error,
        priority,
        expires_at,
        expires_after_s,
        fencing_token,
        enqueued_at,
        unique_for_s,
        queue,
    ) = row
    inf = math.inf
    # A fast pass for nearly every row, written out without a helper per value (it runs for
    # every job claimed): values of exactly the usual types, in range. It accepts only what
    # _check_values accepts, and a row it turns down (a time stored as an int, a bad value)
    # goes there, to be accepted after all or refused with the first bad value named. The
    # retry policy's three values are checked as a RetryPolicy (_policy).
    if not (
        type(id) is str
        and id != ""
        and type(type_name) is str
        and type_name != ""
        and type(payload) is str
        and payload != ""
        and type(attempts) is int
        and attempts >= 0
        and type(run_at) is float
        and -inf < run_at < inf
        and (leased_until is None or (type(leased_until) is float and -inf < leased_until < inf))
        and (leased_at is None or (type(leased_at) is float and -inf < leased_at < inf))
        and (last_error is None or type(last_error) is str)
        and type(priority) is int
        and -PRIORITY_LIMIT <= priority <= PRIORITY_LIMIT
        and (expires_at is None or (type(expires_at) is float and -inf < expires_at < inf))
        and (expires_after_s is None or (type(expires_after_s) is float and -inf < expires_after_s < inf))
        and type(fencing_token) is int
        and fencing_token >= 0
        and (enqueued_at is None or (type(enqueued_at) is float and -inf < enqueued_at < inf))
        and (unique_for_s is None or (type(unique_for_s) is float and -inf < unique_for_s < inf))
        and type(queue) is str
        and queue != ""
    ):
        _check_values(JobRow._make(row)._asdict())  # names the first bad value, if any
    try:
        policy = _policy(max_attempts, base_s, cap_s)
    except InvalidSettingError as exc:
        raise CorruptJobError(f"the stored row of job {id!r} cannot be read: {exc}") from exc
    return Job.from_checked(
        id,
        type_name,
        payload,
        attempts,
        policy.max_attempts,
        policy.backoff,
        float(run_at),
        leased_until,
        leased_at,
        last_error,
        priority,
        expires_at,
        expires_after_s,
        fencing_token,
        enqueued_at,
        unique_for_s,
        queue,
    )


def _check_values(values: dict[str, Any]) -> None:
    """Check a row's values one by one, in column order.

    Raises:
        CorruptJobError: naming the job and the first value that cannot be part of a job.
    """
    try:
        for name in ("id", "type", "payload"):
            _check(
                isinstance(values[name], str) and values[name] != "", name, values[name], "a non-empty text"
            )
        _check(
            _is_int(values["attempts"]) and values["attempts"] >= 0,
            "attempts",
            values["attempts"],
            "an int >= 0",
        )
        _policy(values["max_attempts"], values["base_s"], values["cap_s"])
        _check(_is_time(values["run_at"]), "run_at", values["run_at"], "a finite time")
        for name in ("leased_until", "leased_at"):
            _check(
                values[name] is None or _is_time(values[name]), name, values[name], "a finite time or NULL"
            )
        error = values["last_error"]
        _check(error is None or isinstance(error, str), "last_error", error, "a text or NULL")
        check_priority(values["priority"])
        for name in ("expires_at", "expires_after_s"):
            _check(
                values[name] is None or _is_time(values[name]), name, values[name], "a finite time or NULL"
            )
        token = values["fencing_token"]
        _check(_is_int(token) and token >= 0, "fencing_token", token, "an int >= 0")
        for name in ("enqueued_at", "unique_for_s"):
            _check(
                values[name] is None or _is_time(values[name]), name, values[name], "a finite time or NULL"
            )
        queue = values["queue"]
        _check(isinstance(queue, str) and queue != "", "queue", queue, "a non-empty text")
    except InvalidSettingError as exc:
        raise CorruptJobError(f"the stored row of job {values['id']!r} cannot be read: {exc}") from exc


def dead_from_row(row: Sequence[Any]) -> DeadLetter:
    """The :class:`DeadLetter` of a row of :data:`DEAD_COLUMNS` (read through :data:`DEAD`).

    Raises:
        CorruptJobError: as :func:`job_from_row`, or for a ``died_at`` that is not a time.
    """
    died_at = DEAD.value(row, "died_at")
    job = job_from_row(DEAD.job_row(row))
    if not _is_time(died_at):
        raise CorruptJobError(f"the stored row of job {job.id!r} cannot be read: died_at is {died_at!r}")
    return DeadLetter(job=job, died_at=float(died_at))


def salvage(row: JobRow, error: CorruptJobError) -> Job:
    """A readable, unleased stand-in for a corrupt row, to dead-letter with the reason.

    Values that read as they should are kept; the others take their defaults (attempts
    0, the default retry policy, ``run_at`` 0, priority 0, no deadline, fencing token 0, no
    enqueue time, no unique window, the default queue). ``last_error``
    becomes ``"CorruptJobError: …"``, followed by the row's own last error if it had one,
    so nothing is lost.
    """
    values = row._asdict()
    default = RetryPolicy()
    try:
        backoff = Backoff(base_s=values["base_s"], cap_s=values["cap_s"])
    except InvalidSettingError:
        backoff = default.backoff
    max_attempts = values["max_attempts"]
    if not (_is_int(max_attempts) and 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT):
        max_attempts = default.max_attempts
    attempts = values["attempts"] if _is_int(values["attempts"]) and values["attempts"] >= 0 else 0
    priority = values["priority"]
    if not (_is_int(priority) and abs(priority) <= PRIORITY_LIMIT):
        priority = 0
    reason = f"{type(error).__name__}: {error}"
    if isinstance(values["last_error"], str):
        reason += f" (its last error: {values['last_error']})"
    return Job(
        id=str(values["id"]),
        type=values["type"] if isinstance(values["type"], str) and values["type"] else "?",
        payload=values["payload"] if isinstance(values["payload"], str) else "null",
        attempts=attempts,
        max_attempts=max_attempts,
        backoff=backoff,
        run_at=float(values["run_at"]) if _is_time(values["run_at"]) else 0.0,
        last_error=reason,
        priority=priority,
        expires_at=_time_or_none(values["expires_at"]),
        expires_after_s=_time_or_none(values["expires_after_s"]),
        fencing_token=token if _is_int(token := values["fencing_token"]) and token >= 0 else 0,
        enqueued_at=_time_or_none(values["enqueued_at"]),
        unique_for_s=_time_or_none(values["unique_for_s"]),
        queue=values["queue"] if isinstance(values["queue"], str) and values["queue"] else DEFAULT_QUEUE,
    )


@functools.lru_cache(maxsize=256, typed=True)
def _policy(max_attempts: Any, base_s: Any, cap_s: Any) -> RetryPolicy:
    """The checked policy of a row's three retry columns, built once per distinct trio.

    The rows of one batch nearly always share their job type's policy, and building and
    checking a policy costs more than the rest of a row. ``typed=True`` keeps ``1`` and
    ``True`` (or ``1`` and ``1.0``) apart, so a cached check never vouches for another type;
    an invalid trio raises every time (exceptions are not cached).

    Raises:
        InvalidSettingError: if the values cannot make a :class:`RetryPolicy`.
    """
    return RetryPolicy(max_attempts=max_attempts, backoff=Backoff(base_s=base_s, cap_s=cap_s))


def _check(ok: bool, name: str, value: object, wanted: str) -> None:
    if not ok:
        raise InvalidSettingError(f"{name} must be {wanted}, got {value!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _time_or_none(value: Any) -> float | None:
    return float(value) if _is_time(value) else None


def salvage_dead(row: Sequence[Any], error: CorruptJobError, now: float) -> DeadLetter:
    """A readable stand-in for a corrupt row of :data:`DEAD_COLUMNS` (see :func:`salvage`).

    ``died_at`` is kept if it is a time, else it becomes ``now`` (seconds).
    """
    died_at = DEAD.value(row, "died_at")
    return DeadLetter(
        job=salvage(DEAD.job_row(row), error), died_at=float(died_at) if _is_time(died_at) else now
    )


def read_job(row: JobRow) -> Job:
    """The job of a live row, or its salvaged stand-in.

    A row that cannot be read as a job gives the readable record :func:`salvage` makes of it.
    """
    try:
        return job_from_row(row)
    except CorruptJobError as exc:
        return salvage(row, exc)


def read_dead(row: Sequence[Any], now: float) -> DeadLetter:
    """The dead letter of a row of :data:`DEAD_COLUMNS`, or its salvaged stand-in (:func:`salvage_dead`)."""
    try:
        return dead_from_row(row)
    except CorruptJobError as exc:
        return salvage_dead(row, exc, now)
