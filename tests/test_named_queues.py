"""Named queues (issue 24), on every backend.

- ``enqueue(..., queue="emails")`` stores the job's queue (``"default"`` without one); a bad
  name is refused, naming it, and nothing is stored;
- ``claim_many(limit, queues=[...])`` (and ``claim``, ``ack_and_claim``) takes only jobs of
  those queues, in the usual claim order, combinable with ``types=``; the others keep
  their places; an empty filter claims nothing;
- a job keeps its queue through a retry, its death and a replay;
- a :class:`Runner` given ``queues={"emails": 1, "reports": 2}`` runs each queue in slots of
  its own: a backlog of slow reports does not hold up the e-mails, where one pool of three
  slots does (on a manual clock: each job starts and ends at an exact time);
- on PostgreSQL, a claim from one queue reads that queue's range of its own index
  (``jobqueue_jobs_queue_claim``), never another queue's jobs (EXPLAIN); tables of an older
  version gain the column, their jobs in ``"default"``.

Each queue test runs on the in-memory queue, the DuckDB queue and PostgreSQL, on a manual clock.
"""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from backends_support import BACKENDS, open_queue

from jobqueue import InvalidSettingError, JobEvent, JobQueue, JobType, Lease, ManualClock, Runner, Worker
from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends.contract import Queue, ack_then_claim, check_queues
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.job import MAX_NAME_LENGTH

T0 = 1_000.0


@dataclass(frozen=True)
class Mail:
    n: int


SEND_RECEIPT = JobType("send_receipt", Mail)
RENDER_REPORT = JobType("render_report", Mail)


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    with open_queue(
        request.param, request, tmp_path_factory.mktemp("queues") / "q.duckdb", clock=ManualClock(T0)
    ) as opened:
        yield opened


def fill(queue: Queue) -> None:
    """Six jobs in claim order: r1 e1 d1 r2 e2 d2 (reports, emails, default), one per second."""
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    for n in (1, 2):
        queue.enqueue(RENDER_REPORT, Mail(n), id=f"r{n}", queue="reports")
        clock.advance(1)
        queue.enqueue(SEND_RECEIPT, Mail(n), id=f"e{n}", queue="emails")
        clock.advance(1)
        queue.enqueue(SEND_RECEIPT, Mail(n), id=f"d{n}")
        clock.advance(1)


def ids(leases: list[Lease]) -> list[str]:
    return [lease.job.id for lease in leases]


def test_a_claim_takes_only_the_named_queues_in_claim_order_and_the_others_keep_their_places(
    queue: Queue,
) -> None:
    fill(queue)
    assert {job.id: job.queue for job in queue.jobs()} == {
        "r1": "reports",
        "e1": "emails",
        "d1": "default",
        "r2": "reports",
        "e2": "emails",
        "d2": "default",
    }
    assert ids(queue.claim_many(10, queues=["emails"])) == ["e1", "e2"]
    assert ids(queue.claim_many(1, queues={"reports", "default"})) == ["r1"]
    lease = queue.claim(queues=("default",))
    assert lease is not None and lease.job.id == "d1" and lease.job.queue == "default"
    assert ids(queue.claim_many(10)) == ["r2", "d2"]  # no filter: every queue, in claim order


def test_a_queue_filter_and_a_type_filter_combine(queue: Queue) -> None:
    fill(queue)
    queue.enqueue(RENDER_REPORT, Mail(3), id="r3", queue="emails")  # a report in the emails queue
    assert ids(queue.claim_many(10, queues=["emails"], types=["render_report"])) == ["r3"]
    assert ids(queue.claim_many(10, queues=["emails", "reports"], types=["send_receipt"])) == ["e1", "e2"]
    assert ids(queue.claim_many(10, queues=["nobody"])) == []
    assert ids(queue.claim_many(10, types=["render_report"])) == ["r1", "r2"]


def test_an_empty_filter_claims_nothing_and_ack_and_claim_keeps_to_the_queues(queue: Queue) -> None:
    fill(queue)
    assert queue.claim_many(5, queues=[]) == []
    (first,) = queue.claim_many(1, queues=["default"])
    stale, claimed = ack_then_claim(queue, [first], 5, queues=["reports"])
    assert (stale, ids(claimed)) == ([], ["r1", "r2"])
    assert queue.get("d1") is None  # acked
    own = getattr(queue, "ack_and_claim", None)
    if own is not None:  # DuckDB's one transaction
        stale, claimed = own(claimed, 5, queues=["emails"])
        assert (stale, ids(claimed)) == ([], ["e1", "e2"])
    assert len(queue) == (3 if own is not None else 5)  # six, less the acks


