"""Name resolution inside the tree: imports, classes and their MRO, decorators.

Anything not defined in the tree is an ``External`` with its dotted name, which is how
``torch``, ``triton`` and ``flashinfer`` are recognized. Names re-exported by the tree
(vLLM's ``vllm.triton_utils.triton``) are canonicalized to the package they stand for.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmlint.cst_functions import FunctionLoader, ParsedFunction
from warmlint.index import ClassInfo, FuncInfo, SourceTree
from warmlint.settings import Settings

BUILTIN_NAMES = frozenset("""
len isinstance issubclass bool int float str min max any all range zip enumerate sum sorted
list tuple dict set frozenset getattr hasattr setattr print super type abs round iter next
reversed map filter repr id callable object Exception RuntimeError ValueError TypeError
AssertionError NotImplementedError ImportError KeyError IndexError OSError
""".split())


@dataclass(frozen=True)
class FuncRef:
    module: str
    qualname: str

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True)
class ClassRef:
    module: str
    name: str

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


class Resolver:
    def __init__(self, tree: SourceTree, loader: FunctionLoader, settings: Settings):
        self.tree = tree
        self.loader = loader
        self.settings = settings
        self.top_packages = {name.split(".")[0] for name in tree.modules}
        self._mro: dict[ClassRef, list] = {}
        self._expressions: dict = {}

    def expression(self, text: str):
        """A module-level expression's CST, parsed once: every run sees the same nodes."""
        if text not in self._expressions:
            import libcst as cst

            try:
                self._expressions[text] = cst.parse_expression(text)
            except Exception:  # not an expression LibCST accepts: treated as unknown
                self._expressions[text] = None
        return self._expressions[text]

    # -- lookups ------------------------------------------------------------------------
    def func_info(self, ref: FuncRef) -> FuncInfo | None:
        toc = self.tree.toc(ref.module)
        return toc.function(ref.qualname) if toc is not None else None

    def parsed(self, ref: FuncRef) -> ParsedFunction | None:
        info = self.func_info(ref)
        return self.loader.load(ref.module, info) if info else None

    def class_info(self, ref: ClassRef) -> ClassInfo | None:
        toc = self.tree.toc(ref.module)
        return toc.classes.get(ref.name) if toc else None

    def split_dotted(self, dotted: str) -> tuple[str | None, list[str]]:
        """Longest prefix of ``dotted`` that is a module of the tree, and the rest."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if self.tree.has_module(mod):
                return mod, parts[i:]
        return None, parts

    def canonical(self, dotted: str) -> str:
        """The external name a dotted path stands for (``vllm.triton_utils.triton`` -> ``triton``)."""
        head = dotted.split(".")[0]
        if head in self.top_packages:
            mod, rest = self.split_dotted(dotted)
            if mod is not None and rest:
                toc = self.tree.toc(mod)
                if toc and rest[0] in toc.imports:
                    target = toc.imports[rest[0]]
                    if target.split(".")[0] not in self.top_packages:
                        return ".".join([target] + rest[1:])
                    if target != dotted:
                        return self.canonical(".".join([target] + rest[1:]))
            return dotted.rsplit(".", 1)[-1] if mod is None else dotted
        return dotted

    def decorator_names(self, module: str, decorators: list[str]) -> list[str]:
        toc = self.tree.toc(module)
        out = []
        for text in decorators:
            head, _, rest = text.partition(".")
            if toc and head in toc.imports:
                full = toc.imports[head] + ("." + rest if rest else "")
                out.append(self.canonical(full))
            else:
                out.append(text)
        return out

    def dotted_name(self, module: str, name: str) -> str | None:
        """What a dotted name written in ``module`` refers to, as a dotted path."""
        toc = self.tree.toc(module)
        if toc is None:
            return None
        head, _, rest = name.partition(".")
        if head in toc.imports:
            return self.canonical(toc.imports[head] + ("." + rest if rest else ""))
        if head in toc.functions or head in toc.classes or head in toc.assigns:
            return f"{module}.{name}"
        return None

    def decorators(self, ref: FuncRef) -> list[str]:
        info = self.func_info(ref)
        return self.decorator_names(ref.module, info.decorators) if info else []

    # -- classes ------------------------------------------------------------------------
    def base_refs(self, ref: ClassRef) -> list:
        """Bases as ClassRef (in the tree) or dotted strings (outside it)."""
        info = self.class_info(ref)
        if info is None:
            return []
        toc = self.tree.toc(ref.module)
        out: list = []
        for text in info.bases:
            resolved = self.resolve_class_name(ref.module, text, toc)
            if resolved == ref:  # `class X(X)`: the base is the X bound before this class
                resolved = self._earlier_binding(ref, text, toc, info.start)
            out.append(resolved)
        return out

    def _earlier_binding(self, ref: ClassRef, text: str, toc, line: int):
        if text in toc.imports:
            return self.resolve_class_name(ref.module, text, toc, local=False)
        assigned = toc.assigns.get(text)
        if assigned and assigned[0] < line and assigned[1] != text:
            resolved = self.resolve_class_name(ref.module, assigned[1], toc)
            return assigned[1] if resolved == ref else resolved
        return text  # unknown: an external base of that name

    def resolve_class_name(self, module: str, text: str, toc=None, local: bool = True):
        """``text`` as a ClassRef or an external dotted name; ``local=False`` looks past
        the module's own classes (for a class that shadows the name it derives from)."""
        toc = toc or self.tree.toc(module)
        head, _, rest = text.partition(".")
        if toc is None:
            return text
        if local and not rest and head in toc.classes:
            return ClassRef(module, head)
        if head in toc.imports:
            dotted = toc.imports[head] + ("." + rest if rest else "")
            mod, tail = self.split_dotted(dotted)
            if mod is not None and len(tail) == 1:
                sub = self.tree.toc(mod)
                if sub and tail[0] in sub.classes:
                    return ClassRef(mod, tail[0])
                if sub and tail[0] in sub.imports:
                    return self.resolve_class_name(mod, tail[0], sub)
            return self.canonical(dotted)
        return text

    def mro(self, ref: ClassRef) -> list:
        if ref in self._mro:
            return self._mro[ref]
        self._mro[ref] = [ref]  # cycle guard
        out: list = [ref]
        for base in self.base_refs(ref):
            chain = self.mro(base) if isinstance(base, ClassRef) else [base]
            for item in chain:
                if item not in out:
                    out.append(item)
        self._mro[ref] = out
        return out

    def lookup_method(self, ref: ClassRef, name: str, after: ClassRef | None = None):
        """(FuncRef, kind) of ``name`` along the MRO; kind is method/static/class/property."""
        chain = self.mro(ref)
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1:]
        for cls in chain:
            if not isinstance(cls, ClassRef):
                continue
            info = self.class_info(cls)
            if info and name in info.methods:
                fref = FuncRef(cls.module, f"{cls.name}.{name}")
                decos = info.methods[name].decorators
                kind = "method"
                if "staticmethod" in decos:
                    kind = "static"
                elif "classmethod" in decos:
                    kind = "class"
                elif "property" in decos or "cached_property" in [d.rsplit(".", 1)[-1] for d in decos]:
                    kind = "property"
                return fref, kind
        return None, None

    def class_attr(self, ref: ClassRef, name: str):
        for cls in self.mro(ref):
            if isinstance(cls, ClassRef):
                info = self.class_info(cls)
                if info and name in info.attrs:
                    return cls, info.attrs[name]
        return None, None

    def is_nn_module(self, ref: ClassRef) -> bool:
        return any(isinstance(c, str) and c.endswith("nn.Module") or c == "Module"
                   for c in self.mro(ref))

    def is_named_tuple(self, ref: ClassRef) -> bool:
        return any(isinstance(c, str) and c.rsplit(".", 1)[-1] == "NamedTuple"
                   for c in self.mro(ref))

    def is_dataclass(self, ref: ClassRef) -> bool:
        """A class whose constructor sets its annotated fields: a ``@dataclass``, or a
        subclass of a struct base such as ``msgspec.Struct`` (``SamplingParams``)."""
        info = self.class_info(ref)
        if info and any(d.rsplit(".", 1)[-1] == "dataclass" for d in info.decorators):
            return True
        return any(isinstance(c, str) and _matches_any(c, self.settings.struct_bases)
                   for c in self.mro(ref))

    def dataclass_fields(self, ref: ClassRef) -> list[tuple[str, str | None]]:
        fields: list[tuple[str, str | None]] = []
        for cls in reversed(self.mro(ref)):
            if isinstance(cls, ClassRef):
                info = self.class_info(cls)
                if info:
                    for name, default in info.fields:
                        fields = [f for f in fields if f[0] != name] + [(name, default)]
        return fields

    def is_request_class(self, ref: ClassRef) -> bool:
        return any(isinstance(c, ClassRef) and c.name in self.settings.request_classes
                   for c in self.mro(ref))


def _matches_any(name: str, patterns) -> bool:
    return any(name == p or name.endswith("." + p) for p in patterns)
