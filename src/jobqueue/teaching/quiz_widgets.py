"""The quiz as ipywidgets: a thin layer over :class:`jobqueue.teaching.quiz.Quiz`.

All grading is the quiz's own (:meth:`Quiz.grade`); this module only lays out the
questions, reads the answers from the widgets and shows the marks.

Stable hooks for browser tests (CSS classes on the rendered elements):

- ``quiz``: the whole quiz (a VBox);
- ``quiz-question`` on each question's box, plus ``quiz-question-N`` (N from 1),
  ``quiz-id-<question id>`` and ``quiz-kind-<choice|predict|code>``;
- ``quiz-input`` on each question's input: RadioButtons (choice, one radio per option,
  labelled ``a) ...``), a Textarea (predict) or a :class:`CodeBox` (code: its Tab key
  indents instead of moving to the next question);
- ``quiz-feedback`` on each question's feedback, filled in after Submit;
- ``quiz-submit`` (Submit), ``quiz-retry`` (New quiz), and ``quiz-verdict``: empty until
  Submit, then ``PASS: 4 of 5 (you need 4)`` or ``FAIL: ...``; a Submit with nothing
  answered asks for answers there instead (see :data:`NOTHING_ANSWERED`) and locks nothing.

Stored notebooks stay stable, as with :mod:`jobqueue.teaching.widgets`: the plain-text form
is one line that does not depend on the draw, and the view's model id is counted per kernel
(``jobqueue-quiz-1``, ``-2`` ...) instead of random.

Introduced in lesson 17.
"""

from __future__ import annotations

import html
import itertools
import re
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]  # ipywidgets ships no type hints

from jobqueue.teaching.code_box import CodeBox
from jobqueue.teaching.quiz import KIND_LABELS, Grade, Mark, Quiz
from jobqueue.teaching.quiz_bank import LETTERS, Question

_quiz_ids = itertools.count(1)
_CODE_SPAN = re.compile(r"`([^`]+)`")
_PROSE = 'style="line-height: 1.5; margin: 0.4em 0"'
"""Inline style of prose paragraphs: an HTML widget's default line height (28 px) is for one-liners."""
NOTHING_ANSWERED = "Nothing is answered yet: answer the questions above, then press Submit."
"""What Submit shows, in place of a verdict, when no question is answered."""


def prose_html(text: str) -> str:
    """Plain text with `backtick` code spans as HTML: escaped, spans in ``<code>``, paragraphs."""
    paragraphs = [html.escape(p.replace("\n", " ")) for p in text.split("\n\n")]
    return "".join(f"<p {_PROSE}>" + _CODE_SPAN.sub(r"<code>\1</code>", p) + "</p>" for p in paragraphs)


def question_html(number: int, size: int, question: Question) -> str:
    """The head and prompt of one question (with a predict question's snippet) as HTML."""
    head = (
        f"<b>Question {number} of {size}</b> · lesson {question.lesson:02d} · "
        f"{KIND_LABELS[question.kind]} <small>({html.escape(question.id)})</small>"
    )
    snippet = f"<pre>{html.escape(question.code)}</pre>" if question.kind == "predict" else ""
    return head + prose_html(question.prompt) + snippet


def mark_html(mark: Mark) -> str:
    """One answer's verdict, the right answer when it was wrong, and the explanation, as HTML."""
    question = mark.question
    if mark.correct:
        verdict = '<b style="color:#1a7f37">✓ right</b>'
        answer = ""
    else:
        verdict = f'<b style="color:#cf222e">✗ wrong:</b> {html.escape(mark.problem)}'
        label = {"choice": "The answer", "predict": "It prints", "code": "One answer"}[question.kind]
        answer = f"<div>{label}:</div><pre>{html.escape(question.expected())}</pre>"
    return f"<div>{verdict}</div>{answer}{prose_html(question.explanation)}"