def test_a_job_keeps_its_queue_through_a_retry_its_death_and_a_replay(queue: Queue) -> None:
    queue.enqueue(SEND_RECEIPT, Mail(1), id="m", queue="emails")
    lease = queue.claim()
    assert lease is not None
    assert queue.fail(lease, "smtp down").outcome == "retry"
    assert isinstance(queue.clock, ManualClock)
    queue.clock.advance(60)
    assert queue.claim(queues=["default"]) is None
    lease = queue.claim(queues=["emails"])
    assert lease is not None and lease.job.attempts == 2
    queue.fail(lease, "bounced", permanent=True)
    [letter] = queue.dead_letters()
    assert letter.job.queue == "emails"
    assert queue.replay("m").queue == "emails"
    lease = queue.claim(queues=["emails"])
    assert lease is not None and lease.job.id == "m"


def test_an_id_already_held_stays_in_its_own_queue(queue: Queue) -> None:
    first = queue.enqueue(SEND_RECEIPT, Mail(1), id="m", queue="emails")
    again = queue.enqueue(SEND_RECEIPT, Mail(2), id="m", queue="reports")
    assert (first.queue, again.queue, again.payload) == ("emails", "emails", '{"n":1}')
    assert queue.claim(queues=["reports"]) is None


BAD_NAMES = [
    ("", "a queue name must be a non-empty str, got ''"),
    (7, "a queue name must be a non-empty str, got 7"),
    ("e" * (MAX_NAME_LENGTH + 1), f"a queue name must be at most {MAX_NAME_LENGTH} characters, got 256"),
    ("mail\x00s", "a queue name cannot hold a NUL character"),
]


def test_a_bad_queue_name_is_refused_naming_it_and_nothing_is_stored(queue: Queue) -> None:
    for name, message in BAD_NAMES:  # one queue for all: a PostgreSQL database each costs a second
        with pytest.raises(InvalidSettingError, match=message.replace("'", ".")):
            queue.enqueue(SEND_RECEIPT, Mail(1), queue=name)  # type: ignore[arg-type]
        with pytest.raises(InvalidSettingError, match=message.replace("'", ".")):
            queue.enqueue_many(SEND_RECEIPT, [Mail(1), Mail(2)], queue=name)  # type: ignore[arg-type]
        with pytest.raises(InvalidSettingError, match=message.replace("'", ".")):
            queue.claim_many(1, queues=[name])  # type: ignore[list-item]
    assert len(queue) == 0


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ("emails", "queues must be a collection of queue names, got 'emails'"),
        (3, "queues must be a collection of queue names, got 3"),
        (["emails", ""], "a queue name must be a non-empty str, got ''"),
    ],
)
def test_a_bad_queue_filter_is_refused_naming_it(queues: object, message: str) -> None:
    with pytest.raises(InvalidSettingError, match=message.replace("'", ".")):
        check_queues(queues)  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match=message.replace("'", ".")):
        JobQueue(clock=ManualClock()).claim_many(1, queues=queues)  # type: ignore[arg-type]


# -- a runner with a queue's own slots -----------------------------------------------------


REPORT_S = 600.0
"""How long a report takes, in seconds; an e-mail takes 1 s."""


def run_for(queue: Queue, runner_settings: dict[str, object], seconds: float) -> list[JobEvent]:
    """Six slow reports enqueued before three e-mails; run a Runner for ``seconds``, then stop it.

    Returns the events of the jobs that ended by then (those given back at the stop left out).
    """
    clock = queue.clock
    assert isinstance(clock, ManualClock)
    for n in range(6):
        queue.enqueue(RENDER_REPORT, Mail(n), id=f"report-{n}", queue="reports")
    for n in range(3):
        queue.enqueue(SEND_RECEIPT, Mail(n), id=f"email-{n}", queue="emails")

    async def report(mail: Mail) -> None:
        await clock.sleep(REPORT_S)

    async def email(mail: Mail) -> None:
        await clock.sleep(1)

    worker = Worker(queue)
    worker.register(RENDER_REPORT, report)
    worker.register(SEND_RECEIPT, email)
    runner = Runner(worker, prefetch=0, **runner_settings)  # type: ignore[arg-type]

    async def scenario() -> list[JobEvent]:
        task = asyncio.create_task(runner.run())
        await clock.run_for(seconds)
        runner.stop()
        runner.stop()  # no grace: give the rest back
        return await asyncio.wait_for(task, timeout=10)  # an outer bound, never reached when it works

    return [event for event in asyncio.run(scenario()) if event.outcome == "done"]


