"""What only a durable queue has: a DuckDB file that outlives the process.

Checked here, against :class:`jobqueue.backends.duckdb.DurableQueue` on a real file:

- a restart (close, then a new queue object on the same file) finds every job as it was:
  state, attempts, ``run_at``, ``leased_until``, ``last_error``, the dead letters; lease
  tokens and auto ids (``job-N``) keep increasing instead of starting over;
- a lease held when the process ends without an ack is handed out again after the
  visibility timeout (as attempt 2), and not before;
- a second process cannot open the file (``QueueFileLockedError`` naming the file and the
  process that holds it), and can once that process has ended;
- a payload corrupted in the file is caught when read: the worker dead-letters the job with
  a ``PayloadError`` reason and carries on with the next job;
- the batch calls: ``enqueue_many`` (all or nothing, duplicate ids, length mismatch),
  ``claim_many`` (order, limit checks), ``ack_many`` (returns exactly the stale leases and
  acks the rest in one transaction), ``ack_and_claim`` (the acks and the next claim in one
  commit, or neither); ``release``;
- ``metrics(window_s)`` on a scene built by hand, before and after a reopen;
- bad settings and windows are refused with the value named.
- priorities and deadlines (lesson 13): the scene of ``tests/test_queue.py`` gives what
  the in-memory queue gives and survives a reopen; a file without their columns gains
  them; claims order by priority after a reopen and a replay; a corrupt priority is
  dead-lettered naming it.

The contract both queues share (claims, retries, dead letters, replay) is checked by the
state machine in ``tests/test_queue_state_machine.py``; the SIGKILL trials are in
``tests/test_durable_kill.py``.
"""

import asyncio
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from jobqueue import (
    Backoff,
    InvalidSettingError,
    Job,
    JobQueue,
    ManualClock,
    PayloadError,
    PermanentJobError,
    RetryPolicy,
    StaleLeaseError,
    Worker,
)
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.errors import QueueFileLockedError
from jobqueue.examples.shop import RENDER_INVOICE, SEND_RECEIPT, InvoicePayload, ReceiptPayload
from jobqueue.metrics import QueueMetrics

T0 = 1_000.0
"""Start of every scene, in seconds (any value works; not 0, to catch a lost offset)."""

RECEIPT = ReceiptPayload(order_id=1001, email="customer@example.com")


def invoice(order_id: int) -> InvoicePayload:
    return InvoicePayload(order_id=order_id)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A queue file that does not exist yet."""
    return tmp_path / "jobs.duckdb"


def open_queue(path: Path | str, clock: ManualClock, **kwargs: Any) -> DurableQueue:
    """A durable queue with the largest retry delays (``random`` fixed at 1.0)."""
    kwargs.setdefault("random", lambda: 1.0)
    return DurableQueue(path, clock=clock, **kwargs)


def snapshot(queue: DurableQueue) -> tuple[object, ...]:
    """Everything the queue shows about itself; equal before and after a call that changed nothing."""
    return (queue.jobs(), queue.dead_letters(), len(queue), queue.next_visible_at())


class CountingConnection:
    """A DuckDB connection that records the first word of every statement it runs."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, *args: Any) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql.split()[0])
        return self.con.execute(sql, *args)


def number(name: str, prefix: str) -> int:
    """The serial number in ``lease-7-<queue tag>`` or ``job-7``."""
    assert name.startswith(prefix), name
    return int(name.removeprefix(prefix).split("-")[0])


# -- restarts ------------------------------------------------------------------------


