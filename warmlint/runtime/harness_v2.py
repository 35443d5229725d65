"""The model runner v2 (``vllm/v1/worker/gpu/``) on a stand-in runner: its real sampler,
its real warmup, then one request batch admitted and sampled the way the v2 runner does.

What is vLLM's own code here, taken from the release at run time:

* the v2 ``Sampler`` (``vllm/v1/worker/gpu/sample/sampler.py``), built with the keywords
  ``GPUModelRunner.load_model`` passes, on a real ``RequestState`` and ``InputBuffers``
  built as ``GPUModelRunner.__init__`` builds them;
* ``GPUModelRunner._dummy_sampler_run`` read from the release's ``model_runner.py`` (or a
  fixed copy, ``file:PATH``) and compiled on its own (``methods``), bound to the stand-in;
* requests: real ``SamplingParams`` admitted through ``RequestState.add_request``,
  ``Sampler.add_request(req_idx, prompt_len, params)`` and ``apply_staged_writes()``;
  batches from the real ``InputBatch.make_dummy``, pointed at the admitted requests.

The start-up a v2 worker runs before serving has two sampler parts, and both run here in
vLLM's order: ``profile_run`` calls ``_dummy_sampler_run`` on empty request state (every
sampling feature off: greedy, no top-k/top-p), then ``warmup_kernels``
(``vllm/v1/worker/gpu/warmup.py``) sends requests with
``SamplingParams.for_sampler_warmup()`` (every feature on) through a prefill step and a
decode step. ``warmup_kernels`` drives the whole model (scheduler outputs, KV blocks,
attention), which the stand-in does not have, so ``run_warmup_kernels`` replays only what
it does to the sampler: the same number of requests with the release's own warmup
``SamplingParams``, admitted and sampled in a prefill-shaped and a decode-shaped batch. Not
replayed (no sampler code): the grammar bitmask, prompt logprobs, ``post_update``'s
counters between the steps. ``--no-warmup-kernels`` runs ``_dummy_sampler_run`` alone.

The compiled op the state buffers need is stood in by ``uva`` (zero-copy, as vLLM's).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
from pathlib import Path

from warmlint.runtime.first_profile import FirstStepProfile
from warmlint.runtime.harness import LMHead, StandInConfig, _now, _sync
from warmlint.runtime.methods import compile_method, free_names, read_method, resolve
from warmlint.runtime.requests import Kind, parse_kind, token_ids

RUNNER_FILE = Path("vllm/v1/worker/gpu/model_runner.py")
RUNNER_MODULE = "vllm.v1.worker.gpu.model_runner"
RUNNER_PACKAGE = "vllm.v1.worker.gpu"
# What GPUModelRunner.load_model passes to Sampler(...) in 0.26.0 (a CPU test checks the
# release's own call against this list).
SAMPLER_KEYWORDS = ("max_num_reqs", "vocab_size", "device", "req_states", "logprobs_mode",
                    "num_speculative_tokens", "use_fp64_gumbel")
PROMPT_LEN = 8  # prompt tokens of a request under test (its first step is its prefill)
RANDOM = {"temperature": 0.8, "top_k": 50, "top_p": 0.9}


def load_warmup(release_dir, mode: str):
    """(function or None, info) for mode ``original`` | ``file:PATH`` | ``none``."""
    release_dir = Path(release_dir)
    if mode == "none":
        return None, {"mode": mode}
    if mode == "plugin":
        raise ValueError("warmlint.plugin upgrades the v1 runner's warmup only; for v2 give "
                         "a fixed vllm/v1/worker/gpu/model_runner.py as file:PATH")
    if mode != "original" and not mode.startswith("file:"):
        raise ValueError(f"unknown warmup mode {mode!r}")
    path = Path(mode[5:]) if mode.startswith("file:") else release_dir / RUNNER_FILE
    method = read_method(path, package=RUNNER_PACKAGE)
    extra = {}
    if "envs" in free_names(method.text) and "envs" not in method.bindings:
        extra["envs"] = importlib.import_module("vllm.envs")
    namespace, unresolved = resolve(method, extra)
    info = {"mode": mode, "source": str(path), "names": sorted(namespace),
            "unresolved": unresolved}
    return compile_method(method, namespace, RUNNER_MODULE), info


# --- the stand-in runner --------------------------------------------------------------

class V2StandInRunner:
    """What the v2 ``_dummy_sampler_run`` reads from ``self`` (``model``, ``input_buffers``,
    ``sampler``), the request state it shares with the sampler, and the config attributes a
    real v2 GPUModelRunner has, for guards a fixed warmup may add."""

    def __init__(self, model: LMHead, device, *, max_num_seqs: int, max_model_len: int,
                 max_num_batched_tokens: int, logprobs_mode: str, use_fp64_gumbel: bool) -> None:
        self.model, self.device = model, device
        self.defaulted: list = []
        self.vocab_size, self.max_num_reqs = model.vocab, max_num_seqs
        self.max_model_len, self.max_num_tokens = max_model_len, max_num_batched_tokens
        self.num_speculative_steps = 0
        self.decode_query_len = 1  # num_speculative_steps + the model state's 1 new token
        model_config = StandInConfig("model_config", self.defaulted, logprobs_mode=logprobs_mode,
                                     use_fp64_gumbel=use_fp64_gumbel, dtype=model.dtype,
                                     runner_type="generate", multimodal_config=None)
        scheduler_config = StandInConfig("scheduler_config", self.defaulted,
                                         max_num_seqs=max_num_seqs,
                                         max_num_batched_tokens=max_num_batched_tokens)
        self.vllm_config = StandInConfig("vllm_config", self.defaulted, model_config=model_config,
                                         scheduler_config=scheduler_config,
                                         speculative_config=None, lora_config=None)
        self.model_config, self.scheduler_config = model_config, scheduler_config
        self.speculative_config = self.lora_config = None
        self.rejection_sampler = self.speculator = self.pooling_runner = None
        self.is_pooling_model, self.is_last_pp_rank, self.is_first_pp_rank = False, True, True
        self.sampler = self.req_states = self.input_buffers = None

    def __getattr__(self, name: str):
        raise AttributeError(f"the v2 stand-in runner has no {name!r}: the warmup reads "
                             f"something warmlint/runtime/harness_v2.py does not provide yet")

    def bind(self, function) -> None:
        self._dummy_sampler_run = types.MethodType(function, self)


def sampler_kwargs(sampler_cls, runner: V2StandInRunner) -> dict:
    """The keywords load_model passes, as far as this release's ``Sampler`` takes them."""
    values = {"max_num_reqs": runner.max_num_reqs, "vocab_size": runner.vocab_size,
              "device": runner.device, "req_states": runner.req_states,
              "logprobs_mode": runner.model_config.logprobs_mode,
              "num_speculative_tokens": runner.decode_query_len,
              "use_fp64_gumbel": runner.model_config.use_fp64_gumbel}
    params = inspect.signature(sampler_cls).parameters
    missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty
               and p.kind is not p.VAR_KEYWORD and p.kind is not p.VAR_POSITIONAL
               and n not in values]
    if missing:
        raise TypeError(f"this release's v2 Sampler needs {missing}; teach harness_v2")
    return {k: v for k, v in values.items() if k in params}


