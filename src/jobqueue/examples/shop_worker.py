"""The shop's background worker as a service: the handlers ``jobqueue worker`` loads.

Start it on a durable queue file with::

    jobqueue worker shop.db --handlers jobqueue.examples.shop_worker:register

The handlers await real time (``asyncio.sleep``) where the fakes of :mod:`jobqueue.examples.shop`
move a manual clock, because a service runs on the wall clock. Each prints one line when
its work is done.

Introduced in lesson 11.
"""

from __future__ import annotations

import asyncio

from jobqueue.errors import PermanentJobError
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.worker import Worker

MAIL_LATENCY_S = 0.05
"""How long the stand-in for the mail provider's API call takes, in seconds."""


async def send_receipt(payload: ReceiptPayload) -> None:
    """Mail the receipt of ``payload.order_id`` (a stand-in: waits, then prints).

    Raises:
        PermanentJobError: for an address without ``"@"``.
    """
    if "@" not in payload.email:
        raise PermanentJobError(f"invalid e-mail address {payload.email!r}")
    await asyncio.sleep(MAIL_LATENCY_S)
    print(f"mailed the receipt for order {payload.order_id}", flush=True)


async def build_report(payload: ReportPayload) -> None:
    """Build report ``payload.report_id``: waits ``payload.work_s`` seconds, then prints."""
    await asyncio.sleep(payload.work_s)
    print(f"built report {payload.report_id}", flush=True)


def register(worker: Worker) -> None:
    """Register the shop's service handlers (``send_receipt``, ``build_report``) on ``worker``."""
    worker.register(SEND_RECEIPT, send_receipt)
    worker.register(BUILD_REPORT, build_report)
