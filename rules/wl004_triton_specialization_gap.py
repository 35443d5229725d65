"""WL004 `triton-specialization-gap`

**What it does.** For each Triton kernel launch the warmups do reach, binds the launch's
arguments to the kernel's parameters and compares the specialization classes each
request-dependent argument takes during the warmups with those serving can produce:
every value of a `tl.constexpr` parameter, and for a plain integer parameter whether it
is 1, a multiple of 16, or neither (unless `do_not_specialize` /
`do_not_specialize_on_alignment` says otherwise). It reports each parameter with a
class serving reaches and no warmup compiled.

**Why it matters.** Triton compiles a kernel once per specialization key, so a request
input that flows into a kernel argument is a dispatch branch hidden from the `if`
statements. In vLLM 0.21.0, after the warmup at batch 256, a seeded request at batch 37
recompiles `_topk_topp_kernel` for seconds, because `BATCH_SIZE` (from `logits.shape`)
was only ever warmed divisible by 16. A constexpr flag computed from a request input
(`TOPK_ENABLED = k is not None`) has the same effect: a warmup that always passes both
top-k and top-p compiles one of the variants.

**Example.**

```python
@triton.jit
def _mask_kernel(LOGITS, N_ROWS):           # N_ROWS is specialized (== 1, % 16)
    ...
_mask_kernel[(n,)](logits, logits.shape[0])  # WL004: the warmup batch is a multiple of 16
```

**Fix.** Either warm a batch in the missing class (one more sampler call on a slice of
the warmup's rows, e.g. 9 rows), or, when the specialization buys nothing (a loop bound,
a grid size), declare it: `@triton.jit(do_not_specialize=["N_ROWS"])` (or
`do_not_specialize_on_alignment=[...]` to keep only the `== 1` case). For a constexpr
flag, warm a request that sets it the other way.

**Fix safety.** No automatic fix yet: `do_not_specialize` changes the compiled code
(usually harmless for loop bounds), and the extra warmup batch costs start-up time.
"""

from __future__ import annotations

from warmlint.edits import InsertCall, Rows
from warmlint.facts import ALIGNED, BATCH_INPUT
from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Valid

CODE = "WL004"
NAME = "triton-specialization-gap"
SUMMARY = "Request input reaches a Triton specialization the warmups never compile"
FIX_SAFETY = "no automatic fix"
MESSAGE = ("Triton kernel `{kernel}` compiles one variant per {what} `{param}`; the warmups "
           "compile only {{{warmed}}}{note}, but serving also produces {{{missing}}} from "
           "{inputs}, so the first such request recompiles it; {fix}; configs: {configs}")

_EXAMPLE = '''
from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    top_k: torch.Tensor | None


@triton.jit{options}
def _mask_kernel(LOGITS, N_ROWS, VOCAB: tl.constexpr):
    pass


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        if logits.shape[0] >= 8:
            _mask_kernel[(8,)](logits, logits.shape[0], VOCAB=logits.shape[1]){marker}
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        self.sampler(hidden_states, SamplingMetadata(top_k=None))
'''

EXAMPLES = [
    Invalid(_EXAMPLE.format(options="", marker="  # expect: WL004"),
            note="N_ROWS follows the batch size; the warmup batch is a multiple of 16."),
    Valid(_EXAMPLE.format(options='(do_not_specialize=["N_ROWS"])', marker=""),
          note="The kernel opts out of specializing the row count."),
    Valid(_EXAMPLE.format(options='(do_not_specialize_on_alignment=["N_ROWS"])', marker=""),
          note="Only == 1 is kept, and the path needs at least 8 rows."),
]


def _fmt(classes) -> str:
    return ", ".join(sorted(classes))


def check(facts):
    for gap in facts.specialization_gaps:
        param = gap.param
        configs, exact = gap.configs()
        pointer = (gap.warmed | gap.missing) <= {"tensor", "None"}
        what = ("value of the tl.constexpr" if gap.constexpr else
                "None-ness (Triton specializes None arguments) of the argument" if pointer else
                "class (== 1, % 16 == 0, other) of the int parameter")
        note = ""
        if not gap.constexpr and ALIGNED in gap.warmed and BATCH_INPUT in gap.inputs:
            note = (" (the warmup batch, max_num_seqs, is unknown statically: taken as one "
                    "class, a multiple of 16)")
        fix = (f"warm a request that makes `{param}` take the missing value"
               if gap.constexpr or pointer else
               f"warm a batch in the missing class, or add do_not_specialize=[\"{param}\"] to "
               f"@{gap.decorator.split('(')[0]} if the specialization buys nothing")
        name = gap.kernel_name
        yield Finding(
            rule=CODE, name=NAME, path=gap.site.path, line=gap.site.line, col=gap.site.col,
            function=gap.function, condition=f"{name}.{param}",
            outcome=_fmt(gap.missing), inputs=sorted(gap.inputs),
            sinks=gap.sinks, chain=gap.chain, warmups=gap.warmups, configs=configs,
            message=MESSAGE.format(kernel=name, what=what, param=param,
                                   warmed=_fmt(gap.warmed), note=note,
                                   missing=_fmt(gap.missing),
                                   inputs=", ".join(sorted(gap.inputs)), fix=fix,
                                   configs=", ".join(configs) if configs else "all"),
            extra={"kernel": gap.kernel, "parameter": param, "constexpr": gap.constexpr,
                   "warmed": sorted(gap.warmed), "missing": sorted(gap.missing),
                   "identity": f"{gap.kernel}:{param}", "configs_exact": exact,
                   "paths": gap.paths,
                   "runner": gap.runner},
            subject=gap,
        )


def fix(finding, facts):
    """For a batch-size class: the warmup's call again on its first N rows, N the smallest
    batch in the missing class the launch's path allows, after each warmup call that
    launched the kernel, guarded by the warmup's batch being larger than N."""
    gap = finding.subject
    if gap.constexpr or gap.inputs != {BATCH_INPUT}:
        return []
    edits = []
    for cls in sorted(gap.missing):
        rows = gap.smallest_batch(cls)
        if rows is None:
            continue
        for call in gap.warm_calls:
            classes = call.request_classes
            if call.anchor is None or len(classes) != 1:
                continue  # slicing two request objects consistently is not attempted
            arg = call.request_argument(classes)
            if arg is None:
                continue
            note = (f"Warm `{gap.kernel_name}` for a batch of {rows} rows ({gap.param} {cls}): "
                    f"Triton compiles it once per class of {gap.param} (added by warmlint fix).")
            edits.append(InsertCall(
                call.path, call.function, call.anchor, call.code, arg.key,
                rows=Rows(rows, call.per_row_arguments, arg.per_row_fields),
                guard=(f"{call.batch_var} > {rows}",) if call.batch_var else (), note=note))
    return edits
