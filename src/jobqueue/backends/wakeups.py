"""Wake-ups for idle workers, sent after the commits that call for them, one for many.

A producer that enqueues on PostgreSQL wakes the workers waiting for work with a ``NOTIFY``
sent after its commit (inside the enqueue's own transaction it would make producers take
turns at the disk: see ``notify`` in ``postgres.sql``). Sent by the producer itself, that is
a second statement and a second round trip for every enqueue; at one job a call, it was a
third of the producer's time. Here the producer only raises a flag once its commit is done,
and a thread of the queue's sends the ``NOTIFY``: it lowers the flag, sends, and looks at the
flag again. A ``NOTIFY`` is sent after every commit that raised the flag before it was
lowered, so no enqueue goes without a wake-up that follows its commit (a worker it wakes
looks after the commit, and finds the job).

The thread sends at most one wake-up per :data:`MIN_INTERVAL_S` (but for the last, which
:meth:`Wakeups.close` sends at once). A request that comes when the last send is older than
that goes out at once; one that comes sooner waits out the rest of the interval, and every
request made meanwhile shares the send that follows (a throttle with a leading edge). A
producer that enqueues now and then wakes the workers at once; one that enqueues one job
after another sends a wake-up per interval, not one for every job or two. (It first waited
2 ms after each request, as Kafka's producer waits ``linger.ms``: one process enqueueing one
job after another, about 0.45 ms each, sent 17 wake-ups per 100 enqueues, each dearer in CPU
than the enqueue's own statement, and spent 210 us of CPU per enqueue; with this throttle it
sends 4 to 5 and spends 160-180 us, against 150-165 us with no wake-ups at all.)

The same idea as a condition variable's "notify after the state changed", across processes;
PostgreSQL itself folds identical notifications of one transaction into one.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable

MIN_INTERVAL_S = 0.01
"""Seconds from one wake-up's send to the next at the least: a worker waiting for work learns
of a job at once when the producer is quiet, and at most this much later when it is busy. A
one-job enqueue takes about half a millisecond here, so a busy producer shares a ``NOTIFY``
among about twenty."""


class Wakeups:
    """Sends ``send()`` from a thread of its own after each :meth:`request`, folding requests that wait.

    Args:
        send: sends one wake-up (the queue's ``NOTIFY``, in a transaction of its own on the
            thread's connection). An exception it raises is counted in :attr:`lost` and
            dropped: a wake-up is a hint, and workers poll as well.
        name: the thread's name, for debuggers and ``threading.enumerate()``.
        min_interval_s: seconds from the start of one send to the next at the least
            (:data:`MIN_INTERVAL_S`); 0 sends after every request that finds none on its
            way. :meth:`close` does not wait it out.

    Attributes:
        sent: wake-ups sent so far.
        lost: wake-ups whose ``send`` raised.

    The thread starts at the first request (again in a forked child, which has none: the
    child also gets a lock of its own, as the parent's thread may have held the parent's as
    it forked) and ends at :meth:`close`, after sending the wake-up still wanted.
    """

    def __init__(
        self, send: Callable[[], None], name: str, *, min_interval_s: float = MIN_INTERVAL_S
    ) -> None:
        self.sent = 0
        self.lost = 0
        self._send = send
        self._name = name
        self._min_interval_s = min_interval_s
        self._changed = threading.Condition()
        self._wanted = False
        self._closing = False
        self._thread: threading.Thread | None = None
        _EVERY.add(self)

    def request(self) -> None:
        """Ask for a wake-up after a commit that is done; returns at once."""
        with self._changed:
            if self._closing:
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()

    def close(self) -> None:
        """Send the wake-up still wanted, if any, then stop the thread; closing twice is harmless."""
        with self._changed:
            self._closing = True
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _forked(self) -> None:
        """In a forked child, before anything else runs: none of the parent's thread and lock."""
        self._changed = threading.Condition()
        self._thread = None
        self._wanted = False  # the parent's commits are the parent's to announce

    def _run(self) -> None:
        last_send = -float("inf")  # time.monotonic() at the start of the last send
        while True:
            with self._changed:
                while not self._wanted and not self._closing:
                    self._changed.wait()
                if not self._wanted:
                    return
                rest_s = last_send + self._min_interval_s - time.monotonic()
                if rest_s > 0:  # sent a moment ago: gather requests until the interval ends
                    self._changed.wait_for(lambda: self._closing, timeout=rest_s)
                self._wanted = False  # lowered before the send: a later commit asks again
            last_send = time.monotonic()
            try:
                self._send()
                self.sent += 1
            except Exception:  # the server is gone or the queue closed: workers poll meanwhile
                self.lost += 1


_EVERY: weakref.WeakSet[Wakeups] = weakref.WeakSet()
"""Every live :class:`Wakeups`, made new in a forked child (``os.register_at_fork``)."""


def _after_fork_in_child() -> None:
    for wakeups in list(_EVERY):
        wakeups._forked()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
