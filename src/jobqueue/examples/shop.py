"""The course's running example: a shop's checkout and the slow services it calls.

Money is in kobo (100 kobo = 1 naira). Every service here is a fake that records what
it was asked to do; a fake that "takes time" moves a :class:`~jobqueue.clock.ManualClock`
forward instead of sleeping, so demos stay instant and their output never changes.
All data is made up (``customer@example.com``, orders 1001, 1002, 1003).

Introduced in lesson 00; the job types and handlers are used from lesson 03 on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from jobqueue.backends.contract import Queue
from jobqueue.clock import ManualClock
from jobqueue.errors import PermanentJobError
from jobqueue.job import Job, JobType
from jobqueue.worker import Handler

KOBO_PER_NAIRA = 100
"""The naira's smallest unit: 100 kobo to a naira."""

KOBO_PER_POINT = 10_000
"""Loyalty programme: one point for every 10,000 kobo (₦100) spent."""


def naira(kobo: int) -> str:
    """Format an amount in kobo as naira: ``naira(2_042_500) == "₦20,425"``, ``naira(-150) == "-₦1.50"``."""
    whole, part = divmod(abs(kobo), KOBO_PER_NAIRA)
    return ("-" if kobo < 0 else "") + f"₦{whole:,}" + (f".{part:02d}" if part else "")


def loyalty_points(total_kobo: int) -> int:
    """Points earned by an order of ``total_kobo``: one per 10,000 kobo, rounded down."""
    return total_kobo // KOBO_PER_POINT


@dataclass(frozen=True, kw_only=True)
class Order:
    """A paid order. ``total_kobo`` is in kobo: 2,042,500 kobo is ₦20,425."""

    id: int
    customer_id: int
    email: str
    total_kobo: int


@dataclass(frozen=True, kw_only=True)
class ReceiptPayload:
    """Payload of a ``send_receipt`` job: ids and plain values, not the whole order."""

    order_id: int
    email: str


@dataclass(frozen=True, kw_only=True)
class InvoicePayload:
    """Payload of a ``render_invoice`` job."""

    order_id: int


@dataclass(frozen=True, kw_only=True)
class ReportPayload:
    """Payload of a ``build_report`` job: which report, and how long building it takes (s).

    ``work_s`` stands in for real work in the lesson 11 demo of a worker service.
    """

    report_id: int
    work_s: float


@dataclass(frozen=True, kw_only=True)
class PickPayload:
    """Payload of a ``pick_order`` job (the warehouse picks and packs the items)."""

    order_id: int


SEND_RECEIPT = JobType("send_receipt", ReceiptPayload)
RENDER_INVOICE = JobType("render_invoice", InvoicePayload)
PICK_ORDER = JobType("pick_order", PickPayload)
BUILD_REPORT = JobType("build_report", ReportPayload)


class MailProviderDown(ConnectionError):
    """The fake mail provider is unreachable (a transient failure: retrying can help)."""


class RendererCrashed(RuntimeError):
    """The fake invoice renderer crashed (looks transient; may not be)."""


@dataclass(kw_only=True)
class PaymentGateway:
    """Fake card processor; each charge takes ``latency_s`` seconds and is recorded."""

    clock: ManualClock
    latency_s: float = 0.0
    charges: list[tuple[int, int]] = field(default_factory=list)  # (order id, kobo)

    def charge(self, order: Order) -> None:
        """Charge the order's total to the customer's card."""
        self.clock.advance(self.latency_s)
        self.charges.append((order.id, order.total_kobo))


@dataclass(kw_only=True)
class MailProvider:
    """Fake e-mail service that is down until ``down_until_s`` (seconds on the clock).

    While down, :meth:`send` waits ``timeout_s`` seconds, then raises
    :class:`MailProviderDown`. Sent mails are recorded in :attr:`sent` as
    ``(time, address, subject)``.
    """

    clock: ManualClock
    down_until_s: float = 0.0
    latency_s: float = 0.0
    timeout_s: float = 0.0
    sent: list[tuple[float, str, str]] = field(default_factory=list)

    async def send(self, to: str, subject: str) -> None:
        """Send one e-mail, or raise :class:`MailProviderDown` while the provider is down."""
        if self.clock.now() < self.down_until_s:
            self.clock.advance(self.timeout_s)
            raise MailProviderDown(f"mail provider unreachable until t={self.down_until_s:g}s")
        self.clock.advance(self.latency_s)
        self.sent.append((self.clock.now(), to, subject))


