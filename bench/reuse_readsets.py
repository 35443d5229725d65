#!/usr/bin/env python3
"""What call summaries keyed by what the call *read* could reuse, checked against results.

``reuse_potential.py`` keys a call by its whole input; a summary checked field by field
(stop 39's design) only needs what the callee read to agree. This measures that, serially
on a real tree: each call of a costly function (as there, in the warmup or serving pass
outside a divergence) records, in order, what it reads of the objects that existed before
it began: the code of every function it runs, its arguments (shallow: an object is a
number, by first appearance), every
attribute read and every old value a weak attribute write joins with, table rows, module
globals, configuration facts looked up; plus the function, caller stack, path facts,
configs and pc at the call and the configuration outcomes taken inside. Objects the call
made itself are not reads. A call whose read trace an earlier leaf produced could take
that leaf's result.

Self-check: the result of such a call (each path's return value, path heap changes,
configs and pc, with objects that existed before named by their number in the trace)
must equal the earlier leaf's. ``mismatched`` counts the calls where it does not: reads
this instrumentation misses (a summary keyed this way would be wrong there), so the
reusable share is trustworthy only as far as that count is small. Steps as in
``reuse_potential.py`` (executed ticks; nested reusable calls counted once).

    .venv/bin/python bench/reuse_readsets.py ~/.cache/warmlint/releases/vllm-0.34.0
    .venv/bin/python bench/reuse_readsets.py TREE --after EDITED_COPY_OF_TREE

With ``--after``, the same for an edit: TREE is analyzed, then its edited copy, and a call
of the second run counts as reusable where the first run, or an earlier leaf of the
second, made the same read trace (with the same result): what summaries stored by one run
and read by the next (and shared by its leaves) could skip. Both
runs parse their own trees, so values holding syntax nodes never match across them: a
lower bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from reuse_potential import COSTLY, Walk, _effects, analyze_serially
from reuse_potential import Meter as WholeInput


class Trace(Walk):
    """One open call's reads, in order (``Walk`` names the objects in them)."""

    def __init__(self, oid0: int, tid0: int):
        super().__init__(oid0, tid0)
        self.items: list = []
        self.hits = 0  # the divergence's sinks recorded before the call


