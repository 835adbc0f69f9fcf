"""Pictures for the lessons, drawn with matplotlib's object-oriented API.

Each function returns a :class:`matplotlib.figure.Figure` built without pyplot, so no
global figure state leaks between cells or tests. A notebook shows it by making the
figure the cell's last expression (after ``%matplotlib inline``). The data of every
line comes from the package itself, so a test can read it back and compare.

The numbers come from :mod:`jobqueue.teaching.explore` and
:mod:`jobqueue.teaching.timeline`; a lesson prints them next to the picture, since
nbval compares text and never pictures.

Introduced in lesson 02 (the backoff curve, the delay spread, the herd); the life-cycle
in lesson 03; job timelines in lessons 04-06.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from jobqueue.backoff import Backoff
from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.explore import STRATEGY_NAMES, DelaySpread, HerdResult
from jobqueue.teaching.timeline import LIFECYCLE, AttemptMark, Move, TimelineRow

CEILING_LABEL = "ceiling (random() = 1)"
"""Legend label of the line through the largest delay of each attempt."""

FLOOR_LABEL = "half the ceiling (random() = 0)"
"""Legend label of the line through the smallest equal-jitter delay of each attempt."""

CAP_LABEL = "cap"
"""Legend label of the horizontal line at ``backoff.cap_s``."""


def backoff_figure(backoff: Backoff, attempts: int) -> Figure:
    """Draw the backoff curve: the ceiling per attempt and the equal-jitter band under it.

    For each attempt ``n`` in ``1..attempts`` the figure plots the ceiling
    (``backoff.delay_s(n, random=lambda: 1.0)``, equal to ``backoff.ceiling_s(n)``) and
    half of it (``backoff.delay_s(n, random=lambda: 0.0)``), shades the band between
    them where an equal-jitter delay falls, and marks the cap with a dashed line.

    Args:
        backoff: the delay rule to draw.
        attempts: how many attempts to show (>= 1), counted from 1.

    Returns:
        A new figure with one axes; its lines are labelled :data:`CEILING_LABEL`,
        :data:`FLOOR_LABEL` and :data:`CAP_LABEL`.

    Raises:
        InvalidSettingError: if ``attempts`` is less than 1.
    """
    if attempts < 1:
        raise InvalidSettingError(f"attempts must be >= 1, got {attempts!r}")
    numbers = list(range(1, attempts + 1))
    ceilings = [backoff.delay_s(n, lambda: 1.0) for n in numbers]
    floors = [backoff.delay_s(n, lambda: 0.0) for n in numbers]

    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(numbers, floors, ceilings, alpha=0.25, label="equal-jitter delays fall here")
    ax.plot(numbers, ceilings, marker="o", label=CEILING_LABEL)
    ax.plot(numbers, floors, marker="o", linestyle="--", label=FLOOR_LABEL)
    ax.axhline(backoff.cap_s, color="grey", linestyle=":", label=CAP_LABEL)
    ax.set_xticks(numbers)
    ax.set_xlabel("failed attempt n")
    ax.set_ylabel("delay before the next try (s)")
    ax.set_title(f"Backoff with equal jitter: base {backoff.base_s:g} s, cap {backoff.cap_s:g} s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="center left")
    ax.grid(alpha=0.3)
    return fig


MEDIAN_LABEL = "median"
"""Legend label of the line through the median delay of each attempt."""

SPREAD_LABEL = "smallest to largest drawn"
"""Legend label of the band between the smallest and largest delay drawn per attempt."""

REQUESTS_LABEL = "requests"
"""Legend label of the bars showing the herd's requests in each 1 s bucket."""

CAPACITY_LABEL = "capacity"
"""Legend label of the horizontal line at the herd's service capacity (requests/s)."""