@dataclass(kw_only=True)
class InvoiceRenderer:
    """Fake PDF renderer; takes ``latency_s`` seconds, or always crashes if ``broken``."""

    clock: ManualClock
    latency_s: float = 0.0
    broken: bool = False
    rendered: list[str] = field(default_factory=list)

    async def render(self, order_id: int) -> str:
        """Render the invoice of ``order_id``; return the PDF's file name."""
        self.clock.advance(self.latency_s)
        if self.broken:
            raise RendererCrashed(f"renderer crashed on order {order_id}")
        name = f"invoice-{order_id}.pdf"
        self.rendered.append(name)
        return name


@dataclass(kw_only=True)
class Warehouse:
    """Fake warehouse system; records the orders it was told to pick."""

    clock: ManualClock
    latency_s: float = 0.0
    picked: list[int] = field(default_factory=list)

    async def pick(self, order_id: int) -> None:
        """Tell the warehouse to pick and pack ``order_id``."""
        self.clock.advance(self.latency_s)
        self.picked.append(order_id)


def receipt_handler(mail: MailProvider) -> Handler[ReceiptPayload]:
    """A ``send_receipt`` handler that mails through ``mail``.

    The handler raises :class:`~jobqueue.errors.PermanentJobError` for an address without
    ``"@"`` (no retry can fix it); :class:`MailProviderDown` is left to be retried.
    """

    async def send_receipt(payload: ReceiptPayload) -> None:
        if "@" not in payload.email:
            raise PermanentJobError(f"invalid e-mail address {payload.email!r}")
        await mail.send(payload.email, f"Your receipt for order {payload.order_id}")

    return send_receipt


def invoice_handler(renderer: InvoiceRenderer) -> Handler[InvoicePayload]:
    """A ``render_invoice`` handler that renders through ``renderer``."""

    async def render_invoice(payload: InvoicePayload) -> None:
        await renderer.render(payload.order_id)

    return render_invoice


def pick_handler(warehouse: Warehouse) -> Handler[PickPayload]:
    """A ``pick_order`` handler that tells ``warehouse`` to pick the order."""

    async def pick_order(payload: PickPayload) -> None:
        await warehouse.pick(payload.order_id)

    return pick_order


@dataclass(frozen=True)
class Response:
    """What the checkout answers: an HTTP status, a body, and how long the customer waited (s)."""

    status: int
    body: str
    waited_s: float


@dataclass(kw_only=True)
class Shop:
    """The shop's services, all on one manual clock."""

    clock: ManualClock
    gateway: PaymentGateway
    mail: MailProvider
    renderer: InvoiceRenderer
    warehouse: Warehouse

    @classmethod
    def create(cls, *, clock: ManualClock, mail_down_until_s: float = 0.0) -> Shop:
        """Build the services with lesson 00's latencies.

        Charging takes 0.5 s, the invoice 2 s, a mail 0.3 s (a 10 s time-out while the
        provider is down), the warehouse 0.2 s.
        """
        return cls(
            clock=clock,
            gateway=PaymentGateway(clock=clock, latency_s=0.5),
            mail=MailProvider(clock=clock, down_until_s=mail_down_until_s, latency_s=0.3, timeout_s=10.0),
            renderer=InvoiceRenderer(clock=clock, latency_s=2.0),
            warehouse=Warehouse(clock=clock, latency_s=0.2),
        )

    async def checkout_inline(self, order: Order) -> Response:
        """Charge, render, mail and pick inside the request, as the shop first did.

        Any failure after the charge turns into an HTTP 500, though the money is taken.
        """
        started = self.clock.now()
        try:
            self.gateway.charge(order)
            await self.renderer.render(order.id)
            await self.mail.send(order.email, f"Your receipt for order {order.id}")
            await self.warehouse.pick(order.id)
        except Exception as exc:  # the web framework would turn any error into a 500
            return Response(500, f"Internal Server Error ({type(exc).__name__})", self.clock.now() - started)
        return Response(200, f"Order {order.id} confirmed", self.clock.now() - started)

    def checkout_with_queue(self, order: Order, queue: Queue) -> Response:
        """Charge inside the request; leave the receipt, invoice and picking to workers."""
        started = self.clock.now()
        self.gateway.charge(order)
        receipt = ReceiptPayload(order_id=order.id, email=order.email)
        queue.enqueue(SEND_RECEIPT, receipt, id=f"receipt-{order.id}")
        queue.enqueue(RENDER_INVOICE, InvoicePayload(order_id=order.id), id=f"invoice-{order.id}")
        queue.enqueue(PICK_ORDER, PickPayload(order_id=order.id), id=f"pick-{order.id}")
        return Response(200, f"Order {order.id} confirmed", self.clock.now() - started)


