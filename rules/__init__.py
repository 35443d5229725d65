"""The rule set, one module per rule. ``ALL`` is ordered by code."""

from __future__ import annotations

import importlib

_MODULES = [
    "wl001_unwarmed_dispatch_branch",
    "wl002_warmup_guard_drift",
    "wl003_warmup_extra_copy",
    "wl004_triton_specialization_gap",
    "wl100_unused_suppression",
]


def load() -> list:
    rules = [importlib.import_module(f"{__name__}.{name}").RULE for name in _MODULES]
    return sorted(rules, key=lambda r: r.code)


def by_code(code: str):
    for rule in load():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
