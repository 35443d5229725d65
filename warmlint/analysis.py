"""The pipeline: index -> warmups -> serving replay, once per configuration leaf.

Rules (``warmlint.rules``) turn the per-leaf observations gathered here into findings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from warmlint import gc_policy, stack_room
from warmlint.config_leaves import (
    MAX_DECISIONS, Assumptions, Decision, enumerate_all, without_implied)
from warmlint.config_domains import Domains
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp import Interp, Memo, read_trace, value_digest
from warmlint.interp.built import BuiltReuse
from warmlint.interp.cold_share import SharedColdCalls
from warmlint.interp.warm_share import SharedWarmCalls
from warmlint.interp.summaries import CallSummaries
from warmlint.leaf_fork import Parallel, available
from warmlint.program_fork import side_by_side
from warmlint.resolve import Resolver
from warmlint.serving import ServingPass, run_entries
from warmlint.settings import Settings
from warmlint.warmup import WarmupPass, reaches_sampler, run_warmups
from warmlint.warmup_discovery import WarmupMethod, discover, missing


@dataclass
class Leaf:
    decisions: list  # [Decision]
    warm: WarmupPass
    serving: ServingPass
    assumed: dict


@dataclass
class Program:
    """One model runner: its warmups and one Leaf per configuration.

    Runners are separate programs (a deployment runs one), so coverage by one runner's
    warmup never excuses a gap in another's.
    """

    runner: str  # qualified class name
    warmups: list  # [WarmupMethod]
    leaves: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # (error, reported once per run?), in order
    truncated: bool = False
    # Decisions every leaf whose warmups reach the sampler takes (``runner_type !=
    # 'pooling'``, ``not (mm_config and mm_config.mm_encoder_only)``): a configuration that
    # samples at all meets them, so a finding's conditions leave them out.
    preconditions: set = field(default_factory=set)
    pins_read: set = field(default_factory=set)  # assumptions any leaf's lookup matched
    pins_outside: dict = field(default_factory=dict)  # name -> (value, allowed values)
    atoms: set = field(default_factory=set)  # config atoms consulted (keys)

    def leaf_configs(self, indices) -> tuple[list[str], bool]:
        """Config conditions common to the given leaves, and whether they pick exactly them."""
        chosen = [self.leaves[i] for i in indices]
        if not chosen:
            return [], True
        common = set(chosen[0].decisions)
        for leaf in chosen[1:]:
            common &= set(leaf.decisions)
        ordered = [d for d in chosen[0].decisions if d in common - self.preconditions]
        exact = all(
            i in indices or not common <= set(leaf.decisions)
            for i, leaf in enumerate(self.leaves))
        return [d.text() for d in without_implied(ordered)], exact


@dataclass
class Facts:
    """Everything the rules may look at."""

    tree: SourceTree
    resolver: Resolver
    settings: Settings
    warmups: list  # [WarmupMethod]
    programs: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # (path, line, message)
    truncated: bool = False
    seconds: float = 0.0
    functions_parsed: int = 0
    parallel: Parallel | None = None  # forked leaves (``jobs``), or serial


def analyze(tree: SourceTree, settings: Settings, jobs: int | None = None) -> Facts:
    """``jobs``: config leaves in forked processes, up to this many at once
    (``leaf_fork``); None runs them one after another in this process."""
    started = time.perf_counter()
    with gc_policy.rare_collections():
        # deep recursion without mapping and unmapping frame-stack chunks (stack_room.py)
        return stack_room.call(_analyze, tree, settings, jobs, started)


def _analyze(tree: SourceTree, settings: Settings, jobs: int | None, started: float) -> Facts:
    loader = FunctionLoader(tree)
    resolver = Resolver(tree, loader, settings)
    methods = discover(resolver)
    facts = Facts(tree, resolver, settings, methods)
    facts.errors.extend(missing(resolver, methods))
    if available(jobs):
        from warmlint.leaf_transport import Transport

        facts.parallel = Parallel(jobs, Transport(tree, resolver))
    runners: dict = {}
    for method in methods:
        runners.setdefault(method.cls, []).append(method)
    facts.programs = [Program(cls.dotted, group) for cls, group in runners.items()]
    if facts.parallel is not None and facts.parallel.jobs > 1 and len(facts.programs) > 1:
        jobs = facts.parallel.jobs  # each runner's process takes one of the cores
        facts.parallel.jobs = max(1, jobs - len(facts.programs) + 1)
        try:
            side_by_side(facts.programs, lambda program: _run_program(facts, program),
                         facts.parallel.transport)
        finally:
            facts.parallel.jobs = jobs
    else:
        for program in facts.programs:
            _run_program(facts, program)
    seen_errors: set = set()
    for program in facts.programs:  # in runner order, as if run one after another
        facts.truncated |= program.truncated
        for err, once in program.notes:  # a leaf's errors once per run, the rest as found
            if once:
                if err in seen_errors:
                    continue
                seen_errors.add(err)
            facts.errors.append(err)
    facts.seconds = time.perf_counter() - started
    facts.functions_parsed = loader.functions_parsed
    return facts


def _run_program(facts: Facts, program: Program) -> None:
    resolver, settings, methods = facts.resolver, facts.settings, program.warmups

    replays: dict = {}  # warmup fingerprint -> (serving pass, atoms serving consulted)
    builds = BuiltReuse()  # objects the leaves build alike (interp/built.py)
    calls = CallSummaries()  # calls the leaves make alike (interp/summaries.py)
    cold = SharedColdCalls()  # serving's cold calls alike (interp/cold_share.py)
    warm_calls = SharedWarmCalls()  # serving's warm calls alike (interp/warm_share.py)
    read_trace.reset()
    value_digest.reset()

    def run(driver):
        try:
            return _leaf(driver)
        finally:
            driver.counters.clear()  # the interpreters stay out of the leaf's result

    def _leaf(driver):
        warm = WarmupPass()
        memo = Memo(builds=builds, calls=calls, cold=cold, warm=warm_calls)
        winterp = Interp(resolver, driver, warm, memo)
        driver.counters.append(winterp)
        errors = run_warmups(winterp, methods)
        seen = observed(warm)
        reused = _reusable(replays, seen, driver)
        if reused is None and facts.parallel is not None:  # another process's
            reused = facts.parallel.published(lambda keys: _fingerprint(seen, driver, keys))
        if reused is not None:
            return Leaf(list(driver.trace), warm, reused, dict(driver.used_assumptions)), errors
        before = (len(driver.trace), set(driver.consulted))
        serving = ServingPass(warm)
        sinterp = Interp(resolver, driver, serving, memo)  # same leaf, same objects
        driver.counters.append(sinterp)
        errors += run_entries(sinterp, warm.entries)
        if len(driver.trace) == before[0]:  # serving took no whole-run decision
            consulted = set(driver.consulted) - before[1]
            key = _fingerprint(seen, driver, consulted)
            replays.setdefault(key, (serving, consulted))
            if facts.parallel is not None:
                facts.parallel.publish(key, consulted, serving)
        return Leaf(list(driver.trace), warm, serving, dict(driver.used_assumptions)), errors

    assumptions = Assumptions(settings.assume, Domains(resolver))
    leaves, left = enumerate_all(run, assumptions, settings.max_configs,
                                facts.parallel.round if facts.parallel else None)
    first = methods[0]
    if left:  # configs never analyzed: their findings are unknown
        program.truncated = True
        program.notes.append(((first.path, first.line,
                             f"config enumeration of {program.runner} stopped at "
                             f"{len(leaves)} leaves (max-configs = {settings.max_configs}) "
                             "with configurations left unanalyzed; raise max-configs or pin "
                             "configs with --assume"), False))
    if any(driver.truncated for driver, _ in leaves):
        program.notes.append(((first.path, first.line,
                               f"a config of {program.runner} takes more than "
                               f"{MAX_DECISIONS} config decisions; the rest were not "
                               "enumerated; pin configs with --assume"), False))
    for driver, (leaf, errors) in leaves:
        program.pins_read |= driver.pins_read
        program.pins_outside.update(driver.pins_outside)
        program.atoms |= set(driver.consulted) | set(driver.facts)
        if driver.infeasible:
            continue
        program.leaves.append(leaf)
        program.truncated |= driver.truncated
        program.notes += [(err, True) for err in errors]
    program.truncated |= len(program.leaves) >= settings.max_configs
    reached = [[reaches_sampler(leaf.warm, m) for m in methods] for leaf in program.leaves]
    sampling = [set(leaf.decisions) for leaf, row in zip(program.leaves, reached) if any(row)]
    program.preconditions = set.intersection(*sampling) if sampling else set()
    for i, method in enumerate(methods):  # a warmup that reaches no sampler analyzed nothing
        if program.leaves and not any(row[i] for row in reached):
            what = "runs no sampling step warmlint can model" if method.function \
                else "reaches no sampler call"
            program.notes.append(((method.path, method.line,
                                   f"warmup {method.ref.qualname} {what} in any config "
                                   "(nothing it warms was analyzed)"), False))


def _fingerprint(seen: str, driver, extra_keys: set) -> str:
    """What the serving replay depends on: the warmup's observations (``seen``: its
    ``observed``, the same for every replay a leaf tries) and the config facts read
    outside the warmup's own frame (bindings, and the replay itself)."""
    from warmlint.state import SymFact

    keys = {k for k, where in driver.consulted.items() if where != "warmup"} | extra_keys
    facts = sorted((k, repr(driver.facts.get(k) or SymFact())) for k in keys)
    return repr((facts, seen))


