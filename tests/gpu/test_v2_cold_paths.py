"""The model runner v2 (vLLM 0.26.0, ``vllm/v1/worker/gpu/``) on a GPU, and its harness on CPU.

Each ``gpu`` test is one case (conftest.py) run with ``--runner v2``: a fresh process
builds the release's real v2 ``Sampler`` on a real ``RequestState``/``InputBuffers``, runs
the start-up a v2 worker runs (``_dummy_sampler_run`` from the release's file, then the
sampler steps of ``warmup_kernels`` with ``SamplingParams.for_sampler_warmup()``), then
admits one request batch and samples it twice, counting JIT events in the first step.

0.26.0 turns FlashInfer sampling on by default (``VLLM_USE_FLASHINFER_SAMPLER``). Its v2
sampler then takes FlashInfer's fused top-k/top-p path unless a request is greedy, has its
own seed, or asks for processed logprobs (``Sampler.sample``); both warmups take only the
fused path or no top-k/top-p at all, so the first seeded request, or the first batch that
mixes greedy and top-k requests, compiles the Triton ``_topk_topp_kernel`` (seconds).

The tests without the ``gpu`` mark check, on any machine, that the harness's assumptions
still hold in the release's own files (network: the release is fetched once and cached).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from warmlint.runtime import harness, harness_v2

REPO = Path(__file__).resolve().parents[2]
V2 = "0.26.0"
TOPK_TOPP = "_topk_topp_kernel"


def case(id, kind, batch=256, warmup="original", env=None, prediction=""):
    return pytest.mark.gpu_case(id=id, release=V2, kind=kind, batch=batch, warmup=warmup,
                                env=env or {}, prediction=prediction, runner="v2")


def first(result) -> dict:
    return result["request"]["events"]


def describe(result) -> str:
    req = result["request"]
    counts = {k: req["events"][k] for k in ("triton", "triton_kernels", "dynamo", "flashinfer")}
    return (f"first step {req['first_s']} s, second {req['second_s']} s, events {counts}, "
            f"sampler {result.get('sampler_forward')}, warmup {result.get('warmup', {}).get('parts')}")


def assert_v2_startup(result) -> None:
    """The case ran the v2 runner, with FlashInfer sampling, through both warmup parts."""
    assert result["runner"] == "v2", result.get("runner")
    assert result["runner_build"]["use_flashinfer"], \
        "FlashInfer sampling is off, so this case does not test the v2 fused-path dispatch"
    parts = result["warmup"]["parts"]
    assert set(parts) == {"_dummy_sampler_run", "warmup_kernels"}, parts
    assert result["warmup"]["memory_peak_bytes"] > 0 and result["warmup"]["seconds"] > 0


@pytest.mark.gpu
@case("v2-seeded", "seeded", prediction=(
    "cold: a per-request seed takes the v2 sampler off FlashInfer's fused path "
    "(any_explicit_seed) to apply_top_k_top_p -> Triton _topk_topp_kernel, which neither "
    "warmup compiles"))
def test_v2_seeded_request_is_cold_on_0_26_0(gpu_case):
    assert_v2_startup(gpu_case)
    assert TOPK_TOPP not in gpu_case["warmup"]["events"]["triton_kernels"], gpu_case["warmup"]
    assert TOPK_TOPP in first(gpu_case)["triton_kernels"], describe(gpu_case)
    req = gpu_case["request"]
    assert req["first_s"] > 3 * req["second_s"] and req["first_s"] - req["second_s"] > 0.2, \
        describe(gpu_case)


@pytest.mark.gpu
@case("v2-mixed", "mixed", prediction=(
    "cold: a greedy request in a top-k batch takes it off the fused path (any_greedy) to "
    "the Triton _topk_topp_kernel"))
def test_v2_greedy_and_top_k_in_one_batch_is_cold(gpu_case):
    assert_v2_startup(gpu_case)
    assert TOPK_TOPP in first(gpu_case)["triton_kernels"], describe(gpu_case)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [
    pytest.param(k, marks=case(f"v2-control-{k}", k, prediction=why)) for k, why in (
        ("unseeded", "warm: warmup_kernels' requests take the same fused FlashInfer path"),
        ("greedy", "warm: _dummy_sampler_run's empty state is greedy without top-k/top-p"))])
def test_v2_controls_are_warm(gpu_case, kind):
    assert_v2_startup(gpu_case)
    assert first(gpu_case)["total"] == 0, "expected no JIT event: " + describe(gpu_case)


# --- on any machine: the harness against the release's own files ----------------------

@pytest.fixture(scope="module")
def v2_release() -> Path:
    from warmlint.download import DownloadError, fetch_release

    try:
        return Path(fetch_release(V2, cache_dir=REPO / ".cache" / "warmlint", progress=False))
    except DownloadError as exc:  # pragma: no cover - offline
        pytest.skip(f"vLLM {V2} is not cached and cannot be fetched: {exc}")


def _class_method(path: Path, cls: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    [node] = [item for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls
              for item in c.body if isinstance(item, ast.FunctionDef) and item.name == name]
    return node


def _calls(node, attr: str) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call)
            and isinstance(c.func, (ast.Attribute, ast.Name))
            and getattr(c.func, "attr", getattr(c.func, "id", None)) == attr]


@pytest.mark.network
def test_v2_dummy_sampler_run_is_read_from_the_release_and_runs_on_a_stand_in(v2_release):
    """The real 0.26.0 method, compiled on its own, does what the stand-in provides for."""
    method = harness.read_method(v2_release / harness_v2.RUNNER_FILE,
                                 package=harness_v2.RUNNER_PACKAGE)
    assert method.text.startswith("@torch.inference_mode()")
    assert harness.free_names(method.text) == {"torch", "InputBatch"}
    assert method.bindings["InputBatch"] == ("vllm.v1.worker.gpu.input_batch", "InputBatch")
    calls = []
    fake_torch = types.SimpleNamespace(inference_mode=lambda: (lambda f: f), Tensor=object)

    class InputBatch:
        @staticmethod
        def make_dummy(num_reqs, num_tokens, input_buffers):
            calls.append(("make_dummy", num_reqs, num_tokens, input_buffers))
            return "batch"

    function = harness.compile_method(method, {"torch": fake_torch, "InputBatch": InputBatch},
                                      harness_v2.RUNNER_MODULE)
    assert function.__globals__["__name__"] == "vllm.v1.worker.gpu.model_runner"
    hidden = types.SimpleNamespace(shape=(256, 4096))
    runner = types.SimpleNamespace(
        model=types.SimpleNamespace(compute_logits=lambda h: ("logits", h.shape)),
        input_buffers="buffers", sampler=lambda logits, batch: calls.append((logits, batch)))
    function(runner, hidden)
    assert calls == [("make_dummy", 256, 256, "buffers"), (("logits", (256, 4096)), "batch")]
    # what it reads from self is what V2StandInRunner carries
    reads = {n.attr for n in ast.walk(method.node) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "self"}
    assert reads == {"model", "input_buffers", "sampler"}


@pytest.mark.network
def test_v2_sampler_is_built_with_the_keywords_load_model_passes(v2_release):
    load_model = _class_method(v2_release / harness_v2.RUNNER_FILE, "GPUModelRunner",
                               "load_model")
    [call] = _calls(load_model, "Sampler")
    assert tuple(k.arg for k in call.keywords) == harness_v2.SAMPLER_KEYWORDS
    assert not call.args


@pytest.mark.network
def test_v2_requests_are_admitted_as_add_requests_does(v2_release):
    add_requests = _class_method(v2_release / harness_v2.RUNNER_FILE, "GPUModelRunner",
                                 "add_requests")
    [states] = [c for c in _calls(add_requests, "add_request")
                if "req_states" in ast.unparse(c.func)]
    assert {k.arg for k in states.keywords} == {"req_id", "prompt_len", "all_token_ids",
                                                "num_computed_tokens", "max_tokens"}
    [sampler] = [c for c in _calls(add_requests, "add_request")
                 if ast.unparse(c.func) == "self.sampler.add_request"]
    assert len(sampler.args) == 3 and not sampler.keywords  # (req_index, prompt_len, params)
    names = {n.attr for n in ast.walk(add_requests) if isinstance(n, ast.Attribute)}
    assert "apply_staged_writes" in names


@pytest.mark.network
def test_warmup_kernels_replay_matches_the_release(v2_release):
    """run_warmup_kernels replays warmup_kernels' sampler part: its params and shapes."""
    source = (v2_release / "vllm/v1/worker/gpu/warmup.py").read_text()
    tree = ast.parse(source)
    [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "warmup_kernels"]
    text = ast.unparse(fn)
    assert "sampling_params = SamplingParams.for_sampler_warmup()" in text
    assert "prompt_len = decode_query_len + 1" in text
    assert "model_runner.scheduler_config.max_num_seqs" in text
    assert "model_runner.scheduler_config.max_num_batched_tokens // max(prompt_len, " \
           "decode_query_len)" in text
    assert text.count("worker_sample_tokens(") == 2  # a prefill step and a decode step
    worker = (v2_release / "vllm/v1/worker/gpu_worker.py").read_text()
    # vLLM's order: profile_run (_dummy_sampler_run) first, then warmup_kernels
    assert worker.index("self.model_runner.profile_run()") < \
        worker.index("warmup_kernels(self.model_runner")


