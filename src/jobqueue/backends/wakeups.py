"""Wake-ups for idle workers, sent after the commits that call for them, one for many.

A producer that enqueues on PostgreSQL wakes the workers waiting for work with a ``NOTIFY``
sent after its commit (inside the enqueue's own transaction it would make producers take
turns at the disk: see ``notify`` in ``postgres.sql``). Sent by the producer itself, that is
a second statement and a second round trip for every enqueue; at one job a call, it was a
third of the producer's time. Here the producer only raises a flag once its commit is done,
and a thread of the queue's sends the ``NOTIFY``: it lowers the flag, sends, and looks at the
flag again. A ``NOTIFY`` is sent after every commit that raised the flag before it was
lowered, so no enqueue goes without a wake-up that follows its commit (a worker it wakes
looks after the commit, and finds the job). Before it lowers the flag the thread lingers a
moment (:data:`LINGER_S`), as Kafka's producer does with ``linger.ms``: the enqueues that
commit meanwhile, and those that commit while a ``NOTIFY`` is on its way, share the next.
A busy producer sends a wake-up for many jobs; an idle one's job waits the linger longer.

The same idea as a condition variable's "notify after the state changed", across processes;
PostgreSQL itself folds identical notifications of one transaction into one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

LINGER_S = 0.002
"""Seconds the wake-up thread waits after a request before it sends, gathering the requests
that come meanwhile: a one-job enqueue that waits for the disk takes about a millisecond
here, so a producer that enqueues one job after another shares a ``NOTIFY`` among a few."""


class Wakeups:
    """Sends ``send()`` from a thread of its own after each :meth:`request`, folding requests that wait.

    Args:
        send: sends one wake-up (the queue's ``NOTIFY``, in a transaction of its own on the
            thread's connection). An exception it raises is counted in :attr:`lost` and
            dropped: a wake-up is a hint, and workers poll as well.
        name: the thread's name, for debuggers and ``threading.enumerate()``.
        linger_s: seconds to wait after a request before sending (:data:`LINGER_S`); 0 sends
            at once. :meth:`close` does not wait it out.

    Attributes:
        sent: wake-ups sent so far.
        lost: wake-ups whose ``send`` raised.

    The thread starts at the first request (again in a forked child, which has none) and
    ends at :meth:`close`, after sending the wake-up still wanted.
    """

    def __init__(self, send: Callable[[], None], name: str, *, linger_s: float = LINGER_S) -> None:
        self.sent = 0
        self.lost = 0
        self._send = send
        self._name = name
        self._linger_s = linger_s
        self._changed = threading.Condition()
        self._wanted = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def request(self) -> None:
        """Ask for a wake-up after a commit that is done; returns at once."""
        with self._changed:
            if self._closing:
                return
            self._wanted = True
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()

    def close(self) -> None:
        """Send the wake-up still wanted, if any, then stop the thread; closing twice is harmless."""
        with self._changed:
            self._closing = True
            self._changed.notify()
            thread = self._thread if self._pid == os.getpid() else None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._wanted and not self._closing:
                    self._changed.wait()
                if not self._wanted:
                    return
                if self._linger_s:  # gather the requests of the next moment (not when closing)
                    self._changed.wait_for(lambda: self._closing, timeout=self._linger_s)
                self._wanted = False  # lowered before the send: a later commit asks again
            try:
                self._send()
                self.sent += 1
            except Exception:  # the server is gone or the queue closed: workers poll meanwhile
                self.lost += 1
