"""What Python builtins, tensor methods and a few torch/dataclasses calls return.

Only what the analysis needs is modeled: the batch dimension of tensors (so that
``logits.shape[0] >= 8`` is a request-dependent branch), emptiness of dicts and lists
(``generators={}``), ``dataclasses.replace`` (and msgspec's), ``torch.compile`` and external JIT sinks.
Anything else returns an unknown value that keeps the taint of its inputs.
"""

from __future__ import annotations

import libcst as cst

from warmlint import sinks
from warmlint.interp import containers, dtypes, ints, read_trace, tables
from warmlint.state import State, decide, eval_pred
from warmlint.values import (
    Builtin, ClassVal, Const, Dict, External, Func, IntExpr, Obj, OneOf, Seq, Sym, Tensor,
    Unknown, Value, join_all, options, taint_of,
)

_SHAPE_MAKERS = {"full", "empty", "zeros", "ones", "rand", "randn", "randint", "arange"}
_LIKE_MAKERS = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"}
_ARRAY_MODULES = {"torch", "numpy"}
_REDUCTIONS = {"any": "any", "all": "all", "max": "max", "amax": "max", "min": "min",
               "amin": "min", "sum": "sum", "count_nonzero": "sum"}


def _batch_of(values) -> Value | None:
    for v in values:
        if isinstance(v, Tensor) and v.batch is not None:
            return v.batch
    return None


def opaque_result(callee: Value | None, args, kwargs) -> Value:
    """An unknown call's result; a tensor keeps the batch rows of its tensor input."""
    values = list(args) + list(kwargs.values())
    taint = taint_of(*values) if values else (callee.taint if callee is not None else taint_of())
    batch = _batch_of(values)
    if batch is not None or any(isinstance(v, Tensor) for v in values):
        return Tensor(batch, taint)
    return Unknown("call", taint)


def request_values(method: Sym) -> Seq:
    """``sampling_metadata.logprob_token_ids.values()``: one request's value each, all
    alike: ``len`` of one is the request integer ``len(...logprob_token_ids[])``."""
    base, label = method.key[:-len(".values")], method.label[:-len(".values")]
    elem = Sym(f"{base}[]", "request", f"{label}[]", method.taint)
    return Seq(None, "list", None, method.taint, elem)


def _shape_cols(args) -> Value | None:
    """Dim 1 of a 2-D ``torch.zeros(rows, cols)`` / ``torch.zeros((rows, cols))``."""
    if len(args) == 1 and isinstance(args[0], Seq) and args[0].items is not None \
            and len(args[0].items) == 2:
        return args[0].items[1]
    return args[1] if len(args) == 2 and not isinstance(args[0], Seq) else None


def _shape_batch(shape: Value) -> Value | None:
    if isinstance(shape, Seq) and shape.items:
        return shape.items[0]
    if isinstance(shape, (Const, Sym)):
        return shape
    return None


# A copy of an object with fields changed (a fix's `replace(warmup_params, seed=0)`): the
# copy's fields are known, so a warmup filling rows with it is read, never "both ways".
COPY_WITH_CHANGES = ("dataclasses.replace", "msgspec.structs.replace", "copy.replace")


def call_external(interp, fv: External, args, kwargs, state: State, node) -> list:
    name = fv.qualname
    settings = interp.settings
    external = sinks.recognize_external(settings, name)
    if external is not None:
        interp.hit(external[0], external[1], name, node, state)
        return [(state, opaque_result(fv, args, kwargs))]
    if name in settings.compile_calls:
        if args and isinstance(args[0], Func):
            return [(state, Func(args[0].ref, args[0].bound, compiled=True))]
        return [(state, Builtin("compile_decorator"))]
    if name in COPY_WITH_CHANGES and args and isinstance(args[0], Obj):
        read_trace.taint("an object copied whole")
        clone = Obj(args[0].cls, {**args[0].attrs, **kwargs}, label=args[0].label)
        return [(state, clone)]
    if name in ints.NEXT_POWER_OF_2 and len(args) == 1:
        derived = ints.step("np2", args[0])
        if derived is not None:
            return [(state, derived)]
    head, _, leaf = name.rpartition(".")
    if head in _ARRAY_MODULES:
        made = _array_call(leaf, args, kwargs, state)
        if made is not None:
            return [(state, made)]
    return [(state, opaque_result(fv, args, kwargs))]