class ReadMeter(WholeInput):
    def __init__(self, costly: int = COSTLY):
        super().__init__(costly)
        self.open: list = []  # Trace per keyed call being interpreted
        self.results: dict = {}  # key -> (run, leaf, result digest)
        self.run = 1  # 2: the analysis of --after's tree, reusing run 1's results only
        self.mismatched = 0
        self.mismatched_steps = 0
        self.codes: dict = {}  # id(parse) -> digest of the function's source
        self.unkeyed: list = []  # spans of calls inside a warmup's sampler call (an entry)
        self.unkeyed_div: list = []  # spans of calls on a divergence, when not keyed
        self.divergences = False  # key calls on a serving divergence too (--divergences)
        self.keep: list = []

    def note(self, *item_of) -> None:
        """``item_of(trace)`` -> the read as ``trace`` names it, or None (a new object)."""
        for trace in self.open:
            item = item_of[0](trace)
            if item is not None:
                trace.items.append(item)

    def wrap(self, original):
        meter = self

        def call_function(interp, fv, args, kwargs, state, node):
            from warmlint.interp import tables
            from warmlint.values import _OBJ_IDS

            if meter.open:  # the callee's code is read too (an edit changes it)
                code = meter.code(interp, fv.ref)
                meter.note(lambda t: ("code", fv.ref.dotted, code))
            key, _ = meter.key_context(interp, fv, state)
            trace = None
            if key is not None:
                trace = Trace(next(_OBJ_IDS), next(tables._TABLE_IDS))
                trace.hits = len(interp.policy.hits_of(state)) if state.div is not None else 0
                inputs = ([fv.bound] if fv.bound is not None else []) + list(args)
                trace.items.append(("args", meter.code(interp, fv.ref), trace.one(inputs),
                                    trace.one(kwargs)))
                meter.open.append(trace)
            steps, first_decision = meter.ticks, len(interp.driver.trace)
            effects = _effects(interp)
            results = None
            try:
                results = original(interp, fv, args, kwargs, state, node)
                return results
            finally:
                if trace is not None:
                    meter.open.remove(trace)
                if meter.ticks - steps >= meter.bar:
                    meter.costly.add(fv.ref.dotted)
                if getattr(interp.policy, "active", None) is not None:
                    meter.unkeyed.append((steps, meter.ticks))
                elif state.div is not None and key is None:
                    meter.unkeyed_div.append((steps, meter.ticks))
                if trace is not None and results is not None:
                    meter.settle(interp, key, trace, state, results, steps, first_decision,
                                 effects)
        return call_function

    def code(self, interp, ref) -> str | None:
        """A digest of the function's source (None: not in the tree), once per parse."""
        import hashlib

        parsed = interp.resolver.parsed(ref)
        if parsed is None:
            return None
        got = self.codes.get(id(parsed.wrapper_module))
        if got is None:
            text = parsed.wrapper_module.code_for_node(parsed.node)
            got = self.codes[id(parsed.wrapper_module)] = hashlib.sha1(text.encode()).hexdigest()
            self.keep.append(parsed)  # its id stays its own
        return got

    def key_context(self, interp, fv, state):
        policy = interp.policy
        if not (fv.ref.dotted in self.costly and policy.name in ("warmup", "serving")
                and getattr(policy, "active", None) is None and not interp.in_module_scope
                and (state.div is None or self.divergences)
                and not state.shadows and not state.crossed):
            return None, None
        stack = tuple((f.module, f.qualname, f.warmup) for f in interp.stack)
        return (policy.name, fv.ref.dotted, stack, repr(sorted(state.facts.items())),
                repr(sorted(state.cfg.items())), repr(state.pc), repr(state.div)), None

    def settle(self, interp, key, trace, state, results, steps, first_decision, effects):
        began = time.perf_counter()
        outcomes = tuple((d.key, d.outcome) for d in interp.driver.trace[first_decision:])
        full = (key, outcomes, repr(trace.items))
        walk, paths = trace.results(), []
        for after, value in results:
            changed = {k: v for k, v in after.heap.items() if state.heap.get(k) is not v}
            heap = sorted((repr(walk.heap_key(k)), repr(walk.one(v))) for k, v in changed.items())
            paths.append((repr(walk.one(value)), heap,
                          repr(sorted(after.cfg.items())), repr(after.pc)))
        if state.div is not None:  # the sinks the call recorded for its divergence
            hits = interp.policy.hits_of(state)[trace.hits:]
            paths.append(sorted((h.sink_id, h.site.key) for h in hits))
        result = repr(paths)
        self.digesting += time.perf_counter() - began
        kind = "E" if _effects(interp) != effects else "P"  # (in-place writes not told apart)
        leaf = id(interp.driver)
        first = self.results.setdefault(full, (self.run, leaf, result))
        again = (first[0], first[1]) != (self.run, leaf)  # an earlier run's, or leaf's
        if again and first[2] != result:
            self.mismatched += 1
            self.mismatched_steps += self.ticks - steps
            again = False  # not counted as reusable
        self.calls.append((steps, self.ticks, key[1], kind, again))


