"""A history checker for chaos tests: was any job lost, run twice, or applied twice?

During a test run every process writes what it saw to a :class:`History` in a shared
folder (one file per process, one JSON line per event, each written with a single
``write`` to a file opened for appending, so a process killed with SIGKILL leaves whole
lines behind):

- the producer, after an enqueue returned: :meth:`History.enqueued`;
- a handler, as it starts a job: :meth:`History.started`;
- a handler, for each effect on the outside world it applies (an e-mail sent, points
  credited): :meth:`History.effect`;
- a handler, when its work is complete: :meth:`History.finished`.

Afterwards :func:`check_history` reads every file and reports, as a
:class:`HistoryReport`:

- **lost** jobs: the producer saw the enqueue succeed, but no handler finished it and it
  is not in the dead-letter queue. For a queue that promises at-least-once this must be 0;
- jobs **run more than once** (started twice or more): allowed by at-least-once delivery;
- effects **applied more than once**: what idempotency must bring to 0.

Effects kept in a database (rows written in the same transaction as
:func:`jobqueue.idempotency.process_once`'s mark) are passed in as ``effects=``, since
only the database knows which of them were committed.

The idea is Jepsen's set checks on queues (Kyle Kingsbury): record what clients were
told, then compare with what the system did.

Introduced in lesson 15.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, get_args

from jobqueue.errors import InvalidSettingError

EventKind = Literal["enqueued", "started", "effect", "finished"]
"""What a :class:`History` line records."""

SUFFIX = ".history.jsonl"
"""File name ending of a history file; :func:`read_history` reads every such file."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """One line of a history.

    Attributes:
        kind: what happened (see :data:`EventKind`).
        key: the job id, or for an ``"effect"`` the effect's own key.
        process: the name of the process that wrote it.
    """

    kind: EventKind
    key: str
    process: str


class History:
    """The writing end of a history: appends events to ``folder/<process>.history.jsonl``.

    Args:
        folder: the run's folder, shared by every process (created if missing).
        process: a name for this writer, unique per process or per life of a restarted
            process (``"producer"``, ``"worker-3"``); it names the file.

    Raises:
        InvalidSettingError: if ``process`` is empty or contains a path separator.

    Use it as a context manager, or call :meth:`close`.

    Introduced in lesson 15.
    """

    def __init__(self, folder: Path | str, process: str) -> None:
        if not process or "/" in process or os.sep in process:
            raise InvalidSettingError(f"process must be a plain non-empty name, got {process!r}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = process
        self.path = self.folder / f"{process}{SUFFIX}"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def enqueued(self, job_id: str) -> None:
        """Record that an enqueue of ``job_id`` returned: the queue acknowledged it."""
        self._write("enqueued", job_id)

    def started(self, job_id: str) -> None:
        """Record that a handler started running ``job_id``."""
        self._write("started", job_id)

    def effect(self, key: str) -> None:
        """Record that an effect ``key`` reached the outside world (once per application)."""
        self._write("effect", key)

    def finished(self, job_id: str) -> None:
        """Record that a handler completed the work of ``job_id``."""
        self._write("finished", job_id)

    def _write(self, kind: EventKind, key: str) -> None:
        line = json.dumps({"kind": kind, "key": key}) + "\n"
        os.write(self._fd, line.encode())  # one write to an O_APPEND file: whole lines only

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> History:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_history(folder: Path | str) -> list[Event]:
    """Every event in the history files of ``folder``, file by file (sorted by name).

    A last line cut short (a machine that lost power mid-write) is skipped: it was never
    fully recorded.

    Raises:
        InvalidSettingError: if ``folder`` does not exist, or a line that is not the last
            of its file is not a valid event (the message names file and line).
    """
    root = Path(folder)
    if not root.is_dir():
        raise InvalidSettingError(f"no history folder at {str(root)!r}")
    events: list[Event] = []
    kinds = get_args(EventKind)
    for path in sorted(root.glob(f"*{SUFFIX}")):
        process = path.name.removesuffix(SUFFIX)
        lines = path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            try:
                data = json.loads(line)
                kind, key = data["kind"], data["key"]
                if kind not in kinds or not isinstance(key, str):
                    raise ValueError(line)
            except (ValueError, KeyError, TypeError):
                if number == len(lines):  # no newline after it: cut short
                    continue
                raise InvalidSettingError(
                    f"{path.name} line {number} is not a history event: {line!r}"
                ) from None
            events.append(Event(kind=kind, key=key, process=process))
    return events


@dataclass(frozen=True, kw_only=True)
class HistoryReport:
    """What a run did to its jobs, from :func:`check_history`.

    Attributes:
        enqueued: jobs the producer saw enqueued (distinct ids).
        finished: of those, jobs a handler finished.
        dead: of those, jobs in the dead-letter queue and never finished.
        lost: ids enqueued but neither finished nor dead, sorted.
        ran_twice: ids started more than once, with how many times, sorted by id.
        effects_twice: effect keys applied more than once, with how many times.
        effects: effects applied in all (with repeats).
    """

    enqueued: int
    finished: int
    dead: int
    lost: tuple[str, ...]
    ran_twice: tuple[tuple[str, int], ...]
    effects_twice: tuple[tuple[str, int], ...]
    effects: int

    @property
    def ok(self) -> bool:
        """Whether nothing was lost and no effect applied twice (runs twice are allowed)."""
        return not self.lost and not self.effects_twice

    def summary(self) -> str:
        """One line: ``200 enqueued: 0 lost, 3 run more than once, 0 effects applied twice``."""
        return (
            f"{self.enqueued} enqueued: {len(self.lost)} lost, {len(self.ran_twice)} run more than once, "
            f"{len(self.effects_twice)} effects applied twice"
        )


def check_history(
    events: Iterable[Event], *, dead: Iterable[str] = (), effects: Iterable[str] | None = None
) -> HistoryReport:
    """Compare what the producer was told with what the handlers did.

    Args:
        events: the run's events (:func:`read_history`).
        dead: ids in the dead-letter queue at the end (from ``queue.dead_letters()``):
            a dead job was handled by the queue, not lost.
        effects: effect keys kept elsewhere (rows of an effects table), counted with the
            recorded ``"effect"`` events; one key per application.

    Returns:
        The report; only jobs the producer saw enqueued can be lost.
    """
    enqueued: set[str] = set()
    finished: set[str] = set()
    starts: Counter[str] = Counter()
    applied: Counter[str] = Counter()
    for event in events:
        if event.kind == "enqueued":
            enqueued.add(event.key)
        elif event.kind == "started":
            starts[event.key] += 1
        elif event.kind == "effect":
            applied[event.key] += 1
        else:
            finished.add(event.key)
    applied.update(effects or ())
    dead_ids = set(dead) & enqueued - finished
    return HistoryReport(
        enqueued=len(enqueued),
        finished=len(enqueued & finished),
        dead=len(dead_ids),
        lost=tuple(sorted(enqueued - finished - dead_ids)),
        ran_twice=tuple(sorted((key, n) for key, n in starts.items() if n > 1)),
        effects_twice=tuple(sorted((key, n) for key, n in applied.items() if n > 1)),
        effects=sum(applied.values()),
    )
