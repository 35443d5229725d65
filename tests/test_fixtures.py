"""Every fixture variant, through the real `warmlint check`, reports exactly what it expects."""

from __future__ import annotations

import pytest

from conftest import VARIANTS, make_tree, run_cli


def _key(item: dict) -> tuple:
    return (item["rule"], item["path"], item["condition"], item["outcome"])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_findings(tmp_path, variant):
    root = make_tree(tmp_path, variant)
    select = VARIANTS[variant].get("select", "WL001")
    proc = run_cli("check", "--format", "json", "--no-cache", "--select", select, str(root),
                   check_json=True)
    expected = VARIANTS[variant]["expect"]
    assert proc.returncode == (1 if expected else 0), proc.stderr
    findings = proc.json["findings"]
    assert proc.json["errors"] == []
    assert sorted(map(_key, findings)) == sorted(map(_key, expected))
    for want in expected:
        got = next(f for f in findings if _key(f) == _key(want))
        for config in want.get("configs", []):
            assert config in got["configs"], (config, got["configs"])
        assert got["sinks"] and got["chain"][-1].startswith(tuple(s["name"] for s in got["sinks"]))
