"""Run one notebook check in a process of its own, with a time limit, its kernel sandboxed.

What the grader (:mod:`jobqueue.teaching.exercises.grade`) needs to check many learners' notebooks
without one affecting another: a new process (forked from a server that has the heavy
modules loaded) with a limit on the size of files it writes and a temporary folder that
this process removes, a kernel started in the grader's :class:`~jobqueue.teaching.sandbox.Sandbox`
(its own folder, user id, file system view and process list, as the machine allows), each
cell's output capped inside the kernel (:mod:`jobqueue.teaching.output_cap`), and a time
limit after which the process and its kernel are killed (and, where the kernel has a user
id of its own, every process left running as it, see :meth:`Sandbox.seat`; in mode ``none``
a process the kernel detaches with ``setsid`` survives). The result comes back through a pipe the kernel
does not inherit: in bubblewrap it cannot see this process at all, as another user id it
cannot open its descriptors under ``/proc``; in mode ``none`` it could.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

from jobqueue.teaching.exercises.check import check_exercise
from jobqueue.teaching.exercises.generate import ExerciseError
from jobqueue.teaching.sandbox import Sandbox, Seat

STARTUP_LIMIT_S = 120.0
"""Longest a new checking process may take to load, before the notebook's time starts, in seconds."""

FILE_SIZE_LIMIT_BYTES = 64 * 2**20
"""Largest file a learner's notebook may write while it is checked (64 MiB)."""

PRELOAD = ("jobqueue", "nbformat", "nbclient", "IPython")
"""Modules each checking process starts with, imported once in the fork server (the checker's
own modules are imported by each child as it unpickles its task)."""


def _check_in_child(
    conn: Connection, learner: str, solution: str, workdir: str, sandbox: Sandbox | None, seat: Seat | None
) -> None:
    """Child: send ``("ready", None)``, check, then send ``("ok", CheckResult)`` or ``("error", reason)``.

    The kernel's folder is made inside ``workdir``, which the parent removes whatever happens.
    """
    os.setsid()  # its own process group: the parent kills it and its kernel together
    tempfile.tempdir = workdir
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # what the kernel prints at the file level goes nowhere
    os.dup2(devnull, 2)
    conn.send(("ready", None))  # imports done: the notebook's time starts now
    try:
        result: tuple[str, object] = (
            "ok",
            check_exercise(Path(learner), Path(solution), sandbox=sandbox, seat=seat),
        )
    except ExerciseError as exc:
        result = ("error", str(exc).replace(learner, Path(learner).name))
    except Exception as exc:  # any failure to read or run the notebook is a grade
        result = ("error", unreadable(exc))
    conn.send(result)
    conn.close()


def unreadable(exc: Exception) -> str:
    """One line on why a notebook could not be read or run (``not a notebook: ...``)."""
    name = type(exc).__name__
    if name == "NotJSONError" or isinstance(exc, UnicodeDecodeError):
        return "not a notebook: the file is not JSON"
    if name == "ValidationError":
        return f"not a valid notebook: {str(exc).splitlines()[0]}"
    return f"{name}: {exc}"


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux ``/proc``; elsewhere none are found)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    """Kill the child's process group and its kernel's (a kernel starts a session of its own)."""
    assert process.pid is not None
    for group in (*_children(process.pid), process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or not yet a group
            os.killpg(group, signal.SIGKILL)
    process.kill()
    process.join()


def check_isolated(
    learner_path: Path, solution_path: Path, timeout_s: float, sandbox: Sandbox | None = None
) -> tuple[str, object]:
    """Check one notebook in a new process, its kernel in ``sandbox`` if given, within ``timeout_s``.

    The time limit starts once the new process has loaded the checker (start-up on a busy
    machine is not the learner's time) and covers the kernel's start and every cell.

    Returns:
        ``("ok", CheckResult)``, ``("error", reason)`` or ``("timeout", None)``.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))  # each child forks with these loaded
    receiver, sender = context.Pipe(duplex=False)
    seat = sandbox.seat() if sandbox is not None else contextlib.nullcontext(None)
    folder = tempfile.TemporaryDirectory(prefix=f"grade-{solution_path.stem}-", ignore_cleanup_errors=True)
    with folder as workdir, seat as given:  # the seat ends first: then the folder goes
        os.chmod(workdir, 0o711)  # a kernel of another user id may pass through to its own folder
        args = (sender, str(learner_path), str(solution_path), workdir, sandbox, given)
        process = context.Process(target=_check_in_child, args=args, daemon=True)
        process.start()
        sender.close()
        try:
            if not receiver.poll(STARTUP_LIMIT_S):
                return ("error", f"the checker did not start within {STARTUP_LIMIT_S:g} s")
            receiver.recv()  # ready
            if not receiver.poll(timeout_s):
                return ("timeout", None)
            result: tuple[str, object] = receiver.recv()
            return result
        except EOFError:  # the child died without a word
            process.join()
            return ("error", f"the checker stopped (exit status {process.exitcode})")
        finally:
            receiver.close()
            _kill(process)  # then the seat ends what the kernel left behind, and its database role
