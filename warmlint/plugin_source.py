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
exactly the configured value for it. A guard has no calls. For the model runner v2, whose
sampler reads per-request rows, the one other shape is the row fill:

    if <guard>:                      # optional
        <name> = __warmlint_replace(<request>, <field>=<value>)
        for <name> in range(<plain>):
            self.<attr>.<method>(<plain or the new name>, ...)
        self.<attr>.<method>()       # zero or more: publish the rows
        <callee>(<plain>, ...)

where ``<request>`` is plain or ``<RequestParamsClass>.<public method>()`` (the warmup
function's ``SamplingParams.for_sampler_warmup()``). Anything else is rebuilt from the
installed files in this process; it never runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from warmlint.files import DEFAULT_MAX_BYTES, read_regular

REPLACE = "__warmlint_replace"
# The v2 row fill's calls (the defaults of `state-methods` / `state-publish-methods`).
STATE_METHODS = ("add_request",)
PUBLISH_METHODS = ("apply_staged_writes",)
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


def request_classes_read(source: str, classes) -> set:
    """The request-params classes (``SamplingParams``) ``source`` reads by name."""
    return {n.id for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Name) and n.id in set(classes)}


def is_upgrade_of(source, original: ast.FunctionDef, values: dict[str, str],
                  classes=()) -> bool:
    """True if ``source`` is ``original`` plus inserted warmup calls of the codemod's shape.

    ``values``: field -> the Python source of the value the plugin sets it to;
    ``classes``: the request-params classes a v2 row fill may start from.
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
    def inserted_shape(stmt):
        return _is_warmup_call(stmt, callees, fields) or _is_row_fill(stmt, callees, fields,
                                                                      set(classes))

    inserted = _strip(candidate, inserted_shape)
    _strip(original := _copy(original), inserted_shape)
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


def _is_row_fill(stmt: ast.stmt, callees: set, fields: dict, classes: set) -> bool:
    body = stmt.body if isinstance(stmt, ast.If) and not stmt.orelse \
        and _is_guard(stmt.test) else None
    if not body or len(body) < 3:
        return False
    copy, loop, *publish, call = body
    if not (isinstance(copy, ast.Assign) and len(copy.targets) == 1
            and isinstance(copy.targets[0], ast.Name) and isinstance(copy.value, ast.Call)):
        return False
    name, made = copy.targets[0].id, copy.value
    if not (isinstance(made.func, ast.Name) and made.func.id == REPLACE and len(made.args) == 1
            and made.keywords and all(k.arg in fields and ast.dump(k.value) == fields[k.arg]
                                      for k in made.keywords)
            and (_is_plain(made.args[0]) or _is_class_call(made.args[0], classes))):
        return False
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and not loop.orelse
            and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name)
            and loop.iter.func.id == "range" and len(loop.iter.args) == 1
            and not loop.iter.keywords and _is_plain(loop.iter.args[0])
            and len(loop.body) == 1
            and _is_state_call(loop.body[0], callees, STATE_METHODS, allow_args=True)):
        return False
    if name == loop.target.id or not all(_is_state_call(p, callees, PUBLISH_METHODS, False)
                                         for p in publish):
        return False
    return (isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
            and ast.dump(call.value.func) in callees and not call.value.keywords
            and all(_is_plain(a) for a in call.value.args))


def _is_class_call(node: ast.expr, classes: set) -> bool:
    """``SamplingParams.for_sampler_warmup()``: a public method of a request class, no args."""
    return (isinstance(node, ast.Call) and not node.args and not node.keywords
            and isinstance(node.func, ast.Attribute) and not node.func.attr.startswith("_")
            and isinstance(node.func.value, ast.Name) and node.func.value.id in classes)


def _is_state_call(stmt: ast.stmt, callees: set, methods, allow_args: bool) -> bool:
    """``self.sampler.add_request(req_idx, 1, params)``: a state (or publish) method of an
    object the method already calls, with plain arguments."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    return (isinstance(call.func, ast.Attribute) and call.func.attr in methods
            and ast.dump(call.func.value) in callees and not call.keywords
            and (allow_args or not call.args) and all(_is_plain(a) for a in call.args))


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
