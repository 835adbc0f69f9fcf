"""The learner's CI: the workflow file is valid, and `check-all` (what it runs) lists and fails.

GitHub's workflow schema (SchemaStore's, shipped with check-jsonschema, so no network) stands
in for actionlint, whose PyPI package downloads its binary from GitHub at install time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from waiting import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "exercises.yml"


def schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        "-m",
        "check_jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        str(path),
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_workflow_file_matches_githubs_schema() -> None:
    done = schema_check(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_check_rejects_a_job_without_a_runner(tmp_path: Path) -> None:
    broken = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    del broken["jobs"]["check"]["runs-on"]
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(broken), encoding="utf-8")
    assert schema_check(tmp_path / "broken.yml").returncode == 1


def test_workflow_sets_up_the_course_and_runs_check_all_on_push() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow[True]["push"] == {"branches": ["**"]}  # YAML 1.1 reads the key `on` as True
    [job] = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs == ["make setup", "make check-all"]
    assert job["timeout-minutes"] <= 60
    uses = [step["uses"] for step in job["steps"] if "uses" in step]
    assert uses == ["actions/checkout@v5", "actions/setup-python@v6"]


def runs_for(condition: str, event: str, head_repo: str = "") -> bool:
    """Evaluate a job's ``if:`` (comparisons joined by ``||`` and ``&&``) for one event."""
    context = {
        "github.event_name": event,
        "github.repository": "learner/course",
        "github.event.pull_request.head.repo.full_name": head_repo,
    }
    python = re.sub(r"github(\.\w+)+", lambda name: repr(context[name.group(0)]), condition)
    return bool(eval(python.replace("||", " or ").replace("&&", " and ")))


def test_each_change_is_checked_once_pull_requests_from_forks_too() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert set(workflow[True]) == {"push", "pull_request", "workflow_dispatch"}
    [job] = workflow["jobs"].values()
    condition = job["if"]
    assert runs_for(condition, "push")
    assert runs_for(condition, "workflow_dispatch")
    assert not runs_for(condition, "pull_request", head_repo="learner/course"), "its push ran it"
    assert runs_for(condition, "pull_request", head_repo="friend/course"), "a fork's push runs there"


def course(tmp_path: Path, names: list[str]) -> Path:
    for folder in ("solutions", "exercises"):
        (tmp_path / folder).mkdir()
        for name in names:
            shutil.copy(ROOT / folder / f"{name}.ipynb", tmp_path / folder)
    return tmp_path


def answer(path: Path, sources: list[str]) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    answers = [c for c in nb["cells"] if "answer" in c["metadata"].get("tags", [])]
    for cell, source in zip(answers, sources, strict=True):
        cell["source"] = source
    path.write_text(json.dumps(nb), encoding="utf-8")


def check_all(root: Path, summary: Path) -> subprocess.CompletedProcess[str]:
    # Time limits as hang guards: a notebook takes seconds to check, even on a loaded machine.
    args = [
        sys.executable,
        "-m",
        "jobqueue.teaching.exercises",
        "check-all",
        "--timeout",
        f"{HANG_GUARD_S:g}",
    ]
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=3 * HANG_GUARD_S, env=env)


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = course(tmp_path_factory.mktemp("learner"), ["02_backoff", "03_job_queue", "04_worker_retries"])
    solution = json.loads((ROOT / "solutions" / "02_backoff.ipynb").read_text(encoding="utf-8"))
    solved = ["".join(c["source"]) for c in solution["cells"] if c["id"] in ("n02-03", "n02-09b")]
    answer(root / "exercises" / "02_backoff.ipynb", solved)
    answer(root / "exercises" / "03_job_queue.ipynb", ["def job_states(jobs, now):\n    return {}"])
    summary = root / "summary.md"
    return check_all(root, summary), summary


def test_check_all_lists_untouched_exercises_and_fails_on_a_failing_one(
    started: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, summary = started
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "| 02_backoff | PASS | 8 of 8 |" in lines
    assert "| 03_job_queue | FAIL | 0 of 5 |" in lines
    assert "| 04_worker_retries | not started | |" in lines
    assert lines[-1] == "1 not started, 1 passing; failing: 03_job_queue"
    assert summary.read_text(encoding="utf-8").startswith(
        "## Exercises\n\n| exercise | verdict | checks passed |"
    )


def test_check_all_passes_when_nothing_is_started(tmp_path: Path) -> None:
    root = course(tmp_path, ["02_backoff", "03_job_queue"])
    done = check_all(root, tmp_path / "summary.md")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "2 not started, 0 passing"
