"""Attribute access, globals, config atoms, and the lazily-initialized runner object."""

from __future__ import annotations

import libcst as cst

from warmlint.resolve import BUILTIN_NAMES, ClassRef, FuncRef
from warmlint.interp import built, read_trace, shims, tables
from warmlint.state import State
from warmlint.values import (
    Builtin, ClassVal, Const, Dict, External, Func, Module, Obj, OneOf, RowIndex, Seq, Super,
    Sym,
    Taint, Tensor, Unknown, Value, join, join_all,
)


def config_label(key: str) -> str:
    if key.startswith("envs."):
        return key[len("envs."):]
    for prefix in ("vllm_config.", "self."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return key


class AttrMixin:
    in_module_scope = 0

    # -- globals ----------------------------------------------------------------------------
    def global_value(self, module: str, name: str) -> Value:
        key = (module, name)
        if self.driver.read_logs:
            built.note(self, "globals", key, key in self.globals_memo, self.globals_memo.get(key))
        if key in self.globals_memo:
            return self.globals_memo[key]
        self.globals_memo[key] = Unknown(name)  # cycle guard
        value = self._global(module, name)
        self.globals_memo[key] = value
        return value

    def _global(self, module: str, name: str) -> Value:
        toc = self.resolver.tree.toc(module)
        if toc is None:
            return Unknown(name)
        if name in self.settings.config_sources and (name in toc.imports or name in toc.assigns):
            return Sym(name, "config", name)
        if name in toc.functions:
            return Func(FuncRef(module, name))
        if name in toc.classes:
            return ClassVal(ClassRef(module, name))
        if name in toc.imports:
            return self.value_of_dotted(toc.imports[name])
        if name in toc.assigns and name not in toc.mutable:
            return self.module_level_value(module, toc.assigns[name][1])
        if name in toc.assigns:
            return Unknown(name)  # set at run time by some `global` statement
        if name in BUILTIN_NAMES:
            return Builtin(name)
        submodule = f"{module}.{name}"
        if self.resolver.tree.has_module(submodule):
            return Module(submodule)
        return Unknown(name)

    def value_of_dotted(self, dotted: str) -> Value:
        last = dotted.rsplit(".", 1)[-1]
        if last in self.settings.config_sources:
            return Sym(last, "config", last)
        mod, rest = self.resolver.split_dotted(dotted)
        if mod is None:
            return External(self.resolver.canonical(dotted))
        value: Value = Module(mod)
        for attr in rest:
            value = self.get_attr(value, attr, State({}))
        return value

    def module_level_value(self, module: str, text: str) -> Value:
        cache_key = (module, text)
        if self.driver.read_logs:
            built.note(self, "module", cache_key, cache_key in self.module_expr_cache,
                       self.module_expr_cache.get(cache_key))
        if cache_key not in self.module_expr_cache:
            expr = self.resolver.expression(text)
            if expr is None:
                self.module_expr_cache[cache_key] = Unknown(text)
                return self.module_expr_cache[cache_key]
            self.in_module_scope += 1
            try:
                self.module_expr_cache[cache_key] = self.eval_in_module(expr, module, None)
            finally:
                self.in_module_scope -= 1
        return self.module_expr_cache[cache_key]

    def class_level_value(self, ref: ClassRef, text: str) -> Value:
        return self.module_level_value(ref.module, text)

    # -- attribute read ---------------------------------------------------------------------
    def get_attr(self, value: Value, name: str, state: State) -> Value:
        result = self._attr(value, name, state)
        if not value.taint.empty and not isinstance(value, Obj):
            result = result.with_taint(value.taint)
        return result

    def _attr(self, value: Value, name: str, state: State) -> Value:
        if isinstance(value, Obj):
            return self._obj_attr(value, name, state)
        if isinstance(value, ClassVal):
            return self._class_attr(value, name)
        if isinstance(value, Module):
            return self.global_value(value.name, name)
        if isinstance(value, External):
            return External(f"{value.qualname}.{name}")
        if isinstance(value, Sym):
            if value.kind == "config":
                key = f"{value.key}.{name}"
                return Sym(key, "config", config_label(key))
            if value.kind == "request":
                return Sym(f"{value.key}.{name}", "request", f"{value.label}.{name}", value.taint)
            return Unknown(f"{value.label}.{name}", value.taint)
        if isinstance(value, Tensor):
            if name == "shape":
                return shims.shape_of(value)
            if name in ("indices", "values"):  # of a `torch.topk` result: same shape
                return value
            if name in ("device", "dtype", "ndim", "is_cuda"):
                return Unknown(name)
            return Builtin("tensor." + name, value)
        if isinstance(value, (Dict, Seq)):
            return Builtin(("dict." if isinstance(value, Dict) else "seq.") + name, value)
        if isinstance(value, Func):
            return Builtin("funcattr." + name, value)
        if isinstance(value, Super):
            ref, kind = self.resolver.lookup_method(value.obj.cls, name, after=value.after) \
                if isinstance(value.obj, Obj) else (None, None)
            return Func(ref, value.obj) if ref is not None else Builtin("noop")
        if isinstance(value, OneOf):
            result = None
            for opt in value.options:
                got = self.get_attr(opt, name, state)
                result = got if result is None else join(result, got)
            return result
        if isinstance(value, Const):
            return Builtin("const." + name, value)
        return Unknown(f"{getattr(value, 'hint', '')}.{name}", value.taint)

    def _obj_attr(self, obj: Obj, name: str, state: State) -> Value:
        if read_trace.OPEN:
            read_trace.read_attr(obj, name, state)
        if (obj.oid, name) in state.heap:
            return state.heap[(obj.oid, name)]
        if name in obj.attrs:
            return obj.attrs[name].with_taint(obj.taint)
        method, kind = self.resolver.lookup_method(obj.cls, name)
        if obj.request and (method is None or kind == "property"):
            key = f"{obj.label}.{name}"
            return Sym(key, "request", key, Taint(frozenset({key})))
        if obj.lazy and method is None:
            found = self.lazy_attr(obj, name, state.cfg)
            if found is not None:
                return found
        if method is not None:
            return self._bind(method, kind, obj, state)
        _, text = self.resolver.class_attr(obj.cls, name)
        if text is not None:
            return self.class_level_value(obj.cls, text)
        return Unknown(f"{obj.label}.{name}", obj.taint)

    def _bind(self, method: FuncRef, kind: str, obj: Value, state: State) -> Value:
        if kind == "static":
            return Func(method)
        if kind == "class":
            return Func(method, ClassVal(obj.cls) if isinstance(obj, Obj) else obj)
        if kind == "property":
            return join_all(v for _, v in self.call_function(Func(method, obj), [], {}, state, None))
        return Func(method, obj)

    def _class_attr(self, cls: ClassVal, name: str) -> Value:
        method, kind = self.resolver.lookup_method(cls.ref, name)
        if method is not None:
            return Func(method, cls if kind == "class" else None)
        _, text = self.resolver.class_attr(cls.ref, name)
        if text is not None:
            return self.class_level_value(cls.ref, text)
        return Unknown(f"{cls.ref.name}.{name}")

    # -- attribute and item write -------------------------------------------------------
    def set_attr(self, target: Value, name: str, value: Value, state: State) -> State:
        for obj in (target.options if isinstance(target, OneOf) else (target,)):
            if not isinstance(obj, Obj) or obj.request:
                continue
            if read_trace.OPEN:  # (a write on a path replaces: still read, paths join by it)
                (read_trace.read_attr if obj.under_construction else read_trace.write_attr)(
                    obj, name, state)
            if obj.under_construction:
                state = state.evolve(heap={**state.heap, (obj.oid, name): value})
            elif obj.lazy or name not in obj.attrs:
                obj.attrs[name] = value
            else:
                obj.attrs[name] = join(obj.attrs[name], value)
        return state

    def set_item(self, container: Value, target: cst.Subscript, value: Value, state: State
                 ) -> State:
        """``container[key] = value``; returns the state (table rows live in its heap)."""
        single = len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index
        if isinstance(container, Tensor) and container.rows is not None:
            index = self.eval(target.slice[0].slice.value, state)[0][1] if single else None
            return tables.write(state, container.rows, value, isinstance(index, RowIndex))
        if not isinstance(container, Dict) or container.items is None or not single:
            return state
        key = self.eval(target.slice[0].slice.value, state)[0][1]
        if isinstance(key, Const):
            if read_trace.OPEN:
                read_trace.write_item(container, key.value)
            try:
                old = container.items.get(key.value)
                container.items[key.value] = value if old is None else join(old, value)
                container.empty = False
            except TypeError:
                pass
        return state
