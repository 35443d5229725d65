"""What the interpreter hands to the passes: frames, sink hits, and the pass policy.

The interpreter runs twice per configuration: over the warmups, then over the sampler
entry calls the warmups made, with the request left open. Everything that differs between
those two runs lives behind ``PassPolicy`` (``warmup.WarmupPass``, ``serving.ServingPass``):
what a branch outcome means, what an entry is, what counts as registered with vLLM's
JIT-warmup registry, what per-request state holds. The interpreter itself only evaluates
Python; it asks the policy and never checks which pass it is in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from warmlint.state import BranchSite, State
from warmlint.values import Unknown, Value


class BudgetExceeded(Exception):
    pass


@dataclass
class Frame:
    fn: Any  # cst_functions.ParsedFunction | None
    module: str
    qualname: str
    warmup: bool = False  # a frame of the warmup itself (its entry calls are recorded)
    closure: dict | None = None
    lazy_locals: Any = None  # name -> Value | None, for frames evaluating __init__ lazily


@dataclass
class SinkHit:
    sink_id: str  # "<kind prefix>:<target>", see warmlint.sinks
    kind: str  # a warmlint.sinks kind name
    display: str
    site: BranchSite  # the launch / call site
    stack: tuple  # qualnames, outermost first
    args: dict = field(default_factory=dict)  # kernel parameter -> abstract value (Triton)
    facts: dict = field(default_factory=dict)
    cfg: dict = field(default_factory=dict)  # path-level config facts at the hit
    entry: Any = None  # warmup hits: the warmup entry call that reached it
    crossed: frozenset = frozenset()  # cold hits: unwarmed outcomes met on the way


class BranchResult(NamedTuple):
    """One way a test can go, as the interpreter found it (see conds.py)."""

    state: State
    truth: bool
    disjunct: int | None  # which disjunct of an ``a or b`` test made it true
    literals: tuple  # every literal decided on the way (conds.Lit)
    deciding: tuple  # the literals of the true disjunct (all of them when false)


class PassPolicy:
    """Where the warmup pass and the serving pass differ. Defaults: observe nothing."""

    name = "?"  # "warmup" | "serving": where config atoms were consulted (config_leaves.py)
    reuses_calls = False  # cold paths reuse each other's helper calls (interp/reuse.py)
    keeps_config_paths = False  # paths split on a config atom never merge (state.py)
    active = None  # warmup: the entry call being interpreted

    def outcomes(self, interp, test, site_node, key: str, results: list, multi: bool) -> list:
        """(state, truth, outcome id) for each BranchResult this pass keeps."""
        out = []
        for res in results:
            out.append((res.state, res.truth, outcome_id(res, multi)))
        return out

    def entry(self, interp, callee: Value, args: list, kwargs: dict, node, state: State):
        """The warmup entry a call from a warmup frame makes, or None."""
        return None

    def warm_frame(self, callee: Value) -> bool:
        """Whether a call into ``callee`` runs as part of the warmup itself."""
        return False

    def step(self, interp, state: State, node) -> list:
        """A scheduler step a warmup function runs (``worker_sample_tokens(...)``)."""
        return [(state, Unknown("step"))]

    def builds_attr(self, interp, obj, name: str) -> bool:
        """Whether a read of the lazy runner's attribute ``name`` builds it from the
        set-up methods (else it is opaque, unless an earlier read built it)."""
        return True

    def opaque_config(self, interp) -> bool:
        """Whether a config test in the current frame decides nothing this pass needs: it
        is then followed both ways, like an unknown value, and splits no config."""
        return False

    def skips_call(self, interp, callee: Value) -> bool:
        """A call this pass does not follow (its result is opaque)."""
        return False

    def registered_call(self, interp, dotted: str) -> bool:
        """A call into a function that vLLM's JIT-warmup registry compiles at start-up."""
        return False

    def registered(self, interp, target: Value, state: State) -> None:
        pass

    def sink(self, interp, state: State, hit: SinkHit) -> None:
        pass

    def hits_of(self, state: State) -> list:
        """The sinks recorded so far for this path's divergence."""
        return []

    def config_test(self, interp, node, pred, context: str) -> None:
        pass


def outcome_id(res: BranchResult, multi: bool) -> str:
    if not res.truth:
        return "else"
    return f"body#{res.disjunct}" if multi else "body"
