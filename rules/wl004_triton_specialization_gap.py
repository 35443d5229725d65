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

from warmlint import sinks
from warmlint.findings import Finding
from warmlint.rule_api import Invalid, Rule, Valid
from warmlint.serving import BATCH_INPUT
from warmlint.specialization import ALIGNED, specialization_gaps

CODE = "WL004"
NAME = "triton-specialization-gap"
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
    from warmlint.configs import facts_as_decisions

    for gap in specialization_gaps(facts):
        hit, sig, param, kernel = gap.hit, gap.sig, gap.param, gap.kernel
        configs, exact = gap.program.leaf_configs(sorted(gap.leaves))
        common = set.intersection(*(set(facts_as_decisions(c)) for c in gap.cfgs))
        configs += [d.text() for d in sorted(common, key=lambda d: d.key)]
        constexpr = param in sig.constexpr
        pointer = (gap.warmed | gap.missing) <= {"tensor", "None"}
        what = ("value of the tl.constexpr" if constexpr else
                "None-ness (Triton specializes None arguments) of the argument" if pointer else
                "class (== 1, % 16 == 0, other) of the int parameter")
        note = ""
        if not constexpr and ALIGNED in gap.warmed and BATCH_INPUT in gap.inputs:
            note = (" (the warmup batch, max_num_seqs, is unknown statically: taken as one "
                    "class, a multiple of 16)")
        fix = (f"warm a request that makes `{param}` take the missing value"
               if constexpr or pointer else
               f"warm a batch in the missing class, or add do_not_specialize=[\"{param}\"] to "
               f"@{sig.decorator.split('(')[0]} if the specialization buys nothing")
        name = kernel.rsplit(".", 1)[-1]
        yield Finding(
            rule=CODE, name=NAME, path=hit.site.path, line=hit.site.line, col=hit.site.col,
            function=hit.stack[-1][1] if hit.stack else "", condition=f"{name}.{param}",
            outcome=_fmt(gap.missing), inputs=sorted(gap.inputs),
            sinks=[sinks.as_json(kernel, hit.site.path, hit.site.line)],
            chain=[q for _, q in hit.stack[1:] if not q.startswith("<")]
            + [name + sinks.kind_of(kernel).launch_suffix],
            warmups=sorted(w.ref.qualname for w in gap.program.warmups), configs=configs,
            message=MESSAGE.format(kernel=name, what=what, param=param,
                                   warmed=_fmt(gap.warmed), note=note,
                                   missing=_fmt(gap.missing),
                                   inputs=", ".join(sorted(gap.inputs)), fix=fix,
                                   configs=", ".join(configs) if configs else "all"),
            extra={"kernel": kernel, "parameter": param, "constexpr": constexpr,
                   "warmed": sorted(gap.warmed), "missing": sorted(gap.missing),
                   "identity": f"{kernel}:{param}", "configs_exact": exact,
                   "paths": gap.paths,
                   "runner": gap.program.runner},
        )


RULE = Rule(code=CODE, name=NAME, summary="Request input reaches a Triton specialization "
            "the warmups never compile", doc=__doc__, check=check,
            fix_safety="no automatic fix", examples=EXAMPLES)
