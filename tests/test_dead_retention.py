"""Dead letters kept ``dead_retain_s`` (issue 24), and the cancelled jobs kept in the metrics.

- ``rules.prune_dead_before`` and ``rules.is_dead_pruned`` decide which dead letter a prune
  deletes (those that died before ``now - dead_retain_s``; none with ``None``), without a
  database;
- on every backend the acks' prune deletes such dead letters, oldest death first, at most
  ``PRUNE_BATCH`` a prune; a younger one stays, ``None`` keeps them all, and the default is
  ``rules.DEAD_RETAIN_S`` (7 days); a pruned letter frees its id as a discard does (a unique
  window counts from its death); a bad ``dead_retain_s`` is refused by name;
- ``QueueMetrics.cancelled`` counts the cancelled jobs the queue keeps;
- on PostgreSQL the prune reads the dead letters' own index, never the live backlog.

Each queue test runs on the in-memory queue, DuckDB in memory and PostgreSQL, on a manual clock.
"""

import math
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest
from backends_support import BACKENDS, clock_of, open_queue

from jobqueue import Backoff, DurableQueue, InvalidSettingError, JobQueue, ManualClock, RetryPolicy
from jobqueue.backends import rules
from jobqueue.backends.contract import KeepsFinished, Queue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.job import DeadLetter, Job

T0 = 1_000.0
POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=10.0, cap_s=10.0))

MakeQueue = Callable[..., Queue]
"""Opens a queue of the backend under test on a ManualClock at T0, with the options given."""


@pytest.fixture(params=BACKENDS)
def make_queue(request: pytest.FixtureRequest) -> Iterator[MakeQueue]:
    with ExitStack() as stack:

        def make(**options: Any) -> Queue:
            settings: dict[str, Any] = {"clock": ManualClock(T0), "retry": POLICY, "random": lambda: 1.0}
            settings |= options
            return stack.enter_context(open_queue(request.param, request, **settings))

        yield make


def receipt(order_id: int) -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email="ada@example.com")


def bury(queue: Queue, ids: list[str], unique_for_s: float | None = None) -> None:
    """Enqueue jobs ``ids`` and fail each permanently now: dead letters that died now."""
    queue.enqueue_many(
        SEND_RECEIPT, [receipt(n) for n in range(len(ids))], ids=ids, unique_for_s=unique_for_s
    )
    for lease in queue.claim_many(len(ids)):
        assert queue.fail(lease, "PermanentJobError: no such order", permanent=True).outcome == "dead"


def prune(queue: Queue, tick: str) -> None:
    """Ack one new job ``tick`` now: the ack prunes, if a prune is due."""
    queue.enqueue(SEND_RECEIPT, receipt(0), id=tick)
    lease = queue.claim()
    assert lease is not None and lease.job.id == tick
    queue.ack(lease)


def dead_ids(queue: Queue) -> list[str]:
    return [letter.job.id for letter in queue.dead_letters()]


# -- the rule, without a database ---------------------------------------------------------


def test_a_dead_letter_goes_once_it_died_longer_than_dead_retain_s_ago() -> None:
    letter = DeadLetter(job=Job(id="d", type="t", payload="{}"), died_at=T0)
    assert rules.prune_dead_before(T0 + 100, 100.0) == T0
    assert not rules.is_dead_pruned(letter, before=T0)  # kept exactly 100 s: stays
    assert rules.is_dead_pruned(letter, before=rules.prune_dead_before(T0 + 100.5, 100.0))  # 100.5 s: goes
    assert rules.prune_dead_before(T0 + 1e9, None) is None
    assert not rules.is_dead_pruned(letter, before=None)  # None keeps every dead letter
    assert rules.DEAD_RETAIN_S == 7 * 86_400.0  # River's DiscardedJobRetentionPeriod


# -- every backend ------------------------------------------------------------------------


def test_an_old_dead_letter_goes_at_the_next_prune_and_a_younger_one_stays(make_queue: MakeQueue) -> None:
    queue = make_queue(dead_retain_s=100.0)
    assert isinstance(queue, KeepsFinished) and queue.dead_retain_s == 100.0
    clock = clock_of(queue)
    bury(queue, ["old"])  # died at T0
    clock.advance(50.0)
    bury(queue, ["young"])  # died at T0 + 50
    clock.advance(50.0)  # T0 + 100: "old" has been kept 100 s, not more
    prune(queue, "tick-1")
    assert dead_ids(queue) == ["old", "young"]

    clock.advance(rules.PRUNE_EVERY_S)  # T0 + 110: the next prune
    prune(queue, "tick-2")
    assert dead_ids(queue) == ["young"]
    assert queue.metrics().dead_letters == 1
    again = queue.enqueue(SEND_RECEIPT, receipt(7), id="old")  # its id is free, as after a discard
    assert (again.attempts, again.last_error) == (0, None)


def test_the_default_keeps_a_dead_letter_seven_days(make_queue: MakeQueue) -> None:
    queue = make_queue()
    assert isinstance(queue, KeepsFinished) and queue.dead_retain_s == rules.DEAD_RETAIN_S
    clock = clock_of(queue)
    bury(queue, ["d"])
    clock.advance(rules.DEAD_RETAIN_S)
    prune(queue, "tick-1")
    assert dead_ids(queue) == ["d"]
    clock.advance(rules.PRUNE_EVERY_S)
    prune(queue, "tick-2")
    assert dead_ids(queue) == []


