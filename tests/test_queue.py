import math
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jobqueue as jq
from jobqueue import (
    Backoff,
    InvalidSettingError,
    JobQueue,
    JobType,
    ManualClock,
    PayloadError,
    RetryPolicy,
    StaleLeaseError,
)
from jobqueue.backends.contract import ack_then_claim
from jobqueue.examples.shop import RENDER_INVOICE, SEND_RECEIPT, InvoicePayload, ReceiptPayload

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def invoice(order_id: int = 1001) -> InvoicePayload:
    return InvoicePayload(order_id=order_id)


def make_queue(clock: ManualClock, **kwargs: Any) -> JobQueue:
    kwargs.setdefault("random", lambda: 1.0)
    return JobQueue(clock=clock, **kwargs)


def snapshot(queue: JobQueue) -> tuple[object, ...]:
    """Everything the queue shows about itself; equal before and after a call that changed nothing."""
    return (queue.jobs(), queue.dead_letters(), len(queue), queue.next_visible_at())


# -- settings ------------------------------------------------------------------------


def test_defaults() -> None:
    queue = JobQueue(clock=ManualClock())
    assert queue.visibility_timeout_s == jq.DEFAULT_VISIBILITY_TIMEOUT_S == 30.0
    assert queue.retry == RetryPolicy() == RetryPolicy(max_attempts=5, backoff=Backoff(base_s=1, cap_s=60))
    assert jq.DEFAULT_MAX_ATTEMPTS == 5


@pytest.mark.parametrize(
    ("timeout", "shown"),
    [(0, "0"), (-1, "-1"), (math.nan, "nan"), (math.inf, "inf"), (True, "True"), ("30", "'30'")],
)
def test_visibility_timeout_must_be_finite_and_positive(timeout: float, shown: str) -> None:
    with pytest.raises(InvalidSettingError) as info:
        JobQueue(clock=ManualClock(), visibility_timeout_s=timeout)
    assert "visibility_timeout_s" in str(info.value)
    assert f"got {shown}" in str(info.value)


@pytest.mark.parametrize("max_attempts", [0, -1, True, 1.5])
def test_retry_policy_max_attempts_must_be_an_int_of_at_least_one(max_attempts: Any) -> None:
    with pytest.raises(InvalidSettingError) as info:
        RetryPolicy(max_attempts=max_attempts)
    assert "max_attempts" in str(info.value)
    assert f"got {max_attempts!r}" in str(info.value)


def test_job_type_needs_a_name() -> None:
    with pytest.raises(InvalidSettingError, match="''"):
        JobType("", InvoicePayload)


def test_error_classes_share_one_root_and_the_builtin_kinds() -> None:
    assert issubclass(jq.InvalidSettingError, ValueError)
    assert issubclass(jq.PayloadError, ValueError)
    assert issubclass(jq.UnknownJobTypeError, LookupError)
    for error in (
        jq.InvalidSettingError,
        jq.PayloadError,
        jq.UnknownJobTypeError,
        jq.StaleLeaseError,
        jq.PermanentJobError,
    ):
        assert issubclass(error, jq.JobQueueError)


def test_errors_fall_in_families_and_every_one_is_exported() -> None:
    import inspect

    import jobqueue.errors

    raised = {
        name
        for name, value in vars(jobqueue.errors).items()
        if inspect.isclass(value) and issubclass(value, jq.JobQueueError)
    }
    assert raised <= set(jq.__all__)
    signals = {jq.PermanentJobError, jq.RetryAfterError, jq.CircuitOpenError}
    storage = {
        jq.QueueFileError,
        jq.QueueFileLockedError,
        jq.QueueUnavailableError,
        jq.QueueSchemaError,
        jq.CorruptJobError,
        jq.TransactionAbortedError,
    }
    assert all(issubclass(kind, jq.JobSignal) and not issubclass(kind, jq.StorageError) for kind in signals)
    assert all(issubclass(kind, jq.StorageError) and not issubclass(kind, jq.JobSignal) for kind in storage)
    assert not issubclass(jq.StaleLeaseError, jq.StorageError | jq.JobSignal)


# -- payloads ------------------------------------------------------------------------


def test_payload_round_trips_through_json() -> None:
    text = SEND_RECEIPT.dump(RECEIPT)
    assert text == '{"order_id":1001,"email":"customer@example.com"}'
    assert SEND_RECEIPT.parse(text) == RECEIPT


