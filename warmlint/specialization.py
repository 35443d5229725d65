"""Triton specialization keys: which argument values compile a new kernel variant.

Triton compiles a kernel once per specialization key. Every ``tl.constexpr`` parameter
is part of it (each distinct value is a new compile), and so is the *class* of every
non-constexpr integer argument: equal to 1, divisible by 16, or neither, unless the
parameter is listed in ``do_not_specialize`` (no classes) or
``do_not_specialize_on_alignment`` (only "equal to 1" is kept).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


from warmlint import sinks
from warmlint.kernel_decl import read_declaration
from warmlint.state import _UNSET, SymFact, eval_pred
from warmlint.interp import ints
from warmlint.values import Const, IntExpr, OneOf, Pred, Sym, Tensor, Unknown, Value, options

ONE, ALIGNED, OTHER = "== 1", "% 16 == 0", "other"


@dataclass
class KernelSignature:
    params: list  # names in order
    constexpr: set
    no_specialize: set = field(default_factory=set)
    no_alignment: set = field(default_factory=set)
    decorator: str = "triton.jit"

    def classes(self, param: str, value: Value, facts: dict, limits: dict) -> set | None:
        """``classes_of`` for an argument of this kernel: constexpr or specialized int, with
        its alignment option."""
        return classes_of(value, facts, param not in self.constexpr,
                          param not in self.no_alignment, limits)


def kernel_signature(resolver, ref) -> KernelSignature | None:
    info = resolver.func_info(ref)
    decl = read_declaration(resolver.tree, ref.module, info) if info is not None else None
    return KernelSignature(**decl) if decl is not None else None


def direct_inputs(value: Value) -> tuple[set, set]:
    """(inputs named by the argument's own symbols, inputs it is only tainted with).

    A symbol or a predicate over one names its input exactly (``k is not None`` comes from
    ``top_k``); a computed value only carries the inputs of everything it came from.
    """
    named: set = set()
    tainted: set = set()
    for opt in (value.options if isinstance(value, OneOf) else (value,)):
        if isinstance(opt, Pred) and opt.sym.kind == "request":
            named.add(_input_name(opt.sym))
        elif isinstance(opt, Sym) and opt.kind == "request":
            named.add(_input_name(opt))
        elif isinstance(opt, IntExpr):
            named.add(_input_name(opt.base))
        else:
            tainted |= set(opt.taint.inputs)
    return named, tainted


def _input_name(sym: Sym) -> str:
    from warmlint.serving import BATCH_INPUT, SERVING_BATCH

    return BATCH_INPUT if sym.key == SERVING_BATCH.key else sym.key


def int_class(value: int) -> str:
    return ONE if value == 1 else ALIGNED if value % 16 == 0 else OTHER


def smallest_in_class(cls: str, fact: SymFact) -> int | None:
    """The smallest batch size the path allows in ``cls`` (None if it allows none)."""
    lo = int(fact.lo or 1)
    hi = fact.hi
    for n in range(max(lo, 1), (int(hi) if hi is not None else lo + 32) + 1):
        if int_class(n) == cls:
            return n
    return None


def int_classes(fact: SymFact) -> set:
    """Classes a symbolic int can fall in, given what the path knows about it."""
    if fact.eq is not _UNSET and isinstance(fact.eq, int):
        return {int_class(fact.eq)}
    lo = 0 if fact.lo is None else fact.lo
    hi = fact.hi
    out = set()
    if lo <= 1 and (hi is None or hi >= 1) and fact.mod16 is not True:
        out.add(ONE)
    if (hi is None or hi >= max(lo, 16)) and fact.mod16 is not False:
        out.add(ALIGNED)
    start = max(lo, 2)
    if fact.mod16 is not True and (hi is None or any(n % 16 for n in range(int(start), int(hi) + 1))):
        out.add(OTHER)
    return out


def classes_of(value: Value, facts: dict, specialized_int: bool, alignment: bool = True,
               limits: dict | None = None) -> set | None:
    """The specialization classes ``value`` can take, or None when they cannot be told.
    A constexpr computed from a request integer (``IntExpr``) takes each value it has
    over the field's range (``request-int-limits``); beside it, an option that cannot be
    told (``logprobs == -1``: the vocabulary size) adds nothing rather than hiding the
    values that can."""
    out: set = set()
    opts = value.options if isinstance(value, OneOf) else (value,)
    derived = not specialized_int and any(isinstance(o, IntExpr) for o in opts)
    for opt in opts:
        got = _int_values(opt, facts, limits or {}, specialized_int) \
            if isinstance(opt, IntExpr) else _classes(opt, facts, specialized_int)
        if got is None and derived and isinstance(opt, Unknown):
            continue
        if got is None:
            return None
        out |= got
    if specialized_int and not alignment:  # do_not_specialize_on_alignment
        out = {c if c == ONE else OTHER for c in out}
    return out


def _classes(value: Value, facts: dict, specialized_int: bool) -> set | None:
    if isinstance(value, Const):
        if specialized_int and isinstance(value.value, int) and not isinstance(value.value, bool):
            return {int_class(value.value)}
        return {repr(value.value)}
    if isinstance(value, Pred):
        truth = eval_pred(facts.get(value.sym.key) or SymFact(), value.op, value.const)
        if truth is None:
            return {"True", "False"}
        return {repr(truth != value.negated)}
    if isinstance(value, Sym) and value.is_int and specialized_int:
        return int_classes(facts.get(value.key) or SymFact())
    if isinstance(value, Tensor):
        return {"tensor"}
    return None


def _int_values(expr: IntExpr, facts: dict, limits: dict, specialized_int: bool) -> set | None:
    """The values (a constexpr) or the classes (a specialized int) ``expr`` takes."""
    got = ints.values(expr, *_base_range(expr, facts, limits))
    if got is None:
        return None
    return {int_class(v) for v in got} if specialized_int else {repr(v) for v in got}


def _base_range(expr: IntExpr, facts: dict, limits: dict) -> tuple:
    """(lo, hi) of the request integer ``expr`` is computed from: its path's facts within
    ``request-int-limits``; hi None when unbounded."""
    fact = facts.get(expr.base.key) or SymFact()
    limit = limits.get(limit_name(expr.base.key))
    hi = fact.hi if fact.hi is not None and (limit is None or fact.hi <= limit) else limit
    return (int(fact.lo) if fact.lo is not None and fact.lo >= 0 else 0), hi


def length_of(key: str) -> str | None:
    """The list field whose length the request integer ``key`` is
    (``len(SamplingMetadata.logprob_token_ids[])``: ``SamplingMetadata.logprob_token_ids``),
    or None for any other integer."""
    if key.startswith("len(") and key.endswith(")"):
        return key[4:-1].removesuffix("[]")
    return None


def limit_name(key: str) -> str:
    """The ``request-int-limits`` entry of a request integer: its field's name; a list
    field's length is limited by the list field's own entry (``logprob_token_ids``)."""
    return (length_of(key) or key).rsplit(".", 1)[-1]


def witness(value: Value, facts: dict, limits: dict, target: str | int) -> tuple | None:
    """(request field key, the smallest value of it within its range) for which a value
    computed from it (``IntExpr``) is ``target``: a constexpr's value (``"8"``) or a
    specialized int's class (``"% 16 == 0"``); None if none is."""
    target = str(target)  # a value's digits never spell a class, nor the reverse
    for expr in (o for o in options(value) if isinstance(o, IntExpr)):
        lo, hi = _base_range(expr, facts, limits)
        if hi is not None and hi - lo <= ints.MAX_BASE:
            found = next((n for n in range(lo, int(hi) + 1) if target in (
                str(got := ints.evaluate(expr, n)), int_class(got))), None)
            if found is not None:
                return expr.base.key, found
    return None


def _as_pointer(value: Value) -> Value:
    """A serving value passed where the warmups pass a tensor (a pointer parameter).

    A comparison over a request field is a predicate when the field is a scalar and an
    element-wise tensor when it is a tensor (``temperature == 0.0``); request fields carry
    no type, so at a pointer parameter such a predicate is taken as the tensor it is.
    """
    opts = [Tensor(None, o.taint) if isinstance(o, Pred) and o.op not in ("is_none", "truthy")
            else o for o in (value.options if isinstance(value, OneOf) else (value,))]
    return opts[0] if len(opts) == 1 else OneOf(tuple(opts), value.taint)


@dataclass
class Gap:
    """A request-dependent kernel parameter whose serving classes the warmups miss."""

    program: object
    kernel: str  # sink id
    param: str
    hit: object  # a serving SinkHit at the launch
    sig: KernelSignature
    leaves: set = field(default_factory=set)
    missing: set = field(default_factory=set)
    warmed: set = field(default_factory=set)
    named: set = field(default_factory=set)
    tainted: set = field(default_factory=set)
    cfgs: list = field(default_factory=list)
    warm_hits: list = field(default_factory=list)  # warmup launches of the kernel
    paths: list = field(default_factory=list)  # request facts on paths reaching the gap
    path_leaves: list = field(default_factory=list)  # leaf indices of each path
    # missing class -> [(leaf index, serving SinkHit)] producing it (fixes read its facts)
    missing_hits: dict = field(default_factory=dict)
    # A pair (key_pairs): ``param`` at ``pair_value`` never launched together with the
    # batch-size parameter ``batch_param`` in the classes ``missing``
    batch_param: str = ""
    pair_value: str = ""
    pair_exact: set = field(default_factory=set)  # classes with a hit deciding the value

    @property
    def inputs(self) -> set:
        """Where the argument comes from: its own symbols if any path names them."""
        return self.named or self.tainted

    def add_path(self, hit, index: int) -> None:
        """Record the request facts of ``hit``'s path, and that leaf ``index`` has it."""
        path = request_facts(hit.facts)
        if path not in self.paths:
            self.paths.append(path)
            self.path_leaves.append(set())
        self.path_leaves[self.paths.index(path)].add(index)


def request_facts(facts: dict) -> dict:
    """{request input: "set" | "unset"} known on a path (for `warmlint verify`)."""
    from warmlint.serving import BATCH_INPUT, SERVING_BATCH

    out = {}
    batch = facts.get(SERVING_BATCH.key)
    if batch is not None and batch.lo is not None:
        out[f"{BATCH_INPUT} >="] = int(batch.lo)
    for key, fact in facts.items():
        if "." not in key:
            continue
        if fact.truthy is not None:
            out[key] = "set" if fact.truthy else "unset"
        elif fact.none is not None:
            out[key] = "unset" if fact.none else "set"
    return dict(sorted(out.items()))


def _kernel_ref(sink_id: str):
    from warmlint.resolve import FuncRef

    module, name = sinks.parse_id(sink_id)[1].rsplit(".", 1)
    return FuncRef(module, name)


def _warmed(hits: list, sig: KernelSignature, limits: dict) -> dict:
    warmed: dict = {}
    for hit in hits:
        for param, value in hit.args.items():
            got = sig.classes(param, value, hit.facts, limits)
            if got is None:
                warmed[param] = None
            elif warmed.get(param, set()) is not None:
                warmed[param] = warmed.get(param, set()) | got
    return warmed


def launches(facts):
    """(program, leaf index, kernel sink id, signature, warm hits, serving hits) for each
    leaf and each specializing kernel its warmups launch."""
    signatures: dict = {}  # kernel sink id -> its signature, read once
    for program in facts.programs:
        for index, leaf in enumerate(program.leaves):
            serving = list(leaf.serving.warm_hits)
            for _, hits, _ in leaf.serving.cold.values():
                serving += hits
            for kernel in sorted({h.sink_id for h in leaf.warm.hits
                                  if sinks.kind_named(h.kind).specializes}):
                if kernel not in signatures:
                    signatures[kernel] = kernel_signature(facts.resolver, _kernel_ref(kernel))
                sig = signatures[kernel]
                if sig is not None:
                    yield (program, index, kernel, sig,
                           [h for h in leaf.warm.hits if h.sink_id == kernel],
                           [h for h in serving if h.sink_id == kernel])


def specialization_gaps(facts, found: list, unjudged: set | None = None) -> list[Gap]:
    """The per-parameter gaps over ``found`` (``launches``); ``unjudged`` collects
    ``kernel.param`` of each request-fed argument whose classes (serving's or the
    warmups') cannot be told: not judged."""
    from warmlint.field_dtypes import FieldTypes
    from warmlint.pointer_types import typed_classes

    gaps: dict = {}
    limits = facts.settings.request_int_limits
    types = FieldTypes(facts.tree, facts.warmups)
    for program, index, kernel, sig, warm_hits, serving in found:
        warmed = _warmed(warm_hits, sig, limits)
        field_type = functools.partial(types.get, program.runner)
        typed_warm: dict = {}  # param -> the warmups' typed classes (typed_classes)
        merged: set = set()  # gaps that have this launch's warm hits (merging is O(n^2))
        for hit in serving:
            for param, value in hit.args.items():
                if param in sig.no_specialize or not value.taint.inputs:
                    continue
                had = warmed.get(param)
                got = None
                if had is not None and "tensor" in had:
                    value = _as_pointer(value)
                    had, got = typed_classes(param, warm_hits, value, field_type,
                                             typed_warm) or (had, None)
                got = got or sig.classes(param, value, hit.facts, limits)
                if (got is None or had is None) and unjudged is not None:
                    unjudged.add(f"{kernel.rsplit('.', 1)[-1]}.{param}")
                if got is None or had is None or not (got - had):
                    continue
                key = (program.runner, kernel, hit.site.key, param)
                gap = gaps.setdefault(key, Gap(program, kernel, param, hit, sig))
                gap.leaves.add(index)
                gap.missing |= got - had
                for cls in got - had:
                    gap.missing_hits.setdefault(cls, []).append((index, hit))
                gap.warmed |= had
                named, tainted = direct_inputs(value)
                gap.named |= named
                gap.tainted |= tainted
                gap.cfgs.append(hit.cfg)
                gap.add_path(hit, index)
                if key not in merged:
                    merged.add(key)
                    gap.warm_hits += [h for h in warm_hits if h not in gap.warm_hits]
    return finish(gaps)


def finish(gaps: dict) -> list[Gap]:
    """The gaps in key order, each path with the configs it needs (``_path_configs``)."""
    for gap in gaps.values():
        _path_configs(gap)
    return [gaps[k] for k in sorted(gaps)]


def _path_configs(gap: Gap) -> None:
    """Give each path the leaf decisions it needs beyond the gap's own (``configs``): a
    path only speculative decoding has (no 8-row minimum there) must not predict a
    compile for a plain batch of 1 (``warmlint verify``)."""
    leaves = gap.program.leaves

    def common(indices) -> set:
        return set.intersection(*(set(leaves[i].decisions) for i in indices))

    shared = common(gap.leaves)
    for path, indices in zip(gap.paths, gap.path_leaves):
        own = [d.text() for d in leaves[min(indices)].decisions
               if d in common(indices) - shared]
        if own:
            path["configs"] = own
