"""Warmup discovery: which methods and functions of a tree warm its model runners.

A warmup is a method matching ``warmup-methods`` in a file matching ``warmup-files``
that builds or passes request inputs (``request-classes``), or a module-level function
matching ``warmup-functions`` whose first parameter is annotated with a runner class.
What discovery could not anchor on (a runner file with no warmup, no runner at all) is
named by ``missing``: its sampler calls go unchecked, so the result is incomplete. Kept
apart from the warmup pass (``warmup.py``), which interprets what is found here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatch

import libcst as cst

from warmlint.resolve import ClassRef, FuncRef, Resolver


@dataclass(frozen=True)
class WarmupMethod:
    ref: FuncRef
    cls: ClassRef  # the runner it warms (a warmup function takes it as first parameter)
    path: str
    line: int
    function: bool = False  # a module-level warmup function (``warmup_kernels``)


def _glob(rel: str, pattern: str) -> bool:
    return fnmatch(rel, pattern) or (pattern.startswith("**/") and fnmatch(rel, pattern[3:]))


def _runner_files(resolver: Resolver):
    """(module, rel path, table of contents or None: unparsable) of each file matching
    ``warmup-files``, in module order."""
    tree, files = resolver.tree, resolver.settings.warmup_files
    for module, (rel, _) in sorted(tree.modules.items()):
        if any(_glob(rel, pat) for pat in files):
            yield module, rel, tree.toc(module)


def discover(resolver: Resolver) -> list[WarmupMethod]:
    tree, settings = resolver.tree, resolver.settings
    found = []
    for module, rel, toc in _runner_files(resolver):
        if toc is None:
            continue
        lines = tree.lines(module)
        for cls in toc.classes.values():
            for method in cls.methods.values():
                if not any(fnmatch(method.name, pat) for pat in settings.warmup_methods):
                    continue
                text = "".join(lines[method.start - 1: method.end])
                # Only warmups that build or pass request inputs can warm a sampler.
                if not any(name in text for name in settings.request_classes):
                    continue
                found.append(WarmupMethod(FuncRef(module, method.qualname),
                                          ClassRef(module, cls.name), rel, method.start))
    return found + _warmup_functions(resolver, {m.cls for m in found})


def missing(resolver: Resolver, found: list) -> list[tuple[str, int, str]]:
    """``(path, line, message)`` for what ``discover`` could not anchor the analysis on: a
    model runner file (``warmup-files``) defining classes but no warmup, or no such file
    at all. Its sampler calls go unchecked, so the result is incomplete: a deleted or
    renamed warmup must not read as a clean tree. A runner file that could not be parsed
    is an error entry already and is not named twice."""
    tree, settings = resolver.tree, resolver.settings
    warmed = {w.cls.module for w in found}
    methods = ", ".join(settings.warmup_methods)
    out, matched, runners = [], [], 0
    for module, rel, toc in _runner_files(resolver):
        matched.append(rel)
        if toc is None or not toc.classes:
            runners += rel in tree.files_failed  # unparsable: reported as such
            continue
        runners += 1
        if module not in warmed:
            first = min(cls.start for cls in toc.classes.values())
            out.append((rel, first, f"no warmup found in this model runner (no method "
                        f"matching {methods} builds request inputs): its sampler calls "
                        f"were not checked (settings: warmup-methods, warmup-files)"))
    if not runners:
        out.append(((matched or ["."])[0], 1, f"no model runner found (no file matching "
                    f"{', '.join(settings.warmup_files)} defines a class): nothing was "
                    f"checked (setting: warmup-files)"))
    return out


def _warmup_functions(resolver: Resolver, runners: set) -> list:
    """Module-level warmups (``warmup-functions``): each belongs to the runner class named
    by its first parameter's annotation, the one nearest its module (v1 and v2 runners
    share the name ``GPUModelRunner``)."""
    tree, found = resolver.tree, []
    for pattern in resolver.settings.warmup_functions:
        files, _, name = pattern.partition("::")
        for module, (rel, _) in sorted(tree.modules.items()):
            toc = tree.toc(module) if _glob(rel, files) else None
            info = toc.functions.get(name) if toc else None
            parsed = resolver.parsed(FuncRef(module, name)) if info else None
            params = list(parsed.node.params.params) if parsed else []
            if not params or params[0].annotation is None:
                continue
            wanted = cst.Module(body=[]).code_for_node(params[0].annotation.annotation)
            wanted = wanted.strip("'\" ").rsplit(".", 1)[-1]
            owners = sorted((r for r in runners if r.name == wanted), key=lambda r: -len(
                ".".join(os.path.commonprefix([r.module.split("."), module.split(".")]))))
            if owners and not any(w.ref == FuncRef(module, name) for w in found):
                found.append(WarmupMethod(FuncRef(module, name), owners[0], rel, info.start,
                                          function=True))  # once, whatever entries match it
    return found
