"""PostgresQueue: the queue contract on PostgreSQL, and what only a shared server allows.

- the contract state machine of ``jobqueue.testing.contract``, with the settings the other
  queues use (tables emptied between examples, not a database per example: faster);
- batches: ``enqueue_batch`` says which ids were added (a repeat, a waiting, leased or dead
  job), fresh ``job-N`` ids skip ids chosen by hand, ``ack_many`` returns the stale leases;
- transactional enqueue: the job commits or rolls back with the caller's transaction;
- two processes claiming from one queue never get the same job; a stale ack from another
  process is refused;
- ``NOTIFY`` wakes a waiting worker; a killed connection (``pg_terminate_backend``) gives an
  error naming the server, the next call connects again, and a Runner carries on;
- an unreadable row is dead-lettered with the reason; another schema version is refused,
  and older tables are refused until ``migrate`` takes them to the current version
  (priorities and deadlines, then fencing tokens);
- the priority and deadline scene of ``tests/test_queue.py`` gives what the in-memory
  queue gives, the reasons of expired jobs (built in SQL) included.
"""

import asyncio
import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from backends_support import clock_of
from hypothesis.stateful import run_state_machine_as_test
from postgres_support import vacuum_left_no_dead_rows
from test_queue_state_machine import SETTINGS, policy
from waiting import HANG_GUARD_S, hang, wait_until, wait_until_async, within_hang_guard

from jobqueue import (
    Backoff,
    InvalidSettingError,
    JobQueue,
    Lease,
    ManualClock,
    QueueUnavailableError,
    RetryPolicy,
    Runner,
    StaleLeaseError,
    SystemClock,
    Worker,
)
from jobqueue.backends import sql
from jobqueue.backends.contract import Queue
from jobqueue.backends.postgres import SCHEMA_VERSION, SQL, PostgresQueue, describe_server, migrate
from jobqueue.errors import QueueSchemaError
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload
from jobqueue.testing.contract import Settings, queue_state_machine

T0 = 1_000.0


def invoice(order_id: int) -> InvoicePayload:
    return InvoicePayload(order_id=order_id)


@pytest.fixture
def queue(pg_conninfo: str) -> Iterator[PostgresQueue]:
    with PostgresQueue(pg_conninfo, clock=ManualClock(T0), random=lambda: 1.0) as opened:
        yield opened


def run_python(code: str, *args: str, timeout: float = 60) -> str:
    """Run ``code`` in a fresh interpreter (another process) and return what it printed."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the contract ----------------------------------------------------------------------


def test_postgres_queue_keeps_the_queue_contract(pg_conninfo: str) -> None:
    opened: list[PostgresQueue] = []

    def factory(clock: ManualClock, settings: Settings) -> Queue:
        while opened:
            opened.pop().close()
        queue = PostgresQueue(
            pg_conninfo,
            clock=clock,
            visibility_timeout_s=settings.visibility_timeout_s,
            retry=policy(settings),
            random=lambda: 1.0,
        )
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            con.execute("TRUNCATE jobqueue_jobs, jobqueue_outcomes, jobqueue_outcomes_by_key")
        opened.append(queue)
        return queue

    try:
        run_state_machine_as_test(queue_state_machine(factory), settings=SETTINGS)
    finally:
        while opened:
            opened.pop().close()


# -- batches -------------------------------------------------------------------------


def test_enqueue_batch_says_which_jobs_it_added(queue: PostgresQueue) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="dead")
    doomed = queue.claim()
    assert doomed is not None
    queue.fail(doomed, "PermanentJobError: no such order", permanent=True)
    queue.enqueue(RENDER_INVOICE, invoice(2), id="leased")
    assert queue.claim() is not None
    queue.enqueue(RENDER_INVOICE, invoice(3), id="waiting")
    live = {job.id: job for job in queue.jobs()}
    [dead] = queue.dead_letters()
    clock_of(queue).advance(1)

    batch = queue.enqueue_batch(
        RENDER_INVOICE,
        [invoice(10), invoice(11), invoice(12), invoice(13), invoice(14)],
        ids=["waiting", "new", "dead", "new", "leased"],
    )
    assert [(entry.job.id, entry.added) for entry in batch] == [
        ("waiting", False),
        ("new", True),
        ("dead", False),
        ("new", False),  # a repeat within the batch: the first copy was added
        ("leased", False),
    ]
    assert [entry.job for entry in batch] == [
        live["waiting"],
        batch[1].job,
        dead.job,
        batch[1].job,
        live["leased"],
    ]
    assert queue.get("new") == batch[1].job
    assert batch[1].job.payload == '{"order_id":11}' and batch[1].job.run_at == T0 + 1
    assert len(queue) == 3 and queue.dead_letters() == [dead]


def test_fresh_ids_skip_an_id_chosen_by_hand(queue: PostgresQueue) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="job-2")
    jobs = queue.enqueue_many(RENDER_INVOICE, [invoice(2), invoice(3)])
    # The batch drew job-1 and job-2, met the chosen job-2 and wrote nothing, then drew
    # again: fresh ids are unique and increasing, not dense.
    assert [job.id for job in jobs] == ["job-3", "job-4"]
    assert [json.loads(job.payload)["order_id"] for job in jobs] == [2, 3]
    assert len(queue) == 3
    assert [job.id for job in queue.jobs()] == ["job-2", "job-3", "job-4"]


def test_a_fresh_id_for_one_job_skips_an_id_chosen_by_hand(queue: PostgresQueue) -> None:
    # One job goes through a statement of its own (enqueue_one), which must step aside too.
    queue.enqueue(RENDER_INVOICE, invoice(1), id="job-1")
    job = queue.enqueue(RENDER_INVOICE, invoice(2))
    assert job.id == "job-2" and json.loads(job.payload)["order_id"] == 2
    assert queue.get("job-2") == job and len(queue) == 2


def test_a_batch_of_fresh_jobs_gets_its_ids_in_the_order_of_its_payloads(queue: PostgresQueue) -> None:
    jobs = queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(1_000)])
    assert [json.loads(job.payload)["order_id"] for job in jobs] == list(range(1_000))
    assert [job.id for job in jobs] == [f"job-{n}" for n in range(1, 1_001)]
    assert {job.id: job for job in queue.jobs()} == {job.id: job for job in jobs}  # as stored


def test_ack_many_acks_the_leases_held_and_returns_the_stale_ones(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock, visibility_timeout_s=10) as queue:
        queue.enqueue_many(
            RENDER_INVOICE, [invoice(n) for n in range(1, 6)], ids=[f"i{n}" for n in range(1, 6)]
        )
        lost, acked = queue.claim_many(2)
        clock.advance(1)
        held = queue.claim_many(3)
        queue.ack(acked)
        clock.advance(9)  # the first lease has run out, and i1 is claimed again
        again = queue.claim()
        assert again is not None and again.job.id == "i1" and again.token != lost.token
        assert queue.ack_many([held[0], lost, held[1], acked, held[2]]) == [lost, acked]
        assert [job.id for job in queue.jobs()] == ["i1"]
        assert queue.get("i1") == again.job
        assert queue.ack_many([again, again]) == [again]
        assert queue.metrics().done == 5


def test_a_token_is_honoured_only_with_its_own_job(queue: PostgresQueue) -> None:
    queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["a", "b"])
    a, b = queue.claim_many(2)
    forged = type(a)(job=b.job, token=a.token)  # a's token on b's job
    with pytest.raises(StaleLeaseError):
        queue.ack(forged)
    assert queue.ack_many([forged]) == [forged]
    assert len(queue) == 2


# -- the caller's transaction ----------------------------------------------------------


def test_a_job_enqueued_in_the_callers_transaction_commits_or_rolls_back_with_it(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    with psycopg.connect(pg_conninfo) as app:
        app.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        app.commit()
        app.execute("INSERT INTO orders VALUES (1)")
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1", conn=app)
        assert queue.get("invoice-1") is None  # not committed yet: no worker can see it
        app.rollback()
        assert queue.get("invoice-1") is None and len(queue) == 0

        app.execute("INSERT INTO orders VALUES (2)")
        queue.enqueue_many(RENDER_INVOICE, [invoice(2)], ids=["invoice-2"], conn=app)
        app.commit()
    [job] = queue.jobs()
    assert job.id == "invoice-2"
    lease = queue.claim()
    assert lease is not None and lease.job.id == "invoice-2"


# -- several processes -----------------------------------------------------------------

CLAIMER = """
import sys
from jobqueue import ManualClock
from jobqueue.backends.postgres import PostgresQueue
with PostgresQueue(sys.argv[1], clock=ManualClock(1000.0)) as queue:
    claimed = []
    while leases := queue.claim_many(7):
        claimed += [lease.job.id for lease in leases]
        queue.ack_many(leases)
