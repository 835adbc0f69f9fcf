"""Cap what one notebook cell may output, inside the kernel that runs a learner's answer.

An answer that prints megabytes (or returns a megabyte value that a check then shows)
would otherwise travel whole to the checker, through its pipe and into memory: under
nbval, which formats every kernel message, one such cell took minutes. The grader starts
each kernel with an IPython start-up file that calls :func:`install`; from then on each
cell may print at most :data:`CELL_OUTPUT_CHARS` characters to stdout and stderr
together, error messages, displayed values and their metadata (a check's recorded
verdict) are cut to the same length, and what was cut is said in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

CELL_OUTPUT_CHARS = 100_000
"""Most characters one cell may print (stdout and stderr together), and longest error message."""

CUT = "\n[output cut: more than {limit} characters]\n"
"""What replaces a cell's output beyond the limit (once per cell)."""


def cut(text: str, limit: int = CELL_OUTPUT_CHARS) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and a note of the cut."""
    return text if len(text) <= limit else text[:limit] + CUT.format(limit=limit)


def shorten(value: Any, limit: int = CELL_OUTPUT_CHARS) -> Any:
    """``value`` with every string in it (in dicts and lists too) passed through :func:`cut`."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        return {key: shorten(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [shorten(item, limit) for item in value]
    return value


class _Budget:
    """Characters a cell may still print; reset before each cell."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def reset(self, *_: object) -> None:
        self.left = self.limit

    def capped(self, write: Callable[[str], int]) -> Callable[[str], int]:
        def write_capped(text: str) -> int:
            if self.left <= 0:
                return len(text)
            shown = text[: self.left]
            self.left -= len(text)
            write(shown if self.left >= 0 else shown + CUT.format(limit=self.limit))
            return len(text)

        return write_capped


def install(shell: Any, limit: int = CELL_OUTPUT_CHARS) -> None:
    """Cap the output of every cell run by the IPython ``shell`` from now on (see the module).

    Args:
        shell: the kernel's shell (``get_ipython()``).
        limit: characters per cell, and longest error message or displayed text.
    """
    budget = _Budget(limit)
    shell.events.register("pre_run_cell", budget.reset)
    for stream in (sys.stdout, sys.stderr):
        stream.write = budget.capped(stream.write)  # type: ignore[method-assign]  # on this instance only

    def publish(data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        original_publish(shorten(data, limit), shorten(metadata, limit), *args, **kwargs)

    def write_format_data(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        original_write_format_data(shorten(data, limit), *args, **kwargs)

    original_publish = shell.display_pub.publish
    shell.display_pub.publish = publish
    original_write_format_data = shell.displayhook.write_format_data  # a cell's last value
    shell.displayhook.write_format_data = write_format_data

    def shorten_error(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> Any:
        message = str(value)
        if len(message) > limit:
            value.args = (cut(message, limit),)
        return self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((Exception,), shorten_error)


STARTUP = "import jobqueue.teaching.output_cap\njobqueue.teaching.output_cap.install(get_ipython())\n"
"""The IPython start-up file (``profile_default/startup/``) that installs the cap in a kernel."""
