"""The skewed clock of lesson 15: harmful when each worker's clock decides, harmless with the server's."""

from pathlib import Path

import pytest

from jobqueue import InvalidSettingError
from jobqueue.teaching.skew_lab import DECIDERS, JOB_ID, run_skew, run_skews


def test_with_each_workers_clock_the_one_ahead_runs_the_job_again(pg_conninfo: str, tmp_path: Path) -> None:
    run = run_skew(pg_conninfo, tmp_path, "each worker's clock")
    assert run.ahead == "took the job under a live lease; effect written, ack accepted"
    assert run.on_time == "effect written, ack refused (stale lease)"
    assert run.report.effects_twice == ((JOB_ID, 2),) and not run.report.ok


def test_with_the_servers_clock_the_skew_changes_nothing(pg_conninfo: str, tmp_path: Path) -> None:
    run = run_skew(pg_conninfo, tmp_path, "the server's clock")
    assert run.ahead == "found nothing due"
    assert run.on_time == "effect written, ack accepted"
    assert (run.report.ran_twice, run.report.effects, run.report.ok) == ((), 1, True)


def test_run_skew_checks_its_settings(tmp_path: Path) -> None:
    url = "postgresql://nobody@/unused"  # refused before any connection
    with pytest.raises(InvalidSettingError, match="decider must be one of"):
        run_skew(url, tmp_path, "mine")  # type: ignore[arg-type]
    (tmp_path / "old.history.jsonl").write_text("")
    with pytest.raises(InvalidSettingError, match="run_skew needs a fresh folder"):
        run_skew(url, tmp_path, "the server's clock")


def test_run_skews_runs_both_deciders_in_schemas_of_their_own(pg_url: str, tmp_path: Path) -> None:
    runs = run_skews(tmp_path)
    assert list(runs) == list(DECIDERS)
    assert [run.report.effects for run in runs.values()] == [2, 1]  # each schema started empty
    assert sorted(path.name for path in tmp_path.iterdir()) == ["0", "1"]