def test_parse_rejects_stored_data_that_does_not_validate() -> None:
    with pytest.raises(PayloadError) as info:
        SEND_RECEIPT.parse('{"order_id": "1001", "email": "customer@example.com"}')
    assert "order_id" in str(info.value)
    assert "'send_receipt'" in str(info.value)
    with pytest.raises(PayloadError, match="email"):
        SEND_RECEIPT.parse('{"order_id": 1001}')
    with pytest.raises(PayloadError, match="not json"):
        SEND_RECEIPT.parse("not json")


@dataclass(frozen=True)
class Opaque:
    thing: object


@dataclass(frozen=True)
class Measurement:
    value: float


def test_enqueue_rejects_a_payload_of_the_wrong_class_and_changes_nothing() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    before = snapshot(queue)
    wrong: Any = invoice(1002)  # mypy would catch this; the queue must too
    with pytest.raises(PayloadError) as info:
        queue.enqueue(SEND_RECEIPT, wrong, id="receipt-1002")
    assert "InvoicePayload(order_id=1002)" in str(info.value)
    assert "ReceiptPayload" in str(info.value)
    assert snapshot(queue) == before
    assert queue.get("receipt-1002") is None


def test_enqueue_rejects_a_payload_json_cannot_hold_and_changes_nothing() -> None:
    opaque = JobType("opaque", Opaque)
    queue = make_queue(ManualClock())
    before = snapshot(queue)
    with pytest.raises(PayloadError) as info:
        queue.enqueue(opaque, Opaque(thing=object()))
    assert "not JSON-serialisable" in str(info.value)
    assert "Opaque(thing=<object object" in str(info.value)
    assert snapshot(queue) == before
    # The rejected enqueue did not use up an id either.
    assert queue.enqueue(RENDER_INVOICE, invoice()).id == "job-1"


def test_enqueue_rejects_a_nan_payload() -> None:
    queue = make_queue(ManualClock())
    with pytest.raises(PayloadError):
        queue.enqueue(JobType("measure", Measurement), Measurement(value=math.nan))


# -- enqueue ----------------------------------------------------------------------------


def test_enqueue_stores_a_waiting_job_due_now() -> None:
    clock = ManualClock(5)
    queue = make_queue(clock)
    job = queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    assert job == jq.Job(
        id="invoice-1001",
        type="render_invoice",
        payload='{"order_id":1001}',
        attempts=0,
        max_attempts=5,
        backoff=Backoff(),
        run_at=5.0,
        leased_until=None,
        last_error=None,
    )
    assert queue.get("invoice-1001") == job
    assert queue.jobs() == [job]
    assert len(queue) == 1
    assert queue.next_visible_at() == 5.0


def test_enqueue_makes_ids_when_none_is_given_skipping_ids_in_use() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(1), id="job-2")
    assert [queue.enqueue(RENDER_INVOICE, invoice(n)).id for n in (2, 3)] == ["job-1", "job-3"]


def test_enqueue_uses_a_custom_id_maker() -> None:
    ids = iter(["a", "b"])
    queue = make_queue(ManualClock(), new_id=lambda: next(ids))
    assert queue.enqueue(RENDER_INVOICE, invoice()).id == "a"


def test_job_type_retry_policy_wins_over_the_queue_default() -> None:
    policy = RetryPolicy(max_attempts=2, backoff=Backoff(base_s=10, cap_s=20))
    login_code = JobType("login_code", ReceiptPayload, retry=policy)
    queue = make_queue(ManualClock(), retry=RetryPolicy(max_attempts=9))
    own = queue.enqueue(login_code, RECEIPT)
    default = queue.enqueue(RENDER_INVOICE, invoice())
    assert (own.max_attempts, own.backoff) == (2, Backoff(base_s=10, cap_s=20))
    assert (default.max_attempts, default.backoff) == (9, Backoff())


def test_enqueue_with_an_id_already_waiting_leased_or_dead_is_ignored() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    first = queue.enqueue(RENDER_INVOICE, invoice(1), id="waiting")
    assert queue.enqueue(RENDER_INVOICE, invoice(2), id="waiting") == first

    queue.enqueue(RENDER_INVOICE, invoice(3), id="leased")
    queue.enqueue(RENDER_INVOICE, invoice(4), id="dead")
    queue.claim()  # "waiting" is handed out first; claim the other two as well
    leased = queue.claim()
    dead = queue.claim()
    assert leased is not None and dead is not None
    queue.fail(dead, "boom", permanent=True)

    before = snapshot(queue)
    assert queue.enqueue(RENDER_INVOICE, invoice(5), id="leased") == leased.job
    assert queue.enqueue(RENDER_INVOICE, invoice(6), id="dead").last_error == "boom"
    assert snapshot(queue) == before


