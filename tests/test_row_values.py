"""Unit tests: which request field, set in every per-request row, takes a v2 serving path
(warmlint/request_values.py ``row_requirements`` / ``row_changes``)."""

from __future__ import annotations

import pytest

from warmlint.edits import NoFix
from warmlint.interp import tables
from warmlint.request_values import row_changes, row_requirements
from warmlint.state import SymFact
from warmlint.values import Pred, Sym

ANY_SEEDED = "any:SamplingParams.seed:is_none:None:True"  # any(seed is not None)
ANY_GREEDY = "any:SamplingParams.temperature:eq:0.0:False"  # any(temperature == 0.0)
FIX_VALUES = {"generators": "{0: g}", "seed": "0"}


def test_the_keys_read_are_the_ones_the_tables_write():
    seed = Sym("SamplingParams.seed", "request", "SamplingParams.seed")
    assert tables.reduction_key("any", Pred("is_none", seed, negated=True)) == ANY_SEEDED


def test_any_over_uniform_rows_is_a_fact_about_each_row():
    need = row_requirements({ANY_SEEDED: SymFact(truthy=True),
                             ANY_GREEDY: SymFact(truthy=False)}, "SamplingParams")
    assert need["seed"].none is False  # every row seeded
    assert 0.0 in need["temperature"].ne  # no row greedy


def test_other_classes_and_undecided_reductions_say_nothing():
    assert row_requirements({ANY_SEEDED: SymFact()}, "SamplingParams") == {}
    assert row_requirements({ANY_SEEDED: SymFact(truthy=True)}, "PoolingParams") == {}
    assert row_requirements({"SamplingParams.seed": SymFact(none=False)}, "SamplingParams") == {}


def test_the_seeded_path_is_taken_by_setting_seed():
    paths = [{ANY_GREEDY: SymFact(truthy=True)},  # greedy: no fix-values field for it
             {ANY_GREEDY: SymFact(truthy=False), ANY_SEEDED: SymFact(truthy=True)}]
    assert row_changes(paths, "SamplingParams", FIX_VALUES) == [("seed", "0")]


def test_a_path_no_fix_value_takes_says_what_it_needs():
    with pytest.raises(NoFix, match="seed unset"):
        row_changes([{ANY_SEEDED: SymFact(truthy=False)}], "SamplingParams", FIX_VALUES)
    with pytest.raises(NoFix, match="maximum over the batch"):
        row_changes([{}], "SamplingParams", FIX_VALUES)
