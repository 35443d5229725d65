"""Abstract value graphs as data: a structural digest, and copies with objects swapped.

Two configuration leaves build their own objects (each its own sampler state, with its
own object ids), so ``values.same`` (identity for objects) cannot tell that two leaves
built alike. ``digest`` walks a value graph the way a program could read it (object
attributes, a tensor's per-request table and what its rows hold, container items, a
bound method's object, a lambda's closure) and returns a nested tuple that two alike
graphs share: objects and tables numbered by first visit (cycles and sharing kept,
object ids left out). What it does not know (syntax nodes, parsed functions) it names
by identity, equal only to itself: an unknown kind of value makes two graphs differ,
never alike. ``objects`` lists the numbered objects and tables in that order, so the
graphs of two equal digests pair up by number.

``copy_graph`` copies a graph, fresh objects and tables for the ones it meets, except
those ``keep`` maps to a replacement (an object of another leaf, a placeholder).

In-process only: syntax nodes and parsed functions are named by ``id()``, which the
leaves of one process share.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from warmlint.interp.tables import Table, new as new_table
from warmlint.resolve import ClassRef, FuncRef
from warmlint.state import Divergence, SymFact
from warmlint.values import (
    Builtin, ClassVal, Const, External, Func, Module, Obj, Seq, Sym, Taint, Value,
)

_FROZEN_TYPES = (Sym, External, Module, ClassVal)

PLAIN = (str, int, float, bool, bytes, type(None))
_WALKED = (Value, Taint, ClassRef, FuncRef)  # dataclasses walked field by field
IMMUTABLE = (Taint, ClassRef, FuncRef)  # hold no value: shared by copies
# warmlint's own records inside values (a Guarded option's facts): by content, as an id
# of one that is gone could be another's
RECORDS = (SymFact, Divergence)

# What the walkers here and ``read_trace.Shallow`` do with a value, by its type: the
# isinstance tests in order, made once per type (``kind_of``) instead of once per value
# (the walks visit ~1 million values in a run on vLLM 0.34.0).
STR, NUMBER, FROZEN, OBJECT, SEQUENCE, SET, MAPPING, FIELDS, OTHER = (
    "str", "number", "frozen", "object", "sequence", "set", "mapping", "fields", "other")
KINDS: dict = {}  # type -> kind
# The types whose values a copy shares as they are (str, numbers, FROZEN), as ``kind_of``
# meets them: ``_Copy`` tests a child's type here before calling itself on it (~60% of
# the values it visits are such).
SHARED: set = set()


def kind_of(t: type) -> str:
    """The kind of values of type ``t`` (kept in ``KINDS``)."""
    if issubclass(t, PLAIN):
        kind = STR if t is str else NUMBER
    elif issubclass(t, IMMUTABLE):
        kind = FROZEN
    elif t is Obj or t is Table:
        kind = OBJECT
    elif t is tuple or t is list:
        kind = SEQUENCE
    elif t is set or t is frozenset:
        kind = SET
    elif t is dict:
        kind = MAPPING
    elif issubclass(t, _WALKED) or t in RECORDS:
        kind = FIELDS
    else:
        kind = OTHER
    KINDS[t] = kind
    if kind is STR or kind is NUMBER or kind is FROZEN:
        SHARED.add(t)
    return kind


def digest(*values) -> tuple:
    """The digest of ``values`` taken together (objects they share count once)."""
    return _Walk().many(values)


_FROZEN: dict = {}  # id -> (value, digest): values that never change, digested once


def memo_digest(value) -> tuple:
    """``digest(value)`` for a module global or cached value; one that cannot change (a
    function, a constant, a tuple or list of such: only dicts and objects are written in
    place) keeps its digest here: a module's table of 200 floats, or the function a call
    names, is read by every call recorded (stop 45: 13% of the fork's
    ``apply_top_k_top_p_triton`` in serving digested globals). ``reset`` forgets them."""
    got = _FROZEN.get(id(value))
    if got is not None and got[0] is value:
        return got[1]
    made = digest(value)
    if _frozen(value):
        _FROZEN[id(value)] = (value, made)
    return made


# FROZEN values (taints, class and function references) are equal when their contents
# are, and a walk digests them by content: once per distinct value (a taint's two sets
# of names were ~40% of the values ``_Walk`` visited on the fork).
_FROZEN_DIGESTS: dict = {}  # value -> its digest


def reset() -> None:
    """Forget the kept digests (a program's analysis starts: they would outlive it)."""
    _FROZEN.clear()
    _FROZEN_DIGESTS.clear()


def _frozen(v) -> bool:
    t = type(v)
    if t is Seq:
        return all(map(_frozen, v.items)) if v.items is not None else (
            (v.elem is None or _frozen(v.elem)) and (v.size is None or _frozen(v.size)))
    if t is Func or t is Builtin:
        return v.bound is None
    return t in _FROZEN_TYPES or isinstance(v, Const)


def digest_in_heap(values: tuple, heap: dict) -> tuple:
    """The digest of ``values`` and of what a path's heap holds for their objects and
    tables (attributes written while an object is being built, rows written on the
    path): the rest of the heap is out of their reach."""
    walk = _Walk()
    head = walk.many(values)
    oids = {o.oid: n for n, o in enumerate(walk.found) if type(o) is Obj}
    held = []
    for key, value in heap.items():
        if key[0] == "rows" and id(key[1]) in walk.seen:
            held.append(("rows", walk.seen[id(key[1])], walk.one(value)))
        elif type(key[0]) is int and key[0] in oids:
            held.append(("attr", oids[key[0]], key[1], walk.one(value)))
    return head, tuple(held)


def objects(*values) -> list:
    """The objects and tables of ``values``, numbered as ``digest`` numbers them."""
    walk = _Walk()
    walk.many(values)
    return walk.found


class _Walk:
    def __init__(self):
        self.seen: dict = {}  # id -> its number
        self.found: list = []  # objects and tables by number

    def many(self, items) -> tuple:
        return tuple(self.one(v) for v in items)

    def one(self, v):
        t = type(v)
        kind = KINDS.get(t) or kind_of(t)
        if kind is STR:
            return v
        if kind is NUMBER:
            return (t.__name__, repr(v))
        if kind is SEQUENCE:
            return (t.__name__, self.many(v))
        if kind is SET:
            return ("set", tuple(sorted(map(repr, self.many(v)))))
        if kind is MAPPING:
            return ("dict", tuple((self.one(k), self.one(x)) for k, x in v.items()))
        if kind is OBJECT:
            return self._numbered(v)
        if kind is FROZEN:  # (Taint, ClassRef, FuncRef: field by field, once)
            got = _FROZEN_DIGESTS.get(v)
            if got is None:
                got = _FROZEN_DIGESTS[v] = (t.__name__,) + self.many(v.__dict__.values())
            return got
        if kind is FIELDS:
            return (t.__name__,) + self.many(v.__dict__.values())
        return ("id", t.__name__, id(v))

    def _numbered(self, v):
        got = self.seen.get(id(v))
        if got is not None:
            return ("ref", got)
        self.seen[id(v)] = n = len(self.found)
        self.found.append(v)
        if type(v) is Table:
            return ("table", n, self.one(v.initial))
        return ("obj", n, self.one(v.cls), v.request, v.lazy, v.label, v.under_construction,
                self.one(v.taint), tuple((k, self.one(x)) for k, x in v.attrs.items()))


@dataclass(frozen=True)
class Slot:
    """A placeholder in a stored copy: the ``n``-th object of the arguments' graph."""

    n: int


@dataclass(frozen=True)
class ValueSlot:
    """A placeholder in a stored copy: the ``n``-th value the arguments and reads held
    (``read_trace.Shallow.values``), replayed as the caller's own value, not an equal
    one: ``values.same`` tells most values apart by identity."""

    n: int


def copy_graph(value, keep, keep_value=None, fresh: bool = False) -> object:
    """A copy of ``value``'s graph: ``keep(v)`` gives the replacement of an object, a
    table or a ``Slot``/``ValueSlot``, or None to copy it (a fresh object id, a fresh
    table); ``keep_value(v)`` likewise for any other value (None: copied). Values that
    hold no object are shared, unless ``fresh``: each copy its own, as a call that ran
    again would make them (``values.same`` tells them apart by identity)."""
    return _Copy(keep, keep_value, fresh).one(value)


class _Copy:
    def __init__(self, keep, keep_value=None, fresh: bool = False):
        self.keep, self.keep_value, self.fresh = keep, keep_value, fresh
        self.done: dict = {}  # id -> copy, for objects, tables, lists, dicts and values

    def one(self, v):
        t = type(v)
        if t in SHARED:
            return v
        kind = KINDS.get(t) or kind_of(t)
        if kind is STR or kind is NUMBER or kind is FROZEN:
            return v
        got = self.done.get(id(v))
        if got is not None:
            return got
        one = self.one
        if t is tuple:  # the same tuple where nothing in it is copied
            out = [x if type(x) in SHARED else one(x) for x in v]
            return v if all(map(operator.is_, out, v)) else tuple(out)
        if t is set or t is frozenset:
            return t(one(x) for x in v)
        if t is list:
            out = self.done[id(v)] = []
            out.extend([x if type(x) in SHARED else one(x) for x in v])
            return out
        if t is dict:
            out = self.done[id(v)] = {}
            for k, x in v.items():
                out[one(k)] = x if type(x) in SHARED else one(x)
            return out
        if t is Obj or t is Table or t is Slot or t is ValueSlot:
            return self._object(v)
        if isinstance(v, Value):
            if self.keep_value is not None:
                out = self.keep_value(v)
                if out is not None:
                    self.done[id(v)] = out
                    return out
            fields = None  # the copied fields, from the first that changed
            for k, x in v.__dict__.items():
                if type(x) not in SHARED:
                    y = one(x)
                    if y is not x:
                        if fields is None:
                            fields = dict(v.__dict__)
                        fields[k] = y
            if fields is None and not self.fresh:
                out = v
            else:
                out = object.__new__(t)
                out.__dict__.update(v.__dict__ if fields is None else fields)
            self.done[id(v)] = out
            return out
        return v  # syntax nodes, parsed functions: shared, never written

    def _object(self, v):
        out = self.keep(v)
        if out is not None:
            self.done[id(v)] = out
            return out
        if type(v) is Table:
            out = self.done[id(v)] = new_table(None)
            out.initial = self.one(v.initial)
            return out
        out = self.done[id(v)] = Obj(v.cls, {}, request=v.request, lazy=v.lazy, label=v.label,
                                     under_construction=v.under_construction, taint=v.taint)
        one = self.one
        out.attrs.update((k, x if type(x) in SHARED else one(x)) for k, x in v.attrs.items())
        return out