def test_a_reopened_file_holds_every_job_and_dead_letter_as_it_was(path: Path) -> None:
    retry = RetryPolicy(max_attempts=3, backoff=Backoff(base_s=4, cap_s=8))
    clock = ManualClock(T0)
    with open_queue(path, clock, retry=retry) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 6)])  # job-1 .. job-5
        queue.enqueue(SEND_RECEIPT, RECEIPT, id="receipt-1001")
        done, held, retried, doomed = queue.claim_many(4)  # job-1 .. job-4, leases until T0 + 30
        queue.ack(done)
        clock.advance(2)
        assert queue.fail(retried, RuntimeError("mail provider down")).outcome == "retry"  # first delay: 4 s
        assert queue.fail(doomed, PermanentJobError("no such order"), permanent=True).outcome == "dead"
        before = snapshot(queue)
        tokens = [done.token, held.token, retried.token, doomed.token]

    with open_queue(path, ManualClock(T0 + 2), retry=retry) as queue:
        assert snapshot(queue) == before
        # The same records, by hand: nothing was rounded, dropped or reset on the way.
        policy: dict[str, Any] = {"max_attempts": 3, "backoff": Backoff(base_s=4, cap_s=8)}
        assert queue.jobs() == [
            Job(id="job-5", type="render_invoice", payload='{"order_id":5}', run_at=T0, **policy),
            Job(
                id="receipt-1001",
                type="send_receipt",
                payload='{"order_id":1001,"email":"customer@example.com"}',
                run_at=T0,
                **policy,
            ),
            Job(
                id="job-3",
                type="render_invoice",
                payload='{"order_id":3}',
                attempts=1,
                run_at=T0 + 2 + 4,
                last_error="RuntimeError: mail provider down",
                **policy,
            ),
            Job(
                id="job-2",
                type="render_invoice",
                payload='{"order_id":2}',
                attempts=1,
                run_at=T0,
                leased_until=T0 + 30,
                leased_at=T0,
                **policy,
            ),
        ]
        [dead] = queue.dead_letters()
        assert dead.died_at == T0 + 2
        assert dead.job == Job(
            id="job-4",
            type="render_invoice",
            payload='{"order_id":4}',
            attempts=1,
            run_at=T0,
            last_error="PermanentJobError: no such order",
            **policy,
        )
        assert queue.get("job-1") is None  # acked before the restart: gone for good
        assert queue.next_visible_at() == T0

        # The lease taken before the restart is still the job's lease: its ack counts.
        queue.ack(held)
        assert queue.get("job-2") is None

        # Counters carry on: no lease token and no auto id is handed out twice.
        new_lease = queue.claim()
        assert new_lease is not None
        assert new_lease.job.id == "job-5"
        assert number(new_lease.token, "lease-") > max(number(token, "lease-") for token in tokens)
        added = queue.enqueue(RENDER_INVOICE, invoice(6))
        assert number(added.id, "job-") > 5  # job-1 is free in the table again, yet not reused
        last_token = new_lease.token

    with open_queue(path, ManualClock(T0 + 2), retry=retry) as queue:  # a second restart changes nothing
        assert queue.get(added.id) == added
        assert queue.get("job-5") == new_lease.job
        another = queue.claim()
        assert another is not None
        assert number(another.token, "lease-") > number(last_token, "lease-")
        assert number(queue.enqueue(RENDER_INVOICE, invoice(7)).id, "job-") > number(added.id, "job-")


def test_a_lease_held_when_the_process_ends_is_handed_out_again_after_the_timeout(path: Path) -> None:
    with open_queue(path, ManualClock(T0), visibility_timeout_s=30) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")
        lost = queue.claim()
        assert lost is not None
        # The process "dies": the queue is closed with the job neither acked nor failed.

    clock = ManualClock(T0 + 29.5)
    with open_queue(path, clock, visibility_timeout_s=30) as queue:
        assert queue.claim() is None  # the old lease still hides it
        job = queue.get("invoice-1")
        assert job is not None
        assert (job.attempts, job.leased_until) == (1, T0 + 30)

        clock.advance(0.5)  # exactly at the lease's end
        again = queue.claim()
        assert again is not None
        assert again.job.id == "invoice-1"
        assert again.job.attempts == 2
        assert again.job.leased_until == T0 + 60
        assert again.token != lost.token
        with pytest.raises(StaleLeaseError, match=lost.token):
            queue.ack(lost)  # the first attempt's word no longer counts
        queue.ack(again)
        assert len(queue) == 0


# -- one process per file ------------------------------------------------------------

HOLD_THE_FILE = """
import sys, time
from jobqueue.backends.duckdb import DurableQueue

queue = DurableQueue(sys.argv[1])
print("ready", flush=True)
time.sleep(3600)  # killed by the test
"""


def test_a_second_process_cannot_open_the_file_until_the_first_has_ended(path: Path) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")

    with subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_FILE, str(path)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == "ready\n"
            with pytest.raises(QueueFileLockedError) as info:
                DurableQueue(path, clock=ManualClock(T0))
            message = str(info.value)
            assert str(path) in message
            assert "another process has it open" in message
            assert f"PID {holder.pid}" in message  # DuckDB names the holder
        finally:
            holder.kill()
            holder.wait()

    with open_queue(path, ManualClock(T0)) as queue:
        assert [job.id for job in queue.jobs()] == ["invoice-1"]


# -- payloads are validated when read -----------------------------------------------


