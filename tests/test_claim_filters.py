"""Claim filters and rolling deploys (issue 21, point 5), on every backend.

- ``claim_many(limit, types=...)`` (and ``claim``, ``ack_and_claim``) takes only jobs of
  the named types, in the usual claim order; the others keep their places; an empty filter
  claims nothing; a bad filter is refused, naming it;
- a :class:`Worker` claims only the types it has handlers for: during a rolling deploy two
  versions' workers share one queue, each runs only its own types, and nothing is
  dead-lettered (on PostgreSQL, two queue objects on one database, as two processes).

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, on a manual clock.
"""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from backends_support import BACKENDS, open_queue

from jobqueue import InvalidSettingError, JobType, ManualClock, Runner, Worker
from jobqueue.backends.contract import Queue, ack_then_claim, check_types
from jobqueue.backends.duckdb import DurableQueue

T0 = 1_000.0


@dataclass(frozen=True)
class Mail:
    n: int


SEND_RECEIPT = JobType("send_receipt", Mail)
SEND_SMS = JobType("send_sms", Mail)  # the new version's type
RENDER_INVOICE = JobType("render_invoice", Mail)


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    with open_queue(
        request.param, request, tmp_path_factory.mktemp("filters") / "q.duckdb", clock=ManualClock(T0)
    ) as opened:
        yield opened


def fill(queue: Queue) -> None:
    """Six jobs in claim order r1 s1 i1 r2 s2 i2 (one per second), all due."""
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    for n in (1, 2):
        for job_type, prefix in ((SEND_RECEIPT, "r"), (SEND_SMS, "s"), (RENDER_INVOICE, "i")):
            queue.enqueue(job_type, Mail(n), id=f"{prefix}{n}")
            clock.advance(1)


def ids(leases: list) -> list[str]:  # type: ignore[type-arg]
    return [lease.job.id for lease in leases]


def test_check_types_takes_a_collection_of_names_and_refuses_the_rest() -> None:
    assert check_types(None) is None
    assert check_types(["a", "b", "a"]) == {"a", "b"}
    assert check_types(()) == frozenset()
    for bad in ["send_sms", b"x", 3]:
        with pytest.raises(InvalidSettingError, match="collection of job type names"):
            check_types(bad)  # type: ignore[arg-type]
    for name in ["", None, 7]:
        with pytest.raises(InvalidSettingError, match=repr(name)):
            check_types(["ok", name])  # type: ignore[list-item]


def test_a_filtered_claim_takes_only_those_types_in_claim_order_and_the_rest_keep_their_places(
    queue: Queue,
) -> None:
    fill(queue)
    assert ids(queue.claim_many(10, types={"send_receipt", "render_invoice"})) == ["r1", "i1", "r2", "i2"]
    lease = queue.claim(types=["send_sms"])
    assert lease is not None and lease.job.id == "s1" and lease.job.attempts == 1
    assert ids(queue.claim_many(10)) == ["s2"]  # no filter: the one left
    assert queue.dead_letters() == []


def test_an_empty_filter_claims_nothing_and_a_bad_one_changes_nothing(queue: Queue) -> None:
    fill(queue)
    assert queue.claim_many(5, types=[]) == []
    assert queue.claim(types=set()) is None
    with pytest.raises(InvalidSettingError, match="'send_sms'"):
        queue.claim_many(5, types="send_sms")
    assert all(job.attempts == 0 for job in queue.jobs())
    assert len(queue.claim_many(10)) == 6


def test_a_filtered_claim_buries_only_its_own_types_final_jobs(queue: Queue) -> None:
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    expiring = JobType("send_sms", Mail, expires_after_s=5.0)
    queue.enqueue(expiring, Mail(1), id="s1")
    queue.enqueue(SEND_RECEIPT, Mail(1), id="r1")
    clock.advance(10)
    assert ids(queue.claim_many(5, types=["send_receipt"])) == ["r1"]
    assert queue.dead_letters() == []  # s1 is past its deadline, but not this claim's to bury
    assert queue.claim(types=["send_sms"]) is None
    assert [dead.job.id for dead in queue.dead_letters()] == ["s1"]


def test_ack_and_claim_with_a_filter(queue: Queue) -> None:
    fill(queue)
    first = queue.claim_many(1, types=["render_invoice"])
    assert ids(first) == ["i1"]
    if isinstance(queue, DurableQueue):  # acks and claims in one transaction
        stale, claimed = queue.ack_and_claim(first, 5, types=["render_invoice"])
    else:
        stale, claimed = ack_then_claim(queue, first, 5, types=["render_invoice"])
    assert (stale, ids(claimed)) == ([], ["i2"])
    assert queue.get("i1") is None


def _worker(queue: Queue, ran: list[str], *job_types: JobType[Mail]) -> Worker:
    worker = Worker(queue)
    for job_type in job_types:

        async def handle(mail: Mail, name: str = job_type.name) -> None:
            ran.append(f"{name}-{mail.n}")

        worker.register(job_type, handle)
    return worker


def test_during_a_rolling_deploy_old_workers_leave_the_new_types_to_new_workers(queue: Queue) -> None:
    fill(queue)
    old_ran: list[str] = []
    old = _worker(queue, old_ran, SEND_RECEIPT, RENDER_INVOICE)  # the version before send_sms
    events = asyncio.run(old.drain())
    assert old_ran == ["send_receipt-1", "render_invoice-1", "send_receipt-2", "render_invoice-2"]
    assert {event.outcome for event in events} == {"done"}
    assert [(job.id, job.attempts) for job in queue.jobs()] == [("s1", 0), ("s2", 0)]
    new_ran: list[str] = []
    asyncio.run(_worker(queue, new_ran, SEND_RECEIPT, SEND_SMS, RENDER_INVOICE).drain())
    assert new_ran == ["send_sms-1", "send_sms-2"]
    assert len(queue) == 0 and queue.dead_letters() == []


def test_two_runners_with_different_handlers_share_one_postgres_queue_each_running_its_own(
    pg_conninfo: str,
) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    clock = ManualClock(T0)
    with (
        PostgresQueue(pg_conninfo, clock=clock) as old_queue,
        PostgresQueue(pg_conninfo, clock=clock) as new_queue,
    ):
        for n in range(1, 21):
            old_queue.enqueue(SEND_RECEIPT, Mail(n), id=f"r{n}")
            new_queue.enqueue(SEND_SMS, Mail(n), id=f"s{n}")
        old_ran: list[str] = []
        new_ran: list[str] = []
        old = _worker(old_queue, old_ran, SEND_RECEIPT)  # no handler for send_sms
        new = _worker(new_queue, new_ran, SEND_SMS)

        async def both() -> None:
            await asyncio.gather(
                Runner(old, concurrency=3, prefetch=4).run(until_idle=True),
                Runner(new, concurrency=3, prefetch=4).run(until_idle=True),
            )

        asyncio.run(both())
        assert sorted(old_ran) == sorted(f"send_receipt-{n}" for n in range(1, 21))
        assert sorted(new_ran) == sorted(f"send_sms-{n}" for n in range(1, 21))
        assert {event.outcome for event in old.events + new.events} == {"done"}
        assert len(old_queue) == 0 and old_queue.dead_letters() == []
