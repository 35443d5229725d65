"""Cold paths reuse earlier calls when nothing the callee reads differs.

A cold state (a path past a divergence) that calls a function at the same call site, with
the same arguments, as the warm path did, only behaves differently if the callee reads
something the two paths disagree on: a fact about a request input (``generators`` is
truthy on one, falsy on the other). The warm call records the symbols its branches and
kernel launches read; a cold call whose facts agree on all of them, and whose divergence
shares no request input with an unwarmed outcome the warm call met (the exact run would go
on past that outcome, crossed), takes the warm call's paths instead of re-running the
callee: its return values with the facts the callee learned, and its sinks, recorded again
for the divergence (the exact run reaches them on the divergence's path too).

Cold paths also reuse each other's calls: every divergence runs the rest of the sampler on
a path of its own, so one helper is called at one site with the same arguments once per
divergence. A cold call that agrees with an earlier cold call on everything the callee
read (facts, configs, and whether an unwarmed outcome it met shares request inputs with
the divergence) takes that call's paths and records that call's sinks again for its own
divergence instead of re-running the callee.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from warmlint.state import State
from warmlint.values import Taint, join_all, same


CALLS = itertools.count()  # warm calls made, and call records opened, in order


@dataclass
class WarmCall:
    args: list
    kwargs: dict
    facts: dict
    cfg: dict
    reads: set
    returned: list  # (facts the callee learned, joined return value) per distinct facts
    tests: set  # inputs of the unwarmed outcomes its warm paths met (frozensets)
    depth: int  # the stack's at the call: hit stacks keep the callee's own frames
    hits: list  # SinkHit recorded inside the callee on its warm paths
    log: object = None  # what it read, when warm_records.warm_call could record it
    seq: int = field(default_factory=lambda: next(CALLS))  # when it ended (read_trace)


@dataclass
class ColdCall:
    args: list
    kwargs: dict
    facts: dict  # the caller's, to tell what the callee learned
    cfg: dict
    pc: Taint
    inputs: frozenset  # the divergence's request inputs
    depth: int  # the stack's: depth and recursion limits
    reads: set
    div_tests: set  # inputs of unwarmed outcomes met: kept if they share the divergence's
    results: list  # (State, Value) as the callee returned them
    hits: list  # SinkHit recorded inside the callee, with the stacks they had
    record: object = None  # its cold_share.Record, when it has one


class CallReuse:
    enabled = True  # off only in tests, which check that reuse changes no result

    def __init__(self):
        self.calls: dict = {}  # (call site id, callee) -> [WarmCall]
        self.cold: dict = {}  # (call site id, callee) -> [ColdCall]
        self.reads: list = []  # one set per call being interpreted
        self.div_tests: list = []  # one set per cold call being interpreted
        self.warm_tests: list = []  # one set per warm call being interpreted

    def note(self, keys: set) -> None:
        for reads in self.reads:
            reads |= keys

    def lookup(self, site, callee, args, kwargs, state: State) -> tuple | None:
        """The warm call's outcomes for the cold ``state``, or None: its paths, (state,
        value) per set of facts the callee learned on its warm paths (a request field it
        tested, taking the outcome the warmup took: the exact run learns it too), the
        sinks it reached, which the exact run reaches again on this divergence's path,
        and the WarmCall itself."""
        for call in self.calls.get((id(site), callee), ()) if self.enabled else ():
            if (same_call(call.args, call.kwargs, args, kwargs) and call.cfg == state.cfg
                    and _agree(call.facts, state.facts, call.reads)
                    and not any(t & state.div.inputs for t in call.tests)):
                self.note(call.reads)
                paths = [(state.evolve(facts={**state.facts, **learned}) if learned else state,
                          value) for learned, value in call.returned]
                return paths, [replace(hit, facts=_rebase(hit.facts, call, state),
                                       stack=hit.stack[call.depth:], crossed=state.crossed)
                               for hit in call.hits], call
        return None

    def cold_lookup(self, site, callee, args, kwargs, state: State, depth: int):
        for call in self.cold.get((id(site), callee), ()) if self.enabled else ():
            if (call.depth == depth and call.cfg == state.cfg and call.pc == state.pc
                    and all(bool(t & call.inputs) == bool(t & state.div.inputs)
                            for t in call.div_tests)
                    and same_call(call.args, call.kwargs, args, kwargs)
                    and _agree(call.facts, state.facts, call.reads)):
                self.note(call.reads)
                for tests in self.div_tests:
                    tests |= call.div_tests
                return call
        return None

    def begin(self) -> None:
        self.reads.append(set())

    def begin_warm(self) -> None:
        self.begin()
        self.warm_tests.append(set())

    def note_warm_test(self, inputs: frozenset) -> None:
        """An unwarmed outcome on a warm path: a cold path sharing its inputs would go on
        past it (crossed), so that path cannot take the warm call's outcomes."""
        for tests in self.warm_tests:
            tests.add(inputs)

    def begin_cold(self) -> None:
        self.begin()
        self.div_tests.append(set())
        self.warm_tests.append(set())  # none on a cold path: keeps the stacks paired

    def note_div_test(self, inputs: frozenset) -> None:
        """An unwarmed outcome on a cold path, kept or dropped by its inputs (conds.py)."""
        for tests in self.div_tests:
            tests.add(inputs)

    def end(self, site, callee, args, kwargs, state: State, results: list, depth: int,
            hits: list) -> WarmCall | None:
        reads, tests = self.reads.pop(), self.warm_tests.pop()
        self.note(reads)
        groups: dict = {}  # facts learned -> (those facts, [values])
        for st, value in results:
            if st.div is None:
                learned = _learned(st.facts, state.facts)
                key = repr(sorted(learned.items()))
                groups.setdefault(key, (learned, []))[1].append(value)
        if groups:
            entry = WarmCall(list(args), dict(kwargs), state.facts, state.cfg, reads,
                             [(learned, join_all(values)) for learned, values in groups.values()],
                             tests, depth, hits)
            self.calls.setdefault((id(site), callee), []).append(entry)
            return entry
        return None

    def end_cold(self, site, callee, args, kwargs, state: State, depth: int, results: list,
                 hits: list, keep: bool = True) -> ColdCall:
        """The call made; kept for later cold calls of this leaf unless ``keep`` is False
        (a call on the path heap: ``replay_cold`` takes the heap it returned)."""
        reads, div_tests = self.reads.pop(), self.div_tests.pop()
        self.warm_tests.pop()
        self.note(reads)
        call = ColdCall(list(args), dict(kwargs), state.facts, state.cfg, state.pc,
                        state.div.inputs, depth, reads, div_tests, results, hits)
        if keep:
            self.cold.setdefault((id(site), callee), []).append(call)
        return call


