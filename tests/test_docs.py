"""docs/rules.md is generated from the rule modules; `warmlint rules` and `warmlint rule`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, load_tool, run_cli
from warmlint.rules import load

RULES = load()


def _render_docs():
    return load_tool("render_docs")


def test_rules_md_is_up_to_date():
    current = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == _render_docs().render(), \
        "docs/rules.md is stale: run `python tools/render_docs.py`"


def test_render_docs_check_mode_exits_zero_when_fresh():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "render_docs.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_rules_md_has_every_rule_and_section():
    text = _render_docs().render()
    for rule in RULES:
        assert f"## {rule.code} `{rule.name}`" in text
        assert f"#{rule.code.lower()}-{rule.name}" in text  # the index links to it
    assert text.count("**Fix safety.**") == len(RULES)


def test_rules_command_lists_every_rule():
    proc = run_cli("rules")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[r.code, r.name] for r in RULES]


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
@pytest.mark.parametrize("spelling", ["code", "lower", "name"])
def test_rule_command_prints_the_doc(rule, spelling):
    arg = {"code": rule.code, "lower": rule.code.lower(), "name": rule.name}[spelling]
    proc = run_cli("rule", arg)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{rule.code} {rule.name}\n")
    for heading in ("**What it does.**", "**Why it matters.**", "**Example.**", "**Fix.**",
                    "**Fix safety.**"):
        assert heading in proc.stdout


def test_unknown_rule_is_one_line_exit_2():
    proc = run_cli("rule", "WL999")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "warmlint: error: unknown rule 'WL999' (see `warmlint rules`)"]
