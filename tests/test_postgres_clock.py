"""Whose clock decides leases on PostgreSQL (issue 21, point 1), on the real server.

Workers on several machines compare leases one wrote with another's clock. With each
worker's own clock, one 31 s ahead takes a live 30 s lease and one 30 s behind writes
leases already over for everyone else. With the default :class:`~jobqueue.ServerClock`,
each queue reads the server's time (its machine's clock plus a measured offset), and the
same skew changes nothing.
"""

from __future__ import annotations

import time

import jobqueue as jq
from jobqueue.testing import SkewedClock as Skewed
from jobqueue.testing.contract import PLAIN, Ping


def test_the_default_clock_is_the_servers(pg_conninfo: str) -> None:
    with jq.PostgresQueue(pg_conninfo) as queue:
        assert isinstance(queue.clock, jq.ServerClock)
        assert abs(queue.clock.now() - time.time()) < 1.0  # the server runs on this machine


def test_with_each_workers_own_clock_a_fast_one_takes_a_live_lease(pg_conninfo: str) -> None:
    on_time = jq.PostgresQueue(pg_conninfo, clock=Skewed(0), visibility_timeout_s=30)
    ahead = jq.PostgresQueue(pg_conninfo, clock=Skewed(31), visibility_timeout_s=30)
    try:
        on_time.enqueue(PLAIN, Ping(1), id="ping-1")
        held = on_time.claim()
        assert held is not None
        stolen = ahead.claim()  # by its clock the 30 s lease ended a second ago
        assert stolen is not None and stolen.job.id == "ping-1"
    finally:
        on_time.close()
        ahead.close()


def test_with_the_servers_clock_skewed_machines_agree_on_leases_and_retries(pg_conninfo: str) -> None:
    queues = {
        name: jq.PostgresQueue(pg_conninfo, clock=jq.ServerClock(Skewed(offset)), visibility_timeout_s=30)
        for name, offset in (("on time", 0.0), ("31 s ahead", 31.0), ("30 s behind", -30.0))
    }
    try:
        assert abs(queues["31 s ahead"].clock.offset_s + 31.0) < 1.0  # measured, not assumed
        assert abs(queues["30 s behind"].clock.offset_s - 30.0) < 1.0
        queues["on time"].enqueue(PLAIN, Ping(1), id="ping-1")
        held = queues["30 s behind"].claim()  # its lease ends 30 s from the server's now
        assert held is not None
        assert queues["31 s ahead"].claim() is None  # the lease is live for everyone
        assert queues["on time"].claim() is None
        failed = queues["31 s ahead"].fail(
            jq.Lease(job=held.job, token=held.token), RuntimeError("provider down")
        )
        assert failed.run_at is not None and abs(failed.run_at - time.time()) < 10.0  # server time
        assert queues["on time"].claim() is None  # the retry is not due early for anyone
        assert queues["30 s behind"].claim() is None
    finally:
        for queue in queues.values():
            queue.close()


def test_the_offset_is_measured_again_after_resync_s(pg_conninfo: str) -> None:
    local = Skewed(0.0)
    clock = jq.ServerClock(local, resync_s=0.05)
    with jq.PostgresQueue(pg_conninfo, clock=clock) as queue:
        assert abs(clock.offset_s) < 1.0
        local.offset_s = 120.0  # the machine's clock is stepped two minutes ahead
        time.sleep(0.06)
        queue.enqueue(PLAIN, Ping(1))  # the next call resyncs
        assert abs(clock.offset_s + 120.0) < 1.0
        assert abs(clock.now() - time.time()) < 1.0
