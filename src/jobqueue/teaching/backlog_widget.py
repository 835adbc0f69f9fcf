"""The backlog simulator of lesson 13: sliders, a picture of the backlog, a one-line summary.

Like :class:`jobqueue.teaching.widgets.BackoffExplorer`, it only reads controls and draws:
the numbers and the summary come from
:func:`jobqueue.teaching.backlog.explore_backlog`, tested without a browser. Its
plain-text form (what nbval compares) is the summary, and its view gets a model id
counted per kernel (``jobqueue-backlog-simulator-1`` ...), so re-running the lesson leaves
its file unchanged.

Introduced in lesson 13.
"""

from __future__ import annotations

import itertools

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.backlog import EXPLORER_OUTAGE, explore_backlog, time_unit_s
from jobqueue.teaching.overload_plots import backlog_figure
from jobqueue.teaching.widgets import SummaryAndPicture, _slider  # shared with the backoff explorer

_simulator_ids = itertools.count(1)

ARRIVAL_RANGE = (0.5, 10.0, 0.5)
"""The arrival-rate slider: smallest, largest, step, in jobs per second."""

WORKERS_RANGE = (1, 20, 1)
"""The workers slider: smallest, largest, step."""

SERVICE_RANGE = (0.1, 5.0, 0.1)
"""The service-time slider (mean running time of a job): smallest, largest, step, in seconds."""

POLL_RANGE = (0.0, 5.0, 0.5)
"""The poll-interval slider: smallest, largest, step, in seconds."""


class BacklogSimulator(SummaryAndPicture):
    """Sliders for arrival rate, workers, service time and poll interval; a picture; a summary.

    Each change re-runs the seeded simulation (600 s of arrivals, an outage from t=120 s
    to t=180 s) and redraws the backlog and the oldest job's age over time, in seconds, or
    minutes or hours when the backlog takes that long to drain. Display it
    by making it the last expression of a cell.

    Args:
        arrival_rate_per_s: first value of the arrival slider, jobs per second.
        workers: first number of workers.
        service_s: first mean service time, in seconds.
        poll_interval_s: first poll interval, in seconds.
        seed: the simulation's seed.

    DOM hooks (CSS classes): ``backlog-simulator`` (the box), ``backlog-arrival``,
    ``backlog-workers``, ``backlog-service``, ``backlog-poll`` (the sliders),
    ``backlog-summary`` and ``backlog-picture``.

    Introduced in lesson 13.
    """

    def __init__(
        self,
        *,
        arrival_rate_per_s: float = 4.0,
        workers: int = 5,
        service_s: float = 1.0,
        poll_interval_s: float = 1.0,
        seed: int = 7,
    ) -> None:
        super().__init__("backlog")
        self._seed = seed
        self.arrival = _slider("arrivals/s", arrival_rate_per_s, ARRIVAL_RANGE, "backlog-arrival")
        self.workers = ipywidgets.IntSlider(
            value=workers,
            min=WORKERS_RANGE[0],
            max=WORKERS_RANGE[1],
            step=WORKERS_RANGE[2],
            description="workers",
            continuous_update=False,
        )
        self.workers.add_class("backlog-workers")
        self.service = _slider("service_s", service_s, SERVICE_RANGE, "backlog-service")
        self.poll = _slider("poll_s", poll_interval_s, POLL_RANGE, "backlog-poll")
        controls = [self.arrival, self.workers, self.service, self.poll]
        rows = [ipywidgets.HBox(controls[:2]), ipywidgets.HBox(controls[2:])]
        model_id = f"jobqueue-backlog-simulator-{next(_simulator_ids)}"
        self._lay_out(rows, controls, model_id, "backlog-simulator")

    def update(self) -> None:
        """Re-run the simulation for the sliders' values; redraw the summary and picture."""
        try:
            run, summary = explore_backlog(
                self.arrival.value, self.workers.value, self.service.value, self.poll.value, seed=self._seed
            )
        except InvalidSettingError as error:
            self._show(f"cannot simulate: {error}")
            return
        # Long runs (a backlog that takes hours to drain) get their time axis in min or h.
        unit_s = time_unit_s(max(run.sample_times_s, default=0.0))
        self._show(summary, backlog_figure(run, outage=EXPLORER_OUTAGE, unit_s=unit_s))
