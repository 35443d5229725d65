"""`# warmlint: ok[CODE] <reason>` suppressions and the WL100 meta rule, through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from warmlint import suppress
from warmlint.check import analyze_tree
from warmlint.settings import Settings

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER = "vllm/v1/sample/sampler.py"
SEEDED_IF = "        if (k is None and p is None) or generators:\n"
SELECT = ("--select", "WL001,WL100")  # the rules these tests are about; others may report too


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _check(root: Path, *args: str):
    proc = run_cli("check", "--format", "json", "--no-cache", *(args or SELECT), str(root),
                   check_json=True)
    assert "Traceback" not in proc.stderr
    return proc, {(f["rule"], f["path"]) for f in proc.json["findings"]}, proc.json["findings"]


def _wl100(findings: list) -> list:
    return [f for f in findings if f["rule"] == "WL100"]


@pytest.mark.parametrize("where", ["same line", "line above"])
def test_reasoned_suppression_hides_the_finding(tmp_path, where):
    root = make_tree(tmp_path, "base")
    pragma = "# warmlint: ok[WL001] FlashInfer is off in our deployment"
    if where == "same line":
        _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  " + pragma + "\n")
    else:
        _edit(root, TOPK, SEEDED_IF, "        " + pragma + "\n" + SEEDED_IF)
    proc, found, _ = _check(root)
    assert found == {("WL001", SAMPLER)}
    assert proc.returncode == 1


def test_suppression_two_lines_above_does_not_reach(tmp_path):
    root = make_tree(tmp_path, "base")
    _edit(root, TOPK, SEEDED_IF, "        # warmlint: ok[WL001] too far away\n\n" + SEEDED_IF)
    _, found, findings = _check(root)
    assert ("WL001", TOPK) in found
    [meta] = _wl100(findings)
    assert meta["path"] == TOPK and "suppresses nothing" in meta["message"]
    assert meta["function"] == "TopKTopPSampler.forward_cuda"


def test_suppression_without_reason_does_not_suppress_and_is_reported(tmp_path):
    root = make_tree(tmp_path, "base")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001]\n")
    proc, found, findings = _check(root)
    assert ("WL001", TOPK) in found
    [meta] = _wl100(findings)
    assert meta["outcome"] == "no-reason" and "has no reason" in meta["message"]
    assert proc.returncode == 1


def test_several_codes_in_one_suppression(tmp_path):
    root = make_tree(tmp_path, "base")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001,WL004] rare\n")
    _, found, findings = _check(root, "--select", "WL001,WL004,WL100")
    assert ("WL001", TOPK) not in found
    [meta] = _wl100(findings)  # WL004 reports nothing on this line: that code is unused
    assert meta["outcome"] == "unused" and meta["extra"]["identity"] == "WL004"


def test_stale_suppression_is_wl100(tmp_path):
    root = make_tree(tmp_path, "all_warm")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001] was cold\n")
    proc, found, findings = _check(root)
    assert found == {("WL100", TOPK)}
    assert findings[0]["line"] == 30 and proc.returncode == 1


def test_malformed_pragma_is_reported(tmp_path):
    root = make_tree(tmp_path, "all_warm")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok WL001 rare\n")
    _, _, findings = _check(root)
    assert [f["outcome"] for f in _wl100(findings)] == ["malformed"]


def test_pragma_inside_a_string_is_not_a_comment(tmp_path):
    root = make_tree(tmp_path, "base")
    _edit(root, TOPK, SEEDED_IF, '        _ = "# warmlint: ok[WL001] not a comment"\n' + SEEDED_IF)
    _, found, _ = _check(root)
    assert ("WL001", TOPK) in found and not any(r == "WL100" for r, _ in found)


def test_deselected_rule_makes_no_unused_report_and_wl100_can_be_ignored(tmp_path):
    root = make_tree(tmp_path, "base")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001] rare\n")
    _, found, _ = _check(root, *SELECT, "--ignore", "WL001")
    assert found == set()
    _edit(root, TOPK, "ok[WL001] rare", "ok[WL001]")
    _, found, _ = _check(root, *SELECT, "--ignore", "WL100")
    assert found == {("WL001", TOPK), ("WL001", SAMPLER)}  # still not suppressed


def test_only_files_the_analysis_read_are_scanned(tmp_path):
    root = make_tree(tmp_path, "all_warm")
    (root / "vllm" / "unrelated.py").write_text("x = 1  # warmlint: ok[WL001] nothing here\n")
    settings = Settings(select=("WL001", "WL100"))
    report = analyze_tree(root, settings, None)
    assert "vllm/unrelated.py" not in report.files and TOPK in report.files
    assert suppress.apply(report, settings).findings == []


def test_suppression_applies_on_cache_hits_and_after_edits(tmp_path):
    root = make_tree(tmp_path, "base")
    env = {"WARMLINT_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        proc = run_cli("check", "--format", "json", *SELECT, str(root), env=env, check_json=True)
        return proc.json["stats"]["cache"], {(f["rule"], f["path"]) for f in proc.json["findings"]}

    assert run() == ("miss", {("WL001", TOPK), ("WL001", SAMPLER)})
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001] rare\n")
    # a comment moves no code: the stored result is reused, the suppression still applies
    assert run() == ("hit", {("WL001", SAMPLER)})
    assert run() == ("hit", {("WL001", SAMPLER)})


def test_path_arguments_also_filter_wl100(tmp_path):
    root = make_tree(tmp_path, "all_warm")
    _edit(root, TOPK, SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001] stale\n")
    proc = run_cli("check", "--format", "json", "--no-cache", *SELECT, str(root / SAMPLER),
                   check_json=True)
    assert proc.json["findings"] == [] and proc.returncode == 0


def test_parse_comment_grammar():
    sup = suppress.parse_comment("a.py", 3, 10, "# warmlint: ok[WL001, wl004] rare  # noqa: E501")
    assert sup.codes == ("WL001", "WL004") and sup.reason == "rare" and sup.col == 11
    assert sup.text == "# warmlint: ok[WL001, wl004] rare"
    assert suppress.parse_comment("a.py", 1, 0, "# warmlint:ok[WL001]").reason == ""
    assert suppress.parse_comment("a.py", 1, 0, "# warmlint: ok[] why").malformed
    assert suppress.parse_comment("a.py", 1, 0, "# warmlint: ok[W-1] why").malformed
    assert suppress.parse_comment("a.py", 1, 0, "# gpu-sync-ok: fine") is None