def _model_config_default(name: str, fallback):
    """A ModelConfig field's default in this release (what an unconfigured server uses)."""
    try:
        from vllm.config.model import ModelConfig

        field = {f.name: f for f in dataclasses.fields(ModelConfig)}[name]
        if field.default is not dataclasses.MISSING:
            return field.default
    except Exception:  # noqa: BLE001 - an older layout: the documented default
        pass
    return fallback


def build_runner(*, logprobs_mode: str = "raw_logprobs", vocab: int = 128_256,
                 hidden: int = 4096, device: str = "cuda:0", dtype: str = "bfloat16",
                 max_num_seqs: int = 256, max_model_len: int = 2048,
                 max_num_batched_tokens: int = 8192):
    """(runner, info): the stand-in with a real v2 Sampler, RequestState and InputBuffers."""
    import torch

    from warmlint.runtime import uva

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    info = {"uva": uva.install(device.type)}
    from vllm.v1.worker.gpu.input_batch import InputBuffers
    from vllm.v1.worker.gpu.sample.sampler import Sampler
    from vllm.v1.worker.gpu.states import RequestState

    model = LMHead(vocab, hidden, device, getattr(torch, dtype))
    use_fp64 = _model_config_default("use_fp64_gumbel", False)
    runner = V2StandInRunner(model, device, max_num_seqs=max_num_seqs,
                             max_model_len=max_model_len,
                             max_num_batched_tokens=max_num_batched_tokens,
                             logprobs_mode=logprobs_mode, use_fp64_gumbel=use_fp64)
    # As GPUModelRunner.__init__ builds them.
    runner.req_states = RequestState(
        max_num_reqs=max_num_seqs, max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        num_speculative_steps=runner.num_speculative_steps, vocab_size=vocab, device=device)
    runner.input_buffers = InputBuffers(max_num_reqs=max_num_seqs,
                                        max_num_tokens=max_num_batched_tokens, device=device)
    kwargs = sampler_kwargs(Sampler, runner)  # as GPUModelRunner.load_model builds it
    runner.sampler = Sampler(**kwargs)
    info["sampler_kwargs"] = {k: (v if isinstance(v, (int, str, bool)) else type(v).__name__)
                              for k, v in kwargs.items()}
    info["use_flashinfer"] = bool(getattr(runner.sampler, "use_flashinfer", False))
    return runner, info