# -- claim ------------------------------------------------------------------------------


def test_claim_on_an_empty_queue_returns_none() -> None:
    queue = make_queue(ManualClock())
    assert queue.claim() is None
    assert queue.next_visible_at() is None


def test_claim_counts_the_attempt_and_leases_for_the_visibility_timeout() -> None:
    clock = ManualClock(2)
    queue = make_queue(clock, visibility_timeout_s=10)
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    assert lease.job.id == "invoice-1001"
    assert lease.job.attempts == 1
    assert lease.job.leased_until == lease.expires_at == 12.0
    assert queue.get("invoice-1001") == lease.job
    assert queue.claim() is None
    assert queue.next_visible_at() == 12.0


def test_claim_is_fifo_among_jobs_due_at_the_same_time() -> None:
    queue = make_queue(ManualClock())
    for name in ("c", "a", "b", "d"):
        queue.enqueue(RENDER_INVOICE, invoice(), id=name)
    claimed = []
    while (lease := queue.claim()) is not None:
        claimed.append(lease.job.id)
    assert claimed == ["c", "a", "b", "d"]


def test_claim_hands_out_the_job_due_earliest_first() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(RENDER_INVOICE, invoice(), id="retried")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, "boom").outcome == "retry"  # due again at t=1
    clock.advance(0.5)
    queue.enqueue(RENDER_INVOICE, invoice(), id="newer")  # due at t=0.5
    clock.advance(0.5)
    assert [queue.claim().job.id, queue.claim().job.id] == ["newer", "retried"]  # type: ignore[union-attr]


def test_job_whose_final_lease_expires_is_dead_lettered_at_the_next_claim() -> None:
    clock = ManualClock()
    queue = make_queue(clock, retry=RetryPolicy(max_attempts=2))
    queue.enqueue(RENDER_INVOICE, invoice(1), id="crashy")
    assert queue.claim() is not None  # attempt 1: the worker crashes
    clock.advance(30)
    assert queue.claim() is not None  # attempt 2: the worker crashes again
    clock.advance(30)
    queue.enqueue(RENDER_INVOICE, invoice(2), id="healthy")
    assert queue.next_visible_at() == 60.0

    lease = queue.claim()  # not a third attempt of "crashy"
    assert lease is not None and lease.job.id == "healthy"
    [dead] = queue.dead_letters()
    assert dead.died_at == 60.0
    assert dead.job.id == "crashy"
    assert dead.job.attempts == 2
    assert dead.job.leased_until is None
    assert dead.job.last_error is not None
    assert dead.job.last_error.startswith("LeaseExpired")
    assert queue.get("crashy") is None
    assert [job.id for job in queue.jobs()] == ["healthy"]


# -- ack and fail -----------------------------------------------------------------------


def test_ack_removes_the_job_for_good() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    queue.ack(lease)
    assert (len(queue), queue.jobs(), queue.dead_letters(), queue.get("invoice-1001")) == (0, [], [], None)
    assert queue.claim() is None


def test_ack_after_the_lease_ran_out_counts_if_nobody_claimed_meanwhile() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(RENDER_INVOICE, invoice(), id="slow")
    lease = queue.claim()
    assert lease is not None
    clock.advance(45)
    queue.ack(lease)
    assert len(queue) == 0
    assert queue.claim() is None


def test_ack_twice_raises_stale_lease() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    queue.ack(lease)
    with pytest.raises(StaleLeaseError) as info:
        queue.ack(lease)
    assert "'invoice-1001'" in str(info.value)
    assert lease.token in str(info.value)
    with pytest.raises(StaleLeaseError):
        queue.fail(lease, "late")
    assert snapshot(queue) == ([], [], 0, None)


def test_a_worker_whose_lease_was_taken_over_can_neither_ack_nor_fail() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease_a = queue.claim()
    assert lease_a is not None
    clock.advance(30)
    lease_b = queue.claim()
    assert lease_b is not None
    assert lease_b.job.attempts == 2
    assert lease_b.token != lease_a.token

    before = snapshot(queue)
    with pytest.raises(StaleLeaseError) as info:
        queue.ack(lease_a)
    assert "attempt 2" in str(info.value)
    assert lease_b.token in str(info.value)
    assert snapshot(queue) == before
    with pytest.raises(StaleLeaseError):
        queue.fail(lease_a, RuntimeError("late"))
    with pytest.raises(StaleLeaseError):
        queue.fail(lease_a, RuntimeError("late"), permanent=True)
    assert snapshot(queue) == before
    assert queue.get("invoice-1001") == lease_b.job

    queue.ack(lease_b)
    assert len(queue) == 0
    assert queue.dead_letters() == []


