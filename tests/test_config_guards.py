"""``obj and obj.attr`` over a config object is one configuration decision, not one per
literal (ConfigDriver.decide_guard), and a finding's configs leave out what every
sampling configuration meets (``analysis.Program.preconditions``).

vLLM's v1 runner returns early from its warmups on ``if mm_config and
mm_config.mm_encoder_only``. Literal by literal that made three leaves where two behave
alike (no ``mm_config``; one that is not encoder-only), so every later leaf ran twice:
0.21.0's v1 runner took 17 leaves, 9 with the pair decided at once."""

from __future__ import annotations

import json

import pytest
from conftest import make_tree, run_cli

from warmlint.config_leaves import Assumptions, ConfigDriver
from warmlint.state import SymFact
from warmlint.values import Sym

MM = Sym("model_config.multimodal_config", "config", "model_config.multimodal_config")
ONLY = Sym("model_config.multimodal_config.mm_encoder_only", "config",
           "model_config.multimodal_config.mm_encoder_only")


def _driver(*prefix, pinned=None) -> ConfigDriver:
    return ConfigDriver(list(prefix), Assumptions(pinned or {}))


def test_a_true_guard_is_one_decision_and_makes_both_true():
    driver = _driver()
    assert driver.decide_guard(MM, ONLY, None, "warmup") is True
    assert driver.decide(MM, "truthy", None) is True
    assert driver.decide(ONLY, "truthy", None) is True
    assert [d.text() for d in driver.trace] == [
        "model_config.multimodal_config and model_config.multimodal_config.mm_encoder_only"]


def test_a_false_guard_leaves_either_open_and_forbids_both():
    driver = _driver(False)
    assert driver.decide_guard(MM, ONLY, None, "warmup") is False
    assert driver.decide_guard(MM, ONLY, None, "warmup") is False  # the same test again
    assert driver.decide(MM, "truthy", None) is True  # a later test of one: a decision
    assert driver.decide(ONLY, "truthy", None) is False  # ...and the other follows
    assert driver.known(ONLY, "truthy", None) is False
    assert [d.text() for d in driver.trace] == [
        "not (model_config.multimodal_config and "
        "model_config.multimodal_config.mm_encoder_only)",
        "model_config.multimodal_config"]


def test_a_false_guard_with_the_field_true_makes_the_object_false():
    driver = _driver(False)
    assert driver.decide_guard(MM, ONLY, None, "warmup") is False
    assert driver.decide(ONLY, "truthy", None) is True
    assert driver.decide(MM, "truthy", None) is False
    assert len(driver.trace) == 2  # the guard and the field: the object followed


def test_a_path_fact_counts_as_known_true():
    driver = _driver(False)
    driver.decide_guard(MM, ONLY, None, "warmup")
    path = {MM.key: SymFact(truthy=True, none=False)}
    assert driver.known(ONLY, "truthy", None, path) is False
    assert driver.known(ONLY, "truthy", None) is None  # not on a path that did not learn it


@pytest.mark.parametrize("pinned", [{"multimodal_config": None},
                                    {"mm_encoder_only": False}])
def test_a_known_side_leaves_the_pair_to_the_literals(pinned):
    driver = _driver(pinned=pinned)
    assert driver.decide_guard(MM, ONLY, None, "warmup") is None
    assert driver.trace == []


def test_the_fixture_variant_takes_one_leaf_for_the_encoder_only_model(tmp_path):
    """Fixture variant encoder_only: the base tree's 3 leaves, plus one where the
    sampler warmup returns early (7 literal by literal). Its findings are the base's,
    with the same configs: a model that samples is not encoder-only, said nowhere."""
    out = {}
    for variant in ("base", "encoder_only"):
        proc = run_cli("check", str(make_tree(tmp_path / variant, variant)), "--no-cache",
                       "--format", "json", "-j", "0")
        assert proc.returncode == 1, proc.stderr
        out[variant] = json.loads(proc.stdout)
    assert out["encoder_only"]["stats"]["configs"] == out["base"]["stats"]["configs"] + 1 == 4
    assert out["encoder_only"]["findings"] == out["base"]["findings"]
