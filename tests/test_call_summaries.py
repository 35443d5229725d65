"""Calls an earlier call made alike are replayed from its summary (interp/summaries.py).

A replay must change no result: every fixture is analyzed with summaries on and off, with
every call tried (the cost bar at one step), and the reports must be equal; the v2
fixture and vLLM 0.34.0 must actually replay calls (else these tests test nothing). A
write the call made to an older object is replayed (the test fails with it dropped); a
read that differs, or a place the call wrote before reading, is told apart on small
objects.
"""

from __future__ import annotations

import pytest
from conftest import VARIANTS, make_tree
from test_built_reuse import SAMPLER, _recorded, _v2, _warm_records

from warmlint.check import analyze_tree
from warmlint.interp import read_trace, summaries, tables
from warmlint.resolve import ClassRef
from warmlint.settings import Settings
from warmlint.state import State
from warmlint.values import Const, Obj, Tensor


@pytest.fixture
def every_call(monkeypatch):
    """Try every call (not only costly ones); the CallSummaries of each runner."""
    monkeypatch.setattr(summaries, "CANDIDATE_STEPS", 1)
    return _recorded(monkeypatch, summaries.CallSummaries)


def _report(root, jobs=None) -> dict:
    data = analyze_tree(root, Settings(), None, jobs=jobs).to_json()
    data["stats"].pop("seconds", None)
    return data


def _both_ways(root, monkeypatch, jobs=None) -> tuple[dict, dict]:
    replayed = _report(root, jobs)
    monkeypatch.setattr(summaries.CallSummaries, "enabled", False)
    exact = _report(root, jobs)
    monkeypatch.setattr(summaries.CallSummaries, "enabled", True)
    return replayed, exact


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_fixture_reports_the_same_with_replayed_calls(tmp_path, monkeypatch, every_call,
                                                        variant):
    replayed, exact = _both_ways(make_tree(tmp_path, variant), monkeypatch)
    assert replayed == exact
    assert not read_trace.OPEN  # every record closed


def test_the_v2_fixture_replays_calls_and_reports_the_same(tmp_path, monkeypatch,
                                                           every_call):
    replayed, exact = _both_ways(_v2(tmp_path), monkeypatch)
    assert replayed == exact and replayed["findings"]
    assert sum(s.hits for s in every_call) > 0, "no call was replayed"


# A write to the sampler (an older object) that decides what its next call warms.
PUBLISHED = (
    (SAMPLER, "        self.use_flashinfer = flashinfer_enabled()",
     "        self.use_flashinfer = flashinfer_enabled()\n        self.published = False"),
    (SAMPLER, "        self.states.add_request(req_idx, params)",
     "        self.states.add_request(req_idx, params)\n        self.published = True"),
    (SAMPLER, "        k, p = self.states.filters(batch.rows)",
     "        if not self.published:\n            return logits.argmax(dim=-1)\n"
     "        k, p = self.states.filters(batch.rows)"),
)


def test_a_replayed_call_writes_what_the_call_wrote(tmp_path, monkeypatch, every_call):
    """``add_request`` sets ``self.published``, which the warmup's next sampler call
    reads: replayed without that write, a leaf's warmup would warm nothing past it."""
    root = _v2(tmp_path, *PUBLISHED)
    replayed, exact = _both_ways(root, monkeypatch)
    assert replayed == exact
    stored = [s for made in every_call for kept in made.stored.values() for s in kept
              if s.snapshot[1]]
    assert any(name == "published" for s in stored for _, name, _ in s.snapshot[1])
    assert sum(s.hits for s in every_call) > 0

    replay = summaries._replay

    def dropping_writes(interp, summary, state, copied, found):
        return replay(interp, summary, state, (copied[0], [], copied[2]), found)

    monkeypatch.setattr(summaries, "_replay", dropping_writes)
    assert _report(root) != exact, "the write is not what the report depends on"


@pytest.mark.parametrize("variant", ["v2", "base"])
def test_the_warmups_record_the_same_with_replayed_calls(tmp_path, monkeypatch, every_call,
                                                         variant):
    """Each leaf's warmup took the same outcomes, met the same config tests, made the
    same decisions with the same assumptions."""
    root = make_tree(tmp_path, variant) if variant == "base" else _v2(tmp_path, *PUBLISHED)
    replayed = _warm_records(root, Settings())
    monkeypatch.setattr(summaries.CallSummaries, "enabled", False)
    assert replayed == _warm_records(root, Settings())


