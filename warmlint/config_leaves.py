"""Configurations: which config atoms pick the dispatch, and one verdict per choice.

A config atom is a value a deployment fixes once: an env var (``envs.X``), a platform
query (``current_platform.is_cuda()``), a ``*_config`` field such as ``logprobs_mode``.
The analysis runs once per *leaf* of the decision tree over the atoms it actually
consults: the first run takes a default at each undecided atom and records it; every
recorded decision is then flipped in a later run (depth first). Pinned atoms
(``--assume``) are never forked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from warmlint.state import _UNSET as _UNSET_EQ, SymFact, _settle, eval_pred, refine_fact
from warmlint.values import Sym

MAX_DECISIONS = 24
NOT_NONE = "<not None>"  # an assumption that pins only "is set"


def parse_assumed(text: str) -> Any:
    low = text.strip().lower()
    if low in ("1", "true", "on", "yes"):
        return True
    if low in ("0", "false", "off", "no"):
        return False
    if low == "none":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    if text.strip().startswith("("):  # a tuple such as a device capability: (9, 0)
        import ast

        try:
            value = ast.literal_eval(text.strip())
            if isinstance(value, tuple):
                return value
        except (ValueError, SyntaxError):
            pass
    return text.strip().strip("'\"")


class PromoteConfig(Exception):
    """Config atoms found to choose a binding: redo the enumeration with them as leaves."""

    def __init__(self, keys: set):
        super().__init__(", ".join(sorted(keys)))
        self.keys = set(keys)


@dataclass(frozen=True)
class Decision:
    key: str
    label: str
    op: str
    const: Any
    outcome: bool
    where: str = field(default="", compare=False)  # 'warmup' frame or 'constructor'

    def text(self) -> str:
        return describe_decision(self.label, self.op, self.const, self.outcome)


def without_implied(decisions: list) -> list:
    """The decisions minus those the others on the same atom already imply, for
    messages: ``mode in ('a', 'b')`` makes ``mode`` (truthy) say nothing more."""
    dropped: set = set()
    for i, d in enumerate(decisions):
        fact = SymFact()
        for j, other in enumerate(decisions):
            if j != i and j not in dropped and other.key == d.key:
                fact = refine_fact(fact, other.op, other.const, other.outcome)
        if eval_pred(fact, d.op, d.const) is d.outcome:  # of two equal ones, one stays
            dropped.add(i)
    return [d for i, d in enumerate(decisions) if i not in dropped]


def facts_as_decisions(cfg: dict) -> list:
    """Path-level config facts, written like leaf decisions."""
    from warmlint.interp.attrs import config_label

    out = []
    for key, fact in sorted(cfg.items()):
        label = config_label(key)
        if fact.eq is not _UNSET_EQ:
            out.append(Decision(key, label, "eq", fact.eq, True))
            continue
        if fact.among is not None:
            out.append(Decision(key, label, "in", fact.among, True))
        if fact.ne:
            out.append(Decision(key, label, "in", fact.ne, False))
        if fact.truthy is not None:
            out.append(Decision(key, label, "truthy", None, fact.truthy))
        elif fact.none is not None:
            out.append(Decision(key, label, "is_none", None, fact.none))
    return out


def describe_decision(label: str, op: str, const: Any, outcome: bool) -> str:
    if op == "truthy":
        if label.isupper() or label.startswith("VLLM_"):
            return f"{label}={'1' if outcome else '0'}"
        return label if outcome else f"not ({label})" if " " in label else f"not {label}"
    if op == "is_none":
        return f"{label} is {'' if outcome else 'not '}None"
    if op == "eq":
        return f"{label} {'==' if outcome else '!='} {const!r}"
    if op == "in":
        items = ", ".join(repr(c) for c in sorted(const, key=repr))
        return f"{label} {'in' if outcome else 'not in'} ({items})"
    sym = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
    return f"{label} {sym} {const!r}" if outcome else f"not ({label} {sym} {const!r})"


class Assumptions:
    """Pinned atom values: defaults (CUDA platform) overlaid by config and --assume."""

    def __init__(self, pinned: dict[str, Any], domain: Callable[[str], Any] | None = None):
        self.pinned = dict(pinned)
        self.domain = domain  # sym key -> the values the atom can hold, or None

    def find(self, sym: Sym) -> str | None:
        """The pinned name that decides the atom (its key, its label, or its last part)."""
        for name in (sym.key, sym.label):
            if name in self.pinned:
                return name
        short = sym.key.rsplit(".", 1)[-1]
        if "." in sym.key and short in self.pinned and "." not in short:
            return short
        return None

    def find_call(self, ref) -> str | None:
        """The pinned name of a function of the tree whose result is assumed
        (``has_flashinfer()``): an environment probe that static analysis cannot answer."""
        for name in (f"{ref.name}()", f"{ref.dotted}()"):
            if name in self.pinned:
                return name
        return None


@dataclass
class ConfigDriver:
    prefix: list
    assumptions: Assumptions
    trace: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    truncated: bool = False
    used_assumptions: dict = field(default_factory=dict)
    infeasible: bool = False  # some object cannot be built in this leaf's config
    consulted: dict = field(default_factory=dict)  # sym key -> where first consulted
    whole_run: set = field(default_factory=set)  # keys promoted to leaf decisions
    # Decisions past the prefix fork a process (leaf_fork.LeafForker); None: True
    forker: Any = field(default=None, repr=False, compare=False)
    # The interpreters running this leaf (anything with a ``steps`` count; the leaf's run
    # adds and removes them), and their steps at the last decision: the work before it is
    # what a forked leaf shares with the leaf it branches from (leaf_fork). Steps, not
    # seconds: they leave parsing out (a child inherits it parsed) and do not move with
    # the machine's speed or load.
    counters: list = field(default_factory=list, repr=False, compare=False)
    decided_steps: int = field(default=0, repr=False, compare=False)
    # (object key, field key) of guards ``obj and obj.field`` decided false: with one of
    # the two known true, the other is false (decide_guard)
    denied: set = field(default_factory=set)
    # What the constructions being recorded read (interp/built.py): every fact looked up
    read_logs: list = field(default_factory=list, repr=False, compare=False)
    # The pinned names (assumptions) any lookup matched: a user's pin that no leaf reads
    # is reported (``analysis.unread_pins``), as a typo would otherwise pass unnoticed
    pins_read: set = field(default_factory=set, repr=False, compare=False)
    # A pin whose value its atom's Literal domain does not hold: name -> (value, allowed)
    pins_outside: dict = field(default_factory=dict, repr=False, compare=False)

    def decide(self, sym: Sym, op: str, const: Any, path: dict | None = None,
               global_: bool = True, where: str = "warmup"):
        """The atom's truth: a bool; "fork" to split the current path on it; or None for
        an unpinned call (an opaque query). Only choices made while building objects
        (dispatch bindings) become leaves; others are decided per path by the caller.
        ``where``: "warmup", "serving" or "constructor", the frame consulting it.
        """
        self._consult(sym.key, where)
        fact = self._fact(sym, path)
        known = eval_pred(fact, op, const)
        if known is not None:
            return known
        if op == "truthy" and fact.none is False:
            return True  # a config object that is not None is truthy
        if sym.key.endswith(")"):
            return None
        promoted = where == "constructor" and sym.key in self.whole_run
        if not (global_ or promoted):
            return "fork"
        if len(self.trace) >= MAX_DECISIONS:
            self.truncated = True
            return op != "is_none"
        outcome = self._next(sym.key, sym.label, op, const, where)
        self.facts[sym.key] = refine_fact(fact, op, const, outcome)
        return outcome

    def _next(self, key: str, label: str, op: str, const: Any, where: str) -> bool:
        """Take the next whole-run decision: the prefix's outcome, or True (a forked
        child takes False)."""
        k = len(self.trace)
        outcome = self.prefix[k] if k < len(self.prefix) else (
            self.forker.branch(self, k) if self.forker is not None else True)
        self.trace.append(Decision(key, label, op, const, outcome, where))
        self.decided_steps = sum(counter.steps for counter in self.counters)
        return outcome

    def _consult(self, key: str, where: str) -> None:
        """``key`` consulted (its first frame kept), here and in the open read logs."""
        self.consulted.setdefault(key, where)
        for log in self.read_logs:
            log.consulted.setdefault(key, where)

    def decide_guard(self, obj: Sym, attr: Sym, path: dict | None, where: str) -> bool | None:
        """``obj and obj.attr`` (a config object and one of its fields) as one whole-run
        decision, or None when either is known already (then each is decided alone).

        Why: ``if mm_config and mm_config.mm_encoder_only: return`` decided literal by
        literal makes three leaves, two of which (no ``mm_config``; one that is not
        encoder-only) run alike: every later leaf twice (vLLM's v1 runner). One decision
        makes two. False records the guard as denied: a later test of either one alone
        still splits, and with one known true the other is false."""
        if self.known(obj, "truthy", None, path) is not None \
                or self.known(attr, "truthy", None, path) is not None:
            return None
        key = f"({obj.key} and {attr.key})"
        if key in self.facts:  # decided before in this leaf
            return bool(self.facts[key].truthy)
        if len(self.trace) >= MAX_DECISIONS:
            return None
        self._consult(obj.key, where)
        self._consult(attr.key, where)
        outcome = self._next(key, f"{obj.label} and {attr.label}", "truthy", None, where)
        self.facts[key] = SymFact(truthy=outcome, none=False if outcome else None)
        if outcome:
            for sym in (obj, attr):
                self.facts[sym.key] = refine_fact(self.fact(sym), "truthy", None, True)
        else:
            self.denied.add((obj.key, attr.key))
        return outcome

    def _fact(self, sym: Sym, path: dict | None) -> SymFact:
        """The atom's fact on this path: the path's, else the leaf's; a denied guard
        whose other side is known true makes it false."""
        fact = (path or {}).get(sym.key) or self.fact(sym)
        for obj, attr in self.denied:
            other = attr if sym.key == obj else obj if sym.key == attr else None
            if other is None:
                continue
            known = (path or {}).get(other) or self.facts.get(other)
            if known is not None and (eval_pred(known, "truthy", None) is True
                                      or (other == obj and known.none is False)):
                fact = refine_fact(fact, "truthy", None, False)
        return fact

    def poll(self) -> None:
        """Called now and then by a long run: a forked leaf stops if its round is over."""
        if self.forker is not None:
            self.forker.poll()

    def known(self, sym: Sym, op: str, const: Any, path: dict | None = None) -> bool | None:
        """The atom's truth if the path, the leaf or an assumption already says; no fork."""
        return eval_pred(self._fact(sym, path), op, const)

    def fact(self, sym: Sym) -> SymFact:
        fact = self.facts.get(sym.key)
        if fact is None:
            fact, pin = self._from_assumptions(sym)
            if pin is not None:
                self._remember_pin(pin, sym, fact)
            self.facts[sym.key] = fact
        for log in self.read_logs:  # what ``peek`` gave before this call remembered it
            if sym.key not in log.facts:
                log.facts[sym.key] = (sym, repr(fact))
        return fact

    def peek(self, sym: Sym) -> SymFact:
        """``fact(sym)`` without remembering it or the assumption it used."""
        if sym.key in self.facts:
            return self.facts[sym.key]
        return self._from_assumptions(sym)[0]

    def _remember_pin(self, name: str, sym: Sym, fact: SymFact) -> None:
        """A pinned assumption decided the atom: it was used, and read (a user's pin no
        leaf reads is reported, ``analysis.unread_pins``); a plain value its atom's
        Literal domain does not hold is remembered (``config_domains``: the config it
        pins is one vLLM's validated config classes reject, a typo in a mode)."""
        value = self.assumptions.pinned[name]
        self.used_assumptions[sym.label] = value
        self.pins_read.add(name)
        domain = self.assumptions.domain  # a Domains, or a plain lookup in tests
        values = None if domain is None else domain.pin_values(sym.key, value) \
            if hasattr(domain, "pin_values") else domain(sym.key)
        if (values is not None and fact == SymFact(eq=value)
                and all(value != v for v in values)):  # (a TOML list is unhashable)
            self.pins_outside[name] = (value, tuple(sorted(values, key=repr)))

    def _from_assumptions(self, sym: Sym) -> tuple[SymFact, str | None]:
        """The atom's fact before any test, and the pinned name that set it (None: the
        atom's domain, or nothing, did)."""
        name = self.assumptions.find(sym)
        if name is None:
            values = self.assumptions.domain(sym.key) if self.assumptions.domain else None
            return (SymFact() if values is None else _settle(
                SymFact(among=values, none=False if None not in values else None))), None
        value = self.assumptions.pinned[name]
        if value == NOT_NONE:  # known to be set, value unknown
            return SymFact(none=False, truthy=True), name
        if isinstance(value, str) and value.startswith(">="):  # a lower bound only
            return SymFact(none=False, truthy=True, lo=int(value[2:])), name
        return SymFact(eq=value), name


def enumerate_leaves(run: Callable[[ConfigDriver], Any], assumptions: Assumptions,
                     max_leaves: int = 256) -> list[tuple[ConfigDriver, Any]]:
    """See ``enumerate_all``; the leaves only."""
    return enumerate_all(run, assumptions, max_leaves)[0]


def enumerate_all(run: Callable[[ConfigDriver], Any], assumptions: Assumptions,
                  max_leaves: int = 256, one_round: Callable | None = None) -> tuple[list, bool]:
    """Run ``run`` once per leaf of the config decision tree (depth first).

    When a run finds config atoms that choose a binding (PromoteConfig), the enumeration
    starts over with those atoms as leaf decisions; that happens at most a few times.
    ``one_round(run, new_driver, max_leaves) -> (leaves, left)`` replaces one round of the
    enumeration here (``leaf_fork.Parallel.round``: forked leaves, the same leaves in the
    same order); ``new_driver(prefix, forker)`` makes a leaf's driver.
    """
    whole_run: set = set()

    def new_driver(prefix, forker=None) -> ConfigDriver:
        driver = ConfigDriver(list(prefix), assumptions, forker=forker)
        driver.whole_run = whole_run
        return driver

    for _ in range(8):
        try:
            if one_round is not None:
                return one_round(run, new_driver, max_leaves)
            return depth_first(lambda prefix: run_leaf(run, new_driver(prefix)), max_leaves)
        except PromoteConfig as promoted:
            if promoted.keys <= whole_run:
                raise RuntimeError(f"config promotion did not settle: {promoted}") from None
            whole_run |= promoted.keys
    raise RuntimeError("config promotion did not settle")


def run_leaf(run: Callable[[ConfigDriver], Any], driver: ConfigDriver) -> tuple:
    return driver, run(driver)


def depth_first(leaf: Callable[[tuple], tuple], max_leaves: int) -> tuple[list, bool]:
    """The leaves in the enumeration's order: ``leaf(prefix)`` gives the (driver, result)
    of the leaf whose first decisions are ``prefix`` (a tuple of outcomes); every decision
    it made past the prefix is flipped in a later leaf, the latest first popped last.
    Returns the leaves, at most ``max_leaves``, and whether configurations were left."""
    stack: list[tuple] = [()]
    out = []
    while stack and len(out) < max_leaves:
        prefix = stack.pop()
        driver, result = leaf(prefix)
        out.append((driver, result))
        stack += flipped(prefix, driver)
    return out, bool(stack)


def flipped(prefix: tuple, driver) -> list[tuple]:
    """The prefixes of the leaves that flip each decision ``driver``'s leaf made past
    ``prefix``, in the order ``depth_first`` pushes them (the latest decision first)."""
    outcomes = [d.outcome for d in driver.trace]
    return [tuple(outcomes[:i]) + (not outcomes[i],)
            for i in range(len(outcomes) - 1, len(prefix) - 1, -1)]
