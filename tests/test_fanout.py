import asyncio
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobqueue import InvalidSettingError, JobEvent, JobQueue, JobType, ManualClock, PayloadError, Worker
from jobqueue.examples import shop
from jobqueue.examples.shop import OrderPaid
from jobqueue.fanout import Published, Topic, check_event_id, check_subscriber_name, copy_id

ROOT = Path(__file__).resolve().parents[1]
PAID_1001 = OrderPaid(order_id=1001, customer_id=7, total_kobo=2_042_500)
PAID_1002 = OrderPaid(order_id=1002, customer_id=8, total_kobo=2_042_500)
SUBSCRIBERS = ("email", "warehouse", "loyalty")


def job_type(subscriber: str) -> JobType[OrderPaid]:
    return JobType(f"{subscriber}.order_paid", OrderPaid)


def make_topic(*names: str) -> tuple[Topic[OrderPaid], dict[str, JobQueue]]:
    clock = ManualClock()
    topic = Topic("order.paid", OrderPaid)
    queues = {name: JobQueue(clock=clock, random=lambda: 1.0) for name in names}
    for name, queue in queues.items():
        topic.subscribe(name, queue, job_type(name))
    return topic, queues


def ids(queues: dict[str, JobQueue]) -> dict[str, list[str]]:
    return {name: [job.id for job in queue.jobs()] for name, queue in queues.items()}


def snapshot(queues: dict[str, JobQueue]) -> dict[str, object]:
    return {name: (queue.jobs(), queue.dead_letters()) for name, queue in queues.items()}


# -- the spec: one event, three queues, published twice ---------------------------------


def test_one_event_lands_once_in_each_subscribers_queue_even_when_published_twice() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    first = topic.publish("paid-1001", PAID_1001)
    second = topic.publish("paid-1001", PAID_1001)  # the producer retries
    assert {name: len(queue) for name, queue in queues.items()} == {"email": 1, "warehouse": 1, "loyalty": 1}
    assert ids(queues) == {
        "email": ["paid-1001:email"],
        "warehouse": ["paid-1001:warehouse"],
        "loyalty": ["paid-1001:loyalty"],
    }
    assert first == Published(
        event_id="paid-1001",
        added=("paid-1001:email", "paid-1001:warehouse", "paid-1001:loyalty"),
        skipped=(),
    )
    assert second == Published(event_id="paid-1001", added=(), skipped=first.added)
    assert str(first) == "paid-1001: added paid-1001:email, paid-1001:warehouse, paid-1001:loyalty"
    assert str(second) == (
        "paid-1001: added nothing; already there: paid-1001:email, paid-1001:warehouse, paid-1001:loyalty"
    )


def test_each_copy_is_a_job_of_the_subscribers_type_carrying_the_whole_event() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    topic.publish("paid-1001", PAID_1001)
    for name, queue in queues.items():
        [job] = queue.jobs()
        assert job.type == f"{name}.order_paid"
        assert job.payload == '{"order_id":1001,"customer_id":7,"total_kobo":2042500}'
        assert job_type(name).parse(job.payload) == PAID_1001
        assert shop.loyalty_points(job_type(name).parse(job.payload).total_kobo) == 204


def test_different_events_do_not_collide() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    topic.publish("paid-1001", PAID_1001)
    topic.publish("paid-1002", PAID_1002)
    assert ids(queues)["loyalty"] == ["paid-1001:loyalty", "paid-1002:loyalty"]
    assert [len(queue) for queue in queues.values()] == [2, 2, 2]


# -- a new subscriber, without touching the producer ------------------------------------


def test_a_new_subscriber_gets_the_next_events_and_the_producer_is_unchanged() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    charged: list[int] = []

    def checkout(order: shop.Order) -> Published:  # the producer: charges, then publishes; nothing else
        charged.append(order.id)
        event = OrderPaid(order_id=order.id, customer_id=order.customer_id, total_kobo=order.total_kobo)
        return topic.publish(f"paid-{order.id}", event)

    checkout(shop.Order(id=1001, customer_id=7, email="customer@example.com", total_kobo=2_042_500))
    sms = JobQueue(clock=ManualClock())
    topic.subscribe("sms", sms, job_type("sms"))
    published = checkout(
        shop.Order(id=1002, customer_id=8, email="customer@example.com", total_kobo=2_042_500)
    )
    assert published.added == ("paid-1002:email", "paid-1002:warehouse", "paid-1002:loyalty", "paid-1002:sms")
    assert [len(queue) for queue in queues.values()] == [2, 2, 2]
    assert [job.id for job in sms.jobs()] == ["paid-1002:sms"]
    assert [s.name for s in topic.subscriptions] == ["email", "warehouse", "loyalty", "sms"]
    assert charged == [1001, 1002]
    assert repr(topic) == "Topic('order.paid', OrderPaid: email, warehouse, loyalty, sms)"


