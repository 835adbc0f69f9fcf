"""Pictures for lessons 13 and 14: the knee, a backlog over time, load in a retry storm.

Like :mod:`jobqueue.teaching.plots`, each function returns a matplotlib
:class:`~matplotlib.figure.Figure` built without pyplot, and draws numbers that come from
the simulations (:mod:`jobqueue.teaching.backlog`, :mod:`jobqueue.teaching.storms`), which
the lessons also print (nbval compares text, never pictures).

Introduced in lessons 13 and 14.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.backlog import QueueRun
from jobqueue.teaching.storms import StormRun


def knee_figure(
    utilisations: Sequence[float], mean_waits_s: Sequence[float], p99_waits_s: Sequence[float]
) -> Figure:
    """Draw the mean and 99th-percentile wait against utilisation (shares 0 to 1).

    Raises:
        InvalidSettingError: if the three sequences differ in length or are empty.
    """
    if not utilisations or not len(utilisations) == len(mean_waits_s) == len(p99_waits_s):
        raise InvalidSettingError("knee_figure needs equally long, non-empty sequences")
    percent = [100 * u for u in utilisations]
    fig = Figure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(percent, mean_waits_s, marker="o", label="mean wait")
    ax.plot(percent, p99_waits_s, marker="o", linestyle="--", label="99th percentile")
    ax.axvline(80, color="grey", linestyle=":", label="80 % utilisation")
    ax.set_xlabel("utilisation (%)")
    ax.set_ylabel("wait before a worker takes the job (s)")
    ax.set_title("Waits grow slowly, then explode")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    return fig


def backlog_figure(
    run: QueueRun, *, outage: tuple[float, float] | None = None, unit_s: float = 1.0
) -> Figure:
    """Draw the backlog and the oldest waiting job's age over time, the outage shaded.

    Args:
        run: a simulated run (its samples are drawn).
        outage: ``(start_s, end_s)`` to shade, in seconds.
        unit_s: the time axis unit in seconds: 1 (s), 60 (min) or 3600 (h).

    Raises:
        InvalidSettingError: if ``unit_s`` is not 1, 60 or 3600.
    """
    names = {1.0: "s", 60.0: "min", 3600.0: "h"}
    if unit_s not in names:
        raise InvalidSettingError(f"unit_s must be 1, 60 or 3600, got {unit_s!r}")
    unit = names[unit_s]
    times = [t / unit_s for t in run.sample_times_s]
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    backlog_ax, age_ax = fig.subplots(2, 1, sharex=True)
    backlog_ax.plot(times, run.backlog, color="tab:blue")
    backlog_ax.set_ylabel("jobs waiting")
    age_ax.plot(times, [age / unit_s for age in run.oldest_age_s], color="tab:red")
    age_ax.set_ylabel(f"oldest job's age ({unit})")
    age_ax.set_xlabel(f"time ({unit})")
    for ax in (backlog_ax, age_ax):
        if outage is not None:
            ax.axvspan(outage[0] / unit_s, outage[1] / unit_s, color="grey", alpha=0.2, label="outage")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    if outage is not None:
        backlog_ax.legend(loc="upper right")
    return fig


def storm_figure(runs: Sequence[StormRun]) -> Figure:
    """Draw the load on the service per second, one line per policy, capacity and blip marked.

    Raises:
        InvalidSettingError: if ``runs`` is empty.
    """
    if not runs:
        raise InvalidSettingError("storm_figure needs at least one run")
    fig = Figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    start, end = runs[0].blip
    ax.axvspan(start, end, color="grey", alpha=0.2, label="blip")
    ax.axhline(runs[0].capacity_per_s, color="black", linestyle=":", label="capacity")
    styles = ["-", "--", "-.", ":"]
    for number, run in enumerate(runs):
        ax.plot(
            range(len(run.load_per_s)),
            run.load_per_s,
            linestyle=styles[number % len(styles)],
            label=run.policy,
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests reaching the service per s")
    ax.set_title("Load on the service: who keeps it down after the blip?")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    # Below the axes, in one row: any place inside them hid a spike of some policy's line
    # (upper left covered the no-budget run's 371 requests/s at t = 12 s).
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=len(runs) + 2)
    return fig