@pytest.mark.network
def test_uva_stand_in_replaces_the_name_buffer_utils_calls(v2_release):
    source = (v2_release / "vllm/v1/worker/gpu/buffer_utils.py").read_text()
    assert "from vllm.utils.torch_utils import (" in source
    assert "self.uva = get_accelerator_view_from_cpu_tensor(self.cpu)" in source
    torch_utils = (v2_release / "vllm/utils/torch_utils.py").read_text()
    assert "torch.ops._C.get_cuda_view_from_cpu_tensor(cpu_tensor)" in torch_utils


def test_v2_load_warmup_refuses_the_v1_plugin(tmp_path):
    with pytest.raises(ValueError, match="v1 runner's warmup only"):
        harness_v2.load_warmup(tmp_path, "plugin")
    assert harness_v2.load_warmup(tmp_path, "none") == (None, {"mode": "none"})


def test_sampler_kwargs_follow_the_release_signature():
    runner = types.SimpleNamespace(
        max_num_reqs=256, vocab_size=128_256, device="cuda:0", req_states="states",
        decode_query_len=1, model_config=types.SimpleNamespace(logprobs_mode="raw_logprobs",
                                                               use_fp64_gumbel=False))

    class Sampler:  # 0.26.0's parameters
        def __init__(self, max_num_reqs, vocab_size, device, req_states,
                     logprobs_mode="raw_logprobs", num_speculative_tokens=1,
                     use_fp64_gumbel=False):
            pass

    assert set(harness_v2.sampler_kwargs(Sampler, runner)) == set(harness_v2.SAMPLER_KEYWORDS)

    class Older:  # a release without use_fp64_gumbel gets no such keyword
        def __init__(self, max_num_reqs, vocab_size, device, req_states, logprobs_mode="raw"):
            pass

    assert "use_fp64_gumbel" not in harness_v2.sampler_kwargs(Older, runner)

    class Newer:
        def __init__(self, max_num_reqs, vocab_size, device, req_states, new_thing):
            pass

    with pytest.raises(TypeError, match="new_thing"):
        harness_v2.sampler_kwargs(Newer, runner)
