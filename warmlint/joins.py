"""Joining interpreter paths: which states are kept apart, and how two are joined.

Paths are joined wherever the engine can no longer tell them apart at a cost worth
paying: between statements, between the failed arms of an ``elif`` chain, between the
operands of one expression. What keeps two paths apart is the key: the divergence (each
cold outcome keeps its own reach, state.py), bindings written to objects under
construction, test-outcome flags, and in the warmup pass the config atoms decided.
Joined facts are those true on both paths, so a join loses precision, never soundness.
"""

from __future__ import annotations

from collections import Counter

from warmlint import guards
from warmlint.state import State, SymFact, div_key
from warmlint.values import ClassVal, Const, Func, Lambda, Obj, OneOf, TestOutcome, join


def merge_states(states: list[State], keep_configs: bool = False) -> list[State]:
    """Join states that share a divergence; keep the others apart.

    ``keep_configs`` (the warmup pass) also keeps apart paths split on a config atom:
    merged, they would join what two deployments compute, and a sink reached only in one
    deployment's warmup would look warmed in the other's (``WarmupPass.covers``)."""
    if len(states) < 2:
        return states
    groups: dict[tuple, State] = {}
    for st in states:
        key = merge_key(st, keep_configs)
        groups[key] = join_states(groups[key], st, keep_configs) if key in groups else st
    return list(groups.values())


def merge_key(st: State, keep_configs: bool = False) -> tuple:
    """States with equal keys are joined (``merge_states``)."""
    key = div_key(st.div) + _bindings(st) + _flags(st)
    if keep_configs and st.cfg:
        key += tuple(sorted((k, repr(v)) for k, v in st.cfg.items()))
    return key


def _flags(st: State) -> tuple:
    """Locals holding the outcome of a test (``eligible = not (a or b)``): paths that
    took it differently stay apart, so the branch that reads the flag later is decided
    on each path, not both ways on a merged one."""
    return tuple(sorted((name, value.value) for name, value in st.env.items()
                        if type(value) is TestOutcome))


def _bindings(st: State) -> tuple:
    """Callables and flags written to objects under construction: paths that bind
    differently stay apart until the constructor returns (calls.commit decides what that
    means)."""
    heap = st.heap
    if not heap:
        return ()
    # A heap is never changed once a state holds it (writes make a new dict), and the
    # states of one replay share a few: its table rows, ~100 entries, every join.
    hit = _SEEN.get(id(heap))
    if hit is not None and hit[0] is heap:
        return hit[1]
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[id(heap)] = (heap, out := _binding_key(heap))
    return out


_SEEN: dict = {}  # id(heap) -> (heap, its key); the heap is held, so its id stays its own
_SEEN_MAX = 512


def _binding_key(heap: dict) -> tuple:
    out = []
    for key, value in heap.items():
        if key[0] == "rows" and _as_made(value, key[1].initial):
            continue  # rows written as the table was made: as if never written
        for opt in (value.options if isinstance(value, OneOf) else (value,)):
            kind = type(opt)
            if kind is Func:
                out.append((key, "func", opt.ref))
            elif kind in _CONSTS:
                if opt.value is None or opt.value is True or opt.value is False:
                    out.append((key, "flag", repr(opt.value)))  # a flag: see calls._flags
            elif kind in _BUILT:
                out.append((key, kind.__name__, id(getattr(opt, "node", opt))))
    # order-free, without sorting by repr (a table's repr walks it): the multiset itself
    return (frozenset(Counter(out).items()),) if len(out) > 1 else tuple(out)


_CONSTS = (Const, TestOutcome)


def _as_made(value, initial) -> bool:
    """A row element equal to the table's initial one (``False`` written to ``zeros``):
    paths that differ only by having written it hold the same rows."""
    return type(value) is Const and type(initial) is Const and type(value.value) in _NUMS \
        and type(initial.value) in _NUMS and value.value == initial.value


_NUMS = (bool, int)
_BUILT = (Lambda, Obj, ClassVal)


def join_pairs(pairs: list, keep_configs: bool = False, warm_over: int = 0) -> list:
    """``merge_states`` for the (state, [values]) pairs of an expression's operands:
    values are joined element-wise. Unjoined, a call with N arguments that each return
    two ways (``f(x.a), f(x.b), ...``) makes 2**N paths. Cold paths are always joined
    (each divergence's reach stays its own); warm ones only when there are more than
    ``warm_over``, since their facts are what a fix plans from."""
    warm = sum(1 for st, _ in pairs if st.div is None)
    apart = warm <= warm_over
    if apart and warm == len(pairs):
        return pairs  # nothing to join (the common case: a few warm paths)
    groups: dict[tuple, tuple] = {}
    for n, (st, vals) in enumerate(pairs):
        key = (n,) if apart and st.div is None else merge_key(st, keep_configs)
        if key in groups:
            first, firsts = groups[key]
            groups[key] = (join_states(first, st, keep_configs),
                           [join(a, b) for a, b in zip(firsts, vals)])
        else:
            groups[key] = (st, vals)
    return list(groups.values())


def join_states(a: State, b: State, warmup: bool = False) -> State:
    """``warmup``: rows one path never wrote hold what their table was made with, and
    the join keeps that too (a warmup's paths are what it warms)."""
    env = _join_dicts(a.env, b.env, (a.facts, b.facts))
    shadows = a.shadows + tuple(s for s in b.shadows if s not in a.shadows)
    heap = _join_dicts(a.heap, b.heap)
    if warmup and a.heap is not b.heap:
        for key in a.heap.keys() ^ b.heap.keys():
            if key[0] == "rows":
                heap[key] = join(heap[key], key[1].initial)
    return State(env, _merge_facts(a.facts, b.facts), a.div, a.pc | b.pc,
                 _merge_facts(a.cfg, b.cfg), shadows, heap, a.crossed | b.crossed)


def _join_dicts(a: dict, b: dict, facts: tuple | None = None) -> dict:
    """Names of either side, values joined where both have one (``join`` keeps a value
    both paths inherited as it is). ``facts``: each side's path facts; an option only
    one side had is guarded by that side's own facts (``guards.guard``)."""
    if a is b:
        return dict(a)
    out = dict(a)
    sides = _UNTOLD  # each side's own facts, computed at the first value they guard
    for name, value in b.items():
        if name not in out:
            out[name] = value
            continue
        joined = join(out[name], value)
        if facts is not None and type(joined) is OneOf:
            if sides is _UNTOLD:
                sides = guards.sides(*facts)
            if sides:
                joined = guards.guard(joined, out[name], value, sides)
        out[name] = joined
    return out


_UNTOLD = object()


def _merge_facts(a: dict, b: dict) -> dict:
    if a is b:
        return a
    facts = {}
    for key in a.keys() & b.keys():
        merged = a[key].merge(b[key])
        if merged != SymFact():
            facts[key] = merged
    return facts