def test_a_payload_corrupted_in_the_file_is_dead_lettered_and_the_worker_carries_on(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="wrong-field")
        queue.enqueue(RENDER_INVOICE, invoice(2), id="not-json")
    with duckdb.connect(str(path)) as con:  # someone edits the table by hand
        con.execute(
            "UPDATE jobqueue_jobs SET payload = '{\"order_id\": \"not a number\"}' WHERE id = 'wrong-field'"
        )
        con.execute("UPDATE jobqueue_jobs SET payload = '{\"order_id\": 2' WHERE id = 'not-json'")

    rendered: list[InvoicePayload] = []

    async def render(payload: InvoicePayload) -> None:
        rendered.append(payload)

    clock.advance(1)
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(3), id="good")  # after the bad ones
        worker = Worker(queue)
        worker.register(RENDER_INVOICE, render)
        events = asyncio.run(worker.drain())

        assert [(event.job_id, event.outcome) for event in events] == [
            ("wrong-field", "dead"),
            ("not-json", "dead"),
            ("good", "done"),
        ]
        assert rendered == [invoice(3)]
        assert len(queue) == 0
        dead = {letter.job.id: letter.job for letter in queue.dead_letters()}
        assert sorted(dead) == ["not-json", "wrong-field"]
        assert dead["wrong-field"].last_error == (
            "PayloadError: invalid 'render_invoice' payload '{\"order_id\": \"not a number\"}':"
            " order_id: Input should be a valid integer"
        )
        not_json = dead["not-json"].last_error
        assert not_json is not None
        assert not_json.startswith("PayloadError: invalid 'render_invoice' payload '{\"order_id\": 2':")
        assert "Invalid JSON" in not_json
        # A permanent failure: one attempt, and the stored text is kept for whoever looks into it.
        assert (dead["wrong-field"].attempts, dead["not-json"].attempts) == (1, 1)
        assert dead["not-json"].payload == '{"order_id": 2'

    with pytest.raises(PayloadError):  # the same check a worker makes, on the record as returned
        RENDER_INVOICE.parse(dead["wrong-field"].payload)


# -- enqueue_many --------------------------------------------------------------------


def test_enqueue_many_adds_nothing_when_one_payload_is_invalid(path: Path) -> None:
    clock = ManualClock(T0)
    wrong: Any = RECEIPT  # a receipt payload for an invoice job
    not_a_number: Any = math.nan
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")
        before = snapshot(queue)
        with pytest.raises(PayloadError, match="ReceiptPayload"):
            queue.enqueue_many(RENDER_INVOICE, [invoice(2), wrong, invoice(4)])
        with pytest.raises(PayloadError, match=r"\bnan\b"):
            queue.enqueue_many(RENDER_INVOICE, [invoice(2), invoice(not_a_number)], ids=["a", "b"])
        assert snapshot(queue) == before
        # The refused batches used up no auto id either.
        assert queue.enqueue(RENDER_INVOICE, invoice(5)).id == "job-1"
        after = snapshot(queue)
    with open_queue(path, clock) as queue:
        assert snapshot(queue) == after
        assert [job.id for job in queue.jobs()] == ["invoice-1", "job-1"]


def test_enqueue_many_returns_the_existing_record_for_an_id_already_held(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="dead")
        doomed = queue.claim()
        assert doomed is not None
        assert queue.fail(doomed, "PermanentJobError: no such order", permanent=True).outcome == "dead"
        queue.enqueue(RENDER_INVOICE, invoice(2), id="leased")
        held = queue.claim()
        assert held is not None
        queue.enqueue(RENDER_INVOICE, invoice(3), id="waiting")
        live = {job.id: job for job in queue.jobs()}
        [dead] = queue.dead_letters()
        clock.advance(1)

        returned = queue.enqueue_many(
            RENDER_INVOICE,
            [invoice(10), invoice(11), invoice(12), invoice(13), invoice(14), invoice(15)],
            ids=["waiting", "new", "dead", "new", "leased", "waiting"],
        )
        new = Job(id="new", type="render_invoice", payload='{"order_id":11}', run_at=T0 + 1)
        assert returned == [live["waiting"], new, dead.job, new, live["leased"], live["waiting"]]
        assert len(queue) == 3
        assert queue.get("new") == new  # the first payload under a repeated id wins
        assert {job.id: job for job in queue.jobs() if job.id != "new"} == live  # untouched
        assert queue.dead_letters() == [dead]
        # Another job type under a held id is no different: the held job is returned.
        assert queue.enqueue(SEND_RECEIPT, RECEIPT, id="leased") == live["leased"]
        queue.ack(held)  # and the holder's lease is as good as before

    with open_queue(path, clock) as queue:  # the ids are still known after a restart
        before = snapshot(queue)
        assert queue.enqueue_many(RENDER_INVOICE, [invoice(20), invoice(21)], ids=["new", "dead"]) == [
            new,
            dead.job,
        ]
        assert snapshot(queue) == before


