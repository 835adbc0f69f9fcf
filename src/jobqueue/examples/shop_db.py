"""The shop's tables: orders and loyalty points; the running example of lessons 07-08 and 13.

The reusable pieces, :mod:`jobqueue.idempotency` and :mod:`jobqueue.outbox`, know nothing
of the shop: they own only their own tables (``processed_messages``; ``outbox``). This
module holds the example data they are shown with:

* ``loyalty(customer_id, points)``: the effect of lesson 07's idempotent consumer, one
  point per 10,000 kobo (:func:`jobqueue.examples.shop.loyalty_points`);
* ``orders``: what lesson 08's checkout saves, together with its ``send_receipt`` job in
  the outbox (:func:`save_order`).

Create the reusable module's tables as well: :func:`save_order` needs ``outbox``. Every
function takes a DuckDB connection or, as in lesson 12, a psycopg connection to
PostgreSQL (see :mod:`jobqueue.db`).

Introduced in lesson 07.
"""

from __future__ import annotations

from jobqueue import db, outbox
from jobqueue.clock import Clock
from jobqueue.db import Connection
from jobqueue.errors import InvalidSettingError
from jobqueue.examples.shop import SEND_RECEIPT, Order, ReceiptPayload

ORDERS_TABLE = (
    "CREATE TABLE IF NOT EXISTS orders ("
    " id BIGINT PRIMARY KEY, customer_id BIGINT NOT NULL, email VARCHAR NOT NULL,"
    " total_kobo BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL)"
)
"""The shop's orders: amounts in kobo, ``created_at`` in seconds from a
:class:`~jobqueue.clock.Clock`. Introduced in lesson 08."""

LOYALTY_TABLE = "CREATE TABLE IF NOT EXISTS loyalty (customer_id BIGINT PRIMARY KEY, points BIGINT NOT NULL)"
"""Loyalty points per customer. Introduced in lesson 07."""

SCHEMA = (ORDERS_TABLE, LOYALTY_TABLE)
"""Every table of the shop, in the order :func:`create_tables` creates them."""


def create_tables(con: Connection) -> None:
    """Create the shop's ``orders`` and ``loyalty`` tables if they do not exist yet.

    Only the example's tables: create ``processed_messages``
    (:func:`jobqueue.idempotency.create_tables`) and ``outbox``
    (:func:`jobqueue.outbox.create_tables`) with their own modules.

    Introduced in lesson 07.
    """
    with db.transaction(con):
        for statement in SCHEMA:
            db.fetch(con, statement)


def credit_points(con: Connection, customer_id: int, points: int) -> None:
    """Add ``points`` to a customer's loyalty balance (creating it at 0 if new).

    One statement and no transaction of its own: run it inside one, as the effect of
    :func:`jobqueue.idempotency.process_once` or in ``with jobqueue.db.transaction(con):``.

    Raises:
        InvalidSettingError: if ``customer_id`` or ``points`` is not an int, or
            ``points`` is negative.

    Introduced in lesson 07.
    """
    for name, value in (("customer_id", customer_id), ("points", points)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSettingError(f"{name} must be an int, got {value!r}")
    if points < 0:
        raise InvalidSettingError(f"points must be >= 0, got {points!r}")
    db.fetch(
        con,
        "INSERT INTO loyalty (customer_id, points) VALUES (?, ?)"
        " ON CONFLICT (customer_id) DO UPDATE SET points = loyalty.points + excluded.points",
        [customer_id, points],
    )


def points_balance(con: Connection, customer_id: int) -> int:
    """A customer's loyalty points (0 if they have none yet).

    Introduced in lesson 07.
    """
    rows = db.fetch(con, "SELECT points FROM loyalty WHERE customer_id = ?", [customer_id])
    return int(rows[0][0]) if rows else 0


def insert_order(con: Connection, order: Order, clock: Clock) -> None:
    """Insert ``order`` into ``orders``, stamped with ``clock.now()`` (seconds).

    One statement and no transaction of its own: run it inside
    ``with jobqueue.db.transaction(con):``, together with the order's outbox rows.

    Raises:
        duckdb.ConstraintException: if an order with this id exists (the message names
            the id); inside a transaction, the transaction must then be rolled back. On
            PostgreSQL, ``psycopg.errors.UniqueViolation``.

    Introduced in lesson 08.
    """
    db.fetch(
        con,
        "INSERT INTO orders (id, customer_id, email, total_kobo, created_at) VALUES (?, ?, ?, ?, ?)",
        [order.id, order.customer_id, order.email, order.total_kobo, clock.now()],
    )


def save_order(con: Connection, order: Order, clock: Clock) -> int:
    """Save ``order`` and its ``send_receipt`` job in one transaction; return the outbox row id.

    The order goes into ``orders`` and a :data:`~jobqueue.examples.shop.SEND_RECEIPT` job for it
    into ``outbox`` (:func:`jobqueue.outbox.add_message`), inside one
    :func:`jobqueue.db.transaction`: if anything fails (a duplicate order id, a crash)
    neither is saved. This is the transactional outbox of :mod:`jobqueue.outbox`.

    Raises:
        duckdb.ConstraintException: if an order with this id exists; nothing is saved.

    Introduced in lesson 08.
    """
    with db.transaction(con):
        insert_order(con, order, clock)
        receipt = ReceiptPayload(order_id=order.id, email=order.email)
        return outbox.add_message(con, SEND_RECEIPT, receipt, clock)