def test_forked_leaves_report_the_same_with_replayed_calls(tmp_path, monkeypatch,
                                                           every_call):
    from warmlint import leaf_fork

    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS", 0)
    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS_PARALLEL", 0)
    replayed, exact = _both_ways(_v2(tmp_path, *PUBLISHED), monkeypatch, jobs=2)
    assert replayed == exact


@pytest.mark.network
def test_a_release_reports_the_same_with_replayed_calls(monkeypatch):
    """vLLM 0.34.0's leaves publish their sampler's staged writes and add the warmup's
    requests alike: replayed there, with the same report."""
    from conftest import release

    made = _recorded(monkeypatch, summaries.CallSummaries)
    replayed, exact = _both_ways(release("0.34.0"), monkeypatch)
    assert replayed == exact
    assert sum(s.hits for s in made) >= 20


# -- reads, on small objects ---------------------------------------------------------------
CLS = ClassRef("m", "C")


def _recording(state, *args):
    log = read_trace.CallLog(oid0=Obj(CLS, {}).oid, tid0=tables.new(Const(0)).tid,
                            heap0=state.heap)
    head = log.walk.one((list(args), {}))
    read_trace.OPEN.append(log)
    return log, head


def test_reads_agree_only_while_each_place_read_holds_what_it_held(monkeypatch):
    monkeypatch.setattr(read_trace, "OPEN", [])
    inner = Obj(CLS, {"n": Const(1)})
    outer = Obj(CLS, {"inner": inner, "rows": Tensor(None, rows=tables.new(Const(0)))})
    state = State({})
    log, _ = _recording(state, outer)
    read_trace.read_attr(outer, "inner", state)
    read_trace.read_attr(inner, "n", state)
    read_trace.read_attr(outer, "rows", state)
    read_trace.read_rows(state, outer.attrs["rows"].rows)
    read_trace.read_attr(outer, "absent", state)
    read_trace.OPEN.clear()
    assert [item[0] for item in log.trace] == ["attr", "attr", "attr", "rows", "attr"]
    assert not log.dirty

    def agrees(*args, state=state):
        head = read_trace.Shallow()
        head.one((list(args), {}))
        return summaries.trace_agrees(log, head, state)

    assert agrees(outer) == [outer, inner, outer.attrs["rows"].rows]
    inner.attrs["n"] = Const(2)
    assert agrees(outer) is None  # a value read differs
    inner.attrs["n"] = Const(1)
    outer.attrs["absent"] = Const(0)
    assert agrees(outer) is None  # a place read as missing now holds something
    del outer.attrs["absent"]
    table = outer.attrs["rows"].rows
    assert agrees(outer, state=State({}, heap={table.key: Const(5)})) is None  # rows written


def test_a_place_the_call_wrote_first_is_not_a_read(monkeypatch):
    monkeypatch.setattr(read_trace, "OPEN", [])
    obj = Obj(CLS, {"x": Const(1)})
    state = State({})
    log, _ = _recording(state, obj)
    read_trace.write_attr(obj, "x", state)  # reads the old value (a weak write joins it)
    obj.attrs["x"] = Const(2)
    read_trace.read_attr(obj, "x", state)  # the call's own value: not a read of the past
    read_trace.OPEN.clear()
    assert log.trace == [("attr", 0, "x", ("Const",) + log.trace[0][3][1:])]
    assert list(log.written.values()) == [obj]
    made = Obj(CLS, {"y": Const(0)})  # made after the call began: never a read
    read_trace.OPEN.append(log)
    read_trace.read_attr(made, "y", state)
    read_trace.OPEN.clear()
    assert len(log.trace) == 1 and not log.dirty


def test_an_older_object_reached_through_no_read_keeps_the_call_unstored(monkeypatch):
    monkeypatch.setattr(read_trace, "OPEN", [])
    stranger = Obj(CLS, {"x": Const(1)})
    log, _ = _recording(State({}), Obj(CLS, {}))
    read_trace.read_attr(stranger, "x", State({}))
    read_trace.OPEN.clear()
    assert log.dirty and not log.trace
