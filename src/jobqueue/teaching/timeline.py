"""Job timelines and the job life-cycle, as numbers and text for the lessons' pictures.

Pure functions that return frozen dataclasses or text, so the pictures
(:func:`jobqueue.teaching.plots.timeline_figure` and
:func:`jobqueue.teaching.plots.lifecycle_figure`) only draw, and tests check the rows
and moves without a browser.

- :func:`timeline_rows` turns a worker's :class:`~jobqueue.worker.JobEvent` records into
  one :class:`TimelineRow` per job (its :class:`AttemptMark` attempts, waits and end).
- :data:`LIFECYCLE` lists the moves of a job between its states; :func:`lifecycle_text`
  prints them one a line.

Introduced in lesson 03 (the life-cycle); timelines in lessons 04-06.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from jobqueue.job import DeadLetter
from jobqueue.worker import JobEvent, Outcome


@dataclass(frozen=True, kw_only=True)
class AttemptMark:
    """One attempt on a timeline row (seconds on the queue's clock).

    Attributes:
        attempt: the attempt number (1-based; a replayed job counts from 1 again).
        started_at: when it started, if known (``None`` otherwise).
        ended_at: when it ended (:attr:`JobEvent.at`).
        outcome: ``"done"``, ``"retry"``, ``"dead"``, ``"stale"`` (lease lost, not acked),
            ``"released"`` or ``"deferred"`` (see :data:`~jobqueue.worker.Outcome`).
        retry_at: for a retry or a deferral, when the job was due again.
    """

    attempt: int
    started_at: float | None
    ended_at: float
    outcome: Outcome
    retry_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class TimelineRow:
    """One job's row on a timeline: its attempts, waits, and how it ended.

    Attributes:
        job_id: the job.
        attempts: its attempts in time order.
        waits: ``(from, until)`` spans in seconds where it waited for a retry (backoff).
        end: ``"done"`` or ``"dead"`` if it ended, else ``None``.
        end_at: when it ended, in seconds (``None`` while it has not).
    """

    job_id: str
    attempts: tuple[AttemptMark, ...]
    waits: tuple[tuple[float, float], ...]
    end: Literal["done", "dead"] | None
    end_at: float | None

    def text(self) -> str:
        """One line, e.g. ``"receipt: attempts at t=0,1,3,7 -> done at t=7s"``.

        Times are when each attempt started if known, else when it ended; ``*`` marks
        an attempt whose worker lost its lease (``"stale"``).
        """
        times = ",".join(
            f"{mark.ended_at if mark.started_at is None else mark.started_at:g}"
            + ("*" if mark.outcome == "stale" else "")
            for mark in self.attempts
        )
        ending = "not finished" if self.end is None else f"{self.end} at t={self.end_at:g}s"
        note = " (* lease lost, not acked)" if any(m.outcome == "stale" for m in self.attempts) else ""
        return f"{self.job_id}: attempts at t={times} -> {ending}{note}"


def timeline_rows(
    events: Iterable[JobEvent],
    *,
    started_at: dict[tuple[str, int], float] | None = None,
    dead_letters: Iterable[DeadLetter] = (),
) -> tuple[TimelineRow, ...]:
    """Build one :class:`TimelineRow` per job from worker events, in order of first event.

    Args:
        events: :class:`~jobqueue.worker.JobEvent` records, from one worker or several
            (``[*worker_1.events, *worker_2.events]``); sorted by time here.
        started_at: when each ``(job_id, attempt)`` started, if known (seconds); the
            events only record when attempts ended.
        dead_letters: dead letters that no event reports (a job whose last lease ran out
            is dead-lettered by the queue, not by a worker); a row without a ``"done"``
            or ``"dead"`` event ends ``"dead"`` at its ``died_at``.

    Example: lesson 04's outage gives ``receipt: attempts at t=0,1,3,7 -> done at t=7s``.
    """
    starts = started_at or {}
    by_job: dict[str, list[JobEvent]] = {}
    for event in sorted(events, key=lambda e: (e.at, e.attempt)):
        by_job.setdefault(event.job_id, []).append(event)
    died = {dead.job.id: dead.died_at for dead in dead_letters}
    rows = []
    for job_id, job_events in by_job.items():
        marks = tuple(
            AttemptMark(
                attempt=e.attempt,
                started_at=starts.get((job_id, e.attempt)),
                ended_at=e.at,
                outcome=e.outcome,
                retry_at=e.retry_at,
            )
            for e in job_events
        )
        waits = tuple((m.ended_at, m.retry_at) for m in marks if m.retry_at is not None)
        last = job_events[-1]
        end: Literal["done", "dead"] | None = None
        end_at: float | None = None
        if last.outcome in ("done", "dead"):
            end, end_at = ("done" if last.outcome == "done" else "dead"), last.at
        elif job_id in died:
            end, end_at = "dead", died[job_id]
        rows.append(TimelineRow(job_id=job_id, attempts=marks, waits=waits, end=end, end_at=end_at))
    return tuple(rows)


LifecycleState = Literal["waiting", "leased", "done", "dead"]
"""Where a job can be: waiting (due or scheduled), leased (a worker has it), done, dead."""


@dataclass(frozen=True, kw_only=True)
class Move:
    """One arrow of the life-cycle: from a state, on an event, to a state."""

    source: LifecycleState | None
    target: LifecycleState
    event: str
    note: str


LIFECYCLE: tuple[Move, ...] = (
    Move(source=None, target="waiting", event="enqueue", note="due now"),
    Move(source="waiting", target="leased", event="claim()", note="attempts + 1, hidden while leased"),
    Move(source="leased", target="done", event="ack(lease)", note="deleted from the queue"),
    Move(source="leased", target="waiting", event="fail: retry", note="due again after the backoff"),
    Move(source="leased", target="waiting", event="lease expired", note="no ack or fail: worker crashed"),
    Move(source="leased", target="dead", event="fail: dead", note="permanent, or the last attempt"),
    Move(source="dead", target="waiting", event="replay", note="after a fix; attempts start again"),
)
"""Every move of a job between states (lessons 03 and 05)."""


def lifecycle_text(moves: Sequence[Move] = LIFECYCLE) -> str:
    """The life-cycle as text, one move a line: ``from -> to  event (note)``.

    Example line: ``leased   -> waiting   fail: retry (due again after the backoff)``.
    """
    lines = []
    for move in moves:
        arrow = f"{move.source or '(new)':<8} -> {move.target:<8}"
        lines.append(f"{arrow}  {move.event} ({move.note})")
    return "\n".join(lines)
