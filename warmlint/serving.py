"""Serving exploration: replay each warmup entry with the request left open.

Request-input objects become open request objects (every field a request symbol) and
tensors get a request-dependent batch size. A path stays *warm* while it takes only
outcomes the warmup took; at the first outcome the warmup never took it *diverges*,
and every sink it reaches from there is attributed to that divergence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint.interp import Interp, Recorder, SinkHit
from warmlint.interp.core import BudgetExceeded
from warmlint.state import State, SymFact, div_key
from warmlint.values import Obj, OneOf, Sym, Taint, Tensor, Value
from warmlint.warmup import Entry, WarmupRecorder

BATCH_INPUT = "batch size"
SERVING_BATCH = Sym("batch", "request", "batch size (num_reqs)",
                    Taint(frozenset({BATCH_INPUT})), is_int=True)


@dataclass
class ServingRecorder(Recorder):
    warm: WarmupRecorder
    warm_hits: list = field(default_factory=list)
    cold: dict = field(default_factory=dict)  # div key -> (Divergence, [SinkHit], Entry)
    entry: Entry | None = None  # the entry being replayed

    def warm_outcomes(self, key, cfg):
        return self.warm.warm_outcomes(key, cfg)

    def sink(self, interp, state, hit: SinkHit) -> None:
        if state.div is None:
            self.warm_hits.append(hit)
        else:
            self.cold.setdefault(div_key(state.div), (state.div, [], self.entry))[1].append(hit)

    def hits_of(self, state: State) -> list:
        got = self.cold.get(div_key(state.div))
        return got[1] if got else []

    def config_test(self, interp, node, pred, context) -> None:
        self.warm.config_test(interp, node, pred, context)

    def registered(self, interp, target, state) -> None:
        from warmlint.values import Func

        if isinstance(target, Func):
            self.warm.registry.add(target.ref.dotted)  # registration warms, wherever it runs


def open_request(interp: Interp, value: Value) -> Value:
    """The serving-time counterpart of a warmup argument."""
    if isinstance(value, OneOf):
        return OneOf(tuple(open_request(interp, o) for o in value.options), value.taint)
    if isinstance(value, Obj) and interp.resolver.is_request_class(value.cls):
        return Obj(value.cls, {}, request=True, label=value.cls.name)
    if isinstance(value, Tensor) and value.batch is not None:
        return Tensor(SERVING_BATCH, SERVING_BATCH.taint)
    return value


def run_entries(interp: Interp, entries: list[Entry]) -> list:
    errors = []
    for entry in entries:
        interp.recorder.entry = entry
        args = [open_request(interp, a) for a in entry.args]
        kwargs = {k: open_request(interp, v) for k, v in entry.kwargs.items()}
        state = State({}, {SERVING_BATCH.key: SymFact(lo=1)}, cfg=dict(entry.cfg))
        interp.stack = [entry.frame]
        try:
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
