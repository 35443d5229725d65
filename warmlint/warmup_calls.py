"""A warmup's entry call as rules see it: where it is, what it passes, how to vary it.

An *entry* is a call a ``_dummy_*_run`` warmup makes into an object with a request
input (``self.sampler(logits=logits, sampling_metadata=dummy_metadata)``). Fixes repeat
it with something changed, so a rule needs to know, in source terms: which argument is
the request object and which fields the warmup sets on it, which arguments and fields
hold one row per request, the warmup's own batch-size variable, where the statement is,
and how to write a config decision (``envs.X``, ``self.sampler.logprobs_mode``) as an
expression valid at the call. ``WarmupCall`` answers those from the abstract values the
interpreter recorded, so rules never read interpreter objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from warmlint.values import Obj, OneOf, Seq, Sym, Tensor

_OPS = {("truthy", True): "{a}", ("truthy", False): "not {a}",
        ("is_none", True): "{a} is None", ("is_none", False): "{a} is not None",
        ("eq", True): "{a} == {c}", ("eq", False): "{a} != {c}",
        ("in", True): "{a} in {c}", ("in", False): "{a} not in {c}",
        ("lt", True): "{a} < {c}", ("lt", False): "{a} >= {c}",
        ("le", True): "{a} <= {c}", ("le", False): "{a} > {c}",
        ("gt", True): "{a} > {c}", ("gt", False): "{a} <= {c}",
        ("ge", True): "{a} >= {c}", ("ge", False): "{a} < {c}"}


def _const(value) -> str:
    if isinstance(value, frozenset):
        items = sorted(value, key=repr)
        return "(" + ", ".join(_const(v) for v in items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


@dataclass(frozen=True)
class RequestArgument:
    """The request object a warmup call passes (e.g. its ``SamplingMetadata``)."""

    key: object  # keyword name or position
    cls: str  # its class name
    fields: frozenset  # fields the warmup sets on it
    per_row_fields: tuple  # fields holding one value per row of the warmup batch
    values: dict = field(default_factory=dict, compare=False, repr=False)  # abstract values


class WarmupCall:
    """One entry call of a warmup (see the module docstring)."""

    def __init__(self, entry, resolver, memo: dict):
        self._entry = entry
        self._resolver = resolver
        self._memo = memo  # id(function node) -> (node, {name: [assigned values]})
        self._fn = entry.frame.fn
        self._anchor = None

    path = property(lambda self: self._fn.path)
    function = property(lambda self: self._fn.qualname, doc="the warmup method's qualname")
    batch_var = property(lambda self: self._entry.batch_var,
                         doc="a local of the warmup holding its batch size, or None")

    @property
    def code(self) -> str:
        """The call's source as written."""
        return self.source(self._entry.node)

    @property
    def location(self) -> tuple[int, int]:
        """(line, col) of the call in its file."""
        return self.position(self._entry.node)

    @property
    def callee(self) -> str:
        """The called expression's source (``self.sampler``)."""
        return self.source(self._entry.node.func)

    @property
    def anchor(self) -> tuple | None:
        """Statement path of the call inside the warmup (``codemod.anchors``)."""
        if self._anchor is None:
            from warmlint.codemod.anchors import statement_path

            self._anchor = (statement_path(self._fn.node, self._entry.node),)
        return self._anchor[0]

    def source(self, node: cst.CSTNode) -> str:
        """A node of the warmup function, as written."""
        return self._fn.wrapper_module.code_for_node(node)

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        return self._fn.position(node)

    def _values(self):
        yield from enumerate(self._entry.args)
        yield from self._entry.kwargs.items()

    @property
    def request_classes(self) -> set:
        """Class names of the request objects it passes."""
        return {o.cls.name for _, v in self._values() for o in _options(v)
                if isinstance(o, Obj) and self._resolver.is_request_class(o.cls)}

    def request_argument(self, classes: set) -> RequestArgument | None:
        """The argument passing an object of one of ``classes``, if the call spells it out."""
        call: cst.Call = self._entry.node
        positional = [a for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        for key, value in self._values():
            obj = next((o for o in _options(value) if isinstance(o, Obj) and o.cls.name in classes),
                       None)
            if obj is None:
                continue
            if (key < len(positional)) if isinstance(key, int) else (key in keywords):
                per_row = tuple(name for name, v in obj.attrs.items() if _per_row(v))
                return RequestArgument(key, obj.cls.name, frozenset(obj.attrs), per_row,
                                       dict(obj.attrs))
        return None

    @property
    def per_row_arguments(self) -> tuple:
        """Keys of the arguments holding one row per request (tensors over the batch)."""
        return tuple(key for key, value in self._values() if _per_row(value))

    @property
    def passes_tensor(self) -> bool:
        return any(isinstance(o, Tensor) for _, v in self._values() for o in _options(v))

    def argument_expressions(self) -> list:
        """For each argument as written, the expressions that may flow into it: the
        argument itself, or every value the warmup assigns to the local it names."""
        fn = self._fn
        out = []
        for arg in self._entry.node.args:
            if isinstance(arg.value, cst.Name):
                if id(fn.node) not in self._memo:  # node kept: ids stay unique
                    self._memo[id(fn.node)] = (fn.node, _assignments(fn.node))
                out.append(self._memo[id(fn.node)][1].get(arg.value.value, []))
            else:
                out.append([arg.value])
        return out

    def guard(self, decisions: list) -> tuple[list, bool]:
        """(conditions, reads envs) writing config ``decisions`` as source valid at the
        call; a decision with no such spelling is left out (the call then runs in more
        configs than needed, which is harmless)."""
        terms, needs_envs = [], False
        callee_code = self.callee
        for decision in decisions:
            atom = _atom_source(decision, self._entry.callee, callee_code)
            if atom is None or (decision.op, decision.outcome) not in _OPS:
                continue
            needs_envs |= atom.startswith("envs.")
            terms.append(_OPS[(decision.op, decision.outcome)].format(
                a=atom, c=_const(decision.const)))
        return terms, needs_envs


def _options(value):
    return value.options if isinstance(value, OneOf) else (value,)


def _per_row(value) -> bool:
    from warmlint.warmup import WARMUP_BATCH

    if isinstance(value, Tensor):
        return value.batch is not None and isinstance(value.batch, Sym) \
            and value.batch.key == WARMUP_BATCH.key
    return isinstance(value, Seq) and value.kind == "list" and value.items is None


def _assignments(fn_node: cst.FunctionDef) -> dict:
    """name -> values assigned to it in the function (one CST walk per function)."""
    found: dict = {}

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)

    fn_node.visit(Visitor())
    return found


def _atom_source(decision, callee, callee_code: str) -> str | None:
    if decision.key.startswith("envs."):
        return decision.key
    path = _attr_path(callee, decision.key, depth=3)
    if path is not None:
        return callee_code + path
    if decision.key.startswith("vllm_config."):
        return "self." + decision.key
    return None


def _attr_path(value, key: str, depth: int, seen=None) -> str | None:
    """``.a.b`` such that ``value.a.b`` is the config symbol ``key``."""
    seen = seen or set()
    if not isinstance(value, Obj) or depth == 0 or value.oid in seen:
        return None
    seen.add(value.oid)
    for name, attr in value.attrs.items():
        if isinstance(attr, Sym) and attr.key == key:
            return "." + name
    for name, attr in value.attrs.items():
        sub = _attr_path(attr, key, depth - 1, seen)
        if sub is not None:
            return "." + name + sub
    return None
