import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import HANG_GUARD_S, wait_until

from jobqueue import InvalidSettingError
from jobqueue.testing import Event, History, check_history, read_history


def test_a_clean_run_reports_nothing(tmp_path: Path) -> None:
    with History(tmp_path, "producer") as producer, History(tmp_path, "worker-1") as worker:
        for n in range(3):
            producer.enqueued(f"job-{n}")
        for n in range(3):
            worker.started(f"job-{n}")
            worker.effect(f"mail-{n}")
            worker.finished(f"job-{n}")
    report = check_history(read_history(tmp_path))
    assert report.ok
    assert (report.enqueued, report.finished, report.dead, report.effects) == (3, 3, 0, 3)
    assert report.summary() == "3 enqueued: 0 lost, 0 run more than once, 0 effects applied twice"


def test_lost_twice_and_applied_twice_are_counted(tmp_path: Path) -> None:
    with History(tmp_path, "producer") as producer:
        for n in range(4):
            producer.enqueued(f"job-{n}")
    with History(tmp_path, "worker-1") as first:  # killed in job-1, after its effect
        first.started("job-0")
        first.effect("mail-0")
        first.finished("job-0")
        first.started("job-1")
        first.effect("mail-1")
    with History(tmp_path, "worker-2") as second:  # job-1 redelivered; job-2 never finished
        second.started("job-1")
        second.effect("mail-1")
        second.finished("job-1")
        second.started("job-2")
    report = check_history(read_history(tmp_path), dead=["job-3"])
    assert report.lost == ("job-2",)
    assert report.ran_twice == (("job-1", 2),)
    assert report.effects_twice == (("mail-1", 2),)
    assert (report.finished, report.dead, report.effects) == (2, 1, 3)
    assert not report.ok
    assert report.summary() == "4 enqueued: 1 lost, 1 run more than once, 1 effects applied twice"


def test_effects_from_a_table_are_counted_with_recorded_ones(tmp_path: Path) -> None:
    with History(tmp_path, "p") as p:
        p.enqueued("a")
        p.finished("a")
        p.effect("x")
    report = check_history(read_history(tmp_path), effects=["x", "y", "y"])
    assert report.effects_twice == (("x", 2), ("y", 2))
    assert report.effects == 4


def test_only_acknowledged_enqueues_can_be_lost(tmp_path: Path) -> None:
    with History(tmp_path, "w") as w:
        w.started("never-acknowledged")
    report = check_history(read_history(tmp_path), dead=["other"])
    assert (report.enqueued, report.lost, report.dead) == (0, (), 0)
    assert report.ran_twice == ()


def test_a_dead_job_that_finished_counts_as_finished(tmp_path: Path) -> None:
    events = [Event(kind="enqueued", key="a", process="p"), Event(kind="finished", key="a", process="w")]
    report = check_history(events, dead=["a"])
    assert (report.finished, report.dead, report.lost) == (1, 0, ())


def test_a_line_cut_short_at_the_end_is_skipped_elsewhere_refused(tmp_path: Path) -> None:
    with History(tmp_path, "p") as p:
        p.enqueued("a")
    path = tmp_path / "p.history.jsonl"
    path.write_text(path.read_text() + '{"kind": "enq', encoding="utf-8")
    assert [e.key for e in read_history(tmp_path)] == ["a"]
    path.write_text('{"kind": "enq\n{"kind": "enqueued", "key": "a"}\n', encoding="utf-8")
    with pytest.raises(InvalidSettingError, match=r"p\.history\.jsonl line 1 is not a history event"):
        read_history(tmp_path)
    path.write_text('{"kind": "sent", "key": "a"}\n', encoding="utf-8")
    with pytest.raises(InvalidSettingError, match="line 1"):
        read_history(tmp_path)


def test_bad_names_and_folders_are_refused(tmp_path: Path) -> None:
    for name in ("", "a/b"):
        with pytest.raises(InvalidSettingError, match="process must be a plain non-empty name"):
            History(tmp_path, name)
    with pytest.raises(InvalidSettingError, match="no history folder"):
        read_history(tmp_path / "missing")


def test_close_is_idempotent(tmp_path: Path) -> None:
    history = History(tmp_path, "p")
    history.close()
    history.close()


WRITER = """
import sys
from jobqueue.testing import History
history = History(sys.argv[1], sys.argv[2])
n = 0
print("ready", flush=True)
while True:
    history.enqueued(f"{sys.argv[2]}-{n}-" + "x" * 200)
    n += 1
"""


def test_processes_killed_with_sigkill_leave_whole_lines(tmp_path: Path) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{i}"], stdout=subprocess.PIPE)
        for i in range(2)
    ]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"ready\n"
    files = [tmp_path / f"w{i}.history.jsonl" for i in range(2)]
    # Killed while they write, once each has written some 400 lines (the check holds for any number).
    wait_until(lambda: all(file.stat().st_size >= 100_000 for file in files), "100 kB in each history")
    for writer in writers:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=HANG_GUARD_S)
        assert writer.stdout is not None
        writer.stdout.close()
    events = read_history(tmp_path)
    assert {e.process for e in events} == {"w0", "w1"}
    for process in ("w0", "w1"):
        keys = [e.key for e in events if e.process == process]
        assert keys == [f"{process}-{n}-" + "x" * 200 for n in range(len(keys))]
