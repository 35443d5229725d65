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
the configs where the outcome can happen. `warmlint fix` inserts that call: it sets the
fields of the warmup's metadata in which a serving path reaching the cold sink differs
from the warmup (set or unset, true or false, `!= -1`), with `None`/`False`/`{}` for
"unset" and the `fix-values` entry for "set"; a path that needs a field it has no value
for (a per-row tensor), or a nested or derived input, has no automatic fix, and the
finding's `fix.reason` says which. One call per cold sink, guarded by the
dispatch-binding decisions common to every outcome that leaves it cold.

On the model runner v2 the outcome is chosen by per-request rows
(`self.sampler.add_request(req_idx, params)`), not by a metadata object. There the fix
fills every row with a copy of the warmup's own request with one `fix-values` field set
(`msgspec.structs.replace(warmup_params, seed=0)`), publishes the rows
(`apply_staged_writes()`) and runs the warmup's sampler call again, under the same guard.

**Fix safety.** Safe: the extra call runs only at start-up on dummy data, reuses the
warmup's logits tensor (no copy, so peak memory does not grow beyond the heaviest real
request), and never changes sampling results. It does lengthen start-up by one sampler
step.
"""

from __future__ import annotations

from warmlint.edits import InsertCall, NoFix
from warmlint.findings import Finding, canonical_paths
from warmlint.rule_api import Invalid, Valid, sink_phrase
from warmlint.rule_examples import SEEDED_CALL, seeded_sampler

CODE = "WL001"
NAME = "unwarmed-dispatch-branch"
SUMMARY = "Input-dependent branch outcome reaches a JIT sink that no warmup reaches"
FIX_SAFETY = "safe (warmlint fix, where the serving path differs in metadata fields it can set)"
MESSAGE = ("{outcome}{within} ({function}) reaches {sink} via {chain}, "
           "which no warmup reaches ({warmups}); request input: {inputs}; configs: {configs}")

EXAMPLES = [
    Invalid(seeded_sampler(marker="  # expect: WL001"),
            note="The fast path falls back to the Triton kernel for seeded requests; "
                 "the warmup never passes a generator."),
    Valid(seeded_sampler(extra=SEEDED_CALL),
          note="A second warmup call on replace(metadata, generators=...) takes the outcome."),
    Valid(seeded_sampler(marker=""), assume={"VLLM_USE_FAST_PATH": "0"},
          note="With the fast path off, the warmup itself runs the Triton kernel."),
]


def check(facts):
    for cold in facts.cold_branches:
        site = cold.site
        configs, exact = cold.configs()
        sinks = cold.sinks
        chain = cold.chain
        inputs = sorted(set().union(*(o.inputs for o in cold.outcomes)))
        outcome = " or ".join(o.text for o in cold.outcomes)
        sink_text = ", ".join(sink_phrase(s) for s in sinks)
        config_text = ", ".join(configs) if configs else "all"
        if configs and not exact:
            config_text += " (in some of them)"
        # "`x` is true in `x`" says nothing twice: name the whole condition only when it differs.
        whole = len(cold.outcomes) == 1 and outcome.startswith(f"`{site.condition}` ")
        within = "" if whole else f" in `{site.condition}`"
        message = MESSAGE.format(outcome=outcome, within=within,
                                 function=site.function, sink=sink_text,
                                 chain=" -> ".join(chain), warmups=", ".join(cold.warmups),
                                 inputs=", ".join(inputs), configs=config_text)
        yield Finding(
            rule=CODE, name=NAME, path=site.path, line=site.line, col=site.col,
            function=site.function, message=message, condition=site.condition,
            outcome=outcome, inputs=inputs, sinks=sinks, chain=chain, warmups=cold.warmups,
            configs=configs,
            extra={"outcomes": [o.id for o in cold.outcomes],
                   "literals": [[list(lit.inputs), lit.positive] for o in cold.outcomes
                                for lit in o.literals],
                   "paths": canonical_paths(cold.paths), "configs_exact": exact,
                   "runner": cold.runner},
            subject=cold,
        )


def fix(finding, facts):
    """One more call of the warmup's entry with its request object changed to take a
    serving path that reaches the cold sinks (``replace(<metadata>, <field>=<value>)``),
    guarded by the dispatch-binding decisions under which the outcome is cold."""
    cold = finding.subject
    call = cold.calls[0]
    owners = {i.split(".")[0] for i in cold.outcomes[0].inputs}
    arg = call.request_argument(owners)
    rows = owners & set(facts.settings.request_params_classes)
    if rows:  # per-request rows (v2) decide it: fill them, else vary the metadata object
        try:
            return _fill_rows(cold, call, rows, facts)
        except NoFix:
            if arg is None:
                raise
    if arg is None:
        raise NoFix("the warmup's entry call passes no metadata object to replace()")
    changes = cold.request_changes(arg)
    if call.anchor is None:
        raise NoFix("cannot locate the entry call statement")
    field = _field_of(cold) or changes[0][0]
    guard, reads_envs = call.guard(cold.binding_decisions)
    note = _note(cold, f"taken when {cold.outcomes[0].text}", guard)
    names = ("torch",) * any("torch" in v for _, v in changes) + ("envs",) * reads_envs
    return [InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                       set_fields=tuple(changes), guard=tuple(guard), note=note,
                       names=names, field=field, **_planning(cold, field, facts))]


def _note(cold, taken: str, guard) -> str:
    sinks = ", ".join(sink_phrase(s) for s in cold.sinks)
    return (f"Warm the branch of {cold.site.function} {taken}; it reaches {sinks}"
            + ("; skipped where the sampler's dispatch binding makes it redundant" if guard
               else "") + " (added by warmlint fix).")


def _planning(cold, field: str, facts) -> dict:
    """What the planner needs: the sinks the call warms, and its rank. One call per cold
    sink: when two outcomes reach the same sink, the first field of fix-values wins (once
    `max_num_logprobs` warms the compiled rank count, the `logprob_token_ids` outcome
    reaching the same sink is warm too)."""
    order = list(facts.settings.fix_values)
    return {"covers": frozenset((cold.runner, s) for s in cold.sink_ids),
            "priority": order.index(field) if field in order else len(order)}


def _fill_rows(cold, call, owners: set, facts) -> list:
    """Model runner v2: the outcome is chosen by per-request rows. Fill every row with a
    copy of the warmup's own request with one field set (``seed=0``), publish the rows and
    run the warmup's sampler call again, under the same guard as a v1 call."""
    changes = cold.row_changes(sorted(owners)[0])
    fill = cold.row_fill(call)
    guard, reads_envs = call.guard(cold.binding_decisions)
    field = changes[0][0]
    taken = " or ".join(dict.fromkeys(o.text for o in cold.outcomes))
    note = _note(cold, f"taken when {taken}, with `{field}` set in every row", guard)
    return [InsertCall(call.path, call.function, fill.anchor, fill.call, None,
                       set_fields=tuple(changes), guard=tuple(guard), note=note,
                       names=("envs",) * reads_envs, field=field, fill=fill,
                       imports=fill.imports, **_planning(cold, field, facts))]


def _field_of(cold) -> str:
    """The one metadata field every merged outcome's literals read, or ""."""
    names = {i for o in cold.outcomes for lit in o.literals for i in lit.inputs}
    if len(names) != 1 or next(iter(names)).count(".") != 1:
        return ""
    return names.pop().split(".")[1]
