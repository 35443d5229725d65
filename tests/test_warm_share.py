"""Serving's warm calls replayed from an earlier leaf's record (interp/warm_share.py).

A replay must change no result: every fixture (every warm call tried) and vLLM 0.20.0
and 0.33.0 report the same with the records on as with every serving reuse off (the
exact analysis); 0.33.0 must actually replay records (else these tests test nothing).
What a failing comparison found is tested: replayed as equal copies rather than as the
caller's own values (``ValueSlot``), 0.20.0's report changes. A dict written in place is
written again by the replay (a fixture: no real tree replays such a call).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import VARIANTS, make_tree
from test_built_reuse import _recorded

from warmlint.check import analyze_tree
from warmlint.interp import built, cold_share, read_trace, warm_share
from warmlint.interp.reuse import CallReuse
from warmlint.settings import Settings
from warmlint.settings_file import load_settings


FORK_SETTINGS = Path(__file__).resolve().parent.parent / "docs" / "forks" / "aphrodite-engine.toml"


def _report(root, settings=None) -> dict:
    data = analyze_tree(root, settings or Settings(), None).to_json()
    data["stats"].pop("seconds", None)
    return data


def _exact(root, monkeypatch, settings=None) -> dict:
    with monkeypatch.context() as m:
        m.setattr(warm_share.SharedWarmCalls, "enabled", False)
        m.setattr(cold_share.SharedColdCalls, "enabled", False)
        m.setattr(CallReuse, "enabled", False)
        return _report(root, settings)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_fixture_reports_the_same_with_warm_records(tmp_path, monkeypatch, variant):
    monkeypatch.setattr(warm_share, "CANDIDATE_STEPS", 0)  # every warm call tried
    root = make_tree(tmp_path, variant)
    assert _report(root) == _exact(root, monkeypatch)
    assert not read_trace.OPEN  # every record closed


@pytest.mark.network
@pytest.mark.parametrize("dist,version", [("vllm", "0.20.0"), ("vllm", "0.33.0"),
                                          ("aphrodite-engine", "0.24.1")])
def test_a_release_reports_the_same_with_warm_records(monkeypatch, dist, version):
    """0.33.0's leaves call the samplers' helpers alike on warm paths, and so do the
    fork's (its `Sampler.sample` writes a dict of its own in place): replayed there, with
    the exact analysis's report. 0.20.0 is where replays that copied the caller's values
    changed the report."""
    from conftest import release

    root = release(version, dist=dist)
    settings = load_settings(root, None, FORK_SETTINGS)[0] if dist != "vllm" else None
    made = _recorded(monkeypatch, warm_share.SharedWarmCalls)
    replayed = _report(root, settings)
    assert replayed == _exact(root, monkeypatch, settings)
    if version != "0.20.0":
        assert sum(s.hits for s in made) >= 20
    if dist != "vllm":  # its sampler, which writes a dict in place, is replayed
        assert any(key[1].endswith("Sampler.sample") and recs
                   for s in made for key, recs in s.stored.items())


@pytest.mark.network
def test_a_replay_gives_the_callers_own_values(monkeypatch):
    """The values a call got from its arguments or reads are replayed as the caller's
    own, not as equal copies: ``values.same`` tells most values apart by identity, and
    with copies 0.20.0's cold paths no longer rejoin its warm ones as they do when the
    calls run, so its report changes."""
    from conftest import release

    root = release("0.20.0")
    exact = _exact(root, monkeypatch)
    monkeypatch.setattr(warm_share, "VALUE_SLOTS", False)
    assert _report(root) != exact


def test_a_replay_writes_the_dicts_its_call_wrote_in_place(tmp_path, monkeypatch):
    """A warm call that writes a module's dict in place (``_CALLS[len(_CALLS)] = 1`` first
    in ``Sampler.sample``) is replayed with its write: after the replay the leaf's own
    dict holds every key the call left written, and the report is the exact analysis's.
    (No real tree replays such a call: the fork's sampler writes a dict of its own.)"""
    monkeypatch.setattr(warm_share, "CANDIDATE_STEPS", 0)
    root = make_tree(tmp_path, "mode_unset")  # two of its leaves call Sampler.sample alike
    sampler = root / "vllm" / "v1" / "sample" / "sampler.py"
    text = sampler.read_text().replace("_EPS = 1e-5\n", "_EPS = 1e-5\n_CALLS = {}\n")
    head = "    def sample(self, logits, sampling_metadata):\n"
    sampler.write_text(text.replace(head, head + "        _CALLS[len(_CALLS)] = 1\n"))
    held = []
    real = warm_share.replay

    def replay(interp, rec, walk, state):
        out = real(interp, rec, walk, state)
        memos = dict(built.memos(interp))
        held.extend((keys, set(memos[where[1]][where[2]].items))
                    for where, keys, _ in rec.written if where[0] == "memo")
        return out

    monkeypatch.setattr(warm_share, "replay", replay)
    replayed = _report(root)
    assert held and all(keys <= items for keys, items in held), held
    assert replayed == _exact(root, monkeypatch)
