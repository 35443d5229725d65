"""Fuzzing `analyze_tree` in-process: mutated fixture sources and generated programs.

No exception may escape, no example may hang (hypothesis deadline for slow ones, an
alarm as the hard stop), and whatever cannot be parsed must come back as an `errors`
entry for that file, which makes the result incomplete. Each test counts the inputs it
tried, records the count and checks it reached the configured number
(WARMLINT_FUZZ_EXAMPLES scales it up locally); the total over every fuzz module is
printed at the end of the run (conftest).
"""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from warmlint.check import analyze_tree
from warmlint.settings import Settings

EXAMPLES = int(os.environ.get("WARMLINT_FUZZ_EXAMPLES", "100"))
COUNTS: dict = {}  # test -> inputs tried; conftest reports the total at the end of the run
DEADLINE_MS = 5000
HANG_S = 60
BASE = {p.relative_to(FIXTURES / "minivllm").as_posix(): p.read_text()
        for p in (FIXTURES / "minivllm").rglob("*.py")}
SAMPLER = "vllm/v1/sample/sampler.py"
TARGETS = [SAMPLER, "vllm/v1/worker/gpu_model_runner.py",
           "vllm/v1/sample/ops/topk_topp_sampler.py", "vllm/v1/sample/ops/topk_topp_triton.py"]
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=DEADLINE_MS, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Hang(Exception):
    pass


@contextlib.contextmanager
def hard_limit(seconds: int):
    def on_alarm(signum, frame):
        raise Hang(f"analysis ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def analyze(files: dict):
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in files.items():
            path = Path(tmp, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        with hard_limit(HANG_S):
            report = analyze_tree(Path(tmp), Settings(), None)
    for error in report.errors:  # every failure is a well-formed entry
        assert set(error) == {"path", "line", "message"}, error
        assert error["path"] in files and isinstance(error["line"], int) and error["message"]
    for finding in report.findings:
        assert finding.to_json()["fingerprint"]
    stats = report.to_json()["stats"]  # no silent pass: any error makes it incomplete
    assert stats["complete"] is (not report.errors) and len(stats["incomplete"]) == len(report.errors)
    return report


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# -- expressions and statements over the sampler's names ------------------------------------

ATOMS = ["logits", "sampling_metadata", "sampling_metadata.generators", "k", "p", "n",
         "sampling_metadata.max_num_logprobs", "sampling_metadata.all_greedy", "None", "0",
         "1", "True", "'s'", "[]", "{}", "envs.VLLM_USE_FLASHINFER_SAMPLER", "self", "G"]
CALLEES = ["fz0", "fz1", "fz2", "len", "launch_mask", "count_ranks", "torch.zeros",
           "apply_top_k_top_p", "isinstance", "getattr", "sampling_metadata.generators.get"]


def _expr(children):
    pair = st.tuples(children, children)
    return st.one_of(
        st.builds("{}.{}".format, children, st.sampled_from(["shape", "generators", "x", "T"])),
        st.builds(lambda f, a: f"{f}({', '.join(a)})", st.sampled_from(CALLEES),
                  st.lists(children, max_size=3)),
        st.builds(lambda ab, op: f"({ab[0]} {op} {ab[1]})", pair,
                  st.sampled_from(["+", "and", "or", "is", "is not", "==", "<", "in", "*"])),
        st.builds("(not {})".format, children),
        st.builds(lambda a, b, c: f"({a} if {b} else {c})", children, children, children),
        st.builds(lambda a, b, c: f"[{a} for x in {b} if {c}]", children, children, children),
        st.builds(lambda a: f"{{x: {a} for x in range(3)}}", children),
        st.builds("(lambda x: {})({})".format, children, children),
        st.builds("{}[{}]".format, children, children),
        st.builds("_mask_kernel[({},)]({})".format, children, children),
        st.builds(lambda ab: f"({ab[0]}, {ab[1]})", pair),
    )


EXPRS = st.recursive(st.sampled_from(ATOMS), _expr, max_leaves=6)
TARGET = st.sampled_from(["x", "y", "self.cache", "G", "k", "x, y"])


def _indent(lines: list) -> list:
    return ["    " + line for line in lines] or ["    pass"]


def _block(head: str, body: list, orelse: list | None = None) -> list:
    out = [head] + _indent(body)
    return out + (["else:"] + _indent(orelse) if orelse is not None else [])


def _compound(bodies):
    body = bodies.map(lambda b: b or ["pass"])
    return st.one_of(
        st.builds(lambda e, a, b: _block(f"if {e}:", a, b), EXPRS, body, body),
        st.builds(lambda e, a: _block(f"if {e}:", a), EXPRS, body),
        st.builds(lambda e, a: _block(f"for x in {e}:", a + ["break"]), EXPRS, body),
        st.builds(lambda e, a: _block(f"while {e}:", a + ["continue"]), EXPRS, body),
        st.builds(lambda a, b: _block("try:", a) + _block("except Exception:", b), body, body),
        st.builds(lambda e, a: _block(f"with {e}:", a), EXPRS, body),
        st.builds(lambda a: _block("def inner(a, *args, **kw):", a) + ["x = inner(1)"], body),
    )


SIMPLE = st.one_of(
    st.builds(lambda t, e: [f"{t} = {e}"], TARGET, EXPRS),
    st.builds(lambda e: [f"x += {e}"], EXPRS),
    st.builds(lambda e: [f"return {e}"], EXPRS),
    st.builds(lambda e: [e], EXPRS),
    st.builds(lambda e: [f"assert {e}"], EXPRS),
    st.builds(lambda e: [f"raise ValueError({e})"], EXPRS),
    st.builds(lambda e: [f"y = yield {e}"], EXPRS),
    st.just(["global G"]),
    st.builds(lambda f, e: [f"return {f}(logits, sampling_metadata, k, p, n - 1)"],
              st.sampled_from(["fz0", "fz1", "fz2"]), EXPRS),  # (mutual) recursion
)
STATEMENTS = st.recursive(SIMPLE, lambda s: _compound(st.lists(s, max_size=3).map(
    lambda parts: [line for part in parts for line in part])), max_leaves=8)
BODIES = st.lists(STATEMENTS, min_size=1, max_size=5).map(
    lambda parts: [line for part in parts for line in part])

HEADER = ("from vllm import envs\n"
          "from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p\n"
          "from vllm.v1.sample.ops.topk_topp_triton import _mask_kernel, launch_mask\n")
CALL = ("        num_logprobs = sampling_metadata.max_num_logprobs\n",
        "        num_logprobs = sampling_metadata.max_num_logprobs\n"
        "        fz_out = fz0(logits, sampling_metadata, None, None, 3)\n")


def generated_tree(bodies: list) -> dict:
    funcs = "".join("\n\n" + "\n".join(_block(f"def fz{i}(logits, sampling_metadata, k=None, "
                                              "p=None, n=0):", body)) + "\n"
                    for i, body in enumerate(bodies))
    sampler = HEADER + BASE[SAMPLER].replace(*CALL) + "\nG = 0\n" + funcs
    return {**BASE, SAMPLER: sampler}


# -- mutations of the fixture's sampler and runner files -------------------------------------

MUTATION = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("duplicate"), st.integers(0, 10**6)),
    st.tuples(st.just("swap"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), STATEMENTS, st.integers(0, 3)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), EXPRS.map(lambda e: [e]),
              st.integers(0, 3)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
)