def _array_call(leaf: str, args, kwargs, state: State) -> Value | None:
    """torch/numpy array makers (tables, see interp/tables.py) and reductions."""
    if leaf in _SHAPE_MAKERS or leaf in _LIKE_MAKERS:
        batch = (_shape_batch(args[0]) if args else None) if leaf in _SHAPE_MAKERS \
            else _batch_of(args)
        elem = tables.maker_element(leaf, list(args), kwargs)
        rows = tables.new(elem) if elem is not None else None
        taint = taint_of(*args, *kwargs.values()) if leaf in _SHAPE_MAKERS else taint_of(*args)
        cols = _shape_cols(args) if leaf in ("empty", "zeros", "ones", "rand", "randn") else None
        like = args[0] if leaf in _LIKE_MAKERS and args and isinstance(args[0], Tensor) \
            else None
        return Tensor(batch, taint, rows, cols, dtypes.of_maker(leaf, list(args), kwargs, like))
    if leaf in _REDUCTIONS and args:
        return tables.reduce(_REDUCTIONS[leaf], args[0], state)
    if leaf == "topk" and args and isinstance(args[0], Tensor):  # k columns per row
        k = args[1] if len(args) > 1 else kwargs.get("k")
        return Tensor(args[0].batch, taint_of(*args, *kwargs.values()), cols=k)
    if leaf == "cat" and args:
        return _cat(args[0], args[1] if len(args) > 1 else kwargs.get("dim", Const(0)))
    return None


def _cat(parts: Value, dim: Value) -> Value | None:
    """``torch.cat`` of tensors along the columns: the column counts add up."""
    if not (isinstance(parts, Seq) and parts.items and isinstance(dim, Const)
            and dim.value in (1, -1) and all(isinstance(p, Tensor) for p in parts.items)):
        return None
    cols = parts.items[0].cols
    for part in parts.items[1:]:
        cols = ints.add(cols, part.cols) if cols is not None and part.cols is not None \
            else None
    return Tensor(parts.items[0].batch, taint_of(*parts.items), cols=cols)


def call_builtin(interp, fv: Builtin, args, kwargs, state: State, node) -> list:
    name, bound = fv.name, fv.bound
    values = list(args) + list(kwargs.values())
    taint = taint_of(*values)
    if name == "launch":
        return interp.launch(bound, args, kwargs, state, node)
    if name == "warmup_step":  # a scheduler step of a warmup function
        return interp.policy.step(interp, state, node)
    if name == "noop" or name == "print":
        return [(state, Const(None))]
    if name == "super":
        return [(state, interp.super_of(state))]
    if name.startswith("tensor."):
        return _tensor_method_call(name[7:], bound, args, kwargs, state, taint)
    if name.startswith("dict.") or name.startswith("seq."):
        return [(state, _container_method(name.split(".", 1)[1], bound, args, taint))]
    if name.startswith("funcattr."):
        attr = name.split(".", 1)[1]
        if attr in interp.settings.registry_methods:
            interp.policy.registered(interp, bound, state)
            return [(state, Const(None))]
        return [(state, opaque_result(bound, args, kwargs))]
    if name.startswith("const."):
        return [(state, Unknown("", bound.taint | taint))]
    return [(state, _plain_builtin(interp, name, args, kwargs, state, taint))]


def _tensor_method_call(method: str, tensor: Tensor, args, kwargs, state: State, taint) -> list:
    table = tensor.rows
    if table is not None:
        if method in ("fill", "fill_") and args:
            return [(tables.write(state, table, args[0], every_row=True), Const(None))]
        if method == "copy_" and args and tables.rows_of(args[0]) is not None:
            elem = tables.element(state, args[0].rows)
            return [(tables.write(state, table, elem, every_row=True), tensor)]
        if method in _REDUCTIONS or method == "item":
            return [(state, tables.reduce(_REDUCTIONS.get(method, method), tensor, state))]
        if method in tables.ALIASES:
            return [(state, Tensor(tensor.batch, tensor.taint | taint, table, tensor.cols,
                                   dtypes.of_method(method, tensor, list(args), kwargs)))]
    result = _tensor_method(method, tensor, args, taint)
    if isinstance(result, Tensor):
        result.dtype = dtypes.of_method(method, tensor, list(args), kwargs)
    return [(state, result)]


