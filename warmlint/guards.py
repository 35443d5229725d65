"""Joined values that remember which path each option came from.

Paths are joined between statements, and a join keeps only the facts true on both, so a
value set differently on two paths (``is_greedy = None`` where ``all_greedy``, a tensor
elsewhere) becomes "either" for the rest of the function, even where a later test has
told the paths apart again (``if all_greedy: return``). vLLM 0.21.0's rejection sampler
then looked like it launched ``rejection_random_sample_kernel`` with ``is_greedy_ptr``
None, which no request does (an all-greedy batch returns first): a WL004 finding that
the H200 never saw, and a warmup call ``fix`` added for nothing.

A local's joined value is a ``values.Guarded``: each option with the request facts of the
path it came from, where the two paths' facts differ (at most ``MAX_KEYS`` of them). A
read (``narrow``) on a path whose facts contradict an option's guard drops the option.
Request facts hold for a whole request (they describe its inputs), so a path that
descends from one side of the join still satisfies that side's facts; dropping an
option only where the guard is contradicted, never where it is merely unknown, keeps
every value a real path can have.
"""

from __future__ import annotations

from warmlint.state import _UNSET, SymFact, eval_pred
from warmlint.values import Guarded, OneOf, Value, same

MAX_KEYS = 4


def sides(a: dict, b: dict) -> tuple | None:
    """(facts only path ``a`` has, facts only ``b`` has), each ((key, SymFact), ...);
    None when one side knows nothing the other does not (nothing to tell them apart)."""
    if a is b:
        return None
    only_a = _only(a, b)
    only_b = _only(b, a)
    return (only_a, only_b) if only_a and only_b else None


def _only(mine: dict, other: dict) -> tuple:
    out = [(k, f) for k, f in mine.items() if other.get(k) != f and _definite(f)]
    return tuple(sorted(out, key=lambda kf: kf[0])[:MAX_KEYS])


def _definite(fact: SymFact) -> bool:
    return fact.none is not None or fact.truthy is not None or fact.eq is not _UNSET


def guard(joined: OneOf, a: Value, b: Value, facts: tuple) -> OneOf:
    """``joined`` (the join of ``a`` and ``b``) with each option guarded by the facts of
    the side it came from; an option both sides had is unguarded."""
    from_a = a.options if isinstance(a, OneOf) else (a,)
    from_b = b.options if isinstance(b, OneOf) else (b,)
    out = []
    for opt in joined.options:
        in_a = any(same(opt, o) for o in from_a)
        in_b = any(same(opt, o) for o in from_b)
        out.append(() if in_a == in_b else facts[0] if in_a else facts[1])
    if not any(out):
        return joined
    return Guarded(joined.options, joined.taint, tuple(out))


def narrow(value: Guarded, facts: dict) -> Value:
    """``value`` without the options whose guard the path's ``facts`` contradict."""
    kept = [(opt, g) for opt, g in zip(value.options, value.guards)
            if not any(_contradicts(facts.get(key), fact) for key, fact in g)]
    if len(kept) == len(value.options) or not kept:
        return value
    if len(kept) == 1:
        return kept[0][0]
    return Guarded(tuple(o for o, _ in kept), value.taint, tuple(g for _, g in kept))


def _contradicts(now: SymFact | None, then: SymFact) -> bool:
    """The path's fact decides one of the guard's definite parts the other way
    (``state.eval_pred``: what the path knows, read as the branch tests read it)."""
    if now is None:
        return False
    parts = [("is_none", None, then.none), ("truthy", None, then.truthy)]
    if then.eq is not _UNSET:
        parts.append(("eq", then.eq, True))
    return any(expected is not None and eval_pred(now, op, const) not in (None, expected)
               for op, const, expected in parts)
