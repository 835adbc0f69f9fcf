"""`make test` runs in parallel: each notebook's cells must stay together on one xdist worker.

``make test`` uses ``--dist loadgroup``, which spreads tests one by one; the course's
conftest.py gives a notebook's items one ``xdist_group``, and this runs two lessons that
way to see that each lesson's cells, and its byte-for-byte check after them, ran on one
worker, in order.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_notebooks_cells_run_on_one_worker_in_order() -> None:
    args = [sys.executable, "-m", "pytest", "lessons/00_why_queues.ipynb", "lessons/01_clock.ipynb"]
    args += ["--nbval", "--nbval-current-env", "-n", "2", "--dist", "loadgroup", "-v"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    # xdist shows lessons/00_why_queues.ipynb as lessons/00_why_queues::ipynb
    runs = re.findall(
        r"\[(gw\d+)\].*? PASSED (lessons/\S+?\.ipynb)::(Cell \d+|reproduces committed file)",
        done.stdout.replace("::ipynb", ".ipynb"),
    )
    assert runs, done.stdout[-3000:]
    for notebook in ("lessons/00_why_queues.ipynb", "lessons/01_clock.ipynb"):
        items = [(worker, item) for worker, path, item in runs if path == notebook]
        assert len({worker for worker, _ in items}) == 1, items
        cells = [int(item.removeprefix("Cell ")) for _, item in items[:-1]]
        assert cells == list(range(len(cells))) and len(cells) > 1, items
        assert items[-1][1] == "reproduces committed file", items
