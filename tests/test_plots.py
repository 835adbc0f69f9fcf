import dataclasses
import io
import itertools
from collections.abc import Callable

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation

from jobqueue import Backoff, InvalidSettingError, JobEvent
from jobqueue.teaching.explore import delay_spread, explore_backoff, simulate_herd
from jobqueue.teaching.plots import (
    CAP_LABEL,
    CAPACITY_LABEL,
    CEILING_LABEL,
    FLOOR_LABEL,
    MEDIAN_LABEL,
    REQUESTS_LABEL,
    SPREAD_LABEL,
    backoff_figure,
    delays_figure,
    explorer_figure,
    herd_figure,
    lifecycle_figure,
    timeline_figure,
)
from jobqueue.teaching.timeline import LIFECYCLE, timeline_rows


def lines_by_label(fig: Figure) -> dict[str, Line2D]:
    (ax,) = fig.axes
    return {str(line.get_label()): line for line in ax.get_lines()}


def xy(line: Line2D) -> tuple[list[float], list[float]]:
    xs: list[float] = np.asarray(line.get_xdata(), dtype=float).tolist()
    ys: list[float] = np.asarray(line.get_ydata(), dtype=float).tolist()
    return xs, ys


def test_backoff_figure_plots_the_ceilings_and_the_equal_jitter_floor() -> None:
    backoff = Backoff(base_s=1, cap_s=60)
    fig = backoff_figure(backoff, 10)
    assert isinstance(fig, Figure)
    lines = lines_by_label(fig)
    assert sorted(lines) == sorted([CEILING_LABEL, FLOOR_LABEL, CAP_LABEL])

    attempts = list(range(1, 11))
    xs, ceilings = xy(lines[CEILING_LABEL])
    assert xs == attempts
    assert ceilings == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert ceilings == [backoff.ceiling_s(n) for n in attempts]
    assert ceilings == [backoff.delay_s(n, lambda: 1.0) for n in attempts]

    xs, floors = xy(lines[FLOOR_LABEL])
    assert xs == attempts
    assert floors == [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert floors == [backoff.delay_s(n, lambda: 0.0) for n in attempts]

    _, cap = xy(lines[CAP_LABEL])
    assert set(cap) == {60.0}


def test_backoff_figure_labels_its_axes_with_units_and_settings() -> None:
    (ax,) = backoff_figure(Backoff(base_s=1, cap_s=60), 3).axes
    assert "(s)" in ax.get_ylabel()
    assert ax.get_title() == "Backoff with equal jitter: base 1 s, cap 60 s"
    assert ax.get_xticks().tolist() == [1, 2, 3]


def test_backoff_figure_renders_to_png() -> None:
    buffer = io.BytesIO()
    backoff_figure(Backoff(base_s=1, cap_s=4), 5).savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


@pytest.mark.parametrize("attempts", [0, -3])
def test_backoff_figure_needs_at_least_one_attempt(attempts: int) -> None:
    with pytest.raises(InvalidSettingError, match=repr(attempts)):
        backoff_figure(Backoff(), attempts)


BACKOFF = Backoff(base_s=1, cap_s=60)


def test_delays_figure_draws_the_median_and_the_spread() -> None:
    spread = delay_spread(BACKOFF, "full", 8, draws=200)
    fig = delays_figure(spread)
    lines = lines_by_label(fig)
    assert sorted(lines) == sorted([MEDIAN_LABEL, CAP_LABEL])
    xs, medians = xy(lines[MEDIAN_LABEL])
    assert xs == list(range(1, 9))
    assert medians == list(spread.median_s)
    (ax,) = fig.axes
    (band,) = ax.collections
    assert band.get_label() == SPREAD_LABEL
    ys: list[float] = np.asarray(band.get_paths()[0].vertices, dtype=float)[:, 1].tolist()
    assert min(ys) == min(spread.low_s) and max(ys) == max(spread.high_s)
    assert ax.get_title() == "full jitter: base 1 s, cap 60 s (200 draws)"


def test_herd_figure_has_a_bar_per_second_and_the_capacity() -> None:
    herd = simulate_herd(BACKOFF, "none")
    fig = herd_figure(herd)
    (ax,) = fig.axes
    (bars,) = [c for c in ax.containers if c.get_label() == REQUESTS_LABEL]
    drawn = {bar.get_x(): bar.get_height() for bar in bars}
    assert drawn == {float(k): n for k, n in enumerate(herd.requests_per_s) if n}  # 1 s buckets from t=0
    assert {bar.get_width() for bar in bars} == {1.0}
    _, capacity = xy(lines_by_label(fig)[CAPACITY_LABEL])
    assert set(capacity) == {10.0}
    assert ax.get_title() == "Herd of 100: peak 100 req/s after recovery"
    assert "(s)" in ax.get_xlabel()


def test_explorer_figure_puts_spread_and_herd_side_by_side() -> None:
    seen = explore_backoff(2, 30, "decorrelated")
    left, right = explorer_figure(seen.spread, seen.herd).axes
    assert left.get_title().startswith("decorrelated jitter: base 2 s, cap 30 s")
    assert right.get_title().startswith("Herd of 100")


def test_timeline_figure_marks_each_attempt_and_the_end() -> None:
    events = [
        JobEvent(at=0, job_id="receipt", job_type="t", attempt=1, outcome="retry", retry_at=1),
        JobEvent(at=0, job_id="invoice", job_type="t", attempt=1, outcome="done"),
        JobEvent(at=1, job_id="receipt", job_type="t", attempt=2, outcome="retry", retry_at=3),
        JobEvent(at=3, job_id="receipt", job_type="t", attempt=3, outcome="dead"),
    ]
    fig = timeline_figure(timeline_rows(events), title="outage")
    (ax,) = fig.axes
    assert [label.get_text() for label in ax.get_yticklabels()] == ["invoice", "receipt"]  # first row on top
    marks = {
        (float(x), float(y))
        for line in ax.get_lines()
        if line.get_marker() not in ("None", None, "")
        for x, y in zip(*xy(line), strict=True)
    }
    assert {(0.0, 1.0), (1.0, 1.0), (3.0, 1.0), (0.0, 0.0)} <= marks
    texts = {text.get_text() for text in ax.texts}
    assert {"dead at t=3s", "done at t=0s"} <= texts
    waits = [xy(line) for line in ax.get_lines() if line.get_linestyle() == ":" and xy(line)[0]]
    assert sorted(x for x, _ in waits) == [[0.0, 1.0], [1.0, 3.0]]
    assert ax.get_title() == "outage"


def test_lifecycle_figure_has_a_box_per_state_and_an_arrow_per_move() -> None:
    (ax,) = lifecycle_figure().axes
    texts = [text.get_text() for text in ax.texts]
    assert {"WAITING", "LEASED", "DONE", "DEAD"} <= set(texts)
    arrows = [text for text in ax.texts if isinstance(text, Annotation)]
    assert len(arrows) == len(LIFECYCLE)
    for move in LIFECYCLE:
        assert f"{move.event}\n{move.note}" in texts


@pytest.mark.parametrize(
    "make",
    [
        lambda: delays_figure(delay_spread(BACKOFF, "equal", 5, draws=50)),
        lambda: herd_figure(simulate_herd(BACKOFF, "full")),
        lambda: timeline_figure(()),
        lifecycle_figure,
    ],
)
def test_new_figures_render_to_png(make: Callable[[], Figure]) -> None:
    buffer = io.BytesIO()
    make().savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def drawn(fig: Figure) -> RendererAgg:
    """Draw ``fig`` (constrained layout included) and return its renderer, for text extents."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def densified(polylines: list[np.ndarray]) -> np.ndarray:
    """Points every 1/50 of each segment of ``polylines``, so a straight arrow has inner points."""
    steps = np.linspace(0, 1, 50)[:, None]
    return np.concatenate([a + steps * (b - a) for line in polylines for a, b in itertools.pairwise(line)])


def test_lifecycle_labels_sit_beside_their_arrows_not_on_them() -> None:
    fig = lifecycle_figure()
    renderer = drawn(fig)
    (ax,) = fig.axes
    arrows = [text.arrow_patch for text in ax.texts if isinstance(text, Annotation)]
    lines = [
        arrow.get_transform().transform(densified(arrow.get_path().to_polygons(closed_only=False)))
        for arrow in arrows
    ]
    labels = [text for text in ax.texts if "\n" in text.get_text()]
    assert len(labels) == len(LIFECYCLE)
    for label in labels:
        box = label.get_window_extent(renderer)
        for points in lines:
            assert box.count_contains(points) == 0, label.get_text()


def test_timeline_end_label_stays_inside_the_frame() -> None:
    """Lesson 06's run: five 40 s attempts on a 30 s lease, the last one ending at t=160s."""
    events = [
        JobEvent(at=40.0 + 30 * n, job_id="invoice-1001", job_type="t", attempt=n + 1, outcome="stale")
        for n in range(5)
    ]
    started = {("invoice-1001", n + 1): 30.0 * n for n in range(5)}
    rows = timeline_rows(events, started_at=started)
    rows = [dataclasses.replace(row, end="dead", end_at=150.0) for row in rows]
    fig = timeline_figure(rows)
    renderer = drawn(fig)
    (ax,) = fig.axes
    frame = ax.get_window_extent(renderer)
    (label,) = [text for text in ax.texts if text.get_text() == "dead at t=150s"]
    box = label.get_window_extent(renderer)
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1


@pytest.mark.parametrize(("strategy", "base_s", "cap_s"), [("none", 1, 60), ("none", 5, 20), ("full", 1, 10)])
def test_delay_legend_covers_no_delay(strategy: str, base_s: float, cap_s: float) -> None:
    exploration = explore_backoff(base_s, cap_s, strategy)
    fig = explorer_figure(exploration.spread, exploration.herd)
    renderer = drawn(fig)
    spread_ax = fig.axes[0]
    legend = spread_ax.get_legend().get_window_extent(renderer)
    _, cap_y = spread_ax.transData.transform((1, cap_s))  # every delay is at most the cap
    assert legend.y0 > cap_y