def _tensor_method(method: str, tensor: Tensor, args, taint) -> Value:
    taint = tensor.taint | taint
    if method == "size":
        if args and isinstance(args[0], Const) and args[0].value in (0, 1):
            dim = tensor.batch if args[0].value == 0 else tensor.cols
            return (dim or Unknown("size", is_int=True)).with_taint(taint)
        if not args:
            return shape_of(tensor).with_taint(taint)
        return Unknown("size", taint, True)
    if method in ("item", "tolist", "any", "all", "sum", "max", "min", "numel", "dim", "__len__"):
        return Unknown(method, taint)
    if method in ("new_empty", "new_zeros", "new_ones", "new_full"):
        shape = args[0] if args else None
        cols = shape.items[1] if isinstance(shape, Seq) and shape.items and len(
            shape.items) == 2 else None
        return Tensor(_shape_batch(shape) if shape is not None else None, taint, cols=cols)
    if method == "unsqueeze" and args and isinstance(args[0], Const) and args[0].value in (1, -1):
        return Tensor(tensor.batch, taint, cols=Const(1))
    return Tensor(tensor.batch, taint, cols=tensor.cols if method in _SAME_SHAPE else None)


_SAME_SHAPE = {"to", "int", "long", "float", "half", "bfloat16", "contiguous", "clone",
               "detach", "cuda", "cpu"}


def head_rows(interp, tensor: Tensor, element, state: State) -> list:
    """[(state, rows of ``tensor[:n]``)]: ``n`` where the tensor is known to have at least
    that many rows (a constant count, or a batch whose path facts say ``>= n``: a fix's
    ``logits[:8]`` under ``num_reqs > 8``); None where the count is not known."""
    cut = element.slice
    if type(cut) is not cst.Slice or cut.lower is not None or cut.step is not None \
            or cut.upper is None:
        return [(state, None)]
    return [(st, _head(tensor.batch, n, st)) for st, n in interp.eval(cut.upper, state)]


def _head(batch, n, st: State):
    if not (isinstance(n, Const) and type(n.value) is int and n.value >= 0):
        return None
    if isinstance(batch, Const) and type(batch.value) is int:
        return Const(min(batch.value, n.value))
    fact = st.facts.get(batch.key) if isinstance(batch, Sym) and batch.is_int else None
    if fact is not None and fact.lo is not None and fact.lo >= n.value:
        return Const(n.value)
    return None


def shape_of(tensor: Tensor) -> Seq:
    return Seq((tensor.batch or Unknown("rows", is_int=True),
                tensor.cols or Unknown("cols", is_int=True)), "shape",
               False)


def _container_method(method: str, container: Value, args, taint) -> Value:
    taint = container.taint | taint
    empty = getattr(container, "empty", None)
    if method in ("values", "keys") and isinstance(container, Dict) \
            and container.items is not None:  # `{0: [7]}.values()`: its items, known
        items = container.items.values() if method == "values" else map(Const, container.items)
        return Seq(tuple(items), "list", not container.items, taint)
    if method in ("items", "values", "keys", "copy"):
        return Seq(None, "list", empty, taint)
    if method == "get" and isinstance(container, Dict) and container.items is not None and args:
        key = args[0]
        if isinstance(key, Const):
            try:
                if key.value in container.items:
                    return container.items[key.value]
            except TypeError:
                pass
            return args[1] if len(args) > 1 else Const(None)
    if method in ("append", "extend", "update", "clear", "add", "pop", "insert", "setdefault"):
        return Unknown(method, taint)
    return Unknown(method, taint)


