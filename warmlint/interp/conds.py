"""Conditions: split compound tests, decide literals, fork on request inputs.

A test is walked in short-circuit order. Each literal is decided by constants and path
facts if possible; a config literal is decided by the config driver (one value per
leaf); a literal that depends on a request input forks the path in two and marks both
with the condition's taint (implicit flow); any other unknown forks without marking.
The outcome of an ``if`` is its arm plus, for ``a or b`` tests, the disjunct that made
it true: the seeded path of ``(k is None and p is None) or generators`` is
``body#1``, not the same outcome as ``body#0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from warmlint import shadows
from warmlint.interp.frames import BranchResult
from warmlint.state import Divergence, State, SymFact, decide, refine_fact
from warmlint.config_leaves import PromoteConfig
from warmlint.values import ConfigChoice, OneOf, Pred, Sym, Value


@dataclass(frozen=True)
class Lit:
    kind: str  # 'request' | 'neutral' | 'config'
    node: object  # the literal's expression; its text is rendered only for findings
    inputs: frozenset
    positive: bool = False  # this outcome makes its value truthy / not None


def _positive(val: Value, outcome: bool) -> bool:
    """Whether ``outcome`` of a literal over ``val`` means "the value is set"."""
    if isinstance(val, Sym):
        return outcome
    if isinstance(val, Pred):
        holds = outcome != val.negated
        return holds if val.op == "truthy" else (not holds if val.op == "is_none" else False)
    return False


def _flatten(node: cst.BaseExpression, op: type) -> list:
    if type(node) is cst.BooleanOperation and isinstance(node.operator, op) and not node.lpar:
        return _flatten(node.left, op) + _flatten(node.right, op)
    return [node]


class CondMixin:
    def context(self) -> str:
        if self.stack and self.frame.warmup:
            return "warmup"
        return "constructor" if self.in_constructor() else "other"

    def in_constructor(self) -> bool:
        """Config read while building an object: the choice must hold for the whole run."""
        return any(f.lazy_locals is not None or f.qualname.endswith(".__init__")
                   for f in self.stack)

    def node_key(self, node: cst.CSTNode) -> str:
        fn = self.frame.fn
        if fn is None:
            return f"?#{id(node)}"
        return "#".join(map(str, fn.address(node)))

    # -- walking a test ------------------------------------------------------------------
    def eval_condition(self, test, state: State, value: Value | None = None) -> list:
        """(state, truth, (disjunct, literals, deciding literals)) for each way the test
        can go; the deciding literals of a true ``a or b`` are those of its true disjunct."""
        if value is not None:
            return [(st, t, (0, lits, lits)) for st, t, lits in self._literal(test, state, value)]
        disjuncts = _flatten(test, cst.Or)
        out = []
        pending = [(state, ())]
        for index, disjunct in enumerate(disjuncts):
            nxt = []
            for st, lits in pending:
                for st2, truth, lits2 in self._walk(disjunct, st):
                    if truth:
                        out.append((st2, True, (index, lits + lits2, lits2)))
                    else:
                        nxt.append((st2, lits + lits2))
            pending = nxt
        out += [(st, False, (None, lits, lits)) for st, lits in pending]
        return out

    def _walk(self, node, state: State) -> list:
        if type(node) is cst.BooleanOperation:
            is_and = type(node.operator) is cst.And
            done, lefts = self._guard(node, state) if is_and else (None, None)
            if done is not None:
                return done
            out = []
            for st, truth, lits in self._walk(node.left, state) if lefts is None else lefts:
                if truth != is_and:
                    out.append((st, truth, lits))
                    continue
                for st2, truth2, lits2 in self._walk(node.right, st):
                    out.append((st2, truth2, lits + lits2))
            return out
        if type(node) is cst.UnaryOperation and type(node.operator) is cst.Not:
            return [(st, not t, lits) for st, t, lits in self._walk(node.expression, state)]
        return self._literal(node, state)

    def _literal(self, node, state: State, value: Value | None = None) -> list:
        results = self.eval(node, state) if value is None else [(state, value)]
        out = []
        for st, val in results:
            self._note_read(val)
            truth = decide(st, val)
            if truth is not None:
                out.append((st, truth, ()))
                continue
            config = self._config_decision(val, st, node)
            if isinstance(config, bool):
                out.append((st, config, ()))
                continue
            if config is not None:  # decided per path: fork, both outcomes are this config's
                pred, base = config
                lit = Lit("config", node, frozenset())
                out += [(st.refine_cfg(pred, o, base), o, (lit,)) for o in (True, False)]
                continue
            inputs = frozenset(val.taint.inputs)
            for outcome in (True, False):
                st2 = self._refine(st, node, val, outcome)
                if st2 is None:
                    continue
                if inputs:
                    st2 = st2.evolve(pc=st2.pc | val.taint)
                lit = Lit("request" if inputs else "neutral", node, inputs, _positive(val, outcome))
                out.append((st2, outcome, (lit,)))
        return out

    def _note_read(self, val: Value) -> None:
        """A literal's value is read: promotion, the branch's keys, call reuse's reads."""
        self.promote_choice(val)
        keys = keys_read(val)
        self.read_keys |= keys
        self.reuse.note(keys)

    def promote_choice(self, val: Value) -> None:
        """A flag a constructor set by config decides this test: restart the enumeration
        with its atoms as whole-run decisions (configs.PromoteConfig)."""
        if isinstance(val, ConfigChoice) and not val.keys <= self.driver.whole_run:
            raise PromoteConfig(set(val.keys))

    def _config_decision(self, val: Value, st: State, node=None):
        """bool when decided; (pred, base fact) to fork this path; None if not config."""
        if isinstance(val, Sym) and val.kind == "config":
            val = Pred("truthy", val)
        if not (isinstance(val, Pred) and val.sym.kind == "config"):
            return None
        if self.policy.opaque_config(self):  # both ways, as a value: see the policy
            return None
        if node is not None and val.op == "in":
            self.policy.config_test(self, node, val, self.context())
        where, whole_run = self._config_scope()
        truth = self.driver.decide(val.sym, val.op, val.const, st.cfg, whole_run, where)
        if isinstance(truth, bool):
            return truth != val.negated
        if truth == "fork":
            return val, self.driver.fact(val.sym)
        return None

    def _config_scope(self) -> tuple[str, bool]:
        """Where a config literal is read, and whether its choice holds for the run."""
        # Choices made while building objects (dispatch bindings) or by the warmup's own
        # guards (which entries it calls) must hold for the whole run: leaf decisions.
        # Whole-run (leaf) decisions: the runner's own attributes (which objects it holds),
        # the warmup's own guards (which entries it calls), and atoms found to choose a
        # binding inside a constructor (calls.commit). Anything else splits the path.
        runner_init = False
        for f in reversed(self.stack):  # the innermost construction decides
            if f.lazy_locals is not None or f.qualname.endswith(".__init__"):
                runner_init = f.lazy_locals is not None
                break
        in_warmup = bool(self.stack and self.frame.warmup)
        where = "constructor" if self.in_constructor() else (
            "warmup" if in_warmup else self.policy.name)
        # Every config choice the warmup pass meets is a whole-run (leaf) decision: a
        # path-level split there would let one deployment's warmup path cover another
        # deployment's serving path once the two paths merge.
        whole_run = runner_init or in_warmup or (
            self.policy.name == "warmup" and not self.in_constructor())
        return where, whole_run

    def _guard(self, node: cst.BooleanOperation, state: State) -> tuple:
        """``obj and obj.attr`` over an undecided config object, where its choice holds
        for the run: one decision for the pair (``ConfigDriver.decide_guard``), not one
        per literal. Returns (the test's outcomes, None) when so decided; else (None, the
        left literal's outcomes, from the value evaluated here: walked, not evaluated
        again), or (None, None) when nothing was evaluated."""
        right = node.right
        if not (type(node.left) in (cst.Name, cst.Attribute) and type(right) is cst.Attribute
                and right.value.deep_equals(node.left)) or self.policy.opaque_config(self):
            return None, None
        where, whole_run = self._config_scope()
        if not whole_run:
            return None, None
        left = self.eval(node.left, state)
        pair = self._decide_pair(right, left[0], where) if len(left) == 1 else None
        if pair is not None:
            return [(pair[0], pair[1], ())], None
        return None, [out for st, val in left for out in self._literal(node.left, st, val)]

    def _decide_pair(self, right: cst.Attribute, left: tuple, where: str) -> tuple | None:
        """(state, truth) of ``obj and obj.attr`` decided as one, or None."""
        st, obj = left
        if not _config_sym(obj) or decide(st, obj) is not None:
            return None
        got = self.eval(right, st)
        if len(got) != 1 or not _config_sym(got[0][1]) or decide(*got[0]) is not None:
            return None
        st, attr = got[0]
        if attr.key != f"{obj.key}.{right.attr.value}":
            return None
        self._note_read(obj)
        self._note_read(attr)
        truth = self.driver.decide_guard(obj, attr, st.cfg, where)
        return None if truth is None else (st, truth)

    def _refine(self, st: State, node, val: Value, outcome: bool) -> State | None:
        if isinstance(val, Sym):
            val = Pred("truthy", val)
        if isinstance(val, Pred):
            st = st.refine(val, outcome)
            if val.op == "truthy" and outcome != val.negated and val.sym.kind == "request":
                st = self._exclusive(st, val.sym.key)
            return st
        name, test = _name_test(node)
        if name is not None and isinstance(st.env.get(name), OneOf):
            kept = [o for o in st.env[name].options if _option_passes(st, o, test) in (None, outcome)]
            if not kept:
                return None
            new = st.fork()
            new.env[name] = kept[0] if len(kept) == 1 else OneOf(tuple(kept), st.env[name].taint)
            return new
        return st

    def _exclusive(self, st: State, key: str) -> State:
        """``key`` is true: the flags ``exclusive-flags`` pairs it with are false."""
        head, _, name = key.rpartition(".")
        others = {f"{head}.{o}" if head else o for group in self.settings.exclusive_flags
                  if name in group for o in group if o != name}
        if not others:
            return st
        facts = dict(st.facts)
        for other in others:
            facts[other] = refine_fact(facts.get(other) or SymFact(), "truthy", None, False)
        return st.evolve(facts=facts)

    # -- branch sites --------------------------------------------------------------------
    def branch(self, test, state: State, site_node, value: Value | None = None) -> list:
        """Walk ``test`` and return (state, truth, outcome id), recording coverage."""
        outer, self.read_keys = self.read_keys, set()
        results = self.eval_condition(test, state, value)
        keys, self.read_keys = self.read_keys, outer | self.read_keys
        if state.shadows:  # only serving paths carry shadows
            # Also literals the warm path decides from its own facts: a shadow's facts
            # may decide them the other way.
            woken = [sh for sh in state.shadows if shadows.depends(sh, keys, keys)]
            if woken:  # this branch can tell those shadows from the warm path: run them
                rest = tuple(sh for sh in state.shadows if sh not in woken)
                out = []
                for sh in woken:
                    out += self.branch(test, shadows.materialize(state, sh), site_node, value)
                return out + self.branch(test, state.evolve(shadows=rest), site_node, value)
        multi = len(_flatten(test, cst.Or)) > 1 if value is None else False
        results = [BranchResult(st, truth, disjunct, lits, deciding)
                   for st, truth, (disjunct, lits, deciding) in results]
        return self.policy.outcomes(self, test, site_node, self.node_key(site_node), results,
                                    multi)

    def divergence(self, test, site_node, outcome, lits, multi, disjunct) -> Divergence:
        """The divergence a serving path makes by taking ``outcome`` at this branch."""
        cond = self.code(test)
        loop = type(site_node) is cst.For
        site = self.site(site_node, f"for ... in {cond}" if loop else cond)
        if loop:
            text = f"`{cond}` is {'empty' if outcome == 'else' else 'non-empty'}"
        elif outcome == "else":
            text = f"`{cond}` is false"
        elif multi:
            text = f"`{self.code(_flatten(test, cst.Or)[disjunct])}` is true"
        else:
            text = f"`{cond}` is true"
        inputs = frozenset().union(*(lit.inputs for lit in lits))
        literals = tuple((self.code(lit.node), tuple(sorted(lit.inputs)), lit.positive)
                         for lit in lits if lit.kind == "request")
        return Divergence(site, outcome, text, inputs, self.stack_names(), literals)


