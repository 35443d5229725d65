"""Hostile trees, through the real CLI: every failure is an `errors` entry or one usage
line, never a traceback, a hang, or code from the analyzed tree being run."""

from __future__ import annotations

import json
import os
import pathlib
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from warmlint import cli, index

LOGPROBS = "vllm/v1/sample/ops/logprobs.py"
TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER = "vllm/v1/sample/sampler.py"
MEMORY_LIMIT = 3 << 30  # address space for the huge-file run: generous, but finite


def _check_json(root: Path, *args: str, **kw):
    proc = run_cli("check", "--format", "json", "--no-cache", *args, str(root), **kw)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, _exit_by_completeness(proc)


def _exit_by_completeness(proc) -> dict:
    """An errors entry makes the result incomplete: exit 2 and one stderr line."""
    data = json.loads(proc.stdout)
    incomplete = bool(data["errors"])
    assert data["stats"]["complete"] is not incomplete
    assert len(data["stats"]["incomplete"]) == len(data["errors"])
    assert proc.returncode == (2 if incomplete else 1 if data["findings"] else 0), proc.stderr
    assert ("warmlint: incomplete: " in proc.stderr) is incomplete, proc.stderr
    return data


def _outcomes(data: dict) -> set:
    """WL001's (path, outcome) pairs: the fixture's expectations are WL001's."""
    return {(f["path"], f["outcome"]) for f in data["findings"] if f["rule"] == "WL001"}


def _errors(data: dict) -> dict:
    return {e["path"]: e for e in data["errors"]}


SEEDED = (TOPK, "`generators` is true")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 file anyway")
def test_unreadable_file(tmp_path):
    root = make_tree(tmp_path, "base")
    (root / LOGPROBS).chmod(0)
    try:
        _, data = _check_json(root)
    finally:
        (root / LOGPROBS).chmod(0o644)
    assert "cannot read" in _errors(data)[LOGPROBS]["message"]
    assert SEEDED in _outcomes(data)


def test_unreadable_file_code_path(tmp_path, monkeypatch, capsys):
    """The chmod test cannot run as root: make the read itself raise PermissionError."""
    root = make_tree(tmp_path, "base")
    real = index.read_regular

    def read_regular(path, limit):
        if pathlib.Path(path).as_posix().endswith(LOGPROBS):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, limit)

    monkeypatch.setattr(index, "read_regular", read_regular)
    assert cli.main(["check", "--format", "json", "--no-cache", str(root)]) == 2  # incomplete
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert _errors(data)[LOGPROBS] == {"path": LOGPROBS, "line": 1,
                                       "message": "cannot read: Permission denied"}
    assert SEEDED in _outcomes(data) and "Traceback" not in err


def test_symlink_loops(tmp_path):
    root = make_tree(tmp_path, "base")
    os.symlink("../..", root / "vllm/v1/loop")  # directory cycle
    os.symlink("dangling.py", root / "vllm/v1/dangling.py")  # file cycle, never imported
    (root / LOGPROBS).unlink()
    os.symlink("logprobs.py", root / LOGPROBS)  # file cycle the sampler imports
    proc, data = run_with_timeout(root)
    assert "cannot read" in _errors(data)[LOGPROBS]["message"]
    assert set(_errors(data)) == {LOGPROBS}
    assert _outcomes(data) == {SEEDED}


