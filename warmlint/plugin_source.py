"""Decide whether a cached upgraded warmup may run: only what ``warmlint fix`` inserts.

Why: the plugin runs inside every vLLM process and caches the method source it
generated, keyed by the digests of the installed files it read and warmlint's version.
A digest says the entry is not stale; it says nothing about who wrote it, and the cache
directory can be written by others (a shared CI cache, a restored archive, a planted
file). So before executing cached text the plugin checks that it *is* an upgrade of the
installed method: parsed with ``ast``, it must equal the installed method (read now from
the installed file) once the inserted warmup calls are taken out, and every inserted
statement must have the one shape the codemod writes:

    if <guard>:                      # optional; names, attributes, constants,
        <callee>(<arg>, ..., <name>=__warmlint_replace(<metadata>, <field>=<value>))

where ``<callee>`` is a ``self.`` attribute the method already calls, arguments are
names, attributes or constants, ``<field>`` is one the plugin fixes and ``<value>`` is
exactly the configured value for it. A guard has no calls. Anything else is rebuilt
from the installed files in this process; it never runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from warmlint.files import DEFAULT_MAX_BYTES, read_regular

REPLACE = "__warmlint_replace"
_CONSTANTS = (ast.Constant, ast.Tuple, ast.List, ast.Set)


def installed_method(path: Path, cls: str, name: str) -> ast.FunctionDef | None:
    """The method as the installed file defines it now, or None."""
    tree = ast.parse(read_regular(path, DEFAULT_MAX_BYTES), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    return item
    return None


def is_upgrade_of(source, original: ast.FunctionDef, values: dict[str, str]) -> bool:
    """True if ``source`` is ``original`` plus inserted warmup calls of the codemod's shape.

    ``values``: field -> the Python source of the value the plugin sets it to.
    """
    if not isinstance(source, str) or len(source) > DEFAULT_MAX_BYTES:
        return False
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if len(module.body) != 1 or not isinstance(module.body[0], type(original)):
        return False
    fields = {f: ast.dump(ast.parse(v, mode="eval").body) for f, v in values.items()}
    callees = {ast.dump(n.func) for n in ast.walk(original) if isinstance(n, ast.Call)
               and _rooted_at_self(n.func)}
    candidate = module.body[0]
    inserted = _strip(candidate, lambda s: _is_warmup_call(s, callees, fields))
    _strip(original := _copy(original), lambda s: _is_warmup_call(s, callees, fields))
    return inserted > 0 and ast.dump(candidate) == ast.dump(original)


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node)).body[0]


def _strip(node: ast.AST, matches) -> int:
    """Remove the statements ``matches`` accepts from every body below ``node``."""
    removed = 0
    for child in ast.walk(node):
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(child, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [s for s in stmts if not matches(s)]
                removed += len(stmts) - len(kept)
                setattr(child, name, kept or [ast.Pass()])
    return removed


def _is_warmup_call(stmt: ast.stmt, callees: set, fields: dict) -> bool:
    if isinstance(stmt, ast.If):
        return (not stmt.orelse and len(stmt.body) == 1 and _is_guard(stmt.test)
                and _is_call(stmt.body[0], callees, fields))
    return _is_call(stmt, callees, fields)


def _is_call(stmt: ast.stmt, callees: set, fields: dict) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    if ast.dump(call.func) not in callees or any(k.arg is None for k in call.keywords):
        return False
    args = list(call.args) + [k.value for k in call.keywords]
    replaced = [a for a in args if isinstance(a, ast.Call)]
    return (len(replaced) == 1 and _is_replace(replaced[0], fields)
            and all(_is_plain(a) for a in args if not isinstance(a, ast.Call)))


def _is_replace(call: ast.Call, fields: dict) -> bool:
    return (isinstance(call.func, ast.Name) and call.func.id == REPLACE
            and len(call.args) == 1 and _is_plain(call.args[0]) and call.keywords != []
            and all(k.arg in fields and ast.dump(k.value) == fields[k.arg]
                    for k in call.keywords))


def _is_guard(node: ast.expr) -> bool:
    if isinstance(node, ast.BoolOp):
        return all(_is_guard(v) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _is_guard(node.operand)
    if isinstance(node, ast.Compare):
        return all(_is_plain(v) for v in [node.left, *node.comparators])
    return _is_plain(node)


def _is_plain(node: ast.expr) -> bool:
    """A name, an attribute of one, or a constant (tuples of constants included)."""
    if isinstance(node, _CONSTANTS):
        return all(isinstance(e, ast.Constant) for e in getattr(node, "elts", []))
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _rooted_at_self(node: ast.expr) -> bool:
    if not isinstance(node, ast.Attribute):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"
