"""Cleanup held back on PostgreSQL: the oldest open transaction, and the dead rows it keeps.

Every ack deletes a row and every claim updates one, and PostgreSQL keeps the old
versions (dead rows) until vacuum removes them. Vacuum may remove only versions that no
open transaction of the database can still see, so one transaction left open in any
session (a console's ``BEGIN`` forgotten, a report that reads for an hour, a worker that
holds a transaction while its handler runs) keeps every row deleted since it began: dead
rows pile up in the queue's table, and each claim walks over more of them. Measured here
(``benchmarks/postgres_held_back.py``): claim and ack of 100 jobs slowed several times
after 100,000 jobs passed with one idle transaction open, and barely without one.
Brandur Leach, "Postgres job queues & failure by MVCC" (2015), tells the same story.

:meth:`jobqueue.backends.postgres.PostgresQueue.cleanup_held_back` reports a
:class:`CleanupReport`: the oldest transaction holding back cleanup (from
``pg_stat_activity``), the queue table's dead rows and its last autovacuum (from
``pg_stat_user_tables``), and a warning past :data:`WARN_AFTER_S`. ``jobqueue stats`` prints
it, and the dashboard (web page and notebook view) shows it.

The cures: end such transactions (``idle_in_transaction_session_timeout`` on the role
ends a session idle in a transaction for longer), keep the queue's own transactions short,
and let autovacuum visit the queue's table often (per-table settings such as
``autovacuum_vacuum_scale_factor = 0``, ``autovacuum_vacuum_threshold = 1000``).

Introduced in lesson 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WARN_AFTER_S = 60.0
"""Age of the oldest transaction holding back cleanup past which a report warns, in seconds.

A claim or an ack is one short transaction, and a healthy application's are shorter than
a second; one open for a minute is almost always forgotten or stuck."""


@dataclass(frozen=True, kw_only=True)
class OpenTransaction:
    """A session of the queue's database whose transaction holds back cleanup.

    Attributes:
        pid: the server process of the session (``pg_terminate_backend(pid)`` ends it).
        application_name: what the client called itself (``application_name``), or ``""``.
        state: ``pg_stat_activity.state``: ``"idle in transaction"`` for one forgotten,
            ``"active"`` for one still running a statement.
        age_s: how long its transaction has been open, in seconds (the server's clock).
    """

    pid: int
    application_name: str
    state: str
    age_s: float

    def __str__(self) -> str:
        name = self.application_name or "no application_name"
        return f"pid {self.pid} ({name}, {self.state}), open {self.age_s:.0f} s"


@dataclass(frozen=True, kw_only=True)
class CleanupReport:
    """What holds back cleanup of the queue's table, and how far it has got.

    Attributes:
        oldest: the oldest transaction of another session that still has a snapshot or a
            transaction id (``backend_xmin`` or ``backend_xid``), or ``None``.
        dead_rows: dead row versions in the queue's table (``n_dead_tup``; an estimate that
            the server's statistics update within about a second of each change).
        live_rows: live rows in the queue's table (``n_live_tup``, the same kind of estimate).
        last_autovacuum_age_s: seconds since autovacuum last finished on the table, or
            ``None`` if it never ran there.
        warn_after_s: the threshold :attr:`warning` compares ``oldest.age_s`` with.
    """

    oldest: OpenTransaction | None
    dead_rows: int
    live_rows: int
    last_autovacuum_age_s: float | None
    warn_after_s: float = WARN_AFTER_S

    @property
    def warning(self) -> str | None:
        """A sentence for an operator when ``oldest`` is older than ``warn_after_s``, else ``None``."""
        if self.oldest is None or self.oldest.age_s <= self.warn_after_s:
            return None
        return (
            f"a transaction open for more than {self.warn_after_s:g} s holds back cleanup"
            f" ({self.oldest}): dead rows pile up and claims slow down; end it"
            f" (pg_terminate_backend({self.oldest.pid})) or set idle_in_transaction_session_timeout"
        )

    def lines(self) -> list[str]:
        """The report as ``jobqueue stats`` prints it: name and value per line, then any warning."""
        autovacuum = (
            "never" if self.last_autovacuum_age_s is None else f"{self.last_autovacuum_age_s:.0f} s ago"
        )
        rows = [
            ("oldest transaction holding back cleanup", str(self.oldest) if self.oldest else "none"),
            ("dead rows in the queue's table", f"{self.dead_rows} (live {self.live_rows})"),
            ("last autovacuum of the table", autovacuum),
        ]
        width = max(len(name) for name, _ in rows)
        shown = [f"{name:<{width}}  {value}" for name, value in rows]
        return shown + ([f"WARNING: {self.warning}"] if self.warning else [])

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values, what the dashboard's page shows."""
        oldest = self.oldest
        return {
            "oldest": None
            if oldest is None
            else {
                "pid": oldest.pid,
                "application_name": oldest.application_name,
                "state": oldest.state,
                "age_s": oldest.age_s,
            },
            "dead_rows": self.dead_rows,
            "live_rows": self.live_rows,
            "last_autovacuum_age_s": self.last_autovacuum_age_s,
            "warn_after_s": self.warn_after_s,
            "warning": self.warning,
        }
