"""Cold calls the leaves make alike: a serving call past a divergence, on plain data, is
replayed from an earlier call's record (this leaf's or an earlier leaf's).

Why: every configuration leaf replays serving, and past a divergence a replay calls the
same helpers with the same tensors in leaf after leaf: vLLM 0.33.0's v1 leaves call
``apply_sampling_constraints``, ``rejection_sample``, ``apply_top_k_top_p`` alike in its
nine speculative leaves; such calls were ~45% of its serving steps (docs/performance.md
stop 44). ``reuse.py`` shares cold calls within one leaf's replay, by identity and only
off the path heap; this shares them across leaves, by what the call read.

A call is tried when its arguments are plain data (``plain``: constants, symbols, tensors
that name no per-request table, functions, classes, modules, open request objects with no
attributes of their own). A later call matches a record when, besides ``reuse.cold_lookup``'s
conditions (call site, callee, depth, configs, pc, the facts the callee read, and how each
unwarmed outcome it met relates to the divergence), the stack, crossed outcomes and
arguments (``alike``: field by field, taints included) agree, and so does everything a
leaf can change under it: the config facts it looked up, the module globals, module-level
expressions and cached calls it read (``built.ReadLog``), and the warmup's answer to each
question it asked (the outcomes taken at a branch under a config; a registration).

Not stored: a call that read an older object (only a global can reach one: read_trace
marks the record dirty), reused a warm call or a cold call that has no record of its own
(their reads are unknown), made a whole-run decision, reported an error, changed the path
heap, or returned an object or a table, or passed one to a sink. Replayed: its paths (the
facts it learned, on the caller's) and its sinks for the caller's divergence (as
``reuse.replay_cold``), and what running it leaves behind: facts looked up, config atoms
consulted, config tests met, globals and cached values computed, pinned probes read,
branch reads, call-reuse reads, steps. ``enabled`` is off only in tests, which compare.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from warmlint.interp import built, read_trace, tables
from warmlint.interp.read_trace import CallLog
from warmlint.interp.reuse import _agree, _rebase
from warmlint.interp.value_digest import memo_digest
from warmlint.values import (
    _OBJ_IDS, Builtin, ClassVal, Const, External, Func, Guarded, IntExpr, Module, Obj, OneOf,
    RowIndex, Seq, Sym, Tensor, Unknown,
)

MAX_STORED = 8  # records per call site, callee and stack


def plain(v) -> bool:
    t = type(v)
    if t is Tensor:
        return v.rows is None and (v.batch is None or plain(v.batch)) \
            and (v.cols is None or plain(v.cols))
    if t is Func or t is Builtin:
        return v.bound is None or plain(v.bound)
    if t is Seq:
        return all(map(plain, v.items)) if v.items is not None else (
            _plain_opt(v.elem) and _plain_opt(v.size))
    if t is Obj:
        return v.request and not v.attrs
    if t is OneOf or t is Guarded:
        return all(map(plain, v.options))
    return t in _PLAIN or isinstance(v, Const)


def _plain_opt(v) -> bool:
    return v is None or plain(v)


_PLAIN = (Sym, IntExpr, RowIndex, ClassVal, Module, External, Unknown)


def guard_keys(values) -> set:
    """The facts a Guarded argument is narrowed by (``guards.narrow``) on a path."""
    return {key for v in values if type(v) is Guarded for guard in v.guards for key, _ in guard}


def alike(x, y) -> bool:
    """Two plain values the callee cannot tell apart."""
    if x is y:
        return True
    t = type(x)
    if t is not type(y) or x.taint != y.taint:
        return False
    if isinstance(x, Const):
        return type(x.value) is type(y.value) and x.value == y.value
    if t is Sym:
        return (x.key, x.kind, x.label, x.is_int) == (y.key, y.kind, y.label, y.is_int)
    if t is Tensor:
        return x.dtype == y.dtype and _alike_opt(x.batch, y.batch) \
            and _alike_opt(x.cols, y.cols)
    if t is IntExpr:
        return x.ops == y.ops and alike(x.base, y.base)
    if t is Func:
        return x.ref == y.ref and x.compiled == y.compiled and _alike_opt(x.bound, y.bound)
    if t is Builtin:
        return x.name == y.name and _alike_opt(x.bound, y.bound)
    if t is Seq:
        return (x.kind == y.kind and x.empty == y.empty and _alike_opt(x.elem, y.elem)
                and _alike_opt(x.size, y.size) and (x.items is None) == (y.items is None)
                and (x.items is None or (len(x.items) == len(y.items)
                                         and all(map(alike, x.items, y.items)))))
    if t is Obj:  # open request objects: their fields are symbols of their label
        return x.cls == y.cls and x.label == y.label
    if t is OneOf or t is Guarded:
        return len(x.options) == len(y.options) and all(map(alike, x.options, y.options)) \
            and (t is OneOf or repr(x.guards) == repr(y.guards))
    if t is Unknown:
        return x.hint == y.hint and x.is_int == y.is_int
    if t is ClassVal:
        return x.ref == y.ref
    if t is Module:
        return x.name == y.name
    if t is External:
        return x.qualname == y.qualname
    return t is RowIndex


def _alike_opt(x, y) -> bool:
    return (x is None) == (y is None) and (x is None or alike(x, y))


@dataclass
class ColdLog(CallLog):
    """A cold call's reads (CallLog's), and what it asked the warmup and met."""

    asked: list = field(default_factory=list)  # (branch key, cfg, answer) | (dotted, None, bool)
    tests: list = field(default_factory=list)  # (node id, config_tests entry)
    shapes: tuple = ()  # which arguments are the same object


@dataclass
class Record:
    args: list
    kwargs: dict
    shapes: tuple
    facts: dict  # the caller's
    cfg: dict
    pc: object
    crossed: frozenset
    inputs: frozenset  # the divergence's request inputs
    depth: int
    reads: set  # what the callee's branches read (reuse.CallReuse.note)
    div_tests: set
    results: list  # (State, Value)
    hits: list
    log: ColdLog
    installs: dict
    read_keys: frozenset
    steps: int
    denied: tuple  # the leaf's denied guards, with their atoms' facts (ConfigDriver._fact)


@dataclass
class _Attempt:
    key: tuple
    log: ColdLog
    denied: tuple
    before: tuple
    steps: int
    memo_keys: dict
    read_keys: set


class SharedColdCalls:
    enabled = True  # off only in tests, which check that it changes no result

    def __init__(self):
        self.stored: dict = {}  # (site id, callee, stack) -> [Record]
        self.hits = 0

    def begin(self, interp, site, ref, args: list, kwargs: dict, state) -> _Attempt | None:
        if not (self.enabled and not state.shadows and all(map(plain, args))
                and all(map(plain, kwargs.values()))):
            return None
        # (an open request is never being built, so the heap holds nothing of it)
        ids = [id(v) for v in list(args) + list(kwargs.values())]
        stack = tuple((f.module, f.qualname, f.warmup, f.lazy_locals is not None)
                      for f in interp.stack)
        log = ColdLog(oid0=next(_OBJ_IDS), tid0=next(tables._TABLE_IDS), heap0=state.heap,
                      shapes=tuple(ids.index(i) for i in ids))
        driver = interp.driver
        return _Attempt((id(site), ref.dotted, stack, frozenset(driver.whole_run)), log,
                        _denied(driver), _effects(interp), interp.steps,
                        {name: len(memo) for name, memo in built.memos(interp)},
                        interp.read_keys)

    def lookup(self, interp, attempt: _Attempt, args: list, kwargs: dict, state):
        depth = len(interp.stack)
        for rec in self.stored.get(attempt.key, ()):
            if (rec.depth == depth and rec.cfg == state.cfg and rec.pc == state.pc
                    and rec.crossed == state.crossed and rec.shapes == attempt.log.shapes
                    and rec.denied == attempt.denied
                    and all(bool(t & rec.inputs) == bool(t & state.div.inputs)
                            for t in rec.div_tests)
                    and len(rec.args) == len(args) and rec.kwargs.keys() == kwargs.keys()
                    and all(map(alike, rec.args, args))
                    and all(alike(rec.kwargs[k], v) for k, v in kwargs.items())
                    and _agree(rec.facts, state.facts, rec.reads)
                    and _agree(rec.facts, state.facts, guard_keys(rec.args))
                    and _agree(rec.facts, state.facts, guard_keys(rec.kwargs.values()))
                    and interp.steps + rec.steps <= interp.settings.max_steps
                    and _leaf_agrees(interp, rec)):
                self.hits += 1
                return rec
        return None

    def open(self, interp, attempt: _Attempt) -> None:
        read_trace.open_log(interp, attempt.log)
        interp.read_keys = set()  # (exactly what the call's branches read: restored at close)

    def close(self, interp, attempt: _Attempt) -> None:
        read_trace.close(interp, attempt.log)
        inner = interp.read_keys
        interp.read_keys = attempt.read_keys | inner
        attempt.read_keys = frozenset(inner)

    def end(self, interp, attempt: _Attempt, call, state, results: list) -> None:
        """Store the call (``call``: the reuse.ColdCall it made) when it can be."""
        log = attempt.log
        if log.dirty or log.trace or log.written or _effects(interp) != attempt.before:
            return
        if any(st.heap is not state.heap and st.heap != state.heap for st, _ in results):
            return
        if not all(plain(v) for _, v in results) \
                or not all(_plain_opt(v) for h in call.hits for v in h.args.values()):
            return
        installs = {}
        for name, memo in built.memos(interp):  # (memos only grow, in order)
            for key in itertools.islice(memo, attempt.memo_keys[name], None):
                if not isinstance(memo[key], built.PLAIN) and built.objects(memo[key]):
                    return
                installs[(name, key)] = memo[key]
        kept = self.stored.setdefault(attempt.key, [])
        call.record = Record(
            list(call.args), dict(call.kwargs), log.shapes, state.facts, state.cfg,
            state.pc, state.crossed, state.div.inputs, call.depth, call.reads,
            call.div_tests, results, call.hits, log, installs, attempt.read_keys,
            interp.steps - attempt.steps, attempt.denied)
        if len(kept) < MAX_STORED:
            kept.append(call.record)


def _denied(driver) -> tuple:
    denied = sorted(driver.denied)
    return tuple(denied), tuple(repr(driver.facts.get(k)) for pair in denied for k in pair)


def _effects(interp) -> tuple:
    driver = interp.driver
    return (len(interp.errors), len(driver.trace), driver.infeasible, driver.truncated,
            len(driver.denied), interp.registering, len(interp.policy.warm_hits))


def _leaf_agrees(interp, rec: Record) -> bool:
    """What the leaf decides under the call is as it was for the record."""
    warm = interp.policy.warm
    for key, cfg, answer in rec.log.asked:
        now = (key in warm.registry) if cfg is None else warm.warm_outcomes(key, cfg)
        if now != answer:
            return False
    return built.reads_agree(interp, rec.log, rec.installs)


def asked(key, cfg, answer) -> None:
    """The serving pass asked its warmup (ServingPass): every open cold record notes it."""
    for log in read_trace.OPEN:
        log.asked.append((key, cfg, answer))


def tested(node_id: int, entry: tuple) -> None:
    for log in read_trace.OPEN:
        log.tests.append((node_id, entry))


def call(interp, reuse, site, ref, args: list, kwargs: dict, state, run) -> list:
    """A cold call (calls.py): replayed from a record, or ``run()`` (recorded where it
    can be), with ``reuse`` (the leaf's CallReuse) keeping its own accounts."""
    shared = interp.memo.cold
    attempt = shared.begin(interp, site, ref, args, kwargs, state) \
        if shared is not None else None
    if attempt is not None:
        rec = shared.lookup(interp, attempt, args, kwargs, state)
        if rec is not None:
            return interp._reused(state, *replay(interp, rec, state))
        shared.open(interp, attempt)
    before = len(interp.policy.hits_of(state))
    reuse.begin_cold()
    try:
        results = run()
    finally:
        if attempt is not None:
            shared.close(interp, attempt)
    made = reuse.end_cold(site, ref, args, kwargs, state, len(interp.stack), results,
                          interp.policy.hits_of(state)[before:], keep=not state.heap)
    if attempt is not None:
        shared.end(interp, attempt, made, state, results)
    return results


def warm_call(interp, reuse, site, ref, args: list, kwargs: dict, state, run) -> list:
    """A call on a warm serving path, ``run()``; recorded (``WarmCall.log``) where its
    arguments are plain data, so that a cold call reusing it can be recorded too."""
    log = None
    if interp.memo.cold is not None and interp.memo.cold.enabled \
            and all(map(plain, args)) and all(map(plain, kwargs.values())):
        log = ColdLog(oid0=next(_OBJ_IDS), tid0=next(tables._TABLE_IDS), heap0=state.heap)
        read_trace.open_log(interp, log)
    hits0 = len(interp.policy.warm_hits)  # (``before`` is the memo's: cached.store)
    reuse.begin_warm()
    try:
        results = run()
    finally:
        if log is not None:
            read_trace.close(interp, log)
    made = reuse.end(site, ref, args, kwargs, state, results, len(interp.stack),
                     interp.policy.warm_hits[hits0:])
    if made is not None and log is not None and not (log.dirty or log.trace or log.written):
        made.log = log
    return results


def reused_warm(interp, call) -> None:
    """A warm call reused on a cold path inside calls being recorded: they read what it
    read, as the leaf holds it now (it ran before them); one without a log read what is
    not known."""
    log = call.log
    if log is None:
        read_trace.taint("a warm call reused without a record")
        return
    driver, memos_now = interp.driver, dict(built.memos(interp))
    for other in read_trace.OPEN:
        for key, (sym, _) in log.facts.items():
            if key not in other.facts:
                other.facts[key] = (sym, repr(driver.peek(sym)))
        for name, key in log.memos:
            if (name, key) not in other.memos:
                now = memos_now[name].get(key, _MISSING)
                other.memos[(name, key)] = None if now is _MISSING \
                    else ("pre", memo_digest(now))
        for key, where in log.consulted.items():
            other.consulted.setdefault(key, where)
        other.asked += log.asked
        other.tests += log.tests
        other.pins |= log.pins


_MISSING = object()


def reused_cold(call) -> None:
    """The leaf's own cold call reused (reuse.cold_lookup) inside calls being recorded:
    its record's reads are theirs; one without a record read what is not known."""
    if call.record is None:
        read_trace.taint("a cold call reused without a record")
    else:
        merge_reads(call.record)


def replay(interp, rec: Record, state) -> tuple[list, list]:
    """The record's paths and sinks for ``state`` (as ``reuse.replay_cold``, on the
    caller's heap), after leaving behind what running the call would have."""
    replayed(interp, rec)
    paths = [(state.evolve(facts=_rebase(st.facts, rec, state), cfg=st.cfg), value)
             for st, value in rec.results]
    return paths, [replace(hit, facts=_rebase(hit.facts, rec, state),
                           stack=hit.stack[rec.depth:]) for hit in rec.hits]


def merge_reads(rec: Record) -> None:
    """An enclosing record being made read what ``rec``'s call read."""
    log = rec.log
    for other in read_trace.OPEN:
        log.merge_into(other)
        other.asked += log.asked
        other.tests += log.tests
        other.pins |= log.pins


def replayed(interp, rec: Record) -> None:
    """What a replayed record leaves behind, in the leaf and in the open records."""
    driver, warm, log = interp.driver, interp.policy.warm, rec.log
    merge_reads(rec)
    memos_now = dict(built.memos(interp))
    for (name, key), value in rec.installs.items():
        memos_now[name].setdefault(key, value)
    for sym, _ in log.facts.values():
        driver.fact(sym)
    for key, where in log.consulted.items():
        driver.consulted.setdefault(key, where)
    driver.pins_read |= log.pins
    for node_id, entry in log.tests:
        if node_id not in warm._tested:
            warm._tested.add(node_id)
            warm.config_tests.append(entry)
    interp.read_keys |= rec.read_keys
    interp.reuse.note(rec.reads)
    for tests in interp.reuse.div_tests:
        tests |= rec.div_tests
    interp.steps += rec.steps
