"""The SQL files of the two database backends: named blocks, the same names for the same operations."""

import pytest

from jobqueue.backends import duckdb as duckdb_backend
from jobqueue.backends import postgres as postgres_backend
from jobqueue.backends import sql

SHARED = {
    "schema",
    "enqueue",
    "enqueue_fresh",
    "find",
    "claim",
    "ack",
    "holder",
    "retry",
    "bury",
    "bury_unreadable",
    "extend",
    "release",
    "replay",
    "discard",
    "get",
    "jobs",
    "dead_letters",
    "next_visible_at",
    "count",
    "metrics",
    "count_outcomes",
    "forget_outcomes",
}


def test_both_backends_name_every_operation_alike() -> None:
    assert set(duckdb_backend.SQL) >= SHARED
    assert set(postgres_backend.SQL) >= SHARED


def test_blocks_are_statements_without_their_leading_comments_or_holes() -> None:
    for statements in (duckdb_backend.SQL, postgres_backend.SQL):
        for name, text in statements.items():
            assert text and not text.startswith("--"), name
            assert "{job_columns}" not in text and "{dead_columns}" not in text, name


def test_an_unfilled_placeholder_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="job_columns"):
        sql.load("duckdb.sql", {})
