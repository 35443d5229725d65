"""Engine unit tests for ``functools.cache`` functions (warmlint/interp/cached.py) and for
the roomy frame the interpreter runs under (warmlint/stack_room.py).

A cached function called again with the same constant arguments returns its first value
without running its body, as Python does; a call whose first run reached a sink, took
more than one path, or got non-constant arguments runs again every time."""

from __future__ import annotations

import resource
import sys
import textwrap

import libcst as cst
import pytest

from test_interp import Recorder

from warmlint import stack_room
from warmlint.analysis import Memo
from warmlint.config_leaves import Assumptions, ConfigDriver
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp.core import Interp
from warmlint.resolve import FuncRef, Resolver
from warmlint.serving import ServingPass
from warmlint.settings import Settings
from warmlint.state import State
from warmlint.values import Const, Func, Sym
from warmlint.warmup import WarmupPass

SOURCE = """
import functools
from functools import cache

import triton


@triton.jit
def kernel(x):
    pass


@cache
def probe():
    return helper(1)


@functools.lru_cache(maxsize=None)
def scaled(n):
    return helper(n) * 2


def helper(n):
    return n + 1


@cache
def launches():
    kernel[(1,)](0)
    return 3


@cache
def forks(flag):
    if flag:
        return 1
    return 2


def plain():
    return helper(1)


def twice(name):
    return name() + name()
"""


class Counting(Recorder):
    """Counts the frames the interpreter enters, by function name."""

    def __init__(self):
        super().__init__()
        self.frames = []

    def warm_frame(self, fv) -> bool:
        self.frames.append(fv.ref.qualname)
        return False


def _interp(tmp_path):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/mod.py").write_text(textwrap.dedent(SOURCE))
    tree = SourceTree(tmp_path)
    resolver = Resolver(tree, FunctionLoader(tree), Settings())
    return Interp(resolver, ConfigDriver([], Assumptions({})), Counting(), Memo())


def _call(interp, name, *args) -> list:
    return interp.call_function(Func(FuncRef("pkg.mod", name)), list(args), {}, State({}),
                                None)


def _values(results) -> list:
    return sorted(repr(v.value) if isinstance(v, Const) else type(v).__name__
                  for _, v in results)


@pytest.mark.parametrize("name, args, value", [("probe", (), "2"),
                                               ("scaled", (Const(4),), "10")])
def test_a_cached_function_runs_once_per_leaf(tmp_path, name, args, value):
    interp = _interp(tmp_path)
    assert _values(_call(interp, name, *args)) == [value]
    assert _values(_call(interp, name, *args)) == [value]
    assert interp.policy.frames.count(name) == 1, interp.policy.frames
    assert interp.policy.frames.count("helper") == 1


def test_other_arguments_and_uncached_functions_run_again(tmp_path):
    interp = _interp(tmp_path)
    _call(interp, "scaled", Const(4))
    assert _values(_call(interp, "scaled", Const(5))) == ["12"]
    _call(interp, "scaled", Sym("n", "request", "n"))
    _call(interp, "scaled", Sym("n", "request", "n"))
    assert interp.policy.frames.count("scaled") == 4  # 4, 5, and the unknown twice
    _call(interp, "plain")
    _call(interp, "plain")
    assert interp.policy.frames.count("plain") == 2


def test_a_call_that_reached_a_sink_or_forked_is_not_remembered(tmp_path):
    interp = _interp(tmp_path)
    _call(interp, "launches")
    _call(interp, "launches")
    assert interp.policy.frames.count("launches") == 2
    assert len(interp.policy.hits) == 2  # the kernel launch is seen on both calls
    flag = Sym("flag", "config", "flag")
    interp = _interp(tmp_path)
    assert _values(_call(interp, "forks", flag)) == ["1", "2"]
    assert _values(_call(interp, "forks", flag)) == ["1", "2"]
    assert interp.policy.frames.count("forks") == 2


def test_a_fresh_leaf_runs_a_cached_function_again(tmp_path):
    first, second = _interp(tmp_path), _interp(tmp_path)  # one Memo each
    _call(first, "probe")
    _call(second, "probe")
    assert first.policy.frames.count("probe") == second.policy.frames.count("probe") == 1


def test_a_cached_function_on_a_serving_warm_path_is_remembered(tmp_path):
    """Serving's warm path runs a call through its own call reuse (``interp/reuse.py``),
    which once overwrote the effects ``cached.store`` compares with: nothing was stored."""
    interp = _interp(tmp_path)
    serving = Interp(interp.resolver, interp.driver, ServingPass(WarmupPass()), interp.memo)
    site = cst.parse_expression("probe()")
    for _ in range(2):
        results = serving.call_function(Func(FuncRef("pkg.mod", "probe")), [], {},
                                        State({}), site)
        assert _values(results) == ["2"]
    assert [key[1] for key in serving.lazy_memo] == ["pkg.mod.probe"]


def _seesaw(rounds: int) -> None:
    """Recursion whose depth goes up and down across frame-stack chunk boundaries."""
    def down(n):
        return 0 if n == 0 else down(n - 1) + 1
    for _ in range(rounds):
        down(400)


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info < (3, 11),
                    reason="frame-stack chunks are CPython 3.11+")
def test_deep_recursion_under_the_roomy_frame_maps_no_new_memory():
    _seesaw(10)  # warm up allocators

    def faults(run) -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        run()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    plain = faults(lambda: _seesaw(2000))
    roomy = faults(lambda: stack_room.call(_seesaw, 2000))
    assert plain >= 2000, plain  # a chunk mapped (and faulted in) per round
    assert roomy < plain / 10, (roomy, plain)
    assert stack_room.call(lambda a, b=0: a + b, 1, b=2) == 3
