"""Fetch a release's Python sources from PyPI into a per-user cache.

A release is one distribution's wheel at one version: vLLM's (``--vllm X``) or a fork's
(``--pypi aphrodite-engine==X``, whose package is ``aphrodite``). Only the ``.py`` files
of the wheel's top-level packages and its dist-info METADATA and RECORD are kept: the
linter never imports or runs anything from the wheel, and the 250-340 MB wheel itself is
deleted after extraction. The packages are the wheel's own word: ``top_level.txt`` where
it has one, else the top-level directories of RECORD that hold ``.py`` files. Finding
and streaming the wheel is ``warmlint.pypi``'s.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urljoin

try:
    import fcntl
except ImportError:  # Windows: fall back to atomic rename alone
    fcntl = None

from warmlint.files import DATA_MAX_BYTES, read_regular
from warmlint.pypi import (PYPI, DownloadError, check_name, check_version, download,
                           pick_wheel, release_files)
from warmlint.summary_cache import default_cache_dir

MARKER = ".warmlint-complete.json"
CHUNK = 1 << 20
# An old marker (vLLM only) names no packages.
DEFAULT_PACKAGES = ("vllm",)
_PACKAGE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

__all__ = ["MARKER", "DownloadError", "fetch_release", "release_cache_path", "verify_release"]


def release_cache_path(version: str, cache_dir: Path | str | None = None,
                       dist: str = "vllm") -> Path:
    """``releases/NAME-VERSION``, NAME the normalized name with ``_`` for ``-`` (as in a
    wheel's file name), so the first ``-`` ends the name: ``vllm-0.20.0``,
    ``aphrodite_engine-0.24.1``."""
    dist = check_name(dist)
    version = check_version(version, dist)
    name = dist.replace("-", "_")
    return Path(cache_dir or default_cache_dir()) / "releases" / f"{name}-{version}"


# --- integrity -------------------------------------------------------------------------

def _safe(name: str) -> bool:
    # Zip member names are attacker-controlled: no absolute paths, drives or '..'.
    return bool(name) and not name.startswith("/") and "\\" not in name and ":" not in name \
        and ".." not in name.split("/")


def _wanted(name: str, packages=DEFAULT_PACKAGES) -> bool:
    top = name.split("/", 1)[0]
    return "/" in name and top in packages and name.endswith(".py") and _safe(name)


def _packages(record: dict, top_level: str | None) -> list[str]:
    """The wheel's top-level packages that hold .py files: those ``top_level.txt`` names,
    else every such directory of RECORD. Names only (no ``/``, no ``..``): they become
    directories of the cache."""
    with_py = {n.split("/", 1)[0] for n in record if "/" in n and n.endswith(".py")}
    with_py = {n for n in with_py if _PACKAGE_RE.fullmatch(n)}
    named = [line.strip() for line in (top_level or "").splitlines()]
    return sorted({n for n in named if n in with_py}) or sorted(with_py)


def _parse_record(text: str) -> dict[str, tuple[str, int]]:
    """RECORD rows with a sha256 and a size: {path: (urlsafe-b64 digest, size)}."""
    out = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 3 and row[1].startswith("sha256=") and row[2].isdigit():
            out[row[0]] = (row[1][len("sha256="):], int(row[2]))
    return out


def _record_digest(data_hash) -> str:
    return base64.urlsafe_b64encode(data_hash.digest()).rstrip(b"=").decode()


def _hash_file(path: Path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h


def verify_release(path: Path | str, full: bool = False) -> list[str]:
    """Problems with a cached release; an empty list means it is intact.

    Every file must be a regular file with RECORD's size. Its sha256 is compared to
    RECORD's when it changed after the marker was written (mtime or ctime newer than the
    marker's mtime: an edit that kept the size), or for every file with ``full=True``
    (``--verify-cache``). The usual run is a few thousand stat() calls; after a full pass
    that found files merely re-timestamped (a cache restored from an archive), the marker
    is touched so that the next run is that cheap again.
    """
    path = Path(path)
    try:
        marker = json.loads(read_regular(path / MARKER, DATA_MAX_BYTES))
        dist_info = marker["dist_info"]
        record = _parse_record(read_regular(path / dist_info / "RECORD",
                                            DATA_MAX_BYTES).decode("utf-8"))
        count = marker["files"]
        packages = tuple(marker.get("packages", DEFAULT_PACKAGES))
        written = os.stat(path / MARKER).st_mtime_ns
        if not _safe(dist_info) or "/" in dist_info:
            raise ValueError(dist_info)
        if not packages or not all(isinstance(p, str) and _PACKAGE_RE.fullmatch(p)
                                   for p in packages):
            raise ValueError("packages")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return [f"unreadable marker or RECORD ({exc.__class__.__name__})"]
    expected = {name: entry for name, entry in record.items() if _wanted(name, packages)}
    problems = []
    if len(expected) + 2 != count:
        problems.append(f"RECORD lists {len(expected) + 2} files, marker says {count}")
    if not (path / dist_info / "METADATA").is_file():
        problems.append(f"{dist_info}/METADATA is missing")
    hashed = 0
    for name, (digest, size) in expected.items():
        try:
            st = os.stat(path / name)
        except OSError:
            problems.append(f"{name} is missing")
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            problems.append(f"{name} has {st.st_size} bytes, RECORD says {size}")
        elif full or max(st.st_mtime_ns, st.st_ctime_ns) > written:
            hashed += 1
            if _record_digest(_hash_file(path / name)) != digest:
                problems.append(f"{name} does not match its sha256 in RECORD")
    if hashed and not problems:
        try:
            os.utime(path / MARKER)
        except OSError:
            pass  # a read-only cache: the next run hashes again
    return problems


# --- extraction and cache --------------------------------------------------------------

def _extract(wheel: Path, dest: Path) -> dict:
    """Write PACKAGE/**/*.py for the wheel's top-level packages and dist-info
    METADATA/RECORD to dest, checked against RECORD."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = {i.filename: i for i in zf.infolist() if not i.is_dir()}
            for name in members:
                if not _safe(name):
                    raise DownloadError(f"refusing {wheel.name}: unsafe path {name!r} in the wheel")
            records = [n for n in members if re.fullmatch(r"[^/]+\.dist-info/RECORD", n)]
            if len(records) != 1 or f"{records[0][:-6]}METADATA" not in members:
                raise DownloadError(f"{wheel.name} is not a valid wheel (no dist-info RECORD/METADATA)")
            dist_info = records[0].split("/")[0]
            record = _parse_record(zf.read(records[0]).decode("utf-8"))
            top_level = f"{dist_info}/top_level.txt"
            packages = _packages(record, zf.read(top_level).decode("utf-8")
                                 if top_level in members else None)
            if not packages:
                raise DownloadError(f"{wheel.name} contains no Python package (no PACKAGE/*.py "
                                    "in its RECORD)")
            sources = [n for n in members if _wanted(n, packages)]
            missing = sorted(n for n in record if _wanted(n, packages) and n not in members)
            if missing:  # the cache check counts RECORD's files: it would never pass
                raise DownloadError(f"{wheel.name} is inconsistent: RECORD lists {missing[0]}, "
                                    "which the wheel lacks")
            for name in sources + [f"{dist_info}/METADATA", records[0]]:
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                h, n = hashlib.sha256(), 0
                with zf.open(members[name]) as src, open(target, "wb") as out:
                    while chunk := src.read(CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        n += len(chunk)
                # The cheap cache check trusts RECORD, so RECORD must describe what we wrote.
                if name in sources and record.get(name) != (_record_digest(h), n):
                    raise DownloadError(f"{wheel.name} is inconsistent: {name} does not match RECORD")
    except (zipfile.BadZipFile, UnicodeDecodeError, EOFError) as exc:
        raise DownloadError(f"{wheel.name} is not a valid wheel: {exc}") from None
    return {"dist_info": dist_info, "packages": packages, "files": len(sources) + 2}


@contextlib.contextmanager
def _locked(lock_path: Path):
    """Serialise fetches of one version across processes; yields whether we hold a lock."""
    if fcntl is None:
        yield False
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove(path: Path) -> None:
    # Rename first so a half-deleted tree is never mistaken for a release.
    trash = Path(tempfile.mkdtemp(prefix=f".trash-{path.name}-", dir=path.parent))
    os.rename(path, trash / "old")
    shutil.rmtree(trash, ignore_errors=True)


def _fetch_into(dist: str, version: str, index_url: str, final: Path, work: Path,
                progress: str) -> None:
    files, where = release_files(dist, version, index_url)
    wheel = pick_wheel(files, dist, version)
    sha = wheel["digests"]["sha256"].lower()
    kept = final.parent.parent / "wheels" / wheel["filename"]
    keep = os.environ.get("WARMLINT_KEEP_WHEELS") == "1"
    if keep and kept.is_file() and _hash_file(kept).hexdigest() == sha:
        path = kept
    else:
        path = work / (wheel["filename"] + ".part")
        download(urljoin(where, wheel["url"]), path, sha, wheel.get("size"), progress)
    tree = work / "tree"
    info = _extract(path, tree)
    if keep and path != kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, kept)
    # Written last: its presence means the extraction above finished.
    marker = {"dist": dist, "version": version, "wheel": wheel["filename"], "sha256": sha, **info}
    (tree / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def fetch_release(version: str, cache_dir: Path | None = None, *, dist: str = "vllm",
                  progress: bool | str | None = None,
                  index_url: str = PYPI, verify: bool = False) -> Path:
    """Return a directory that holds the wheel's packages (`vllm/`; `aphrodite/` for
    ``dist="aphrodite-engine"``: only their .py files) and its `NAME-VERSION.dist-info/`
    (METADATA and RECORD), extracted into a per-user cache.

    progress: None picks a bar on a terminal and periodic lines elsewhere
    (``warmlint.progress``); True forces the bar, False silences it, or a mode name.
    ``verify``: hash every cached file against RECORD (``--verify-cache``)."""
    dist = check_name(dist)
    version = check_version(version, dist)
    final = release_cache_path(version, cache_dir, dist)
    if final.is_dir() and not verify_release(final, verify):
        return final  # fast path: no lock, no network
    from warmlint.progress import mode

    progress = {None: mode(), True: "bar", False: "off"}.get(progress, progress)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with _locked(final.parent.parent / "locks" / f"{final.name}.lock") as exclusive:
            if final.exists():
                problems = verify_release(final, verify)
                if not problems:
                    return final  # another process fetched it while we waited
                more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
                print(f"warmlint: cached {dist} {version} is damaged ({problems[0]}{more}); "
                      f"re-downloading", file=sys.stderr)
                _remove(final)
            if exclusive:  # leftovers of killed fetches; safe to drop while we hold the lock
                for stale in final.parent.glob(f".tmp-{final.name}-*"):
                    shutil.rmtree(stale, ignore_errors=True)
            work = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
            try:
                _fetch_into(dist, version, index_url, final, work, progress)
                try:
                    os.rename(work / "tree", final)
                except OSError:
                    if verify_release(final):
                        raise
                    # Lost a race to a process without the lock: its copy is just as good.
            finally:
                shutil.rmtree(work, ignore_errors=True)
    except OSError as exc:
        raise DownloadError(f"cannot write the cache at {final.parent}: {exc}") from None
    return final
