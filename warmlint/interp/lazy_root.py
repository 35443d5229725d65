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

from warmlint import sinks
from warmlint.interp import built, tables
from warmlint.interp.frames import Frame
from warmlint.state import State
from warmlint.values import Const, Obj, Sym, Unknown, Value, join, join_all


@dataclass
class _Site:
    stmt: cst.CSTNode  # the Assign / AnnAssign / Expr small statement
    target: cst.BaseExpression | None  # None: an expression statement (registrations)
    guards: tuple  # ((test, polarity) | ("loop", None), ...)
    index: int  # position in a flattened walk, for "last assignment before"
    registering: bool = False  # inside an active registry (a `with` block or a capture)


class LazyRootMixin:
    def lazy_attr(self, obj: Obj, name: str, cfg: dict | None = None) -> Value | None:
        cfg = cfg or {}
        if self.driver.read_logs:
            built.taint(self, "a lazily built runner attribute")
        key = (obj.oid, name, repr(sorted(cfg.items())))
        if key in self.lazy_memo:
            return self.lazy_memo[key]
        if not self.policy.builds_attr(self, obj, name):
            return Unknown(f"{obj.label}.{name}")
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

        def walk(stmts, guards, registering=False, block=False):
            for stmt in stmts:
                counter[0] += 1
                if type(stmt) is cst.SimpleStatementLine:
                    for small in stmt.body:
                        targets = []
                        if type(small) is cst.Assign:
                            targets = [t.target for t in small.targets]
                        elif type(small) is cst.AnnAssign and small.value is not None:
                            targets = [small.target]
                        elif type(small) is cst.Expr and block:
                            cache.append(_Site(small, None, guards, counter[0], True))
                        elif type(small) in (cst.Import, cst.ImportFrom) \
                                and type(small.names) is not cst.ImportStar:
                            targets = [_bound_name(alias) for alias in small.names]
                        for target in targets:
                            cache.append(_Site(small, target, guards, counter[0], registering))
                    continue
                if type(stmt) is cst.With and any(self.registry_context(i.item)
                                                      for i in stmt.items):
                    walk(stmt.body.body, guards, True, True)
                    continue
                elif type(stmt) is cst.If:
                    walk(stmt.body.body, guards + ((stmt.test, True),), registering, block)
                    orelse = stmt.orelse
                    if type(orelse) is cst.If:
                        walk([orelse], guards + ((stmt.test, False),), registering, block)
                    elif orelse is not None:
                        walk(orelse.body.body, guards + ((stmt.test, False),), registering, block)
                elif type(stmt) in (cst.For, cst.While):
                    walk(stmt.body.body, guards + (("loop", None),), registering, block)
                elif type(stmt) is cst.With:
                    walk(stmt.body.body, guards, registering, block)
                elif type(stmt) is cst.Try:
                    walk(stmt.body.body, guards, registering, block)
                    for handler in stmt.handlers:
                        walk(handler.body.body, guards + (("loop", None),), registering, block)

        walk(init.node.body.body, (), self._captures(init))
        return cache

    def _captures(self, init) -> bool:
        """A set-up method decorated with the registry's capture decorator runs inside an
        active registry (vLLM 0.33's v1 ``GPUModelRunner.__init__``)."""
        names = self.resolver.decorator_names(init.module, init.info.decorators)
        return any(sinks.matches(n, self.settings.registry_capture_decorators) for n in names)

    def run_registrations(self, obj: Obj, cfg: dict) -> None:
        """The registrations vLLM's set-up methods make at start-up: the expression
        statements inside their active-registry blocks (``with registry.activate():
        register_top_k_top_p_warmups()``), under the conditions around them. What they
        register is compiled at start-up for every variant it declares."""
        for method in self.settings.setup_methods:
            for init in self._setup_methods(obj, method):
                for site in self._sites(init):
                    if site.target is not None or self._guards(obj, init, site, cfg) == "never":
                        continue
                    self._in_lazy_frame(obj, init, site, self._committed(site), cfg)

    def _choose(self, obj: Obj, init, sites: list, rhs, cfg: dict) -> Value | None:
        """Value after straight-line execution of the candidate assignments."""
        current: Value | None = None
        for site in sites:
            status = self._guards(obj, init, site, cfg)
            if status == "never":
                continue
            value = self._in_lazy_frame(obj, init, site, lambda st: rhs(site)(st), cfg)
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
            if type(site.target) in (cst.Tuple, cst.List):
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

    def _imported(self, site: _Site, local: str):
        """A function-local import (``from ...topk_topp_sampler import register_...``)."""
        def evaluate(st: State) -> Value | None:
            flow = self.exec_stmt(site.stmt, st)
            return next((s.env[local] for s in flow.normal if local in s.env), None)
        return evaluate

    def _in_lazy_frame(self, obj: Obj, init, index, body, cfg: dict | None = None):
        """Evaluate ``body`` in a frame of set-up method ``init`` as it is at statement
        ``index`` (or at a _Site: inside its active-registry block, if it is in one)."""
        registering = isinstance(index, _Site) and index.registering
        index = index.index if isinstance(index, _Site) else index
        env = {"self": obj}
        for param in list(init.node.params.params) + list(init.node.params.kwonly_params):
            pname = param.name.value
            if pname != "self":
                env[pname] = Sym(pname, "config", pname)
        frame = Frame(init, init.module, init.qualname)
        frame.lazy_locals = lambda local: self._lazy_local(obj, init, local, index, cfg)
        self.stack.append(frame)
        self.registering += registering
        try:
            return body(State(env, cfg=dict(cfg or {})))
        finally:
            self.registering -= registering
            self.stack.pop()

    def _lazy_local(self, obj: Obj, init, local: str, before: int, cfg: dict | None
                    ) -> Value | None:
        if self.driver.read_logs:
            built.taint(self, "a lazily built runner local")
        key = (obj.oid, id(init), "local", local, before, repr(sorted((cfg or {}).items())))
        if key in self.lazy_memo:
            return self.lazy_memo[key]
        self.lazy_memo[key] = Unknown(local)
        sites = [s for s in self._sites(init)
                 if type(s.target) is cst.Name and s.target.value == local and s.index < before]
        value = None
        if sites:
            site = sites[-1]
            evaluate = self._imported(site, local) if isinstance(
                site.stmt, (cst.Import, cst.ImportFrom)) else self._committed(site)
            value = self._in_lazy_frame(obj, init, site, evaluate, cfg)
        self.lazy_memo[key] = value
        return value


def _bound_name(alias) -> cst.Name:
    """The local name an import alias binds (``import a.b`` binds ``a``)."""
    if alias.asname is not None:
        return alias.asname.name
    name = alias.name
    while type(name) is cst.Attribute:
        name = name.value
    return name


def _placeholder(value: Value | None) -> bool:
    return isinstance(value, Const) and value.value is None


def _is_self_attr(target, name: str) -> bool:
    if type(target) is cst.Attribute:
        return (type(target.value) is cst.Name and target.value.value == "self"
                and target.attr.value == name)
    if type(target) in (cst.Tuple, cst.List):
        return any(_is_self_attr(e.value, name) for e in target.elements)
    return False