def _draw_spread(ax: Axes, spread: DelaySpread) -> None:
    numbers = list(spread.attempts)
    ax.fill_between(numbers, spread.low_s, spread.high_s, alpha=0.25, label=SPREAD_LABEL)
    ax.plot(numbers, spread.median_s, marker="o", label=MEDIAN_LABEL)
    ax.axhline(spread.backoff.cap_s, color="grey", linestyle=":", label=CAP_LABEL)
    ax.set_xticks(numbers)
    ax.set_xlabel("failed attempt n")
    ax.set_ylabel("delay before the next try (s)")
    ax.set_title(
        f"{STRATEGY_NAMES[spread.strategy]}: base {spread.backoff.base_s:g} s, cap {spread.backoff.cap_s:g} s"
        f" ({spread.draws} draws)"
    )
    # no delay exceeds the cap: head room above it keeps the legend off the band and the line
    ax.set_ylim(0, spread.backoff.cap_s * 1.45)
    ax.legend(loc="upper left", ncols=2)
    ax.grid(alpha=0.3)


def _draw_herd(ax: Axes, herd: HerdResult) -> None:
    busy = [(second, count) for second, count in enumerate(herd.requests_per_s) if count]
    ax.axvspan(0, herd.down_until_s, color="tab:red", alpha=0.1, label="service down")
    # a bar per busy 1 s bucket; an edge of its own colour keeps a lone bar visible on a 500 s axis
    seconds, counts = zip(*busy, strict=True)
    ax.bar(seconds, counts, width=1.0, align="edge", edgecolor="tab:blue", label=REQUESTS_LABEL)
    ax.axhline(herd.capacity_per_s, color="black", linestyle="--", label=CAPACITY_LABEL)
    if herd.last_through_s is not None:
        ax.axvline(herd.last_through_s, color="tab:green", linestyle=":", label="last one through")
    ax.set_xlabel("time (s), 1 s buckets")
    ax.set_ylabel("requests per second")
    ax.set_title(f"Herd of {herd.clients}: peak {herd.peak_rps} req/s after recovery")
    top = max(*herd.requests_per_s, herd.capacity_per_s)
    ax.set_ylim(0, top * 1.4)  # head room for the legend, so it hides no step
    ax.legend(loc="upper right", ncols=2)
    ax.grid(alpha=0.3)


def delays_figure(spread: DelaySpread) -> Figure:
    """Draw how delays spread, attempt by attempt: a min-max band and the median line.

    Args:
        spread: from :func:`jobqueue.teaching.explore.delay_spread`.

    Returns:
        A new figure with one axes; its lines are labelled :data:`MEDIAN_LABEL` and
        :data:`CAP_LABEL`, its band :data:`SPREAD_LABEL` (delays in seconds).
    """
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    _draw_spread(fig.add_subplot(), spread)
    return fig


def herd_figure(herd: HerdResult) -> Figure:
    """Draw a herd's requests per second over time, with the outage and the capacity.

    Args:
        herd: from :func:`jobqueue.teaching.explore.simulate_herd`.

    Returns:
        A new figure with one axes: a bar from ``k`` to ``k + 1`` s of height
        ``herd.requests_per_s[k]`` for each bucket with requests (the bars' container is
        labelled :data:`REQUESTS_LABEL`), the outage shaded, and the capacity as a dashed
        line labelled :data:`CAPACITY_LABEL`.
    """
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    _draw_herd(fig.add_subplot(), herd)
    return fig


def explorer_figure(spread: DelaySpread, herd: HerdResult) -> Figure:
    """The backoff explorer's picture: the delay spread (left) and the herd (right).

    Returns:
        A new figure with two axes, drawn as :func:`delays_figure` and :func:`herd_figure`.
        Its margins are fixed rather than computed (half the drawing time), as a widget
        redraws it whenever a control moves.
    """
    fig = Figure(figsize=(11.0, 4.0))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.12, top=0.92, wspace=0.2)
    left, right = fig.subplots(1, 2)
    _draw_spread(left, spread)
    _draw_herd(right, herd)
    return fig


