"""What an exercise's check cells call: compare an answer, print it, or fail clearly.

A check prints the learner's value when it is right (so nbval can compare the printed
line with the expected output stored in the exercise) and raises :class:`CheckFailed`
with a one-line "expected ..., got ..." when it is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


class CheckFailed(AssertionError):
    """An exercise's answer differs from the expected one; the message says how."""


def show(value: object) -> str:
    """Format a value for a check line: numbers with ``:g``, containers recursively.

    ``show([0.5, 1.0, 2.0]) == "[0.5, 1, 2]"``; dict keys are sorted so the text is the
    same in every kernel.
    """
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{show(k)}: {show(value[k])}" for k in sorted(value, key=repr)) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return repr(value)


def same(got: object, expected: object, *, rel_tol: float = 1e-9) -> bool:
    """Whether ``got`` equals ``expected``, numbers compared with ``math.isclose``."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=1e-12)
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
    if isinstance(expected, Sequence) and not isinstance(expected, str):
        if not isinstance(got, Sequence) or isinstance(got, str) or len(got) != len(expected):
            return False
        return all(same(g, e) for g, e in zip(got, expected, strict=True))
    return got == expected


def check(label: str, got: object, expected: object) -> None:
    """Print ``✓ label: got`` if ``got`` matches ``expected``, else raise.

    Raises:
        CheckFailed: ``"label: expected X, got Y"`` when the values differ.
    """
    if not same(got, expected):
        raise CheckFailed(f"{label}: expected {show(expected)}, got {show(got)}")
    print(f"✓ {label}: {show(got)}")


def check_that(label: str, ok: bool, explain: str) -> None:
    """Print ``✓ label`` if ``ok``, else raise with ``explain``.

    For answers that may differ from learner to learner (a policy with a property), where
    printing the value would make the expected output depend on the answer.

    Raises:
        CheckFailed: ``"label: explain"`` when ``ok`` is false.
    """
    if not ok:
        raise CheckFailed(f"{label}: {explain}")
    print(f"✓ {label}")
