"""Engine unit tests: a Triton constexpr computed from the length of a request's list
(vLLM v1's ``PADDED_TOPK = next_power_of_2(1 + the most token ids a request asks
for)``): the interpreter folds it on a warmup's literal and records it on the request
integer ``len(...[])`` while serving; WL004 enumerates it within ``request-int-limits``,
``fix`` writes one call per missing value, and ``verify`` tells which counts it predicts."""

from __future__ import annotations

import textwrap

import pytest

from warmlint.analysis import Memo
from warmlint.config_leaves import Assumptions, ConfigDriver
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp.core import Interp
from warmlint.interp.frames import PassPolicy
from warmlint.resolve import FuncRef, Resolver
from warmlint.settings import Settings
from warmlint.specialization import ALIGNED, ONE, OTHER, classes_of, limit_name, witness
from warmlint.state import State
from warmlint.values import Const, Func, IntExpr, Sym, Taint, options

SOURCE = '''
import torch
import triton


def widest(wanted):
    return max(len(ids) for ids in wanted.values())


def width(wanted, batch):
    ids = torch.zeros(batch, widest(wanted) + 1, dtype=torch.int64)
    return triton.next_power_of_2(ids.to(torch.int64).shape[1])


def warm():
    return width({0: [0] * 5, 1: [3]}, 4)


def too_long():
    return len([0] * 100_000)
'''
IDS = Sym("SamplingMetadata.logprob_token_ids", "request", "SamplingMetadata.logprob_token_ids",
          Taint(frozenset({"SamplingMetadata.logprob_token_ids"})))
LEN = "len(SamplingMetadata.logprob_token_ids[])"
LIMITS = {"logprob_token_ids": 128}


class Policy(PassPolicy):
    name = "serving"


def _call(tmp_path, name, *args) -> list:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/mod.py").write_text(textwrap.dedent(SOURCE))
    tree = SourceTree(tmp_path)
    resolver = Resolver(tree, FunctionLoader(tree), Settings())
    interp = Interp(resolver, ConfigDriver([], Assumptions({})), Policy(), Memo())
    return [v for _, v in interp.call_function(Func(FuncRef("pkg.mod", name)), list(args),
                                               {}, State({}), None)]


def test_a_warmup_literal_folds_to_the_width_it_compiles(tmp_path):
    # ids of 5 and 1: the widest is 5, plus the sampled token 6 columns, padded to 8
    assert [repr(o) for v in _call(tmp_path, "warm") for o in options(v)] == [repr(Const(8))]


def test_serving_records_the_width_on_the_length_of_one_requests_ids(tmp_path):
    [value] = _call(tmp_path, "width", IDS, Const(4))
    assert isinstance(value, IntExpr) and value.base.key == LEN and value.base.is_int
    assert value.ops == (("add", 1), ("np2", None))
    assert "SamplingMetadata.logprob_token_ids" in value.taint.inputs


def test_a_list_repeated_past_the_cap_has_no_known_length(tmp_path):
    [value] = _call(tmp_path, "too_long")
    assert not isinstance(value, Const)


def test_the_length_is_limited_by_the_list_fields_own_entry():
    assert limit_name(LEN) == "logprob_token_ids"
    assert limit_name("SamplingParams.logprobs") == "logprobs"


def test_every_width_and_int_class_over_the_limit():
    expr = IntExpr(Sym(LEN, "request", LEN, is_int=True), (("add", 1), ("np2", None)))
    widths = {"1", "2", "4", "8", "16", "32", "64", "128", "256"}
    assert classes_of(expr, {}, False, limits=LIMITS) == widths  # a constexpr: values
    cols = IntExpr(expr.base, (("add", 1),))
    assert classes_of(cols, {}, True, limits=LIMITS) == {ONE, ALIGNED, OTHER}  # an int
    assert classes_of(expr, {}, False, limits={}) is None  # no limit: not enumerated
    # the fewest ids producing each: what `fix` asks for
    assert witness(expr, {}, LIMITS, "4") == (LEN, 2)
    assert witness(expr, {}, LIMITS, 256) == (LEN, 128)
    assert witness(cols, {}, LIMITS, ALIGNED) == (LEN, 15)  # 16 columns
    assert witness(cols, {}, LIMITS, ONE) == (LEN, 0)
    assert witness(expr, {}, LIMITS, "512") is None


def test_the_fix_builds_a_list_field_of_each_length():
    from rules.wl004_triton_specialization_gap import _field_value

    values = Settings().fix_values
    assert _field_value((LEN, 8), values) == (("SamplingMetadata", "logprob_token_ids"),
                                              "{0: [0] * 8}")
    # v2's rows: no default (the H200 showed such rows leave another kernel cold)
    assert _field_value(("len(SamplingParams.logprob_token_ids)", 32), values) == (
        ("SamplingParams", "logprob_token_ids"), None)
    assert _field_value(("len(SamplingParams.logprob_token_ids)", 32),
                        {"len(logprob_token_ids)": "[0] * N"})[1] == "[0] * 32"
    assert _field_value(("SamplingParams.logprobs", 3), values) == (
        ("SamplingParams", "logprobs"), "3")
    assert _field_value(("len(Other.things[])", 2), values)[1] is None  # no template


@pytest.mark.parametrize("kind, predicted", [
    ("token_logprobs:1", False),  # 1 id: 2 columns, the warmed width
    ("token_logprobs", True),  # 3 ids: 4
    ("token_logprobs:8", True),  # 16
    ("token_logprobs:20", False),  # 32: warmed here
    ("logprobs:5", True),  # another request integer: not ruled out
])
def test_verify_predicts_the_counts_whose_width_is_missing(kind, predicted):
    from warmlint.verify_counts import computed_missing

    finding = {"rule": "WL004", "extra": {"missing": ["1", "4", "16", "64"]}}
    computed = {"from": LEN, "ops": [["add", 1], ["np2", None]]}
    assert computed_missing(finding, computed, kind) is predicted
