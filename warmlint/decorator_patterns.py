"""Decorator patterns a user added that match no decorator of the code the run read.

Why: ``extend-triton-decorators = ["mykernels.jti"]`` (a typo for ``jit``) recognizes
nothing: the kernels a fork decorates with ``@mykernels.jit`` are not sinks, their cold
variants are not findings, and the run reads as clean. Like a pin that pins nothing
(``analysis.unread_pins``), such a pattern is a stderr warning and
``stats.unmatched_patterns``; the exit status stays the findings' (the analysis is
complete; the setting just changed nothing).

Judged: the patterns of the decorator settings that are not among the defaults (vLLM's
own decorators need not all appear in every release), against the decorators of every
function and method of every module whose table of contents the run built (a forked
leaf's modules included: the parent builds the tables of what its children read), each
resolved through the module's imports as recognition resolves it (``sinks.matches``).
On a complete run only: a module left unread might hold the decorator.
"""

from __future__ import annotations

from warmlint.settings import Settings
from warmlint.sinks import matches

# Settings fields whose patterns are matched against decorators, with their TOML keys.
FIELDS = (("triton_decorators", "triton-decorators"),
          ("compile_decorators", "compile-decorators"),
          ("triton_dispatchers", "triton-dispatchers"),
          ("registry_capture_decorators", "registry-capture-decorators"),
          ("sink_decorators", "sink-decorators"))


def added(settings: Settings) -> list[tuple[str, str]]:
    """(setting key, pattern) for each decorator pattern not among the defaults."""
    defaults = Settings()
    return [(key, pattern) for name, key in FIELDS for pattern in getattr(settings, name)
            if pattern not in getattr(defaults, name)]


def unmatched(settings: Settings, resolver) -> list[dict]:
    """``{setting, pattern}`` for each added pattern no decorator the run read matches."""
    wanted = added(settings)
    if not wanted:
        return []
    names = _decorators(resolver)
    return [{"setting": key, "pattern": pattern} for key, pattern in wanted
            if not any(matches(name, (pattern,)) for name in names)]


def _decorators(resolver) -> set[str]:
    tree, names = resolver.tree, set()
    for module in tree.tocs_built():
        toc = tree.toc(module)
        functions = list(toc.functions.values())
        for cls in toc.classes.values():
            functions += cls.methods.values()
        for info in functions:
            names.update(resolver.decorator_names(module, info.decorators))
    return names