def install(meter: ReadMeter) -> None:
    from warmlint.config_leaves import ConfigDriver
    from warmlint.interp import attrs, calls, core, tables

    calls.CallMixin.call_function = meter.wrap(calls.CallMixin.call_function)
    core.Interp.tick = meter.wrap_tick(core.Interp.tick)

    obj_attr = attrs.AttrMixin._obj_attr

    def _obj_attr(interp, obj, name, state):
        value = obj_attr(interp, obj, name, state)
        if meter.open:
            meter.note(lambda t: ("attr", t.ref(obj), name, t.one(value))
                       if t.old(obj) else None)
        return value
    attrs.AttrMixin._obj_attr = _obj_attr

    set_attr = attrs.AttrMixin.set_attr

    def _set_attr(interp, target, name, value, state):
        from warmlint.values import Obj, OneOf

        if meter.open:
            for obj in (target.options if isinstance(target, OneOf) else (target,)):
                if isinstance(obj, Obj) and not obj.lazy and name in obj.attrs:
                    old = obj.attrs[name]
                    meter.note(lambda t, o=obj, v=old: ("joins", t.ref(o), name, t.one(v))
                               if t.old(o) else None)
        return set_attr(interp, target, name, value, state)
    attrs.AttrMixin.set_attr = _set_attr

    global_value = attrs.AttrMixin.global_value

    def _global_value(interp, module, name):
        value = global_value(interp, module, name)
        if meter.open:
            meter.note(lambda t: ("global", module, name, t.one(value)))
        return value
    attrs.AttrMixin.global_value = _global_value

    element = tables.element

    def _element(state, table):
        value = element(state, table)
        if meter.open:
            meter.note(lambda t: ("rows", t.ref(table), t.one(value))
                       if t.old(table) else None)
        return value
    tables.element = _element

    from warmlint.interp.reuse import CallReuse
    from warmlint.warmup import WarmupPass

    warm_outcomes = WarmupPass.warm_outcomes

    def _warm_outcomes(policy, key, cfg):  # serving consults what the warmup took
        found = warm_outcomes(policy, key, cfg)
        if meter.open:
            meter.note(lambda t: ("warm", key, repr(sorted(cfg.items())),
                                  repr(sorted(found)) if found is not None else None))
        return found
    WarmupPass.warm_outcomes = _warm_outcomes

    from warmlint.serving import ServingPass

    registered_call = ServingPass.registered_call

    def _registered_call(policy, interp, dotted):  # the warmup's JIT-warmup registry
        found = registered_call(policy, interp, dotted)
        if meter.open:
            meter.note(lambda t: ("registered", dotted, found))
        return found
    ServingPass.registered_call = _registered_call

    for name in ("lookup", "cold_lookup"):  # serving's in-run reuse: an earlier call's result
        def _lookup(reuse, *args, _original=getattr(CallReuse, name), _name=name, **kwargs):
            found = _original(reuse, *args, **kwargs)
            if meter.open:
                meter.note(lambda t: (_name, found is not None))
            return found
        setattr(CallReuse, name, _lookup)

    fact = ConfigDriver.fact

    def _fact(driver, sym):
        found = fact(driver, sym)
        if meter.open:
            meter.note(lambda t: ("fact", sym.key, repr(found)))
        return found
    ConfigDriver.fact = _fact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--config", help="a warmlint settings file (a fork's)")
    parser.add_argument("--top", type=int, default=6, help="functions listed")
    parser.add_argument("--after", type=Path,
                        help="then analyze this tree (TREE edited) and count what it could "
                             "reuse of TREE's run: persistent summaries after an edit")
    parser.add_argument("--costly", type=int, default=COSTLY,
                        help="steps a function's call once took, to key its calls")
    parser.add_argument("--divergences", action="store_true",
                        help="key calls on serving's divergences (cold paths) too, with the "
                             "divergence in the key and its sinks in the check")
    args = parser.parse_args()

    meter = ReadMeter(args.costly)
    meter.divergences = args.divergences
    install(meter)
    for tree in [args.tree] + ([args.after] if args.after else []):
        if tree is args.after:  # the edited tree: run 1's summaries, and its own leaves'
            meter.run, meter.calls, meter.ticks, meter.mismatched = 2, [], 0, 0
            meter.mismatched_steps, meter.unkeyed, meter.unkeyed_div = 0, [], []
        leaves, seconds = analyze_serially(tree, args.config)
        if leaves is None:
            return 2
    what = f"after {args.tree.name}, " if args.after else ""
    print(f"{tree.name}: {what}{leaves} configuration leaves, {seconds:.2f} s serial "
          f"(instrumented), results compared in {meter.digesting:.2f} s")
    for kinds, label in (("P", "no effect"), ("PE", "all")):
        reused, by_function = meter.reusable(kinds)
        print(f"  {label:9} reusable steps {reused:>9,} of {meter.ticks:,} "
              f"({100 * reused / max(meter.ticks, 1):.1f}%)")
        for function, n in by_function.most_common(args.top):
            print(f"              {n:>9,}  {function}")
    for spans, where in ((meter.unkeyed_div, "on a serving divergence (a cold path)"),
                         (meter.unkeyed, "inside a warmup's sampler call")):
        outside = _union(spans)
        print(f"  never keyed: {outside:,} steps ({100 * outside / max(meter.ticks, 1):.1f}%) "
              f"in calls {where}")
    print(f"  mismatched: {meter.mismatched} calls ({meter.mismatched_steps:,} steps) read "
          f"alike but returned differently (reads this instrumentation misses)")
    return 0


def _union(spans: list) -> int:
    total, end = 0, -1
    for start, stop in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start >= end:
            total, end = total + stop - start, stop
        elif stop > end:
            total, end = total + stop - end, stop
    return total


if __name__ == "__main__":
    sys.exit(main())
