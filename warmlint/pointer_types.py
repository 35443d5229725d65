"""Pointer element types in a Triton kernel's specialization key.

Why: Triton compiles a kernel once per pointer element type (``*i64`` and ``*i32`` are
two signatures). vLLM 0.20.0/0.21.0's speculative-decoding warmup fills ``top_k`` with
``torch.full`` of an int (int64) while serving's comes from ``InputBatch.top_k`` (int32):
``expand_kernel`` compiles again on the first speculative request with top-k, 42-190 ms
on the H200.

A pointer argument is judged by type where serving passes a request field whose type
the code building the request writes down (``field_dtypes``), and every tensor on both
sides has a known type (the warmups': ``Tensor.dtype``, ``interp/dtypes.py``). Anything
else keeps the untyped class ``tensor`` (None-ness only): an unknown type never makes a
finding, and a tensor the sampler makes itself (0.21.0 passes ``logits`` as a dummy
``K`` when top-k is off) is judged through the arguments that choose it
(``TOPK_ENABLED``), not twice.
"""

from __future__ import annotations

from warmlint.values import Const, Sym, Tensor, options

PREFIX = "tensor "  # "tensor int32": a pointer class with its element type


def typed(cls: str) -> str | None:
    """The element type of a typed pointer class, else None."""
    return cls[len(PREFIX):] if cls.startswith(PREFIX) else None


def typed_classes(param: str, warm_hits: list, value, field_type,
                  memo: dict | None = None) -> tuple | None:
    """(warmed, serving) classes of a pointer argument, typed ("tensor int32", "None"),
    or None where some tensor's type is not known. ``field_type(owner, field)``: a
    request field's type (``field_dtypes.FieldTypes``). ``memo``: the warmed classes per
    ``param``, for callers that ask again about the same ``warm_hits``."""
    warmed = memo.get(param, False) if memo is not None else False
    if warmed is False:
        warmed = _warmed(param, warm_hits)
        if memo is not None:
            memo[param] = warmed
    if warmed is None:
        return None
    serving = _classes(value, field_type)
    if serving is None or not any(request_field(o) for o in options(value)):
        return None
    return warmed, serving


def _warmed(param: str, warm_hits: list) -> set | None:
    warmed: set = set()
    for hit in warm_hits:
        got = _classes(hit.args.get(param), None)
        if got is None:
            return None
        warmed |= got
    return warmed


def _classes(value, field_type) -> set | None:
    if value is None:
        return None
    out = set()
    for opt in options(value):
        if isinstance(opt, Const) and opt.value is None:
            out.add("None")
            continue
        dtype = opt.dtype if isinstance(opt, Tensor) else \
            field_type(*opt.key.split(".")) if field_type and request_field(opt) else None
        if dtype is None:
            return None
        out.add(PREFIX + dtype)
    return out


def request_field(value) -> bool:
    """A field of a request object itself (``SamplingMetadata.top_k``), not a derived
    input (``len(...)``, ``rows(...)``, ``x.y.z``)."""
    return isinstance(value, Sym) and value.kind == "request" and value.key.count(".") == 1 \
        and "(" not in value.key
