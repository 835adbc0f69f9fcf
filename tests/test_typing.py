"""mypy must reject a handler or subscriber whose payload class does not match its job type."""

import re
from pathlib import Path

import mypy.api

ROOT = Path(__file__).resolve().parents[1]
TYPING = Path(__file__).resolve().parent / "typing"
ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[a-z-]+)\]$", re.M)


def run_mypy(path: Path) -> tuple[str, int]:
    stdout, stderr, status = mypy.api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            str(path),
        ]
    )
    assert stderr == ""
    return stdout, status


def marked_line(path: Path, marker: str) -> int:
    [number] = [n for n, line in enumerate(path.read_text().splitlines(), 1) if marker in line]
    return number


def test_mypy_rejects_a_handler_for_the_wrong_payload_type() -> None:
    bad = TYPING / "bad_handler.py"
    stdout, status = run_mypy(bad)
    errors = [match.groupdict() for match in ERROR.finditer(stdout)]
    assert status == 1, stdout
    assert len(errors) == stdout.count(": error:") == 1, stdout
    [error] = errors
    assert Path(error["path"]).name == "bad_handler.py"
    assert int(error["line"]) == marked_line(bad, "# expect: arg-type")
    assert error["code"] == "arg-type"
    assert '"register" of "Worker"' in error["message"]
    assert "InvoicePayload" in error["message"]
    assert "ReceiptPayload" in error["message"]


def test_mypy_accepts_handlers_whose_payload_types_match() -> None:
    stdout, status = run_mypy(TYPING / "good_handler.py")
    assert (stdout, status) == ("", 0)


def test_mypy_sees_every_backend_keep_the_contract_and_the_abilities_it_has() -> None:
    stdout, status = run_mypy(TYPING / "backends_declare.py")
    assert (status, stdout) == (0, "")


def test_mypy_rejects_a_subscriber_or_payload_of_another_class() -> None:
    bad = TYPING / "bad_subscriber.py"
    stdout, status = run_mypy(bad)
    errors = [match.groupdict() for match in ERROR.finditer(stdout)]
    assert status == 1, stdout
    assert len(errors) == stdout.count(": error:") == 2, stdout
    expected = [n for n, line in enumerate(bad.read_text().splitlines(), 1) if "# expect: arg-type" in line]
    assert [int(error["line"]) for error in errors] == expected
    assert {error["code"] for error in errors} == {"arg-type"}
    assert '"subscribe" of "Topic"' in errors[0]["message"] and "ReceiptPayload" in errors[0]["message"]
    assert '"publish" of "Topic"' in errors[1]["message"] and "OrderPaid" in errors[1]["message"]
