"""Settings a user added that match nothing in the code the run read.

Why: ``extend-triton-decorators = ["mykernels.jti"]`` (a typo for ``jit``) recognizes
nothing: the kernels a fork decorates with ``@mykernels.jit`` are not sinks, their cold
variants are not findings, and the run reads as clean. So does a ``warmup-functions``
entry naming no function (its warmup is never interpreted: what it warms reads as cold,
or a fork's renamed warmup stays unanalyzed) and an ``external-sinks`` package no module
imports. Like a pin that pins nothing (``analysis.unread_pins``), each is a stderr warning
and ``stats.unmatched_patterns``; the exit status stays the findings' (the analysis is
complete; the setting just changed nothing).

Judged: the entries that are not among the defaults (vLLM's own decorators and warmups
need not all appear in every release), against every module whose table of contents the
run built (a forked leaf's modules included: the parent builds the tables of what its
children read): decorators of its functions and methods, resolved through its imports
as recognition resolves them (``sinks.matches``), and its imports; a warmup function
counts when discovery took it (``warmup_discovery.discover``: found, and its first parameter names
a runner class). On a complete run only: a module left unread might hold the match.
"""

from __future__ import annotations

from warmlint.settings import Settings
from warmlint.sinks import matches

# Settings fields whose patterns are matched against decorators, with their TOML keys.
DECORATOR_FIELDS = (("triton_decorators", "triton-decorators"),
                    ("compile_decorators", "compile-decorators"),
                    ("triton_dispatchers", "triton-dispatchers"),
                    ("registry_capture_decorators", "registry-capture-decorators"),
                    ("sink_decorators", "sink-decorators"))
_DECORATOR = "no decorator of the code this run read, so it recognized nothing"
_WARMUP = "no function this run could take as a warmup (a module-level function whose " \
          "first parameter is annotated with a runner class), so it warmed nothing"
_IMPORT = "no import of the code this run read, so it recognized nothing"


def unmatched(settings: Settings, resolver, warmups: list) -> list[dict]:
    """``{setting, pattern, matches}`` for each added entry that matched nothing."""
    defaults, found = Settings(), []
    decorators = imports = None
    for name, key in DECORATOR_FIELDS:
        for pattern in _added(settings, defaults, name):
            decorators = _decorators(resolver) if decorators is None else decorators
            if not any(matches(d, (pattern,)) for d in decorators):
                found.append({"setting": key, "pattern": pattern, "matches": _DECORATOR})
    for entry in _added(settings, defaults, "warmup_functions"):
        if not any(_takes(entry, w) for w in warmups):
            found.append({"setting": "warmup-functions", "pattern": entry, "matches": _WARMUP})
    for package in _added(settings, defaults, "external_sinks"):
        imports = _imports(resolver) if imports is None else imports
        if not any(i == package or i.startswith(package + ".") for i in imports):
            found.append({"setting": "external-sinks", "pattern": package, "matches": _IMPORT})
    return found


def _added(settings: Settings, defaults: Settings, name: str) -> list[str]:
    return [p for p in getattr(settings, name) if p not in getattr(defaults, name)]


def _takes(entry: str, warmup) -> bool:
    from warmlint.warmup_discovery import _glob

    files, _, name = entry.partition("::")
    return warmup.function and warmup.ref.qualname == name and _glob(warmup.path, files)


def _tocs(resolver):
    tree = resolver.tree
    return ((module, tree.toc(module)) for module in tree.tocs_built())


def _decorators(resolver) -> set[str]:
    names = set()
    for module, toc in _tocs(resolver):
        functions = list(toc.functions.values())
        for cls in toc.classes.values():
            functions += cls.methods.values()
        for info in functions:
            names.update(resolver.decorator_names(module, info.decorators))
    return names


def _imports(resolver) -> set[str]:
    return {target for _, toc in _tocs(resolver) for target in toc.imports.values()}
