import asyncio
from typing import Any

import pytest

from jobqueue import (
    Backoff,
    InvalidSettingError,
    JobEvent,
    JobQueue,
    JobType,
    ManualClock,
    PermanentJobError,
    RetryPolicy,
    UnknownJobTypeError,
    Worker,
)
from jobqueue.backends import rules
from jobqueue.examples import shop
from jobqueue.examples.shop import RENDER_INVOICE, SEND_RECEIPT, InvoicePayload, ReceiptPayload

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def make_queue(clock: ManualClock, **kwargs: Any) -> JobQueue:
    kwargs.setdefault("random", lambda: 1.0)
    return JobQueue(clock=clock, **kwargs)


class Recorder:
    """A handler that records its payloads and fails the first ``failures`` calls."""

    def __init__(self, failures: int = 0, error: Exception | None = None) -> None:
        self.payloads: list[object] = []
        self.failures = failures
        self.error = error if error is not None else RuntimeError("boom")

    async def __call__(self, payload: Any) -> None:
        self.payloads.append(payload)
        if len(self.payloads) <= self.failures:
            raise self.error


def run_all(worker: Worker, clock: ManualClock, *, seconds: int, step_s: float = 1) -> list[str]:
    """Drain every due job, advance the clock ``step_s``, repeat ``seconds / step_s`` times."""

    async def loop() -> list[JobEvent]:
        events: list[JobEvent] = []
        for _ in range(int(seconds / step_s)):
            events += await worker.drain()
            clock.advance(step_s)
        return events

    return [str(event) for event in asyncio.run(loop())]


# -- registering handlers -------------------------------------------------------------------


def test_handler_for_returns_what_was_registered() -> None:
    worker = Worker(make_queue(ManualClock()))
    handler = Recorder()
    worker.register(SEND_RECEIPT, handler)
    assert worker.handler_for("send_receipt") == (SEND_RECEIPT, handler)


def test_handler_for_an_unknown_type_raises_naming_it() -> None:
    worker = Worker(make_queue(ManualClock()))
    worker.register(SEND_RECEIPT, Recorder())
    with pytest.raises(UnknownJobTypeError) as info:
        worker.handler_for("render_invoce")
    assert "'render_invoce'" in str(info.value)
    assert "send_receipt" in str(info.value)  # and says what is registered
    with pytest.raises(LookupError):
        Worker(make_queue(ManualClock())).handler_for("anything")


def test_registering_a_type_twice_is_refused_and_keeps_the_first_handler() -> None:
    worker = Worker(make_queue(ManualClock()))
    first = Recorder()
    worker.register(SEND_RECEIPT, first)
    with pytest.raises(InvalidSettingError, match="'send_receipt'"):
        worker.register(SEND_RECEIPT, Recorder())
    assert worker.handler_for("send_receipt")[1] is first


# -- running jobs -------------------------------------------------------------------------


def test_run_one_with_nothing_due_returns_none() -> None:
    worker = Worker(make_queue(ManualClock()))
    assert asyncio.run(worker.run_one()) is None
    assert worker.events == []


def test_a_successful_job_is_acked_and_its_handler_gets_the_payload() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    seen: list[JobEvent] = []
    worker = Worker(queue, on_event=seen.append)
    handler = Recorder()
    worker.register(SEND_RECEIPT, handler)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")

    event = asyncio.run(worker.run_one())
    assert event == JobEvent(
        at=0.0, job_id="receipt-1001", job_type="send_receipt", attempt=1, outcome="done"
    )
    assert str(event) == "t=0s receipt-1001 attempt 1: done"
    assert handler.payloads == [RECEIPT]
    assert len(queue) == 0
    assert queue.dead_letters() == []
    assert worker.events == seen == [event]


def test_a_transient_error_is_retried_after_the_backoff_delay() -> None:
    clock = ManualClock(10)
    queue = make_queue(clock, random=lambda: 0.5, retry=RetryPolicy(backoff=Backoff(base_s=2, cap_s=60)))
    worker = Worker(queue)
    handler = Recorder(failures=2, error=ConnectionError("mail provider unreachable"))
    worker.register(SEND_RECEIPT, handler)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")

    event = asyncio.run(worker.run_one())
    assert event is not None
    # attempt 1: ceiling 2 s, delay 1 + 0.5 * 1 = 1.5 s
    assert (event.outcome, event.attempt, event.retry_at) == ("retry", 1, 11.5)
    assert event.error == "ConnectionError: mail provider unreachable"
    job = queue.get("receipt-1001")
    assert job is not None
    assert (job.run_at, job.attempts, job.leased_until) == (11.5, 1, None)
    assert job.last_error == "ConnectionError: mail provider unreachable"
    assert str(event) == (
        "t=10s receipt-1001 attempt 1: failed, retry at t=11.5s (ConnectionError: mail provider unreachable)"
    )

    assert asyncio.run(worker.drain()) == []  # not due before t=11.5
    clock.advance(1.5)
    second = asyncio.run(worker.run_one())
    assert second is not None
    # attempt 2: ceiling 4 s, delay 2 + 0.5 * 2 = 3 s
    assert (second.outcome, second.attempt, second.retry_at) == ("retry", 2, 14.5)
    clock.advance(3)
    third = asyncio.run(worker.run_one())
    assert third is not None
    assert (third.outcome, third.attempt) == ("done", 3)
    assert handler.payloads == [RECEIPT] * 3


