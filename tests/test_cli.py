"""What a user sees around the findings: one-line usage errors, the summary line (what was
hidden is counted), progress on stderr, `fix --out DIR`, and the tests' own cache isolation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CACHE_VARIABLES, RELEASE_CACHE, REPO, make_tree, run_cli

TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SEEDED_IF = "        if (k is None and p is None) or generators:\n"
SELECT = ("--select", "WL001,WL100")
# The values the suite started with, before the autouse fixture replaced them.
OUTSIDE = {name: os.environ.get(name) for name in CACHE_VARIABLES}


# -- usage errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    ([], "the following arguments are required: COMMAND (see `warmlint --help`)"),
    (["check", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["check", "--bogus"], "unrecognized arguments: --bogus"),
    (["rule", "WL001", "--fix"], "unrecognized arguments: --fix"),
    (["fix", "--diff", "--check"], "argument --check: not allowed with argument --diff "
                                   "(see `warmlint fix --help`)"),
    (["check", "--baseline", "a", "--write-baseline", "b"], "not allowed with"),
])
def test_argparse_errors_are_one_line_exit_2(args, needle):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("warmlint: error: ") and needle in line, line


def test_help_still_prints_usage():
    proc = run_cli("check", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: warmlint check")
    assert "-q, --quiet" in proc.stdout


# -- the summary line -----------------------------------------------------------------------

def _summary(proc) -> str:
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("warmlint: ") and " files, " in x]
    return line.split(" (")[0]


def test_summary_counts_suppressed_findings(tmp_path):
    root = make_tree(tmp_path, "base")
    text = (root / TOPK).read_text()
    (root / TOPK).write_text(text.replace(
        SEEDED_IF, SEEDED_IF.rstrip("\n") + "  # warmlint: ok[WL001] no seeds here\n", 1))
    proc = run_cli("check", "--no-cache", *SELECT, str(root))
    assert _summary(proc) == "warmlint: 1 finding, 0 errors, 1 suppressed"
    js = run_cli("check", "--no-cache", *SELECT, "--format", "json", str(root), check_json=True)
    assert js.json["stats"]["suppressed"] == 1 and "baselined" not in js.json["stats"]


def test_summary_counts_baselined_findings_and_stale_entries(tmp_path):
    base = make_tree(tmp_path, "base")
    file = tmp_path / "baseline.json"
    assert run_cli("check", "--no-cache", *SELECT, "--write-baseline", str(file),
                   str(base)).returncode == 0
    same = run_cli("check", "--no-cache", *SELECT, "--baseline", str(file), str(base))
    assert same.returncode == 0
    assert _summary(same) == ("warmlint: 0 findings, 0 errors, 0 suppressed, 2 baselined, "
                              "0 stale baseline entries")
    # Both recorded findings are fixed in `all_warm`: their entries are stale.
    warm = make_tree(tmp_path, "all_warm")
    proc = run_cli("check", "--no-cache", *SELECT, "--baseline", str(file), str(warm))
    assert _summary(proc) == ("warmlint: 0 findings, 0 errors, 0 suppressed, 0 baselined, "
                              "2 stale baseline entries")
    js = run_cli("check", "--no-cache", *SELECT, "--format", "json", "--baseline", str(file),
                 str(warm), check_json=True).json
    assert (js["stats"]["baselined"], js["stats"]["baseline_stale"]) == (0, 2)


def test_a_baseline_entry_outside_the_files_shown_is_not_stale(tmp_path):
    root = make_tree(tmp_path, "base")
    file = tmp_path / "baseline.json"
    run_cli("check", "--no-cache", *SELECT, "--write-baseline", str(file), str(root))
    proc = run_cli("check", "--no-cache", *SELECT, "--baseline", str(file), str(root / TOPK))
    assert _summary(proc) == ("warmlint: 0 findings, 0 errors, 0 suppressed, 2 baselined, "
                              "0 stale baseline entries")


def test_a_given_file_the_analysis_never_reads_is_named_not_passed_over(tmp_path):
    """No green check on code it did not look at: a file named on the command line that no
    warmup or sampler reaches is said to be unread (stderr, JSON ``stats.not_read``); the
    exit status stays the findings' of the files it did read."""
    root = make_tree(tmp_path, "base")
    (root / "vllm" / "unrelated.py").write_text("def helper(x):\n    return x + 1\n")
    both = [str(root / "vllm" / "unrelated.py"), str(root / TOPK)]
    proc = run_cli("check", "--no-cache", *SELECT, *both)
    alone = run_cli("check", "--no-cache", *SELECT, str(root / TOPK))
    assert proc.returncode == alone.returncode == 1 and proc.stdout == alone.stdout
    notes = [x for x in proc.stderr.splitlines() if x.startswith("warmlint: note:")]
    assert notes == ["warmlint: note: 1 given file not read by the analysis (no warmup or "
                     "sampler it follows reaches it): vllm/unrelated.py"]
    assert "note:" not in alone.stderr
    js = run_cli("check", *SELECT, "--format", "json", *both, check_json=True).json  # cached
    assert js["stats"]["not_read"] == ["vllm/unrelated.py"]
    whole = run_cli("check", *SELECT, "--format", "json", str(root), check_json=True).json
    assert whole["stats"]["not_read"] == [] and whole["stats"]["cache"] == "hit"
    config = tmp_path / "exclude.toml"  # a file the settings leave out is said to be so
    config.write_text('[tool.warmlint]\nexclude = ["vllm/unrelated.py"]\n')
    left_out = run_cli("check", "--no-cache", *SELECT, "--config", str(config), *both)
    assert [x for x in left_out.stderr.splitlines() if x.startswith("warmlint: note:")] == [
        "warmlint: note: 1 given file not read by the analysis (the exclude setting leaves "
        "it out): vllm/unrelated.py"]
    runner = "vllm/v1/worker/gpu_model_runner.py"  # where fix inserts its warmup calls
    fixed = run_cli("fix", "--diff", str(root / "vllm" / "unrelated.py"), str(root / runner))
    assert fixed.returncode == 1 and "+++ b/" + runner in fixed.stdout  # fix says so too
    assert notes[0] in fixed.stderr.splitlines()


