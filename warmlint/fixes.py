"""What ``warmlint fix`` does about each finding: the ``fix`` object of JSON and SARIF.

CI has to tell the findings ``warmlint fix`` handles from those a person must handle
without running the codemod, so every finding carries
``fix = {"available": bool, "safe": bool, "description": str}``. The answer is per
finding, not per rule: WL001 is fixable only for outcomes driven by a metadata field the
warmup sets, WL004 only for batch-size classes. Three sources, most specific first:

1. ``Finding.fix`` set by the rule itself (WL003 names the copy it removes);
2. the codemod's own plan (``codemod.plan.build_plan``, what ``warmlint fix`` applies),
   matched at analysis time, before the result is cached, so a cache hit carries it;
3. the rule's declared ``fix_safety``, for findings no plan covers (WL002, WL100).
"""

from __future__ import annotations

import os

_PLANNED = ("WL001", "WL004")


def annotate(findings: list, facts) -> None:
    """Set ``fix`` on the WL001/WL004 findings from the codemod plan of ``facts``."""
    todo = [f for f in findings if f.fix is None and f.rule in _PLANNED]
    if not todo:
        return
    from warmlint.codemod.plan import build_plan

    try:
        plan = build_plan(facts)
    except Exception as exc:  # noqa: BLE001 - a planning bug must not cost the report
        if os.environ.get("WARMLINT_DEBUG"):
            raise
        for finding in todo:
            finding.fix = _none(f"fix planning failed ({type(exc).__name__})")
        return
    unfixable = {_site(cold): reason for cold, reason in plan.unfixable}
    batches = {i.fingerprint: i.note for i in plan.insertions if i.rows}
    # `warmlint fix` never edits a file it could not fully analyze.
    broken = {e.path for e in facts.tree.errors} | {p for p, _, _ in facts.errors}
    skipped = sorted({i.path for i in plan.insertions} & broken)
    for finding in todo:
        if finding.rule == "WL001":
            key = (finding.path, finding.line, finding.col,
                   tuple(finding.extra.get("outcomes", ())))
            reason = unfixable.get(key, "")
            text = "`warmlint fix` adds a warmup call that takes this outcome"
        else:
            note = batches.get(finding.extra.get("identity"))
            reason = "" if note else "only batch-size classes are warmed automatically"
            text = f"`warmlint fix` adds a warmup call: {note}" if note else ""
        if not reason and skipped:
            reason = f"`warmlint fix` skips {', '.join(skipped)}: it has analysis errors"
        finding.fix = _none(reason) if reason else {"available": True, "safe": True,
                                                    "description": text}


def _site(cold) -> tuple:
    site = cold.div.site
    return (site.path, site.line, site.col, tuple(d.outcome for d in cold.divergences))


def _none(reason: str) -> dict:
    return {"available": False, "safe": False, "description": f"no automatic fix: {reason}"}


def complete(findings: list) -> None:
    """Give every finding a normalized ``fix`` (rules of the remaining ones are loaded)."""
    from warmlint.rules import load

    codes = {f.rule for f in findings if f.fix is None or "available" not in f.fix}
    rules = {rule.code: rule for rule in load(codes)} if codes else {}
    for finding in findings:
        finding.fix = normalize(finding.fix, rules.get(finding.rule))


def normalize(fix: dict | None, rule=None) -> dict:
    if fix and "available" in fix:
        return fix
    if fix:  # a rule's own per-finding fix: {"description", "safe", optional "edits"}
        return {"available": True, **fix, "safe": bool(fix.get("safe"))}
    if rule is None:
        return _none("unknown rule")
    if rule.fix_safety.startswith("no automatic fix"):
        return {"available": False, "safe": False,
                "description": f"{rule.fix_safety} (`warmlint rule {rule.code}`)"}
    return _none(f"none planned for this finding (the rule's fixes: {rule.fix_safety})")
