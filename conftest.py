"""The course's notebook checks for pytest, on top of nbval (loaded from the course folder).

With ``--nbval``, nbval runs a notebook's code cells in one kernel, one test item per cell,
and compares each cell's text outputs with the stored ones (pictures and widget models are
skipped). This plugin adds one item per notebook, after its cells, that checks the same run
more strictly: the fresh outputs, normalised as ``python -m jobqueue.teaching.notebooks
run`` stores them, must equal the committed file byte for byte, pictures included, so
re-running a notebook leaves git clean. It reads the kernel's messages as nbval receives
them and turns them into outputs as nbclient does (``nbformat.v4.output_from_msg``), so
each notebook runs once for both checks, and never beside a second run of itself (lesson
11 locks a DuckDB file next to itself). One difference from nbclient's run: nbval executes
cells with ``store_history=False``, so a traceback may number its cell differently; no
committed notebook stores an error output today.

For pytest-xdist's ``--dist loadgroup`` (``make test``) it schedules the run itself (see
:class:`CourseScheduling`): a notebook's items stay on one worker, and so do the tests of
a file with a module-scoped fixture; all other tests spread one by one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nbformat import NotebookNode
from nbformat.v4 import output_from_msg
from nbval.plugin import IPyNbCell, IPyNbFile
from xdist.scheduler import LoadScopeScheduling

from jobqueue.teaching.notebooks import dumps, normalize, read

OUTPUT_MESSAGES = ("stream", "display_data", "execute_result", "error")
"""Kernel messages that become a cell output (nbclient's list)."""

_MESSAGES = pytest.StashKey[dict[str, list[dict[str, Any]]]]()
"""Per notebook: the iopub messages of each execution, by the execute request's id."""
_REQUEST = pytest.StashKey[str]()
"""Per cell item: the id of the execute request nbval sent for it."""


def _record(notebook: IPyNbFile) -> dict[str, list[dict[str, Any]]]:
    """Start keeping the messages nbval reads from ``notebook``'s kernel (once per kernel)."""
    if _MESSAGES in notebook.stash:
        return notebook.stash[_MESSAGES]
    kept: dict[str, list[dict[str, Any]]] = {}
    notebook.stash[_MESSAGES] = kept
    kernel = notebook.kernel
    read_message: Callable[..., dict[str, Any]] = kernel.get_message

    def get_message(stream: str, timeout: float | None = None) -> dict[str, Any]:
        msg = read_message(stream, timeout=timeout)
        request = msg["parent_header"].get("msg_id")
        if stream == "iopub" and request in kept:
            kept[request].append(msg)
        return msg

    kernel.get_message = get_message
    return kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Around a cell's run: note its execute request's id and keep that request's messages."""
    if not isinstance(item, IPyNbCell) or item.parent.kernel is None:
        return (yield)
    kept = _record(item.parent)
    kernel = item.parent.kernel
    send = kernel.execute_cell_input

    def execute_cell_input(source: str, allow_stdin: bool | None = None) -> str:
        request: str = send(source, allow_stdin=allow_stdin)
        item.stash[_REQUEST] = request
        kept[request] = []
        return request

    kernel.execute_cell_input = execute_cell_input
    try:
        return (yield)
    finally:
        del kernel.execute_cell_input  # back to the class's method


def cell_outputs(messages: list[dict[str, Any]]) -> list[NotebookNode]:
    """A cell's outputs from its iopub messages, up to its idle status, as nbclient stores them.

    Raises:
        pytest.fail.Exception: on a message whose output this check does not rebuild
            (``update_display_data``).
    """
    outputs: list[NotebookNode] = []
    clear_on_next = False
    for msg in messages:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            break
        if kind == "clear_output":
            if content.get("wait"):
                clear_on_next = True
            else:
                outputs = []
        elif kind == "update_display_data":
            pytest.fail("a cell updates a display (update_display_data): not rebuilt by this check")
        elif kind in OUTPUT_MESSAGES:
            if clear_on_next:
                outputs, clear_on_next = [], False
            outputs.append(output_from_msg(msg))  # type: ignore[no-untyped-call]  # nbformat is untyped
    return outputs


class ReproducesCommittedFile(pytest.Item):
    """After nbval ran every cell: the run, normalised, is the committed file byte for byte."""

    def __init__(self, *, cells: list[IPyNbCell], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cells = cells

    def runtest(self) -> None:
        """Rebuild the notebook from the kept messages, normalise it, compare it with the file.

        Raises:
            pytest.fail.Exception: with the first 40 lines of the diff, if they differ, or
                naming a cell that did not run.
        """
        notebook = self.parent
        assert isinstance(notebook, IPyNbFile)
        kept = notebook.stash.get(_MESSAGES, {})
        nb = read(notebook.path)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        for cell, item in zip(code, self.cells, strict=True):
            if not cell.source.strip():
                continue  # nbclient leaves empty cells as they are
            if _REQUEST not in item.stash or item.stash[_REQUEST] not in kept:
                pytest.fail(f"{item.name} did not run, so the notebook cannot be compared")
            cell.outputs = cell_outputs(kept[item.stash[_REQUEST]])
            cell.execution_count = 1  # renumbered by normalize
        committed = notebook.path.read_text(encoding="utf-8")
        fresh = dumps(normalize(nb))
        if fresh != committed:
            diff = difflib.unified_diff(
                committed.splitlines(), fresh.splitlines(), "committed", "re-run", lineterm=""
            )
            shown = [line if len(line) <= 200 else line[:200] + " ..." for line in list(diff)[:40]]
            pytest.fail("re-running changed the notebook:\n" + "\n".join(shown), pytrace=False)

    def reportinfo(self) -> tuple[Any, int, str]:
        """Where the report points: the notebook."""
        return self.path, 0, f"{self.name}: {self.path.name}"


SHARED_SCOPES = ("class", "module", "package")
"""Fixture scopes whose value the tests of a module share."""

SHARED_FIXTURE_FILES = frozenset(
    {
        "tests/test_browser.py",
        "tests/test_browser_fit.py",
        "tests/test_crash_lab.py",
        "tests/test_grading.py",
        "tests/test_widgets.py",
        "tests/test_workflow.py",
    }
)
"""Test files with a module- or class-scoped fixture: their tests run on one worker, so the
fixture (a JupyterLab server, the grading run of a class) is made once. Collection fails,
naming the file, if a file not listed here has such a fixture."""


class CourseScheduling(LoadScopeScheduling):
    """pytest-xdist's ``--dist loadgroup`` for the course: units of work from node ids alone.

    A notebook's items are one unit (one kernel runs its cells in order), so is each file in
    :data:`SHARED_FIXTURE_FILES`; every other test is a unit of its own, so the slow ones
    (an exercise check starts a kernel) spread over the workers. xdist's own loadgroup reads
    ``xdist_group`` marks from a suffix it adds to node ids, which pytest 9 no longer lets
    a plugin change, so it would scatter a notebook's cells.
    """

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if path.endswith(".ipynb") or path in SHARED_FIXTURE_FILES else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> CourseScheduling | None:
    """Schedule ``--dist loadgroup`` with :class:`CourseScheduling`; other modes as xdist does."""
    return CourseScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add each notebook's byte-for-byte item after its cells; check SHARED_FIXTURE_FILES.

    Raises:
        pytest.UsageError: naming the file, if a test file not in :data:`SHARED_FIXTURE_FILES`
            has a module- or class-scoped fixture.
    """
    by_notebook: dict[IPyNbFile, list[IPyNbCell]] = {}
    for item in items:
        if isinstance(item, IPyNbCell):
            by_notebook.setdefault(item.parent, []).append(item)
            continue
        path = item.nodeid.split("::", 1)[0]
        shared = _shared_fixture(item) if path.startswith("tests/") else None
        if shared is not None and path not in SHARED_FIXTURE_FILES:
            raise pytest.UsageError(
                f"{path} has the {shared} fixture: add the file to SHARED_FIXTURE_FILES in"
                " conftest.py, so that its tests share one xdist worker"
            )
    # Also loaded by the pytest that lesson 10 runs inside its kernel (ipytest), without nbval.
    compare = getattr(config.option, "nbval", False) and not getattr(config.option, "nbval_lax", False)
    if not by_notebook or not compare:
        return
    result: list[pytest.Item] = []
    for item in items:
        result.append(item)
        cells = by_notebook.get(item.parent, []) if isinstance(item, IPyNbCell) else []
        if cells and item is cells[-1] and len(cells) == len(_code_cells(item.parent)):
            name = "reproduces committed file"
            result.append(ReproducesCommittedFile.from_parent(item.parent, name=name, cells=cells))
    items[:] = sorted(result, key=_weight)  # stable: a notebook's cells keep their order


SLOW_FIRST = (
    "tests/test_grading.py",
    "tests/test_queue_state_machine.py::TestDurableQueue",
    "tests/test_browser.py",
    "tests/test_browser_fit.py",
    "tests/test_browser_dashboard.py",
    "tests/test_parallel.py",
    "tests/test_postgres_lifecycle.py::test_a_pytest_run",
    "tests/test_postgres_kill.py",
    "tests/test_postgres.py::test_postgres_queue_keeps_the_queue_contract",
    "tests/test_workflow.py",
    "tests/test_lesson11_try_it.py",
)
"""Units of work that take 10 s or more (``make test PYTEST_ARGS=--durations=40``), handed out
first, then the notebooks, then the rest: xdist gives each worker the next unit in this
order, so the run ends on short units instead of one worker finishing a long one alone."""


def _weight(item: pytest.Item) -> int:
    for rank, prefix in enumerate(SLOW_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(SLOW_FIRST) + (0 if ".ipynb" in item.nodeid.split("::", 1)[0] else 1)


def _shared_fixture(item: pytest.Item) -> str | None:
    """``module-scoped 'lab'`` if ``item`` uses a fixture made once per class, module or package."""
    info = getattr(item, "_fixtureinfo", None)  # test functions have one; other items do not
    for name, defs in info.name2fixturedefs.items() if info is not None else ():
        if name.startswith("_unittest_"):
            continue  # pytest's stand-in for a unittest class's setUpClass: cheap, made per worker
        if defs and defs[-1].scope in SHARED_SCOPES:
            return f"{defs[-1].scope}-scoped {name!r}"
    return None


def _code_cells(notebook: IPyNbFile) -> list[NotebookNode]:
    return [cell for cell in notebook.nb.cells if cell.cell_type == "code"]
