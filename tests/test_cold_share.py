"""Serving's cold calls replayed from another call's record (interp/cold_share.py).

A replay must change no result: every fixture, and vLLM 0.33.0 and 0.34.0, report the
same with the records on and with serving's call reuse off altogether (the exact
analysis), serially and in forked leaves; the releases must actually replay records
(else these tests test nothing). What keys a record matters: without the warmup's
answers, or without the config facts and globals it read, 0.34.0's report changes. The
plain-data test and the comparison of arguments are checked on small values.
"""

from __future__ import annotations

import pytest
from conftest import VARIANTS, make_tree
from test_built_reuse import _recorded

from warmlint.check import analyze_tree
from warmlint.interp import built, cold_share, read_trace, tables, warm_records
from warmlint.interp.reuse import CallReuse
from warmlint.resolve import ClassRef
from warmlint.settings import Settings
from warmlint.values import Const, Obj, OneOf, Seq, Sym, Taint, Tensor, Unknown


def _report(root, jobs=None, settings=None) -> dict:
    data = analyze_tree(root, settings or Settings(), None, jobs=jobs).to_json()
    data["stats"].pop("seconds", None)
    return data


def _both_ways(root, monkeypatch, jobs=None, settings=None) -> tuple[dict, dict]:
    replayed = _report(root, jobs, settings)
    with monkeypatch.context() as m:
        m.setattr(cold_share.SharedColdCalls, "enabled", False)
        m.setattr(CallReuse, "enabled", False)
        exact = _report(root, jobs, settings)
    return replayed, exact


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_fixture_reports_the_same_with_cold_records(tmp_path, monkeypatch, variant):
    replayed, exact = _both_ways(make_tree(tmp_path, variant), monkeypatch)
    assert replayed == exact
    assert not read_trace.OPEN  # every record closed


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_a_release_reports_the_same_with_cold_records(monkeypatch, version):
    """Both releases call the top-k/top-p helpers alike past divergences in many leaves:
    replayed there, with the exact analysis's report."""
    from conftest import release

    made = _recorded(monkeypatch, cold_share.SharedColdCalls)
    replayed, exact = _both_ways(release(version), monkeypatch)
    assert replayed == exact
    assert sum(s.hits for s in made) >= 20


@pytest.mark.network
def test_forked_leaves_report_the_same_with_cold_records(monkeypatch):
    from conftest import release

    replayed, exact = _both_ways(release("0.34.0"), monkeypatch, jobs=2)
    assert replayed == exact


@pytest.mark.network
@pytest.mark.parametrize("dropped", ["warmup answers", "config facts and globals"])
def test_what_a_leaf_decides_under_a_call_keys_its_record(monkeypatch, dropped):
    """A record is taken only where the leaf's warmup answers the call's questions alike
    (which outcomes it took at a branch, under a config) and the config facts, globals
    and cached values it read agree: with either check dropped, leaves take records
    made under another warmup or config, and 0.34.0's report changes."""
    from conftest import release

    root = release("0.34.0")
    exact = _report(root)
    if dropped == "warmup answers":
        check = lambda interp, rec: built.reads_agree(interp, rec.log, rec.installs)  # noqa: E731
        monkeypatch.setattr(cold_share, "leaf_agrees", check)
    else:
        monkeypatch.setattr(cold_share, "leaf_agrees", lambda interp, rec: True)
    assert _report(root) != exact


# -- on small values -------------------------------------------------------------------------
CLS = ClassRef("m", "Req")
REQ = Taint(frozenset({"Req.k"}))


def test_plain_data_is_what_no_leaf_holds_apart():
    rows = tables.new(Const(0))
    assert warm_records.plain(Tensor(Sym("b", "request", "b"), dtype="int32"))
    assert not warm_records.plain(Tensor(None, rows=rows))  # a per-request table
    assert warm_records.plain(Obj(CLS, {}, request=True, label="Req"))
    assert not warm_records.plain(Obj(CLS, {"k": Const(1)}, request=True, label="Req"))
    assert not warm_records.plain(Obj(CLS, {}))  # an object a leaf built
    assert warm_records.plain(OneOf((Const(1), Unknown("x"))))
    assert warm_records.plain(Seq((Const(1), Const(2))))
    assert not warm_records.plain(Seq((Const(1), Obj(CLS, {}))))


def test_arguments_key_a_record_as_read_trace_sees_them():
    """Records are keyed by their arguments shallow (``read_trace.Shallow``): objects by
    number, class and flags; an open request also by what it holds (its fields are
    symbols, never traced); tensors and symbols field by field, taints included."""
    def head(*args):
        return read_trace.Shallow().one((list(args), {}))

    a, b = Obj(CLS, {}, request=True, label="Req"), Obj(CLS, {}, request=True, label="Req")
    assert a.oid != b.oid and head(a) == head(b)
    assert head(a, a) != head(a, b)  # the same object twice, or two
    assert head(a) != head(Obj(CLS, {"k": Const(1)}, request=True, label="Req"))
    t = Tensor(Sym("b", "request", "b"), dtype="float32")
    assert head(t) == head(Tensor(Sym("b", "request", "b"), dtype="float32"))
    assert head(t) != head(Tensor(Sym("b", "request", "b"), dtype="int32"))
    assert head(t) != head(t.with_taint(REQ))
    assert head(Const(1)) != head(Const(True))
    assert head(Unknown("x")) != head(Unknown("y"))