def test_a_lease_is_stale_once_its_job_was_failed_back_to_waiting() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "boom")
    before = snapshot(queue)
    with pytest.raises(StaleLeaseError, match="not leased now"):
        queue.ack(lease)
    assert snapshot(queue) == before


def test_fail_retries_after_the_backoff_delay() -> None:
    clock = ManualClock(10)
    queue = make_queue(clock, random=lambda: 0.5, retry=RetryPolicy(backoff=Backoff(base_s=2, cap_s=60)))
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, RuntimeError("renderer crashed")).outcome == "retry"
    job = queue.get("invoice-1001")
    assert job is not None
    # attempt 1: ceiling 2 s, delay 2/2 + 0.5 * 2/2 = 1.5 s
    assert (job.run_at, job.leased_until, job.attempts) == (11.5, None, 1)
    assert job.last_error == "RuntimeError: renderer crashed"
    assert queue.next_visible_at() == 11.5
    clock.advance(1.499)
    assert queue.claim() is None
    clock.advance(0.001)
    again = queue.claim()
    assert again is not None and again.job.attempts == 2


def test_fail_keeps_a_string_error_as_given() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "renderer said no")
    assert queue.get("invoice-1001").last_error == "renderer said no"  # type: ignore[union-attr]


def test_permanent_failure_goes_straight_to_the_dead_letters() -> None:
    clock = ManualClock(3)
    queue = make_queue(clock)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, jq.PermanentJobError("invalid e-mail address"), permanent=True).outcome == "dead"
    [dead] = queue.dead_letters()
    expected = replace(
        lease.job, leased_until=None, leased_at=None, last_error="PermanentJobError: invalid e-mail address"
    )
    assert dead == jq.DeadLetter(job=expected, died_at=3.0)
    assert dead.job.attempts == 1
    assert (len(queue), queue.get("receipt-1001"), queue.claim()) == (0, None, None)


def test_failing_the_last_attempt_is_dead() -> None:
    clock = ManualClock()
    queue = make_queue(clock, retry=RetryPolicy(max_attempts=1))
    queue.enqueue(RENDER_INVOICE, invoice(), id="once")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, RuntimeError("boom")).outcome == "dead"
    assert [dead.job.id for dead in queue.dead_letters()] == ["once"]


@pytest.mark.parametrize("bad", [1.5, -0.1])
def test_fail_with_a_bad_random_raises_and_leaves_the_job_leased(bad: float) -> None:
    clock = ManualClock()
    queue = make_queue(clock, random=lambda: bad)
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    lease = queue.claim()
    assert lease is not None
    before = snapshot(queue)
    with pytest.raises(InvalidSettingError) as info:
        queue.fail(lease, RuntimeError("boom"))
    assert repr(bad) in str(info.value)
    assert snapshot(queue) == before
    assert queue.get("invoice-1001") == lease.job  # still leased, attempt 1, no last_error
    assert queue.claim() is None
    queue.ack(lease)  # the same token still holds the job
    assert len(queue) == 0


def test_jobs_are_listed_in_the_order_they_become_claimable() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    for name in ("zeta", "alpha", "mid"):
        queue.enqueue(RENDER_INVOICE, invoice(), id=name)
    lease = queue.claim()  # zeta: leased until t=30
    assert lease is not None
    assert [job.id for job in queue.jobs()] == ["alpha", "mid", "zeta"]
    queue.fail(lease, "boom")  # zeta: due again at t=1
    clock.advance(1)
    queue.enqueue(RENDER_INVOICE, invoice(), id="beta")  # due at t=1 too, but later in line
    assert [job.id for job in queue.jobs()] == ["alpha", "mid", "zeta", "beta"]
    claimed = []
    while (lease := queue.claim()) is not None:
        claimed.append(lease.job.id)
    assert claimed == ["alpha", "mid", "zeta", "beta"]


def test_repr_counts_jobs_and_dead_letters() -> None:
    queue = make_queue(ManualClock())
    queue.enqueue(RENDER_INVOICE, invoice(1))
    queue.enqueue(RENDER_INVOICE, invoice(2))
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "x", permanent=True)
    assert repr(queue) == "JobQueue(1 jobs, 1 dead, now=0s)"


