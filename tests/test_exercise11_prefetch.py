"""Lesson 11 and exercise 11: jobs a Runner has claimed ahead count as leased.

A Runner claims ahead by default (``prefetch`` = 4 x ``concurrency``). A job in its
prefetch is leased from its claim though it has not started, so the waiting ages do not
see its wait and the oldest leased age counts it (review round 2 of lessons 00-11, issue
23). So a stuck limit set at "the slowest job you expect" pages on a busy, healthy
worker; the exercise's check "a busy, healthy worker" says so. Every time is on a
ManualClock.
"""

import asyncio
from dataclasses import dataclass
from pathlib import Path

from test_exercise11_enqueue_age import check_answers, define_alerts, failed, solution_answers

from jobqueue import JobQueue, JobType, ManualClock, Worker
from jobqueue.metrics import QueueMetrics
from jobqueue.runner import PREFETCH_PER_SLOT, Runner

BUSY_CHECK = "a busy, healthy worker: a job claimed ahead 150 s ago, still in its prefetch"


@dataclass(frozen=True)
class Build:
    n: int
    work_s: float


BUILD = JobType("build", Build)


def busy_runner_metrics(at_s: float) -> QueueMetrics:
    """A one-slot Runner with the default prefetch and five 10 s jobs, seen at ``at_s``."""

    async def play() -> QueueMetrics:
        clock = ManualClock()
        queue = JobQueue(clock=clock)
        worker = Worker(queue, heartbeat_s=10)

        async def build(job: Build) -> None:
            await clock.sleep(job.work_s)

        worker.register(BUILD, build)
        for n in range(1, 6):
            queue.enqueue(BUILD, Build(n, 10.0), id=f"b{n}")
        runner = Runner(worker, concurrency=1, poll_s=1.0, grace_s=5.0)
        assert runner.prefetch == PREFETCH_PER_SLOT == 4  # claiming ahead is on by default
        task = asyncio.create_task(runner.run())
        await clock.run_for(at_s)
        metrics = queue.metrics()
        runner.stop()
        await clock.run_for(10.0)
        await task
        return metrics

    return asyncio.run(asyncio.wait_for(play(), timeout=60))


def test_a_job_claimed_ahead_shows_its_wait_in_the_leased_age_only() -> None:
    metrics = busy_runner_metrics(at_s=39.0)  # job 5 was claimed at t=0 and has not started
    assert (metrics.waiting, metrics.leased) == (0, 2)  # job 4 runs, job 5 waits in the prefetch
    assert metrics.oldest_waiting_age_s == 0.0
    assert metrics.oldest_enqueued_age_s == 0.0  # the late rule cannot see job 5's wait
    assert metrics.oldest_leased_age_s == 39.0  # no job runs over 10 s


def test_the_solution_does_not_page_on_a_busy_runner_but_a_stuck_limit_at_the_run_time_would() -> None:
    alerts_source, _ = solution_answers()
    metrics = busy_runner_metrics(at_s=39.0)
    assert define_alerts(alerts_source)(metrics) == []
    at_the_run_time = alerts_source.replace("MAX_LEASED_S = 600", "MAX_LEASED_S = 30")
    assert define_alerts(at_the_run_time)(metrics) == ["stuck: a job has been leased for 39 s (limit 30 s)"]


def test_a_stuck_limit_that_leaves_out_the_prefetch_wait_fails_the_busy_worker_check(tmp_path: Path) -> None:
    alerts_source, paging_source = solution_answers()
    too_tight = alerts_source.replace("MAX_LEASED_S = 600", "MAX_LEASED_S = 120")
    assert too_tight != alerts_source
    lines = check_answers(tmp_path, [too_tight, paging_source])
    assert failed(lines, (BUSY_CHECK,)) == {BUSY_CHECK}, lines
