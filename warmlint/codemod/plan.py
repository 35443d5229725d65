"""What ``warmlint fix`` inserts: one guarded warmup call per fixable cold outcome.

A WL001 outcome is fixable when the literals that decided it each say "this metadata
field is set" (``generators`` truthy, ``max_num_logprobs is not None``), the field is one
the warmup's own metadata object sets, and a value that sets it is known
(``Settings.fix_values``). The fix repeats the warmup's entry call on
``dataclasses.replace(<its metadata variable>, <field>=<value>)``, guarded by the config
decisions under which the outcome is cold. Those decisions come from the sampler's
dispatch binding (the only decisions warmlint treats as per-run), so the guard follows
the binding's own literals instead of a hard-coded mode list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from warmlint.configs import Decision
from warmlint.coverage import ColdOutcome, cold_outcomes
from warmlint.specialization import specialization_gaps
from warmlint.values import Obj, OneOf, Sym


@dataclass
class Insertion:
    path: str  # file to edit, relative to the root
    qualname: str  # "Class.method" holding the entry call
    anchor: tuple  # statement path of the entry call inside that function
    call_code: str  # source of the entry call, to find it again in the full module
    arg: object  # keyword name or positional index of the metadata argument
    meta_code: str  # source of the metadata argument
    field: str  # the metadata field set (WL001), or "" for a smaller batch (WL004)
    value: str  # Python source of the value that takes the outcome
    guard: list  # [(Decision, atom source)]
    note: str  # one-line comment above the inserted call
    fingerprint: str = ""
    needs_envs: bool = False
    rows: int | None = None  # WL004: run the call on the first `rows` rows only
    row_args: tuple = ()  # arguments (keyword or position) holding per-row tensors
    row_fields: tuple = ()  # metadata fields holding per-row values
    batch_var: str | None = None  # the warmup's own batch size variable, for the guard


@dataclass
class Removal:
    """WL003: replace a full copy of the warmup's logits by the tensor itself."""

    path: str
    qualname: str
    copy_code: str


@dataclass
class Plan:
    insertions: list = field(default_factory=list)
    unfixable: list = field(default_factory=list)  # (ColdOutcome, reason)
    removals: list = field(default_factory=list)  # [Removal]


def build_plan(facts, fields: set | None = None) -> Plan:
    plan = Plan()
    candidates = []
    outcomes = cold_outcomes(facts) if facts.settings.rule_enabled("WL001") else []
    for cold in outcomes:
        insertion, reason = _insertion(facts, cold, fields)
        if insertion is None:
            plan.unfixable.append((cold, reason))
        else:
            candidates.append((cold, insertion))
    # One call per cold sink is enough: once `max_num_logprobs` warms the compiled
    # rank count, the `logprob_token_ids` outcome reaching the same sink is warm too.
    priority = list(facts.settings.fix_values)
    candidates.sort(key=lambda c: priority.index(c[1].field))
    covered: dict = {}
    for cold, insertion in candidates:
        sinks = set(cold.hits)
        done = covered.setdefault(cold.program.runner, set())
        if sinks <= done or any(_same(insertion, other) for other in plan.insertions):
            continue
        done |= sinks
        plan.insertions.append(insertion)
    if facts.settings.rule_enabled("WL004") and fields is None:
        for insertion in _batch_insertions(facts):
            if not any(_same(insertion, other) for other in plan.insertions):
                plan.insertions.append(insertion)
    if facts.settings.rule_enabled("WL003"):
        plan.removals = _removals(facts)
    return plan


def _batch_insertions(facts) -> list:
    """WL004: warm the batch-size classes a specialized kernel argument misses."""
    from warmlint.serving import BATCH_INPUT, SERVING_BATCH
    from warmlint.specialization import smallest_in_class
    from warmlint.state import SymFact

    out = []
    for gap in specialization_gaps(facts):
        if gap.param in gap.sig.constexpr or gap.inputs != {BATCH_INPUT}:
            continue
        fact = gap.hit.facts.get(SERVING_BATCH.key) or SymFact()
        for cls in sorted(gap.missing):
            rows = smallest_in_class(cls, fact)
            if rows is None:
                continue
            for hit in gap.warm_hits:
                insertion = _rows_insertion(facts, gap, hit.entry, rows, cls) \
                    if hit.entry else None
                if insertion is not None:
                    out.append(insertion)
    return out


