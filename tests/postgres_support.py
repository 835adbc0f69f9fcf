"""Helpers for the tests that read PostgreSQL's own bookkeeping."""

from __future__ import annotations

import psycopg


def vacuum_left_no_dead_rows(conninfo: str) -> bool:
    """``VACUUM jobqueue_jobs``; whether it freed every dead row version.

    It cannot free one that a snapshot taken before its end may still read, nor those of a
    page another session had pinned (VACUUM then passes over the page).
    """
    report: list[str] = []
    with psycopg.connect(conninfo, autocommit=True) as con:
        con.add_notice_handler(lambda notice: report.extend((notice.message_primary or "").splitlines()))
        con.execute("VACUUM (VERBOSE) jobqueue_jobs")
    # One line for the table, one for its TOAST table: 'tuples: 3 removed, 2 remain, 0 are dead
    # but not yet removable'
    counts = [line for line in report if "dead but not yet removable" in line]
    assert counts, report
    missed = any(line.startswith("tuples missed") for line in report)  # a page pinned meanwhile
    return not missed and all(", 0 are dead but not yet removable" in line for line in counts)