def mutate(text: str, ops: list) -> str:
    for op in ops:
        lines = text.splitlines(keepends=True) or ["\n"]
        i = op[1] % len(lines)
        if op[0] == "delete":
            del lines[i]
        elif op[0] == "duplicate":
            lines.insert(i, lines[i])
        elif op[0] == "swap":
            j = op[2] % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif op[0] == "insert":
            lines[i:i] = ["    " * op[3] + line + "\n" for line in op[2]]
        elif op[0] == "truncate":
            text = text[:op[1] % (len(text) + 1)]
            continue
        text = "".join(lines)
    return text


def test_mutated_fixture_sources():
    tried = []

    @FUZZ_SETTINGS
    @given(target=st.sampled_from(TARGETS), ops=st.lists(MUTATION, min_size=1, max_size=5))
    def run(target, ops):
        tried.append(target)
        text = mutate(BASE[target], ops)
        report = analyze({**BASE, target: text})
        broken = {e["path"] for e in report.errors if "parse" in e["message"]
                  or e["message"].startswith(("syntax error", "not valid UTF-8"))}
        if not parses(text):  # every target is read by the base analysis
            assert target in broken, (target, report.errors)
        else:
            assert target not in broken, report.errors

    run()
    COUNTS["mutated fixture trees"] = len(tried)
    assert len(tried) >= EXAMPLES


def test_generated_programs():
    tried = []

    @FUZZ_SETTINGS
    @given(bodies=st.lists(BODIES, min_size=1, max_size=3))
    @example(bodies=[["if sampling_metadata.max_num_logprobs < None:", "    pass"]])  # was a crash
    def run(bodies):
        tried.append(1)
        files = generated_tree(bodies)
        if not parses(files[SAMPLER]):  # e.g. `yield` inside a comprehension
            report = analyze(files)
            assert SAMPLER in {e["path"] for e in report.errors}
            return
        report = analyze(files)
        assert [w.endswith("GPUModelRunner._dummy_sampler_run") for w in report.stats["warmups"]] \
            == [True]

    run()
    COUNTS["generated programs"] = len(tried)
    assert len(tried) >= EXAMPLES
