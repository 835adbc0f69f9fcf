"""The named blocks of a backend's ``.sql`` file, loaded once.

A block starts with a line ``-- name: x`` and runs to the next; comment lines at its start
document it and are left out of the statement. ``{key}`` placeholders are filled from
``fill``: fixed SQL (select lists, reasons), never values, which always go as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources


def load(file: str, fill: Mapping[str, str]) -> dict[str, str]:
    """The statements of ``file`` (beside this module) by block name, placeholders filled.

    Raises:
        KeyError: naming the placeholders left unfilled, if a block still holds one.
    """
    text = resources.files("jobqueue.backends").joinpath(file).read_text()
    for key, value in fill.items():
        text = text.replace("{" + key + "}", value)
    parts = re.split(r"^-- name: (\w+)\n", text, flags=re.MULTILINE)
    blocks = {name: _statement(body) for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    unfilled = sorted({hole for body in blocks.values() for hole in re.findall(r"\{([a-z_]+)\}", body)})
    if unfilled:
        raise KeyError(f"{file} has placeholders nobody filled: {', '.join(unfilled)}")
    return blocks


def _statement(body: str) -> str:
    """``body`` without its leading comment lines and surrounding blank space."""
    lines = body.strip().splitlines()
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip()
