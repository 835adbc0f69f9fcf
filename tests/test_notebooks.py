"""Notebooks: the committed files carry what JupyterLab saves; lessons have their parts.

That re-running a notebook reproduces its committed file byte for byte, pictures included
(so re-running leaves git clean), is checked by the course's pytest plugin
(``conftest.py`` in the course folder) on nbval's own run: ``make test`` runs nbval over
lessons/ and solutions/, and each notebook's last item, ``reproduces committed file``,
compares that run, normalised, with the file. One run per notebook serves both checks.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from waiting import HANG_GUARD_S

from jobqueue.teaching.notebooks import KERNELSPEC, LANGUAGE_INFO, execute, read, write

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
RUNNABLE = LESSONS + sorted((ROOT / "solutions").glob("*.ipynb"))
LINK = re.compile(r"\]\(([^)#]+\.ipynb)\)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_stored_language_info_is_what_the_kernel_reports() -> None:
    """JupyterLab saves the kernel's kernel_info language_info: storing the same keeps a save clean."""
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.kernel_info(reply=True, timeout=HANG_GUARD_S)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert reply["content"]["language_info"] == LANGUAGE_INFO


@pytest.mark.parametrize("path", [*RUNNABLE, *sorted((ROOT / "exercises").glob("*.ipynb"))], ids=rel)
def test_committed_metadata_is_what_jupyterlab_saves(path: Path) -> None:
    assert read(path).metadata == {"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO}


@pytest.mark.parametrize("path", LESSONS, ids=rel)
def test_lesson_has_goals_reasoning_recap_and_working_links(path: Path) -> None:
    text = "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown")
    assert "**Goals.**" in text
    assert "## Reason it out" in text and "<details>" in text
    assert "## Recap" in text
    links = LINK.findall(text)
    assert links, "a lesson links to the next lesson or its exercise"
    for link in links:
        assert (path.parent / link).exists(), f"broken link {link}"


def run_pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_every_lesson_and_solution_gets_the_rerun_check() -> None:
    done = run_pytest("--collect-only", "--nbval", "lessons", "solutions", cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:]
    checks = [line for line in done.stdout.splitlines() if line.endswith("::reproduces committed file")]
    assert sorted(checks) == sorted(f"{rel(path)}::reproduces committed file" for path in RUNNABLE)


PICTURE = 'from IPython.display import display\ndisplay({"image/png": "%s", "text/plain": "a pic"}, raw=True)'


def test_rerun_check_fails_on_a_changed_picture_that_nbval_does_not_compare(tmp_path: Path) -> None:
    shutil.copy(ROOT / "conftest.py", tmp_path)  # the plugin, as in the course folder
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print("hello")')])
    nb.cells.append(nbformat.v4.new_code_cell(PICTURE % "iVBORw0KGgoAAAA"))
    committed = execute(nb, tmp_path)
    write(committed, tmp_path / "same.ipynb")
    committed.cells[1].outputs[0].data["image/png"] = "iVBORw0KGgoBBBB"
    write(committed, tmp_path / "changed.ipynb")

    done = run_pytest("--nbval", "--nbval-current-env", "-rA", "same.ipynb", "changed.ipynb", cwd=tmp_path)
    lines = done.stdout.splitlines()
    summary = [line.split(" - ")[0] for line in lines if line.startswith(("PASSED", "FAILED"))]
    assert sorted(summary) == [
        "FAILED changed.ipynb::reproduces committed file",
        "PASSED changed.ipynb::Cell 0",
        "PASSED changed.ipynb::Cell 1",  # nbval does not compare pictures
        "PASSED same.ipynb::Cell 0",
        "PASSED same.ipynb::Cell 1",
        "PASSED same.ipynb::reproduces committed file",
    ], done.stdout[-3000:]
    assert '-      "image/png": "iVBORw0KGgoBBBB"' in done.stdout
