"""The dashboard's snapshot (jobqueue.overview) and the reads behind it, on every backend."""

from collections.abc import Iterator

import pytest
from backends_support import BACKENDS, clock_of, queue_at

from jobqueue import Backoff, ManualClock, RetryPolicy
from jobqueue.backends.contract import Queue, ShowsOverview
from jobqueue.census import TypeCounts, tally
from jobqueue.errors import InvalidSettingError
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.metrics import OutcomeSums
from jobqueue.overview import bin_outcomes, snapshot

T0 = 1_000.0
POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=60.0, cap_s=600.0))


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    yield from queue_at(request, T0, POLICY)


def receipts(*order_ids: int) -> list[ReceiptPayload]:
    return [ReceiptPayload(order_id=order_id, email="ada@example.com") for order_id in order_ids]


def busy_shop(queue: Queue) -> None:
    """4 receipts at T0: one done, one failed (retry in 60 s), one dead, one leased; 2 reports at T0 + 1."""
    clock = clock_of(queue)
    queue.enqueue_many(SEND_RECEIPT, receipts(1, 2, 3, 4), ids=["r1", "r2", "r3", "r4"])
    clock.advance(1.0)
    queue.enqueue_many(
        BUILD_REPORT, [ReportPayload(report_id=i, work_s=1.0) for i in (1, 2)], ids=["p1", "p2"]
    )
    leases = [queue.claim() for _ in range(4)]
    assert [lease.job.id for lease in leases if lease] == ["r1", "r2", "r3", "r4"]
    first, second, third, _ = leases
    assert first and second and third
    queue.ack(first)
    assert queue.fail(second, "ConnectionError: mail server down").outcome == "retry"
    assert queue.fail(third, "ValueError: no such order", permanent=True).outcome == "dead"


def test_every_backend_has_the_overview_reads(queue: Queue) -> None:
    assert isinstance(queue, ShowsOverview)


def test_census_counts_each_job_type_in_each_state(queue: Queue) -> None:
    busy_shop(queue)
    clock_of(queue).advance(5.0)
    assert isinstance(queue, ShowsOverview)
    census = queue.census()
    assert census.by_type == (
        TypeCounts(job_type="build_report", waiting=2),
        TypeCounts(job_type="send_receipt", scheduled=1, leased=1, dead=1),
    )
    assert census.estimated == frozenset()
    assert census.oldest_waiting_age_s == pytest.approx(5.0)  # the reports, claimable since T0 + 1
    assert census.oldest_enqueued_age_s == pytest.approx(6.0)  # r2, in backoff, enqueued at T0
    assert census.total("waiting") == 2 and census.total("dead") == 1


def test_the_census_ages_take_the_oldest_and_leave_out_leased_jobs(queue: Queue) -> None:
    assert isinstance(queue, ShowsOverview)
    clock = clock_of(queue)
    queue.enqueue(SEND_RECEIPT, receipts(1)[0], id="early")
    assert queue.claim() is not None  # leased: neither waiting nor counted since its enqueue
    clock.advance(10.0)
    queue.enqueue(SEND_RECEIPT, receipts(2)[0], id="late")
    clock.advance(3.0)
    queue.enqueue(SEND_RECEIPT, receipts(3)[0], id="later")
    clock.advance(1.0)
    census = queue.census()
    assert (census.oldest_waiting_age_s, census.oldest_enqueued_age_s) == (4.0, 4.0)  # "late"
    lease = queue.claim()
    assert lease is not None and lease.job.id == "late"
    assert queue.fail(lease, "ConnectionError: down").outcome == "retry"  # in backoff: scheduled
    census = queue.census()
    assert (census.oldest_waiting_age_s, census.oldest_enqueued_age_s) == (1.0, 4.0)  # "later"; "late"
    queue.claim()  # "later" leased; "late" alone not leased, in backoff: not waiting, counted since enqueue
    census = queue.census()
    assert (census.oldest_waiting_age_s, census.oldest_enqueued_age_s) == (0.0, 4.0)


def test_a_lease_that_ran_out_counts_as_waiting_again(queue: Queue) -> None:
    queue.enqueue(SEND_RECEIPT, receipts(7)[0], id="r7")
    assert queue.claim() is not None
    clock_of(queue).advance(queue.visibility_timeout_s + 2.0)
    assert isinstance(queue, ShowsOverview)
    census = queue.census()
    assert census.by_type == (TypeCounts(job_type="send_receipt", waiting=1),)
    assert census.oldest_waiting_age_s == pytest.approx(2.0)
    assert queue.leased_jobs(5) == []


