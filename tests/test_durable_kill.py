"""SIGKILL trials: a durable queue's worker process killed mid-run loses no job.

Each trial enqueues ``JOBS`` jobs into a fresh DuckDB file, starts a real child process
(``sys.executable``) that runs them with :class:`jobqueue.runner.Runner` (4 at a time, a
``VISIBILITY_TIMEOUT_S`` lease kept by a heartbeat, handlers that log the job's id, fsync
the log, then sleep 20-50 ms), and kills it with SIGKILL once the log shows ``k`` started
jobs (``k`` differs per trial, see ``KILL_AFTER``). From the ``k``-th start on, a handler
does not end: however late the test gets to the kill on a loaded machine, the child still
holds jobs and some still wait (the kill usually comes while the others run and settle).
The test process then reopens the file and checks:

1. no job is lost: every enqueued id is either still in the queue, or gone from it and in
   the log (it ran; only an ack removes a job), and every logged job still in the queue
   was leased when the child died;
2. every job leased when the child died is not claimable before its lease runs out, and is
   claimable after, as attempt previous + 1; the jobs never claimed are claimable throughout;
3. no job is in the dead letters;
4. lease tokens carry on after the crash: the first token handed out after the reopen is
   numbered above every claim the child could have made.

``TRIALS`` trials, each its own test id; the file takes about 1-2 s a trial.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import HANG_GUARD_S, hang

from jobqueue import ManualClock, SystemClock
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload

TRIALS = 5
"""Child processes killed, one per test."""

JOBS = 40
"""Jobs enqueued per trial."""

KILL_AFTER = (1, 6, 13, 22, 31)
"""Per trial, how many jobs the log must show as started before the SIGKILL."""

VISIBILITY_TIMEOUT_S = 2.0
"""The child's lease length, in seconds: well above a job's 20-50 ms."""

HEARTBEAT_S = 0.5
"""How often the child extends the leases of the jobs it runs, in seconds: the jobs that
do not end keep their leases until the kill, however long the test takes to get to it."""

CHILD = """
import asyncio, os, sys

from jobqueue import SystemClock, Worker
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.runner import Runner
from jobqueue.examples.shop import RENDER_INVOICE, InvoicePayload

queue_file, log_file = sys.argv[1], sys.argv[2]
timeout_s, heartbeat_s, kill_after = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
started = 0


async def render(payload: InvoicePayload) -> None:
    global started
    with open(log_file, "a") as log:
        log.write(f"invoice-{payload.order_id}\\n")
        log.flush()
        os.fsync(log.fileno())
    started += 1
    if started >= kill_after:  # the kill point: from here on jobs run until the kill
        await asyncio.Event().wait()
    await asyncio.sleep(0.02 + (payload.order_id % 4) * 0.01)  # staggered: 20-50 ms


async def main() -> None:
    with DurableQueue(queue_file, clock=SystemClock(), visibility_timeout_s=timeout_s) as queue:
        worker = Worker(queue, heartbeat_s=heartbeat_s)
        worker.register(RENDER_INVOICE, render)
        await Runner(worker, concurrency=4, poll_s=0.05).run()


asyncio.run(main())
"""


def logged(log: Path) -> list[str]:
    """The job ids in the log, complete lines only (the child may be mid-write)."""
    if not log.exists():
        return []
    *lines, _partial = log.read_text().split("\n")
    return lines


def token_number(token: str) -> int:
    """The serial number of a lease token ``lease-N-<queue tag>``."""
    assert token.startswith("lease-"), token
    return int(token.removeprefix("lease-").split("-")[0])


def test_the_trials_are_as_many_as_announced() -> None:
    assert len(KILL_AFTER) == TRIALS
    assert all(0 < k < JOBS - 4 for k in KILL_AFTER)  # killed while jobs are still waiting


@pytest.mark.parametrize("trial", range(TRIALS))
def test_a_worker_killed_mid_run_loses_no_job(tmp_path: Path, trial: int) -> None:
    queue_file, log, errors = tmp_path / "jobs.duckdb", tmp_path / "started.log", tmp_path / "child.err"
    ids = [f"invoice-{n}" for n in range(1, JOBS + 1)]
    with DurableQueue(queue_file, clock=SystemClock(), visibility_timeout_s=VISIBILITY_TIMEOUT_S) as queue:
        queue.enqueue_many(RENDER_INVOICE, [InvoicePayload(order_id=n) for n in range(1, JOBS + 1)], ids=ids)
    started_at = time.time()

    kill_after = KILL_AFTER[trial]
    settings = [str(VISIBILITY_TIMEOUT_S), str(HEARTBEAT_S), str(kill_after)]
    command = [sys.executable, "-c", CHILD, str(queue_file), str(log), *settings]
    with errors.open("w") as stderr, subprocess.Popen(command, cwd=tmp_path, stderr=stderr) as child:
        try:
            guard = time.monotonic() + HANG_GUARD_S
            while len(logged(log)) < kill_after:
                assert child.poll() is None, f"the child ended early:\n{errors.read_text()}"
                assert time.monotonic() < guard, hang(
                    f"{kill_after} started jobs (the log shows {len(logged(log))})"
                )
                time.sleep(0.002)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()  # no-op once it is dead; stops it if an assertion failed above
            child.wait()
    assert child.returncode == -signal.SIGKILL, errors.read_text()
    ran = logged(log)
    assert len(ran) >= kill_after
    assert set(ran) <= set(ids)

    clock = ManualClock(started_at)  # before any lease the child took
    with DurableQueue(queue_file, clock=clock, visibility_timeout_s=VISIBILITY_TIMEOUT_S) as queue:
        before = {job.id: job for job in queue.jobs()}
        leased = {job_id: job for job_id, job in before.items() if job.leased_until is not None}
        never_claimed = {job_id for job_id, job in before.items() if job.attempts == 0}

        # 1. Nothing lost: a job gone from the queue was acked, so it must have run.
        acked = set(ids) - set(before)
        assert acked <= set(ran)
        assert set(ran) - acked <= set(leased)  # started but not acked: still held by the dead child
        assert leased, "the child was killed with no job leased: the trial checked nothing"
        assert set(before) == set(leased) | never_claimed
        # 3. No job was dead-lettered.
        assert queue.dead_letters() == []

        # 2. Before the leases run out only the jobs never claimed can be claimed (then given back)...
        expiry = min(job.leased_until for job in leased.values() if job.leased_until is not None)
        assert expiry > started_at
        clock.advance(expiry - started_at - 0.001)
        early = queue.claim_many(JOBS)
        assert {lease.job.id for lease in early} == never_claimed
        for lease in early:
            queue.release(lease)

        # ... and once they have, every job left, each leased one as its next attempt.
        latest = max(job.leased_until for job in leased.values() if job.leased_until is not None)
        clock.advance(latest - clock.now() + 0.001)
        late_leases = queue.claim_many(JOBS)
        late = {lease.job.id: lease.job for lease in late_leases}
        assert set(late) == set(before)
        for job_id, job in late.items():
            assert job.attempts == before[job_id].attempts + 1, job_id
        assert len(queue) == len(before)
        assert queue.dead_letters() == []

        # 4. The child claimed each acked and each leased job at least once, so it used at least
        # that many lease tokens; the first token after the crash is numbered above them all.
        first_token = min(token_number(lease.token) for lease in early or late_leases)
        assert first_token > len(acked) + len(leased)
