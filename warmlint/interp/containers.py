"""Container displays, comprehensions and subscripts: tuples, lists, sets, dicts, and what every
element of a comprehension is (``[p.seed is not None for p in params]``), for the
expression evaluator (``exprs.py``)."""

from __future__ import annotations

import libcst as cst

from warmlint.interp import dtypes, tables
from warmlint.state import State, decide
from warmlint.values import (
    CLEAN, Builtin, Const, Dict, OneOf, RowIndex, Seq, Sym, Tensor, Unknown, Value, join,
    join_all, selected_rows, taint_of,
)


class ContainerMixin:
    # -- containers -------------------------------------------------------------------------
    def subscript(self, base: Value, key: Value, st: State) -> Value:
        taint = base.taint | key.taint
        if isinstance(base, Seq) and base.items is not None and isinstance(key, Const) \
                and isinstance(key.value, int) and -len(base.items) <= key.value < len(base.items):
            return base.items[key.value].with_taint(taint)
        if isinstance(base, Seq) and base.items is None and base.elem is not None:
            return base.elem.with_taint(taint)
        if isinstance(base, Dict) and base.items is not None and isinstance(key, Const):
            try:
                if key.value in base.items:
                    return base.items[key.value].with_taint(taint)
            except TypeError:
                pass
        if isinstance(base, Tensor) and base.rows is not None:
            # Which rows a batch selects is not what a row holds: the key's taint stays out.
            elem = tables.element(st, base.rows).with_taint(base.taint)
            if isinstance(key, (RowIndex, Const)) or (isinstance(key, Sym) and key.is_int):
                return elem  # one request's row
            return tables.derived(elem)  # the rows of some requests
        if isinstance(base, Tensor):
            rows = index_rows(key)  # rows picked by an index keep their columns and type
            return Tensor(rows, taint, cols=base.cols, dtype=base.dtype) if rows is not None \
                else Tensor(None, taint)
        if isinstance(base, OneOf):
            vals = [self.subscript(o, key, st) for o in base.options]
            result = vals[0]
            for v in vals[1:]:
                result = join(result, v)
            return result.with_taint(taint)
        if isinstance(base, Sym):
            return Sym(f"{base.key}[{key.value if isinstance(key, Const) else '?'}]", base.kind,
                       f"{base.label}[...]", taint)
        return Unknown("item", taint)

    def _elements(self, node, state, kind):
        elts = [e for e in node.elements]
        if any(type(e) is cst.StarredElement for e in elts):
            out = []
            for st, vals in self.eval_seq([e.value for e in elts], state):
                out.append((st, Seq(None, kind, None, taint_of(*vals))))
            return out
        return [(st, Seq(tuple(vals), kind, not vals)) for st, vals in
                self.eval_seq([e.value for e in elts], state)]

    def expr_Tuple(self, node, state):
        return self._elements(node, state, "tuple")

    def expr_List(self, node, state):
        return self._elements(node, state, "list")

    def expr_Set(self, node, state):
        return self._elements(node, state, "set")

    def expr_Dict(self, node, state):
        if not node.elements:
            return [(state, Dict({}, True))]
        if any(type(e) is cst.StarredDictElement for e in node.elements):
            out = []
            for st, vals in self.eval_seq([e.value for e in node.elements], state):
                out.append((st, Dict(None, None, taint_of(*vals))))
            return out
        keys = [e.key for e in node.elements]
        vals_nodes = [e.value for e in node.elements]
        out = []
        for st, vals in self.eval_seq(keys + vals_nodes, state):
            ks, vs = vals[: len(keys)], vals[len(keys):]
            if all(isinstance(k, Const) for k in ks):
                items = {}
                for k, v in zip(ks, vs):
                    try:
                        items[k.value] = v
                    except TypeError:
                        items = None
                        break
                out.append((st, Dict(items, False, CLEAN)))
            else:
                out.append((st, Dict(None, False, taint_of(*ks))))
        return out

    def _comprehension(self, node, state, kind):
        out = []
        for_in = node.for_in
        iters = []
        while for_in is not None:
            iters.append(for_in.iter)
            for_in = for_in.inner_for_in
        for st, vals in self.eval_seq(iters, state):
            taint = taint_of(*vals)
            empty = True if any(decide(st, v) is False for v in vals) else None
            if kind == "dict":
                out.append((st, Dict(None, empty, taint)))
                continue
            items = self._items(node, st, vals[0]) if len(iters) == 1 else None
            if items is not None:  # `len(ids) for ids in {0: [7], 1: [0] * 5}.values()`
                out.append((st, Seq(items, kind, not items, taint)))
                continue
            elem = self._element_value(node, st, vals[0]) if len(iters) == 1 else None
            size = vals[0].size if len(iters) == 1 and not node.for_in.ifs \
                and isinstance(vals[0], Seq) else None
            out.append((st, Seq(None, kind, empty, taint, elem, size)))
        return out

    def _elt_values(self, node, st: State, item: Value) -> list | None:
        """``elt`` of ``[elt for target in iterable]`` with ``target`` bound to ``item``, in
        the comprehension's own scope (nothing it binds or writes leaks out); None for a
        comprehension with a filter or an unpacking target."""
        if node.for_in.ifs or type(node.for_in.target) is not cst.Name:
            return None
        return [v for _, v in self.eval(node.elt, self.assign(node.for_in.target, item,
                                                              st.fork()))]

    def _items(self, node, st: State, iterable: Value) -> tuple | None:
        """Each element of the comprehension over a few known items, where each evaluates
        to one value."""
        if not (isinstance(iterable, Seq) and iterable.items is not None
                and len(iterable.items) <= MAX_ITEMS):
            return None
        out = []
        for item in iterable.items:
            values = self._elt_values(node, st, item)
            if values is None or len(values) != 1:
                return None
            out.append(values[0])
        return tuple(out)

    def _element_value(self, node, st: State, iterable: Value) -> Value | None:
        """What every element of the comprehension is: ``elt`` evaluated once with
        ``target`` an element of ``iterable``."""
        item = iterable.elem if isinstance(iterable, Seq) and iterable.elem is not None \
            else Unknown("element", iterable.taint)
        values = self._elt_values(node, st, item)
        return join_all(values) if values else None

    def expr_ListComp(self, node, state):
        return self._comprehension(node, state, "list")

    def expr_SetComp(self, node, state):
        return self._comprehension(node, state, "set")

    def expr_GeneratorExp(self, node, state):
        return self._comprehension(node, state, "gen")

    def expr_DictComp(self, node, state):
        return self._comprehension(node, state, "dict")


