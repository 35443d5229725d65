"""Serving exploration: replay each warmup entry with the request left open.

Request-input objects become open request objects (every field a request symbol) and
tensors get a request-dependent batch size. A path stays *warm* while it takes only
outcomes the warmup took; at the first outcome the warmup never took it *diverges*,
and every sink it reaches from there is attributed to that divergence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from warmlint.interp import BudgetExceeded, Interp, PassPolicy, SinkHit, cold_share, read_trace
from warmlint.interp.frames import outcome_id
from warmlint.interp.reuse import same_call
from warmlint.joins import merge_states
from warmlint.resolve import ClassRef
from warmlint.state import State, SymFact, div_key
from warmlint.values import (
    ROWS_PREFIX, Func, Obj, OneOf, RowIndex, Sym, Taint, Tensor, Unknown, Value, options,
    same,
)
from warmlint.warmup import Entry, WarmupPass, config_test_entry

BATCH_INPUT = "batch size"
SERVING_BATCH = Sym("batch", "request", "batch size (num_reqs)",
                    Taint(frozenset({BATCH_INPUT})), is_int=True)


def is_row_count(name: str) -> bool:
    """A request input that is a number of rows: the batch size, or the rows a request's
    index tensor selects (``values.selected_rows``: the speculative path's tokens). A
    kernel argument fed by these alone is warmed by a warmup call on fewer rows."""
    return name == BATCH_INPUT or name.startswith(ROWS_PREFIX)


@dataclass
class ServingPass(PassPolicy):
    """The serving pass: the request is open; a path diverges at the first outcome no
    warmup took, and every sink it reaches from there belongs to that divergence."""

    name = "serving"
    reuses_calls = True
    warm: WarmupPass
    warm_hits: list = field(default_factory=list)
    cold: dict = field(default_factory=dict)  # div key -> (Divergence, [SinkHit], Entry)
    replaying: Entry | None = None  # the warmup entry being replayed
    filling: bool = False  # filling per-request state with an open request (fill_state)
    taps: list = field(default_factory=list)  # warm calls being recorded: (div, hit) lists

    def outcomes(self, interp, test, site_node, key, results, multi) -> list:
        if self.filling:  # per-request state being filled: no path diverges there
            return super().outcomes(interp, test, site_node, key, results, multi)
        out = []
        for res in results:
            st, outcome = res.state, outcome_id(res, multi)
            if any(lit.kind == "request" for lit in res.literals):
                warm = self.warm.warm_outcomes(key, st.cfg)
                if read_trace.OPEN:
                    cold_share.asked(key, st.cfg, warm)
                unwarmed = warm is None or outcome not in warm
                inputs = frozenset().union(*(lit.inputs for lit in res.literals)) \
                    if unwarmed else frozenset()
                if unwarmed and st.div is None:
                    interp.reuse.note_warm_test(inputs)
                    st = st.evolve(div=interp.divergence(test, site_node, outcome, res.deciding,
                                                         multi, res.disjunct), shadows=())
                elif unwarmed and warm is not None:
                    interp.reuse.note_div_test(inputs)
                    if not inputs & st.div.inputs:
                        # A second, independent unwarmed outcome: that path belongs to the
                        # divergence of its own (found on the warm path), not to this one.
                        continue
                    st = st.evolve(crossed=st.crossed | {(interp.site(site_node).key, outcome)})
            out.append((st, res.truth, outcome))
        return out

    def registered_call(self, interp, dotted: str) -> bool:
        # Registered with vLLM's JIT-warmup registry: it compiles its own variants at
        # start-up, so what it launches is warm whatever the request.
        registered = dotted in self.warm.registry
        if read_trace.OPEN:
            cold_share.asked(dotted, None, registered)
        return registered

    def sink(self, interp, state, hit: SinkHit) -> None:
        if self.filling:
            return
        for tap in self.taps:  # (interp/warm_share.py)
            tap.append((state.div, hit))
        if state.div is None:
            self.warm_hits.append(hit)
        else:
            self.cold.setdefault(div_key(state.div), (state.div, [], self.replaying))[1].append(hit)

    def hits_of(self, state: State) -> list:
        got = self.cold.get(div_key(state.div))
        return got[1] if got else []

    def config_test(self, interp, node, pred, context) -> None:
        if read_trace.OPEN:  # as WarmupPass.config_test records it, for a replay
            cold_share.tested(id(node), config_test_entry(interp, node, pred, context))
        self.warm.config_test(interp, node, pred, context)

    def registered(self, interp, target, state) -> None:
        pass  # a registration while serving comes after start-up: it warms nothing


def open_request(interp: Interp, value: Value) -> Value:
    """The serving-time counterpart of a warmup argument."""
    if isinstance(value, OneOf):
        return OneOf(tuple(open_request(interp, o) for o in value.options), value.taint)
    if isinstance(value, Obj) and interp.resolver.is_request_class(value.cls):
        return Obj(value.cls, {}, request=True, label=value.cls.name)
    if isinstance(value, Tensor) and value.batch is not None:
        return Tensor(SERVING_BATCH, SERVING_BATCH.taint)
    return value


def fill_state(interp: Interp, callee: Value, cfg: dict) -> dict:
    """The per-request tables of ``callee`` (a sampler) as serving sees them: every row
    holds some request. Its ``state-methods`` (``add_request(req_idx, sampling_params)``)
    run with an open request at every row index; returns the resulting state heap."""
    heap: dict = {}
    for obj in (o for o in options(callee) if isinstance(o, Obj) and not o.request):
        for name in interp.settings.state_methods:
            ref, kind = interp.resolver.lookup_method(obj.cls, name)
            parsed = interp.resolver.parsed(ref) if ref is not None else None
            if parsed is None or kind != "method":
                continue
            params = list(parsed.node.params.params)[1:]
            args = [RowIndex()] + [_open_param(interp, ref, p) for p in params[1:]]
            interp.policy.filling = True
            try:
                results = interp.call_function(Func(ref, obj), args, {},
                                               State({}, cfg=dict(cfg), heap=heap), None)
            finally:
                interp.policy.filling = False
            merged = merge_states([st for st, _ in results])
            if merged:
                heap = {k: v for k, v in merged[0].heap.items() if k[0] == "rows"}
    return heap


def _open_param(interp: Interp, method, param) -> Value:
    """An open request of the class a state method's parameter is annotated with."""
    if param.annotation is None:
        return Unknown(param.name.value)
    text = cst.Module(body=[]).code_for_node(param.annotation.annotation).split("|")[0].strip()
    cls = interp.resolver.resolve_class_name(method.module, text)
    if not isinstance(cls, ClassRef):
        return Unknown(param.name.value)
    return Obj(cls, {}, request=True, label=cls.name)


REPLAY_ONCE = True  # off only in tests, which compare with the exact analysis


def run_entries(interp: Interp, entries: list[Entry]) -> list:
    errors = []
    replayed: list = []  # (entry, args, kwargs) of the entries replayed so far
    for entry in entries:
        args = [open_request(interp, a) for a in entry.args]
        kwargs = {k: open_request(interp, v) for k, v in entry.kwargs.items()}
        if REPLAY_ONCE and any(_same_replay(done, entry, args, kwargs) for done in replayed):
            continue
        replayed.append((entry, args, kwargs))
        interp.policy.replaying = entry
        interp.stack = [entry.frame]
        try:
            heap = fill_state(interp, entry.callee, entry.cfg)
            state = State({}, {SERVING_BATCH.key: SymFact(lo=1)}, cfg=dict(entry.cfg),
                          heap=heap)
            interp.call(entry.callee, args, kwargs, state, entry.node)
        except BudgetExceeded as exc:
            errors.append((entry.warmup.path, entry.warmup.line,
                           f"analysis budget exceeded replaying an entry of "
                           f"{entry.warmup.ref.qualname} (in {exc})"))
        except RecursionError:
            errors.append((entry.warmup.path, entry.warmup.line, "nesting too deep"))
        finally:
            interp.stack = []
    return errors


def _same_replay(done: tuple, entry: Entry, args: list, kwargs: dict) -> bool:
    """Whether replaying ``entry`` would repeat an earlier replay: the same callee, from
    the same warmup frame, under the same config, with the same arguments once its
    request objects are opened. A fixed warmup calls the sampler again and again with
    one request field changed, and serving opens every request alike: 0.21.0's fixed
    runner has 24 entries and one replay. (A repeat ran with the first replay's call-reuse
    caches, and before reuse was exact it listed fact-less paths the exact analysis does
    not have; tests/test_replay_once.py compares with that analysis.)"""
    other, other_args, other_kwargs = done
    return (other.frame is entry.frame and other.cfg == entry.cfg
            and (other.callee is entry.callee or same(other.callee, entry.callee))
            and same_call(other_args, other_kwargs, args, kwargs, _same_arg))


def _same_arg(x: Value, y: Value) -> bool:
    if x is y:
        return True
    if getattr(x, "taint", None) != getattr(y, "taint", None):
        return False
    if isinstance(x, Obj) and isinstance(y, Obj) and x.request and y.request:
        return x.cls == y.cls and not x.attrs and not y.attrs  # opened alike
    return same(x, y)
