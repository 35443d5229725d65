"""Warm serving calls on plain data record what they read, so that a cold call reusing
one (``reuse.CallReuse.lookup``: a divergence's path takes the warm path's call) can
still be recorded for other leaves (``cold_share.py``).

Why: vLLM 0.33.0's ``apply_top_k_top_p_triton`` reuses, on every cold path, a warm call
made before it (``num_compute_units``); unrecorded, that reuse left the whole
``apply_sampling_constraints`` chain unshared across its speculative leaves (~100,000
serving steps, docs/performance.md stop 44). A warm call's log is a ``cold_share.ColdLog``
(config facts, globals and cached values read, questions to the warmup, config tests,
atoms consulted, pinned probes); one that read an older object, wrote one, or was marked
dirty keeps none, and a cold call reusing it is then not stored. A forked leaf records
nothing: its records would go with it.
"""

from __future__ import annotations

from warmlint.interp import built, read_trace, warm_share
from warmlint.interp.cold_share import forked
from warmlint.interp.value_digest import memo_digest
from warmlint.values import (
    Builtin, ClassVal, Const, External, Func, Guarded, IntExpr, Module, Obj, OneOf,
    RowIndex, Seq, Sym, Tensor, Unknown,
)


def plain(v) -> bool:
    t = type(v)
    if t is Tensor:
        return v.rows is None and (v.batch is None or plain(v.batch)) \
            and (v.cols is None or plain(v.cols))
    if t is Func or t is Builtin:
        return v.bound is None or plain(v.bound)
    if t is Seq:
        return all(map(plain, v.items)) if v.items is not None else (
            _plain_opt(v.elem) and _plain_opt(v.size))
    if t is Obj:
        return v.request and not v.attrs
    if t is OneOf or t is Guarded:
        return all(map(plain, v.options))
    return t in _PLAIN or isinstance(v, Const)


def _plain_opt(v) -> bool:
    return v is None or plain(v)


_PLAIN = (Sym, IntExpr, RowIndex, ClassVal, Module, External, Unknown)


def warm_call(interp, reuse, site, ref, args: list, kwargs: dict, state, run) -> list:
    """A call on a warm serving path: replayed from an earlier leaf's record, or ``run()``
    (``warm_share.call``); what it read is kept (``WarmCall.log``) where its arguments are
    plain data, so that a cold call reusing it can be recorded too."""
    logged = interp.memo.cold is not None and interp.memo.cold.enabled \
        and not forked(interp) and all(map(plain, args)) and all(map(plain, kwargs.values()))
    hits0 = len(interp.policy.warm_hits)  # (``before`` is the memo's: cached.store)
    reuse.begin_warm()
    results, log = warm_share.call(interp, reuse, site, ref, args, kwargs, state, run, logged)
    made = reuse.end(site, ref, args, kwargs, state, results, len(interp.stack),
                     interp.policy.warm_hits[hits0:])
    if made is not None and logged and log is not None \
            and not (log.dirty or log.trace or log.written or log.items_written):
        made.log = log
    return results


def reused_warm(interp, call) -> None:
    """A warm call reused on a cold path inside calls being recorded: they read what it
    read, as the leaf holds it now (it ran before them); one without a log read what is
    not known. A record the warm call ran inside already holds its reads."""
    log = call.log
    driver, memos_now = interp.driver, None
    for other in read_trace.OPEN:
        if call.seq > other.calls0:
            continue  # (made inside: its reads were this record's)
        if log is None:
            other.dirty = other.dirty or "a warm call reused without a record"
            continue
        if memos_now is None:
            memos_now = dict(built.memos(interp))
        for key, (sym, _) in log.facts.items():  # (before merge_into, which keeps these)
            if key not in other.facts:
                other.facts[key] = (sym, repr(driver.peek(sym)))
        for name, key in log.memos:
            if (name, key) not in other.memos:
                now = memos_now[name].get(key, read_trace.MISSING)
                other.memos[(name, key)] = None if now is read_trace.MISSING \
                    else ("pre", memo_digest(now))
        log.merge_into(other)
