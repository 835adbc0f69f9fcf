"""How a kernel that runs a learner's code is started: its folder, its user, what it can see.

Every kernel the checker starts (:func:`kernel_manager`) talks to the checker over
Unix-domain sockets in its own folder (Jupyter's ``ipc`` transport: no TCP port, and no
"running over TCP without encryption" warning) and has that folder as working directory,
``HOME`` and ``TMPDIR``. ``make check`` (:data:`OWN`) stops there: the learner checks their
own work, with their own environment.

The grader (``make grade``) runs other people's code and adds a :class:`Sandbox`, chosen once
per run by :meth:`Sandbox.create`, the strongest this machine allows:

* ``bubblewrap`` (Debian's ``bubblewrap``, where it works): each kernel sees a file system
  of its own, read-only but for its folder: the system (``/usr``, ``/etc``), Python and the
  course's virtual environment, and a read-only copy of the ``jobqueue`` package. The course
  folder, the submissions, the teacher's home and the other kernels' folders are not there.
  It has its own process list (the grader's processes and their ``/proc/<pid>/fd`` cannot be
  seen) and, unless an exercise needs a database over TCP, no network. Run as root, the
  kernel also drops to a user id of its own (:data:`FIRST_UID` up) with no capabilities.
* ``unprivileged user`` (root without bubblewrap): each kernel runs as a user id of its
  own, with no capabilities, through ``setpriv``: it cannot write the teacher's files or
  read another kernel's folder or the grader's descriptors, but it can read what any user
  can (the course folder, world-readable submissions).
* ``none`` (a normal user without bubblewrap): the kernel runs as the teacher, with the
  read-only package copy and its own folder, and could write anything the teacher can.

In every mode the kernel gets a small environment of its own (nothing of the grader's
but ``PATH`` and, for the PostgreSQL exercise, the database URL), and imports ``jobqueue``
from the read-only copy, never from the course's editable source tree.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

import jobqueue
from jobqueue.teaching import kernel_database

FIRST_UID = 62000
"""First user id given to a kernel when the grader runs as root (see :meth:`Sandbox.seat`)."""

UIDS = 2000
"""How many user ids from :data:`FIRST_UID` there are for kernels and the probe."""

PROBE_UID = FIRST_UID + UIDS - 1
"""The user id :meth:`Sandbox.create` tries kernels with (never given to one)."""

UID_LOCKS = Path("/run/jobqueue-kernel-uids")
"""Where a lock file per user id says a kernel has it (only root can make this folder)."""

SOCKET_FOLDER = "/run/jobqueue-postgres"
"""Where a kernel in bubblewrap finds the database's Unix socket (and nothing else of its folder)."""

MODES = ("bubblewrap", "unprivileged user", "none")
"""The isolation modes, strongest first."""


_giving = threading.Lock()


@dataclass(frozen=True)
class Seat:
    """What one graded kernel is given (see :meth:`Sandbox.seat`).

    Attributes:
        uid: its user id (None unless the grader runs as root).
        database_url: its database URL, with a role and password of its own (None if the
            run has no database).
    """

    uid: int | None
    database_url: str | None = None


@contextlib.contextmanager
def _reserved_uid() -> Iterator[int]:
    """A kernel user id no process runs as, locked in :data:`UID_LOCKS` until the block ends."""
    import psutil

    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    with _giving:  # one pick at a time in this process; the locks keep other processes apart
        running = [p.info.get("uids") for p in psutil.process_iter(["uids"])]
        busy = {ids.real for ids in running if ids is not None}
        candidates = [uid for uid in range(FIRST_UID, PROBE_UID) if uid not in busy]
        random.shuffle(candidates)
        for uid in candidates:
            fd = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another kernel, of this run or another, holds it
                os.close(fd)
                continue
            break
        else:
            raise SandboxError(f"every kernel user id ({FIRST_UID} to {PROBE_UID - 1}) is in use")
    try:
        yield uid
    finally:
        os.close(fd)


class SandboxError(Exception):
    """Kernels cannot be isolated as asked on this machine (the message says what to install)."""