def test_enqueue_many_refuses_ids_of_another_length(path: Path) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        before = snapshot(queue)
        with pytest.raises(InvalidSettingError, match="2 ids for 3 payloads"):
            queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2), invoice(3)], ids=["a", "b"])
        with pytest.raises(InvalidSettingError, match="1 ids for 0 payloads"):
            queue.enqueue_many(RENDER_INVOICE, [], ids=["a"])
        assert snapshot(queue) == before


# -- claim_many, ack_many, release ---------------------------------------------------


def test_claim_many_hands_out_the_longest_claimable_jobs_first(path: Path) -> None:
    retry = RetryPolicy(backoff=Backoff(base_s=2, cap_s=2))  # every retry delay is 2 s
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=10, retry=retry) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="lease-ran-out")
        assert queue.claim() is not None  # leased until T0 + 10, then never acked
        clock.advance(1)
        queue.enqueue(RENDER_INVOICE, invoice(2), id="retried")
        first_try = queue.claim()
        assert first_try is not None
        assert queue.fail(first_try, "ConnectionError: timed out").outcome == "retry"  # claimable from T0 + 3
        clock.advance(1)
        queue.enqueue(RENDER_INVOICE, invoice(3), id="busy")
        busy = queue.claim()
        assert busy is not None
        queue.extend_lease(busy, by_s=100)  # held until T0 + 102
        clock.advance(3)
        queue.enqueue_many(RENDER_INVOICE, [invoice(5), invoice(4)], ids=["new-b", "new-a"])  # T0 + 5
        clock.advance(15)  # T0 + 20

    with open_queue(path, clock, visibility_timeout_s=10, retry=retry) as queue:  # order survives a restart
        first = queue.claim_many(3)
        assert [(lease.job.id, lease.job.attempts) for lease in first] == [
            ("retried", 2),  # claimable since T0 + 3
            ("new-b", 1),  # T0 + 5, enqueued before new-a in the same batch
            ("new-a", 1),
        ]
        assert [(lease.job.id, lease.job.attempts) for lease in queue.claim_many(10)] == [
            ("lease-ran-out", 2)
        ]
        assert queue.claim_many(10) == []  # "busy" is still held, the rest are leased now
        assert all(lease.job.leased_until == T0 + 30 for lease in first)
        assert len({lease.token for lease in first}) == 3


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_claim_many_refuses_a_limit_that_is_not_a_count(path: Path, limit: Any) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1))
        before = snapshot(queue)
        with pytest.raises(InvalidSettingError) as info:
            queue.claim_many(limit)
        assert "limit" in str(info.value)
        assert f"got {limit!r}" in str(info.value)
        assert snapshot(queue) == before


def test_ack_many_acks_every_lease_still_held_in_one_transaction_and_returns_the_stale_ones(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=10) as queue:
        queue.enqueue_many(
            RENDER_INVOICE, [invoice(n) for n in range(1, 6)], ids=[f"i{n}" for n in range(1, 6)]
        )
        lost, acked = queue.claim_many(2)  # leased until T0 + 10
        clock.advance(1)
        held = queue.claim_many(3)  # i3 .. i5, leased until T0 + 11
        queue.ack(acked)  # its lease is stale from now on: the job is gone
        clock.advance(9)  # T0 + 10: the first lease has run out...
        again = queue.claim()  # ... and i1 was claimed again
        assert again is not None
        assert again.job.id == "i1"

        queue.metrics()  # writes the outcome counts of this second, so ack_many need not
        counting = CountingConnection(queue._con)
        monkeypatch.setattr(queue, "_con", counting)
        batch = [held[0], lost, held[1], acked, held[2]]
        stale = queue.ack_many(batch)
        assert counting.statements == ["DELETE"]  # one statement, which DuckDB commits on its own
        assert stale == [lost, acked]
        monkeypatch.undo()

        assert [job.id for job in queue.jobs()] == ["i1"]  # i3 .. i5 acked
        assert queue.get("i1") == again.job  # the stale lease changed nothing
        assert queue.metrics().done == 4  # acked one by one, then three in the batch
        assert queue.ack_many([again, again]) == [again]  # the second copy finds the job gone
        assert queue.ack_many([]) == []
        assert queue.ack_many(held) == held  # all stale: nothing changes
        assert len(queue) == 0
        assert queue.metrics().done == 5


