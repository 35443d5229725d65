"""WL003 `warmup-extra-copy`

**What it does.** Finds a full copy (`.clone()`, `torch.clone(...)`, `copy.deepcopy(...)`)
of a tensor that a `_dummy_*_run` warmup passes to the sampler, directly or through a
local variable.

**Why it matters.** vLLM's first sampler warmup runs inside memory profiling: the peak
it sees sizes the KV cache. A copy of the logits (`num_reqs x vocab` floats, 131 MB at
256 x 128,256 in fp32) raises that peak above what any real request needs, so the KV
cache shrinks, or profiling runs out of memory (upstream hit an OOM with exactly this
copy). The warmup's output is discarded, so in-place changes by the sampler are harmless
and the copy buys nothing.

**Example.**

```python
self.sampler(logits=logits.clone(), sampling_metadata=replace(dummy_metadata, ...))  # WL003
```

**Fix.** Pass the tensor itself: `self.sampler(logits=logits, ...)`. `warmlint fix`
removes the copy.

**Fix safety.** Safe for warmups: the sampler may modify the logits in place, but the
warmup discards them and does not read them again.
"""

from __future__ import annotations

import libcst as cst

from warmlint.edits import ReplaceExpression
from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Valid

CODE = "WL003"
NAME = "warmup-extra-copy"
SUMMARY = "Full copy of the logits in a sampler warmup"
FIX_SAFETY = "safe (warmlint fix removes the copy)"
MESSAGE = ("`{copy}` copies the tensor {function} passes to `{callee}`; the copy raises peak "
           "memory during memory profiling by a full tensor and the warmup discards the "
           "result, so pass `{source}` itself")

_RUNNER = '''
import copy

import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class SamplingMetadata:
    generators: dict


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        logits = hidden_states
        metadata = SamplingMetadata(generators={{}})
        {body}
'''

EXAMPLES = [
    Invalid(_RUNNER.format(body="self.sampler(logits.clone(), metadata)  # expect: WL003")),
    Invalid(_RUNNER.format(body="copied = torch.clone(logits)  # expect: WL003\n"
                                "        self.sampler(copied, metadata)")),
    Valid(_RUNNER.format(body="self.sampler(logits, metadata)")),
]


def copy_source(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The copied expression if ``node`` is a full copy of it."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "clone" and not node.args:
        inner = func.value
        if (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value == "detach" and not inner.args):
            return inner.func.value
        return inner
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and len(node.args) == 1:
        if (func.value.value, func.attr.value) in (("torch", "clone"), ("copy", "deepcopy"),
                                                   ("copy", "copy")):
            return node.args[0].value
    return None


def check(facts):
    seen = set()
    for call in facts.warmup_calls:
        if not call.passes_tensor:
            continue
        for node in (c for candidates in call.argument_expressions() for c in candidates):
            if id(node) in seen or copy_source(node) is None:
                continue
            seen.add(id(node))
            line, col = call.position(node)
            source = call.source(copy_source(node))
            yield Finding(
                rule=CODE, name=NAME, path=call.path, line=line, col=col,
                function=call.function, condition=call.source(node),
                message=MESSAGE.format(copy=call.source(node), function=call.function,
                                       callee=call.callee, source=source),
                extra={"identity": call.source(node)},
                subject=source,
            )


def fix(finding, facts):
    """The copy, replaced by what it copies (wherever the function writes that copy)."""
    return [ReplaceExpression(finding.path, finding.function, finding.condition,
                              finding.subject,
                              description=f"pass `{finding.subject}` instead of "
                                          f"`{finding.condition}`",
                              noun=("logits copy", "logits copies", "removed"))]
