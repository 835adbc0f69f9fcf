"""Fan-out: one event, copied into one queue per subscriber, each copy a job of its own.

An *event* states a fact ("order 1001 was paid"); a *job* is one unit of work for one
handler. A :class:`Topic` turns the first into the second: the producer (the checkout)
calls :meth:`Topic.publish` once, and every subscriber (e-mail, warehouse, loyalty...)
gets its own copy as a job in its own queue, where it is retried, dead-lettered and acked
independently of the others. Adding a subscriber is a :meth:`Topic.subscribe` call at
start-up; the producer does not change.

Each copy's job id is derived from the event id and the subscriber's name
(:func:`copy_id`, ``"paid-1001:email"``), and the queue ignores an id it already holds,
so a producer that retries its publish adds nothing. The model is Amazon SNS fanning out
to one SQS queue per subscriber, or a RabbitMQ fanout exchange bound to one queue per
consumer.

Introduced in lesson 09.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Generic, TypeVar

from jobqueue.backends.contract import Queue
from jobqueue.errors import InvalidSettingError, PayloadError
from jobqueue.job import JobType

E = TypeVar("E")

SEPARATOR = ":"
"""Joins an event id and a subscriber name into a copy's job id: ``"paid-1001:email"``."""

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def check_subscriber_name(name: str) -> str:
    """Return ``name`` if it can name a subscriber, else raise.

    A name is one or more ASCII letters, digits, ``_``, ``-`` or ``.``: no spaces and no
    ``":"``, so that the subscriber part of a copy id is always what follows its last
    ``":"`` and two different (event, subscriber) pairs never share an id.

    Raises:
        InvalidSettingError: naming the bad value.

    Introduced in lesson 09.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidSettingError(
            f"a subscriber name must be one or more letters, digits, '_', '-' or '.', got {name!r}"
        )
    return name


def check_event_id(event_id: str) -> str:
    """Return ``event_id`` if it can identify an event, else raise.

    Any non-empty string without spaces at either end will do (``":"`` included). Choose
    it once, when the fact happens, and store it (an order id, an outbox row id): an id
    made afresh for each attempt to publish would defeat the deduplication.

    Raises:
        InvalidSettingError: naming the bad value.

    Introduced in lesson 09.
    """
    if not isinstance(event_id, str) or not event_id.strip() or event_id != event_id.strip():
        raise InvalidSettingError(
            f"an event id must be a non-empty string without surrounding spaces, got {event_id!r}"
        )
    return event_id


def copy_id(event_id: str, subscriber: str) -> str:
    """The job id of a subscriber's copy of an event: ``("paid-1001", "email")`` gives ``"paid-1001:email"``.

    The event part keeps copies of different events apart; the subscriber part keeps the
    copies of one event apart (even in a shared queue) and says whose copy it is. Since a
    subscriber name contains no ``":"``, different pairs always give different ids.

    Raises:
        InvalidSettingError: if ``event_id`` is empty or ``subscriber`` is not a valid name.

    Introduced in lesson 09.
    """
    return f"{check_event_id(event_id)}{SEPARATOR}{check_subscriber_name(subscriber)}"


@dataclass(frozen=True)
class Subscription(Generic[E]):
    """One subscriber of a topic: its name, its queue and the job type of its copies.

    Introduced in lesson 09.
    """

    name: str
    queue: Queue
    job_type: JobType[E]


@dataclass(frozen=True)
class Published:
    """What one :meth:`Topic.publish` did: the job ids of the copies, by outcome.

    Attributes:
        event_id: the event that was published.
        added: ids of copies newly enqueued, in subscription order.
        skipped: ids of copies their queue already held (a repeated publish), in
            subscription order.

    Introduced in lesson 09.
    """

    event_id: str
    added: tuple[str, ...]
    skipped: tuple[str, ...]

    def __str__(self) -> str:
        added = ", ".join(self.added) or "nothing"
        skipped = f"; already there: {', '.join(self.skipped)}" if self.skipped else ""
        return f"{self.event_id}: added {added}{skipped}"


class Topic(Generic[E]):
    """A named kind of event and its subscribers; publishing copies the event to each.

    Args:
        name: the event's name, e.g. ``"order.paid"``.
        payload_type: the class of the event's payload, e.g. ``shop.OrderPaid``.

    Raises:
        InvalidSettingError: if ``name`` is empty.

    Every subscriber's job type must take the topic's payload class; mypy checks it in
    :meth:`subscribe`, and the call checks it again at run time. Introduced in lesson 09.
    """

    def __init__(self, name: str, payload_type: type[E]) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidSettingError(f"a topic needs a non-empty name, got {name!r}")
        self.name = name
        self.payload_type = payload_type
        self._subscriptions: dict[str, Subscription[E]] = {}

    def subscribe(self, name: str, queue: Queue, job_type: JobType[E]) -> Subscription[E]:
        """Add a subscriber: from now on each published event puts a copy in ``queue``.

        Args:
            name: the subscriber's name, unique in this topic (see
                :func:`check_subscriber_name`); it becomes part of each copy's job id.
            queue: where the copies go; normally a queue of the subscriber's own, so its
                retries and outages never hold up the other subscribers.
            job_type: the type of the copies; its handler runs them. Its payload class
                must be the topic's.

        Returns:
            The new subscription.

        Raises:
            InvalidSettingError: if the name is invalid or taken, if ``job_type`` takes
                another payload class, or if another subscriber already puts the same job
                type into the same queue (a worker could not tell their copies apart).
                Nothing changes.
        """
        check_subscriber_name(name)
        if name in self._subscriptions:
            raise InvalidSettingError(f"topic {self.name!r} already has a subscriber named {name!r}")
        if job_type.payload_type is not self.payload_type:
            raise InvalidSettingError(
                f"subscriber {name!r}: job type {job_type.name!r} takes"
                f" {job_type.payload_type.__name__} payloads, but topic {self.name!r} carries"
                f" {self.payload_type.__name__}"
            )
        for other in self._subscriptions.values():
            if other.queue is queue and other.job_type.name == job_type.name:
                raise InvalidSettingError(
                    f"subscriber {name!r} would put job type {job_type.name!r} into the same queue as"
                    f" subscriber {other.name!r}: a worker could not tell their copies apart"
                )
        subscription = Subscription(name=name, queue=queue, job_type=job_type)
        self._subscriptions[name] = subscription
        return subscription

    @property
    def subscriptions(self) -> tuple[Subscription[E], ...]:
        """The subscribers, in the order they subscribed."""
        return tuple(self._subscriptions.values())

    def publish(self, event_id: str, payload: E) -> Published:
        """Put one copy of the event into each subscriber's queue.

        Each copy is a job of the subscriber's job type with id
        ``copy_id(event_id, subscriber)``. A queue that already holds that id (waiting,
        leased or dead) keeps its job and adds nothing, so publishing the same event
        again (a producer retry) is harmless, and a publish that stopped halfway is
        completed by simply publishing again. Once a copy is done (acked) the queue
        forgets its id: a much later repeat makes a new copy, which the subscriber's
        handler must shrug off (an idempotent consumer, lesson 07).

        Args:
            event_id: the event's id, chosen once when the fact happened (see
                :func:`check_event_id`).
            payload: the event, an instance of :attr:`payload_type`.

        Returns:
            Which copies were added and which were already there.

        Raises:
            InvalidSettingError: if ``event_id`` is empty or has surrounding spaces.
            PayloadError: if ``payload`` is not a :attr:`payload_type` or cannot be
                stored. Both are checked before any queue is touched: nothing is added.
        """
        check_event_id(event_id)
        if not isinstance(payload, self.payload_type):
            raise PayloadError(
                f"topic {self.name!r} carries {self.payload_type.__name__} payloads, got {payload!r}"
            )
        for subscription in self._subscriptions.values():
            subscription.job_type.dump(payload)  # raises PayloadError before anything is enqueued
        added: list[str] = []
        skipped: list[str] = []
        for subscription in self._subscriptions.values():
            job_id = copy_id(event_id, subscription.name)
            before = len(subscription.queue)
            subscription.queue.enqueue(subscription.job_type, payload, id=job_id)
            (added if len(subscription.queue) > before else skipped).append(job_id)
        return Published(event_id=event_id, added=tuple(added), skipped=tuple(skipped))

    def __repr__(self) -> str:
        names = ", ".join(self._subscriptions) or "no subscribers"
        return f"Topic({self.name!r}, {self.payload_type.__name__}: {names})"
