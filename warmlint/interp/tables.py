"""Per-request tables: arrays with one row per request slot, as values.

The model-runner-v2 sampler keeps its requests' sampling parameters in arrays indexed by
request slot (``SamplingStates.temperature.np``, ``seeds_set``, ``num_logprobs``, ...):
``add_request(req_idx, params)`` writes a row, and a step reads the rows of its batch
(``np.any(self.seeds_set[idx_mapping_np])``) to choose a kernel. Whether a warmup takes a
branch depends on what its own requests wrote there, so those rows are values here, never
"both ways".

A table is a tensor or array made by ``zeros``/``ones``/``full``/``empty`` (torch or
numpy). Its rows are summarized by one *element* value, kept per path in the state's
heap (``State.heap[("rows", table id)]``), so that paths that write differently stay
apart until they merge. A write at a loop index over ``range(n)`` (``RowIndex``) writes
every row of the batch (the warmups fill every row the same way); a write at any other
index adds to what the rows may hold. Reading rows by an index array gives their element;
element-wise operations map the element; ``any``/``all`` reduce it: to a constant when
the element is known (the warmup's requests), to a request symbol when it is a predicate
over a request input (``any(SamplingParams.seed is not None)``), else to an unknown that
keeps the request taint. ``max``/``min`` of uniform rows is the element itself.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from warmlint.state import State, decide
from warmlint.values import (
    Const, OneOf, Pred, Sym, Tensor, Unknown, Value, join, options,
)

_TABLE_IDS = itertools.count()

MAKERS = {"zeros": Const(0), "ones": Const(1), "zeros_like": Const(0), "ones_like": Const(1)}
FILLERS = {"full", "full_like"}
UNINITIALIZED = {"empty", "empty_like"}
ALIASES = {"numpy", "view", "cpu", "to", "contiguous", "pin_memory", "detach", "reshape",
           "flatten", "view_as", "as_strided", "clone", "copy"}


@dataclass(eq=False)
class Table:
    """Identity of one per-request array, and what its rows hold on every path: what they
    held when it was made, or when the lazily built runner object that owns it was done
    (``commit``). Writes on a path live in that path's heap."""

    tid: int
    initial: Value

    @property
    def key(self) -> tuple:
        return ("rows", self)


def new(initial: Value) -> Table:
    return Table(next(_TABLE_IDS), initial)


def commit(states: list) -> None:
    """Make the rows written on ``states`` what their tables hold on every path: objects
    of the lazily built runner are built once, outside any path (see lazy_root.py)."""
    keys = {k for st in states for k in st.heap if k[0] == "rows"}
    for key in keys:
        table = key[1]
        value = None
        for st in states:
            got = st.heap.get(key, table.initial)
            value = got if value is None else join(value, got)
        table.initial = value


def maker_element(name: str, args: list, kwargs: dict) -> Value | None:
    """The element of a table made by ``torch.<name>``/``numpy.<name>``, or None."""
    if name in MAKERS:
        return MAKERS[name]
    if name in UNINITIALIZED:
        return Unknown("uninitialized row")
    if name in FILLERS:
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
        return fill if fill is not None else Unknown("fill")
    return None


rows_read = None  # summaries.read_rows while a call is being recorded (interp/summaries.py)


def element(state: State, table: Table) -> Value:
    if rows_read is not None:
        rows_read(state, table)
    return state.heap.get(table.key, table.initial)


def write(state: State, table: Table, value: Value, every_row: bool) -> State:
    old = element(state, table)
    new_value = value if every_row else join(old, value)
    return state.evolve(heap={**state.heap, table.key: new_value})


def rows_of(value: Value) -> Table | None:
    return value.rows if isinstance(value, Tensor) else None


def derived(element_value: Value, batch=None) -> Tensor:
    """A fresh array whose rows are ``element_value`` (a read, a comparison)."""
    return Tensor(batch, element_value.taint, new(element_value))


def reduce(op: str, value: Value, state: State) -> Value | None:
    """``any``/``all``/``max``/``min``/``sum`` over a table's rows; None if not a table."""
    table = rows_of(value)
    if table is None:
        return None
    elem = element(state, table)
    if op in ("max", "min", "item"):
        return elem
    if op == "sum":
        return Unknown("sum", elem.taint)
    truth = decide(state, elem)
    if truth is not None:
        return Const(truth, elem.taint)
    pred = _as_pred(elem)
    if pred is not None and pred.sym.kind == "request":
        text = f"{op}({pred.sym.label}{_op_text(pred)})"
        return Sym(reduction_key(op, pred), "request", text, elem.taint)
    return Unknown(op, elem.taint)


def reduction_key(op: str, pred: Pred) -> str:
    """The request symbol of ``any``/``all`` over rows holding ``pred``
    (``any:SamplingParams.seed:is_none:None:True``: some row's seed is not None)."""
    return f"{op}:{pred.sym.key}:{pred.op}:{pred.const!r}:{pred.negated}"


def parse_reduction_key(key: str):
    """(reduction, sym key, pred op, const source, negated) of a ``reduction_key``, or None."""
    reduction, _, rest = key.partition(":")
    if reduction not in ("any", "all"):
        return None
    sym, _, rest = rest.partition(":")
    pred, _, rest = rest.partition(":")
    const_text, _, negated = rest.rpartition(":")
    return reduction, sym, pred, const_text, negated == "True"


def _as_pred(value: Value) -> Pred | None:
    if isinstance(value, Pred):
        return value
    if isinstance(value, Sym):
        return Pred("truthy", value, None, False, "", value.taint)
    return None


def _op_text(pred: Pred) -> str:
    text = {"truthy": "", "is_none": " is None", "eq": f" == {pred.const!r}",
            "lt": f" < {pred.const!r}", "le": f" <= {pred.const!r}",
            "gt": f" > {pred.const!r}", "ge": f" >= {pred.const!r}",
            "in": f" in {sorted(pred.const, key=repr)!r}" if pred.op == "in" else ""}[pred.op]
    if not pred.negated:
        return text
    return {"truthy": " is false", "is_none": " is not None"}.get(pred.op, f" not{text}")


def known_rows(value: Value) -> bool:
    return any(isinstance(o, Tensor) and o.rows is not None for o in options(value))


__all__ = ["Table", "element", "write", "reduce", "reduction_key", "parse_reduction_key",
           "derived", "maker_element", "new",
           "rows_of", "known_rows", "OneOf"]
