"""Engine unit tests: integers computed from a request integer (warmlint/interp/ints.py)
and the values a Triton constexpr computed so can take (specialization.classes_of)."""

from __future__ import annotations

from warmlint.interp import ints
from warmlint.specialization import classes_of
from warmlint.state import SymFact
from warmlint.values import Const, IntExpr, OneOf, Sym, Unknown

LOGPROBS = Sym("SamplingParams.logprobs", "request", "SamplingParams.logprobs")


def _block(value):
    """vLLM's TOPK_BLOCK_SIZE: min(next_power_of_2(1 + k), 1024)."""
    return ints.bound("min", [ints.step("np2", ints.add(Const(1), value)), Const(1024)])


def test_next_power_of_2_is_tritons():
    assert [ints.next_power_of_2(n) for n in (0, 1, 2, 3, 5, 8, 21, 1025)] == \
        [1, 1, 2, 4, 8, 8, 32, 2048]


def test_constants_fold_and_request_integers_are_recorded():
    assert _block(Const(5)).value == 8
    expr = _block(LOGPROBS)
    assert isinstance(expr, IntExpr) and expr.base is LOGPROBS
    assert expr.ops == (("add", 1), ("np2", None), ("min", 1024))
    assert ints.evaluate(expr, 20) == 32 and ints.evaluate(expr, 2000) == 1024


def test_anything_else_is_not_an_int_expression():
    assert ints.step("np2", Unknown("x")) is None
    assert ints.add(LOGPROBS, LOGPROBS) is None  # two unknowns: not modeled
    assert ints.bound("min", [LOGPROBS, Unknown("x")]) is None


def test_a_oneof_maps_each_option_and_keeps_the_unknown_ones_unknown():
    got = _block(OneOf((Const(0), LOGPROBS, Unknown("vocab"))))
    first, second, third = got.options
    assert first.value == 1 and isinstance(second, IntExpr) and isinstance(third, Unknown)


def test_a_constexpr_takes_every_value_over_the_fields_limit():
    limits = {"logprobs": 20}
    expr = _block(LOGPROBS)
    assert classes_of(expr, {}, False, limits=limits) == {"1", "2", "4", "8", "16", "32"}
    narrow = {LOGPROBS.key: SymFact(lo=1, hi=3)}  # a path that knows 1 <= logprobs <= 3
    assert classes_of(expr, narrow, False, limits=limits) == {"2", "4"}
    assert classes_of(expr, {}, False, limits={}) is None  # no limit: not enumerated
    # An option that cannot be told (logprobs == -1: the vocabulary) hides nothing.
    mixed = OneOf((expr, Unknown("vocab")))
    assert classes_of(mixed, {}, False, limits=limits) == {"1", "2", "4", "8", "16", "32"}
    assert classes_of(OneOf((Const(3), Unknown("x"))), {}, False, limits=limits) is None


def test_each_value_has_a_smallest_request_value_that_produces_it():
    """What `warmlint fix` sets in every row to warm one TOPK_BLOCK_SIZE (WL004)."""
    from warmlint.specialization import witness

    limits = {"logprobs": 20}
    expr = _block(LOGPROBS)
    got = {n: witness(expr, {}, limits, n) for n in (1, 2, 4, 8, 16, 32)}
    assert got == {1: (LOGPROBS.key, 0), 2: (LOGPROBS.key, 1), 4: (LOGPROBS.key, 2),
                   8: (LOGPROBS.key, 4), 16: (LOGPROBS.key, 8), 32: (LOGPROBS.key, 16)}
    assert witness(expr, {}, limits, 64) is None  # logprobs <= 20 never makes 64
    assert witness(expr, {LOGPROBS.key: SymFact(lo=3)}, limits, 4) == (LOGPROBS.key, 3)
    assert witness(expr, {}, {}, 4) is None  # no limit: not enumerated
    assert witness(Const(4), {}, limits, 4) is None  # nothing to set
