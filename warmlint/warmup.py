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

import libcst as cst

from warmlint.cst_functions import annotation_names
from warmlint.interp import BudgetExceeded, Frame, Interp, PassPolicy, SinkHit, built
from warmlint.state import State, SymFact, compatible, holds_within
from warmlint.values import (
    Builtin, ClassVal, Func, Obj, RowIndex, Sym, Tensor, Unknown, Value, join_all,
    options,
)
from warmlint.warmup_discovery import WarmupMethod


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


def config_test_entry(interp, node, pred, context) -> tuple:
    """A ``WarmupPass.config_tests`` entry: where a config atom's ``in`` test stands."""
    return (context, interp.site(node, interp.code(node)), pred.sym.key, pred.const)


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
    _steps: set = field(default_factory=set)  # (requests, config) of the steps modeled
    stepped: set = field(default_factory=set)  # warmup functions with a step modeled
    _tested: set = field(default_factory=set)
    # warm_outcomes' answers by (key, id(cfg)), with the cfg held: serving asks the same
    # question of every result at a branch (55,000 times a run on the fork); cleared
    # whenever ``taken`` grows (``took``)
    _asked: dict = field(default_factory=dict)

    def took(self, key, outcome, cfg) -> bool:
        """The warmup took ``outcome`` at ``key`` under config facts ``cfg``: whether that
        is new."""
        cfgs = self.taken.setdefault(key, {}).setdefault(outcome, [])
        if any(c is cfg or c == cfg for c in cfgs):
            return False
        cfgs.append(cfg)
        self._asked.clear()
        return True

    def config_test(self, interp, node, pred, context) -> None:
        if id(node) not in self._tested:
            self._tested.add(id(node))
            self.config_tests.append(config_test_entry(interp, node, pred, context))

    def outcomes(self, interp, test, site_node, key, results, multi) -> list:
        out = super().outcomes(interp, test, site_node, key, results, multi)
        for state, _, outcome in out:
            if self.took(key, outcome, state.cfg):
                for log in interp.driver.read_logs:  # replayed by a copied construction
                    log.taken.append((key, outcome, state.cfg))
        return out

    def warm_frame(self, callee) -> bool:
        if isinstance(callee, Func) and self.current is not None and self.current.function:
            return True  # a warmup function and the helpers it calls with the runner
        return isinstance(callee, Func) and isinstance(callee.bound, Obj) and callee.bound.lazy

    def _in_function_body(self, interp) -> bool:
        method = self.current
        return method is not None and method.function and bool(interp.stack) \
            and interp.frame.module == method.ref.module

    def builds_attr(self, interp, obj, name: str) -> bool:
        """Inside a warmup function, the runner attributes it reads for the scheduler
        (KV cache config, connector, spec-decode step counts, encoder lengths) are not
        built: they decide nothing the sampler reads, and building them would split the
        run on every config they depend on. What an earlier warmup built stays known;
        a branch on an opaque attribute (``is_pooling_model``) is followed both ways,
        which only decides whether the steps run."""
        return not self._in_function_body(interp)

    def opaque_config(self, interp) -> bool:
        """Inside a warmup function's own body, config tests shape the scheduler's batches
        (spec-decode tokens, encoder inputs, pipeline ranks), not the sampler's requests:
        both ways, no config split. Config tests inside the steps (the sampler) are
        decided as in any warmup."""
        return self._in_function_body(interp)

    def skips_call(self, interp, callee) -> bool:
        """Inside a warmup function, only its own module's helpers, the request parameters
        it builds and its scheduler steps are followed: the rest of ``warmup_kernels``
        (KV blocks, scheduler outputs, model requests) reaches no sampler but the steps."""
        method = self.current
        if not self._in_function_body(interp):
            return False
        if isinstance(callee, Func) and callee.ref.module == method.ref.module:
            return False
        owner = callee.ref if isinstance(callee, ClassVal) else (
            callee.bound.ref if isinstance(callee, Func) and isinstance(callee.bound, ClassVal)
            else None)
        if owner is not None and owner.name in interp.settings.request_params_classes:
            return False
        if isinstance(callee, Func) and callee.bound is None and "." in callee.ref.qualname:
            cls = callee.ref.qualname.split(".")[0]
            return cls not in interp.settings.request_params_classes
        return isinstance(callee, (Func, ClassVal))

    def step(self, interp, state: State, node) -> list:
        """One scheduler step of a warmup function (``worker_sample_tokens(...)``), as the
        runner runs it: the step's requests (the ``request-params-classes`` objects the
        warmup holds, e.g. ``SamplingParams.for_sampler_warmup()``) fill every row of the
        sampler's per-request state, and the sampler runs on the runner's own dummy batch
        (the call its ``_dummy_sampler_run`` made). The scheduler and model forward that
        lead there in vLLM are not interpreted."""
        built.taint(interp, "a scheduler step")  # reads which steps ran (pass state)
        requests = _requests_in(interp, state)
        out = [(state, Unknown("step"))]
        if not requests:
            return out
        key = (tuple(id(o) for o in options(requests)), repr(sorted(state.cfg.items())))
        if key in self._steps:  # the same requests, the same config: the same outcomes
            return out
        self._steps.add(key)
        self.stepped.add(self.current)
        # One sampler run per distinct call: v2's `_dummy_sampler_run` makes the same call
        # twice (empty rows, then warmup rows); a step runs the sampler once.
        calls = {}
        for entry in (e for e in self.entries if not e.warmup.function):
            calls.setdefault((tuple(map(id, entry.args)),
                              tuple(sorted((k, id(v)) for k, v in entry.kwargs.items())),
                              id(entry.callee)), entry)
        for entry in calls.values():
            for sampler in (o for o in options(entry.callee) if isinstance(o, Obj)):
                out = self._step(interp, entry, sampler, requests, out)
        return out

    def _step(self, interp, entry, sampler: Obj, requests: list, paths: list) -> list:
        settings = interp.settings
        out = []
        for state, _ in paths:
            states = [state]
            # Rows are read as the state methods wrote them: publishing them to the GPU
            # (``apply_staged_writes``) changes no value the dispatch reads.
            for method in settings.state_methods:
                ref, _ = interp.resolver.lookup_method(sampler.cls, method)
                parsed = interp.resolver.parsed(ref) if ref is not None else None
                if parsed is None:
                    continue
                params = list(parsed.node.params.params)[2:]  # after self, the row index
                args = [RowIndex()] + [requests if _annotated(p, settings.request_params_classes)
                                       else Unknown(p.name.value) for p in params]
                states = [st for s in states
                          for st, _ in interp.call_function(Func(ref, sampler), args, {}, s, None)]
            if not states:
                # Every path of adding the step's requests raises under this leaf's
                # config (Aphrodite's bad-words limit below the warmup's two bad words):
                # start-up fails there, so the leaf describes no deployment.
                interp.driver.infeasible = True
                return paths
            for st in interp.merge(states):  # not an entry of its own: serving replays
                out += interp._call_one(entry.callee, entry.args, entry.kwargs, st, entry.node)
        # What a step leaves behind is its rows; how each path sampled is not kept.
        return [(st, Unknown("step")) for st in interp.merge([st for st, _ in out])] or paths

    def warm_outcomes(self, key, cfg):
        """Outcomes the warmup took at ``key`` under a config compatible with ``cfg``."""
        if key not in self.taken:
            return None
        got = self._asked.get((key, id(cfg)))
        if got is not None and got[0] is cfg:
            return got[1]
        out = frozenset(o for o, cfgs in self.taken[key].items()
                        if any(compatible(c, cfg) for c in cfgs))
        self._asked[(key, id(cfg))] = (cfg, out)
        return out

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
        built.taint(interp, "a sampler call")  # reads the entries recorded (pass state)
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
    roots: dict = {}  # one runner object per runner class: vLLM builds one
    for method in methods:
        recorder.current = method
        parsed = interp.resolver.parsed(method.ref)
        if parsed is None:
            continue
        fresh = method.cls not in roots
        root = roots.setdefault(method.cls, Obj(method.cls, {}, lazy=True,
                                                label=method.cls.name))
        params = list(parsed.node.params.params)[1:]
        args = [_seed_param(p, interp.settings) for p in params]
        if method.function:
            args = [root] + args  # the runner is the function's first parameter
        state = State({}, {WARMUP_BATCH.key: warmup_batch_fact(interp.settings.warmup_batch)})
        interp.stack = [Frame(parsed, method.ref.module, f"<warmup {method.ref.qualname}>")]
        try:
            if fresh:
                interp.run_registrations(root, {})
            callee = Func(method.ref) if method.function else Func(method.ref, root)
            interp.call_function(callee, args, {}, state, parsed.node)
        except BudgetExceeded as exc:
            errors.append((method.path, method.line,
                           f"analysis budget exceeded interpreting {method.ref.qualname} (in {exc})"))
        except RecursionError:
            errors.append((method.path, method.line,
                           f"nesting too deep interpreting {method.ref.qualname}"))
        finally:
            interp.stack = []
    return errors


