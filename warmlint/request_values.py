"""Which request-field values make a warmup call take a serving path.

A cold branch or a missing Triton specialization is reached by serving paths, and each
path knows facts about the request fields it read (``top_k`` is None, ``all_greedy`` is
true, ``max_num_logprobs`` is not None and not -1). A fix repeats a warmup call whose
request object differs from such a path in some fields; ``changes`` says which fields,
and a value for each, so that the repeated call takes the path: the value the path
needs where it is a constant, ``None`` / ``False`` / ``{}`` where the path needs the
field unset (chosen by the type of the warmup's own value, so a dict stays a dict), or
the field's ``fix-values`` entry where it needs it set. A path needing a value that
cannot be written raises ``NoFix`` saying which.
"""

from __future__ import annotations

import ast

from warmlint.edits import NoFix
from warmlint.markers import Marker
from warmlint.state import _UNSET, SymFact, _hashable
from warmlint.values import Const, Dict, Obj, Seq, Tensor

SET = Marker(__name__, "SET")  # a value known to be not None (a tensor, an object, a seeded generator)


def changes(values: dict, cls: str, path: dict, fix_values: dict) -> list:
    """[(field, value source)] turning the warmup's request object (``values``: field ->
    abstract value) into one the path (``path``: sym key -> SymFact) accepts."""
    out = []
    for key, fact in sorted(path.items()):
        owner, _, name = key.partition(".")
        if owner != cls or "." in name or name not in values:
            continue  # not a field of this object the warmup spells out
        current = _concrete(values[name])
        if current is _UNKNOWN or _holds(fact, current) is not False:
            continue
        for source in _candidates(values[name], fix_values.get(name), fact):
            if _holds(fact, _parse(source)) is True:
                out.append((name, source))
                break
        else:
            raise NoFix(f"the path needs `{name}` {describe(fact)}, and no value for it is "
                        f"known (add one to fix-values)")
    return out


def best(paths: list, values: dict, cls: str, fix_values: dict) -> list:
    """The fewest changes over ``paths`` (at least one); NoFix if no path can be taken."""
    found, reasons = [], []
    for path in paths:
        try:
            found.append(changes(values, cls, path, fix_values))
        except NoFix as exc:
            reasons.append(exc.reason)
    found = [c for c in found if c]
    if found:
        return min(found, key=len)
    raise NoFix(reasons[0] if reasons else
                "the serving path differs from the warmup call only where warmlint cannot "
                "set a value (a nested or derived input)")


def describe(fact: SymFact) -> str:
    if fact.eq is not _UNSET:
        return f"== {fact.eq!r}"
    if fact.none is False or fact.truthy:
        return "set" + (f" and not in {sorted(fact.ne, key=repr)}" if fact.ne else "")
    return "unset" if fact.none or fact.truthy is False else "in another state"


_UNKNOWN = Marker(__name__, "_UNKNOWN")


def _concrete(value):
    if isinstance(value, Const):
        return value.value
    if isinstance(value, Dict) and value.items is not None:
        return dict(value.items)
    if isinstance(value, Seq) and value.items is not None:
        return list(value.items)
    if isinstance(value, (Tensor, Obj)):
        return SET
    return _UNKNOWN


def _candidates(current, fix_value, fact: SymFact) -> list:
    out = []
    if fact.eq is not _UNSET:
        out.append(repr(fact.eq))
    if fact.among is not None:
        out += [repr(v) for v in sorted(fact.among, key=repr)]
    if isinstance(current, Const) and isinstance(current.value, bool):
        out += ["True", "False"]
    elif isinstance(current, Dict):
        out += ["{}"]
    elif isinstance(current, Seq):
        out += ["[]"]
    elif isinstance(current, Tensor) or (isinstance(current, Const) and current.value is None):
        out += ["None"]
    if fix_value is not None:
        out.append(fix_value)
    return out


def _parse(source: str):
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return SET  # e.g. {0: torch.Generator(...)}: a value, not None


def _holds(fact: SymFact, value) -> bool | None:
    """Whether ``value`` meets ``fact``: True, False, or None where it cannot be told."""
    if value is SET:
        if fact.none or fact.truthy is False:
            return False
        constrained = fact.eq is not _UNSET or fact.among is not None
        return None if constrained else True
    if fact.none is not None and (value is None) != fact.none:
        return False
    if fact.truthy is not None and bool(value) != fact.truthy:
        return False
    if fact.eq is not _UNSET and value != fact.eq:
        return False
    if _hashable(value) and (value in fact.ne or (fact.among is not None
                                                  and value not in fact.among)):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if (fact.lo is not None and value < fact.lo) or (fact.hi is not None and value > fact.hi):
            return False
    return True


def row_requirements(path: dict, cls: str) -> dict:
    """{field: SymFact} that every row must meet for a warmup filling all rows alike to
    take ``path``, from its ``any``/``all`` facts over a ``cls`` field
    (``any:SamplingParams.seed:is_none:None:True`` true: some row's seed is not None)."""
    from warmlint.interp.tables import parse_reduction_key
    from warmlint.state import refine_fact

    out: dict = {}
    for key, fact in path.items():
        parsed = parse_reduction_key(key)
        if parsed is None or fact.truthy is None:
            continue
        _, sym, pred, const_text, negated = parsed
        owner, _, name = sym.partition(".")
        if owner != cls or "." in name:
            continue
        try:
            const = ast.literal_eval(const_text)
        except (ValueError, SyntaxError):
            continue
        holds = fact.truthy != negated  # uniform rows: any == all == each
        out[name] = refine_fact(out.get(name) or SymFact(), pred, const, holds)
    return out


def row_changes(paths: list, cls: str, fix_values: dict) -> list:
    """[(field, value source)]: one ``fix-values`` field that, set in every row, makes the
    rows take one of ``paths`` (fields in ``fix-values`` order); NoFix if none does."""
    needs = [row_requirements(path, cls) for path in paths]
    for name, source in fix_values.items():
        for need in needs:
            if name in need and _holds(need[name], _parse(source)) is True:
                return [(name, source)]
    wanted = sorted({f"{n} {describe(f)}" for need in needs for n, f in need.items()})
    raise NoFix("no fix-values field sets the rows this outcome needs"
                + (f" ({', '.join(wanted)})" if wanted else
                   " (it reads the rows through a value no single field sets, such as a "
                   "maximum over the batch)"))
