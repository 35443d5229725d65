"""Calls: functions, bound methods, constructors, ``nn.Module`` calls, JIT sinks."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from warmlint import sinks
from warmlint.interp import built, cached, cold_share, read_trace, shims, warm_records
from warmlint.interp.conds import keys_read
from warmlint.interp.frames import Frame, SinkHit
from warmlint.interp.reuse import replay_cold
from warmlint.resolve import ClassRef, FuncRef
from warmlint.shadows import materialize
from warmlint.state import State
from warmlint.values import (
    Builtin, ClassVal, ConfigChoice, Const, Dict, External, Func, Lambda, Obj, OneOf, Seq,
    Super, Sym,
    Unknown, Value, join_all, same, taint_of,
)


class CallMixin:
    def call(self, func: Value, args: list, kwargs: dict, state: State, node) -> list:
        results = []
        policy = self.policy
        for fv in (func.options if isinstance(func, OneOf) else (func,)):
            entry = None
            if self.stack and self.frame.warmup:
                entry = self._maybe_entry(fv, args, kwargs, state, node)
            if entry is None:
                results += self._call_one(fv, args, kwargs, state, node)
                continue
            outer, policy.active = policy.active, entry
            try:
                results += self._call_one(fv, args, kwargs, state, node)
            finally:
                policy.active = outer
        return results

    def _call_one(self, fv: Value, args, kwargs, state, node) -> list:
        if self.policy.skips_call(self, fv):
            return [(state, shims.opaque_result(fv, args, kwargs))]
        if self.in_module_scope and isinstance(fv, (ClassVal, Lambda, Obj)):
            return [(state, Unknown("module-level call"))]  # import-time code is not run
        if self.in_module_scope and isinstance(fv, Func) and not fv.compiled \
                and sinks.recognize_function(self.resolver, fv.ref) is None:
            return [(state, Unknown("module-level call"))]
        if isinstance(fv, Func):
            return self.call_function(fv, args, kwargs, state, node)
        if isinstance(fv, Lambda):
            return self.call_lambda(fv, args, kwargs, state)
        if isinstance(fv, ClassVal):
            return self.construct(fv.ref, args, kwargs, state, node)
        if isinstance(fv, Obj):
            return self.call_object(fv, args, kwargs, state, node)
        if isinstance(fv, Builtin):
            return shims.call_builtin(self, fv, args, kwargs, state, node)
        if isinstance(fv, External):
            return shims.call_external(self, fv, args, kwargs, state, node)
        if isinstance(fv, Sym) and fv.kind == "request" and fv.key.endswith(".values") \
                and not args and not kwargs:  # a request dict's values: alike unknowns
            return [(state, shims.request_values(fv))]
        if isinstance(fv, Sym) and fv.kind == "config":
            consts = ", ".join(repr(a.value) for a in args if isinstance(a, Const))
            return [(state, Sym(f"{fv.key}({consts})", "config", f"{fv.label}({consts})", fv.taint))]
        return [(state, shims.opaque_result(fv, args, kwargs))]

    def _maybe_entry(self, fv, args, kwargs, state, node):
        if isinstance(fv, Func) and isinstance(fv.bound, Obj) and fv.bound.lazy:
            return None  # the runner's own helpers are part of the warmup, not entries
        if isinstance(fv, (Lambda, Builtin, External, ClassVal)):
            return None
        if any(self._is_request_obj(v) for v in list(args) + list(kwargs.values())):
            return self.policy.entry(self, fv, list(args), dict(kwargs), node, state)
        return None

    def _is_request_obj(self, value: Value) -> bool:
        return any(isinstance(o, Obj) and self.resolver.is_request_class(o.cls)
                   for o in (value.options if isinstance(value, OneOf) else (value,)))

    # -- functions ----------------------------------------------------------------------
    def call_function(self, fv: Func, args, kwargs, state: State, node) -> list:
        ref: FuncRef = fv.ref
        found = sinks.Recognized(sinks.COMPILE, ref.dotted) if fv.compiled \
            else sinks.recognize_function(self.resolver, ref)
        if found is not None and found.kind.launch_suffix and not found.dispatcher:
            return self.launch(fv, args, kwargs, state, node)
        if found is not None and not found.dispatcher:
            self.hit(found.kind, found.target, ref.qualname, node, state)
            return [(state, shims.opaque_result(None, args, kwargs))]
        if self.policy.registered_call(self, ref.dotted):
            # Registered with vLLM's JIT-warmup registry: it compiles its own variants
            # at start-up, so what it launches is warm whatever the request.
            self.hit(sinks.REGISTRY, ref.dotted, ref.qualname, node, state)
            return [(state, shims.opaque_result(None, args, kwargs))]
        if found is not None:  # a dispatcher: the call launches its kernel
            self.hit(found.kind, found.target, ref.qualname, node, state,
                     self._dispatch_args(fv, args, kwargs))
            return [(state, shims.opaque_result(None, args, kwargs))]
        pinned = self.driver.assumptions.find_call(ref)
        if pinned is not None:  # an environment probe the settings decide (`has_flashinfer()`)
            self.driver.pins_read.add(pinned)
            for log in read_trace.OPEN:
                log.pins.add(pinned)
            return [(state, Const(self.driver.assumptions.pinned[pinned]))]
        parsed = self.resolver.parsed(ref)
        if parsed is None:
            return [(state, shims.opaque_result(None, args, kwargs))]
        if sum(1 for f in self.stack if f.qualname == ref.qualname and f.module == ref.module) >= 2:
            return [(state, Unknown("recursion", taint_of(*args, *kwargs.values())))]
        memo_key = cached.key(self, fv, args, kwargs)
        if memo_key is not None and self.driver.read_logs:
            built.note(self, "lazy", memo_key, memo_key in self.lazy_memo,
                       self.lazy_memo.get(memo_key))
        if memo_key is not None and memo_key in self.lazy_memo:
            return [(state, self.lazy_memo[memo_key])]  # functools.cache: not run again
        before = cached.effects(self) if memo_key is not None else None
        bound = [fv.bound] if fv.bound is not None else []
        env = self.bind(parsed.node.params, bound + list(args), kwargs, ref.module, parsed)
        frame = Frame(parsed, ref.module, ref.qualname, warmup=self.policy.warm_frame(fv))
        callee = state.evolve(env=env)
        reuse = self.reuse if self.policy.reuses_calls and node is not None else None
        if reuse is not None and state.div is not None:
            found = reuse.lookup(node, ref, bound + list(args), kwargs, state)
            if found is not None:
                paths, hits, warm = found
                if read_trace.OPEN:  # its reads, for the cold calls being recorded
                    warm_records.reused_warm(self, warm)
                return self._reused(state, paths, hits)
            if not state.heap:  # an object under construction: its bindings are path state
                return self._call_cold(reuse, ref, frame, callee, bound + list(args), kwargs,
                                       state, node)
            if self.memo.cold is not None:  # plain data: the heap is not the callee's
                return self._call_shared(reuse, ref, frame, callee, bound + list(args),
                                         kwargs, state, node)
        if reuse is not None and state.div is None:
            results = _back_in(state, warm_records.warm_call(
                self, reuse, node, ref, bound + list(args), kwargs, state,
                lambda: self.run_body(frame, parsed.node.body, callee)))
        elif self.memo.calls is not None and self.policy.name == "warmup":  # summaries.py
            results = self.memo.calls.run(self, ref, bound + list(args), kwargs, state, lambda: (
                _back_in(state, self.run_body(frame, parsed.node.body, callee))))
        else:
            results = _back_in(state, self.run_body(frame, parsed.node.body, callee))
        if memo_key is not None:
            cached.store(self, memo_key, state, results, before)
        return results

    def _reused(self, state: State, paths: list, hits: list) -> list:
        """A reused call's paths, its sinks recorded again for ``state``'s divergence
        under the current stack (the hits keep the callee's own frames)."""
        stack = self.stack_names()
        for hit in hits:
            self.policy.sink(self, state, replace(hit, stack=stack + hit.stack))
        return paths

    def _call_cold(self, reuse, ref, frame, callee: State, args, kwargs, state: State,
                   node) -> list:
        depth = len(self.stack)
        again = reuse.cold_lookup(node, ref, args, kwargs, state, depth)
        if again is not None:
            if read_trace.OPEN:  # its reads, for the cold calls being recorded
                cold_share.reused_cold(again, state)
            return self._reused(state, *replay_cold(again, state))
        return self._call_shared(reuse, ref, frame, callee, args, kwargs, state, node)

    def _call_shared(self, reuse, ref, frame, callee: State, args, kwargs, state: State,
                     node) -> list:
        """A cold call replayed from a record (cold_share.py), or run (and recorded)."""
        def run():
            return _back_in(state, self.run_body(frame, frame.fn.node.body, callee))

        return cold_share.call(self, reuse, node, ref, args, kwargs, state, run)

    def call_lambda(self, fv: Lambda, args, kwargs, state: State) -> list:
        module = fv.frame_fn.module if fv.frame_fn else self.frame.module
        env = self.bind(fv.node.params, list(args), kwargs, module, fv.frame_fn)
        frame = Frame(fv.frame_fn, module, "<lambda>" if type(fv.node) is cst.Lambda
                      else fv.node.name.value, warmup=self.frame.warmup, closure=fv.env)
        callee = state.evolve(env=env)
        if type(fv.node) is cst.Lambda:
            self.stack.append(frame)
            try:
                results = self.eval(fv.node.body, callee)
            finally:
                self.stack.pop()
        else:
            results = self.run_body(frame, fv.node.body, callee)
        return _back_in(state, results)

    def bind(self, params: cst.Parameters, args: list, kwargs: dict, module: str, fn) -> dict:
        positional = list(params.posonly_params) + list(params.params)
        env = bind_given(positional, args, kwargs)
        for param in positional:
            if param.name.value not in env:
                env[param.name.value] = self.default_value(param, module, fn)
        for param in params.kwonly_params:
            name = param.name.value
            env[name] = kwargs[name] if name in kwargs else self.default_value(param, module, fn)
        star = params.star_arg
        if type(star) is cst.Param:
            extra = args[len(positional):]
            env[star.name.value] = Seq(tuple(extra), "tuple", not extra)
        if type(params.star_kwarg) is cst.Param:
            known = {p.name.value for p in positional + list(params.kwonly_params)}
            rest = {k: v for k, v in kwargs.items() if k not in known}
            env[params.star_kwarg.name.value] = Dict(rest, not rest)
        return env

    def default_value(self, param: cst.Param, module: str, fn) -> Value:
        if param.default is None:
            return Unknown(f"missing argument {param.name.value}")
        key = id(param.default)
        if self.driver.read_logs:
            built.note(self, "module", key, key in self.module_expr_cache,
                       self.module_expr_cache.get(key))
        if key not in self.module_expr_cache:
            self.module_expr_cache[key] = self.eval_in_module(param.default, module, fn)
        return self.module_expr_cache[key]

    def eval_in_module(self, expr: cst.BaseExpression, module: str, fn) -> Value:
        self.stack.append(Frame(fn, module, f"<module {module}>"))
        try:
            results = self.eval(expr, State({}))
        except RecursionError:  # a generated table nested too deep: its value is unknown
            return Unknown("deeply nested expression")
        finally:
            self.stack.pop()
        return join_all(v for _, v in results)

    # -- objects ------------------------------------------------------------------------
    def construct(self, ref: ClassRef, args, kwargs, state: State, node) -> list:
        if self.resolver.is_named_tuple(ref) and not kwargs \
                and all(isinstance(a, Const) for a in args):
            return [(state, Const(tuple(a.value for a in args)))]  # compares like a tuple
        obj = Obj(ref, {}, label=ref.name)
        init, _ = self.resolver.lookup_method(ref, "__init__")
        if init is None and self.resolver.is_dataclass(ref):
            fields = self.resolver.dataclass_fields(ref)
            for i, (name, default) in enumerate(fields):
                if i < len(args):
                    obj.attrs[name] = args[i]
                elif name in kwargs:
                    obj.attrs[name] = kwargs[name]
                elif default is not None:
                    obj.attrs[name] = self.class_level_value(ref, default)
            return [(state, obj)]
        if init is None:
            return [(state, obj)]
        builds = self.memo.builds if self.policy.name == "warmup" else None
        attempt, steps = None, self.steps
        if builds is not None:
            attempt = builds.begin(self, ref, args, kwargs, state)
            reused = builds.lookup(self, attempt, state) if attempt is not None else None
            if reused is not None:
                if read_trace.OPEN:
                    read_trace.built_copied(attempt.objects)
                return reused
        results = None
        try:
            results = self._construct(obj, init, args, kwargs, state, node)
        finally:
            if builds is not None:
                builds.end(self, ref, attempt, state, results, self.steps - steps)
        return results

    def _construct(self, obj: Obj, init, args, kwargs, state: State, node) -> list:
        obj.under_construction = True
        try:
            results = self.call_function(Func(init, obj), args, kwargs, state, node)
        finally:
            obj.under_construction = False
        if not results and self.in_constructor():
            # Every path of this __init__ raises under this leaf's config: vLLM would not
            # start with it, so the leaf describes no deployment.
            self.driver.infeasible = True
        return [(st, obj) for st, _ in commit(obj, results)]

    def call_object(self, obj: Obj, args, kwargs, state: State, node) -> list:
        method, _ = self.resolver.lookup_method(obj.cls, "__call__")
        if method is not None:
            return self.call_function(Func(method, obj), args, kwargs, state, node)
        if self.resolver.is_nn_module(obj.cls):
            forward = self.get_attr(obj, "forward", state)
            return self.call(forward, args, kwargs, state, node)
        return [(state, shims.opaque_result(obj, args, kwargs))]

    def super_of(self, state: State) -> Value:
        qual = self.frame.qualname
        if "." not in qual or "self" not in state.env:
            return Unknown("super")
        return Super(state.env["self"], ClassRef(self.frame.module, qual.split(".")[0]))

    # -- sinks ------------------------------------------------------------------------------
    def launched_with_grid(self, fv: Func) -> bool:
        found = sinks.recognize_function(self.resolver, fv.ref)
        return found is not None and bool(found.kind.launch_suffix) and not found.dispatcher

    def hit(self, kind: sinks.SinkKind, target: str, display: str, node, state: State,
            args: dict | None = None) -> None:
        sink_id = sinks.make_id(kind, target)
        self.sinks_hit += 1
        site = self.site(node, self.code(node.func) if type(node) is cst.Call else "")
        for value in (args or {}).values():  # specialization classes read the facts
            self.reuse.note(keys_read(value))
        for st in [state] + [materialize(state, sh) for sh in state.shadows]:
            self.policy.sink(self, st, SinkHit(sink_id, kind.name, display, site,
                                               self.stack_names(), args or {}, dict(st.facts),
                                               dict(st.cfg), crossed=st.crossed))

    def launch(self, kernel: Func, args, kwargs, state: State, node) -> list:
        parsed = self.resolver.parsed(kernel.ref)
        bound: dict = {}
        if parsed is not None:
            params = list(parsed.node.params.posonly_params) + list(parsed.node.params.params)
            bound = bind_given(params, args, kwargs)
        self.hit(sinks.TRITON, kernel.ref.dotted, kernel.ref.qualname, node, state, bound)
        return [(state, Const(None))]

    def _dispatch_args(self, dispatcher: Func, args, kwargs) -> dict:
        """A dispatcher's arguments by its own parameter names (its kernel's differ)."""
        parsed = self.resolver.parsed(dispatcher.ref)
        if parsed is None:
            return {}
        params = list(parsed.node.params.posonly_params) + list(parsed.node.params.params)
        return bind_given(params, args, kwargs)


def _back_in(caller: State, results: list) -> list:
    """A callee's (state, value) pairs seen from the caller: its locals and branch taint."""
    return [(cs.evolve(env=caller.env, pc=caller.pc), val) for cs, val in results]


def bind_given(params: list, args: list, kwargs: dict) -> dict:
    """Parameter name -> argument, for the parameters the call gives (by position or name)."""
    bound = {}
    for i, param in enumerate(params):
        name = param.name.value
        if i < len(args):
            bound[name] = args[i]
        elif name in kwargs:
            bound[name] = kwargs[name]
    return bound


def _callable(value: Value) -> bool:
    return any(isinstance(o, (Func, Lambda, Obj, ClassVal)) for o in
               (value.options if isinstance(value, OneOf) else (value,)))


def commit(obj: Obj, results: list) -> list:
    """Write what each path of ``obj.__init__`` set into the object, then forget it.

    Paths that agree are simply committed. Paths that disagree on a plain value are
    joined (later branches on it go both ways, on both sides). Paths that disagree on a
    *binding* (``self.forward = self.forward_cuda`` vs ``forward_native``) mean the
    config atoms that split them choose code, not values: those become whole-run
    decisions and the analysis restarts (configs.PromoteConfig).
    """
    from warmlint.config_leaves import PromoteConfig

    names = {name for st, _ in results for (oid, name) in st.heap if oid == obj.oid}
    for name in sorted(names):
        values = [st.heap.get((obj.oid, name)) for st, _ in results]
        present = [v for v in values if v is not None]
        if len(present) == len(values) and all(same(present[0], v) for v in present[1:]):
            obj.attrs[name] = present[0]
            continue
        keys = _split_by([st.cfg for st, _ in results])
        if any(_callable(v) for v in present) and keys:
            raise PromoteConfig(keys)
        if len(present) < len(values) and name in obj.attrs:
            present.append(obj.attrs[name])
        obj.attrs[name] = join_all(present)
        if keys and _flags(present) and isinstance(obj.attrs[name], OneOf):
            joined = obj.attrs[name]
            obj.attrs[name] = ConfigChoice(joined.options, joined.taint, frozenset(keys))
    if not names:
        return results
    return [(st.evolve(heap={k: v for k, v in st.heap.items() if k[0] != obj.oid}), val)
            for st, val in results]


def _flags(values: list) -> bool:
    """Constants that differ (``self.use_flashinfer = True`` on one path, False on
    another): like a binding, a flag set once that later picks the dispatch."""
    return len(values) > 1 and all(isinstance(v, Const) for v in values) \
        and len({repr(v.value) for v in values}) > 1


def _split_by(cfgs: list) -> set:
    keys = set().union(*(c.keys() for c in cfgs))
    return {k for k in keys if len({repr(c.get(k)) for c in cfgs}) > 1}
