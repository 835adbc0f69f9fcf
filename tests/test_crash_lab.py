"""The server crash of lesson 15: a claim lost with the server, and whose late write the fences stop.

One run crashes a server of its own once per design (``pg_ctl stop -m immediate`` just
after worker A's claim). In every design the crash loses the claim and hands B the same
attempt and the same lease token; only the fencing token is new. (The lesson's "lease
check" fails as a plain write does: both flagged by the checker.)
"""

from pathlib import Path

import psycopg
import pytest

from jobqueue import InvalidSettingError
from jobqueue.teaching.crash_lab import (
    CRASH_DESIGNS,
    JOB_ID,
    RECORDED,
    CrashRun,
    describe,
    run_crash,
)
from jobqueue.teaching.postgres_server import crash_local_server, hold_local_server, release_local_server

TWICE = ((JOB_ID, 2),)
DESIGNS = (*CRASH_DESIGNS, "at-least-once + process_once")  # a plain write fails as the lease check


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CrashRun]:
    return dict(run_crash(tmp_path_factory.mktemp("crash") / "lab", DESIGNS))


@pytest.mark.parametrize("design", DESIGNS)
def test_the_crash_loses_the_claim_and_hands_out_its_lease_token_again(
    runs: dict[str, CrashRun], design: str
) -> None:
    run = runs[design]
    assert run.claim_lost, "B's claim was not attempt 1 again: the crash did not lose A's claim"
    assert run.same_lease_token and run.fencing_grew
    assert run.report.ran_twice == TWICE and run.report.lost == ()


def test_a_check_of_the_lease_token_lets_the_crashed_workers_late_write_through(
    runs: dict[str, CrashRun],
) -> None:
    run = runs["at-least-once + lease check"]
    assert run.report.effects_twice == TWICE and not run.report.ok, "the checker must flag it"
    # A holds B's lease token, but not its fencing token: the queue refuses A's ack (it took
    # it for B's before the queue checked the fencing token too), and B's goes through.
    assert run.late == "effect written, ack refused (stale lease)"
    assert run.second == "effect written, ack accepted"


def test_the_fencing_token_refuses_the_late_write(runs: dict[str, CrashRun]) -> None:
    run = runs["at-least-once + fencing"]
    assert (run.report.effects, run.report.effects_twice, run.report.ok) == (1, (), True)
    assert run.late == "effect refused (its fencing token is no longer the job's), no ack sent"
    assert run.second == "effect written, ack accepted"


def test_process_once_skips_the_late_write(runs: dict[str, CrashRun]) -> None:
    run = runs["at-least-once + process_once"]
    assert (run.report.effects, run.report.ok) == (1, True)
    assert run.late.startswith("effect skipped")


def test_the_lesson_shows_what_a_run_of_its_two_designs_says(runs: dict[str, CrashRun]) -> None:
    assert CRASH_DESIGNS == ("at-least-once + lease check", "at-least-once + fencing")
    assert describe({design: runs[design] for design in CRASH_DESIGNS}) == RECORDED


def test_run_crash_checks_its_settings(tmp_path: Path) -> None:
    for designs in (["hope"], ["at-least-once", "at-least-once"], []):
        with pytest.raises(InvalidSettingError, match="designs must be distinct"):
            run_crash(tmp_path / "a", designs)  # type: ignore[arg-type]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "old.history.jsonl").write_text("")
    with pytest.raises(InvalidSettingError, match="run_crash needs a fresh folder"):
        run_crash(tmp_path / "b")


def test_only_a_server_this_process_holds_can_be_crashed(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettingError, match="holds no server in"):
        crash_local_server(tmp_path / "pg")


def test_a_crash_reaches_a_server_whose_folder_was_closed_to_others_since_it_started(tmp_path: Path) -> None:
    # Run as root, the server runs as a user of its own, which must reach its data folder. A
    # pytest run starting meanwhile sets /tmp/pytest-of-root to mode 700 again: pg_ctl, run
    # as that user to crash the server, then could not reach the folder.
    folder = tmp_path / "closed" / "pg"
    folder.parent.mkdir()
    url = hold_local_server(folder)
    try:
        folder.parent.chmod(0o700)
        assert crash_local_server(folder) == url
        with psycopg.connect(url, autocommit=True) as con:
            assert con.execute("SELECT 1").fetchall() == [(1,)]
    finally:
        release_local_server(folder)
