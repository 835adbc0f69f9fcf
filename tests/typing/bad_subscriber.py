"""Checked by mypy in tests/test_fanout.py, never run: a subscriber and an event of the wrong class."""

from jobqueue import JobQueue, ManualClock
from jobqueue.examples import shop
from jobqueue.fanout import Topic

order_paid = Topic("order.paid", shop.OrderPaid)
order_paid.subscribe("email", JobQueue(clock=ManualClock()), shop.SEND_RECEIPT)  # expect: arg-type
receipt = shop.ReceiptPayload(order_id=1001, email="customer@example.com")
order_paid.publish("paid-1001", receipt)  # expect: arg-type
