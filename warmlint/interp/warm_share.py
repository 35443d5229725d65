"""Warm serving calls the leaves make alike: a call on a warm serving path is replayed from
an earlier leaf's record, keyed by what it read, with the divergences it opened.

Why: every configuration leaf replays serving from the start, and most leaves call the
sampler's expensive helpers on the same values while the path is still warm: on vLLM
0.33.0 the 37 warm calls of ``Sampler.sample`` have 4 distinct inputs, on the fork
aphrodite-engine 0.24.1 its 32 have 2 (docs/performance.md stop 46). Inside such a call
the request is open, so it opens divergences (``apply_top_k_top_p_triton``: up to ~35
cold paths a call) and runs each cold path to its return; ``cold_share.py`` shares the
cold calls made past a divergence, not the warm call that opens them.

Keyed and checked as ``cold_share.py`` keys a cold call (call site, callee, stack,
whole-run set, arguments shallow; then the path's facts, configs, pc, shadows, the
leaf's denied guards, every place of an older object it read, the config facts,
globals, module-level values and cached calls it read, the warmup's answer to each
question it asked). A replay gives every path the call returned, warm and cold (their
facts, configs, divergence, crossed outcomes and shadows, per-request rows written),
every sink it recorded (warm, or for its divergence) in order, and what running it
leaves behind (``cold_share.replayed``), and makes the caller's call-reuse entry
(``reuse.CallReuse.end``) from the same reads and unwarmed outcomes. Its values are
the caller's own where the call got them from its arguments or reads (a
``ValueSlot``: the walk that keys the call numbers every value, not only objects), and
fresh copies otherwise: ``values.same`` tells most values apart by identity, so an
equal copy of the caller's value would not rejoin the caller's paths (shadows.py) where
the value itself does; without them vLLM 0.20.0's report changed (docs/performance.md
stop 46). A dict it wrote in place (the fork's ``launch_kwargs``, a module's buffer
cache) is named by the read that reached it and its written keys are replayed as the
call left them (``_written``); a dict no read names and no memo value holds is the
call's own. Not stored: what ``cold_share`` refuses otherwise (an older object reached
through no read or written, an error, a whole-run decision, an object's attribute set
on the path heap, a dropped heap entry). The call-reuse entries of the calls it made
inside are not replayed: a later cold call that would have reused one runs instead
(``reuse.py`` changes no result).

Only calls of a function whose earlier warm serving call took ``CANDIDATE_STEPS`` are
recorded, not those of a function that failed to store ``MAX_FAILED`` times and never
stored one, nor of one whose ``MAX_UNUSED`` records no call took (vLLM's
``Sampler.__call__``: every leaf reads it differently); those are still looked up. A
forked leaf looks records up and makes none. ``enabled`` is off only in tests, which
compare.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from warmlint.interp import built, cold_share, read_trace
from warmlint.interp.cold_share import Attempt, ColdLog, effects, forked, replayed
from warmlint.interp.read_trace import Shallow
from warmlint.interp.value_digest import Slot, ValueSlot, copy_graph
from warmlint.values import Dict

CANDIDATE_STEPS = 200  # a function's warm call worth the bookkeeping
MAX_STORED = 4  # records per call site, callee, stack and arguments
MAX_FAILED = 3  # a callee that failed to store this often, and never stored, is not tried
MAX_UNUSED = 4  # records of a callee made while none was taken, before it is not recorded
VALUE_SLOTS = True  # off only in tests: without them vLLM 0.20.0's report changes


@dataclass
class WarmRecord:
    facts: dict
    cfg: dict
    pc: object
    shadows: tuple
    depth: int
    denied: tuple
    paths: list  # (facts, cfg, div, crossed, shadows) per path
    # copy_graph snapshot: ([(heap rows added, value) per path], ([sink arguments],
    # [what each dict in ``written`` holds at its keys])); a replay copies every value
    snapshot: tuple
    hits: list  # (divergence or None, SinkHit without arguments, its stack the callee's)
    # Dicts it wrote in place, as it left them: (where: ("memo", which, key) | ("value", n),
    # the keys written, whether it is empty); their values are in the snapshot
    written: list
    log: ColdLog
    installs: dict
    read_keys: frozenset
    reads: set  # what its branches read (reuse.CallReuse.note)
    tests: set  # inputs of the unwarmed outcomes its warm paths met
    steps: int
    div_tests: frozenset = frozenset()  # (none on a warm call: cold_share.replayed reads it)


class SharedWarmCalls:
    enabled = True  # off only in tests, which check that it changes no result

    def __init__(self):
        self.stored: dict = {}  # key -> [WarmRecord]
        self.worth: set = set()  # callees a warm serving call of took CANDIDATE_STEPS
        self.failed: dict = {}  # callee -> records it failed to make
        self.made: dict = {}  # callee -> records made
        self.taken: set = set()  # callees a record of was replayed
        self.hits = 0

    def begin(self, interp, site, ref, args: list, kwargs: dict, state) -> Attempt | None:
        if not self.enabled or ref.dotted not in self.worth or (
                ref.dotted not in self.made and self.failed.get(ref.dotted, 0) >= MAX_FAILED):
            return None
        made = cold_share.attempt(interp, site, ref, args, kwargs, state, effects(interp)[:-1],
                                  values=VALUE_SLOTS)
        if made is not None:
            made.taps = []
            made.log.items_written = {}
        return made

    def worth_recording(self, callee: str) -> bool:
        """Not a callee whose ``MAX_UNUSED`` records no later call took (vLLM's
        ``Sampler.__call__``: every leaf reads it differently); it is still looked up."""
        return callee in self.taken or self.made.get(callee, 0) < MAX_UNUSED

    def lookup(self, interp, attempt: Attempt, state) -> tuple | None:
        depth = len(interp.stack)
        return cold_share.take(self, interp, attempt, state, lambda rec: (
            rec.depth == depth and rec.cfg == state.cfg and rec.pc == state.pc
            and rec.denied == attempt.denied and rec.facts == state.facts
            and rec.shadows == state.shadows))

    def open(self, interp, attempt: Attempt) -> None:
        cold_share.open_attempt(interp, attempt)
        interp.policy.taps.append(attempt.taps)

    def close(self, interp, attempt: Attempt) -> None:
        cold_share.close_attempt(interp, attempt)
        taps = interp.policy.taps
        del taps[next(i for i, tap in enumerate(taps) if tap is attempt.taps)]

    def end(self, interp, attempt: Attempt, state, results: list, reads: set,
            tests: set) -> None:
        """Store the call when it can be; count a callee's failures until it stores one."""
        callee = attempt.key[1]
        counts = self.made if self._store(interp, attempt, state, results, reads, tests) \
            else self.failed
        counts[callee] = counts.get(callee, 0) + 1

    def _store(self, interp, attempt: Attempt, state, results: list, reads: set,
               tests: set) -> bool:
        log = attempt.log
        if log.dirty or log.written or effects(interp)[:-1] != attempt.before:
            return False
        outs = cold_share.outputs(state, results)
        written = _written(interp, log)
        if written is None:
            return False  # a dict it wrote that no read names
        taken = cold_share.snapshot(
            log, outs, ([hit.args for _, hit in attempt.taps],
                        [{k: d.items[k] for k in keys if k in d.items} for d, keys, _ in written])
        ) if outs is not None else None
        installs = cold_share.made_installs(interp, attempt.memo_keys) \
            if taken is not None else None
        if installs is None:
            return False
        installs = _fresh_dicts(installs)  # (kept as the call left them)
        paths = [(after.facts, after.cfg, after.div, after.crossed, after.shadows)
                 for after, _ in results]
        depth = len(interp.stack)
        kept = self.stored.setdefault(attempt.key, [])
        if len(kept) < MAX_STORED:
            kept.append(WarmRecord(
                state.facts, state.cfg, state.pc, state.shadows, depth, attempt.denied, paths,
                taken[0],
                [(div, replace(hit, args={}, stack=hit.stack[depth:]))
                 for div, hit in attempt.taps],
                [(where, keys, d.empty) for d, keys, where in written],
                log, installs, attempt.read_keys, set(reads), set(tests),
                interp.steps - attempt.steps))
        return True


