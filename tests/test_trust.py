"""Issue 13 through the real CLI: hostile inputs, hostile caches, quiet wrong answers.

Every case here was a hang, a crash, executed code or a silent pass before; each must now
be an analyzed result, an `errors` entry (incomplete: exit 2) or one usage line (exit 2).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tree, run_cli

SAMPLER = "vllm/v1/sample/sampler.py"
TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SEEDED = (TOPK, "`generators` is true")
TIMEOUT = 120


def check(root: Path, *args: str, **kw):
    proc = subprocess.run([sys.executable, "-m", "warmlint.cli", "check", "--format", "json",
                           *args, str(root)], capture_output=True, text=True, timeout=TIMEOUT,
                          **kw)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else None)


def outcomes(data: dict) -> set:
    return {(f["path"], f["outcome"]) for f in data["findings"] if f["rule"] == "WL001"}


def one_usage_line(proc, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warmlint: error: "), proc.stderr
    assert "internal error" not in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- the cache is data -------------------------------------------------------------------

class _Run:
    def __reduce__(self):
        return os.system, ('touch "$WARMLINT_PLANTED"',)  # expanded when it runs


PICKLED_COMMAND = pickle.dumps(_Run(), protocol=4)
MISSING_MODULE = b"\x80\x04cmodule_that_does_not_exist\nThing\n)\x81."
TOC_DAMAGE = {
    "a pickle that runs a command": PICKLED_COMMAND,
    "a pickle naming a missing module": MISSING_MODULE,
    "JSON with a wrong type": json.dumps({"format": 5, "toc": {"name": 5}}).encode(),
    "JSON with an int for a list": b'{"format": 5, "toc": {"name": "x", "imports": 3}}',
    "deeply nested JSON": b"[" * 100_000,
}


@pytest.mark.parametrize("damage", sorted(TOC_DAMAGE))
def test_planted_table_of_contents_entries_are_misses(tmp_path, damage):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    first, fresh = check(root, "--cache-dir", str(cache))
    tocs = [p for p in (cache / "toc").rglob("*") if p.is_file()]
    assert first.returncode == 1 and tocs
    for path in tocs:
        path.write_bytes(TOC_DAMAGE[damage])
    (root / SAMPLER).write_text((root / SAMPLER).read_text() + "\nX = 1\n")  # rerun
    planted = tmp_path / "planted"
    proc, data = check(root, "--cache-dir", str(cache), env={**os.environ,
                                                            "WARMLINT_PLANTED": str(planted)})
    assert not planted.exists(), "a cached pickle was executed"
    assert proc.returncode == 1, proc.stderr
    assert data["stats"]["cache"] == "miss" and outcomes(data) == outcomes(fresh)
    again, _ = check(root, "--cache-dir", str(cache))  # rebuilt, not stuck
    assert again.returncode == 1


@pytest.mark.parametrize("cut", ["empty", "half"])
def test_cache_files_a_crash_cut_short_are_misses(tmp_path, cut):
    """Cache files are written without fsync (``summary_cache._store``): one a crash left
    empty or cut short must read as a miss, never as a (wrong) hit."""
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    first, fresh = check(root, "--cache-dir", str(cache))
    written = [p for p in cache.rglob("*") if p.is_file() and p.parent.name != "locks"]
    assert first.returncode == 1 and {p.relative_to(cache).parts[0] for p in written} >= {
        "toc", "src", "results", "names"}
    for path in written:
        data = path.read_bytes()
        path.write_bytes(b"" if cut == "empty" else data[:len(data) // 2])
    proc, data = check(root, "--cache-dir", str(cache))
    assert proc.returncode == 1, proc.stderr
    assert data["stats"]["cache"] == "miss" and outcomes(data) == outcomes(fresh)
    (root / SAMPLER).write_text((root / SAMPLER).read_text() + "\nX = 1\n")  # src/, toc/
    fresh_proc, fresh = check(root, "--cache-dir", str(cache), "--no-cache")
    proc, data = check(root, "--cache-dir", str(cache))
    assert proc.returncode == fresh_proc.returncode and outcomes(data) == outcomes(fresh)


def _forge(entry: dict, how: str, outside: str) -> dict:
    """``outside``: a FIFO outside the tree (opening it for reading would block)."""
    if how == "deps is a list":
        return {"deps": [], "result": {}}
    if how == "no deps, no findings":
        return {**entry, "deps": {}, "result": {**entry["result"], "findings": []}}
    if how == "an int for the findings":
        return {**entry, "result": {**entry["result"], "findings": 5}}
    if how == "a finding without a line":
        finding = {k: v for k, v in entry["result"]["findings"][0].items() if k != "line"}
        return {**entry, "result": {**entry["result"], "findings": [finding]}}
    if how == "a dependency outside the tree":
        return {**entry, "deps": {outside: "0" * 40, "../../etc/passwd": "0" * 40}}
    if how == "a file to scan outside the tree":  # the suppression pass reads `files`
        return {**entry, "result": {**entry["result"], "files": [outside]}}
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["deps is a list", "no deps, no findings",
                                 "an int for the findings", "a finding without a line",
                                 "a dependency outside the tree",
                                 "a file to scan outside the tree"])
def test_forged_result_entries_are_never_trusted(tmp_path, how):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    first, fresh = check(root, "--cache-dir", str(cache))
    (entry,) = (cache / "results").glob("*.json")
    os.mkfifo(tmp_path / "outside.fifo")
    entry.write_text(json.dumps(_forge(json.loads(entry.read_text()), how,
                                       str(tmp_path / "outside.fifo"))))
    proc, data = check(root, "--cache-dir", str(cache))
    assert proc.returncode == 1, proc.stderr
    assert data["stats"]["cache"] == "miss" and outcomes(data) == outcomes(fresh)


def test_cache_files_are_private(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    check(root, "--cache-dir", str(cache))
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_mode & 0o077 == 0 for p in files)


def test_a_cached_incomplete_result_still_exits_2(tmp_path):
    root, cache = make_tree(tmp_path), tmp_path / "cache"
    (root / "vllm/v1/sample/ops/logprobs.py").write_text("def broken(:\n")
    for status in ("miss", "hit"):
        proc, data = check(root, "--cache-dir", str(cache))
        assert data["stats"]["cache"] == status and data["stats"]["complete"] is False
        assert proc.returncode == 2 and "warmlint: incomplete: 1 problem" in proc.stderr


# -- never hang, never flood -------------------------------------------------------------

def test_a_fifo_named_like_a_module_is_an_error_entry(tmp_path):
    root = make_tree(tmp_path)
    (root / SAMPLER).unlink()
    os.mkfifo(root / SAMPLER)
    proc, data = check(root, "--no-cache")
    errors = {e["path"]: e["message"] for e in data["errors"]}
    assert errors == {SAMPLER: "cannot read: a FIFO, not a regular file; skipped"}
    assert proc.returncode == 2 and data["stats"]["complete"] is False


def test_a_directory_named_like_a_module_is_an_error_entry(tmp_path):
    root = make_tree(tmp_path)
    (root / SAMPLER).unlink()
    (root / SAMPLER).mkdir()
    proc, data = check(root, "--no-cache")
    assert {e["path"] for e in data["errors"]} == {SAMPLER}
    assert "a directory, not a regular file" in data["errors"][0]["message"]
    assert proc.returncode == 2


def test_config_naming_a_fifo_is_a_usage_error(tmp_path):
    root = make_tree(tmp_path)
    os.mkfifo(tmp_path / "config.toml")
    proc, _ = check(root, "--no-cache", "--config", str(tmp_path / "config.toml"))
    one_usage_line(proc, "config.toml: cannot read: a FIFO, not a regular file")


def test_a_file_over_the_size_limit_is_an_error_entry(tmp_path):
    root = make_tree(tmp_path)
    padding = "# " + "x" * 1000 + "\n"
    with open(root / SAMPLER, "a") as fh:
        fh.write(padding * 5300)  # a little over 5 MB: the default limit
    proc, data = check(root, "--no-cache")
    assert [e["path"] for e in data["errors"]] == [SAMPLER]
    assert "over the 5.0 MB limit" in data["errors"][0]["message"]
    assert proc.returncode == 2
    (root / "pyproject.toml").write_text("[tool.warmlint]\nmax-file-size = 100\n")
    (root / SAMPLER).write_text("X = 1\n")
    proc, data = check(root, "--no-cache")
    assert any("over the 100 bytes limit" in e["message"] for e in data["errors"])


def test_control_and_bidi_characters_are_escaped_in_text_and_github(tmp_path):
    root = make_tree(tmp_path)
    hostile = "\x1b]0;pwned\x07\u202e\x9b2J"
    topk = root / TOPK
    topk.write_text(topk.read_text().replace(
        "if (k is None and p is None) or generators:",
        f'if (k is None and p is None) or (generators and "{hostile}"):'))
    for fmt in ("text", "github"):
        proc = run_cli("check", "--no-cache", "--format", fmt, str(root))
        assert proc.returncode == 1, proc.stderr
        assert "pwned" in proc.stdout  # the finding is there
        assert not any(c in proc.stdout + proc.stderr for c in "\x1b\x07\u202e\x9b")
        assert "\\x1b]0;pwned\\x07\\u202e\\x9b2J" in proc.stdout
    data = json.loads(run_cli("check", "--no-cache", "--format", "json", str(root)).stdout)
    assert any(hostile in f["condition"] for f in data["findings"])  # JSON keeps the text


# -- validation --------------------------------------------------------------------------

@pytest.mark.parametrize("config,flags,needle", [
    ('select = ["WL999"]', (), "unknown rule code 'WL999'"),
    ("", ("--select", "WL01"), "--select: unknown rule code 'WL01'"),
    ("", ("--select", ","), "'select' is empty"),
    ('select = "WL001"', (), "'select' must be a list of strings"),
    ("warmup-batch = -7", (), "'warmup-batch' must be"),
    ("warmup-batch = true", (), "'warmup-batch' must be"),
    ("max-configs = 0", (), "'max-configs' must be an integer from 1"),
    ("max-configs = true", (), "'max-configs' must be an integer"),
    ("max-file-size = -1", (), "'max-file-size' must be an integer from 1"),
    ('external-sinks = { flashinfer = "everything" }', (), "'flashinfer' must be one of"),
    ("fix-values = { generators = 1 }", (), "'generators' must be a string"),
    ('request-int-limits = { logprobs = "20" }', (), "'logprobs' must be an integer from 0"),
    ("request-int-limits = { logprobs = -1 }", (), "'logprobs' must be an integer from 0"),
    ("", ("--vllm", ""), "--vllm needs a version"),
    ("", ("--vllm", "1" * 5000), "is not a vLLM version number"),
])
def test_bad_settings_and_flags_are_one_usage_line(tmp_path, config, flags, needle):
    root = make_tree(tmp_path)
    (root / "pyproject.toml").write_text(f"[tool.warmlint]\n{config}\n")
    args = flags if "--vllm" in flags else (*flags, str(root))
    proc = run_cli("check", "--no-cache", *args, cwd=root)
    one_usage_line(proc, needle)


# -- no silent pass ----------------------------------------------------------------------

def _with(root: Path, rel: str, anchor: str, line: str) -> None:
    path = root / rel
    assert anchor in path.read_text()
    path.write_text(path.read_text().replace(anchor, anchor + line, 1))


FORWARD = "        num_logprobs = sampling_metadata.max_num_logprobs\n"
DEEP = {
    "a 500-term sum": "        _total = " + " + ".join(["1"] * 500) + "\n",
    "lists nested 150 deep": "        _deep = " + "[" * 150 + "]" * 150 + "\n",
    "calls nested 150 deep": "        _deep = " + "len(" * 150 + "()" + ")" * 150 + "\n",
}


@pytest.mark.parametrize("case", sorted(DEEP))
def test_too_deep_for_the_analysis_is_incomplete_never_clean(tmp_path, case):
    root = make_tree(tmp_path)
    _with(root, SAMPLER, FORWARD, DEEP[case])
    proc, data = check(root, "--no-cache")
    if data["errors"]:  # whatever was dropped, the result says so and exits 2
        assert proc.returncode == 2 and data["stats"]["complete"] is False
        assert data["stats"]["incomplete"] and "warmlint: incomplete:" in proc.stderr
    else:  # analyzed whole: the same findings as without the expression
        assert outcomes(data) == outcomes(check(make_tree(tmp_path / "b"), "--no-cache")[1])


def test_a_class_named_like_its_base_is_analyzed(tmp_path):
    root = make_tree(tmp_path)
    topk = root / TOPK
    topk.write_text(topk.read_text().replace(
        "class TopKTopPSampler(nn.Module):",
        "TopKTopPSampler = nn.Module\n\n\nclass TopKTopPSampler(TopKTopPSampler):"))
    proc, data = check(root, "--no-cache")
    _, base = check(make_tree(tmp_path / "b"), "--no-cache")
    assert proc.returncode == 1 and data["errors"] == []
    assert {(f["rule"], f["path"]) for f in data["findings"]} == \
        {(f["rule"], f["path"]) for f in base["findings"]}


def test_the_exit_status_survives_a_closed_pipe(tmp_path):
    root = make_tree(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "warmlint.cli", "check", "--no-cache",
                             "--format", "sarif", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # `| head -0`: the reader is gone before warmlint writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=TIMEOUT) == 1, err
    assert "Traceback" not in err
