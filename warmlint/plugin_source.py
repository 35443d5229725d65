"""Decide whether a cached upgraded warmup may run: only what ``warmlint fix`` inserts.

Why: the plugin runs inside every vLLM process and caches the method source it
generated, keyed by the digests of the installed files it read and warmlint's version.
A digest says the entry is not stale; it says nothing about who wrote it, and the cache
directory can be written by others (a shared CI cache, a restored archive, a planted
file). So before executing cached text the plugin checks that it *is* an upgrade of the
installed method: parsed with ``ast``, it must equal the installed method (read now from
the installed file) once the inserted statements are taken out, and every inserted
statement must belong to this grammar (docs/security.md), which is what the whole fix
writes and no more:

    insert   := call | "if" guard ":" block          (no else)
    block    := insert+ | fill insert*
    call     := <callee>(arg, ..., name=arg, ...)    one arg is exactly one replace
    replace  := __warmlint_replace(pure, field=value, ...)
    fill     := <new> = __warmlint_replace(pure | <RequestClass>.<public method>(), field=value, ...)
                for <loop> in range(<local>):
                    self.<attr>.<state method>(pure, ...)
                self.<attr>.<publish method>()       # zero or more
                <callee>(pure, ...)
    value    := pure | the configured fix value of that field, exactly
    guard    := pure

``<callee>`` is a ``self.`` attribute the installed method already calls. A *pure*
expression is a name, an attribute (no dunder), a bounded constant, a subscript or slice,
a tuple/list/dict/set display, a unary, binary, comparison or boolean operation of pure
operands, or a call of a tensor conversion (``.to``, ``.int``, ``.long``) on a local of
the method with pure arguments; ``*`` only repeats a display a bounded number of times,
so a planted entry cannot exhaust memory; no other call, lambda, comprehension, walrus,
f-string, starred or ``**`` argument. ``<new>`` is a name the method does not use; the
loop name is new or one the method itself only loops over. Anything else is rebuilt from
the installed files in this process; it never runs.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from warmlint.files import DEFAULT_MAX_BYTES, read_regular

REPLACE = "__warmlint_replace"
# The v2 row fill's calls (the defaults of `state-methods` / `state-publish-methods`).
STATE_METHODS = ("add_request",)
PUBLISH_METHODS = ("apply_staged_writes",)
TENSOR_METHODS = ("to", "int", "long")  # the only calls a pure expression may make
MAX_INT = 2 ** 31  # bound of an int constant
MAX_REPEAT = 1024  # `[0] * N`: N at most this (fix writes up to 128 token ids)
MAX_INSERTED = 512  # inserted statements, nested ones included (fix: ~80 on vLLM 0.26.0)
_SIMPLE = (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Slice, ast.Tuple,
           ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.Compare, ast.BoolOp,
           ast.Call)


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
    """True if ``source`` is ``original`` plus inserted statements of the grammar above.

    ``values``: field -> the Python source of its configured fix value (the one value
    that may make calls); ``classes``: the request-params classes a row fill may start from.
    """
    return bool(inserted_statements(source, original, values, classes))


def inserted_statements(source, original: ast.FunctionDef, values: dict[str, str],
                        classes=()) -> list | None:
    """The statements ``source`` inserts into ``original`` (outermost first), or None if
    it is not ``original`` plus statements of the grammar."""
    if not isinstance(source, str) or len(source) > DEFAULT_MAX_BYTES:
        return None
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(module.body) != 1 or not isinstance(module.body[0], type(original)):
        return None
    try:
        grammar = Grammar(original, values, classes)
        candidate, found, own = module.body[0], [], []
        _strip(candidate, grammar.insert, found)
        _strip(original := _copy(original), grammar.insert, own)
    except RecursionError:
        return None
    size = sum(isinstance(n, ast.stmt) for s in found for n in ast.walk(s))
    if not found or size > MAX_INSERTED or ast.dump(candidate) != ast.dump(original):
        return None
    return _less(found, own) or None


def _less(found: list, own: list) -> list:
    """``found`` without the installed method's own statements of the grammar's shape
    (stripped from both sides above): what the source adds, in order."""
    left = Counter(ast.dump(s) for s in own)
    out = []
    for stmt in found:
        text = ast.dump(stmt)
        if left[text]:
            left[text] -= 1
        else:
            out.append(stmt)
    return out


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node)).body[0]


def _strip(node: ast.AST, matches, found: list) -> None:
    """Remove the statements ``matches`` accepts from every body below ``node`` (not
    looking inside a removed one), appending them to ``found``."""
    for name in ("body", "orelse", "finalbody", "handlers", "cases"):
        items = getattr(node, name, None)
        if not isinstance(items, list) or not items:
            continue
        if isinstance(items[0], ast.stmt):
            kept = [s for s in items if not matches(s)]
            found += [s for s in items if s not in kept]
            setattr(node, name, kept or [ast.Pass()])
            items = kept
        for item in items:
            _strip(item, matches, found)


class Grammar:
    """The inserted-statement grammar, bound to one installed method."""

    def __init__(self, original: ast.FunctionDef, values: dict, classes):
        self.values = {f: ast.dump(ast.parse(v, mode="eval").body) for f, v in values.items()
                       if f.isidentifier()}
        self.classes = set(classes)
        self.callees = {ast.dump(n.func) for n in ast.walk(original)
                        if isinstance(n, ast.Call) and _rooted_at_self(n.func)}
        args = original.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        stored = {n.id for n in ast.walk(original)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.used = params | {n.id for n in ast.walk(original) if isinstance(n, ast.Name)}
        self.locals = (params | stored) - {"self"}
        loops = [n.target for n in ast.walk(original)
                 if isinstance(n, ast.For) and isinstance(n.target, ast.Name)]
        elsewhere = {n.id for n in ast.walk(original) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store) and all(n is not t for t in loops)}
        self.loop_names = {t.id for t in loops} - elsewhere - params  # only looped over

    # -- statements -----------------------------------------------------------------
    def insert(self, stmt: ast.stmt) -> bool:
        return self._call(stmt) or (isinstance(stmt, ast.If) and not stmt.orelse
                                    and self.pure(stmt.test) and self._block(stmt.body))

    def _block(self, body: list) -> bool:
        if len(body) >= 3 and self._fill(body[:2]):
            rest = body[2:]
            while rest and self._state_call(rest[0], PUBLISH_METHODS, allow_args=False):
                rest = rest[1:]
            if rest and self._plain_call(rest[0]):
                return all(self.insert(s) for s in rest[1:])
        return bool(body) and all(self.insert(s) for s in body)

    def _fill(self, pair: list) -> bool:
        copy, loop = pair
        if not (isinstance(copy, ast.Assign) and len(copy.targets) == 1
                and isinstance(copy.targets[0], ast.Name)
                and copy.targets[0].id not in self.used | {REPLACE}
                and self._replace(copy.value, base_class_call=True)):
            return False
        return (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and loop.target.id != copy.targets[0].id and not loop.orelse
                and (loop.target.id not in self.used or loop.target.id in self.loop_names)
                and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name)
                and loop.iter.func.id == "range" and len(loop.iter.args) == 1
                and not loop.iter.keywords and isinstance(loop.iter.args[0], ast.Name)
                and loop.iter.args[0].id in self.locals and len(loop.body) == 1
                and self._state_call(loop.body[0], STATE_METHODS, allow_args=True))

    def _state_call(self, stmt: ast.stmt, methods, allow_args: bool) -> bool:
        """``self.sampler.add_request(req_idx, 1, params)``: a state (or publish) method
        of an object the method already calls, with pure arguments."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        call = stmt.value
        return (isinstance(call.func, ast.Attribute) and call.func.attr in methods
                and ast.dump(call.func.value) in self.callees and not call.keywords
                and (allow_args or not call.args) and all(map(self.pure, call.args)))

    def _plain_call(self, stmt: ast.stmt) -> bool:
        return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and ast.dump(stmt.value.func) in self.callees
                and all(k.arg is not None for k in stmt.value.keywords)
                and all(map(self.pure, _arguments(stmt.value))))

    def _call(self, stmt: ast.stmt) -> bool:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        call = stmt.value
        if ast.dump(call.func) not in self.callees or any(k.arg is None for k in call.keywords):
            return False
        args = _arguments(call)
        replaced = [a for a in args if _is_replace_call(a)]
        return (len(replaced) == 1 and self._replace(replaced[0])
                and all(self.pure(a) for a in args if a is not replaced[0]))

    def _replace(self, call: ast.expr, base_class_call: bool = False) -> bool:
        if not (_is_replace_call(call) and len(call.args) == 1 and call.keywords):
            return False
        base = call.args[0]
        return ((self.pure(base) or (base_class_call and self._class_call(base)))
                and all(self._field(k) for k in call.keywords))

    def _field(self, keyword: ast.keyword) -> bool:
        name = keyword.arg
        return (name is not None and not name.startswith("__")
                and (self.pure(keyword.value) or ast.dump(keyword.value) == self.values.get(name)))

    def _class_call(self, node: ast.expr) -> bool:
        """``SamplingParams.for_sampler_warmup()``: a public method of a request class."""
        return (isinstance(node, ast.Call) and not node.args and not node.keywords
                and isinstance(node.func, ast.Attribute) and not node.func.attr.startswith("_")
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.classes)

    # -- expressions ----------------------------------------------------------------
    def pure(self, node) -> bool:
        if not isinstance(node, _SIMPLE):
            return False
        if isinstance(node, ast.Name):
            return not node.id.startswith("__")
        if isinstance(node, ast.Attribute):
            return not node.attr.startswith("__") and self.pure(node.value)
        if isinstance(node, ast.Constant):
            return _bounded(node.value)
        if isinstance(node, ast.Call):
            return self._tensor_call(node)
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.UnaryOp):
            return isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)) and self.pure(node.operand)
        if isinstance(node, ast.Dict):
            return None not in node.keys and all(map(self.pure, node.keys + node.values))
        if isinstance(node, ast.Slice):
            return all(self.pure(p) for p in (node.lower, node.upper, node.step) if p)
        if isinstance(node, ast.Subscript):
            return self.pure(node.value) and self.pure(node.slice)
        return all(map(self.pure, _operands(node)))

    def _tensor_call(self, node: ast.Call) -> bool:
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS
                and _root_name(func.value) in self.locals and self.pure(func.value)
                and all(k.arg is not None for k in node.keywords)
                and all(map(self.pure, _arguments(node))))

    def _binop(self, node: ast.BinOp) -> bool:
        if isinstance(node.op, (ast.Add, ast.Sub)):  # numbers: no sequence grows by `+`
            return not (_sequence(node.left) or _sequence(node.right)) \
                and self.pure(node.left) and self.pure(node.right)
        if not isinstance(node.op, ast.Mult):
            return False
        left, right = node.left, node.right
        if _small_int(left) and _small_int(right):
            return True
        # `[0] * 128`: a display of constants, repeated at most MAX_REPEAT times (never
        # nested: `[[0] * 1024] * 1024` would hand the sampler a million token ids)
        return (isinstance(left, (ast.List, ast.Tuple)) and self.pure(left)
                and all(isinstance(e, ast.Constant) for e in left.elts)
                and _small_int(right) and 0 <= right.value <= MAX_REPEAT)


def _sequence(node: ast.expr) -> bool:
    """A list or tuple display, or one repeated."""
    return isinstance(node, (ast.List, ast.Tuple)) or (
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
        and (_sequence(node.left) or _sequence(node.right)))


def _arguments(call: ast.Call) -> list:
    return list(call.args) + [k.value for k in call.keywords]


def _operands(node: ast.expr) -> list:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return node.elts
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    return node.values  # BoolOp


def _is_replace_call(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == REPLACE)


def _bounded(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    return -MAX_INT <= value <= MAX_INT


def _small_int(node) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool) and _bounded(node.value))


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _rooted_at_self(node: ast.expr) -> bool:
    """``self.sampler``, ``self.model.compute_logits``: attributes all the way to ``self``."""
    if not isinstance(node, ast.Attribute):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"
