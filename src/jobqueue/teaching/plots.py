"""Pictures for the lessons, drawn with matplotlib's object-oriented API.

Each function returns a :class:`matplotlib.figure.Figure` built without pyplot, so no
global figure state leaks between cells or tests. A notebook shows it by making the
figure the cell's last expression (after ``%matplotlib inline``). The data of every
line comes from the package itself, so a test can read it back and compare.

Introduced in lesson 02 (the backoff curve).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from jobqueue.backoff import Backoff
from jobqueue.errors import InvalidSettingError

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