def test_reenqueued_job_is_not_handed_out_while_its_new_lease_is_held() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")
    first = queue.claim()
    assert first is not None
    queue.ack(first)  # done at t=0; its lease would have run until t=30
    clock.advance(20)
    queue.enqueue(RENDER_INVOICE, invoice(), id="invoice-1001")  # a new job with the same id
    second = queue.claim()
    assert second is not None and second.expires_at == 50.0
    clock.advance(10)
    assert queue.claim() is None  # t=30: still leased until t=50


# -- the queue against a reference model ---------------------------------------------------


@dataclass
class ModelJob:
    id: str
    attempts: int
    run_at: float
    leased_until: float | None
    serial: int  # when the job last became waiting or leased: ties go to the lower serial
    last_error: str | None = None

    def visible_at(self) -> float:
        return self.run_at if self.leased_until is None else max(self.run_at, self.leased_until)


class ModelQueue:
    """The queue's rules, written the slow and obvious way: a list scanned from end to end."""

    def __init__(
        self, *, max_attempts: int, base_s: float, cap_s: float, random_value: float, timeout_s: float
    ):
        self.max_attempts, self.base_s, self.cap_s = max_attempts, base_s, cap_s
        self.random_value, self.timeout_s = random_value, timeout_s
        self.now = 0.0
        self.jobs: list[ModelJob] = []
        self.dead: dict[str, ModelJob] = {}
        self.holder: dict[str, int] = {}  # job id -> number of the lease that holds it
        self.serials = 0
        self.leases = 0

    def find(self, job_id: str) -> ModelJob | None:
        return next((job for job in self.jobs if job.id == job_id), None)

    def next_serial(self) -> int:
        self.serials += 1
        return self.serials

    def enqueue(self, job_id: str) -> None:
        if self.find(job_id) is None and job_id not in self.dead:
            self.jobs.append(ModelJob(job_id, 0, self.now, None, self.next_serial()))

    def bury(self, job: ModelJob) -> None:
        self.jobs.remove(job)
        self.holder.pop(job.id, None)
        job.leased_until = None
        self.dead[job.id] = job

    def claim(self) -> tuple[str, int, int] | None:
        while True:
            due = [job for job in self.jobs if job.visible_at() <= self.now]
            if not due:
                return None
            job = min(due, key=lambda job: (job.visible_at(), job.serial))
            if job.attempts >= self.max_attempts:
                job.last_error = "LeaseExpired"
                self.bury(job)
                continue
            job.attempts += 1
            job.leased_until = self.now + self.timeout_s
            job.serial = self.next_serial()
            self.leases += 1
            self.holder[job.id] = self.leases
            return job.id, job.attempts, self.leases

    def ack(self, job_id: str, lease: int) -> bool:
        if self.holder.get(job_id) != lease:
            return False
        job = self.find(job_id)
        assert job is not None
        self.jobs.remove(job)
        del self.holder[job_id]
        return True

    def fail(self, job_id: str, lease: int, permanent: bool) -> str | None:
        if self.holder.get(job_id) != lease:
            return None
        job = self.find(job_id)
        assert job is not None
        job.last_error = "failed"
        if permanent or job.attempts >= self.max_attempts:
            self.bury(job)
            return "dead"
        ceiling = min(self.cap_s, self.base_s * 2 ** (job.attempts - 1))
        job.run_at = self.now + ceiling / 2 + self.random_value * ceiling / 2
        job.leased_until = None
        job.serial = self.next_serial()
        del self.holder[job_id]
        return "retry"

    def records(self) -> list[tuple[str, int, float, float | None, str | None]]:
        ordered = sorted(self.jobs, key=lambda job: (job.visible_at(), job.serial))  # claim order
        return [(job.id, job.attempts, job.run_at, job.leased_until, job.last_error) for job in ordered]


