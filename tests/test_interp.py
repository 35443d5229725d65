"""Engine unit tests: the interpreter on one small module, without a runner or a rule.

Each test builds a one-file tree, runs one function with ``Interp.call_function`` under a
pass policy, and reads the values, branch outcomes and sink hits it produced: what the
product tests show through whole trees, pinned at the engine's own interface."""

from __future__ import annotations

import textwrap

from warmlint.analysis import Memo
from warmlint.config_leaves import Assumptions, ConfigDriver, enumerate_all
from warmlint.cst_functions import FunctionLoader
from warmlint.index import SourceTree
from warmlint.interp.core import Interp
from warmlint.interp.frames import Frame, PassPolicy
from warmlint.resolve import ClassRef, FuncRef, Resolver
from warmlint.settings import Settings
from warmlint.state import State
from warmlint.values import Const, Func, Obj, Sym, Unknown, options

SOURCE = '''
import triton


@triton.jit
def kernel(x, BLOCK: "tl.constexpr"):
    pass


def pick(flag, n):
    if flag:
        return n + 1
    return 0


def launch(n):
    kernel[(1,)](n, BLOCK=16)
    return n


def maybe_launch(flag, n):
    if flag:
        launch(n)
    return n


def by_config(config):
    if config.use_fast_path:
        return 1
    return 2


class Box:
    def __init__(self, size):
        self.size = size
        self.doubled = size * 2

    def big(self):
        return self.size > 8


def boxed(n):
    box = Box(n)
    return box.doubled if box.big() else -1


def refined(x):
    if x is None:
        return 0
    if x is None:
        return 99  # never: the first test refined x on this path
    return 1


class Runner:
    def __init__(self, config):
        self.config = config
        self.unused = expensive_setup()
        self.sampler = None
        self.width = 4

    def load_model(self):
        self.sampler = Box(self.width)


def expensive_setup():
    raise RuntimeError("never run: the lazy root reads only what is asked")


def grows():
    seen = {}
    seen.setdefault("k", 1)
    return bool(seen)


def rows(n):
    out = []
    for i in range(n):
        out.append(i)
    return len(out)
'''


class Recorder(PassPolicy):
    """A policy that records what the interpreter reports."""

    name = "serving"

    def __init__(self):
        self.hits, self.branches = [], []

    def sink(self, interp, state, hit) -> None:
        self.hits.append(hit)

    def outcomes(self, interp, test, site_node, key, results, multi):
        out = super().outcomes(interp, test, site_node, key, results, multi)
        self.branches.append((interp.site(site_node).line, sorted(o for _, _, o in out)))
        return out


def _interp(tmp_path, policy=None, prefix=()):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/mod.py").write_text(textwrap.dedent(SOURCE))
    tree = SourceTree(tmp_path)
    settings = Settings()
    resolver = Resolver(tree, FunctionLoader(tree), settings)
    driver = ConfigDriver(list(prefix), Assumptions({}))
    return Interp(resolver, driver, policy or Recorder(), Memo())


def _call(interp, name, *args) -> list:
    return interp.call_function(Func(FuncRef("pkg.mod", name)), list(args), {}, State({}),
                                None)


def _values(results) -> list:
    return sorted(repr(o.value) if isinstance(o, Const) else type(o).__name__
                  for _, v in results for o in options(v))


def test_a_known_argument_takes_one_branch_and_computes_the_value(tmp_path):
    interp = _interp(tmp_path)
    assert _values(_call(interp, "pick", Const(True), Const(2))) == ["3"]
    assert _values(_call(interp, "pick", Const(False), Const(2))) == ["0"]
    # one outcome recorded per evaluated test: the body, then the else
    assert [outcomes for _, outcomes in interp.policy.branches] == [["body"], ["else"]]


def test_an_unknown_argument_takes_both_branches(tmp_path):
    interp = _interp(tmp_path)
    flag = Sym("Req.flag", "request", "Req.flag")
    results = _call(interp, "pick", flag, Const(2))
    assert _values(results) == ["0", "3"]
    line = textwrap.dedent(SOURCE).splitlines().index("    if flag:") + 1
    assert interp.policy.branches == [(line, ["body", "else"])]


def test_a_triton_launch_is_a_sink_hit_with_its_call_chain(tmp_path):
    interp = _interp(tmp_path)
    _call(interp, "maybe_launch", Const(True), Const(4))
    [hit] = interp.policy.hits
    assert hit.sink_id == "triton:pkg.mod.kernel"
    interp.policy.hits.clear()
    _call(interp, "maybe_launch", Const(False), Const(4))
    assert interp.policy.hits == []  # the branch not taken launches nothing


def test_a_config_test_is_a_whole_run_decision_enumerated_both_ways(tmp_path):
    seen = []

    def run(driver):
        policy = Recorder()
        policy.name = "warmup"  # the warmup pass decides configs for the whole run
        interp = _interp(tmp_path, policy)
        interp.driver = driver
        config = Sym("cfg", "config", "cfg")
        seen.append(_values(_call(interp, "by_config", config)))
        return None

    leaves, left = enumerate_all(run, Assumptions({}))
    assert not left and len(leaves) == 2
    assert sorted(map(tuple, seen)) == [("1",), ("2",)]  # one value per leaf, never both
    assert {d.outcome for driver, _ in leaves for d in driver.trace} == {True, False}


def test_objects_keep_their_attributes_and_methods_see_them(tmp_path):
    interp = _interp(tmp_path)
    assert _values(_call(interp, "boxed", Const(10))) == ["20"]
    assert _values(_call(interp, "boxed", Const(3))) == ["-1"]


def test_a_branch_refines_what_later_branches_know(tmp_path):
    interp = _interp(tmp_path)
    x = Sym("Req.x", "request", "Req.x")
    assert _values(_call(interp, "refined", x)) == ["0", "1"]  # never 99


def test_the_lazy_runner_builds_only_the_attributes_read_in_set_up_order(tmp_path):
    interp = _interp(tmp_path)
    runner = Obj(ClassRef("pkg.mod", "Runner"), {}, lazy=True, label="runner")
    interp.stack = [Frame(None, "pkg.mod", "<test>")]
    sampler = interp.lazy_attr(runner, "sampler")  # None in __init__, built in load_model
    assert isinstance(sampler, Obj) and sampler.cls.name == "Box"
    size = sampler.attrs["size"]
    assert isinstance(size, Const) and size.value == 4
    assert interp.lazy_attr(runner, "sampler") is sampler  # built once (memo)
    assert interp.lazy_attr(runner, "nothing") is None  # never assigned


def test_a_list_appended_to_is_not_empty_any_more(tmp_path):
    # `out = []; for ...: out.append(i)`: len(out) is not the 0 of the literal
    interp = _interp(tmp_path)
    assert _values(_call(interp, "rows", Const(3))) != ["0"]
    assert _values(_call(interp, "grows")) == ["True"]


def test_a_loop_over_an_unknown_range_is_summarized_not_unrolled(tmp_path):
    interp = _interp(tmp_path)
    assert _call(interp, "rows", Unknown("n")) and interp.steps < 200
