"""Fetch a vLLM release's Python sources from PyPI into a per-user cache.

Only the wheel's ``vllm/**/*.py`` files and its dist-info METADATA and RECORD are kept:
the linter never imports or runs anything from the wheel, and the 250-340 MB wheel
itself is deleted after extraction. Standard library only (urllib): ``requests`` would
give nicer errors but is not worth a dependency for one GET and one streamed download.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urljoin, urlparse

try:
    import fcntl
except ImportError:  # Windows: fall back to atomic rename alone
    fcntl = None

MARKER = ".warmlint-complete.json"
TIMEOUT_S = 30
CHUNK = 1 << 20
_VERSION_RE = re.compile(r"\d[0-9A-Za-z.+!_-]*")

from warmlint.files import DATA_MAX_BYTES, read_regular
from warmlint.summary_cache import default_cache_dir


class DownloadError(Exception):
    """A fetch failed; the message is one line meant for the end user."""


class _NotFound(DownloadError):
    pass


def release_cache_path(version: str, cache_dir: Path | str | None = None) -> Path:
    version = version.strip().removeprefix("v")
    if len(version) > 64 or not _VERSION_RE.fullmatch(version):
        raise DownloadError(f"'{version[:64]}{'...' * (len(version) > 64)}' is not a vLLM "
                            "version number (e.g. 0.20.0)")
    return Path(cache_dir or default_cache_dir()) / "releases" / f"vllm-{version}"


# --- integrity -------------------------------------------------------------------------

def _safe(name: str) -> bool:
    # Zip member names are attacker-controlled: no absolute paths, drives or '..'.
    return bool(name) and not name.startswith("/") and "\\" not in name and ":" not in name \
        and ".." not in name.split("/")


def _wanted(name: str) -> bool:
    return name.startswith("vllm/") and name.endswith(".py") and _safe(name)


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
        written = os.stat(path / MARKER).st_mtime_ns
        if not _safe(dist_info) or "/" in dist_info:
            raise ValueError(dist_info)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return [f"unreadable marker or RECORD ({exc.__class__.__name__})"]
    expected = {name: entry for name, entry in record.items() if _wanted(name)}
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


# --- network ---------------------------------------------------------------------------

def _open(url: str):
    host = urlparse(url).hostname or url
    req = urllib.request.Request(url, headers={"User-Agent": "warmlint (urllib)"})
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise _NotFound(f"{url} not found") from None
        raise DownloadError(f"{host} answered HTTP {exc.code} for {url}") from None
    except urllib.error.URLError as exc:
        raise DownloadError(f"cannot reach {host}: {exc.reason}") from None
    except OSError as exc:  # timeouts and resets outside URLError
        raise DownloadError(f"cannot reach {host}: {exc}") from None
    except http.client.HTTPException as exc:  # a proxy or server speaking something else
        raise DownloadError(f"bad reply from {host} ({type(exc).__name__}): "
                            "not an HTTP response") from None


def _get_json(url: str) -> tuple[dict, str]:
    host = urlparse(url).hostname
    with _open(url) as resp:
        try:
            data = json.loads(resp.read())
        except (ValueError, OSError, RecursionError, http.client.HTTPException) as exc:
            raise DownloadError(f"bad reply from {host}: not JSON "
                                f"({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise DownloadError(f"bad reply from {host}: not a JSON object")
        return data, resp.geturl()


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _release_files(version: str, index_url: str) -> tuple[list[dict], str]:
    """The release's file list and the URL that relative file URLs are relative to."""
    base = index_url.rstrip("/")
    try:
        data, where = _get_json(f"{base}/vllm/{version}/json")
        return _entries(data.get("urls")), where
    except _NotFound:
        pass
    # Some mirrors serve only the project document; it also names the nearest versions.
    try:
        data, where = _get_json(f"{base}/vllm/json")
    except _NotFound:
        raise DownloadError(f"vllm {version} is not on PyPI") from None
    releases = data.get("releases") if isinstance(data.get("releases"), dict) else {}
    releases = {str(v): _entries(files) for v, files in releases.items()}
    if releases.get(version):
        return releases[version], where
    below = [v for v in releases if releases[v] and _vkey(v) < _vkey(version)]
    above = [v for v in releases if releases[v] and _vkey(v) > _vkey(version)]
    near = ([max(below, key=_vkey)] if below else []) + ([min(above, key=_vkey)] if above else [])
    hint = f" (nearest: {', '.join(near)})" if near else ""
    raise DownloadError(f"vllm {version} is not on PyPI{hint}")


