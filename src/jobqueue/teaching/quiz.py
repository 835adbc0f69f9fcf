"""Test yourself: five questions drawn from a bank on lessons 00-15; four right answers pass.

The bank (``questions.toml``) is read and validated by :mod:`jobqueue.teaching.quiz_bank`
(:func:`load_bank`, :class:`Question`, :class:`BankError`).

:class:`Quiz` draws five questions with an injected ``random.Random``: one of each kind
first, then the rest, preferring lessons not yet drawn, and on :meth:`Quiz.retry` only
questions that were not in the last draw (where the bank allows); ``Quiz(lessons=[13])``
draws from the questions of the lessons named only (practice). :meth:`Quiz.grade` is
pure: it returns a :class:`Grade` with a :class:`Mark` per question. Two front ends use
it: plain Python (:meth:`Quiz.show`, :meth:`Quiz.answer`, :meth:`Quiz.retry`) and ipywidgets
(:mod:`jobqueue.teaching.quiz_widgets`).

Introduced in lesson 17.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
import textwrap
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from random import Random
from typing import Any, TypeVar

from jobqueue.errors import InvalidSettingError
from jobqueue.teaching.quiz_bank import LETTERS, Kind, Question, load_bank, normalize_output

# Lesson 17 imports the whole quiz from this module, bank errors and parsing included.
from jobqueue.teaching.quiz_bank import BankError as BankError
from jobqueue.teaching.quiz_bank import parse_bank as parse_bank

KIND_LABELS: dict[Kind, str] = {
    "choice": "multiple choice",
    "predict": "predict what this prints",
    "code": "write code",
}
QUIZ_SIZE = 5
"""Questions in one draw."""
PASS_MARK = 4
"""Right answers needed to pass a draw."""
_T = TypeVar("_T")


# -- running code ----------------------------------------------------------------------


def run_async(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to the end on a fresh event loop in a helper thread; return its result.

    Works inside a notebook, where a loop is already running (``asyncio.run`` would fail).
    Checks of code questions use it to run async handlers.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_snippet(source: str) -> str:
    """Run a predict question's snippet in a fresh namespace and return what it printed.

    Top-level ``await`` is allowed, as in a notebook cell.
    """
    code = compile(source, "<snippet>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, {"__name__": "__quiz__"})  # a coroutine if the snippet awaits
        if asyncio.iscoroutine(result):
            run_async(result)
    return out.getvalue()


def run_code(source: str, check: str) -> str | None:
    """Run learner code, then ``check``, in one fresh namespace; what they print is discarded.

    Returns:
        ``None`` if the check passed, else why not: the check's AssertionError message,
        or the exception the code or the check raised.
    """
    namespace: dict[str, object] = {"__name__": "__quiz__"}
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(source, "<your code>", "exec"), namespace)
        except SyntaxError as exc:
            return f"your code is not valid Python: {exc.msg} (line {exc.lineno})"
        except Exception as exc:
            return f"your code raised {type(exc).__name__}: {exc}"
        try:
            exec(compile(check, "<check>", "exec"), namespace)
        except AssertionError as exc:
            return str(exc) or "the check failed"
        except NotImplementedError:
            return "not answered yet: replace the line `raise NotImplementedError(...)` with your code"
        except Exception as exc:
            return f"checking your code raised {type(exc).__name__}: {exc}"
    return None


# -- grading ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Mark:
    """The verdict on one answer: ``problem`` says what was wrong (empty when right)."""

    question: Question
    given: str | None
    correct: bool
    problem: str = ""


_NUMBER = re.compile(r"(?<![\w.\-])(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?![\w.])")
"""A number standing on its own: ``30``, ``30.0``, ``-2.5``; not the ``1001`` of ``pick-1001``, ``5s``."""


def same_output(given: str, expected: str) -> bool:
    """Whether ``given`` is the printed text ``expected``, numbers compared by value.

    Both are normalised (:func:`normalize_output`); then the text between numbers must be
    identical and each number equal in value, since how a number prints is incidental
    (``30`` for ``30.0``, ``retry 1`` for ``retry 1.0``). Numbers glued to words, like the
    ``1001`` of ``pick-1001`` or the ``5`` of ``t=5s``, are compared as text.
    """
    got_parts = _NUMBER.split(normalize_output(given))
    want_parts = _NUMBER.split(normalize_output(expected))
    if len(got_parts) != len(want_parts):
        return False
    for index, (got, want) in enumerate(zip(got_parts, want_parts, strict=True)):
        is_number = index % 2 == 1  # split() puts the captured numbers at odd places
        if not (float(got) == float(want) if is_number else got == want):
            return False
    return True


def is_answered(question: Question, given: str | None) -> bool:
    """Whether ``given`` is an answer at all: not missing, not blank, not a code question's starter.

    A code answer box starts out holding the starter, so an untouched one is no answer.
    """
    if given is None or not given.strip():
        return False
    return not (question.kind == "code" and given.strip() == question.starter.strip())


def mark(question: Question, given: str | None) -> Mark:
    """Grade one answer: a letter (or the option's text), printed text, or source code."""
    if given is None or not given.strip():
        return Mark(question=question, given=given, correct=False, problem="no answer")
    if question.kind == "choice":
        choice = given.strip().rstrip(")").lower()
        if given.strip() in question.choices:
            choice = LETTERS[question.choices.index(given.strip())]
        if choice not in LETTERS[: len(question.choices)]:
            options = ", ".join(LETTERS[: len(question.choices)])
            return Mark(
                question=question, given=given, correct=False, problem=f"answer with one of {options}"
            )
        ok = choice == question.answer
        return Mark(question=question, given=given, correct=ok, problem="" if ok else f"you chose {choice}")
    if question.kind == "predict":
        ok = same_output(given, question.answer)
        return Mark(question=question, given=given, correct=ok, problem="" if ok else "the output differs")
    problem = run_code(given, question.check)
    return Mark(question=question, given=given, correct=problem is None, problem=problem or "")


@dataclass(frozen=True, kw_only=True)
class Grade:
    """The marks of one draw, and whether they pass."""

    marks: tuple[Mark, ...]
    pass_mark: int

    @property
    def correct(self) -> int:
        """How many answers were right."""
        return sum(m.correct for m in self.marks)

    @property
    def passed(self) -> bool:
        """Whether at least :attr:`pass_mark` answers were right."""
        return self.correct >= self.pass_mark

    def verdict(self) -> str:
        """``"PASS: 4 of 5 (you need 4)"`` or ``"FAIL: 3 of 5 (you need 4)"``."""
        word = "PASS" if self.passed else "FAIL"
        return f"{word}: {self.correct} of {len(self.marks)} (you need {self.pass_mark})"

    def report(self) -> str:
        """Per question right or wrong, the right answer when wrong, the explanation; then the verdict."""
        parts = []
        for number, m in enumerate(self.marks, 1):
            q = m.question
            head = f"{number}. lesson {q.lesson:02d} · {q.id} · " + (
                "✓ right" if m.correct else f"✗ wrong: {m.problem}"
            )
            lines = [head]
            if not m.correct:
                label = {"choice": "The answer:", "predict": "It prints:", "code": "One answer:"}[q.kind]
                answer = _wrap(q.expected(), 9, "      ") if q.kind == "choice" else _indent(q.expected(), 6)
                lines += [f"   {label}", answer]
            lines.append(_wrap(q.explanation, 3))
            parts.append("\n".join(lines))
        return "\n\n".join([*parts, self.verdict()])

    def __repr__(self) -> str:
        return f"Grade({self.verdict()})"


def _indent(text: str, spaces: int) -> str:
    """``text`` indented by ``spaces``; blank lines stay empty."""
    return textwrap.indent(text, " " * spaces)


def _wrap(text: str, spaces: int, first: str = "") -> str:
    """Paragraphs of ``text`` wrapped at 100 columns, indented; ``first`` starts the first line."""
    pad = " " * spaces
    paragraphs = text.split("\n\n")
    return "\n".join(
        textwrap.fill(p, 100, initial_indent=(first or pad) if i == 0 else pad, subsequent_indent=pad)
        for i, p in enumerate(paragraphs)
    )


def _choice_lines(question: Question, spaces: int) -> list[str]:
    """A choice question's options, one wrapped ``a) ...`` item each."""
    pad = " " * spaces
    return [
        _wrap(c, spaces + 3, f"{pad}{letter}) ") for letter, c in zip(LETTERS, question.choices, strict=False)
    ]


# -- the quiz --------------------------------------------------------------------------


class Quiz:
    """Five questions at a time from the bank; four right answers pass.

    Args:
        bank: the questions to draw from; default :func:`load_bank`.
        rng: the source of randomness; pass ``random.Random(seed)`` for a repeatable draw.
        size: questions per draw (default 5); pass_mark: right answers to pass (default 4).
        lessons: practice mode: draw only questions on these lessons (numbers 0 to 15);
            ``None`` (the default) draws from every lesson.

    Raises:
        InvalidSettingError: naming the lessons, if a lesson has no question in the bank;
            unless ``1 <= pass_mark <= size <=`` the questions left to draw from.
    """

    def __init__(
        self,
        bank: Sequence[Question] | None = None,
        *,
        rng: Random | None = None,
        size: int = QUIZ_SIZE,
        pass_mark: int = PASS_MARK,
        lessons: Iterable[int] | None = None,
    ) -> None:
        self.bank = tuple(bank) if bank is not None else load_bank()
        if lessons is not None:
            wanted, covered = set(lessons), sorted({q.lesson for q in self.bank})
            if not wanted or not wanted <= set(covered):
                raise InvalidSettingError(
                    f"lessons must name lessons the bank has questions on ({covered[0]} to {covered[-1]}), "
                    f"got {sorted(wanted)!r}"
                )
            self.bank = tuple(q for q in self.bank if q.lesson in wanted)
        if not 1 <= pass_mark <= size <= len(self.bank):
            raise InvalidSettingError(
                f"need 1 <= pass_mark <= size <= questions in the bank ({len(self.bank)}), "
                f"got pass_mark={pass_mark!r}, size={size!r}"
            )
        self.size, self.pass_mark = size, pass_mark
        self._rng = rng if rng is not None else Random()
        self.questions: tuple[Question, ...] = ()
        self.draw()

    def draw(self) -> tuple[Question, ...]:
        """Draw a fresh set, avoiding the questions of the last draw where the bank allows.

        Questions are picked one at a time in a random order, each time preferring, in
        turn: not in the last draw, a kind drawn least so far, a lesson not drawn yet. The
        set is sorted by lesson. Returns it (also kept in :attr:`questions`).
        """
        last = {q.id for q in self.questions}
        order = list(self.bank)
        self._rng.shuffle(order)
        rank = {q.id: i for i, q in enumerate(order)}
        chosen: list[Question] = []
        for _ in range(self.size):
            kinds = [q.kind for q in chosen]
            lessons = {q.lesson for q in chosen}
            left = [q for q in order if q not in chosen]
            chosen.append(
                min(left, key=lambda q: (q.id in last, kinds.count(q.kind), q.lesson in lessons, rank[q.id]))
            )
        self.questions = tuple(sorted(chosen, key=lambda q: (q.lesson, rank[q.id])))
        return self.questions

    def unanswered(self, answers: Mapping[int, str] | Sequence[str | None]) -> list[int]:
        """The numbers (from 1) of the questions that ``answers`` leaves unanswered (:func:`is_answered`).

        Takes ``answers`` as :meth:`grade` does, and raises as it does.
        """
        given = self._given(answers)
        return [
            n for n, (q, a) in enumerate(zip(self.questions, given, strict=True), 1) if not is_answered(q, a)
        ]

    def grade(self, answers: Mapping[int, str] | Sequence[str | None]) -> Grade:
        """Grade answers to the current draw; nothing is printed.

        Args:
            answers: by question number from 1 (``{1: "b", 2: "..."}``), or a list in
                order; a missing answer counts as wrong.

        Raises:
            InvalidSettingError: for a question number outside 1..size, or a list of the
                wrong length.
        """
        marks = tuple(mark(q, a) for q, a in zip(self.questions, self._given(answers), strict=True))
        return Grade(marks=marks, pass_mark=self.pass_mark)

    def _given(self, answers: Mapping[int, str] | Sequence[str | None]) -> list[str | None]:
        """``answers`` as a list in question order, None where missing; checked as :meth:`grade` says."""
        if isinstance(answers, Mapping):
            bad = sorted(n for n in answers if n not in range(1, self.size + 1))
            if bad:
                raise InvalidSettingError(f"question numbers run from 1 to {self.size}, got {bad}")
            given = [answers.get(n) for n in range(1, self.size + 1)]
        else:
            if isinstance(answers, str) or len(answers) != self.size:
                raise InvalidSettingError(f"expected {self.size} answers in a list, got {answers!r}")
            given = list(answers)
        return given

    def text(self) -> str:
        """The current draw as plain text, numbered, with how to answer."""
        parts = []
        for number, q in enumerate(self.questions, 1):
            lines = [
                f"Question {number} of {self.size} · lesson {q.lesson:02d} · {KIND_LABELS[q.kind]} · {q.id}"
            ]
            lines.append(_wrap(q.prompt, 0))
            if q.kind == "choice":
                lines += _choice_lines(q, 2)
            elif q.kind == "predict":
                lines.append(_indent(q.code, 4))
            else:
                lines += ["Start from:", _indent(q.starter, 4)]
            parts.append("\n".join(lines))
        how = (
            f"To answer, call this quiz's answer({{1: ..., ..., {self.size}: ...}}) with a letter for "
            f"multiple choice, the printed text for predict, your source code for write code. "
            f"You need {self.pass_mark} of {self.size}."
        )
        return "\n\n".join([*parts, _wrap(how, 0)])

    def show(self) -> None:
        """Print the current draw (:meth:`text`)."""
        print(self.text())

    def answer(self, answers: Mapping[int, str] | Sequence[str | None]) -> Grade:
        """Grade ``answers`` (see :meth:`grade`), print the report, and return the grade."""
        result = self.grade(answers)
        print(result.report())
        return result

    def retry(self) -> None:
        """Draw a fresh set (see :meth:`draw`) and print it."""
        self.draw()
        self.show()

    def __repr__(self) -> str:
        return f"Quiz({self.size} of {len(self.bank)} questions, {self.pass_mark} to pass)"