@pytest.fixture(params=["memory", "duckdb", "postgres"])
def runner_queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    clock = ManualClock(T0)
    if request.param == "memory":
        yield JobQueue(clock=clock, visibility_timeout_s=3600)
    elif request.param == "duckdb":
        with DurableQueue(":memory:", clock=clock, visibility_timeout_s=3600) as durable:
            yield durable
    else:
        from jobqueue.backends.postgres import PostgresQueue

        conninfo = request.getfixturevalue("pg_conninfo")
        with PostgresQueue(conninfo, clock=clock, visibility_timeout_s=3600) as postgres:
            yield postgres


def test_one_pool_lets_a_backlog_of_slow_reports_starve_the_emails(runner_queue: Queue) -> None:
    done = run_for(runner_queue, {"concurrency": 3}, 60)
    assert done == []  # three reports hold the three slots for 600 s; the e-mails wait behind them


def test_with_slots_per_queue_the_emails_run_beside_the_reports(runner_queue: Queue) -> None:
    done = run_for(runner_queue, {"queues": {"emails": 1, "reports": 2}}, 60)
    assert [(event.job_id, event.at) for event in done] == [
        ("email-0", T0 + 1),
        ("email-1", T0 + 2),
        ("email-2", T0 + 3),
    ]
    leased = [job.id for job in runner_queue.jobs() if job.leased_until is not None]
    assert leased == []  # the stop gave the two running reports back
    assert len(runner_queue) == 6


def test_a_runner_with_queues_leaves_other_queues_alone_and_sums_its_slots() -> None:
    clock = ManualClock(T0)
    queue = JobQueue(clock=clock)
    queue.enqueue(SEND_RECEIPT, Mail(1), id="elsewhere", queue="billing")
    worker = Worker(queue)

    async def email(mail: Mail) -> None:
        return None

    worker.register(SEND_RECEIPT, email)
    runner = Runner(worker, queues={"emails": 10, "reports": 2})
    assert (runner.queues, runner.concurrency) == ({"emails": 10, "reports": 2}, 12)
    assert asyncio.run(runner.run(until_idle=True)) == []
    assert [job.id for job in queue.jobs()] == ["elsewhere"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"queues": {}}, "queues must map queue names to the jobs each runs at once"),
        ({"queues": {"emails": 0}}, r"queues\['emails'\] must be an int >= 1, got 0"),
        ({"queues": {"": 1}}, "a queue name must be a non-empty str"),
        ({"queues": {"emails": 1}, "concurrency": 4}, "give a runner concurrency or queues, not both"),
    ],
)
def test_bad_queue_settings_of_a_runner_are_refused_naming_them(
    settings: dict[str, object], message: str
) -> None:
    worker = Worker(JobQueue(clock=ManualClock()))
    with pytest.raises(InvalidSettingError, match=message):
        Runner(worker, **settings)  # type: ignore[arg-type]


# -- PostgreSQL: the claim from one queue reads that queue's index range ---------------------


