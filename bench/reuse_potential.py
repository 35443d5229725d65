#!/usr/bin/env python3
"""How much of one analysis a call summary keyed by the call's whole input could reuse.

Issue 16's first item (per-function summaries) is a large change; this measures what it
would buy before it is built, on a real tree, serially (``-j 0``: every leaf in this
process). Every call of a function that once took >= ``COSTLY`` interpreter steps, in the
warmup or serving pass outside a divergence, gets a key: the pass, the function, the
caller stack, a digest of its receiver, arguments and the path heap they reach
(``value_digest.digest_in_heap``, as ``interp/built.py`` keys a construction), the path's
facts, configs and pc, and the outcomes of the whole-run (configuration) decisions taken
inside it. A call whose key an earlier configuration leaf produced could take that leaf's
result. Its steps count once: a reusable call inside a reusable call is not counted
again. Each call is put in one of three classes, by what a summary would have to carry:

- ``P``: no effect outside its result and path heap (no sink reached, no error, no
  warmup entry, registration or step recorded) and no in-place change of its arguments'
  objects: what ``built.py`` already copies for constructions;
- ``M``: like ``P``, but it changes its arguments' objects in place (a summary needs a
  write set);
- ``E``: it has effects (a summary must replay sinks, entries, outcomes).

The three lines are cumulative (``P``, ``P`` and ``M``, all). Also printed: the steps of
the whole run and the seconds spent digesting keys, which a real summary pays on every
candidate call (the reason stop 39 found keys must be read sets).

    .venv/bin/python bench/reuse_potential.py ~/.cache/warmlint/releases/vllm-0.34.0
    .venv/bin/python bench/reuse_potential.py TREE --config docs/forks/aphrodite-engine.toml

Throw-away instrumentation by design (it wraps ``CallMixin.call_function``): the numbers
go to docs/performance.md; nothing here changes what warmlint does.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import io
import json
import sys
import time
from pathlib import Path

from warmlint.interp.tables import Table
from warmlint.interp.value_digest import _WALKED, _Walk
from warmlint.values import Obj

COSTLY = 200  # steps a call of the function once took, to be keyed at all (--costly)
LISTS = ("hits", "entries", "registry", "_steps", "stepped", "warm_hits")


def _effects(interp) -> tuple:
    policy = interp.policy
    return (len(interp.errors), interp.sinks_hit, interp.registering,
            *(len(getattr(policy, name, ())) for name in LISTS))


# warmlint's plain dataclasses a value can hold (SymFact, Divergence, BranchSite...); not
# parses or frames (syntax trees: shared, named by identity)
_PLAIN_DATA = ("warmlint.state", "warmlint.values")


class Walk(_Walk):
    """Values as a call saw them, comparable across leaves and runs: ``value_digest``'s walk
    (objects and tables numbered by first visit, expanded), except that objects and tables
    that existed before the call (``oid0``, ``tid0``) are only numbers (``old``, numbered in
    ``numbers``: a walk of a call's result shares its trace's), and that the call's own
    are named by kind unless ``expand`` (results); warmlint's plain dataclasses (``SymFact``)
    are compared by content."""

    def __init__(self, oid0: int, tid0: int, expand: bool = False, numbers: dict | None = None,
                 oids: dict | None = None):
        super().__init__()
        self.oid0, self.tid0, self.expand = oid0, tid0, expand
        self.numbers = {} if numbers is None else numbers  # id(old object or table) -> n
        self.oids = {} if oids is None else oids  # object's oid -> its name in the walk

    def old(self, v) -> bool:
        return v.tid <= self.tid0 if type(v) is Table else v.oid <= self.oid0

    def ref(self, v):
        n = self.numbers.setdefault(id(v), len(self.numbers))
        if type(v) is Obj:
            self.oids[v.oid] = ("old", n)
        return ("old", n)

    def results(self) -> "Walk":
        """A walk of the call's result: old objects named as here, its own expanded."""
        return Walk(self.oid0, self.tid0, True, self.numbers, self.oids)

    def heap_key(self, key):
        """A path heap key: (object id, attribute) names the object as the walk did."""
        if type(key[0]) is int:
            return ("attr", self.oids.get(key[0], "new"), key[1])
        return self.one(key)

    def one(self, v):
        t = type(v)
        if t is Obj or t is Table:
            if self.old(v):
                return self.ref(v)
            if not self.expand:
                return ("new", t.__name__, repr(getattr(v, "cls", None)))
            out = self._numbered(v)
            if t is Obj:
                self.oids[v.oid] = ("new", self.seen[id(v)])
            return out
        if dataclasses.is_dataclass(t) and t.__module__ in _PLAIN_DATA \
                and not isinstance(v, _WALKED):
            return (t.__name__,) + self.many(getattr(v, f.name) for f in dataclasses.fields(t))
        return super().one(v)