def keys_read(val: Value) -> set:
    """Request inputs and symbols a literal's value reads."""
    keys = set(val.taint.inputs)
    for opt in (val.options if isinstance(val, OneOf) else (val,)):
        if isinstance(opt, Pred):
            keys.add(opt.sym.key)
        elif isinstance(opt, Sym):
            keys.add(opt.key)
    return keys


def _config_sym(val: Value) -> bool:
    return isinstance(val, Sym) and val.kind == "config"


def _name_test(node) -> tuple[str | None, str]:
    if type(node) is cst.Name:
        return node.value, "truthy"
    if (type(node) is cst.Comparison and type(node.left) is cst.Name
            and len(node.comparisons) == 1
            and type(node.comparisons[0].comparator) is cst.Name
            and node.comparisons[0].comparator.value == "None"):
        op = node.comparisons[0].operator
        if type(op) is cst.Is:
            return node.left.value, "is_none"
        if type(op) is cst.IsNot:
            return node.left.value, "not_none"
    return None, ""


def _option_passes(st: State, option: Value, test: str) -> bool | None:
    from warmlint.values import Const, Unknown

    if test == "truthy":
        return decide(st, option)
    if isinstance(option, (Sym, Unknown, OneOf)):
        return None
    is_none = isinstance(option, Const) and option.value is None
    return is_none if test == "is_none" else not is_none
