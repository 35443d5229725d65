"""WL004 `triton-specialization-gap`

**What it does.** For each Triton kernel launch the warmups do reach, binds the launch's
arguments to the kernel's parameters and compares the specialization classes each
request-dependent argument takes during the warmups with those serving can produce:
every value of a `tl.constexpr` parameter, and for a plain integer parameter whether it
is 1, a multiple of 16, or neither (unless `do_not_specialize` /
`do_not_specialize_on_alignment` says otherwise). It reports each parameter with a
class serving reaches and no warmup compiled, and each *combination* of a batch-size class
with a flag or None-able pointer value that serving reaches and no warmup launched
together, though each was warmed on its own (Triton's key is the whole tuple: vLLM
0.21.0's fixed warmup compiled `TOPK_ENABLED=False` only at its full batch, and a
top-p-only request of 37 rows recompiled `_topk_topp_kernel` for 2.2-4.9 s on the H200).
Combinations of two request fields are not judged (`warmlint/key_pairs.py` says why).

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
flag or a None-able pointer, warm a request that sets it the other way. `warmlint fix`
does the warmup side: for a batch-size class, the warmup's call again on its first N
rows after each call that launched the kernel (N the smallest batch in the class the
path allows); for a value decided by request fields (`TOPK_ENABLED = k is not None`,
`uniform_probs` None when `all_greedy`), the call again with those fields as a serving
path producing the value has them (`top_k=None`, `all_greedy=True`), once per missing
value; for a combination, the call again on the first N rows with those fields. Each is
guarded by the configs in which that warmup call launched the kernel.
A parameter computed from a request integer through arithmetic, `min`/`max`,
`triton.next_power_of_2` and a tensor's column count (vLLM's `TOPK_BLOCK_SIZE =
min(next_power_of_2(1 + logprobs), 1024)`; v1's `PADDED_TOPK = next_power_of_2(1 + the
most token ids a request asks for)`, the length of a list field) is reported with every
value (constexpr) or class (int) serving can produce over the field's range
(`request-int-limits`, default `logprobs` ≤ 20, `logprob_token_ids` ≤ 128 ids). `warmlint
fix` adds one warmup step per missing value, asking for the smallest field value that
produces it: where the field is a per-request row (model runner v2:
`SamplingParams.logprobs`, filled by `add_request`), every row asks for it (`logprobs=8`
for a block of 16) and the warmup's sampler call runs again; a v1 metadata field is set
on the warmup call (`logprob_token_ids={0: [0] * 8}`, built from the `fix-values` entry
`len(SamplingMetadata.logprob_token_ids)`). A pointer's element type is part of the key
where both sides say it: the warmup's tensors where the code writes the type, serving's
request fields where the code building the request does (`InputBatch.top_k`: int32);
`warmlint fix` adds the call again with the field converted (`top_k=...to(torch.int32)`).

**Fix safety.** Safe for the warmup calls (start-up only, dummy data, no copy); each
costs one sampler step and one Triton compile at start-up. `do_not_specialize` is never
added automatically: it changes the compiled code.
"""

from __future__ import annotations

import re

from warmlint.edits import BASE, InsertCall, NoFix, Rows
from warmlint.facts import ALIGNED, BATCH_INPUT
from warmlint.pointer_types import typed
from warmlint.serving import is_row_count
from warmlint.findings import Finding, canonical_paths
from warmlint.rule_api import Invalid, Valid
from warmlint.specialization import length_of
from warmlint.values import Tensor

CODE = "WL004"
NAME = "triton-specialization-gap"
SUMMARY = "Request input reaches a Triton specialization the warmups never compile"
FIX_SAFETY = "safe (warmlint fix adds a warmup call per missing class or value)"
PAIR_MESSAGE = ("Triton kernel `{kernel}` compiles one variant per combination of its "
                "specialized arguments; the warmups compile `{param}` {value} only with "
                "`{batch}` in {{{warmed}}}, but serving also produces it with {{{missing}}} "
                "from {inputs}, so the first such request recompiles it; warm a batch in "
                "that class taking {value}; configs: {configs}")
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