class QuizWidget:
    """The quiz as a VBox: a box per question, Submit, New quiz, and the verdict.

    Display it as a cell's last expression (or with ``display``). Its text form, what a
    notebook stores next to the widget, is one short line that does not depend on the
    draw. :attr:`box` is the VBox itself.

    Args:
        quiz: the quiz whose current draw is shown; New quiz calls its :meth:`Quiz.draw`.
    """

    def __init__(self, quiz: Quiz) -> None:
        self.quiz = quiz
        self.last_grade: Grade | None = None
        self.submit = _with_class(widgets.Button(description="Submit", button_style="primary"), "quiz-submit")
        self.retry = _with_class(widgets.Button(description="New quiz"), "quiz-retry")
        self.verdict = _with_class(widgets.HTML(value=""), "quiz-verdict")
        self.box = _with_class(widgets.VBox(model_id=f"jobqueue-quiz-{next(_quiz_ids)}"), "quiz")
        self.inputs: list[Any] = []
        self.feedback: list[Any] = []
        self._parts: list[Any] = []
        self.submit.on_click(lambda _button: self.grade())
        self.retry.on_click(lambda _button: self.new_quiz())
        self._build()

    def answers(self) -> list[str | None]:
        """The answers as they stand in the inputs: a letter (or None) or the typed text."""
        return [None if i.value is None else str(i.value) for i in self.inputs]

    def grade(self) -> Grade | None:
        """What Submit does: grade the answers, show each mark and the verdict, lock the inputs.

        With nothing answered (:meth:`Quiz.unanswered` lists every question), it grades
        nothing, locks nothing, says :data:`NOTHING_ANSWERED` and returns None.
        """
        answers = self.answers()
        if len(self.quiz.unanswered(answers)) == self.quiz.size:
            self.verdict.value = f"<b>{html.escape(NOTHING_ANSWERED)}</b>"
            return None
        grade = self.quiz.grade(answers)
        for output, mark in zip(self.feedback, grade.marks, strict=True):
            output.value = mark_html(mark)
        self.verdict.value = f"<b>{html.escape(grade.verdict())}</b>"
        for widget in [*self.inputs, self.submit]:
            widget.disabled = True
        self.last_grade = grade
        return grade

    def new_quiz(self) -> None:
        """What New quiz does: draw a fresh set and show it, with empty answers."""
        self.quiz.draw()
        self._build()

    def _build(self) -> None:
        for part in self._parts:  # the last draw's widgets: close their comms
            part.close()
        self._parts = []
        size = self.quiz.size
        self.inputs = [_input(q) for q in self.quiz.questions]
        self.feedback = [_with_class(widgets.HTML(value=""), "quiz-feedback") for _ in self.inputs]
        boxes = []
        for number, (question, field, output) in enumerate(
            zip(self.quiz.questions, self.inputs, self.feedback, strict=True), 1
        ):
            prompt = widgets.HTML(value=question_html(number, size, question))
            box = widgets.VBox([prompt, field, output])
            for name in ("quiz-question", f"quiz-question-{number}", f"quiz-id-{question.id}"):
                box.add_class(name)
            box.add_class(f"quiz-kind-{question.kind}")
            boxes.append(box)
            self._parts += [box, prompt, field, output]
        intro = widgets.HTML(
            value=f"<p>Answer all {size} questions, then press <b>Submit</b>. You need "
            f"{self.quiz.pass_mark} right to pass. <b>New quiz</b> draws {size} other questions. "
            "In a code box, Tab indents; press Escape, then Tab, to move on.</p>"
        )
        buttons = widgets.HBox([self.submit, self.retry])
        self._parts += [intro, buttons]
        self.submit.disabled = False
        self.verdict.value = ""
        self.last_grade = None
        self.box.children = [intro, *boxes, buttons, self.verdict]

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = self.box._repr_mimebundle_(**kwargs)
        data["text/plain"] = repr(self)
        return data

    def __repr__(self) -> str:
        return f"QuizWidget({self.quiz.size} questions, {self.quiz.pass_mark} right to pass)"


def _with_class(widget: Any, name: str) -> Any:
    widget.add_class(name)
    return widget


def _input(question: Question) -> Any:
    """RadioButtons (no option chosen) for a choice question, a Textarea for predict, else a CodeBox.

    Width ``auto``, not ``100%``: the box then fills its question's column *inside* the
    widgets' 2 px margins (``100%`` plus the margins was 4 px too wide, and clipped).
    """
    layout = widgets.Layout(width="auto")
    if question.kind == "choice":
        options = [
            (f"{letter}) {text}", letter) for letter, text in zip(LETTERS, question.choices, strict=False)
        ]
        field = widgets.RadioButtons(options=options, index=None, layout=layout)
    elif question.kind == "predict":
        field = widgets.Textarea(value="", placeholder="exactly what it prints", rows=4, layout=layout)
    else:
        field = CodeBox(value=question.starter, rows=question.starter.count("\n") + 4)
    return _with_class(field, "quiz-input")
