"""The cyclic collector during an analysis (gc_policy.py): rare inside, the caller's
thresholds again after, whatever happens inside."""

from __future__ import annotations

import gc

import pytest

from conftest import make_tree
from warmlint import analysis, gc_policy
from warmlint.check import analyze_tree
from warmlint.settings import Settings


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_an_analysis_runs_with_rare_collections_and_restores_the_callers(tmp_path, thresholds,
                                                                        monkeypatch):
    seen = []
    real = analysis._analyze
    monkeypatch.setattr(analysis, "_analyze",
                        lambda *a: seen.append(gc.get_threshold()) or real(*a))
    report = analyze_tree(make_tree(tmp_path), Settings(), None)
    assert report.findings and seen == [gc_policy.THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_callers_thresholds_come_back_after_an_error(thresholds):
    with pytest.raises(RuntimeError):
        with gc_policy.rare_collections():
            assert gc.get_threshold() == gc_policy.THRESHOLDS
            raise RuntimeError("inside")
    assert gc.get_threshold() == (700, 10, 10)
