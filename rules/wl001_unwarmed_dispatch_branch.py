"""WL001 `unwarmed-dispatch-branch`

**What it does.** Finds branch outcomes in the sampler that depend on a request input
(a `SamplingMetadata` field, the batch size, ...) and lead to a JIT-compiled kernel
(`@triton.jit` launch, `torch.compile`'d function, FlashInfer JIT module) that no
`_dummy_*_run` warmup reaches under the same configuration.

**Why it matters.** vLLM warms its kernels at start-up so that no request pays a JIT
compile. An outcome the warmup never takes leaves its kernels cold: the first request
that takes it compiles them on the serving path. In vLLM 0.20.0 with
`VLLM_USE_FLASHINFER_SAMPLER=1`, the first seeded request falls back from FlashInfer to
`forward_native` and compiles the Triton top-k/top-p kernel: 10.7 s on an H200
(docs/gpu-proof.md).

**Example.**

```python
def forward_cuda(self, logits, generators, k, p):
    if (k is None and p is None) or generators:   # WL001: `generators` is true
        return self.forward_native(logits, generators, k, p)   # -> Triton kernel
    return flashinfer_sample(logits, k, p, generators), None
```
with a warmup that only ever passes `generators={}`.

**Fix.** Make the warmup take the outcome: call the sampler a second time on
`dataclasses.replace(dummy_metadata, generators={0: torch.Generator(...)})`, guarded by
the configs where the outcome can happen. `warmlint fix` inserts that call for outcomes
driven by a metadata field the warmup sets (`warmlint fix --diff PATH` shows them first;
docs/fix.md).

**Fix safety.** Safe: the extra call runs only at start-up on dummy data, reuses the
warmup's logits tensor (no copy, so peak memory does not grow beyond the heaviest real
request), and never changes sampling results. It does lengthen start-up by one sampler
step.
"""

from __future__ import annotations

from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Rule, Valid, sink_phrase

CODE = "WL001"
NAME = "unwarmed-dispatch-branch"
MESSAGE = ("{outcome}{within} ({function}) reaches {sink} via {chain}, "
           "which no warmup reaches ({warmups}); request input: {inputs}; configs: {configs}")

_SAMPLER = '''
import dataclasses
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import triton

from vllm import envs


@dataclass
class SamplingMetadata:
    temperature: torch.Tensor
    generators: dict
    max_num_logprobs: int | None


@triton.jit
def _filter_kernel(LOGITS, N):
    pass


def apply_filter(logits):
    _filter_kernel[(logits.shape[0],)](logits, logits.shape[1])
    return logits


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        if envs.VLLM_USE_FAST_PATH:
            self.forward = self.forward_fast
        else:
            self.forward = self.forward_native

    def forward_native(self, logits, sampling_metadata):
        return apply_filter(logits)

    def forward_fast(self, logits, sampling_metadata):
        if sampling_metadata.generators:{marker}
            return self.forward_native(logits, sampling_metadata)
        return logits
'''

_RUNNER = '''

class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.device = device
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        logits = hidden_states
        metadata = SamplingMetadata(temperature=logits, generators={{}}, max_num_logprobs=None)
        self.sampler(logits, metadata){extra}
'''

_SEEDED = '''
        self.sampler(logits, replace(metadata, generators={0: torch.Generator(device=self.device)}))'''


def _example(marker: str = "", extra: str = "") -> str:
    return _SAMPLER.replace("{marker}", marker) + _RUNNER.format(extra=extra)


EXAMPLES = [
    Invalid(_example(marker="  # expect: WL001"),
            note="The fast path falls back to the Triton kernel for seeded requests; "
                 "the warmup never passes a generator."),
    Valid(_example(extra=_SEEDED),
          note="A second warmup call on replace(metadata, generators=...) takes the outcome."),
    Valid(_example(marker=""), assume={"VLLM_USE_FAST_PATH": "0"},
          note="With the fast path off, the warmup itself runs the Triton kernel."),
]


def check(facts):
    # Imported here: WL100's examples load this module on warm runs, which skip the analysis.
    from warmlint.coverage import cold_outcomes

    for cold in cold_outcomes(facts):
        div = cold.div
        configs, exact = cold.configs()
        sinks = cold.sinks()
        first_hit = cold.hits[sinks[0]["id"]]
        chain = cold.chain(first_hit)
        inputs = sorted(set().union(*(d.inputs for d in cold.divergences)))
        warmups = sorted(w.ref.qualname for w in cold.program.warmups)
        outcome = " or ".join(d.outcome_text for d in cold.divergences)
        sink_text = ", ".join(sink_phrase(s) for s in sinks)
        config_text = ", ".join(configs) if configs else "all"
        if configs and not exact:
            config_text += " (in some of them)"
        # "`x` is true in `x`" says nothing twice: name the whole condition only when it differs.
        whole = len(cold.divergences) == 1 and outcome.startswith(f"`{div.site.condition}` ")
        within = "" if whole else f" in `{div.site.condition}`"
        message = MESSAGE.format(outcome=outcome, within=within,
                                 function=div.site.function, sink=sink_text,
                                 chain=" -> ".join(chain), warmups=", ".join(warmups),
                                 inputs=", ".join(inputs), configs=config_text)
        yield Finding(
            rule=CODE, name=NAME, path=div.site.path, line=div.site.line, col=div.site.col,
            function=div.site.function, message=message, condition=div.site.condition,
            outcome=outcome, inputs=inputs, sinks=sinks, chain=chain, warmups=warmups,
            configs=configs,
            extra={"outcomes": [d.outcome for d in cold.divergences],
                   "literals": [[list(lit[1]), lit[2]] for d in cold.divergences
                                for lit in d.literals],
                   "paths": cold.paths, "configs_exact": exact,
                   "runner": cold.program.runner},
        )


RULE = Rule(code=CODE, name=NAME, summary="Input-dependent branch outcome reaches a JIT sink "
            "that no warmup reaches", doc=__doc__, check=check,
            fix_safety="safe (warmlint fix, for outcomes driven by a warmup metadata field)",
            examples=EXAMPLES)
