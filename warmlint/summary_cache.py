"""On-disk cache: per-file tables of contents and sources by content hash, and whole-run
results.

A warm run on an unchanged tree must cost less than ruff's syntax check, so the last
result is stored with the digests of every file the analysis read; if none changed, the
result is reused without importing LibCST at all. Entries are keyed by warmlint's
version, a digest of its own code and the resolved config, so upgrading (to any other
commit) or reconfiguring invalidates them.

The cache is data, never code: JSON only (no pickle), each entry carrying the format
version, every field checked when read. Anything malformed, from another format, with a
path outside the tree or with no dependency to check, is a miss that is rebuilt and
overwritten: never a crash, never trusted. Files are written private (0600, directories
0700), and dependencies are read as regular files only, with the size limit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from warmlint import cache_prune, shift, unit_deps
from warmlint.files import DATA_MAX_BYTES, DEFAULT_MAX_BYTES, read_json, read_regular, write_file


def default_cache_dir() -> Path:
    """``$WARMLINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/warmlint``, else ``~/.cache/warmlint``."""
    if os.environ.get("WARMLINT_CACHE_DIR"):
        return Path(os.environ["WARMLINT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "warmlint"


def _store(path: Path, data: bytes) -> None:
    """Write a cache file, private to this user; a read-only cache is a slow cache. No
    fsync: every read checks what it reads (``read_json`` and the formats, ``stored_code``'s
    and ``names``' SHA-1, a TOC's digest), so a file a crash cut short is a miss, and a
    cold run writes ~90 of them (fsyncs: 0.04 s here, more on a laptop's disk)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_file(path, data, 0o600, durable=False)
    except OSError:
        pass


def _used(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def inside_tree(rel) -> bool:
    """A dependency path the entry may name: relative, inside the tree."""
    return isinstance(rel, str) and bool(rel) and not rel.startswith(("/", "\\")) \
        and ".." not in rel.replace("\\", "/").split("/") and "\0" not in rel


def _str_table(value) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


@functools.cache
def engine_digest() -> str:
    """A digest of warmlint's own code: the sources of the ``warmlint`` and ``rules``
    packages as installed. Every commit says version 0.1.0 (there are no releases yet),
    and pre-commit environments of different revisions, or a CI cache, share one cache
    directory: an entry made by other code must be a miss, never a result this code did
    not compute. ~110 files, a few milliseconds."""
    import importlib.util

    import warmlint

    dirs = {Path(warmlint.__file__).parent}
    spec = importlib.util.find_spec("warmlint.rules")
    if spec is not None and spec.origin:
        dirs.add(Path(spec.origin).parent)
    digest = hashlib.blake2b(digest_size=16)
    for top in sorted(dirs):
        for path in sorted(top.rglob("*.py")):
            digest.update(path.relative_to(top).as_posix().encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0unreadable")
            digest.update(b"\0")
    return digest.hexdigest()


# What the entries hold; bumped when that changes (5: JSON tables of contents, entries
# carry the format and are validated on read; 6: code digests hash pickles, shift.py;
# 7: class fields' annotations, config_domains; 8: code digests left to the run that
# needs one, from the stored source, shift.LATER).
FORMAT = 8


class SummaryCache:
    def __init__(self, directory: Path, salt: str, max_bytes: int = DEFAULT_MAX_BYTES):
        self.dir = directory
        self.max_bytes = max_bytes  # the run's max-file-size: a dependency over it is a miss
        self.salt = hashlib.sha1(f"{FORMAT}:{engine_digest()}:{salt}".encode()).hexdigest()[:16]

    # -- per-file tables of contents -----------------------------------------------
    def _toc_path(self, digest: str) -> Path:
        return self.dir / "toc" / self.salt / f"{digest}.json"

    def get_toc(self, digest: str, name: str, rel: str):
        from warmlint.toc_json import Malformed, decode

        payload = read_json(self._toc_path(digest))
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            return None
        try:
            toc = decode(payload.get("toc"))
        except Malformed:
            return None
        # The same content may live under another module name; TOCs are name-relative
        # only through relative imports, so rebuild those rather than trust the cache.
        if toc.digest != digest or toc.name != name:
            return None
        toc.path = rel
        return toc

    def put_toc(self, toc) -> None:
        from warmlint.toc_json import encode

        _store(self._toc_path(toc.digest),
               json.dumps({"format": FORMAT, "toc": encode(toc)}).encode())

    # -- the sources code digests are computed from, when a run needs one -------------
    def _source_path(self, digest: str) -> Path:
        return self.dir / "src" / digest

    def put_source(self, digest: str, data: bytes) -> None:
        """Keep ``data`` (whose sha1 is ``digest``) for ``stored_code``; once is enough."""
        path = self._source_path(digest)
        if not path.is_file():
            _store(path, data)

    def stored_code(self, digest: str, rel: str, code_digest: Callable) -> str | None:
        """``code_digest`` of the stored bytes whose sha1 is ``digest``; None when they are
        missing or are not those bytes (a damaged cache is a miss, never trusted)."""
        try:
            data = read_regular(self._source_path(digest), self.max_bytes)
        except OSError:
            return None
        return code_digest(data, rel) if hashlib.sha1(data).hexdigest() == digest else None

    # -- whole-run results ----------------------------------------------------------------
    def _result_path(self, key: str) -> Path:
        return self.dir / "results" / f"{hashlib.sha1((self.salt + key).encode()).hexdigest()}.json"

    def get_result(self, key: str, root: Path, code_digest: Callable | None = None):
        """The stored result if every dependency still holds, else None. A file that
        changed only in ways ``code_digest(bytes, rel)`` ignores (a comment) still holds; a
        file whose code only moved (same shape, ``shift.py``) holds with the result's
        positions moved. The entry is then re-stored, so the next run is a plain hit."""
        payload = read_json(self._result_path(key))
        if not _well_formed(payload):
            return None
        deps, codes = dict(payload["deps"]), dict(payload["codes"])
        units = payload.get("units") if isinstance(payload.get("units"), dict) else {}
        words = functools.cache(lambda: self.names(key, payload.get("names")))
        changed, moved, kept = False, {}, {}
        for rel, digest in payload["deps"].items():
            try:
                if rel.startswith("dir:"):
                    if listing_digest(root / rel[4:]) != digest:
                        return None
                    continue
                data = read_regular(root / rel, self.max_bytes)
            except OSError:
                if digest == "":  # it could not be read then either: the same error holds
                    continue
                return None
            current = hashlib.sha1(data).hexdigest()
            if current == digest:
                continue
            stored = codes.get(rel)
            if stored == shift.LATER and code_digest:
                stored = self.stored_code(digest, rel, code_digest)
            now = code_digest(data, rel) if code_digest and stored else None
            how = shift.compare(now, stored) if now else None
            if how is None and now and rel in units:  # new code, maybe none the run read
                how = unit_deps.check(self, words, units[rel], rel, digest, data)
                kept[rel] = (how, data)
            if how is None:
                return None
            if how == "moved":
                moved[rel] = data
            deps[rel], codes[rel], changed = current, now, True
        result, anchors = payload["result"], payload["anchors"]
        for rel, (held, data) in kept.items():
            got = unit_deps.relocate(result, anchors, units, rel, held, data)
            if got is None:
                return None
            result, anchors, units = got
        if moved:
            try:
                got = shift.move(result, anchors, moved)
            except Exception:  # noqa: BLE001 - a damaged entry: never trusted
                got = None
            if got is None:
                return None
            result, anchors = got
        if changed:
            self.put_result(key, deps, result, codes, anchors, units, payload.get("names"))
        else:
            _used(self._result_path(key))  # kept by cache_prune while it is used
        return result

    def put_result(self, key: str, deps: dict[str, str], result: Any,
                   codes: dict[str, str] | None = None, anchors: dict | None = None,
                   units: dict | None = None, names: list | str | None = None) -> None:
        """Store a run's result; ``units``: what it read of each file; ``names``: the words
        of what it read (``unit_deps``), stored beside it and named in the entry by their
        digest (a list), or that digest (a str: the entry is re-stored after an edit)."""
        if not deps:  # nothing to check it against: it could never be trusted
            return
        if isinstance(names, list):
            blob = json.dumps({"format": FORMAT, "names": names}).encode()
            _store(self._names_path(key), blob)
            names = hashlib.sha1(blob).hexdigest()
        _store(self._result_path(key), json.dumps(
            {"format": FORMAT, "deps": deps, "codes": codes or {}, "anchors": anchors or {},
             "units": units or {}, "names": names, "result": result}).encode())
        cache_prune.prune(self.dir)  # at most once a day

    def _names_path(self, key: str) -> Path:
        return self.dir / "names" / self._result_path(key).name

    def names(self, key: str, digest) -> frozenset | None:
        """The words stored beside the entry, if they are the ones it names (``digest``);
        else None (then ``unit_deps`` trusts no change)."""
        try:
            blob = read_regular(self._names_path(key), DATA_MAX_BYTES)
            payload = json.loads(blob) if hashlib.sha1(blob).hexdigest() == digest else None
        except (OSError, ValueError, RecursionError):
            return None
        words = payload.get("names") if isinstance(payload, dict) \
            and payload.get("format") == FORMAT else None
        ok = isinstance(words, list) and all(isinstance(w, str) for w in words)
        return frozenset(words) if ok else None


def _well_formed(payload) -> bool:
    """What ``put_result`` writes: at least one dependency, each a path inside the tree
    with a digest; a result the caller checks further (``check.report_from_cache``)."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        return False
    deps, codes = payload.get("deps"), payload.get("codes")
    return (_str_table(deps) and bool(deps) and _str_table(codes)
            and all(inside_tree(rel.removeprefix("dir:")) for rel in deps)
            and all(inside_tree(rel) for rel in codes)
            and isinstance(payload.get("anchors"), dict) and "result" in payload)


def listing_digest(directory: Path) -> str:
    """What in a directory can change how an import resolves: its modules and packages.
    Not its mtime: editors that save by rename, and swap files, change that for nothing."""
    with os.scandir(directory) as entries:  # a FIFO or a file here raises: not a listing
        names = sorted(e.name for e in entries
                       if e.name.endswith((".py", ".pyi"))
                       or (e.is_dir() and not e.name.startswith((".", "__pycache__"))))
    return hashlib.sha1("\0".join(names).encode()).hexdigest()