def _plain_builtin(interp, name, args, kwargs, state: State, taint) -> Value:
    if name == "len" and args:
        arg = args[0]
        if isinstance(arg, (Seq, Dict)) and arg.items is not None:
            return Const(len(arg.items), taint)
        if isinstance(arg, (Seq, Dict)) and arg.empty:
            return Const(0, taint)
        if isinstance(arg, Seq) and arg.size is not None:  # `len([... for _ in range(n)])`
            return arg.size.with_taint(taint)
        if isinstance(arg, Sym):
            return Sym(f"len({arg.key})", arg.kind, f"len({arg.label})", taint, is_int=True)
        return Unknown("len", taint)
    if name in ("bool",) and args:
        truth = decide(state, args[0])
        return Const(truth, taint) if truth is not None else args[0]
    if name in ("int", "float") and args:
        ok = any(isinstance(o, (Const, Sym, IntExpr)) for o in options(args[0]))
        return args[0] if ok else Unknown(name, taint)
    if name in ("min", "max") and len(args) == 1 and isinstance(args[0], Seq):
        seq = args[0]  # `max(len(ids) for ids in wanted.values())`
        if seq.items is None:  # alike elements (a comprehension's): the element's values
            return seq.elem.with_taint(taint) if seq.elem is not None and not seq.empty \
                else Unknown(name, taint)
        args = list(seq.items)  # known items: as if passed one by one
    if name in ("min", "max") and args and all(isinstance(a, Const) for a in args):
        try:
            return Const((min if name == "min" else max)(a.value for a in args), taint)
        except Exception:
            return Unknown(name, taint)
    if name in ("min", "max"):  # `min(next_power_of_2(n), 1024)`
        derived = ints.bound(name, list(args))
        if derived is not None:
            return derived
    if name == "isinstance" and len(args) == 2:
        return _isinstance(interp, args[0], args[1], taint)
    if name in ("getattr",) and len(args) >= 2 and isinstance(args[1], Const) \
            and isinstance(args[1].value, str):
        return interp.get_attr(args[0], args[1].value, state)
    if name == "hasattr" and len(args) == 2 and isinstance(args[0], Obj) \
            and isinstance(args[1], Const) and isinstance(args[1].value, str):
        if read_trace.OPEN:
            read_trace.read_attr(args[0], args[1].value, state)
        if args[1].value in args[0].attrs:
            return Const(True)
    if name in ("list", "tuple", "sorted", "set", "frozenset") and args:
        arg = args[0]
        if isinstance(arg, Seq):
            return Seq(arg.items, name, arg.empty, taint)
        return Seq(None, name, getattr(arg, "empty", None), taint)
    if name in ("dict",) and not args:
        return Dict(dict(kwargs), not kwargs, taint)
    if name == "range" and args:
        return Seq(None, "range", _range_empty(state, args), taint,
                   size=containers.count(args[0]) if len(args) == 1 else None)
    if name == "sum" and len(args) == 2 and isinstance(args[0], Seq):
        flat = containers.flattened(args[0], args[1])  # `sum(draft_token_ids, [])`
        if flat is not None:
            return flat
    if name in ("range", "zip", "enumerate", "reversed", "map", "filter", "iter"):
        return Seq(None, "list", None, taint)
    return Unknown(name, taint)


def _range_empty(state: State, args) -> bool | None:
    """Whether ``range(*args)`` is empty, when the path knows (``range(num_reqs)`` with
    the warmup batch is not)."""
    if len(args) != 1:
        return None
    stop = args[0]
    if isinstance(stop, Const) and isinstance(stop.value, int):
        return stop.value <= 0
    if isinstance(stop, Sym):
        at_least_one = eval_pred(state.fact(stop), "ge", 1)
        return None if at_least_one is None else not at_least_one
    return None


def _isinstance(interp, value: Value, types: Value, taint) -> Value:
    if not isinstance(value, Obj):
        return Unknown("isinstance", taint)
    wanted = types.items if isinstance(types, Seq) and types.items else (types,)
    mro = interp.resolver.mro(value.cls)
    for t in wanted:
        if isinstance(t, ClassVal) and t.ref in mro:
            return Const(True, taint)
    if all(isinstance(t, ClassVal) for t in wanted):
        return Const(False, taint)
    return Unknown("isinstance", taint)


__all__ = ["call_builtin", "call_external", "opaque_result", "join_all", "OneOf"]
