"""On-disk cache: per-file tables of contents by content hash, and whole-run results.

A warm run on an unchanged tree must cost less than ruff's syntax check, so the last
result is stored with the digests of every file the analysis read; if none changed, the
result is reused without importing LibCST at all. Entries are keyed by warmlint's
version and the resolved config, so upgrading or reconfiguring invalidates them.
Corrupt entries are ignored (and overwritten), never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Callable

from warmlint import shift


def default_cache_dir() -> Path:
    """``$WARMLINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/warmlint``, else ``~/.cache/warmlint``."""
    if os.environ.get("WARMLINT_CACHE_DIR"):
        return Path(os.environ["WARMLINT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "warmlint"


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write via a temp file in the same directory and rename: no half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# What the entries hold; bumped when that changes (4: code digests with shapes, anchors by line of code).
FORMAT = 4


class SummaryCache:
    def __init__(self, directory: Path, salt: str):
        self.dir = directory
        self.salt = hashlib.sha1(f"{FORMAT}:{salt}".encode()).hexdigest()[:16]

    # -- per-file tables of contents -----------------------------------------------
    def _toc_path(self, digest: str) -> Path:
        return self.dir / "toc" / self.salt / f"{digest}.pickle"

    def get_toc(self, digest: str, name: str, rel: str):
        path = self._toc_path(digest)
        try:
            with open(path, "rb") as fh:
                toc = pickle.load(fh)
        except (OSError, pickle.PickleError, EOFError, AttributeError, ValueError, TypeError):
            return None
        if getattr(toc, "digest", None) != digest:
            return None
        # The same content may live under another module name; TOCs are name-relative
        # only through relative imports, so rebuild those rather than trust the cache.
        if toc.name != name:
            return None
        toc.path = rel
        return toc

    def put_toc(self, toc) -> None:
        try:
            atomic_write(self._toc_path(toc.digest), pickle.dumps(toc, protocol=4))
        except OSError:
            pass  # a read-only cache is a slow cache, not an error

    # -- whole-run results ----------------------------------------------------------------
    def _result_path(self, key: str) -> Path:
        return self.dir / "results" / f"{hashlib.sha1((self.salt + key).encode()).hexdigest()}.json"

    def get_result(self, key: str, root: Path, code_digest: Callable | None = None):
        """The stored result if every dependency still holds, else None. A file that
        changed only in ways ``code_digest(bytes, rel)`` ignores (a comment) still holds; a
        file whose code only moved (same shape, ``shift.py``) holds with the result's
        positions moved. The entry is then re-stored, so the next run is a plain hit."""
        try:
            payload = json.loads(self._result_path(key).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(payload, dict) or "deps" not in payload or "result" not in payload:
            return None
        deps, codes = dict(payload["deps"]), dict(payload.get("codes", {}))
        changed, moved = False, {}
        for rel, digest in payload["deps"].items():
            try:
                if rel.startswith("dir:"):
                    if listing_digest(root / rel[4:]) != digest:
                        return None
                    continue
                data = (root / rel).read_bytes()
            except OSError:
                return None
            current = hashlib.sha1(data).hexdigest()
            if current == digest:
                continue
            now = code_digest(data, rel) if code_digest and codes.get(rel) else None
            how = shift.compare(now, codes[rel]) if now else None
            if how is None:
                return None
            if how == "moved":
                moved[rel] = data
            deps[rel], codes[rel], changed = current, now, True
        result, anchors = payload["result"], payload.get("anchors", {})
        if moved:
            try:
                got = shift.move(result, anchors, moved)
            except (TypeError, ValueError, AttributeError, KeyError):
                got = None  # a damaged entry: never trusted
            if got is None:
                return None
            result, anchors = got
        if changed:
            self.put_result(key, deps, result, codes, anchors)
        return result

    def put_result(self, key: str, deps: dict[str, str], result: Any,
                   codes: dict[str, str] | None = None, anchors: dict | None = None) -> None:
        data = json.dumps({"deps": deps, "codes": codes or {}, "anchors": anchors or {},
                           "result": result}).encode()
        try:
            atomic_write(self._result_path(key), data)
        except OSError:
            pass


def listing_digest(directory: Path) -> str:
    """What in a directory can change how an import resolves: its modules and packages.
    Not its mtime: editors that save by rename, and swap files, change that for nothing."""
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries
                       if e.name.endswith((".py", ".pyi"))
                       or (e.is_dir() and not e.name.startswith((".", "__pycache__"))))
    return hashlib.sha1("\0".join(names).encode()).hexdigest()