def observed(warm: WarmupPass) -> str:
    """The warmup's part of a serving replay's fingerprint: outcomes taken, sinks hit,
    registrations and the entries serving replays."""
    taken = sorted((k, o, repr(sorted(map(repr, (sorted(c.items()) for c in cfgs)))))
                   for k, outcomes in warm.taken.items() for o, cfgs in outcomes.items())
    hits = sorted((h.sink_id, h.site.key) for h in warm.hits)
    entries = [(_node_key(e), type(e.callee).__name__, getattr(getattr(e.callee, "cls", None),
                                                            "dotted", ""),
                repr(sorted(e.cfg.items()))) for e in warm.entries]
    return repr((taken, hits, sorted(warm.registry), entries))


def _node_key(entry) -> tuple:
    """The entry's call site, the same in every process (forked leaves share replays)."""
    fn = entry.frame.fn if entry.frame is not None else None
    return fn.address(entry.node) if fn is not None else id(entry.node)


def _reusable(replays: dict, seen: str, driver):
    """A previous leaf's serving results, if this leaf cannot replay any differently."""
    for serving, consulted in replays.values():
        key = _fingerprint(seen, driver, consulted)
        if key in replays:
            return replays[key][0]
    return None


def pins_outside(programs) -> list[dict]:
    """Pinned values no configuration can hold: ``{name, value, allowed}``, by name."""
    found: dict = {}
    for program in programs:
        found.update(program.pins_outside)
    return [{"name": name, "value": value, "allowed": list(allowed)}
            for name, (value, allowed) in sorted(found.items())]


def unread_pins(settings, programs) -> list[dict]:
    """The assumptions the user pinned (``--assume``, ``[tool.warmlint.assume]``: all but
    a default with its default value) that no configuration of any runner looked up: a
    typo, or an atom this tree does not have; it changed nothing, and a user who meant to
    pin something should hear so. Each with the closest atom the run consulted."""
    from difflib import get_close_matches

    from warmlint.settings import DEFAULT_ASSUME

    read = set().union(*(p.pins_read for p in programs))
    atoms = set().union(*(p.atoms for p in programs))
    names = sorted(atoms | {atom.rsplit(".", 1)[-1] for atom in atoms})
    out = []
    for name, value in sorted(settings.assume.items()):
        if name in read or (name in DEFAULT_ASSUME and DEFAULT_ASSUME[name] == value):
            continue
        close = get_close_matches(name, [n for n in names if n != name], n=1, cutoff=0.8)
        out.append({"name": name, "did_you_mean": close[0] if close else None})
    return out


__all__ = ["Facts", "Leaf", "Program", "analyze", "Decision", "WarmupMethod"]
