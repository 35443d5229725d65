"""Code digests left to the run that needs one (``SourceTree.defer_digests``): a cold run
stores the bytes each digest would be computed from; a later run that finds a file
changed digests the stored bytes and the current ones, and a damaged store is a miss."""

from __future__ import annotations

import hashlib
from pathlib import Path

from conftest import make_tree
from warmlint import index
from warmlint.check import _key, analyze_tree, store_report
from warmlint.settings import Settings
from warmlint.shift import LATER
from warmlint.summary_cache import SummaryCache

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"


def _cache(cache_dir: Path) -> SummaryCache:
    return SummaryCache(cache_dir, "test", Settings().max_file_size)


def _stored_result(root: Path, cache: SummaryCache):
    return cache.get_result(_key(root), root, index.code_digest)


def test_a_cold_run_digests_no_code_and_stores_the_sources(tmp_path, monkeypatch):
    root, cache = make_tree(tmp_path), _cache(tmp_path / "cache")
    calls = []
    monkeypatch.setattr(index, "tree_digest", lambda *a: calls.append(a) or "x/y")
    report = analyze_tree(root, Settings(), cache, jobs=2)
    assert report.codes and set(report.codes.values()) == {LATER} and calls == []
    for rel in report.codes:
        data = (root / rel).read_bytes()
        assert (tmp_path / "cache" / "src" / hashlib.sha1(data).hexdigest()).read_bytes() == data
    assert any(p.parent.parent.name == "toc" for p in (tmp_path / "cache").rglob("*.json"))


def test_a_moved_file_is_judged_by_its_stored_sources_digest(tmp_path):
    root, cache = make_tree(tmp_path), _cache(tmp_path / "cache")
    store_report(root, Settings(), cache, analyze_tree(root, Settings(), cache))
    original = (root / TOPK).read_bytes()
    (root / TOPK).write_bytes(b"# one more line on top\n" + original)
    moved = _stored_result(root, cache)
    assert moved is not None  # the stored bytes' digest says: the same code, moved
    assert any(f["path"] == TOPK for f in moved["findings"])
    assert _stored_result(root, cache) is not None  # re-stored with the digests computed


def test_stored_sources_that_are_not_the_files_bytes_are_a_miss(tmp_path):
    root, cache = make_tree(tmp_path), _cache(tmp_path / "cache")
    store_report(root, Settings(), cache, analyze_tree(root, Settings(), cache))
    original = (root / TOPK).read_bytes()
    blob = tmp_path / "cache" / "src" / hashlib.sha1(original).hexdigest()
    edited = original.replace(b"def ", b"def _", 1)  # new code
    blob.write_bytes(edited)  # a store that would call the edit "the same code"
    (root / TOPK).write_bytes(edited)
    assert _stored_result(root, cache) is None
    blob.write_bytes(original)
    assert _stored_result(root, cache) is None  # the real judgement: new code
    blob.unlink()  # missing: a miss too
    assert _stored_result(root, cache) is None


def test_without_a_cache_nothing_is_digested(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(index, "tree_digest", lambda *a: calls.append(a) or "x/y")
    report = analyze_tree(make_tree(tmp_path), Settings(), None, jobs=2)
    assert report.findings and calls == []
    assert set(report.codes.values()) == {""}  # stored nowhere: no result to move
