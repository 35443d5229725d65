"""Calls an earlier call made alike are replayed from its summary, not interpreted again.

Why: every configuration leaf runs the warmups from the start, and most of what they do
does not depend on the leaf: vLLM 0.34.0's v2 runner publishes its sampler's staged
writes (``apply_staged_writes``) and adds the warmup's requests (``add_request``) the same
way in nearly every leaf, a sixth of the serial analysis. ``built.py`` copies objects the
leaves *build* alike, keyed by everything their constructor could reach; a method call
cannot be keyed that way (its receiver is the whole sampler state: digesting it costs as
much as interpreting the call, docs/performance.md stop 39). So a call is keyed by what
it *read* (issue 16's summaries, measured in stop 40 by ``bench/reuse_readsets.py``):

- the callee, the stack, the warmup, the path's facts, configs and pc (the key), and its
  arguments, shallow: an object is a number, by first appearance, with its class and flags;
- in order, the first read of each attribute of an object that existed before the call
  (``attr``: the path heap's entry, else the object's own) and of each per-request table's
  rows (``rows``), where the call had not written that place itself; each value shallow as
  the arguments, so the objects it holds are numbered for the reads after it;
- what ``built.ReadLog`` records for constructions: config facts looked up, module
  globals, module-level expressions and cached calls read, the warmup outcomes taken.

A later call with the same key whose reads all agree (each place read again, before the
call, gives the same shallow value) would run the same statements on the same values, so
it takes the stored result instead: each path's configs, path-heap entries and return
value, the attributes it wrote on older objects (their final values), with its own objects
copied fresh and older ones swapped for the caller's; and what the run would have left
behind (outcomes taken, facts looked up, globals and cached values computed, config tests
met, steps counted), as ``built.py`` replays it.

Not stored (``dirty`` or failing ``_summary``): a call that reached a sink, reported an
error, recorded an entry, a step or a registration, took a config decision, read a lazily
built runner attribute or local, read or wrote a dict in place, learned a fact or left
the divergence state on a path, dropped a path-heap entry, or returns or writes an older
object it never read. Only the warmup pass uses it, in the context ``built.py`` needs.
``enabled`` is off only in tests, which run every fixture both ways and compare.
In-process only: syntax nodes are compared by identity, so summaries do not outlive a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint.interp import built, tables
from warmlint.interp.value_digest import _IMMUTABLE, PLAIN, Slot, copy_graph
from warmlint.values import _OBJ_IDS, Obj, Value

CANDIDATE_STEPS = 100  # a function's call worth the bookkeeping
MAX_STORED = 4  # per key
OPEN: list = []  # the CallLogs of the calls being recorded, innermost last
_MISSING = object()


class Shallow:
    """Values as a call read them: objects and tables numbered by first appearance (with
    their class and flags, not their contents: those are read attribute by attribute)."""

    def __init__(self):
        self.seen: dict = {}  # id -> number
        self.found: list = []  # objects and tables by number

    def one(self, v):
        if isinstance(v, PLAIN):
            return v if type(v) is str else (type(v).__name__, repr(v))
        if isinstance(v, _IMMUTABLE):  # taints, class and function refs: compared as such
            return v
        t = type(v)
        if t is Obj or t is tables.Table:
            n = self.seen.get(id(v))
            if n is not None:
                return ("ref", n)
            self.seen[id(v)] = n = len(self.found)
            self.found.append(v)
            if t is tables.Table:
                return ("table", n, self.one(v.initial))
            return ("obj", n, v.cls, v.request, v.lazy, v.label, v.under_construction,
                    v.taint)
        if t is tuple or t is list:
            return (t.__name__,) + tuple(self.one(x) for x in v)
        if t is set or t is frozenset:
            return ("set", tuple(sorted(map(repr, (self.one(x) for x in v)))))
        if t is dict:
            return ("dict",) + tuple((self.one(k), self.one(x)) for k, x in v.items())
        if isinstance(v, Value):
            return (t.__name__,) + tuple(self.one(x) for x in v.__dict__.values())
        if v is _MISSING:
            return ("missing",)
        return ("id", id(v))  # syntax nodes, parsed functions, refs: equal only to themselves

    def copy(self) -> "Shallow":
        other = Shallow()
        other.seen, other.found = dict(self.seen), list(self.found)
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


# -- the hooks: where the interpreter reads or writes an older object's place ---------------
def _raw(state, obj: Obj, name: str):
    got = state.heap.get((obj.oid, name), _MISSING)
    return obj.attrs.get(name, _MISSING) if got is _MISSING else ("heap", got)


def read_attr(obj: Obj, name: str, state) -> None:
    """``obj.name`` read (attrs.py): its first read, for each call that did not write it."""
    if obj.lazy or obj.request:
        return  # lazy: such a read taints (lazy_root.py); request: a symbol of its name
    for log in OPEN:
        if obj.oid > log.oid0 or (id(obj), name) in log.written:
            continue
        key = (obj.oid, name)
        held = state.heap.get(key, _MISSING)
        if held is not _MISSING and held is not log.heap0.get(key, _MISSING):
            continue  # the call's own write on this path
        n = log.walk.seen.get(id(obj))
        if n is None:  # reached through no read (a global's object): the log cannot name it
            log.dirty = log.dirty or "an older object reached through no read"
        elif (n, name) not in log.places:
            log.places.add((n, name))
            log.trace.append(("attr", n, name, log.walk.one(_raw(state, obj, name))))


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
        held = state.heap.get(table.key, _MISSING)
        if held is not _MISSING and held is not log.heap0.get(table.key, _MISSING):
            continue
        n = log.walk.seen.get(id(table))
        if n is None:
            log.dirty = log.dirty or "an older table reached through no read"
        elif n not in log.places:
            log.places.add(n)
            log.trace.append(("rows", n, log.walk.one(held)))


def taint(why: str) -> None:
    for log in OPEN:
        log.dirty = log.dirty or why


# -- stored calls ------------------------------------------------------------------------
@dataclass
class Summary:
    reads: CallLog
    snapshot: tuple  # ([(cfg, heap entries, value) per path], [(object, name, value)])
    installs: dict  # (which memo, key) -> value computed inside
    consulted: list
    tested: frozenset
    tests: list
    read_keys: frozenset
    steps: int
    decisions: tuple = ()  # none: a call that decides is not stored (built.agrees reads it)


@dataclass
class _Attempt:
    key: tuple
    log: CallLog
    before: tuple
    steps: int
    trace: int
    tested: frozenset
    tests: int
    consulted: int
    memo_keys: dict
    read_keys: frozenset


class CallSummaries:
    enabled = True  # off only in tests, which check that it changes no result

    def __init__(self):
        self.costly: set = set()  # functions (dotted) whose call took many steps
        self.failed: dict = {}  # function -> calls that could not be stored
        self.stored: dict = {}  # key -> [Summary]
        self.hits = 0

    def run(self, interp, ref, args: list, kwargs: dict, state, body) -> list:
        """The call's paths: replayed from an alike earlier call, or ``body()`` run (and
        stored when it can be)."""
        steps = interp.steps
        attempt = self.begin(interp, ref, args, kwargs, state)
        if attempt is not None:
            reused = self.lookup(interp, attempt, state)
            if reused is not None:
                return reused
        results = None
        try:
            results = body()
        finally:
            self.end(interp, ref, attempt, state, results, interp.steps - steps)
        return results

    def begin(self, interp, ref, args: list, kwargs: dict, state) -> _Attempt | None:
        if not (self.enabled and ref.dotted in self.costly
                and self.failed.get(ref.dotted, 0) < 3 and built.plain_context(interp, state)):
            return None
        policy, driver = interp.policy, interp.driver
        log = CallLog(oid0=next(_OBJ_IDS), tid0=next(tables._TABLE_IDS), heap0=state.heap)
        stack = tuple((f.module, f.qualname, f.warmup, f.lazy_locals is not None)
                      for f in interp.stack)
        try:
            head = log.walk.one((list(args), kwargs))
        except RecursionError:
            return None
        key = (ref.dotted, stack, id(policy.current), head,
               repr(sorted(state.facts.items())), repr(sorted(state.cfg.items())),
               repr(state.pc), frozenset(driver.whole_run))
        attempt = _Attempt(key, log, built.effects(interp), interp.steps, len(driver.trace),
                           frozenset(policy._tested), len(policy.config_tests),
                           len(driver.consulted),
                           {name: set(memo) for name, memo in built.memos(interp)},
                           frozenset(interp.read_keys))
        driver.read_logs.append(log)
        OPEN.append(log)
        tables.rows_read = read_rows
        return attempt

    def lookup(self, interp, attempt: _Attempt, state) -> list | None:
        for summary in self.stored.get(attempt.key, ()):
            if interp.steps + summary.steps > interp.settings.max_steps:
                continue  # the run would stop inside it: run it
            try:
                found = _reads_agree(summary.reads, attempt.log.walk, state)
                if found is None or not built.agrees(interp, summary):
                    continue
                copied = copy_graph(summary.snapshot,
                                    lambda v: found[v.n] if type(v) is Slot else None)
            except RecursionError:
                continue
            self.hits += 1
            _close(interp, attempt.log)
            return _replay(interp, summary, state, copied, found)
        return None

    def end(self, interp, ref, attempt: _Attempt | None, state, results: list | None,
            steps: int) -> None:
        """After a call (``results`` None: it raised): learn its cost; store it."""
        if attempt is None:
            if steps >= CANDIDATE_STEPS:
                self.costly.add(ref.dotted)
            return
        _close(interp, attempt.log)
        try:
            summary = None if results is None else _summary(interp, attempt, state, results)
        except RecursionError:
            summary = None
        if summary is None:
            self.failed[ref.dotted] = self.failed.get(ref.dotted, 0) + 1
            return
        self.failed.pop(ref.dotted, None)
        kept = self.stored.setdefault(attempt.key, [])
        if len(kept) < MAX_STORED:
            kept.append(summary)


def _close(interp, log: CallLog) -> None:
    interp.driver.read_logs.remove(log)
    OPEN.remove(log)
    if not OPEN:
        tables.rows_read = None


def built_copied(args: list, kwargs: dict) -> None:
    """A construction copied (built.py) read its arguments' whole graph, which the open
    records cannot name read by read: a call that passed it an older object is not stored."""
    found = built.objects(list(args), kwargs)
    for log in OPEN:
        if any((o.tid <= log.tid0) if type(o) is tables.Table else (o.oid <= log.oid0)
               for o in found):
            log.dirty = log.dirty or "a copied construction of older objects"


def reset() -> None:
    """No call is being recorded (a run's start: an earlier one may have stopped inside)."""
    OPEN.clear()
    tables.rows_read = None


def _reads_agree(log: CallLog, head: Shallow, state) -> list | None:
    """The objects and tables the stored reads name, as they are before this call, when
    every read gives what it gave the stored call; else None."""
    walk = head.copy()
    for item in log.trace:
        if item[0] == "attr":
            now = walk.one(_raw(state, walk.found[item[1]], item[2]))
            if now != item[3]:
                return None
        elif walk.one(state.heap.get(walk.found[item[1]].key, _MISSING)) != item[2]:
            return None
    return walk.found


def _summary(interp, attempt: _Attempt, state, results: list) -> Summary | None:
    log, driver = attempt.log, interp.driver
    if log.dirty or not results or built.effects(interp) != attempt.before \
            or len(driver.trace) != attempt.trace:
        return None
    numbers = log.walk.seen
    by_oid = {o.oid: o for o in log.walk.found if type(o) is Obj}
    paths = []
    for after, value in results:
        if after.facts != state.facts or after.div is not None or after.shadows \
                or after.crossed or not after.heap.keys() >= state.heap.keys():
            return None
        heap = []
        for key, held in after.heap.items():
            if state.heap.get(key, _MISSING) is held:
                continue
            if key[0] == "rows":
                heap.append((key, held))
            elif key[0] in by_oid:  # an older object being built (the call is in its __init__)
                heap.append((("attr", by_oid[key[0]], key[1]), held))
            else:
                return None
        paths.append((after.cfg, heap, value))
    installs = {}
    for name, memo in built.memos(interp):
        for key in memo.keys() - attempt.memo_keys[name]:
            if not isinstance(memo[key], PLAIN) and built.objects(memo[key]):
                return None  # a global or cached value holding an object
            installs[(name, key)] = memo[key]
    writes = [(obj, name, obj.attrs[name]) for (_, name), obj in log.written.items()]

    def keep(v):
        if id(v) in numbers:
            return Slot(numbers[id(v)])
        if (v.tid if type(v) is tables.Table else v.oid) > (
                log.tid0 if type(v) is tables.Table else log.oid0):
            return None  # its own: copied
        raise _Foreign

    try:
        snapshot = copy_graph((paths, writes), keep)
    except _Foreign:
        return None
    policy = interp.policy
    return Summary(log, snapshot, installs,
                   list(driver.consulted.items())[attempt.consulted:],
                   frozenset(policy._tested) - attempt.tested,
                   policy.config_tests[attempt.tests:],
                   frozenset(interp.read_keys) - attempt.read_keys,
                   interp.steps - attempt.steps)


class _Foreign(Exception):
    """An older object the call never read (a global's): the copy cannot name it."""


def _replay(interp, summary: Summary, state, copied: tuple, found: list) -> list:
    paths, writes = copied
    for item in summary.reads.trace:  # an enclosing call read what this one read
        if item[0] == "attr":
            read_attr(found[item[1]], item[2], state)
        else:
            read_rows(state, found[item[1]])
    for obj, name, value in writes:
        write_attr(obj, name, state)
        obj.attrs[name] = value
    built.replay_reads(interp, summary)
    interp.driver.pins_read |= summary.reads.pins
    for log in OPEN:
        log.pins |= summary.reads.pins
    out = []
    for cfg, heap, value in paths:
        entries = {}
        for key, held in heap:
            entries[key if key[0] == "rows" else (key[1].oid, key[2])] = held
        out.append((state.evolve(cfg=dict(cfg), heap={**state.heap, **entries}
                                 if entries else state.heap), value))
    return out
