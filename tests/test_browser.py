"""The course in a real browser: JupyterLab in headless Chromium, driven by Playwright.

Runs lesson 02 (the backoff picture appears; the explorer's summary follows its controls)
and takes the lesson 17 quiz to a verdict (an empty Submit first asks for answers, every
answer box fits its question, Tab indents in a code box), on a throwaway copy of the
course (test_browser_fit.py checks that no lesson scrolls sideways). Screenshots
land in screenshots/ (git-ignored). Needs /usr/bin/chromium (or $JOBQUEUE_CHROMIUM) and
the `playwright` package; without either the tests skip and say which piece is missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser_support import (
    LabServer,
    announce,
    answer_quiz_questions,
    browser_page,
    change_dropdown,
    choose_menu,
    current_notebook,
    lab_server,
    missing_piece,
    nudge_slider,
    open_notebook,
    run_all_cells,
    screenshot,
    screenshot_on_failure,
    strip_outputs,
    wait_text_changes,
    widget_text,
)

from jobqueue.teaching.notebooks import KERNELSPEC, LANGUAGE_INFO
from jobqueue.teaching.quiz_widgets import NOTHING_ANSWERED

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parent.parent
LESSON_02 = "lessons/02_backoff.ipynb"
QUIZ_LESSON = "lessons/17_test_yourself.ipynb"
VERDICT = re.compile(r"\b(PASS|FAIL)\b\D*\d+\s*(of|/)\s*\d+")


TEACHING = ROOT / "src" / "jobqueue" / "teaching"
TEACHING_IMPORT = re.compile(r"jobqueue\.teaching\.(\w+)|from jobqueue\.teaching import ([\w ,]+)")


def shows_marker(relpath: str, marker: str) -> bool:
    """Whether the notebook, or a jobqueue.teaching module it imports, mentions `marker`.

    A widget's DOM class (say "backoff-summary") is set either in the notebook itself or in
    the teaching module that builds the widget.
    """
    path = ROOT / relpath
    if not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    if marker in text:
        return True
    modules = {
        name.strip()
        for match in TEACHING_IMPORT.findall(text)
        for group in match
        for name in group.split(",")
    }
    return any(
        (TEACHING / f"{name}.py").exists() and marker in (TEACHING / f"{name}.py").read_text(encoding="utf-8")
        for name in modules
        if name
    )


needs_explorer = pytest.mark.skipif(
    not shows_marker(LESSON_02, "backoff-summary"),
    reason=f'{LESSON_02} shows no backoff explorer yet (no "backoff-summary" widget)',
)
needs_quiz = pytest.mark.skipif(
    not shows_marker(QUIZ_LESSON, "quiz-verdict"),
    reason=f'{QUIZ_LESSON} does not exist yet or shows no quiz (no "quiz-verdict" widget)',
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    reason = missing_piece()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("lab")
    # Stored outputs are stripped from the copies: what the page shows must come from this run.
    with lab_server(ROOT, workdir, strip=(LESSON_02, QUIZ_LESSON)) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: LabServer) -> Iterator[Page]:
    """One browser page for the module: JupyterLab loads once, notebooks open in its tabs."""
    with browser_page() as page:
        yield page


@pytest.fixture(scope="module")
def lesson02(page: Page, lab: LabServer) -> Page:
    """Lesson 02 open in the current tab, every cell run once (shared by the lesson 02 tests)."""
    with screenshot_on_failure(page, "lesson02_run_all"):
        open_notebook(page, lab, LESSON_02)
        run_all_cells(page)
    return page


def test_lesson02_runs_and_shows_the_backoff_picture(
    lesson02: Page, capsys: pytest.CaptureFixture[str]
) -> None:
    with screenshot_on_failure(lesson02, "lesson02_picture"):
        announce(capsys, see_the_picture(lesson02))


def see_the_picture(page: Page) -> str:
    """The backoff picture is an image output that the browser has loaded and shows."""
    picture = current_notebook(page).locator('.jp-OutputArea-output[data-mime-type="image/png"] img').first
    picture.scroll_into_view_if_needed()
    picture.wait_for(state="visible")
    width = picture.evaluate("img => img.complete ? img.naturalWidth : 0")
    assert width > 100, f"the backoff picture did not load (natural width {width} px)"
    return f"screenshot: {screenshot(page, 'lesson02_backoff_picture')}"


@needs_explorer
def test_lesson02_explorer_summary_follows_its_controls(
    lesson02: Page, capsys: pytest.CaptureFixture[str]
) -> None:
    with screenshot_on_failure(lesson02, "lesson02_explorer"):
        announce(capsys, move_the_explorer(lesson02))


def move_the_explorer(page: Page) -> str:
    """Nudge the base_s slider, then change the strategy; the summary must change each time."""
    notebook = current_notebook(page)
    summary = notebook.locator(".backoff-summary").first
    summary.scroll_into_view_if_needed()
    summary.wait_for(state="visible")
    # The explorer's controls: in the cell that shows the summary (else anywhere in the notebook).
    cell = notebook.locator(".jp-CodeCell").filter(has=page.locator(".backoff-summary")).first
    scope = cell if cell.locator(".widget-slider").count() else notebook
    before = widget_text(summary)
    assert before, "the explorer's summary is empty"
    # Its picture, if it has one (an <img> under "backoff-picture"), must be redrawn too.
    picture = scope.locator(".backoff-picture img, img.backoff-picture").first
    picture_before = picture.get_attribute("src") if picture.count() else None

    if picture_before is not None:  # drawn at least as wide as it is shown: scaled down, never up
        natural, shown = picture.evaluate("img => [img.naturalWidth, img.clientWidth]")
        assert natural >= shown, f"the explorer's picture is stretched from {natural} to {shown} px"
    base_s = nudge_slider(scope, "base_s")
    after_slider = wait_text_changes(summary, before)
    if picture_before is not None:
        page.wait_for_function(
            "([img, old]) => img.getAttribute('src') !== old", arg=[picture.element_handle(), picture_before]
        )
    summary.scroll_into_view_if_needed()
    shot = screenshot(page, "lesson02_explorer_after_base_s")
    strategy = change_dropdown(scope, "strategy")
    after_dropdown = wait_text_changes(summary, after_slider)
    redrawn = "and its picture " if picture_before is not None else ""
    return (
        f"explorer summary {redrawn}changed: {before!r}\n  base_s -> {base_s}: {after_slider!r}\n"
        f"  strategy -> {strategy}: {after_dropdown!r}\n  screenshot: {shot}"
    )


@needs_quiz
def test_the_quiz_reaches_a_verdict(page: Page, lab: LabServer, capsys: pytest.CaptureFixture[str]) -> None:
    with screenshot_on_failure(page, "quiz"):
        announce(capsys, take_the_quiz(page, lab))


def take_the_quiz(page: Page, lab: LabServer) -> str:
    """Answer every question, submit, and wait for a PASS or FAIL verdict with a count."""
    open_notebook(page, lab, QUIZ_LESSON)
    run_all_cells(page)
    # The first quiz on the page: the code cell that shows the first Submit button.
    quiz = current_notebook(page).locator(".jp-CodeCell").filter(has=page.locator(".quiz-submit")).first
    quiz.wait_for(state="attached")
    checks = [submit_nothing(quiz), boxes_fit(quiz), tab_indents(quiz)]
    answered = answer_quiz_questions(quiz)
    assert answered > 0, "the quiz shows no .quiz-question"

    submit = quiz.locator(".quiz-submit").first
    submit.scroll_into_view_if_needed()
    submit.click()
    verdict = quiz.locator(".quiz-verdict").first
    verdict.wait_for(state="attached")  # an empty HTML widget has no height: not "visible" yet
    page.wait_for_function(
        "([el, pattern]) => new RegExp(pattern).test(el.innerText)",
        arg=[verdict.element_handle(), VERDICT.pattern],
    )
    text = widget_text(verdict)
    assert VERDICT.search(text), text
    verdict.scroll_into_view_if_needed()
    shot = screenshot(page, "quiz_verdict")
    return "\n  ".join(
        [*checks, f"quiz verdict after answering {answered} questions: {text!r}", f"screenshot: {shot}"]
    )


def submit_nothing(quiz: Locator) -> str:
    """Submit with nothing answered asks for answers, and leaves Submit and the boxes usable."""
    submit = quiz.locator(".quiz-submit").first
    submit.scroll_into_view_if_needed()
    submit.click()
    verdict = quiz.locator(".quiz-verdict").first
    quiz.page.wait_for_function(
        "([el, text]) => el.innerText.includes(text)", arg=[verdict.element_handle(), NOTHING_ANSWERED]
    )
    assert not VERDICT.search(widget_text(verdict)), widget_text(verdict)
    assert submit.is_enabled(), "an empty Submit locked the quiz"
    assert quiz.locator(".quiz-input textarea:disabled, .quiz-input input:disabled").count() == 0
    shot = screenshot(quiz.page, "quiz_empty_submit")
    return f"empty Submit says {widget_text(verdict)!r}, nothing locked; screenshot: {shot}"


def boxes_fit(quiz: Locator) -> str:
    """Every answer box lies within its question, neither clipped nor wider than the column."""
    spills = quiz.locator(".quiz-question").evaluate_all(
        """questions => questions.flatMap((q, i) => [...q.querySelectorAll('.quiz-input')].map(box => {
             const inner = box.querySelector('textarea') ?? box;
             const b = inner.getBoundingClientRect(), c = q.getBoundingClientRect();
             return [i + 1, Math.round(b.left - c.left), Math.round(c.right - b.right),
                     inner.scrollWidth - inner.clientWidth, q.scrollWidth - q.clientWidth];
           })).filter(([, left, right, over, qOver]) => left < 0 || right < 0 || qOver > 0)"""
    )
    assert not spills, (
        f"answer boxes out of their question ([question, left, right, ..., overflow]): {spills}"
    )
    return "every answer box fits inside its question"


def tab_indents(quiz: Locator) -> str:
    """Tab in a code answer box indents there and keeps the focus; Escape, then Tab, moves on."""
    box = quiz.locator(".quiz-kind-code .quiz-input textarea").first
    box.scroll_into_view_if_needed()
    before = box.input_value()
    box.click()
    box.press("Control+End")
    box.press("Enter")
    box.press("Tab")
    box.type("return []")
    after = box.input_value()
    assert after == before + "\n    return []", f"Tab did not indent in the code box: {after!r}"
    assert box.evaluate("el => document.activeElement === el"), "Tab moved the focus out of the code box"
    box.press("Shift+Tab")
    assert box.input_value() == before + "\nreturn []", box.input_value()
    box.press("Control+a")  # several lines selected: Tab indents each, Shift+Tab takes it back
    box.press("Tab")
    indented = "\n".join("    " + line if line else line for line in (before + "\nreturn []").split("\n"))
    assert box.input_value() == indented, box.input_value()
    box.press("Shift+Tab")
    assert box.input_value() == before + "\nreturn []", box.input_value()
    box.press("Escape")  # then Tab leaves the box, so the keyboard is never trapped in it
    quiz.page.keyboard.press("Tab")
    assert box.evaluate("el => document.activeElement !== el"), "Escape, Tab did not leave the code box"
    assert box.input_value() == before + "\nreturn []", "Escape, Tab changed the code"
    shot = screenshot(quiz.page, "quiz_tab_indents")
    return f"Tab indents in a code box and keeps the focus; screenshot: {shot}"


EXERCISE_02 = "exercises/02_backoff.ipynb"
WRONG_JITTER = (
    "def decorrelated_s(previous_s, *, backoff, random):\n"
    "    print('debug: after', previous_s)\n"
    "    return min(backoff.cap_s, 3 * previous_s)  # forgets random()\n"
    "def decorrelated_schedule_s(retries, *, backoff, random):\n"
    "    delays = [decorrelated_s(backoff.base_s, backoff=backoff, random=random)]\n"
    "    while len(delays) < retries:\n"
    "        delays.append(decorrelated_s(delays[-1], backoff=backoff, random=random))\n"
    "    return delays"
)


def test_exercise_with_a_wrong_answer_shows_every_verdict_and_the_summary(
    page: Page, lab: LabServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run All goes through every check of a wrong, printing answer: ✓ or ✗ each, then a count."""
    target = lab.root / EXERCISE_02
    notebook = json.loads(target.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if "answer" in cell["metadata"].get("tags", []):
            cell["source"] = WRONG_JITTER
    target.write_text(json.dumps(notebook), encoding="utf-8")
    strip_outputs(target)
    with screenshot_on_failure(page, "exercise02_wrong"):
        open_notebook(page, lab, EXERCISE_02)
        run_all_cells(page)  # fails if any cell raises
        outputs = current_notebook(page).locator(".jp-OutputArea-output")
        texts = [text.strip() for text in outputs.all_inner_texts()]
        verdicts = [text for text in texts if text.startswith(("✓", "✗"))]
        assert len(verdicts) == 8, texts  # every check, those of the unanswered herd cell too
        assert sum(text.startswith("✗") for text in verdicts) == 7, verdicts
        assert "1 of 8 checks pass" in texts, texts
        assert not any("Traceback" in text for text in texts), texts
        summary = outputs.filter(has_text="checks pass").first
        summary.scroll_into_view_if_needed()
        announce(capsys, f"screenshot: {screenshot(page, 'exercise02_wrong_answer_verdicts')}")
        # Saving after Run All writes the metadata the committed notebooks already carry.
        choose_menu(page, "File", "docmanager:save")
        page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.lm-mod-current.jp-mod-dirty')")
        saved = json.loads(target.read_text(encoding="utf-8"))
        assert saved["metadata"] == {"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO}
