"""Lesson 05's scenarios end to end through the worker: two poison jobs, then replay after a fix.

Spec piece 5: a receipt to an address without "@" is dead after 1 attempt; an invoice whose
renderer always crashes, with 4 attempts (base 1 s, cap 60 s, random 1), fails at t=0, 1, 3, 7
and is dead after 4 attempts. Replayed after the fix, it succeeds with a fresh attempt budget.
"""

import asyncio
from dataclasses import dataclass

import pytest

from jobqueue import Backoff, JobEvent, JobQueue, JobType, ManualClock, RetryPolicy, Worker
from jobqueue.examples import shop

POLICY = RetryPolicy(max_attempts=4, backoff=Backoff(base_s=1, cap_s=60))
BAD_ADDRESS_ERROR = "PermanentJobError: invalid e-mail address 'customer.example.com'"
CRASH_ERROR = "RendererCrashed: renderer crashed on order 1001"


@dataclass
class Scene:
    clock: ManualClock
    queue: JobQueue
    worker: Worker
    mail: shop.MailProvider
    renderer: shop.InvoiceRenderer


def poison_jobs(policy_on: str = "queue") -> Scene:
    """The lesson's set-up: a bad-address receipt and an invoice with a broken renderer, at t=0.

    ``policy_on`` puts the 4-attempt policy on the queue or on the invoice's job type;
    the lesson allows either, and both must give the same schedule.
    """
    clock = ManualClock()
    queue = JobQueue(
        clock=clock,
        visibility_timeout_s=30,
        retry=POLICY if policy_on == "queue" else RetryPolicy(max_attempts=4),
        random=lambda: 1.0,
    )
    invoice_type = shop.RENDER_INVOICE
    if policy_on == "job type":
        invoice_type = JobType("render_invoice", shop.InvoicePayload, retry=POLICY)
    mail = shop.MailProvider(clock=clock)
    renderer = shop.InvoiceRenderer(clock=clock, broken=True)
    worker = Worker(queue)
    worker.register(shop.SEND_RECEIPT, shop.receipt_handler(mail))
    worker.register(invoice_type, shop.invoice_handler(renderer))
    bad_address = shop.ReceiptPayload(order_id=1002, email="customer.example.com")
    queue.enqueue(shop.SEND_RECEIPT, bad_address, id="receipt-1002")
    queue.enqueue(invoice_type, shop.InvoicePayload(order_id=1001), id="invoice-1001")
    return Scene(clock, queue, worker, mail, renderer)


def run_until_empty(scene: Scene) -> list[JobEvent]:
    """Jump to each time a job is due and drain, until no job is left (as the lesson does)."""

    async def loop() -> list[JobEvent]:
        events: list[JobEvent] = []
        while (due := scene.queue.next_visible_at()) is not None:
            scene.clock.advance(due - scene.clock.now())
            events += await scene.worker.drain()
        return events

    return asyncio.run(loop())


def drain(scene: Scene) -> list[JobEvent]:
    return asyncio.run(scene.worker.drain())


def timeline(events: list[JobEvent], job_id: str) -> list[tuple[float, int, str, float | None]]:
    return [(e.at, e.attempt, e.outcome, e.retry_at) for e in events if e.job_id == job_id]


def dead_table(queue: JobQueue) -> list[tuple[str, str, int, str | None, float]]:
    return [(d.job.id, d.job.type, d.job.attempts, d.job.last_error, d.died_at) for d in queue.dead_letters()]


def test_receipt_to_an_address_without_at_is_dead_after_one_attempt() -> None:
    scene = poison_jobs()
    events = run_until_empty(scene)
    assert timeline(events, "receipt-1002") == [(0.0, 1, "dead", None)]
    assert str(events[0]) == f"t=0s receipt-1002 attempt 1: dead ({BAD_ADDRESS_ERROR})"
    assert scene.mail.sent == []


@pytest.mark.parametrize("policy_on", ["queue", "job type"])
def test_invoice_with_a_crashing_renderer_fails_at_0_1_3_7_then_is_dead(policy_on: str) -> None:
    scene = poison_jobs(policy_on)
    events = run_until_empty(scene)
    assert timeline(events, "invoice-1001") == [
        (0.0, 1, "retry", 1.0),
        (1.0, 2, "retry", 3.0),
        (3.0, 3, "retry", 7.0),
        (7.0, 4, "dead", None),
    ]
    assert [str(e) for e in events if e.job_id == "invoice-1001"] == [
        f"t=0s invoice-1001 attempt 1: failed, retry at t=1s ({CRASH_ERROR})",
        f"t=1s invoice-1001 attempt 2: failed, retry at t=3s ({CRASH_ERROR})",
        f"t=3s invoice-1001 attempt 3: failed, retry at t=7s ({CRASH_ERROR})",
        f"t=7s invoice-1001 attempt 4: dead ({CRASH_ERROR})",
    ]
    assert scene.renderer.rendered == []


def test_dead_letter_queue_holds_both_jobs_oldest_death_first() -> None:
    scene = poison_jobs()
    run_until_empty(scene)
    assert len(scene.queue) == 0
    assert dead_table(scene.queue) == [
        ("receipt-1002", "send_receipt", 1, BAD_ADDRESS_ERROR, 0.0),
        ("invoice-1001", "render_invoice", 4, CRASH_ERROR, 7.0),
    ]
    receipt = scene.queue.dead_letters()[0].job
    assert receipt.payload == '{"order_id":1002,"email":"customer.example.com"}'
    assert receipt.max_attempts == 4  # 3 attempts left unused: a permanent failure skips them


def test_replay_after_the_fix_succeeds_with_a_fresh_budget() -> None:
    scene = poison_jobs()
    run_until_empty(scene)
    scene.renderer.broken = False
    job = scene.queue.replay("invoice-1001")
    assert (job.attempts, job.run_at, job.last_error) == (0, 7.0, CRASH_ERROR)
    events = drain(scene)
    assert [str(e) for e in events] == ["t=7s invoice-1001 attempt 1: done"]
    assert scene.renderer.rendered == ["invoice-1001.pdf"]
    assert [d.job.id for d in scene.queue.dead_letters()] == ["receipt-1002"]  # the other one is untouched
    assert len(scene.queue) == 0


def test_replaying_a_permanent_failure_without_fixing_the_data_kills_it_again() -> None:
    scene = poison_jobs()
    run_until_empty(scene)
    scene.clock.advance(60)
    scene.queue.replay("receipt-1002")
    events = drain(scene)
    assert timeline(events, "receipt-1002") == [(67.0, 1, "dead", None)]
    assert dead_table(scene.queue) == [
        ("invoice-1001", "render_invoice", 4, CRASH_ERROR, 7.0),
        ("receipt-1002", "send_receipt", 1, BAD_ADDRESS_ERROR, 67.0),
    ]


def test_replay_without_a_fix_gets_a_whole_new_round_of_attempts() -> None:
    # The cost of starting afresh: an unfixed transient-looking failure retries 4 more times.
    scene = poison_jobs()
    run_until_empty(scene)
    scene.queue.replay("invoice-1001")
    events = run_until_empty(scene)
    assert [(e.at, e.attempt, e.outcome) for e in events] == [
        (7.0, 1, "retry"),
        (8.0, 2, "retry"),
        (10.0, 3, "retry"),
        (14.0, 4, "dead"),
    ]
    assert dead_table(scene.queue)[-1] == ("invoice-1001", "render_invoice", 4, CRASH_ERROR, 14.0)
