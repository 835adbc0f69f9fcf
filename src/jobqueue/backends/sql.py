"""The named blocks of a backend's ``.sql`` file, loaded once, and its numbered migrations.

A block starts with a line ``-- name: x`` and runs to the next. Its ``--`` comments document
it and are left out of the statement: what the driver sends is the SQL alone (psycopg parses
a statement's placeholders once and caches the result only for statements of at most 4,096
characters; the claim's comments took it past that, and every claim was parsed again).
``{key}`` placeholders are filled from ``fill``: fixed SQL (select lists, reasons), never
values, which always go as parameters. Blocks ``migration_1``, ``migration_2``... change
the tables one version at a time; :func:`migrations` says which a database still needs.
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


def migrations(blocks: Mapping[str, str], version: int) -> list[str]:
    """The migrations that take tables of ``version`` to the latest, in order.

    Block ``migration_N`` takes the tables from version N - 1 to N (and records N);
    ``version`` 0 means no tables yet.
    """
    return [body for _, body in numbered_migrations(blocks, version)]


def numbered_migrations(blocks: Mapping[str, str], version: int) -> list[tuple[int, str]]:
    """:func:`migrations` with each step's number: ``(N, block migration_N)``, in order."""
    found = sorted(
        (int(name.removeprefix("migration_")), body) for name, body in blocks.items() if _is_step(name)
    )
    return [(number, body) for number, body in found if number > version]


def latest_version(blocks: Mapping[str, str]) -> int:
    """The version the last ``migration_N`` block of ``blocks`` leaves the tables at."""
    return max(int(name.removeprefix("migration_")) for name in blocks if _is_step(name))


def _is_step(name: str) -> bool:
    return re.fullmatch(r"migration_[0-9]+", name) is not None


def _statement(body: str) -> str:
    """``body`` without its ``--`` comments, blank lines and trailing blanks.

    A ``--`` inside a quoted literal (``'...'``) is text, not a comment; a literal never
    spans lines in these files. ``/* ... */`` markers (``/* types */``) are kept.
    """
    kept = (_uncommented(line).rstrip() for line in body.splitlines())
    return "\n".join(line for line in kept if line.strip())


def _uncommented(line: str) -> str:
    """``line`` up to its ``--`` comment, if it has one outside a quoted literal."""
    if "--" not in line:
        return line
    if "'" not in line:
        return line[: line.index("--")]
    quoted = False
    for at, char in enumerate(line):
        if char == "'":
            quoted = not quoted
        elif not quoted and line.startswith("--", at):
            return line[:at]
    return line
