"""The warmup's own runner object, initialized attribute by attribute on demand.

``GPUModelRunner.__init__`` is hundreds of lines that build distributed groups, caches
and KV managers the warmup never touches. Instead of running it, a read of
``self.sampler`` finds the ``self.sampler = ...`` assignments in ``__init__``, keeps
those whose enclosing ``if`` guards hold under the current config (the config driver
decides ``if self.speculative_config:`` like any other config branch), and evaluates
the right-hand side; locals it mentions are found the same way, and ``__init__``'s
parameters are config objects (``vllm_config``, ``device``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from warmlint.interp import tables
from warmlint.state import State
from warmlint.values import Const, Obj, Sym, Unknown, Value, join, join_all


@dataclass
class _Site:
    stmt: cst.CSTNode  # the Assign / AnnAssign small statement
    target: cst.BaseExpression
    guards: tuple  # ((test, polarity) | ("loop", None), ...)
    index: int  # position in a flattened walk, for "last assignment before"


class LazyRootMixin:
    def lazy_attr(self, obj: Obj, name: str, cfg: dict | None = None) -> Value | None:
        cfg = cfg or {}
        key = (obj.oid, name, repr(sorted(cfg.items())))
        if key in self.lazy_memo:
            return self.lazy_memo[key]
        self.lazy_memo[key] = Unknown(f"{obj.label}.{name}")  # cycle guard
        value = None
        for index, method in enumerate(self.settings.setup_methods):
            if index and not _placeholder(value):
                break  # only what ``__init__`` leaves as None is built later
            for init in self._setup_methods(obj, method):
                sites = [s for s in self._sites(init) if _is_self_attr(s.target, name)]
                found = self._choose(obj, init, sites, lambda s: self._attr_rhs(s, name), cfg)
                if found is not None:
                    value = found
        self.lazy_memo[key] = value
        return value

    def _setup_methods(self, obj: Obj, name: str) -> list:
        """The runner's set-up method ``name`` along its MRO, bases first. vLLM runs
        ``__init__``, then ``load_model`` (``setup-methods``); an attribute ``__init__``
        declares as None (``self.sampler = None``) is built by the later ones."""
        out = []
        for cls in reversed(self.resolver.mro(obj.cls)):
            if not hasattr(cls, "module"):
                continue
            ref, _ = self.resolver.lookup_method(cls, name)
            parsed = self.resolver.parsed(ref) if ref is not None else None
            if parsed is not None and ref.qualname.startswith(cls.name + ".") and parsed not in out:
                out.append(parsed)
        return out

    def _sites(self, init) -> list:
        cache = self.lazy_memo.setdefault(("sites", id(init)), [])
        if cache:
            return cache
        counter = [0]

        def walk(stmts, guards):
            for stmt in stmts:
                counter[0] += 1
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        targets = []
                        if isinstance(small, cst.Assign):
                            targets = [t.target for t in small.targets]
                        elif isinstance(small, cst.AnnAssign) and small.value is not None:
                            targets = [small.target]
                        for target in targets:
                            cache.append(_Site(small, target, guards, counter[0]))
                elif isinstance(stmt, cst.If):
                    walk(stmt.body.body, guards + ((stmt.test, True),))
                    orelse = stmt.orelse
                    if isinstance(orelse, cst.If):
                        walk([orelse], guards + ((stmt.test, False),))
                    elif orelse is not None:
                        walk(orelse.body.body, guards + ((stmt.test, False),))
                elif isinstance(stmt, (cst.For, cst.While)):
                    walk(stmt.body.body, guards + (("loop", None),))
                elif isinstance(stmt, cst.With):
                    walk(stmt.body.body, guards)
                elif isinstance(stmt, cst.Try):
                    walk(stmt.body.body, guards)
                    for handler in stmt.handlers:
                        walk(handler.body.body, guards + (("loop", None),))

        walk(init.node.body.body, ())
        return cache

    def _choose(self, obj: Obj, init, sites: list, rhs, cfg: dict) -> Value | None:
        """Value after straight-line execution of the candidate assignments."""
        current: Value | None = None
        for site in sites:
            status = self._guards(obj, init, site, cfg)
            if status == "never":
                continue
            value = self._in_lazy_frame(obj, init, site.index, lambda st: rhs(site)(st), cfg)
            if value is None:
                continue
            current = value if status == "always" or current is None else join(current, value)
        return current

    def _guards(self, obj: Obj, init, site: _Site, cfg: dict) -> str:
        status = "always"
        for test, polarity in site.guards:
            if test == "loop":
                status = "maybe"
                continue
            truths = self._in_lazy_frame(
                obj, init, site.index,
                lambda st, t=test: {truth for _, truth, _ in self.eval_condition(t, st)}, cfg)
            if not truths:  # the guard itself cannot be followed: it may hold
                status = "maybe"
                continue
            if truths == {not polarity}:
                return "never"
            if truths != {polarity}:
                status = "maybe"
        return status

    def _attr_rhs(self, site: _Site, name: str):
        def evaluate(st: State) -> Value:
            results = self.eval(site.stmt.value, st)
            tables.commit([s for s, _ in results])
            value = join_all(v for _, v in results)
            if isinstance(site.target, (cst.Tuple, cst.List)):
                elements = [e.value for e in site.target.elements]
                index = next(i for i, e in enumerate(elements) if _is_self_attr(e, name))
                return self.unpack(value, len(elements))[index]
            return value
        return evaluate

    def _committed(self, site: _Site):
        def evaluate(st: State) -> Value:
            results = self.eval(site.stmt.value, st)
            tables.commit([s for s, _ in results])
            return join_all(v for _, v in results)
        return evaluate

    def _in_lazy_frame(self, obj: Obj, init, index: int, body, cfg: dict | None = None):
        from warmlint.interp.core import Frame

        env = {"self": obj}
        for param in list(init.node.params.params) + list(init.node.params.kwonly_params):
            pname = param.name.value
            if pname != "self":
                env[pname] = Sym(pname, "config", pname)
        frame = Frame(init, init.module, init.qualname)
        frame.lazy_locals = lambda local: self._lazy_local(obj, init, local, index, cfg)
        self.stack.append(frame)
        try:
            return body(State(env, cfg=dict(cfg or {})))
        finally:
            self.stack.pop()

    def _lazy_local(self, obj: Obj, init, local: str, before: int, cfg: dict | None
                    ) -> Value | None:
        key = (obj.oid, id(init), "local", local, before, repr(sorted((cfg or {}).items())))
        if key in self.lazy_memo:
            return self.lazy_memo[key]
        self.lazy_memo[key] = Unknown(local)
        sites = [s for s in self._sites(init)
                 if isinstance(s.target, cst.Name) and s.target.value == local and s.index < before]
        value = None
        if sites:
            site = sites[-1]
            value = self._in_lazy_frame(obj, init, site.index, self._committed(site), cfg)
        self.lazy_memo[key] = value
        return value


def _placeholder(value: Value | None) -> bool:
    return isinstance(value, Const) and value.value is None


def _is_self_attr(target, name: str) -> bool:
    if isinstance(target, cst.Attribute):
        return (isinstance(target.value, cst.Name) and target.value.value == "self"
                and target.attr.value == name)
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_is_self_attr(e.value, name) for e in target.elements)
    return False
