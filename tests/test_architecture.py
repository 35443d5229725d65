"""The package's shape: no import cycle, even through the imports a function makes at run
time (a cycle dodged by a function-local import is still a cycle), and no module longer
than the limit a reader can hold at once, except the ones listed with their size today
(each may only shrink)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "warmlint"
MAX_LINES = 400
OVER_TODAY: dict = {}  # modules allowed over the limit, with their size today


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _runtime_imports(tree: ast.AST):
    """Every import statement, at any depth, except under ``if TYPE_CHECKING:``."""
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            for n in ast.walk(node)}
    return [n for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                edges.add(target if target in modules else base)
        graph[name] = (edges & modules.keys()) - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state, stack, found = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_even_through_function_local_imports():
    graph = _graph()
    assert "warmlint.interp.core" in graph["warmlint.analysis"] \
        or "warmlint.interp" in graph["warmlint.analysis"]  # the graph is not empty
    assert _cycles(graph) == []


def test_no_module_over_the_size_limit():
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text().splitlines())
             for p in _modules().values()}
    over = {path: n for path, n in sizes.items() if n > OVER_TODAY.get(path, MAX_LINES)}
    assert over == {}, f"over {MAX_LINES} lines (or grown past today's size): {over}"
