"""The notebook view of the dashboard (jobqueue.teaching.dashboard_view)."""

from jobqueue import JobQueue, ManualClock
from jobqueue.examples.shop import BUILD_REPORT, SEND_RECEIPT, ReceiptPayload, ReportPayload
from jobqueue.overview import snapshot
from jobqueue.teaching.dashboard_view import DashboardView, dashboard_figure, tables_html


def shop() -> JobQueue:
    queue = JobQueue(clock=ManualClock(100.0))
    queue.enqueue(SEND_RECEIPT, ReceiptPayload(order_id=1, email="<nobody>"), id="r1")
    queue.enqueue_many(
        BUILD_REPORT, [ReportPayload(report_id=i, work_s=1.0) for i in (1, 2)], ids=["p1", "p2"]
    )
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "PermanentJobError: invalid e-mail address '<nobody>'", permanent=True)
    assert queue.claim() is not None  # p1 leased
    return queue


def test_the_view_shows_the_snapshot_summary_and_refreshes() -> None:
    queue = shop()
    view = DashboardView(queue, chart_s=60.0, bin_s=5.0)
    assert repr(view) == (
        "DashboardView('1 waiting, 0 scheduled, 1 leased, 1 dead, 0 cancelled; 0 done and 100% failed"
        " in the last 60 s; oldest waiting 0.0 s, 0.0 s since enqueue')"
    )
    assert bytes(view.picture.value).startswith(b"\x89PNG")
    lease = queue.claim()
    assert lease is not None
    queue.ack(lease)
    view.refresh_button.click()
    assert view.summary.startswith(
        "0 waiting, 0 scheduled, 1 leased, 1 dead, 0 cancelled; 1 done and 50% failed"
    )


def test_the_tables_escape_what_they_show() -> None:
    queue = shop()
    queue.clock.advance(4.0)  # type: ignore[attr-defined]
    text = tables_html(snapshot(queue, where="x"))
    assert "&lt;nobody&gt;" in text and "<nobody>" not in text
    assert "<td style='padding-right:12px'>p1</td>" in text and "in 26 s" in text and "4 s ago" in text


def test_the_figure_has_the_counts_and_the_rates_panels() -> None:
    figure = dashboard_figure(snapshot(shop(), where="x", chart_s=60.0, bin_s=5.0))
    counts, rates, failures = figure.axes
    assert [label.get_text() for label in counts.get_yticklabels()] == ["build_report", "send_receipt"]
    assert [text.get_text() for text in rates.get_legend().get_texts()] == ["done per second", "failed %"]
    assert len(rates.lines[0].get_xdata()) == 12 and failures.get_ylim() == (0.0, 100.0)
