"""Issue 11: what a careless or hostile user found, one test (or a few) per item."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import sqlite3
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

import jobqueue as jq
from jobqueue import cli
from jobqueue.failures import classify_exception


@dataclass(frozen=True)
class M:
    n: int


@dataclass(frozen=True)
class Amount:
    amount: float | None


@dataclass(frozen=True)
class Loose:
    value: Any


T = jq.JobType("m", M)
OK = jq.JobType("ok", M)


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body with asyncio.run (the suite has no async plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def memory(clock: jq.ManualClock) -> jq.JobQueue:
    return jq.JobQueue(clock=clock)


def durable(clock: jq.ManualClock) -> jq.DurableQueue:
    return jq.DurableQueue(":memory:", clock=clock)


BACKENDS = [pytest.param(memory, id="memory"), pytest.param(durable, id="durable")]


async def forever(payload: M) -> None:
    await asyncio.Event().wait()


# -- 1. a time limit per job type, and the oldest leased job's age --------------------------


@pytest.mark.parametrize("make", BACKENDS)
@sync
async def test_a_handler_past_its_time_limit_is_cancelled_and_retried(
    make: Any, clock: jq.ManualClock
) -> None:
    queue = make(clock)
    worker = jq.Worker(queue, heartbeat_s=10, timeout_s=60)
    cancelled = []

    async def stuck(payload: M) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(payload.n)
            raise

    worker.register(T, stuck)
    queue.enqueue(T, M(7), id="j")
    run = asyncio.create_task(worker.run_one())
    await clock.run_for(61)
    event = await run
    assert event is not None and event.outcome == "retry"
    assert event.error is not None and event.error.startswith("JobTimeoutError: ")
    assert "60 s" in event.error and "'j'" in event.error
    assert cancelled == [7]
    assert queue.get("j").leased_until is None  # failed, not left leased


@sync
async def test_a_job_type_time_limit_beats_the_worker_default(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock, visibility_timeout_s=600)
    short = jq.JobType("short", M, timeout_s=5)
    worker = jq.Worker(queue, timeout_s=100)
    worker.register(short, forever)
    queue.enqueue(short, M(1))
    run = asyncio.create_task(worker.run_one())
    await clock.run_for(6)
    event = await run
    assert event is not None and event.outcome == "retry" and event.at == 5


def test_the_timeout_error_is_transient() -> None:
    error = jq.JobTimeoutError("ran too long")
    assert isinstance(error, TimeoutError)
    assert classify_exception(error) == "transient"


@sync
async def test_a_handler_within_its_time_limit_is_untouched(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock)
    worker = jq.Worker(queue, timeout_s=10)

    async def slow(payload: M) -> None:
        await clock.sleep(9)

    worker.register(T, slow)
    queue.enqueue(T, M(1))
    run = asyncio.create_task(worker.run_one())
    await clock.run_for(9)
    event = await run
    assert event is not None and event.outcome == "done"


def test_the_time_limit_is_checked(clock: jq.ManualClock) -> None:
    with pytest.raises(jq.InvalidSettingError, match="timeout_s"):
        jq.JobType("m", M, timeout_s=0)
    with pytest.raises(jq.InvalidSettingError, match="timeout_s"):
        jq.JobType("m", M, timeout_s=True)
    with pytest.raises(jq.InvalidSettingError, match="timeout_s"):
        jq.Worker(jq.JobQueue(clock=clock), timeout_s=-1)


def test_the_default_time_limit_applies(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock, visibility_timeout_s=60)
    assert jq.Worker(queue, heartbeat_s=10).timeout_s == jq.DEFAULT_TIMEOUT_S
    assert jq.Worker(queue).timeout_s == jq.LEASE_SHARE * 60  # without a heartbeat: inside the lease


@pytest.mark.parametrize("make", BACKENDS)
def test_metrics_show_the_oldest_leased_job_age(make: Any, clock: jq.ManualClock) -> None:
    queue = make(clock)
    queue.enqueue_many(T, [M(1), M(2)], ids=["a", "b"])
    first = queue.claim()
    assert queue.metrics().oldest_leased_age_s == 0.0
    clock.advance(20)
    queue.claim()
    lease = queue.extend_lease(first)  # a heartbeat does not make the job younger
    clock.advance(20)
    queue.extend_lease(lease)
    metrics = queue.metrics()
    assert metrics.leased == 2
    assert metrics.oldest_leased_age_s == 40.0
    assert "oldest leased job" in str(metrics)


# -- 2. classify_exception: when unsure, transient --------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        json.JSONDecodeError("Expecting value", "<html>502 Bad Gateway</html>", 0),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        ValueError("upstream sent garbage"),
        LookupError("not found yet"),
        KeyError("order"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_bad_data_from_upstream_is_transient(error: BaseException) -> None:
    assert classify_exception(error) == "transient"


@pytest.mark.parametrize(
    "error",
    [jq.PermanentJobError("bad address"), jq.PayloadError("bad")],
    ids=lambda error: type(error).__name__,
)
def test_what_the_package_calls_permanent_stays_permanent(error: BaseException) -> None:
    assert classify_exception(error) == "permanent"


# -- 3. a handler's own CancelledError -----------------------------------------------------------


async def bad(payload: M) -> None:
    raise asyncio.CancelledError()


async def ok(payload: M) -> None:
    await asyncio.sleep(0)


@pytest.mark.parametrize("make", BACKENDS)
@sync
async def test_a_handler_raising_cancelled_fails_only_its_attempt(make: Any, clock: jq.ManualClock) -> None:
    queue = make(clock)
    worker = jq.Worker(queue)
    worker.register(T, bad)
    worker.register(OK, ok)
    queue.enqueue(T, M(0), id="bad")
    queue.enqueue_many(OK, [M(1), M(2)], ids=["ok-1", "ok-2"])
    events = await jq.Runner(worker, concurrency=4).run(until_idle=True)
    outcomes = {event.job_id: event.outcome for event in events}
    assert outcomes == {"bad": "retry", "ok-1": "done", "ok-2": "done"}
    failed = next(event for event in events if event.job_id == "bad")
    assert failed.error is not None and failed.error.startswith("HandlerCancelledError: ")
    assert [job.id for job in queue.jobs()] == ["bad"]
    assert queue.get("bad").leased_until is None


@sync
async def test_run_one_survives_a_handler_raising_cancelled(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock)
    worker = jq.Worker(queue)
    worker.register(T, bad)
    queue.enqueue(T, M(0))
    event = await worker.run_one()
    assert event is not None and event.outcome == "retry"


@sync
async def test_cancelling_the_worker_still_cancels(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock)
    worker = jq.Worker(queue)
    worker.register(T, forever)
    queue.enqueue(T, M(0))
    run = asyncio.create_task(worker.run_one())
    await asyncio.sleep(0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert queue.jobs()[0].leased_until is not None  # still leased: the caller gives it back


# -- 4. a corrupt row is dead-lettered, its neighbours are not hurt -----------------------------


def corrupt(path: Path, statement: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(statement)
    con.close()


@pytest.fixture
def three(tmp_path: Path, clock: jq.ManualClock) -> Path:
    path = tmp_path / "q.db"
    with jq.DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(T, [M(0), M(1), M(2)], ids=["j0", "j1", "j2"])
    corrupt(path, "UPDATE jobqueue_jobs SET base_s = 0 WHERE id = 'j0'")
    return path


def test_claim_many_dead_letters_a_corrupt_row_and_hands_out_the_rest(
    three: Path, clock: jq.ManualClock
) -> None:
    with jq.DurableQueue(three, clock=clock) as queue:
        leases = queue.claim_many(3)
        assert [lease.job.id for lease in leases] == ["j1", "j2"]
        assert [lease.job.attempts for lease in leases] == [1, 1]
        (letter,) = queue.dead_letters()
        assert letter.job.id == "j0"
        assert letter.job.last_error is not None
        assert letter.job.last_error.startswith("CorruptJobError: ")
        assert "base_s" in letter.job.last_error and "0.0" in letter.job.last_error
        assert queue.ack_many(leases) == []
        queue.replay("j0")  # the dead letter reads back, and can be replayed
        assert [job.id for job in queue.jobs()] == ["j0"]


def test_jobs_and_get_dead_letter_a_corrupt_row(three: Path, clock: jq.ManualClock) -> None:
    with jq.DurableQueue(three, clock=clock) as queue:
        assert [job.id for job in queue.jobs()] == ["j1", "j2"]
        assert queue.get("j0") is None
        assert [letter.job.id for letter in queue.dead_letters()] == ["j0"]


def test_dead_letters_and_the_cli_read_a_corrupt_dead_row(
    tmp_path: Path, clock: jq.ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.db"
    with jq.DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(T, [M(0), M(1)], ids=["d0", "d1"])
        for lease in queue.claim_many(2):
            queue.fail(lease, "boom", permanent=True)
    corrupt(path, "UPDATE jobqueue_dead SET max_attempts = 0 WHERE id = 'd0'")
    with jq.DurableQueue(path, clock=clock) as queue:
        letters = {letter.job.id: letter.job for letter in queue.dead_letters()}
    assert set(letters) == {"d0", "d1"}
    assert letters["d0"].last_error is not None and "max_attempts" in letters["d0"].last_error
    assert "boom" in letters["d0"].last_error  # the old reason is kept
    assert letters["d1"].last_error == "boom"
    assert cli.main(["dead", str(path)]) == 0
    assert "d0" in capsys.readouterr().out


# -- 5. the path of a durable queue ------------------------------------------------------------


@pytest.mark.parametrize("path", ["", None, 0, b"q.db"], ids=repr)
def test_a_durable_queue_refuses_a_path_that_is_not_one(
    path: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(jq.InvalidSettingError, match="path"):
        jq.DurableQueue(path)
    assert list(tmp_path.iterdir()) == []


# -- 6. two queue objects on one file ------------------------------------------------------------


def test_a_second_queue_object_on_one_file_is_refused(tmp_path: Path, clock: jq.ManualClock) -> None:
    path = tmp_path / "q.db"
    first = jq.DurableQueue(path, clock=clock)
    with pytest.raises(jq.QueueFileLockedError, match=r"q\.db") as caught:
        jq.DurableQueue(str(path), clock=clock)
    assert "already open in this process" in str(caught.value)
    assert "test_hardening.py" in str(caught.value)  # where the first one was opened
    first.close()
    with jq.DurableQueue(path, clock=clock) as again:  # closed: free again
        assert len(again) == 0


def test_in_memory_queues_do_not_share(clock: jq.ManualClock) -> None:
    with jq.DurableQueue(":memory:", clock=clock) as one, jq.DurableQueue(":memory:", clock=clock) as two:
        one.enqueue(T, M(1))
        assert len(two) == 0


# -- 7. a lease acks only in the queue that gave it -------------------------------------------


@pytest.mark.parametrize("same_ids", [False, True])
def test_a_lease_from_another_durable_queue_is_stale(clock: jq.ManualClock, same_ids: bool) -> None:
    e, s = jq.DurableQueue(":memory:", clock=clock), jq.DurableQueue(":memory:", clock=clock)
    e.enqueue(T, M(1), id="email-1")
    s.enqueue(T, M(2), id="email-1" if same_ids else "sms-1")
    lease = e.claim()
    s.claim()
    with pytest.raises(jq.StaleLeaseError):
        s.ack(lease)
    assert s.ack_many([lease]) == [lease]
    assert len(s) == 1
    e.ack(lease)
    assert len(e) == 0


# -- 8. a SQLite file (or any other) is not a queue file -----------------------------------------


def test_a_sqlite_file_is_refused_without_the_network(tmp_path: Path, clock: jq.ManualClock) -> None:
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(jq.QueueFileError, match=r"app\.db.*SQLite") as caught:
        jq.DurableQueue(path, clock=clock)
    assert "extension" not in str(caught.value) and "download" not in str(caught.value)


def test_a_text_file_is_refused(tmp_path: Path, clock: jq.ManualClock) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database at all, just some text that is long enough\n")
    with pytest.raises(jq.QueueFileError, match=r"notes\.txt"):
        jq.DurableQueue(path, clock=clock)


# -- 9. NaN and infinity ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", BACKENDS)
@pytest.mark.parametrize(
    ("job_type", "payload", "field"),
    [
        (jq.JobType("amount", Amount), Amount(math.nan), "amount"),
        (jq.JobType("loose", Loose), Loose(math.inf), "value"),
        (jq.JobType("loose", Loose), Loose({"rates": [1.0, -math.inf]}), "value.rates.1"),
    ],
    ids=["nan", "inf", "nested"],
)
def test_nan_and_infinity_are_refused_naming_the_field(
    make: Any, clock: jq.ManualClock, job_type: jq.JobType[Any], payload: object, field: str
) -> None:
    queue = make(clock)
    with pytest.raises(jq.PayloadError, match=rf"\b{field}\b"):
        queue.enqueue(job_type, payload)
    assert len(queue) == 0


# -- 10. a new_id that repeats itself ---------------------------------------------------------------


def test_a_new_id_that_repeats_itself_raises(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock, new_id=lambda: "x")
    queue.enqueue(T, M(1))
    with pytest.raises(jq.InvalidSettingError, match=r"new_id.*'x'"):
        queue.enqueue(T, M(2))
    assert len(queue) == 1


def test_a_new_id_must_make_a_string(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock, new_id=lambda: 7)  # type: ignore[arg-type, return-value]
    with pytest.raises(jq.InvalidSettingError, match="7"):
        queue.enqueue(T, M(1))


def test_the_default_ids_step_over_ids_given_by_hand(clock: jq.ManualClock) -> None:
    queue = jq.JobQueue(clock=clock)
    queue.enqueue_many(T, [M(1), M(2)], ids=["job-1", "job-2"])
    assert queue.enqueue(T, M(3)).id == "job-3"


# -- 11. ids are checked ----------------------------------------------------------------------------


@pytest.mark.parametrize("make", BACKENDS)
@pytest.mark.parametrize("bad_id", ["", 5, b"j"], ids=repr)
def test_a_bad_id_is_refused_naming_it(make: Any, clock: jq.ManualClock, bad_id: Any) -> None:
    queue = make(clock)
    with pytest.raises(jq.InvalidSettingError, match=rf"id.*{bad_id!r}"):
        queue.enqueue(T, M(1), id=bad_id)
    with pytest.raises(jq.InvalidSettingError, match=rf"id.*{bad_id!r}"):
        queue.enqueue_many(T, [M(1), M(2)], ids=["fine", bad_id])
    assert len(queue) == 0


@pytest.mark.parametrize("make", BACKENDS)
def test_ids_given_as_one_string_are_refused(make: Any, clock: jq.ManualClock) -> None:
    queue = make(clock)
    with pytest.raises(jq.InvalidSettingError, match="ids"):
        queue.enqueue_many(T, [M(1), M(2)], ids="ab")


# -- 12. arguments of the wrong type -------------------------------------------------------------


def test_true_is_not_a_backoff_base() -> None:
    with pytest.raises(jq.InvalidSettingError, match="base_s"):
        jq.Backoff(base_s=True)
    with pytest.raises(jq.InvalidSettingError, match="cap_s"):
        jq.Backoff(cap_s="60")  # type: ignore[arg-type]


def test_a_retry_policy_checks_its_backoff_and_attempts() -> None:
    with pytest.raises(jq.InvalidSettingError, match=r"backoff.*'1s'"):
        jq.RetryPolicy(backoff="1s")  # type: ignore[arg-type]
    with pytest.raises(jq.InvalidSettingError, match="max_attempts"):
        jq.RetryPolicy(max_attempts=2**31)
    assert jq.RetryPolicy(max_attempts=jq.MAX_ATTEMPTS_LIMIT).max_attempts == jq.MAX_ATTEMPTS_LIMIT


@pytest.mark.parametrize("make", BACKENDS)
def test_the_largest_attempt_budget_fits_every_backend(make: Any, clock: jq.ManualClock) -> None:
    queue = make(clock)
    many = jq.JobType("many", M, retry=jq.RetryPolicy(max_attempts=jq.MAX_ATTEMPTS_LIMIT))
    assert queue.enqueue(many, M(1)).max_attempts == jq.MAX_ATTEMPTS_LIMIT


def test_queues_check_their_retry_policy(clock: jq.ManualClock) -> None:
    with pytest.raises(jq.InvalidSettingError, match=r"retry.*'x'"):
        jq.JobQueue(clock=clock, retry="x")  # type: ignore[arg-type]
    with pytest.raises(jq.InvalidSettingError, match=r"retry.*'x'"):
        jq.DurableQueue(":memory:", clock=clock, retry="x")  # type: ignore[arg-type]


def test_a_job_type_checks_its_arguments() -> None:
    with pytest.raises(jq.InvalidSettingError, match="123"):
        jq.JobType(123, M)  # type: ignore[arg-type]
    with pytest.raises(jq.InvalidSettingError, match="payload_type"):
        jq.JobType("m", "M")  # type: ignore[arg-type]
    with pytest.raises(jq.InvalidSettingError, match="retry"):
        jq.JobType("m", M, retry=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", BACKENDS)
def test_fail_needs_an_error(make: Any, clock: jq.ManualClock) -> None:
    queue = make(clock)
    queue.enqueue(T, M(1))
    lease = queue.claim()
    with pytest.raises(jq.InvalidSettingError, match="None"):
        queue.fail(lease, None)
    assert queue.get(lease.job.id).leased_until is not None  # nothing changed
    assert queue.fail(lease, "boom").outcome == "retry"


# -- 13. a byte-corrupted queue file ----------------------------------------------------------------


def test_a_corrupt_queue_file_is_named(tmp_path: Path, clock: jq.ManualClock) -> None:
    path = tmp_path / "broken.db"
    with jq.DurableQueue(path, clock=clock) as queue:
        queue.enqueue_many(T, [M(n) for n in range(100)])
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)  # keep the headers, spoil everything after
    path.write_bytes(bytes(data))
    with pytest.raises(jq.QueueFileError, match=r"broken\.db"):
        jq.DurableQueue(path, clock=clock)


# -- the row check: one fast pass for the usual row, the same verdicts as value by value --------

GOOD_ROW = (
    "j1",
    "t",
    '{"n": 1}',
    1,
    3,
    1.0,
    60.0,
    10.0,
    40.0,
    10.0,
    None,
    0,
    None,
    None,
    7,
    5.0,
    None,
    "default",
)


@pytest.mark.parametrize(
    ("column", "bad"),
    [
        ("id", ""),
        ("type", 7),
        ("payload", None),
        ("attempts", -1),
        ("attempts", True),
        ("attempts", 1.0),
        ("max_attempts", 0),
        ("base_s", 0.0),
        ("run_at", float("nan")),
        ("run_at", "10"),
        ("leased_until", float("inf")),
        ("leased_at", "x"),
        ("last_error", b"boom"),
        ("priority", True),
        ("fencing_token", -1),
        ("fencing_token", 1.0),
        ("queue", ""),
        ("queue", None),
        ("priority", jq.PRIORITY_LIMIT + 1),
        ("expires_at", float("-inf")),
        ("expires_after_s", "60"),
        ("enqueued_at", "5"),
        ("enqueued_at", float("nan")),
        ("unique_for_s", "60"),
        ("unique_for_s", float("inf")),
    ],
)
def test_a_row_with_one_bad_value_is_refused_naming_it(column: str, bad: object) -> None:
    from jobqueue.backends.rows import JobRow, job_from_row

    row = JobRow(*GOOD_ROW)._replace(**{column: bad})
    with pytest.raises(jq.CorruptJobError, match=f"cannot be read: [a-z ]*{column} must be"):
        job_from_row(row)


@pytest.mark.parametrize(
    "changes",
    [
        {},  # the usual row: the fast pass
        {"run_at": 10, "leased_until": 40, "leased_at": 10},  # whole seconds stored as ints
        {"last_error": "ValueError: boom", "priority": -3, "expires_at": 70.0, "expires_after_s": 60},
        {"enqueued_at": None},  # a row stored before the queue recorded enqueue times
        {"queue": "emails"},
    ],
)
def test_a_readable_row_gives_the_job_its_values_make(changes: dict[str, object]) -> None:
    from jobqueue.backends.rows import JobRow, job_from_row

    values = JobRow(*GOOD_ROW)._replace(**changes)._asdict()
    job = job_from_row(JobRow(**values))
    assert job == jq.Job(
        id="j1",
        type="t",
        payload='{"n": 1}',
        attempts=1,
        max_attempts=3,
        backoff=jq.Backoff(base_s=1.0, cap_s=60.0),
        run_at=10.0,
        leased_until=values["leased_until"],  # type: ignore[arg-type]
        leased_at=values["leased_at"],  # type: ignore[arg-type]
        last_error=values["last_error"],  # type: ignore[arg-type]
        priority=values["priority"],  # type: ignore[arg-type]
        expires_at=values["expires_at"],  # type: ignore[arg-type]
        expires_after_s=values["expires_after_s"],  # type: ignore[arg-type]
        queue=values["queue"],  # type: ignore[arg-type]
    )
    assert type(job.run_at) is float
    assert job.fencing_token == 7  # not compared by ==
    assert job.enqueued_at == values["enqueued_at"]  # nor this


def test_a_lease_of_a_job_is_the_lease_its_constructor_makes() -> None:
    job = jq.Job(id="j1", type="t", payload="{}", leased_until=30.0)
    lease = jq.Lease.of(job, "lease-7")
    assert lease == jq.Lease(job=job, token="lease-7")
    assert (lease.job, lease.token, lease.cancelled, lease.expires_at) == (job, "lease-7", False, 30.0)
    with pytest.raises(AttributeError):
        lease.token = "lease-8"  # type: ignore[misc]


def test_a_job_from_checked_values_needs_every_field() -> None:
    job = jq.Job(  # a value of its own in every field, so that no two could trade places unseen
        id="j1",
        type="t",
        payload="{}",
        attempts=2,
        max_attempts=7,
        backoff=jq.Backoff(base_s=3.0, cap_s=90.0),
        run_at=10.0,
        leased_until=40.0,
        leased_at=11.0,
        last_error="boom",
        priority=4,
        expires_at=500.0,
        expires_after_s=490.0,
        fencing_token=9,
        enqueued_at=8.0,
        unique_for_s=60.0,
        queue="emails",
    )
    values = [getattr(job, name) for name in job.__dataclass_fields__]
    built = jq.Job.from_checked(*values)
    assert built == job
    assert all(getattr(built, name) == getattr(job, name) for name in job.__dataclass_fields__)
    with pytest.raises(jq.InvalidSettingError, match="a job needs 17 values, one per field, got 16"):
        jq.Job.from_checked(*values[:-1])