# -- progress -------------------------------------------------------------------------------

def _progress_lines(proc) -> list:
    return [x for x in proc.stderr.splitlines() if x.startswith("warmlint: analyzing ")]


def test_analysis_progress_lines_without_a_terminal(tmp_path):
    root = make_tree(tmp_path, "base")
    proc = run_cli("check", "--no-cache", str(root), env={"WARMLINT_PROGRESS_INTERVAL": "0.01"})
    lines = _progress_lines(proc)
    assert lines, proc.stderr
    assert all(line.startswith(f"warmlint: analyzing {root}: ") and line.endswith(" s")
               and " files read, " in line for line in lines)
    assert "\r" not in proc.stderr  # no bar frames in a log
    assert proc.stdout.count("WL001") == 2  # stdout is the report only


def test_quiet_and_fast_runs_print_no_progress(tmp_path):
    root = make_tree(tmp_path, "base")
    fast = {"WARMLINT_PROGRESS_INTERVAL": "0.01"}
    for args, env in [(["-q"], fast), (["--quiet"], fast), ([], {})]:
        proc = run_cli("check", "--no-cache", *args, str(root), env=env)
        assert proc.returncode == 1 and _progress_lines(proc) == [], (args, proc.stderr)
    fix = run_cli("fix", "--diff", "-q", str(root), env=fast)
    assert _progress_lines(fix) == []
    fix = run_cli("fix", "--diff", str(root), env=fast)
    assert _progress_lines(fix)


