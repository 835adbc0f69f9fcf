"""Helpers for the real-browser test: a throwaway JupyterLab server and notebook actions.

The test drives JupyterLab 4 in headless Chromium through Playwright. Nothing here installs
anything: `missing_piece` names what is absent so the test can skip with a clear reason.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, Playwright
    from pytest import CaptureFixture

CHROMIUM_ENV = "JOBQUEUE_CHROMIUM"  # override the browser path; a missing path makes the test skip
DEFAULT_CHROMIUM = "/usr/bin/chromium"
# As root in a closed network, Chromium's own connections are refused without the
# background-networking flags; Playwright's bundled browsers are never downloaded.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COURSE_DIRS = ("lessons", "exercises", "solutions")
# Hang guards, not deadlines: the browser waits for what it needs to see (a cell's output,
# a kernel gone idle), and these only end a wait that would never end. A loaded machine
# (pytest-xdist on 2 cores beside other notebooks' kernels) takes seconds, never minutes.
SERVER_START_S = 300.0  # seconds to wait for JupyterLab to answer
STEP_MS = 120_000  # milliseconds for one browser step (open, run all, re-render)

# JupyterLab user settings for the throwaway server: every cell in the DOM (no windowing, so
# selectors see the whole notebook), no news or update checks (no network, no toasts), no
# autosave (the copy is thrown away anyway).
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {
        "checkForUpdates": False,
        "fetchNews": "false",
        "doNotDisturbMode": True,
    },
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}


def chromium_path() -> Path:
    """The Chromium executable the test launches (``$JOBQUEUE_CHROMIUM`` or /usr/bin/chromium)."""
    return Path(os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM)


def missing_piece() -> str | None:
    """Why the browser test cannot run here, or None when Chromium and Playwright are present."""
    browser = chromium_path()
    if not (browser.is_file() and os.access(browser, os.X_OK)):
        return (
            f"no Chromium executable at {browser} (install Debian's `chromium` package, "
            f"or point ${CHROMIUM_ENV} at one)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package `playwright` is not installed (pip install 'playwright>=1.40,<2')"
    return None


def launch_chromium(playwright: Playwright) -> Browser:
    """Start headless Chromium from `chromium_path` (Playwright's own browsers are never used)."""
    return playwright.chromium.launch(executable_path=str(chromium_path()), args=CHROMIUM_ARGS)


@contextmanager
def browser_page() -> Iterator[Page]:
    """A page of headless Chromium, 1400 x 1000, each step under the STEP_MS hang guard."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})
            context.set_default_timeout(STEP_MS)
            yield context.new_page()
        finally:
            chromium.close()


def strip_outputs(notebook: Path) -> None:
    """Remove stored outputs and execution counts, so whatever shows up later came from a run."""
    data = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    data["metadata"].pop("widgets", None)
    notebook.write_text(json.dumps(data, indent=1), encoding="utf-8")


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LabServer:
    """A running JupyterLab: where it listens, its token, and the course copy it serves."""

    url: str  # e.g. http://127.0.0.1:8891
    token: str
    root: Path  # the tmp copy of the course
    log: Path

    def notebook_url(self, relpath: str) -> str:
        """The address that opens `relpath` (relative to the course copy) in JupyterLab.

        Each notebook gets a workspace of its own, so JupyterLab does not restore the
        notebooks opened before it next to it.
        """
        workspace = re.sub(r"[^A-Za-z0-9_-]", "-", Path(relpath).stem)
        return f"{self.url}/lab/workspaces/{workspace}/tree/{relpath}?token={self.token}"

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log, for failure messages."""
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes], server: LabServer) -> None:
    """Ask the server to shut down, which stops its kernels; kill it if it won't.

    A kernel runs in a session of its own, but it watches its parent (ipykernel's parent
    poller) and exits by itself should the server die without stopping it.
    """
    if proc.poll() is not None:
        return
    request = urllib.request.Request(
        f"{server.url}/api/shutdown", method="POST", headers={"Authorization": f"token {server.token}"}
    )
    try:
        urllib.request.urlopen(request, timeout=5).close()
    except (urllib.error.URLError, OSError):
        proc.terminate()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
    if proc.poll() is None:
        # Still running, so its id is still its own: the server leads a session started for
        # it, and this reaches the server and nothing else.
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextmanager
def lab_server(
    course: Path, workdir: Path, strip: Iterable[str] = (), options: Iterable[str] = ()
) -> Iterator[LabServer]:
    """Copy the course into `workdir`, serve it with JupyterLab from this venv, stop it on exit.

    The notebooks named in `strip` (paths relative to the course) lose their stored outputs
    in the copy, before the server starts. `options` are added to JupyterLab's command line.
    """
    root = workdir / "course"
    for name in COURSE_DIRS:
        shutil.copytree(course / name, root / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for relpath in strip:
        if (root / relpath).exists():
            strip_outputs(root / relpath)
    settings = workdir / "lab-settings"
    for plugin, values in LAB_SETTINGS.items():
        target = settings / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), encoding="utf-8")
    port, token = free_port(), secrets.token_hex(16)
    server = LabServer(f"http://127.0.0.1:{port}", token, root, workdir / "jupyterlab.log")
    env = dict(os.environ)
    env.update(
        JUPYTER_RUNTIME_DIR=str(workdir / "runtime"),
        JUPYTER_CONFIG_DIR=str(workdir / "config"),
        IPYTHONDIR=str(workdir / "ipython"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.allow_root=True",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
        *options,
    ]
    with server.log.open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _answers(f"{server.url}/api/status?token={token}"):
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"hang guard: JupyterLab did not answer within {SERVER_START_S:g} s:\n{server.log_tail()}"
                )
            time.sleep(0.2)
        yield server
    finally:
        _stop(proc, server)


