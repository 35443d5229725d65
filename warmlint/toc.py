"""A module's table of contents: what it defines, where, without its bodies.

Why CPython's ``ast`` and not LibCST: the index only needs *where* definitions are, which
``ast`` gives in ~5% of LibCST's time (``index.py``). A table of contents is plain data,
cached as JSON (``toc_json``) and compared name by name (``unit_deps``).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field

from warmlint.decode import IndexError_, decode_source
from warmlint.shift import tree_digest


@dataclass
class FuncInfo:
    name: str
    qualname: str  # "Class.method" or "function"
    start: int  # first line of the span (first decorator, or the def)
    end: int
    decorators: list[str]  # dotted source text of each decorator (call args dropped)
    decorator_calls: list[str] = field(default_factory=list)  # full decorator text
    is_async: bool = False


@dataclass
class ClassInfo:
    name: str
    bases: list[str]
    start: int
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    # class-level simple assignments: name -> source text of the value
    attrs: dict[str, str] = field(default_factory=dict)
    # dataclass-style annotated fields in order, with default source text or None
    fields: list[tuple[str, str | None]] = field(default_factory=list)
    decorators: list[str] = field(default_factory=list)
    # annotated fields: name -> source text of the annotation (config_domains)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class ModuleTOC:
    """What a module defines, without its bodies. Cheap to build and to cache."""

    name: str
    path: str  # relative to the tree root, "/" separated
    digest: str
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    functions: dict[str, FuncInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    # module-level assignments: name -> (line, source text of the value)
    assigns: dict[str, tuple[int, str]] = field(default_factory=dict)
    # names bound under `if <cond>:` at module level: name -> condition text
    guarded: dict[str, str] = field(default_factory=dict)
    # module globals some function rebinds (`global _PP; _PP = ...`): not constants
    mutable: set = field(default_factory=set)
    # digests of the code without comments, with and without positions (see code_digest)
    code_digest: str = ""

    def function(self, qualname: str) -> FuncInfo | None:
        """The function or method ``qualname`` ("f" or "Class.method") defines, if any."""
        head, _, method = qualname.partition(".")
        if not method:
            return self.functions.get(head)
        cls = self.classes.get(head)
        return cls.methods.get(method) if cls else None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every expression node
        return ""


def _func_info(node: ast.FunctionDef | ast.AsyncFunctionDef, prefix: str) -> FuncInfo:
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return FuncInfo(
        name=node.name,
        qualname=prefix + node.name,
        start=start,
        end=node.end_lineno or node.lineno,
        decorators=[_dotted(d) for d in node.decorator_list],
        decorator_calls=[ast.unparse(d) for d in node.decorator_list],
        is_async=isinstance(node, ast.AsyncFunctionDef),
    )


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


# A `global` statement starts a logical line or follows `;` or `:` (`if x: global y`). The
# word alone (comments, `global_rank`) matched 761 of vLLM 0.34.0's modules, this 144:
# every module with a Global node among them (a miss would leave a rebound global constant).
_GLOBAL_STMT = re.compile(r"(?:^|[;:])[ \t]*global[ \t\\]", re.M)


def build_toc(name: str, rel_path: str, source: bytes, is_package: bool,
              keep: dict | None = None) -> ModuleTOC:
    """The module's table of contents. With ``keep``, ``keep[name]`` gets the ``ast`` it
    was built from (a reader of the same text, ``field_dtypes``, then does not parse it
    again) and ``code_digest`` is left to a later run (``SourceTree.defer_digests``)."""
    digest = hashlib.sha1(source).hexdigest()
    text = decode_source(source, rel_path)
    try:
        tree = ast.parse(text, filename=rel_path)
    except SyntaxError as exc:
        raise IndexError_(rel_path, exc.lineno or 1, f"syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise IndexError_(rel_path, 1, f"cannot parse: {type(exc).__name__}") from None
    toc = ModuleTOC(name=name, path=rel_path, digest=digest,
                    code_digest="" if keep is not None else tree_digest(tree, text))
    if keep is not None:
        keep[name] = tree
    _collect(toc, tree.body, is_package, guard=None)
    if "global" in text and _GLOBAL_STMT.search(text):  # few modules need the walk
        toc.mutable = _global_names(tree.body)
    return toc


def _global_names(body: list) -> set[str]:
    """The names of the ``global`` statements in ``body`` and the statements nested in it:
    a walk of statements only (``ast.walk`` also visits every expression, 4x the time)."""
    names, todo = set(), [body]
    while todo:
        for stmt in todo.pop():
            if type(stmt) is ast.Global:
                names.update(stmt.names)
                continue
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(stmt, name, None)
                if type(block) is list:  # statements, or handlers and cases holding them
                    todo.append(block)
    return names


def _collect(toc: ModuleTOC, body: list[ast.stmt], is_package: bool, guard: str | None) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    toc.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    toc.imports.setdefault(head, head)
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                base = _resolve_relative(toc.name, is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name != "*":
                    toc.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            toc.functions[stmt.name] = _func_info(stmt, "")
        elif isinstance(stmt, ast.ClassDef):
            toc.classes[stmt.name] = _class_info(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    toc.assigns[target.id] = (stmt.lineno, ast.unparse(stmt.value))
                    if guard:
                        toc.guarded[target.id] = guard
        elif isinstance(stmt, ast.If):
            cond = ast.unparse(stmt.test)
            _collect(toc, stmt.body, is_package, guard=cond)
            _collect(toc, stmt.orelse, is_package, guard=f"not ({cond})")
        elif isinstance(stmt, ast.Try):
            _collect(toc, stmt.body, is_package, guard)


def _class_info(node: ast.ClassDef) -> ClassInfo:
    info = ClassInfo(
        name=node.name,
        bases=[_dotted(b) for b in node.bases],
        start=node.lineno,
        decorators=[_dotted(d) for d in node.decorator_list],
    )
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.methods[stmt.name] = _func_info(stmt, node.name + ".")
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    info.attrs[target.id] = ast.unparse(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            default = ast.unparse(stmt.value) if stmt.value is not None else None
            info.fields.append((stmt.target.id, default))
            info.annotations[stmt.target.id] = ast.unparse(stmt.annotation)
            if default is not None:
                info.attrs[stmt.target.id] = default
    return info