def test_a_permanent_error_is_dead_after_one_attempt() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    worker = Worker(queue)
    handler = Recorder(failures=1, error=PermanentJobError("order 1001 not found"))
    worker.register(SEND_RECEIPT, handler)
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")

    event = asyncio.run(worker.run_one())
    assert event is not None
    assert (event.outcome, event.attempt, event.retry_at) == ("dead", 1, None)
    assert str(event) == "t=0s receipt-1001 attempt 1: dead (PermanentJobError: order 1001 not found)"
    [dead] = queue.dead_letters()
    assert dead.job.attempts == 1
    assert dead.job.max_attempts == 5
    assert dead.job.last_error == "PermanentJobError: order 1001 not found"
    clock.advance(3600)
    assert asyncio.run(worker.drain()) == []
    assert len(handler.payloads) == 1


def test_a_transient_error_on_the_last_attempt_is_dead() -> None:
    clock = ManualClock()
    queue = make_queue(clock, retry=RetryPolicy(max_attempts=2))
    worker = Worker(queue)
    worker.register(SEND_RECEIPT, Recorder(failures=99))
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    assert run_all(worker, clock, seconds=5) == [
        "t=0s receipt-1001 attempt 1: failed, retry at t=1s (RuntimeError: boom)",
        "t=1s receipt-1001 attempt 2: dead (RuntimeError: boom)",
    ]
    assert [dead.job.attempts for dead in queue.dead_letters()] == [2]


def test_a_worker_claims_only_the_job_types_it_has_handlers_for() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    worker = Worker(queue)
    assert worker.job_types == frozenset()
    handler = Recorder()
    worker.register(SEND_RECEIPT, handler)
    assert worker.job_types == {"send_receipt"}
    stray = JobType("send_sms", ReceiptPayload)  # a type only a newer version handles
    queue.enqueue(stray, RECEIPT, id="sms-1001")
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")

    events = asyncio.run(worker.drain())
    assert [(e.job_id, e.outcome, e.attempt) for e in events] == [("receipt-1001", "done", 1)]
    sms = queue.get("sms-1001")
    assert sms is not None and sms.attempts == 0 and sms.leased_until is None  # untouched
    assert queue.dead_letters() == []
    assert handler.payloads == [RECEIPT]


def test_an_unknown_job_type_claimed_anyway_is_given_back_not_dead_lettered() -> None:
    clock = ManualClock(100.0)
    queue = make_queue(clock)
    worker = Worker(queue)
    worker.register(SEND_RECEIPT, Recorder())
    stray = JobType("send_sms", ReceiptPayload)
    queue.enqueue(stray, RECEIPT, id="sms-1001")
    lease = queue.claim()  # a claim without the worker's filter
    assert lease is not None

    async def run() -> list[JobEvent]:
        return worker.settle([await worker.execute(lease)])

    [event] = asyncio.run(run())
    assert (event.outcome, event.attempt, event.retry_at) == (
        "deferred",
        1,
        100.0 + rules.UNKNOWN_TYPE_DELAY_S,
    )
    assert event.error is not None and event.error.startswith("UnknownJobTypeError")
    assert "'send_sms'" in event.error
    assert queue.dead_letters() == []
    sms = queue.get("sms-1001")
    assert sms is not None and sms.attempts == 0  # the attempt was not counted
    assert queue.claim() is None  # it waits before anyone takes it again
    clock.advance(rules.UNKNOWN_TYPE_DELAY_S)
    assert queue.claim() is not None


def test_a_stored_payload_that_does_not_validate_is_dead_lettered_without_running_the_handler() -> None:
    # Two job types share the name "send_receipt": the producer's stores an invoice payload,
    # the worker's expects a receipt payload (an e-mail field is missing).
    producer_type = JobType("send_receipt", InvoicePayload)
    clock = ManualClock()
    queue = make_queue(clock)
    worker = Worker(queue)
    handler = Recorder()
    worker.register(SEND_RECEIPT, handler)
    queue.enqueue(producer_type, InvoicePayload(order_id=1001), id="receipt-1001")

    event = asyncio.run(worker.run_one())
    assert event is not None
    assert (event.outcome, event.attempt) == ("dead", 1)
    [dead] = queue.dead_letters()
    assert dead.job.last_error is not None
    assert dead.job.last_error.startswith("PayloadError")
    assert "email" in dead.job.last_error
    assert handler.payloads == []


