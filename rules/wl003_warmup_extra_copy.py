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

from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Rule, Valid
from warmlint.values import OneOf, Tensor

CODE = "WL003"
NAME = "warmup-extra-copy"
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


def _assignments(fn_node: cst.FunctionDef) -> dict:
    """name -> values assigned to it in the function (one CST walk per function)."""
    found: dict = {}

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)

    fn_node.visit(Visitor())
    return found


def copies_in_entry(entry, assignments: dict | None = None) -> list:
    """(copy expression node, ParsedFunction) for tensor arguments of a warmup entry call.
    ``assignments`` memoizes each function's walk across entries (id(node) -> table)."""
    out = []
    values = list(entry.args) + list(entry.kwargs.values())
    if not any(isinstance(o, Tensor) for v in values
               for o in (v.options if isinstance(v, OneOf) else (v,))):
        return out
    fn = entry.frame.fn
    memo = assignments if assignments is not None else {}
    for arg in entry.node.args:
        candidates = [arg.value]
        if isinstance(arg.value, cst.Name):
            if id(fn.node) not in memo:
                memo[id(fn.node)] = (fn.node, _assignments(fn.node))  # node kept: ids stay unique
            candidates = memo[id(fn.node)][1].get(arg.value.value, [])
        out += [(c, fn) for c in candidates if copy_source(c) is not None]
    return out


def check(facts):
    seen, assignments = set(), {}
    for program in facts.programs:
        for leaf in program.leaves:
            for entry in leaf.warm.entries:
                for node, fn in copies_in_entry(entry, assignments):
                    if id(node) in seen:
                        continue
                    seen.add(id(node))
                    line, col = fn.position(node)
                    code = fn.wrapper_module.code_for_node
                    source = code(copy_source(node))
                    yield Finding(
                        rule=CODE, name=NAME, path=fn.path, line=line, col=col,
                        function=fn.qualname, condition=code(node),
                        message=MESSAGE.format(copy=code(node), function=fn.qualname,
                                               callee=code(entry.node.func), source=source),
                        fix={"description": f"pass `{source}` instead of `{code(node)}`",
                             "safe": True},
                        extra={"identity": code(node)},
                    )


RULE = Rule(code=CODE, name=NAME, summary="Full copy of the logits in a sampler warmup",
            doc=__doc__, check=check, fix_safety="safe (warmlint fix removes the copy)",
            examples=EXAMPLES)
