"""The composite GitHub Action (action.yml), its `run:` steps executed here as a runner would.

GitHub runs each `run:` step with `bash -e -o pipefail`, inputs and contexts substituted
into the step's `env:`, and the files behind $GITHUB_PATH, $GITHUB_ENV and $GITHUB_OUTPUT
carried to later steps. This harness does the same for the expressions action.yml uses
(and fails on any other, so an edit cannot slip past it). The `uses:` steps are GitHub's
own actions (setup-python, cache, upload-sarif): they are checked for their inputs only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, make_tree, run_cli
from test_reporters import assert_valid, validator  # noqa: F401 - the fixture

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
KNOWN_ACTIONS = {"actions/setup-python@v5", "actions/cache@v4",
                 "github/codeql-action/upload-sarif@v3"}

pytestmark = pytest.mark.slow


class Runner:
    def __init__(self, tmp_path: Path, action_path: Path, workspace: Path, **inputs):
        self.temp = tmp_path / "runner-temp"
        self.temp.mkdir()
        self.inputs = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
        unknown = set(inputs) - set(self.inputs)
        assert not unknown, unknown
        self.inputs.update(inputs)
        self.context = {"github.action_path": str(action_path), "runner.temp": str(self.temp),
                        "runner.os": "Linux", "github.sha": "0" * 40,
                        "github.workspace": str(workspace)}
        self.workspace = workspace
        self.env = {**os.environ, "RUNNER_TEMP": str(self.temp), "GITHUB_WORKSPACE": str(workspace)}
        self.outputs: dict = {}

    def value(self, expr: str) -> str:
        if expr.startswith("inputs."):
            return self.inputs[expr[len("inputs."):]]
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if match:
            return self.outputs[match.group(1)][match.group(2)]
        assert expr in self.context, f"action.yml uses ${{{{ {expr} }}}}, unknown to this test"
        return self.context[expr]

    def substitute(self, text: str) -> str:
        return EXPR.sub(lambda m: self.value(m.group(1)), str(text))

    def run(self, step: dict) -> subprocess.CompletedProcess:
        files = {name: self.temp / f"{name.lower()}-{len(self.outputs)}"
                 for name in ("GITHUB_PATH", "GITHUB_ENV", "GITHUB_OUTPUT")}
        for file in files.values():
            file.write_text("")
        env = {**self.env, **{k: str(v) for k, v in files.items()},
               **{k: self.substitute(v) for k, v in step.get("env", {}).items()}}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], cwd=self.workspace, env=env, capture_output=True,
                              text=True, timeout=600)
        for line in files["GITHUB_PATH"].read_text().splitlines():
            self.env["PATH"] = f"{line}{os.pathsep}{self.env['PATH']}"
        for line in files["GITHUB_ENV"].read_text().splitlines():
            name, _, value = line.partition("=")
            self.env[name] = value
        if "id" in step:
            self.outputs[step["id"]] = dict(
                line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines())
        return proc

    def steps(self, names: tuple = ()) -> dict:
        """Run the `run:` steps (those named, or all) in order; {step name: result}."""
        results = {}
        for step in ACTION["runs"]["steps"]:
            if "run" in step and (not names or step["name"] in names):
                results[step["name"]] = proc = self.run(step)
                if proc.returncode != 0:
                    break
        return results


def test_action_is_composite_and_scripts_take_inputs_only_through_env():
    assert ACTION["runs"]["using"] == "composite"
    for step in ACTION["runs"]["steps"]:
        if "uses" in step:
            assert step["uses"] in KNOWN_ACTIONS
        else:
            assert step["shell"] == "bash"
            # `${{ }}` inside a script is a template injection; values come in via env.
            assert "${{" not in step["run"], step["name"]
    for spec in ACTION["inputs"].values():
        assert spec["description"] and "default" in spec


def test_action_installs_warmlint_and_gates_on_new_findings(tmp_path, repo_snapshot,
                                                            validator):  # noqa: F811
    action_path, _ = repo_snapshot
    fork = make_tree(tmp_path, "base")
    # The fork adopts warmlint with its known findings baselined.
    recorded = run_cli("check", "--write-baseline", str(fork / ".warmlint-baseline.json"),
                       str(fork))
    assert recorded.returncode == 0, recorded.stderr
    runner = Runner(tmp_path, action_path, fork)
    results = runner.steps()
    assert list(results) == ["Install warmlint", "Analyze (SARIF)", "New findings"], \
        {name: proc.stderr[-2000:] for name, proc in results.items()}
    assert all(proc.returncode == 0 for proc in results.values()), \
        {name: proc.stderr[-2000:] for name, proc in results.items()}
    warmlint = Path(runner.env["PATH"].split(os.pathsep)[0]) / "warmlint"
    assert warmlint.is_file() and warmlint.parent.is_relative_to(runner.temp)
    assert Path(runner.env["WARMLINT_CACHE_DIR"]).is_relative_to(runner.temp)
    sarif = Path(runner.outputs["sarif"]["file"])
    doc = json.loads(sarif.read_text())
    assert_valid(validator, doc)
    assert len(doc["runs"][0]["results"]) == len(
        json.loads((fork / ".warmlint-baseline.json").read_text())["findings"]) > 0
    gate = results["New findings"]
    assert gate.stdout == "" and ", 5 baselined, 0 stale baseline entries" in gate.stderr

    # A pull request that makes a new branch outcome cold: annotations and a failed job.
    runner_py = fork / "vllm/v1/worker/gpu_model_runner.py"
    runner_py.write_text(runner_py.read_text().replace(
        "top_p=fill(0.9),\n            top_k=fill(logits.size(1) - 1),",
        "top_p=None,\n            top_k=None,"))
    again = runner.steps(("Analyze (SARIF)", "New findings"))
    gate = again["New findings"]
    assert again["Analyze (SARIF)"].returncode == 0 and gate.returncode == 1, gate.stderr
    errors = gate.stdout.splitlines()
    assert errors and all(line.startswith("::error file=vllm/") for line in errors)
    assert any("is false" in line for line in errors)  # the new outcomes, not the known ones

    # Without a baseline file (a fork with no known findings), with extra args: every
    # finding fails the job, and the args reach warmlint.
    (fork / ".warmlint-baseline.json").unlink()
    runner.inputs.update(args="--select WL001")
    gate = runner.steps(("New findings",))["New findings"]
    assert gate.returncode == 1 and "baselined" not in gate.stderr, gate.stderr
    assert all(",title=WL001 " in line for line in gate.stdout.splitlines())
    assert len(gate.stdout.splitlines()) == 4  # base's two, and the regression's two