_TYPED = '''
from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    top_k: torch.Tensor | None


@triton.jit
def _expand_kernel(OUT, TOP_K, N: tl.constexpr):
    pass


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        if sampling_metadata.top_k is not None:
            _expand_kernel[(8,)](logits, sampling_metadata.top_k, N=8){marker}
        return logits


class InputBatch:
    def __init__(self, max_num_reqs):
        self.top_k = torch.empty((max_num_reqs,), dtype=torch.int32)

    def make_sampling_metadata(self, num_reqs):
        return SamplingMetadata(top_k=self.top_k[:num_reqs])


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        top_k = torch.full((hidden_states.size(0),), hidden_states.size(1) - 1{dtype})
        self.sampler(hidden_states, SamplingMetadata(top_k=top_k))
'''

_DERIVED = '''
from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    logprobs: int | None


@triton.jit
def _logprob_kernel(LOGITS, IDS, BLOCK: tl.constexpr):
    pass


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        n = sampling_metadata.logprobs
        if n is not None:
            ids = torch.cat((logits.argmax(-1).unsqueeze(-1),
                             torch.topk(logits, n, dim=-1).indices), dim=1)
            _logprob_kernel[(8,)](logits, ids, BLOCK={block}){marker}
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        self.sampler(hidden_states, SamplingMetadata(logprobs=5))
'''

_PAIR = '''
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    top_k: torch.Tensor | None


@triton.jit
def _mask_kernel(LOGITS, N_ROWS, TOPK: tl.constexpr):
    pass


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        topk = sampling_metadata.top_k is not None
        if logits.shape[0] >= 8:
            _mask_kernel[(8,)](logits, logits.shape[0], TOPK=topk){marker}
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        num_reqs = hidden_states.shape[0]
        metadata = SamplingMetadata(top_k=torch.ones(num_reqs))
        self.sampler(hidden_states, metadata)
        self.sampler(hidden_states, replace(metadata, top_k=None))
        if num_reqs > 9:
            self.sampler(hidden_states[:9], replace(metadata, top_k=metadata.top_k[:9])){extra}
'''

EXAMPLES = [
    Invalid(_TYPED.format(dtype="", marker="  # expect: WL004"),
            note="The warmup's top_k is int64 (torch.full of an int), serving's int32 "
                 "(InputBatch): Triton compiles one variant per pointer element type."),
    Valid(_TYPED.format(dtype=", dtype=torch.int32", marker=""),
          note="The warmup's top_k has serving's type."),
    Invalid(_DERIVED.format(block="triton.next_power_of_2(ids.shape[1])",
                            marker="  # expect: WL004"),
            note="BLOCK is next_power_of_2(1 + logprobs): the warmup's 5 compiles 8 only, "
                 "serving's 0..20 (request-int-limits) also 1, 2, 4, 16 and 32."),
    Invalid(_PAIR.format(marker="  # expect: WL004", extra=""),
            note="TOPK False and a 9-row batch (N_ROWS other) are each warmed, never together: "
                 "Triton compiles per combination."),
    Valid(_PAIR.format(marker="", extra="\n            self.sampler(hidden_states[:9], "
                       "replace(metadata, top_k=None))"),
          note="The warmup also runs 9 rows without top-k."),
    Valid(_DERIVED.format(block="triton.next_power_of_2(32)", marker=""),
          note="A constant block: one variant, warmed."),
    Invalid(_EXAMPLE.format(options="", marker="  # expect: WL004"),
            note="N_ROWS follows the batch size; the warmup batch is a multiple of 16."),
    Valid(_EXAMPLE.format(options='(do_not_specialize=["N_ROWS"])', marker=""),
          note="The kernel opts out of specializing the row count."),
    Valid(_EXAMPLE.format(options='(do_not_specialize_on_alignment=["N_ROWS"])', marker=""),
          note="Only == 1 is kept, and the path needs at least 8 rows."),
]


def _fmt(classes) -> str:
    """Classes or values, numbers in numeric order (``2, 4, 16, 32``)."""
    return ", ".join(sorted(classes, key=lambda c: (0, int(c), c) if c.isdigit() else (1, 0, c)))


def check(facts):
    for gap in facts.specialization_gaps:
        if gap.batch_param:
            yield _pair_finding(gap)
            continue
        param = gap.param
        configs, exact = gap.configs()
        pointer = all(c == "None" or c.startswith("tensor") for c in gap.warmed | gap.missing)
        what = ("value of the tl.constexpr" if gap.constexpr else
                "element type (Triton specializes pointer types) of the argument"
                if any(typed(c) for c in gap.missing) else
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
                   "paths": canonical_paths(gap.paths),
                   "runner": gap.runner, **_computed(gap)},
            subject=gap,
        )