def index_rows(key: Value) -> Value | None:
    """How many rows ``tensor[key]`` has, where that is known: as many as an integer index
    tensor has (``logits[target_logits_indices]``, the warmup's ``torch.zeros(n,
    dtype=torch.int32)``: n); a request's own index tensor selects a request-dependent
    count (``values.selected_rows``); a mask or a tensor of unknown type, None."""
    if isinstance(key, Tensor) and dtypes.is_integer(key.dtype):
        return key.batch
    if isinstance(key, Sym) and key.kind == "request" and not key.is_int:
        return selected_rows(key)
    return None


def count(n: Value) -> Value | None:
    """``n`` as a length: a non-negative constant or an integer symbol."""
    if isinstance(n, Const) and type(n.value) is int:
        return Const(max(n.value, 0))
    return n if isinstance(n, Sym) and n.is_int else None


def flattened(seqs: Seq, start: Value) -> Value | None:
    """``sum(lists, [])``: the lists joined, where each is known (items), or where they
    are alike lists of one item each (``[[0] for _ in range(n)]``: n items)."""
    if not (isinstance(start, Seq) and start.items == () and start.kind == "list"):
        return None
    taint = seqs.taint | start.taint
    if seqs.items is not None and all(isinstance(s, Seq) and s.items is not None
                                      for s in seqs.items):
        items = tuple(i for s in seqs.items for i in s.items)
        return Seq(items, "list", not items, taint) if len(items) <= MAX_REPEAT else None
    inner = seqs.elem
    if seqs.items is None and isinstance(inner, Seq) and inner.items is not None \
            and len(inner.items) == 1 and seqs.size is not None:
        return Seq(None, "list", seqs.empty, taint, inner.items[0], seqs.size)
    return None


MAX_ITEMS = 16  # a comprehension over more known items is one alike element
MAX_REPEAT = 4096  # `[0] * n` beyond this many items stays a list of unknown length


def repeated(seq: Value, times: Value) -> Value | None:
    """``[0] * n`` with ``n`` known: the list of its ``n`` copies (a fix's
    ``logprob_token_ids={0: [0] * 8}``)."""
    if not (isinstance(seq, Seq) and seq.items is not None and seq.kind in ("list", "tuple")
            and isinstance(times, Const) and type(times.value) is int):
        return None
    count = max(times.value, 0)
    if len(seq.items) * count > MAX_REPEAT:
        return None
    return Seq(seq.items * count, seq.kind, not (seq.items and count), seq.taint | times.taint)


# Methods that change a list, dict or set in place; ``append`` and the like leave it
# non-empty. The local that names the container is rebound to what it may hold now.
_GROWS = {"append", "insert", "add", "setdefault", "appendleft"}
_MUTATES = _GROWS | {"extend", "update", "clear", "pop", "remove", "discard", "popitem",
                     "sort", "reverse"}


def after_mutation(func: Value, node: cst.Call, state: State, args: list) -> State:
    if not isinstance(func, Builtin):
        return state
    kind, _, method = func.name.partition(".")
    if not (kind in ("seq", "dict") and method in _MUTATES
            and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name):
        return state
    name = node.func.value.value
    old = state.env.get(name)
    if old is None or not isinstance(old, (Seq, Dict)):
        return state
    taint = taint_of(old, *args)
    empty = False if method in _GROWS else (True if method == "clear" else None)
    new = Dict(None, empty, taint) if isinstance(old, Dict) else \
        Seq(None, old.kind, empty, taint)
    return state.evolve(env={**state.env, name: new})
