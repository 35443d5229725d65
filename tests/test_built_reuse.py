"""Objects a leaf builds as an earlier leaf built them are copied (warmlint/interp/built.py).

The copy must change no result: every fixture is analyzed with it on and off, with every
construction tried (the cost bar at one step), and the reports must be equal; the v2
fixture and vLLM 0.34.0 must actually take copies (else these tests test nothing). A
construction that writes into its argument is never stored. The value-graph digest and
copy it stands on are checked on small graphs.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, VARIANTS, make_tree

from warmlint.check import analyze_tree
from warmlint.interp import built, tables
from warmlint.interp.value_digest import Slot, copy_graph, digest, digest_in_heap, objects
from warmlint.resolve import ClassRef
from warmlint.settings import Settings
from warmlint.values import Const, Obj, Sym, Tensor

SAMPLER = "vllm/v1/worker/gpu/sample/sampler.py"


def _recorded(monkeypatch, cls=built.BuiltReuse) -> list:
    """The ``cls`` (a ``built.Reuses``) of each runner analyzed from now on."""
    made: list = []
    init = cls.__init__

    def recording(self):
        init(self)
        made.append(self)

    monkeypatch.setattr(cls, "__init__", recording)
    return made


@pytest.fixture
def every_construction(monkeypatch):
    """Try every construction (not only costly ones); the BuiltReuse of each runner."""
    monkeypatch.setattr(built, "CANDIDATE_STEPS", 1)
    return _recorded(monkeypatch)


def _both_ways(root, monkeypatch, jobs=None) -> tuple[dict, dict]:
    def report():
        data = analyze_tree(root, Settings(), None, jobs=jobs).to_json()
        data["stats"].pop("seconds", None)
        return data

    copied = report()
    monkeypatch.setattr(built.BuiltReuse, "enabled", False)
    exact = report()
    monkeypatch.setattr(built.BuiltReuse, "enabled", True)
    return copied, exact


def _v2(tmp_path, *edits) -> object:
    root = tmp_path / "minivllm2"
    shutil.copytree(FIXTURES / "minivllm2", root)
    for path, old, new in edits:
        text = (root / path).read_text()
        assert old in text, old
        (root / path).write_text(text.replace(old, new))
    return root


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_fixture_reports_the_same_with_copied_constructions(tmp_path, monkeypatch,
                                                              every_construction, variant):
    copied, exact = _both_ways(make_tree(tmp_path, variant), monkeypatch)
    assert copied == exact


def test_the_v2_fixture_copies_its_sampler_and_reports_the_same(tmp_path, monkeypatch,
                                                                every_construction):
    copied, exact = _both_ways(_v2(tmp_path), monkeypatch)
    assert copied == exact and copied["findings"]
    assert sum(b.hits for b in every_construction) > 0, "no construction was copied"


def _warm_records(root, settings) -> list:
    """What each leaf's warmup pass left: decisions, assumptions used, outcomes taken,
    config tests met."""
    report = analyze_tree(root, settings, None)
    return [(repr(leaf.decisions), repr(leaf.assumed), repr(leaf.warm.config_tests),
             repr(sorted((k, o, repr(c)) for k, outs in leaf.warm.taken.items()
                         for o, c in outs.items())))
            for program in report.facts.programs for leaf in program.leaves]


@pytest.mark.parametrize("variant", ["v2", "v2 pinned flag", "base"])
def test_the_warmups_record_the_same_with_copied_constructions(tmp_path, monkeypatch,
                                                               every_construction, variant):
    """Not only the report: each leaf's warmup pass took the same outcomes, met the same
    config tests, made the same decisions with the same assumptions (the sampler's
    ``__init__`` reads a pinned flag: a copy must record that it was used)."""
    root = make_tree(tmp_path, variant) if variant == "base" else _v2(tmp_path, *(
        [(SAMPLER, "        self.use_flashinfer = flashinfer_enabled()",
          "        self.use_flashinfer = flashinfer_enabled()\n"
          "        self.flag = 1 if envs.VLLM_TEST_FLAG else 0")] if "pinned" in variant else []))
    settings = Settings()
    if "pinned" in variant:
        settings.assume["VLLM_TEST_FLAG"] = True
    copied = _warm_records(root, settings)
    assert sum(b.hits for b in every_construction) > 0 or variant == "base"
    monkeypatch.setattr(built.BuiltReuse, "enabled", False)
    exact = _warm_records(root, settings)
    assert copied == exact
    assert "pinned" not in variant or "VLLM_TEST_FLAG" in exact[-1][1]


def test_a_construction_that_changes_its_argument_is_not_stored(tmp_path, monkeypatch,
                                                                every_construction):
    """``Tracker(states)`` sets ``states.tracked``: stored only where the object already
    had it (a second path through the sampler's ``__init__``: the write changed nothing),
    and only ever taken for an argument that has it."""
    root = _v2(tmp_path, (SAMPLER, "class Sampler:", "class Tracker:\n"
                          "    def __init__(self, states):\n"
                          "        states.tracked = True\n\n\nclass Sampler:"),
               (SAMPLER, "        self.use_flashinfer = flashinfer_enabled()",
                "        self.use_flashinfer = flashinfer_enabled()\n"
                "        Tracker(self.states)"))
    copied, exact = _both_ways(root, monkeypatch)
    assert copied == exact
    keys = [k for b in every_construction for k in b.stored]
    assert any(k[0].endswith(".Sampler") for k in keys), "the test no longer stores anything"
    trackers = [k for k in keys if k[0].endswith(".Tracker")]
    assert all("'tracked'" in repr(k[3]) for k in trackers), trackers


@pytest.mark.parametrize("deep", ["digest_in_heap", "agrees"])
def test_a_graph_too_deep_to_digest_is_built_as_usual(tmp_path, monkeypatch,
                                                      every_construction, deep):
    def too_deep(*args, **kwargs):
        raise RecursionError

    root = _v2(tmp_path)
    monkeypatch.setattr(built, deep, too_deep)
    copied, exact = _both_ways(root, monkeypatch)
    assert copied == exact and sum(b.hits for b in every_construction) == 0


def test_forked_leaves_report_the_same_with_copied_constructions(tmp_path, monkeypatch,
                                                                 every_construction):
    from warmlint import leaf_fork

    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS", 0)
    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS_PARALLEL", 0)
    copied, exact = _both_ways(_v2(tmp_path), monkeypatch, jobs=2)
    assert copied == exact


@pytest.mark.network
def test_a_release_reports_the_same_with_copied_constructions(monkeypatch):
    """vLLM 0.34.0's v2 sampler state (SamplingStates, PenaltiesState, ...) is the same
    in most of its 25 leaves: copied there, with the same report."""
    from conftest import release

    made = _recorded(monkeypatch)
    copied, exact = _both_ways(release("0.34.0"), monkeypatch)
    assert copied == exact
    assert sum(b.hits for b in made) >= 10


# -- the value-graph digest and copy -------------------------------------------------------
CLS = ClassRef("m", "C")


def _graph(flag=True):
    """An object holding a constant, a request symbol, a tensor over a table, and itself."""
    table = tables.new(Const(0))
    obj = Obj(CLS, {"flag": Const(flag), "k": Sym("k", "request", "k"),
                    "rows": Tensor(None, rows=table)})
    obj.attrs["me"] = obj
    return obj, table


def test_graphs_built_alike_digest_alike_and_pair_up_by_number():
    (a, ta), (b, tb) = _graph(), _graph()
    assert a.oid != b.oid and digest(a) == digest(b)
    assert objects(a) == [a, ta] and objects(b) == [b, tb]
    assert digest(_graph(flag=False)[0]) != digest(a)


def test_heap_entries_count_only_for_the_graphs_objects():
    (a, table), other = _graph(), Obj(CLS, {})
    base = digest_in_heap((a,), {})
    assert digest_in_heap((a,), {(other.oid, "x"): Const(1)}) == base
    assert digest_in_heap((a,), {(a.oid, "x"): Const(1)}) != base
    assert digest_in_heap((a,), {("rows", table): Const(1)}) != base


def test_a_copy_is_fresh_keeps_sharing_and_swaps_what_keep_gives():
    a, table = _graph()
    outside = Obj(CLS, {})
    holder = Obj(CLS, {"a": a, "again": a, "out": outside})
    copy = copy_graph(holder, lambda v: outside if v is outside else None)
    assert copy is not holder and copy.oid != holder.oid
    assert copy.attrs["a"] is copy.attrs["again"] is not a  # one copy, shared as before
    assert copy.attrs["a"].attrs["me"] is copy.attrs["a"]  # the cycle kept
    assert copy.attrs["out"] is outside
    assert copy.attrs["a"].attrs["rows"].rows is not table
    copy.attrs["a"].attrs["flag"] = Const(False)
    assert a.attrs["flag"].value is True and digest(copy) != digest(holder)


def test_a_value_is_shared_unless_it_holds_what_the_copy_replaces():
    from warmlint.values import OneOf

    plain = OneOf((Const(1), Sym("k", "request", "k")))
    assert copy_graph(plain, lambda v: None) is plain  # nothing in it to copy
    again = copy_graph(plain, lambda v: None, fresh=True)  # each its own, as if made again
    assert again is not plain and again.options[0] is not plain.options[0]
    assert again.options[0].value == 1 and again.options[1].key == "k"
    mine, theirs = Obj(CLS, {}), Obj(CLS, {})
    holding = OneOf((Const(1), mine))
    swapped = copy_graph(holding, lambda v: theirs if v is mine else None)
    assert swapped is not holding and swapped.options[1] is theirs
    assert swapped.options[0] is holding.options[0] and holding.options[1] is mine


def test_slots_resolve_to_the_receivers_objects():
    mine = Obj(CLS, {})
    stored = copy_graph(Obj(CLS, {"arg": mine}), lambda v: Slot(0) if v is mine else None)
    assert stored.attrs["arg"] == Slot(0)
    theirs = Obj(CLS, {})
    back = copy_graph(stored, lambda v: theirs if type(v) is Slot else None)
    assert back.attrs["arg"] is theirs


def test_memo_digest_keeps_only_what_cannot_change_and_forgets_at_reset():
    from warmlint.interp import value_digest
    from warmlint.resolve import FuncRef
    from warmlint.values import Dict, Func

    value_digest.reset()
    func, table = Func(FuncRef("m", "f")), Dict({"k": Const(1)})
    assert value_digest.memo_digest(func) == digest(func)
    assert value_digest._FROZEN[id(func)] == (func, digest(func))  # a function: kept
    before = value_digest.memo_digest(table)
    table.items["k"] = Const(2)  # a dict is written in place: digested again
    assert id(table) not in value_digest._FROZEN and value_digest.memo_digest(table) != before
    value_digest.reset()
    assert value_digest._FROZEN == {}


def test_values_are_walked_by_the_kind_of_their_type_in_the_old_order():
    from warmlint.interp import value_digest as vd
    from warmlint.interp.read_trace import MISSING, Shallow
    from warmlint.values import CLEAN, TestOutcome

    cases = [(True, vd.NUMBER), (3, vd.NUMBER), ("s", vd.STR), (None, vd.NUMBER),
             (CLEAN, vd.FROZEN), (ClassRef("m", "C"), vd.FROZEN), (Const(1), vd.FIELDS),
             (TestOutcome(True), vd.FIELDS), ((1,), vd.SEQUENCE), (frozenset(), vd.SET),
             ({}, vd.MAPPING), (Slot(0), vd.OTHER), (Obj(ClassRef("m", "C"), {}), vd.OBJECT)]
    assert [vd.kind_of(type(v)) for v, _ in cases] == [k for _, k in cases]
    walk = Shallow()
    assert walk.one([True, "s", Const(1), MISSING]) == (
        "list", ("bool", "True"), "s", ("Const", ("int", "1"), CLEAN), ("missing",))
    assert digest(True, CLEAN) == (("bool", "True"), ("Taint",) + tuple(
        digest(*CLEAN.__dict__.values())))
