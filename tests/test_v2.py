"""The v2 runner shape, on fixtures/minivllm2 and edits of it, through the CLI.

The fixture builds its sampler in ``load_model`` (``__init__`` leaves it None), keeps
per-request state in rows filled by ``add_request``, dispatches on that state in
``Sampler.__call__`` (the fused path only when no row is greedy or seeded), defines its
filter kernel through a dispatcher factory, registers the kernel's warmups under
``activate()`` and an ``if``, and warms through ``_dummy_sampler_run`` (empty state, then
``for_sampler_warmup()`` rows) and a ``warmup_kernels`` function whose scheduler steps
sample with the requests it builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

RUNNER = "vllm/v1/worker/gpu/model_runner.py"
WARMUP = "vllm/v1/worker/gpu/warmup.py"
SAMPLER = "vllm/v1/worker/gpu/sample/sampler.py"
SEEDED = "SamplingParams(temperature=0.7, top_k=20, top_p=0.8, seed=0)"


def _tree(tmp_path: Path, *edits: tuple[str, str, str]) -> Path:
    root = tmp_path / "minivllm2"
    shutil.copytree(FIXTURES / "minivllm2", root)
    for path, old, new in edits:
        text = (root / path).read_text()
        assert old in text, f"edit anchor not found in {path}: {old!r}"
        (root / path).write_text(text.replace(old, new))
    return root


def _check(root: Path) -> dict:
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.json["stats"]["complete"], proc.json["stats"]
    return proc.json


def _dispatch(report: dict) -> list[dict]:
    """The WL001 findings on the fused-sampler eligibility test."""
    return [f for f in report["findings"] if f["rule"] == "WL001" and f["path"] == SAMPLER]


def test_seeded_or_greedy_rows_reach_the_filter_kernel_without_spec_decode(tmp_path):
    report = _check(_tree(tmp_path))
    assert "vllm.v1.worker.gpu.warmup.warmup_kernels" in report["stats"]["warmups"]
    [finding] = _dispatch(report)
    line = (tmp_path / "minivllm2" / SAMPLER).read_text().splitlines()[finding["line"] - 1]
    assert "eligible = not (" in line
    assert "any_greedy" in finding["outcome"] and "any_seeded" in finding["outcome"]
    assert [s["name"] for s in finding["sinks"]] == ["_filter_kernel"]
    # The registry precompiles the kernel with speculative decoding: not reported there.
    assert "speculative_config is None" in finding["configs"]
    assert "VLLM_USE_FLASHINFER_SAMPLER=1" in finding["configs"]
    assert "SamplingParams.seed" in finding["inputs"]
    assert set(finding["warmups"]) == {"GPUModelRunner._dummy_sampler_run", "warmup_kernels"}
    # No automatic fix for v2 rows yet, and the reason says so (not a v1 metadata reason).
    assert finding["fix"]["available"] is False
    assert "per-request rows (SamplingParams)" in finding["fix"]["reason"]


def test_a_seeded_warmup_step_warms_the_kernel(tmp_path):
    root = _tree(tmp_path, (WARMUP, "SamplingParams.for_sampler_warmup()", SEEDED))
    assert _dispatch(_check(root)) == []


def test_requests_that_no_step_samples_warm_nothing(tmp_path):
    root = _tree(tmp_path, (WARMUP, "SamplingParams.for_sampler_warmup()", SEEDED),
                 (WARMUP, "        worker_sample_tokens(None)\n", ""))
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    assert len(_dispatch(proc.json)) == 1
    # A warmup function none of whose steps could be modeled is an incomplete result.
    assert proc.returncode == 2
    [reason] = proc.json["stats"]["incomplete"]
    assert reason.startswith(f"{WARMUP}:") and "warmup_kernels runs no sampling step" in reason


def test_a_seeded_row_in_the_dummy_sampler_run_warms_the_kernel(tmp_path):
    root = _tree(tmp_path, (RUNNER, "params = SamplingParams.for_sampler_warmup()",
                            f"params = {SEEDED}"))
    assert _dispatch(_check(root)) == []


@pytest.mark.parametrize("edit, expect_configs", [
    # Registered under activate() with no `if`: precompiled in every config.
    ((RUNNER, "if current_platform.is_rocm() or self.speculative_config is not None:",
      "if True:"), None),
    # Registered under the `if` but outside activate(): it counts for nothing.
    ((RUNNER, "with self.jit_warmup_registry.activate():", "if True:"),
     ["VLLM_USE_FLASHINFER_SAMPLER=1"]),
])
def test_registry_registrations_count_only_under_activate_and_their_guard(
        tmp_path, edit, expect_configs):
    found = _dispatch(_check(_tree(tmp_path, edit)))
    if expect_configs is None:
        assert found == []
    else:
        [finding] = found
        assert finding["configs"] == expect_configs


def test_the_sampler_is_found_only_where_load_model_builds_it(tmp_path):
    root = _tree(tmp_path, (RUNNER, "        self.sampler = Sampler(self.max_num_reqs, 32000)\n",
                            ""))
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    # No sampler: the warmups reach nothing, and that is never a clean pass.
    assert proc.returncode == 2, proc.stdout
    assert proc.json["stats"]["complete"] is False
    assert any("_dummy_sampler_run reaches no sampler call" in r
               for r in proc.json["stats"]["incomplete"])


def test_configs_left_unanalyzed_are_an_incomplete_result(tmp_path):
    root = _tree(tmp_path)
    (root / "pyproject.toml").write_text("[tool.warmlint]\nmax-configs = 2\n")
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    assert proc.returncode == 2
    [reason] = proc.json["stats"]["incomplete"]
    assert "stopped at 2 leaves (max-configs = 2)" in reason
    allowed = run_cli("check", str(root), "--no-cache", "--allow-incomplete", "-q")
    assert allowed.returncode == 1  # by its findings


def test_the_analysis_budget_is_a_setting_and_exceeding_it_is_incomplete(tmp_path):
    root = _tree(tmp_path)
    (root / "pyproject.toml").write_text("[tool.warmlint]\nmax-steps = 50\n")
    proc = run_cli("check", str(root), "--no-cache", "--format", "json", check_json=True)
    assert proc.returncode == 2
    assert any("analysis budget exceeded" in r for r in proc.json["stats"]["incomplete"])
