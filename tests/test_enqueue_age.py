"""The age since enqueue (lesson 13): jobs keep their enqueue time, the metrics count from it.

On every backend: an outage in which every job waits out a backoff leaves the age since the
jobs became claimable at 0, while the age since enqueue keeps growing (SQS's
``ApproximateAgeOfOldestMessage``); a retry and a release keep the enqueue time, a replay
sets it anew, and a leased job is not counted.
"""

from test_overview import T0, queue  # noqa: F401  (the fixture: a queue of each backend at T0)

from jobqueue import ManualClock
from jobqueue.backends.contract import Queue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload


def receipt(order_id: int) -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email="ada@example.com")


def test_an_outage_in_backoff_shows_in_the_age_since_enqueue(queue: Queue) -> None:  # noqa: F811 (the imported fixture)
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    queue.enqueue_many(SEND_RECEIPT, [receipt(1), receipt(2)], ids=["a", "b"])
    assert queue.metrics().oldest_enqueued_age_s == 0.0
    clock.advance(5.0)
    first, second = queue.claim_many(2)
    assert queue.fail(first, "ConnectionError: mail server down").outcome == "retry"  # due at T0 + 65
    queue.release(second, delay_s=30.0)  # due at T0 + 35
    clock.advance(20.0)  # T0 + 25: both wait out a delay, none is claimable
    metrics = queue.metrics()
    assert (metrics.waiting, metrics.scheduled, metrics.oldest_waiting_age_s) == (0, 2, 0.0)
    assert metrics.oldest_enqueued_age_s == 25.0
    assert [job.enqueued_at for job in queue.jobs()] == [T0, T0]  # kept by the retry and the release

    clock.advance(15.0)  # T0 + 40: "b" is claimable again since T0 + 35
    metrics = queue.metrics()
    assert (metrics.oldest_waiting_age_s, metrics.oldest_enqueued_age_s) == (5.0, 40.0)


def test_a_leased_job_is_not_counted_and_a_replay_starts_afresh(queue: Queue) -> None:  # noqa: F811 (the imported fixture)
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    queue.enqueue(SEND_RECEIPT, receipt(1), id="leased")
    clock.advance(10.0)
    queue.enqueue(SEND_RECEIPT, receipt(2), id="doomed")
    leased = queue.claim()
    assert leased is not None and leased.job.id == "leased"
    clock.advance(5.0)
    assert queue.metrics().oldest_enqueued_age_s == 5.0  # "doomed" only: "leased" is held
    queue.ack(leased)
    doomed = queue.claim()
    assert doomed is not None
    queue.fail(doomed, "ValueError: no such order", permanent=True)
    assert queue.dead_letters()[0].job.enqueued_at == T0 + 10.0
    clock.advance(100.0)
    replayed = queue.replay("doomed")
    assert replayed.enqueued_at == T0 + 115.0
    assert queue.metrics().oldest_enqueued_age_s == 0.0
