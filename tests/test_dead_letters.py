import pytest

from jobqueue import InvalidSettingError, JobQueue, ManualClock, PayloadError, PermanentJobError
from jobqueue.errors import DeadLetterNotFoundError, UnknownJobTypeError
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.failures import classify_exception, classify_status

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def dead_job(clock: ManualClock) -> JobQueue:
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="r")
    clock.advance(2)
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, "PermanentJobError: bad address", permanent=True).outcome == "dead"
    return queue


def test_replay_starts_the_job_afresh_due_now() -> None:
    clock = ManualClock()
    queue = dead_job(clock)
    clock.advance(60)
    job = queue.replay("r")
    assert (job.attempts, job.run_at, job.leased_until) == (0, 62.0, None)
    assert job.last_error == "PermanentJobError: bad address"  # kept for the record
    assert queue.dead_letters() == []
    lease = queue.claim()
    assert lease is not None
    assert (lease.job.id, lease.job.attempts) == ("r", 1)


def test_replay_of_an_unknown_id_names_it_and_changes_nothing() -> None:
    clock = ManualClock()
    queue = dead_job(clock)
    before = (queue.jobs(), queue.dead_letters())
    with pytest.raises(DeadLetterNotFoundError, match="'nope'"):
        queue.replay("nope")
    assert (queue.jobs(), queue.dead_letters()) == before


def test_discard_deletes_a_dead_letter_and_frees_its_id() -> None:
    clock = ManualClock()
    queue = dead_job(clock)
    dead = queue.discard("r")
    assert (dead.job.id, dead.job.attempts, dead.died_at) == ("r", 1, 2.0)
    assert queue.dead_letters() == []
    fixed = ReceiptPayload(order_id=1001, email="customer@example.com")
    assert queue.enqueue(SEND_RECEIPT, fixed, id="r").attempts == 0
    assert len(queue) == 1


def test_discard_of_an_unknown_id_names_it() -> None:
    queue = dead_job(ManualClock())
    with pytest.raises(DeadLetterNotFoundError, match="'nope'"):
        queue.discard("nope")
    assert len(queue.dead_letters()) == 1


def test_a_waiting_job_cannot_be_replayed() -> None:
    queue = JobQueue(clock=ManualClock())
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="r")
    with pytest.raises(DeadLetterNotFoundError):
        queue.replay("r")


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (400, "permanent"),
        (401, "depends"),  # an expired token: refresh, then retry
        (409, "depends"),  # a conflict that may pass
        (404, "permanent"),
        (422, "permanent"),
        (408, "transient"),
        (429, "transient"),
        (500, "transient"),
        (503, "transient"),
        (599, "transient"),
    ],
)
def test_classify_status(status: int, verdict: str) -> None:
    assert classify_status(status) == verdict


@pytest.mark.parametrize("status", [200, 302, 399, 600, True, 404.0])
def test_classify_status_rejects_non_failures(status: int) -> None:
    with pytest.raises(InvalidSettingError, match=repr(status)):
        classify_status(status)


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (PermanentJobError("bad address"), "permanent"),
        (PayloadError("invalid payload"), "permanent"),
        (UnknownJobTypeError("no handler"), "transient"),  # the worker gives it back: another may know it
        (ValueError("not an e-mail address"), "transient"),  # unsure: could be a proxy's garbage
        (KeyError("order 1001"), "transient"),
        (HttpError(404), "permanent"),
        (HttpError(429), "transient"),
        (HttpError(503), "transient"),
        (TimeoutError(), "transient"),
        (ConnectionResetError(), "transient"),
        (RuntimeError("renderer crashed"), "transient"),  # unsure: transient
    ],
)
def test_classify_exception(error: BaseException, verdict: str) -> None:
    assert classify_exception(error) == verdict
