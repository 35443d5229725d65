"""The plugin's whole fix: the ``_dummy_sampler_run`` that ``warmlint fix`` writes.

Why its own module: the plugin ships exactly what ``fix`` would write, so it runs
``fix``'s own convergence loop (``codemod.run.compute_fixes``: analyze, plan every rule,
apply, re-analyze in memory until nothing changes) on the installed vLLM, and then has
three things to do that ``fix`` does not: keep only the method (the module-level imports
``fix`` adds are the plugin's to provide), spell each ``replace`` the inserted statements
call as the plugin's own ``__warmlint_replace`` (``dataclasses.replace`` or
``msgspec.structs.replace`` by the object; the original statements are left as they
are), and say in one log line what it added. The source it returns is then checked by
``plugin_source`` like a cached one.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

from warmlint.plugin_source import PUBLISH_METHODS, REPLACE, STATE_METHODS

CLASS, METHOD = "GPUModelRunner", "_dummy_sampler_run"
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def whole_fix(root: Path, settings, runner_file: str, module: str, fields,
              replace_name: str = REPLACE):
    """(method source or None, the files it depends on, problems, what it left out, and
    for a field list ``{"unknown_fields", "known_fields"}``: the fields that drive no edit,
    and those that do, as ``fix --field`` warns of them).

    ``root`` holds the ``vllm`` package (site-packages); only that package is analyzed,
    through a temporary directory linking to it (``compute_fixes`` walks its root)."""
    from warmlint.codemod.run import compute_fixes

    package = module.split(".")[0]
    farm = Path(tempfile.mkdtemp(prefix="warmlint-plugin-"))
    try:
        os.symlink(root / package, farm / package, target_is_directory=True)
        result = compute_fixes(farm, settings, set(fields) if fields is not None else None)
    finally:
        if (farm / package).is_symlink():
            os.unlink(farm / package)
        shutil.rmtree(farm, ignore_errors=True)
    report = result.report
    named = {"unknown_fields": result.unknown_fields, "known_fields": result.known_fields}
    deps = dict(report.deps)
    for fix in result.files:  # the final analysis read the fixed text: depend on the file's
        deps[fix.path] = hashlib.sha1(fix.old.encode("utf-8")).hexdigest()
    problems = list(report.incomplete or []) + [f"{rel}: {why}" for rel, why in result.skipped]
    if not problems and f"{module}.{CLASS}.{METHOD}" not in report.stats["warmups"]:
        problems = [f"{CLASS}.{METHOD} not found as a warmup of the installed vLLM"]
    if problems:
        return None, deps, problems, [], named
    fixed = {fix.path: fix for fix in result.files}
    left_out = [f"{rel} ({_count(fix.applied)})" for rel, fix in fixed.items() if rel != runner_file]
    if not result.converged:
        left_out.append(f"fixable findings left after {result.rounds} rounds")
    if runner_file not in fixed:
        return None, deps, [], left_out, named
    fix = fixed[runner_file]
    if _outside(fix.old) != _outside(fix.new):
        left_out.append(f"{runner_file}: edits outside {CLASS}.{METHOD}")
    return plugin_method(fix.old, fix.new, replace_name), deps, [], left_out, named


def _count(applied: list) -> str:
    return f"{len(applied)} edit{'s' * (len(applied) != 1)}"


def _outside(text: str) -> str:
    """The module without its imports and without the method: what else ``fix`` changed."""
    tree = ast.parse(text)
    tree.body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == CLASS:
            node.body = [n for n in node.body if getattr(n, "name", None) != METHOD]
    return ast.dump(tree)


def method_text(text: str) -> str:
    """``GPUModelRunner._dummy_sampler_run`` of a module's text, decorators included,
    dedented to a module of its own."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name == CLASS:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == METHOD:
                    start = min([d.lineno for d in item.decorator_list] + [item.lineno])
                    lines = text.splitlines(keepends=True)[start - 1: item.end_lineno]
                    return textwrap.dedent("".join(lines))
    raise LookupError(f"{CLASS}.{METHOD} not in the fixed module")


