"""The rule set: every ``wl<NNN>_<name>.py`` module of this package is a rule.

A rule is registered, listed and selected by default by being here: the code and the
kebab-case name come from the file name (``wl004_triton_specialization_gap.py`` is
``WL004`` ``triton-specialization-gap``), so knowing the codes imports no rule (a warm
run must not pay for importing the analysis the rules pull in). ``load`` imports them and
builds each ``Rule`` from the module (``rule_api.Rule.from_module``), which checks that the
module's ``CODE`` and ``NAME`` say what its file name says. Every directory of this
package's ``__path__`` is scanned, so a plug-in directory appended to it works the same.
"""

from __future__ import annotations

import importlib
import os
import re

FILE = re.compile(r"^(wl\d+)_([a-z0-9_]+)\.py$")


def modules() -> dict:
    """code -> module name, for every rule file (ordered by code)."""
    found = {}
    for directory in __path__:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = FILE.match(name)
            if match:
                found.setdefault(match.group(1).upper(), name[:-3])
    return dict(sorted(found.items()))


def codes() -> tuple:
    return tuple(modules())


def load(codes=None) -> list:
    """The rules (``codes``: only those), ordered by code."""
    from warmlint.rule_api import Rule

    return [Rule.from_module(importlib.import_module(f"{__name__}.{name}"))
            for code, name in modules().items() if codes is None or code in codes]


def by_code(code: str):
    """A rule by its code (any case) or its kebab-case name, or None."""
    table = modules()
    if code.upper() in table:
        return load({code.upper()})[0]
    for code_, name in table.items():
        if name.split("_", 1)[1].replace("_", "-") == code:
            return load({code_})[0]
    return None