# --- requests ----------------------------------------------------------------------------

def request_params(kind: Kind | str, batch: int, seed: int = 0) -> list:
    """Real ``SamplingParams`` for a batch of this kind (as the v1 harness's metadata:
    ``seeded`` seeds request 0 only, ``mixed`` makes even requests greedy,
    ``token_logprobs`` asks request 0 for its token ids, ``logprobs`` every request)."""
    from vllm.sampling_params import SamplingParams

    kind = parse_kind(kind, "v2") if isinstance(kind, str) else kind

    def one(i: int):
        base = kind.base
        if base == "seeded":
            return SamplingParams(**RANDOM, seed=seed) if i == 0 else SamplingParams(**RANDOM)
        if base == "unseeded":
            return SamplingParams(**RANDOM)
        if base == "greedy" or (base == "mixed" and i % 2 == 0):
            return SamplingParams(temperature=0.0)
        if base == "mixed":
            return SamplingParams(**RANDOM)
        if base == "topk_only":
            return SamplingParams(temperature=0.8, top_k=50)
        if base == "topp_only":
            return SamplingParams(temperature=0.8, top_p=0.9)
        if base == "no_filter":
            return SamplingParams(temperature=0.8)
        if base == "logprobs":
            return SamplingParams(**RANDOM, logprobs=kind.n)
        if base == "token_logprobs":
            return SamplingParams(**RANDOM, logprob_token_ids=token_ids(kind.n)) if i == 0 \
                else SamplingParams(**RANDOM)
        raise ValueError(f"the v2 harness cannot build request kind {kind.text!r}")

    return [one(i) for i in range(batch)]


def admit(runner: V2StandInRunner, params: list, prompt_len: int, prefix: str) -> list:
    """Admit requests as ``GPUModelRunner.add_requests`` does; [(req_id, req_idx)]."""
    admitted = []
    for i, sampling_params in enumerate(params):
        req_id = f"{prefix}{i}"
        prompt = list(range(1, prompt_len + 1))
        runner.req_states.add_request(req_id=req_id, prompt_len=prompt_len,
                                      all_token_ids=prompt, num_computed_tokens=0,
                                      max_tokens=sampling_params.max_tokens)
        req_idx = runner.req_states.req_id_to_index[req_id]
        runner.sampler.add_request(req_idx, prompt_len, sampling_params)
        admitted.append((req_id, req_idx))
    runner.req_states.apply_staged_writes()
    runner.sampler.apply_staged_writes()
    return admitted


def release(runner: V2StandInRunner, admitted: list) -> None:
    for req_id, _ in admitted:
        runner.req_states.remove_request(req_id)


def make_batch(runner: V2StandInRunner, admitted: list, tokens_per_req: int, seq_len: int):
    """A real ``InputBatch.make_dummy`` batch pointed at the admitted requests' state slots
    (``make_dummy`` maps batch row i to slot i, admission hands out slots from the top)."""
    import numpy as np
    import torch
    from vllm.v1.worker.gpu.input_batch import InputBatch

    n = len(admitted)
    batch = InputBatch.make_dummy(n, n * tokens_per_req, runner.input_buffers)
    batch.seq_lens.fill_(seq_len)  # a view of input_buffers, as the real prepare step fills
    first_pos = seq_len - tokens_per_req
    batch.positions.copy_(torch.arange(first_pos, seq_len, device=runner.device,
                                       dtype=batch.positions.dtype).repeat(n))
    idx_np = np.array([idx for _, idx in admitted], dtype=np.int32)
    idx = torch.from_numpy(idx_np).to(runner.device)
    return dataclasses.replace(batch, req_ids=[r for r, _ in admitted], idx_mapping=idx,
                               idx_mapping_np=idx_np, expanded_idx_mapping=idx)


