"""Cold calls the leaves make alike: a serving call past a divergence is replayed from an
earlier call's record (this leaf's or an earlier leaf's), keyed by what it read.

Why: every configuration leaf replays serving, and past a divergence a replay calls the
same helpers on the same values in leaf after leaf: vLLM 0.33.0's nine speculative leaves
call ``apply_sampling_constraints``, ``rejection_sample``, ``apply_top_k_top_p`` alike;
0.34.0's leaves ``compute_topk_scores`` and ``Sampler._sample_random`` (docs/performance.md
stop 44). ``reuse.py`` shares cold calls within one leaf's replay, by identity and only
off the path heap; this shares them across leaves, as ``summaries.py`` shares warmup calls.

The key: call site, callee, stack, whole-run set, and the arguments shallow
(``read_trace.Shallow``: objects and tables by number, class and flags; an open request
with what it holds). A record is taken when, besides ``reuse.cold_lookup``'s conditions
(depth, configs, pc, how each unwarmed outcome it met relates to the divergence), the
path's facts, crossed outcomes and the leaf's denied guards are the same, every place of
an older object it read holds what it held (``summaries.trace_agrees``), and what a leaf
decides under the call agrees: the config facts it looked up, the module globals,
module-level expressions and cached calls it read (``built.ReadLog``), and the warmup's
answer to each question it asked (the outcomes taken at a branch under a config; a
registration).

Not stored: a call that reached an older object through no read (a global's), wrote one,
reused a warm call or a cold call that has no record of its own (their reads are
unknown; ``warm_records.py`` records warm calls on plain data for this), made a whole-run
decision, reported an error, or set an object's attribute on the path heap. Replayed:
its paths (the facts it learned on the caller's; per-request rows it wrote), its sinks
for the caller's divergence, its own objects and tables copied fresh and the arguments'
swapped for the caller's (``value_digest.copy_graph``), and what running it leaves
behind: reads for the enclosing records, facts looked up, config atoms consulted,
config tests met, globals and cached values computed, pinned probes, branch reads,
call-reuse reads, steps. ``enabled`` is off only in tests, which compare.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from warmlint.interp import built, read_trace, tables
from warmlint.interp.read_trace import CallLog, Shallow
from warmlint.interp.reuse import _rebase
from warmlint.interp.summaries import trace_walk
from warmlint.interp.value_digest import Slot, ValueSlot, copy_graph

MAX_STORED = 8  # records per call site, callee and stack


@dataclass
class ColdLog(CallLog):
    """A cold call's reads (CallLog's), and what it asked the warmup and met."""

    asked: list = field(default_factory=list)  # (branch key, cfg, answer) | (dotted, None, bool)
    tests: list = field(default_factory=list)  # (node id, config_tests entry)

    def merge_into(self, other: "ColdLog") -> None:
        super().merge_into(other)
        other.asked += self.asked
        other.tests += self.tests
        other.pins |= self.pins


@dataclass
class Record:
    facts: dict  # the caller's, all of them
    cfg: dict
    pc: object
    crossed: frozenset
    inputs: frozenset  # the divergence's request inputs
    depth: int
    reads: set  # what the callee's branches read (reuse.CallReuse.note)
    div_tests: set
    # ([(facts, cfg) per path], copy_graph snapshot: ([(heap rows added, value) per path],
    # [sink arguments]), with the arguments' objects and tables as Slots)
    paths: list
    snapshot: tuple
    copies: bool  # the snapshot holds objects or tables (else its values are shared)
    hits: list
    log: ColdLog
    installs: dict
    read_keys: frozenset
    steps: int
    denied: tuple  # the leaf's denied guards, with their atoms' facts (ConfigDriver._fact)


@dataclass
class Attempt:
    """A call being looked up, then recorded (here and in warm_share.py)."""

    key: tuple
    log: ColdLog
    denied: tuple
    before: tuple
    steps: int
    memo_keys: dict
    outer_keys: set = None  # the caller's branch reads, while the call runs (``open``)
    read_keys: frozenset = frozenset()  # what the call's branches read (``close``)
    taps: list = None  # the sinks recorded while it runs (warm calls: ServingPass.taps)


def attempt(interp, site, ref, args: list, kwargs: dict, state, before: tuple,
            values: bool = False) -> Attempt | None:
    """The key (call site, callee, stack, whole-run set, arguments shallow) and what a
    record checks, of a call about to run; None for arguments too deep to walk.
    ``values``: the walk numbers every value (``read_trace.Shallow``)."""
    log = ColdLog.starting(state)
    if values:
        log.walk = Shallow(values=True)
    try:
        head = log.walk.one((list(args), kwargs))
    except RecursionError:
        return None
    stack = tuple((f.module, f.qualname, f.warmup, f.lazy_locals is not None)
                  for f in interp.stack)
    driver = interp.driver
    return Attempt((id(site), ref.dotted, stack, frozenset(driver.whole_run), head), log,
                   denied_guards(driver), before, interp.steps,
                   {name: len(memo) for name, memo in built.memos(interp)})


class SharedColdCalls:
    enabled = True  # off only in tests, which check that it changes no result

    def __init__(self):
        self.stored: dict = {}  # (site id, callee, stack, whole-run, arguments) -> [Record]
        self.hits = 0

    def begin(self, interp, site, ref, args: list, kwargs: dict, state) -> Attempt | None:
        if not self.enabled or state.shadows:
            return None
        return attempt(interp, site, ref, args, kwargs, state, effects(interp))

    def lookup(self, interp, attempt: Attempt, state) -> tuple | None:
        """(record, the objects its reads name, as they are now), or None."""
        depth = len(interp.stack)
        got = take(self, interp, attempt, state, lambda rec: (
            rec.depth == depth and rec.cfg == state.cfg and rec.pc == state.pc
            and rec.crossed == state.crossed and rec.denied == attempt.denied
            and rec.facts == state.facts
            and all(bool(t & rec.inputs) == bool(t & state.div.inputs) for t in rec.div_tests)))
        return None if got is None else (got[0], got[1].found)

    def open(self, interp, attempt: Attempt) -> None:
        open_attempt(interp, attempt)

    def close(self, interp, attempt: Attempt) -> None:
        close_attempt(interp, attempt)

    def end(self, interp, attempt: Attempt, call, state, results: list) -> None:
        """Store the call (``call``: the reuse.ColdCall it made) when it can be."""
        log = attempt.log
        if log.dirty or log.written or effects(interp) != attempt.before:
            return
        outs = outputs(state, results)
        taken = snapshot(log, outs, [h.args for h in call.hits]) if outs is not None else None
        installs = made_installs(interp, attempt.memo_keys) if taken is not None else None
        if installs is None:
            return
        paths = [(after.facts, after.cfg) for after, _ in results]
        kept = self.stored.setdefault(attempt.key, [])
        call.record = Record(
            state.facts, state.cfg, state.pc, state.crossed, state.div.inputs, call.depth,
            call.reads, call.div_tests, paths, *taken,
            [replace(h, args={}) for h in call.hits], log, installs, attempt.read_keys,
            interp.steps - attempt.steps, attempt.denied)
        if len(kept) < MAX_STORED:
            kept.append(call.record)


class Foreign(Exception):
    """An older object the call reached through no read (a global's)."""


def open_attempt(interp, attempt: Attempt) -> None:
    """The call starts: its reads are logged, its branches' reads kept apart."""
    read_trace.open_log(interp, attempt.log)
    attempt.outer_keys, interp.read_keys = interp.read_keys, set()


def close_attempt(interp, attempt: Attempt) -> None:
    read_trace.close(interp, attempt.log)
    attempt.read_keys = frozenset(interp.read_keys)
    interp.read_keys = attempt.outer_keys | interp.read_keys


def take(shared, interp, attempt: Attempt, state, fits) -> tuple | None:
    """The first of ``shared``'s records for the attempt's key that ``fits`` the path,
    fits the step budget and whose reads agree: (record, the walk of what they name), or
    None."""
    for rec in shared.stored.get(attempt.key, ()):
        if fits(rec) and interp.steps + rec.steps <= interp.settings.max_steps:
            walk = agreed(interp, rec, attempt.log.walk, state)
            if walk is not None:
                shared.hits += 1
                return rec, walk
    return None


def agreed(interp, rec, head, state):
    """The walk of what ``rec``'s reads name, as it is now (``summaries.trace_walk``),
    when everything it read agrees (the leaf's answers, facts and globals, then every
    place); a graph too deep to walk is not taken."""
    try:
        return trace_walk(rec.log, head, state) if leaf_agrees(interp, rec) else None
    except RecursionError:
        return None


def outputs(state, results: list) -> list | None:
    """(per-request rows written, value) per path, or None where a path set an
    object's attribute on the path heap or dropped an entry (not replayed)."""
    outs = []
    for after, value in results:
        added = []
        for key, held in after.heap.items():
            if state.heap.get(key, read_trace.MISSING) is held:
                continue
            if key[0] != "rows":
                return None
            added.append((key, held))
        if len(after.heap) - len(added) != len(state.heap):
            return None
        outs.append((added, value))
    return outs


def snapshot(log: CallLog, outs: list, hit_args: list) -> tuple | None:
    """(copy_graph snapshot of the paths' outputs and the sinks' arguments, whether it
    holds objects or tables a replay must copy), or None where it reaches an older
    object through no read. Where the walk numbered values, each value it met is a
    ``ValueSlot``."""
    numbers, met, value_ids = log.walk.seen, [], log.walk.value_ids

    def keep(v):
        met.append(v)
        if id(v) in numbers:
            return Slot(numbers[id(v)])
        if (v.tid > log.tid0) if type(v) is tables.Table else (v.oid > log.oid0):
            return None  # its own: copied
        raise Foreign

    def keep_value(v):
        n = value_ids.get(id(v))
        return None if n is None else ValueSlot(n)

    try:
        return copy_graph((outs, hit_args), keep,
                          keep_value if value_ids is not None else None), bool(met)
    except (Foreign, RecursionError):
        return None


def made_installs(interp, memo_keys: dict) -> dict | None:
    """The memo entries made since ``memo_keys`` (memos only grow, in order), or None
    where one holds an object."""
    installs = {}
    for name, memo in built.memos(interp):
        for key in itertools.islice(memo, memo_keys[name], None):
            if not isinstance(memo[key], built.PLAIN) and built.objects(memo[key]):
                return None
            installs[(name, key)] = memo[key]
    return installs


def forked(interp) -> bool:
    """A leaf that forks or was forked (leaf_fork): no other leaf would see what it
    records (a child's goes when it exits; the trunk's comes after its children forked)."""
    return interp.driver.forker is not None


def denied_guards(driver) -> tuple:
    denied = sorted(driver.denied)
    return tuple(denied), tuple(repr(driver.facts.get(k)) for pair in denied for k in pair)


def effects(interp) -> tuple:
    driver = interp.driver
    return (len(interp.errors), len(driver.trace), driver.infeasible, driver.truncated,
            len(driver.denied), interp.registering, len(interp.policy.warm_hits))


def leaf_agrees(interp, rec: Record) -> bool:
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
        got = shared.lookup(interp, attempt, state)
        try:
            if got is not None:
                return interp._reused(state, *replay(interp, *got, state))
        except RecursionError:
            pass  # (nothing left behind yet: run it)
        if forked(interp):
            attempt = None  # its records would serve no other leaf
        else:
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


def reused_cold(call, state) -> None:
    """The leaf's own cold call reused (reuse.cold_lookup: the same objects) inside calls
    being recorded: its record's reads are theirs; one without a record read what is not
    known."""
    rec = call.record
    if rec is None:
        read_trace.taint("a cold call reused without a record")
        return
    read_trace.reread(rec.log, rec.log.walk.found, state)
    merge_reads(rec)


def replay(interp, rec: Record, found: list, state) -> tuple[list, list]:
    """The record's paths and sinks for ``state`` (as ``reuse.replay_cold``: the facts it
    learned on the caller's), its own objects and tables fresh and the arguments' ones
    the caller's, after leaving behind what running the call would have. A graph too
    deep to copy raises RecursionError before anything is left behind."""
    outs, hit_args = copy_graph(rec.snapshot, lambda v: found[v.n] if type(v) is Slot
                                else None) if rec.copies else rec.snapshot
    read_trace.reread(rec.log, found, state)  # an enclosing record read what this one read
    replayed(interp, rec)
    paths = []
    for (facts, cfg), (added, value) in zip(rec.paths, outs):
        heap = {**state.heap, **dict(added)} if added else state.heap
        paths.append((state.evolve(facts=_rebase(facts, rec, state), cfg=cfg, heap=heap),
                      value))
    return paths, [replace(hit, args=args, facts=_rebase(hit.facts, rec, state),
                           stack=hit.stack[rec.depth:])
                   for hit, args in zip(rec.hits, hit_args)]


def merge_reads(rec: Record) -> None:
    """An enclosing record being made read what ``rec``'s call read."""
    for other in read_trace.OPEN:
        rec.log.merge_into(other)


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