# --- reporting ----------------------------------------------------------------------------

SHOTS = Path(__file__).resolve().parent.parent / "screenshots"


def screenshot(page: Page, name: str) -> Path:
    """Save a picture of the page as screenshots/<name>.png (git-ignored); its path."""
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def announce(capsys: CaptureFixture[str], message: str) -> None:
    """Print past pytest's output capture, so screenshot paths show without -s."""
    with capsys.disabled():
        print(f"\n  {message}")


@contextmanager
def screenshot_on_failure(page: Page, name: str) -> Iterator[None]:
    """Save a screenshot if the block fails; a Playwright timeout is reported as a hang guard."""
    from playwright.sync_api import TimeoutError as StepTimeout

    try:
        yield
    except Exception as error:
        print(f"screenshot of the failure: {screenshot(page, f'{name}_FAILED')}")
        if isinstance(error, StepTimeout):  # STEP_MS is a hang guard: say so
            raise AssertionError(
                f"hang guard: a browser step took over {STEP_MS / 1000:g} s: {error}"
            ) from error
        raise


# --- notebook actions in the page ----------------------------------------------------------

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in the current tab

# Where Run All stands in the current notebook, from the prompts of its code cells:
# "running" while any shows `[*]:` (JupyterLab queues every cell at once), "done" when every
# one shows `[n]:`, "stopped" when none runs but some did not run and a cell that ran shows
# stderr (in JupyterLab 4 an error's traceback is rendered as stderr), else "idle".
_RUN_STATE_JS = """
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return {state: 'no notebook', error: ''};
  const cells = [...panel.querySelectorAll('.jp-CodeCell')].map(cell => ({
    prompt: (cell.querySelector('.jp-InputArea-prompt')?.textContent ?? '').trim(),
    stderr: [...cell.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(o => o.innerText).join('\\n'),
  }));
  const ran = cells.filter(c => /^\\[\\d+\\]:$/.test(c.prompt));
  if (cells.some(c => c.prompt === '[*]:')) return {state: 'running', error: ''};
  if (cells.length > 0 && ran.length === cells.length) return {state: 'done', error: ''};
  const failed = ran.filter(c => c.stderr);
  if (failed.length) return {state: 'stopped', error: failed[failed.length - 1].stderr};
  return {state: 'idle', error: ''};
}
"""

# The status bar's kernel item reads e.g. "Python 3 (ipykernel) | Idle" once a kernel is up
# (the toolbar's execution indicator already says "idle" before any kernel exists); its
# title, "Change kernel for 02_backoff.ipynb", names the current notebook.
KERNEL_IDLE = re.compile(r"\|\s*Idle\s*$")


def current_notebook(page: Page) -> Locator:
    """The notebook panel of the current tab."""
    return page.locator(NOTEBOOK)


def choose_menu(page: Page, menu: str, command: str) -> None:
    """Click `menu` in the menu bar, then its item that runs JupyterLab command `command`."""
    page.locator("#jp-menu-panel .lm-MenuBar-item", has_text=re.compile(rf"^\s*{menu}\s*$")).click()
    page.locator(f'.lm-Menu-item[data-command="{command}"]').click()


def open_notebook(page: Page, server: LabServer, relpath: str, *, kernel: bool = True) -> None:
    """Open `relpath` in JupyterLab and wait until its kernel is idle (``kernel=False``: its cells).

    The first notebook loads JupyterLab at the notebook's address; later ones open in the
    same JupyterLab through File > Open from Path (no second page load). JupyterLab
    sometimes asks which kernel to start although the notebook names one (when its kernel
    list arrives late): the dialog then offers the notebook's own kernel, and this
    accepts it, as a learner would.
    """
    name = Path(relpath).name
    if page.url.startswith(f"{server.url}/lab"):
        choose_menu(page, "File", "filebrowser:open-path")
        dialog = page.locator(".jp-Dialog", has_text="Open Path")
        dialog.locator("input").fill(relpath)
        dialog.locator(".jp-Dialog-footer .jp-mod-accept").click()
    else:
        page.goto(server.notebook_url(relpath), timeout=STEP_MS)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name).wait_for()
    current_notebook(page).locator(".jp-Cell").first.wait_for()
    if not kernel:  # a server started with notebook_starts_kernel=False starts none
        return
    select_kernel = page.locator(".jp-Dialog", has_text="Select Kernel")
    kernel_idle(page, name).or_(select_kernel).first.wait_for()
    if select_kernel.count():
        select_kernel.locator(".jp-Dialog-footer .jp-mod-accept").click()
    kernel_idle(page, name).wait_for()


