"""Tools to test a queue, and code that uses one.

- :mod:`jobqueue.testing.history`: record what a run's processes saw and check it
  afterwards (:class:`History`, :func:`check_history`): jobs lost, run twice, applied
  twice. Introduced in lesson 15.
- :mod:`jobqueue.testing.faults`: faults to inject into a worker, beside a kill: a clock
  that runs ahead or behind (:class:`SkewedClock`). Introduced in lesson 15.
- :mod:`jobqueue.testing.contract`: the queue contract as a hypothesis state machine, to
  run against any backend (``queue_state_machine(factory).TestCase``); it needs
  ``hypothesis`` and is not imported here. Introduced in lesson 10.
"""

from jobqueue.testing.faults import SkewedClock
from jobqueue.testing.history import (
    SUFFIX,
    Event,
    EventKind,
    History,
    HistoryReport,
    check_history,
    read_history,
)

__all__ = [
    "SUFFIX",
    "Event",
    "EventKind",
    "History",
    "HistoryReport",
    "SkewedClock",
    "check_history",
    "read_history",
]