def _seed_param(param: cst.Param, settings) -> Value:
    if param.name.value in settings.warmup_step_calls:
        return Builtin("warmup_step")  # see WarmupPass.step
    annotation = param.annotation
    text = ""
    if annotation is not None:
        text = cst.Module(body=[]).code_for_node(annotation.annotation)
    if "Tensor" in text:
        return Tensor(WARMUP_BATCH)
    return Unknown(param.name.value)


def _annotated(param: cst.Param, classes: tuple) -> bool:
    """Whether ``param`` is annotated with one of ``classes`` (``sampling_params:
    SamplingParams``, ``SamplingParams | None``)."""
    return bool(annotation_names(param) & set(classes))


def _requests_in(interp, state: State):
    """The request parameters a warmup function holds at a step: its locals (and the
    closure's) of a ``request-params-classes`` class, joined."""
    frame = interp.frame
    scopes = [state.env] + ([frame.closure] if frame.closure else [])
    found = []
    for scope in scopes:
        for value in scope.values():
            # Only the request objects: a ``None`` alternative (a pooling model's
            # ``sampling_params``) runs no sampler step, so it fills no row.
            found += [o for o in options(value)
                      if isinstance(o, Obj) and o.cls.name in interp.settings.request_params_classes]
    return join_all(found) if found else None


def reaches_sampler(warm: WarmupPass, method: WarmupMethod) -> bool:
    """Whether ``method`` reached the sampler in this pass: a warmup method made an entry
    call (or hit a sink), a warmup function ran a step modeled on one."""
    if method.function:
        return method in warm.stepped
    return any(e.warmup == method for e in warm.entries) \
        or any(h.entry is not None and h.entry.warmup == method for h in warm.hits)
