import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobqueue as jq

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def clock() -> jq.ManualClock:
    """A manual clock at t=0."""
    return jq.ManualClock()


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of the PostgreSQL server the tests use (``$JOBQUEUE_DATABASE_URL`` or a local one).

    Where no server can be had, the PostgreSQL tests skip and say why; in CI (CI=true) they
    fail instead, so a missing server never passes unnoticed.
    """
    try:
        from jobqueue.teaching.postgres_server import database_url

        return database_url()
    except Exception as exc:  # ImportError, a server that would not start, ...
        reason = f"no PostgreSQL server for the tests: {type(exc).__name__}: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
def pg_conninfo(pg_url: str) -> Iterator[str]:
    """URL (or conninfo) of a fresh, empty database on the test server, dropped afterwards."""
    from jobqueue.teaching.postgres_server import scratch_database

    with scratch_database(f"jobqueue_test_{uuid.uuid4().hex[:16]}", pg_url) as url:
        yield url
