"""The README works exactly as written: every command and snippet in it is run here.

Each fenced block of README.md is claimed by a test (`test_every_block_is_claimed` fails
on a block of a kind no test runs). What a reader replaces is replaced the same way here:
`path/to/vllm` by a fixture tree, `https://github.com/<you>/warmlint` and `<commit sha>`
by a throw-away git copy of this checkout. The pre-commit snippet also runs through the
real pre-commit (tests/test_precommit.py), the Action's steps in tests/test_action.py.
The docs' links and snippets are checked here too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, fenced_blocks, link_releases, make_tree, tomllib
from warmlint import __version__
from warmlint.rules import load

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
BLOCKS = fenced_blocks(README)
BIN = Path(sys.executable).parent
TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
# Linked from the README but written on another branch (the security notes); drop the
# entry once docs/security.md is merged: the link check then covers it like any other.
NOT_YET_MERGED = {REPO / "docs" / "security.md"}


def kind(block: tuple) -> str | None:
    lang, text, _ = block
    if block is BLOCKS[0]:
        return "headline"
    return {"bash": "install" if "pip install" in text else "commands", "text": "output",
            "python": "suppression", "toml": "config"}.get(lang) or (
        ("pre-commit" if "repos:" in text else "action" if "uses:" in text else None)
        if lang == "yaml" else None)


def of_kind(name: str) -> list:
    return [b for b in BLOCKS if kind(b) == name]


def lines(block: tuple) -> list[str]:
    return [x.strip() for x in block[1].splitlines() if x.strip() and not x.startswith("#")]


def test_every_block_is_claimed():
    kinds = [kind(b) for b in BLOCKS]
    assert None not in kinds, [b for b in BLOCKS if kind(b) is None]
    assert {k: kinds.count(k) for k in set(kinds) - {"commands"}} == {
        "headline": 1, "install": 1, "output": 1, "suppression": 1, "config": 1,
        "pre-commit": 1, "action": 1}
    assert kinds.count("commands") >= 3


def test_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    for heading in ("## Install", "## Quick start", "## What to do with a finding", "## Rules",
                    "## Configuration", "## pre-commit and CI"):
        assert f"\n{heading}\n" in text, heading


def test_the_first_lines_are_the_two_commands_ci_runs():
    assert BLOCKS[0][2] == 3 and lines(BLOCKS[0]) == [
        "pip install . && warmlint check --vllm 0.20.0        "
        "# install, then analyze the real vLLM 0.20.0 release from PyPI",
        "pip install -e '.[test]' && python -m pytest -q      "
        "# run the test suite (what CI runs: .ci/run)"]
    ci = (REPO / ".ci" / "run").read_text()
    assert "python -m pip install -q -e '.[test]'\n" in ci and "\npython -m pytest -q\n" in ci


def test_rules_table_is_the_rules():
    rows = re.findall(r"^\| (WL\d+) \| `([^`]+)` \| (.+?) \| (.+?) \|$", README.read_text(),
                      re.MULTILINE)
    assert rows == [(r.code, r.name, r.summary, r.fix_safety) for r in load()]


def test_versions_agree():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__
    assert pyproject["project"]["requires-python"] == ">=3.10"
    assert "Python 3.10 or newer" in README.read_text()


# -- links ----------------------------------------------------------------------------------

def _slugs(path: Path) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)  # `kernel[grid](...)` is code, not a link
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if path in NOT_YET_MERGED and not path.exists():
            continue
        assert path.exists(), f"{page.name}: broken link {target}"
        if anchor and path.suffix == ".md":
            assert anchor in _slugs(path), f"{page.name}: no heading for {target}"


# -- install, on a fresh virtual environment ------------------------------------------------

def _bash(script: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if Path(p) != BIN)  # not this suite's own venv
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _install(line: str, snapshot: tuple) -> str:
    root, sha = snapshot
    assert "https://github.com/<you>/warmlint" in line or line.startswith("pip install .")
    return line.replace("https://github.com/<you>/warmlint", root.as_uri()).replace(
        "<commit sha>", sha)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["checkout", "git URL"])
def test_install_commands_work_in_a_fresh_venv(tmp_path, repo_snapshot, which):
    venv, checkout, git_url = lines(of_kind("install")[0])
    assert venv.startswith("python3 -m venv .venv && . .venv/bin/activate")
    line = checkout if which == "checkout" else git_url
    # From a checkout: in a copy of it (pip builds in place); from a URL: anywhere.
    where = tmp_path / "copy" if which == "checkout" else tmp_path / "elsewhere"
    if which == "checkout":
        shutil.copytree(repo_snapshot[0], where, ignore=shutil.ignore_patterns(".git", "build"))
    else:
        where.mkdir()
    proc = _bash(f"{venv}\n{_install(line, repo_snapshot)}\necho ---\nwarmlint --version\n"
                 "warmlint rules\ncommand -v warmlint", where)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.split("---\n", 1)[1].splitlines()  # after pip's own output
    assert out[0] == f"warmlint {__version__}" and len(out) == 2 + len(load())
    assert Path(out[-1]) == where / ".venv" / "bin" / "warmlint"


@pytest.mark.slow
@pytest.mark.network
def test_the_first_command_works_on_a_fresh_machine(tmp_path, repo_snapshot):
    venv = lines(of_kind("install")[0])[0]
    first = lines(BLOCKS[0])[0].split("#")[0].strip()
    where = tmp_path / "clone"
    shutil.copytree(repo_snapshot[0], where, ignore=shutil.ignore_patterns(".git", "build"))
    link_releases("0.20.0")
    proc = _bash(f"{venv}\n{first} || test $? -eq 1", where)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WL001" in proc.stdout and "warmlint: 11 findings" in proc.stderr


# -- the commands, in the order a reader runs them ----------------------------------------

EXPECT = [  # (pattern on the command, exit status, text stdout must contain)
    (r"^warmlint rule WL001$", 0, "WL001 unwarmed-dispatch-branch"),
    (r"^warmlint fix --diff ", 1, "--- a/vllm/v1/worker/gpu_model_runner.py"),
    (r"^warmlint fix path/to/vllm$", 0, ""),
    (r"--write-baseline", 0, ""),
    (r"--baseline ", 0, ""),
    (r"^warmlint check --vllm 0\.20\.0$", 1, "WL001"),
    (r"--format json", 1, '"findings": ['),
    (r"^warmlint check path/to/vllm$", 1, "WL001"),
    (r"^warmlint fix --vllm 0\.20\.0 --out fixed-0\.20\.0$", 0, ""),
    (r"--assume", None, ""),
    (r"^warmlint check fixed-0\.20\.0$", None, ""),
]


def _needs_network(command: str) -> bool:
    return "--vllm" in command or "fixed-0.20.0" in command


def _run_commands(tmp_path, network: bool) -> dict:
    if not (BIN / "warmlint").exists():
        pytest.skip("needs warmlint installed in this venv")
    tree = make_tree(tmp_path, "base")
    work = tmp_path / "work"
    work.mkdir()
    if network:
        link_releases("0.20.0")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    results = {}
    for block in of_kind("commands"):
        for line in lines(block):
            command = line.split(" #")[0].strip()
            if _needs_network(command) and not network:
                continue
            proc = subprocess.run(["bash", "-c", command.replace("path/to/vllm", str(tree))],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=600)
            assert "Traceback" not in proc.stderr and "warmlint: error" not in proc.stderr, \
                (command, proc.stderr)
            expected = [(rc, out) for pattern, rc, out in EXPECT if re.search(pattern, command)]
            assert expected, f"no expectation for the README command {command!r}"
            rc, out = expected[0]
            assert proc.returncode == rc if rc is not None else proc.returncode in (0, 1), \
                (command, proc.returncode, proc.stderr[-2000:])
            assert out in proc.stdout, (command, proc.stdout[:2000])
            results[command] = proc
    return results


def test_readme_commands_on_a_checkout(tmp_path):
    results = _run_commands(tmp_path, network=False)
    assert len(results) >= 6
    assert "0 findings," in results[
        "warmlint check --baseline .warmlint-baseline.json path/to/vllm"].stderr


@pytest.mark.network
def test_readme_commands_on_a_release_and_the_sample_output(tmp_path):
    results = _run_commands(tmp_path, network=True)
    real = results["warmlint check --vllm 0.20.0"]
    def timeless(line: str) -> str:
        return re.sub(r", [\d.]+ s([;)])", r", T s\1", line)

    shown = [timeless(x) for x in real.stdout.splitlines() + real.stderr.splitlines()]
    for sample in of_kind("output")[0][1].splitlines():
        pattern = re.escape(timeless(sample)).replace(re.escape("[...]"), ".*")
        assert any(re.fullmatch(pattern, line) for line in shown), sample
    default = len(json.loads(results["warmlint check --vllm 0.20.0 --format json"].stdout)[
        "findings"])
    pinned = [c for c in results if "--assume" in c]
    assert pinned and results[pinned[0]].stdout.count("\n") < default
    fixed = results["warmlint check fixed-0.20.0"]
    assert "topk_topp_sampler.py:126:9: WL001" not in fixed.stdout  # the seeded gap is fixed
    read = re.search(r" \((\d+) files, ", real.stderr).group(1)  # the release's whole program
    assert f" ({read} files, " in fixed.stderr  # also read, not only the one changed file


# -- snippets -------------------------------------------------------------------------------

def test_suppression_snippet_suppresses_the_finding(tmp_path):
    [(_, snippet, _)] = of_kind("suppression")
    snippet = snippet.rstrip("\n")
    code = snippet.split("  #")[0]
    root = make_tree(tmp_path, "base")
    text = (root / TOPK).read_text()
    assert f"\n{code}\n" in text, "the snippet's line is not the fixture's seeded branch"
    (root / TOPK).write_text(text.replace(f"\n{code}\n", f"\n{snippet}\n", 1))
    proc = subprocess.run([sys.executable, "-m", "warmlint.cli", "check", "--no-cache",
                           "--select", "WL001,WL100", "--format", "json", str(root)],
                          capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    assert [f["path"] for f in report["findings"]] == ["vllm/v1/sample/sampler.py"]
    assert report["stats"]["suppressed"] == 1
    assert "1 finding, 0 errors, 1 suppressed" in proc.stderr


@pytest.mark.parametrize("page", [README, REPO / "docs" / "configuration.md"],
                         ids=lambda p: p.name)
def test_config_snippets_are_accepted(tmp_path, page):
    [(_, snippet, _)] = [b for b in fenced_blocks(page) if b[0] == "toml"]
    root = make_tree(tmp_path, "base")
    (root / "pyproject.toml").write_text(snippet)
    proc = subprocess.run([sys.executable, "-m", "warmlint.cli", "config", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    table = tomllib.loads(snippet)["tool"]["warmlint"]
    settings = json.loads(proc.stdout)["settings"]
    assert settings["select"] == table["select"]
    assert settings["assume"]["VLLM_USE_FLASHINFER_SAMPLER"] is True
    check = subprocess.run([sys.executable, "-m", "warmlint.cli", "check", "--no-cache",
                            str(root)], capture_output=True, text=True, timeout=300)
    assert check.returncode in (0, 1) and "warmlint: error" not in check.stderr, check.stderr


def _yaml_blocks(*pages: Path) -> list:
    return [(page, text) for page in pages for lang, text, _ in fenced_blocks(page)
            if lang == "yaml"]


@pytest.mark.parametrize("page,text", [b for b in _yaml_blocks(README, *DOCS)
                                       if "repos:" in b[1]], ids=lambda x: getattr(x, "name", ""))
def test_pre_commit_snippets_validate(tmp_path, page, text):
    pre_commit = BIN / "pre-commit"
    if not pre_commit.exists():
        pytest.skip("needs the test extra (pre-commit)")
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(text)
    proc = subprocess.run([str(pre_commit), "validate-config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [repo] = yaml.safe_load(text)["repos"]
    assert repo["rev"] == "<commit sha>"  # documented as a sha: there are no tags
    assert {h["id"] for h in repo["hooks"]} <= {"warmlint", "warmlint-fix"}


@pytest.mark.parametrize("page,text", [b for b in _yaml_blocks(README, *DOCS)
                                       if "uses: <you>/warmlint@" in b[1]],
                         ids=lambda x: getattr(x, "name", ""))
def test_action_snippets_use_the_actions_inputs(page, text):
    doc = yaml.safe_load(text)
    steps = doc if isinstance(doc, list) else [
        s for job in doc["jobs"].values() for s in job["steps"]]
    [step] = [s for s in steps if str(s.get("uses", "")).startswith("<you>/warmlint@")]
    assert step["uses"] == "<you>/warmlint@<commit sha>"
    inputs = yaml.safe_load((REPO / "action.yml").read_text())["inputs"]
    assert step.get("with") and set(step["with"]) <= set(inputs)
