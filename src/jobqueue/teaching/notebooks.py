"""Run notebooks and store their outputs in a normalised form, so re-running leaves git clean.

Normalising keeps what a reader needs and drops what changes from run to run: execution
counts are renumbered 1, 2, 3 ..., adjacent printed chunks are merged (how output is
split into chunks depends on timing) and timing metadata is removed. The notebook's
metadata is exactly what JupyterLab writes on save: the standard ``python3`` kernel spec
and the kernel's ``language_info`` (:data:`LANGUAGE_INFO`), so saving a lesson after Run
All leaves ``git status`` clean.

Usage: ``python -m jobqueue.teaching.notebooks run lessons/*.ipynb solutions/*.ipynb``
executes each notebook in its own folder and writes it back.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import nbformat
from ipykernel.ipkernel import IPythonKernel
from nbclient import NotebookClient
from nbformat import NotebookNode

from jobqueue.teaching.sandbox import ipc_kernel_manager

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO: dict[str, object] = copy.deepcopy(IPythonKernel.language_info)
"""What the course's kernel reports in its ``kernel_info`` reply, and JupyterLab saves."""
CELL_TIMEOUT_S = 60
"""Longest a single cell may run when notebooks are executed, in seconds."""


def read(path: Path) -> NotebookNode:
    """Read a notebook (nbformat 4)."""
    nb: NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]  # nbformat is untyped
    return nb


def dumps(nb: NotebookNode) -> str:
    """Serialise a notebook exactly as it is stored in git (ends with a newline)."""
    text: str = nbformat.writes(nb)  # type: ignore[no-untyped-call]  # nbformat is untyped
    return text + "\n"


def write(nb: NotebookNode, path: Path) -> None:
    """Write a notebook in its stored form."""
    path.write_text(dumps(nb), encoding="utf-8")


def normalize(nb: NotebookNode) -> NotebookNode:
    """Return ``nb`` with run-to-run noise removed (modifies and returns the same object)."""
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": copy.deepcopy(LANGUAGE_INFO)}
    count = 0
    for index, cell in enumerate(nb.cells):
        cell.setdefault("id", f"cell-{index:02d}")
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
        if cell.cell_type != "code":
            continue
        if cell.execution_count is None and not cell.outputs:
            continue
        count += 1
        cell.execution_count = count
        cell.outputs = _coalesce_streams(cell.outputs)
        for output in cell.outputs:
            if output.output_type == "execute_result":
                output.execution_count = count
    return nb


def _coalesce_streams(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """Merge adjacent stdout (or stderr) outputs: how prints are split depends on timing."""
    merged: list[NotebookNode] = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and output.output_type == previous.output_type == "stream"
            and output.name == previous.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def execute(nb: NotebookNode, cwd: Path) -> NotebookNode:
    """Run every cell of ``nb`` in a fresh kernel started in ``cwd``; return it normalised.

    Raises:
        nbclient.exceptions.CellExecutionError: if a cell raises.
    """
    with tempfile.TemporaryDirectory(prefix="jq-kernel-") as sockets:
        client = NotebookClient(
            nb,
            kernel_manager_class=ipc_kernel_manager(Path(sockets)),
            timeout=CELL_TIMEOUT_S,
            resources={"metadata": {"path": str(cwd)}},
            store_widget_state=False,
        )
        client.execute()
    return normalize(nb)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``run PATH...`` executes notebooks in place."""
    parser = argparse.ArgumentParser(prog="python -m jobqueue.teaching.notebooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute notebooks and store their normalised outputs")
    run.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.paths:
        print(f"running {path}", file=sys.stderr)
        write(execute(read(path), path.parent.resolve()), path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
