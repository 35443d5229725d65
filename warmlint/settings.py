"""Resolved settings: defaults, then ``[tool.warmlint]`` of the analyzed tree, then flags.

Everything the analysis treats as vLLM-specific is data here, so a fork with renamed
classes or extra kernels configures it instead of patching warmlint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ASSUME: dict[str, Any] = {
    # The product is about CUDA serving; other platforms are opt-in with --assume.
    "current_platform.is_cuda()": True,
    "current_platform.is_cuda_alike()": True,
    "current_platform.is_rocm()": False,
    "current_platform.is_cpu()": False,
    "current_platform.is_xpu()": False,
    "current_platform.is_tpu()": False,
    "current_platform.is_out_of_tree()": False,
    "HAS_TRITON": True,
    "rocm_aiter_ops.is_enabled()": False,
    # The runner's `device` is a CUDA device, an H100/H200-class one (sm90, 132 SMs):
    # FlashInfer sampling is supported there.
    "device": "<not None>",
    "device.type": "cuda",
    "current_platform.get_device_capability()": (9, 0),
    "current_platform.num_compute_units()": 132,
}


@dataclass
class Settings:
    # Every rule file in rules/ is selected by default (rules.codes() lists them by file
    # name, importing no rule).
    select: tuple[str, ...] = field(default_factory=lambda: _all_rules())
    ignore: tuple[str, ...] = ()
    warmup_files: tuple[str, ...] = ("**/worker/gpu_model_runner.py", "**/worker/gpu/model_runner.py")
    warmup_methods: tuple[str, ...] = ("_dummy_*_run",)
    request_classes: tuple[str, ...] = ("SamplingMetadata", "InputBatch", "SpecDecodeMetadata")
    # Per-request state the model-runner-v2 sampler keeps between steps.
    request_state_classes: tuple[str, ...] = (
        "SamplingStates", "PenaltiesState", "LogitBiasState", "BadWordsState", "RequestState")
    triton_decorators: tuple[str, ...] = ("triton.jit", "triton.autotune", "triton.heuristics")
    compile_decorators: tuple[str, ...] = ("torch.compile",)
    compile_calls: tuple[str, ...] = ("torch.compile",)
    # Decorator factories whose decorated function launches the Triton kernel named by
    # their `kernel=` argument (vLLM's JIT-warmup dispatchers).
    triton_dispatchers: tuple[str, ...] = ()
    # Decorators of any other sink kind registered in warmlint.sinks: pattern -> kind.
    sink_decorators: dict = field(default_factory=dict)
    # External packages whose calls are JIT sinks, with the granularity of a sink's
    # identity: "module" = package.submodule (FlashInfer builds one JIT module per
    # submodule), "function" = the full dotted name.
    external_sinks: dict = field(default_factory=lambda: {"flashinfer": "module"})
    config_sources: tuple[str, ...] = ("envs", "current_platform", "HAS_TRITON", "rocm_aiter_ops")
    registry_methods: tuple[str, ...] = ("register_warmup",)
    assume: dict = field(default_factory=lambda: dict(DEFAULT_ASSUME))
    # Warmup batch: max_num_seqs is unknown statically but a multiple of 16 in practice.
    warmup_batch: Any = "multiple-of-16"
    exclude: tuple[str, ...] = ()
    max_configs: int = 256
    # `warmlint fix`: a value that sets each metadata field (Python source, evaluated in
    # the warmup method). The outcome it takes is checked by re-analysis after the fix.
    fix_values: dict = field(default_factory=lambda: {
        # Order is priority: when two outcomes reach the same cold sink, the first wins.
        "generators": "{0: torch.Generator(device=self.device).manual_seed(0)}",
        "max_num_logprobs": "1",
        "logprob_token_ids": "{0: [0]}",
    })

    def rule_enabled(self, code: str) -> bool:
        selected = any(code.startswith(s) for s in self.select)
        return selected and not any(code.startswith(s) for s in self.ignore)

    def fingerprint(self) -> str:
        data = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha1(data.encode()).hexdigest()[:16]

    def as_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name.replace("_", "-")] = list(value) if isinstance(value, tuple) else value
        return out


def _all_rules() -> tuple:
    from warmlint.rules import codes

    return codes()


KEYS = {f.name.replace("_", "-"): f.name for f in dataclasses.fields(Settings)}


class SettingsError(ValueError):
    pass


def apply(settings: Settings, table: dict, origin: str) -> Settings:
    """Overlay a ``[tool.warmlint]``-shaped table; unknown keys are errors, not ignored."""
    updates: dict[str, Any] = {}
    for key, value in table.items():
        extend = key.startswith("extend-")
        if extend:  # `extend-triton-decorators = [...]` adds to the defaults (as ruff's
            key = key[len("extend-"):]  # `extend-select` does); the plain key replaces them
        name = KEYS.get(key) or KEYS.get(key.replace("_", "-"))
        if name is None:
            raise SettingsError(f"{origin}: unknown key '{key}' in [tool.warmlint]")
        current = getattr(settings, name)
        if isinstance(current, tuple):
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SettingsError(f"{origin}: '{key}' must be a list of strings")
            value = tuple(updates.get(name, current)) + tuple(value) if extend else tuple(value)
        elif isinstance(current, dict):
            if not isinstance(value, dict):
                raise SettingsError(f"{origin}: '{key}' must be a table")
            value = {**current, **value}  # tables add to (or override) the defaults
        elif isinstance(current, int) and not isinstance(value, int):
            raise SettingsError(f"{origin}: '{key}' must be an integer")
        updates[name] = value
    return dataclasses.replace(settings, **updates)