OUTCOME_STYLE: dict[str, tuple[str, str]] = {
    "done": ("o", "tab:green"),
    "retry": ("X", "tab:orange"),
    "dead": ("X", "tab:red"),
    "stale": ("s", "tab:grey"),
    "released": ("v", "tab:purple"),
    "deferred": ("D", "tab:blue"),
    "snoozed": ("P", "tab:cyan"),
    "cancelled": ("x", "tab:brown"),
}
"""Marker and colour of an attempt's end on a timeline, for every :data:`~jobqueue.worker.Outcome`."""

OUTCOME_LABELS: dict[str, str] = {
    "done": "done",
    "retry": "failed, retried later",
    "dead": "failed, dead",
    "stale": "lease lost, not acked",
    "released": "given back at shutdown",
    "deferred": "deferred, circuit open",
    "snoozed": "snoozed, attempt not counted",
    "cancelled": "cancelled, not retried",
}
"""Legend label of each outcome on a timeline."""


def timeline_figure(rows: Sequence[TimelineRow], *, title: str = "Job timeline") -> Figure:
    """Draw jobs over time: one row per job, its attempts, its waits for a retry, its end.

    Each attempt is a marker at the time it ended (:data:`OUTCOME_STYLE`; an attempt
    whose start is known is also a bar from start to end, offset up or down so that
    overlapping runs show), each wait for a retry a dotted line, and the end is
    written after the row ("done at t=7s", "dead at t=7s").

    Args:
        rows: from :func:`jobqueue.teaching.timeline.timeline_rows`; the first is drawn
            at the top.
        title: the figure's title.

    Returns:
        A new figure with one axes, time in seconds along x and one tick per job.
    """
    fig = Figure(figsize=(8.0, 1.2 + 0.7 * max(len(rows), 1)), layout="constrained")
    ax = fig.add_subplot()
    times = [t for row in rows for m in row.attempts for t in (m.ended_at, m.retry_at) if t is not None]
    end = max(times, default=1.0)
    for y, row in enumerate(reversed(rows)):
        for start, until in row.waits:
            ax.plot([start, until], [y, y], color="tab:orange", linestyle=":", linewidth=2)
        for index, mark in enumerate(row.attempts):
            _draw_attempt(ax, mark, y + (0.0 if mark.started_at is None else 0.15 - 0.3 * (index % 2)))
        if row.end is not None and row.end_at is not None:
            colour = OUTCOME_STYLE[row.end][1]
            if row.attempts[-1].outcome not in ("done", "dead"):  # dead-lettered by the queue
                ax.plot(row.end_at, y, marker="X", color=colour, markersize=10, linestyle="none")
            last = max(row.end_at, max(m.ended_at for m in row.attempts))
            label = f"{row.end} at t={row.end_at:g}s"
            ax.annotate(label, (last, y), xytext=(12, -4), textcoords="offset points", color=colour)
    outcomes = sorted({m.outcome for row in rows for m in row.attempts}, key=list(OUTCOME_STYLE).index)
    for outcome in outcomes:
        marker, colour = OUTCOME_STYLE[outcome]
        ax.plot([], [], marker=marker, color=colour, linestyle="none", label=OUTCOME_LABELS[outcome])
    if any(row.waits for row in rows):
        ax.plot([], [], color="tab:orange", linestyle=":", linewidth=2, label="waiting to retry")
    if any(m.started_at is not None for row in rows for m in row.attempts):
        ax.plot([], [], color="tab:grey", linewidth=6, alpha=0.5, label="running")
    ax.set_yticks(range(len(rows)), [row.job_id for row in reversed(rows)])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(-0.05 * end - 0.5, end * 1.45 + 1)  # room for "dead at t=150s" inside the frame
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    if rows:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _draw_attempt(ax: Axes, mark: AttemptMark, y: float) -> None:
    marker, colour = OUTCOME_STYLE[mark.outcome]
    if mark.started_at is not None:
        ax.plot([mark.started_at, mark.ended_at], [y, y], color=colour, linewidth=6, alpha=0.5)
    ax.plot(mark.ended_at, y, marker=marker, color=colour, markersize=10, linestyle="none")
    ax.annotate(
        str(mark.attempt),
        (mark.ended_at, y),
        xytext=(0, 8),
        textcoords="offset points",
        ha="center",
        fontsize=8,
    )


