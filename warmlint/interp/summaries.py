"""Calls an earlier call made alike are replayed from its summary, not interpreted again.

Why: every configuration leaf runs the warmups from the start, and most of what they do
does not depend on the leaf: vLLM 0.34.0's v2 runner publishes its sampler's staged
writes (``apply_staged_writes``) and adds the warmup's requests (``add_request``) the same
way in nearly every leaf, and runs the same sampler calls in many. ``built.py`` copies
objects the leaves *build* alike, keyed by everything their constructor could reach; a
method call cannot be keyed that way (its receiver is the whole sampler state: digesting
it costs as much as interpreting the call, docs/performance.md stop 39). So a call is keyed by what
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
value, the attributes it wrote on older objects (their final values), the sinks it reached
(for the entry being interpreted now: ``WarmupPass.sink``), with its own objects copied
fresh and older ones swapped for the caller's; and what the run would have left behind
(outcomes taken, facts looked up, globals and cached values computed, config tests met,
pinned probes read, steps counted), as ``built.py`` replays it.

Not stored (``dirty`` or failing ``_summary``): a call that reported an error, recorded an
entry, a step or a registration, took a config decision, read a lazily built runner
attribute or local, read or wrote a dict in place, learned a fact or left the divergence
state on a path, dropped a path-heap entry, or returns, writes or passes to a sink an
older object it never read. Only the warmup pass uses it (serving has its own call reuse,
``reuse.py``), in ``built.py``'s context or inside a warmup's sampler call. ``enabled``
is off only in tests, which run every fixture both ways and compare.
In-process only: syntax nodes are compared by identity, so summaries do not outlive a run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from warmlint.interp import built, read_trace, tables
from warmlint.interp.read_trace import (
    MISSING, CallLog, Shallow, close, open_log, raw, reread, write_attr,
)
from warmlint.interp.value_digest import PLAIN, Slot, copy_graph
from warmlint.values import Obj

CANDIDATE_STEPS = 100  # a function's call worth the bookkeeping


@dataclass
class Summary:
    reads: CallLog
    # ([(cfg, heap entries, value) per path], [(object, name, value)], [sink arguments])
    snapshot: tuple
    hits: list  # the warmup's sinks it recorded (their arguments in the snapshot)
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
    hits: int  # the warmup's sinks recorded before it
    sinks: int  # interp.sinks_hit before it


class CallSummaries(built.Reuses):
    """Calls, keyed by what they read (``begin``, ``trace_agrees``)."""

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
        if not (self.tries(ref) and built.plain_context(interp, state, in_entries=True)):
            return None
        policy, driver = interp.policy, interp.driver
        log = CallLog.starting(state)
        stack = tuple((f.module, f.qualname, f.warmup, f.lazy_locals is not None)
                      for f in interp.stack)
        try:
            head = log.walk.one((list(args), kwargs))
        except RecursionError:
            return None
        key = (ref.dotted, stack, id(policy.current), head,
               repr(sorted(state.facts.items())), repr(sorted(state.cfg.items())),
               repr(state.pc), frozenset(driver.whole_run))
        attempt = _Attempt(key, log, built.effects(interp, sinks=False), interp.steps,
                           len(driver.trace), frozenset(policy._tested), len(policy.config_tests),
                           len(driver.consulted),
                           {name: set(memo) for name, memo in built.memos(interp)},
                           frozenset(interp.read_keys), len(policy.hits), interp.sinks_hit)
        open_log(interp, log)
        return attempt

    def lookup(self, interp, attempt: _Attempt, state) -> list | None:
        def take(summary: Summary):
            found = trace_agrees(summary.reads, attempt.log.walk, state)
            if found is None or not built.agrees(interp, summary):
                return None
            return found, copy_graph(summary.snapshot,
                                     lambda v: found[v.n] if type(v) is Slot else None)

        got = self.first(interp, attempt.key, take)
        if got is None:
            return None
        close(interp, attempt.log)
        summary, (found, copied) = got
        return _replay(interp, summary, state, copied, found)

    def end(self, interp, ref, attempt: _Attempt | None, state, results: list | None,
            steps: int) -> None:
        """After a call (``results`` None: it raised): learn its cost; store it."""
        if attempt is None:
            self.untried(ref, steps, CANDIDATE_STEPS)
            return
        close(interp, attempt.log)
        self.keep(ref, attempt.key,
                  lambda: _summary(interp, attempt, state, results) if results else None)


def trace_agrees(log: CallLog, head: Shallow, state) -> list | None:
    """The objects and tables the stored reads name, as they are before this call, when
    every read gives what it gave the stored call; else None."""
    walk = trace_walk(log, head, state)
    return None if walk is None else walk.found


def trace_walk(log: CallLog, head: Shallow, state) -> Shallow | None:
    """``trace_agrees``'s walk (its objects, tables and, where numbered, values), or None."""
    walk = head.copy()
    for item in log.trace:
        if item[0] == "attr":
            now = walk.one(raw(state, walk.found[item[1]], item[2]))
            if now != item[3]:
                return None
        elif walk.one(state.heap.get(walk.found[item[1]].key, MISSING)) != item[2]:
            return None
    return walk


def _summary(interp, attempt: _Attempt, state, results: list) -> Summary | None:
    log, driver = attempt.log, interp.driver
    if log.dirty or not results or built.effects(interp, sinks=False) != attempt.before \
            or len(driver.trace) != attempt.trace:
        return None
    hits = interp.policy.hits[attempt.hits:]
    if interp.sinks_hit - attempt.sinks != len(hits):
        return None  # (a sink on a shadowed path: recorded twice)
    numbers = log.walk.seen
    by_oid = {o.oid: o for o in log.walk.found if type(o) is Obj}
    paths = []
    for after, value in results:
        if after.facts != state.facts or after.div is not None or after.shadows \
                or after.crossed or not after.heap.keys() >= state.heap.keys():
            return None
        heap = []
        for key, held in after.heap.items():
            if state.heap.get(key, MISSING) is held:
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
        snapshot = copy_graph((paths, writes, [h.args for h in hits]), keep)
    except _Foreign:
        return None
    policy = interp.policy
    return Summary(log, snapshot, [replace(h, args={}, entry=None) for h in hits], installs,
                   list(driver.consulted.items())[attempt.consulted:],
                   frozenset(policy._tested) - attempt.tested,
                   policy.config_tests[attempt.tests:],
                   frozenset(interp.read_keys) - attempt.read_keys,
                   interp.steps - attempt.steps)


class _Foreign(Exception):
    """An older object the call never read (a global's): the copy cannot name it."""


def _replay(interp, summary: Summary, state, copied: tuple, found: list) -> list:
    paths, writes, hit_args = copied
    reread(summary.reads, found, state)  # an enclosing call read what this one read
    for obj, name, value in writes:
        write_attr(obj, name, state)
        obj.attrs[name] = value
    built.replay_reads(interp, summary)
    for hit, args in zip(summary.hits, hit_args):  # the stack is the same (the key's)
        interp.policy.sink(interp, state, replace(hit, args=args))
    interp.sinks_hit += len(summary.hits)
    interp.driver.pins_read |= summary.reads.pins
    for log in read_trace.OPEN:
        log.pins |= summary.reads.pins
    out = []
    for cfg, heap, value in paths:
        entries = {}
        for key, held in heap:
            entries[key if key[0] == "rows" else (key[1].oid, key[2])] = held
        out.append((state.evolve(cfg=dict(cfg), heap={**state.heap, **entries}
                                 if entries else state.heap), value))
    return out