def test_ack_and_claim_acks_then_claims_in_one_commit(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=10) as queue:
        queue.enqueue_many(
            RENDER_INVOICE, [invoice(n) for n in range(1, 7)], ids=[f"i{n}" for n in range(1, 7)]
        )
        first, second = queue.claim_many(2)
        queue.ack(second)  # its lease is stale from now on
        queue.metrics()  # writes the outcome counts of this second, so the call need not
        counting = CountingConnection(queue._con)
        monkeypatch.setattr(queue, "_con", counting)
        stale, claimed = queue.ack_and_claim([first, second], 3)
        assert counting.statements.count("COMMIT") == 1
        assert counting.statements[:2] == ["BEGIN", "DELETE"]  # the acks first, then the claim
        monkeypatch.undo()
        assert stale == [second]
        assert [lease.job.id for lease in claimed] == ["i3", "i4", "i5"]
        assert sorted(job.id for job in queue.jobs()) == ["i3", "i4", "i5", "i6"]
        assert queue.metrics().done == 2

        stale, none = queue.ack_and_claim(claimed, 0)  # limit 0: only the acks
        assert (stale, none) == ([], [])
        stale, last = queue.ack_and_claim([], 5)  # nothing to ack: only the claim
        assert stale == [] and [lease.job.id for lease in last] == ["i6"]
        assert queue.ack_and_claim(last, 5) == ([], [])  # acked, and nothing left to claim
        assert len(queue) == 0
        with pytest.raises(InvalidSettingError, match="-1"):
            queue.ack_and_claim([], -1)


def test_ack_and_claim_that_fails_writes_no_ack(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # At-least-once: the acks and the claim commit together or not at all, so a failure
    # (or a crash) before the commit leaves the finished jobs leased; they run again after
    # their leases, and none is lost.
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=10) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 4)], ids=["i1", "i2", "i3"])
        done = queue.claim_many(2)

        def broken(*args: object) -> list[Any]:
            raise duckdb.IOException("disk gone")

        monkeypatch.setattr(queue, "_lease", broken)
        with pytest.raises(duckdb.IOException, match="disk gone"):
            queue.ack_and_claim(done, 1)
        monkeypatch.undo()
        assert sorted(job.id for job in queue.jobs()) == ["i1", "i2", "i3"]
        clock.advance(10)
        again = queue.claim_many(3)
        assert sorted((lease.job.id, lease.job.attempts) for lease in again) == [
            ("i1", 2),
            ("i2", 2),
            ("i3", 1),
        ]


def test_a_claim_updates_its_rows_in_place(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # DuckDB runs an UPDATE ... RETURNING as a delete and an insert: it moves the rows and
    # cost 5 ms per 100 at 1k waiting, 26 ms at 1M. The claim updates in place, then reads.
    with open_queue(path, ManualClock(T0)) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 6)])
        where = dict(queue._con.execute("SELECT id, rowid FROM jobqueue_jobs").fetchall())
        counting = CountingConnection(queue._con)
        monkeypatch.setattr(queue, "_con", counting)
        leases = queue.claim_many(3)
        monkeypatch.undo()
        assert [lease.job.id for lease in leases] == ["job-1", "job-2", "job-3"]
        assert dict(queue._con.execute("SELECT id, rowid FROM jobqueue_jobs").fetchall()) == where
        # the due read, then a transaction: the update, the read back, the guard, the commit
        assert counting.statements == ["SELECT", "BEGIN", "UPDATE", "SELECT", "SELECT", "COMMIT"]


def test_release_gives_the_job_back_due_now_without_counting_the_attempt(path: Path) -> None:
    retry = RetryPolicy(backoff=Backoff(base_s=2, cap_s=2))
    clock = ManualClock(T0)
    with open_queue(path, clock, retry=retry) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["first", "second"])
        lease = queue.claim()
        assert lease is not None
        assert (
            queue.fail(lease, "ConnectionError: timed out").outcome == "retry"
        )  # "first": claimable at T0 + 2
        clock.advance(5)
        second, first = queue.claim_many(2)
        assert (first.job.id, first.job.attempts) == ("first", 2)
        clock.advance(3)  # T0 + 8, both held until T0 + 35

        given_back = queue.release(first)
        assert given_back == replace(first.job, attempts=1, run_at=T0 + 8, leased_until=None, leased_at=None)
        assert queue.get("first") == given_back
        assert given_back.last_error == "ConnectionError: timed out"  # kept, for the record
        assert queue.next_visible_at() == T0 + 8  # claimable now, not after the lease
        assert queue.metrics().failed == 1  # a release is not a failure

    with open_queue(path, clock, retry=retry) as queue:
        assert queue.get("first") == given_back
        again = queue.claim()
        assert again is not None
        assert (again.job.id, again.job.attempts) == ("first", 2)
        with pytest.raises(StaleLeaseError):
            queue.ack(first)  # the released lease is stale
        assert queue.get("second") == second.job