def _rows_insertion(facts, gap, entry, rows: int, cls: str):
    from warmlint.warmup import WARMUP_BATCH

    fn = entry.frame.fn
    anchor = statement_path(fn.node, entry.node)
    classes = _request_classes(facts, entry)
    if anchor is None or len(classes) != 1:
        return None  # slicing two request objects consistently is not attempted
    found = _metadata_arg(entry, {f"{c}.x" for c in classes})
    if found is None:
        return None
    arg, node, obj = found
    row_args = tuple(key for key, value in _arguments(entry) if _per_row(value, WARMUP_BATCH))
    row_fields = tuple(name for name, value in obj.attrs.items() if _per_row(value, WARMUP_BATCH))
    kernel = gap.kernel.rsplit(".", 1)[-1]
    note = (f"Warm `{kernel}` for a batch of {rows} rows ({gap.param} {cls}): Triton "
            f"compiles it once per class of {gap.param} (added by warmlint fix).")
    code = fn.wrapper_module.code_for_node
    return Insertion(fn.path, fn.qualname, anchor, code(entry.node), arg, code(node), "", "",
                     [], note, rows=rows, row_args=row_args, row_fields=row_fields,
                     batch_var=entry.batch_var,
                     fingerprint=f"{gap.kernel}:{gap.param}")  # the WL004 finding's identity


def _request_classes(facts, entry) -> set:
    return {o.cls.name for v in list(entry.args) + list(entry.kwargs.values())
            for o in (v.options if isinstance(v, OneOf) else (v,))
            if isinstance(o, Obj) and facts.resolver.is_request_class(o.cls)}


def _arguments(entry):
    yield from enumerate(entry.args)
    yield from entry.kwargs.items()


def _per_row(value, batch) -> bool:
    from warmlint.values import Seq, Tensor

    if isinstance(value, Tensor):
        return value.batch is not None and isinstance(value.batch, Sym) and value.batch.key == batch.key
    return isinstance(value, Seq) and value.kind == "list" and value.items is None


def _removals(facts) -> list:
    from warmlint.rules.wl003_warmup_extra_copy import copies_in_entry

    found, assignments = {}, {}
    for program in facts.programs:
        for leaf in program.leaves:
            for entry in leaf.warm.entries:
                for node, fn in copies_in_entry(entry, assignments):
                    code = fn.wrapper_module.code_for_node(node)
                    found[(fn.path, fn.qualname, code)] = Removal(fn.path, fn.qualname, code)
    return list(found.values())


def _same(a: Insertion, b: Insertion) -> bool:
    return (a.path, a.qualname, a.anchor, a.field, a.rows) == (
        b.path, b.qualname, b.anchor, b.field, b.rows)


def _insertion(facts, cold: ColdOutcome, fields: set | None):
    fieldname, reason = _field_of(cold)
    if fieldname is None:
        return None, reason
    if fields is not None and fieldname not in fields:
        return None, f"field `{fieldname}` not selected"
    value = facts.settings.fix_values.get(fieldname)
    if value is None:
        return None, f"no known value that sets `{fieldname}` (add it to fix-values)"
    entry = cold.entries[0]
    found = _metadata_arg(entry, cold.div.inputs)
    if found is None:
        return None, "the warmup's entry call passes no metadata object to replace()"
    arg, node, obj = found
    if fieldname not in obj.attrs:
        return None, f"the warmup's metadata does not set `{fieldname}`"
    fn = entry.frame.fn
    anchor = statement_path(fn.node, entry.node)
    if anchor is None:
        return None, "cannot locate the entry call statement"
    guard, needs_envs = _guard(facts, cold, entry)
    code = fn.wrapper_module.code_for_node
    from warmlint.rule_api import sink_phrase

    sinks = ", ".join(sink_phrase(s) for s in cold.sinks())
    note = (f"Warm the branch of {cold.div.site.function} taken when "
            f"{cold.div.outcome_text}; it reaches {sinks}"
            + ("; skipped where the sampler's dispatch binding makes it redundant" if guard
               else "") + " (added by warmlint fix).")
    return Insertion(fn.path, fn.qualname, anchor, code(entry.node), arg, code(node), fieldname,
                     value, guard, note, needs_envs=needs_envs), ""


