"""Cold paths reuse the warm path's calls when nothing they know differs.

A cold state (a path past a divergence) that calls a function at the same call site, with
the same arguments, as the warm path did, only behaves differently if the callee reads
something the two paths disagree on: a fact about a request input (``generators`` is
truthy on one, falsy on the other). The warm call records the symbols its branches and
kernel launches read; a cold call whose facts agree on all of them takes the warm call's
return value instead of re-running the callee, whose sinks the warm path already reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmlint.state import State
from warmlint.values import Value, join_all, same


@dataclass
class WarmCall:
    args: list
    kwargs: dict
    facts: dict
    cfg: dict
    reads: set
    returned: Value


class CallReuse:
    def __init__(self):
        self.calls: dict = {}  # (call site id, callee) -> [WarmCall]
        self.reads: list = []  # one set per warm call being interpreted

    def note(self, keys: set) -> None:
        for reads in self.reads:
            reads |= keys

    def lookup(self, site, callee, args, kwargs, state: State) -> Value | None:
        for call in self.calls.get((id(site), callee), ()):
            if (_same_args(call.args, args) and call.kwargs.keys() == kwargs.keys()
                    and _same_args([call.kwargs[k] for k in kwargs], list(kwargs.values()))
                    and call.cfg == state.cfg
                    and all(call.facts.get(k) == state.facts.get(k) for k in call.reads)):
                return call.returned
        return None

    def begin(self) -> None:
        self.reads.append(set())

    def end(self, site, callee, args, kwargs, state: State, results: list) -> None:
        reads = self.reads.pop()
        self.note(reads)
        warm = [value for st, value in results if st.div is None]
        if warm:
            entry = WarmCall(list(args), dict(kwargs), state.facts, state.cfg, reads,
                             join_all(warm))
            self.calls.setdefault((id(site), callee), []).append(entry)


def _same_args(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y or same(x, y) for x, y in zip(a, b))
