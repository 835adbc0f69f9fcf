"""The coalescing wake-ups behind PostgresQueue's enqueue (backends/wakeups.py), without a database.

The property that matters: every request is followed by a send that starts after it, so no
enqueue goes without a wake-up after its commit; requests that come while a send is on its
way, or within the minimum interval after one, share the next one.
"""

import os
import signal
import threading
import time

import pytest
from waiting import HANG_GUARD_S, hang, wait_until

from jobqueue.backends.wakeups import Wakeups


class Sender:
    """A send that records when it starts and can be held until the test lets it finish."""

    def __init__(self) -> None:
        self.started: list[int] = []  # the number of requests made before each send began
        self.requests = 0
        self.hold = threading.Event()
        self.hold.set()
        self.in_send = threading.Event()

    def request(self, wakeups: Wakeups) -> None:
        self.requests += 1
        wakeups.request()

    def __call__(self) -> None:
        self.started.append(self.requests)
        self.in_send.set()
        assert self.hold.wait(HANG_GUARD_S), hang("the test to let the send finish")


def first_send_held() -> tuple[Sender, Wakeups]:
    """A sender and its wake-ups after one request, with the first send started and held."""
    sender = Sender()
    sender.hold.clear()
    wakeups = Wakeups(sender, "test wake-ups")
    sender.request(wakeups)
    assert sender.in_send.wait(HANG_GUARD_S), hang("the first send")
    return sender, wakeups


def test_requests_made_while_a_send_is_on_its_way_share_the_next_send() -> None:
    sender, wakeups = first_send_held()
    for _ in range(5):  # the first send is held: these five wait for the next
        sender.request(wakeups)
    sender.hold.set()
    wakeups.close()
    assert sender.started == [1, 6]  # two sends for six requests, the second after all six
    assert wakeups.sent == 2 and wakeups.lost == 0


def test_a_request_after_a_send_gets_a_send_of_its_own() -> None:
    sender = Sender()
    wakeups = Wakeups(sender, "test wake-ups")
    sender.request(wakeups)
    wait_until(lambda: wakeups.sent == 1, "the first send")
    sender.request(wakeups)
    wakeups.close()
    assert sender.started == [1, 2]


def test_close_sends_the_wake_up_still_wanted_and_later_requests_send_nothing() -> None:
    sender, wakeups = first_send_held()
    sender.request(wakeups)  # wanted while the first is held
    closing = threading.Thread(target=wakeups.close)
    closing.start()
    sender.hold.set()
    closing.join(HANG_GUARD_S)
    assert not closing.is_alive(), hang("close")
    assert sender.started == [1, 2]
    wakeups.request()  # closed: nothing more is sent, and nothing waits
    wakeups.close()
    assert wakeups.sent == 2


def test_a_send_that_fails_is_counted_lost_and_the_next_request_is_still_served() -> None:
    calls: list[str] = []

    def send() -> None:
        calls.append("send")
        if len(calls) == 1:
            raise ConnectionError("server gone")

    wakeups = Wakeups(send, "test wake-ups")
    wakeups.request()
    wait_until(lambda: wakeups.lost == 1, "the failed send")
    wakeups.request()
    wakeups.close()
    assert calls == ["send", "send"] and (wakeups.sent, wakeups.lost) == (1, 1)


def test_no_thread_before_the_first_request_and_none_after_close() -> None:
    before = {thread.name for thread in threading.enumerate()}
    wakeups = Wakeups(lambda: None, "test wake-ups idle")
    assert "test wake-ups idle" not in {thread.name for thread in threading.enumerate()} - before
    wakeups.request()
    wakeups.close()
    assert "test wake-ups idle" not in {thread.name for thread in threading.enumerate()}


def test_a_request_after_a_quiet_interval_is_sent_at_once_and_later_ones_share_the_next() -> None:
    sender = Sender()
    # An interval far past the hang guard: a send before the close can only be the leading edge.
    wakeups = Wakeups(sender, "test wake-ups", min_interval_s=10 * HANG_GUARD_S)
    sender.request(wakeups)
    wait_until(lambda: wakeups.sent == 1, "the first send, due without waiting for the interval")
    for _ in range(3):  # within the interval: they wait for its end, together
        sender.request(wakeups)
        time.sleep(0.05)  # room for a send the throttle would wrongly make (none may come)
    assert wakeups.sent == 1
    closing = threading.Thread(target=wakeups.close)
    closing.start()  # the interval ends at the close, and the send goes out
    closing.join(HANG_GUARD_S)
    assert not closing.is_alive(), hang("close, which must not wait out the interval")
    assert sender.started == [1, 4] and wakeups.sent == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_lock_is_held_gets_a_wake_up_of_its_own() -> None:
    """The parent's wake-up thread may hold the lock at the fork: the child must not wait for it."""
    wakeups = Wakeups(lambda: None, "test wake-ups fork")
    wakeups.request()
    wait_until(lambda: wakeups.sent == 1, "the parent's send")
    with wakeups._changed:  # held by this thread as the child is made, as the wake-up thread may hold it
        pid = os.fork()
        if pid == 0:  # the child: a fresh thread sends its own wake-up; a hang ends at the alarm
            signal.alarm(int(HANG_GUARD_S))
            try:
                wakeups.request()
                wakeups.close()
                os._exit(0 if wakeups.sent == 2 else 1)  # the parent's send, counted before the fork
            except BaseException:
                os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, hang("the forked child's wake-up")
    wakeups.close()
