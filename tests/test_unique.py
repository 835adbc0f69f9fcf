"""Unique windows (issue 24): ``enqueue(..., unique_for_s=...)`` holds an id past its job's finish.

- bad windows (negative, NaN, infinite, not a number) are refused, naming the value, and
  nothing is added;
- without a window an acked job's id is free at once (as before); with one, a repeat adds
  nothing and returns the finished job's id, type and payload until ``unique_for_s`` after
  the ack (not after the enqueue), and the id is free afterwards;
- a dead job's id stays held while it is dead, and for the window after a discard, counted
  from its death; an enqueue without a window is refused a held id too;
- ids whose window ended are pruned by the acks;
- on PostgreSQL, threads on connections of their own that enqueue one id at once, or while
  its job is acked, leave exactly one job.

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, on a manual clock.
"""

import math
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from backends_support import BACKENDS, open_queue

from jobqueue import InvalidSettingError, JobQueue, JobType, ManualClock, RetryPolicy
from jobqueue.backends import rules
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue

T0 = 1_000.0


@dataclass(frozen=True)
class Publish:
    order: int


PUBLISH = JobType("publish", Publish, retry=RetryPolicy(max_attempts=1))


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    with open_queue(
        request.param, request, tmp_path / "q.duckdb", clock=ManualClock(T0), random=lambda: 1.0
    ) as opened:
        yield opened


def advance(queue: Queue, seconds: float) -> None:
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    clock.advance(seconds)


def run_once(queue: Queue) -> str:
    """Claim the one due job and ack it; return its id."""
    lease = queue.claim()
    assert lease is not None
    queue.ack(lease)
    return lease.job.id


def test_a_window_that_is_not_seconds_is_refused_naming_it(queue: Queue) -> None:
    for bad in (-1, -0.5, math.nan, math.inf, -math.inf, True, "60"):
        with pytest.raises(InvalidSettingError, match=r"unique_for_s .*" + re.escape(repr(bad))):
            queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidSettingError, match=r"unique_for_s .*" + re.escape(repr(bad))):
            queue.enqueue_many(PUBLISH, [Publish(1)], unique_for_s=bad)  # type: ignore[arg-type]
    assert len(queue) == 0


def test_without_a_window_the_id_is_free_at_the_ack(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1")
    assert run_once(queue) == "outbox-1"
    again = queue.enqueue(PUBLISH, Publish(2), id="outbox-1")
    assert len(queue) == 1 and again.payload == '{"order":2}'


def test_a_repeat_adds_nothing_until_the_window_after_the_ack_ends(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    advance(queue, 100)  # the window counts from the ack, not from the enqueue
    run_once(queue)
    advance(queue, 59)
    repeat = queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60)
    assert len(queue) == 0
    assert (repeat.id, repeat.type, repeat.payload) == ("outbox-1", "publish", '{"order":1}')
    advance(queue, 1)  # held until ack + 60 s, and free from then on
    fresh = queue.enqueue(PUBLISH, Publish(3), id="outbox-1", unique_for_s=60)
    assert len(queue) == 1 and fresh.payload == '{"order":3}'
    run_once(queue)  # the new job holds the id afresh
    advance(queue, 30)
    assert queue.enqueue(PUBLISH, Publish(4), id="outbox-1").payload == '{"order":3}'
    assert len(queue) == 0


def test_a_live_job_with_a_window_returns_its_own_record(queue: Queue) -> None:
    first = queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    assert queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60) == first
    assert queue.enqueue(PUBLISH, Publish(2), id="outbox-1") == first
    assert len(queue) == 1


def test_a_window_asked_for_an_id_a_job_without_one_holds_changes_nothing(queue: Queue) -> None:
    plain = queue.enqueue(PUBLISH, Publish(1), id="outbox-1")
    assert queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60) == plain
    run_once(queue)  # the job that held the id had no window: free at its ack
    queue.enqueue(PUBLISH, Publish(3), id="outbox-1", unique_for_s=60)
    assert len(queue) == 1