def queue_records(queue: JobQueue) -> list[tuple[str, int, float, float | None, str | None]]:
    return [(job.id, job.attempts, job.run_at, job.leased_until, job.last_error) for job in queue.jobs()]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from([None, "a", "b", "c", "d"])),
        st.tuples(st.just("claim")),
        st.tuples(st.just("ack"), st.integers(min_value=0, max_value=20)),
        st.tuples(st.just("fail"), st.integers(min_value=0, max_value=20), st.booleans()),
        st.tuples(st.just("advance"), st.sampled_from([0, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 30])),
    ),
    min_size=20,
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(
    ops=operations,
    max_attempts=st.integers(min_value=1, max_value=4),
    random_value=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    timeout_s=st.sampled_from([1.0, 5.0, 10.0]),
)
def test_queue_matches_a_linear_scan_model(
    ops: list[tuple[Any, ...]], max_attempts: int, random_value: float, timeout_s: float
) -> None:
    clock = ManualClock()
    policy = RetryPolicy(max_attempts=max_attempts, backoff=Backoff(base_s=1, cap_s=8))
    queue = JobQueue(clock=clock, visibility_timeout_s=timeout_s, retry=policy, random=lambda: random_value)
    model = ModelQueue(
        max_attempts=max_attempts, base_s=1, cap_s=8, random_value=random_value, timeout_s=timeout_s
    )
    leases: list[tuple[jq.Lease, int]] = []  # every lease handed out, with the model's lease number
    claimed_real: list[tuple[str, int]] = []
    claimed_model: list[tuple[str, int]] = []

    for op in ops:
        kind = op[0]
        if kind == "enqueue":
            name = op[1]
            if name is None:
                job_id = queue.enqueue(RENDER_INVOICE, invoice()).id
            else:
                job_id = name  # ids are reused: "a" may be enqueued again after it was acked
                queue.enqueue(RENDER_INVOICE, invoice(), id=job_id)
            model.enqueue(job_id)
        elif kind == "claim":
            lease = queue.claim()
            expected = model.claim()
            claimed_real.append((lease.job.id, lease.job.attempts) if lease else ("-", 0))
            claimed_model.append((expected[0], expected[1]) if expected else ("-", 0))
            if lease is not None and expected is not None:
                leases.append((lease, expected[2]))
        elif kind in ("ack", "fail") and leases:
            lease, number = leases[op[1] % len(leases)]
            before = snapshot(queue)
            if kind == "ack":
                if model.ack(lease.job.id, number):
                    queue.ack(lease)
                else:
                    with pytest.raises(StaleLeaseError):
                        queue.ack(lease)
                    assert snapshot(queue) == before
            else:
                outcome = model.fail(lease.job.id, number, op[2])
                if outcome is None:
                    with pytest.raises(StaleLeaseError):
                        queue.fail(lease, "failed", permanent=op[2])
                    assert snapshot(queue) == before
                else:
                    assert queue.fail(lease, "failed", permanent=op[2]).outcome == outcome
        elif kind == "advance":
            model.now = clock.advance(op[1])
        assert claimed_real == claimed_model
        assert queue_records(queue) == model.records()

    assert len(queue) == len(model.jobs)
    expected_next = min((job.visible_at() for job in model.jobs), default=None)
    assert queue.next_visible_at() == expected_next
    dead = {d.job.id: (d.job.attempts, (d.job.last_error or "").split(":")[0]) for d in queue.dead_letters()}
    assert dead == {job.id: (job.attempts, job.last_error) for job in model.dead.values()}


def test_a_field_of_the_wrong_type_is_a_payload_error_without_a_warning() -> None:
    queue = make_queue(ManualClock())
    wrong = ReceiptPayload(order_id="1001", email="customer@example.com")  # type: ignore[arg-type]
    with pytest.raises(PayloadError, match="order_id"):  # filterwarnings=error: a warning would fail here
        queue.enqueue(SEND_RECEIPT, wrong)
    assert len(queue) == 0


# -- what a drain leaves behind ------------------------------------------------------


def held_entries(queue: JobQueue) -> int:
    """How many ordering entries the queue keeps (live and stale); its memory grows with them."""
    fresh = sum(map(len, queue._fresh.values()))
    return fresh + len(queue._later) + len(queue._ready) + len(queue._ready_at)


def test_acked_jobs_leave_no_entries_behind_once_they_outnumber_the_live_ones() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 201)])
    for _ in range(199):
        lease = queue.claim()
        assert lease is not None
        queue.ack(lease)
    assert len(queue) == 1
    assert held_entries(queue) <= 6  # at most four per live job (which has one or two), plus two
    clock.advance(queue.visibility_timeout_s)  # the acked jobs' leases would have run out
    last = queue.claim()
    assert last is not None
    assert last.job.id == "job-200"
    queue.ack(last)
    assert held_entries(queue) <= 2


class SettableClock:
    """A clock whose time a test sets, backwards too (a wall clock may step back)."""

    def __init__(self, now: float) -> None:
        self.at = now

    def now(self) -> float:
        return self.at


def test_claim_order_holds_when_the_clock_steps_back() -> None:
    clock = SettableClock(10.0)
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    queue.enqueue(RENDER_INVOICE, invoice(1), id="late")  # due at 10
    clock.at = 5.0
    queue.enqueue(RENDER_INVOICE, invoice(2), id="early")  # due at 5: claimable before "late"
    clock.at = 10.0
    queue.enqueue(RENDER_INVOICE, invoice(3), id="last")
    assert [job.id for job in queue.jobs()] == ["early", "late", "last"]
    assert queue.next_visible_at() == 5.0
    assert [lease.job.id for lease in queue.claim_many(3)] == ["early", "late", "last"]


