"""The package's layout: no import circle in ``src/jobqueue``, and the library never imports the example.

The import graph is read from the source with :mod:`ast`, not by importing: every
``import`` and ``from ... import`` of a ``jobqueue`` module, at the top of a module or inside
a function or an ``if TYPE_CHECKING:`` block (a circle that an import placed inside a
function hides is still a circle: the two modules still need each other). ``from a import b``
is an edge to ``a.b`` when ``a.b`` is a module, else to ``a``. Importing ``a.b`` also runs
``a/__init__.py``, but that implicit edge is left out, as import-linter and pydeps leave it
out: with it, every module imported by ``jobqueue/__init__.py`` would be in a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
EXAMPLES = "jobqueue.examples"


def module_name(path: Path, src: Path = SRC) -> str:
    """``src/jobqueue/teaching/__init__.py`` -> ``jobqueue.teaching``."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the ``jobqueue`` package under ``src``, by dotted name."""
    return {module_name(path, src): path for path in sorted((src / "jobqueue").rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``jobqueue`` modules that module ``name`` (the file ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {target for target in found if target in known and target != name}


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Each ``jobqueue`` module and the ``jobqueue`` modules it imports."""
    found = modules(src)
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected group of two or more modules, sorted.

    Tarjan's algorithm (Tarjan 1972), written iteratively.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return sorted(found)


def test_the_cycle_finder_finds_a_circle_through_three_modules_and_only_that() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_are_read_from_function_bodies_relative_imports_and_submodule_names(tmp_path: Path) -> None:
    package = tmp_path / "jobqueue" / "teaching"
    package.mkdir(parents=True)
    (tmp_path / "jobqueue" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from . import grade\n")
    (package / "grade.py").write_text("def main():\n    from jobqueue.teaching import check\n")
    (package / "check.py").write_text("from .grade import run\nimport jobqueue\n")
    graph = import_graph(tmp_path)
    assert graph == {
        "jobqueue": set(),
        "jobqueue.teaching": {"jobqueue.teaching.grade"},
        "jobqueue.teaching.check": {"jobqueue.teaching.grade", "jobqueue"},
        "jobqueue.teaching.grade": {"jobqueue.teaching.check"},
    }
    assert cycles(graph) == [["jobqueue.teaching.check", "jobqueue.teaching.grade"]]


def test_no_import_circle_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_the_library_never_imports_the_example() -> None:
    graph = import_graph()
    assert EXAMPLES in graph, "the course's example lives in jobqueue.examples"
    offending = {
        name: sorted(t for t in targets if t == EXAMPLES or t.startswith(EXAMPLES + "."))
        for name, targets in graph.items()
        if not (name == EXAMPLES or name.startswith(EXAMPLES + "."))
    }
    assert {name: targets for name, targets in offending.items() if targets} == {}


def positional_clocks(src: Path = SRC) -> list[str]:
    """Constructors (``__init__`` and ``create``/``open`` class methods) that take ``clock`` by position."""
    found = []
    for name, path in modules(src).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for method in node.body:
                    if not isinstance(method, ast.FunctionDef) or method.name not in (
                        "__init__",
                        "create",
                        "open",
                    ):
                        continue
                    positional = [*method.args.posonlyargs, *method.args.args]
                    if any(arg.arg == "clock" for arg in positional):
                        found.append(f"{name}.{node.name}.{method.name}")
    return sorted(found)


def test_every_constructor_takes_the_clock_by_keyword() -> None:
    assert positional_clocks() == []


def test_a_constructor_with_a_positional_clock_is_found(tmp_path: Path) -> None:
    (tmp_path / "jobqueue").mkdir()
    (tmp_path / "jobqueue" / "__init__.py").write_text(
        "class Relay:\n    def __init__(self, con, clock, *, batch_size=1): ...\n"
        "class Budget:\n    def __init__(self, *, clock): ...\n"
        "class Shop:\n    @classmethod\n    def create(cls, clock): ...\n"
    )
    assert positional_clocks(tmp_path) == ["jobqueue.Relay.__init__", "jobqueue.Shop.create"]
