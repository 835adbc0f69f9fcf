"""Checked by mypy in tests/test_typing.py, never run: handlers whose payload types match."""

from jobqueue import JobQueue, ManualClock, Worker
from jobqueue.examples import shop


async def send_receipt(payload: shop.ReceiptPayload) -> None:
    print(payload.order_id, payload.email)


async def render_invoice(payload: shop.InvoicePayload) -> None:
    print(payload.order_id)


worker = Worker(JobQueue(clock=ManualClock()))
worker.register(shop.SEND_RECEIPT, send_receipt)
worker.register(shop.RENDER_INVOICE, render_invoice)
worker.register(shop.PICK_ORDER, shop.pick_handler(shop.Warehouse(clock=ManualClock())))