def test_a_duckdb_file_keeps_its_windows_when_reopened(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    with DurableQueue(tmp_path / "q.duckdb", clock=clock) as queue:
        queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    with DurableQueue(tmp_path / "q.duckdb", clock=clock) as queue:  # learns that ids are held
        run_once(queue)
        queue.enqueue(PUBLISH, Publish(2), id="outbox-1")
        assert len(queue) == 0
    with DurableQueue(tmp_path / "q.duckdb", clock=clock) as queue:
        queue.enqueue(PUBLISH, Publish(2), id="outbox-1")
        assert len(queue) == 0


def test_enqueue_many_holds_every_id_and_refuses_the_held_ones(queue: Queue) -> None:
    queue.enqueue_many(PUBLISH, [Publish(1), Publish(2)], ids=["a", "b"], unique_for_s=10)
    run_once(queue)
    run_once(queue)
    again = queue.enqueue_many(
        PUBLISH, [Publish(3), Publish(4), Publish(5)], ids=["a", "c", "b"], unique_for_s=10
    )
    assert [job.payload for job in again] == ['{"order":1}', '{"order":4}', '{"order":2}']
    assert [job.id for job in queue.jobs()] == ["c"]


def test_fresh_ids_with_a_window_are_held_too(queue: Queue) -> None:
    (job,) = queue.enqueue_many(PUBLISH, [Publish(1)], unique_for_s=10)
    run_once(queue)
    queue.enqueue(PUBLISH, Publish(2), id=job.id)
    assert len(queue) == 0


def test_a_dead_job_holds_its_id_and_a_discard_starts_the_window_from_its_death(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, "broken").outcome == "dead"  # at T0
    advance(queue, 50)
    queue.discard("outbox-1")
    queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60)
    assert len(queue) == 0  # held until T0 + 60
    advance(queue, 10)
    queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60)
    assert len(queue) == 1


def test_the_job_record_carries_its_window_through_death_and_replay(queue: Queue) -> None:
    assert queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60).unique_for_s == 60
    assert queue.enqueue(PUBLISH, Publish(2), id="plain").unique_for_s is None
    lease = queue.claim()
    assert lease is not None and lease.job.unique_for_s == 60
    queue.fail(lease, "broken")
    assert [letter.job.unique_for_s for letter in queue.dead_letters()] == [60]
    assert queue.replay("outbox-1").unique_for_s == 60
    assert [job.unique_for_s for job in queue.jobs()] == [None, 60]
    run_once(queue)
    run_once(queue)
    queue.enqueue(PUBLISH, Publish(3), id="outbox-1")
    queue.enqueue(PUBLISH, Publish(3), id="plain")
    assert [job.id for job in queue.jobs()] == ["plain"]


def test_a_window_of_zero_frees_the_id_at_the_ack(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=0)
    run_once(queue)
    queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=0)
    assert len(queue) == 1


def test_the_held_function_adds_the_window_to_the_finish() -> None:
    assert rules.held_until(1_000.0, 60.0) == 1_060.0


def held_rows(queue: Queue) -> int:
    """The rows of ``jobqueue_held`` in a SQL queue."""
    with queue._connection() as con:  # type: ignore[attr-defined]
        count: int = con.execute("SELECT count(*) FROM jobqueue_held").fetchall()[0][0]
    return count


@pytest.mark.parametrize("queue", ["duckdb", "postgres"], indirect=True)
def test_ended_windows_are_pruned_by_the_acks_and_jobs_without_one_write_none(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="plain")
    run_once(queue)
    assert held_rows(queue) == 0  # a job without a window costs no row
    queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=5)
    assert held_rows(queue) == 1
    run_once(queue)
    queue.enqueue(PUBLISH, Publish(3), id="next")
    advance(queue, rules.PRUNE_EVERY_S)
    assert held_rows(queue) == 1
    run_once(queue)  # the next ack, once a prune is due, deletes it
    assert held_rows(queue) == 0


