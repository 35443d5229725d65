"""What rules may read: a small read-only facade over the analysis results.

Rules (``rules/``) get a ``Facts`` in ``check(facts)`` and ``fix(finding, facts)`` and
nothing else: the interpreter's recorders, leaves and 3-tuples stay behind it, so the
engine can change shape without touching a rule. What it offers:

- ``facts.settings``: the resolved settings (``fix_values``, ``rule_enabled``, ...).
- ``facts.programs``: one ``Program`` per model runner: ``runner``, ``warmups``
  (qualified names) and ``config_tests`` (``ConfigTest``: an ``atom in (literals)`` test
  seen in a warmup or in a constructor's dispatch binding).
- ``facts.cold_branches``: ``ColdBranch``, a branch outcome no warmup takes that
  reaches a JIT sink no warmup reaches: its ``site``, ``outcomes`` (with the request
  ``literals`` that decided each), ``sinks``, ``chain``, ``configs()``, the warmup
  ``calls`` whose replay reached it and the ``binding_decisions`` it is cold under.
- ``facts.specialization_gaps``: ``SpecializationGap``, a Triton kernel parameter whose
  specialization classes serving reaches and the warmups never compiled.
- ``facts.warmup_calls``: every warmup entry call (``warmup_calls.WarmupCall``).

Sites are ``state.BranchSite`` records (``path``, ``line``, ``col``, ``function``,
``condition``, ``key``); sinks are the JSON dicts of ``sinks.as_json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from warmlint import sinks as sink_table
from warmlint.edits import NoFix
from warmlint.serving import BATCH_INPUT
from warmlint.specialization import ALIGNED
from warmlint.values import IntExpr, options
from warmlint.warmup_calls import RequestArgument, WarmupCall

__all__ = ["Facts", "Program", "ConfigTest", "ColdBranch", "Outcome", "Literal",
           "SpecializationGap", "WarmupCall", "RequestArgument", "BATCH_INPUT", "ALIGNED"]


class Literal(NamedTuple):
    text: str  # the literal's source
    inputs: tuple  # request inputs it reads ("SamplingMetadata.generators")
    positive: bool  # the outcome makes its value set (truthy / not None)


class Outcome(NamedTuple):
    id: str  # "body", "body#1", "else"
    text: str  # "`generators` is true"
    inputs: frozenset
    literals: tuple  # (Literal, ...) that decided it


class ConfigTest(NamedTuple):
    context: str  # "warmup" | "constructor" | other
    site: object  # BranchSite
    key: str  # config symbol
    label: str  # how findings name it
    literals: frozenset


@dataclass(frozen=True)
class Program:
    """One model runner and its warmups (runners are separate deployments)."""

    runner: str
    warmups: tuple  # qualified names, sorted
    config_tests: tuple  # ConfigTest, in the order the leaves met them


class Facts:
    def __init__(self, analysis):
        self._analysis = analysis
        self._calls: dict = {}  # id(entry) -> WarmupCall
        self._memo: dict = {}  # shared by the WarmupCalls (one CST walk per function)

    @property
    def settings(self):
        return self._analysis.settings

    @cached_property
    def programs(self) -> list:
        from warmlint.interp.attrs import config_label

        out = []
        for program in self._analysis.programs:
            tests = tuple(ConfigTest(context, site, key, config_label(key), frozenset(const))
                          for leaf in program.leaves
                          for context, site, key, const in leaf.warm.config_tests)
            out.append(Program(program.runner, _warmups(program), tests))
        return out

    @cached_property
    def cold_branches(self) -> list:
        from warmlint.coverage import cold_outcomes

        return [ColdBranch(self, cold) for cold in cold_outcomes(self._analysis)]

    @cached_property
    def specialization_gaps(self) -> list:
        from warmlint.key_pairs import pair_gaps
        from warmlint.specialization import launches, specialization_gaps

        found = list(launches(self._analysis))  # signatures read once for both checks
        self._unjudged: set = set()
        gaps = (specialization_gaps(self._analysis, found, self._unjudged)
                + pair_gaps(self._analysis, found))
        return [SpecializationGap(self, gap) for gap in gaps]

    @property
    def unjudged(self) -> list:
        """``kernel.param`` of each request-fed Triton argument whose specialization
        classes the analysis cannot tell (a row count from the draft-token layout, a
        buffer from a cache): WL004 says nothing about them either way."""
        self.specialization_gaps  # noqa: B018 - computes them
        return sorted(self._unjudged)

    @cached_property
    def warmup_calls(self) -> list:
        """Every entry call of every warmup, per runner and config (a call met under two
        configs is listed twice, with the same ``code`` and ``anchor``)."""
        return [self.call(entry) for program in self._analysis.programs
                for leaf in program.leaves for entry in leaf.warm.entries]

    def call(self, entry) -> WarmupCall:
        if id(entry) not in self._calls:
            self._calls[id(entry)] = (entry, WarmupCall(entry, self._analysis.resolver, self._memo))
        return self._calls[id(entry)][1]


_CLASS = re.compile(r"\b([A-Z]\w*)\.")  # a class named in a path's fact key


def _warmups(program) -> tuple:
    return tuple(sorted(w.ref.qualname for w in program.warmups))


class ColdBranch:
    """A branch outcome no warmup takes, reaching JIT sinks no warmup reaches (WL001)."""

    def __init__(self, facts: Facts, cold):
        self._cold = cold
        self._facts = facts
        self.site = cold.div.site
        self.runner = cold.program.runner
        self.warmups = list(_warmups(cold.program))
        self.paths = cold.paths  # request facts of every path reaching a sink
        self.sink_ids = frozenset(cold.hits)
        self.outcomes = [Outcome(d.outcome, d.outcome_text, d.inputs,
                                 tuple(Literal(*lit) for lit in d.literals))
                         for d in cold.divergences]

    @property
    def sinks(self) -> list:
        return self._cold.sinks()

    @property
    def chain(self) -> list:
        """Functions from the branch to the first sink, then the sink."""
        return self._cold.chain(self._cold.hits[self.sinks[0]["id"]])

    def configs(self) -> tuple[list, bool]:
        """(config conditions it holds under, whether they pick exactly those configs)."""
        return self._cold.configs()

    @property
    def calls(self) -> list:
        """The warmup entry calls whose serving replay reached it, first one first."""
        return [self._facts.call(e) for e in self._cold.entries]

    def request_changes(self, arg: RequestArgument) -> list:
        """[(field, value source)] making a warmup call passing ``arg`` take one of the
        serving paths that reach the cold sinks (the path needing the fewest changes);
        raises ``NoFix`` when no path can be taken by setting fields of ``arg``."""
        from warmlint.request_values import best

        return best(self._cold.path_facts, arg.values, arg.cls, self._facts.settings.fix_values)

    def row_changes(self, cls: str) -> list:
        """[(field, value source)]: the ``fix-values`` field that, set in every per-request
        row (model runner v2), takes one of the serving paths reaching the cold sinks."""
        from warmlint.request_values import row_changes

        return row_changes(self._cold.path_facts, cls, self._facts.settings.fix_values)

    def row_fill(self, call: WarmupCall):
        """How ``call``'s warmup fills per-request rows, in source terms
        (``row_fill.RowFill``); raises ``NoFix`` where it cannot be spelled."""
        return _row_fill(self._facts, self._cold.program, call)

    @property
    def binding_decisions(self) -> list:
        """Config decisions (the sampler's dispatch binding) common to where its sinks are
        cold: the configs of this outcome and of every other cold outcome of the runner
        reaching one of them (one call warming a sink serves them all, so its guard must
        not be narrower than their union)."""
        program = self._cold.program
        indices = set(self._cold.leaves)
        for other in self._facts.cold_branches:
            if other.runner == self.runner and other.sink_ids & self.sink_ids:
                indices |= set(other._cold.leaves)
        chosen = [program.leaves[i] for i in sorted(indices)]
        common = set(chosen[0].decisions)
        for leaf in chosen[1:]:
            common &= set(leaf.decisions)
        return [d for d in chosen[0].decisions if d in common]


class SpecializationGap:
    """A request-dependent Triton kernel parameter whose serving classes (constexpr
    values, int ``== 1``/``% 16 == 0``/other, None-ness) the warmups never compiled."""

    def __init__(self, facts: Facts, gap):
        self._gap = gap
        self._facts = facts
        hit = gap.hit
        self.kernel = gap.kernel  # sink id
        self.kernel_name = sink_table.parse_id(gap.kernel)[1].rsplit(".", 1)[-1]
        self.param = gap.param
        # a pair (key_pairs): ``param`` at ``pair_value`` x the batch parameter's classes
        self.batch_param, self.pair_value = gap.batch_param, gap.pair_value
        self.site = hit.site  # the launch
        self.function = hit.stack[-1][1] if hit.stack else ""
        self.constexpr = gap.param in gap.sig.constexpr
        # computed from a request integer through calls (``next_power_of_2(1 + logprobs)``)
        self.computed = next((o for o in options(hit.args[gap.param]) if isinstance(o, IntExpr)),
                             None)
        self.derived = self.computed is not None
        self.decorator = gap.sig.decorator
        self.warmed, self.missing, self.inputs = gap.warmed, gap.missing, gap.inputs
        self.runner = gap.program.runner
        self.warmups = list(_warmups(gap.program))
        self.paths = gap.paths
        self.sinks = [sink_table.as_json(gap.kernel, hit.site.path, hit.site.line)]
        self.chain = [q for _, q in hit.stack[1:] if not q.startswith("<")] + [
            self.kernel_name + sink_table.kind_of(gap.kernel).launch_suffix]

    def configs(self) -> tuple[list, bool]:
        from warmlint.config_leaves import facts_as_decisions

        gap = self._gap
        configs, exact = gap.program.leaf_configs(sorted(gap.leaves))
        common = set.intersection(*(set(facts_as_decisions(c)) for c in gap.cfgs))
        return configs + [d.text() for d in sorted(common, key=lambda d: d.key)], exact

    def typed_fields(self, cls: str) -> list:
        """[(owner class, field)]: the request fields passed where serving produces the
        typed pointer class ``cls`` (``SamplingMetadata.top_k`` for "tensor int32")."""
        from warmlint.pointer_types import request_field

        return sorted({tuple(o.key.split(".")) for _, h in self._gap.missing_hits.get(cls, [])
                       for o in options(h.args.get(self.param)) if request_field(o)})

    def smallest_batch(self, cls: str) -> int | None:
        """The smallest batch size in ``cls`` that the launch's path allows: a path whose
        argument is the batch size itself, where there is one (a speculative path's rows
        are its tokens, not requests; warming its class on a plain batch warms it too)."""
        from warmlint.serving import SERVING_BATCH
        from warmlint.specialization import smallest_in_class
        from warmlint.state import SymFact

        hits = [h for _, h in self._gap.missing_hits.get(cls, [])] + [self._gap.hit]
        own = [h for h in hits if any(getattr(o, "key", None) == SERVING_BATCH.key
                                      for o in options(h.args.get(self.param)))]
        hit = (own or hits)[0]
        return smallest_in_class(cls, hit.facts.get(SERVING_BATCH.key) or SymFact())

    def request_changes(self, arg: RequestArgument, cls: str) -> list:
        """Like ``ColdBranch.request_changes``, for the serving paths that launch the kernel
        with ``param`` in the missing class ``cls``."""
        from warmlint.request_values import best

        paths = [hit.facts for _, hit in self._gap.missing_hits.get(cls, [])]
        return best(paths, arg.values, arg.cls, self._facts.settings.fix_values)

    def own_request_changes(self, arg: RequestArgument, cls: str) -> list:
        """``request_changes`` over the serving paths whose request facts are all about
        ``arg``'s class (a speculative path's rows come with its other request object)."""
        from warmlint.request_values import best

        paths = [hit.facts for _, hit in self._gap.missing_hits.get(cls, [])
                 if all(name == arg.cls for key in hit.facts for name in _CLASS.findall(key))]
        if not paths:
            raise NoFix(f"no serving path in class {cls} is about {arg.cls} alone")
        return best(paths, arg.values, arg.cls, self._facts.settings.fix_values)

    @property
    def other_calls(self) -> list:
        """Entry calls of the warmups where the gap holds that did not launch the kernel
        (the sampler's own call, on the FlashInfer branch): given a serving path's
        request fields, one of them may."""
        program, out, warm = self._gap.program, [], self.warm_calls
        for i in sorted(self._gap.leaves):
            for entry in program.leaves[i].warm.entries:
                call = self._facts.call(entry)
                if call.anchor is not None and call not in warm and call not in out:
                    out.append(call)
        return out

    def gap_decisions(self, call: WarmupCall) -> list:
        """Config decisions common to the leaves where the gap holds, less those under
        which ``call`` runs at all (its own guard already says them)."""
        return self._beyond_call(call, sorted(self._gap.leaves))

    def witness(self, cls: str) -> tuple | None:
        """For a derived ``param``: (request field key, its smallest value within
        ``request-int-limits``) with which a serving path launches the kernel in ``cls``."""
        from warmlint.specialization import witness

        limits = self._facts.settings.request_int_limits
        for _, hit in self._gap.missing_hits.get(cls, []):
            found = witness(hit.args[self.param], hit.facts, limits, cls)
            if found is not None:
                return found
        return None

    def row_fill(self, call: WarmupCall):
        """``ColdBranch.row_fill``, for the runner of the gap."""
        return _row_fill(self._facts, self._gap.program, call)

    def launch_decisions(self, call: WarmupCall) -> list:
        """Config decisions under which ``call`` launched the kernel where the gap holds,
        less those under which the call runs at all (its own guard already says them)."""
        program, node = self._gap.program, call._entry.node
        launched = [i for i in sorted(self._gap.leaves) if any(
            h.sink_id == self.kernel and h.entry is not None and h.entry.node is node
            for h in program.leaves[i].warm.hits)]
        return self._beyond_call(call, launched)

    def _beyond_call(self, call: WarmupCall, indices: list) -> list:
        """Config decisions common to the leaves ``indices``, less those common to the
        leaves where ``call`` runs at all (its own guard already says them)."""
        program, node = self._gap.program, call._entry.node

        def common(leaves):
            sets = [set(leaf.decisions) for leaf in leaves]
            return set.intersection(*sets) if sets else set()

        if not indices:
            return []
        chosen = [program.leaves[i] for i in indices]
        runs = [leaf for leaf in program.leaves if any(e.node is node for e in leaf.warm.entries)]
        needed = common(chosen) - common(runs)
        return [d for d in chosen[0].decisions if d in needed]

    @property
    def warm_calls(self) -> list:
        """The warmup entry calls whose launches of the kernel the warmups compiled."""
        out = []
        for hit in self._gap.warm_hits:
            call = self._facts.call(hit.entry) if hit.entry is not None else None
            if call is not None and call not in out:
                out.append(call)
        return out


def _row_fill(facts: Facts, program, call: WarmupCall):
    from warmlint import row_fill

    steps = [w for w in program.warmups if w.function]
    return row_fill.find(call, facts._analysis.resolver, facts.settings, steps)
