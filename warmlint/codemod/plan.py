"""What ``warmlint fix`` will change: every rule's edits for its findings, planned together.

Each rule with a ``fix(finding, facts)`` is asked, in code order, for the edits of each
of its findings (in the order the rule produced them), or why there are none
(``edits.NoFix``). Planning knows no rule: within one rule, edits are tried by their
``priority``; an edit whose ``covers`` (the sinks it warms) earlier edits already cover
is dropped (one start-up compile per cold kernel, not one per outcome reaching it); an
edit equal to an earlier one (same ``key``) is applied once; ``fix --field NAME`` keeps
the edits ``selected`` by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warmlint.edits import NoFix


@dataclass
class Plan:
    edits: list = field(default_factory=list)
    unfixable: list = field(default_factory=list)  # (Finding, reason)
    fields: set = field(default_factory=set)  # the request fields the edits are driven by


INEFFECTIVE = ("the inserted call would not take the outcome (re-analyzed with it, the "
               "finding remains): it needs more than this request field")


def build_plan(report, fields: set | None = None, banned: set = frozenset()) -> Plan:
    """``report``: an ``analyze_tree`` report (its findings before suppression);
    ``banned``: the ``content`` of edits that, once made, did not remove their finding."""
    from warmlint.rules import load

    plan = Plan()
    done: set = set()
    keys: set = set()
    for rule in load():
        if rule.fix is None:
            continue
        candidates = []
        for finding in report.produced.get(rule.code, ()):
            try:
                edits = list(rule.fix(finding, report.rule_facts))
            except NoFix as exc:
                plan.unfixable.append((finding, exc.reason))
                continue
            for edit in edits:
                if edit.field:
                    plan.fields.add(edit.field)
                keep, reason = edit.selected(fields)
                if keep and edit.content in banned:
                    keep, reason = False, INEFFECTIVE
                if keep:
                    candidates.append(edit)
                elif reason:
                    plan.unfixable.append((finding, reason))
        for edit in sorted(candidates, key=lambda e: e.priority):
            if (edit.covers and edit.covers <= done) or edit.key in keys:
                continue
            done |= edit.covers
            keys.add(edit.key)
            plan.edits.append(edit)
    return plan
