"""Element types of request fields, read where serving builds the request object.

Why: serving's request fields are inputs (``SamplingMetadata.top_k``), values the
analysis never sees built, yet their element type is fixed by the code that builds them,
and Triton compiles a kernel once per pointer element type. vLLM 0.20.0's rejection
sampler passes the warmup's ``top_k`` (``torch.full`` of an int: int64) to
``expand_kernel`` where serving passes ``InputBatch.top_k`` (``torch.empty(...,
dtype=torch.int32)``): a 40-190 ms compile on the first speculative-decoding request
with top-k on the H200 (docs/gpu-proof.md, case i-control).

Where: the runner's module and the modules of its package it imports names from
(vLLM's input batch), every call of the request class there outside the warmups; each
keyword argument's type is read from its text: ``X if c else None``, a slice of it, a
local variable or ``self.attr`` (their assignments in the function or class), a torch
maker's ``dtype=``, ``.to(torch.int32)`` / ``.int()``, ``.to(device)`` keeping it. A
field has a type only where every construction found agrees on one; anything else stays
unknown (None), and nothing is concluded from it. Plain ``ast``: a read of text, not an
interpretation.
"""

from __future__ import annotations

import ast
import functools

from warmlint.interp import dtypes
from warmlint.values import Const, External, Tensor, Unknown

_MAKERS = {"empty", "zeros", "ones", "full", "tensor", "arange", "as_tensor", "randn",
           "rand", "randint"}
_DEPTH = 8  # assignments followed through, at most


class FieldTypes:
    """``get(runner, cls, field)``: the element type of a request field, memoized."""

    def __init__(self, tree, warmups: list):
        self.tree = tree
        self.skip = {(w.ref.module, w.ref.qualname) for w in warmups}
        self.found: dict = {}

    def get(self, runner: str, cls: str, name: str) -> str | None:
        key = (runner, cls)
        if key not in self.found:
            self.found[key] = self._read(runner.rpartition(".")[0], cls)
        return self.found[key].get(name)

    def _read(self, module: str, cls: str) -> dict:
        seen: dict = {}  # field -> set of types (None: unknown)
        for name in _modules(self.tree, module):
            source = self.tree.text_calling(name, cls)
            if source is None:
                continue  # no call of the class: not parsed a second time
            parsed = self.tree.parsed(name)  # the TOC's parse of the same text, if any
            try:
                parsed = parsed or ast.parse(source)
            except (SyntaxError, ValueError, OSError):
                continue  # the analysis reports unreadable files itself
            for owner, func, call in _constructions(parsed, cls):
                if (name, func.name if owner is None else f"{owner.name}.{func.name}") \
                        in self.skip:
                    continue
                for kw in call.keywords:
                    if kw.arg is not None:
                        seen.setdefault(kw.arg, set()).update(
                            _types(kw.value, owner, func, _DEPTH) or {None})
        return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1 and None not in v}


def _modules(tree, module: str) -> list:
    """``module`` and the modules of its own package it imports names from (each read
    through the index, ``read_text``, so that editing one invalidates a cached result)."""
    toc = tree.toc(module)
    if toc is None:
        return []
    package = module.rpartition(".")[0] + "."
    out = [module]
    for target in toc.imports.values():
        for name in (target, target.rpartition(".")[0]):
            if name.startswith(package) and name not in out and tree.has_module(name):
                out.append(name)  # its text is searched; no table of contents needed
                break
    return out


def _constructions(parsed: ast.Module, cls: str):
    """(class or None, function, call) for each ``cls(...)`` call inside a function."""
    for node in parsed.body:
        classes = [node] if isinstance(node, ast.ClassDef) else []
        funcs = [(None, node)] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else [(node, f) for f in node.body
                  if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))] if classes else []
        for owner, func in funcs:
            for call in ast.walk(func):
                if isinstance(call, ast.Call) and _last(call.func) == cls:
                    yield owner, func, call


def _last(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else None


def _types(node, owner, func, depth: int) -> set | None:
    """The element types ``node`` can have ({} for None), or None when not known."""
    if depth <= 0:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return set()
    if isinstance(node, ast.IfExp):
        a, b = _types(node.body, owner, func, depth - 1), _types(node.orelse, owner, func,
                                                                depth - 1)
        return None if a is None or b is None else a | b
    if isinstance(node, ast.Subscript):
        return _types(node.value, owner, func, depth - 1)
    if isinstance(node, ast.Name):
        return _assigned(func, lambda t: isinstance(t, ast.Name) and t.id == node.id,
                         owner, func, depth)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self" and owner is not None:
        return _attribute(owner, node.attr, depth)
    if isinstance(node, ast.Call):
        return _call_types(node, owner, func, depth)
    return None


def _attribute(owner: ast.ClassDef, attr: str, depth: int) -> set | None:
    out: set = set()
    for method in (f for f in owner.body if isinstance(f, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef))):
        got = _assigned(method, lambda t: isinstance(t, ast.Attribute) and t.attr == attr
                        and isinstance(t.value, ast.Name) and t.value.id == "self",
                        owner, method, depth, empty=set())
        if got is None:
            return None
        out |= got
    return out or None


def _assigned(func, matches, owner, scope, depth: int, empty=None) -> set | None:
    """The union of the types of every value ``func`` assigns to a target ``matches``;
    ``empty`` where it assigns none."""
    values = [value for targets, value in _assignments(func) if any(map(matches, targets))]
    if not values:
        return empty
    out: set = set()
    for value in values:
        got = _types(value, owner, scope, depth - 1)
        if got is None:
            return None
        out |= got
    return out


@functools.lru_cache(maxsize=256)  # a class's methods are asked once per attribute
def _assignments(func) -> tuple:
    """(targets, value) of each assignment with a value in ``func``, in walk order."""
    return tuple((node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
                 for node in ast.walk(func)
                 if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None)


def _call_types(node: ast.Call, owner, func, depth: int) -> set | None:
    args = [_value(a) for a in node.args]
    kwargs = {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg}
    target = node.func
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
            and target.value.id == "torch" and target.attr in _MAKERS:
        got = dtypes.of_maker(target.attr, args, kwargs, None)
        return None if got is None else {got}
    if isinstance(target, ast.Attribute):
        base = _types(target.value, owner, func, depth - 1)
        if base is None or len(base) != 1:
            return None
        got = dtypes.of_method(target.attr, Tensor(dtype=next(iter(base))), args, kwargs)
        return None if got is None else {got}
    return None


def _value(node):
    """An argument as the value ``dtypes`` reads: a dotted name, a constant, or unknown."""
    if isinstance(node, ast.Constant):
        return Const(node.value)
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return External(".".join([node.id, *reversed(parts)]))
    return Unknown()
