"""Whole specialization keys, pairwise with the batch size.

Triton compiles a kernel once per *key*: the tuple of every constexpr value and every
specialized int's class, not each parameter on its own. Judging parameters one by one
(``specialization.specialization_gaps``) misses a request whose values were each warmed,
but never together: vLLM 0.21.0's fixed warmup compiled `_topk_topp_kernel` with
``TOPK_ENABLED=False`` at its 256 rows (``% 16 == 0``) and with 8 rows (``other``) with
both flags on, and a top-p-only request of 37 rows then compiled for 2.2-4.9 s on the
H200 (FlashInfer off).

What is judged here: a parameter that follows the batch size alone (``BATCH_SIZE``), paired
with each other request-dependent parameter of the same launch that does not follow the
batch size (a flag, a None-able pointer). The batch size and a request field are
independent request inputs, so every pair of their serving classes is reachable; a pair
the warmups never launched together, of two classes each warmed on its own, is a gap
(a class warmed by no launch is the per-parameter gap's, and its fix's next round pairs
it). Pairs of two request fields are not judged: their correlations (vLLM returns
before the launch when neither top-k nor top-p is set) are lost where paths join, and
would be reported as gaps no request reaches. Values computed from a request integer
(``IntExpr``) are not paired either.
"""

from __future__ import annotations

from warmlint.serving import BATCH_INPUT, is_row_count
from warmlint.values import Const, IntExpr, Sym, options


def pair_gaps(facts, found: list) -> list:
    """``specialization.Gap``s of (parameter value, batch class) pairs that serving
    launches reach and no warm launch made together, in key order; ``found``:
    ``specialization.launches``."""
    from warmlint.specialization import finish

    gaps: dict = {}
    limits = facts.settings.request_int_limits
    for program, index, kernel, sig, warm_hits, serving in found:
        _add(gaps, program, index, kernel, sig, warm_hits, serving, limits)
    return finish(gaps)


def _add(gaps: dict, program, index: int, kernel: str, sig, warm_hits: list,
         serving: list, limits: dict) -> None:
    from warmlint.specialization import Gap

    for batch in batch_params(sig, serving):
        for param in sorted({p for h in serving for p in h.args}):
            if param == batch or param in sig.no_specialize:
                continue
            warm = _warm_pairs(warm_hits, param, batch, sig, limits)
            if not warm:
                continue
            for hit in serving:
                for value, cls, exact in _missing(hit, param, batch, sig, limits, warm):
                    key = (program.runner, kernel, hit.site.key, param, batch, value)
                    gap = gaps.setdefault(key, Gap(program, kernel, param, hit, sig,
                                                   batch_param=batch, pair_value=value))
                    gap.leaves.add(index)
                    gap.missing.add(cls)
                    decided = hit if exact else _deciding(hit, param, value)
                    _add_hit(gap, cls, index, decided or hit, decided is not None)
                    gap.warmed |= {c for v, c in warm if v == value}
                    gap.named |= _inputs(hit.args[param]) | {BATCH_INPUT}
                    gap.cfgs.append(hit.cfg)
                    gap.add_path(decided or hit, index)
                    gap.warm_hits += [h for h in warm_hits if h not in gap.warm_hits]


def batch_params(sig, hits: list) -> list:
    """Specialized int parameters that follow a row count alone (the batch size, a request
    index's rows) on every serving hit where their value is told."""
    names = sorted({p for h in hits for p in h.args})
    return [p for p in names
            if p not in sig.constexpr and p not in sig.no_specialize
            and any(_told(h.args.get(p)) for h in hits)
            and all(_is_rows(_inputs(h.args[p])) for h in hits
                    if p in h.args and _told(h.args[p]))]


def _told(value) -> bool:
    """A value that says what it counts (a symbol); an unknown one (rows lost on the way:
    `stats.unjudged`) neither makes nor unmakes a batch parameter."""
    return value is not None and all(isinstance(o, (Sym, Const, IntExpr))
                                     for o in options(value))


def _is_rows(inputs: set) -> bool:
    return bool(inputs) and all(is_row_count(i) for i in inputs)


def _inputs(value) -> set:
    from warmlint.specialization import direct_inputs

    named, tainted = direct_inputs(value)
    return named or tainted


def _classes(hit, param: str, sig, limits: dict, pointer: bool = False):
    from warmlint.specialization import _as_pointer

    value = hit.args[param]
    return sig.classes(param, _as_pointer(value) if pointer else value, hit.facts, limits)


def _warm_pairs(warm_hits: list, param: str, batch: str, sig, limits: dict) -> set | None:
    """The (value, batch class) pairs the warmups launched; None when one cannot be told."""
    pairs: set = set()
    for hit in warm_hits:
        if param not in hit.args or batch not in hit.args:
            continue
        values = _classes(hit, param, sig, limits)
        classes = _classes(hit, batch, sig, limits)
        if values is None or classes is None:
            return None
        pairs |= {(v, c) for v in values for c in classes}
    return pairs


def _missing(hit, param: str, batch: str, sig, limits: dict, warm: set) -> list:
    """The pairs ``hit`` reaches that the warmups never launched, of classes each warmed."""
    if param not in hit.args or batch not in hit.args:
        return []
    value = hit.args[param]
    inputs = _inputs(value)
    if not value.taint.inputs or not inputs or any(is_row_count(i) for i in inputs) or any(
            isinstance(o, IntExpr) for o in options(value)):
        return []
    warm_values = {v for v, _ in warm}
    values = _classes(hit, param, sig, limits, pointer="tensor" in warm_values)
    classes = _classes(hit, batch, sig, limits)
    if values is None or classes is None:
        return []
    warm_classes = {c for _, c in warm}
    return sorted((v, c, len(values) == 1) for v in values & warm_values
                  for c in classes & warm_classes if (v, c) not in warm)


def _deciding(hit, param: str, value: str):
    """``hit`` on the path where a flag over one request field (``TOPP_ENABLED = p is not
    None``) that the path leaves open takes ``value``: its facts refined by the flag (so a
    fix sets ``top_p=None``); None for any other argument."""
    from dataclasses import replace

    from warmlint.state import SymFact, refine_fact
    from warmlint.values import Pred

    pred = hit.args[param]
    if not (isinstance(pred, Pred) and pred.sym.kind == "request" and value in ("True",
                                                                             "False")):
        return None
    truth = (value == "True") != pred.negated
    fact = refine_fact(hit.facts.get(pred.sym.key) or SymFact(), pred.op, pred.const, truth)
    return replace(hit, facts={**hit.facts, pred.sym.key: fact})


def _add_hit(gap, cls: str, index: int, hit, exact: bool) -> None:
    """The hits a fix reads its request changes from: those whose path decides the value
    (``top_k`` unset for ``TOPK_ENABLED`` False) once there is one, else every hit (a
    path that leaves it open would let the fix set an unrelated field)."""
    hits = gap.missing_hits.setdefault(cls, [])
    if exact and cls not in gap.pair_exact:
        gap.pair_exact.add(cls)
        hits.clear()
    if exact or cls not in gap.pair_exact:
        hits.append((index, hit))
