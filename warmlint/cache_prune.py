"""Keeping the cache directory from growing without end.

Every version of a file a run analyzes leaves a copy in ``src/`` and a table of contents
in ``toc/SALT/`` (vLLM 0.34.0's v2 sampler: 20 KB and 10 KB), every tree and settings a
result in ``results/`` (with its words in ``names/``), and every warmlint revision a new
salt; nothing else removes them, so a pre-commit hook on a busy repository would grow the
directory by megabytes a month, forever. ``prune`` runs after a run stored a result, at
most once a day (the ``.pruned`` stamp's time): it deletes results (and their names) not
used for ``MAX_AGE`` (a hit refreshes its entry's time: ``SummaryCache.get_result``), and
sources and tables of contents that no result left names and that were written that long
ago. Deleting is safe at any moment, another run's included: a reader that finds a file
missing has a miss, never a wrong result. Downloaded releases (``releases/``) are left to
the user. Errors are ignored: pruning never fails a run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from warmlint.files import read_json

MAX_AGE = 30 * 86400  # seconds unused before an entry goes
EVERY = 86400  # seconds between prunes of one cache directory
STAMP = ".pruned"


def prune(directory: Path, now: float | None = None) -> int:
    """Delete what is stale under ``directory`` unless it was pruned less than ``EVERY``
    seconds ago; the number of files deleted. Never raises (it also runs inside vLLM,
    from the plugin's cache): whatever fails is left for the next prune."""
    try:
        return _prune(directory, time.time() if now is None else now)
    except Exception:  # noqa: BLE001 - pruning never fails a run
        return 0


def _prune(directory: Path, now: float) -> int:
    try:
        if now - os.stat(directory / STAMP).st_mtime < EVERY:
            return 0
    except OSError:
        pass
    try:
        (directory / STAMP).touch(mode=0o600)
        os.utime(directory / STAMP, (now, now))
    except OSError:
        return 0  # a read-only cache is not pruned either
    cutoff = now - MAX_AGE
    gone, named = _results(directory, cutoff)
    for path in _files(directory / "src"):
        gone += _drop_unnamed(path, path.name, named, cutoff)
    for salt in _dirs(directory / "toc"):
        for path in _files(salt):
            gone += _drop_unnamed(path, path.name.removesuffix(".json"), named, cutoff)
        try:
            salt.rmdir()  # only if empty
        except OSError:
            pass
    return gone


def _results(directory: Path, cutoff: float) -> tuple[int, set]:
    """Delete results unused since ``cutoff`` and names whose result is gone; the
    digests the results left name."""
    gone, named, kept = 0, set(), set()
    for path in _files(directory / "results"):
        if _older(path, cutoff):
            gone += _unlink(path)
            continue
        kept.add(path.name)
        payload = read_json(path)  # unreadable: names nothing (what it named may go)
        deps = payload.get("deps") if isinstance(payload, dict) else None
        if isinstance(deps, dict):
            named.update(v for v in deps.values() if isinstance(v, str))
    for path in _files(directory / "names"):
        if path.name not in kept and _older(path, cutoff):
            gone += _unlink(path)
    return gone, named


def _drop_unnamed(path: Path, digest: str, named: set, cutoff: float) -> int:
    return _unlink(path) if digest not in named and _older(path, cutoff) else 0


def _older(path: Path, cutoff: float) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime < cutoff
    except OSError:
        return False


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0


def _files(directory: Path) -> list[Path]:
    return [Path(e.path) for e in _entries(directory) if e.is_file(follow_symlinks=False)]


def _dirs(directory: Path) -> list[Path]:
    return [Path(e.path) for e in _entries(directory) if e.is_dir(follow_symlinks=False)]


def _entries(directory: Path) -> list:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []
