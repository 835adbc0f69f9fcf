"""A PostgreSQL role for each graded kernel, made when it starts and dropped when it ends.

Exercise 12 has the learner's kernel use the course's PostgreSQL server. The grader logs in
with a role that may create roles (the server's superuser, by default) and never hands that
to a kernel: each kernel gets a role of its own (:func:`make_role`), with a random name and
password, that may log in (at most :data:`CONNECTION_LIMIT` sessions at once), create
databases and drop its own, and is no superuser, so it cannot read or write the server's
files, run programs there, or touch another kernel's databases. When the kernel ends, its
sessions are ended, its databases dropped and the role dropped (:func:`drop_role`), so
nothing it set on its role (``ALTER ROLE ... SET``) reaches a later kernel.

What a role cannot be kept from: filling the server's disk (there are no quotas), or
holding its sessions busy (``pg_sleep``) until the kernel ends.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

PREFIX = "jobqueue_learner_"
"""Start of every kernel role's name (the rest is random)."""

CONNECTION_LIMIT = 10
"""Most sessions one kernel's role may hold at once."""

_AUTOVACUUM = "pg_signal_autovacuum_worker"


@dataclass(frozen=True)
class KernelRole:
    """A kernel's role: its ``name`` and the ``url`` the kernel connects with (password in it)."""

    name: str
    url: str


def make_role(admin_url: str, kernel_url: str) -> KernelRole:
    """Make a new role for one kernel on the server at ``admin_url``.

    Args:
        admin_url: the grader's URL, whose role may create roles.
        kernel_url: the server as the kernel reaches it (no user or password); the role's
            name and password are added to it.

    Raises:
        psycopg.Error: if the server cannot be reached or refuses to make the role.
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = PREFIX + secrets.token_hex(6)
    password = secrets.token_hex(16)
    role = sql.Identifier(name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN CREATEDB NOSUPERUSER CONNECTION LIMIT {} PASSWORD {}").format(
                role, sql.Literal(CONNECTION_LIMIT), sql.Literal(password)
            )
        )
        # DROP DATABASE ... WITH (FORCE) ends the sessions in that database, and autovacuum
        # may have one there: without this role (PostgreSQL 17+), dropping it fails at times.
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (_AUTOVACUUM,)).fetchone():
            admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(_AUTOVACUUM), role))
    return KernelRole(name, make_conninfo(kernel_url, user=name, password=password))


def drop_role(admin_url: str, name: str) -> None:
    """End ``name``'s sessions, drop the databases it owns and the role itself.

    Raises:
        ValueError: if ``name`` is not a kernel role's name (:data:`PREFIX`).
        psycopg.Error: if the server cannot be reached or refuses.
    """
    import psycopg
    from psycopg import sql

    if not name.startswith(PREFIX):
        raise ValueError(f"{name!r} is not a kernel's role (they start with {PREFIX!r})")
    role = sql.Identifier(name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(role))  # no new sessions from here on
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
        owned = admin.execute(
            "SELECT datname FROM pg_database WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = %s)",
            (name,),
        ).fetchall()
        for (database,) in owned:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("DROP OWNED BY {}").format(role))
        admin.execute(sql.SQL("DROP ROLE {}").format(role))
