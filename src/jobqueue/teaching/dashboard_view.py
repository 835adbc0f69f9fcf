"""The dashboard in a notebook: the same :class:`~jobqueue.overview.Snapshot` as the web page.

:func:`dashboard_figure` draws a snapshot with matplotlib (the jobs of each type by state,
and throughput with the failure rate over the chart's span); :class:`DashboardView` is a
widget a lesson shows as a cell's last expression: that picture, a one-line summary (its
plain-text form, which nbval compares), the jobs by queue and by type (each state, and
done and failed over the chart's span) and the running jobs and dead letters as tables
(on PostgreSQL below a line on what holds back cleanup of the queue's table), redrawn by
its Refresh button or :meth:`DashboardView.update`. On a
:class:`~jobqueue.clock.ManualClock` every figure it shows is deterministic (but for the
ages in the cleanup line, which are the server's).

Introduced with the dashboard.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from jobqueue.backends.contract import Queue
from jobqueue.census import STATES
from jobqueue.overview import Row, Snapshot, snapshot
from jobqueue.teaching.widgets import SummaryAndPicture

COLOURS = {
    "waiting": "#2f6fbd",
    "scheduled": "#8e6ac8",
    "leased": "#d9822b",
    "dead": "#c0392b",
    "cancelled": "#7f8c8d",
    "done": "#2e8b57",
}
"""One colour per state, the web page's (``dashboard/static/dashboard.css``)."""

_view_ids = itertools.count(1)


def dashboard_figure(taken: Snapshot) -> Figure:
    """Two panels: the jobs of each type by state (stacked bars), and throughput over time.

    The throughput panel plots jobs done per second in each bin of ``taken.rates`` and,
    on a second axis, the failure rate in per cent, against seconds before ``taken.at``.
    An estimated count is marked ``~`` in its type's label.
    """
    figure, (counts_ax, rates_ax) = plt.subplots(1, 2, figsize=(7.5, 3.2), width_ratios=(1, 1.3))
    census = taken.census
    types = [counts.job_type for counts in census.by_type]
    left = [0] * len(types)
    for state in STATES:
        values = [counts.count(state) for counts in census.by_type]
        mark = "~" if state in census.estimated else ""
        counts_ax.barh(types, values, left=left, color=COLOURS[state], label=f"{mark}{state}")
        left = [a + b for a, b in zip(left, values, strict=True)]
    counts_ax.invert_yaxis()
    counts_ax.set_xlabel("jobs")
    counts_ax.set_title("jobs by type", fontsize=10)
    counts_ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, frameon=False)
    if not types:
        counts_ax.text(0.5, 0.5, "no jobs", ha="center", va="center", transform=counts_ax.transAxes)
    ago = [rate.start + rate.width_s - taken.at for rate in taken.rates]
    rates_ax.plot(ago, [rate.per_s for rate in taken.rates], color=COLOURS["done"])
    rates_ax.set_xlabel("seconds before now")
    rates_ax.set_ylabel("jobs / s")
    rates_ax.set_ylim(bottom=0)
    rates_ax.set_title("throughput and failure rate", fontsize=10)
    failures = rates_ax.twinx()
    failures.plot(
        ago, [100 * rate.failure_rate for rate in taken.rates], color=COLOURS["dead"], label="failed %"
    )
    failures.set_ylim(0, 100)
    failures.set_ylabel("failed %")
    rates_ax.legend(
        [*rates_ax.lines, *failures.lines],
        ["done per second", "failed %"],
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.3),
        ncol=2,
        frameon=False,
    )
    figure.tight_layout()
    plt.close(figure)  # shown through the widget (or by the caller), not by pyplot
    return figure


