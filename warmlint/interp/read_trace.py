"""What a call read, as it runs: the record ``summaries.py`` keys a call summary by.

The interpreter calls these hooks where it reads or writes a place of an object that
existed before a call being recorded (an attribute: the path heap's entry, else the
object's own; a per-request table's rows), while any record is open (``OPEN``). A
place is recorded at its first read, unless the call wrote it first (then the value is
the call's own work); each value shallow (``Shallow``: objects and tables by number, not
their contents, which are read place by place). An older object reached through no
recorded read (a global's) cannot be named, so the record is then ``dirty``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint.interp import built, tables
from warmlint.interp.reuse import CALLS
from warmlint.interp.value_digest import (
    FIELDS, FROZEN, KINDS, MAPPING, NUMBER, OBJECT, SEQUENCE, SET, STR, kind_of,
)
from warmlint.values import _OBJ_IDS, Obj, Value

OPEN: list = []  # the CallLogs of the calls being recorded, innermost last

MISSING = object()


class Shallow:
    """Values as a call read them: objects and tables numbered by first appearance (with
    their class and flags, not their contents: those are read attribute by attribute)."""

    def __init__(self, values: bool = False):
        self.seen: dict = {}  # id -> number
        self.found: list = []  # objects and tables by number
        self.held: list = []  # what it named by identity
        # With ``values``: every other value by number too (id -> number, and the values),
        # a repeated one named by its number (warm_share.py replays them as the caller's).
        self.value_ids: dict | None = {} if values else None
        self.values: list = []

    def one(self, v):
        t = type(v)
        kind = KINDS.get(t) or kind_of(t)
        if kind is STR or kind is FROZEN:  # taints, class and function refs: as such
            return v
        if kind is NUMBER:
            return (t.__name__, repr(v))
        if kind is OBJECT:
            n = self.seen.get(id(v))
            if n is not None:
                return ("ref", n)
            self.seen[id(v)] = n = len(self.found)
            self.found.append(v)
            if t is tables.Table:
                return ("table", n, self.one(v.initial))
            if v.request:  # an open request: its reads are symbols, but for what it holds
                return ("obj", n, v.cls, True, v.label, v.taint,
                        tuple((k, self.one(x)) for k, x in v.attrs.items()))
            return ("obj", n, v.cls, v.request, v.lazy, v.label, v.under_construction,
                    v.taint)
        if kind is SEQUENCE:
            return (t.__name__,) + tuple(self.one(x) for x in v)
        if kind is SET:
            return ("set", tuple(sorted(map(repr, (self.one(x) for x in v)))))
        if kind is MAPPING:
            return ("dict",) + tuple((self.one(k), self.one(x)) for k, x in v.items())
        if kind is FIELDS:
            if self.value_ids is not None and isinstance(v, Value):
                n = self.value_ids.get(id(v))
                if n is not None:
                    return ("value", n)
                self.value_ids[id(v)] = len(self.values)
                self.values.append(v)
            return (t.__name__,) + tuple(self.one(x) for x in v.__dict__.values())
        if v is MISSING:
            return ("missing",)
        self.held.append(v)  # its id stays its own while a stored record names it
        return ("id", id(v))  # syntax nodes, parsed functions: equal only to themselves

    def copy(self) -> "Shallow":
        other = Shallow()
        other.seen, other.found = dict(self.seen), list(self.found)
        if self.value_ids is not None:
            other.value_ids, other.values = dict(self.value_ids), list(self.values)
        return other


@dataclass
class CallLog(built.ReadLog):
    """What one call read (``built.ReadLog``'s fields, plus places of older objects)."""

    walk: Shallow = field(default_factory=Shallow)
    trace: list = field(default_factory=list)  # ("attr", n, name, value) | ("rows", n, value)
    places: set = field(default_factory=set)  # (n, name) / n already in the trace
    written: dict = field(default_factory=dict)  # (id(obj), name) -> obj it wrote in place
    oid0: int = 0
    tid0: int = 0
    heap0: dict = field(default_factory=dict)  # the path heap at the call
    pins: set = field(default_factory=set)  # pinned probes it called (ConfigDriver.pins_read)
    calls0: int = 0  # reuse.CALLS when it opened: warm calls made since ran inside it
    # Dicts written in place, where the call keeps them (warm_share.py): id -> (dict,
    # {keys}); None: such a write makes the record dirty.
    items_written: dict | None = None

    @classmethod
    def starting(cls, state):
        """The record of a call starting on ``state``: objects and tables made from now
        on are its own."""
        return cls(oid0=next(_OBJ_IDS), tid0=next(tables._TABLE_IDS), heap0=state.heap,
                   calls0=next(CALLS))


# -- the hooks: where the interpreter reads or writes an older object's place ---------------
def raw(state, obj: Obj, name: str):
    got = state.heap.get((obj.oid, name), MISSING)
    return obj.attrs.get(name, MISSING) if got is MISSING else ("heap", got)


def read_attr(obj: Obj, name: str, state) -> None:
    """``obj.name`` read (attrs.py): its first read, for each call that did not write it."""
    if obj.lazy or obj.request:
        return  # lazy: such a read taints (lazy_root.py); request: a symbol of its name
    for log in OPEN:
        if obj.oid > log.oid0 or (id(obj), name) in log.written:
            continue
        key = (obj.oid, name)
        held = state.heap.get(key, MISSING)
        if held is not MISSING and held is not log.heap0.get(key, MISSING):
            continue  # the call's own write on this path
        n = log.walk.seen.get(id(obj))
        if n is None:  # reached through no read (a global's object): the log cannot name it
            log.dirty = log.dirty or "an older object reached through no read"
        elif (n, name) not in log.places:
            log.places.add((n, name))
            log.trace.append(("attr", n, name, log.walk.one(raw(state, obj, name))))


def reread(log: CallLog, found: list, state) -> None:
    """A replayed call's reads, again on ``found`` (the objects and tables its trace
    names, as the caller has them), for the records still open around it."""
    for item in log.trace:
        if item[0] == "attr":
            read_attr(found[item[1]], item[2], state)
        else:
            read_rows(state, found[item[1]])


def write_attr(obj: Obj, name: str, state) -> None:
    """``obj.name = ...`` on an object not being built: a weak write, which reads the
    value there (attrs.py); the final value is the call's to replay."""
    read_attr(obj, name, state)
    for log in OPEN:
        if obj.oid <= log.oid0:
            log.written.setdefault((id(obj), name), obj)


def read_rows(state, table) -> None:
    """A per-request table's rows read (tables.element)."""
    for log in OPEN:
        if table.tid > log.tid0:
            continue
        held = state.heap.get(table.key, MISSING)
        if held is not MISSING and held is not log.heap0.get(table.key, MISSING):
            continue
        n = log.walk.seen.get(id(table))
        if n is None:
            log.dirty = log.dirty or "an older table reached through no read"
        elif n not in log.places:
            log.places.add(n)
            log.trace.append(("rows", n, log.walk.one(held)))


def write_item(container, key) -> None:
    """``container[key] = ...`` on a dict in place (attrs.py): a record that keeps such
    writes (warm_share.py) notes it; any other is dirty."""
    for log in OPEN:
        if log.items_written is None:
            log.dirty = log.dirty or "a dict written in place"
        else:
            log.items_written.setdefault(id(container), (container, set()))[1].add(key)


def taint(why: str) -> None:
    for log in OPEN:
        log.dirty = log.dirty or why


# -- opening and closing records -----------------------------------------------------------
def open_log(interp, log: CallLog) -> None:
    interp.driver.read_logs.append(log)  # built.py's hooks: facts, memos, outcomes
    OPEN.append(log)
    tables.rows_read = read_rows


def close(interp, log: CallLog) -> None:
    interp.driver.read_logs.remove(log)
    OPEN.remove(log)
    if not OPEN:
        tables.rows_read = None


def built_copied(found: list) -> None:
    """A construction copied (built.py) read its arguments' whole graph (``found``: its
    objects and tables), which the open records cannot name read by read: a call that
    passed it an older object is not stored."""
    for log in OPEN:
        if any((o.tid <= log.tid0) if type(o) is tables.Table else (o.oid <= log.oid0)
               for o in found):
            log.dirty = log.dirty or "a copied construction of older objects"


def reset() -> None:
    """No call is being recorded (a run's start: an earlier one may have stopped inside)."""
    OPEN.clear()
    tables.rows_read = None
