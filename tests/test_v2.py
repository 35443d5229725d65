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
    # The fix fills the rows with a seeded copy of the warmup's own request.
    assert finding["fix"]["available"] is True
    assert "fill every row with `msgspec.structs.replace(params, seed=0)`" in \
        finding["fix"]["description"]


FILL = """        if (
            self.vllm_config.speculative_config is None
            and envs.VLLM_USE_FLASHINFER_SAMPLER
        ):
            seed_params = msgspec.structs.replace({base}, seed=0)
            for req_idx in range(num_reqs):
                self.sampler.add_request(req_idx, 1, seed_params)
            self.sampler(logits, batch)
"""


def _flat(text: str) -> str:
    return "".join(text.replace("(\n", "(").split())


def _fix(root: Path, out: Path) -> str:
    proc = run_cli("fix", str(root), "--out", str(out), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    again = run_cli("fix", "--check", str(out), "--no-cache")
    assert again.returncode == 0, again.stdout + again.stderr  # one pass: a fixed point
    assert _dispatch(_check(out)) == []  # the seeded/greedy outcome is warm now
    return (out / RUNNER).read_text()


def test_fix_fills_the_rows_after_the_warmups_own_row_loop(tmp_path):
    text = _fix(_tree(tmp_path), tmp_path / "fixed")
    assert _flat(FILL.format(base="params")) in _flat(text)
    # after the sampler call that follows the loop, with the imports it needs
    assert text.index("self.sampler.add_request(req_idx, 1, params)") < text.index(
        "seed_params = ")
    assert "import msgspec\n" in text and "import vllm.envs as envs\n" in text


def test_fix_without_a_row_loop_copies_the_warmup_functions_request(tmp_path):
    # 0.24-0.32: `_dummy_sampler_run` samples the empty rows only; `warmup_kernels`
    # steps with SamplingParams.for_sampler_warmup().
    root = _tree(tmp_path, (RUNNER, """        params = SamplingParams.for_sampler_warmup()
        for req_idx in range(num_reqs):
            self.sampler.add_request(req_idx, 1, params)
        self.sampler(logits, batch)
""", ""), (RUNNER, "from vllm.sampling_params import SamplingParams\n", ""))
    text = _fix(root, tmp_path / "fixed")
    assert _flat(FILL.format(base="SamplingParams.for_sampler_warmup()")) in _flat(text)
    assert "from vllm.sampling_params import SamplingParams\n" in text  # as warmup.py has it


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


@pytest.mark.parametrize("changed, warm", [("seed=0", True), ("top_k=5", False)])
def test_rows_filled_with_a_changed_copy_are_read_not_taken_both_ways(tmp_path, changed, warm):
    # A copy made by msgspec.structs.replace has known fields: a seeded copy warms the
    # kernel, a copy that only changes top_k does not.
    root = _tree(tmp_path, (RUNNER, "import torch\n", "import msgspec\nimport torch\n"),
                 (RUNNER, """            self.sampler.add_request(req_idx, 1, params)
        self.sampler(logits, batch)
""", f"""            self.sampler.add_request(req_idx, 1, params)
        self.sampler(logits, batch)
        copy = msgspec.structs.replace(params, {changed})
        for req_idx in range(num_reqs):
            self.sampler.add_request(req_idx, 1, copy)
        self.sampler(logits, batch)
"""))
    assert (_dispatch(_check(root)) == []) is warm
