"""Interpreter state: local variables, facts learned on the path, and divergence.

A *divergence* is the first branch outcome on a serving path that no warmup took. Paths
that have not diverged are *warm*; sinks they reach should be compiled already. Paths
that diverged are *cold* candidates: a sink they reach that no warmup reached is a
finding, reported at the divergence. States are merged only with states of the same
divergence, so each divergence's reach stays its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from warmlint.markers import Marker
from warmlint.values import CLEAN, Const, OneOf, Pred, Sym, Taint, Value

_UNSET = Marker(__name__, "_UNSET")


@dataclass(frozen=True)
class SymFact:
    none: bool | None = None
    truthy: bool | None = None
    eq: Any = _UNSET
    ne: frozenset = frozenset()
    lo: float | None = None
    hi: float | None = None
    mod16: bool | None = None
    among: frozenset | None = None  # the value is one of these

    def merge(self, other: "SymFact") -> "SymFact":
        """Facts true on both paths."""
        return SymFact(
            none=self.none if self.none == other.none else None,
            truthy=self.truthy if self.truthy == other.truthy else None,
            eq=self.eq if (self.eq is not _UNSET and other.eq is not _UNSET
                           and type(self.eq) is type(other.eq) and self.eq == other.eq) else _UNSET,
            ne=self.ne & other.ne,
            lo=None if self.lo is None or other.lo is None else min(self.lo, other.lo),
            hi=None if self.hi is None or other.hi is None else max(self.hi, other.hi),
            mod16=self.mod16 if self.mod16 == other.mod16 else None,
            among=None if self.among is None or other.among is None else self.among | other.among,
        )


def eval_pred(fact: SymFact, op: str, const: Any) -> bool | None:
    """Decide ``sym <op> const`` from what is known, or None."""
    if fact.eq is not _UNSET:
        return _concrete(fact.eq, op, const)
    if fact.among is not None and op in ("eq", "in", "is_none", "truthy"):
        results = {_concrete(v, op, const) for v in fact.among}
        if len(results) == 1 and None not in results:
            return results.pop()
    if op == "is_none":
        if fact.none is not None:
            return fact.none
        if fact.truthy or (fact.lo is not None):
            return False
        return None
    if op == "truthy":
        if fact.truthy is not None:
            return fact.truthy
        if fact.none:
            return False
        if fact.lo is not None and fact.lo >= 1:
            return True
        return None
    if op in ("eq", "in") and _truth_rules_out(fact.truthy, (const,) if op == "eq" else const):
        return False
    if op == "eq":
        if const is None:
            return eval_pred(fact, "is_none", None)
        if _hashable(const) and const in fact.ne:
            return False
        if isinstance(const, (int, float)) and not isinstance(const, bool):
            if (fact.lo is not None and const < fact.lo) or (fact.hi is not None and const > fact.hi):
                return False
            if fact.mod16 is True and int(const) == const and int(const) % 16:
                return False
            if fact.mod16 is False and int(const) == const and int(const) % 16 == 0:
                return False
        return None
    if op == "in":
        if all(_hashable(c) and c in fact.ne for c in const):
            return False
        return None
    lo, hi = fact.lo, fact.hi
    if op == "ge":
        if lo is not None and lo >= const:
            return True
        if hi is not None and hi < const:
            return False
    elif op == "gt":
        if lo is not None and lo > const:
            return True
        if hi is not None and hi <= const:
            return False
    elif op == "le":
        if hi is not None and hi <= const:
            return True
        if lo is not None and lo > const:
            return False
    elif op == "lt":
        if hi is not None and hi < const:
            return True
        if lo is not None and lo >= const:
            return False
    return None


# Constants whose equality implies equal truth: ``x == c`` makes ``bool(x) == bool(c)``.
_PLAIN = (str, bytes, int, float, bool, type(None))


def _truth_rules_out(truthy: bool | None, consts) -> bool:
    """Whether a value of known truth equals none of ``consts``: a falsy value is no
    non-empty string or non-zero number (a path that learned ``not mode`` cannot take
    ``mode in ("a", "b")``), a truthy one is no ``""``, ``0`` or ``None``."""
    if truthy is None:
        return False
    try:
        return all(type(c) in _PLAIN and bool(c) is not truthy for c in consts)
    except TypeError:  # not a collection: nothing is ruled out
        return False


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _concrete(value: Any, op: str, const: Any) -> bool | None:
    try:
        if op == "is_none":
            return value is None
        if op == "truthy":
            return bool(value)
        if op == "eq":
            return value == const
        if op == "in":
            return value in const
        if value is None:
            return None
        return {"lt": value < const, "le": value <= const,
                "gt": value > const, "ge": value >= const}[op]
    except Exception:
        return None


def _settle(fact: SymFact) -> SymFact:
    if fact.among is not None and len(fact.among) == 1:
        return replace(fact, eq=next(iter(fact.among)))
    return fact


def refine_fact(fact: SymFact, op: str, const: Any, outcome: bool) -> SymFact:
    """``fact`` strengthened by knowing ``sym <op> const`` is ``outcome``."""
    if op == "is_none":
        return replace(fact, none=outcome, truthy=False if outcome else fact.truthy)
    if op == "truthy":
        return replace(fact, truthy=outcome, none=False if outcome else fact.none)
    if op == "eq":
        if const is None:
            return refine_fact(fact, "is_none", None, outcome)
        if outcome:
            return replace(fact, eq=const, none=False)
        if not _hashable(const):
            return fact
        return _settle(replace(fact, ne=fact.ne | {const},
                               among=None if fact.among is None else fact.among - {const}))
    if op == "in":
        values = frozenset(c for c in const if _hashable(c))
        if not outcome:
            return _settle(replace(fact, ne=fact.ne | values,
                                   among=None if fact.among is None else fact.among - values))
        among = values - fact.ne if fact.among is None else fact.among & values
        return _settle(replace(fact, among=among, none=False if None not in among else fact.none))
    if not isinstance(const, (int, float)):  # before `const + 1`: `x > None` is no bound
        return fact
    bound = {("ge", True): ("lo", const), ("gt", True): ("lo", const + 1),
             ("lt", False): ("lo", const), ("le", False): ("lo", const + 1),
             ("le", True): ("hi", const), ("lt", True): ("hi", const - 1),
             ("gt", False): ("hi", const), ("ge", False): ("hi", const - 1)}.get((op, outcome))
    if bound is None:
        return fact
    side, num = bound
    if side == "lo":
        return replace(fact, lo=num if fact.lo is None else max(fact.lo, num), none=False)
    return replace(fact, hi=num if fact.hi is None else min(fact.hi, num), none=False)


@dataclass(frozen=True)
class BranchSite:
    key: str  # stable: "path:line:col"
    path: str
    line: int
    col: int
    function: str
    condition: str


@dataclass(frozen=True)
class Divergence:
    site: BranchSite
    outcome: str  # outcome id: "body", "body#1", "else"
    outcome_text: str  # "`generators` is truthy"
    inputs: frozenset
    stack: tuple  # (module, qualname) of the frames at the branch, outermost first
    literals: tuple = ()  # (text, inputs, positive) of the request literals that decided it


@dataclass
class State:
    env: dict
    facts: dict = field(default_factory=dict)  # sym key -> SymFact
    div: Divergence | None = None
    pc: Taint = CLEAN  # taint of the branch conditions this path is under (implicit flow)
    cfg: dict = field(default_factory=dict)  # config sym key -> SymFact, decided on this path
    # Warm states only: divergences whose paths rejoined this one with the same variables
    # (see shadows.py): (Divergence, {sym key: SymFact or None}) still to be told apart.
    shadows: tuple = ()
    # Attributes written on this path to objects still being built: (oid, name) -> value.
    # Committed to the object when its __init__ returns (calls.py), so that two config
    # paths through a constructor do not overwrite each other's bindings.
    heap: dict = field(default_factory=dict)
    # Cold paths only: unwarmed outcomes met after the divergence that share its request
    # inputs, as div keys (serving.ServingPass.outcomes; coverage.py).
    crossed: frozenset = frozenset()

    def fork(self, env: dict | None = None) -> "State":
        return self.evolve(env=dict(self.env) if env is None else env)

    def evolve(self, **changes) -> "State":
        # dataclasses.replace re-runs __init__; states are copied on every step.
        new = object.__new__(State)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def refine_cfg(self, pred: Pred, outcome: bool, base: "SymFact") -> "State":
        truth = outcome != pred.negated
        cfg = dict(self.cfg)
        cfg[pred.sym.key] = refine_fact(self.cfg.get(pred.sym.key, base), pred.op, pred.const, truth)
        return self.evolve(cfg=cfg)

    def fact(self, sym: Sym) -> SymFact:
        return self.facts.get(sym.key) or SymFact()

    def refine(self, pred: Pred, outcome: bool) -> "State":
        truth = outcome != pred.negated
        facts = dict(self.facts)
        facts[pred.sym.key] = refine_fact(self.fact(pred.sym), pred.op, pred.const, truth)
        return self.evolve(facts=facts)


def decide(state: State, value: Value) -> bool | None:
    """Truth of a boolean-ish value on this path, or None if it can go both ways."""
    if isinstance(value, Const):
        try:
            return bool(value.value)
        except Exception:
            return None
    if isinstance(value, Pred):
        got = eval_pred(state.fact(value.sym), value.op, value.const)
        return None if got is None else got != value.negated
    if isinstance(value, Sym):
        return eval_pred(state.fact(value), "truthy", None)
    if isinstance(value, OneOf):
        results = {decide(state, o) for o in value.options}
        return results.pop() if len(results) == 1 else None
    from warmlint.values import ClassVal, Dict, Func, Lambda, Module, Obj, Seq, Tensor

    if isinstance(value, (Dict, Seq)) and value.empty is not None:
        return not value.empty
    if isinstance(value, (Func, Lambda, ClassVal, Module)):
        return True  # a function, class or module object is truthy
    if isinstance(value, Tensor):
        return None  # element-wise truth: unknown
    if isinstance(value, Obj) and not value.request:
        return True
    return None


def div_key(div: Divergence | None) -> tuple:
    return ("warm",) if div is None else (div.site.key, div.outcome)


def contradicts(a: SymFact, b: SymFact) -> bool:
    """True when no value satisfies both facts."""
    for attr in ("none", "truthy", "mod16"):
        x, y = getattr(a, attr), getattr(b, attr)
        if x is not None and y is not None and x != y:
            return True
    if a.eq is not _UNSET and b.eq is not _UNSET:
        return not (type(a.eq) is type(b.eq) and a.eq == b.eq)
    for one, other in ((a, b), (b, a)):
        if one.eq is not _UNSET and _hashable(one.eq):
            if one.eq in other.ne or (other.among is not None and one.eq not in other.among):
                return True
    if a.among is not None and b.among is not None and not (a.among & b.among):
        return True
    return False


def implies(a: SymFact, b: SymFact) -> bool:
    """Every value that satisfies ``a`` satisfies ``b`` (as far as the facts tell)."""
    if a == b:
        return True
    for attr in ("none", "truthy", "mod16"):
        want = getattr(b, attr)
        if want is not None and getattr(a, attr) != want:
            return False
    if b.eq is not _UNSET and not (a.eq is not _UNSET and type(a.eq) is type(b.eq)
                                   and a.eq == b.eq):
        return False
    if b.ne - a.ne and not (a.eq is not _UNSET and _hashable(a.eq) and a.eq not in b.ne) \
            and not (a.among is not None and not (a.among & b.ne)):
        return False
    if b.among is not None:
        if a.eq is not _UNSET:
            return _hashable(a.eq) and a.eq in b.among
        if a.among is None or not a.among <= b.among:
            return False
    if b.lo is not None and (a.lo is None or a.lo < b.lo):
        return False
    if b.hi is not None and (a.hi is None or a.hi > b.hi):
        return False
    return True


def holds_within(path: dict, required: dict) -> bool:
    """The config facts ``required`` hold on every deployment ``path`` describes."""
    return all(k in path and implies(path[k], fact) for k, fact in required.items())


def compatible(a: dict, b: dict) -> bool:
    return not any(contradicts(a[k], b[k]) for k in a.keys() & b.keys())
