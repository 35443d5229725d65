"""What ``warmlint fix`` does about each finding: the ``fix`` object of JSON and SARIF.

CI has to tell the findings ``warmlint fix`` handles from those a person must handle
without running the codemod, so every finding carries
``fix = {"available", "safe", "description", "reason"}``. The rule that made the finding
computes it from its own ``fix`` (``Rule.fix_status``) during the analysis, before the
result is cached, so a cache hit carries it too. Findings made after the analysis (WL100,
by the suppression pass) get their rule's declared answer here.
"""

from __future__ import annotations


def complete(findings: list) -> None:
    """Give every finding without one a ``fix`` object."""
    from warmlint.rule_api import no_fix
    from warmlint.rules import load

    codes = {f.rule for f in findings if f.fix is None}
    rules = {rule.code: rule for rule in load(codes)} if codes else {}
    for finding in findings:
        if finding.fix is None:
            rule = rules.get(finding.rule)
            finding.fix = no_fix(f"{rule.fix_safety} (`warmlint rule {rule.code}`)"
                                 if rule else "unknown rule")