def _field_of(cold: ColdOutcome):
    names = set()
    for div in cold.divergences:
        if not div.literals:
            return None, "decided by no request literal"
        for _, inputs, positive in div.literals:
            if not positive:
                return None, "the outcome needs a field to be unset or false"
            if len(inputs) != 1 or inputs[0].count(".") != 1:
                return None, f"not driven by a single metadata field ({', '.join(inputs)})"
            names.add(inputs[0])
    if len(names) != 1:
        return None, "driven by more than one field"
    return names.pop().split(".")[1], ""


def _metadata_arg(entry, inputs):
    classes = {i.split(".")[0] for i in inputs}
    call: cst.Call = entry.node
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for i, value in enumerate(entry.args):
        obj = _request_obj(value, classes)
        if obj is not None and i < len(positional):
            return i, positional[i].value, obj
    for name, value in entry.kwargs.items():
        obj = _request_obj(value, classes)
        if obj is not None:
            for a in call.args:
                if a.keyword is not None and a.keyword.value == name:
                    return name, a.value, obj
    return None


def _request_obj(value, classes):
    for opt in (value.options if isinstance(value, OneOf) else (value,)):
        if isinstance(opt, Obj) and opt.cls.name in classes:
            return opt
    return None


def _guard(facts, cold: ColdOutcome, entry):
    """Leaf-level (dispatch binding) decisions common to where the outcome is cold."""
    program = cold.program
    chosen = [program.leaves[i] for i in cold.leaves]
    common = set(chosen[0].decisions)
    for leaf in chosen[1:]:
        common &= set(leaf.decisions)
    terms, needs_envs = [], False
    callee_code = _callee_code(entry)
    for decision in [d for d in chosen[0].decisions if d in common]:
        atom = _atom_source(decision, entry.callee, callee_code)
        if atom is None:
            continue  # cannot be expressed here: the call then runs in more configs, harmless
        needs_envs |= atom.startswith("envs.")
        terms.append((decision, atom))
    return terms, needs_envs


def _callee_code(entry) -> str:
    call: cst.Call = entry.node
    return entry.frame.fn.wrapper_module.code_for_node(call.func)


def _atom_source(decision: Decision, callee, callee_code: str) -> str | None:
    if decision.key.startswith("envs."):
        return decision.key
    path = _attr_path(callee, decision.key, depth=3)
    if path is not None:
        return callee_code + path
    if decision.key.startswith("vllm_config."):
        return "self." + decision.key
    return None


def _attr_path(value, key: str, depth: int, seen=None) -> str | None:
    """``.a.b`` such that ``value.a.b`` is the config symbol ``key``."""
    seen = seen or set()
    if not isinstance(value, Obj) or depth == 0 or value.oid in seen:
        return None
    seen.add(value.oid)
    for name, attr in value.attrs.items():
        if isinstance(attr, Sym) and attr.key == key:
            return "." + name
    for name, attr in value.attrs.items():
        sub = _attr_path(attr, key, depth - 1, seen)
        if sub is not None:
            return "." + name + sub
    return None


def statement_path(func: cst.FunctionDef, target: cst.CSTNode) -> tuple | None:
    """Path to the simple statement containing ``target``: (index, block, index, ...)."""

    def contains(node) -> bool:
        found = []

        class Finder(cst.CSTVisitor):
            def on_visit(self, n):
                if n is target:
                    found.append(n)
                return not found

        node.visit(Finder())
        return bool(found)

    def walk(block, prefix):
        for index, stmt in enumerate(block):
            if not contains(stmt):
                continue
            if isinstance(stmt, cst.SimpleStatementLine):
                return prefix + (index,)
            for name, inner in suites(stmt):
                found = walk(inner, prefix + (index, name))
                if found is not None:
                    return found
            return None
        return None

    return walk(func.body.body, ())


def suites(stmt):
    """(name, statements) of each block directly nested in a compound statement."""
    for name in ("body", "orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if isinstance(part, cst.If):  # elif
            yield name, [part]
        elif isinstance(part, cst.IndentedBlock):
            yield name, part.body
        elif part is not None and isinstance(getattr(part, "body", None), cst.IndentedBlock):
            yield name, part.body.body  # Else, Finally
    for i, handler in enumerate(getattr(stmt, "handlers", ()) or ()):
        if isinstance(handler.body, cst.IndentedBlock):
            yield f"handlers.{i}", handler.body.body
