"""Groups for running the suite in parallel (``pytest -n auto --dist loadgroup``).

pytest-xdist's ``loadgroup`` sends each group to one worker, in collection order. Each
notebook checked by nbval is one group, so its cells share one kernel on one worker; the
re-run of that notebook in ``tests/test_notebooks.py`` joins the same group, because a
notebook may write next to itself (lesson 11 keeps a DuckDB file in ``lesson11-data/``,
which one process at a time may open), and so do the exercise meta-tests parametrised by
an exercise ``name`` (each checks in a folder of its own: this only spreads the load).
Every other test module is a group of its own, as with ``--dist loadfile``: a module's
tests may share a file, a module-scoped fixture or a server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def _group(item: pytest.Item) -> str:
    path = Path(str(item.path)).resolve()
    params = getattr(getattr(item, "callspec", None), "params", {})
    notebook, exercise = params.get("path"), params.get("name")
    if isinstance(notebook, Path) and notebook.suffix == ".ipynb":
        path = notebook.resolve()
    elif isinstance(exercise, str) and (ROOT / "solutions" / f"{exercise}.ipynb").exists():
        path = ROOT / "solutions" / f"{exercise}.ipynb"
    try:
        return str(path.relative_to(ROOT))
    except ValueError:  # a test outside the course folder
        return str(path)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its ``xdist_group`` (see the module docstring)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
