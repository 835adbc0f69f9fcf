"""Lesson 11: the numbers to watch on a queue (``JobQueue.metrics``), and the outcome log behind them.

One hand-built scene on a :class:`ManualClock` puts a job in every state (waiting, due
again after an expired lease, waiting out a retry delay, leased, dead) and acks or fails
attempts inside and outside the failure-rate window; every expected figure is worked
out by hand in the comments.
"""

import math
from collections.abc import Callable, Iterator

import pytest

from jobqueue import Backoff, InvalidSettingError, JobQueue, Lease, ManualClock, Queue, RetryPolicy
from jobqueue import metrics as metrics_module
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload
from jobqueue.metrics import DEFAULT_WINDOW_S, RETENTION_S, OutcomeKey, OutcomeLog, QueueMetrics


def receipt(order_id: int) -> ReceiptPayload:
    return ReceiptPayload(order_id=order_id, email="customer@example.com")


def scene(make: Callable[..., Queue] = JobQueue) -> tuple[ManualClock, Queue]:
    """The queue at t=100 s (60 s leases, retry delays 10 s then 20 s, 3 attempts).

    ``make(clock=..., visibility_timeout_s=..., retry=..., random=...)`` builds the queue
    (``tests/test_postgres.py`` builds the same scene on PostgreSQL).
    """
    clock = ManualClock()
    queue = make(
        clock=clock,
        visibility_timeout_s=60,
        retry=RetryPolicy(max_attempts=3, backoff=Backoff(base_s=10, cap_s=40)),
        random=lambda: 1.0,
    )

    def at(t: float) -> None:
        clock.advance(t - clock.now())

    def claim(job_id: str) -> Lease:
        lease = queue.claim()
        assert lease is not None and lease.job.id == job_id
        return lease

    # Before the window (it starts at t=40): one done at 10, one failed at 20, one done at 35.
    queue.enqueue(SEND_RECEIPT, receipt(1), id="early-ok")
    early_ok = claim("early-ok")
    at(10)
    queue.ack(early_ok)
    at(15)
    queue.enqueue(SEND_RECEIPT, receipt(2), id="early-retry")
    first = claim("early-retry")
    at(20)
    assert queue.fail(first, "ConnectionError: down").outcome == "retry"  # due at 30
    at(30)
    second = claim("early-retry")
    queue.enqueue(SEND_RECEIPT, receipt(3), id="expired")
    claim("expired")  # its worker crashes: the lease ends at t=90
    at(35)
    queue.ack(second)
    # Inside the window: three done (70, 80, 97) and two failed (92, 95).
    at(45)
    ids = ["ok-1", "ok-2", "ok-3", "retry", "dead", "leased"]
    queue.enqueue_many(SEND_RECEIPT, [receipt(10 + i) for i in range(len(ids))], ids=ids)
    leases = {lease.job.id: lease for lease in queue.claim_many(len(ids))}  # leased until t=105
    assert list(leases) == ids
    at(50)
    queue.enqueue(SEND_RECEIPT, receipt(4), id="old")
    at(70)
    queue.ack(leases["ok-1"])
    at(80)
    queue.ack(leases["ok-2"])
    at(92)
    assert queue.fail(leases["retry"], "ConnectionError: down").outcome == "retry"  # due at 102
    at(95)
    assert queue.fail(leases["dead"], "PermanentJobError: no", permanent=True).outcome == "dead"
    at(97)
    queue.ack(leases["ok-3"])
    at(99)
    queue.enqueue(SEND_RECEIPT, receipt(5), id="new")
    at(100)
    return clock, queue


def test_a_scene_with_a_job_in_every_state() -> None:
    _, queue = scene()
    metrics = queue.metrics(window_s=60)
    assert metrics == QueueMetrics(
        at=100.0,
        waiting=3,  # old (since 50), expired (its lease ended at 90), new (since 99)
        scheduled=1,  # retry, due at 102
        leased=1,  # leased, until 105
        oldest_waiting_age_s=50.0,  # old: 100 - 50
        oldest_leased_age_s=55.0,  # leased: claimed at 45
        oldest_enqueued_age_s=70.0,  # expired: enqueued at 30 (retry, in backoff: at 45)
        window_s=60,
        done=3,  # 70, 80, 97; not 10 or 35
        failed=2,  # 92, 95; not 20
        dead_letters=1,
    )
    assert metrics.failure_rate == pytest.approx(0.4)


def test_the_table() -> None:
    _, queue = scene()
    assert str(queue.metrics(window_s=60)) == (
        "waiting                  3\n"
        "scheduled (retry delay)  1\n"
        "leased                   1\n"
        "oldest waiting job       50.0 s\n"
        "oldest leased job        55.0 s\n"
        "oldest since enqueue     70.0 s\n"
        "failure rate, last 60 s  40% (2 failed, 3 done)\n"
        "dead letters             1\n"
        "cancelled                0"
    )


@pytest.mark.parametrize(
    ("window_s", "done", "failed"),
    [
        (1, 0, 0),  # buckets 99 and 100: nothing finished then
        (3, 1, 0),  # from 97
        (8, 1, 2),  # from 92
        (64, 3, 2),  # from 36: the ack at 35 is just outside
        (65, 4, 2),  # from 35: whole buckets, so the ack at 35 counts
        (80, 4, 3),  # from 20
        (100, 5, 3),  # from 0: everything
        (DEFAULT_WINDOW_S, 5, 3),
    ],
)
def test_the_failure_rate_counts_only_outcomes_within_the_window(
    window_s: float, done: int, failed: int
) -> None:
    _, queue = scene()
    metrics = queue.metrics(window_s)
    assert (metrics.window_s, metrics.done, metrics.failed) == (window_s, done, failed)
    assert metrics.failure_rate == (failed / (done + failed) if done + failed else 0.0)
    assert (metrics.waiting, metrics.scheduled, metrics.leased, metrics.dead_letters) == (3, 1, 1, 1)