def test_subscribers_may_share_a_queue_with_distinct_job_types() -> None:
    clock = ManualClock()
    shared = JobQueue(clock=clock)
    topic: Topic[OrderPaid] = Topic("order.paid", OrderPaid)
    topic.subscribe("email", shared, job_type("email"))
    topic.subscribe("sms", shared, job_type("sms"))
    topic.publish("paid-1001", PAID_1001)
    topic.publish("paid-1001", PAID_1001)
    assert [(job.id, job.type) for job in shared.jobs()] == [
        ("paid-1001:email", "email.order_paid"),
        ("paid-1001:sms", "sms.order_paid"),
    ]


def test_two_subscribers_putting_one_job_type_into_one_queue_is_refused() -> None:
    shared = JobQueue(clock=ManualClock())
    topic: Topic[OrderPaid] = Topic("order.paid", OrderPaid)
    topic.subscribe("email", shared, job_type("notify"))
    with pytest.raises(
        InvalidSettingError, match=re.escape("subscriber 'sms' would put job type 'notify.order_paid'")
    ):
        topic.subscribe("sms", shared, job_type("notify"))
    assert [s.name for s in topic.subscriptions] == ["email"]


# -- copy ids ---------------------------------------------------------------------------


def test_copy_id_joins_event_id_and_subscriber() -> None:
    assert copy_id("paid-1001", "email") == "paid-1001:email"
    assert copy_id("order.paid:1001", "sms") == "order.paid:1001:sms"  # ':' is fine in an event id
    assert copy_id("evt-1", "loyalty_v2.x") == "evt-1:loyalty_v2.x"


def test_copy_ids_of_different_pairs_never_coincide() -> None:
    # "a:b" + "c" and "a" + "b:c" would both read "a:b:c": subscriber names may not hold ':'.
    assert copy_id("a:b", "c") == "a:b:c"
    with pytest.raises(InvalidSettingError, match=re.escape("got 'b:c'")):
        copy_id("a", "b:c")


@pytest.mark.parametrize("bad", ["", "e mail", "b:c", " sms", "sms\n", "émail", 7, None])
def test_bad_subscriber_names_are_refused_naming_the_value(bad: object) -> None:
    with pytest.raises(InvalidSettingError) as info:
        check_subscriber_name(bad)  # type: ignore[arg-type]
    assert f"got {bad!r}" in str(info.value)
    topic, _ = make_topic("email")
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {bad!r}")):
        topic.subscribe(bad, JobQueue(clock=ManualClock()), job_type("other"))  # type: ignore[arg-type]
    assert [s.name for s in topic.subscriptions] == ["email"]


@pytest.mark.parametrize("bad", ["", " ", "paid-1001 ", "\tpaid-1001", 1001, None])
def test_bad_event_ids_are_refused_naming_the_value_and_nothing_is_enqueued(bad: object) -> None:
    with pytest.raises(InvalidSettingError) as info:
        check_event_id(bad)  # type: ignore[arg-type]
    assert f"got {bad!r}" in str(info.value)
    topic, queues = make_topic(*SUBSCRIBERS)
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {bad!r}")):
        topic.publish(bad, PAID_1001)  # type: ignore[arg-type]
    assert [len(queue) for queue in queues.values()] == [0, 0, 0]


# -- subscribing: other bad input -------------------------------------------------------


def test_a_duplicate_subscriber_name_is_refused_and_the_first_subscription_kept() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    other = JobQueue(clock=ManualClock())
    with pytest.raises(InvalidSettingError) as info:
        topic.subscribe("email", other, job_type("email2"))
    assert str(info.value) == "topic 'order.paid' already has a subscriber named 'email'"
    [email] = [s for s in topic.subscriptions if s.name == "email"]
    assert email.queue is queues["email"]
    topic.publish("paid-1001", PAID_1001)
    assert len(other) == 0 and len(queues["email"]) == 1


def test_a_job_type_for_another_payload_class_is_refused() -> None:
    topic, _ = make_topic()
    with pytest.raises(InvalidSettingError) as info:
        topic.subscribe("email", JobQueue(clock=ManualClock()), shop.SEND_RECEIPT)  # type: ignore[arg-type]
    assert str(info.value) == (
        "subscriber 'email': job type 'send_receipt' takes ReceiptPayload payloads,"
        " but topic 'order.paid' carries OrderPaid"
    )
    assert topic.subscriptions == ()