class _Launcher(AsyncKernelManager):
    """A kernel manager that starts the kernel behind a prefix, with its own environment.

    :func:`kernel_manager` makes a subclass per kernel with the class attributes set, so
    that nbclient creates (and shuts down) the manager itself.
    """

    jq_folder: Path
    jq_prefix: tuple[str, ...] = ()
    jq_env: Mapping[str, str] = {}
    jq_owner: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("connection_file", str(self.jq_folder / "kernel.json"))
        super().__init__(**kwargs)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        """The kernel's command behind the sandbox's; the connection file readable by the kernel."""
        command: list[str] = super().format_kernel_cmd(extra_arguments)
        if self.jq_owner is not None:
            os.chown(self.connection_file, self.jq_owner, self.jq_owner)
        return [*self.jq_prefix, *command]

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        kw["env"] = dict(self.jq_env)
        # What the kernel process itself prints (not its cells' output, which comes as
        # messages) is noise on the checker's terminal, such as libzmq's assertion
        # "pfd.revents & POLLIN" when a loaded machine stops a kernel.
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        result: tuple[list[str], dict[str, Any]] = await super()._async_pre_start_kernel(**kw)
        return result


def end_processes_of(uid: int) -> int:
    """Kill (SIGKILL) every process whose real or effective user id is ``uid``; how many there were.

    Only for the user ids the grader gives kernels (:data:`FIRST_UID` up): nothing else
    runs as them.

    Raises:
        ValueError: if ``uid`` is not one of those ids.
    """
    import psutil

    if not FIRST_UID <= uid < FIRST_UID + UIDS:
        raise ValueError(f"{uid} is not a kernel's user id ({FIRST_UID} to {FIRST_UID + UIDS - 1})")
    ended = 0
    for _ in range(10):  # a process may fork while the others are killed: look again
        found = [p for p in psutil.process_iter(["uids"]) if _runs_as(p.info.get("uids"), uid)]
        if not found:
            break
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        ended += len(found)
        psutil.wait_procs(found, timeout=5)
    return ended


def _manager(
    folder: Path, prefix: list[str], env: dict[str, str], owner: int | None
) -> type[AsyncKernelManager]:
    attributes = {"jq_folder": folder, "jq_prefix": tuple(prefix), "jq_env": env, "jq_owner": owner}
    return type("SandboxedKernelManager", (_Launcher,), attributes)


def kernel_manager(
    folder: Path, ipython_dir: Path, sandbox: Sandbox | None = None, seat: Seat | None = None
) -> type[AsyncKernelManager]:
    """The kernel manager class for one check: its own folder, IPC sockets, the sandbox if given.

    Args:
        folder: the kernel's folder (working directory, ``HOME``, ``TMPDIR``, sockets).
        ipython_dir: the ``IPYTHONDIR`` whose start-up files the kernel runs.
        sandbox: the grader's isolation; None for ``make check`` (the learner's own
            environment, minus ``HOME`` and ``TMPDIR``).
        seat: what the kernel is given in the sandbox (from :meth:`Sandbox.seat`).
    """
    if sandbox is None:
        env = dict(os.environ)
        env.update(_own_folder_env(folder, ipython_dir))
        return _manager(folder, [], env, None)
    if seat is None:
        raise SandboxError("a kernel in a sandbox needs a seat of its own (Sandbox.seat)")
    return sandbox.kernel_manager(folder, ipython_dir, seat)


def ipc_kernel_manager(sockets: Path) -> type[AsyncKernelManager]:
    """A kernel manager class whose kernel talks over Unix sockets in ``sockets``, in this environment.

    For notebooks the teacher's tools run (``make notebooks``): Jupyter's default TCP
    transport makes the kernel warn that it runs "over TCP without encryption".
    """
    return _manager(sockets, [], dict(os.environ), None)


