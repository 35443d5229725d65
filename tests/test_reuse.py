"""Call reuse (warmlint/interp/reuse.py) is an optimization: it must change no result.

On real vLLM 0.21.0 (its speculative-decoding paths make cold paths call the same helpers
once per divergence), the analysis runs with reuse on and off; the findings, extras
included (the request facts of every path that reaches a sink), must be identical, and the
run with reuse on must actually have reused cold calls that reached sinks.
"""

from __future__ import annotations

import pytest

from conftest import release
from warmlint.check import analyze_tree
from warmlint.interp.reuse import CallReuse
from warmlint.settings import Settings

pytestmark = pytest.mark.network


def _findings(root) -> list:
    return [f.to_json() for f in analyze_tree(root, Settings(), None).findings]


def test_reuse_changes_no_finding_on_real_vllm(monkeypatch):
    root = release("0.21.0")
    replayed = []
    lookup = CallReuse.cold_lookup

    def counting(self, *args):
        call = lookup(self, *args)
        if call is not None and call.hits:
            replayed.append(call)
        return call

    monkeypatch.setattr(CallReuse, "cold_lookup", counting)
    with_reuse = _findings(root)
    assert replayed, "no cold call was reused: the test no longer exercises replay_cold"
    monkeypatch.setattr(CallReuse, "enabled", False)
    assert _findings(root) == with_reuse
