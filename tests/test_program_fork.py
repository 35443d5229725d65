"""Runners side by side (warmlint/program_fork.py): a tree with two model runners, each
analyzed in its own process with ``--jobs`` of 2 or more, reports what the serial run
reports, byte for byte, and a runner whose process dies is analyzed again here.

The tree is the two fixtures in one (the v1 runner of fixtures/minivllm and the v2 runner
of fixtures/minivllm2), as vLLM 0.21.0 to 0.33.0 ship both."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import FIXTURES, run_cli

from warmlint import program_fork
from warmlint.check import analyze_tree
from warmlint.settings_file import load_settings

if not hasattr(os, "fork"):
    pytest.skip("runners side by side need os.fork", allow_module_level=True)


@pytest.fixture
def both(tmp_path):
    root = tmp_path / "both"
    shutil.copytree(FIXTURES / "minivllm2", root)
    shutil.copytree(FIXTURES / "minivllm", root, dirs_exist_ok=True)
    return root


def _report(root, jobs):
    settings, _ = load_settings(root, {}, None)
    report = analyze_tree(root, settings, None, jobs=jobs)
    data = report.to_json()
    data["stats"].pop("seconds", None)
    return data, report.facts


def test_two_runners_report_the_same_side_by_side_and_serial(both, monkeypatch):
    ran = []
    real = program_fork.side_by_side
    monkeypatch.setattr("warmlint.analysis.side_by_side",
                        lambda programs, run, transport: ran.append(len(programs))
                        or real(programs, run, transport))
    serial, _ = _report(both, None)
    assert {f["extra"]["runner"] for f in serial["findings"]} == {
        "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
        "vllm.v1.worker.gpu_model_runner.GPUModelRunner"}
    assert ran == []
    forked, facts = _report(both, 2)
    assert ran == [2]  # the second runner ran in a child
    assert json.dumps(forked, sort_keys=True) == json.dumps(serial, sort_keys=True)
    assert [len(p.leaves) for p in facts.programs] == [
        len(p.leaves) for p in _report(both, None)[1].programs]


def test_a_runner_whose_process_dies_is_analyzed_again_here(both, monkeypatch):
    parent = os.getpid()
    def dying(program, run, transport, path):
        os._exit(3)  # killed before it wrote anything

    monkeypatch.setattr(program_fork, "_child", dying)
    serial, _ = _report(both, None)
    reran = []
    from warmlint import analysis
    run_program = analysis._run_program
    monkeypatch.setattr(analysis, "_run_program", lambda facts, program: (
        reran.append(program.runner) if os.getpid() == parent else None,
        run_program(facts, program))[1])
    forked, _ = _report(both, 2)
    assert json.dumps(forked, sort_keys=True) == json.dumps(serial, sort_keys=True)
    assert reran == ["vllm.v1.worker.gpu.model_runner.GPUModelRunner",
                     "vllm.v1.worker.gpu_model_runner.GPUModelRunner"]  # v1 again, here


def test_the_cli_reports_the_same_whatever_the_jobs(both):
    out = {}
    for jobs in ("0", "1", "2"):
        proc = run_cli("check", str(both), "--no-cache", "--format", "json", "-j", jobs)
        assert proc.returncode == 1, proc.stderr
        data = json.loads(proc.stdout)
        data["stats"].pop("seconds")
        out[jobs] = data
    assert out["2"] == out["1"] == out["0"]