def kernel_idle(page: Page, name: str) -> Locator:
    """The status bar's kernel item, once it shows notebook `name`'s kernel as idle."""
    status = f'#jp-main-statusbar .jp-StatusBar-TextItem[title^="Change kernel"][title$="{name}"]'
    return page.locator(status, has_text=KERNEL_IDLE)


def run_all_cells(page: Page) -> None:
    """Run every cell of the current notebook (Run > Run All Cells); wait until each has run.

    The notebook must have no stored execution counts (see `lab_server`'s `strip`), so that
    every `[n]:` seen afterwards comes from this run. Fails with the traceback if a cell raises.
    """
    name = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").first.inner_text().strip()
    before = page.evaluate(_RUN_STATE_JS)["state"]
    if before != "idle":
        raise AssertionError(f"{name} is {before!r} before Run All; open it without stored outputs")
    choose_menu(page, "Run", "runmenu:run-all")
    page.wait_for_function(f"() => ['done', 'stopped'].includes(({_RUN_STATE_JS})().state)")
    result = page.evaluate(_RUN_STATE_JS)
    if result["state"] != "done":
        raise AssertionError(f"Run All Cells stopped in {name}:\n{result['error'][-2000:]}")
    kernel_idle(page, name).wait_for()


# --- ipywidgets in the page ----------------------------------------------------------------


def widget_text(widget: Locator) -> str:
    """The text a learner sees in a widget, trimmed."""
    return widget.inner_text().strip()


def _labelled(scope: Locator, kind: str, description: str) -> Locator:
    """The ipywidgets control of CSS class `kind` in `scope` whose label reads `description`."""
    label = scope.page.locator(".widget-label", has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    control = scope.locator(kind).filter(has=label).first
    control.scroll_into_view_if_needed()
    control.wait_for(state="visible")
    return control


def nudge_slider(scope: Locator, description: str) -> str:
    """Move the slider labelled `description` one step with the keyboard; return its new readout.

    Focuses the slider's handle and presses ArrowRight (ArrowLeft when it sits at its maximum),
    as a learner using the keyboard would, then waits for the readout to change.
    """
    slider = _labelled(scope, ".widget-slider", description)
    handle = slider.locator(".noUi-handle").first
    readout = slider.locator(".widget-readout").first
    before = widget_text(readout)
    at_max = handle.evaluate(
        "h => Number(h.getAttribute('aria-valuenow')) >= Number(h.getAttribute('aria-valuemax'))"
    )
    handle.focus()
    handle.press("ArrowLeft" if at_max else "ArrowRight")
    wait_text_changes(readout, before)
    return widget_text(readout)


def change_dropdown(scope: Locator, description: str) -> str:
    """Pick another option in the dropdown labelled `description`; return the option picked."""
    select = _labelled(scope, ".widget-dropdown", description).locator("select").first
    current = select.input_value()
    values: list[str] = select.locator("option").evaluate_all("options => options.map(o => o.value)")
    others = [value for value in values if value != current]
    if not others:
        raise AssertionError(f"the {description} dropdown has no other option than {current!r}")
    select.select_option(value=others[0])
    return others[0]


def wait_text_changes(widget: Locator, before: str) -> str:
    """Wait until `widget` shows a text other than `before` (as `widget_text` reads it); return it."""
    widget.page.wait_for_function(
        "([el, old]) => el.innerText.trim() !== old", arg=[widget.element_handle(), before]
    )
    return widget_text(widget)


def answer_quiz_questions(quiz: Locator, text_answer: str = "at least once") -> int:
    """Answer every `.quiz-question` in `quiz`: a choice's first option, `text_answer` in a text box.

    Returns how many questions were answered.
    """
    questions = quiz.locator(".quiz-question")
    questions.first.wait_for(state="visible")
    count = questions.count()
    for index in range(count):
        question = questions.nth(index)
        question.scroll_into_view_if_needed()
        radios = question.locator("input[type=radio]")
        boxes = question.locator("textarea, input[type=text]")
        if radios.count():
            radios.first.check()
        elif boxes.count():
            boxes.first.fill(text_answer)
            boxes.first.blur()  # a text widget with continuous_update=False syncs on change
        else:
            raise AssertionError(f"quiz question {index + 1} has neither options nor a text box")
    return count
