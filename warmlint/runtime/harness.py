"""Run a release's real ``GPUModelRunner._dummy_sampler_run`` without its module.

``vllm.v1.worker.gpu_model_runner`` does not import without vLLM's compiled ops, but the
warmup method needs little: it is read from the file with ``ast``, its free names are
imported from where that file imports them, and it is bound to a stand-in runner that
carries a real ``Sampler`` and a random ``lm_head``. The same works for the method taken
from a fixed file (``warmlint fix``) or from ``warmlint.plugin``.

Parsing needs only the standard library; torch and vLLM are imported when a runner is
built or a request is made.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from pathlib import Path

from warmlint.runtime.first_profile import FirstStepProfile
from warmlint.runtime.requests import BASE_KINDS, SPEC_KINDS, parse_kind, token_ids
from warmlint.runtime.methods import (  # re-exported for callers and tests
    Method, Unavailable, compile_method, free_names, import_bindings, method_from_text,
    read_method, resolve)

__all__ = ["KINDS", "SPEC_KINDS", "BATCHES", "LMHead", "Method", "StandInConfig", "StandInRunner",
           "Unavailable", "build_runner", "compile_method", "ensure_c_stubs", "first_step",
           "free_names", "import_bindings", "load_warmup", "make_metadata", "method_from_text",
           "read_method", "resolve", "run_steps", "run_warmup"]

RUNNER_FILE = Path("vllm/v1/worker/gpu_model_runner.py")
C_STUBS = ("_C", "_C_stable_libtorch")


def ensure_c_stubs(release_dir) -> list[str]:
    """Empty ``vllm._C`` stand-ins so ``vllm.platforms.cuda`` imports (sampling needs no op)."""
    package = Path(release_dir) / "vllm"
    made = []
    for name in C_STUBS:
        if any(package.glob(f"{name}.*.so")) or (package / f"{name}.py").exists():
            continue
        (package / f"{name}.py").write_text("# warmlint stand-in: compiled ops are not shipped\n")
        made.append(name)
    return made


def load_warmup(release_dir, mode: str):
    """(function or None, info) for mode ``original`` | ``file:PATH`` | ``plugin`` | ``none``."""
    release_dir = Path(release_dir)
    if mode == "none":
        return None, {"mode": mode}
    path = Path(mode[5:]) if mode.startswith("file:") else release_dir / RUNNER_FILE
    method = read_method(path)
    info = {"mode": mode, "source": str(path)}
    extra = {}
    if mode == "plugin":
        from warmlint import plugin

        from warmlint import plugin_defer

        # what the plugin ships in vLLM: WARMLINT_PLUGIN_FIX (default: the whole fix), its
        # added calls on WARMLINT_PLUGIN_THREADS threads (plugin_defer)
        found = plugin.fixed_upgrade(release_dir, choice=plugin.fix_choice())
        info["plugin_changed"] = found is not None
        if found is not None:
            upgraded, threads = plugin_defer.choose(found.source, found.inserted,
                                                    info.setdefault("warnings", []).append)
            method = method_from_text(upgraded, "<warmlint.plugin: _dummy_sampler_run>",
                                      method.bindings)
            extra[plugin_defer.DEFER] = plugin_defer.defer
            extra[getattr(plugin, "_REPLACE", "__warmlint_replace")] = dataclasses.replace
            info["source"] = method.filename
            info["text"] = method.text
            info["threads"] = threads
    elif mode != "original" and not mode.startswith("file:"):
        raise ValueError(f"unknown warmup mode {mode!r}")
    if "envs" in free_names(method.text) and "envs" not in method.bindings:
        extra["envs"] = importlib.import_module("vllm.envs")  # as the plugin's upgrade() does
    namespace, unresolved = resolve(method, extra)
    info["names"] = sorted(namespace)
    info["unresolved"] = unresolved
    function = compile_method(method, namespace)
    if info.get("threads", 1) > 1:  # as plugin_run runs it: every deferred call joined
        function = _deferring(function, info["threads"])
    return function, info


def _deferring(function, threads: int):
    from warmlint.plugin_defer import run_deferred

    def run(self, *args, **kwargs):
        return run_deferred(function, threads, self, *args, **kwargs)

    return run


# --- the stand-in runner --------------------------------------------------------------

class LMHead:
    """``compute_logits(hidden) = hidden @ W.T``: the only model call the warmup makes."""

    def __init__(self, vocab: int, hidden: int, device, dtype, seed: int = 0) -> None:
        import torch

        gen = torch.Generator(device=device).manual_seed(seed)
        self.vocab, self.hidden_size, self.dtype = vocab, hidden, dtype
        self.weight = torch.randn(vocab, hidden, generator=gen, device=device, dtype=dtype)
        self.weight.mul_(hidden ** -0.5)  # logits of order 1, as a trained head gives

    def compute_logits(self, hidden_states):
        return hidden_states @ self.weight.T


class StandInConfig(types.SimpleNamespace):
    """A vLLM config seen by the warmup: given fields as set; any other field reads as None
    (vLLM's default for optional sub-configs) and is logged in ``defaulted``, so a guard in
    a fixed warmup that reads a field the harness did not think of shows up in the JSON."""

    def __init__(self, path: str, defaulted: list, **fields) -> None:
        super().__init__(**fields)
        self._path, self._defaulted = path, defaulted

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._defaulted.append(f"{self._path}.{name}")
        return None


class StandInRunner:
    """What ``_dummy_sampler_run`` reads from ``self`` in vLLM 0.20.0 and 0.21.0, plus the
    config attributes a real GPUModelRunner has, for guards that ``warmlint fix`` adds."""

    def __init__(self, sampler, model: LMHead, device, max_num_seqs: int = 256) -> None:
        self.sampler, self.model, self.device = sampler, model, device
        self.defaulted: list = []
        model_config = StandInConfig("model_config", self.defaulted, multimodal_config=None,
                                     logprobs_mode=sampler.logprobs_mode, dtype=model.dtype)
        scheduler_config = StandInConfig("scheduler_config", self.defaulted,
                                         max_num_seqs=max_num_seqs)
        self.vllm_config = StandInConfig(
            "vllm_config", self.defaulted, model_config=model_config,
            scheduler_config=scheduler_config, speculative_config=None, lora_config=None)
        self.model_config, self.scheduler_config = model_config, scheduler_config
        self.speculative_config = self.lora_config = self.rejection_sampler = None
        self.max_num_reqs, self.is_pooling_model = max_num_seqs, False

    def __getattr__(self, name: str):
        raise AttributeError(f"the stand-in runner has no {name!r}: the warmup reads something "
                             f"warmlint/runtime/harness.py does not provide yet")

    def bind(self, function) -> None:
        self._dummy_sampler_run = types.MethodType(function, self)

    def enable_speculation(self) -> None:
        """A deployment with a drafter: the warmup then also runs the rejection sampler.
        (One draft token per request, no draft probabilities: what the warmup itself uses.)"""
        from vllm.v1.sample.rejection_sampler import RejectionSampler

        spec = StandInConfig("speculative_config", self.defaulted, method="ngram",
                             num_speculative_tokens=1)
        self.speculative_config = self.vllm_config.speculative_config = spec
        self.rejection_sampler = RejectionSampler(self.sampler)


def build_runner(*, logprobs_mode: str = "raw_logprobs", vocab: int = 128_256,
                 hidden: int = 4096, device: str = "cuda:0", dtype: str = "bfloat16",
                 max_num_seqs: int = 256, speculative: bool = False):
    import torch
    from vllm.v1.sample.sampler import Sampler

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model = LMHead(vocab, hidden, device, getattr(torch, dtype))
    runner = StandInRunner(Sampler(logprobs_mode=logprobs_mode), model, device, max_num_seqs)
    if speculative:
        runner.enable_speculation()
    return runner


def run_warmup(runner: StandInRunner, batch: int) -> dict:
    """Run the bound warmup on a (batch, hidden) input; its JIT events, time, peak memory."""
    import torch

    from warmlint.runtime.jitcount import JitEvents

    hidden = torch.zeros(batch, runner.model.hidden_size, dtype=runner.model.dtype,
                         device=runner.device)
    _sync(runner.device)
    cuda = runner.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(runner.device)
    base = torch.cuda.memory_allocated(runner.device) if cuda else 0
    with JitEvents() as events:
        begin = _now()
        output = runner._dummy_sampler_run(hidden)
        _sync(runner.device)
        seconds = _now() - begin
    peak = torch.cuda.max_memory_allocated(runner.device) if cuda else 0
    del output
    return {"batch": batch, "seconds": round(seconds, 4), "events": events.as_dict(),
            "memory_base_bytes": base, "memory_peak_bytes": peak,
            "memory_extra_bytes": peak - base,
            "config_fields_defaulted": sorted(set(runner.defaulted))}


def _now() -> float:
    from time import perf_counter

    return perf_counter()


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- requests --------------------------------------------------------------------------

KINDS = BASE_KINDS  # a kind may carry a count: "logprobs:20" (warmlint.runtime.requests)
BATCHES = (1, 37, 256)


def make_metadata(kind: str, batch: int, device, seed: int = 0):
    """A real ``SamplingMetadata`` shaped as vLLM's InputBatch makes it for such a batch.

    Dtypes follow InputBatch (top_k int32, temperature/top_p float32); fields a release
    lacks are left out, so it works across releases. ``seeded`` gives request 0 its own
    generator (``generators`` non-empty), which is what reroutes FlashInfer sampling.
    ``logprobs:N`` asks every request for N logprobs, ``token_logprobs:N`` request 0 for N
    token ids (``requests.token_ids``); without a count, 5 and 3 as the first GPU runs.
    """
    import torch
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    parsed = parse_kind(kind, "v1")
    if parsed.speculative:
        raise ValueError(f"{kind!r} is a rejection-sampler request; make_metadata takes "
                         f"its plain kind {parsed.base!r}")
    kind = parsed.base

    def full(value, dtype):
        return torch.full((batch,), value, dtype=dtype, device=device)

    temperature, top_k, top_p = full(0.8, torch.float32), full(50, torch.int32), \
        full(0.9, torch.float32)
    values = {"all_greedy": False, "all_random": True, "generators": {},
              "max_num_logprobs": None, "logprob_token_ids": None}
    if kind == "seeded":
        values["generators"] = {0: torch.Generator(device=device).manual_seed(seed)}
    elif kind == "greedy":
        temperature = top_k = top_p = None
        values.update(all_greedy=True, all_random=False)
    elif kind == "mixed":  # even requests greedy (temperature < eps), odd ones random
        temperature[::2] = 0.0
        values.update(all_random=False, all_greedy=batch == 1)
        temperature = None if batch == 1 else temperature
    elif kind in ("topk_only", "topp_only", "no_filter"):
        top_k = None if kind != "topk_only" else top_k
        top_p = None if kind != "topp_only" else top_p
    elif kind == "logprobs":
        values["max_num_logprobs"] = parsed.n
    elif kind == "token_logprobs":
        values["logprob_token_ids"] = {0: token_ids(parsed.n)}
    zeros = full(0.0, torch.float32)
    values.update(
        temperature=temperature, top_k=top_k, top_p=top_p, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=zeros, presence_penalties=zeros,
        repetition_penalties=full(1.0, torch.float32),
        output_token_ids=[[] for _ in range(batch)], spec_token_ids=[[] for _ in range(batch)],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors())
    fields = {f.name: f for f in dataclasses.fields(SamplingMetadata)}
    missing = [n for n, f in fields.items() if n not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TypeError(f"this release's SamplingMetadata needs {missing}; teach make_metadata")
    return SamplingMetadata(**{k: v for k, v in values.items() if k in fields})


def run_steps(runner: StandInRunner, kind: str, batch: int, steps: int = 2,
              seed: int = 0, profile=None) -> list[tuple]:
    """[(JitEvents, seconds)] for ``steps`` sampler calls on one request batch.

    Everything runs under ``torch.inference_mode()`` as vLLM's execute_model does: Dynamo
    guards on grad mode and on inference tensors, so outside it a compiled helper would
    recompile for a reason production never sees. ``SPEC_KINDS`` go through the runner's
    rejection sampler, as a decoding step with one draft token per request does.
    ``profile``: a ``first_profile.FirstStepProfile`` around each step (default: none).
    """
    import torch

    from warmlint.runtime.jitcount import JitEvents

    profile = profile or FirstStepProfile(enabled=False)
    out = []
    parsed = parse_kind(kind, "v1")
    with torch.inference_mode():
        plain = parsed.base if parsed.count is None else f"{parsed.base}:{parsed.count}"
        metadata = make_metadata(plain, batch, runner.device, seed)
        rows, call = batch, lambda logits: runner.sampler(logits=logits,
                                                          sampling_metadata=metadata)
        if parsed.speculative:
            if runner.rejection_sampler is None:
                raise ValueError(f"{kind} needs a runner with speculation enabled")
            from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

            spec = SpecDecodeMetadata.make_dummy([[0] for _ in range(batch)], runner.device)
            rows = 2 * batch  # a draft token and a bonus token per request
            call = lambda logits: runner.rejection_sampler(spec, None, logits, metadata)  # noqa: E731
        gen = torch.Generator(device=runner.device).manual_seed(seed + 1)
        hidden = torch.rand(rows, runner.model.hidden_size, generator=gen,
                            dtype=runner.model.dtype, device=runner.device)
        logits = runner.model.compute_logits(hidden)
        for step in range(steps):
            step_logits = logits.clone()  # the samplers may edit their input in place
            _sync(runner.device)
            with JitEvents() as events, profile.step(step):
                begin = _now()
                call(step_logits)
                _sync(runner.device)
                seconds = _now() - begin
            out.append((events, seconds))
    return out


def first_step(runner: StandInRunner, kind: str, batch: int):
    """(JIT events of the first step, first-step seconds, second-step seconds)."""
    (events, first), (_, second) = run_steps(runner, kind, batch, steps=2)
    return events, first, second
