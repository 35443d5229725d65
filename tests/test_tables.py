"""Engine unit tests: per-request tables (warmlint/interp/tables.py) without a tree.

What a warmup's requests write into the rows decides its branches; a serving request's
rows are request symbols; a reduction never answers "both ways"."""

from __future__ import annotations

from warmlint.interp import tables
from warmlint.state import State
from warmlint.values import Const, Pred, Sym, Tensor, Unknown


def _is(value, expected) -> bool:
    """A constant holding ``expected`` (values compare by identity)."""
    return isinstance(value, Const) and value.value == expected and type(value.value) is type(
        expected)


def _table(initial=Const(0)):
    table = tables.new(initial)
    return table, Tensor(None, initial.taint, table)


def test_a_fresh_table_holds_what_its_maker_filled():
    assert _is(tables.maker_element("zeros", [], {}), 0)
    assert _is(tables.maker_element("ones", [], {}), 1)
    assert _is(tables.maker_element("full", [8, Const(1.0)], {}), 1.0)
    assert isinstance(tables.maker_element("empty", [], {}), Unknown)
    assert tables.maker_element("arange", [], {}) is None  # not a per-request table


def test_a_loop_write_replaces_every_row_and_another_write_adds_to_them():
    table, _ = _table(Const(0))
    state = tables.write(State({}), table, Const(5), every_row=True)
    assert _is(tables.element(state, table), 5)
    mixed = tables.write(state, table, Const(7), every_row=False)
    assert {o.value for o in tables.element(mixed, table).options} == {5, 7}
    # The write lives in that path's heap: another path still sees the made value.
    assert _is(tables.element(State({}), table), 0)


def test_reductions_of_known_rows_are_constants():
    table, rows = _table(Const(False))
    assert _is(tables.reduce("any", rows, State({})), False)
    seeded = tables.write(State({}), table, Const(True), every_row=True)
    assert _is(tables.reduce("any", rows, seeded), True)
    assert _is(tables.reduce("max", rows, seeded), True)


def test_reductions_of_request_rows_are_request_symbols_never_both_ways():
    seed = Sym("SamplingParams.seed", "request", "SamplingParams.seed")
    table, rows = _table()
    state = tables.write(State({}), table, Pred("is_none", seed, negated=True), every_row=True)
    got = tables.reduce("any", rows, state)
    assert isinstance(got, Sym) and got.kind == "request"
    assert got.label == "any(SamplingParams.seed is not None)"
    assert tables.reduce("sum", rows, state).taint == state.heap[table.key].taint


def test_commit_makes_a_built_objects_rows_hold_on_every_path():
    table, _ = _table(Const(0))
    a = tables.write(State({}), table, Const(1), every_row=True)
    b = tables.write(State({}), table, Const(2), every_row=True)
    tables.commit([a, b])
    assert {o.value for o in tables.element(State({}), table).options} == {1, 2}


def test_not_a_table_is_not_reduced():
    assert tables.reduce("any", Tensor(None), State({})) is None