def test_a_stale_release_raises_and_changes_nothing(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=10) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["lost", "done"])
        lost, done = queue.claim_many(2)
        queue.ack(done)
        clock.advance(10)
        current = queue.claim()  # the lease on "lost" ran out and it was claimed again
        assert current is not None
        before = snapshot(queue)
        with pytest.raises(StaleLeaseError, match=f"held now as {current.token}"):
            queue.release(lost)
        with pytest.raises(StaleLeaseError, match="no longer in the queue"):
            queue.release(done)
        assert snapshot(queue) == before
        assert queue.release(current).attempts == 1
        before = snapshot(queue)
        with pytest.raises(StaleLeaseError, match="not leased now"):
            queue.release(current)  # released twice
        assert snapshot(queue) == before


# -- metrics -------------------------------------------------------------------------


def test_metrics_of_a_scene_built_by_hand_survive_a_restart(path: Path) -> None:
    retry = RetryPolicy(backoff=Backoff(base_s=10, cap_s=10))  # every retry delay is 10 s
    clock = ManualClock(T0)
    with open_queue(path, clock, visibility_timeout_s=30, retry=retry) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 7)], ids=list("abcdef"))
        a, b, c = queue.claim_many(3)  # held until T0 + 30
        clock.advance(2)
        queue.ack(a)  # done in second T0 + 2
        clock.advance(2)
        assert (
            queue.fail(b, "ConnectionError: timed out").outcome == "retry"
        )  # failed at T0 + 4, back at T0 + 14
        assert queue.fail(c, "PermanentJobError: no such order", permanent=True).outcome == "dead"  # T0 + 4
        clock.advance(2)
        d = queue.claim()  # held until T0 + 36
        assert d is not None
        assert d.job.id == "d"
        clock.advance(2)
        queue.enqueue(RENDER_INVOICE, invoice(7), id="g")  # T0 + 8
        clock.advance(2)  # T0 + 10

        # waiting: e, f (since T0) and g (since T0 + 8); scheduled: b; leased: d; dead: c.
        expected = QueueMetrics(
            at=T0 + 10,
            waiting=3,
            scheduled=1,
            leased=1,
            oldest_waiting_age_s=10.0,
            oldest_leased_age_s=4.0,  # d, claimed at T0 + 6
            oldest_enqueued_age_s=10.0,  # e, f and b (in backoff), enqueued at T0
            window_s=300.0,
            done=1,
            failed=2,
            dead_letters=1,
        )
        assert queue.metrics() == expected
        assert queue.metrics().failure_rate == pytest.approx(2 / 3)
        # A window of 7 s reaches back to second T0 + 3: the ack at T0 + 2 is outside it.
        narrow = queue.metrics(7)
        assert (narrow.done, narrow.failed, narrow.failure_rate) == (0, 2, 1.0)
        assert queue.metrics(8).done == 1

    # The outcomes were counted in memory; closing wrote them to the file.
    with open_queue(path, ManualClock(T0 + 10), visibility_timeout_s=30, retry=retry) as queue:
        assert queue.metrics() == expected

    # Later: b's delay and d's lease are over, so everything left is waiting.
    with open_queue(path, ManualClock(T0 + 40), visibility_timeout_s=30, retry=retry) as queue:
        later = queue.metrics(window_s=60)
        assert (later.waiting, later.scheduled, later.leased, later.oldest_waiting_age_s) == (5, 0, 0, 40.0)
        assert (later.done, later.failed, later.dead_letters) == (1, 2, 1)
        recent = queue.metrics(window_s=35)  # from second T0 + 5: nothing finished since
        assert (recent.done, recent.failed, recent.failure_rate) == (0, 0, 0.0)


