"""Engine unit tests for path joins (warmlint/joins.py): an ``elif`` chain and the
operands of one expression must not multiply paths, and warm paths keep their facts
until there are many.

Each test runs one function of a generated module with ``Interp.call_function``. The
shapes are the ones that made a real fork's sampler (Aphrodite's ``elif sampler_id ==
X and md.x is not None`` chain, its 30-argument ``replace(md, x=f(md.x), ...)``) run
2**N paths and exceed the analysis budget."""

from __future__ import annotations

import collections
import subprocess
import sys

from conftest import REPO, run_cli
from test_interp import Recorder, _values

from warmlint.analysis import Memo
from warmlint.config_leaves import Assumptions, ConfigDriver
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp.core import Interp
from warmlint.interp.exprs import JOIN_OPERANDS_OVER
from warmlint.resolve import FuncRef, Resolver
from warmlint.settings import Settings
from warmlint.state import Divergence, State
from warmlint.values import Func, Sym

N = 12
NAMES = [f"f{i}" for i in range(N)]

SOURCE = f"""
def chain(sid, {", ".join(NAMES)}):
    n = 0
""" + "".join(f"""    {"elif" if i else "if"} sid == {i} and f{i} is not None:
        n = {i + 1}
""" for i in range(N)) + f"""    return n


def opt(x):
    if x is None:
        return 0
    return 1


def wide({", ".join(NAMES)}):
    return max({", ".join(f"opt({n})" for n in NAMES)})


def narrow(a, b):
    return max(opt(a), opt(b))
"""


class Diverging(Recorder):
    """A true outcome of a warm path is a divergence of its own (cold), as serving
    makes it for an outcome no warmup took."""

    def outcomes(self, interp, test, site_node, key, results, multi):
        out = []
        for st, truth, outcome in super().outcomes(interp, test, site_node, key, results,
                                                   multi):
            if truth and st.div is None:
                st = st.evolve(div=Divergence(interp.site(site_node), outcome, "",
                                              frozenset(), ()))
            out.append((st, truth, outcome))
        return out


def _interp(tmp_path, policy):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/mod.py").write_text(SOURCE)
    tree = SourceTree(tmp_path)
    resolver = Resolver(tree, FunctionLoader(tree), Settings())
    return Interp(resolver, ConfigDriver([], Assumptions({})), policy, Memo())


def _call(interp, name, args) -> list:
    return interp.call_function(Func(FuncRef("pkg.mod", name)), args, {}, State({}), None)


def _syms(names) -> list:
    return [Sym(f"Req.{n}", "request", f"Req.{n}") for n in names]


def test_an_elif_chain_runs_each_arm_once_per_divergence(tmp_path):
    interp = _interp(tmp_path, Diverging())
    results = _call(interp, "chain", _syms(["sid"] + NAMES))
    # every arm's outcome is still reached: n is 0 (no arm) or the arm's number
    assert _values(results) == sorted(str(i) for i in range(N + 1))
    arms = collections.Counter(line for line, _ in interp.policy.branches)
    assert len(arms) == N
    # the paths failing an arm two ways (sid differs; f is None) are one path at the
    # next arm: unjoined, the last arm ran 2**(N-1) times
    assert max(arms.values()) == 1, arms


def test_cold_operands_join_per_divergence(tmp_path):
    interp = _interp(tmp_path, Diverging())
    results = _call(interp, "wide", _syms(NAMES))
    # the warm path (every field None) and the cold one (some field set: `opt`'s branch
    # is one site, one divergence), not 2**N combinations of the two
    assert len(results) == 2
    assert sorted(st.div is None for st, _ in results) == [False, True]
    interp = _interp(tmp_path, Diverging())
    assert len(_call(interp, "narrow", _syms(["a", "b"]))) == 2


def test_warm_operands_keep_their_facts_until_there_are_many(tmp_path):
    interp = _interp(tmp_path, Recorder())
    results = _call(interp, "narrow", _syms(["a", "b"]))
    assert len(results) == 4  # a and b None or not: each path knows which
    assert {tuple(sorted((k, f.none) for k, f in st.facts.items())) for st, _ in results} \
        == {(("Req.a", x), ("Req.b", y)) for x in (True, False) for y in (True, False)}
    interp = _interp(tmp_path, Recorder())
    results = _call(interp, "wide", _syms(NAMES))
    assert len(results) <= 2 * JOIN_OPERANDS_OVER  # joined past the bound: not 2**N