def run_with_timeout(root: Path, timeout: float = 120, *args: str):
    proc = subprocess.run([sys.executable, "-m", "warmlint.cli", "check", "--format", "json",
                           "--no-cache", *args, str(root)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_limit_memory)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, _exit_by_completeness(proc)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_non_utf8_file(tmp_path):
    root = make_tree(tmp_path, "base")
    (root / LOGPROBS).write_bytes(b"# caf\xe9\nimport torch\n")
    (root / "vllm/unused_latin1.py").write_bytes(b"x = '\xff\xfe'\n")  # not imported: not read
    _, data = _check_json(root)
    assert _errors(data)[LOGPROBS]["message"].startswith("not valid UTF-8")
    assert set(_errors(data)) == {LOGPROBS}
    assert SEEDED in _outcomes(data)


@pytest.mark.slow
def test_huge_generated_module_neither_hangs_nor_blows_memory(tmp_path):
    root = make_tree(tmp_path, "base")
    lines = [f"X_{i} = {i}" for i in range(200_000)]
    (root / "vllm/v1/sample/big_table.py").write_text("\n".join(lines) + "\n")
    sampler = root / SAMPLER
    text = sampler.read_text().replace(
        "_EPS = 1e-5", "from vllm.v1.sample.big_table import X_199999\n\n_EPS = X_199999")
    sampler.write_text(text.replace("if sampling_metadata.all_greedy:",
                                    "if sampling_metadata.all_greedy and _EPS:"))
    _, data = run_with_timeout(root, 300)  # the bound is the timeout, not a timing assert
    assert data["errors"] == []
    assert SEEDED in _outcomes(data)
    assert data["stats"]["files_parsed"] == 8  # the big module was read, not skipped


def test_empty_tree(tmp_path):
    (tmp_path / "empty").mkdir()
    proc, data = _check_json(tmp_path / "empty")  # nothing to analyze: no clean pass
    assert proc.returncode == 2 and data["findings"] == [] and not data["stats"]["complete"]
    assert [(e["path"], e["message"][:21]) for e in data["errors"]] == [
        (".", "no model runner found")]
    text = run_cli("check", "--no-cache", str(tmp_path / "empty"))
    assert text.returncode == 2 and "0 findings, 1 error" in text.stderr
    assert "Traceback" not in text.stderr


@pytest.mark.parametrize("args,needle", [
    (["does/not/exist"], "does/not/exist: no such file or directory"),
    (["pyproject.toml"], "pyproject.toml: not a Python file"),
])
def test_bad_path_is_one_line_exit_2(tmp_path, args, needle):
    (tmp_path / "pyproject.toml").write_text("")
    proc = run_cli("check", *args, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"warmlint: error: {needle}"]


def test_unparsable_file_is_an_error_entry_and_the_rest_is_analyzed(tmp_path):
    root = make_tree(tmp_path, "base")
    (root / LOGPROBS).write_text("import torch\n\n\ndef count_ranks(:\n    pass\n")
    proc, data = _check_json(root)
    assert data["errors"] == [
        {"path": LOGPROBS, "line": 4, "message": "syntax error: invalid syntax"}]
    assert _outcomes(data) == {SEEDED} and proc.returncode == 2
    text = run_cli("check", "--no-cache", str(root))
    assert f"{LOGPROBS}:4: error: syntax error" in text.stderr.replace(str(root) + "/", "")
    assert text.returncode == 2 and text.stderr.splitlines()[-1].startswith(
        "warmlint: incomplete: 1 problem (")
    relaxed = run_cli("check", "--no-cache", "--allow-incomplete", str(root))
    assert relaxed.returncode == 1 and "exiting by findings" in relaxed.stderr


def test_code_from_the_tree_is_never_imported_or_run(tmp_path):
    root = make_tree(tmp_path, "base")
    marker = tmp_path / "executed"
    payload = (f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
               "raise SystemExit('analyzed code was executed')\n")
    for rel in ("vllm/__init__.py", LOGPROBS, "vllm/v1/worker/gpu_model_runner.py",
                "vllm/v1/sample/evil.py"):
        path = root / rel
        path.write_text(path.read_text() + "\n" + payload if path.exists() else payload)
    sampler = root / SAMPLER
    sampler.write_text(sampler.read_text().replace(
        "import torch\n", "import torch\n\nimport vllm.v1.sample.evil as evil\n", 1).replace(
        "if sampling_metadata.all_greedy:", "if sampling_metadata.all_greedy or evil.go():"))
    # cwd = the tree root puts `vllm` on sys.path of `python -m`: the worst case.
    proc, data = _check_json(root, cwd=root)
    assert not marker.exists(), marker.read_text()
    assert data["stats"]["files_parsed"] >= 7
    script = Path(sys.executable).with_name("warmlint")
    if script.exists():
        subprocess.run([str(script), "check", "--no-cache", "."], cwd=root, timeout=120,
                       capture_output=True)
        assert not marker.exists()


@pytest.mark.parametrize("const", ["'a'", "None", "(1, 2)"])
def test_comparison_with_a_non_number_constant(tmp_path, const):
    """Found by test_fuzz: `x > 'a'` crashed refine_fact (`const + 1`) -> internal error."""
    root = make_tree(tmp_path, "base")
    sampler = root / SAMPLER
    sampler.write_text(sampler.read_text().replace(
        "        if sampling_metadata.all_greedy:\n",
        f"        if sampling_metadata.max_num_logprobs > {const}:\n            pass\n"
        "        if sampling_metadata.all_greedy:\n"))
    proc, data = _check_json(root)
    assert proc.returncode == 1 and data["errors"] == [] and SEEDED in _outcomes(data)
