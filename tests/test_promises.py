"""The five promises of lesson 10, one test each, all on the manual clock."""

from jobqueue import Backoff, JobQueue, ManualClock, RetryPolicy
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def test_backoff_doubles_and_caps() -> None:
    backoff = Backoff(base_s=1, cap_s=4)
    assert [backoff.delay_s(attempt, lambda: 1.0) for attempt in range(1, 6)] == [1, 2, 4, 4, 4]


def test_no_hand_out_before_the_retry_time_then_exactly_at_it() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, ConnectionError("mail provider down")).outcome == "retry"  # retry at t=1

    clock.advance(0.999)
    assert queue.claim() is None
    clock.advance(0.001)
    assert clock.now() == 1.0
    again = queue.claim()
    assert again is not None
    assert (again.job.id, again.job.attempts) == ("receipt-1001", 2)


def test_dead_after_the_last_attempt() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, retry=RetryPolicy(max_attempts=2), random=lambda: 1.0)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    first = queue.claim()
    assert first is not None
    assert queue.fail(first, ConnectionError("down")).outcome == "retry"
    clock.advance(1)
    second = queue.claim()
    assert second is not None
    assert queue.fail(second, ConnectionError("down")).outcome == "dead"

    [dead] = queue.dead_letters()
    assert (dead.job.id, dead.job.attempts) == ("receipt-1001", 2)
    assert (len(queue), queue.jobs()) == (0, [])
    clock.advance(3600)
    assert queue.claim() is None


def test_unacked_job_is_invisible_until_the_visibility_timeout_then_back_as_attempt_2() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, visibility_timeout_s=30)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    assert queue.claim() is not None  # the worker dies before it acks

    clock.advance(29.999)
    assert queue.claim() is None
    clock.advance(0.001)
    assert clock.now() == 30.0
    again = queue.claim()
    assert again is not None
    assert (again.job.id, again.job.attempts, again.expires_at) == ("receipt-1001", 2, 60.0)


def test_a_second_enqueue_with_the_same_id_is_ignored() -> None:
    queue = JobQueue(clock=ManualClock())
    first = queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    other = ReceiptPayload(order_id=1001, email="someone.else@example.com")
    assert queue.enqueue(SEND_RECEIPT, other, id="receipt-1001") == first
    assert queue.jobs() == [first]
    assert SEND_RECEIPT.parse(first.payload) == RECEIPT