def test_a_job_due_when_stored_is_not_handed_out_early_after_the_clock_steps_back() -> None:
    clock = SettableClock(10.0)
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    queue.enqueue(RENDER_INVOICE, invoice(1), id="at-10", priority=5)  # due at once, stored as due
    clock.at = 5.0
    assert queue.claim() is None  # due at 10, and the clock reads 5
    clock.at = 10.0
    lease = queue.claim()
    assert lease is not None and lease.job.id == "at-10"


# -- priorities and deadlines (lesson 13) ---------------------------------------------

LOGIN_CODE = JobType("send_login_code", ReceiptPayload, priority=5, expires_after_s=600)


@pytest.mark.parametrize("priority", [True, 1.5, "1", None, 1001, -1001])
def test_a_priority_that_is_not_a_bounded_int_is_refused_naming_it(priority: Any) -> None:
    queue = make_queue(ManualClock())
    if priority is not None:  # None is "the type's" for an enqueue
        with pytest.raises(
            InvalidSettingError, match=f"priority must be an int from -1000 to 1000, got {priority!r}"
        ):
            queue.enqueue(SEND_RECEIPT, RECEIPT, priority=priority)
        with pytest.raises(InvalidSettingError, match="priority"):
            queue.enqueue_many(SEND_RECEIPT, [RECEIPT, RECEIPT], priority=priority)
        assert len(queue) == 0
    with pytest.raises(InvalidSettingError, match=f"got {priority!r}"):
        JobType("t", ReceiptPayload, priority=priority)
    with pytest.raises(InvalidSettingError, match="priority"):
        jq.Job(id="j", type="t", payload="{}", priority=priority)


@pytest.mark.parametrize("after_s", [0, -1, math.nan, math.inf, True, "600"])
def test_a_deadline_that_is_not_a_positive_number_of_seconds_is_refused(after_s: Any) -> None:
    with pytest.raises(InvalidSettingError, match=f"expires_after_s must be .*got {after_s!r}"):
        JobType("t", ReceiptPayload, expires_after_s=after_s)


def test_a_higher_priority_is_claimed_first_among_due_jobs_only() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="low-1")
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="low-2")
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code")  # the type's priority, 5
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="bumped", priority=9)  # this job's own
    assert [job.priority for job in queue.jobs()] == [0, 0, 5, 9]
    first = queue.claim()
    assert first is not None and first.job.id == "bumped"
    queue.fail(first, "boom")  # waiting again after 1 s: not due, so no priority yet
    assert [lease.job.id for lease in queue.claim_many(2)] == ["code", "low-1"]
    clock.advance(1)
    assert [lease.job.id for lease in queue.claim_many(2)] == ["bumped", "low-2"]


def test_a_job_waiting_past_its_deadline_is_dead_lettered_unrun() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    code = queue.enqueue(LOGIN_CODE, RECEIPT, id="code")
    assert (code.expires_at, code.expires_after_s) == (600, 600)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt")
    clock.advance(660.5)  # an outage: nobody claimed for eleven minutes
    lease = queue.claim()
    assert lease is not None and lease.job.id == "receipt"  # the code was met first, and buried
    (dead,) = queue.dead_letters()
    assert dead.job.id == "code" and dead.died_at == 660.5
    assert dead.job.last_error == "expired: still waiting 61 s past its deadline"
    assert dead.job.attempts == 0  # it never ran: no attempt used


def test_a_job_claimed_at_its_deadline_still_runs() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code")
    clock.advance(600)
    lease = queue.claim()
    assert lease is not None and lease.job.id == "code"


def test_a_leased_job_is_not_cut_off_by_its_deadline_but_its_retry_is() -> None:
    clock = ManualClock()
    queue = make_queue(clock, visibility_timeout_s=900)
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code")
    lease = queue.claim()
    assert lease is not None
    clock.advance(700)  # past the deadline while a worker holds it
    assert queue.fail(lease, "smtp down").outcome == "retry"  # the lease is honoured
    clock.advance(1)
    assert queue.claim() is None  # waiting again, past its deadline: not run again
    (dead,) = queue.dead_letters()
    assert dead.job.attempts == 1
    assert dead.job.last_error == "expired: still waiting 101 s past its deadline"


