"""The question bank of lesson 17 and the quiz that draws from it.

Every predict answer is what its snippet really prints; every code question's reference
passes its check while the starter and a plausible wrong answer fail it; the quiz draws,
grades and redraws as promised; a malformed bank is rejected with the id and field named.
"""

import asyncio
import random
import re
import tomllib
from collections import Counter
from importlib import resources

import pytest

from jobqueue import InvalidSettingError
from jobqueue.teaching.code_box import CodeBox
from jobqueue.teaching.quiz import Quiz, is_answered, mark, run_async, run_code, run_snippet
from jobqueue.teaching.quiz_bank import (
    KINDS,
    LETTERS,
    BankError,
    Question,
    load_bank,
    normalize_output,
    parse_bank,
)
from jobqueue.teaching.quiz_widgets import NOTHING_ANSWERED, QuizWidget

BANK = load_bank()
PREDICT = [q for q in BANK if q.kind == "predict"]
CODE = [q for q in BANK if q.kind == "code"]


def ids(question: Question) -> str:
    return question.id


def right(question: Question) -> str:
    return question.answer


def wrong(question: Question) -> str:
    if question.kind == "choice":
        return next(letter for letter in LETTERS if letter != question.answer)
    if question.kind == "predict":
        return "something else"
    return question.wrong


# -- the bank ----------------------------------------------------------------------


