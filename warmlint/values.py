"""Abstract values the interpreter computes with.

Every value carries a ``Taint``: the request inputs it was derived from (what a request
can change at serving time) and the config atoms it depends on (what a deployment
chooses once). Symbols (``Sym``) give unknown values an identity, so that a branch on
``k is None`` refines every later use of ``k`` on that path (see ``state.Facts``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the settings path imports this and must stay light
    import libcst as cst


@dataclass(frozen=True)
class Taint:
    inputs: frozenset = frozenset()
    configs: frozenset = frozenset()

    def __or__(self, other: "Taint") -> "Taint":
        if other is self or other is CLEAN or (not other.inputs and not other.configs):
            return self
        if self is CLEAN or (not self.inputs and not self.configs):
            return other
        if other.inputs <= self.inputs and other.configs <= self.configs:
            return self
        return Taint(self.inputs | other.inputs, self.configs | other.configs)

    @property
    def empty(self) -> bool:
        return not self.inputs and not self.configs


CLEAN = Taint()


class Value:
    taint: Taint = CLEAN

    def with_taint(self, taint: Taint) -> "Value":
        if taint.empty:
            return self
        merged = self.taint | taint
        if merged == self.taint:
            return self
        clone = object.__new__(type(self))  # a shallow copy, much cheaper than copy.copy
        clone.__dict__.update(self.__dict__)
        clone.taint = merged
        return clone


@dataclass(eq=False)
class Const(Value):
    value: Any
    taint: Taint = CLEAN


class TestOutcome(Const):
    """The truth of a test used as a value (``eligible = not (a or b)``)."""


@dataclass(eq=False)
class Unknown(Value):
    """Nothing known. ``hint`` is the source text it came from, for messages; ``is_int``:
    known to be a Python int (a tensor's size, arithmetic on ints), so that
    ``torch.full(shape, n)`` is known to make int64 (``interp/dtypes.py``)."""

    hint: str = ""
    taint: Taint = CLEAN
    is_int: bool = False


_SYM_IDS = itertools.count()


@dataclass(eq=False)
class Sym(Value):
    """An unknown with identity. kind: 'request', 'config' or 'opaque'.

    ``key`` is stable for the same source (e.g. ``SamplingMetadata.generators``), so two
    reads of one request field are one symbol and a branch on one refines the other.
    """

    key: str
    kind: str
    label: str
    taint: Taint = CLEAN
    is_int: bool = False


@dataclass(eq=False)
class Pred(Value):
    """A boolean that is a predicate over a symbol: ``k is not None``, ``n >= 8``."""

    op: str  # 'truthy' | 'is_none' | 'eq' | 'lt' | 'le' | 'gt' | 'ge' | 'in'
    sym: Sym
    const: Any = None
    negated: bool = False
    text: str = ""
    taint: Taint = CLEAN

    def negate(self) -> "Pred":
        return Pred(self.op, self.sym, self.const, not self.negated, self.text, self.taint)


@dataclass(eq=False)
class Tensor(Value):
    batch: Value | None = None  # size of dim 0 when it is the batch (rows) dimension
    taint: Taint = CLEAN
    rows: Any = None  # interp.tables.Table: a per-request array whose rows are values
    cols: Value | None = None  # size of dim 1, where known (``logprob_token_ids.shape[1]``)
    dtype: str | None = None  # element type where known (``"int32"``; interp/dtypes.py)


def selected_rows(index: "Sym") -> "Sym":
    """The number of rows a request's own index tensor selects (``logits[metadata.
    target_logits_indices]``: the speculative path's draft tokens): a request integer,
    counted like the batch size (``serving.is_row_count``)."""
    return Sym(f"{ROWS_PREFIX}{index.key})", "request", f"rows selected by {index.label}",
               index.taint, is_int=True)


ROWS_PREFIX = "rows("


@dataclass(eq=False)
class IntExpr(Value):
    """An integer computed from a request integer ``base`` by ``ops``, in order:
    ``("add", n)``, ``("min", n)``, ``("max", n)``, ``("np2", None)`` (Triton's
    ``next_power_of_2``). A Triton constexpr computed so (``TOPK_BLOCK_SIZE``) compiles
    one variant per value; ``interp/ints.py`` builds these, ``specialization`` enumerates
    them over the base's range."""

    base: Sym
    ops: tuple = ()
    taint: Taint = CLEAN


class RowIndex(Value):
    """The index of a loop over ``range(n)``: every row of the batch in turn, so that a
    table write at it writes every row (see interp/tables.py)."""

    taint = CLEAN


@dataclass(eq=False)
class Seq(Value):
    """tuple/list; ``items`` None when the contents are unknown, and then ``elem``, when
    known, is what every element is (a comprehension's element expression)."""

    items: tuple | None
    kind: str = "tuple"
    empty: bool | None = None
    taint: Taint = CLEAN
    elem: Value | None = None
    size: Value | None = None  # its length where known and ``items`` are not (``range(n)``)


@dataclass(eq=False)
class Dict(Value):
    """dict; ``items`` maps constant keys to values when the literal is known."""

    items: dict | None
    empty: bool | None = None
    taint: Taint = CLEAN


_OBJ_IDS = itertools.count()


@dataclass(eq=False)
class Obj(Value):
    """An instance of a class of the analyzed tree.

    ``request`` marks a serving-time request input (any field may hold anything);
    ``lazy`` marks the warmup's own runner object, whose attributes are computed on
    demand from its ``__init__`` instead of running it (it is thousands of lines).
    """

    cls: Any  # resolve.ClassRef
    attrs: dict = field(default_factory=dict)
    request: bool = False
    lazy: bool = False
    label: str = ""
    oid: int = field(default_factory=lambda: next(_OBJ_IDS))
    under_construction: bool = False
    taint: Taint = CLEAN