def test_the_memory_queue_prunes_ended_windows(clock: ManualClock) -> None:
    queue = JobQueue(clock=clock)
    queue.enqueue_many(PUBLISH, [Publish(1), Publish(2)], ids=["outbox-1", "plain"], unique_for_s=5)
    run_once(queue)
    clock.advance(rules.PRUNE_EVERY_S)
    run_once(queue)
    assert list(queue._holds) == ["plain"]


def race(pool: ThreadPoolExecutor, parties: list[Callable[[], object]], calls: int = 1) -> None:
    """Run each of ``parties`` ``calls`` times in a thread of ``pool`` of its own, all released at once.

    The pool's threads are kept from race to race, and with them their queue connections.
    """
    start = threading.Barrier(len(parties))

    def run(party: Callable[[], object]) -> None:
        start.wait(timeout=30)
        for _ in range(calls):
            party()

    for future in [pool.submit(run, party) for party in parties]:
        future.result(timeout=60)  # raises what the thread raised


def test_producers_racing_on_postgres_add_one_job(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import Enqueued, PostgresQueue

    added: list[Enqueued] = []
    with PostgresQueue(pg_conninfo, clock=ManualClock(T0)) as queue:  # a connection per thread

        def produce() -> None:
            added.extend(queue.enqueue_batch(PUBLISH, [Publish(1)], ids=["outbox-1"], unique_for_s=60))

        with ThreadPoolExecutor(8) as pool:
            race(pool, [produce] * 8, calls=3)
        assert [entry.added for entry in added].count(True) == 1
        assert len(queue) == 1


def test_producers_racing_with_the_ack_on_postgres_add_nothing(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import Enqueued, PostgresQueue

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0)) as queue, ThreadPoolExecutor(5) as pool:
        for round in range(15):
            job_id = f"outbox-{round}"
            queue.enqueue(PUBLISH, Publish(round), id=job_id, unique_for_s=60)
            lease = queue.claim()
            assert lease is not None and lease.job.id == job_id
            added: list[Enqueued] = []

            def produce(job_id: str = job_id, added: list[Enqueued] = added) -> None:
                added.extend(queue.enqueue_batch(PUBLISH, [Publish(-1)], ids=[job_id], unique_for_s=60))

            race(pool, [lambda lease=lease: queue.ack(lease), produce, produce, produce, produce])
            race(pool, [produce] * 4, calls=2)  # right after the ack
            assert not [entry for entry in added if entry.added], f"round {round}: a repeat was added"
            assert {entry.job.payload for entry in added} == {f'{{"order":{round}}}'}
        assert len(queue) == 0


# -- cancelled jobs (cancel and unique windows, merged) ------------------------------------


def assert_held_for_60_s_then_free(queue: Queue) -> None:
    """The id "outbox-1" is held for 60 s from now, and free after that (not held forever)."""
    advance(queue, 59)
    queue.enqueue(PUBLISH, Publish(2), id="outbox-1", unique_for_s=60)
    assert len(queue) == 0
    advance(queue, 1)
    queue.enqueue(PUBLISH, Publish(3), id="outbox-1", unique_for_s=60)
    assert len(queue) == 1


def test_a_waiting_job_cancelled_holds_its_id_for_the_window_from_the_cancel(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    advance(queue, 100)
    assert queue.cancel("outbox-1") == "cancelled"
    assert_held_for_60_s_then_free(queue)


def test_a_leased_job_cancelled_holds_its_id_for_the_window_from_its_ack(queue: Queue) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    lease = queue.claim()
    assert lease is not None
    assert queue.cancel("outbox-1") == "cancelling"
    advance(queue, 10)
    queue.ack(lease)  # finishes it as cancelled
    assert_held_for_60_s_then_free(queue)


def test_a_cancelled_job_whose_lease_ran_out_holds_its_id_from_the_claim_that_finishes_it(
    queue: Queue,
) -> None:
    queue.enqueue(PUBLISH, Publish(1), id="outbox-1", unique_for_s=60)
    assert queue.claim() is not None  # its worker never comes back
    assert queue.cancel("outbox-1") == "cancelling"
    advance(queue, queue.visibility_timeout_s + 1)
    assert queue.claim() is None  # this claim finishes it as cancelled
    assert_held_for_60_s_then_free(queue)
