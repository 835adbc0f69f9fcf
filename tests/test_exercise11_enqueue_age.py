"""Exercise 11's "late" rule: the age since the enqueue, which a receipt in its backoff keeps growing.

The rule exists because the oldest waiting age restarts whenever a retry comes due, so a
receipt that has failed for two hours looks young to it (issue 23). These tests show that
the checks catch an answer that still alerts on the waiting age alone, and that the
solution's rule fires on a real queue's metrics. (That the unsolved exercise fails every
check and the solution passes them all, these included, is in test_exercises.py.)
"""

import contextlib
import io
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jobqueue as jq
from jobqueue.examples import shop
from jobqueue.metrics import QueueMetrics
from jobqueue.teaching.exercises import cli, generate
from jobqueue.teaching.notebooks import read, write

ROOT = Path(__file__).resolve().parent.parent
NAME = "11_production"
LATE_CHECKS = (
    "a receipt retrying for 2 hours, now in its backoff; ready jobs wait 4 s",
    "workers 7 minutes behind: late and a backlog",
    "everything at once, in rule order",
    "late for 5 minutes (6 snapshots): it pages",
)


def solution_answers() -> list[str]:
    """The solution's answer cells, as sources a learner could have written (markers and all)."""
    nb = read(ROOT / "solutions" / f"{NAME}.ipynb")
    return [c.source for c in nb.cells if generate.BEGIN in c.source]


def without_the_late_rule(source: str) -> str:
    """The solution's ``alerts`` as the exercise had it before: no rule on the enqueue age."""
    start = source.index("    if metrics.oldest_enqueued_age_s > MAX_AGE_S:")
    end = source.index("    if metrics.oldest_waiting_age_s > MAX_WAIT_S:")
    assert start < end
    return source[:start] + source[end:]


def check_answers(tmp_path: Path, answers: list[str] | None) -> list[str]:
    """Run ``check`` on the exercise with ``answers`` in its answer cells (None: as generated)."""
    (tmp_path / "solutions").mkdir(parents=True)
    (tmp_path / "exercises").mkdir()
    shutil.copy(ROOT / "solutions" / f"{NAME}.ipynb", tmp_path / "solutions")
    target = tmp_path / "exercises" / f"{NAME}.ipynb"
    nb = read(ROOT / "exercises" / f"{NAME}.ipynb")
    if answers is not None:
        cells = [c for c in nb.cells if generate.ANSWER_TAG in c.metadata.get("tags", [])]
        for cell, source in zip(cells, answers, strict=True):
            cell.source = source
    write(nb, target)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["check", str(target)], cwd=tmp_path)
    return out.getvalue().strip().splitlines()


def failed(lines: list[str], labels: tuple[str, ...]) -> set[str]:
    """Which of ``labels`` the checker reported with ✗ (it prints a line only for a failed check)."""
    return {label for label in labels for line in lines if line.startswith(f"  ✗ {label}: ")}


def test_an_answer_that_alerts_on_the_waiting_age_alone_fails_the_late_checks(tmp_path: Path) -> None:
    alerts_source, paging_source = solution_answers()
    lines = check_answers(tmp_path, [without_the_late_rule(alerts_source), paging_source])
    failures = [line for line in lines if line.startswith("  ✗ ")]
    assert failed(lines, LATE_CHECKS) == set(LATE_CHECKS), lines
    assert len(failures) == len(LATE_CHECKS), lines  # no other check: its backlog rule is right
    assert (
        "  ✗ a receipt retrying for 2 hours, now in its backoff; ready jobs wait 4 s: expected"
        " ['late: the oldest job was enqueued 7200 s ago (limit 300 s)'], got []"
    ) in lines
    assert lines[-1] == f"FAIL {NAME}: 20 of 24 checks passed", lines


Alerts = Callable[[QueueMetrics], list[str]]


def define_alerts(answer: str) -> Alerts:
    """The ``alerts`` an answer cell defines, after the exercise's import cell."""
    namespace: dict[str, Any] = {}
    exec(read(ROOT / "solutions" / f"{NAME}.ipynb").cells[1].source, namespace)  # the imports
    exec(answer, namespace)
    alerts: Alerts = namespace["alerts"]
    return alerts


def test_only_the_late_rule_sees_a_receipt_that_has_failed_for_two_hours() -> None:
    clock = jq.ManualClock()
    policy = jq.RetryPolicy(max_attempts=20, backoff=jq.Backoff(base_s=60, cap_s=3600))  # 60 s up to 1 h
    queue = jq.JobQueue(clock=clock, retry=policy, random=lambda: 1.0)
    receipt = shop.ReceiptPayload(order_id=1001, email="customer@example.com")
    queue.enqueue(shop.SEND_RECEIPT, receipt, id="receipt-1001")
    while clock.now() < 7200:  # the mail provider is down for two hours; a worker looks every minute
        lease = queue.claim()
        if lease is not None:
            queue.fail(lease, "mail provider down")
        clock.advance(60)
    metrics = queue.metrics()
    # attempt 7 failed at t=3780 s; the next is due at t=7380 s: in its backoff, not waiting
    assert (metrics.scheduled, metrics.waiting, metrics.oldest_waiting_age_s) == (1, 0, 0.0)
    assert metrics.oldest_enqueued_age_s == 7200.0
    solution = solution_answers()[0]
    assert define_alerts(solution)(metrics) == ["late: the oldest job was enqueued 7200 s ago (limit 300 s)"]
    assert define_alerts(without_the_late_rule(solution))(metrics) == []  # the outage goes unseen
