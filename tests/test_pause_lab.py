"""The paused worker of lesson 15: a zombie write the checker flags, and two designs it cannot hurt."""

from pathlib import Path

import pytest

from jobqueue import InvalidSettingError
from jobqueue.teaching.pause_lab import JOB_ID, run_pause, run_pause_designs


def test_without_a_guard_the_resumed_worker_writes_the_effect_a_second_time(
    pg_conninfo: str, tmp_path: Path
) -> None:
    run = run_pause(pg_conninfo, tmp_path, "at-least-once")
    assert run.second == "effect written, ack accepted"
    assert run.zombie == "effect written, ack refused (stale lease)"  # the ack is refused, too late
    assert run.report.effects_twice == ((JOB_ID, 2),)  # and the checker says so
    assert run.report.ran_twice == ((JOB_ID, 2),) and run.report.lost == ()
    assert not run.report.ok


def test_a_fenced_effect_refuses_the_zombie(pg_conninfo: str, tmp_path: Path) -> None:
    run = run_pause(pg_conninfo, tmp_path, "at-least-once + fencing")
    assert run.second == "effect written, ack accepted"
    assert run.zombie.startswith("effect refused")
    assert (run.report.effects, run.report.effects_twice, run.report.lost) == (1, (), ())
    assert run.report.ran_twice == ((JOB_ID, 2),), "the pause outlived the lease, so the job ran again"


def test_process_once_skips_the_zombies_effect(pg_conninfo: str, tmp_path: Path) -> None:
    run = run_pause(pg_conninfo, tmp_path, "at-least-once + process_once")
    assert run.zombie == "effect skipped (its job id was recorded), ack refused (stale lease)"
    assert (run.report.effects, run.report.effects_twice, run.report.ok) == (1, (), True)


def test_run_pause_checks_its_settings(tmp_path: Path) -> None:
    url = "postgresql://nobody@/unused"  # refused before any connection
    with pytest.raises(InvalidSettingError, match="design must be one of"):
        run_pause(url, tmp_path, "hope")  # type: ignore[arg-type]
    (tmp_path / "old.history.jsonl").write_text("")
    with pytest.raises(InvalidSettingError, match="run_pause needs a fresh folder"):
        run_pause(url, tmp_path, "at-least-once")


def test_run_pause_designs_gives_each_design_a_schema_of_its_own(pg_url: str, tmp_path: Path) -> None:
    runs = run_pause_designs(tmp_path, ["at-least-once", "at-least-once + fencing"])
    assert [run.report.effects for run in runs.values()] == [2, 1]  # neither saw the other's effect
    assert runs["at-least-once + fencing"].zombie.startswith("effect refused (its fencing token")