def _pair_finding(gap):
    """A value of a flag or pointer never launched together with a batch-size class,
    each warmed on its own (``key_pairs``)."""
    configs, exact = gap.configs()
    name, param, batch, value = gap.kernel_name, gap.param, gap.batch_param, gap.pair_value
    return Finding(
        rule=CODE, name=NAME, path=gap.site.path, line=gap.site.line, col=gap.site.col,
        function=gap.function, condition=f"{name}.{param}={value} x {batch}",
        outcome=_fmt(gap.missing), inputs=sorted(gap.inputs),
        sinks=gap.sinks, chain=gap.chain, warmups=gap.warmups, configs=configs,
        message=PAIR_MESSAGE.format(kernel=name, param=param, value=value, batch=batch,
                                    warmed=_fmt(gap.warmed), missing=_fmt(gap.missing),
                                    inputs=", ".join(sorted(gap.inputs)),
                                    configs=", ".join(configs) if configs else "all"),
        extra={"kernel": gap.kernel, "parameter": param, "value": value,
               "batch_parameter": batch, "constexpr": gap.constexpr,
               "warmed": sorted(gap.warmed), "missing": sorted(gap.missing),
               "identity": f"{gap.kernel}:{param}={value}:{batch}", "configs_exact": exact,
               "paths": canonical_paths(gap.paths), "runner": gap.runner},
        subject=gap,
    )


def _computed(gap) -> dict:
    """How a derived parameter is computed from its request integer, for `warmlint
    verify` to tell which count a request kind needs: {"computed": {"from", "ops"}}."""
    expr = gap.computed
    if expr is None:
        return {}
    return {"computed": {"from": expr.base.key, "ops": [list(op) for op in expr.ops]}}


def fix(finding, facts):
    """After each warmup call that launched the kernel, the call again taking the missing
    class: on its first N rows for a batch-size class, else with the request fields a
    serving path producing the class has (``top_k=None``, ``all_greedy=True``); guarded by
    the configs in which that call launched the kernel."""
    gap = finding.subject
    if gap.batch_param:
        return _pair_edits(gap)
    if gap.derived:
        return _derived_edits(gap, facts)
    by_rows = bool(gap.inputs) and all(is_row_count(i) for i in gap.inputs) \
        and not gap.constexpr
    edits, reasons = [], []
    for cls in sorted(gap.missing):
        rows = gap.smallest_batch(cls) if by_rows else None
        if by_rows and rows is None:
            reasons.append(f"no batch size in class {cls} reaches the launch")
            continue
        for call in gap.warm_calls:
            if call.anchor is None:
                continue
            edit = (_rows_edit(gap, call, rows, cls) if by_rows else
                    _dtype_edit(gap, call, cls) or _value_edit(gap, call, cls, reasons))
            if edit is not None:
                edits.append(edit)
                if not by_rows:
                    # One call per missing value: where it is still missing in other
                    # configs (another warmup call launches the kernel there), the next
                    # round of `fix` sees it and adds that call.
                    break
    if not edits and by_rows:
        edits = _other_call_edits(gap, reasons)
    if not edits:
        raise NoFix(reasons[0] if reasons else "no warmup call that launches the kernel "
                    "passes one request object by name")
    return edits


def _other_call_edits(gap, reasons: list) -> list:
    """No call that launched the kernel can be cut to N rows (the rejection sampler's
    passes two request objects): another warmup call of the same configs, cut to N rows
    and given the fields of a serving path that launches the kernel in the missing class
    from that call's request alone (the sampler's own call, with a seed), guarded by the
    configs where the gap holds. A later round of ``fix`` sees whether it took."""
    edits = []
    for cls in sorted(gap.missing):
        rows = gap.smallest_batch(cls)
        for call in gap.other_calls if rows is not None else ():
            arg = call.request_argument(call.request_classes)
            if arg is None or len(call.request_classes) != 1:
                continue
            try:
                changes = gap.own_request_changes(arg, cls)
            except NoFix as exc:
                reasons.append(exc.reason)
                continue
            guard, names = _guarded(gap, call, (f"{call.batch_var} > {rows}",)
                                    if call.batch_var else (), gap.gap_decisions(call))
            names += ("torch",) * any("torch" in v for _, v in changes)
            fields = ", ".join(f"{k}={v}" for k, v in changes)
            edits.append(InsertCall(
                call.path, call.function, call.anchor, call.code, arg.key,
                set_fields=tuple(changes), rows=Rows(rows, call.per_row_arguments,
                                                     arg.per_row_fields),
                guard=guard, names=names,
                note=(f"Warm `{gap.kernel_name}` for a batch of {rows} rows ({gap.param} "
                      f"{cls}) through this call with {fields}, the variant a serving "
                      "path compiles there: Triton compiles it once per class of "
                      f"{gap.param} (added by warmlint fix).")))
            break
    return edits


