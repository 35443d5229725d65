"""The rule set, one module per rule. ``ALL`` is ordered by code."""

from __future__ import annotations

import importlib

# code -> module; the codes are listed here so that knowing them imports no rule
# (a warm run must not pay for importing the analysis that the rules pull in).
MODULES = {
    "WL001": "wl001_unwarmed_dispatch_branch",
    "WL002": "wl002_warmup_guard_drift",
    "WL003": "wl003_warmup_extra_copy",
    "WL004": "wl004_triton_specialization_gap",
    "WL100": "wl100_unused_suppression",
}


def load(codes=None) -> list:
    """The rules (``codes``: only those), ordered by code."""
    names = [MODULES[c] for c in sorted(MODULES) if codes is None or c in codes]
    return [importlib.import_module(f"{__name__}.{name}").RULE for name in names]


def by_code(code: str):
    if code.upper() in MODULES:
        return load({code.upper()})[0]
    for rule in load():
        if rule.name == code:
            return rule
    return None
