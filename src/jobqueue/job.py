"""Job records, job types and retry policies: the data a queue stores.

A :class:`JobType` ties a job's name to the class of its payload, so that mypy rejects
a payload or handler of the wrong class. Payloads are stored as JSON text (as any queue
that survives a restart must) and validated again when read back.

Introduced in lesson 03.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

import pydantic
import pydantic_core

from jobqueue.backoff import Backoff
from jobqueue.errors import InvalidSettingError, PayloadError

P = TypeVar("P")

DEFAULT_MAX_ATTEMPTS = 5
"""Attempts a job gets before it is dead-lettered, counting the first run."""

MAX_ATTEMPTS_LIMIT = 1_000_000
"""The largest ``max_attempts`` a retry policy accepts.

Every backend stores attempt counts in a 32-bit integer column (up to 2,147,483,647), so
one bound, far below that, holds for all of them. A million attempts at a 60 s backoff cap
is almost two years of retries.
"""

PRIORITY_LIMIT = 1000
"""The largest priority, and minus the smallest: priorities are ints from -1000 to 1000.

A higher priority is claimed first among due jobs; 0 is the default. Every backend stores
it in a 32-bit integer column; a bound this narrow also keeps priorities few and readable.
"""

MAX_NAME_LENGTH = 255
"""Longest job id or job type name, in characters.

