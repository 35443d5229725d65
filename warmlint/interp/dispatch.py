"""Handler lookup by LibCST node class, shared by statement and expression evaluation."""

from __future__ import annotations


def handler_for(cls, table: dict, prefix: str, kind: type, default):
    """``cls.<prefix><NodeClass>`` for a LibCST node class, looked up once per class."""
    handler = table.get(kind)
    if handler is None:
        handler = table[kind] = getattr(cls, prefix + kind.__name__, default)
    return handler