def tables_html(taken: Snapshot) -> str:
    """The jobs by queue and by type, the running jobs and the dead letters of ``taken`` as HTML tables.

    Text is escaped. The tables by queue and by type count the jobs in each state, then
    the attempts done and failed over the chart's span (as the summary's done). On
    PostgreSQL a line on what holds back cleanup (:meth:`Snapshot.cleanup_line`) comes
    first, in red when it warns.
    """
    running = [
        (
            job.id,
            job.type,
            f"{job.attempts}/{job.max_attempts}",
            f"in {(job.leased_until or taken.at) - taken.at:.0f} s",
        )
        for job in taken.running
    ]
    dead = [
        (
            letter.job.id,
            letter.job.type,
            f"{taken.at - letter.died_at:.0f} s ago",
            letter.job.last_error or "",
        )
        for letter in taken.dead_letters
    ]
    cleanup = taken.cleanup_line()
    colour = "#c0392b" if taken.cleanup is not None and taken.cleanup.warning else "inherit"
    head = "" if cleanup is None else f"<p style='color:{colour}'>{html.escape(cleanup)}</p>"
    return (
        head
        + _counts_table("jobs by queue", "queue", taken.by_queue(), taken)
        + _counts_table("jobs by type", "type", taken.by_type(), taken)
        + _table("running", ("job", "type", "attempt", "lease ends"), running)
        + _table("dead letters", ("job", "type", "died", "last error"), dead)
    )


def _counts_table(title: str, label: str, rows: Sequence[Row], taken: Snapshot) -> str:
    """A table of ``rows``: each one's jobs by state (``~`` where estimated), done and failed."""
    span = f"{taken.span_s:g} s"
    cells = [
        (
            row.name,
            *(f"{'~' if state in taken.census.estimated else ''}{row.count(state)}" for state in STATES),
            f"{row.done}",
            f"{row.failed}",
        )
        for row in rows
    ]
    return _table(title, (label, *STATES, f"done, {span}", f"failed, {span}"), cells)


def _table(title: str, heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th style='text-align:left;padding-right:12px'>{html.escape(h)}</th>" for h in heads)
    body = "".join(
        "<tr>"
        + "".join(f"<td style='padding-right:12px'>{html.escape(value)}</td>" for value in row)
        + "</tr>"
        for row in rows
    )
    if not rows:
        body = f"<tr><td colspan='{len(heads)}'><i>none</i></td></tr>"
    return f"<b>{html.escape(title)}</b><table><tr>{head}</tr>{body}</table>"


class DashboardView(SummaryAndPicture):
    """The dashboard of ``queue`` as a notebook widget, fed by :func:`jobqueue.overview.snapshot`.

    Args:
        queue: any queue of this package (it needs the
            :class:`~jobqueue.backends.contract.ShowsOverview` reads).
        where: how the summary names the queue.
        chart_s, bin_s: the throughput panel's span and bin width, in seconds (see
            :func:`~jobqueue.overview.snapshot`).

    Its plain-text form is the summary line (:meth:`Snapshot.summary`). DOM hooks:
    ``dashboard-view`` (the box), ``dashboard-refresh`` (the button), ``dashboard-summary``,
    ``dashboard-picture`` and ``dashboard-tables``.

    Raises:
        InvalidSettingError: if ``queue`` lacks the overview reads, or a span is out of range.
    """

    def __init__(
        self, queue: Queue, *, where: str = "this notebook", chart_s: float = 60.0, bin_s: float = 5.0
    ):
        super().__init__("dashboard")
        self.queue = queue
        self.where = where
        self.chart_s = chart_s
        self.bin_s = bin_s
        self.tables = ipywidgets.HTML()
        self.tables.add_class("dashboard-tables")
        self.refresh_button = ipywidgets.Button(description="Refresh")
        self.refresh_button.add_class("dashboard-refresh")
        self.refresh_button.on_click(lambda _button: self.update())
        self._lay_out(
            [self.refresh_button], [], f"jobqueue-dashboard-view-{next(_view_ids)}", "dashboard-view"
        )
        self.box.children = (*self.box.children, self.tables)

    def update(self) -> None:
        """Take a new snapshot and show it."""
        taken = snapshot(self.queue, where=self.where, chart_s=self.chart_s, bin_s=self.bin_s)
        self.tables.value = tables_html(taken)
        self._show(taken.summary(), dashboard_figure(taken))