def test_none_keeps_dead_letters_until_replayed_or_discarded(make_queue: MakeQueue) -> None:
    queue = make_queue(dead_retain_s=None)
    assert isinstance(queue, KeepsFinished) and queue.dead_retain_s is None
    clock = clock_of(queue)
    bury(queue, ["d"])
    clock.advance(100 * rules.DEAD_RETAIN_S)
    prune(queue, "tick")
    assert dead_ids(queue) == ["d"]


def test_more_than_a_batch_of_old_dead_letters_go_over_several_prunes(make_queue: MakeQueue) -> None:
    queue = make_queue(dead_retain_s=60.0)
    clock = clock_of(queue)
    old = [f"d-{n:03}" for n in range(rules.PRUNE_BATCH + 50)]
    bury(queue, old)  # died at T0, in one batch
    clock.advance(30.0)
    bury(queue, ["a-young"])  # died at T0 + 30: first by id, last by death
    clock.advance(35.0)  # T0 + 65: the old ones are past dead_retain_s, "a-young" is not
    prune(queue, "tick-1")
    assert dead_ids(queue) == [*old[rules.PRUNE_BATCH :], "a-young"]  # one batch, oldest death first

    clock.advance(rules.PRUNE_EVERY_S / 2)  # too soon for another prune
    prune(queue, "tick-2")
    assert len(dead_ids(queue)) == 51

    clock.advance(rules.PRUNE_EVERY_S / 2)  # T0 + 75: the rest of the old ones
    prune(queue, "tick-3")
    assert dead_ids(queue) == ["a-young"]


def test_a_pruned_dead_letter_holds_its_id_for_its_window_from_its_death(make_queue: MakeQueue) -> None:
    queue = make_queue(dead_retain_s=100.0)
    clock = clock_of(queue)
    bury(queue, ["w"], unique_for_s=1_000.0)  # died at T0: its id held until T0 + 1000
    clock.advance(110.0)
    prune(queue, "tick")
    assert dead_ids(queue) == []
    queue.enqueue(SEND_RECEIPT, receipt(9), id="w")  # held: adds nothing
    assert queue.get("w") is None
    clock.advance(891.0)  # T0 + 1001: the window has ended
    queue.enqueue(SEND_RECEIPT, receipt(9), id="w")
    added = queue.get("w")
    assert added is not None and added.attempts == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "60"])
def test_a_bad_dead_retain_s_is_refused_by_name_before_anything_opens(backend: str, bad: object) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    message = r"dead_retain_s must be a finite number of seconds > 0, got " + re.escape(repr(bad))
    with pytest.raises(InvalidSettingError, match=message):
        if backend == "memory":
            JobQueue(clock=ManualClock(T0), dead_retain_s=bad)  # type: ignore[arg-type]
        elif backend == "duckdb":
            DurableQueue(":memory:", dead_retain_s=bad)  # type: ignore[arg-type]
        else:  # refused before it connects: no server listens there
            PostgresQueue("postgresql://127.0.0.1:9/none", dead_retain_s=bad)  # type: ignore[arg-type]


def test_the_metrics_count_the_cancelled_jobs_kept(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.enqueue_many(SEND_RECEIPT, [receipt(1), receipt(2), receipt(3)], ids=["w", "l", "d"])
    assert queue.metrics().cancelled == 0
    assert queue.cancel("w") == "cancelled"
    figures = queue.metrics()
    assert (figures.cancelled, figures.waiting, figures.dead_letters) == (1, 2, 0)

    lease = queue.claim()
    assert lease is not None and lease.job.id == "l"
    assert queue.cancel("l") == "cancelling"
    assert queue.metrics().cancelled == 1  # still leased: not finished yet
    queue.ack(lease)  # finishes it as cancelled
    figures = queue.metrics()
    assert (figures.cancelled, figures.done, figures.waiting) == (2, 0, 1)
    assert str(figures).splitlines()[-1].split() == ["cancelled", "2"]  # what `jobqueue stats` prints


# -- PostgreSQL: the prune reads the dead letters only -----------------------------------


def test_the_postgres_prune_reads_the_dead_letters_index_not_the_backlog(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import SQL, PostgresQueue

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0), retry=POLICY) as queue:
        backlog = [receipt(n) for n in range(5_000)]
        queue.enqueue_many(SEND_RECEIPT, backlog, unique_for_s=60.0)  # live, each id held by its window
        bury(queue, [f"d-{n}" for n in range(20)], unique_for_s=60.0)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("ANALYZE jobqueue_jobs, jobqueue_held")
        params = {"before": T0 + 1, "limit": rules.PRUNE_BATCH}
        plan = "\n".join(row[0] for row in con.execute("EXPLAIN " + SQL["prune_dead"], params))
    assert "using jobqueue_jobs_dead on jobqueue_jobs" in plan, plan
    assert "Seq Scan" not in plan and "Bitmap" not in plan, plan  # no scan of the backlog, nor of its holds
