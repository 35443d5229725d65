"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit` in a throw-away fork.

Most tests use the hooks as `repo: local` with `language: system` pointing at this venv's
warmlint (fast: no hook environment to build); their `files`, `pass_filenames` and the
rest come unchanged from the manifest. The README's own snippet is run as written, with
its `repo:` a throw-away git copy of this checkout and `rev:` that copy's commit sha:
pre-commit clones it and installs warmlint into its own environment, as it would for a
fork, and the hooks run from `git commit`.
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

from conftest import GIT_ENV, REPO, fenced_blocks, make_tree, run_cli

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
    def __init__(self, tmp_path: Path, config: str | None = None, pyproject: str = CONFIG,
                 home: Path | None = None):
        self.root = tmp_path / "fork"
        shutil.copytree(make_tree(tmp_path / "variants", "all_warm"), self.root)
        self.variants = tmp_path / "variants"
        self.env = {**os.environ, **GIT_ENV,
                    "PRE_COMMIT_HOME": str(home or tmp_path / "pre-commit-home")}
        if config is None:
            hooks = [_local(hook) for hook in manifest().values()]
            config = yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]},
                                    sort_keys=False)
        (self.root / ".pre-commit-config.yaml").write_text(config)
        (self.root / "README.md").write_text("a vLLM fork\n")
        (self.root / "pyproject.toml").write_text(pyproject)
        self.git("init", "-q", "-b", "main")
        self.commit("clean tree")

    def git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True,
                              capture_output=True, text=True, timeout=60)

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

    def commit_with_hooks(self, message: str) -> subprocess.CompletedProcess:
        """`git commit` as a developer types it: the installed git hook runs pre-commit."""
        proc = subprocess.run(["git", "commit", "-q", "-m", message], cwd=self.root,
                              env=self.env, capture_output=True, text=True, timeout=600)
        proc.output = proc.stdout + proc.stderr  # the hook's report goes to stderr here
        assert "Traceback" not in proc.output, proc.output
        return proc

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
    # it ran with the new settings: they name no warmup, which is no clean pass
    assert proc.returncode == 1 and "Failed" in proc.stdout, proc.stdout
    assert "no warmup found in this model runner" in proc.stdout, proc.stdout


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


# -- the README's snippet, as a fork would use it -------------------------------------------

class NotConverged(AssertionError):
    """The commit needed more than one retry: `warmlint fix` changed files twice."""


def readme_config(snapshot: tuple) -> str:
    [text] = [t for lang, t, _ in fenced_blocks(REPO / "README.md")
              if lang == "yaml" and "repos:" in t]
    root, sha = snapshot
    return text.replace("https://github.com/<you>/warmlint", str(root)).replace(
        "<commit sha>", sha)


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory) -> Path:
    # pre-commit builds the hook environment (a venv with warmlint installed) once per
    # repo and rev: share it between the two tests below.
    return tmp_path_factory.mktemp("pre-commit-home")


def _regression_commit(tmp_path, snapshot, home, pyproject: str) -> Fork:
    """A fork adopts the README's snippet with its known findings baselined, installs the
    git hook, then commits a regression (the warmup loses its seeded and logprobs calls)."""
    fork = Fork(tmp_path, readme_config(snapshot), pyproject, home)
    baseline = run_cli("check", "--no-cache", "--write-baseline",
                       str(fork.root / ".warmlint-baseline.json"), str(fork.root))
    assert baseline.returncode == 0, baseline.stderr
    fork.commit("adopt warmlint")
    install = subprocess.run([str(PRE_COMMIT), "install"], cwd=fork.root, env=fork.env,
                             capture_output=True, text=True, timeout=60)
    assert install.returncode == 0, install.stdout + install.stderr
    fork.take("base", RUNNER)
    first = fork.commit_with_hooks("regression")
    assert first.returncode == 1, first.output
    assert "warmlint fix (add the missing warmup calls)" in first.output
    assert "files were modified by this hook" in first.output, first.output
    assert "added by warmlint fix" in (fork.root / RUNNER).read_text()
    return fork


def _commit_again(fork: Fork) -> None:
    fork.git("add", "-A")
    second = fork.commit_with_hooks("regression, fixed")
    if "files were modified by this hook" in second.output:
        raise NotConverged(second.output)
    assert second.returncode == 0, second.output
    assert fork.git("log", "--format=%s").stdout.splitlines()[0] == "regression, fixed"
    assert fork.git("status", "--porcelain").stdout == ""


@pytest.mark.slow
def test_readme_snippet_fixes_a_regression_in_one_retry(tmp_path, repo_snapshot, shared_home):
    fork = _regression_commit(tmp_path, repo_snapshot, shared_home, CONFIG)
    _commit_again(fork)


@pytest.mark.slow
def test_readme_snippet_with_every_rule_converges_in_one_retry(tmp_path, repo_snapshot,
                                                               shared_home):
    fork = _regression_commit(tmp_path, repo_snapshot, shared_home, "")
    _commit_again(fork)


def test_autoupdate_freeze_pins_the_readme_snippet_to_the_current_sha(tmp_path, repo_snapshot):
    """The README says `pre-commit autoupdate --freeze` keeps `rev` current: with no tags in
    the repository, pre-commit pins the head commit's sha."""
    stale = readme_config(repo_snapshot).replace(repo_snapshot[1], "deadbeef" * 5)
    fork = Fork(tmp_path, stale)
    proc = subprocess.run([str(PRE_COMMIT), "autoupdate", "--freeze"], cwd=fork.root,
                          env=fork.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [repo] = yaml.safe_load((fork.root / ".pre-commit-config.yaml").read_text())["repos"]
    assert repo["rev"] == repo_snapshot[1]
