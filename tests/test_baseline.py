"""`check --baseline FILE` / `--write-baseline FILE`, through the real CLI."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import make_tree, run_cli
from warmlint import baseline
from warmlint.findings import Finding

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SELECT = ("--select", "WL001")  # exact counts below are WL001's


def _write(tmp_path, variant="base"):
    root = make_tree(tmp_path, variant)
    file = tmp_path / "baselines" / "warmlint-baseline.json"
    proc = run_cli("check", "--no-cache", *SELECT, "--write-baseline", str(file), str(root))
    return root, file, proc


def _one_line_error(proc) -> str:
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_write_baseline_records_sorted_entries_and_exits_zero(tmp_path):
    root, file, proc = _write(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert f"recorded 2 findings in {file}" in proc.stderr
    data = json.loads(file.read_text())
    assert data["warmlint_baseline"] == 1
    entries = data["findings"]
    assert [set(e) for e in entries] == [set(baseline.FIELDS)] * 2
    assert entries == sorted(entries, key=lambda e: (e["path"], e["rule"], e["function"],
                                                     e["fingerprint"]))
    js = run_cli("check", "--format", "json", "--no-cache", *SELECT, str(root),
                 check_json=True).json
    assert sorted(e["fingerprint"] for e in entries) == \
        sorted(f["fingerprint"] for f in js["findings"])
    assert [p.name for p in file.parent.iterdir()] == [file.name]  # no temp file left behind


def test_baselined_findings_are_not_reported(tmp_path):
    root, file, _ = _write(tmp_path)
    proc = run_cli("check", "--no-cache", *SELECT, "--baseline", str(file), str(root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert ", 2 baselined, " in proc.stderr


def test_baseline_survives_lines_moving(tmp_path):
    root, file, _ = _write(tmp_path)
    path = root / TOPK
    path.write_text('"""Moved down."""\n\n\n' + path.read_text())
    proc = run_cli("check", "--no-cache", *SELECT, "--format", "json", "--baseline", str(file),
                   str(root), check_json=True)
    assert proc.json["findings"] == [] and proc.returncode == 0


def test_only_new_findings_are_reported(tmp_path):
    _, file, _ = _write(tmp_path, "base")
    cold = make_tree(tmp_path, "flashinfer_cold")
    proc = run_cli("check", "--no-cache", *SELECT, "--format", "json", "--baseline", str(file),
                   str(cold), check_json=True)
    assert proc.returncode == 1
    outcomes = sorted(f["outcome"] for f in proc.json["findings"])
    assert outcomes == ["`(k is None and p is None) or generators` is false",
                        "`k is None and p is None` is false"]
    assert ", 2 baselined, " in proc.stderr


def test_rewriting_a_baseline_replaces_it(tmp_path):
    root, file, _ = _write(tmp_path, "base")
    inode = file.stat().st_ino
    proc = run_cli("check", "--no-cache", *SELECT, "--write-baseline", str(file),
                   str(make_tree(tmp_path, "all_warm")))
    assert proc.returncode == 0
    assert json.loads(file.read_text())["findings"] == []
    assert file.stat().st_ino != inode  # renamed into place, never written in place


@pytest.mark.parametrize("content", [None, "", "{not json", "[]", '{"findings": []}',
                                     '{"warmlint_baseline": 1, "findings": {}}',
                                     '{"warmlint_baseline": 1, "findings": [{"rule": "WL001"}]}'])
def test_missing_or_corrupt_baseline_is_a_usage_error(tmp_path, content):
    root = make_tree(tmp_path, "base")
    file = tmp_path / "baseline.json"
    if content is not None:
        file.write_text(content)
    proc = run_cli("check", "--no-cache", *SELECT, "--baseline", str(file), str(root))
    line = _one_line_error(proc)
    assert line.startswith(f"warmlint: error: {file}: ")


def test_unwritable_baseline_is_a_usage_error(tmp_path):
    root = make_tree(tmp_path, "base")
    (tmp_path / "a-file").write_text("")
    proc = run_cli("check", "--no-cache", *SELECT, "--write-baseline",
                   str(tmp_path / "a-file" / "b.json"), str(root))
    assert "cannot write baseline" in _one_line_error(proc)


def test_baseline_and_write_baseline_are_exclusive(tmp_path):
    proc = run_cli("check", "--baseline", "a.json", "--write-baseline", "b.json", str(tmp_path))
    assert proc.returncode == 2 and "not allowed with" in proc.stderr


def test_identical_fingerprints_are_counted():
    twin = dict(rule="WL001", name="n", path="p.py", col=1, function="f", message="m",
                condition="c", outcome="o")
    findings = [Finding(line=1, **twin), Finding(line=9, **twin)]
    assert findings[0].fingerprint == findings[1].fingerprint
    new, hidden = baseline.filter_new(findings, Counter({findings[0].fingerprint: 1}))
    assert hidden == 1 and [f.line for f in new] == [9]