def test_a_fork_shaped_elif_loop_is_analyzed_within_a_small_budget(tmp_path):
    """tools/repro_elif_loop.py writes the Aphrodite shape: a loop over 16 stage ids
    with a 16-arm ``elif`` chain. Before the joins it exceeded any budget (N=14: 77 s)."""
    root = tmp_path / "loop16"
    subprocess.run([sys.executable, str(REPO / "tools/repro_elif_loop.py"), "16", str(root)],
                   check=True)
    (root / "pyproject.toml").write_text("[tool.warmlint]\nmax-steps = 5000\n")
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    assert proc.returncode == 1, proc.stderr
    assert proc.json["stats"]["complete"], proc.json["stats"]
    found = {f["message"].split("`")[1] for f in proc.json["findings"]}
    assert found == {f"sid == {i} and md.f{i} is not None" for i in range(16)}


def test_rows_written_as_their_table_was_made_do_not_keep_warm_paths_apart():
    """``seeds_set[i] = False`` on a ``zeros`` table leaves its rows as they were made: a
    warm path that wrote it and one that did not hold the same rows and are joined. Kept
    apart, each sampler call `warmlint fix` adds to 0.34.0's warmup ran on 2-5 such paths
    per config leaf (`check` of the fixed tree: 30 s serial, 14 s joined). Rows that
    differ still keep paths apart: merged, ``any(rows)`` would answer both ways and warm a
    branch only one path takes."""
    from warmlint.interp import tables
    from warmlint.joins import merge_states
    from warmlint.values import Const, Tensor

    table = tables.new(Const(0))
    untouched = State({})
    as_made = tables.write(untouched, table, Const(False), every_row=True)
    seeded = tables.write(untouched, table, Const(True), every_row=True)
    joined = merge_states([untouched, as_made], keep_configs=True)
    assert len(joined) == 1
    assert tables.reduce("any", Tensor(None, Const(0).taint, table), joined[0]).value is False
    assert len(merge_states([untouched, seeded], keep_configs=True)) == 2
    assert len(merge_states([as_made, seeded], keep_configs=True)) == 2
    other = tables.new(Const(1))  # False written to a table of ones: not as made
    assert len(merge_states([untouched, tables.write(untouched, other, Const(False), True)],
                            keep_configs=True)) == 2


def test_a_warm_join_keeps_the_made_rows_of_the_path_that_never_wrote_them():
    """Two warm paths joined where only one wrote a table's rows: the other read the rows
    the table was made with, and the join holds both (a warmup path's rows are what it
    warms; keeping only the written ones lost outcomes the other path took)."""
    from warmlint.interp import tables
    from warmlint.joins import join_states
    from warmlint.values import Const

    table = tables.new(Const(0))
    wrote = tables.write(State({}), table, Const(-1), every_row=True)
    joined = join_states(wrote, State({}), warmup=True)
    assert {o.value for o in tables.element(joined, table).options} == {-1, 0}
    assert {o.value for o in tables.element(join_states(State({}), wrote, warmup=True),
                                            table).options} == {-1, 0}


def test_paths_binding_alike_in_another_order_are_joined():
    """The bindings key (``joins._bindings``) is the multiset of what the paths bound:
    written in another order the same bindings join; one binding more keeps them apart."""
    from warmlint.joins import merge_states
    from warmlint.resolve import FuncRef
    from warmlint.values import Const, Func

    cuda, native = Func(FuncRef("m", "forward_cuda")), Func(FuncRef("m", "forward_native"))
    one = State({}, heap={(1, "forward"): cuda, (1, "use_fi"): Const(True)})
    other = State({}, heap={(1, "use_fi"): Const(True), (1, "forward"): cuda})
    assert len(merge_states([one, other])) == 1
    apart = State({}, heap={(1, "use_fi"): Const(True), (1, "forward"): native})
    assert len(merge_states([one, apart])) == 2
    more = State({}, heap={**one.heap, (1, "fallback"): Const(None)})
    assert len(merge_states([one, more])) == 2
