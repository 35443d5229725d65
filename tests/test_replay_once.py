"""Serving replays each distinct warmup entry once (warmlint/serving.py): the result must
be the exact analysis's, every entry replayed with no call reuse.

A fixed warmup calls the sampler again and again with one request field changed; serving
opens every request alike, so those entries' replays repeat the first one. Repeating them
was not harmless: a second replay ran with the first one's call-reuse caches, took the
warm calls' joined return values without the request facts the callee learns, and listed
fact-less paths the exact analysis does not have (seeded_fixed, token_ids_width,
do_not_specialize: "max_num_logprobs set, batch size >= 1" with no top-k/top-p fact). The
reports with replays skipped equal the exact ones on those fixtures and on one that `fix`
grows to many entries; the fix is the same either way; and on vLLM 0.21.0, whose warmups
call two callees (sampler, rejection sampler), both are replayed.
"""

from __future__ import annotations

import pytest

from conftest import make_tree, release, run_cli
from warmlint import serving
from warmlint.check import analyze_tree
from warmlint.codemod.run import compute_fixes
from warmlint.interp.reuse import CallReuse
from warmlint.settings import Settings


def _report(root) -> dict:
    data = analyze_tree(root, Settings(), None).to_json()
    data["stats"].pop("seconds", None)
    return data


def _counting(monkeypatch) -> list:
    skipped = []
    same = serving._same_replay

    def counting(*args):
        found = same(*args)
        skipped.append(found)
        return found

    monkeypatch.setattr(serving, "_same_replay", counting)
    return skipped


def _exact(monkeypatch) -> None:
    monkeypatch.setattr(serving, "REPLAY_ONCE", False)
    monkeypatch.setattr(CallReuse, "enabled", False)


@pytest.mark.parametrize("variant", ["seeded_fixed", "token_ids_width", "do_not_specialize"])
def test_replaying_alike_entries_once_gives_the_exact_report(tmp_path, monkeypatch, variant):
    root = make_tree(tmp_path, variant)
    skipped = _counting(monkeypatch)
    once = _report(root)
    assert any(skipped), "no entry was skipped: the test no longer exercises REPLAY_ONCE"
    _exact(monkeypatch)
    assert _report(root) == once and once["findings"]


def test_a_fixed_warmup_gives_the_exact_report_and_the_same_fix(tmp_path, monkeypatch):
    original = make_tree(tmp_path / "a", "flashinfer_cold")
    fixed = make_tree(tmp_path / "b", "flashinfer_cold")
    assert "fixed " in run_cli("fix", "--no-cache", str(fixed)).stderr
    skipped = _counting(monkeypatch)
    once = _report(fixed), [(f.path, f.new) for f in compute_fixes(original, Settings()).files]
    assert any(skipped), "no entry was skipped: the test no longer exercises REPLAY_ONCE"
    _exact(monkeypatch)
    every = _report(fixed), [(f.path, f.new) for f in compute_fixes(original, Settings()).files]
    assert once == every and once[1]


@pytest.mark.network
def test_entries_of_other_callees_are_replayed_on_real_vllm(monkeypatch):
    """0.21.0's warmups call the sampler and the rejection sampler: entries that differ,
    each replayed (skipping one would lose its paths); the report is the same as with
    every entry replayed."""
    root = release("0.21.0")
    skipped = _counting(monkeypatch)
    once = _report(root)
    assert False in skipped, "no entry was compared with an earlier one and replayed"
    monkeypatch.setattr(serving, "REPLAY_ONCE", False)
    assert _report(root) == once and once["findings"]