def test_snapshot_lists_running_jobs_dead_letters_and_bins_the_outcomes(queue: Queue) -> None:
    busy_shop(queue)
    clock_of(queue).advance(5.0)
    taken = snapshot(queue, where="shop.db", chart_s=60.0, bin_s=10.0)
    assert taken.at == T0 + 6.0
    assert [(job.id, job.leased_until) for job in taken.running] == [
        ("r4", T0 + 1.0 + queue.visibility_timeout_s)
    ]
    assert [(letter.job.id, letter.job.last_error) for letter in taken.dead_letters] == [
        ("r3", "ValueError: no such order")
    ]
    assert len(taken.rates) == 6
    assert taken.rates[-1].start + 10.0 == T0 + 7.0  # the last bin holds the current second
    assert (taken.done, taken.failed) == (1, 2)
    assert taken.failure_rate == pytest.approx(2 / 3)
    assert taken.summary() == (
        "2 waiting, 1 scheduled, 1 leased, 1 dead, 0 cancelled; 1 done and 67% failed in the last 60 s;"
        " oldest waiting 5.0 s, 6.0 s since enqueue"  # the receipt in backoff: enqueued at T0
    )
    data = taken.to_json()
    assert data["oldest_enqueued_age_s"] == pytest.approx(6.0)
    assert data["totals"] == {"waiting": 2, "scheduled": 1, "leased": 1, "dead": 1, "cancelled": 0}
    assert data["by_type"][1] == {
        "job_type": "send_receipt",
        "waiting": 0,
        "scheduled": 1,
        "leased": 1,
        "dead": 1,
        "cancelled": 0,
        "done": 1,
        "failed": 2,
    }
    assert data["dead_letters"][0]["last_error"] == "ValueError: no such order"


def test_running_jobs_and_dead_letters_are_limited_and_ordered(queue: Queue) -> None:
    clock = clock_of(queue)
    for order_id in range(1, 5):
        queue.enqueue(SEND_RECEIPT, receipts(order_id)[0], id=f"r{order_id}")
    for _ in range(4):
        lease = queue.claim()
        assert lease is not None
        queue.fail(lease, "boom", permanent=True)
        clock.advance(1.0)
    for order_id in range(5, 8):
        queue.enqueue(SEND_RECEIPT, receipts(order_id)[0], id=f"r{order_id}")
    queue.claim()
    clock.advance(1.0)
    queue.claim()
    assert isinstance(queue, ShowsOverview)
    assert [letter.job.id for letter in queue.newest_dead_letters(3)] == ["r4", "r3", "r2"]
    assert [job.id for job in queue.leased_jobs(1)] == ["r5"]  # its lease ends first
    assert [job.id for job in queue.leased_jobs(10)] == ["r5", "r6"]


def test_outcome_sums_add_up_a_span_by_second_and_by_key(queue: Queue) -> None:
    clock = clock_of(queue)
    queue.enqueue_many(SEND_RECEIPT, receipts(1, 2, 3), ids=["a", "b", "c"])
    first = queue.claim()
    assert first is not None
    queue.ack(first)
    clock.advance(2.0)
    second = queue.claim()
    assert second is not None
    queue.fail(second, "boom")
    assert isinstance(queue, ShowsOverview)
    queue.enqueue(BUILD_REPORT, ReportPayload(report_id=1, work_s=1.0), id="p", queue="reports")
    third = queue.claim(queues=["reports"])
    assert third is not None and third.job.id == "p"
    queue.ack(third)
    t = int(T0)
    sums = queue.outcome_sums(t, t + 2)
    assert sums.per_second == [(t, 1, 0), (t + 2, 1, 1)]  # two keys in one second, added up
    assert sums.per_key == [("build_report", "reports", 1, 0), ("send_receipt", "default", 1, 1)]
    later = queue.outcome_sums(t + 1, t + 2)  # both ends in: the first second left out
    assert later.per_second == [(t + 2, 1, 1)]
    assert later.per_key == [("build_report", "reports", 1, 0), ("send_receipt", "default", 0, 1)]
    assert queue.outcome_sums(t, t + 1).per_key == [("send_receipt", "default", 1, 0)]  # until
    assert queue.outcome_sums(t + 3, t + 9) == OutcomeSums(per_second=[], per_key=[])


