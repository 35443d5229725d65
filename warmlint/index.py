"""Index a source tree lazily: module names, per-module tables of contents, function CSTs.

Why two parsers: LibCST is what the analysis and the codemod run on, but parsing a
whole 7,000-line model runner with it costs ~0.6-0.9 s (and positions several seconds
more). The index only needs *where* definitions are, which CPython's own parser gives
in ~5% of that time. Each function the interpreter actually walks is then parsed with
LibCST from its exact source span, which keeps original line and column numbers (the
span is parsed under an ``if 1:`` header, so indentation stays as it is in the file).
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from warmlint import work_clock
from warmlint.decode import IndexError_, decode_source  # noqa: F401 (re-exported)
from warmlint.files import DEFAULT_MAX_BYTES, read_regular
from warmlint.shift import tree_digest

if TYPE_CHECKING:  # the cache stores tables of contents (toc_json): no import cycle
    from warmlint.summary_cache import SummaryCache


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


def comments(source: str) -> list:
    """The COMMENT tokens of ``source``, up to the first place it cannot be tokenized."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                found.append(tok)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def code_digest(source: bytes, rel_path: str) -> str | None:
    """The digest ``build_toc`` records (``shift.tree_digest``: the code with positions and
    without), for a file's current bytes; None if unparsable."""
    try:
        text = decode_source(source, rel_path)
        return tree_digest(ast.parse(text, filename=rel_path), text)
    except (IndexError_, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@work_clock.parsing
def build_toc(name: str, rel_path: str, source: bytes, is_package: bool,
              keep: dict | None = None) -> ModuleTOC:
    """The module's table of contents. With ``keep``, ``keep[name]`` gets the ``ast`` it
    was built from (a reader of the same text, ``field_dtypes``, then does not parse it
    again) and ``code_digest`` is left to ``SourceTree.digest_code`` (``digests.py``)."""
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
    if "global" in text:  # the walk costs more than the test, and few modules need it
        toc.mutable = {n for node in ast.walk(tree) if isinstance(node, ast.Global)
                       for n in node.names}
    return toc


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
            if default is not None:
                info.attrs[stmt.target.id] = default
    return info


class SourceTree:
    """A directory holding top-level packages (the directory that holds ``vllm/``)."""

    def __init__(self, root: Path, cache: SummaryCache | None = None,
                 exclude: tuple[str, ...] = (), packages: tuple[str, ...] | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES, overlay: dict | None = None):
        self.root = root.resolve()
        self.overlay = overlay or {}  # rel path -> text read instead of the file (`fix`)
        self.cache = cache
        self.max_bytes = max_bytes  # a bigger file is an error entry, not minutes of parsing
        self.exclude = exclude
        self.packages = packages  # walk only these top-level packages (site-packages roots)
        self._modules: dict[str, tuple[str, bool]] | None = None  # name -> (rel, pkg)
        self._tocs: dict[str, ModuleTOC] = {}
        self._data: dict[str, bytes] = {}
        self._sources: dict[str, str] = {}
        self._asts: dict[str, ast.Module] = {}  # this run's parses (a cached TOC has none)
        self.errors: list[IndexError_] = []
        self._failed: set[str] = set()
        self.files_read: dict[str, str] = {}  # rel path -> digest
        self.code_digests: dict[str, str] = {}  # rel path -> ModuleTOC.code_digest ("": later)
        self.files_failed: dict[str, str] = {}  # rel path -> digest ("" unreadable): deps too

    # -- module map -------------------------------------------------------------
    @property
    def modules(self) -> dict[str, tuple[str, bool]]:
        if self._modules is None:
            self._modules = self._scan()
        return self._modules

    def _scan(self) -> dict[str, tuple[str, bool]]:
        found: dict[str, tuple[str, bool]] = {}
        seen_dirs: set[tuple[int, int]] = set()
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=True):
            try:
                st = os.stat(dirpath)
            except OSError:
                dirnames[:] = []
                continue
            if (st.st_dev, st.st_ino) in seen_dirs:  # symlink loop
                dirnames[:] = []
                continue
            seen_dirs.add((st.st_dev, st.st_ino))
            dirnames[:] = sorted(
                d for d in dirnames
                if not d.startswith(".") and d not in ("__pycache__", "node_modules")
            )
            rel_dir = os.path.relpath(dirpath, self.root)
            parts = [] if rel_dir == "." else rel_dir.split(os.sep)
            if self.packages is not None and not parts:
                dirnames[:] = [d for d in dirnames if d in self.packages]
            if any(not p.isidentifier() for p in parts):
                continue
            # A directory named like a module (`sampler.py/`) is found, so that reading it
            # is an error entry rather than a module silently missing.
            for fname in [d for d in dirnames if d.endswith(".py")] + filenames:
                if not fname.endswith(".py") or (self.packages is not None and not parts):
                    continue
                stem = fname[:-3]
                rel = "/".join(parts + [fname])
                if self._excluded(rel):
                    continue
                if stem == "__init__":
                    if parts:
                        found[".".join(parts)] = (rel, True)
                elif stem.isidentifier():
                    found[".".join(parts + [stem])] = (rel, False)
        return found

    def _excluded(self, rel: str) -> bool:
        from fnmatch import fnmatch

        return any(fnmatch(rel, pat) for pat in self.exclude)

    def module_for_path(self, rel: str) -> str | None:
        for name, (path, _) in self.modules.items():
            if path == rel:
                return name
        return None

    def has_module(self, name: str) -> bool:
        return name in self.modules

    # -- tables of contents ----------------------------------------------------------
    def toc(self, name: str) -> ModuleTOC | None:
        """The module's table of contents, or None if it is not in the tree or is broken."""
        if name in self._tocs:
            return self._tocs[name]
        if name in self._failed or name not in self.modules:
            return None
        rel, is_pkg = self.modules[name]
        try:
            data = self._read(rel)
        except IndexError_ as err:
            self.files_failed[rel] = ""
            self._fail(name, err)
            return None
        digest = hashlib.sha1(data).hexdigest()
        toc = self.cache.get_toc(digest, name, rel) if self.cache else None
        if toc is None:
            try:
                toc = build_toc(name, rel, data, is_pkg, keep=self._asts)
            except IndexError_ as err:
                self.files_failed[rel] = digest  # fixing the file must invalidate the run
                self._fail(name, err)
                return None
        self.files_read[rel] = digest
        self.code_digests[rel] = toc.code_digest
        self._data[name] = data
        self._tocs[name] = toc
        return toc

    def _fail(self, name: str, err: IndexError_) -> None:
        self._failed.add(name)
        self.errors.append(err)

    def _read(self, rel: str) -> bytes:
        if rel in self.overlay:
            return self.overlay[rel].encode("utf-8")
        try:  # regular files only (a FIFO would block), at most max-file-size bytes
            return read_regular(self.root / rel, self.max_bytes)
        except OSError as exc:
            raise IndexError_(rel, 1, f"cannot read: {exc.strerror or exc}") from None

    def read_text(self, name: str) -> str | None:
        """A module's text, read as a dependency of the run (editing it invalidates a
        cached result) without building its table of contents: for readers that search
        the text first and parse only the few modules that match (``field_dtypes``).
        None if the module is not in the tree or cannot be read or decoded."""
        if name in self._data:
            return self.source(name)
        if name in self._failed or name not in self.modules:
            return None
        rel = self.modules[name][0]
        try:
            data = self._read(rel)
            text = decode_source(data, rel)
        except (IndexError_, SyntaxError, ValueError):
            self.files_failed.setdefault(rel, "")
            return None
        self.files_read[rel] = hashlib.sha1(data).hexdigest()
        self._data[name], self._sources[name] = data, text
        return text

    def source(self, name: str) -> str:
        """Decoded text of a module whose TOC was built (the bytes read for the TOC)."""
        if name not in self._sources:
            self._sources[name] = decode_source(self._data[name], self.modules[name][0])
        return self._sources[name]

    def undigested(self) -> list[str]:
        """Modules whose TOC this run built: their code digests are still to compute."""
        return [name for name in self._asts if not self._tocs[name].code_digest]

    def digest_code(self, name: str, code: str | None = None) -> str:
        """Record (and return) the code digest of a module ``undigested`` named and store
        its TOC in the cache; ``code``: computed by another process, which stored the TOC."""
        toc = self._tocs[name]
        toc.code_digest = code or tree_digest(self._asts[name], self.source(name))
        self.code_digests[toc.path] = toc.code_digest
        if self.cache and not code:
            self.cache.put_toc(toc)
        return toc.code_digest

    def parsed(self, name: str) -> ast.Module | None:
        """The ``ast`` of ``source(name)`` if this run parsed it for its TOC (read only)."""
        return self._asts.get(name)

    def bytes_read(self) -> dict[str, bytes]:
        """rel path -> the bytes each table of contents was built from."""
        return {self.modules[name][0]: data for name, data in self._data.items()}

    def lines(self, name: str) -> list[str]:
        return self.source(name).splitlines(keepends=True)