def test_a_fail_that_raises_changes_no_count(path: Path) -> None:
    draws = iter([1.0, 2.0])  # the second retry delay draws an impossible random number
    clock = ManualClock(T0)
    with DurableQueue(path, clock=clock, random=lambda: next(draws)) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1, 5)])
        first, second, third, fourth = queue.claim_many(4)
        queue.ack(first)
        clock.advance(0.5)
        queue.ack(second)  # same second: counted in memory, not written yet
        assert queue.fail(third, "ConnectionError: timed out").outcome == "retry"
        clock.advance(1)
        before = snapshot(queue)
        with pytest.raises(InvalidSettingError, match="random"):
            queue.fail(fourth, "ConnectionError: timed out")
        assert snapshot(queue) == before
        metrics = queue.metrics()
        assert (metrics.done, metrics.failed) == (2, 1)


@pytest.mark.parametrize(
    ("window", "shown"), [(0, "0"), (-1, "-1"), (86_400.5, "86400.5"), (math.nan, "nan")]
)
def test_metrics_refuses_a_window_out_of_range(path: Path, window: float, shown: str) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        with pytest.raises(InvalidSettingError) as info:
            queue.metrics(window)
        assert "window_s" in str(info.value)
        assert f"got {shown}" in str(info.value)
        assert queue.metrics(86_400).window_s == 86_400  # a whole day is the longest window


# -- settings ------------------------------------------------------------------------


@pytest.mark.parametrize(("timeout", "shown"), [(0, "0"), (-1, "-1"), (math.nan, "nan"), (math.inf, "inf")])
def test_visibility_timeout_must_be_finite_and_positive(path: Path, timeout: float, shown: str) -> None:
    with pytest.raises(InvalidSettingError) as info:
        DurableQueue(path, clock=ManualClock(T0), visibility_timeout_s=timeout)
    assert "visibility_timeout_s" in str(info.value)
    assert f"got {shown}" in str(info.value)
    with open_queue(path, ManualClock(T0)) as queue:  # the refused queue did not keep the file
        assert queue.visibility_timeout_s == 30.0


def test_fresh_ids_skip_every_id_of_their_form_given_explicitly_live_or_dead(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="job-2")
        lease = queue.claim()
        assert lease is not None
        queue.fail(lease, "broken", permanent=True)  # job-2 is a dead letter now
        queue.enqueue_many(RENDER_INVOICE, [invoice(2)], ids=["job-4"])  # waiting
        queue.enqueue_many(RENDER_INVOICE, [invoice(3)], ids=["job-007"])  # not of the form: no effect
        fresh = [job.id for job in queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in (4, 5)])]
        assert fresh == ["job-5", "job-6"]
        assert queue.enqueue(RENDER_INVOICE, invoice(6), id="job-3").id == "job-3"  # below: no move
        assert queue.enqueue(RENDER_INVOICE, invoice(7)).id == "job-7"
    with open_queue(path, clock) as queue:  # the sequence's new start survives a restart
        assert number(queue.enqueue(RENDER_INVOICE, invoice(8)).id, "job-") > 7
        assert [dead.job.id for dead in queue.dead_letters()] == ["job-2"]


def test_a_file_written_before_with_a_given_id_ahead_of_the_sequence_is_caught_up_at_opening(
    path: Path,
) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1))  # job-1
        # As an older version left it: a given id ahead of the sequence, which it did not move.
        queue._con.execute("UPDATE jobqueue_jobs SET id = 'job-9' WHERE id = 'job-1'")
    with open_queue(path, ManualClock(T0)) as queue:
        assert queue.enqueue(RENDER_INVOICE, invoice(2)).id == "job-10"


def test_enqueue_many_with_fresh_ids_gives_equal_payloads_ids_in_order(path: Path) -> None:
    with open_queue(path, ManualClock(T0)) as queue:
        jobs = queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2), invoice(1), invoice(3)])
        assert [(job.id, job.payload) for job in jobs] == [
            ("job-1", '{"order_id":1}'),
            ("job-2", '{"order_id":2}'),
            ("job-3", '{"order_id":1}'),
            ("job-4", '{"order_id":3}'),
        ]
        assert queue.jobs() == jobs
        assert queue.enqueue_many(RENDER_INVOICE, []) == []


# -- priorities and deadlines (lesson 13) ---------------------------------------------