def test_postgres_a_claim_from_one_queue_reads_its_own_index_and_no_other_queues_jobs(
    pg_conninfo: str,
) -> None:
    import psycopg

    from jobqueue.backends.postgres import SQL, PostgresQueue

    with PostgresQueue(pg_conninfo, clock=ManualClock(T0)) as queue:
        for start in range(0, 20_000, 5_000):  # a backlog of reports, two priorities
            batch = [Mail(n) for n in range(start, start + 5_000)]
            queue.enqueue_many(RENDER_REPORT, batch, queue="reports", priority=start // 5_000 % 2)
        queue.enqueue_many(SEND_RECEIPT, [Mail(n) for n in range(20)], queue="emails")
        with psycopg.connect(pg_conninfo, autocommit=True) as con:
            con.execute("ANALYZE jobqueue_jobs")
            for statement, types in (
                ("claim_queue", None),
                ("claim_queue_types", ["send_receipt"]),
                ("claim_by_priority_queue", None),
                ("claim_by_priority_queue_types", ["send_receipt"]),
            ):
                plan = "\n".join(
                    row[0]
                    for row in con.execute(
                        "EXPLAIN " + SQL[statement],
                        {
                            "now": T0 + 1,
                            "until": T0 + 31,
                            "limit": 10,
                            "types": types,
                            "queue": "emails",
                            "commit": "off",
                        },
                    )
                )
                # The pick (and the priorities walk of the form for servers before 18): in
                # the queue's own index, the queue an index condition (not a filter over
                # other queues' rows); the pick returns the index's order, so nothing sorts
                # the due jobs.
                assert "jobqueue_jobs_claim " not in plan, plan
                pick = plan[plan.index("CTE due") : plan.index("CTE lease")]
                assert "Index Scan using jobqueue_jobs_queue_claim" in pick, plan
                if "by_priority" in statement:
                    walk = plan[plan.index("CTE priorities") : plan.index("CTE due")]
                    assert "Index Only Scan using jobqueue_jobs_queue_claim" in walk, plan
                    assert "Index Cond: (queue = 'emails'::text)" in walk, plan
                    assert "Index Cond: ((queue = 'emails'::text) AND (priority = priorities" in pick, plan
                else:
                    assert "Index Cond: ((queue = 'emails'::text) AND (visible_at <= " in pick, plan
                assert "Sort" not in pick and "Seq Scan" not in plan, plan
        leases = queue.claim_many(30, queues=["emails"])
        assert sorted(lease.job.id for lease in leases) == sorted(
            job.id for job in queue.jobs() if job.queue == "emails"
        )
        assert {lease.job.queue for lease in leases} == {"emails"}
        # The plan the queue's own connection keeps for that claim (one plan for any queue
        # name: generic_plans) reads the same index.
        from test_postgres import cached_plans

        own = queue._own()
        assert own is not None
        [kept] = [
            plan
            for text, plan in cached_plans(own).items()
            if "queue = $" in text and "WITH RECURSIVE" in text
        ]
        assert any(line.startswith("->  Index Scan using jobqueue_jobs_queue_claim") for line in kept), kept
        assert not any("jobqueue_jobs_claim " in line for line in kept), kept


def test_postgres_jobs_of_the_default_queue_write_nothing_in_the_named_queues_index(pg_conninfo: str) -> None:
    # With every job in it, the second claim index cost each enqueue and claim an entry more
    # (+30 % WAL per enqueue, +19 % per claim and ack): it now leaves out 'default', so a
    # queue that names no queue pays nothing, and a claim from 'default' reads the claim index.
    import psycopg

    from jobqueue.backends.postgres import PostgresQueue

    def index_pages(con: psycopg.Connection[tuple[int]]) -> int:
        row = con.execute(
            "SELECT pg_relation_size('jobqueue_jobs_queue_claim') / current_setting('block_size')::int"
        ).fetchone()
        assert row is not None
        return row[0]

    with (
        PostgresQueue(pg_conninfo, clock=ManualClock(T0)) as queue,
        psycopg.connect(pg_conninfo, autocommit=True) as con,
    ):
        empty = index_pages(con)
        queue.enqueue_many(SEND_RECEIPT, [Mail(n) for n in range(2_000)])
        while leases := queue.claim_many(100, queues=["default"]):  # claimed, so rewritten
            queue.ack_many(leases)
        assert index_pages(con) == empty  # not one entry
        queue.enqueue_many(SEND_RECEIPT, [Mail(n) for n in range(2_000)], queue="emails")
        assert index_pages(con) > empty
        assert len(queue.claim_many(100, queues=["emails"])) == 100


def test_postgres_tables_of_version_6_gain_the_queue_column_their_jobs_in_default(pg_conninfo: str) -> None:
    import psycopg

    from jobqueue.backends import postgres, sql

    clock = ManualClock(T0)
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        queue.enqueue(SEND_RECEIPT, Mail(1), id="kept")
    with psycopg.connect(pg_conninfo, autocommit=True) as con:  # back to version 6
        con.execute("DROP INDEX jobqueue_jobs_queue_claim")
        con.execute("ALTER TABLE jobqueue_jobs DROP COLUMN queue")
        con.execute("ALTER TABLE jobqueue_finished DROP COLUMN queue")
        con.execute("UPDATE jobqueue_schema SET version = 6")
    assert postgres.migrate(pg_conninfo) == [number for number, _ in sql.numbered_migrations(postgres.SQL, 6)]
    with postgres.PostgresQueue(pg_conninfo, clock=clock) as queue:
        lease = queue.claim(queues=["default"])
        assert lease is not None and (lease.job.id, lease.job.queue) == ("kept", "default")
    assert postgres.migrate(pg_conninfo) == []  # current: nothing to do


def test_a_duckdb_file_of_version_7_gains_the_queue_column_its_jobs_in_default(tmp_path: Path) -> None:
    path = tmp_path / "v7.duckdb"
    clock = ManualClock(T0)
    with DurableQueue(path, clock=clock) as queue:
        queue.enqueue(SEND_RECEIPT, Mail(1), id="kept")
        queue.enqueue(SEND_RECEIPT, Mail(2), id="dead")
        lease = queue.claim_many(2)[1]
        queue.fail(lease, "no", permanent=True)
    with duckdb.connect(str(path)) as con:  # back to the tables of version 7
        for table in ("jobqueue_jobs", "jobqueue_dead", "jobqueue_finished"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN queue")
        con.execute("UPDATE jobqueue_schema SET version = 7")
    with DurableQueue(path, clock=clock) as queue:
        clock.advance(3600)
        lease = queue.claim(queues=["default"])
        assert lease is not None and (lease.job.id, lease.job.queue) == ("kept", "default")
        assert [letter.job.queue for letter in queue.dead_letters()] == ["default"]
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT version FROM jobqueue_schema").fetchall() == [
            (duckdb_backend.SCHEMA_VERSION,)
        ]


# -- counts per queue: census, dashboard, jobqueue stats --------------------------------------


def test_the_census_counts_each_queue_by_state_beside_each_type(queue: Queue) -> None:
    from jobqueue.backends.contract import ShowsOverview
    from jobqueue.census import QueueCounts
    from jobqueue.cli import per_queue
    from jobqueue.overview import snapshot

    fill(queue)
    assert isinstance(queue, ShowsOverview)
    leases = queue.claim_many(2, queues=["emails", "reports"])  # r1, e1
    queue.fail(leases[0], "no", permanent=True)  # r1 dead
    census = queue.census()
    assert census.by_queue == (
        QueueCounts(queue="default", waiting=2),
        QueueCounts(queue="emails", waiting=1, leased=1),
        QueueCounts(queue="reports", waiting=1, dead=1),
    )
    assert [(counts.job_type, counts.waiting) for counts in census.by_type] == [
        ("render_report", 1),
        ("send_receipt", 3),
    ]
    assert snapshot(queue, where="here").to_json()["by_queue"] == [
        {"queue": "default", "waiting": 2, "scheduled": 0, "leased": 0, "dead": 0, "cancelled": 0}
        | {"done": 0, "failed": 0},
        {"queue": "emails", "waiting": 1, "scheduled": 0, "leased": 1, "dead": 0, "cancelled": 0}
        | {"done": 0, "failed": 0},
        {"queue": "reports", "waiting": 1, "scheduled": 0, "leased": 0, "dead": 1, "cancelled": 0}
        | {"done": 0, "failed": 1},  # r1's failure
    ]
    assert per_queue(census) == [
        "queue default: 2 waiting, 0 scheduled, 0 leased, 0 dead, 0 cancelled",
        "queue emails: 1 waiting, 0 scheduled, 1 leased, 0 dead, 0 cancelled",
        "queue reports: 1 waiting, 0 scheduled, 0 leased, 1 dead, 0 cancelled",
    ]


def test_jobqueue_stats_adds_a_line_per_queue_only_once_a_job_names_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobqueue.cli import main

    path = tmp_path / "q.duckdb"
    with DurableQueue(path, clock=ManualClock(T0)) as queue:
        queue.enqueue(SEND_RECEIPT, Mail(1))
    assert main(["stats", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("cancelled")  # the figures alone
    with DurableQueue(path, clock=ManualClock(T0)) as queue:
        queue.enqueue(RENDER_REPORT, Mail(2), queue="reports")
    assert main(["stats", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "queue default: 1 waiting, 0 scheduled, 0 leased, 0 dead, 0 cancelled",
        "queue reports: 1 waiting, 0 scheduled, 0 leased, 0 dead, 0 cancelled",
    ]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--queues", "emails"], "argument --queues: expected queue=slots"),
        (["--queues", "emails=0"], "argument --queues: expected queue=slots"),
        (["--queues", "=2"], "argument --queues: expected queue=slots"),
        (["--queues", "emails=2", "--concurrency", "3"], "--concurrency and --queues do not go together"),
    ],
)
def test_bad_worker_queues_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    from jobqueue.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["worker", str(tmp_path / "q.duckdb"), "--handlers", HANDLERS, "--burst", "--create", *option])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


HANDLERS = "jobqueue.examples.shop_worker:register"


def test_a_burst_worker_with_queues_runs_those_queues_and_leaves_the_others(tmp_path: Path) -> None:
    from jobqueue.cli import main
    from jobqueue.examples.shop import SEND_RECEIPT as SHOP_RECEIPT
    from jobqueue.examples.shop import ReceiptPayload

    path = tmp_path / "q.duckdb"
    with DurableQueue(path) as queue:
        for n, name in enumerate(["emails", "emails", "reports"]):
            queue.enqueue(SHOP_RECEIPT, ReceiptPayload(order_id=n, email=f"{n}@example.com"), queue=name)
    assert main(["worker", str(path), "--handlers", HANDLERS, "--burst", "--queues", "emails=2"]) == 0
    with DurableQueue(path) as queue:
        assert [job.queue for job in queue.jobs()] == ["reports"]


def test_when_one_queues_lane_fails_the_runner_stops_the_others_and_raises() -> None:
    clock = ManualClock(T0)
    queue = JobQueue(clock=clock)
    queue.enqueue(SEND_RECEIPT, Mail(1), id="slow", queue="emails")
    started: list[str] = []
    claim_many = queue.claim_many

    def broken(limit: int, *, types: object = None, queues: object = None) -> list[Lease]:
        if queues == ["reports"] and clock.now() >= T0 + 5:
            raise OSError("disk full")
        return claim_many(limit, types=types, queues=queues)  # type: ignore[arg-type]

    queue.claim_many = broken  # type: ignore[method-assign]

    async def email(mail: Mail) -> None:
        started.append("slow")
        try:
            await clock.sleep(3600)
        except asyncio.CancelledError:
            started.append("cancelled")
            raise

    worker = Worker(queue)
    worker.register(SEND_RECEIPT, email)
    runner = Runner(worker, queues={"emails": 1, "reports": 1}, prefetch=0)

    async def scenario() -> list[str]:
        task = asyncio.create_task(runner.run())
        await clock.run_for(10)
        with pytest.raises(OSError, match="disk full"):
            await asyncio.wait_for(task, timeout=10)  # an outer bound, never reached when it works
        return list(started)  # before asyncio.run cancels what is left: the lanes stopped already

    assert asyncio.run(scenario()) == ["slow", "cancelled"]
    (job,) = queue.jobs()
    assert job.leased_until is not None  # cancelled with the failing queue: its lease left to run out


def test_the_notebook_view_lists_the_jobs_by_queue() -> None:
    from jobqueue.overview import snapshot
    from jobqueue.teaching.dashboard_view import tables_html

    queue = JobQueue(clock=ManualClock(T0))
    queue.enqueue(SEND_RECEIPT, Mail(1), queue="emails")
    queue.enqueue(RENDER_REPORT, Mail(2), queue="<reports>")
    text = tables_html(snapshot(queue, where="x"))
    cells = "".join(
        f"<td style='padding-right:12px'>{value}</td>" for value in ("emails", "1", "0", "0", "0")
    )
    assert cells in text
    assert "&lt;reports&gt;" in text and "<reports>" not in text


def test_job_changed_is_replace_without_the_init_and_refuses_an_unknown_field() -> None:
    from dataclasses import fields, replace

    from jobqueue import Job

    job = Job(id="j", type="t", payload="{}", priority=3, enqueued_at=5.0, queue="emails")
    changes = {"attempts": 2, "leased_until": 40.0, "leased_at": 10.0, "fencing_token": 9}
    changed = job.changed(**changes)
    assert [getattr(changed, f.name) for f in fields(Job)] == [
        getattr(replace(job, **changes), f.name)
        for f in fields(Job)  # type: ignore[arg-type]
    ]
    assert job.attempts == 0  # the original is left as it was
    with pytest.raises(InvalidSettingError, match=r"a job has no field \['queues'\]"):
        job.changed(queues="emails")
