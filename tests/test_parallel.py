"""`make test` runs in parallel: each notebook's cells must stay together on one xdist worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_notebooks_cells_run_on_one_worker_in_order() -> None:
    args = [sys.executable, "-m", "pytest", "lessons/00_why_queues.ipynb", "lessons/01_clock.ipynb"]
    args += ["--nbval", "--nbval-current-env", "-n", "2", "--dist", "loadfile", "-v"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    # xdist shows lessons/00_why_queues.ipynb as lessons/00_why_queues::ipynb
    runs = re.findall(
        r"\[(gw\d+)\].*? PASSED (lessons/\S+?)::Cell (\d+)", done.stdout.replace("::ipynb", ".ipynb")
    )
    assert runs, done.stdout[-3000:]
    for notebook in ("lessons/00_why_queues.ipynb", "lessons/01_clock.ipynb"):
        cells = [(worker, int(cell)) for worker, path, cell in runs if path.startswith(notebook)]
        assert len({worker for worker, _ in cells}) == 1, cells
        assert [cell for _, cell in cells] == sorted(cell for _, cell in cells)
