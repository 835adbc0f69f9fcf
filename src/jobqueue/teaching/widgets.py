"""Interactive front ends for the lessons, built with ipywidgets on top of :mod:`explore`.

The widgets only read controls and draw: every number and every sentence they show comes
from a pure function in :mod:`jobqueue.teaching.explore`, tested without a browser.

Stored notebooks stay stable: a widget's plain-text form (what nbval compares, and what
a reader sees where widgets cannot run) is its one-line summary, and its view gets a
model id counted per kernel (``jobqueue-backoff-explorer-1``, ``-2`` ...) instead of a
random one, so re-running a lesson leaves its file unchanged.

In the browser every part carries a CSS class (see :class:`BackoffExplorer`), so a
browser test can find the controls and the summary.

Introduced in lesson 02 (the backoff explorer).
"""

from __future__ import annotations

import html
import io
import itertools
from abc import ABC, abstractmethod
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.explore import STRATEGIES, STRATEGY_NAMES, Strategy, explore_backoff
from jobqueue.teaching.plots import explorer_figure

_explorer_ids = itertools.count(1)

BASE_S_RANGE = (0.5, 10.0, 0.5)
"""The ``base_s`` slider's smallest value, largest value and step, in seconds."""

CAP_S_RANGE = (10.0, 120.0, 5.0)
"""The ``cap_s`` slider's smallest value, largest value and step, in seconds."""


PICTURE_DPI = 160
"""Dots per inch of the explorers' pictures: a 7.5 in wide figure is 1,200 px, more than its
column in JupyterLab shows, so the browser scales it down (crisp) instead of up (soft: at
80 dpi, 600 x 336 px were stretched to 964 x 540)."""


class SummaryAndPicture(ABC):
    """What the course's explorer widgets share: controls, a one-line summary, a picture.

    A subclass builds its controls, calls :meth:`_lay_out` once, and redraws through
    :meth:`_show`. Its plain-text form (what nbval compares) is the summary; its view is
    a box with a model id counted per kernel, so re-running a lesson leaves its file
    unchanged. The summary and the picture get the CSS classes ``<prefix>-summary`` and
    ``<prefix>-picture``, the box ``box_class``.
    """

    def __init__(self, prefix: str) -> None:
        self.summary_label = ipywidgets.HTML()
        self.summary_label.add_class(f"{prefix}-summary")
        # The box stretches the picture to its column's width, height in proportion (964 px
        # wide in a 1400 px window); drawn at PICTURE_DPI, it is scaled down there, never up.
        # (A layout width of 100% would add the widget's 2 px margins and overflow by 4 px.)
        self.picture = ipywidgets.Image(format="png")
        self.picture.add_class(f"{prefix}-picture")
        self._summary = ""

    @property
    def summary(self) -> str:
        """The summary line for the current settings (what the summary widget shows)."""
        return self._summary

    @abstractmethod
    def update(self) -> None:
        """Recompute for the controls' values and redraw (each subclass says what)."""

    def _lay_out(self, rows: list[Any], controls: list[Any], model_id: str, box_class: str) -> None:
        """Draw once, then stack ``rows`` of controls above the summary and picture."""
        self.update()
        self.box = ipywidgets.VBox([*rows, self.summary_label, self.picture], model_id=model_id)
        self.box.add_class(box_class)
        for control in controls:
            control.observe(self._on_change, names="value")

    def _show(self, summary: str, figure: Any = None) -> None:
        """Show ``summary``, and ``figure`` (a matplotlib figure) unless it is ``None``."""
        self._summary = summary
        self.summary_label.value = html.escape(summary)
        if figure is not None:
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=PICTURE_DPI)
            self.picture.value = buffer.getvalue()

    def _on_change(self, _change: object) -> None:
        self.update()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = self.box._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self._summary
        return bundle

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._summary!r})"


class BackoffExplorer(SummaryAndPicture):
    """Sliders for ``base_s`` and ``cap_s``, a strategy menu, a picture and a one-line summary.

    Moving a control recomputes :func:`~jobqueue.teaching.explore.explore_backoff` and
    redraws the picture (:func:`~jobqueue.teaching.plots.explorer_figure`: the delays'
    spread and a herd of clients retrying against a recovering service) and the summary.
    Display it by making it the last expression of a cell.

    Args:
        base_s: first value of the ``base_s`` slider, in seconds (see :data:`BASE_S_RANGE`).
        cap_s: first value of the ``cap_s`` slider, in seconds (see :data:`CAP_S_RANGE`).
        strategy: the strategy selected first.
        clients, down_until_s, capacity_per_s, seed: the herd, as in
            :func:`~jobqueue.teaching.explore.simulate_herd` (``down_until_s`` in seconds,
            ``capacity_per_s`` in requests per second).

    DOM hooks (CSS classes on the widgets' elements): ``backoff-explorer`` (the whole
    box); ``backoff-base-s`` and ``backoff-cap-s``, the sliders, labelled ``base_s`` and
    ``cap_s`` (move one by focusing its ``.noUi-handle`` and pressing ArrowRight: one
    step, 0.5 s or 5 s; or type into its ``.widget-readout`` and press Enter);
    ``backoff-strategy``, the menu labelled ``strategy``, holding a ``<select>`` whose
    option values are the names in :data:`~jobqueue.teaching.explore.STRATEGY_NAMES`
    (``"no jitter"``, ``"equal jitter"`` ...); ``backoff-summary``, the summary text; and
    ``backoff-picture``, the image.

    Introduced in lesson 02.
    """

    def __init__(
        self,
        *,
        base_s: float = 1.0,
        cap_s: float = 60.0,
        strategy: Strategy = "equal",
        clients: int = 100,
        down_until_s: float = 10.0,
        capacity_per_s: int = 10,
        seed: int = 7,
    ) -> None:
        super().__init__("backoff")
        self._herd: dict[str, Any] = {
            "clients": clients,
            "down_until_s": down_until_s,
            "capacity_per_s": capacity_per_s,
            "seed": seed,
        }
        self.base_s = _slider("base_s", base_s, BASE_S_RANGE, "backoff-base-s")
        self.cap_s = _slider("cap_s", cap_s, CAP_S_RANGE, "backoff-cap-s")
        self.strategy = ipywidgets.Dropdown(
            options=[(STRATEGY_NAMES[name], name) for name in STRATEGIES],
            value=strategy,
            description="strategy",
        )
        self.strategy.add_class("backoff-strategy")
        controls = [self.base_s, self.cap_s, self.strategy]
        model_id = f"jobqueue-backoff-explorer-{next(_explorer_ids)}"
        self._lay_out([ipywidgets.HBox(controls)], controls, model_id, "backoff-explorer")

    def update(self) -> None:
        """Recompute the numbers for the controls' values; redraw the summary and picture."""
        try:
            seen = explore_backoff(self.base_s.value, self.cap_s.value, self.strategy.value, **self._herd)
        except InvalidSettingError as error:
            self._show(f"cannot explore: {error}")
            return
        self._show(seen.summary, explorer_figure(seen.spread, seen.herd))


def _slider(name: str, value: float, bounds: tuple[float, float, float], css_class: str) -> Any:
    low, high, step = bounds
    slider = ipywidgets.FloatSlider(
        value=value,
        min=low,
        max=high,
        step=step,
        description=name,
        continuous_update=False,  # recompute once the slider is let go, not at every pixel
        readout_format=".1f",
    )
    slider.add_class(css_class)
    return slider
