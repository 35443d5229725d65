"""Expression evaluation. Every ``eval`` returns (state, value) pairs: calls can fork."""

from __future__ import annotations

import ast
import functools
import operator

import libcst as cst

from warmlint import guards
from warmlint.interp import dtypes, ints, shims, tables
from warmlint.interp.containers import ContainerMixin, after_mutation, repeated
from warmlint.interp.dispatch import handler_for
from warmlint.joins import join_pairs
from warmlint.state import State, decide
from warmlint.values import (
    Builtin, Const, Dict, External, Func, Guarded, Lambda, OneOf, Pred, Seq, Sym,
    Tensor, TestOutcome, Unknown, Value, join, options, same,
)

_BINOPS = {
    cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod, cst.Divide: operator.truediv,
    cst.BitOr: operator.or_, cst.BitAnd: operator.and_, cst.LeftShift: operator.lshift,
    cst.RightShift: operator.rshift, cst.Power: operator.pow,
    cst.AddAssign: operator.add, cst.SubtractAssign: operator.sub,
    cst.MultiplyAssign: operator.mul, cst.FloorDivideAssign: operator.floordiv,
    cst.BitOrAssign: operator.or_, cst.BitAndAssign: operator.and_,
}
_INT_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo,
            cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.FloorDivideAssign)
_CMP = {cst.Equal: "eq", cst.NotEqual: "ne", cst.LessThan: "lt", cst.LessThanEqual: "le",
        cst.GreaterThan: "gt", cst.GreaterThanEqual: "ge", cst.Is: "is", cst.IsNot: "isnot",
        cst.In: "in", cst.NotIn: "notin"}
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


@functools.lru_cache(maxsize=4096)
def _literal(text: str):
    """A number or string literal's value from its source text; LibCST's
    ``evaluated_value`` re-parses it on every visit, which showed in profiles."""
    return ast.literal_eval(text)


# Warm paths through one expression's operands are joined only past this many: each
# keeps its facts for the fix planner, until N operands that fork make 2**N.
JOIN_OPERANDS_OVER = 8