def test_on_event_sees_every_event_in_order() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    lines: list[str] = []
    worker = Worker(queue, on_event=lambda event: lines.append(str(event)))
    worker.register(RENDER_INVOICE, Recorder())
    for order_id in (1001, 1002, 1003):
        queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=order_id), id=f"invoice-{order_id}")
    events = asyncio.run(worker.drain())
    assert lines == [str(event) for event in events] == [str(event) for event in worker.events]
    assert lines == [f"t=0s invoice-{n} attempt 1: done" for n in (1001, 1002, 1003)]


def test_an_event_is_stamped_when_the_attempt_ends() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    worker = Worker(queue)
    renderer = shop.InvoiceRenderer(clock=clock, latency_s=2.0)
    worker.register(RENDER_INVOICE, shop.invoice_handler(renderer))
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")
    event = asyncio.run(worker.run_one())
    assert event is not None
    assert event.at == 2.0
    assert renderer.rendered == ["invoice-1001.pdf"]


# -- the course's scenarios ------------------------------------------------------------------


def test_outage_replay_from_lesson_04() -> None:
    clock = ManualClock()
    policy = RetryPolicy(max_attempts=5, backoff=Backoff(base_s=1, cap_s=60))
    queue = JobQueue(clock=clock, visibility_timeout_s=30, retry=policy, random=lambda: 1.0)
    mail = shop.MailProvider(clock=clock, down_until_s=5)
    renderer = shop.InvoiceRenderer(clock=clock)
    worker = Worker(queue)
    worker.register(SEND_RECEIPT, shop.receipt_handler(mail))
    worker.register(RENDER_INVOICE, shop.invoice_handler(renderer))
    queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
    queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=1001), id="invoice-1001")

    down = "MailProviderDown: mail provider unreachable until t=5s"
    assert run_all(worker, clock, seconds=10) == [
        f"t=0s receipt-1001 attempt 1: failed, retry at t=1s ({down})",
        "t=0s invoice-1001 attempt 1: done",
        f"t=1s receipt-1001 attempt 2: failed, retry at t=3s ({down})",
        f"t=3s receipt-1001 attempt 3: failed, retry at t=7s ({down})",
        "t=7s receipt-1001 attempt 4: done",
    ]
    assert mail.sent == [(7.0, "customer@example.com", "Your receipt for order 1001")]
    assert renderer.rendered == ["invoice-1001.pdf"]
    assert (len(queue), queue.dead_letters()) == (0, [])


def test_receipt_to_an_address_without_at_sign_is_dead_after_one_attempt() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    mail = shop.MailProvider(clock=clock)
    worker = Worker(queue)
    worker.register(SEND_RECEIPT, shop.receipt_handler(mail))
    queue.enqueue(
        SEND_RECEIPT, ReceiptPayload(order_id=1002, email="customer.example.com"), id="receipt-1002"
    )
    assert run_all(worker, clock, seconds=3) == [
        "t=0s receipt-1002 attempt 1: dead (PermanentJobError: invalid e-mail address 'customer.example.com')"
    ]
    assert mail.sent == []


def test_invoice_whose_renderer_always_crashes_is_dead_after_four_attempts() -> None:
    clock = ManualClock()
    policy = RetryPolicy(max_attempts=4, backoff=Backoff(base_s=1, cap_s=60))
    invoice_type = JobType("render_invoice", InvoicePayload, retry=policy)
    queue = make_queue(clock)
    worker = Worker(queue)
    worker.register(invoice_type, shop.invoice_handler(shop.InvoiceRenderer(clock=clock, broken=True)))
    queue.enqueue(invoice_type, InvoicePayload(order_id=1003), id="invoice-1003")
    crash = "RendererCrashed: renderer crashed on order 1003"
    assert run_all(worker, clock, seconds=20) == [
        f"t=0s invoice-1003 attempt 1: failed, retry at t=1s ({crash})",
        f"t=1s invoice-1003 attempt 2: failed, retry at t=3s ({crash})",
        f"t=3s invoice-1003 attempt 3: failed, retry at t=7s ({crash})",
        f"t=7s invoice-1003 attempt 4: dead ({crash})",
    ]
    [dead] = queue.dead_letters()
    assert (dead.job.attempts, dead.died_at) == (4, 7.0)