def test_bank_ships_with_the_package_and_has_enough_questions_of_every_kind() -> None:
    text = resources.files("jobqueue.teaching").joinpath("questions.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)["question"]
    assert len(raw) == len(BANK) >= 30
    assert len({entry["id"] for entry in raw}) == len(raw), "ids are unique"
    kinds = Counter(q.kind for q in BANK)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 8, kinds
    lessons = Counter(q.lesson for q in BANK)
    assert all(lessons[n] >= 2 for n in range(12)), f"every lesson 00-11 has questions: {lessons}"


def test_the_later_lessons_have_their_share_of_the_bank() -> None:
    assert len(BANK) >= 75
    for lesson in (12, 13, 14, 15, 16):
        kinds = Counter(q.kind for q in BANK if q.lesson == lesson)
        assert sum(kinds.values()) >= 6 and set(kinds) == set(KINDS), f"lesson {lesson}: {kinds}"


@pytest.mark.parametrize("question", BANK, ids=ids)
def test_every_question_explains_its_answer(question: Question) -> None:
    assert question.explanation.strip() and question.prompt.strip()


@pytest.mark.parametrize("question", PREDICT, ids=ids)
def test_predict_answer_is_exactly_what_the_snippet_prints(question: Question) -> None:
    assert normalize_output(run_snippet(question.code)) == question.answer


@pytest.mark.parametrize("question", CODE, ids=ids)
def test_code_reference_passes_and_starter_and_wrong_answer_fail(question: Question) -> None:
    assert run_code(question.answer, question.check) is None
    assert run_code(question.starter, question.check) is not None
    problem = run_code(question.wrong, question.check)
    assert problem is not None and not problem.startswith("checking your code raised"), (
        f"the wrong answer should fail an assertion with a helpful message, got {problem!r}"
    )


# -- grading one answer --------------------------------------------------------------


def by_id(question_id: str) -> Question:
    return next(q for q in BANK if q.id == question_id)


def test_choice_accepts_the_letter_in_any_case_or_the_option_text() -> None:
    q = by_id("l02-equal-jitter-range")
    assert q.answer == "d"
    for given in ("d", "D", " d) ", "2 to 4 s"):
        assert mark(q, given).correct, given
    assert mark(q, "a").problem == "you chose a"
    assert mark(q, "z").problem == "answer with one of a, b, c, d"
    assert mark(q, None).problem == mark(q, " ").problem == "no answer"


def test_predict_ignores_trailing_whitespace_but_not_content() -> None:
    q = by_id("l02-cap")
    assert mark(q, "1 2 4 4 4   \r\n2\n\n").correct
    assert not mark(q, "1 2 4 8 16\n2").correct


def test_predict_grades_numbers_by_value_where_the_printed_form_is_incidental() -> None:
    claim = by_id("l03-claim")  # prints "1 30.0" on its second line
    assert claim.answer.splitlines()[1] == "1 30.0"
    assert mark(claim, claim.answer.replace("1 30.0", "1 30")).correct
    assert not mark(claim, claim.answer.replace("1 30.0", "1 31")).correct
    dead = by_id("l05-dead-after-last")  # "retry 1.0" and "[('pick-1001', 2)]"
    assert mark(dead, dead.answer.replace("retry 1.0", "retry 1").replace("2)]", "2.0)]")).correct
    assert not mark(dead, dead.answer.replace("retry 1.0", "retry 2")).correct
    assert not mark(dead, dead.answer.replace("pick-1001", "pick-1001.0")).correct  # part of an id: text


def test_code_reports_what_went_wrong() -> None:
    q = by_id("l02-retry-times")
    assert "not valid Python" in mark(q, "def retry_times(:").problem
    assert mark(q, "raise RuntimeError('boom')").problem == "your code raised RuntimeError: boom"
    assert "NameError" in mark(q, "x = 1").problem
    assert mark(q, q.starter).problem.startswith("not answered yet")
    assert mark(q, "print('hi')\n" + q.answer).correct  # what the code prints is discarded


def test_run_async_works_inside_a_running_event_loop() -> None:
    async def inner() -> int:
        await asyncio.sleep(0)
        return 7

    async def outer() -> int:  # like a notebook cell: a loop is already running
        return run_async(inner())

    assert asyncio.run(outer()) == 7


# -- the quiz ------------------------------------------------------------------------


def test_a_seeded_quiz_draws_five_distinct_questions_of_every_kind_repeatably() -> None:
    quiz = Quiz(rng=random.Random(12))
    drawn = [q.id for q in quiz.questions]
    assert len(drawn) == len(set(drawn)) == 5
    assert {q.kind for q in quiz.questions} == set(KINDS)
    assert [q.lesson for q in quiz.questions] == sorted(q.lesson for q in quiz.questions)
    assert [q.id for q in Quiz(rng=random.Random(12)).questions] == drawn


def test_four_right_answers_pass_and_three_fail() -> None:
    quiz = Quiz(rng=random.Random(3))
    qs = quiz.questions
    four = quiz.grade([right(qs[0]), right(qs[1]), right(qs[2]), right(qs[3]), wrong(qs[4])])
    assert (four.correct, four.passed, four.verdict()) == (4, True, "PASS: 4 of 5 (you need 4)")
    three = quiz.grade({1: right(qs[0]), 3: right(qs[2]), 5: right(qs[4])})
    assert (three.correct, three.passed, three.verdict()) == (3, False, "FAIL: 3 of 5 (you need 4)")
    assert [m.correct for m in three.marks] == [True, False, True, False, True]


def test_answer_prints_each_mark_with_its_explanation_and_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quiz = Quiz(rng=random.Random(3))
    qs = quiz.questions
    grade = quiz.answer([wrong(qs[0]), *map(right, qs[1:])])
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS: 4 of 5 (you need 4)")
    assert repr(grade) == "Grade(PASS: 4 of 5 (you need 4))"
    assert out.count("✓ right") == 4 and out.count("✗ wrong") == 1
    for q in qs:
        assert q.id in out and q.explanation.split()[0] in out


def test_show_numbers_the_questions(capsys: pytest.CaptureFixture[str]) -> None:
    quiz = Quiz(rng=random.Random(3))
    quiz.show()
    out = capsys.readouterr().out
    for number, q in enumerate(quiz.questions, 1):
        assert f"Question {number} of 5 · lesson {q.lesson:02d}" in out and q.id in out


def test_retry_draws_a_fresh_set_every_time(capsys: pytest.CaptureFixture[str]) -> None:
    quiz = Quiz(rng=random.Random(12))
    seen = [q.id for q in quiz.questions]
    for _ in range(5):
        before = {q.id for q in quiz.questions}
        quiz.retry()
        after = {q.id for q in quiz.questions}
        assert len(after) == 5 and not before & after
        seen += after
    assert "Question 1 of 5" in capsys.readouterr().out
    assert len(set(seen)) > 20, "retries wander over the bank"


@pytest.mark.parametrize("lesson", [12, 13, 14, 15, 16])
def test_practice_by_lesson_draws_that_lesson_only_and_every_kind(lesson: int) -> None:
    quiz = Quiz(rng=random.Random(5), lessons=[lesson])
    assert {q.lesson for q in quiz.questions} == {lesson}
    assert len({q.id for q in quiz.questions}) == 5 and {q.kind for q in quiz.questions} == set(KINDS)
    retried = {q.id for q in quiz.draw()}
    assert {q.lesson for q in quiz.questions} == {lesson} and len(retried) == 5


def test_practice_over_several_lessons_and_bad_lessons() -> None:
    quiz = Quiz(rng=random.Random(5), lessons=range(12, 16))
    assert {q.lesson for q in quiz.questions} <= {12, 13, 14, 15}
    assert len(quiz.bank) == sum(12 <= q.lesson <= 15 for q in BANK)
    for bad in ([], [17], [3, 99]):
        with pytest.raises(InvalidSettingError, match=re.escape(f"(0 to 16), got {sorted(bad)!r}")):
            Quiz(rng=random.Random(1), lessons=bad)
    with pytest.raises(InvalidSettingError, match="size"):
        Quiz(rng=random.Random(1), lessons=[0])  # 2 questions on lesson 00: too few for a draw of 5


def test_a_small_bank_repeats_only_what_it_must() -> None:
    quiz = Quiz(BANK[:7], rng=random.Random(1))
    first = {q.id for q in quiz.questions}
    second = {q.id for q in quiz.draw()}
    assert len(first & second) == 3, "7 questions: the 2 not drawn last time, then 3 again"


def test_bad_settings_and_answers_are_refused() -> None:
    with pytest.raises(InvalidSettingError, match="pass_mark"):
        Quiz(rng=random.Random(1), pass_mark=6)
    with pytest.raises(InvalidSettingError, match="size"):
        Quiz(BANK[:3], rng=random.Random(1))
    quiz = Quiz(rng=random.Random(1))
    with pytest.raises(InvalidSettingError, match=r"from 1 to 5, got \[0, 6\]"):
        quiz.grade({0: "a", 6: "b"})
    with pytest.raises(InvalidSettingError, match="5 answers"):
        quiz.grade(["a", "b"])


# -- a malformed bank is rejected ------------------------------------------------------

GOOD = """
[[question]]
id = "q-one"
lesson = 2
kind = "choice"
prompt = "Pick one."
choices = ["this", "that"]
answer = "a"
explanation = "Because."
"""


def test_a_good_entry_parses() -> None:
    (q,) = parse_bank(GOOD)
    assert (q.id, q.lesson, q.kind, q.choices, q.answer, q.expected()) == (
        "q-one",
        2,
        "choice",
        ("this", "that"),
        "a",
        "a) this",
    )


F = "question 'q-one': field "


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('explanation = "Because."\n', "", F + "'explanation' is missing"),
        ('explanation = "Because."', 'explanation = "  "', F + "'explanation' must be"),
        ('answer = "a"', 'answer = "c"', F + "'answer' must be one of a, b, got 'c'"),
        ('kind = "choice"', 'kind = "essay"', F + "'kind' must be one of choice, predict"),
        ("lesson = 2", "lesson = 17", F + "'lesson' must be a lesson number"),
        ("lesson = 2", "lesson = true", F + "'lesson'"),
        ('choices = ["this", "that"]', 'choices = ["this"]', F + "'choices' must be a list"),
        ('choices = ["this", "that"]', 'choices = ["this", "this"]', F + "'choices' must be"),
        ('prompt = "Pick one."', 'prompt = "Pick one."\nexplanaton = "typo"', F + "'explanaton'"),
        ('id = "q-one"', 'id = "Q One"', "question 'Q One': field 'id' must be lower-case"),
        ('id = "q-one"\n', "", "question #1 (no id): field 'id' is missing"),
        ("[[question]]", "[[questions]]", "unknown top-level keys ['questions']"),
        ('answer = "a"', "answer = a", "not valid TOML"),
    ],
)
def test_a_bad_entry_is_rejected_naming_its_id_and_field(old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(BankError) as caught:
        parse_bank(GOOD.replace(old, new, 1))
    assert message in str(caught.value)


def test_bad_code_and_duplicate_ids_are_rejected() -> None:
    predict = '[[question]]\nid = "p"\nlesson = 1\nkind = "predict"\nprompt = "?"\nexplanation = "."\n'
    with pytest.raises(BankError, match="question 'p': field 'code' is not valid Python"):
        parse_bank(predict + 'code = "print(1"\nanswer = "1"\n')
    with pytest.raises(BankError, match="question 'p': field 'answer' is missing"):
        parse_bank(predict + 'code = "print(1)"\n')
    code = '[[question]]\nid = "c"\nlesson = 1\nkind = "code"\nprompt = "?"\nexplanation = "."\n'
    with pytest.raises(BankError, match="question 'c': field 'check' is missing"):
        parse_bank(code + 'starter = "x = 1"\nanswer = "x = 2"\nwrong = "x = 3"\n')
    with pytest.raises(BankError, match=F + "'id' is used by another question too"):
        parse_bank(GOOD + GOOD)


# -- the widget front end ----------------------------------------------------------------


def test_the_widget_grades_with_the_same_logic_and_redraws() -> None:
    quiz = Quiz(rng=random.Random(3))
    widget = QuizWidget(quiz)
    assert repr(widget) == "QuizWidget(5 questions, 4 right to pass)"
    bundle = widget._repr_mimebundle_()
    assert bundle["text/plain"] == repr(widget)
    model_id = bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert re.fullmatch(r"jobqueue-quiz-\d+", model_id), "counted, so a re-run stores the same id"
    boxes = widget.box.children[1:-2]
    for number, (box, q) in enumerate(zip(boxes, quiz.questions, strict=True), 1):
        assert {"quiz-question", f"quiz-question-{number}", f"quiz-id-{q.id}", f"quiz-kind-{q.kind}"} <= set(
            box._dom_classes
        )
    first = quiz.questions[0]
    blank = first.starter if first.kind == "code" else ""  # a code answer starts from the starter
    assert widget.verdict.value == "" and widget.answers()[0] in (None, blank)

    for field, q in zip(widget.inputs, quiz.questions[:4], strict=False):
        field.value = right(q)
    widget.submit.click()
    assert widget.verdict.value == "<b>PASS: 4 of 5 (you need 4)</b>"
    assert "quiz-verdict" in widget.verdict._dom_classes and widget.submit.disabled
    assert "✗ wrong" in widget.feedback[4].value and "✓ right" in widget.feedback[0].value

    before = {q.id for q in quiz.questions}
    parts = len(widget._parts)
    widget.retry.click()
    assert len(widget._parts) == parts, "the last draw's widgets are dropped"
    assert not before & {q.id for q in quiz.questions}
    assert widget.verdict.value == "" and not widget.submit.disabled
    assert "quiz-retry" in widget.retry._dom_classes and "quiz-submit" in widget.submit._dom_classes


def test_an_answer_is_missing_blank_or_an_untouched_starter() -> None:
    quiz = Quiz(rng=random.Random(3))
    code = next(q for q in quiz.questions if q.kind == "code")
    choice = next(q for q in quiz.questions if q.kind == "choice")
    assert not is_answered(choice, None) and not is_answered(choice, "  \n")
    assert not is_answered(code, code.starter) and not is_answered(code, "\n" + code.starter + "  \n")
    assert is_answered(code, code.starter + "    return []\n") and is_answered(choice, "b")
    assert quiz.unanswered([None] * 5) == [1, 2, 3, 4, 5]
    assert quiz.unanswered({2: "b"}) == [1, 3, 4, 5]
    with pytest.raises(InvalidSettingError):
        quiz.unanswered({6: "a"})


def test_an_empty_submit_asks_for_answers_and_locks_nothing() -> None:
    quiz = Quiz(rng=random.Random(3))
    widget = QuizWidget(quiz)
    widget.submit.click()  # code boxes still hold their starters: nothing is answered
    assert widget.verdict.value == f"<b>{NOTHING_ANSWERED}</b>" and widget.last_grade is None
    assert not widget.submit.disabled and not any(field.disabled for field in widget.inputs)
    assert all(output.value == "" for output in widget.feedback)

    widget.inputs[0].value = right(quiz.questions[0])  # one answer is enough to be graded
    widget.submit.click()
    assert widget.verdict.value == "<b>FAIL: 1 of 5 (you need 4)</b>" and widget.submit.disabled


def test_code_answers_go_in_a_code_box_and_every_box_fits_its_question() -> None:
    widget = QuizWidget(Quiz(rng=random.Random(3)))
    for field, q in zip(widget.inputs, widget.quiz.questions, strict=True):
        assert isinstance(field, CodeBox) == (q.kind == "code")
        assert "quiz-input" in field._dom_classes
        assert field.layout.width in (None, "auto"), "100% plus the widget margins overflows by 4 px"
    box = next(f for f in widget.inputs if isinstance(f, CodeBox))
    assert box.value.startswith(next(q for q in widget.quiz.questions if q.kind == "code").starter)
    assert "Tab" in CodeBox._esm and "preventDefault" in CodeBox._esm
