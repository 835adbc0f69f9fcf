"""Every lesson fits the page: no cell scrolls sideways in JupyterLab, in headless Chromium.

Opens each lesson in a JupyterLab of its own that starts no kernel (the check reads the
stored outputs, so none is needed), apart from test_browser.py's, so that the two run side
by side. Needs what test_browser.py needs; skips without it, naming the missing piece.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser_support import (
    LabServer,
    announce,
    browser_page,
    current_notebook,
    lab_server,
    missing_piece,
    open_notebook,
    screenshot_on_failure,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    reason = missing_piece()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("lab-fit")
    with lab_server(ROOT, workdir, options=["--LabServerApp.notebook_starts_kernel=False"]) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: LabServer) -> Iterator[Page]:
    """One browser page for the module: JupyterLab loads once, lessons open in its tabs."""
    with browser_page() as page:
        yield page


LESSONS = sorted(f"lessons/{path.name}" for path in (ROOT / "lessons").glob("*.ipynb"))
# Every element of each cell that could scroll sideways (code, outputs, prose), as
# [cell index, what, scroll width, client width] where it is wider than its box.
_WIDE_CELLS_JS = """
panel => {
  const parts = '.cm-scroller, .jp-OutputArea-output, .jp-OutputArea-output *, '
              + '.jp-RenderedMarkdown, .jp-RenderedMarkdown *';
  const scrolls = el => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible';
  return [...panel.querySelectorAll('.jp-Cell')].flatMap((cell, index) => {
    const right = cell.getBoundingClientRect().right + 1;
    return [...cell.querySelectorAll(parts)]
      .filter(el => scrolls(el) || el.getBoundingClientRect().right > right)
      .map(el => [index, el.classList[0] ?? el.tagName, el.scrollWidth, el.clientWidth]);
  });
}
"""


@pytest.mark.parametrize("relpath", LESSONS)
def test_lesson_fits_the_page(
    page: Page, lab: LabServer, relpath: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No cell of any lesson scrolls sideways: code, outputs and prose fit the page's width."""
    with screenshot_on_failure(page, f"{Path(relpath).stem}_width"):
        open_notebook(page, lab, relpath, kernel=False)
        notebook = current_notebook(page)
        notebook.locator(".jp-Cell").last.wait_for()
        wide = notebook.evaluate(_WIDE_CELLS_JS)
        assert not wide, f"cells wider than the page ([cell, element, scroll, client]): {wide}"
        announce(capsys, f"{relpath}: every cell fits the page")
