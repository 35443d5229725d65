"""Branch coverage: from per-config observations to cold branch outcomes.

A *cold outcome* is a divergence (a branch outcome no warmup took, on a path that was
warm until then) that reaches at least one JIT sink no warmup reached, in the same
runner and config. Outcomes of one branch that reach the same cold sinks through the
same chain are one cold outcome. This is what WL001 reports and ``warmlint fix`` repairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint import sinks
from warmlint.analysis import Facts, Program
from warmlint.config_leaves import facts_as_decisions
from warmlint.interp import SinkHit
from warmlint.specialization import request_facts
from warmlint.state import Divergence


@dataclass
class ColdOutcome:
    program: Program
    divergences: list  # [Divergence], one per merged outcome (same site)
    hits: dict  # sink id -> SinkHit (shortest chain)
    leaves: list  # leaf indices where it holds
    cfgs: list = field(default_factory=list)  # path-level config facts at the hits
    entries: list = field(default_factory=list)  # warmup Entry replays that reached it
    paths: list = field(default_factory=list)  # request facts of every path reaching a sink
    path_facts: list = field(default_factory=list)  # the same paths' facts ({sym key: SymFact})

    @property
    def div(self) -> Divergence:
        return self.divergences[0]

    def sinks(self) -> list[dict]:
        return [sinks.as_json(sink_id, hit.site.path, hit.site.line)
                for sink_id, hit in sorted(self.hits.items())]

    def chain(self, hit: SinkHit) -> list[str]:
        return chain_of(self.div, hit)

    def configs(self) -> tuple[list[str], bool]:
        texts, exact = self.program.leaf_configs(self.leaves)
        per_hit = [set(facts_as_decisions(c)) for c in self.cfgs]
        common = set.intersection(*per_hit) if per_hit else set()
        extra = [d.text() for d in sorted(common, key=lambda d: d.key)]
        return texts + [t for t in extra if t not in texts], exact and not common


def chain_of(div: Divergence, hit: SinkHit) -> list[str]:
    """Function names from the branch's function to the sink, then the sink."""
    branch, at_hit = div.stack, hit.stack
    common = 0
    while common < min(len(branch), len(at_hit)) and branch[common] == at_hit[common]:
        common += 1
    if common == len(branch):
        frames = list(at_hit[len(branch) - 1:])
    else:  # the branch's function returned before the sink was reached
        frames = [branch[-1]] + list(at_hit[common:])
    names = [q for _, q in frames if not q.startswith("<")]
    return names + [hit.display + sinks.kind_named(hit.kind).launch_suffix]


def _covered_by_registry(hit: SinkHit, registry: set) -> bool:
    if sinks.kind_named(hit.kind).covered:
        return True  # serving stops at registered dispatchers (see calls.py)
    return any(f"{module}.{qual}" in registry for module, qual in hit.stack)


def _found_downstream(div: Divergence, hit: SinkHit, reach: dict) -> bool:
    """The cold path met another unwarmed outcome on its way to the sink (one that shares
    request inputs with its divergence, so it was followed), that outcome's own
    divergence, found from the warm path, reaches the same sink, and it reads no input
    the first one does not: the sink is cold because of that later, narrower outcome, and
    the finding belongs there (one finding per cause). Values pick up the inputs of the
    branches around them, so a divergence often reads more than its own test."""
    for key in hit.crossed:
        inputs, reached = reach.get(key, (None, ()))
        if hit.sink_id in reached and inputs <= div.inputs:
            return True
    return False


def cold_outcomes(facts: Facts) -> list[ColdOutcome]:
    result: list[ColdOutcome] = []
    for program in facts.programs:
        merged: dict = {}
        for index, leaf in enumerate(program.leaves):
            reach = {key: (d.inputs, {h.sink_id for h in hits})
                     for key, (d, hits, _) in leaf.serving.cold.items()}
            for div, hits, entry in leaf.serving.cold.values():
                best: dict = {}
                for hit in hits:
                    if leaf.warm.covers(hit.sink_id, hit.cfg) \
                            or _covered_by_registry(hit, leaf.warm.registry) \
                            or _found_downstream(div, hit, reach):
                        continue
                    old = best.get(hit.sink_id)
                    if old is None or len(chain_of(div, hit)) < len(chain_of(div, old)):
                        best[hit.sink_id] = hit
                if not best:
                    continue
                key = (div.site.key, div.outcome, frozenset(best))
                if key not in merged:
                    merged[key] = ColdOutcome(program, [div], best, [])
                item = merged[key]
                if index not in item.leaves:
                    item.leaves.append(index)
                item.cfgs += [h.cfg for h in hits if h.sink_id in best]
                item.entries.append(entry)
                for hit in hits:
                    path = request_facts(hit.facts)
                    if hit.sink_id in best and path not in item.paths:
                        item.paths.append(path)
                        item.path_facts.append(hit.facts)
        result += _merge_outcomes(list(merged.values()))
    return result


def _merge_outcomes(items: list[ColdOutcome]) -> list[ColdOutcome]:
    """Outcomes of one branch reaching the same cold sinks the same way: one finding."""
    groups: dict = {}
    for item in items:
        chains = tuple(tuple(item.chain(h)) for _, h in sorted(item.hits.items()))
        key = (item.div.site.key, frozenset(item.hits), chains)
        if key not in groups:
            groups[key] = item
            continue
        head = groups[key]
        if all(d.outcome != item.div.outcome for d in head.divergences):
            head.divergences.append(item.div)
        head.leaves = sorted(set(head.leaves) | set(item.leaves))
        head.cfgs += item.cfgs
        head.entries += item.entries
        for path, facts in zip(item.paths, item.path_facts):
            if path not in head.paths:
                head.paths.append(path)
                head.path_facts.append(facts)
    return list(groups.values())
