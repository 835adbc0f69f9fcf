"""Bad input meets the same refusal in every backend, before anything is sent or stored.

Issue 21, point 8: a NUL in an id or a job type's name, an id past the documented length,
an empty id to replay, and a handler's error message holding a NUL. PostgreSQL's text
cannot hold a NUL, and its key index cannot hold a very long id: the queue refuses them
first, with a jobqueue error naming the value, so a caller's transaction (``conn=``) is
left intact and its own rows are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from backends_support import BACKENDS, open_queue

import jobqueue as jq
from jobqueue.backends.contract import Queue
from jobqueue.job import MAX_NAME_LENGTH


@dataclass(frozen=True)
class Note:
    text: str


NOTE = jq.JobType("note", Note)


@pytest.fixture(params=BACKENDS)
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    with open_queue(request.param, request, clock=jq.ManualClock()) as opened:
        yield opened


BAD_IDS = [
    pytest.param("order\x00-1", "NUL", id="nul"),
    pytest.param("x" * (MAX_NAME_LENGTH + 1), f"at most {MAX_NAME_LENGTH}", id="too-long"),
    pytest.param("", "non-empty", id="empty"),
]


@pytest.mark.parametrize(("bad", "named"), BAD_IDS)
def test_a_bad_id_is_refused_by_every_call_that_takes_one(queue: Queue, bad: str, named: str) -> None:
    for call in (
        lambda: queue.enqueue(NOTE, Note("hi"), id=bad),
        lambda: queue.enqueue_many(NOTE, [Note("a"), Note("b")], ids=["fine", bad]),
        lambda: queue.get(bad),
        lambda: queue.replay(bad),
        lambda: queue.discard(bad),
    ):
        with pytest.raises(jq.InvalidSettingError, match=named):
            call()
    assert queue.jobs() == []  # not even the good id of the batch


def test_the_longest_id_allowed_is_stored_and_read_back(queue: Queue) -> None:
    longest = "é" * MAX_NAME_LENGTH  # two bytes each in UTF-8
    queue.enqueue(NOTE, Note("hi"), id=longest)
    lease = queue.claim()
    assert lease is not None and lease.job.id == longest


def test_a_job_type_name_with_a_nul_is_refused() -> None:
    with pytest.raises(jq.InvalidSettingError, match="NUL"):
        jq.JobType("note\x00", Note)
    with pytest.raises(jq.InvalidSettingError, match=f"at most {MAX_NAME_LENGTH}"):
        jq.JobType("n" * (MAX_NAME_LENGTH + 1), Note)


def test_an_error_message_with_a_nul_fails_the_job_like_any_other(queue: Queue) -> None:
    queue.enqueue(NOTE, Note("hi"), id="note-1")
    lease = queue.claim()
    assert lease is not None
    failed = queue.fail(lease, RuntimeError("bad byte \x00 from upstream"), permanent=True)
    assert failed.outcome == "dead"
    [dead] = queue.dead_letters()
    assert dead.job.last_error == "RuntimeError: bad byte \ufffd from upstream"


def test_a_nul_id_leaves_the_callers_transaction_intact(pg_conninfo: str) -> None:
    import psycopg

    with jq.PostgresQueue(pg_conninfo, clock=jq.ManualClock()) as queue, psycopg.connect(pg_conninfo) as con:
        con.execute("CREATE TABLE orders (id int)")
        con.execute("INSERT INTO orders VALUES (1)")
        with pytest.raises(jq.InvalidSettingError, match="NUL"):
            queue.enqueue(NOTE, Note("hi"), id="order\x00-1", conn=con)
        queue.enqueue(NOTE, Note("hi"), id="order-1", conn=con)
        con.commit()  # the caller's transaction was never aborted: both rows are kept
        assert con.execute("SELECT count(*) FROM orders").fetchone() == (1,)
        assert queue.get("order-1") is not None
