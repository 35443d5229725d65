"""Warmup interpretation: find the ``_dummy_*_run`` methods and record what they warm.

A warmup method runs on its runner object (initialized lazily, see ``lazy_root``) with
its tensor parameters holding ``max_num_seqs`` rows. Every branch outcome it takes, every
JIT sink it reaches and every kernel it registers with vLLM's JIT-warmup registry is
recorded; so is every *entry*: a call from the warmup into an object that receives a
request-input object (``self.sampler(logits=..., sampling_metadata=dummy_metadata)``).
The serving pass replays those entries with the request left open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatch

import libcst as cst

from warmlint.interp import BudgetExceeded, Frame, Interp, PassPolicy, SinkHit
from warmlint.resolve import ClassRef, FuncRef, Resolver
from warmlint.state import State, SymFact, compatible, holds_within
from warmlint.values import Func, Obj, Sym, Tensor, Unknown, Value


@dataclass(frozen=True)
class WarmupMethod:
    ref: FuncRef
    cls: ClassRef
    path: str
    line: int


def _glob(rel: str, pattern: str) -> bool:
    return fnmatch(rel, pattern) or (pattern.startswith("**/") and fnmatch(rel, pattern[3:]))


def discover(resolver: Resolver) -> list[WarmupMethod]:
    tree, settings = resolver.tree, resolver.settings
    found = []
    for module, (rel, _) in sorted(tree.modules.items()):
        if not any(_glob(rel, pat) for pat in settings.warmup_files):
            continue
        toc = tree.toc(module)
        if toc is None:
            continue
        lines = tree.lines(module)
        for cls in toc.classes.values():
            for method in cls.methods.values():
                if not any(fnmatch(method.name, pat) for pat in settings.warmup_methods):
                    continue
                text = "".join(lines[method.start - 1: method.end])
                # Only warmups that build or pass request inputs can warm a sampler.
                if not any(name in text for name in settings.request_classes):
                    continue
                found.append(WarmupMethod(FuncRef(module, method.qualname),
                                          ClassRef(module, cls.name), rel, method.start))
    return found


@dataclass
class Entry:
    warmup: WarmupMethod
    callee: Value
    args: list
    kwargs: dict
    node: cst.CSTNode
    frame: Frame
    cfg: dict  # path-level config facts of the warmup when it made this call
    batch_var: str | None = None  # a local holding the warmup batch size, if any


@dataclass
class WarmupPass(PassPolicy):
    """The warmup pass: records every outcome, sink, registration and entry it meets."""

    name = "warmup"
    taken: dict = field(default_factory=dict)
    hits: list = field(default_factory=list)
    registry: set = field(default_factory=set)  # functions registered via register_warmup
    entries: list = field(default_factory=list)
    current: WarmupMethod | None = None
    active: Entry | None = None  # the entry call being interpreted
    # `atom in (literals)` tests on config: (context, BranchSite, sym key, literal set)
    config_tests: list = field(default_factory=list)
    _tested: set = field(default_factory=set)

    def config_test(self, interp, node, pred, context) -> None:
        if id(node) not in self._tested:
            self._tested.add(id(node))
            site = interp.site(node, interp.code(node))
            self.config_tests.append((context, site, pred.sym.key, pred.const))

    def outcomes(self, interp, test, site_node, key, results, multi) -> list:
        out = super().outcomes(interp, test, site_node, key, results, multi)
        for state, _, outcome in out:
            cfgs = self.taken.setdefault(key, {}).setdefault(outcome, [])
            if not any(c is state.cfg or c == state.cfg for c in cfgs):
                cfgs.append(state.cfg)
        return out

    def warm_frame(self, callee) -> bool:
        return isinstance(callee, Func) and isinstance(callee.bound, Obj) and callee.bound.lazy

    def warm_outcomes(self, key, cfg):
        """Outcomes the warmup took at ``key`` under a config compatible with ``cfg``."""
        if key not in self.taken:
            return None
        return {o for o, cfgs in self.taken[key].items() if any(compatible(c, cfg) for c in cfgs)}

    def sink(self, interp, state, hit: SinkHit) -> None:
        hit.entry = self.active
        self.hits.append(hit)

    def covers(self, sink_id: str, cfg: dict) -> bool:
        """Whether the warmup reached ``sink_id`` in every deployment a serving path with
        config facts ``cfg`` stands for: a warmup path that reached it only under a
        path-level config condition (``logprobs_mode in PROCESSED_LOGPROBS_MODES``)
        does not cover a serving path that does not have that condition."""
        return any(h.sink_id == sink_id and holds_within(cfg, h.cfg) for h in self.hits)

    def registered(self, interp, target, state) -> None:
        """``kernel.register_warmup()``: kept only inside an active registry, as vLLM's
        ``JitWarmupRegistry.register`` does (outside one it is dropped)."""
        if isinstance(target, Func) and interp.registering:
            self.registry.add(target.ref.dotted)

    def entry(self, interp, callee, args, kwargs, node, state):
        for e in self.entries:
            if e.node is node and e.warmup == self.current and e.cfg == state.cfg:
                return e
        batch_var = next((name for name, value in state.env.items()
                          if isinstance(value, Sym) and value.key == WARMUP_BATCH.key), None)
        entry = Entry(self.current, callee, args, kwargs, node, interp.frame, dict(state.cfg),
                      batch_var)
        self.entries.append(entry)
        return entry

    @property
    def warm_sinks(self) -> set:
        return {hit.sink_id for hit in self.hits}


WARMUP_BATCH = Sym("warmup_batch", "opaque", "warmup batch (max_num_seqs)", is_int=True)


def warmup_batch_fact(setting) -> SymFact:
    if isinstance(setting, int) and not isinstance(setting, bool):
        return SymFact(eq=setting)
    return SymFact(lo=16, mod16=True)  # unknown max_num_seqs, one class: multiple of 16


def run_warmups(interp: Interp, methods: list[WarmupMethod]) -> list:
    """Interpret each warmup; returns (path, line, message) errors."""
    errors = []
    recorder = interp.policy
    for method in methods:
        recorder.current = method
        parsed = interp.resolver.parsed(method.ref)
        if parsed is None:
            continue
        root = Obj(method.cls, {}, lazy=True, label=method.cls.name)
        args = [_seed_param(p) for p in list(parsed.node.params.params)[1:]]
        state = State({}, {WARMUP_BATCH.key: warmup_batch_fact(interp.settings.warmup_batch)})
        interp.stack = [Frame(parsed, method.ref.module, f"<warmup {method.ref.qualname}>")]
        try:
            interp.run_registrations(root, {})
            interp.call_function(Func(method.ref, root), args, {}, state, parsed.node)
        except BudgetExceeded as exc:
            errors.append((method.path, method.line,
                           f"analysis budget exceeded interpreting {method.ref.qualname} (in {exc})"))
        except RecursionError:
            errors.append((method.path, method.line,
                           f"nesting too deep interpreting {method.ref.qualname}"))
        finally:
            interp.stack = []
    return errors


def _seed_param(param: cst.Param) -> Value:
    annotation = param.annotation
    text = ""
    if annotation is not None:
        text = cst.Module(body=[]).code_for_node(annotation.annotation)
    if "Tensor" in text:
        return Tensor(WARMUP_BATCH)
    return Unknown(param.name.value)