def test_snapshot_refuses_a_queue_without_the_overview_reads_and_bad_numbers(queue: Queue) -> None:
    class Bare:
        pass

    with pytest.raises(InvalidSettingError, match="a Bare cannot show an overview"):
        snapshot(Bare(), where="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="bin_s"):
        snapshot(queue, where="x", chart_s=5.0, bin_s=10.0)
    with pytest.raises(InvalidSettingError, match="shown"):
        snapshot(queue, where="x", shown=0)


def test_postgres_estimates_a_state_past_exact_up_to_and_counts_the_others_exactly(pg_conninfo: str) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0), retry=POLICY) as queue:
        queue.enqueue_many(SEND_RECEIPT, receipts(*range(1, 6)))
        lease = queue.claim()
        assert lease is not None
        queue.fail(lease, "boom", permanent=True)
        census = queue.census(exact_up_to=2)
        exact = queue.census()
    # 4 waiting is past 2: estimated from a sample, which on a table this small is all of it.
    assert census.estimated == frozenset({"waiting"})
    assert census.by_type == (TypeCounts(job_type="send_receipt", waiting=4, dead=1),)
    assert census.oldest_enqueued_age_s is None  # it would read every job: not shown
    assert exact.oldest_enqueued_age_s == 0.0  # exact counts: read (all enqueued at T0, now)


def test_postgres_estimates_the_ranges_past_exact_up_to_and_keeps_no_row_of_their_bounded_count(
    pg_conninfo: str,
) -> None:
    from jobqueue.backends.postgres import PostgresQueue
    from jobqueue.census import QueueCounts

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0), retry=POLICY) as queue:
        queue.enqueue_many(SEND_RECEIPT, receipts(*range(1, 11)))
        for lease in queue.claim_many(2):
            queue.fail(lease, "boom", permanent=True)
        queue.claim_many(3)  # leased
        census = queue.census(exact_up_to=2)
    # past 2, estimated from a sample (on a table this small all of it); the 2 dead counted exactly
    assert census.estimated == frozenset({"waiting", "scheduled", "leased"})
    assert census.by_type == (TypeCounts(job_type="send_receipt", waiting=5, leased=3, dead=2),)
    assert census.by_queue == (QueueCounts(queue="default", waiting=5, leased=3, dead=2),)


def test_tally_adds_rows_and_rounds_estimates() -> None:
    rows = [("waiting", "b", 2), ("dead", "a", 1), ("waiting", "b", 1.6)]
    assert tally(rows) == (TypeCounts(job_type="a", dead=1), TypeCounts(job_type="b", waiting=4))
    with pytest.raises(ValueError, match="unknown job state 'done'"):
        tally([("done", "a", 1)])


def test_bin_outcomes_adds_seconds_into_bins_and_leaves_out_the_rest() -> None:
    rates = bin_outcomes(
        [(99, 5, 5), (100, 1, 0), (109, 2, 1), (125, 3, 3), (130, 9, 9)], start=100, bin_s=10, bins=3
    )
    assert [(rate.start, rate.done, rate.failed) for rate in rates] == [(100, 3, 1), (110, 0, 0), (120, 3, 3)]
    assert rates[0].per_s == 0.3 and rates[0].failure_rate == 0.25 and rates[1].failure_rate == 0.0


def test_postgres_overview_reads_use_indexes_without_forcing_them(pg_conninfo: str) -> None:
    import psycopg

    from jobqueue.backends.postgres import SQL, PostgresQueue

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0), retry=POLICY) as queue:
        queue.enqueue_many(SEND_RECEIPT, receipts(*range(20_000)))
        queue.claim_many(3)
    reads = {
        "census_bounded": {"now": T0, "bound": 101},
        "leased_jobs": {"now": T0, "limit": 20},
        "oldest_waiting": {"now": T0},
        "newest_dead_letters": {"limit": 20},
    }
    # A plain connection (enable_seqscan on, as behind a transaction pooler), statistics fresh.
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("ANALYZE jobqueue_jobs")
        for name, params in reads.items():
            plan = "\n".join(row[0] for row in con.execute(f"EXPLAIN {SQL[name]}", params).fetchall())
            assert "Seq Scan" not in plan, f"{name} reads every job:\n{plan}"
