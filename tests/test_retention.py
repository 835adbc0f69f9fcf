"""Retention (issue 24): acked jobs kept ``retain_s`` seconds, then pruned by the acks in small batches.

On every backend: ``retain_s`` 0 keeps nothing (the ack deletes, as before); a kept job
carries its outcome, attempts and times; the acks prune what is older than ``retain_s``,
at most ``PRUNE_BATCH`` rows per prune and one prune per ``PRUNE_EVERY_S`` seconds; a bad
``retain_s`` is refused by name.
"""

from collections.abc import Callable, Iterator

import pytest
from backends_support import clock_of

from jobqueue import Backoff, DurableQueue, InvalidSettingError, JobQueue, ManualClock, RetryPolicy
from jobqueue.backends import rules
from jobqueue.backends.contract import KeepsFinished, Queue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

T0 = 1_000.0
POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=10.0, cap_s=10.0))

MakeQueue = Callable[[float], Queue]
"""Builds a queue of the backend under test on a ManualClock at T0, keeping finished jobs ``retain_s``."""


@pytest.fixture(params=["memory", "duckdb", "postgres"])
def make_queue(request: pytest.FixtureRequest) -> Iterator[MakeQueue]:
    opened: list[DurableQueue] = []

    def make(retain_s: float) -> Queue:
        clock = ManualClock(T0)
        settings = {"clock": clock, "retry": POLICY, "random": lambda: 1.0, "retain_s": retain_s}
        if request.param == "memory":
            return JobQueue(**settings)  # type: ignore[arg-type]
        if request.param == "duckdb":
            queue: Queue = DurableQueue(":memory:", **settings)  # type: ignore[arg-type]
        else:
            from jobqueue.backends.postgres import PostgresQueue

            queue = PostgresQueue(request.getfixturevalue("pg_conninfo"), **settings)  # type: ignore[arg-type]
        opened.append(queue)  # type: ignore[arg-type]
        return queue

    yield make
    for queue in opened:
        queue.close()


def receipt(order_id: int) -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email="ada@example.com")


def run_all(queue: Queue) -> None:
    """Claim every due job and ack it."""
    leases = queue.claim_many(1_000)
    assert queue.ack_many(leases) == []


def test_without_retention_an_ack_keeps_nothing(make_queue: MakeQueue) -> None:
    queue = make_queue(0)
    assert isinstance(queue, KeepsFinished) and queue.retain_s == 0.0
    queue.enqueue(SEND_RECEIPT, receipt(1), id="r1")
    run_all(queue)
    assert queue.finished() == []


def test_a_kept_job_has_its_outcome_attempts_and_times(make_queue: MakeQueue) -> None:
    queue = make_queue(60)
    assert isinstance(queue, KeepsFinished)
    clock = clock_of(queue)
    queue.enqueue(SEND_RECEIPT, receipt(1), id="r1")
    clock.advance(1.0)
    first = queue.claim()
    assert first is not None
    queue.fail(first, "ConnectionError: down")  # due again at T0 + 11
    clock.advance(10.0)
    second = queue.claim()
    assert second is not None
    clock.advance(2.0)
    queue.ack(second)
    [kept] = queue.finished()
    assert (kept.outcome, kept.finished_at) == ("done", T0 + 13.0)
    assert (kept.job.id, kept.job.attempts, kept.job.last_error) == ("r1", 2, "ConnectionError: down")
    assert (kept.job.enqueued_at, kept.job.leased_at) == (T0, T0 + 11.0)  # enqueued, last claimed
    assert len(queue) == 0  # no longer in the queue


def test_the_acks_prune_what_is_older_than_retain_s_in_small_batches(make_queue: MakeQueue) -> None:
    queue = make_queue(30)
    assert isinstance(queue, KeepsFinished)
    clock = clock_of(queue)
    count = rules.PRUNE_BATCH + 50
    queue.enqueue_many(
        SEND_RECEIPT, [receipt(n) for n in range(count)], ids=[f"old-{n}" for n in range(count)]
    )
    run_all(queue)  # all finished at T0 (this ack's prune found nothing to delete)
    assert len(queue.finished(1_000)) == count

    clock.advance(31.0)  # T0 + 31: the old ones are past retain_s
    queue.enqueue(SEND_RECEIPT, receipt(1), id="new-1")
    run_all(queue)  # prunes one batch
    kept = queue.finished(1_000)
    assert len(kept) == count - rules.PRUNE_BATCH + 1
    assert kept[0].job.id == "new-1"  # the latest first

    clock.advance(rules.PRUNE_EVERY_S / 2)  # too soon for another prune
    queue.enqueue(SEND_RECEIPT, receipt(2), id="new-2")
    run_all(queue)
    assert len(queue.finished(1_000)) == count - rules.PRUNE_BATCH + 2

    clock.advance(rules.PRUNE_EVERY_S / 2)  # the next prune takes the rest of the old ones
    queue.enqueue(SEND_RECEIPT, receipt(3), id="new-3")
    run_all(queue)
    assert [entry.job.id for entry in queue.finished(1_000)] == ["new-3", "new-2", "new-1"]
    assert [entry.job.id for entry in queue.finished(2)] == ["new-3", "new-2"]


@pytest.mark.parametrize("bad", [-1, float("inf"), float("nan"), True, "60"])
def test_a_bad_retain_s_is_refused_by_name(make_queue: MakeQueue, bad: object) -> None:
    with pytest.raises(InvalidSettingError, match=r"retain_s must be a finite number of seconds >= 0"):
        make_queue(bad)  # type: ignore[arg-type]