def test_replaying_an_expired_job_gives_it_a_fresh_deadline() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code", priority=7)
    clock.advance(601)
    assert queue.claim() is None
    clock.advance(99)
    replayed = queue.replay("code")
    assert (replayed.priority, replayed.expires_at, replayed.run_at) == (7, 1300, 700)
    clock.advance(600)
    lease = queue.claim()
    assert lease is not None and lease.job.id == "code"


class CountingHeapq:
    """``heapq`` that counts the pushes and pops made through it."""

    def __init__(self) -> None:
        import heapq

        self.real = heapq
        self.calls = 0

    def heappush(self, heap: list[Any], item: Any) -> None:
        self.calls += 1
        self.real.heappush(heap, item)

    def heappop(self, heap: list[Any]) -> Any:
        self.calls += 1
        return self.real.heappop(heap)

    def heapify(self, heap: list[Any]) -> None:
        self.calls += len(heap)  # a rebuild: linear work
        self.real.heapify(heap)


def heap_calls_per_claim(backlog: int, monkeypatch: pytest.MonkeyPatch) -> float:
    """Heap pushes and pops per claim-and-ack from a due backlog of three priorities."""
    import jobqueue.backends.memory

    clock = ManualClock()
    queue = make_queue(clock)
    for number in range(backlog):
        queue.enqueue(RENDER_INVOICE, invoice(number), priority=number % 3)
    clock.advance(1)
    counting = CountingHeapq()
    monkeypatch.setattr(jobqueue.backends.memory, "heapq", counting)
    for _ in range(100):
        lease = queue.claim()
        assert lease is not None and lease.job.priority == 2
        queue.ack(lease)
    monkeypatch.undo()
    return counting.calls / 100


def test_a_claim_among_priorities_costs_a_few_heap_operations_whatever_the_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each push or pop costs O(log n): a few of them per claim keep the claim O(log n). A
    # scan or a sort of the backlog would show up as work growing with it.
    small, large = heap_calls_per_claim(300, monkeypatch), heap_calls_per_claim(30_000, monkeypatch)
    assert small == large <= 6, (small, large)


def priority_and_deadline_scene(queue: Any, clock: ManualClock) -> list[str]:
    """Drive ``queue`` (any backend) through priorities, expiries and a replay; the ids claimed.

    ``tests/test_durable.py`` and ``tests/test_postgres.py`` run it on their queue and on a
    :class:`JobQueue` and compare what both show, reasons of the expired jobs included.
    """
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt")
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code-late")  # priority 5, 600 s deadline
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="bumped", priority=9)
    queue.enqueue_many(LOGIN_CODE, [RECEIPT, RECEIPT], ids=["code-a", "code-b"], priority=-3)
    claimed: list[str] = []

    def claim_and_ack(limit: int) -> None:
        leases = queue.claim_many(limit)
        claimed.extend(lease.job.id for lease in leases)
        assert queue.ack_many(leases) == []

    claim_and_ack(1)
    clock.advance(600.25)
    queue.enqueue(LOGIN_CODE, RECEIPT, id="code-fresh")
    claim_and_ack(3)  # buries the expired jobs it meets on the way
    clock.advance(10)
    queue.replay("code-a")  # a fresh deadline, from now
    clock.advance(599)
    claim_and_ack(3)
    return claimed


def test_the_priority_and_deadline_scene_in_memory() -> None:
    clock = ManualClock(1_000)
    queue = make_queue(clock)
    assert priority_and_deadline_scene(queue, clock) == ["bumped", "code-fresh", "receipt", "code-a"]
    assert {dead.job.id: dead.job.last_error for dead in queue.dead_letters()} == {
        "code-late": "expired: still waiting 1 s past its deadline",
        "code-b": "expired: still waiting 1 s past its deadline",
    }


def test_ack_then_claim_for_a_queue_without_its_own_ack_and_claim() -> None:
    # The shared default (contract.ack_then_claim): ack_many, then claim_many.
    clock = ManualClock(0)
    queue = make_queue(clock)
    queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 5)], ids=["i1", "i2", "i3", "i4"])
    first, second = queue.claim_many(2)
    queue.ack(second)
    stale, claimed = ack_then_claim(queue, [first, second], 1)
    assert stale == [second]
    assert [lease.job.id for lease in claimed] == ["i3"]
    assert ack_then_claim(queue, claimed, 0) == ([], [])
    assert sorted(job.id for job in queue.jobs()) == ["i4"]
    with pytest.raises(InvalidSettingError, match="-1"):
        ack_then_claim(queue, [], -1)
