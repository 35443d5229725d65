"""The rule registry: a file in rules/ is a rule, selected by default, with its fix applied.

A throw-away rule module written to a temporary directory (appended to the package's
``__path__``, as a plug-in directory would be) is found, selected, run, documented and
fixed without touching anything else: adding a rule with a fix is one file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import warmlint.rules as rules_pkg
from conftest import make_tree
from warmlint.rules import by_code, codes, load
from warmlint.settings import Settings

RULES_DIR = Path(rules_pkg.__file__).parent

THROWAWAY = '''"""WL900 `throwaway-rule`

**What it does.** Reports a warmup that never asks for two logprobs.

**Why it matters.** It does not: it shows that a rule with a fix is one file.

**Example.** `self.sampler(logits=logits, sampling_metadata=dummy_metadata)`

**Fix.** Repeat the call asking for two logprobs.

**Fix safety.** Safe: one more warmup call.
"""

from warmlint.edits import InsertCall
from warmlint.findings import Finding

CODE = "WL900"
NAME = "throwaway-rule"
SUMMARY = "A throw-away rule"
FIX_SAFETY = "safe"
EXAMPLES = []


def check(facts):
    calls = facts.warmup_calls
    if calls and not any("max_num_logprobs=2" in call.code for call in calls):
        line, col = calls[0].location
        yield Finding(rule=CODE, name=NAME, path=calls[0].path, line=line, col=col,
                      function=calls[0].function, message="no warmup asks for two logprobs",
                      subject=calls[0])


def fix(finding, facts):
    call = finding.subject
    arg = call.request_argument(call.request_classes)
    return [InsertCall(call.path, call.function, call.anchor, call.code, arg.key,
                       set_fields=(("max_num_logprobs", "2"),),
                       note="Added by the throw-away rule.")]
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    plugin_dir = tmp_path / "more_rules"
    plugin_dir.mkdir()
    (plugin_dir / "wl900_throwaway_rule.py").write_text(THROWAWAY)
    monkeypatch.setattr(rules_pkg, "__path__", [*rules_pkg.__path__, str(plugin_dir)])
    yield plugin_dir
    sys.modules.pop("warmlint.rules.wl900_throwaway_rule", None)


def test_every_rule_file_is_registered_and_selected_by_default():
    files = sorted(p.stem for p in RULES_DIR.glob("wl*.py"))
    assert [r.code for r in load()] == [f.split("_")[0].upper() for f in files]
    assert Settings().select == codes()
    for rule in load():
        assert by_code(rule.code).code == rule.code and by_code(rule.name).code == rule.code
        assert Settings().rule_enabled(rule.code)


def test_a_rule_whose_code_does_not_match_its_file_is_refused(throwaway):
    (throwaway / "wl901_misnamed.py").write_text(THROWAWAY)  # says WL900 throwaway-rule
    with pytest.raises(ValueError, match="do not match the file name"):
        load({"WL901"})
    sys.modules.pop("warmlint.rules.wl901_misnamed", None)


def test_a_throwaway_rule_with_a_fix_is_one_file(throwaway, tmp_path):
    from test_docs import _render_docs
    from warmlint.check import analyze_tree
    from warmlint.codemod.run import compute_fixes

    assert "WL900" in codes() and "WL900" in Settings().select
    assert "## WL900 `throwaway-rule`" in _render_docs().render()
    root = make_tree(tmp_path)
    report = analyze_tree(root, Settings(), None)
    [found] = [f for f in report.findings if f.rule == "WL900"]
    assert found.path == "vllm/v1/worker/gpu_model_runner.py"
    result = compute_fixes(root, Settings(select=("WL900",)))
    [fixed] = result.files
    added = [line for line in fixed.new.splitlines() if line not in fixed.old.splitlines()]
    assert any("Added by the throw-away rule." in line for line in added), added
    assert any(line.strip() == "max_num_logprobs=2," for line in added), added
    assert result.converged and result.rounds == 1 and not result.unfixable


def test_an_edit_that_leaves_its_finding_is_not_made(throwaway, tmp_path):
    """A fix is checked by re-analysis inside the run: an edit after which the rule still
    reports the finding is dropped (and said so), so `fix` then `fix --check` agree."""
    from warmlint.codemod.plan import INEFFECTIVE
    from warmlint.codemod.run import compute_fixes

    stubborn = THROWAWAY.replace('"max_num_logprobs=2" in call.code', "False")
    (throwaway / "wl901_stubborn_rule.py").write_text(
        stubborn.replace("WL900", "WL901").replace("throwaway-rule", "stubborn-rule"))
    try:
        root = make_tree(tmp_path)
        result = compute_fixes(root, Settings(select=("WL901",)))
        assert result.files == [] and result.converged
        [(finding, reason)] = result.unfixable
        assert finding.rule == "WL901" and reason == INEFFECTIVE
    finally:
        sys.modules.pop("warmlint.rules.wl901_stubborn_rule", None)
