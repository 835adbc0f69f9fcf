"""The dashboard on PostgreSQL in headless Chromium: the line on what holds back cleanup.

``jobqueue dashboard URL`` with a session idle in a transaction: the page's cleanup line
names its pid, application name and state; once the session ends, the next refresh says
nothing holds cleanup back. The picture is screenshots/dashboard_cleanup.png (git-ignored).
Skips, naming the missing piece, without Chromium or Playwright.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from browser_support import announce, browser_page, missing_piece, screenshot, screenshot_on_failure
from test_browser_dashboard import STEP_MS, running

from jobqueue.backends.postgres import PostgresQueue
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

pytestmark = pytest.mark.skipif(missing_piece() is not None, reason=str(missing_piece()))


def test_the_page_names_the_transaction_holding_back_cleanup_until_it_ends(
    pg_conninfo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresQueue(pg_conninfo) as queue:
        queue.enqueue(SEND_RECEIPT, ReceiptPayload(order_id=7, email="customer@example.com"))
    holder = psycopg.connect(pg_conninfo, application_name="forgotten console")
    holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    holder.execute("SELECT 1").fetchall()
    pid = holder.info.backend_pid
    try:
        with (
            browser_page() as page,
            running(["dashboard", pg_conninfo], tmp_path / "dashboard.log") as (url, _),
            screenshot_on_failure(page, "dashboard_cleanup"),
        ):
            page.set_default_timeout(STEP_MS)
            page.goto(url)
            page.wait_for_function(
                f"() => document.querySelector('#cleanup').textContent.includes('pid {pid} ')"
            )
            line = page.locator("#cleanup")
            assert line.is_visible()
            text = line.inner_text()
            assert "held back by" in text and "(forgotten console, idle in transaction)" in text, text
            shot = screenshot(page, "dashboard_cleanup")
            holder.close()
            page.wait_for_function(
                "() => document.querySelector('#cleanup').textContent.includes('nothing holds it back')"
            )
        announce(capsys, f"dashboard cleanup screenshot: {shot}")
    finally:
        holder.close()
