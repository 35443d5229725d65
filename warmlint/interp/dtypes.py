"""Tensor element types, where the code says them.

Why: an index tensor selects as many rows as it has (``logits[target_logits_indices]``:
the speculative-decoding path's rows are its draft tokens), while a boolean mask selects
as many as it holds true; only the element type tells them apart. And Triton compiles a
kernel once per pointer element type: 0.20.0's rejection sampler passes the warmup's
int64 ``top_k`` and serving's int32 one to the same kernel (``specialization``).
Types are read only where they are written down: a maker's ``dtype=torch.int32``,
``torch.full`` of a Python constant or int (``logits.size(1) - 1``), ``.to(torch.int32)``,
``.long()``, a ``new_*`` or ``*_like`` copy. Anything else has no known type (None), and
nothing is concluded from it.
"""

from __future__ import annotations

from warmlint.values import Const, External, IntExpr, Sym, Tensor, Unknown, Value

# torch/numpy spellings -> one canonical name
_NAMES = {
    "int32": "int32", "int": "int32", "int64": "int64", "long": "int64", "int16": "int16",
    "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool", "bool_": "bool",
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
}
_INTEGER = {"int32", "int64", "int16", "int8", "uint8"}
# tensor methods that convert to a fixed type
_CONVERTERS = {"int": "int32", "long": "int64", "float": "float32", "half": "float16",
               "bfloat16": "bfloat16", "double": "float64", "bool": "bool"}
_KEEPS = {"contiguous", "clone", "detach", "cuda", "cpu", "new_empty", "new_zeros",
          "new_ones", "new_full", "unsqueeze", "view", "reshape", "flatten", "numpy",
          "pin_memory", "view_as", "as_strided", "copy"}


def named(value: Value | None) -> str | None:
    """``torch.int32`` / ``np.int64`` as a canonical name, or None."""
    if isinstance(value, External):
        module, _, leaf = value.qualname.rpartition(".")
        if module in ("torch", "numpy", "np"):
            return _NAMES.get(leaf)
    return None


def is_integer(dtype: str | None) -> bool:
    return dtype in _INTEGER


def is_int(value: Value) -> bool:
    """A Python int (not a bool): a constant, a request or config integer, an integer
    computed from one, a tensor's size."""
    if isinstance(value, Const):
        return type(value.value) is int
    return isinstance(value, IntExpr) or (isinstance(value, (Sym, Unknown)) and value.is_int)


def of_maker(leaf: str, args: list, kwargs: dict, like: Tensor | None) -> str | None:
    """The type a torch maker returns: its ``dtype=``, else a ``*_like`` source's type,
    else ``torch.full``'s Python constant's (``int`` -> int64, ``float`` -> float32)."""
    given = named(kwargs.get("dtype"))
    if given is not None or "dtype" in kwargs:
        return given
    if like is not None:
        return like.dtype
    if leaf == "full" and len(args) > 1:
        if is_int(args[1]):
            return "int64"
        fill = args[1].value if isinstance(args[1], Const) else None
        return "bool" if type(fill) is bool else "float32" if type(fill) is float else None
    return None


def of_method(method: str, tensor: Tensor, args: list, kwargs: dict) -> str | None:
    """The type of ``tensor.<method>(*args, **kwargs)``'s result: ``.to(torch.int32)``
    converts; ``.to("cuda")`` or ``.to(device=...)`` keeps it; ``.to(x)`` of anything
    else might be a type (``.to(logits.dtype)``) and is not known."""
    if method in _CONVERTERS and not args:
        return _CONVERTERS[method]
    if method == "view" and args and named(args[0]) is not None:  # a reinterpretation
        return named(args[0])
    if method == "to":
        given = [named(v) for v in [*args, kwargs.get("dtype")] if v is not None]
        if any(given):
            return next(g for g in given if g)
        plain = all(isinstance(a, Const) for a in args) and "dtype" not in kwargs
        return tensor.dtype if plain else None
    return tensor.dtype if method in _KEEPS else None
