"""Code digests computed after the analysis, in a forked child where cores allow
(warmlint/digests.py): the same digests and stored tables of contents as computed here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import make_tree
from warmlint import digests, index
from warmlint.check import analyze_tree
from warmlint.settings import Settings
from warmlint.shift import tree_digest
from warmlint.summary_cache import SummaryCache

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _stored(cache_dir: Path) -> dict:
    return {p.relative_to(cache_dir).as_posix(): p.read_bytes()
            for p in sorted(cache_dir.rglob("*")) if p.is_file()}


def _check(root: Path, cache_dir: Path, jobs):
    cache = SummaryCache(cache_dir, "test", Settings().max_file_size)
    return analyze_tree(root, Settings(), cache, jobs=jobs)


def _fresh_codes(root: Path, report) -> dict:
    return {rel: index.code_digest((root / rel).read_bytes(), rel) for rel in report.codes}


def test_digests_from_the_child_are_the_ones_computed_here(tmp_path):
    root = make_tree(tmp_path)
    here, there = _check(root, tmp_path / "here", None), _check(root, tmp_path / "there", 2)
    assert here.codes and here.codes == there.codes == _fresh_codes(root, here)
    assert all(code.count("/") == 1 for code in here.codes.values())
    assert _stored(tmp_path / "here") == _stored(tmp_path / "there")  # TOCs and result
    assert any(rel.startswith("toc/") for rel in _stored(tmp_path / "there"))


def test_a_child_that_fails_leaves_the_digests_to_this_process(tmp_path, monkeypatch):
    root, parent = make_tree(tmp_path), os.getpid()
    started = []

    def digest_in_parent_only(tree, source):
        assert os.getpid() == parent, "the child dies here"
        return tree_digest(tree, source)

    real_start = digests.start
    monkeypatch.setattr(index, "tree_digest", digest_in_parent_only)
    monkeypatch.setattr(digests, "start", lambda tree, jobs: started.append(
        real_start(tree, jobs)) or started[-1])
    report = _check(root, tmp_path / "cache", 2)
    assert started and started[0] is not None  # a child was forked, and failed
    assert report.codes and report.codes == _fresh_codes(root, report)


def test_without_a_cache_nothing_is_digested(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(index, "tree_digest", lambda *a: calls.append(a) or "x/y")
    report = analyze_tree(make_tree(tmp_path), Settings(), None, jobs=2)
    assert report.findings and calls == []
    assert set(report.codes.values()) == {""}  # stored nowhere: no result to move