def replay(interp, rec: WarmRecord, walk, state) -> list:
    """The record's paths for ``state``, after recording its sinks and leaving behind what
    running the call would have (a graph too deep to copy raises RecursionError first).
    ``walk``: what the record's reads name now (``cold_share.agreed``). Every value is
    the caller's (a ``ValueSlot``) or a fresh copy, as running the call would give."""
    found, values = walk.found, walk.values
    outs, (hit_args, items) = copy_graph(
        rec.snapshot, lambda v: found[v.n] if type(v) is Slot
        else values[v.n] if type(v) is ValueSlot else None, fresh=True)
    read_trace.reread(rec.log, found, state)
    installs = _fresh_dicts(rec.installs)  # dicts it made and wrote in place: each its own
    if installs is not rec.installs:
        rec = replace(rec, installs=installs)
    replayed(interp, rec)
    memos = dict(built.memos(interp))
    for (where, keys, empty), final in zip(rec.written, items):
        if where[0] == "made":
            continue  # (made by the call: its install holds what it wrote)
        d = memos[where[1]][where[2]] if where[0] == "memo" else values[where[1]]
        for key in keys:
            read_trace.write_item(d, key)  # (for the records still open around it)
        d.items.update(final)
        d.empty = empty
    for inputs in rec.tests:
        interp.reuse.note_warm_test(inputs)
    stack = interp.stack_names()
    policy = interp.policy
    for (div, hit), args in zip(rec.hits, hit_args):
        at = state if div is state.div else state.evolve(div=div)
        policy.sink(interp, at, replace(hit, args=args, stack=stack + hit.stack))
    interp.sinks_hit += len(rec.hits)
    paths = []
    for (facts, cfg, div, crossed, shadows), (added, value) in zip(rec.paths, outs):
        heap = {**state.heap, **dict(added)} if added else state.heap
        paths.append((state.evolve(facts=facts, cfg=cfg, div=div, crossed=crossed,
                                   shadows=shadows, heap=heap), value))
    return paths