def _own_folder_env(folder: Path, ipython_dir: Path) -> dict[str, str]:
    return {
        "HOME": str(folder),
        "TMPDIR": str(folder),
        "IPYTHONDIR": str(ipython_dir),
        "MPLCONFIGDIR": str(folder / ".matplotlib"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _works(command: list[str], env: dict[str, str]) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _read_only_copy(target: Path) -> Path:
    """Copy ``jobqueue`` into ``target``, compiled and read-only; return the folder to import from."""
    source = Path(jobqueue.__file__).resolve().parent
    copy = target / "jobqueue"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    compileall.compile_dir(copy, quiet=1, workers=1)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    target.chmod(0o555)
    return target


def _make_writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(stat.S_IRWXU | path.stat().st_mode)


@dataclass
class Sandbox:
    """The grader's isolation of kernels, chosen once per run (see the module docstring).

    Attributes:
        mode: one of :data:`MODES`.
        packages: the folder holding the read-only ``jobqueue`` copy (on ``PYTHONPATH``).
        as_root: whether the grader runs as root (kernels then take user ids of their own).
        database_url: the database as kernels reach it, if set (no user or password: each
            kernel gets a role of its own, see :mod:`jobqueue.teaching.kernel_database`).
        admin_url: the same database as the grader reaches it, with a role that may
            create roles.
        socket: the database's Unix socket, if it is reached through one: in bubblewrap the
            kernel sees only that socket, at :data:`SOCKET_FOLDER`.
        network: whether kernels keep the network (a database reached over TCP).
    """

    mode: str
    packages: Path
    as_root: bool
    database_url: str | None = None
    admin_url: str | None = None
    socket: Path | None = None
    network: bool = False
    _holder: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @classmethod
    def create(cls, *, allow_weak: bool = True) -> Sandbox:
        """The strongest isolation this machine allows, with a fresh read-only package copy.

        Args:
            allow_weak: accept mode ``none`` (a normal user without bubblewrap).

        Raises:
            SandboxError: if the grader runs as root and kernels can run neither in
                bubblewrap nor as an unprivileged user, or if only ``none`` is possible
                and ``allow_weak`` is false.
        """
        holder = tempfile.TemporaryDirectory(prefix="jq-package-")
        packages = _read_only_copy(Path(holder.name))
        as_root = os.geteuid() == 0
        sandbox = cls("none", packages, as_root, _holder=holder)
        probe = [sys.executable, "-c", "import jobqueue"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(packages)}
        folder = Path(tempfile.mkdtemp(prefix="jq-probe-"))
        uid = PROBE_UID if as_root else None
        if uid is not None:
            os.chown(folder, uid, uid)
        try:
            if shutil.which("bwrap") and _works(sandbox._bwrap_prefix(folder, uid) + probe, env):
                sandbox.mode = "bubblewrap"
            elif uid is not None and _works(sandbox._setpriv(uid) + probe, env):
                sandbox.mode = "unprivileged user"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if sandbox.mode == "none" and as_root:
            sandbox.close()
            raise SandboxError(
                "the grader runs as root, and kernels can run neither in bubblewrap nor as an"
                f" unprivileged user (can user id {FIRST_UID} run {sys.executable}?):"
                " install bubblewrap (apt-get install bubblewrap), or grade as a normal user"
            )
        if sandbox.mode == "none" and not allow_weak:
            sandbox.close()
            raise SandboxError("bubblewrap does not work here; install it (apt-get install bubblewrap)")
        return sandbox

    def describe(self) -> str:
        """One line for the teacher: the mode and what it means."""
        if self.mode == "bubblewrap":
            who = "each kernel as a user id of its own, " if self.as_root else ""
            net = "network kept for the database" if self.network else "no network"
            if self.socket is not None:
                net += ", the database's socket"
            return (
                f"isolation: bubblewrap ({who}read-only file system but its own folder,"
                f" own process list, {net})"
            )
        if self.mode == "unprivileged user":
            return "isolation: unprivileged user (each kernel as a user id of its own; no bubblewrap)"
        return "isolation: none (kernels run as you; install bubblewrap to isolate them)"

    def with_database(self, url: str) -> None:
        """Let kernels reach the PostgreSQL server at ``url`` (a Unix socket, or TCP: then the network).

        ``url`` is the grader's own (a role that may create roles); kernels never see it.
        """
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        info = conninfo_to_dict(url)
        host = str(info.get("host") or "")
        kernels = make_conninfo("", **{k: v for k, v in info.items() if k not in ("user", "password")})
        if host.startswith("/") and self.mode == "bubblewrap":
            self.socket = Path(host) / f".s.PGSQL.{info.get('port') or 5432}"
            kernels = make_conninfo(kernels, host=SOCKET_FOLDER)
        self.network = not host.startswith("/")
        self.admin_url = url
        self.database_url = kernels

    @contextlib.contextmanager
    def seat(self) -> Iterator[Seat]:
        """What one kernel is given, held while it runs: a user id (as root), a database role.

        The user id (None unless the grader runs as root) is one of :data:`UIDS` from
        :data:`FIRST_UID`, picked at random among those no process runs as, and reserved
        with a lock in :data:`UID_LOCKS` that other grading runs on the machine respect. The
        database role (if the run has a database, see :meth:`with_database`) is new
        (:mod:`jobqueue.teaching.kernel_database`). When the block ends, whatever happened to
        the kernel (it ended, timed out, was killed), every process still running as the
        user id is killed (one the kernel detached with ``setsid`` included), the role is
        dropped with its sessions and databases, and the user id is free again.

        Raises:
            SandboxError: if every user id is in use.
            psycopg.Error: if the database refuses to make the role.
        """
        with contextlib.ExitStack() as held:
            uid = held.enter_context(_reserved_uid()) if self.as_root and self.mode != "none" else None
            if uid is not None:
                held.callback(end_processes_of, uid)
            url = None
            if self.admin_url is not None and self.database_url is not None:
                role = kernel_database.make_role(self.admin_url, self.database_url)
                held.callback(_drop_role, self.admin_url, role.name)
                url = role.url
            yield Seat(uid, url)

    def kernel_manager(self, folder: Path, ipython_dir: Path, seat: Seat) -> type[AsyncKernelManager]:
        """The kernel manager class that starts one kernel in this sandbox, in ``folder``, in ``seat``.

        Raises:
            SandboxError: if the grader runs as root and ``seat`` has no user id.
        """
        uid = seat.uid
        if self.as_root and self.mode != "none" and uid is None:
            raise SandboxError("a kernel started by root needs a user id of its own (Sandbox.seat)")
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "USER": "learner",
            "PYTHONPATH": str(self.packages),
            "MPLBACKEND": "agg",
            **_own_folder_env(folder, ipython_dir),
        }
        if seat.database_url is not None:
            env["JOBQUEUE_DATABASE_URL"] = seat.database_url
        if uid is not None:
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, uid, uid, follow_symlinks=False)
        folder.chmod(0o700)
        if self.mode == "bubblewrap":
            prefix = self._bwrap_prefix(folder, uid)
        elif self.mode == "unprivileged user":
            assert uid is not None
            prefix = self._setpriv(uid)
        else:
            prefix = []
        return _manager(folder, prefix, env, uid)

    def _setpriv(self, uid: int) -> list[str]:
        return [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]

    def _bwrap_prefix(self, folder: Path, uid: int | None) -> list[str]:
        read_only = [Path(sys.prefix), Path(sys.base_prefix), self.packages]
        command = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
        if not self.network:
            command.append("--unshare-net")
        command += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            top = Path("/") / name
            if top.is_symlink():
                command += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                command += ["--ro-bind", str(top), str(top)]
        made = {Path("/"), Path("/usr"), Path("/etc"), Path("/tmp")}
        command += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in [*read_only, folder]:
            for parent in reversed(path.parents):
                inside = any(parent.is_relative_to(bound) for bound in _bound(command))
                if parent not in made and not inside:
                    command += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
        for path in read_only:
            command += ["--ro-bind", str(path), str(path)]
        command += ["--bind", str(folder), str(folder), "--chdir", str(folder)]
        if self.socket is not None:
            command += ["--perms", "0755", "--dir", SOCKET_FOLDER]
            command += ["--bind", str(self.socket), f"{SOCKET_FOLDER}/{self.socket.name}"]
        # ipykernel exits when its parent looks gone: in the sandbox its parent is the
        # sandbox's own process 1, which lives as long as the kernel's launcher does.
        command += ["--setenv", "JPY_PARENT_PID", "1"]
        if uid is not None:
            command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
            return [*command, "--", *self._setpriv(uid)]
        return [*command, "--"]

    def __getstate__(self) -> dict[str, Any]:
        """What a checking process needs (the copy's owner, who removes it, stays behind)."""
        return {**self.__dict__, "_holder": None}

    def close(self) -> None:
        """Remove the read-only package copy."""
        if self._holder is not None:
            _make_writable(Path(self._holder.name))
            self._holder.cleanup()
            self._holder = None


def _drop_role(admin_url: str, name: str) -> None:
    """Drop a kernel's role; a server that has gone meanwhile leaves it (it cannot log in)."""
    import psycopg

    with contextlib.suppress(psycopg.Error):
        kernel_database.drop_role(admin_url, name)


def _runs_as(ids: Any, uid: int) -> bool:
    return ids is not None and uid in (ids.real, ids.effective)


def _bound(command: list[str]) -> list[Path]:
    """The targets bound so far in a bubblewrap command (their insides need no ``--dir``)."""
    return [Path(command[i + 2]) for i, arg in enumerate(command[:-2]) if arg in ("--ro-bind", "--bind")]