class ExprMixin(ContainerMixin):
    def eval(self, node: cst.BaseExpression, state: State) -> list:
        self.tick()
        handler = _EXPR_HANDLERS.get(type(node)) or handler_for(
            type(self), _EXPR_HANDLERS, "expr_", type(node), _unknown_expr)
        return handler(self, node, state)

    def eval_seq(self, nodes, state: State) -> list:
        """Evaluate nodes left to right: (state, [values]) pairs."""
        results = [(state, [])]
        for node in nodes:
            if len(results) == 1:  # one path: its list is its own, extended in place
                st, vals = results[0]
                got = self.eval(node, st)
                if len(got) == 1:
                    vals.append(got[0][1])
                    results = [(got[0][0], vals)]
                    continue
                nxt = [(st2, vals + [val]) for st2, val in got]
            else:
                nxt = [(st2, vals + [val]) for st, vals in results
                       for st2, val in self.eval(node, st)]
            results = nxt if len(nxt) < 2 else join_pairs(
                nxt, self.policy.keeps_config_paths, JOIN_OPERANDS_OVER)
        return results

    # -- atoms ------------------------------------------------------------------------------
    def expr_Name(self, node: cst.Name, state: State) -> list:
        return [(state, self.lookup(node.value, state))]

    def lookup(self, name: str, state: State) -> Value:
        if name in state.env:
            value = state.env[name]
            return guards.narrow(value, state.facts) if type(value) is Guarded else value
        frame = self.frame
        if frame.closure is not None and name in frame.closure:
            return frame.closure[name]
        if frame.lazy_locals is not None and name not in ("True", "False", "None"):
            found = frame.lazy_locals(name)
            if found is not None:
                return found
        if name in ("True", "False", "None"):
            return Const({"True": True, "False": False, "None": None}[name])
        return self.global_value(self.frame.module, name)

    def expr_Integer(self, node, state):
        return [(state, Const(_literal(node.value)))]

    expr_Float = expr_Integer
    expr_Imaginary = expr_Integer

    def expr_SimpleString(self, node, state):
        try:
            return [(state, Const(_literal(node.value)))]
        except Exception:
            return [(state, Unknown("str"))]

    def expr_ConcatenatedString(self, node, state):
        try:
            return [(state, Const(node.evaluated_value))]
        except Exception:
            return [(state, Unknown("str"))]

    def expr_FormattedString(self, node, state):
        return [(state, Unknown("str"))]

    def expr_Ellipsis(self, node, state):
        return [(state, Const(...))]

    def expr_BinaryOperation(self, node, state):
        return [(st, self.binary(a, b, node.operator, st)) for st, (a, b) in
                self.eval_seq([node.left, node.right], state)]

    def binary(self, a: Value, b: Value, op, st: State | None = None) -> Value:
        taint = a.taint | b.taint
        if st is not None and (tables.rows_of(a) or tables.rows_of(b)):  # element-wise
            elem = self.binary(_element(a, st), _element(b, st), op)
            return tables.derived(elem, _batch(a) or _batch(b))
        if isinstance(a, Const) and isinstance(b, Const):
            fn = _BINOPS.get(type(op))
            if fn is not None:
                try:
                    result = fn(a.value, b.value)
                    if not isinstance(result, (int, float)) or abs(result) < 2**63:
                        return Const(result, taint)
                except Exception:
                    pass
        for side in (a, b):
            if isinstance(side, Tensor):
                return Tensor(side.batch, taint)
        derived = ints.add(a, b) if type(op) is cst.Add else (  # `1 + num_logprobs`
            repeated(a, b) or repeated(b, a) if type(op) is cst.Multiply else None)
        if derived is None and isinstance(op, _INT_OPS) and dtypes.is_int(a) and dtypes.is_int(b):
            return Unknown("", taint, True)  # `logits.size(1) - 1`: still an int
        return derived if derived is not None else Unknown("", taint)

    def expr_UnaryOperation(self, node, state):
        if type(node.operator) is cst.Not and isinstance(_unparen(node.expression),
                                                              cst.BooleanOperation):
            # `not (a or b)` is a test: its outcome (which disjunct) is recorded and can
            # diverge like an `if`'s (``fused_sampler_eligible = not (... or seeded)``).
            return [(st, TestOutcome(not truth, st.pc)) for st, truth, _ in
                    self.branch(_unparen(node.expression), state, node)]
        out = []
        for st, val in self.eval(node.expression, state):
            if type(node.operator) is cst.Not:
                self.promote_choice(val)
                truth = decide(st, val)
                if truth is not None:
                    out.append((st, Const(not truth, val.taint)))
                elif isinstance(val, Pred):
                    out.append((st, val.negate()))
                elif isinstance(val, Sym):
                    out.append((st, Pred("truthy", val, None, True, "", val.taint)))
                else:
                    out.append((st, Unknown("", val.taint)))
            elif isinstance(val, Const) and type(node.operator) is cst.Minus:
                try:
                    out.append((st, Const(-val.value, val.taint)))
                except TypeError:
                    out.append((st, Unknown("", val.taint)))
            elif tables.rows_of(val) and type(node.operator) is cst.BitInvert:
                elem = _element(val, st)
                truth = decide(st, elem)
                flipped = Const(not truth, elem.taint) if truth is not None else (
                    elem.negate() if isinstance(elem, Pred) else Unknown("", elem.taint))
                out.append((st, tables.derived(flipped, val.batch)))
            else:
                out.append((st, val if isinstance(val, Tensor) else Unknown("", val.taint)))
        return out

    def expr_BooleanOperation(self, node, state):
        # Value-level `a or b` / `a and b`: pick when decided, else either (no fork).
        # A config literal is decided per leaf or splits the path, as in a branch test.
        is_and = type(node.operator) is cst.And
        out = []
        for st0, left0 in self.eval(node.left, state):
            for st, left, truth in self._config_split(st0, left0, node.left):
                if truth is not None and truth != is_and:
                    out.append((st, left))
                    continue
                for st1, right1 in self.eval(node.right, st):
                    for st2, right, _ in self._config_split(st1, right1, node.right):
                        out.append((st2, right if truth is not None
                                    else join(left, right, left.taint)))
        return out

    def _config_split(self, st: State, value: Value, node) -> list:
        """(state, value, truth) for a value-level operand: its truth when the path knows
        it, the config driver's decision (or both, on split paths) for a config atom."""
        self.promote_choice(value)
        truth = decide(st, value)
        if truth is not None:
            return [(st, value, truth)]
        config = self._config_decision(value, st)
        if isinstance(config, bool):
            return [(st, Const(config, value.taint), config)]
        if config is None:
            return [(st, value, None)]
        pred, base = config
        return [(st.refine_cfg(pred, o, base), Const(o, value.taint), o) for o in (True, False)]

    def expr_Comparison(self, node, state):
        out = []
        nodes = [node.left] + [c.comparator for c in node.comparisons]
        for st, vals in self.eval_seq(nodes, state):
            result = None
            for i, comp in enumerate(node.comparisons):
                part = self.compare(vals[i], _CMP.get(type(comp.operator), "?"), vals[i + 1], st)
                result = part if result is None else self._and(result, part, st)
            out.append((st, result))
        return out

    def _and(self, a: Value, b: Value, st: State) -> Value:
        ta, tb = decide(st, a), decide(st, b)
        if ta is False or tb is False:
            return Const(False, a.taint | b.taint)
        if ta is True:
            return b
        if tb is True:
            return a
        return Unknown("", a.taint | b.taint)

    def compare(self, a: Value, op: str, b: Value, st: State) -> Value:
        result = self._compare(a, op, b, st)
        if isinstance(result, Pred) and result.sym.kind == "config":
            known = self.driver.known(result.sym, result.op, result.const, st.cfg)
            if known is not None:  # pinned or already decided: fold it now
                return Const(known != result.negated, result.taint)
        return result

    def _compare(self, a: Value, op: str, b: Value, st: State) -> Value:
        taint = a.taint | b.taint
        if op in _FLIP and (tables.rows_of(a) or tables.rows_of(b)):  # element-wise
            elem = self.compare(_element(a, st), op, _element(b, st), st)
            return tables.derived(elem, _batch(a) or _batch(b))
        if isinstance(a, OneOf) or isinstance(b, OneOf):
            results = [self._compare(x, op, y, st) for x in options(a) for y in options(b)]
            truths = {decide(st, r) for r in results}
            if len(truths) == 1 and None not in truths:
                return Const(truths.pop(), taint)
            return Unknown("", taint)
        if isinstance(a, Const) and isinstance(b, Const):
            result = _concrete_compare(a.value, op, b.value)
            return Unknown("", taint) if result is None else Const(result, taint)
        if isinstance(a, Const) and op in ("in", "notin") and isinstance(b, Seq) \
                and b.items is not None and all(isinstance(i, Const) for i in b.items):
            found = any(_concrete_compare(a.value, "eq", i.value) for i in b.items)
            return Const(found == (op == "in"), taint)
        if op in ("is", "isnot"):
            return self._identity(a, op, b, taint)
        if isinstance(b, Sym) and isinstance(a, Const) and op in _FLIP:
            a, b, op = b, a, _FLIP[op]
        if isinstance(a, Sym) and isinstance(b, Const):
            if op == "ne":
                return Pred("eq", a, b.value, True, "", taint)
            if op in ("eq", "lt", "le", "gt", "ge"):
                return Pred(op, a, b.value, False, "", taint)
        if isinstance(a, Sym) and op in ("in", "notin") and isinstance(b, Seq) and b.items is not None \
                and all(isinstance(i, Const) for i in b.items):
            return Pred("in", a, frozenset(i.value for i in b.items), op == "notin", "", taint)
        if op in ("eq", "ne") and same(a, b) and not isinstance(a, (Unknown, Tensor)):
            return Const(op == "eq", taint)  # one symbol is one value: ``x == x``
        return Unknown("", taint)

    def _identity(self, a: Value, op: str, b: Value, taint) -> Value:
        if isinstance(a, Const) and a.value is None:
            a, b = b, a
        if isinstance(b, Const) and b.value is None:
            if isinstance(a, Sym):
                return Pred("is_none", a, None, op == "isnot", "", taint)
            if isinstance(a, (Unknown, External)):
                return Unknown("", taint)
            return Const((op == "isnot"), taint)
        if same(a, b) and not isinstance(a, (Unknown, Sym)):
            return Const(op == "is", taint)
        return Unknown("", taint)

    # -- conditional expression, lambda, walrus -------------------------------------------
    def expr_IfExp(self, node: cst.IfExp, state):
        out = []
        for st, truth, _ in self.branch(node.test, state, node):
            for st2, val in self.eval(node.body if truth else node.orelse, st):
                out.append((st2, val.with_taint(st2.pc)))
        return out

    def expr_Lambda(self, node, state):
        return [(state, Lambda(node, dict(state.env), self.frame.fn))]

    def expr_NamedExpr(self, node, state):
        return [(self.assign(node.target, v, st), v) for st, v in self.eval(node.value, state)]

    def expr_Await(self, node, state):
        return [(st, Unknown("await", v.taint)) for st, v in self.eval(node.expression, state)]

    def expr_Yield(self, node, state):
        return [(state, Unknown("yield"))]

    def expr_StarredElement(self, node, state):
        return self.eval(node.value, state)

    # -- attribute, subscript, call ---------------------------------------------------------
    def expr_Attribute(self, node: cst.Attribute, state):
        return [(st, self.get_attr(obj, node.attr.value, st)) for st, obj in self.eval(node.value, state)]

    def expr_Subscript(self, node: cst.Subscript, state):
        out = []
        for st, base in self.eval(node.value, state):
            if isinstance(base, Func) and self.launched_with_grid(base):
                out.append((st, Builtin("launch", base)))
                continue
            if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
                for st2, key in self.eval(node.slice[0].slice.value, st):
                    out.append((st2, self.subscript(base, key, st2)))
            elif isinstance(base, Seq) and base.elem is not None:  # a slice of alike elements
                out.append((st, Seq(None, base.kind, None, base.taint, base.elem)))
            elif isinstance(base, Tensor):
                cols = base.cols if len(node.slice) == 1 else None
                out += [(st2, Tensor(rows, base.taint, cols=cols))
                        for st2, rows in shims.head_rows(self, base, node.slice[0], st)]
            else:
                out.append((st, Unknown("slice", base.taint)))
        return out

    def expr_Call(self, node: cst.Call, state):
        out = []
        for st, func in self.eval(node.func, state):
            arg_nodes = [a.value for a in node.args]
            for st2, vals in self.eval_seq(arg_nodes, st):
                args, kwargs = [], {}
                for a, v in zip(node.args, vals):
                    if a.star == "*":
                        args.extend(v.items if isinstance(v, Seq) and v.items is not None
                                    else [Unknown("*args", v.taint)])
                    elif a.star == "**":
                        if isinstance(v, Dict) and v.items is not None:
                            kwargs.update({str(k): x for k, x in v.items.items()})
                    elif a.keyword is not None:
                        kwargs[a.keyword.value] = v
                    else:
                        args.append(v)
                for st3, result in self.call(func, args, kwargs, st2, node):
                    out.append((after_mutation(func, node, st3, args), result))
        return out



_EXPR_HANDLERS: dict = {}


def _unparen(node):
    return node.with_changes(lpar=(), rpar=()) if getattr(node, "lpar", None) else node


def _element(value: Value, st: State) -> Value:
    table = tables.rows_of(value)
    return value if table is None else tables.element(st, table).with_taint(value.taint)


def _batch(value: Value):
    return value.batch if isinstance(value, Tensor) else None


def _unknown_expr(self, node, state):
    return [(state, Unknown(type(node).__name__))]


def _concrete_compare(a, op, b):
    try:
        return {"eq": lambda: a == b, "ne": lambda: a != b, "lt": lambda: a < b,
                "le": lambda: a <= b, "gt": lambda: a > b, "ge": lambda: a >= b,
                "is": lambda: a is b, "isnot": lambda: a is not b,
                "in": lambda: a in b, "notin": lambda: a not in b}[op]()
    except Exception:
        return None
