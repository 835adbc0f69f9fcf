"""The per-cell output cap the grader installs in each kernel (a real IPython shell here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jobqueue.teaching import output_cap


def test_cut_keeps_short_text_and_says_where_it_cut_long_text() -> None:
    assert output_cap.cut("abc", limit=3) == "abc"
    assert output_cap.cut("abcd", limit=3) == "abc\n[output cut: more than 3 characters]\n"


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def test_a_cell_prints_at_most_the_limit_then_one_note(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    output_cap.install(shell, limit=10)
    shell.run_cell("print('x' * 25); print('more')")
    assert capsys.readouterr().out == "x" * 10 + "\n[output cut: more than 10 characters]\n"
    shell.run_cell("print('next cell')")  # each cell has its own budget
    assert capsys.readouterr().out == "next cell\n"


def test_a_long_error_message_is_cut(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    output_cap.install(shell, limit=10)
    result = shell.run_cell("raise ValueError('y' * 1000)")
    assert isinstance(result.error_in_exec, ValueError)
    assert str(result.error_in_exec) == "y" * 10 + "\n[output cut: more than 10 characters]\n"
    assert "y" * 11 not in capsys.readouterr().out


def test_strings_inside_displayed_data_and_metadata_are_cut() -> None:
    nested = {"text/plain": "z" * 50, "meta": {"detail": "w" * 50, "n": 3, "list": ["v" * 50]}}
    short = output_cap.shorten(nested, limit=5)
    note = "\n[output cut: more than 5 characters]\n"
    meta = {"detail": "wwwww" + note, "n": 3, "list": ["vvvvv" + note]}
    assert short == {"text/plain": "zzzzz" + note, "meta": meta}
