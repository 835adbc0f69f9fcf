import asyncio
import re

import pytest

from jobqueue import JobQueue, ManualClock, PermanentJobError, Worker
from jobqueue.examples import shop
from jobqueue.examples.shop import (
    PICK_ORDER,
    RENDER_INVOICE,
    SEND_RECEIPT,
    InvoicePayload,
    Order,
    PickPayload,
    ReceiptPayload,
    Shop,
    loyalty_points,
    naira,
)

ORDER = Order(id=1001, customer_id=7, email="customer@example.com", total_kobo=2_042_500)


@pytest.mark.parametrize(
    ("kobo", "shown"),
    [
        (2_042_500, "₦20,425"),
        (0, "₦0"),
        (5, "₦0.05"),
        (150, "₦1.50"),
        (100, "₦1"),
        (123_456_789, "₦1,234,567.89"),
    ],
)
def test_naira_formats_kobo(kobo: int, shown: str) -> None:
    assert naira(kobo) == shown


def test_naira_formats_a_negative_amount() -> None:
    assert naira(-150) == "-₦1.50"


@pytest.mark.parametrize(("kobo", "points"), [(2_042_500, 204), (0, 0), (9_999, 0), (10_000, 1), (19_999, 1)])
def test_loyalty_points_one_per_ten_thousand_kobo_rounded_down(kobo: int, points: int) -> None:
    assert loyalty_points(kobo) == points


def test_checkout_inline_when_all_is_well_answers_200_after_all_the_work() -> None:
    clock = ManualClock()
    the_shop = Shop.create(clock=clock)
    response = asyncio.run(the_shop.checkout_inline(ORDER))
    assert (response.status, response.body) == (200, "Order 1001 confirmed")
    assert response.waited_s == pytest.approx(0.5 + 2.0 + 0.3 + 0.2)
    assert the_shop.gateway.charges == [(1001, 2_042_500)]
    assert the_shop.renderer.rendered == ["invoice-1001.pdf"]
    assert [(to, subject) for _, to, subject in the_shop.mail.sent] == [
        ("customer@example.com", "Your receipt for order 1001")
    ]
    assert the_shop.warehouse.picked == [1001]


def test_checkout_inline_with_the_mail_provider_down_charges_the_card_then_answers_500() -> None:
    clock = ManualClock()
    the_shop = Shop.create(clock=clock, mail_down_until_s=3600)
    response = asyncio.run(the_shop.checkout_inline(ORDER))
    assert response.status == 500
    assert response.body == "Internal Server Error (MailProviderDown)"
    assert the_shop.gateway.charges == [(1001, 2_042_500)]  # the money is taken all the same
    assert response.waited_s == pytest.approx(0.5 + 2.0 + 10.0)  # charge, invoice, mail time-out
    assert the_shop.mail.sent == []
    assert the_shop.warehouse.picked == []


def test_checkout_with_queue_answers_200_at_once_and_enqueues_three_jobs() -> None:
    clock = ManualClock()
    the_shop = Shop.create(clock=clock, mail_down_until_s=3600)
    queue = JobQueue(clock=clock)
    response = the_shop.checkout_with_queue(ORDER, queue)
    assert (response.status, response.body) == (200, "Order 1001 confirmed")
    assert response.waited_s == 0.5
    assert the_shop.gateway.charges == [(1001, 2_042_500)]
    jobs = {job.id: job for job in queue.jobs()}
    assert sorted(jobs) == ["invoice-1001", "pick-1001", "receipt-1001"]
    assert SEND_RECEIPT.parse(jobs["receipt-1001"].payload) == ReceiptPayload(
        order_id=1001, email="customer@example.com"
    )
    assert RENDER_INVOICE.parse(jobs["invoice-1001"].payload) == InvoicePayload(order_id=1001)
    assert PICK_ORDER.parse(jobs["pick-1001"].payload) == PickPayload(order_id=1001)
    assert {job.type for job in jobs.values()} == {"send_receipt", "render_invoice", "pick_order"}


def test_checkout_with_queue_retried_by_the_client_makes_no_duplicate_jobs() -> None:
    clock = ManualClock()
    the_shop = Shop.create(clock=clock)
    queue = JobQueue(clock=clock)
    the_shop.checkout_with_queue(ORDER, queue)
    the_shop.checkout_with_queue(ORDER, queue)
    assert len(queue) == 3


def test_workers_finish_the_checkout_once_the_mail_provider_is_back() -> None:
    clock = ManualClock()
    the_shop = Shop.create(clock=clock, mail_down_until_s=20)
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    worker = Worker(queue)
    worker.register(SEND_RECEIPT, shop.receipt_handler(the_shop.mail))
    worker.register(RENDER_INVOICE, shop.invoice_handler(the_shop.renderer))
    worker.register(PICK_ORDER, shop.pick_handler(the_shop.warehouse))
    assert the_shop.checkout_with_queue(ORDER, queue).status == 200

    async def work() -> None:
        for _ in range(60):
            await worker.drain()
            clock.advance(1)

    asyncio.run(work())
    assert [(e.job_id, e.outcome) for e in worker.events if e.outcome == "done"] == [
        ("invoice-1001", "done"),
        ("pick-1001", "done"),
        ("receipt-1001", "done"),
    ]
    assert len(the_shop.mail.sent) == 1
    assert the_shop.mail.sent[0][0] >= 20
    assert the_shop.warehouse.picked == [1001]
    assert (len(queue), queue.dead_letters()) == (0, [])


def test_receipt_handler_refuses_an_address_without_at_sign_permanently() -> None:
    clock = ManualClock()
    mail = shop.MailProvider(clock=clock)
    handler = shop.receipt_handler(mail)

    async def send() -> None:
        await handler(ReceiptPayload(order_id=1001, email="customer.example.com"))

    with pytest.raises(PermanentJobError, match=re.escape("'customer.example.com'")):
        asyncio.run(send())
    assert mail.sent == []


def test_mail_provider_down_is_a_transient_connection_error() -> None:
    clock = ManualClock()
    mail = shop.MailProvider(clock=clock, down_until_s=5, timeout_s=10)
    with pytest.raises(ConnectionError, match="t=5s"):
        asyncio.run(mail.send("customer@example.com", "hi"))
    assert clock.now() == 10.0  # the customer waited for the time-out
    asyncio.run(mail.send("customer@example.com", "hi"))
    assert mail.sent == [(10.0, "customer@example.com", "hi")]
