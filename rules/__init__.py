"""The rule set, one module per rule. ``ALL`` is ordered by code."""

from __future__ import annotations

import importlib

_MODULES = [
    "wl001_unwarmed_dispatch_branch",
]


def load() -> list:
    rules = [importlib.import_module(f"{__name__}.{name}").RULE for name in _MODULES]
    return sorted(rules, key=lambda r: r.code)


def by_code(code: str):
    for rule in load():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
