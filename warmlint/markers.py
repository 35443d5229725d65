"""Named singletons (``state._UNSET``, ``request_values.SET``) that stay themselves through
pickling: values compare with them by identity, and forked config leaves
(``leaf_fork``) send their values back pickled."""

from __future__ import annotations

import importlib


class Marker:
    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def __reduce__(self):
        return _lookup, (self.module, self.name)


def _lookup(module: str, name: str) -> Marker:
    return getattr(importlib.import_module(module), name)