def test_the_hard_exit_flushes_a_report_redirected_to_a_file(tmp_path):
    # `python -m warmlint.cli` (like the console script) leaves with os._exit, skipping
    # the interpreter's shutdown: the report must still arrive whole in a file (block
    # buffered), with the exit status main returned.
    root = make_tree(tmp_path, "base")
    out = tmp_path / "report.json"
    with open(out, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "warmlint.cli", "check", "--no-cache",
                               "--format", "json", str(root)], stdout=fh,
                              stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert report["findings"] and report["stats"]["complete"] is True


# -- fix --out DIR --------------------------------------------------------------------------

def _files(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_fix_out_writes_a_whole_tree_that_check_analyzes(tmp_path):
    root = make_tree(tmp_path, "base")
    (root / "pyproject.toml").write_text('[tool.warmlint]\nselect = ["WL001"]\n')
    (root / "vllm" / "kernels.cu").write_text("// not Python\n")
    (root / ".git").mkdir()
    before = _files(root)
    out = tmp_path / "fixed"
    proc = run_cli("fix", "--out", str(out), str(root))
    assert proc.returncode == 0, proc.stderr
    assert _files(root) == before  # the tree itself is untouched
    written = _files(out)
    assert set(written) == set(before) - {"vllm/kernels.cu"}
    changed = [rel for rel in written if written[rel] != before[rel]]
    assert changed == ["vllm/v1/worker/gpu_model_runner.py"]
    # `check` on the output sees the whole program, with the tree's own configuration.
    js = run_cli("check", "--no-cache", "--format", "json", str(out), check_json=True)
    assert js.returncode == 0 and js.json["findings"] == []
    original = run_cli("check", "--no-cache", "--format", "json", str(root), check_json=True)
    assert js.json["stats"]["files_parsed"] == original.json["stats"]["files_parsed"]
    assert run_cli("config", str(out), check_json=True).json["settings"]["select"] == ["WL001"]


@pytest.mark.parametrize("where", ["not empty", "inside the tree", "a file"])
def test_fix_out_refuses_a_directory_it_would_mix_into(tmp_path, where):
    root = make_tree(tmp_path, "base")
    out = {"not empty": tmp_path / "out", "inside the tree": root / "out",
           "a file": tmp_path / "file"}[where]
    if where == "not empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine\n")
    elif where == "a file":
        out.write_text("")
    proc = run_cli("fix", "--out", str(out), str(root))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"warmlint: error: {out}: --out ")
    assert not (root / "out").exists() or where != "inside the tree"


# -- the suite's own isolation --------------------------------------------------------------

def test_every_cache_variable_points_into_this_tests_tmp_path(tmp_path):
    for name in CACHE_VARIABLES:
        value = Path(os.environ[name])
        assert value.is_relative_to(tmp_path), name
        assert str(value) != OUTSIDE[name]
    assert not RELEASE_CACHE.is_relative_to(tmp_path)
    from hypothesis.configuration import storage_directory

    hypothesis_home = storage_directory()  # a Path in older Hypothesis versions
    hypothesis_home = Path(getattr(hypothesis_home, "path", hypothesis_home)).resolve()
    assert not any(hypothesis_home.is_relative_to(p) for p in (Path.cwd(), REPO))
    if not os.environ.get("WARMLINT_TEST_RELEASES"):  # the default: neither cwd nor checkout
        assert not RELEASE_CACHE.is_relative_to(Path.cwd())
        assert not RELEASE_CACHE.is_relative_to(REPO)
        for name in ("WARMLINT_CACHE_DIR", "XDG_CACHE_HOME"):
            assert not OUTSIDE[name] or not RELEASE_CACHE.is_relative_to(OUTSIDE[name])


def test_a_check_run_writes_only_into_this_tests_cache(tmp_path):
    root = make_tree(tmp_path, "base")
    run_cli("check", str(root), cwd=tmp_path)
    cache = Path(os.environ["WARMLINT_CACHE_DIR"])
    assert cache.is_dir() and any(cache.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "caches"]  # nothing in cwd
