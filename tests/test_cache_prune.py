"""The cache directory is pruned (warmlint/cache_prune.py): results unused for a month
go, sources and tables of contents no result left names go once they are that old, at
most once a day, and what a run uses stays."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import make_tree, run_cli

from warmlint import cache_prune

DAY = 86400
SAMPLER = "vllm/v1/sample/sampler.py"


def _write(path: Path, data: str, age_days: float = 0.0, now: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    when = (now or time.time()) - age_days * DAY
    os.utime(path, (when, when))
    return path


def _result(deps: dict) -> str:
    return json.dumps({"format": 8, "deps": deps, "result": {}})


def test_stale_entries_go_and_what_a_result_names_stays(tmp_path):
    c, d = tmp_path, {n: f"{n:040x}" for n in range(1, 6)}
    fresh = _write(c / "results" / "a.json", _result({"x.py": d[1], "dir:.": "listing"}), 1)
    _write(c / "names" / "a.json", "{}", 40)  # its result is in use: kept
    old = _write(c / "results" / "b.json", _result({"y.py": d[2]}), 40)
    old_names = _write(c / "names" / "b.json", "{}", 40)
    named_src = _write(c / "src" / d[1], "x", 40)  # old, but the result in use names it
    unnamed_src = _write(c / "src" / d[2], "y", 40)  # named only by the stale result
    new_src = _write(c / "src" / d[3], "z", 2)  # unnamed, but recent
    named_toc = _write(c / "toc" / "S" / f"{d[1]}.json", "{}", 40)
    unnamed_toc = _write(c / "toc" / "S" / f"{d[4]}.json", "{}", 40)
    other_salt = _write(c / "toc" / "T" / f"{d[5]}.json", "{}", 40)
    link = c / "src" / "link"
    link.symlink_to(unnamed_src)
    os.utime(link, (0, 0), follow_symlinks=False)
    assert cache_prune.prune(c) == 5
    assert all(p.exists() for p in (fresh, c / "names" / "a.json", named_src, new_src,
                                    named_toc))
    assert not any(p.exists() for p in (old, old_names, unnamed_src, unnamed_toc,
                                        other_salt, other_salt.parent))
    assert link.is_symlink()  # links are neither followed nor removed


def test_a_cache_is_pruned_at_most_once_a_day(tmp_path):
    now = time.time()
    stale = _write(tmp_path / "src" / ("0" * 40), "x", 40)
    _write(tmp_path / cache_prune.STAMP, "", 0.5)
    assert cache_prune.prune(tmp_path, now) == 0 and stale.exists()
    os.utime(tmp_path / cache_prune.STAMP, (now - DAY - 1, now - DAY - 1))
    assert cache_prune.prune(tmp_path, now) == 1 and not stale.exists()
    assert now - (tmp_path / cache_prune.STAMP).stat().st_mtime < 1  # stamped again


def _check(root: Path, cache: Path) -> dict:
    proc = run_cli("check", str(root), "--cache-dir", str(cache), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    return json.loads(proc.stdout)


def test_a_real_run_keeps_what_it_uses_and_drops_the_old_versions(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    first = _check(root, cache)
    month_ago = time.time() - 40 * DAY
    for path in cache.rglob("*"):
        if path.is_file():
            os.utime(path, (month_ago, month_ago))
    old_sampler = (root / SAMPLER).read_bytes()
    assert _check(root, cache)["stats"]["cache"] == "hit"  # a hit refreshes its entry
    (result,) = (cache / "results").iterdir()
    assert result.stat().st_mtime > month_ago + DAY
    text = (root / SAMPLER).read_text()  # a statement in sample(): the analysis re-runs
    head = "    def sample(self, logits, sampling_metadata):\n"
    (root / SAMPLER).write_text(text.replace(head, head + "        _edited = 1\n"))
    assert _check(root, cache)["stats"]["cache"] == "miss"  # stored, then pruned
    import hashlib

    gone = hashlib.sha1(old_sampler).hexdigest()
    assert not (cache / "src" / gone).exists()  # the sampler's old version
    assert not any(p.name == f"{gone}.json" for p in (cache / "toc").rglob("*.json"))
    other = next(p for p in (cache / "src").iterdir() if p.name != gone)
    assert other.stat().st_mtime < month_ago + DAY  # an unchanged file's copy: kept
    again = _check(root, cache)
    assert again["stats"]["cache"] == "hit" and again["findings"] != []
    assert len(first["findings"]) > 0


def test_pruning_never_fails_a_run(tmp_path, monkeypatch):
    _write(tmp_path / "src" / ("0" * 40), "x", 40)

    def broken(path):
        raise PermissionError("no")

    monkeypatch.setattr(cache_prune, "_older", broken)
    assert cache_prune.prune(tmp_path) == 0
    assert cache_prune.prune(tmp_path / "missing") == 0  # no directory: nothing to do
