"""Every finding's `fix` object (JSON and SARIF) says whether `warmlint fix` handles it.

The promise checked here is the one CI relies on: a finding with `fix.available` true is
gone after `warmlint fix`, and one with `fix.available` false is still there.
"""

from __future__ import annotations

import pytest

from conftest import make_tree, run_cli

KEYS = {"available", "safe", "description", "reason"}


def _json(root, *args: str) -> dict:
    proc = run_cli("check", "--format", "json", *args, str(root), check_json=True)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.json


def _by_fingerprint(report: dict) -> dict:
    return {f["fingerprint"]: f for f in report["findings"]}


@pytest.mark.parametrize("variant", ["base", "flashinfer_cold"])
def test_available_fixes_are_exactly_what_fix_removes(tmp_path, variant):
    root = make_tree(tmp_path, variant)
    before = _by_fingerprint(_json(root, "--no-cache", "--select", "WL001"))
    assert before and all(set(f["fix"]) == KEYS for f in before.values())
    proc = run_cli("fix", "--select", "WL001", str(root))
    assert proc.returncode == 0, proc.stderr
    after = _by_fingerprint(_json(root, "--no-cache", "--select", "WL001"))
    assert {fp: fp not in after for fp in before} == \
        {fp: f["fix"]["available"] for fp, f in before.items()}


def test_findings_without_a_fix_say_why(tmp_path):
    root = make_tree(tmp_path, "flashinfer_cold")
    found = _json(root, "--no-cache")["findings"]
    unfixable = [f for f in found if not f["fix"]["available"]]
    for finding in unfixable:
        fix = finding["fix"]
        assert not fix["safe"] and fix["reason"]
        assert fix["description"] == f"no automatic fix: {fix['reason']}"
    proc = run_cli("fix", "--diff", str(root))
    for finding in unfixable:
        assert (f":{finding['line']}:{finding['col']}: {finding['rule']} no automatic fix: "
                in proc.stderr)


def test_wl004_batch_classes_and_constexpr_values_are_fixable(tmp_path):
    root = make_tree(tmp_path, "base")
    gaps = {f["extra"]["parameter"]: f["fix"]
            for f in _json(root, "--no-cache", "--select", "WL004")["findings"]}
    assert gaps and all(fix["available"] and fix["safe"] for fix in gaps.values())


def test_cache_hits_carry_the_same_fix_objects(tmp_path):
    root = make_tree(tmp_path, "base")
    cold, warm = _json(root), _json(root)
    assert (cold["stats"]["cache"], warm["stats"]["cache"]) == ("miss", "hit")
    assert [f["fix"] for f in warm["findings"]] == [f["fix"] for f in cold["findings"]]


def test_meta_findings_get_the_rules_declared_fix(tmp_path):
    root = make_tree(tmp_path, "all_warm")
    path = root / "vllm/v1/sample/sampler.py"
    path.write_text(path.read_text() + "# warmlint: ok[WL001] nothing here\n")
    [meta] = _json(root, "--no-cache", "--select", "WL001,WL100")["findings"]
    assert meta["rule"] == "WL100"
    assert meta["fix"]["available"] is False and meta["fix"]["reason"]


def test_sarif_has_fixes_only_where_fix_is_available(tmp_path):
    import json

    root = make_tree(tmp_path, "flashinfer_cold")
    report = _json(root, "--no-cache", "--select", "WL001")
    sarif = json.loads(run_cli("check", "--format", "sarif", "--no-cache", "--select", "WL001",
                               str(root)).stdout)
    results = sarif["runs"][0]["results"]
    assert len(results) == len(report["findings"]) and len(
        {f["fix"]["available"] for f in report["findings"]}) == 2
    for result, finding in zip(results, report["findings"]):
        assert result["properties"]["fix"] == finding["fix"]
        assert result["properties"]["fixSafe"] == finding["fix"]["safe"]
        assert ("fixes" in result) == finding["fix"]["available"]
