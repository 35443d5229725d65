"""Call reuse (warmlint/interp/reuse.py) is an optimization: it must change no result.

On real vLLM 0.20.0 and 0.21.0 (their speculative-decoding paths make cold paths call the
same helpers once per divergence) and on every fixture variant, the analysis runs with
reuse on and off; the findings, extras included (the request facts of every path that
reaches a sink), must be identical. On the releases the run with reuse on must actually
have reused cold calls that reached sinks, and warm calls whose sinks the divergence
reaches again (0.20.0 listed one path fewer before a reused warm call re-recorded them).
"""

from __future__ import annotations

import pytest

from conftest import VARIANTS, make_tree, release
from warmlint.check import analyze_tree
from warmlint.interp.reuse import CallReuse
from warmlint.settings import Settings


def _findings(root) -> list:
    return [f.to_json() for f in analyze_tree(root, Settings(), None).findings]


def _counting(monkeypatch, method: str) -> list:
    used = []
    original = getattr(CallReuse, method)

    def counting(self, *args):
        found = original(self, *args)
        if found is not None and (found.hits if method == "cold_lookup" else found[1]):
            used.append(found)
        return found

    monkeypatch.setattr(CallReuse, method, counting)
    return used


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.20.0", "0.21.0"])
def test_reuse_changes_no_finding_on_real_vllm(monkeypatch, version):
    root = release(version)
    cold, warm = _counting(monkeypatch, "cold_lookup"), _counting(monkeypatch, "lookup")
    with_reuse = _findings(root)
    assert cold, "no cold call was reused: the test no longer exercises replay_cold"
    assert warm, "no warm call with sinks was reused: the test no longer exercises lookup"
    monkeypatch.setattr(CallReuse, "enabled", False)
    assert _findings(root) == with_reuse


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_reuse_changes_no_finding_on_the_fixtures(tmp_path, monkeypatch, variant):
    root = make_tree(tmp_path, variant)
    with_reuse = _findings(root)
    monkeypatch.setattr(CallReuse, "enabled", False)
    assert _findings(root) == with_reuse
