"""The chaos lab: real worker processes killed with SIGKILL (about 10-20 s for the file)."""

from pathlib import Path

import pytest

from jobqueue import InvalidSettingError
from jobqueue.teaching.chaos import run_chaos, run_designs


def test_each_design_keeps_its_promise_when_workers_are_killed(tmp_path: Path) -> None:
    reports = run_designs(tmp_path, kills=2, seed=1)
    safe = reports["at-least-once + process_once"]
    assert (safe.lost, safe.effects_twice) == ((), ())
    assert safe.effects == safe.enqueued > 0
    # At-least-once never loses a job, whatever the kills hit; at-most-once never runs one twice.
    assert reports["at-least-once"].lost == ()
    assert reports["at-most-once"].ran_twice == ()
    assert reports["at-most-once"].effects_twice == ()


def test_run_chaos_wants_a_fresh_folder_and_sane_settings(tmp_path: Path) -> None:
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(InvalidSettingError, match="needs a fresh folder"):
        run_chaos("at-most-once", tmp_path)
    with pytest.raises(InvalidSettingError, match="kills must be an int >= 1"):
        run_chaos("at-most-once", tmp_path / "new", kills=0)
    with pytest.raises(InvalidSettingError, match="design must be one of"):
        run_chaos("exactly-once", tmp_path / "new")  # type: ignore[arg-type]
