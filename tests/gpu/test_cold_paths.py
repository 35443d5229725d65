"""warmlint's verdicts, checked against real JIT events of real vLLM releases on a GPU.

Each ``gpu`` test is one case (see conftest.py): a fresh process builds a stand-in runner
around vLLM's real ``Sampler``, runs a ``_dummy_sampler_run`` (the release's own, a fixed
one, or the plugin's), then samples one request batch twice and counts Triton compiles,
Dynamo frames and FlashInfer module builds during the first step. "Cold" means at least
one such event; "warm" means none. Times are recorded but judged only where the gap is
unmistakable (a cold Triton compile costs seconds on an H200).

The tests without the ``gpu`` mark check the harness itself on any machine.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from warmlint.runtime import JitEvents, harness

REPO = Path(__file__).resolve().parents[2]
FI_ON = {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
TOPK_TOPP = "_topk_topp_kernel"


def case(id, release, kind, batch=256, warmup="original", env=None, prediction="",
         speculative=False):
    return pytest.mark.gpu_case(id=id, release=release, kind=kind, batch=batch, warmup=warmup,
                                env=env or {}, prediction=prediction, speculative=speculative)


def first(result) -> dict:
    return result["request"]["events"]


def describe(result) -> str:
    req = result["request"]
    counts = {k: req["events"][k] for k in ("triton", "triton_kernels", "dynamo", "flashinfer")}
    return (f"first step {req['first_s']} s, second {req['second_s']} s, events {counts}, "
            f"sampler bound to {result.get('sampler_forward')}")


def assert_warm(result) -> None:
    assert first(result)["total"] == 0, "expected no JIT event: " + describe(result)


# --- (a) the cold path 0.21.0 fixed, and its controls -----------------------------------

@pytest.mark.gpu
@case("a", "0.20.0", "seeded", env=FI_ON,
      prediction="WL001: generators reach Triton _topk_topp_kernel, which no warmup compiles")
def test_a_seeded_request_is_cold_on_0_20_0_with_flashinfer(gpu_case):
    assert gpu_case["sampler_forward"] == "forward_cuda", \
        "FlashInfer sampling was not bound, so this case does not test its seeded fallback"
    events = first(gpu_case)
    assert TOPK_TOPP in events["triton_kernels"], describe(gpu_case)
    first_s, second_s = gpu_case["request"]["first_s"], gpu_case["request"]["second_s"]
    assert first_s > 3 * second_s and first_s - second_s > 0.2, describe(gpu_case)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [
    pytest.param(k, marks=case(f"a-control-{k}", "0.20.0", k, env=FI_ON,
                               prediction="warm: the warmup takes this route"))
    for k in ("unseeded", "greedy", "no_filter")])
def test_a_control_other_requests_are_warm_on_0_20_0(gpu_case, kind):
    assert_warm(gpu_case)


@pytest.mark.gpu
@case("a-control-default", "0.20.0", "seeded",
      prediction="warm: without FlashInfer the warmup itself runs the Triton kernel")
def test_a_control_seeded_is_warm_on_0_20_0_default_config(gpu_case):
    assert gpu_case["sampler_forward"] == "forward_native", describe(gpu_case)
    assert_warm(gpu_case)


# --- (b, c) the fix: a fixed file and the plugin -----------------------------------------

@pytest.mark.gpu
@case("b", "0.20.0", "seeded", warmup="fixed", env=FI_ON,
      prediction="warm: the warmup `warmlint fix` wrote compiles the seeded route")
def test_b_fixed_warmup_makes_seeded_request_warm(gpu_case):
    assert TOPK_TOPP in gpu_case["warmup"]["events"]["triton_kernels"], gpu_case["warmup"]
    assert_warm(gpu_case)


@pytest.mark.gpu
@case("c", "0.20.0", "seeded", warmup="plugin", env=FI_ON,
      prediction="warm: the plugin's upgraded warmup compiles the seeded route")
def test_c_plugin_warmup_makes_seeded_request_warm(gpu_case):
    assert gpu_case["warmup_source"]["plugin_changed"], "the plugin left 0.20.0's warmup as is"
    assert TOPK_TOPP in gpu_case["warmup"]["events"]["triton_kernels"], gpu_case["warmup"]
    assert_warm(gpu_case)


# --- (d) 0.21.0 ----------------------------------------------------------------------

@pytest.mark.gpu
@case("d", "0.21.0", "seeded", prediction="warm: 0.21.0 warms the seeded route itself")
def test_d_seeded_request_is_warm_on_0_21_0(gpu_case):
    assert_warm(gpu_case)


# --- (e, f, g, h) what warmlint still reports on both releases -------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("release", [
    pytest.param(r, marks=case(f"e-{r}", r, "logprobs", prediction=(
        "WL001: max_num_logprobs reaches torch.compile'd batched_count_greater_than")))
    for r in ("0.20.0", "0.21.0")])
def test_e_logprobs_request_compiles_batched_count_greater_than(gpu_case, release):
    assert first(gpu_case)["dynamo"] >= 1, describe(gpu_case)


@pytest.mark.gpu
@pytest.mark.parametrize("release", [
    pytest.param(r, marks=case(f"f-{r}", r, "token_logprobs", prediction=(
        "WL001: logprob_token_ids reaches Triton _topk_log_softmax_kernel")))
    for r in ("0.20.0", "0.21.0")])
def test_f_token_logprobs_request_compiles_topk_log_softmax(gpu_case, release):
    assert "_topk_log_softmax_kernel" in first(gpu_case)["triton_kernels"], describe(gpu_case)


@pytest.mark.gpu
@case("g", "0.21.0", "seeded", batch=37, prediction=(
    "WL004: BATCH_SIZE=37 (not a multiple of 16) recompiles _topk_topp_kernel"))
def test_g_odd_batch_recompiles_topk_topp_kernel(gpu_case):
    assert TOPK_TOPP in first(gpu_case)["triton_kernels"], describe(gpu_case)


@pytest.mark.gpu
@case("g-fixed", "0.21.0", "seeded", batch=37, warmup="fixed", prediction=(
    "warm: `warmlint fix` (WL004) adds a warmup batch of 8 rows, the missing BATCH_SIZE class"))
def test_g_fixed_warmup_covers_the_odd_batch(gpu_case):
    assert_warm(gpu_case)


@pytest.mark.gpu
@case("h", "0.21.0", "topk_only", env={"VLLM_USE_FLASHINFER_SAMPLER": "0"}, prediction=(
    "WL004: TOPP_ENABLED=False is a new constexpr variant of _topk_topp_kernel"))
def test_h_top_k_only_request_recompiles_topk_topp_kernel(gpu_case):
    # With FlashInfer off every request takes the Triton kernel; the warmup compiled only
    # the variant with both top-k and top-p enabled.
    assert gpu_case["sampler_forward"] == "forward_native", describe(gpu_case)
    assert TOPK_TOPP in first(gpu_case)["triton_kernels"], describe(gpu_case)


# --- (i) a deployment with speculative decoding: its warmup also runs the rejection sampler

@pytest.mark.gpu
@case("i-logprobs", "0.20.0", "logprobs", speculative=True, prediction=(
    "WL001 sampler.py:116: the warmup's bonus-token call asks max_num_logprobs=-1 only, so a "
    "request's logprobs count still reaches torch.compile'd batched_count_greater_than"))
def test_i_logprobs_request_is_cold_with_speculation(gpu_case):
    # the stand-in deployment is speculative: its warmup ran the rejection sampler too
    assert "rejection_random_sample_kernel" in gpu_case["warmup"]["events"]["triton_kernels"]
    assert first(gpu_case)["dynamo"] >= 1, describe(gpu_case)


@pytest.mark.gpu
@case("i-spec-logprobs", "0.20.0", "spec_logprobs", speculative=True, prediction=(
    "WL001 rejection_sampler.py:182: max_num_logprobs reaches batched_count_greater_than "
    "through RejectionSampler._get_logprobs_tensors"))
def test_i_spec_logprobs_request_is_cold(gpu_case):
    assert first(gpu_case)["dynamo"] >= 1, describe(gpu_case)


@pytest.mark.gpu
@case("i-spec-greedy", "0.20.0", "spec_greedy", speculative=True, prediction=(
    "WL004 rejection_sampler.py:440: an all-greedy batch passes None for uniform_probs_ptr, "
    "a new specialization of rejection_greedy_sample_kernel"))
def test_i_all_greedy_spec_request_recompiles_the_greedy_kernel(gpu_case):
    assert "rejection_greedy_sample_kernel" in gpu_case["warmup"]["events"]["triton_kernels"]
    assert "rejection_greedy_sample_kernel" in first(gpu_case)["triton_kernels"], \
        describe(gpu_case)


@pytest.mark.gpu
@case("i-control-spec-random", "0.20.0", "spec_random", speculative=True, prediction=(
    "WL004 rejection_sampler.py:580: serving's int32 top_k (InputBatch) where the warmup "
    "passed int64 (torch.full of an int): a new pointer type for expand_kernel"))
def test_i_random_spec_request_recompiles_expand_kernel(gpu_case):
    # found on the GPU before warmlint predicted it (2026-12-02); predicted since stop 25
    assert "expand_kernel" in first(gpu_case)["triton_kernels"], describe(gpu_case)


# --- the harness itself, on any machine --------------------------------------------------

RUNNER = REPO / "fixtures" / "minivllm" / "vllm" / "v1" / "worker" / "gpu_model_runner.py"


def test_harness_reads_the_warmup_method_and_its_free_names():
    method = harness.read_method(RUNNER)
    assert method.node.name == "_dummy_sampler_run"
    assert method.text.startswith("@torch.inference_mode()")
    assert harness.free_names(method.text) == {"torch", "SamplingMetadata"}
    assert method.bindings["SamplingMetadata"] == ("vllm.v1.sample.metadata", "SamplingMetadata")


def test_harness_import_bindings_follow_runtime_rules():
    tree = ast.parse(
        "import torch.nn as nn\nimport os.path\nfrom . import envs\nfrom ..sample import x as y\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import hidden\n"
        "try:\n    from b import maybe\nexcept ImportError:\n    maybe = None\n")
    got = harness.import_bindings(tree, package="vllm.v1.worker")
    assert got["nn"] == ("torch.nn", None) and got["os"] == ("os", None)
    assert got["envs"] == ("vllm.v1.worker", "envs")
    assert got["y"] == ("vllm.v1.sample", "x") and got["maybe"] == ("b", "maybe")
    assert "hidden" not in got


def test_harness_compiles_a_method_given_as_text_with_unavailable_names():
    text = ("def _dummy_sampler_run(self, h):\n    f = lambda v: (helper(v), self)\n"
            "    if self.spec:\n        return Missing.make()\n    return f(h)\n")
    method = harness.method_from_text(text, "<test>", {"helper": ("builtins", "abs")})
    assert harness.free_names(method.text) == {"helper", "Missing"}
    namespace, unresolved = harness.resolve(method)
    assert namespace["helper"] is abs and "Missing" in unresolved
    function = harness.compile_method(method, namespace)

    class Runner:
        spec = False

    assert function(Runner(), -3)[0] == 3
    Runner.spec = True
    with pytest.raises(NameError, match="Missing is unavailable"):
        function(Runner(), 1)


def test_jit_events_count_nothing_for_an_empty_block():
    with JitEvents() as events:
        pass
    assert events.total == 0 and events.triton_kernels == []
    assert set(events.available) == {"triton", "dynamo", "flashinfer"}


def test_jit_events_chain_and_restore_triton_hooks(monkeypatch):
    seen = []
    runtime = types.SimpleNamespace(jit_cache_hook=None,
                                    jit_post_compile_hook=lambda **kw: seen.append(kw.get("key")))
    previous = runtime.jit_post_compile_hook
    fake = types.ModuleType("triton")
    fake.__version__, fake.knobs = "3.6.0", types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "triton", fake)
    kernel = types.SimpleNamespace(name="_topk_topp_kernel")
    with JitEvents() as events:
        assert runtime.jit_cache_hook(key="k", fn=kernel) is None  # never skips a compile
        runtime.jit_post_compile_hook(key="k", fn=kernel, is_manual_warmup=False)
        runtime.jit_post_compile_hook()  # a Triton with other kwargs must not break
    assert events.triton == 2 and events.triton_kernels == ["_topk_topp_kernel", "<unknown>"]
    assert seen == ["k", None] and events.triton_events[0]["seconds"] is not None
    assert runtime.jit_post_compile_hook is previous and runtime.jit_cache_hook is None


def test_jit_events_tell_flashinfer_builds_from_loads(monkeypatch, tmp_path):
    class JitSpec:
        is_aot = False

        def __init__(self, name):
            self.name, self.jit_library_path = name, tmp_path / name / f"{name}.so"

        def build_and_load(self):  # stands in for ninja + tvm_ffi.load_module
            if not self.jit_library_path.exists():
                self.jit_library_path.parent.mkdir(parents=True)
                self.jit_library_path.write_bytes(b"so")
            return "module"

    core = types.ModuleType("flashinfer.jit.core")
    core.JitSpec = JitSpec
    for name, module in (("flashinfer", types.ModuleType("flashinfer")),
                         ("flashinfer.jit", types.ModuleType("flashinfer.jit")),
                         ("flashinfer.jit.core", core)):
        monkeypatch.setitem(sys.modules, name, module)
    original = JitSpec.build_and_load
    spec = JitSpec("sampling")
    with JitEvents() as events:
        assert spec.build_and_load() == "module" and spec.build_and_load() == "module"
    assert events.flashinfer == 1 and events.flashinfer_loads == 2 and events.total >= 1
    assert [e["built"] for e in events.flashinfer_events] == [True, False]
    assert JitSpec.build_and_load is original


def test_case_runner_writes_its_json_even_when_it_cannot_run(tmp_path):
    out = tmp_path / "case.json"
    proc = subprocess.run(
        [sys.executable, "-m", "warmlint.runtime.case", "--release-dir", str(tmp_path / "none"),
         "--json", str(out), "--env", "VLLM_USE_FLASHINFER_SAMPLER=1",
         "--cache-root", str(tmp_path / "caches"), "--speculative", "--kind", "spec_greedy"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    assert result["status"] in ("error", "skipped"), result
    assert proc.returncode == (1 if result["status"] == "error" else 0)
    assert result["env"] == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
    assert result["kind"] == "spec_greedy"


def test_spec_kinds_map_to_request_kinds_the_metadata_builder_knows():
    assert set(harness.SPEC_KINDS.values()) <= set(harness.KINDS)
    assert not set(harness.SPEC_KINDS) & set(harness.KINDS)


def test_run_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(REPO / "tools" / "run_gpu_tests.sh")], check=True)