def _pair_edits(gap) -> list:
    """Per missing batch class: the warmup call again on its first N rows (N the smallest
    batch in the class) with the request fields a serving path producing the value has."""
    from dataclasses import replace

    edits, reasons = [], []
    for cls in sorted(gap.missing):
        rows = gap.smallest_batch(cls)
        if rows is None:
            reasons.append(f"no batch size in class {cls} reaches the launch")
            continue
        for call in (c for c in gap.warm_calls if c.anchor is not None):
            value = _value_edit(gap, call, cls, reasons)
            sliced = _rows_edit(gap, call, rows, cls) if value is not None else None
            if sliced is None:
                continue
            changes = ", ".join(f"{k}={v}" for k, v in value.set_fields)
            edits.append(replace(sliced, set_fields=value.set_fields,
                                 names=tuple(dict.fromkeys(sliced.names + value.names)),
                                 note=(f"Warm `{gap.kernel_name}` for a batch of {rows} rows "
                                       f"({gap.batch_param} {cls}) with {changes} "
                                       f"({gap.param} {gap.pair_value}): Triton compiles "
                                       "one variant per combination (added by warmlint "
                                       "fix).")))
            break
    if not edits:
        raise NoFix(reasons[0] if reasons else "no warmup call that launches the kernel "
                    "passes one request object by name")
    return edits


def _derived_edits(gap, facts) -> list:
    """A parameter computed from a request integer: per missing value, the warmup's
    sampler call again with the smallest request value producing it; model runner v2:
    every per-request row asks for it (``logprobs=3`` for a block of 4; one step compiles
    one value, since the kernel sees the batch's maximum); v1: the metadata field is set
    (``_metadata_edits``)."""
    why = f"`{gap.param}` is computed from {', '.join(sorted(gap.inputs))} through calls"
    values, left = [], []  # (value of the param, request field, field value giving it)
    for cls in sorted(gap.missing, key=_numeric_first):
        found = gap.witness(cls)
        field, text = _field_value(found, facts.settings.fix_values) if found else (None, None)
        if text is None:  # the other values are still warmed; this one stays reported
            left.append(f"no value within request-int-limits gives {cls}" if found is None
                        else f"no fix-values entry len({'.'.join(field)}) builds a list "
                             f"of the length giving {cls}")
            continue
        values.append((cls, field, text))
    if not values:
        raise NoFix(f"{why}, and {left[0]}")
    if any("." in name for _, (_, name), _ in values):  # a field of a field
        raise NoFix(f"{why} that is not a per-request row field: warm one request per "
                    "missing value by hand")
    owner = values[0][1][0]
    if owner not in facts.settings.request_params_classes:
        return _metadata_edits(gap, values, why)
    values = [(cls, name, text) for cls, (_, name), text in values]
    reasons = []
    anchored = [c for c in gap.warm_calls if c.anchor is not None] if values else []
    for call in anchored:
        try:
            fill = gap.row_fill(call)  # the same block shape for every value
        except NoFix as exc:
            reasons.append(exc.reason)
            continue
        guard, names = _guarded(gap, call)
        return [InsertCall(call.path, call.function, fill.anchor, fill.call, None,
                           set_fields=((name, str(value)),), guard=guard,
                           note=(f"Warm `{gap.kernel_name}` with {gap.param} {cls}, every row "
                                 f"asking for {name}={value}: Triton compiles one variant "
                                 f"per value of {gap.param} (added by warmlint fix)."),
                           names=names, fill=fill, imports=fill.imports, field=name)
                for cls, name, value in values]
    raise NoFix(reasons[0] if reasons else f"{why}, and no warmup call that launches the "
                "kernel fills per-request rows")


def _numeric_first(cls: str) -> tuple:
    return (0, int(cls), cls) if cls.isdigit() else (1, 0, cls)


