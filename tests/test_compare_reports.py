"""tools/compare_reports.py: each side imports its own warmlint, reports compared whole."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, load_tool, make_tree


def _tool():
    return load_tool("compare_reports")


def test_the_same_engine_gives_the_same_report_and_each_side_imports_its_own(tmp_path):
    root = make_tree(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "compare_reports.py"), "HEAD",
                           str(root)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("same base -j 0: ")
    tool = _tool()
    report = tool.report(REPO, root, ["-j", "0"], tmp_path, "new")  # the import is checked
    assert report["findings"]
    wrong = tmp_path / "elsewhere"
    wrong.mkdir()
    try:
        tool.report(wrong, root, [], tmp_path, "old")  # imports the installed one instead
    except SystemExit as exc:
        assert "not " + str(wrong) in str(exc)
    else:
        raise AssertionError("a side that imported another warmlint was not caught")


def test_a_difference_is_reported_and_fails(tmp_path, monkeypatch, capsys):
    tool = _tool()
    reports = iter([{"findings": [1], "stats": {"seconds": 1, "only_new": 1}},
                    {"findings": [1, 2], "stats": {"seconds": 2}}])
    monkeypatch.setattr(tool, "report", lambda *args: next(reports))
    monkeypatch.setattr(tool.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, "", ""))
    assert tool.main(["HEAD", str(tmp_path)]) == 1
    assert capsys.readouterr().out.startswith("DIFF ")
    old, new = tool.normalized({"findings": [], "stats": {"seconds": 1, "a": 1}},
                               {"findings": [], "stats": {"seconds": 2, "a": 1, "b": 2}})
    assert old == new == {"findings": [], "stats": {"a": 1}}