_STATE_XY: dict[str, tuple[float, float]] = {
    "waiting": (0.0, 0.0),
    "leased": (5.0, 0.0),
    "done": (10.0, 1.6),
    "dead": (10.0, -1.6),
}
_ARC: dict[str, float] = {"fail: retry": 0.5, "lease expired": -0.5, "replay": -0.6}


_CHAR_W = 0.085
"""Width of one 8 pt character in the life-cycle figure's data units (10 x 5 in, equal axes)."""
_LINE_H = 0.25
"""Height of one 8 pt line of text in the same units."""


def _beside_arrow(
    source: tuple[float, float], target: tuple[float, float], rad: float, label: str
) -> tuple[float, float]:
    """Centre for ``label`` next to an arc3 arrow, on its outer side (above a straight one).

    The middle of an arc3 curve lies half way from the chord's middle to its control
    point; the label's box is moved along the chord's normal until it clears that point.
    """
    dx, dy = target[0] - source[0], target[1] - source[1]
    length = math.hypot(dx, dy)
    nx, ny = dy / length, -dx / length  # the side an arc with rad > 0 bulges to
    if rad < 0 or (rad == 0 and ny < 0):
        nx, ny = -nx, -ny
    middle = (source[0] + dx / 2 + rad / 2 * dy, source[1] + dy / 2 - rad / 2 * dx)
    lines = label.splitlines()
    half_w, half_h = _CHAR_W * max(map(len, lines)) / 2, _LINE_H * len(lines) / 2
    clearance = abs(nx) * half_w + abs(ny) * half_h + 0.08
    return middle[0] + nx * clearance, middle[1] + ny * clearance


def lifecycle_figure(moves: Sequence[Move] = LIFECYCLE) -> Figure:
    """Draw a job's life-cycle: a box per state, an arrow per move, labelled with its event.

    Args:
        moves: the moves to draw (default :data:`jobqueue.teaching.timeline.LIFECYCLE`).

    Returns:
        A new figure with one axes (no ticks): one text box per state (its name in
        capitals), and per move an arrow (an annotation) and a label whose first line is
        the move's event and second line its note, placed beside the arrow.
    """
    fig = Figure(figsize=(10.0, 5.0), layout="constrained")
    ax = fig.add_subplot()
    ax.set_aspect("equal")  # arcs are bent in display space: equal scales keep labels on them
    box = {"boxstyle": "round,pad=0.5", "facecolor": "#e8f0fb", "edgecolor": "tab:blue"}
    for state, (x, y) in _STATE_XY.items():
        ax.text(x, y, state.upper(), ha="center", va="center", fontsize=12, bbox=box)
    for move in moves:
        target = _STATE_XY[move.target]
        source = (target[0] - 3.0, target[1]) if move.source is None else _STATE_XY[move.source]
        rad = _ARC.get(move.event, 0.0)
        arrow: dict[str, object] = {"arrowstyle": "-|>", "connectionstyle": f"arc3,rad={rad}"}
        arrow |= {"color": "tab:grey", "shrinkA": 0 if move.source is None else 30, "shrinkB": 30}
        ax.annotate("", xy=target, xytext=source, arrowprops=arrow)
        label = f"{move.event}\n{move.note}"
        ax.text(*_beside_arrow(source, target, rad, label), label, ha="center", va="center", fontsize=8)
    ax.set_xlim(-3.2, 11.2)
    ax.set_ylim(-4.0, 2.4)
    ax.set_axis_off()
    ax.set_title("The life of a job")
    return fig
