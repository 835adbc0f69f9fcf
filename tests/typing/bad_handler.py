"""Checked by mypy in tests/test_typing.py, never run: a handler for the wrong payload type."""

from jobqueue import JobQueue, ManualClock, Worker
from jobqueue.examples import shop


async def render_invoice(payload: shop.InvoicePayload) -> None:
    print(payload.order_id)


worker = Worker(JobQueue(clock=ManualClock()))
worker.register(shop.SEND_RECEIPT, render_invoice)  # expect: arg-type