def replay_cold(call: ColdCall, state: State) -> tuple[list, list]:
    """The reused call's paths and sinks, rebased on ``state``'s path (the facts it had
    there, plus what the callee learned); sink stacks keep the callee's own frames."""
    paths = [(state.evolve(facts=_rebase(st.facts, call, state), cfg=st.cfg, heap=st.heap), value)
             for st, value in call.results]
    return paths, [replace(hit, facts=_rebase(hit.facts, call, state),
                           stack=hit.stack[call.depth:]) for hit in call.hits]


def _rebase(facts: dict, call: ColdCall | WarmCall, state: State) -> dict:
    learned = _learned(facts, call.facts)
    return {**state.facts, **learned} if learned else state.facts


def _learned(facts: dict, before: dict) -> dict:
    """The facts a callee learned: those of ``facts`` that differ from ``before``."""
    return {k: v for k, v in facts.items() if before.get(k) != v}


def _agree(facts_a: dict, facts_b: dict, keys: set) -> bool:
    return all(facts_a.get(k) == facts_b.get(k) for k in keys)


def same_call(args_a: list, kwargs_a: dict, args_b: list, kwargs_b: dict,
              same_arg=lambda x, y: x is y or same(x, y)) -> bool:
    """Two calls' arguments, positional and keyword, pairwise alike by ``same_arg``."""
    return (_same_args(args_a, args_b, same_arg) and kwargs_a.keys() == kwargs_b.keys()
            and _same_args([kwargs_a[k] for k in kwargs_b], list(kwargs_b.values()), same_arg))


def _same_args(a: list, b: list, same_arg) -> bool:
    return len(a) == len(b) and all(same_arg(x, y) for x, y in zip(a, b))