@pytest.mark.parametrize("bad", ["", "  ", None])
def test_a_topic_needs_a_name(bad: object) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(f"got {bad!r}")):
        Topic(bad, OrderPaid)  # type: ignore[arg-type]


# -- payload validation -----------------------------------------------------------------


def test_a_payload_of_the_wrong_class_is_refused_before_any_queue_is_touched() -> None:
    topic, queues = make_topic(*SUBSCRIBERS)
    receipt = shop.ReceiptPayload(order_id=1001, email="customer@example.com")
    with pytest.raises(PayloadError) as info:
        topic.publish("paid-1001", receipt)  # type: ignore[arg-type]
    assert str(info.value) == f"topic 'order.paid' carries OrderPaid payloads, got {receipt!r}"
    assert [len(queue) for queue in queues.values()] == [0, 0, 0]


@dataclass(frozen=True)
class Reading:
    celsius: float


def test_a_payload_that_cannot_be_stored_is_refused_before_any_queue_is_touched() -> None:
    topic: Topic[Reading] = Topic("reading.taken", Reading)
    queues = {name: JobQueue(clock=ManualClock()) for name in ("dashboard", "alerts")}
    for name, queue in queues.items():
        topic.subscribe(name, queue, JobType(f"{name}.reading", Reading))
    topic.publish("reading-1", Reading(celsius=21.5))
    before = snapshot(queues)
    with pytest.raises(PayloadError, match="nan in celsius"):  # JSON has no NaN
        topic.publish("reading-2", Reading(celsius=math.nan))
    assert snapshot(queues) == before
    assert [len(queue) for queue in queues.values()] == [1, 1]


def test_publishing_with_no_subscribers_adds_nothing_but_still_validates() -> None:
    topic, _ = make_topic()
    assert topic.publish("paid-1001", PAID_1001) == Published(event_id="paid-1001", added=(), skipped=())
    with pytest.raises(PayloadError):
        topic.publish("paid-1001", "order 1001 paid")  # type: ignore[arg-type]


# -- what the queue's deduplication does and does not cover ------------------------------


def test_a_repeat_publish_skips_a_dead_copy_but_remakes_an_acked_one() -> None:
    topic, queues = make_topic("email", "loyalty")
    topic.publish("paid-1001", PAID_1001)
    email, loyalty = queues["email"], queues["loyalty"]
    lease = email.claim()
    assert lease is not None
    email.fail(lease, "bad address", permanent=True)  # dead: the queue still knows the id
    lease = loyalty.claim()
    assert lease is not None
    loyalty.ack(lease)  # done: the queue forgets the id
    again = topic.publish("paid-1001", PAID_1001)
    assert again.added == ("paid-1001:loyalty",)  # the loyalty consumer must be idempotent (lesson 07)
    assert again.skipped == ("paid-1001:email",)
    assert len(email) == 0 and [d.job.id for d in email.dead_letters()] == ["paid-1001:email"]


def test_a_subscribers_copies_can_finish_out_of_order_when_one_is_retried() -> None:
    clock = ManualClock()
    queue = JobQueue(clock=clock, random=lambda: 1.0)
    loyalty = job_type("loyalty")
    topic: Topic[OrderPaid] = Topic("order.paid", OrderPaid)
    topic.subscribe("loyalty", queue, loyalty)
    for event in (PAID_1001, PAID_1002, OrderPaid(order_id=1003, customer_id=7, total_kobo=2_042_500)):
        topic.publish(f"paid-{event.order_id}", event)
    points: dict[int, int] = {}
    seen: list[int] = []

    async def credit(event: OrderPaid) -> None:
        seen.append(event.order_id)
        if seen.count(1001) == 1 and event.order_id == 1001:
            raise TimeoutError("loyalty database timed out")
        points[event.customer_id] = points.get(event.customer_id, 0) + shop.loyalty_points(event.total_kobo)

    worker = Worker(queue)
    worker.register(loyalty, credit)

    async def run() -> list[JobEvent]:
        events: list[JobEvent] = []
        for _ in range(3):
            events += await worker.drain()
            clock.advance(1)
        return events

    events = asyncio.run(run())
    assert [str(e) for e in events] == [
        "t=0s paid-1001:loyalty attempt 1: failed, retry at t=1s (TimeoutError: loyalty database timed out)",
        "t=0s paid-1002:loyalty attempt 1: done",
        "t=0s paid-1003:loyalty attempt 1: done",
        "t=1s paid-1001:loyalty attempt 2: done",
    ]
    assert [e.job_id for e in events if e.outcome == "done"] == [
        "paid-1002:loyalty",
        "paid-1003:loyalty",
        "paid-1001:loyalty",
    ]
    assert points == {7: 408, 8: 204}