def _field_value(found: tuple, fix_values: dict) -> tuple:
    """((owner class, field), source text of the field value) giving a witness: the
    integer itself, or for a list field's length (``len(SamplingMetadata.
    logprob_token_ids[])``) the ``fix-values`` entry ``len(CLASS.FIELD)`` (or
    ``len(FIELD)``) with N the length (``{0: [0] * N}``); None where there is none."""
    key, n = found
    listed = length_of(key)
    if listed is not None:
        owner, _, name = listed.partition(".")
        template = fix_values.get(f"len({owner}.{name})") or fix_values.get(f"len({name})")
        text = re.sub(r"\bN\b", str(n), template) if template else None
        return (owner, name), text
    owner, _, name = key.partition(".")
    return (owner, name), str(n)


def _metadata_edits(gap, values: list, why: str) -> list:
    """A value of a metadata field (model runner v1: one request object per sampler
    call): per missing value, the warmup call again with the field set to a value giving
    it (``logprob_token_ids={0: [0] * 8}``)."""
    for call in (c for c in gap.warm_calls if c.anchor is not None):
        arg = call.request_argument({values[0][1][0]}) if values else None
        if arg is None:
            continue
        guard, names = _guarded(gap, call)
        return [InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                           set_fields=((name, text),), guard=guard, names=names,
                           note=(f"Warm `{gap.kernel_name}` with {gap.param} {cls} "
                                 f"({name}={text}): Triton compiles one variant per "
                                 f"{'value' if gap.constexpr else 'class'} of {gap.param} "
                                 "(added by warmlint fix)."))
                for cls, (_, name), text in values]
    raise NoFix(f"{why}, and no warmup call that launches the kernel passes the "
                f"{values[0][1][0] if values else 'request'} object by name")


def _guarded(gap, call, extra: tuple = (), decisions: list | None = None) -> tuple:
    """(guard, names): ``decisions`` (default: where ``call`` launched the kernel) as
    source, then ``extra``."""
    guard, reads_envs = call.guard(gap.launch_decisions(call) if decisions is None
                                   else decisions)
    return tuple(guard) + extra, ("envs",) * reads_envs


def _rows_edit(gap, call, rows: int, cls: str):
    classes = call.request_classes
    arg = call.request_argument(classes) if len(classes) == 1 else None
    if arg is None:
        return None  # slicing two request objects consistently is not attempted
    guard, names = _guarded(gap, call, (f"{call.batch_var} > {rows}",) if call.batch_var else ())
    note = (f"Warm `{gap.kernel_name}` for a batch of {rows} rows ({gap.param} {cls}): "
            f"Triton compiles it once per class of {gap.param} (added by warmlint fix).")
    return InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                      rows=Rows(rows, call.per_row_arguments, arg.per_row_fields),
                      guard=guard, note=note, names=names)


def _dtype_edit(gap, call, cls: str):
    """A pointer's element type that a request field has in serving (int32 ``top_k``):
    the call again with that field converted (``top_k=metadata.top_k.to(torch.int32)``),
    where the warmup's own value of it is a tensor."""
    dtype = typed(cls)
    for owner, name in gap.typed_fields(cls) if dtype else ():
        arg = call.request_argument({owner})
        if arg is None or not isinstance(arg.values.get(name), Tensor):
            continue
        guard, names = _guarded(gap, call)
        return InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                          set_fields=((name, f"{BASE}.{name}.to(torch.{dtype})"),),
                          guard=guard, names=names + ("torch",),
                          note=(f"Warm `{gap.kernel_name}` with {gap.param} of element "
                                f"type {dtype}, as serving's {name} has: Triton compiles one "
                                "variant per pointer element type (added by warmlint fix)."))
    return None


def _value_edit(gap, call, cls: str, reasons: list):
    options = []
    for name in sorted(call.request_classes):
        arg = call.request_argument({name})
        if arg is None:
            continue
        try:
            options.append((gap.request_changes(arg, cls), arg))
        except NoFix as exc:
            reasons.append(exc.reason)
    if not options:
        return None
    changes, arg = min(options, key=lambda o: len(o[0]))
    guard, names = _guarded(gap, call)
    names += ("torch",) * any("torch" in v for _, v in changes)
    what = "value" if gap.constexpr else "None-ness" if cls in ("None", "tensor") else "class"
    note = (f"Warm `{gap.kernel_name}` with {gap.param} {cls}: Triton compiles one variant "
            f"per {what} of {gap.param} (added by warmlint fix).")
    return InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                      set_fields=tuple(changes), guard=guard, note=note, names=names)
