"""Compute the fixed sources of a tree: analyze, plan, apply, check; until nothing changes.

A fix changes what the warmup warms, and so what the analysis finds: a seeded warmup
call makes ``_topk_topp_kernel`` warm from a new launch site, whose batch class is then
the next gap. ``fix`` therefore plans from the tree as it will be after its own edits:
it re-analyzes the edited sources in memory (``SourceTree`` overlay) and plans again,
until a round changes nothing (at most ``MAX_ROUNDS``), so one run is a fixed point and
``fix`` then ``fix --check`` exits 0.
"""

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


MAX_ROUNDS = 6  # 0.20.0 needs 4 rounds of edits (and a fifth to see none), the fixtures 1-2


@dataclass
class FixResult:
    files: list = field(default_factory=list)  # [FileFix] that change
    unfixable: list = field(default_factory=list)  # [(Finding, reason)] left after the fix
    skipped: list = field(default_factory=list)  # [(path, reason)]
    report: object = None  # the analysis of the fixed tree
    rounds: int = 0  # rounds that changed something
    converged: bool = True  # False: MAX_ROUNDS rounds still had edits to make
    # ``fields`` given that no edit of the first round is driven by (a typo: --field seeed),
    # and the fields that do drive one
    unknown_fields: list = field(default_factory=list)
    known_fields: list = field(default_factory=list)


def compute_fixes(root: Path, settings, fields: set | None = None,
                  progress: str = "off", jobs: int | None = None,
                  cache=None) -> FixResult:
    """``cache``: a ``SummaryCache``: the first round, the tree as it is on disk, is
    ``check``'s analysis; a stored one with nothing to fix is the whole answer."""
    from warmlint.check import analyze_tree, store_report, stored_report

    if cache is not None:
        stored = stored_report(root, cache)
        if stored is not None and _nothing_to_fix(stored):
            return FixResult(report=stored, unfixable=_unfixable(stored))

    def analyze(texts: dict, banned: set):
        report = analyze_tree(root, settings, None if texts else cache, progress=progress,
                              overlay=texts, jobs=jobs)
        if cache is not None and not texts:
            store_report(root, settings, cache, report)
        return report, build_plan(report, fields=fields, banned=banned)

    texts: dict = {}  # rel -> text after the rounds so far
    originals: dict = {}
    applied: dict = {}
    skipped: dict = {}
    banned: set = set()  # content of edits that did not take what they were for
    parsed: dict = {}
    result = FixResult()
    report, plan = analyze(texts, banned)
    if fields:
        result.unknown_fields = sorted(fields - plan.fields)
        result.known_fields = sorted(plan.fields)
    while plan.edits:
        if result.rounds == MAX_ROUNDS:
            result.converged = False
            break
        new_texts, done = _apply(root, report, plan, texts, originals, skipped, parsed)
        if new_texts == texts:
            break
        new_report, new_plan = analyze(new_texts, banned)
        # An edit planned again after it was made did not take its outcome (it needs a
        # second request field, say): drop it and redo the round without it.
        again = {e.content for e in plan.edits} & {e.content for e in new_plan.edits}
        if again:
            banned |= again
            plan = build_plan(report, fields=fields, banned=banned)
            continue
        for rel, edits in done.items():
            applied[rel] = applied.get(rel, []) + edits
        texts, report, plan = new_texts, new_report, new_plan
        result.rounds += 1
    result.report, result.unfixable = report, plan.unfixable
    result.skipped = sorted(skipped.items())
    result.files = [FileFix(rel, originals[rel], texts[rel], applied[rel])
                    for rel in sorted(texts) if texts[rel] != originals[rel]]
    return result


def _nothing_to_fix(stored) -> bool:
    """Whether a stored result says, for every finding, that ``fix`` has no edit and why
    (an entry from before ``fix_order``, or without those fields, is analyzed again)."""
    return stored.fix_order is not None and all(
        f.fix is not None and f.fix.get("available") is False and "reason" in f.fix
        for f in stored.findings)


def _unfixable(stored) -> list:
    """``build_plan``'s unfixable findings of a stored result with no edit to make: those
    of rules with a fix that said why not (``NoFix``), in the order the rules made them."""
    from warmlint.rule_api import NOTHING_TO_CHANGE
    from warmlint.rules import load

    fixing = {rule.code for rule in load() if rule.fix is not None}
    found = [stored.findings[i] for i in stored.fix_order]
    return [(f, f.fix["reason"]) for f in found
            if f.rule in fixing and f.fix["reason"] != NOTHING_TO_CHANGE]


def _apply(root: Path, report, plan, texts: dict, originals: dict, skipped: dict,
           parsed: dict):
    """(texts after one round's plan, {rel: edits applied}). ``parsed``: rel -> (text, its
    LibCST module), the output of the rounds so far (parsing 0.21.0's runner takes 0.9 s)."""
    facts = report.facts
    broken = {e["path"] for e in report.errors}
    by_path: dict = {}
    for edit in plan.edits:
        by_path.setdefault(edit.path, []).append(edit)
    texts, done = dict(texts), {}
    for rel, edits in sorted(by_path.items()):
        if rel in broken:  # never touch a file we could not fully analyze
            skipped[rel] = "the file has analysis errors"
            continue
        if rel not in texts:
            originals[rel] = texts[rel] = (root / rel).read_bytes().decode("utf-8")
        first_party = {name.split(".")[0] for name in facts.tree.modules}
        old_text, module = parsed.get(rel, (None, None))
        new, done[rel] = apply_edits(texts[rel], edits, _envs_module(facts, rel), first_party,
                                     module=module if old_text == texts[rel] else None)
        parsed[rel] = (new, _check_output(rel, new))  # the next round edits this tree
        texts[rel] = new
    return texts, done


def _envs_module(facts, rel: str) -> str:
    top = rel.split("/")[0]
    return f"{top}.envs" if facts.tree.has_module(f"{top}.envs") else "vllm.envs"


def _check_output(rel: str, new: str) -> cst.Module:
    """The codemod writes only output that parses and round-trips (returned parsed)."""
    try:
        module = cst.parse_module(new)
    except cst.ParserSyntaxError as exc:  # pragma: no cover - a bug in the codemod
        raise RuntimeError(f"fix of {rel} does not parse: {exc.message}") from None
    if module.code != new:  # pragma: no cover
        raise RuntimeError(f"fix of {rel} does not round-trip")
    compile(new, rel, "exec")
    return module