Ids are keys: PostgreSQL cannot index a text value over about 2,700 bytes, and a queue that
took a longer id would refuse it only at the insert, with a database's error. 255 characters
(at most 1,020 bytes in UTF-8) leave room for ids built from other keys (``outbox-<id>``,
``type@2026-12-02T10:05Z``); SQS allows 128 for its deduplication ids. Queue names too.
"""

DEFAULT_QUEUE = "default"
"""The named queue of a job enqueued without ``queue=`` (Sidekiq's, Oban's and River's name too)."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often, and how far apart, a failing job is tried.

    Args:
        max_attempts: attempts in all, the first run included (>= 1). Default 5.
        backoff: delay rule between attempts. Default 1 s base, 60 s cap.

    Raises:
        InvalidSettingError: if ``max_attempts`` is not an int from 1 to
            :data:`MAX_ATTEMPTS_LIMIT`, or ``backoff`` is not a :class:`Backoff`.

    Each job type deserves its own: a receipt that arrives hours late is still useful, a
    login code five minutes late is not. Introduced in lesson 04.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        check_count("max_attempts", self.max_attempts)
        if self.max_attempts > MAX_ATTEMPTS_LIMIT:
            raise InvalidSettingError(
                f"max_attempts must be at most {MAX_ATTEMPTS_LIMIT:,}, got {self.max_attempts!r}"
            )
        if not isinstance(self.backoff, Backoff):
            raise InvalidSettingError(f"backoff must be a Backoff, got {self.backoff!r}")


class JobType(Generic[P]):
    """A kind of job: its name, the class of its payload, and optionally its retry policy.

    Args:
        name: the job's type as stored in the queue, e.g. ``"send_receipt"``.
        payload_type: the payload class, typically a frozen dataclass of plain values
            (ids, strings, numbers), never whole objects or secrets.
        retry: this type's retry policy; ``None`` uses the queue's default.
        timeout_s: this type's time limit per attempt, in seconds (> 0); ``None`` uses
            the worker's (:attr:`jobqueue.worker.Worker.timeout_s`). An attempt that runs
            longer is cancelled and fails with :class:`~jobqueue.errors.JobTimeoutError`,
            which is retried like any transient error (Celery's ``time_limit``).
        priority: the priority of this type's jobs, an int from -:data:`PRIORITY_LIMIT`
            to :data:`PRIORITY_LIMIT` (default 0); among due jobs a higher one is claimed
            first. An ``enqueue`` may give one job another.
        expires_after_s: this type's deadline, in seconds (> 0) after the enqueue on the
            queue's clock; ``None`` (the default) for none. A job still waiting when its
            deadline has passed is never run: the claim that meets it moves it to the dead
            letters with a ``last_error`` starting ``"expired"`` (a login code ten minutes
            late is no use). A job already leased is not cut off: the deadline is for
            waiting. Like Celery's ``expires``, which revokes a task not started in time.

    Raises:
        InvalidSettingError: if ``name`` is not a non-empty str (at most
            :data:`MAX_NAME_LENGTH` characters, no NUL), ``payload_type`` is not
            a class, ``retry`` is not a :class:`RetryPolicy`, ``timeout_s`` or
            ``expires_after_s`` is not a finite number of seconds > 0, or ``priority`` is
            not an int within the bounds (naming the bad value).

    Introduced in lesson 03; ``timeout_s`` in lesson 06; ``priority`` and
    ``expires_after_s`` in lesson 13.
    """

    def __init__(
        self,
        name: str,
        payload_type: type[P],
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = None,
        priority: int = 0,
        expires_after_s: float | None = None,
    ) -> None:
        check_name(name, "job type's name")
        if not isinstance(payload_type, type):
            raise InvalidSettingError(f"payload_type must be a class, got {payload_type!r}")
        if retry is not None:
            check_retry(retry)
        self.name = name
        self.payload_type = payload_type
        self.retry = retry
        self.timeout_s = None if timeout_s is None else check_positive_seconds("timeout_s", timeout_s)
        self.priority = check_priority(priority)
        self.expires_after_s = (
            None if expires_after_s is None else check_positive_seconds("expires_after_s", expires_after_s)
        )
        self._adapter: pydantic.TypeAdapter[P] = pydantic.TypeAdapter(payload_type)

    def new_job(
        self,
        *,
        id: str,
        payload: str,
        retry: RetryPolicy,
        now: float,
        priority: int | None = None,
        unique_for_s: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Job:
        """The record of a job of this type just enqueued: waiting from ``now`` (seconds).

        Every queue builds its new jobs here, so they agree on the defaults.

        Args:
            id: the job's id.
            payload: the payload as JSON text (see :meth:`dump`).
            retry: the retry policy to store: this type's, or the queue's default.
            now: the enqueue time on the queue's clock (the job's ``enqueued_at``); the
                deadline, if this type has one, is :attr:`expires_after_s` later.
            priority: this job's priority; ``None`` takes this type's.
            unique_for_s: the job's unique window (checked by the queue), or ``None``.
            queue: the named queue the job waits in, already checked (see
                :func:`check_queue_name`).

        Raises:
            InvalidSettingError: if ``priority`` is not an int within the bounds.
        """
        return Job.from_checked(  # the id is checked by the queue, the rest when the type was made
            id,
            self.name,
            payload,
            0,  # attempts
            retry.max_attempts,
            retry.backoff,
            now,  # run_at
            None,  # leased_until
            None,  # leased_at
            None,  # last_error
            self.priority if priority is None else check_priority(priority),
            deadline(now, self.expires_after_s),  # expires_at
            self.expires_after_s,
            0,  # fencing_token
            now,  # enqueued_at
            unique_for_s,
            queue,
        )

    def dump(self, payload: P) -> str:
        """Serialise ``payload`` to JSON text for storage, checking it reads back.

        Raises:
            PayloadError: if ``payload`` is not an instance of :attr:`payload_type`, holds
                a value JSON cannot represent (NaN or infinity anywhere, named by its
                field), or would not read back as valid.
        """
        if not isinstance(payload, self.payload_type):
            raise PayloadError(
                f"job type {self.name!r} takes a {self.payload_type.__name__} payload, got {payload!r}"
            )
        try:
            data = self._adapter.dump_json(payload, warnings=False).decode()  # read-back check below
        except pydantic_core.PydanticSerializationError as exc:
            raise PayloadError(
                f"payload {payload!r} of job type {self.name!r} is not JSON-serialisable: {exc}"
            ) from exc
        # A NaN or infinity dumps as null (or as NaN/Infinity where a model asks for that):
        # only such a text needs the walk that finds the field (most payloads skip it).
        suspect = "null" in data or "NaN" in data or "Infinity" in data
        where = _non_finite(self._adapter.dump_python(payload, warnings=False)) if suspect else None
        if where is not None:
            field_name, value = where
            raise PayloadError(
                f"payload {payload!r} of job type {self.name!r} holds {value!r} in {field_name}:"
                " JSON has no NaN or infinity (it would be stored as null)"
            )
        try:
            self._adapter.validate_json(data, strict=True)
        except pydantic.ValidationError as exc:
            raise PayloadError(
                f"payload {payload!r} of job type {self.name!r} would not read back from JSON {data!r}:"
                f" {_problems(exc)}"
            ) from exc
        return data

    def parse(self, data: str) -> P:
        """Read a payload back from its stored JSON text, validating every field.

        Raises:
            PayloadError: if ``data`` is not valid JSON or does not match
                :attr:`payload_type` (a missing field, a string where an int belongs...).
        """
        try:
            return self._adapter.validate_json(data, strict=True)
        except pydantic.ValidationError as exc:
            raise PayloadError(f"invalid {self.name!r} payload {data!r}: {_problems(exc)}") from exc

    def __repr__(self) -> str:
        return f"JobType({self.name!r}, {self.payload_type.__name__})"


def _non_finite(value: object, where: str = "payload") -> tuple[str, float] | None:
    """The first NaN or infinity in a dumped payload, as ``(dotted field path, value)``."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    if isinstance(value, dict):
        items: list[tuple[object, object]] = list(value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        found = _non_finite(item, str(key) if where == "payload" else f"{where}.{key}")
        if found is not None:
            return found
    return None


def _problems(exc: pydantic.ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'payload'}: {err['msg']}" for err in exc.errors())


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One job as the queue stores it. Times are in seconds on the queue's clock.

    Attributes:
        id: unique id; enqueueing an id the queue already holds is ignored.
        type: the :attr:`JobType.name` of the job.
        payload: the payload as JSON text.
        attempts: runs started so far, counted when a worker claims the job.
        max_attempts: runs allowed before the job is dead-lettered.
        backoff: delay rule between this job's attempts.
        run_at: earliest time the job may be claimed.
        leased_until: while a worker holds it, the time its lease runs out; else ``None``.
        leased_at: while a worker holds it, when it was claimed (a heartbeat does not
            change it); else ``None``. The metrics' oldest leased age counts from here.
        last_error: the most recent failure, as ``"ErrorClass: message"``.
        priority: among due jobs, a higher priority is claimed first (ties: the job
            claimable longest first). An int from -:data:`PRIORITY_LIMIT` to
            :data:`PRIORITY_LIMIT`, default 0.
        expires_at: the job's deadline (seconds on the queue's clock): a claim after it
            dead-letters the job unrun, as ``"expired: ..."``; ``None`` for no deadline.
        expires_after_s: the deadline's length from the enqueue, in seconds (its job
            type's), kept so that a replay can give the job a fresh deadline; or ``None``.
        fencing_token: the number of the job's latest lease, 0 before its first claim.
            Each claim takes a new one, larger than every number the queue handed out
            before, for any job: a release, a retry or a replay never gives a number out
            again, nor does a restart of the DuckDB and PostgreSQL queues, which store the
            counter; an in-memory ``JobQueue`` counts from 1 again in a new process. A
            resource that keeps the largest token it has applied can refuse the late write
            of a holder whose lease ran out (:func:`jobqueue.idempotency.apply_fenced`).
            Records compare equal whatever their tokens: queues number their leases each
            their own way.
        enqueued_at: when the job was enqueued (seconds on the queue's clock), kept
            through its retries and releases, set anew by a replay; ``None`` for a record
            made by hand or a row stored before the queue recorded it. The metrics' age
            since enqueue counts from here (SQS's ``ApproximateAgeOfOldestMessage``).
            Records compare equal whatever it is.
        unique_for_s: how long the job's id stays held after it finished, in seconds (see
            :meth:`~jobqueue.backends.memory.JobQueue.enqueue`); ``None``: free at the ack.
            Records compare equal whatever it is.
        queue: the named queue the job waits in (:data:`DEFAULT_QUEUE` unless the enqueue
            named one): a claim may take only some queues, so that a runner gives each
            queue slots of its own and a backlog in one cannot starve another.

    Raises:
        InvalidSettingError: if ``priority`` is a bool, not an int, or out of bounds.

    Introduced in lesson 03; ``priority`` and the deadline in lesson 13; the fencing
    token in lesson 06; ``enqueued_at`` in lesson 13 (the age since enqueue); ``queue``
    with named queues (issue 24).
    """

    id: str
    type: str
    payload: str
    attempts: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    run_at: float = 0.0
    leased_until: float | None = None
    leased_at: float | None = field(default=None, repr=False)
    last_error: str | None = None
    priority: int = 0
    expires_at: float | None = None
    expires_after_s: float | None = field(default=None, repr=False)
    fencing_token: int = field(default=0, repr=False, compare=False)
    enqueued_at: float | None = field(default=None, repr=False, compare=False)
    unique_for_s: float | None = field(default=None, repr=False, compare=False)
    queue: str = field(default=DEFAULT_QUEUE, repr=False)

    def __post_init__(self) -> None:
        check_priority(self.priority)

    @classmethod
    def from_checked(cls, *values: Any) -> Job:
        """The job of ``values``, one per field in their order, each checked by the caller.

        The order: ``id``, ``type``, ``payload``, ``attempts``, ``max_attempts``,
        ``backoff``, ``run_at``, ``leased_until``, ``leased_at``, ``last_error``,
        ``priority``, ``expires_at``, ``expires_after_s``, ``fencing_token``,
        ``enqueued_at``, ``unique_for_s``, ``queue``.

        For the queues' hot paths (every claimed row, every job enqueued): the generated
        ``__init__`` of a frozen dataclass sets each field through ``object.__setattr__``
        and then checks the priority, 2.7 us per job; this fills the slots directly
        (:func:`_slot_filler`), in 0.9 us. A record is never half-built: a wrong count of
        values is refused.

        Raises:
            InvalidSettingError: if ``values`` does not hold one value per field of a job.
        """
        if len(values) != len(_JOB_SLOTS):
            raise InvalidSettingError(
                f"a job needs {len(_JOB_SLOTS)} values, one per field, got {len(values)}"
            )
        return _fill_job(cls.__new__(cls), *values)

    def changed(self, **values: Any) -> Job:
        """This job with ``values`` in place of its own, each already checked by the caller.

        For the in-memory queue's claim, which leases each job it hands out:
        :func:`dataclasses.replace` goes through the generated ``__init__`` (3.1 us a job,
        0.2 us more for each field a job gains); this fills the slots directly, in about
        1.5 us.

        Raises:
            InvalidSettingError: if a name in ``values`` is not a field of a job.
        """
        if not values.keys() <= _JOB_FIELD_NAMES:
            raise InvalidSettingError(f"a job has no field {sorted(values.keys() - _JOB_FIELD_NAMES)}")
        job = Job.__new__(Job)
        for name, fill in _JOB_SLOTS:
            fill(job, values[name] if name in values else getattr(self, name))
        return job

    def visible_at(self) -> float:
        """Time from which a worker can claim this job: ``run_at``, or the lease's end."""
        if self.leased_until is None:
            return self.run_at
        return max(self.run_at, self.leased_until)


_JOB_FIELD_NAMES = {f.name for f in fields(Job)}
_JOB_SLOTS = [(f.name, getattr(Job, f.name).__set__) for f in fields(Job)]
"""Each field of a job, with what stores a value in its slot (past the frozen ``__setattr__``)."""


def _slot_filler(name: str, setters: list[Callable[[Any, Any], None]]) -> Callable[..., Any]:
    """A function ``(record, value, ...) -> record`` that stores each value with its setter, in order.

    Written out one line per setter, as :mod:`dataclasses` writes an ``__init__``. With the
    17 fields of a job, :meth:`Job.from_checked` took 1.3 us with a loop over the setters
    and takes 0.9 us with this (``timeit``, the same minute); through an enqueue, a claim
    and an ack of 100 on PostgreSQL, each job cost about 1.3 us less of the client's CPU.
    Made from the class's own fields, so it never falls out of step with them. ``name``
    is what tracebacks and profilers show for it.
    """
    values = ", ".join(f"value_{n}" for n in range(len(setters)))
    body = "".join(f"    set_{n}(record, value_{n})\n" for n in range(len(setters)))
    namespace: dict[str, Any] = {f"set_{n}": setter for n, setter in enumerate(setters)}
    namespace["__name__"] = __name__  # the generated function's module
    exec(f"def {name}(record, {values}):\n{body}    return record\n", namespace)
    fill: Callable[..., Any] = namespace[name]
    return fill


_fill_job: Callable[..., Job] = _slot_filler("_fill_job", [setter for _, setter in _JOB_SLOTS])
"""Stores one value per field of a job in a new job's slots, in field order (:meth:`Job.from_checked`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """What :meth:`JobQueue.claim` hands a worker: the job and a token proving it holds it.

    Pass the lease back to ``ack`` or ``fail``. Once the lease has expired and another
    worker claimed the job, the token is stale and those calls raise
    :class:`~jobqueue.errors.StaleLeaseError`. ``extend_lease`` returns the lease with
    ``cancelled`` set once someone cancelled the job (``queue.cancel``): the holder should
    stop, and its ack or fail records the job as cancelled. Introduced in lesson 03;
    ``cancelled`` with cancelling (issue 24).
    """

    job: Job
    token: str
    cancelled: bool = False
    """Whether the job was cancelled while leased, as the lease's last extension found it."""

    @property
    def expires_at(self) -> float:
        """Time the lease runs out, in seconds on the queue's clock."""
        assert self.job.leased_until is not None  # a claimed job always has a lease
        return self.job.leased_until

    @classmethod
    def of(cls, job: Job, token: str) -> Lease:
        """The lease of ``job`` under ``token``, not cancelled: what a claim hands out.

        For the claims' hot path: it fills the two slots directly (0.2 us a lease, where the
        generated ``__init__`` of a frozen dataclass takes 0.6 us).
        """
        lease = cls.__new__(cls)
        _LEASE_JOB(lease, job)
        _LEASE_TOKEN(lease, token)
        _LEASE_CANCELLED(lease, False)
        return lease


_LEASE_JOB, _LEASE_TOKEN, _LEASE_CANCELLED = (getattr(Lease, f.name).__set__ for f in fields(Lease))
"""What stores each field of a lease in its slot (past the frozen ``__setattr__``)."""


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """A job that will not be retried: its last record and when it died (seconds)."""

    job: Job
    died_at: float


FinishedOutcome = Literal["done", "cancelled"]
"""How a kept finished job ended: acked, or cancelled (dead jobs are the dead letters)."""


@dataclass(frozen=True, kw_only=True)
class FinishedJob:
    """A finished job a queue keeps for a while (``retain_s``), for looking at what ran.

    Attributes:
        job: its record as it finished: ``attempts`` used, ``enqueued_at``, ``leased_at``
            (when its last attempt was claimed), ``last_error`` of an earlier attempt.
        outcome: ``"done"`` (acked) or ``"cancelled"``.
        finished_at: when it finished, in seconds on the queue's clock.

    Introduced with retention (issue 24), as Oban and River keep completed jobs.
    """

    job: Job
    outcome: FinishedOutcome
    finished_at: float


def check_count(name: str, value: int, *, least: int = 1) -> int:
    """Return ``value`` if it is an int >= ``least`` (``True`` is not a count).

    Raises:
        InvalidSettingError: naming ``name`` and the bad value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidSettingError(f"{name} must be an int >= {least}, got {value!r}")
    return value


def check_positive_seconds(name: str, value: float) -> float:
    """Return ``value`` if it is a finite number of seconds > 0 (``True`` is not a number of seconds).

    Raises:
        InvalidSettingError: naming ``name`` and the bad value.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise InvalidSettingError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return value


def check_priority(value: int, name: str = "priority") -> int:
    """Return ``value`` if it is an int from -:data:`PRIORITY_LIMIT` to :data:`PRIORITY_LIMIT`.

    ``True`` is not a priority, nor is ``1.0``.

    Raises:
        InvalidSettingError: naming ``name`` and the bad value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > PRIORITY_LIMIT:
        raise InvalidSettingError(
            f"{name} must be an int from {-PRIORITY_LIMIT} to {PRIORITY_LIMIT}, got {value!r}"
        )
    return value


def deadline(now: float, expires_after_s: float | None) -> float | None:
    """The deadline of a job waiting from ``now`` (seconds): ``now + expires_after_s``, or ``None``."""
    return None if expires_after_s is None else now + expires_after_s


def check_job_id(value: object, name: str = "id") -> str:
    """Return ``value`` if it can be a job id (see :func:`check_name`).

    Every queue calls it for every id it is given (and for every id ``new_id`` makes), so
    an int, bytes, empty, overlong or NUL-holding id is refused before anything is sent or
    stored, in every backend alike (PostgreSQL's text cannot hold a NUL at all; with
    ``conn=`` its error would abort the caller's transaction).

    Raises:
        InvalidSettingError: naming ``name`` and the bad value (shortened when long).
    """
    return check_name(value, f"job {name}")


def check_queue_name(value: object) -> str:
    """Return ``value`` if it can name a queue (see :func:`check_name`): ``"emails"``, ``"reports"``.

    Every queue calls it for the ``queue=`` of an enqueue and the names of a claim's filter.

    Raises:
        InvalidSettingError: naming the bad value.
    """
    return check_name(value, "queue name")


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is a non-empty str of at most :data:`MAX_NAME_LENGTH` characters, no NUL.

    Raises:
        InvalidSettingError: naming ``what`` and the bad value, if it is not.
    """
    if not isinstance(value, str) or not value:
        raise InvalidSettingError(f"a {what} must be a non-empty str, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidSettingError(
            f"a {what} must be at most {MAX_NAME_LENGTH} characters, got {len(value)}: {value[:40]!r}..."
        )
    if "\x00" in value:
        raise InvalidSettingError(f"a {what} cannot hold a NUL character, got {value!r}")
    return value


def check_retry(retry: object) -> RetryPolicy:
    """Return ``retry`` if it is a :class:`RetryPolicy`; ``None`` gives the default policy.

    Raises:
        InvalidSettingError: naming the bad value.
    """
    if retry is None:
        return RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise InvalidSettingError(f"retry must be a RetryPolicy, got {retry!r}")
    return retry
