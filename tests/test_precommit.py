"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit` in a throw-away fork.

The hooks are used as `repo: local` with `language: system` pointing at this venv's
warmlint (a remote `repo:` would make pre-commit build a venv from the network); their
`files`, `pass_filenames` and the rest come unchanged from the manifest.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, make_tree

BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"
WARMLINT = BIN / "warmlint"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
# The fork adopts WL001 (and the suppression check); `all_warm` is clean for those.
CONFIG = '[tool.warmlint]\nselect = ["WL001", "WL100"]\n'

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not PRE_COMMIT.exists() or not WARMLINT.exists(),
                       reason="needs the test extra installed (pre-commit, warmlint script)"),
]


def manifest() -> dict:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    return {hook["id"]: hook for hook in hooks}


def _local(hook: dict) -> dict:
    command = hook["entry"].split(" ", 1)[1]  # "warmlint check" -> "check"
    local = {**hook, "language": "system", "entry": f"{WARMLINT} {command}"}
    local.pop("minimum_pre_commit_version", None)
    return local


class Fork:
    def __init__(self, tmp_path: Path):
        self.root = tmp_path / "fork"
        shutil.copytree(make_tree(tmp_path / "variants", "all_warm"), self.root)
        self.variants = tmp_path / "variants"
        self.env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        hooks = [_local(hook) for hook in manifest().values()]
        config = {"repos": [{"repo": "local", "hooks": hooks}]}
        (self.root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        (self.root / "README.md").write_text("a vLLM fork\n")
        (self.root / "pyproject.toml").write_text(CONFIG)
        self.git("init", "-q", "-b", "main")
        self.commit("clean tree")

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True,
                       capture_output=True, timeout=60)

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "-m", message)

    def take(self, variant: str, rel: str) -> None:
        """Replace one file by its version in a fixture variant, and stage it."""
        source = self.variants / variant
        if not source.exists():
            make_tree(self.variants, variant)
        shutil.copyfile(source / rel, self.root / rel)
        self.git("add", rel)

    def pre_commit(self, *args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(PRE_COMMIT), "run", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        return proc


@pytest.fixture
def fork(tmp_path):
    return Fork(tmp_path)


def test_manifest_is_valid_and_analyzes_the_whole_tree():
    proc = subprocess.run([str(PRE_COMMIT), "validate-manifest",
                           str(REPO / ".pre-commit-hooks.yaml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hooks = manifest()
    assert set(hooks) == {"warmlint", "warmlint-fix"}
    assert hooks["warmlint"]["entry"] == "warmlint check"
    assert hooks["warmlint-fix"]["entry"] == "warmlint fix"
    for hook in hooks.values():
        assert hook["pass_filenames"] is False and hook["language"] == "python"


def test_clean_then_regression_then_fixed(fork):
    passed = fork.pre_commit("warmlint", "--files", RUNNER)
    assert passed.returncode == 0, passed.stdout
    assert "Passed" in passed.stdout

    # Drop the warmup's seeded and logprobs calls: only the runner changes, but the
    # findings are in the sampler files, which are not staged.
    fork.take("base", RUNNER)
    failed = fork.pre_commit("warmlint", "--files", RUNNER)
    assert failed.returncode == 1, failed.stdout
    assert "Failed" in failed.stdout
    assert "vllm/v1/sample/sampler.py:20:9: WL001" in failed.stdout
    assert "vllm/v1/sample/ops/topk_topp_sampler.py:30:9: WL001" in failed.stdout

    fork.take("all_warm", RUNNER)
    fixed = fork.pre_commit("warmlint", "--files", RUNNER)
    assert fixed.returncode == 0, fixed.stdout


def test_unrelated_change_skips_the_hook(fork):
    fork.take("base", RUNNER)
    fork.commit("an unwarmed branch already on main")
    (fork.root / "README.md").write_text("docs only\n")
    fork.git("add", "README.md")
    proc = fork.pre_commit("warmlint", "--files", "README.md")
    assert proc.returncode == 0 and "Skipped" in proc.stdout, proc.stdout


def test_config_change_runs_the_hook(fork):
    (fork.root / "pyproject.toml").write_text(CONFIG + 'warmup-methods = ["_none_*"]\n')
    fork.take("base", RUNNER)
    proc = fork.pre_commit("warmlint", "--files", "pyproject.toml")
    assert proc.returncode == 0 and "Passed" in proc.stdout, proc.stdout  # ran, no warmups


@pytest.mark.skipif(importlib.util.find_spec("warmlint.commands.fix") is None,
                    reason="`warmlint fix` is not installed")
def test_fix_hook_repairs_the_regression(fork):
    fork.take("base", RUNNER)
    fixed = fork.pre_commit("warmlint-fix", "--files", RUNNER)
    assert fixed.returncode == 1 and "files were modified by this hook" in fixed.stdout, \
        fixed.stdout
    fork.git("add", RUNNER)
    check = fork.pre_commit("warmlint", "--files", RUNNER)
    assert check.returncode == 0, check.stdout
