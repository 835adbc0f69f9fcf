"""chaos.lab_folder: lesson 15's files leave the temporary folder with the kernel that made them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jobqueue.teaching import chaos

LAB = """
import sys
from jobqueue.teaching.chaos import lab_folder
lab = lab_folder()
(lab / "runs").mkdir()
(lab / "runs" / "queue.db").write_bytes(bytes(100_000))
print(lab, flush=True)
sys.stdin.read()  # until the test closes standard input
"""


def start_lab(temp: Path) -> tuple[subprocess.Popen[str], Path]:
    env = {**os.environ, "TMPDIR": str(temp)}
    process = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", LAB],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lab = Path(process.stdout.readline().strip())
    assert lab.parent == temp and lab.name.startswith(chaos.LAB_PREFIX), process.communicate(timeout=300)
    assert (lab / "runs" / "queue.db").is_file()
    return process, lab


def finish(process: subprocess.Popen[str]) -> None:
    _, err = process.communicate("", timeout=300)
    assert (process.returncode, err) == (0, "")


def test_a_lab_folder_is_removed_when_its_process_exits(tmp_path: Path) -> None:
    process, lab = start_lab(tmp_path)
    finish(process)
    assert not lab.exists()


def test_a_killed_process_s_lab_folder_is_removed_by_the_next_lab(tmp_path: Path) -> None:
    by_hand = tmp_path / f"{chaos.LAB_PREFIX}made-by-hand"  # not lab_folder's: left alone
    by_hand.mkdir()
    killed, orphan = start_lab(tmp_path)
    running, alive = start_lab(tmp_path)
    killed.kill()  # SIGKILL, as Jupyter and nbval stop kernels: no atexit
    killed.communicate()
    assert orphan.exists()
    following, _ = start_lab(tmp_path)
    assert not orphan.exists()
    assert alive.exists() and by_hand.exists(), "a running process's lab stays"
    finish(running)
    finish(following)
    assert sorted(tmp_path.iterdir()) == [by_hand]
