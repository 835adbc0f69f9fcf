"""The dashboard's web app over HTTP (Starlette's TestClient): token, read-only, no password shown."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from browser_support import free_port
from psycopg.conninfo import conninfo_to_dict
from starlette.testclient import TestClient

from jobqueue import DurableQueue, JobQueue, ManualClock
from jobqueue.cli import main
from jobqueue.dashboard import create_app, hosts_for
from jobqueue.examples.shop import SEND_RECEIPT, ReceiptPayload

T0 = 1_000.0
TOKEN = "test-token-123"


def shop_with_a_dead_letter() -> JobQueue:
    queue = JobQueue(clock=ManualClock(T0))
    queue.enqueue(SEND_RECEIPT, ReceiptPayload(order_id=1, email="nobody"), id="r1")
    queue.enqueue(SEND_RECEIPT, ReceiptPayload(order_id=2, email="ada@example.com"), id="r2")
    lease = queue.claim()
    assert lease is not None
    queue.fail(lease, "PermanentJobError: invalid e-mail address 'nobody'", permanent=True)
    return queue


@pytest.fixture
def queue() -> JobQueue:
    return shop_with_a_dead_letter()


def client_for(queue: JobQueue, *, read_only: bool = False) -> TestClient:
    app = create_app(queue, where="shop.db", read_only=read_only, token=TOKEN)
    return TestClient(app, base_url="http://127.0.0.1")


def test_the_page_carries_the_token_and_the_snapshot_the_counts(queue: JobQueue) -> None:
    client = client_for(queue)
    page = client.get("/")
    assert page.status_code == 200
    assert f'name="jobqueue-csrf-token" content="{TOKEN}"' in page.text
    assert 'name="jobqueue-read-only" content="false"' in page.text
    assert page.headers["x-frame-options"] == "DENY"
    data = client.get("/api/snapshot").json()
    assert data["totals"] == {"waiting": 1, "scheduled": 0, "leased": 0, "dead": 1, "cancelled": 0}
    assert data["dead_letters"][0]["id"] == "r1"
    assert client.get("/static/uPlot.iife.min.js").status_code == 200


def test_a_post_without_the_token_or_with_a_wrong_one_is_refused(queue: JobQueue) -> None:
    client = client_for(queue)
    for headers in ({}, {"X-CSRF-Token": "guess"}, {"X-CSRF-Token": ""}):
        answer = client.post("/api/dead-letters/replay", json={"id": "r1"}, headers=headers)
        assert answer.status_code == 403
        assert "X-CSRF-Token" in answer.json()["message"]
    assert [letter.job.id for letter in queue.dead_letters()] == ["r1"]  # nothing changed


def test_replay_with_the_token_moves_the_dead_letter_back_to_waiting(queue: JobQueue) -> None:
    client = client_for(queue)
    answer = client.post("/api/dead-letters/replay", json={"id": "r1"}, headers={"X-CSRF-Token": TOKEN})
    assert answer.status_code == 200
    assert answer.json()["message"] == "r1 replayed: waiting again"
    assert queue.dead_letters() == []
    assert client.get("/api/snapshot").json()["totals"]["waiting"] == 2


def test_discard_with_the_token_deletes_the_dead_letter(queue: JobQueue) -> None:
    client = client_for(queue)
    answer = client.post("/api/dead-letters/discard", json={"id": "r1"}, headers={"X-CSRF-Token": TOKEN})
    assert answer.status_code == 200
    assert queue.dead_letters() == [] and len(queue) == 1


def test_bad_requests_name_what_is_wrong(queue: JobQueue) -> None:
    client = client_for(queue)
    token = {"X-CSRF-Token": TOKEN}
    unknown = client.post("/api/dead-letters/replay", json={"id": "r9"}, headers=token)
    assert unknown.status_code == 404 and "'r9'" in unknown.json()["message"]
    assert client.post("/api/dead-letters/explode", json={"id": "r1"}, headers=token).status_code == 404
    assert client.post("/api/dead-letters/replay", content=b"r1", headers=token).status_code == 400
    assert client.post("/api/dead-letters/replay", json={"id": 7}, headers=token).status_code == 400
    assert client.get("/api/dead-letters/replay").status_code == 405


def test_read_only_refuses_posts_even_with_the_token(queue: JobQueue) -> None:
    client = client_for(queue, read_only=True)
    assert 'name="jobqueue-read-only" content="true"' in client.get("/").text
    answer = client.post("/api/dead-letters/replay", json={"id": "r1"}, headers={"X-CSRF-Token": TOKEN})
    assert answer.status_code == 403 and "read-only" in answer.json()["message"]
    assert [letter.job.id for letter in queue.dead_letters()] == ["r1"]


def test_cancel_with_the_token_answers_the_state_and_read_only_refuses_it(queue: JobQueue) -> None:
    token = {"X-CSRF-Token": TOKEN}
    refused = client_for(queue, read_only=True).post("/api/jobs/cancel", json={"id": "r2"}, headers=token)
    assert refused.status_code == 403 and "read-only" in refused.json()["message"]
    client = client_for(queue)
    assert client.post("/api/jobs/cancel", json={"id": "r2"}).status_code == 403  # no token
    assert len(queue) == 1
    answer = client.post("/api/jobs/cancel", json={"id": "r2"}, headers=token)
    assert (answer.status_code, answer.json()["message"]) == (200, "r2 cancelled")  # it was waiting
    assert len(queue) == 0 and client.get("/api/snapshot").json()["totals"]["cancelled"] == 1
    dead = client.post("/api/jobs/cancel", json={"id": "r1"}, headers=token)
    assert (dead.status_code, dead.json()["message"]) == (200, "r1 dead")  # left as it is
    unknown = client.post("/api/jobs/cancel", json={"id": "r9"}, headers=token)
    assert unknown.status_code == 404 and "'r9'" in unknown.json()["message"]
    assert client.post("/api/jobs/replay", json={"id": "r1"}, headers=token).status_code == 404


def test_a_running_job_gets_a_cancel_button_and_is_marked_cancelling(queue: JobQueue) -> None:
    lease = queue.claim()
    assert lease is not None and lease.job.id == "r2"
    client = client_for(queue)
    page = client.get("/").text
    assert 'id="cancel-form"' in page and 'class="actions-head"' in page
    answer = client.post("/api/jobs/cancel", json={"id": "r2"}, headers={"X-CSRF-Token": TOKEN})
    assert answer.json()["message"] == "r2 cancelling"  # its ack or fail will finish it
    queue.ack(lease)
    assert len(queue) == 0 and client.get("/api/snapshot").json()["totals"]["cancelled"] == 1


def test_every_process_gets_its_own_random_token(queue: JobQueue) -> None:
    pages = [
        TestClient(create_app(queue, where="x"), base_url="http://127.0.0.1").get("/").text for _ in range(2)
    ]
    tokens = [page.split('jobqueue-csrf-token" content="')[1].split('"')[0] for page in pages]
    assert tokens[0] != tokens[1] and len(tokens[0]) >= 32


def test_only_local_host_names_are_answered(queue: JobQueue) -> None:
    client = client_for(queue)
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400
    assert client.get("/", headers={"Host": "localhost:8000"}).status_code == 200
    assert hosts_for("0.0.0.0") == ("*",)
    assert "dash.internal" in hosts_for("dash.internal")


def test_the_page_escapes_where() -> None:
    app = create_app(JobQueue(clock=ManualClock(T0)), where='<script>alert("x")</script>.db', token=TOKEN)
    page = TestClient(app, base_url="http://127.0.0.1").get("/").text
    assert "<script>alert" not in page and "&lt;script&gt;" in page


@pytest.fixture
def postgres_password(pg_conninfo: str) -> Iterator[tuple[str, str]]:
    password = conninfo_to_dict(pg_conninfo).get("password")
    if not password:
        pytest.skip("the test server's URL holds no password to look for")
    yield pg_conninfo, str(password)


def test_no_answer_shows_the_database_password(postgres_password: tuple[str, str]) -> None:
    from jobqueue.backends.postgres import PostgresQueue

    url, password = postgres_password
    queue = PostgresQueue(url, clock=ManualClock(T0))
    client = TestClient(create_app(queue, where=queue.server, token=TOKEN), base_url="http://127.0.0.1")
    answers = [
        client.get("/"),
        client.get("/api/snapshot"),
        client.post("/api/dead-letters/replay", json={"id": "nope"}, headers={"X-CSRF-Token": TOKEN}),
    ]
    queue.close()  # now every read fails: the errors must not show it either
    answers += [
        client.get("/api/snapshot"),
        client.post("/api/dead-letters/discard", json={"id": "nope"}, headers={"X-CSRF-Token": TOKEN}),
    ]
    assert [answer.status_code for answer in answers] == [200, 200, 404, 503, 503]
    assert "is closed" in answers[3].json()["message"]
    for answer in answers:
        assert password not in answer.text


def test_the_dashboard_command_serves_the_page_and_logs_no_password(
    postgres_password: tuple[str, str],
) -> None:
    url, password = postgres_password
    port = free_port()
    command = [sys.executable, "-m", "jobqueue", "dashboard", url, "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        page = ""
        deadline = time.monotonic() + 30  # a hang guard; it answers within seconds
        while not page and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as answer:
                    page = answer.read().decode()
            except OSError:
                time.sleep(0.2)
        assert '"totals"' in page and password not in page
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert f"on http://127.0.0.1:{port}/" in output
    assert password not in output
    assert process.returncode == 0, output


def test_the_dashboard_command_needs_an_existing_file(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["dashboard", f"{tmp_path}/missing.db"])
    assert exit.value.code == 2


def test_the_dashboard_command_on_a_held_file_says_to_use_the_worker(
    tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]
) -> None:
    file = f"{tmp_path}/shop.db"
    with DurableQueue(file):  # held, as a worker would hold it
        assert main(["dashboard", file]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "start that worker with --dashboard" in error