def test_the_priority_and_deadline_scene_matches_the_in_memory_queues(path: Path) -> None:
    from test_queue import priority_and_deadline_scene

    memory_clock, clock = ManualClock(T0), ManualClock(T0)
    memory = JobQueue(clock=memory_clock, random=lambda: 1.0)
    with open_queue(path, clock) as queue:
        assert priority_and_deadline_scene(queue, clock) == priority_and_deadline_scene(memory, memory_clock)
        assert queue.jobs() == memory.jobs()
        assert queue.dead_letters() == memory.dead_letters()
        expected = (queue.jobs(), queue.dead_letters())
    with open_queue(path, clock) as queue:  # priorities, deadlines and reasons are in the file
        assert (queue.jobs(), queue.dead_letters()) == expected


def test_a_file_written_before_priorities_gains_them_and_keeps_its_jobs(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["old-1", "old-2"])
        (lease,) = queue.claim_many(1)
        queue.fail(lease, "gone", permanent=True)  # old-1 is a dead letter
    con = duckdb.connect(str(path))  # back to the tables of lessons 11 to 13
    for table in ("jobqueue_jobs", "jobqueue_dead"):
        for column in ("priority", "expires_at", "expires_after_s"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("UPDATE jobqueue_schema SET version = 2")  # what those tables record
    con.close()
    with open_queue(path, clock) as queue:
        assert [(job.id, job.priority, job.expires_at) for job in queue.jobs()] == [("old-2", 0, None)]
        assert [(dead.job.id, dead.job.priority) for dead in queue.dead_letters()] == [("old-1", 0)]
        queue.enqueue(RENDER_INVOICE, invoice(3), id="new", priority=1)
        queue.replay("old-1")
        assert [lease.job.id for lease in queue.claim_many(3)] == ["new", "old-2", "old-1"]


def test_a_priority_corrupted_in_the_file_is_dead_lettered_naming_it(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["bad", "good"])
    con = duckdb.connect(str(path))
    con.execute("UPDATE jobqueue_jobs SET priority = 5000 WHERE id = 'bad'")
    con.close()
    with open_queue(path, clock) as queue:
        assert [lease.job.id for lease in queue.claim_many(2)] == ["good"]
        (dead,) = queue.dead_letters()
        assert dead.job.priority == 0  # the stand-in's, so that the dead letter reads back
        assert dead.job.last_error is not None and "priority" in dead.job.last_error
        assert "got 5000" in dead.job.last_error


def test_claims_order_by_priority_after_a_reopen_and_a_replay(path: Path) -> None:
    clock = ManualClock(T0)
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="urgent", priority=5)
        (lease,) = queue.claim_many(1)
        queue.fail(lease, "gone", permanent=True)  # the file's only priority-5 job is dead
        queue.enqueue_many(RENDER_INVOICE, [invoice(2), invoice(3)], ids=["older", "newer"])
    with open_queue(path, clock) as queue:  # its live jobs all have priority 0
        queue.replay("urgent")
        assert [lease.job.id for lease in queue.claim_many(2)] == ["urgent", "older"]
    with open_queue(path, clock) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(4), id="bumped", priority=1)
    with open_queue(path, clock) as queue:  # two priorities among the live jobs, found at opening
        assert [lease.job.id for lease in queue.claim_many(2)] == ["bumped", "newer"]


def test_job_ids_are_stored_uncompressed_so_an_ack_commits_in_the_same_time_at_any_backlog(
    path: Path,
) -> None:
    # DuckDB compresses a text column it writes to the file (DICT_FSST for ids like these);
    # a deleted job's id then has to be read back out of its compressed block at commit, to
    # take it out of the primary key: measured, 100 acks committed in 0.7 ms with 1k jobs
    # waiting and 4.8 ms with 100k. Stored uncompressed, 0.7 ms at both.
    with DurableQueue(path, clock=ManualClock(0)) as queue:
        queue.enqueue_many(
            SEND_RECEIPT, [ReceiptPayload(order_id=n, email="a@example.com") for n in range(5_000)]
        )
        queue._con.execute("CHECKPOINT")  # writes the rows to the file's blocks, compressed as chosen
        kinds = queue._con.execute(
            "SELECT DISTINCT compression FROM pragma_storage_info('jobqueue_jobs')"
            " WHERE column_name = 'id' AND segment_type = 'VARCHAR'"
        ).fetchall()
        assert kinds == [("Uncompressed",)]
        assert queue.ack_many(queue.claim_many(100)) == []


def test_the_queue_file_runs_each_statement_on_one_thread(tmp_path: Path) -> None:
    from jobqueue.backends.duckdb import QUERY_THREADS

    with DurableQueue(tmp_path / "q.db") as queue:
        [(threads,)] = queue._con.execute("SELECT current_setting('threads')").fetchall()
    assert int(threads) == QUERY_THREADS == 1
