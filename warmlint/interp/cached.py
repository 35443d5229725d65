"""Functions decorated with ``functools.cache`` or ``lru_cache``: a repeated call returns
the first call's value without running the body again, as in Python.

vLLM caches its environment probes this way (``is_uva_available()``, asked once per
buffer the v2 runner builds: ~1,900 times in one analysis of 0.34.0). Only a call that
the interpreter can answer exactly as Python's cache would is remembered: a plain
function (not a method), constant arguments, one path out, and nothing else changed —
no fact learned, no config decided, no sink reached, no error. Such a call's value does
not depend on the path that made it, so a later call on any path of the same
configuration leaf gets it back (``Memo``: one per leaf, shared by warming and serving,
as one process's cache is). Anything else runs the body again, as before.
"""

from __future__ import annotations

from warmlint.values import Const, Func

DECORATORS = frozenset({"functools.cache", "functools.lru_cache"})


def key(interp, fv, args, kwargs) -> tuple | None:
    """The memo key of a call to a cached plain function with constant arguments."""
    if not isinstance(fv, Func) or fv.bound is not None or fv.compiled:
        return None
    values = list(args) + [kwargs[name] for name in sorted(kwargs)]
    if not all(type(v) is Const for v in values):
        return None
    if not DECORATORS.intersection(interp.resolver.decorators(fv.ref)):
        return None
    return ("functools.cache", fv.ref.dotted, tuple(sorted(kwargs)),
            tuple((type(v.value).__name__, repr(v.value)) for v in values))


def effects(interp) -> tuple:
    """What a call may have done besides returning, counted."""
    return interp.sinks_hit, len(interp.driver.trace), len(interp.errors)


def store(interp, memo_key: tuple, state, results: list, before: tuple) -> None:
    if len(results) != 1 or effects(interp) != before:
        return
    after, value = results[0]
    if (after.facts == state.facts and after.cfg == state.cfg and after.div is state.div
            and after.heap == state.heap and after.shadows == state.shadows
            and after.crossed == state.crossed):
        interp.lazy_memo[memo_key] = value