def plugin_method(old: str, new: str, replace_name: str = REPLACE) -> str:
    """The fixed method of ``new`` (the runner module ``fix`` wrote from ``old``), with the
    ``replace`` calls of its inserted statements spelled ``replace_name``."""
    source = method_text(new)
    fixed, original = ast.parse(source).body[0], ast.parse(method_text(old)).body[0]
    inserted = _align(fixed.body, original.body)
    if inserted is None:
        raise ValueError("the fix changed statements of the method, not only inserted some")
    spellings = _replace_spellings(ast.parse(new))
    spots = sorted({(n.func.lineno, n.func.col_offset, n.func.end_lineno, n.func.end_col_offset)
                    for stmt in inserted for n in ast.walk(stmt)
                    if isinstance(n, ast.Call) and ast.unparse(n.func) in spellings}, reverse=True)
    lines = source.splitlines(keepends=True)
    for line, col, end_line, end_col in spots:
        if line != end_line:
            raise ValueError("a replace call spelled over several lines")
        raw = lines[line - 1].encode("utf-8")
        lines[line - 1] = (raw[:col] + replace_name.encode() + raw[end_col:]).decode("utf-8")
    return "".join(lines)


def _align(fixed: list, original: list) -> list | None:
    """The statements of ``fixed`` that are not ``original``'s, at any depth; None if
    ``original`` is not ``fixed`` less some statements."""
    inserted, at = [], 0
    for stmt in fixed:
        same = _same(stmt, original[at]) if at < len(original) else None
        if same is None:
            inserted.append(stmt)
        else:
            inserted += same
            at += 1
    return inserted if at == len(original) else None


def _same(stmt: ast.AST, original: ast.AST) -> list | None:
    """The statements inserted inside ``stmt`` if it is ``original`` plus some, else None."""
    if type(stmt) is not type(original) or _shell(stmt) != _shell(original):
        return None
    inserted = []
    for name in stmt._fields:
        mine, theirs = getattr(stmt, name), getattr(original, name)
        if not _is_block(mine) and not _is_block(theirs):
            continue
        if not (isinstance(mine, list) and isinstance(theirs, list)):
            return None
        if mine and isinstance(mine[0], ast.stmt):
            found = [_align(mine, theirs)]
        else:  # except handlers, match cases: one for one
            found = [_same(a, b) for a, b in zip(mine, theirs)] if len(mine) == len(theirs) \
                else [None]
        if None in found:
            return None
        inserted += [s for part in found for s in part]
    return inserted


def _is_block(value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], _BLOCKS)


def _shell(node: ast.AST) -> str:
    shell = copy.copy(node)
    for name in node._fields:
        if _is_block(getattr(node, name)):
            setattr(shell, name, [])
    return ast.dump(shell)


def _replace_spellings(module: ast.Module) -> set:
    """How the fixed module spells ``dataclasses.replace`` and ``msgspec.structs.replace``."""
    found = set()
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module in ("dataclasses", "msgspec.structs"):
            found |= {a.asname or a.name for a in node.names if a.name == "replace"}
        elif isinstance(node, ast.ImportFrom) and node.module == "msgspec":
            found |= {f"{a.asname or a.name}.replace" for a in node.names if a.name == "structs"}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dataclasses":
                    found.add(f"{alias.asname or alias.name}.replace")
                elif alias.name in ("msgspec", "msgspec.structs"):
                    found.add(f"{alias.asname}.structs.replace" if alias.asname
                              else "msgspec.structs.replace")
    return found


