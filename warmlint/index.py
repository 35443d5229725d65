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
import re
import tokenize
from pathlib import Path

from typing import TYPE_CHECKING

from warmlint.decode import IndexError_, decode_source  # noqa: F401 (re-exported)
from warmlint.files import DEFAULT_MAX_BYTES, read_regular
from warmlint.shift import LATER, tree_digest
from warmlint.toc import (ClassInfo, FuncInfo, ModuleTOC, _resolve_relative,  # noqa: F401
                          build_toc)  # (re-exported: the index's readers import them here)

if TYPE_CHECKING:  # the cache stores tables of contents (toc_json): no import cycle
    from warmlint.summary_cache import SummaryCache


def calls(callee: str) -> re.Pattern:
    """A call of ``callee`` in source text: the name, then ``(``."""
    return re.compile(rf"\b{re.escape(callee)}\s*\(")


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


def excluded(rel: str, patterns) -> bool:
    """Whether the ``exclude`` setting's ``patterns`` leave the file ``rel`` out."""
    from fnmatch import fnmatch

    return any(fnmatch(rel, pat) for pat in patterns)


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
        self.code_digests: dict[str, str] = {}  # rel path -> ModuleTOC.code_digest, or LATER
        self.files_failed: dict[str, str] = {}  # rel path -> digest ("" unreadable): deps too
        # What the run read of each module beyond its TOC (unit_deps): spans by qualname
        # (module -> qualname -> (start, end)), or the whole module (a reader of its text)
        self.spans_read: dict[str, dict[str, tuple[int, int]]] = {}
        self.whole: set[str] = set()
        self.absent: dict[str, set[str]] = {}  # module -> callees it does not call

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
                if excluded(rel, self.exclude):
                    continue
                if stem == "__init__":
                    if parts:
                        found[".".join(parts)] = (rel, True)
                elif stem.isidentifier():
                    found[".".join(parts + [stem])] = (rel, False)
        return found

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
        self.whole.add(name)
        return self._text(name)

    def text_calling(self, name: str, callee: str) -> str | None:
        """``read_text`` if the module's text spells a call of ``callee`` (``calls``), else
        None: then what the run read of it is only that it holds no such call."""
        text = self._text(name)
        if text is None or calls(callee).search(text):
            return self.read_text(name)
        self.absent.setdefault(name, set()).add(callee)
        return None

    def _text(self, name: str) -> str | None:
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

    def defer_digests(self) -> None:
        """Leave each file's code digest to the run that needs one (``shift.py``: a later
        run that finds the file changed compares it with the stored bytes' digest,
        ``shift.LATER``), and store the tables of contents built here.

        Why: hashing a file's ``ast`` costs ~80% of parsing it (0.15-0.2 s of a cold run
        on vLLM 0.34.0, on the critical path with one core); a later run that finds a file
        changed digests that file twice instead (its stored and its current bytes)."""
        if self.cache is None:
            return
        for name, toc in self._tocs.items():
            if toc.code_digest:
                continue
            self.cache.put_source(toc.digest, self._data[name])
            if name in self._asts:  # built here, not loaded from the cache
                self.cache.put_toc(toc)
            self.code_digests[toc.path] = LATER

    def parsed(self, name: str, info: FuncInfo | None = None) -> ast.Module | None:
        """The ``ast`` of ``source(name)`` if this run parsed it for its TOC (read only);
        with ``info``, the caller reads only that function's span of it."""
        if info is None:
            self.whole.add(name)
        else:
            self.note_span(name, info)
        return self._asts.get(name)

    def bytes_read(self) -> dict[str, bytes]:
        """rel path -> the bytes each table of contents was built from."""
        return {self.modules[name][0]: data for name, data in self._data.items()}

    def lines(self, name: str) -> list[str]:
        """The module's lines, read whole (``span`` reads one function's)."""
        self.whole.add(name)
        return self.lines_of(name)

    def lines_of(self, name: str) -> list[str]:
        return self.source(name).splitlines(keepends=True)

    def span(self, name: str, info: FuncInfo) -> str:
        """Lines ``info.start``-``info.end`` of a module, recorded as read (``unit_deps``)."""
        self.note_span(name, info)
        return "".join(self.lines_of(name)[info.start - 1: info.end])

    def note_span(self, name: str, info: FuncInfo) -> None:
        self.spans_read.setdefault(name, {})[info.qualname] = (info.start, info.end)

    def toc_built(self, name: str) -> bool:
        return name in self._tocs

    def tocs_built(self) -> list[str]:
        """The modules whose table of contents this run built, in the order it built them."""
        return list(self._tocs)

    def read_in_parts(self) -> list[str]:
        """Modules the run read only through their TOC, spans and ``text_calling``."""
        return [name for name in {**self._tocs, **self.absent} if name not in self.whole]
