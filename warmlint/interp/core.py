"""Interpreter core: frames, budget, and statement execution."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from warmlint.config_leaves import ConfigDriver
from warmlint.interp.attrs import AttrMixin
from warmlint.interp.calls import CallMixin
from warmlint.interp.conds import CondMixin
from warmlint.interp.dispatch import handler_for
from warmlint.interp.exprs import ExprMixin
from warmlint.interp.frames import BudgetExceeded, Frame, PassPolicy
from warmlint.interp.lazy_root import LazyRootMixin
from warmlint.interp.reuse import CallReuse
from warmlint.joins import merge_states
from warmlint.resolve import Resolver
from warmlint.shadows import absorb
from warmlint.state import BranchSite, State
from warmlint.values import Const, Lambda, RowIndex, Seq, Unknown, Value, taint_of


@dataclass
class Memo:
    """What a leaf computes once for both passes (module globals, the lazy runner's
    attributes, module-level expressions): the sampler the warmup built is the one that
    serves; and what the leaves of one runner share (constructions, call summaries)."""

    globals: dict = field(default_factory=dict)
    lazy: dict = field(default_factory=dict)
    module_exprs: dict = field(default_factory=dict)
    builds: object = None  # interp/built.py
    calls: object = None  # interp/summaries.py
    cold: object = None  # interp/cold_share.py
    warm: object = None  # interp/warm_share.py


@dataclass
class Flow:
    normal: list = field(default_factory=list)
    returns: list = field(default_factory=list)  # (State, Value)
    breaks: list = field(default_factory=list)
    continues: list = field(default_factory=list)

    def absorb(self, other: "Flow") -> None:
        self.normal += other.normal
        self.returns += other.returns
        self.breaks += other.breaks
        self.continues += other.continues


class Interp(ExprMixin, CallMixin, AttrMixin, CondMixin, LazyRootMixin):
    MAX_DEPTH = 40

    def __init__(self, resolver: Resolver, driver: ConfigDriver, policy: PassPolicy,
                 memo: "Memo | None" = None):
        self.resolver = resolver
        self.settings = resolver.settings
        self.driver = driver
        self.policy = policy
        self.stack: list[Frame] = []
        self.steps = 0
        memo = memo or Memo()
        self.memo = memo
        self.globals_memo = memo.globals
        self.lazy_memo = memo.lazy
        self.module_expr_cache = memo.module_exprs
        self.errors: list[tuple[str, int, str]] = []
        self.sinks_hit = 0  # SinkHits recorded so far (interp/cached.py)
        self.read_keys: set = set()  # what the last branch condition read (shadows.py)
        self.registering = 0  # inside an active JIT-warmup registry (registrations count)
        self.reuse = CallReuse()

    # -- helpers --------------------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.stack[-1]

    def tick(self) -> None:
        self.steps += 1
        if not self.steps & 4095:
            self.driver.poll()
        if self.steps > self.settings.max_steps:
            raise BudgetExceeded(self.frame.qualname if self.stack else "?")

    def site(self, node: cst.CSTNode, text: str = "") -> BranchSite:
        fn = self.frame.fn
        if fn is None:
            return BranchSite("?:0:0", "?", 0, 0, self.frame.qualname, text)
        line, col = fn.position(node)
        return BranchSite(f"{fn.path}:{line}:{col}", fn.path, line, col, fn.qualname, text)

    def code(self, node: cst.CSTNode) -> str:
        fn = self.frame.fn
        if fn is None:
            return " ".join(cst.Module(body=[]).code_for_node(node).split())
        return fn.code(node)

    def merge(self, states: list) -> list:
        return merge_states(states, self.policy.keeps_config_paths)

    def stack_names(self) -> tuple:
        return tuple((f.module, f.qualname) for f in self.stack)

    # -- running a function body ------------------------------------------------------
    def run_body(self, frame: Frame, body: cst.BaseSuite, state: State) -> list:
        """Execute a function body; returns (state, return value) pairs."""
        if len(self.stack) >= self.MAX_DEPTH:
            return [(state, Unknown("depth limit"))]
        self.stack.append(frame)
        try:
            flow = self.exec_suite(body, [state])
        finally:
            self.stack.pop()
        results = list(flow.returns)
        for st in flow.normal:
            results.append((st, Const(None)))
        return results

    def exec_suite(self, suite: cst.BaseSuite, states: list) -> Flow:
        return self.exec_stmts(suite.body, states)  # an indented block or `if x: y`

    def exec_stmts(self, stmts, states: list) -> Flow:
        result = Flow()
        for stmt in stmts:
            if not states:
                break
            step = self.exec_stmt(stmt, states[0]) if len(states) == 1 else Flow()
            for st in states if len(states) > 1 else ():
                step.absorb(self.exec_stmt(stmt, st))
            result.returns += step.returns
            result.breaks += step.breaks
            result.continues += step.continues
            states = step.normal if len(step.normal) < 2 else absorb(self.merge(step.normal))
        result.normal = states
        return result

    def exec_stmt(self, stmt: cst.CSTNode, state: State) -> Flow:
        self.tick()
        if type(stmt) is cst.SimpleStatementLine:  # (isinstance on LibCST's ABCs costs)
            return self.exec_stmts(stmt.body, [state])
        return handler_for(type(self), _STMT_HANDLERS, "stmt_", type(stmt), _skip_stmt)(
            self, stmt, state)

    # -- simple statements ----------------------------------------------------------------
    def stmt_Expr(self, stmt: cst.Expr, state: State) -> Flow:
        return Flow(normal=[st for st, _ in self.eval(stmt.value, state)])

    def stmt_Return(self, stmt: cst.Return, state: State) -> Flow:
        if stmt.value is None:
            return Flow(returns=[(state, Const(None))])
        return Flow(returns=[(st, v.with_taint(st.pc)) for st, v in self.eval(stmt.value, state)])

    def stmt_Raise(self, stmt, state: State) -> Flow:
        return Flow()

    def stmt_Break(self, stmt, state: State) -> Flow:
        return Flow(breaks=[state])

    def stmt_Continue(self, stmt, state: State) -> Flow:
        return Flow(continues=[state])

    def stmt_Assert(self, stmt: cst.Assert, state: State) -> Flow:
        return Flow(normal=[st for st, truth, _ in self.eval_condition(stmt.test, state) if truth])

    def stmt_Assign(self, stmt: cst.Assign, state: State) -> Flow:
        out = []
        for st, value in self.eval(stmt.value, state):
            for target in stmt.targets:
                st = self.assign(target.target, value, st)
            out.append(st)
        return Flow(normal=out)

    def stmt_AnnAssign(self, stmt: cst.AnnAssign, state: State) -> Flow:
        if stmt.value is None:
            return Flow(normal=[state])
        return Flow(normal=[self.assign(stmt.target, v, st) for st, v in self.eval(stmt.value, state)])

    def stmt_AugAssign(self, stmt: cst.AugAssign, state: State) -> Flow:
        out = []
        for st, value in self.eval(stmt.value, state):
            for st2, old in self.eval(stmt.target, st):
                new = self.binary(old, value, stmt.operator, st2)
                out.append(self.assign(stmt.target, new, st2))
        return Flow(normal=out)

    def stmt_Import(self, stmt: cst.Import, state: State) -> Flow:
        st = state.fork()
        for alias in stmt.names:
            dotted = self.code(alias.name)
            if alias.asname:
                st.env[self.code(alias.asname.name)] = self.value_of_dotted(dotted)
            else:
                head = dotted.split(".")[0]
                st.env[head] = self.value_of_dotted(head)
        return Flow(normal=[st])

    def stmt_ImportFrom(self, stmt: cst.ImportFrom, state: State) -> Flow:
        if type(stmt.names) is cst.ImportStar or stmt.module is None and not stmt.relative:
            return Flow(normal=[state])
        base = self.code(stmt.module) if stmt.module else ""
        if stmt.relative:
            from warmlint.index import _resolve_relative

            mod = self.frame.module
            is_pkg = self.resolver.tree.modules.get(mod, ("", False))[1]
            base = _resolve_relative(mod, is_pkg, len(stmt.relative), base or None)
        st = state.fork()
        for alias in stmt.names:
            name = self.code(alias.name)
            local = self.code(alias.asname.name) if alias.asname else name
            st.env[local] = self.value_of_dotted(f"{base}.{name}")
        return Flow(normal=[st])

    def stmt_FunctionDef(self, stmt: cst.FunctionDef, state: State) -> Flow:
        st = state.fork()
        st.env[stmt.name.value] = Lambda(stmt, st.env, self.frame.fn)
        return Flow(normal=[st])

    def stmt_Global(self, stmt, state: State) -> Flow:
        return Flow(normal=[state])

    stmt_Pass = stmt_Nonlocal = stmt_Del = stmt_ClassDef = stmt_Global

    # -- compound statements -------------------------------------------------------------
    def stmt_If(self, stmt: cst.If, state: State) -> Flow:
        flow = Flow()
        elif_states = []
        for st, truth, _ in self.branch(stmt.test, state, stmt):
            if truth:
                flow.absorb(self.exec_suite(stmt.body, [st]))
            elif stmt.orelse is None:
                flow.normal.append(st)
            elif type(stmt.orelse) is cst.If:
                elif_states.append(st)
            else:
                flow.absorb(self.exec_suite(stmt.orelse.body, [st]))
        # The paths that fail this arm are joined before the next ``elif``, as they are
        # between two statements: unjoined, an N-arm chain whose arms each fail two ways
        # (``sid == K and md.fK is not None``) runs its last arm 2**N times.
        for st in self.merge(elif_states):
            flow.absorb(self.stmt_If(stmt.orelse, st))
        flow.normal = [self._pop_pc(st, state) for st in flow.normal]
        return flow

    def _pop_pc(self, st: State, before: State) -> State:
        if st.pc == before.pc:
            return st
        return st.evolve(pc=before.pc)

    def stmt_For(self, stmt: cst.For, state: State) -> Flow:
        out = Flow()
        for st, iterable in self.eval(stmt.iter, state):
            items = iterable.items if isinstance(iterable, Seq) and iterable.items is not None else None
            for st2, entered, _ in self.branch(stmt.iter, st, stmt, value=iterable):
                if not entered:
                    out.normal.append(st2)
                elif items is not None and len(items) <= 8:
                    self._unrolled(stmt, items, st2, out)  # registries, mode tuples
                else:
                    element = _loop_element(iterable)
                    body = self.exec_suite(stmt.body, [self.assign(stmt.target, element, st2)])
                    out.returns += body.returns
                    out.normal += body.normal + body.breaks + body.continues
        if stmt.orelse is not None:
            orelse = self.exec_suite(stmt.orelse.body, self.merge(out.normal))
            out.normal = orelse.normal
            out.returns += orelse.returns
        out.normal = [self._pop_pc(s, state) for s in self.merge(out.normal)]
        return out

    def _unrolled(self, stmt: cst.For, items, state: State, out: Flow) -> None:
        states = [state]
        for item in items:
            step = Flow()
            for s in states:
                step.absorb(self.exec_suite(stmt.body, [self.assign(stmt.target, item, s)]))
            out.returns += step.returns
            out.normal += step.breaks
            states = self.merge(step.normal + step.continues)
        out.normal += states

    def stmt_While(self, stmt: cst.While, state: State) -> Flow:
        out = Flow()
        for st, entered, _ in self.branch(stmt.test, state, stmt):
            if not entered:
                out.normal.append(st)
                continue
            body = self.exec_suite(stmt.body, [st])
            out.returns += body.returns
            out.normal += body.normal + body.breaks + body.continues
        out.normal = [self._pop_pc(s, state) for s in self.merge(out.normal)]
        return out

    def stmt_Try(self, stmt: cst.Try, state: State) -> Flow:
        body = self.exec_suite(stmt.body, [state])
        flow = Flow(returns=list(body.returns), breaks=list(body.breaks),
                    continues=list(body.continues))
        normal = list(body.normal)
        if stmt.orelse is not None:
            orelse = self.exec_suite(stmt.orelse.body, normal)
            flow.returns += orelse.returns
            normal = orelse.normal
        for handler in stmt.handlers:
            st = state.fork()
            if handler.name is not None:
                st = self.assign(handler.name.name, Unknown("exception"), st)
            hflow = self.exec_suite(handler.body, [st])
            flow.returns += hflow.returns
            normal += hflow.normal
        if stmt.finalbody is not None:
            fin = self.exec_suite(stmt.finalbody.body, self.merge(normal))
            flow.returns += fin.returns
            normal = fin.normal
        flow.normal = self.merge(normal)
        return flow

    stmt_TryStar = stmt_Try

    def stmt_With(self, stmt: cst.With, state: State) -> Flow:
        if any(self.registry_context(item.item) for item in stmt.items):
            self.registering += 1  # `with registry.activate():` keeps registrations
            try:
                return self._with(stmt, state)
            finally:
                self.registering -= 1
        return self._with(stmt, state)

    def registry_context(self, expr) -> bool:
        return (type(expr) is cst.Call and type(expr.func) is cst.Attribute
                and expr.func.attr.value in self.settings.registry_contexts)

    def _with(self, stmt: cst.With, state: State) -> Flow:
        states = [state]
        for item in stmt.items:
            nxt = []
            for st in states:
                for st2, value in self.eval(item.item, st):
                    if item.asname is not None:
                        st2 = self.assign(item.asname.name, Unknown("context", value.taint), st2)
                    nxt.append(st2)
            states = nxt
        return self.exec_suite(stmt.body, states)

    def stmt_Match(self, stmt, state: State) -> Flow:
        flow = Flow(normal=[state])
        for case in stmt.cases:
            flow.absorb(self.exec_suite(case.body, [state.fork()]))
        flow.normal = self.merge(flow.normal)
        return flow

    # -- assignment ------------------------------------------------------------------------
    def assign(self, target: cst.BaseExpression, value: Value, state: State) -> State:
        if not state.pc.empty:
            value = value.with_taint(state.pc)
        kind = type(target)  # final LibCST classes: no isinstance through ABCMeta
        if kind is cst.Name:
            st = state.fork()
            st.env[target.value] = value
            return st
        if kind is cst.Tuple or kind is cst.List:
            elements = [e.value for e in target.elements]
            parts = self.unpack(value, len(elements))
            for elt, part in zip(elements, parts):
                state = self.assign(elt, part, state)
            return state
        if kind is cst.Attribute:
            for st, obj in self.eval(target.value, state):
                state = self.set_attr(obj, target.attr.value, value, st)
            return state
        if kind is cst.Subscript:
            for st, container in self.eval(target.value, state):
                state = self.set_item(container, target, value, st)
            return state
        return state

    def unpack(self, value: Value, n: int) -> list:
        if isinstance(value, Seq) and value.items is not None and len(value.items) == n:
            return [v.with_taint(value.taint) for v in value.items]
        return [Unknown("element", value.taint) for _ in range(n)]


_STMT_HANDLERS: dict = {}


def _loop_element(iterable: Value) -> Value:
    """The loop variable of a loop the interpreter runs once for all its iterations."""
    if isinstance(iterable, Seq) and iterable.kind == "range":
        return RowIndex()  # every row in turn (interp/tables.py)
    if isinstance(iterable, Seq) and iterable.elem is not None:
        return iterable.elem.with_taint(iterable.taint)
    return Unknown("element", taint_of(iterable))


def _skip_stmt(self, stmt, state: State) -> Flow:
    return Flow(normal=[state])
