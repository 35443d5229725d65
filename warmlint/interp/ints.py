"""Integers computed from a request integer: ``1 + num_logprobs``,
``triton.next_power_of_2(n)``, ``min(n, 1024)`` (``values.IntExpr``).

vLLM's v2 logprobs kernel takes ``TOPK_BLOCK_SIZE = min(next_power_of_2(
token_ids.shape[1]), 1024)`` as a ``tl.constexpr``, where the column count is one plus
the request's top-logprobs count: each distinct value compiles a variant, and the
warmups compile the one their own requests give. Folding these steps on constants, and
recording them on a request symbol otherwise, lets ``specialization`` list the values
serving can produce. Anything else stays unknown, as before.
"""

from __future__ import annotations

from warmlint.values import Const, IntExpr, OneOf, Sym, Unknown, Value

NEXT_POWER_OF_2 = ("triton.next_power_of_2",)
MAX_BASE = 4096  # values enumerated per base: a wider range is not enumerated


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _fold(op: str, arg, n: int) -> int:
    if op == "add":
        return n + arg
    if op == "min":
        return min(n, arg)
    if op == "max":
        return max(n, arg)
    return next_power_of_2(n)


def evaluate(expr: IntExpr, n: int) -> int:
    return apply(expr.ops, n)


def apply(ops, n: int) -> int:
    """``ops`` (an ``IntExpr``'s, or their JSON form: ``[["add", 1], ["np2", None]]``)
    applied to the request integer's value ``n``."""
    for op, arg in ops:
        n = _fold(op, arg, n)
    return n


def _symbolic(value: Value) -> IntExpr | None:
    if isinstance(value, IntExpr):
        return value
    if isinstance(value, Sym) and value.kind == "request":
        return IntExpr(value, (), value.taint)
    return None


def _int(value: Value) -> int | None:
    if isinstance(value, Const) and isinstance(value.value, int) \
            and not isinstance(value.value, bool):
        return value.value
    return None


def step(op: str, value: Value, arg: int | None = None) -> Value | None:
    """``op`` applied to ``value`` (with the constant ``arg``): a constant folded, a
    request integer extended, each option of a OneOf in turn (an option neither stays
    unknown); None when no option is either."""
    if isinstance(value, OneOf):
        done = [step(op, o, arg) for o in value.options]
        if all(d is None for d in done):
            return None
        return OneOf(tuple(d if d is not None else Unknown("", o.taint)
                           for d, o in zip(done, value.options)), value.taint)
    n = _int(value)
    if n is not None:
        return Const(_fold(op, arg, n), value.taint)
    expr = _symbolic(value)
    if expr is None:
        return None
    return IntExpr(expr.base, expr.ops + ((op, arg),), expr.taint)


def add(a: Value, b: Value) -> Value | None:
    """``a + b`` where one side is a constant int and the other a request integer (or a
    OneOf holding some)."""
    x, y = _int(a), _int(b)
    if x is not None and y is not None:
        return Const(x + y, a.taint | b.taint)
    if y is not None:
        got, other = step("add", a, y), b
    elif x is not None:
        got, other = step("add", b, x), a
    else:
        return None
    return got.with_taint(other.taint) if got is not None else None


def bound(name: str, args: list) -> Value | None:
    """``min(x, c)`` / ``max(x, c)`` of a request integer and a constant."""
    if len(args) != 2:
        return None
    consts = [a for a in args if _int(a) is not None]
    other = [a for a in args if _int(a) is None]
    if len(consts) == 2:
        return Const((min if name == "min" else max)(_int(a) for a in consts),
                     consts[0].taint | consts[1].taint)
    if len(consts) != 1 or len(other) != 1:
        return None
    got = step(name, other[0], _int(consts[0]))
    return got.with_taint(consts[0].taint) if got is not None else None


def values(expr: IntExpr, lo, hi) -> set | None:
    """The values ``expr`` takes for base values in [lo, hi], or None if unbounded."""
    if hi is None:
        return None
    lo = 0 if lo is None else int(lo)
    hi = int(hi)
    if hi - lo > MAX_BASE:
        return None
    return {evaluate(expr, n) for n in range(lo, hi + 1)}
