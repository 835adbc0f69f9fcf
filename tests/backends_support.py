"""One queue of each backend for the tests that run the same checks on all three.

A test module's fixture takes ``params=BACKENDS`` and opens its queue with :func:`open_queue`,
passing the options it needs (clock, retry, random); PostgreSQL runs on the course's real
server through the ``pg_conninfo`` fixture of ``conftest.py``.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jobqueue import DurableQueue, JobQueue, ManualClock, RetryPolicy
from jobqueue.backends.contract import Queue

BACKENDS = ["memory", "duckdb", "postgres"]
"""The backends, as fixture params (and test ids)."""


@contextmanager
def open_queue(
    backend: str, request: pytest.FixtureRequest, path: Path | str = ":memory:", **options: Any
) -> Iterator[Queue]:
    """The queue of ``backend`` with ``options``, closed on leaving.

    ``path``: the DuckDB file (default: in memory). ``request`` gives PostgreSQL's test
    database (``pg_conninfo``), asked for only when ``backend`` is ``"postgres"``.
    """
    if backend == "memory":
        yield JobQueue(**options)
    elif backend == "duckdb":
        with DurableQueue(path, **options) as durable:
            yield durable
    else:
        from jobqueue.backends.postgres import PostgresQueue

        with PostgresQueue(request.getfixturevalue("pg_conninfo"), **options) as postgres:
            yield postgres


def queue_at(request: pytest.FixtureRequest, start: float, retry: RetryPolicy) -> Iterator[Queue]:
    """The queue of backend ``request.param`` on a manual clock at ``start`` (seconds), with
    ``retry`` and its jitter at the top of its range (``random`` always 1.0): for fixtures."""
    with open_queue(
        request.param, request, clock=ManualClock(start), retry=retry, random=lambda: 1.0
    ) as opened:
        yield opened


def clock_of(queue: Queue) -> ManualClock:
    """The manual clock of ``queue`` (a test's queue runs on one)."""
    assert isinstance(queue.clock, ManualClock)
    return queue.clock
