"""Notebooks: re-running reproduces the committed outputs exactly; lessons have their parts.

nbval (run by ``make test`` over lessons/ and solutions/) compares text outputs cell by
cell. The test here is stricter: a fresh run, normalised, must equal the committed file
byte for byte, pictures included, so that re-running a notebook leaves git clean.
"""

import copy
import difflib
import re
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from jobqueue.teaching.notebooks import KERNELSPEC, LANGUAGE_INFO, dumps, execute, read

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
RUNNABLE = LESSONS + sorted((ROOT / "solutions").glob("*.ipynb"))
LINK = re.compile(r"\]\(([^)#]+\.ipynb)\)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", RUNNABLE, ids=rel)
def test_rerun_reproduces_committed_notebook(path: Path) -> None:
    committed = path.read_text(encoding="utf-8")
    fresh = dumps(execute(copy.deepcopy(read(path)), path.parent))
    if fresh != committed:
        diff = difflib.unified_diff(
            committed.splitlines(), fresh.splitlines(), "committed", "re-run", lineterm=""
        )
        pytest.fail("re-running changed the notebook:\n" + "\n".join(list(diff)[:40]))


def test_stored_language_info_is_what_the_kernel_reports() -> None:
    """JupyterLab saves the kernel's kernel_info language_info: storing the same keeps a save clean."""
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.kernel_info(reply=True, timeout=60)
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