def call(interp, reuse, site, ref, args: list, kwargs: dict, state, run, logged: bool):
    """A warm serving call (warm_records.warm_call): (results, what it read or None).
    ``run()`` runs it; ``reuse`` has begun the call's entry; ``logged``: what it reads is
    wanted (a ColdLog) even where no record is tried."""
    shared = interp.memo.warm
    attempt = shared.begin(interp, site, ref, args, kwargs, state) \
        if shared is not None and not interp.policy.filling else None
    log = None
    if attempt is not None:
        got = shared.lookup(interp, attempt, state)
        if got is not None:
            try:
                results = replay(interp, *got, state)
                shared.taken.add(ref.dotted)
                return results, got[0].log
            except RecursionError:
                pass  # (nothing left behind yet: run it)
        if forked(interp) or not shared.worth_recording(ref.dotted):
            attempt = None  # its records would serve no other leaf, or none ever did
        else:
            shared.open(interp, attempt)
            log = attempt.log
    if attempt is None and logged:
        log = ColdLog.starting(state)
        read_trace.open_log(interp, log)
    steps = interp.steps
    try:
        results = run()
    finally:
        if attempt is not None:
            shared.close(interp, attempt)
        elif log is not None:
            read_trace.close(interp, log)
    if shared is not None and interp.steps - steps >= CANDIDATE_STEPS:
        shared.worth.add(ref.dotted)
    if attempt is not None:
        shared.end(interp, attempt, state, results, reuse.reads[-1], reuse.warm_tests[-1])
    return results, log


def _written(interp, log) -> list | None:
    """(dict, keys, where) for each dict ``log``'s call wrote in place that is not its
    own, named by the read that reached it: a memo entry that was there before the call,
    one the call made (``made``: its install, copied for each replay, holds what it
    wrote), or a value its walk numbered. A dict none of these names, and no memo value
    it read holds, is the call's own (``launch_kwargs = {}``): what it holds is in the
    paths' outputs where they reach it. None where a memo value holds one deeper down."""
    out, own = [], []
    memos = dict(built.memos(interp))
    for d, keys in log.items_written.values():
        where = next((("memo" if seen is not None else "made", name, key)
                      for (name, key), seen in log.memos.items()
                      if memos[name].get(key) is d), None)
        if where is None and id(d) in log.walk.value_ids:
            where = ("value", log.walk.value_ids[id(d)])
        if where is None:
            own.append(d)
        else:
            out.append((d, keys, where))
    if own:
        held = Shallow(values=True)
        for name, key in log.memos:
            if key in memos[name]:
                held.one(memos[name][key])
        if any(id(d) in held.value_ids for d in own):
            return None
    return out


def _fresh_dicts(installs: dict) -> dict:
    """``installs`` (memo values that hold no object: ``cold_share.made_installs``) with
    each dict a fresh copy, or ``installs`` itself where none is a dict: dicts are written
    in place, so no two leaves may share one."""
    if not any(type(v) is Dict for v in installs.values()):
        return installs
    return {k: copy_graph(v, lambda o: None, fresh=True) if type(v) is Dict else v
            for k, v in installs.items()}
