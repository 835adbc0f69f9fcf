"""The queue's decisions (jobqueue.backends.rules), each checked on a record and a time, no storage."""

from dataclasses import replace

import duckdb
import pytest

from jobqueue import (
    Backoff,
    CircuitOpenError,
    InvalidSettingError,
    Job,
    JobType,
    PayloadError,
    PermanentJobError,
    RetryAfterError,
    RetryPolicy,
    UnknownJobTypeError,
)
from jobqueue.backends import rules
from jobqueue.errors import MAX_RETRY_AFTER_S
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

POLICY = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=2, cap_s=60))


def leased(attempts: int, *, expires_after_s: float | None = None) -> Job:
    """A job of three attempts at most, enqueued at t=0, on its attempt number ``attempts``."""
    kind = (
        SEND_RECEIPT
        if expires_after_s is None
        else JobType("send_receipt", ReceiptPayload, expires_after_s=expires_after_s)
    )
    job = kind.new_job(
        id="r-1",
        payload=kind.dump(ReceiptPayload(order_id=1, email="a@example.com")),
        retry=POLICY,
        now=0.0,
        priority=None,
    )
    return replace(job, attempts=attempts, leased_until=40.0, leased_at=10.0)


def no_jitter() -> float:
    return 1.0


def test_a_failure_with_attempts_left_is_retried_after_the_backoff() -> None:
    failed = rules.fail(leased(2), ConnectionError("down"), permanent=False, now=10.0, random=no_jitter)
    assert (failed.outcome, failed.run_at, failed.error) == (
        "retry",
        14.0,
        "ConnectionError: down",
    )  # 2, 4, 8 s


def test_the_last_attempt_or_a_permanent_error_is_a_dead_letter_with_no_next_run() -> None:
    last = rules.fail(leased(3), "boom", permanent=False, now=10.0, random=no_jitter)
    assert (last.outcome, last.run_at, last.error) == ("dead", None, "boom")
    first = rules.fail(
        leased(1), PermanentJobError("bad address"), permanent=True, now=10.0, random=no_jitter
    )
    assert (first.outcome, first.run_at, first.error) == ("dead", None, "PermanentJobError: bad address")


def test_retry_after_replaces_the_backoff_and_is_capped() -> None:
    soon = rules.fail(leased(1), RetryAfterError(0.5), permanent=False, now=10.0, random=no_jitter)
    assert soon.run_at == 10.5  # shorter than the backoff's 2 s: the dependency knows best
    far = rules.fail(
        leased(1), RetryAfterError(10 * MAX_RETRY_AFTER_S), permanent=False, now=0.0, random=no_jitter
    )
    assert far.run_at == MAX_RETRY_AFTER_S


def test_a_failure_needs_an_error_and_a_sane_random() -> None:
    with pytest.raises(InvalidSettingError, match="None"):
        rules.fail(leased(1), None, permanent=False, now=0.0, random=no_jitter)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match=r"1\.5"):
        rules.fail(leased(1), "boom", permanent=False, now=0.0, random=lambda: 1.5)


def test_a_release_gives_the_attempt_back_and_sets_the_next_run() -> None:
    given_back = rules.release(leased(2), now=20.0, delay_s=5)
    assert (given_back.attempts, given_back.run_at, given_back.leased_until, given_back.leased_at) == (
        1,
        25.0,
        None,
        None,
    )
    with pytest.raises(InvalidSettingError, match="-1"):
        rules.release(leased(2), now=20.0, delay_s=-1)


def test_a_replay_starts_afresh_with_a_new_deadline_and_keeps_the_reason() -> None:
    dead = replace(leased(3, expires_after_s=60), leased_until=None, leased_at=None, last_error="boom")
    job = rules.replay(dead, now=500.0)
    assert (job.attempts, job.run_at, job.expires_at, job.last_error) == (0, 500.0, 560.0, "boom")
    assert rules.replay(replace(leased(3), leased_until=None), now=500.0).expires_at is None


def test_a_claim_refuses_a_spent_job_then_an_expired_one() -> None:
    assert rules.refusal(leased(2), now=100.0) is None
    assert (
        rules.refusal(leased(3), now=100.0)
        == "LeaseExpired: final attempt 3 was neither acked nor failed in time"
    )
    late = leased(0, expires_after_s=30)
    assert rules.refusal(late, now=30.0) is None  # at the deadline it may still run
    assert rules.refusal(late, now=30.2) == "expired: still waiting 1 s past its deadline"
    assert rules.refusal(replace(late, attempts=3), now=90.0) == rules.lease_lost_reason(
        3
    )  # spent comes first


def test_the_sql_twins_write_the_same_reasons() -> None:
    con = duckdb.connect()
    [(lost, late)] = con.execute(
        f"SELECT {rules.lease_lost_reason_sql()}, {rules.expiry_reason_sql('$now')}"
        " FROM (SELECT 3 AS attempts, 30.0::DOUBLE AS expires_at)",
        {"now": 89.5},
    ).fetchall()
    job = replace(leased(0, expires_after_s=30), attempts=3)
    assert (lost, late) == (rules.lease_lost_reason(3), rules.expiry_reason(job, 89.5))


def test_which_errors_rule_out_a_retry() -> None:
    assert rules.is_permanent(PermanentJobError("no"))
    assert rules.is_permanent(PayloadError("bad"))
    assert not rules.is_permanent(UnknownJobTypeError("who"))  # another version's job: given back
    assert not rules.is_permanent(RetryAfterError(5))
    assert not rules.is_permanent(ValueError("a proxy's HTML page"))


def test_a_job_with_no_handler_or_an_open_breaker_is_given_back_for_its_wait() -> None:
    unknown = UnknownJobTypeError("no handler registered for job type 'send_sms'")
    breaker = CircuitOpenError("mail", retry_at_s=130.0)
    assert rules.is_given_back(unknown) and rules.is_given_back(breaker)
    assert not rules.is_given_back(PermanentJobError("no"))
    assert not rules.is_given_back(RuntimeError("boom"))
    assert rules.given_back_s(unknown, 100.0) == rules.UNKNOWN_TYPE_DELAY_S
    assert rules.given_back_s(breaker, 100.0) == 30.0


def test_a_deferral_waits_for_the_breakers_trial() -> None:
    error = CircuitOpenError("mail", retry_at_s=130.0)
    assert rules.deferral_s(error, 100.0) == 30.0


def test_finished_jobs_are_pruned_once_every_prune_every_s_those_kept_retain_s() -> None:
    assert rules.prune_due(5.0, None)  # never pruned: prune now
    assert not rules.prune_due(5.0 + rules.PRUNE_EVERY_S - 0.5, 5.0)
    assert rules.prune_due(5.0 + rules.PRUNE_EVERY_S, 5.0)
    assert rules.prune_before(100.0, 60.0) == 40.0  # finished before 40 s: kept 60 s already
    assert rules.prune_before(100.0, 0.0) == 100.0  # nothing kept


def test_a_replay_enqueues_the_job_anew_and_a_release_keeps_its_enqueue_time() -> None:
    job = SEND_RECEIPT.new_job(
        id="r1", payload='{"order_id": 1, "email": "a@example.com"}', retry=RetryPolicy(), now=10.0
    )
    assert job.enqueued_at == 10.0
    assert rules.release(replace(job, attempts=1), now=50.0, delay_s=5.0).enqueued_at == 10.0
    assert rules.replay(job, now=70.0).enqueued_at == 70.0