def test_the_figures_move_with_the_clock() -> None:
    clock, queue = scene()
    clock.advance(2)  # t=102: retry is due (waiting since 102), leased is not yet expired
    metrics = queue.metrics(window_s=60)
    assert (metrics.waiting, metrics.scheduled, metrics.leased) == (4, 0, 1)
    assert metrics.oldest_waiting_age_s == 52.0
    clock.advance(3)  # t=105: the lease of "leased" has run out, so it is waiting too
    metrics = queue.metrics(window_s=60)
    assert (metrics.waiting, metrics.scheduled, metrics.leased) == (5, 0, 0)
    clock.advance(60)  # t=165: the window is from 105, after every outcome
    metrics = queue.metrics(window_s=60)
    assert (metrics.done, metrics.failed, metrics.failure_rate) == (0, 0, 0.0)
    assert "0% (0 failed, 0 done)" in str(metrics)


def test_an_empty_queue() -> None:
    clock = ManualClock(7)
    metrics = JobQueue(clock=clock).metrics()
    assert metrics == QueueMetrics(
        at=7.0,
        waiting=0,
        scheduled=0,
        leased=0,
        oldest_waiting_age_s=0.0,
        oldest_leased_age_s=0.0,
        window_s=DEFAULT_WINDOW_S,
        done=0,
        failed=0,
        dead_letters=0,
    )
    assert metrics.failure_rate == 0.0
    assert str(metrics).splitlines()[3:7] == [
        "oldest waiting job        0.0 s",
        "oldest leased job         0.0 s",
        "oldest since enqueue      0.0 s",
        "failure rate, last 300 s  0% (0 failed, 0 done)",
    ]


@pytest.mark.parametrize(
    ("window_s", "message"),
    [
        (0, "window_s must be a finite number of seconds > 0, got 0"),
        (-5, "window_s must be a finite number of seconds > 0, got -5"),
        (math.nan, "window_s must be a finite number of seconds > 0, got nan"),
        (math.inf, "window_s must be a finite number of seconds > 0, got inf"),
        (86_401, "window_s must be at most 86400 s (the outcomes kept), got 86401"),
    ],
)
def test_a_bad_window_is_refused_naming_it(window_s: float, message: str) -> None:
    with pytest.raises(InvalidSettingError) as refused:
        JobQueue(clock=ManualClock()).metrics(window_s)
    assert str(refused.value) == message


def test_a_whole_day_is_the_longest_window() -> None:
    assert RETENTION_S == 86_400
    assert JobQueue(clock=ManualClock()).metrics(RETENTION_S).window_s == RETENTION_S


# -- the outcome log --------------------------------------------------------------------------

KEY: OutcomeKey = ("send_receipt", "default")


def test_the_outcome_log_counts_per_second_and_reads_whole_buckets() -> None:
    log = OutcomeLog()
    log.record(9.9, KEY, failed=False)
    log.record(10.0, KEY, failed=True)
    log.record(10.7, KEY, failed=False, count=3)
    log.record(12.5, KEY, failed=True, count=2)
    assert log.counts(12.5, 2) == (3, 3)  # from bucket 10
    assert log.counts(12.5, 2.6) == (4, 3)  # from bucket 9
    assert log.counts(11.9, 1) == (3, 1)  # buckets 10 and 11 only: 12 is after now
    assert log.rows() == [(9, *KEY, 1, 0), (10, *KEY, 3, 1), (12, *KEY, 0, 2)]
    other: OutcomeKey = ("build_report", "reports")
    log.record(10.2, other, failed=False)
    sums = log.sums(10, 11)  # both ends in
    assert sums.per_second == [(10, 4, 1)]
    assert sums.per_key == [(*other, 1, 0), (*KEY, 3, 1)]
    log.clear()
    assert (log.rows(), log.counts(12.5, 10)) == ([], (0, 0))


def test_a_days_worth_of_buckets_at_most_whatever_the_run_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "RETENTION_S", 100.0)
    log = OutcomeLog()
    for second in range(350):
        log.record(second + 0.5, KEY, failed=second % 4 == 0)
        log.record(second + 0.5, KEY, failed=False)
    # Buckets 249..349, the window of the whole "day": 101 done, 76 more done and 25 failed.
    assert log.counts(349.5, 100) == (177, 25)
    rows = log.rows()
    assert len(rows) == 101  # a window of 100 s reads 101 one-second buckets
    assert (rows[0][0], rows[-1][0]) == (249, 349)


def test_a_full_log_does_not_rescan_its_buckets_on_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "RETENTION_S", 100.0)

    class Buckets(dict[int, dict[OutcomeKey, list[int]]]):
        scans = 0

        def __iter__(self) -> Iterator[int]:
            Buckets.scans += 1
            return super().__iter__()

    log = OutcomeLog()
    log._buckets = Buckets()
    for second in range(200):
        log.record(second, KEY, failed=False)
    Buckets.scans = 0
    for _ in range(50):  # a busy second: each ack of it must stay O(1)
        log.record(200.5, KEY, failed=False)
    assert Buckets.scans <= 1
    assert log.counts(200.5, 100) == (150, 0)


def test_the_real_retention_keeps_a_day_of_buckets() -> None:
    log = OutcomeLog()
    day = int(RETENTION_S)
    for second in range(day + 3):  # each second past a day scans the day's buckets once
        log.record(second, KEY, failed=False)
    assert log.counts(day + 2, RETENTION_S) == (day + 1, 0)
    rows = log.rows()
    assert len(rows) == day + 1
    assert (rows[0][0], rows[-1][0]) == (2, day + 2)
