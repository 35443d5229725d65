"""Compute the fixed sources of a tree: analyze, plan, apply, and check the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from warmlint.codemod.plan import build_plan
from warmlint.codemod.transform import apply_edits


@dataclass
class FileFix:
    path: str
    old: str
    new: str
    applied: list = field(default_factory=list)


@dataclass
class FixResult:
    files: list = field(default_factory=list)  # [FileFix] that change
    unfixable: list = field(default_factory=list)  # [(Finding, reason)]
    skipped: list = field(default_factory=list)  # [(path, reason)]
    report: object = None


def compute_fixes(root: Path, settings, fields: set | None = None) -> FixResult:
    from warmlint.check import analyze_tree

    report = analyze_tree(root, settings, None)
    facts = report.facts
    plan = build_plan(report, fields=fields)
    result = FixResult(report=report, unfixable=plan.unfixable)
    broken = {e["path"] for e in report.errors}
    by_path: dict = {}
    for edit in plan.edits:
        by_path.setdefault(edit.path, []).append(edit)
    for rel, edits in sorted(by_path.items()):
        if rel in broken:  # never touch a file we could not fully analyze
            result.skipped.append((rel, "the file has analysis errors"))
            continue
        old = (root / rel).read_bytes().decode("utf-8")
        first_party = {name.split(".")[0] for name in facts.tree.modules}
        new, applied = apply_edits(old, edits, _envs_module(facts, rel), first_party)
        _check_output(rel, new)
        if new != old:
            result.files.append(FileFix(rel, old, new, applied))
    return result


def _envs_module(facts, rel: str) -> str:
    top = rel.split("/")[0]
    return f"{top}.envs" if facts.tree.has_module(f"{top}.envs") else "vllm.envs"


def _check_output(rel: str, new: str) -> None:
    """The codemod writes only output that parses and round-trips."""
    try:
        module = cst.parse_module(new)
    except cst.ParserSyntaxError as exc:  # pragma: no cover - a bug in the codemod
        raise RuntimeError(f"fix of {rel} does not parse: {exc.message}") from None
    if module.code != new:  # pragma: no cover
        raise RuntimeError(f"fix of {rel} does not round-trip")
    compile(new, rel, "exec")
