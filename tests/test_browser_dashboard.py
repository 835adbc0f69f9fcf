"""The dashboard in headless Chromium: live counts beside a worker, read-only, replay, cancel, the token.

On a DuckDB file: ``jobqueue worker FILE --dashboard`` runs slow reports while the page
polls (the counts change, the reports' done among them), until SIGTERM; then ``jobqueue
dashboard FILE --read-only`` shows the dead letter without buttons; then ``jobqueue
dashboard FILE`` replays it with its button (back to waiting), refuses a POST without the
token, and cancels the waiting job by its id. The picture taken while the worker runs is
screenshots/dashboard.png (git-ignored). Skips, naming the missing piece, without
Chromium or Playwright.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser_support import (
    announce,
    browser_page,
    free_port,
    missing_piece,
    screenshot,
    screenshot_on_failure,
)

from jobqueue import DurableQueue
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.skipif(missing_piece() is not None, reason=str(missing_piece()))

START_S = 60.0  # hang guard for a process to answer; it takes a second or two
STEP_MS = 30_000  # hang guard for one browser step; each takes well under a second


@contextmanager
def running(arguments: list[str], log: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``python -m jobqueue <arguments> --…port P``: its URL once it answers, and the process."""
    port = free_port()
    flag = "--dashboard-port" if arguments[0] == "worker" else "--port"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "jobqueue", *arguments, flag, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{arguments[0]} did not serve {url}:\n{log.read_text()}") from None
                time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=30)


CLASHING_TIME_LABELS = """() => {
    // The chart's time axis, as uPlot drew it on its canvas: each label's lines, centred on
    // their tick. Two labels' lines at the same height that overlap are a clash.
    const axis = chart.axes[0];
    const pen = document.createElement("canvas").getContext("2d");
    pen.font = axis.font[0];
    const rows = [];
    axis._splits.forEach((at, i) => {
        String(axis._values[i] ?? "").split("\\n").forEach((text, line) => {
            if (text) (rows[line] ||= []).push([chart.valToPos(at, "x"), pen.measureText(text).width, text]);
        });
    });
    const clashes = [];
    for (const row of rows.filter(Boolean)) {
        for (let i = 1; i < row.length; i++) {
            const [x0, w0, t0] = row[i - 1], [x1, w1, t1] = row[i];
            if (x1 - x0 < (w0 + w1) / 2) clashes.push(`${t0} / ${t1}`);
        }
    }
    return clashes;
}"""
"""JavaScript: the pairs of labels of the chart's time axis whose text overlaps (none on a good page)."""


def cell(page: Page, job_type: str, state: str) -> str:
    return page.locator(f'#by-type tr[data-type="{job_type}"] td[data-state="{state}"]').inner_text()


def test_dashboard_shows_a_running_worker_then_replays_a_dead_letter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "shop.db"
    with DurableQueue(file) as queue:
        queue.enqueue(SEND_RECEIPT, ReceiptPayload(order_id=7, email="nobody"), id="receipt-7")
        queue.enqueue_many(BUILD_REPORT, [ReportPayload(report_id=i, work_s=0.5) for i in range(1, 21)])
    worker = [
        "worker",
        str(file),
        "--handlers",
        "jobqueue.examples.shop_worker:register",
        "--concurrency",
        "2",
    ]
    worker += ["--prefetch", "0", "--dashboard"]
    with browser_page() as page:
        page.set_default_timeout(STEP_MS)
        # 1. Beside a worker: the page loads, and its counts change while the worker runs.
        with (
            running(worker, tmp_path / "worker.log") as (url, process),
            screenshot_on_failure(page, "dashboard"),
        ):
            page.goto(url)
            page.wait_for_selector('#by-type tr[data-type="build_report"]')
            done = '#totals [data-card="done"] .value'
            first = page.locator(done).inner_text()
            reports_done = '#by-type tr[data-type="build_report"] td[data-outcome="done"]'
            # One refresh that shows more done (in the card and in the reports' row), jobs
            # running and the dead letter.
            page.wait_for_function(
                f"""() => document.querySelector('{done}').textContent !== '{first}'
                    && Number(document.querySelector('{reports_done}')?.textContent) > 0
                    && document.querySelector('#running tr[data-id]') !== null
                    && document.querySelector('#dead tr[data-id="receipt-7"]') !== null"""
            )
            assert int(page.locator(reports_done).inner_text()) >= 1
            assert page.evaluate(CLASHING_TIME_LABELS) == []
            shot = screenshot(page, "dashboard")
            process.terminate()  # SIGTERM: the worker gives its jobs back and stops
            assert process.wait(timeout=60) == 0
        announce(capsys, f"dashboard screenshot: {shot}")

        # 2. Read-only: the dead letter is shown, without a button.
        with running(["dashboard", str(file), "--read-only"], tmp_path / "read-only.log") as (url, _):
            page.goto(url)
            page.wait_for_selector('#dead tr[data-id="receipt-7"]')
            assert page.locator("#dead button").count() == 0
            assert page.locator("#cancel-form").is_hidden()
            assert "read-only" in page.locator("#status").inner_text()

        # 3. Replay with its button: the job is waiting again; a POST without the token is refused.
        with running(["dashboard", str(file)], tmp_path / "dashboard.log") as (url, _):
            page.goto(url)
            refused = page.request.post(f"{url}api/dead-letters/discard", data={"id": "receipt-7"})
            assert refused.status == 403
            page.locator('#dead tr[data-id="receipt-7"] button.replay').click()
            page.wait_for_selector("#dead td.empty")
            assert cell(page, "send_receipt", "waiting") == "1"
            assert cell(page, "send_receipt", "dead") == "0"
            assert "receipt-7 replayed" in page.locator("#action-message").inner_text()
            # 4. Cancel the waiting job by its id: it leaves the queue, counted as cancelled.
            page.locator("#cancel-id").fill("receipt-7")
            page.locator("#cancel-form button.cancel").click()
            cancelled = '#by-type tr[data-type="send_receipt"] td[data-state="cancelled"]'
            page.wait_for_function(f"""() => document.querySelector('{cancelled}').textContent === '1'""")
            assert cell(page, "send_receipt", "waiting") == "0"
            assert "receipt-7 cancelled" in page.locator("#action-message").inner_text()
