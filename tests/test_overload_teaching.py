import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from jobqueue import InvalidSettingError
from jobqueue.teaching.backlog import explore_backlog, format_span, simulate_queue, time_unit_s
from jobqueue.teaching.backlog_widget import BacklogSimulator
from jobqueue.teaching.overload_plots import backlog_figure, knee_figure, storm_figure
from jobqueue.teaching.storms import POLICIES, simulate_storm

PNG = b"\x89PNG"
VIEW = "application/vnd.jupyter.widget-view+json"


def test_explore_backlog_at_80_percent_matches_the_drain_formula() -> None:
    run, summary = explore_backlog(4, 5, 1.0, 1.0)
    assert summary.startswith("80% busy: outage left ")
    match = re.search(r"cleared in (\d+) s \(formula (\d+) s\)", summary)
    assert match is not None
    simulated, predicted = int(match[1]), int(match[2])
    assert abs(simulated - predicted) < 0.2 * predicted
    assert max(run.oldest_age_s) >= 59  # the outage lasted 60 s


def test_explore_backlog_past_capacity_never_clears() -> None:
    _, summary = explore_backlog(6, 5, 1.0, 1.0)
    assert "not cleared by t=600s (formula: never)" in summary


def test_long_spans_read_in_minutes_or_hours() -> None:
    assert [time_unit_s(s) for s in (0, 1800, 1801, 3 * 3600, 14_000)] == [1, 1, 60, 60, 3600]
    assert [format_span(s) for s in (247, 2520, 13_465)] == ["247 s", "42 min", "3.7 h"]


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its IHDR chunk."""
    assert data.startswith(PNG)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_simulator_at_extreme_settings_speaks_in_hours_and_draws_crisp() -> None:
    simulator = BacklogSimulator(arrival_rate_per_s=10, workers=1, service_s=5, poll_interval_s=5)
    assert simulator.summary.endswith("oldest 8.3 h"), simulator.summary
    width, height = png_size(bytes(simulator.picture.value))
    assert width >= 1100, "drawn wider than JupyterLab shows it (about 964 px), so never stretched"
    assert abs(width / height - 7.5 / 4.2) < 0.01
    run, _ = explore_backlog(10, 1, 5.0, 5.0)
    assert backlog_figure(run, unit_s=time_unit_s(max(run.sample_times_s))).axes[1].get_xlabel() == "time (h)"


def test_simulator_summary_is_its_text_form_and_moves_with_a_slider() -> None:
    simulator = BacklogSimulator()
    assert simulator.summary == explore_backlog(4, 5, 1.0, 1.0)[1]
    bundle = simulator._repr_mimebundle_()
    assert bundle["text/plain"] == simulator.summary
    assert re.fullmatch(r"jobqueue-backlog-simulator-\d+", bundle[VIEW]["model_id"])
    assert bytes(simulator.picture.value).startswith(PNG)
    simulator.workers.value = 10
    assert simulator.summary == explore_backlog(4, 10, 1.0, 1.0)[1]
    assert simulator.summary.startswith("40% busy")
    assert repr(simulator) == f"BacklogSimulator({simulator.summary!r})"
    for css_class, widget in {
        "backlog-simulator": simulator.box,
        "backlog-arrival": simulator.arrival,
        "backlog-workers": simulator.workers,
        "backlog-service": simulator.service,
        "backlog-poll": simulator.poll,
        "backlog-summary": simulator.summary_label,
    }.items():
        assert css_class in widget._dom_classes


def test_knee_figure_draws_the_numbers_given() -> None:
    fig = knee_figure([0.5, 0.8], [0.1, 0.4], [0.3, 1.2])
    lines = fig.axes[0].get_lines()
    assert list(lines[0].get_xdata()) == [50, 80]
    assert list(lines[1].get_ydata()) == [0.3, 1.2]
    with pytest.raises(InvalidSettingError, match="equally long"):
        knee_figure([0.5], [0.1, 0.2], [0.3])


def test_backlog_figure_draws_the_samples_in_the_unit_asked() -> None:
    run = simulate_queue(arrival_rate_per_s=1, workers=1, service_s=0.5, duration_s=120, sample_every_s=60)
    fig = backlog_figure(run, outage=(0, 60), unit_s=60)
    backlog_ax, age_ax = fig.axes
    assert list(backlog_ax.get_lines()[0].get_ydata()) == list(run.backlog)
    assert list(age_ax.get_lines()[0].get_xdata()) == [t / 60 for t in run.sample_times_s]
    assert age_ax.get_xlabel() == "time (min)"
    with pytest.raises(InvalidSettingError, match="unit_s must be 1, 60 or 3600"):
        backlog_figure(run, unit_s=7)


def test_storm_figure_has_a_line_per_policy() -> None:
    runs = [simulate_storm(policy, duration_s=30) for policy in POLICIES]
    fig = storm_figure(runs)
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].get_lines()}
    for run in runs:
        assert lines[run.policy] == list(run.load_per_s)
    with pytest.raises(InvalidSettingError, match="at least one run"):
        storm_figure([])


def test_storm_figure_legend_hides_no_point_of_any_line() -> None:
    runs = [simulate_storm(policy, seed=7) for policy in POLICIES]  # lesson 14's runs
    fig = storm_figure(runs)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    (legend,) = fig.legends
    box = legend.get_window_extent(canvas.get_renderer())
    ax = fig.axes[0]
    for line in ax.get_lines():
        points = ax.transData.transform(line.get_xydata())
        assert not any(box.contains(x, y) for x, y in points), (
            f"the legend hides a point of {line.get_label()}"
        )
