"""A warmup entry is replayed once per distinct call (warmlint/serving.py): an optimization
that must change no result.

A fixed warmup calls the sampler again and again with one request field changed; serving
opens every request alike, so those entries' replays repeat the first one. On a fixture
that `fix` grows into many entries, and on vLLM 0.21.0 (entries of two callees), the
report (and the fix) are the same with the repeated replays skipped and with every entry
replayed, and replays were skipped.
"""

from __future__ import annotations

import pytest

from conftest import make_tree, release, run_cli
from warmlint import serving
from warmlint.check import analyze_tree
from warmlint.codemod.run import compute_fixes
from warmlint.settings import Settings


def _report(root) -> dict:
    data = analyze_tree(root, Settings(), None).to_json()
    data["stats"].pop("seconds", None)
    return data


def test_replaying_each_distinct_entry_once_changes_nothing(tmp_path, monkeypatch):
    original = make_tree(tmp_path / "a", "flashinfer_cold")
    fixed = make_tree(tmp_path / "b", "flashinfer_cold")
    assert "fixed " in run_cli("fix", "--no-cache", str(fixed)).stderr
    skipped = []
    same = serving._same_replay

    def counting(*args):
        found = same(*args)
        skipped.append(found)
        return found

    monkeypatch.setattr(serving, "_same_replay", counting)
    once = _report(fixed), [(f.path, f.new) for f in compute_fixes(original, Settings()).files]
    assert any(skipped), "no entry was skipped: the test no longer exercises REPLAY_ONCE"
    monkeypatch.setattr(serving, "REPLAY_ONCE", False)
    every = _report(fixed), [(f.path, f.new) for f in compute_fixes(original, Settings()).files]
    assert once == every and once[1]


@pytest.mark.network
def test_entries_of_other_callees_are_replayed_on_real_vllm(monkeypatch):
    """0.21.0's warmups call the sampler and the rejection sampler: distinct entries,
    each replayed (skipping one would lose its paths)."""
    root = release("0.21.0")
    once = _report(root)
    monkeypatch.setattr(serving, "REPLAY_ONCE", False)
    assert _report(root) == once and once["findings"]