@dataclass(frozen=True, kw_only=True)
class OrderPaid:
    """Payload of the ``order.paid`` event: a fact ("order 1001 was paid"), not an instruction.

    Any number of subscribers may react to it (e-mail, warehouse, loyalty, SMS...); see
    :class:`jobqueue.fanout.Topic`. ``total_kobo`` is in kobo: 2,042,500 kobo is ₦20,425.
    Introduced in lesson 09.
    """

    order_id: int
    customer_id: int
    total_kobo: int


_P = TypeVar("_P")


class QueueUnreachable(ConnectionError):
    """The fake network between the shop and its job queue is down (transient: retry later)."""


@dataclass(kw_only=True)
class RemoteQueue:
    """A queue as the checkout sees it: across a network that fails.

    While :attr:`down` is true, :meth:`enqueue` raises :class:`QueueUnreachable` and the
    queue does not change; otherwise the call goes through. Introduced in lesson 08.
    """

    queue: Queue
    down: bool = False

    def enqueue(
        self, job_type: JobType[_P], payload: _P, *, id: str | None = None, unique_for_s: float | None = None
    ) -> Job:
        """Enqueue into :attr:`queue`, or raise :class:`QueueUnreachable` while down."""
        if self.down:
            raise QueueUnreachable(f"job queue unreachable, could not enqueue {id or job_type.name!r}")
        return self.queue.enqueue(job_type, payload, id=id, unique_for_s=unique_for_s)


class SmsProviderDown(ConnectionError):
    """The fake SMS provider is unreachable (a transient failure: retrying can help)."""


@dataclass(kw_only=True)
class SmsProvider:
    """Fake SMS gateway that fails on demand and honours idempotency keys.

    While :attr:`fail_next` is above 0, :meth:`send` sends nothing, counts it down by one
    and raises :class:`SmsProviderDown`. Sent messages are recorded in :attr:`sent` as
    ``(time, to, text)``. A send with an ``idempotency_key`` the provider has accepted
    before sends nothing and returns the first answer again, as real providers do with an
    idempotency key header. Introduced in lesson 07.
    """

    clock: ManualClock
    latency_s: float = 0.0
    fail_next: int = 0
    sent: list[tuple[float, str, str]] = field(default_factory=list)
    _accepted: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    async def send(self, to: str, text: str, *, idempotency_key: str | None = None) -> str:
        """Send one SMS and return the provider's id for it (``"sms-1"``, ``"sms-2"``...).

        Raises:
            SmsProviderDown: while :attr:`fail_next` is above 0 (nothing is sent).
        """
        if idempotency_key is not None and idempotency_key in self._accepted:
            return self._accepted[idempotency_key]
        self.clock.advance(self.latency_s)
        if self.fail_next > 0:
            self.fail_next -= 1
            raise SmsProviderDown(f"SMS provider unreachable, nothing sent to {to!r}")
        self.sent.append((self.clock.now(), to, text))
        sms_id = f"sms-{len(self.sent)}"
        if idempotency_key is not None:
            self._accepted[idempotency_key] = sms_id
        return sms_id


@dataclass(kw_only=True)
class SlowRenderer:
    """Fake PDF renderer that takes ``latency_s`` seconds by *waiting* on the clock.

    :class:`InvoiceRenderer` moves the clock forward itself, so nothing else runs while
    it works. This one awaits ``clock.sleep(latency_s)``, as a real renderer waits on I/O:
    other tasks (a second worker, a heartbeat) keep running meanwhile, and the clock must
    be moved by the demo (:meth:`ManualClock.run_for`). Each finished render is recorded
    in :attr:`runs` as ``(started, finished, order id)``, times in seconds.
    Introduced in lesson 06.
    """

    clock: ManualClock
    latency_s: float = 40.0
    runs: list[tuple[float, float, int]] = field(default_factory=list)

    async def render(self, order_id: int) -> str:
        """Render the invoice of ``order_id`` in ``latency_s`` seconds; return the file name."""
        started = self.clock.now()
        await self.clock.sleep(self.latency_s)
        self.runs.append((started, self.clock.now(), order_id))
        return f"invoice-{order_id}.pdf"


def slow_invoice_handler(renderer: SlowRenderer) -> Handler[InvoicePayload]:
    """A ``render_invoice`` handler that renders through a :class:`SlowRenderer`."""

    async def render_invoice(payload: InvoicePayload) -> None:
        await renderer.render(payload.order_id)

    return render_invoice
