"""Deferred divergences: stop re-running cold paths that rejoined the warm one.

Most divergences are local: ``if bad_words: apply_bad_words(...)`` diverges, reaches what
it reaches, and rejoins the warm path with the same variables. Interpreting that cold
path to the end of the entry would redo the warm path's work for nothing, once per
divergence. So a cold state whose variables and config equal the warm state's becomes a
*shadow* of the warm state: the divergence plus the facts it knows that the warm path
does not (``bad_words`` is truthy). A shadow is turned back into a cold state only where
it could behave differently: at a branch on one of its inputs, and at a JIT sink (whose
specialization may depend on its facts).
"""

from __future__ import annotations

from warmlint.state import State
from warmlint.values import same


def absorb(states: list) -> list:
    """Fold cold states equivalent to the (single) warm state into its shadows."""
    warm = [s for s in states if s.div is None]
    if len(warm) != 1 or len(states) == 1:
        return states
    host = warm[0]
    kept, shadows = [], list(host.shadows)
    for st in states:
        if st is host:
            continue
        if st.div is not None and not st.shadows and _equivalent(st, host):
            shadows.append((st.div, _delta(host.facts, st.facts)))
        else:
            kept.append(st)
    if len(shadows) == len(host.shadows):
        return states
    return [host.evolve(shadows=tuple(shadows))] + kept


def _equivalent(cold: State, warm: State) -> bool:
    if cold.cfg != warm.cfg or cold.env.keys() != warm.env.keys():
        return False
    return all(v is warm.env[k] or same(v, warm.env[k]) for k, v in cold.env.items())


def _delta(base: dict, facts: dict) -> dict:
    return {k: facts.get(k) for k in base.keys() | facts.keys() if base.get(k) != facts.get(k)}


def materialize(warm: State, shadow) -> State:
    """The cold state a shadow stands for, at the warm state's current point."""
    div, delta = shadow
    facts = dict(warm.facts)
    for key, fact in delta.items():
        if fact is None:
            facts.pop(key, None)
        else:
            facts[key] = fact
    return warm.evolve(facts=facts, div=div, shadows=())


def depends(shadow, inputs: set, keys: set) -> bool:
    div, delta = shadow
    return bool(div.inputs & inputs) or bool(delta.keys() & keys)
