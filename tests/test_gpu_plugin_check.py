"""tools/gpu_plugin_check.py: the plugin inside vLLM's own start-up, hostile inputs included.

On the GPU machine it ran over a complete vLLM 0.26.0 (its CUDA wheel, compiled extensions
included: tools/run_gpu_plugin_real.sh); the runs are kept in docs/gpu/. Here, on CPU: its
verdict on those runs is clean and every runner module imported; a run that went wrong in
any of the ways it checks is caught; and the whole tool runs end to end over the fixture
tree (torch and triton stand-ins, vLLM's plugin loader stand-in), forging, garbling and
replacing the cache as it does on the GPU machine.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, load_tool, make_tree

REAL = REPO / "docs" / "gpu" / "plugin-check-real-0.26.0.json"
REHEARSAL = REPO / "tests" / "data" / "plugin_rehearsal"
RUNNERS = {"vllm.v1.worker.gpu.model_runner", "vllm.v1.worker.gpu_model_runner"}


def _tool():
    return load_tool("gpu_plugin_check")


def test_the_real_vllm_runs_are_as_expected():
    runs = json.loads(REAL.read_text())
    assert _tool().verdict(runs) == []
    for name, run in runs.items():  # both runners of the whole wheel imported, every time
        assert set(run["runners"]) == RUNNERS, name
        assert not any("import_error" in r for r in run["runners"].values()), name
    sources = [r["source"] for r in runs["first"]["runners"].values()]
    assert all("def _dummy_sampler_run" in s and "added by warmlint fix" in s for s in sources)


V1 = "vllm.v1.worker.gpu_model_runner"


@pytest.mark.parametrize("spoil", [
    lambda r: r["first"].update(rc=1),
    lambda r: r["disabled"]["runners"][V1].update(upgraded=True),
    lambda r: r["bad_setting"]["runners"][V1].update(upgraded=True),
    lambda r: r["garbage"]["runners"][V1].update(upgraded=False),
    lambda r: r["forged"].update(forged_source_installed=True),
    lambda r: r["forged"].update(marker_exists=True),
    lambda r: r["forged"].update(entries_forged=0),
    lambda r: r["garbage"].update(files_garbled=0),
    lambda r: r["second"]["runners"][V1].update(upgraded=None, import_error="ImportError: x"),
    lambda r: r.pop("cache_is_a_file"),
])
def test_a_run_that_went_wrong_is_caught(spoil):
    runs = copy.deepcopy(json.loads(REAL.read_text()))
    spoil(runs)
    assert _tool().verdict(runs)


def test_the_tool_end_to_end_over_the_fixture(tmp_path):
    release = make_tree(tmp_path, "base")
    shutil.copytree(REHEARSAL / "plugins", release / "vllm" / "plugins")
    out = tmp_path / "runs.json"
    env = {**os.environ, "PYTHONPATH": str(REHEARSAL / "stubs")}
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_plugin_check.py"),
                           "--fixture", "--release-dir", str(release), "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every start as expected" in proc.stdout
    runs = json.loads(out.read_text())
    assert runs["first"]["runners"][V1]["upgraded"] is True
    assert runs["forged"]["entries_forged"] >= 1 and runs["garbage"]["files_garbled"] >= 1
    assert runs["disabled"]["runners"][V1]["upgraded"] is False
