"""The question bank of lesson 17: reading ``questions.toml`` and validating every entry.

The bank (shipped with the package) holds three kinds of question: ``"choice"`` (pick a,
b, c ...), ``"predict"`` (type exactly what a snippet prints) and ``"code"`` (write code;
a check runs against your definitions). :func:`load_bank` reads and validates it into
:class:`Question` records; a malformed entry raises :class:`BankError` naming its id and
field. Drawing and grading are in :mod:`jobqueue.teaching.quiz`.

Introduced in lesson 17.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Literal, cast

Kind = Literal["choice", "predict", "code"]
KINDS: tuple[Kind, ...] = ("choice", "predict", "code")
LETTERS = "abcdef"
"""Labels of a choice question's options, in order (so at most 6 options)."""
LAST_LESSON = 16
"""Highest lesson number a question may test."""

_COMMON = ("id", "lesson", "kind", "prompt", "answer", "explanation")
_BY_KIND: dict[Kind, tuple[str, ...]] = {
    "choice": ("choices",),
    "predict": ("code",),
    "code": ("starter", "check", "wrong"),
}
_ID = re.compile(r"[a-z0-9][a-z0-9-]*")


class BankError(ValueError):
    """The question bank is malformed; the message names the question id and the field."""


@dataclass(frozen=True, kw_only=True)
class Question:
    """One question of the bank; which fields matter depends on ``kind``.

    Attributes:
        id, lesson, kind, prompt, explanation: every question has them.
        answer: ``"choice"``: the right letter; ``"predict"``: exactly what ``code``
            prints; ``"code"``: a reference answer that passes ``check``.
        choices: the options of a ``"choice"`` question, labelled a, b, c ...
        code: the snippet of a ``"predict"`` question.
        starter, check, wrong: a ``"code"`` question's starting point, the check run
            after the learner's code, and a plausible wrong answer the check rejects.
    """

    id: str
    lesson: int
    kind: Kind
    prompt: str
    answer: str
    explanation: str
    choices: tuple[str, ...] = ()
    code: str = ""
    starter: str = ""
    check: str = ""
    wrong: str = ""

    def expected(self) -> str:
        """The right answer as shown after grading (a choice with its text)."""
        if self.kind == "choice":
            return f"{self.answer}) {self.choices[LETTERS.index(self.answer)]}"
        return self.answer


# -- the bank ------------------------------------------------------------------------


def load_bank() -> tuple[Question, ...]:
    """Read and validate the bank shipped with the package (``questions.toml``).

    Raises:
        BankError: if the file is not valid TOML or an entry is malformed.
    """
    text = resources.files("jobqueue.teaching").joinpath("questions.toml").read_text(encoding="utf-8")
    return parse_bank(text)


def parse_bank(text: str) -> tuple[Question, ...]:
    """Parse and validate a bank in TOML: a ``[[question]]`` table per question.

    Raises:
        BankError: naming the question id (or position) and the field at fault.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BankError(f"the question bank is not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"question"})
    if unknown:
        raise BankError(f"the question bank has unknown top-level keys {unknown}; use [[question]] tables")
    entries = data.get("question")
    if not isinstance(entries, list) or not entries:
        raise BankError("the question bank has no [[question]] tables")
    questions = [_question(entry, number) for number, entry in enumerate(entries, 1)]
    seen: set[str] = set()
    for question in questions:
        if question.id in seen:
            raise BankError(f"question {question.id!r}: field 'id' is used by another question too")
        seen.add(question.id)
    return tuple(questions)


class _Entry:
    """One ``[[question]]`` table under validation; its errors name the id (or the position)."""

    def __init__(self, table: dict[str, Any], number: int) -> None:
        self.table = table
        raw_id = table.get("id")
        self.where = (
            f"question {raw_id!r}" if isinstance(raw_id, str) and raw_id else f"question #{number} (no id)"
        )

    def fail(self, name: str, problem: str) -> BankError:
        """The error for field ``name``."""
        return BankError(f"{self.where}: field {name!r} {problem}")

    def text(self, name: str, *, python: bool = False) -> str:
        """Field ``name`` as a non-empty string (valid Python if ``python``), edge newlines dropped."""
        value = self.table.get(name)
        if value is None:
            raise self.fail(name, "is missing")
        if not isinstance(value, str) or not value.strip():
            raise self.fail(name, f"must be a non-empty string, got {value!r}")
        if python:
            try:
                compile(value, f"<{name}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            except SyntaxError as exc:
                raise self.fail(name, f"is not valid Python: {exc.msg} (line {exc.lineno})") from exc
        return value.strip("\n")


def _question(table: object, number: int) -> Question:
    """Validate one ``[[question]]`` table (the ``number``-th, from 1) into a Question."""
    if not isinstance(table, dict):
        raise BankError(f"question #{number}: expected a [[question]] table")
    entry = _Entry(table, number)
    question_id = entry.text("id")
    if not _ID.fullmatch(question_id):
        raise entry.fail("id", f"must be lower-case letters, digits and '-', got {question_id!r}")
    kind = table.get("kind")
    if kind not in KINDS:
        raise entry.fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    kind = cast(Kind, kind)
    allowed = set(_COMMON) | set(_BY_KIND[kind])
    extra = sorted(set(table) - allowed)
    if extra:
        raise entry.fail(
            extra[0], f"is not a field of a {kind!r} question (fields: {', '.join(sorted(allowed))})"
        )
    lesson = table.get("lesson")
    if isinstance(lesson, bool) or not isinstance(lesson, int) or not 0 <= lesson <= LAST_LESSON:
        raise entry.fail("lesson", f"must be a lesson number from 0 to {LAST_LESSON}, got {lesson!r}")
    head = Question(
        id=question_id,
        lesson=lesson,
        kind=kind,
        prompt=entry.text("prompt"),
        answer="",
        explanation=entry.text("explanation"),
    )
    return _with_answer(entry, head)


def _with_answer(entry: _Entry, head: Question) -> Question:
    """``head`` completed with its answer and the fields of its kind, validated."""
    if head.kind == "choice":
        choices = entry.table.get("choices")
        if not isinstance(choices, list) or not 2 <= len(choices) <= len(LETTERS):
            raise entry.fail("choices", f"must be a list of 2 to {len(LETTERS)} options, got {choices!r}")
        if not all(isinstance(c, str) and c.strip() for c in choices) or len(set(choices)) != len(choices):
            raise entry.fail("choices", f"must be distinct non-empty strings, got {choices!r}")
        answer = entry.text("answer")
        if answer not in LETTERS[: len(choices)]:
            raise entry.fail("answer", f"must be one of {', '.join(LETTERS[: len(choices)])}, got {answer!r}")
        return replace(head, answer=answer, choices=tuple(choices))
    if head.kind == "predict":
        return replace(
            head, code=entry.text("code", python=True), answer=normalize_output(entry.text("answer"))
        )
    return replace(
        head,
        answer=entry.text("answer", python=True),
        starter=entry.text("starter", python=True),
        check=entry.text("check", python=True),
        wrong=entry.text("wrong", python=True),
    )


def normalize_output(text: str) -> str:
    """Printed text as compared: trailing whitespace of each line and blank edge lines dropped."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip("\n")