def _entries(files) -> list[dict]:
    """A reply's file list, keeping only well-formed entries (the index is not trusted)."""
    if not isinstance(files, list):
        return []
    return [f for f in files if isinstance(f, dict) and isinstance(f.get("digests"), dict)
            and all(isinstance(f.get(k), str) for k in ("filename", "url"))
            and isinstance(f["digests"].get("sha256"), str)]


def _pick_wheel(files: list[dict], version: str) -> dict:
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel"
              and f["digests"]["sha256"] and f["url"]
              and re.fullmatch(r"[A-Za-z0-9_.+!-]+\.whl", f["filename"])]
    if not wheels:
        raise DownloadError(f"vllm {version} has no wheel on PyPI (only an sdist)")
    # Every wheel carries the same .py files; manylinux x86_64 is the reference build.
    wheels.sort(key=lambda f: ("manylinux" not in f["filename"], "x86_64" not in f["filename"]))
    return wheels[0]


def _download(url: str, dest: Path, sha256: str, size: int | None, progress: str) -> None:
    """Stream url to dest, hashing as it goes; a mismatch deletes dest and raises."""
    from warmlint.progress import Download

    h = hashlib.sha256()
    with _open(url) as resp, open(dest, "wb") as out:
        bar = Download(int(resp.headers.get("Content-Length") or size or 0) or None,
                       dest.name.removesuffix(".part"), progress)
        try:
            while chunk := resp.read(CHUNK):
                h.update(chunk)
                out.write(chunk)
                bar.update(len(chunk))
        except (OSError, http.client.HTTPException) as exc:
            raise DownloadError(f"download of {dest.name.removesuffix('.part')} failed: {exc}") from None
        finally:
            bar.close()
    if h.hexdigest() != sha256.lower():
        dest.unlink()
        raise DownloadError(f"sha256 mismatch for {dest.name.removesuffix('.part')} "
                            f"(expected {sha256[:12]}..., got {h.hexdigest()[:12]}...); nothing cached")


# --- extraction and cache --------------------------------------------------------------

def _extract(wheel: Path, dest: Path) -> dict:
    """Write vllm/**/*.py and dist-info METADATA/RECORD to dest, checked against RECORD."""
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
            sources = [n for n in members if _wanted(n)]
            if not sources:
                raise DownloadError(f"{wheel.name} contains no vllm/*.py files")
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
    return {"dist_info": dist_info, "files": len(sources) + 2}


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


def _fetch_into(version: str, index_url: str, final: Path, work: Path, progress: str) -> None:
    files, where = _release_files(version, index_url)
    wheel = _pick_wheel(files, version)
    sha = wheel["digests"]["sha256"].lower()
    kept = final.parent.parent / "wheels" / wheel["filename"]
    keep = os.environ.get("WARMLINT_KEEP_WHEELS") == "1"
    if keep and kept.is_file() and _hash_file(kept).hexdigest() == sha:
        path = kept
    else:
        path = work / (wheel["filename"] + ".part")
        _download(urljoin(where, wheel["url"]), path, sha, wheel.get("size"), progress)
    tree = work / "tree"
    info = _extract(path, tree)
    if keep and path != kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, kept)
    # Written last: its presence means the extraction above finished.
    marker = {"version": version, "wheel": wheel["filename"], "sha256": sha, **info}
    (tree / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def fetch_release(version: str, cache_dir: Path | None = None, *,
                  progress: bool | str | None = None,
                  index_url: str = "https://pypi.org/pypi", verify: bool = False) -> Path:
    """Return a directory that holds `vllm/` (only the .py files of the vLLM wheel of that version)
    and `vllm-VERSION.dist-info/` (METADATA and RECORD), extracted into a per-user cache.

    progress: None picks a bar on a terminal and periodic lines elsewhere
    (``warmlint.progress``); True forces the bar, False silences it, or a mode name.
    ``verify``: hash every cached file against RECORD (``--verify-cache``)."""
    final = release_cache_path(version, cache_dir)
    version = final.name.removeprefix("vllm-")
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
                print(f"warmlint: cached vllm {version} is damaged ({problems[0]}{more}); "
                      f"re-downloading", file=sys.stderr)
                _remove(final)
            if exclusive:  # leftovers of killed fetches; safe to drop while we hold the lock
                for stale in final.parent.glob(f".tmp-{final.name}-*"):
                    shutil.rmtree(stale, ignore_errors=True)
            work = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
            try:
                _fetch_into(version, index_url, final, work, progress)
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