def _logits(runner: V2StandInRunner, rows: int, seed: int):
    import torch

    gen = torch.Generator(device=runner.device).manual_seed(seed)
    hidden = torch.rand(rows, runner.model.hidden_size, generator=gen,
                        dtype=runner.model.dtype, device=runner.device)
    return runner.model.compute_logits(hidden)


# --- warmup ------------------------------------------------------------------------------

def run_warmup_kernels(runner: V2StandInRunner) -> dict:
    """The sampler part of the release's ``warmup_kernels``: its requests, its two steps."""
    from vllm.sampling_params import SamplingParams

    prompt_len = runner.decode_query_len + 1  # as warmup_kernels: decode_query_len + 1
    num_reqs = min(runner.max_num_reqs,
                   runner.max_num_tokens // max(prompt_len, runner.decode_query_len))
    import torch

    params = SamplingParams.for_sampler_warmup()
    with torch.inference_mode():  # warmup_kernels is an inference_mode function
        admitted = admit(runner, [params] * num_reqs, prompt_len, "_warmup_")
        logits = _logits(runner, num_reqs, seed=7)
        # step 1: the prefill (prompt_len tokens each), step 2: a decode step
        runner.sampler(logits.clone(), make_batch(runner, admitted, prompt_len, prompt_len))
        runner.sampler(logits.clone(), make_batch(runner, admitted, runner.decode_query_len,
                                                  prompt_len + runner.decode_query_len))
        release(runner, admitted)
    return {"num_reqs": num_reqs, "prompt_len": prompt_len,
            "sampling_params": repr(params)}


def run_warmup(runner: V2StandInRunner, batch: int, kernels: bool = True) -> dict:
    """``_dummy_sampler_run`` on ``batch`` rows (profile_run), then ``run_warmup_kernels``:
    JIT events, wall time and peak GPU memory of the whole start-up and of each part."""
    import torch

    from warmlint.runtime.jitcount import JitEvents

    cuda = runner.device.type == "cuda"
    hidden = torch.zeros(batch, runner.model.hidden_size, dtype=runner.model.dtype,
                         device=runner.device)
    _sync(runner.device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(runner.device)
    base = torch.cuda.memory_allocated(runner.device) if cuda else 0
    parts = {}
    with JitEvents() as events:
        begin = _now()
        with JitEvents() as part:
            runner._dummy_sampler_run(hidden)
            _sync(runner.device)
        parts["_dummy_sampler_run"] = {"seconds": round(_now() - begin, 4),
                                       "events": part.as_dict()}
        if kernels:
            middle = _now()
            with JitEvents() as part:
                detail = run_warmup_kernels(runner)
                _sync(runner.device)
            parts["warmup_kernels"] = {"seconds": round(_now() - middle, 4),
                                       "events": part.as_dict(), **detail}
        seconds = _now() - begin
    peak = torch.cuda.max_memory_allocated(runner.device) if cuda else 0
    return {"batch": batch, "seconds": round(seconds, 4), "events": events.as_dict(),
            "parts": parts, "memory_base_bytes": base, "memory_peak_bytes": peak,
            "memory_extra_bytes": peak - base,
            "config_fields_defaulted": sorted(set(runner.defaulted))}


# --- the request under test -----------------------------------------------------------

def run_steps(runner: V2StandInRunner, kind: str, batch: int, steps: int = 2,
              seed: int = 0, profile=None) -> list[tuple]:
    """[(JitEvents, seconds)] for a request batch's first ``steps`` sampler steps.

    Step 1 is what the batch's first step costs in vLLM: admitting the requests (their
    staged state writes run Triton kernels too) and sampling their prefill; later steps
    sample a decode step. Under ``torch.inference_mode()``, as vLLM's steps run.
    """
    import torch

    from warmlint.runtime.jitcount import JitEvents

    params = request_params(kind, batch, seed)
    profile = profile or FirstStepProfile(enabled=False)
    out = []
    with torch.inference_mode():
        logits = _logits(runner, batch, seed + 1)
        for step in range(steps):
            step_logits = logits.clone()  # the sampler edits its input in place
            _sync(runner.device)
            with JitEvents() as events, profile.step(step):
                begin = _now()
                if step == 0:
                    admitted = admit(runner, params, PROMPT_LEN, "req_")
                    input_batch = make_batch(runner, admitted, PROMPT_LEN, PROMPT_LEN)
                else:
                    input_batch = make_batch(runner, admitted, 1, PROMPT_LEN + step)
                runner.sampler(step_logits, input_batch)
                _sync(runner.device)
                seconds = _now() - begin
            out.append((events, seconds))
        release(runner, admitted)  # as a finished request frees its slot
    return out
