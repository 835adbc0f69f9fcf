import pytest

from jobqueue import InvalidSettingError, JobQueue, ManualClock, StaleLeaseError
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def claimed(clock: ManualClock) -> tuple[JobQueue, object]:
    queue = JobQueue(clock=clock, visibility_timeout_s=30)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="r")
    return queue, queue.claim()


def test_extend_lease_keeps_a_long_job_hidden_and_the_token() -> None:
    clock = ManualClock()
    queue, lease = claimed(clock)
    clock.advance(20)
    longer = queue.extend_lease(lease)
    assert (longer.token, longer.expires_at) == (lease.token, 50.0)
    clock.advance(29.999)
    assert queue.claim() is None
    queue.ack(longer)
    assert len(queue) == 0


def test_extend_lease_by_a_given_number_of_seconds() -> None:
    clock = ManualClock()
    queue, lease = claimed(clock)
    assert queue.extend_lease(lease, by_s=5).expires_at == 5.0
    clock.advance(5)
    again = queue.claim()
    assert again is not None and again.job.attempts == 2


def test_the_old_lease_object_still_acks_after_an_extension() -> None:
    clock = ManualClock()
    queue, lease = claimed(clock)
    queue.extend_lease(lease)
    queue.ack(lease)  # same token: the holder is the same worker
    assert len(queue) == 0


def test_a_stale_holder_cannot_extend() -> None:
    clock = ManualClock()
    queue, lease = claimed(clock)
    clock.advance(30)
    second = queue.claim()
    assert second is not None
    with pytest.raises(StaleLeaseError):
        queue.extend_lease(lease)
    assert queue.get("r").leased_until == 60.0


@pytest.mark.parametrize("by_s", [0, -1, float("nan")])
def test_extend_lease_rejects_bad_durations(by_s: float) -> None:
    clock = ManualClock()
    queue, lease = claimed(clock)
    with pytest.raises(InvalidSettingError, match="by_s"):
        queue.extend_lease(lease, by_s=by_s)
    assert queue.get("r").leased_until == 30.0