print(" ".join(claimed))
"""


def test_two_processes_claiming_from_one_queue_never_share_a_job(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    ids = [f"i{n}" for n in range(600)]
    queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(600)], ids=ids)
    claimers = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", CLAIMER, pg_conninfo], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [claimer.communicate(timeout=HANG_GUARD_S)[0].split() for claimer in claimers]
    assert [claimer.returncode for claimer in claimers] == [0, 0]
    first, second = (set(output) for output in outputs)
    assert sum(map(len, outputs)) == len(ids)  # nobody got a job twice...
    assert first.isdisjoint(second) and first | second == set(ids)  # ...and every job once
    assert len(queue) == 0


def test_a_stale_ack_from_another_process_is_refused(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock, visibility_timeout_s=10) as queue:
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")
        first = queue.claim()
        assert first is not None
        # Another process, 11 s later, finds the lease run out and claims the job again.
        second = run_python(
            """
            import sys
            from jobqueue import ManualClock
            from jobqueue.backends.postgres import PostgresQueue
            with PostgresQueue(sys.argv[1], clock=ManualClock(1011.0), visibility_timeout_s=10) as queue:
                print(queue.claim().token)
            """,
            pg_conninfo,
        ).strip()
        assert second != first.token
        with pytest.raises(StaleLeaseError, match=f"held now as {second}"):
            queue.ack(first)
        # The first worker's token, sent from a third process, is refused there too.
        refused = run_python(
            """
            import sys
            from jobqueue import ManualClock, StaleLeaseError
            from jobqueue.backends.postgres import PostgresQueue
            with PostgresQueue(sys.argv[1], clock=ManualClock(1012.0)) as queue:
                [job] = queue.jobs()
                from jobqueue import Lease
                try:
                    queue.ack(Lease(job=job, token=sys.argv[2]))
                except StaleLeaseError as stale:
                    print("refused:", stale)
            """,
            pg_conninfo,
            first.token,
        )
        assert refused.startswith("refused:") and second in refused
        assert queue.get("invoice-1") is not None  # still held by the second claim


def test_only_claims_and_heartbeats_commit_without_waiting_for_the_disk(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    # A statement trigger notes the setting each write of the queue's own connection runs
    # under: the setting its transaction commits with.
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("CREATE TABLE seen (n serial, op text, sync text)")
        con.execute(
            """
            CREATE FUNCTION note() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO seen (op, sync) VALUES (TG_OP, current_setting('synchronous_commit'));
                RETURN NULL;
            END $$
            """
        )
        con.execute(
            "CREATE TRIGGER note AFTER INSERT OR UPDATE OR DELETE ON jobqueue_jobs"
            " FOR EACH STATEMENT EXECUTE FUNCTION note()"
        )
        queue.enqueue(RENDER_INVOICE, invoice(1))
        lease = queue.claim()
        assert lease is not None
        queue.ack(queue.extend_lease(lease))
        queue.enqueue(RENDER_INVOICE, invoice(2))
        lease = queue.claim()
        assert lease is not None
        queue.fail(lease, "boom")
        seen = con.execute("SELECT op, sync FROM seen ORDER BY n").fetchall()
    assert seen == [
        ("INSERT", "on"),  # enqueue
        ("UPDATE", "off"),  # claim (jobs cancelled whose lease ran out: drop_cancelled; none here)
        ("UPDATE", "off"),  # extend_lease
        ("DELETE", "on"),  # ack: the claim's setting ended with its transaction
        ("DELETE", "on"),  # the ack's prune of dead letters past dead_retain_s (none here)
        ("INSERT", "on"),
        ("UPDATE", "off"),
        ("UPDATE", "on"),  # fail (a retry)
    ]


# -- wake-ups and lost connections -----------------------------------------------------


def test_notify_wakes_a_waiting_worker(queue: PostgresQueue, pg_conninfo: str) -> None:
    asyncio.run(_notify_wakes_a_waiting_worker(queue, pg_conninfo))


async def _notify_wakes_a_waiting_worker(queue: PostgresQueue, pg_conninfo: str) -> None:
    assert await queue.wait_for_work(0.05) is True  # it began listening: look again, just in case
    assert await queue.wait_for_work(0.05) is False  # nothing enqueued since
    waiting = asyncio.create_task(queue.wait_for_work(3600))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    with PostgresQueue(pg_conninfo) as producer:  # another connection, as another process would use
        producer.enqueue(RENDER_INVOICE, invoice(1))
    assert await within_hang_guard(waiting, "the wake-up") is True  # woken, long before its hour


def test_waiting_for_work_on_a_closed_queue_is_refused(pg_conninfo: str) -> None:
    queue = PostgresQueue(pg_conninfo)
    queue.close()
    with pytest.raises(QueueUnavailableError, match="closed"):
        asyncio.run(queue.wait_for_work(0.01))


def test_a_wait_cancelled_before_it_listens_keeps_no_silent_listener(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    """The Runner cancels waits routinely: one cancelled while LISTEN runs must not leave a
    connection that never listens (every later wait would sleep through each NOTIFY)."""

    async def scenario() -> None:
        started = asyncio.Event()
        execute = psycopg.AsyncConnection.execute

        async def slow_execute(self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kw: Any) -> Any:
            if str(query).startswith("LISTEN"):
                started.set()
                await asyncio.sleep(3600)  # cancelled here, before LISTEN reached the server
            return await execute(self, query, *args, **kw)

        psycopg.AsyncConnection.execute = slow_execute  # type: ignore[method-assign]
        try:
            first = asyncio.create_task(queue.wait_for_work(3600))
            await within_hang_guard(started.wait(), "the LISTEN to start")
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
        finally:
            psycopg.AsyncConnection.execute = execute  # type: ignore[method-assign]
        assert await queue.wait_for_work(0.05) is True  # it listens now: look again
        waiting = asyncio.create_task(queue.wait_for_work(3600))
        with PostgresQueue(pg_conninfo) as producer:
            producer.enqueue(RENDER_INVOICE, invoice(1))
        assert await within_hang_guard(waiting, "the wake-up") is True

    asyncio.run(scenario())


def test_notifications_come_from_the_queues_own_commits_only(queue: PostgresQueue, pg_conninfo: str) -> None:
    def heard(listener: psycopg.Connection[Any], expected: int) -> int:
        """The notifications that come: ``expected`` of them waited for, then any more within 0.3 s.

        A notification that was due is waited for (a slow machine only delays it); one that
        was not is looked for during 0.3 s, and in the next call's count if it is late.
        """
        due = list(listener.notifies(timeout=HANG_GUARD_S, stop_after=expected)) if expected else []
        assert len(due) == expected, hang(f"notification {len(due) + 1} of {expected}")
        return len(due) + len(list(listener.notifies(timeout=0.3)))

    with (
        psycopg.connect(pg_conninfo, autocommit=True) as listener,
        psycopg.connect(pg_conninfo) as shop,
    ):
        listener.execute("LISTEN jobqueue_jobs")
        queue.enqueue(RENDER_INVOICE, invoice(1))  # the queue's own connection
        assert heard(listener, 1) == 1
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1", conn=shop)  # the caller's transaction
        shop.commit()
        assert heard(listener, 0) == 0  # none from the caller's transaction, even once committed
        queue.notify_workers()  # the caller asks for one after its commit
        assert heard(listener, 1) == 1
        queue.enqueue(RENDER_INVOICE, invoice(2), id="invoice-2", conn=shop)
        shop.rollback()
        assert heard(listener, 0) == 0
        queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")  # held already: nothing added
        assert heard(listener, 0) == 0
        lease = queue.claim()
        assert lease is not None
        queue.release(lease, delay_s=30)  # a deferral: nobody could take it yet
        assert heard(listener, 0) == 0
        lease = queue.claim()
        assert lease is not None
        queue.release(lease)  # due now: a worker may take it
        assert heard(listener, 1) == 1


def test_a_runner_starts_a_new_job_at_the_notify_not_at_its_next_poll(pg_conninfo: str) -> None:
    asyncio.run(_a_runner_starts_a_new_job_at_the_notify_not_at_its_next_poll(pg_conninfo))


async def _a_runner_starts_a_new_job_at_the_notify_not_at_its_next_poll(pg_conninfo: str) -> None:
    done: list[int] = []

    async def render(payload: InvoicePayload) -> None:
        done.append(payload.order_id)
        runner.stop()

    with PostgresQueue(pg_conninfo, clock=SystemClock()) as queue:
        waits: list[float] = []
        wait_for_work = queue.wait_for_work

        async def counted_wait_for_work(timeout_s: float) -> bool:
            waits.append(timeout_s)
            return await wait_for_work(timeout_s)

        queue.wait_for_work = counted_wait_for_work  # type: ignore[method-assign]
        worker = Worker(queue)
        worker.register(RENDER_INVOICE, render)
        runner = Runner(worker, poll_s=3600)  # without the wake-up, the job would wait an hour
        running = asyncio.create_task(runner.run())
        # The first wait returns at once (it began listening: look again); in the second the
        # runner has found nothing twice and waits.
        await wait_until_async(lambda: len(waits) >= 2, "the runner waiting for work")
        with PostgresQueue(pg_conninfo) as producer:
            producer.enqueue(RENDER_INVOICE, invoice(7))
        events = await within_hang_guard(running, "the runner's wake-up and its job")
    assert done == [7] and [event.outcome for event in events] == ["done"]


def terminate_backends(pg_conninfo: str) -> int:
    """Kill every other connection to the test database, as a server restart would."""
    with psycopg.connect(pg_conninfo, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_killed_connection_names_the_server_and_the_next_call_reconnects(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="invoice-1")
    # The enqueue's wake-up first: sent after the kill, it would find its own connection lost,
    # and the queue would then open this thread's again before the claim (no error to see).
    wait_until(lambda: queue._wakeups.sent + queue._wakeups.lost == 1, "the enqueue's wake-up")
    assert terminate_backends(pg_conninfo) >= 1  # the queue's and its wake-ups'
    with pytest.raises(QueueUnavailableError) as info:
        queue.claim()
    assert queue.server in str(info.value) and "database jobqueue_test_" in str(info.value)
    lease = queue.claim()  # connected again
    assert lease is not None and lease.job.id == "invoice-1"


def test_a_runner_reconnects_after_its_connection_was_killed(pg_conninfo: str) -> None:
    asyncio.run(_a_runner_reconnects_after_its_connection_was_killed(pg_conninfo))


async def _a_runner_reconnects_after_its_connection_was_killed(pg_conninfo: str) -> None:
    done: list[int] = []
    lines: list[str] = []

    async def render(payload: InvoicePayload) -> None:
        done.append(payload.order_id)
        if len(done) == 2:
            runner.stop()

    with PostgresQueue(pg_conninfo, clock=SystemClock()) as queue, PostgresQueue(pg_conninfo) as producer:
        worker = Worker(queue)
        worker.register(RENDER_INVOICE, render)
        runner = Runner(worker, poll_s=0.2, log=lines.append)
        running = asyncio.create_task(runner.run())
        producer.enqueue(RENDER_INVOICE, invoice(1))
        # Its ack committed (not only its start): a kill before the ack would lose the ack.
        await wait_until_async(lambda: [e.outcome for e in worker.events] == ["done"], "the first job's ack")
        terminate_backends(pg_conninfo)  # the runner's connections and the producer's
        # The runner meets the dead connection, logs it naming the server, waits, and tries again.
        await wait_until_async(
            lambda: any(queue.server in line for line in lines), "the runner's log of the lost server"
        )
        with PostgresQueue(pg_conninfo) as again:
            again.enqueue(RENDER_INVOICE, invoice(2))
        events = await within_hang_guard(running, "the second job, after the reconnection")
    assert done == [1, 2] and [event.outcome for event in events] == ["done", "done"]


# -- bad rows and foreign schemas ------------------------------------------------------


def test_an_unreadable_row_is_dead_lettered_with_the_reason(queue: PostgresQueue, pg_conninfo: str) -> None:
    queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["broken", "fine"])
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("UPDATE jobqueue_jobs SET base_s = -1 WHERE id = 'broken'")  # no Backoff takes it
    lease = queue.claim()
    assert lease is not None and lease.job.id == "fine"
    [dead] = queue.dead_letters()
    assert dead.job.id == "broken"
    assert dead.job.last_error is not None
    assert dead.job.last_error.startswith("CorruptJobError: the stored row of job 'broken' cannot be read")
    assert "base_s must be a finite number > 0 s, got -1.0" in dead.job.last_error
    assert dead.job.payload == '{"order_id":1}' and dead.job.backoff == Backoff()
    assert queue.jobs() == [lease.job]


def test_jobs_dead_letters_a_corrupt_row_and_lists_the_others(queue: PostgresQueue, pg_conninfo: str) -> None:
    queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["broken", "fine"])
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("UPDATE jobqueue_jobs SET max_attempts = 0 WHERE id = 'broken'")
    assert [job.id for job in queue.jobs()] == ["fine"]
    [dead] = queue.dead_letters()
    assert dead.job.id == "broken" and "max_attempts" in (dead.job.last_error or "")


def test_a_corrupt_dead_letter_is_read_as_its_stand_in(queue: PostgresQueue, pg_conninfo: str) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="gone")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "boom", permanent=True)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("UPDATE jobqueue_jobs SET cap_s = 'NaN' WHERE id = 'gone'")
    [dead] = queue.dead_letters()
    assert dead.job.last_error is not None and dead.job.last_error.startswith("CorruptJobError")
    assert dead.job.last_error.endswith("(its last error: boom)")
    assert queue.discard("gone").job.id == "gone"


def test_leased_at_is_the_claim_time_and_feeds_the_stuck_job_alarm(queue: PostgresQueue) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="slow")
    start = queue.clock.now()
    lease = queue.claim()
    assert lease is not None and lease.job.leased_at == start
    clock_of(queue).advance(10)
    lease = queue.extend_lease(lease)
    assert lease.job.leased_at == start
    assert queue.metrics().oldest_leased_age_s == 10.0
    assert queue.release(lease).leased_at is None
    assert queue.metrics().oldest_leased_age_s == 0.0


def test_hostile_arguments_are_refused_naming_the_value(queue: PostgresQueue) -> None:
    for bad in ("", 7, b"x"):
        with pytest.raises(InvalidSettingError, match=re.escape(repr(bad))):
            queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["ok", bad])  # type: ignore[list-item]
    assert len(queue) == 0
    queue.enqueue(RENDER_INVOICE, invoice(1), id="j")
    lease = queue.claim()
    assert lease is not None
    with pytest.raises(InvalidSettingError, match="None"):
        queue.fail(lease, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="'x'"):
        PostgresQueue("postgresql://nobody@127.0.0.1:1/none", retry="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError):
        queue.replay("")


def test_a_lease_given_to_another_queue_is_stale_there(pg_conninfo: str, queue: PostgresQueue) -> None:
    queue.enqueue(RENDER_INVOICE, invoice(1), id="email-1")
    lease = queue.claim()
    assert lease is not None
    other = PostgresQueue(pg_conninfo, clock=queue.clock)
    try:
        other.enqueue(RENDER_INVOICE, invoice(2), id="sms-1")  # same tables: a second job
        theirs = other.claim()
        assert theirs is not None and theirs.job.id == "sms-1"
        forged = Lease(job=theirs.job, token=lease.token)
        with pytest.raises(StaleLeaseError):
            other.ack(forged)
        assert other.ack_many([forged]) == [forged]
        assert {job.id for job in other.jobs()} == {"email-1", "sms-1"}
    finally:
        other.close()


def test_tables_of_another_schema_version_are_refused(pg_conninfo: str) -> None:
    PostgresQueue(pg_conninfo).close()
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("UPDATE jobqueue_schema SET version = 99")
    with pytest.raises(QueueSchemaError, match=rf"schema version \[99\].*reads version {SCHEMA_VERSION}"):
        PostgresQueue(pg_conninfo)


def test_the_server_is_named_without_its_password() -> None:
    assert describe_server("postgresql://app:secret@db.example:5433/shop") == (
        "PostgreSQL at db.example:5433, database shop"
    )
    assert "secret" not in describe_server("host=db password=secret dbname=shop")


def test_settings_are_checked(pg_conninfo: str) -> None:
    from jobqueue import InvalidSettingError

    with pytest.raises(InvalidSettingError, match="visibility_timeout_s"):
        PostgresQueue(pg_conninfo, visibility_timeout_s=0)
    with pytest.raises(InvalidSettingError, match="not a PostgreSQL URL"):
        PostgresQueue("postgresql://[nonsense")


def test_retry_policies_are_stored_with_each_job(queue: PostgresQueue) -> None:
    slow = RetryPolicy(max_attempts=2, backoff=Backoff(base_s=5, cap_s=7))
    from jobqueue import JobType

    job = queue.enqueue(JobType("slow", InvoicePayload, retry=slow), invoice(1))
    assert (job.max_attempts, job.backoff) == (2, Backoff(base_s=5, cap_s=7))
    assert queue.get(job.id) == job


def test_queues_opened_at_once_on_a_fresh_database_create_the_tables_once(pg_conninfo: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def open_and_close(_: int) -> int:
        with PostgresQueue(pg_conninfo) as queue:
            return len(queue)

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert list(pool.map(open_and_close, range(6))) == [0] * 6


def test_a_heartbeat_that_finds_the_connection_killed_tries_again_at_the_next_beat(pg_conninfo: str) -> None:
    async def scenario() -> list[str]:
        async def render(payload: InvoicePayload) -> None:
            await wait_until_async(lambda: worker.heartbeats, "a first beat")
            terminate_backends(pg_conninfo)  # the next beat meets the dead connection
            beats = len(worker.heartbeats)
            await wait_until_async(lambda: len(worker.heartbeats) > beats, "a beat after the kill")

        with PostgresQueue(pg_conninfo, clock=SystemClock(), visibility_timeout_s=5) as queue:
            queue.enqueue(RENDER_INVOICE, invoice(1))
            worker = Worker(queue, heartbeat_s=0.1)
            worker.register(RENDER_INVOICE, render)
            event = await worker.run_one()
            assert event is not None
            assert len(queue) == 0
            return [event.outcome, *(str(beat.leased_until is not None) for beat in worker.heartbeats[-1:])]

    assert asyncio.run(scenario()) == ["done", "True"]  # acked, and the beats after the kill held the lease


@pytest.mark.parametrize("statement", ["claim", "claim_one"], ids=["a batch", "one job"])
@pytest.mark.parametrize("types", [None, ["render_invoice"]], ids=["any type", "a worker's types"])
def test_a_claim_reads_the_claim_index_in_claim_order_and_stops_at_its_limit(
    queue: PostgresQueue, pg_conninfo: str, types: list[str] | None, statement: str
) -> None:
    # Both forms are planned here, on one backlog, on the course's PostgreSQL 18; a queue uses
    # the one for its server's version (postgres.SKIP_SCAN_VERSION): the first on 18 on its
    # own connection, the second on 17 and older, where only it stays flat
    # (benchmarks/postgres_claim_index.py), and behind a transaction pooler.
    from jobqueue.backends.postgres import SQL

    for start in range(0, 20_000, 5_000):  # two priorities: the index orders by priority first
        batch = [invoice(n) for n in range(start, start + 5_000)]
        queue.enqueue_many(RENDER_INVOICE, batch, priority=start // 5_000 % 2)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        con.execute("ANALYZE jobqueue_jobs")
        for family in ("", "_by_priority"):  # in index order, by priority
            name = statement + family if types is None else f"{statement}{family}_types"
            plan = [
                row[0].strip()
                for row in con.execute(
                    "EXPLAIN " + SQL[name],
                    {"now": T0 + 1, "until": T0 + 31, "limit": 10, "types": types, "commit": "off"},
                )
            ]
            assert_picks_through_the_claim_index(plan, by_priority=bool(family))
            # the lease is written on the rows `due` locked, found by ctid: never a hash of the table
            assert {"TID Cond: (lease.at = ctid)", "TID Cond: (due.due_ctid = ctid)"} & set(plan), plan
            assert not any("Hash" in line for line in plan), plan


def assert_picks_through_the_claim_index(
    plan: list[str], *, by_priority: bool, index: str = "jobqueue_jobs_claim"
) -> None:
    """Under the CTE that picks the jobs: the claim index in its own order, or by priority.

    No sort of the backlog, and the index scan bounded by the time. In the index's order
    (PostgreSQL 18 and later), one scan with the time as an index condition, which 18's skip
    scan applies within each priority. ``by_priority`` (older servers, which cannot skip from
    one priority to the next): the priorities in turn, each a range of the claim index bounded
    by the priority (equality) and the time: a claim reads about ``limit`` index entries and
    one descent per priority, whatever the number of jobs not yet due (in backoff, leased) of
    a higher priority (benchmarks/postgres_claim_index.py).
    """
    start = plan.index("CTE due") + 1
    if not by_priority:
        pick = plan[start : start + 4]
        expected = ["->  Limit", "->  LockRows", f"->  Index Scan using {index} on jobqueue_jobs"]
        assert all(line.startswith(prefix) for line, prefix in zip(pick, expected, strict=False)), plan
        assert pick[3].startswith("Index Cond: (") and "visible_at <= " in pick[3], plan  # no sort
        return
    pick = plan[start : start + 8]
    expected = [
        "->  Limit",
        "->  Nested Loop",
        "->  CTE Scan on priorities",
        "->  Subquery Scan on one_priority",
        "->  Limit",
        "->  LockRows",
        "->  Index Scan using jobqueue_jobs_claim on jobqueue_jobs",
        "Index Cond: ((priority = priorities",
    ]
    assert [line.startswith(prefix) for line, prefix in zip(pick, expected, strict=True)] == [True] * 8, plan
    assert "AND (visible_at <= " in pick[-1], plan


@pytest.mark.parametrize(
    "setup", ["", "server before 18", "transaction pooler"], ids=["in index order", "by priority", "pooler"]
)
def test_a_claim_passes_over_higher_priorities_with_nothing_due_and_fills_its_limit_from_lower_ones(
    pg_conninfo: str, monkeypatch: pytest.MonkeyPatch, setup: str
) -> None:
    from jobqueue.backends import postgres

    if setup == "server before 18":  # the claims a server older than 18 gets, here on 18
        monkeypatch.setattr(postgres, "SKIP_SCAN_VERSION", 10**9)
    pooler = setup == "transaction pooler"  # no session settings: the walk by priority too
    with PostgresQueue(
        pg_conninfo, clock=ManualClock(T0), random=lambda: 1.0, transaction_pooler=pooler
    ) as queue:
        claims_in_priority_order(queue)
        assert queue._local.skip_scan is (not setup)


def claims_in_priority_order(queue: PostgresQueue) -> None:
    """Claims of one and of several jobs, of any type, of a type, from a named queue."""
    queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["leased-1", "leased-2"], priority=3)
    held = queue.claim_many(2)  # leased: not due until the lease ends
    queue.enqueue_many(RENDER_INVOICE, [invoice(3)], ids=["backoff"], priority=2)
    (failing,) = queue.claim_many(1)
    queue.fail(failing, "mail server down")  # a retry later: not due
    queue.enqueue_many(RENDER_INVOICE, [invoice(4)], ids=["due-1"], priority=1)
    queue.enqueue_many(RENDER_INVOICE, [invoice(5), invoice(6)], ids=["a", "b"], priority=0)
    queue.enqueue_many(RENDER_INVOICE, [invoice(7)], ids=["low"], priority=-5)
    assert [lease.job.id for lease in held] == ["leased-1", "leased-2"]
    assert [lease.job.id for lease in queue.claim_many(3)] == ["due-1", "a", "b"]
    assert [lease.job.id for lease in queue.claim_many(3)] == ["low"]
    assert queue.claim_many(3) == []
    queue.enqueue_many(RENDER_INVOICE, [invoice(8), invoice(9)], ids=["mail-0", "mail-1"], queue="mail")
    queue.enqueue_many(RENDER_INVOICE, [invoice(10)], ids=["mail-high"], queue="mail", priority=1)
    queue.enqueue_many(RENDER_INVOICE, [invoice(11), invoice(12)], ids=["c", "d"], priority=2)
    assert [lease.job.id for lease in queue.claim_many(2, queues=["mail"])] == ["mail-high", "mail-0"]
    assert queue.claim(types=["send_receipt"]) is None
    claimed = queue.claim(types=["render_invoice"])
    assert claimed is not None and claimed.job.id == "c"
    assert [lease.job.id for lease in queue.claim_many(5)] == ["d", "mail-1"]


def cached_plans(con: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """The plans a connection holds for its prepared statements, as they will run next."""
    dummy = {
        "double precision": "0",
        "smallint": "1",
        "integer": "1",
        "bigint": "1",
        "boolean": "false",
        "text": "''",
    }
    plans = {}
    for name, statement, types in con.execute(
        "SELECT name, statement, parameter_types::text[] FROM pg_prepared_statements"
    ).fetchall():
        values = ", ".join("'{}'" if kind.endswith("[]") else dummy[kind] for kind in types)
        arguments = f"({values})" if values else ""
        # EXPLAIN EXECUTE shows the plan kept for the statement and runs nothing.
        plans[statement] = [row[0].strip() for row in con.execute(f"EXPLAIN EXECUTE {name}{arguments}")]
    return plans


@pytest.mark.parametrize("analysed", [False, True])
def test_plans_made_on_a_young_queue_still_find_rows_by_key_once_it_holds_thousands(
    queue: PostgresQueue, analysed: bool
) -> None:
    con = queue._own()  # this thread's connection of the queue, where its statements are prepared
    assert con is not None
    claims: list[dict[str, Any]] = [{}, {"types": ["render_invoice"]}, {"queues": ["mail"]}]
    for _ in range(8):  # past the five runs after which PostgreSQL may keep re-planning
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(10)])  # fresh ids
        queue.enqueue_many(RENDER_INVOICE, [invoice(1)], ids=["chosen"])  # an id given
        queue.enqueue_many(RENDER_INVOICE, [invoice(2)], queue="mail")
        for claim in claims:  # any job, a worker's types, a named queue
            queue.ack_many(queue.claim_many(5, **claim))
    young = {statement for statement, *_ in con.execute("SELECT statement FROM pg_prepared_statements")}
    for start in range(0, 20_000, 500):  # a backlog: 20,000 jobs
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(start, start + 500)])
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(start, start + 10)], queue="mail")
    if analysed:  # as autovacuum would: the statements are planned again, with statistics
        con.execute("ANALYZE jobqueue_jobs")
    for claim in claims:
        queue.ack_many(queue.claim_many(10, **claim))
    prepared = con.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    ).fetchall()
    assert {statement for statement, *_ in prepared} == young
    # Planned for the given values, the claim and the enqueue cost more to plan than to run.
    assert [custom for *_, custom in prepared] == [0] * len(prepared)
    plans = cached_plans(con)
    assert len(plans) >= 6  # both enqueues, the claims, the ack
    for plan in plans.values():  # made while the table was nearly empty, still by key
        assert not [line for line in plan if "Seq Scan on jobqueue_" in line], plan
    acks = [plan for statement, plan in plans.items() if "job.lease_token = held.token" in statement]
    assert len(acks) == 1  # the ack of many leases, which reads them as a list
    assert [line for line in acks[0] if "Index Scan using jobqueue_jobs_pkey" in line], acks[0]
    picks = [plan for statement, plan in plans.items() if "FOR UPDATE SKIP LOCKED" in statement]
    assert len(picks) == len(claims)
    for pick in picks:  # never a read of every due job to sort them
        named = any("queue = $" in line for line in pick)
        index = "jobqueue_jobs_queue_claim" if named else "jobqueue_jobs_claim"
        assert_picks_through_the_claim_index(pick, by_priority=not queue._local.skip_scan, index=index)


def test_a_worker_started_on_a_backlog_never_analysed_claims_through_the_claim_index(
    pg_conninfo: str,
) -> None:
    # As `jobqueue worker` starts on a queue filled moments before: its claims (of its
    # handlers' types) are planned once, with no statistics of the table yet. A plan that
    # reads every due job and sorts them cost each claim of 20 the whole backlog.
    with PostgresQueue(pg_conninfo) as producer:
        for start in range(0, 10_000, 1_000):
            producer.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(start, start + 1_000)])
    with PostgresQueue(pg_conninfo) as queue:
        for claim in [{}, {"types": ["render_invoice"]}]:
            for _ in range(8):
                queue.ack_many(queue.claim_many(20, **claim))
        plans = cached_plans(queue._own())
        picks = [plan for text, plan in plans.items() if "FOR UPDATE SKIP LOCKED" in text]
        assert len(picks) == 2
        for pick in picks:
            assert_picks_through_the_claim_index(pick, by_priority=not queue._local.skip_scan)


def test_rows_skipped_as_locked_use_up_no_lease_numbers(queue: PostgresQueue, pg_conninfo: str) -> None:
    # Tokens and places are numbered for the jobs a claim leases, not for every row its scan
    # passes: otherwise how many rows other workers held would show in the numbers, and a
    # lesson's printed tokens would change from run to run.
    queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2), invoice(3)], ids=["a", "b", "c"])
    with psycopg.connect(pg_conninfo) as other:  # another worker's claim, still open, holds a
        other.execute("SELECT 1 FROM jobqueue_jobs WHERE id = 'a' FOR UPDATE")
        (first,) = queue.claim_many(1)
    (second,) = queue.claim_many(1)
    assert [(first.job.id, first.token), (second.job.id, second.token)] == [
        ("b", "lease-1"),
        ("a", "lease-2"),
    ]


def test_a_batch_is_leased_in_claim_order_wherever_its_rows_lie(pg_conninfo: str) -> None:
    # The claim writes each job's new place (serial) and token in claim order, as the
    # in-memory queue does, not in the order of the rows on disk: here a vacuum frees the
    # first row's slot, and job b's next version takes it, ahead of c on the page.
    def scenario(queue: Queue, clock: ManualClock) -> list[str]:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2), invoice(3)], ids=["a", "b", "c"])
        (first,) = queue.claim_many(1)
        queue.ack(first)  # a is gone
        (b,) = queue.claim_many(1)
        if isinstance(queue, PostgresQueue):
            # The enqueue's wake-up goes out first: its NOTIFY's transaction, running during the
            # VACUUM, would keep the old row versions (sent by a thread of the queue's).
            wait_until(lambda: queue._wakeups.sent + queue._wakeups.lost == 1, "the enqueue's wake-up")
            # Frees the slots of a and of b's first version, once no snapshot in the database
            # predates their end (an autovacuum ANALYZE of a catalog table may hold one).
            wait_until(lambda: vacuum_left_no_dead_rows(pg_conninfo), "a VACUUM that frees every dead row")
        queue.release(b)  # b waits again, after c, in the page's first slot
        if isinstance(queue, PostgresQueue):
            with psycopg.connect(pg_conninfo, autocommit=True) as con:
                rows = dict(con.execute("SELECT id, ctid::text FROM jobqueue_jobs").fetchall())
            assert rows["b"] < rows["c"], rows  # the case this test is about: b's row lies first
        batch = queue.claim_many(2)
        clock.advance(60)  # both leases run out at once
        again = queue.claim_many(2)
        return [f"{lease.job.id} {lease.token}" for lease in batch + again]

    memory_clock = ManualClock(T0)
    expected = scenario(JobQueue(clock=memory_clock, visibility_timeout_s=30), memory_clock)
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock, visibility_timeout_s=30) as queue:
        assert scenario(queue, clock) == expected == ["c lease-3", "b lease-4", "c lease-5", "b lease-6"]


def test_an_ack_finds_its_jobs_by_key_on_a_table_never_analysed(
    queue: PostgresQueue, pg_conninfo: str
) -> None:
    from jobqueue.backends.postgres import SQL

    for start in range(0, 2_000, 100):  # batches, as producers send them
        queue.enqueue_many(RENDER_INVOICE, [invoice(n) for n in range(start, start + 100)])
    leases = queue.claim_many(10)
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # no ANALYZE: a young queue
        plan = "\n".join(
            row[0]
            for row in con.execute(
                "EXPLAIN " + SQL["ack"],
                {
                    "ids": [lease.job.id for lease in leases],
                    "tokens": [lease.token for lease in leases],
                    "fencings": [lease.job.fencing_token for lease in leases],
                },
            )
        )
    # Not every live job read through the claim index and hashed (the planner's guess for
    # died_at IS NULL without statistics is 1 row in 200): the ten rows, by primary key.
    assert "jobqueue_jobs_claim" not in plan, plan
    assert "on jobqueue_jobs_pkey" in plan, plan


# -- the same figures as the in-memory queue ------------------------------------------


@pytest.mark.parametrize(("advance_s", "window_s"), [(0, 60), (0, 1), (0, 65), (2, 60), (5, 300), (65, 60)])
def test_metrics_of_the_metrics_scene_equal_the_in_memory_queues(
    pg_conninfo: str, advance_s: float, window_s: float
) -> None:
    from test_metrics import scene

    def on_postgres(*, clock: ManualClock, **settings: Any) -> PostgresQueue:
        return PostgresQueue(pg_conninfo, clock=clock, **settings)

    memory_clock, memory = scene()
    clock, queue = scene(on_postgres)
    assert isinstance(queue, PostgresQueue)
    with queue:
        memory_clock.advance(advance_s)
        clock.advance(advance_s)
        assert queue.metrics(window_s) == memory.metrics(window_s)
        assert queue.jobs() == memory.jobs()
        assert queue.dead_letters() == memory.dead_letters()


# -- priorities and deadlines (lesson 13) ---------------------------------------------


def test_the_priority_and_deadline_scene_matches_the_in_memory_queues(queue: PostgresQueue) -> None:
    from test_queue import priority_and_deadline_scene

    from jobqueue import JobQueue

    memory_clock = ManualClock(T0)
    memory = JobQueue(clock=memory_clock, random=lambda: 1.0)
    claimed = priority_and_deadline_scene(queue, clock_of(queue))
    assert claimed == priority_and_deadline_scene(memory, memory_clock)
    assert queue.jobs() == memory.jobs()
    assert queue.dead_letters() == memory.dead_letters()


def test_tables_of_version_2_are_refused_then_migrated_and_keep_their_jobs(pg_conninfo: str) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["old-1", "old-2"])
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # back to lesson 12's tables
        con.execute(
            "ALTER TABLE jobqueue_jobs DROP COLUMN priority, DROP COLUMN expires_at,"
            " DROP COLUMN expires_after_s, DROP COLUMN fencing_token, DROP COLUMN enqueued_at"
        )
        con.execute("DROP SEQUENCE jobqueue_fencing")
        con.execute(
            "CREATE INDEX jobqueue_jobs_claim ON jobqueue_jobs (visible_at, serial) WHERE died_at IS NULL"
        )
        con.execute("UPDATE jobqueue_schema SET version = 2")
    with pytest.raises(QueueSchemaError, match="jobqueue migrate"):  # never on open: a deploy's step
        PostgresQueue(pg_conninfo, clock=clock)
    assert migrate(pg_conninfo) == [n for n, _ in sql.numbered_migrations(SQL, 2)]
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        assert [(job.id, job.priority, job.expires_at) for job in queue.jobs()] == [
            ("old-1", 0, None),
            ("old-2", 0, None),
        ]
        queue.enqueue(RENDER_INVOICE, invoice(3), id="new", priority=1)
        assert [lease.job.id for lease in queue.claim_many(3)] == ["new", "old-1", "old-2"]
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [(SCHEMA_VERSION,)]
        [(index,)] = con.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'jobqueue_jobs_claim'"
        ).fetchall()
        assert "(priority DESC, visible_at, serial)" in index


def test_tables_of_version_3_are_migrated_and_old_leases_get_fencing_tokens(
    pg_conninfo: str,
) -> None:
    clock = ManualClock(T0)
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue_many(RENDER_INVOICE, [invoice(1), invoice(2)], ids=["held", "waiting"])
        held = queue.claim()
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # back to lesson 13's tables
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN fencing_token, DROP COLUMN enqueued_at")
        con.execute("DROP SEQUENCE jobqueue_fencing")
        con.execute("UPDATE jobqueue_schema SET version = 3")
    assert migrate(pg_conninfo) == [n for n, _ in sql.numbered_migrations(SQL, 3)]
    with PostgresQueue(pg_conninfo, clock=clock) as queue:
        assert [(job.id, job.fencing_token) for job in queue.jobs()] == [("waiting", 0), ("held", 0)]
        assert held is not None
        # A lease from before the migration: the code of then gave its job no fencing token.
        held = Lease(job=dataclasses.replace(held.job, fencing_token=0), token=held.token)
        queue.ack(held)  # and it still acks
        lease = queue.claim()
        assert lease is not None and lease.job.id == "waiting" and lease.job.fencing_token > 0
    with psycopg.connect(pg_conninfo, autocommit=True) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [(SCHEMA_VERSION,)]
