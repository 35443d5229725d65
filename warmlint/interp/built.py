"""Objects a configuration leaf builds as an earlier leaf built them are copied, not rebuilt.

Why: every configuration leaf runs the warmups from the start, and the v2 runner builds
its sampler's per-request state there (``SamplingStates``, ``PenaltiesState``,
``RequestState``...: buffers over buffers), the same objects in most leaves: a fifth of
vLLM 0.34.0's serial analysis. A constructor call is a function of what it reads: its
arguments (as a graph: ``value_digest.py``), the facts and config facts of its path, the
config facts of the leaf it consults, the module globals, module-level expressions and
cached calls it reads, and where it runs (the stack, the warmup). So once a class's
construction has proved costly (``CANDIDATE_STEPS``), its later constructions record what
they read (``ReadLog``); one that did nothing a copy cannot reproduce is stored, and a
later construction whose context and reads all agree takes a copy of the stored object
instead of running ``__init__``: its own objects fresh, the argument objects it refers to
swapped for the caller's, and what the run would have left behind replayed (warmup
outcomes taken, config tests met, config atoms consulted and facts looked up, whole-run
decisions taken, globals and cached values computed, interpreter steps counted). A
decision is replayed only where the leaf takes the same outcome at the same index: its
prefix's, or True past it in a serial leaf; a forked leaf never replays one past its
prefix (there it would fork).

Not stored: a construction that reached a sink, reported an error, recorded an entry
call, a step or a registration, read a lazily built runner attribute, took a guard
decision, learned a request fact or left the divergence state, wrote a heap entry that is
not its own, changed an argument object, or refers to an object that is neither its own
nor reachable from its arguments. Only the warmup pass uses it (serving has its own call
reuse, ``reuse.py``). ``enabled`` is off only in tests, which run every fixture both
ways and compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint.interp import tables
from warmlint.interp.value_digest import (
    PLAIN, Slot, copy_graph, digest_in_heap, memo_digest, objects,
)
from warmlint.values import _OBJ_IDS

CANDIDATE_STEPS = 500  # a class's construction worth the bookkeeping
MAX_STORED = 4  # per key
_MISSING = object()


@dataclass
class ReadLog:
    """What one construction read, each at its first read."""

    facts: dict = field(default_factory=dict)  # config key -> (Sym, repr of the leaf's fact)
    # (which memo, key) -> ("pre", digest) for an entry there before, None for one
    # computed inside (what it became is in Built.installs)
    memos: dict = field(default_factory=dict)
    taken: list = field(default_factory=list)  # (key, outcome, cfg) the warmup took
    consulted: dict = field(default_factory=dict)  # config key -> where, at each consult
    dirty: str = ""  # why it cannot be stored

    def merge_into(self, other: "ReadLog") -> None:
        """What a copied construction read, for an enclosing one being recorded (the
        hooks log a running construction's reads in every open log themselves)."""
        for k, v in self.facts.items():
            other.facts.setdefault(k, v)
        for k, v in self.memos.items():
            other.memos.setdefault(k, v)
        other.taken += self.taken
        for k, v in self.consulted.items():
            other.consulted.setdefault(k, v)
        other.dirty = other.dirty or self.dirty


@dataclass
class Built:
    reads: ReadLog
    # (object, [(cfg, pc, heap rows added) per path out]), arguments' objects as Slots
    snapshot: tuple
    decisions: list  # whole-run decisions it took, from trace index ``first``
    decided: dict  # config key -> the fact its decision left
    first: int
    decided_at: int  # steps into it at its last decision (ConfigDriver.decided_steps)
    installs: dict  # (which memo, key) -> value computed inside
    consulted: list  # (config key, where) first consulted inside
    tested: frozenset  # config-test node ids first met inside
    tests: list  # the warmup's config_tests entries they added
    read_keys: frozenset
    steps: int


@dataclass
class _Attempt:
    key: tuple
    args: list
    log: ReadLog
    before: tuple
    steps: int
    trace: int  # the leaf's decisions before it
    counted: int  # the leaf's steps before it (all its interpreters)
    oid0: int
    tid0: int
    tested: frozenset
    tests: int
    consulted: int
    memo_keys: dict
    read_keys: frozenset
    objects: list = None  # the arguments' objects and tables, once a copy is taken


class Reuses:
    """What ``BuiltReuse`` and ``summaries.CallSummaries`` share: which classes or
    functions (dotted) are worth the bookkeeping (one construction or call took many steps),
    which could not be stored (tried three times at most), and the results kept per key."""

    enabled = True  # off only in tests, which check that it changes no result

    def __init__(self):
        self.costly: set = set()
        self.failed: dict = {}  # dotted -> results that could not be stored
        self.stored: dict = {}  # key -> [result]
        self.hits = 0

    def tries(self, ref) -> bool:
        return self.enabled and ref.dotted in self.costly and self.failed.get(ref.dotted, 0) < 3

    def untried(self, ref, steps: int, bar: int) -> None:
        """A construction or call made without an attempt took ``steps``."""
        if steps >= bar:
            self.costly.add(ref.dotted)

    def first(self, interp, key, take) -> tuple | None:
        """The first result stored under ``key`` that ``take`` accepts (it returns what
        replaying that result needs, or None), with what it returned."""
        for made in self.stored.get(key, ()):
            if interp.steps + made.steps > interp.settings.max_steps:
                continue  # the run would stop inside it: run it
            try:
                got = take(made)
            except RecursionError:
                continue
            if got is not None:
                self.hits += 1
                return made, got
        return None

    def keep(self, ref, key, make) -> None:
        """Store what ``make()`` returns under ``key``, or count a result that could not be
        stored (None, or a graph too deep to copy)."""
        try:
            made = make()
        except RecursionError:
            made = None
        if made is None:
            self.failed[ref.dotted] = self.failed.get(ref.dotted, 0) + 1
            return
        self.failed.pop(ref.dotted, None)
        kept = self.stored.setdefault(key, [])
        if len(kept) < MAX_STORED:
            kept.append(made)


class BuiltReuse(Reuses):
    """Constructions, keyed by their whole input (``begin``)."""

    # -- around a construction -----------------------------------------------------------
    def begin(self, interp, ref, args: list, kwargs: dict, state) -> _Attempt | None:
        if not (self.tries(ref) and plain_context(interp, state)):
            return None
        policy, driver = interp.policy, interp.driver
        stack = tuple((f.module, f.qualname, f.warmup, f.lazy_locals is not None)
                      for f in interp.stack)
        try:
            key = (ref.dotted, stack, id(policy.current),
                   digest_in_heap((list(args), kwargs), state.heap),
                   repr(sorted(state.facts.items())), repr(sorted(state.cfg.items())),
                   repr(state.pc), frozenset(driver.whole_run))
        except RecursionError:  # a graph too deep to digest: built as usual
            return None
        log = ReadLog()
        attempt = _Attempt(key, [list(args), kwargs], log, effects(interp), interp.steps,
                           len(driver.trace), sum(c.steps for c in driver.counters),
                           next(_OBJ_IDS), next(tables._TABLE_IDS), frozenset(policy._tested),
                           len(policy.config_tests), len(driver.consulted),
                           {name: set(memo) for name, memo in memos(interp)},
                           frozenset(interp.read_keys))
        driver.read_logs.append(log)
        return attempt

    def lookup(self, interp, attempt: _Attempt, state) -> list | None:
        def take(built: Built):
            if not agrees(interp, built):
                return None
            args = attempt.objects = objects(*attempt.args)
            return copy_graph(built.snapshot, lambda v: args[v.n] if type(v) is Slot else None)

        found = self.first(interp, attempt.key, take)
        if found is None:
            return None
        interp.driver.read_logs.pop()  # the attempt's: nothing ran
        return _replay(interp, attempt, found[0], state, found[1])

    def end(self, interp, ref, attempt: _Attempt | None, state, results: list | None,
            steps: int) -> None:
        """After a construction (``results`` None: it raised): learn its cost; store it."""
        if attempt is None:
            self.untried(ref, steps, CANDIDATE_STEPS)
            return
        interp.driver.read_logs.pop()
        self.keep(ref, attempt.key,
                  lambda: _storable(interp, attempt, state, results) if results else None)


# -- what a construction depends on and leaves behind ----------------------------------------
def plain_context(interp, state, in_entries: bool = False) -> bool:
    """The warmup pass, outside module scope, registries, denied guards and divergences;
    outside a warmup's sampler call unless ``in_entries`` (summaries.py: what a call does
    there differs only by the entry its sinks are recorded for, ``WarmupPass.sink``)."""
    policy, driver = interp.policy, interp.driver
    return (policy.name == "warmup" and (in_entries or policy.active is None)
            and not interp.in_module_scope and not interp.registering and not driver.denied
            and state.div is None and not state.shadows and not state.crossed)


def memos(interp) -> list:
    return [("globals", interp.globals_memo), ("module", interp.module_expr_cache),
            ("lazy", interp.lazy_memo)]


def effects(interp, sinks: bool = True) -> tuple:
    """What a construction or call may have done besides returning, counted; without the
    sinks it reached where ``sinks`` is False (summaries.py replays them)."""
    policy, driver = interp.policy, interp.driver
    reached = (interp.sinks_hit, len(policy.hits)) if sinks else ()
    return reached + (len(interp.errors), driver.infeasible, driver.truncated,
                      len(driver.denied), len(policy.entries), len(policy.registry),
                      len(policy._steps), len(policy.stepped), interp.registering)


def note(interp, memo: str, key, present: bool, value=None) -> None:
    """A read of ``memo[key]`` (present: there before), for every open log."""
    seen = _MISSING
    for log in interp.driver.read_logs:
        if (memo, key) not in log.memos:
            if seen is _MISSING:  # digested once, whatever the number of open logs
                seen = ("pre", memo_digest(value)) if present else None
            log.memos[(memo, key)] = seen


def taint(interp, why: str) -> None:
    for log in interp.driver.read_logs:
        log.dirty = log.dirty or why


def _storable(interp, attempt: _Attempt, state, results: list) -> Built | None:
    if attempt.log.dirty or not results or effects(interp) != attempt.before:
        return None
    obj = results[0][1]
    paths = []
    for after, value in results:
        if value is not obj or after.facts != state.facts or after.div is not None \
                or after.shadows or after.crossed:
            return None
        added = {k: v for k, v in after.heap.items() if k not in state.heap}
        if any(after.heap.get(k, _MISSING) is not v for k, v in state.heap.items()) \
                or any(k[0] != "rows" or not _made_during(k[1], attempt) for k in added):
            return None  # it wrote what is not its own
        paths.append((after.cfg, after.pc, added))
    if digest_in_heap(tuple(attempt.args), state.heap) != attempt.key[3]:
        return None  # it changed an argument object
    driver = interp.driver
    decisions = driver.trace[attempt.trace:]
    if any(d.key.startswith("(") for d in decisions):
        return None  # a guard decision (ConfigDriver.decide_guard) leaves more behind
    installs = {}
    for name, memo in memos(interp):
        for key in memo.keys() - attempt.memo_keys[name]:
            if not isinstance(memo[key], PLAIN) and objects(memo[key]):
                return None  # a global or cached value holding an object
            installs[(name, key)] = memo[key]
    slots = {id(o): n for n, o in enumerate(objects(*attempt.args))}

    def keep(v):
        if v is obj:
            return None  # made just before the attempt began
        if id(v) in slots:
            return Slot(slots[id(v)])
        if _made_during(v, attempt):
            return None  # its own: copied
        raise _Foreign

    try:
        snapshot = copy_graph((obj, paths), keep)
    except _Foreign:
        return None
    policy = interp.policy
    return Built(attempt.log, snapshot, list(decisions),
                 {d.key: driver.facts[d.key] for d in decisions}, attempt.trace,
                 driver.decided_steps - attempt.counted if decisions else 0, installs,
                 list(driver.consulted.items())[attempt.consulted:],
                 frozenset(policy._tested) - attempt.tested,
                 policy.config_tests[attempt.tests:],
                 frozenset(interp.read_keys) - attempt.read_keys,
                 interp.steps - attempt.steps)


def _made_during(v, attempt: _Attempt) -> bool:
    """An object or table made after the attempt began (ids only grow)."""
    if type(v) is tables.Table:
        return v.tid > attempt.tid0
    return v.oid > attempt.oid0


class _Foreign(Exception):
    """An object neither built by the construction nor reachable from its arguments."""


def agrees(interp, built: Built) -> bool:
    driver = interp.driver
    if built.decisions and (len(driver.trace) != built.first or any(
            _outcome(driver, built.first + i) != d.outcome
            for i, d in enumerate(built.decisions))):
        return False
    if not reads_agree(interp, built.reads, built.installs):
        return False
    known = built.tested & interp.policy._tested
    return not known or known == built.tested  # config tests: all new, or all met before


def reads_agree(interp, reads: ReadLog, installs: dict) -> bool:
    """The config facts and memo entries ``reads`` looked up are as they were (an entry
    made inside as ``installs`` made it)."""
    driver = interp.driver
    if any(repr(driver.peek(sym)) != seen for sym, seen in reads.facts.values()):
        return False
    memos_now = dict(memos(interp))
    for (name, key), seen in reads.memos.items():
        now = memos_now[name].get(key, _MISSING)
        if seen is not None:
            if now is _MISSING or memo_digest(now) != seen[1]:
                return False
        elif now is not _MISSING:
            made = installs.get((name, key), _MISSING)
            if made is _MISSING or memo_digest(now) != memo_digest(made):
                return False
    return True


def _outcome(driver, k: int) -> bool | None:
    """The outcome the leaf's decision ``k`` takes (ConfigDriver._next): its prefix's, or
    True past it in a serial leaf; None past it in a forked one (that decision forks)."""
    if k < len(driver.prefix):
        return driver.prefix[k]
    return True if driver.forker is None else None


def _replay(interp, attempt: _Attempt, built: Built, state, copied: tuple) -> list:
    obj, paths = copied
    driver = interp.driver
    if built.decisions:
        driver.trace += built.decisions
        driver.facts.update(built.decided)
        driver.decided_steps = attempt.counted + built.decided_at
    replay_reads(interp, built)
    return [(state.evolve(cfg=dict(cfg), pc=pc, heap={**state.heap, **heap} if heap else state.heap),
             obj) for cfg, pc, heap in paths]


def replay_reads(interp, built) -> None:
    """What a copied construction or a replayed call (summaries.py) leaves behind besides
    its values: its reads for the enclosing records, the globals and cached values it
    computed, facts looked up, config atoms consulted, warmup outcomes taken, config tests
    met, branch reads, steps."""
    driver, policy = interp.driver, interp.policy
    for log in driver.read_logs:  # an enclosing construction read what this one read
        built.reads.merge_into(log)
    memos_now = dict(memos(interp))
    for (name, key), value in built.installs.items():
        memos_now[name].setdefault(key, value)
    for sym, _ in built.reads.facts.values():
        driver.fact(sym)  # looked up (and assumptions used) as the run would have
    for key, where in built.consulted:
        driver.consulted.setdefault(key, where)
    for key, outcome, cfg in built.reads.taken:
        policy.took(key, outcome, cfg)
    if not (built.tested & policy._tested):
        policy._tested |= built.tested
        policy.config_tests += built.tests
    interp.read_keys |= built.read_keys
    interp.steps += built.steps