def seeded_fix(root: Path, settings, module: str, fields, replace_name: str = REPLACE):
    """The plugin's ``seeded`` choice, as it was before the whole fix: one round of WL001's
    seeded-path call. (source or None, the files it depends on, the problems)."""
    from warmlint.check import analyze_tree
    from warmlint.codemod.plan import build_plan
    from warmlint.codemod.transform import apply_edits
    from warmlint.edits import InsertCall

    target = f"{CLASS}.{METHOD}"
    report = analyze_tree(root, settings, None, packages=("vllm",))
    if report.incomplete:
        return None, report.deps, report.incomplete
    if f"{module}.{target}" not in report.stats["warmups"]:  # not "already warm"
        return None, report.deps, [f"{target} not found as a warmup of the installed vLLM"]
    plan = build_plan(report, fields=set(fields))
    insertions = [e for e in plan.edits if isinstance(e, InsertCall) and e.function == target]
    source = None
    if insertions:
        tree = report.facts.tree
        info = tree.toc(module).classes[CLASS].methods[METHOD]
        method = "".join(tree.lines(module)[info.start - 1: info.end])
        wrapped = f"class {CLASS}:\n" + method
        new, applied = apply_edits(wrapped, insertions, replace_name=replace_name)
        if applied:
            source = textwrap.dedent(new.split("\n", 1)[1])
    return source, report.deps, []


def free_names(source: str) -> set:
    """The names the method reads that it does not bind itself."""
    tree = ast.parse(source)
    bound = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, (ast.Store, ast.Del))}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (
        ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} - bound


def checked_insertions(source, runner: Path, settings) -> list | None:
    """The statements ``source`` inserts into the installed method of ``runner`` (its
    file), if it is a checked upgrade of it (``plugin_source``); else None. One parse of
    the installed file serves both the check and ``describe``."""
    from warmlint.plugin_source import inserted_statements, installed_method

    original = installed_method(runner, CLASS, METHOD)
    return None if original is None else inserted_statements(
        source, original, settings.fix_values, settings.request_params_classes)


# -- what it added, said from the checked source itself (the same for a cached entry) --
_KERNEL = re.compile(r"(?:Warm|kernel|compile'd)\s+`(\w+)`")
_ROWS = re.compile(r"\[:(\d+)\]")


def describe(source: str, inserted: list) -> tuple[int, str]:
    """(warmup calls added, a short note of the kernels and fields they warm), from a
    checked source and the statements the check found it inserts."""
    nodes = [n for stmt in inserted for n in ast.walk(stmt)]
    calls = sum(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                and getattr(n.value.func, "attr", "") not in STATE_METHODS + PUBLISH_METHODS
                for n in nodes)
    fields = sorted({k.arg for n in nodes if isinstance(n, ast.Call)
                     and getattr(n.func, "id", "") == REPLACE for k in n.keywords
                     if not isinstance(k.value, ast.Subscript)})
    comments = " ".join(line.strip().lstrip("#") for line in source.splitlines()
                        if line.strip().startswith("#"))
    kernels = list(dict.fromkeys(_KERNEL.findall(comments)))
    rows = sorted({int(n) for n in _ROWS.findall(_unparse(inserted))})
    parts = [f"kernels: {_some(kernels)}" if kernels else "",
             f"fields: {_some(fields)}" if fields else "",
             "batches of " + "/".join(map(str, rows)) + " rows" if rows else ""]
    return calls, "; ".join(p for p in parts if p)


def _unparse(stmts: list) -> str:
    return "\n".join(ast.unparse(s) for s in stmts)


def _some(names: list, most: int = 6) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


# -- what a cache entry says, as the plugin logs it (a forged entry prints nothing odd) ----
def cached_lines(items) -> tuple:
    """What a (maybe forged) entry says was left out: short printable lines only."""
    from warmlint.printable import printable

    if not isinstance(items, list):
        return ()
    return tuple(printable(str(i))[:200] for i in items[:10])


def unknown_fields_message(entry) -> str | None:
    """For a field list that names request fields no fix of this vLLM sets (a typo:
    ``seeed``): one line naming them and the fields the fix does set; else None."""
    def names(items) -> list:
        ok = isinstance(items, list) and all(isinstance(i, str) and i.isidentifier()
                                             for i in items)
        return sorted(items)[:20] if ok else []

    unknown = names(entry.get("unknown_fields")) if isinstance(entry, dict) else []
    if not unknown:
        return None
    known = ", ".join(names(entry.get("known_fields"))) or "none"
    return (f"WARMLINT_PLUGIN_FIX names request fields no fix of this vLLM sets: "
            f"{', '.join(unknown)} (fields its fix sets: {known})")
