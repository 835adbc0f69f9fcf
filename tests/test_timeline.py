import asyncio

import jobqueue as jq
from jobqueue.examples import shop
from jobqueue.teaching.timeline import LIFECYCLE, lifecycle_text, timeline_rows

BACKOFF = jq.Backoff(base_s=1, cap_s=60)


def constant(value: float) -> jq.RandomFn:
    return lambda: value


def event(
    at: float, job_id: str, attempt: int, outcome: jq.worker.Outcome, retry_at: float | None = None
) -> jq.JobEvent:
    return jq.JobEvent(
        at=at, job_id=job_id, job_type="t", attempt=attempt, outcome=outcome, retry_at=retry_at
    )


def test_timeline_of_the_lesson_04_outage_from_a_real_worker() -> None:
    clock = jq.ManualClock()
    queue = jq.JobQueue(
        clock=clock, retry=jq.RetryPolicy(max_attempts=5, backoff=BACKOFF), random=constant(1.0)
    )
    worker = jq.Worker(queue)
    worker.register(shop.SEND_RECEIPT, shop.receipt_handler(shop.MailProvider(clock=clock, down_until_s=5)))
    queue.enqueue(shop.SEND_RECEIPT, shop.ReceiptPayload(order_id=1, email="a@example.com"), id="receipt")

    async def run() -> None:
        for _ in range(10):
            await worker.drain()
            clock.advance(1)

    asyncio.run(run())
    (row,) = timeline_rows(worker.events)
    assert row.text() == "receipt: attempts at t=0,1,3,7 -> done at t=7s"
    assert [mark.outcome for mark in row.attempts] == ["retry", "retry", "retry", "done"]
    assert row.waits == ((0, 1), (1, 3), (3, 7))
    assert (row.end, row.end_at) == ("done", 7)


def test_timeline_rows_merge_workers_and_keep_first_seen_order() -> None:
    worker_1 = [event(0, "b", 1, "retry", 1), event(3, "b", 3, "dead")]
    worker_2 = [event(1, "b", 2, "retry", 3), event(0.5, "a", 1, "done")]
    rows = timeline_rows([*worker_1, *worker_2])
    assert [row.job_id for row in rows] == ["b", "a"]
    assert rows[0].text() == "b: attempts at t=0,1,3 -> dead at t=3s"
    assert rows[1].text() == "a: attempts at t=0.5 -> done at t=0.5s"


def test_timeline_of_stale_attempts_with_start_times_and_a_dead_letter() -> None:
    events = [event(40, "inv", 1, "stale"), event(70, "inv", 2, "stale")]
    dead = jq.DeadLetter(job=jq.Job(id="inv", type="t", payload="{}", attempts=2, max_attempts=2), died_at=60)
    (row,) = timeline_rows(events, started_at={("inv", 1): 0, ("inv", 2): 30}, dead_letters=[dead])
    assert [(m.started_at, m.ended_at) for m in row.attempts] == [(0, 40), (30, 70)]
    assert (row.end, row.end_at) == ("dead", 60)
    assert row.text() == "inv: attempts at t=0*,30* -> dead at t=60s (* lease lost, not acked)"
    (open_row,) = timeline_rows(events)
    assert open_row.end is None
    assert open_row.text().startswith("inv: attempts at t=40*,70* -> not finished")


def test_lifecycle_lists_every_move_once() -> None:
    lines = lifecycle_text().splitlines()
    assert len(lines) == len(LIFECYCLE) == 7
    assert lines[1].split()[:3] == ["waiting", "->", "leased"]
    moves = {(m.source, m.target) for m in LIFECYCLE}
    assert moves == {
        (None, "waiting"),
        ("waiting", "leased"),
        ("leased", "done"),
        ("leased", "waiting"),
        ("leased", "dead"),
        ("dead", "waiting"),
    }
    assert sum(1 for m in LIFECYCLE if (m.source, m.target) == ("leased", "waiting")) == 2
    for move, line in zip(LIFECYCLE, lines, strict=True):
        assert line.endswith(f"{move.event} ({move.note})")
