"""Lesson 11's "Try it yourself": after Run All, a kernel restart, the imports and the cell."""

import shutil
from pathlib import Path

from nbclient import NotebookClient

from jobqueue.teaching.notebooks import read

LESSON = Path(__file__).resolve().parent.parent / "lessons" / "11_production.ipynb"
TRY_IT = "# After a restart: a new process, 30 s later"


def run(cells: list, folder: Path) -> list[str]:
    nb = read(LESSON)
    nb.cells = cells
    NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return ["".join(out.get("text", "")) for cell in nb.cells for out in cell.get("outputs", [])]


def test_try_it_yourself_works_after_run_all_and_a_restart(tmp_path: Path) -> None:
    shutil.copy(LESSON, tmp_path)
    cells = read(LESSON).cells
    try_it = next(cell for cell in cells if cell.cell_type == "code" and cell.source.startswith(TRY_IT))
    imports = next(cell for cell in cells if cell.cell_type == "code")
    run(cells, tmp_path)  # Run All
    expected = "receipt-1001 attempt 2\nreceipt-1002 attempt 1\nreceipt-1003 attempt 1\n"
    for _ in range(2):  # a restart (a fresh kernel), the first code cell, then the cell; and again
        assert run([imports, try_it], tmp_path)[-1] == expected
