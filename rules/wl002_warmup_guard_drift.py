"""WL002 `warmup-guard-drift`

**What it does.** Compares the literal set a warmup uses to skip an extra warmup call
(`if self.sampler.logprobs_mode not in ("processed_logits", "processed_logprobs"):`)
with the literal set the sampler's dispatch binding tests on the same config value
(`TopKTopPSampler.__init__` binding `forward_native` outright for those modes). It
reports a guard whose set differs from the binding's, pointing at both places.

**Why it matters.** The two lists encode one fact twice: "in these modes the seeded
path is already what every request takes". When a new mode is added to one list only,
either the warmup skips a call that is needed (a cold path comes back) or it makes a
redundant one (peak memory grows during memory profiling for nothing).

**Example.**

```python
# sampler
if logprobs_mode not in ("processed_logits", "processed_logprobs", "processed_topk"):
    self.forward = self.forward_fast
# warmup
if self.sampler.logprobs_mode not in ("processed_logits", "processed_logprobs"):  # WL002
    self.sampler(logits, replace(metadata, generators=...))
```

**Fix.** Use one shared constant in both places (vLLM 0.33 has
`PROCESSED_LOGPROBS_MODES`), or make the guard's set equal to the binding's.

**Fix safety.** No automatic fix: which list is right is a decision for the author.
"""

from __future__ import annotations

from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Valid

CODE = "WL002"
NAME = "warmup-guard-drift"
SUMMARY = "Warmup guard's config set differs from the sampler dispatch binding's"
FIX_SAFETY = "no automatic fix"
NO_FIX = "which literal set is right is the author's decision (share one constant)"
MESSAGE = ("warmup guard `{guard}` ({function}) tests {atom} against {{{guard_set}}}, but the "
           "dispatch binding `{binding}` ({binding_function}, {binding_path}:{binding_line}) "
           "tests it against {{{binding_set}}}: {diff}")

_TEMPLATE = '''
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import triton


@dataclass
class SamplingMetadata:
    generators: dict


@triton.jit
def _seeded_kernel(LOGITS):
    pass


class Sampler(nn.Module):
    def __init__(self, logprobs_mode="raw_logprobs"):
        super().__init__()
        self.logprobs_mode = logprobs_mode
        if logprobs_mode not in {binding}:
            self.forward = self.forward_fast
        else:
            self.forward = self.forward_native

    def forward_native(self, logits, sampling_metadata):
        _seeded_kernel[(1,)](logits)
        return logits

    def forward_fast(self, logits, sampling_metadata):
        if sampling_metadata.generators:
            return self.forward_native(logits, sampling_metadata)
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.device = device
        self.sampler = Sampler(logprobs_mode=vllm_config.model_config.logprobs_mode)

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        metadata = SamplingMetadata(generators={{}})
        self.sampler(hidden_states, metadata)
        if self.sampler.logprobs_mode not in {guard}:{marker}
            seeded = {{0: torch.Generator(device=self.device)}}
            self.sampler(hidden_states, replace(metadata, generators=seeded))
'''

_TWO = '("processed_logits", "processed_logprobs")'
_THREE = '("processed_logits", "processed_logprobs", "processed_topk")'

EXAMPLES = [
    Invalid(_TEMPLATE.format(binding=_THREE, guard=_TWO, marker="  # expect: WL002"),
            note="A third mode was added to the binding only."),
    Valid(_TEMPLATE.format(binding=_TWO, guard=_TWO, marker=""),
          note="Guard and binding agree."),
]


def _fmt(values) -> str:
    return ", ".join(repr(v) for v in sorted(values, key=repr))


def check(facts):
    reported = set()
    for program in facts.programs:
        guards, bindings, labels = {}, {}, {}
        for test in program.config_tests:
            table = guards if test.context == "warmup" else bindings \
                if test.context == "constructor" else None
            if table is not None:
                table.setdefault(test.key, {})[test.site.key] = (test.site, test.literals)
                labels[test.key] = test.label
        for key in guards.keys() & bindings.keys():
            for site, values in guards[key].values():
                others = list(bindings[key].values())
                if any(values == b_values for _, b_values in others) or site.key in reported:
                    continue
                reported.add(site.key)
                b_site, b_values = others[0]
                diff = "; ".join(part for part in (
                    f"only in the binding: {_fmt(b_values - values)}" if b_values - values else "",
                    f"only in the guard: {_fmt(values - b_values)}" if values - b_values else "")
                    if part)
                yield Finding(
                    rule=CODE, name=NAME, path=site.path, line=site.line, col=site.col,
                    function=site.function, condition=site.condition,
                    message=MESSAGE.format(guard=site.condition, function=site.function,
                                           atom=labels[key], guard_set=_fmt(values),
                                           binding=b_site.condition,
                                           binding_function=b_site.function,
                                           binding_path=b_site.path, binding_line=b_site.line,
                                           binding_set=_fmt(b_values), diff=diff),
                    configs=[], related=[{"path": b_site.path, "line": b_site.line,
                                          "col": b_site.col,
                                          "message": f"dispatch binding tests {labels[key]}"}],
                    extra={"identity": f"{key}:{_fmt(values)}:{_fmt(b_values)}"},
                )
