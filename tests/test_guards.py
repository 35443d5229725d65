"""Engine unit tests for guarded joins (warmlint/guards.py) and exclusive request flags
(``exclusive-flags``): a value set differently on two paths is told apart again where a
later test tells the paths apart, which is what made vLLM 0.21.0's rejection sampler look
like it launched ``rejection_random_sample_kernel`` with ``is_greedy_ptr`` None."""

from __future__ import annotations

import textwrap

from test_interp import Recorder

from warmlint import guards
from warmlint.analysis import Memo
from warmlint.config_leaves import Assumptions, ConfigDriver
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp.core import Interp
from warmlint.resolve import FuncRef, Resolver
from warmlint.settings import Settings
from warmlint.state import State, SymFact
from warmlint.values import Const, Func, Guarded, OneOf, Sym, Tensor, options

SOURCE = '''
import triton


@triton.jit
def kernel(x, g):
    pass


def told_apart(md, x):
    if md.all_greedy:
        g = None
    else:
        g = x
    if md.all_greedy:
        return 0
    kernel[(1,)](x, g)
    return 1


def never_told_apart(md, x):
    if md.all_greedy:
        g = None
    else:
        g = x
    kernel[(1,)](x, g)
    return 1


def exclusive(md, x):
    if md.all_greedy:
        g = None
    else:
        g = x
    if not md.all_random:
        if md.all_greedy:
            return 0
    kernel[(1,)](x, g)
    return 1
'''


def _launch_args(tmp_path, name: str, settings: Settings | None = None) -> list:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/mod.py").write_text(textwrap.dedent(SOURCE))
    tree = SourceTree(tmp_path)
    resolver = Resolver(tree, FunctionLoader(tree), settings or Settings())
    policy = Recorder()
    interp = Interp(resolver, ConfigDriver([], Assumptions({})), policy, Memo())
    md = Sym("SamplingMetadata", "request", "SamplingMetadata")
    interp.call_function(Func(FuncRef("pkg.mod", name)), [md, Tensor()], {}, State({}), None)
    return sorted({"None" if isinstance(o, Const) and o.value is None else type(o).__name__
                   for hit in policy.hits for o in options(hit.args["g"])})


def test_a_later_test_drops_the_option_of_the_other_path(tmp_path):
    assert _launch_args(tmp_path, "told_apart") == ["Tensor"]


def test_without_a_later_test_both_options_stay(tmp_path):
    assert _launch_args(tmp_path, "never_told_apart") == ["None", "Tensor"]


def test_exclusive_flags_tell_all_random_from_all_greedy(tmp_path):
    assert _launch_args(tmp_path, "exclusive") == ["Tensor"]
    assert _launch_args(tmp_path, "exclusive", Settings(exclusive_flags=())) == [
        "None", "Tensor"]


def test_narrow_drops_only_what_the_facts_contradict():
    greedy = (("Req.all_greedy", SymFact(truthy=True)),)
    random = (("Req.all_greedy", SymFact(truthy=False)),)
    value = Guarded((Const(None), Tensor()), guards=(greedy, random))
    assert isinstance(guards.narrow(value, {"Req.all_greedy": SymFact(truthy=False)}), Tensor)
    assert guards.narrow(value, {}) is value  # unknown is not a contradiction
    assert guards.narrow(value, {"Req.other": SymFact(truthy=False)}) is value
    # paths that knew the same things cannot be told apart: no guard
    assert guards.sides({"k": SymFact(truthy=True)}, {"k": SymFact(truthy=True)}) is None
    joined = OneOf((Const(None), Tensor()))
    assert guards.guard(joined, Const(None), Tensor(), (greedy, random)).guards == (
        greedy, random)
