"""The chaos lab: real worker processes killed with SIGKILL (about 3 s for the file, 3-4 s on PostgreSQL).

Kills land while a job works, and leases are long enough that a slow machine hands no job
to a second worker: so every job that ran twice must have been at work in a killed life
(:func:`assert_reruns_come_from_kills`).
"""

import re
from collections import Counter
from functools import partial
from pathlib import Path

import duckdb
import pytest

from jobqueue import InvalidSettingError, Lease, ManualClock, idempotency
from jobqueue.teaching import chaos
from jobqueue.teaching.chaos import Step, run_chaos, run_chaos_postgres, run_designs
from jobqueue.testing import HistoryReport, read_history


def assert_reruns_come_from_kills(folder: Path, report: HistoryReport) -> None:
    """Each job started n times was started at least n - 1 times by lives that were killed.

    Lives are named ``life-NN`` (one worker) or ``worker-S-life-NN`` (slot S); in each slot
    every life but the last was killed. A job handed to a second worker because the first
    was slow (its lease ran out) would have been started by a life that lived.
    """
    lives: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*life-*.history.jsonl")):
        name = path.name.removesuffix(".history.jsonl")
        match = re.fullmatch(r"(.*?)-?life-\d+", name)
        assert match is not None, name
        lives.setdefault(match[1], []).append(name)
    killed = {name for names in lives.values() for name in names[:-1]}
    assert killed, "no life was killed"
    starts_in_killed = Counter(
        event.key for event in read_history(folder) if event.kind == "started" and event.process in killed
    )
    for job_id, starts in report.ran_twice:
        assert starts_in_killed[job_id] >= starts - 1, f"{job_id} ran {starts} times, not all for kills"


def test_each_design_keeps_its_promise_when_workers_are_killed(tmp_path: Path) -> None:
    reports = run_designs(tmp_path, kills=2, seed=1)
    safe = reports["at-least-once + process_once"]
    assert (safe.lost, safe.effects_twice) == ((), ())
    assert safe.effects == safe.enqueued > 0
    assert safe.ran_twice, "the kills land while a job works, so a killed job runs again"
    assert_reruns_come_from_kills(tmp_path / "at-least-once_process_once", safe)
    # At-least-once never loses a job, whatever the kills hit; at-most-once never runs one twice.
    assert reports["at-least-once"].lost == ()
    assert reports["at-most-once"].ran_twice == ()
    assert reports["at-most-once"].effects_twice == ()


def test_several_workers_on_postgres_lose_nothing_and_apply_no_effect_twice(
    pg_conninfo: str, tmp_path: Path
) -> None:
    report = run_chaos_postgres(pg_conninfo, tmp_path, workers=3, kills=4, seed=7)
    assert (report.lost, report.effects_twice) == ((), ())
    assert report.ran_twice, "the kills hit running jobs, so the zeros mean something"
    assert_reruns_come_from_kills(tmp_path, report)
    assert report.finished == report.enqueued == report.effects > 0


def test_without_process_once_the_postgres_run_applies_effects_twice(
    pg_conninfo: str, tmp_path: Path
) -> None:
    report = run_chaos_postgres(pg_conninfo, tmp_path, "at-least-once", workers=2, kills=2, seed=3)
    assert report.lost == ()
    assert report.effects_twice, "a job killed after its effect books it again when it is redelivered"
    assert_reruns_come_from_kills(tmp_path, report)


def test_run_chaos_postgres_checks_its_settings(tmp_path: Path) -> None:
    url = "postgresql://nobody@/unused"  # refused before any connection
    with pytest.raises(InvalidSettingError, match="workers must be an int >= 1, got 0"):
        run_chaos_postgres(url, tmp_path, workers=0)
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(InvalidSettingError, match="run_chaos_postgres needs a fresh folder"):
        run_chaos_postgres(url, tmp_path)


def test_run_chaos_wants_a_fresh_folder_and_sane_settings(tmp_path: Path) -> None:
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(InvalidSettingError, match="needs a fresh folder"):
        run_chaos("at-most-once", tmp_path)
    with pytest.raises(InvalidSettingError, match="kills must be an int >= 1"):
        run_chaos("at-most-once", tmp_path / "new", kills=0)
    with pytest.raises(InvalidSettingError, match="design must be one of"):
        run_chaos("exactly-once", tmp_path / "new")  # type: ignore[arg-type]


CLOCK = ManualClock()


def naive(con: duckdb.DuckDBPyConnection, lease: Lease, step: Step) -> None:
    step("before the effect")
    chaos.book_effect(con, lease.job.id)
    step("after the effect")


def keyed_per_delivery(con: duckdb.DuckDBPyConnection, lease: Lease, step: Step) -> None:
    step("before the effect")
    key = f"{lease.job.id}:attempt-{lease.job.attempts}"
    idempotency.process_once(con, key, partial(chaos.book_effect, job_id=lease.job.id), clock=CLOCK)
    step("after the effect")


def keyed_by_job(con: duckdb.DuckDBPyConnection, lease: Lease, step: Step) -> None:
    step("before the effect")
    idempotency.process_once(con, lease.job.id, partial(chaos.book_effect, job_id=lease.job.id), clock=CLOCK)
    step("after the effect")


def test_crash_test_finds_duplicate_effects_and_passes_process_once_by_job_id() -> None:
    for handler in (naive, keyed_per_delivery):
        report = chaos.crash_test(handler)
        assert report.lost == ()
        assert report.effects_twice, handler.__name__
    fixed = chaos.crash_test(keyed_by_job)
    assert fixed.ok and fixed.ran_twice  # redeliveries happened, and no effect doubled
    assert fixed.effects == fixed.finished == 20


def test_crash_test_is_deterministic_and_without_crashes_nothing_repeats() -> None:
    assert chaos.crash_test(naive, seed=3) == chaos.crash_test(naive, seed=3)
    calm = chaos.crash_test(naive, crash_chance=0)
    assert (calm.ran_twice, calm.effects_twice, calm.effects) == ((), (), 20)


def test_a_kill_inside_the_transaction_rolls_it_back() -> None:
    def inside(con: duckdb.DuckDBPyConnection, lease: Lease, step: Step) -> None:
        def effect(c: duckdb.DuckDBPyConnection) -> None:
            chaos.book_effect(c, lease.job.id)
            step("inside the transaction")

        idempotency.process_once(con, lease.job.id, effect, clock=CLOCK)

    report = chaos.crash_test(inside, crash_chance=0.5)
    assert report.ok and report.ran_twice
    assert report.effects == 20


def test_crash_test_settings_are_checked() -> None:
    with pytest.raises(InvalidSettingError, match="jobs must be an int >= 1"):
        chaos.crash_test(naive, jobs=0)
    with pytest.raises(InvalidSettingError, match="crash_chance must be at least 0 and below 1"):
        chaos.crash_test(naive, crash_chance=1)