class Meter:
    def __init__(self, costly: int = COSTLY):
        self.bar = costly
        self.costly: set = set()
        self.seen: dict = {}  # key -> the leaf (its driver's id) that made it first
        self.calls: list = []  # (first tick, last tick, function, class, reusable)
        self.digesting = 0.0
        self.checking = 0.0  # the self-check's digests (not a key's cost)
        self.mismatched = 0  # calls keyed alike that returned differently
        self.mismatched_steps = 0
        self.ticks = 0  # interpreter steps executed (a copied construction's are credited
        # to ``Interp.steps`` without running: not counted here)

    def key(self, interp, fv, args, kwargs, state):
        from warmlint.interp.value_digest import digest_in_heap

        policy = interp.policy
        if not (fv.ref.dotted in self.costly and policy.name in ("warmup", "serving")
                and getattr(policy, "active", None) is None and not interp.in_module_scope
                and state.div is None and not state.shadows and not state.crossed):
            return None, None
        began = time.perf_counter()
        inputs = ([fv.bound] if fv.bound is not None else []) + list(args)
        stack = tuple((f.module, f.qualname, f.warmup) for f in interp.stack)
        try:
            given = digest_in_heap((inputs, kwargs), state.heap)
            key = (policy.name, fv.ref.dotted, stack, given, repr(sorted(state.facts.items())),
                   repr(sorted(state.cfg.items())), repr(state.pc))
        except RecursionError:
            key = given = None
        self.digesting += time.perf_counter() - began
        return key, (inputs, kwargs, given)

    def wrap(self, original):
        meter = self

        def call_function(interp, fv, args, kwargs, state, node):
            key, before = meter.key(interp, fv, args, kwargs, state)
            steps, trace, effects = meter.ticks, len(interp.driver.trace), _effects(interp)
            results = None
            try:
                results = original(interp, fv, args, kwargs, state, node)
                return results
            finally:
                if meter.ticks - steps >= meter.bar:
                    meter.costly.add(fv.ref.dotted)
                if key is not None and results is not None:
                    meter.record(interp, key, before, state, results, steps, trace, effects)
        return call_function

    def record(self, interp, key, before, state, results, steps, trace, effects) -> None:
        from warmlint.interp.value_digest import digest_in_heap

        outcomes = tuple((d.key, d.outcome) for d in interp.driver.trace[trace:])
        inputs, kwargs, given = before
        began = time.perf_counter()
        try:
            changed = digest_in_heap((inputs, kwargs), state.heap) != given
            result = _result(inputs, kwargs, state, results)
        except RecursionError:
            changed, result = True, None
        self.checking += time.perf_counter() - began
        kind = "E" if _effects(interp) != effects else ("M" if changed else "P")
        leaf = id(interp.driver)
        first = self.seen.setdefault((key, outcomes), (leaf, result))
        again = first[0] != leaf
        if again and (result is None or first[1] != result):
            self.mismatched += 1
            self.mismatched_steps += self.ticks - steps
            again = False  # alike inputs, another result: the key misses an input
        self.calls.append((steps, self.ticks, key[1], kind, again))

    def reusable(self, kinds: str) -> tuple[int, collections.Counter]:
        total, by_function, end = 0, collections.Counter(), -1
        for start, stop, function, kind, again in sorted(self.calls, key=lambda s: (s[0], -s[1])):
            if again and kind in kinds and start >= end:
                total += stop - start
                by_function[function] += stop - start
                end = stop
        return total, by_function

    def wrap_tick(self, original):
        meter = self

        def tick(interp):
            meter.ticks += 1
            return original(interp)
        return tick


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--config", help="a warmlint settings file (a fork's)")
    parser.add_argument("--top", type=int, default=6, help="functions listed per class")
    parser.add_argument("--costly", type=int, default=COSTLY,
                        help="steps a function's call once took, to key its calls")
    args = parser.parse_args()

    from warmlint.interp import calls, core

    meter = Meter(args.costly)
    calls.CallMixin.call_function = meter.wrap(calls.CallMixin.call_function)
    core.Interp.tick = meter.wrap_tick(core.Interp.tick)
    leaves, seconds = analyze_serially(args.tree, args.config)
    if leaves is None:
        return 2
    print(f"{args.tree.name}: {leaves} configuration leaves, {seconds:.2f} s serial "
          f"(instrumented), keys digested in {meter.digesting:.2f} s")
    total_steps = meter.ticks
    for kinds, label in (("P", "P"), ("PM", "P+M"), ("PME", "P+M+E")):
        reused, by_function = meter.reusable(kinds)
        print(f"  {label:6} reusable steps {reused:>9,} of {total_steps:,} "
              f"({100 * reused / max(total_steps, 1):.1f}%)")
        for function, n in by_function.most_common(args.top):
            print(f"           {n:>9,}  {function}")
    print(f"  mismatched: {meter.mismatched} calls ({meter.mismatched_steps:,} steps) keyed "
          f"alike but returned differently: not counted (the key misses an input)")
    return 0


def _result(inputs, kwargs, state, results) -> str:
    """The self-check's view of a call's result: per path, the inputs as they are after it,
    its value, the path heap entries it changed, configs and pc; every object expanded,
    numbered by first visit (the inputs' digests agree, so the numbers pair up)."""
    walk, paths = Walk(-1, -1, expand=True), []
    for after, value in results:
        changed = {k: v for k, v in after.heap.items() if state.heap.get(k) is not v}
        body = walk.one((inputs, kwargs, value))
        heap = sorted((repr(walk.heap_key(k)), repr(walk.one(v))) for k, v in changed.items())
        paths.append((body, heap, repr(sorted(after.cfg.items())), repr(after.pc)))
    return repr(paths)


def analyze_serially(tree: Path, config: str | None) -> tuple:
    """(configuration leaves, seconds) of ``warmlint check TREE -j 0`` in this process, its
    output swallowed; (None, seconds) after saying why when the analysis is incomplete."""
    from warmlint.cli import main as warmlint

    argv = ["check", str(tree), "--no-cache", "-j", "0", "--format", "json", "-q"]
    if config:
        argv += ["--config", config]
    out = io.StringIO()
    began = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = warmlint(argv)
    seconds = time.perf_counter() - began
    if code not in (0, 1):
        print(f"warmlint exited {code} on {tree}: not a complete analysis", file=sys.stderr)
        return None, seconds
    return json.loads(out.getvalue())["stats"]["configs"], seconds


if __name__ == "__main__":
    sys.exit(main())
