"""Each rule's own valid/invalid examples, run through the real analysis."""

from __future__ import annotations

from pathlib import Path

import pytest

from warmlint import suppress
from warmlint.check import analyze_tree
from warmlint.config_leaves import parse_assumed
from warmlint.rules import load
from warmlint.settings import Settings

RULES = load()
CASES = [(rule, i, ex) for rule in RULES for i, ex in enumerate(rule.examples)]


def _write(root: Path, files: dict) -> None:
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


@pytest.mark.parametrize("rule,index,example", CASES,
                         ids=[f"{r.code}-{i}-{type(e).__name__}" for r, i, e in CASES])
def test_example(tmp_path, rule, index, example):
    _write(tmp_path, example.tree())
    # A meta rule judges the other rules' findings, so its examples run them all.
    settings = Settings(select=(rule.code,) if rule.kind == "analysis" else Settings().select)
    settings.assume.update({k: parse_assumed(str(v)) for k, v in example.assume.items()})
    report = suppress.apply(analyze_tree(tmp_path, settings, None), settings)
    assert report.errors == []
    got = {(f.path, f.line, f.rule) for f in report.findings}
    assert got == example.expected()


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_documented(rule):
    for heading in ("**What it does.**", "**Why it matters.**", "**Example.**", "**Fix.**",
                    "**Fix safety.**"):
        assert heading in rule.doc, f"{rule.code} doc lacks {heading}"
    assert rule.invalid and rule.valid, "each rule needs valid and invalid examples"
    assert rule.name == rule.name.lower() and " " not in rule.name