@dataclass(eq=False)
class Func(Value):
    """A function of the tree; ``bound`` is the receiver of a bound method."""

    ref: Any  # resolve.FuncRef
    bound: Value | None = None
    taint: Taint = CLEAN
    compiled: bool = False  # wrapped by torch.compile(fn) at module level


@dataclass(eq=False)
class Lambda(Value):
    node: cst.Lambda | cst.FunctionDef
    env: dict
    frame_fn: Any  # the ParsedFunction the lambda was defined in
    taint: Taint = CLEAN


@dataclass(eq=False)
class ClassVal(Value):
    ref: Any  # resolve.ClassRef
    taint: Taint = CLEAN


@dataclass(eq=False)
class Module(Value):
    name: str
    taint: Taint = CLEAN


@dataclass(eq=False)
class External(Value):
    """A name from outside the tree (torch, triton, flashinfer, numpy, ...)."""

    qualname: str
    taint: Taint = CLEAN


@dataclass(eq=False)
class Builtin(Value):
    name: str
    bound: Value | None = None
    taint: Taint = CLEAN


@dataclass(eq=False)
class Super(Value):
    obj: Value
    after: Any  # ClassRef whose MRO successors to search
    taint: Taint = CLEAN


@dataclass(eq=False)
class OneOf(Value):
    options: tuple
    taint: Taint = CLEAN


@dataclass(eq=False)
class ConfigChoice(OneOf):
    """Constants an object's constructor set on paths split by config atoms (a flag such
    as ``self.use_flashinfer``). Deciding a branch on it makes those atoms whole-run
    (leaf) decisions, as a binding chosen by config does (see calls.commit)."""

    keys: frozenset = frozenset()


@dataclass(eq=False)
class Guarded(OneOf):
    """A join of two paths that knew different things about the request: each option
    with the facts of the path it came from (``guards[i]``: ((sym key, SymFact), ...), or
    () where both paths had it). A later read on a path whose facts contradict an
    option's guard drops that option (``narrow``): vLLM's ``is_greedy = None if
    all_greedy else ...`` is the tensor again past ``if all_greedy: return``."""

    guards: tuple = ()


MAX_OPTIONS = 4


def same(a: Value, b: Value) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Const):
        return type(a.value) is type(b.value) and a.value == b.value
    if isinstance(a, Sym):
        return a.key == b.key
    if isinstance(a, Func):
        return a.ref == b.ref and (a.bound is b.bound or (
            a.bound is not None and b.bound is not None and same(a.bound, b.bound)))
    if isinstance(a, (ClassVal,)):
        return a.ref == b.ref
    if isinstance(a, (Module,)):
        return a.name == b.name
    if isinstance(a, External):
        return a.qualname == b.qualname
    if isinstance(a, Obj):
        return a.oid == b.oid
    if isinstance(a, RowIndex):
        return True
    if isinstance(a, Tensor):
        return _same_dim(a.batch, b.batch) and _same_dim(a.cols, b.cols) and a.dtype == b.dtype
    if isinstance(a, IntExpr):
        return a.base.key == b.base.key and a.ops == b.ops
    if isinstance(a, Dict):
        return a.items is None and b.items is None and a.empty == b.empty
    return False


def _same_dim(a: Value | None, b: Value | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and same(a, b))


def options(value: Value) -> tuple:
    return value.options if isinstance(value, OneOf) else (value,)


def join(a: Value, b: Value, extra: Taint = CLEAN) -> Value:
    """Least upper bound, keeping a small set of alternatives before giving up."""
    if a is b and extra is CLEAN:  # the common case: a value both paths inherited
        return a
    if same(a, b):
        taint = a.taint | b.taint
        return a if taint == a.taint and extra.empty else a.with_taint(taint | extra)
    taint = a.taint | b.taint | extra
    if type(a) is Tensor and type(b) is Tensor and a.rows is b.rows \
            and a.batch is not None and b.batch is not None:
        # Rows counted differently on two paths (the batch, a speculative path's tokens):
        # one tensor of unknown row count, so that what it flows into stays a tensor.
        return Tensor(None, taint, a.rows, a.cols if _same_dim(a.cols, b.cols) else None,
                      a.dtype if a.dtype == b.dtype else None)
    opts: list[Value] = []
    for v in options(a) + options(b):
        if not any(same(v, o) for o in opts):
            opts.append(v)
    if len(opts) <= MAX_OPTIONS:
        return OneOf(tuple(opts), taint)
    if all(isinstance(o, Tensor) for o in opts):
        return Tensor(None, taint)
    return Unknown("", taint)


def join_all(values) -> Value:
    result = None
    for v in values:
        result = v if result is None else join(result, v)
    return Unknown("no value") if result is None else result


def taint_of(*values: Value) -> Taint:
    result = CLEAN
    for v in values:
        if v is not None:
            result = result | v.taint
    return result


def describe(value: Value) -> str:
    if isinstance(value, Const):
        return repr(value.value)
    if isinstance(value, Sym):
        return value.label
    if isinstance(value, Obj):
        return f"<{value.cls.name}>"
    if isinstance(value, Func):
        return value.ref.qualname
    if isinstance(value, OneOf):
        return " | ".join(describe(o) for o in value.options)
    if isinstance(value, Dict):
        return "{}" if value.empty else "{...}"
    if isinstance(value, Tensor):
        return "tensor"
    if isinstance(value, External):
        return value.qualname
    if isinstance(value, Unknown):
        return value.hint or "?"
    return type(value).__name__
