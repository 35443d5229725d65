"""Add an import where isort (ruff's ``I`` rules, vLLM's pre-commit) would put it.

LibCST's ``AddImportsVisitor`` appends new imports after the last one, which vLLM's
import-order check would then reject. Here a new name joins an existing
``from module import ...`` in sorted position, and a new statement goes into its section
(stdlib, third party, first party), ``import`` lines before ``from`` lines, by module name.
"""

from __future__ import annotations

import sys

import libcst as cst

_SECTIONS = ["future", "stdlib", "thirdparty", "firstparty"]


def _section(module: str, first_party: set) -> int:
    top = module.split(".")[0]
    if top == "__future__":
        return 0
    if top in getattr(sys, "stdlib_module_names", ()):
        return 1
    return 3 if top in first_party else 2


def _code(node) -> str:
    return cst.Module([]).code_for_node(node)


def _imports(module: cst.Module, first_party: set) -> list:
    """(index, section, kind, module name, node) of each top-level import line."""
    out = []
    for index, stmt in enumerate(module.body):
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            continue
        small = stmt.body[0]
        if isinstance(small, cst.Import):
            name = _code(small.names[0].name)
            out.append((index, _section(name, first_party), 0, name.lower(), small))
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            name = _code(small.module)
            out.append((index, _section(name, first_party), 1, name.lower(), small))
    return out


def add_from_import(module: cst.Module, source: str, name: str, first_party: set) -> cst.Module:
    """``from source import name``, merged into an existing ``from source import``."""
    for index, _, kind, mod, node in _imports(module, first_party):
        if kind == 1 and mod == source.lower() and not isinstance(node.names, cst.ImportStar):
            return _replace_small(module, index, _with_name(node, name))
    stmt = cst.parse_statement(f"from {source} import {name}\n")
    return _insert(module, stmt, _section(source, first_party), 1, source.lower(), first_party)


def add_import(module: cst.Module, source: str, asname: str | None, first_party: set) -> cst.Module:
    text = f"import {source}" + (f" as {asname}" if asname else "")
    stmt = cst.parse_statement(text + "\n")
    return _insert(module, stmt, _section(source, first_party), 0, source.lower(), first_party)


def _with_name(node: cst.ImportFrom, name: str) -> cst.ImportFrom:
    names = list(node.names)
    keys = [_code(a.name).lower() for a in names]
    position = next((i for i, key in enumerate(keys) if key > name.lower()), len(names))
    new = cst.ImportAlias(name=cst.Name(name))
    if position < len(names):
        neighbour = names[position - 1] if position > 0 else names[position]
        names.insert(position, new.with_changes(comma=neighbour.comma))
    else:
        last = names[-1]
        separator = names[-2].comma if len(names) > 1 else cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" "))
        names[-1] = last.with_changes(comma=separator)
        names.append(new.with_changes(comma=last.comma))
    return node.with_changes(names=names)


def _replace_small(module: cst.Module, index: int, small) -> cst.Module:
    body = list(module.body)
    body[index] = body[index].with_changes(body=[small])
    return module.with_changes(body=body)


def _insert(module, stmt, section: int, kind: int, key: str, first_party: set) -> cst.Module:
    existing = _imports(module, first_party)
    body = list(module.body)
    same = [e for e in existing if e[1] == section]
    if same:
        same_kind = [e for e in same if e[2] == kind]
        after = [e for e in same_kind if e[3] > key] if same_kind else (
            [e for e in same if e[2] > kind])
        if after:
            return _before(module, body, after[0][0], stmt, same_boundary=True)
        last = (same_kind or [e for e in same if e[2] < kind] or same)[-1][0]
        return _after(module, body, last, stmt, blank=False)
    later = [e for e in existing if e[1] > section]
    if later:
        return _before(module, body, later[0][0], stmt, same_boundary=False)
    if existing:
        return _after(module, body, existing[-1][0], stmt, blank=True)
    first = 1 if body and _is_docstring(body[0]) else 0
    return _before(module, body, first, stmt, same_boundary=False) if first < len(body) else \
        module.with_changes(body=body + [stmt])


def _before(module, body, index, stmt, same_boundary: bool):
    target = body[index]
    stmt = stmt.with_changes(leading_lines=target.leading_lines)
    lines = [] if same_boundary else [cst.EmptyLine()]
    body[index:index + 1] = [stmt, target.with_changes(leading_lines=lines)]
    return module.with_changes(body=body)


def _after(module, body, index, stmt, blank: bool):
    body.insert(index + 1, stmt.with_changes(leading_lines=[cst.EmptyLine()] if blank else []))
    return module.with_changes(body=body)


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))
