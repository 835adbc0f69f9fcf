import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from jobqueue import Backoff, InvalidSettingError
from jobqueue.teaching.plots import CAP_LABEL, CEILING_LABEL, FLOOR_LABEL, backoff_figure


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
