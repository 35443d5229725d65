"""Integration: real vLLM releases from PyPI through `warmlint check --vllm VERSION`.

Marked `network` (deselect offline with `-m 'not network'`); CI runs them. Releases are
downloaded once into conftest.RELEASE_CACHE; each test sees them through its own cache
directory, so it writes nothing there (nor in the user's cache).
"""

from __future__ import annotations

import pytest

from conftest import link_releases, release, run_cli

pytestmark = pytest.mark.network
SEEDED = ("vllm/v1/sample/ops/topk_topp_sampler.py", "TopKTopPSampler.forward_cuda")


def _check(version: str, *extra: str):
    link_releases(version)
    proc = run_cli("check", "--vllm", version, "--format", "json", "--no-cache", *extra,
                   check_json=True)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.json


def _seeded(report) -> list:
    return [f for f in report["findings"] if (f["path"], f["function"]) == SEEDED
            and "generators" in f["outcome"]]


def test_0_20_0_reports_the_seeded_flashinfer_gap():
    report = _check("0.20.0")
    assert report["errors"] == []
    [finding] = _seeded(report)
    assert finding["rule"] == "WL001"
    assert "VLLM_USE_FLASHINFER_SAMPLER=1" in finding["configs"]
    assert "SamplingMetadata.generators" in finding["inputs"]
    assert [s["name"] for s in finding["sinks"]] == ["_topk_topp_kernel"]
    assert finding["sinks"][0]["kind"] == "triton"
    assert finding["chain"][:2] == ["TopKTopPSampler.forward_cuda", "TopKTopPSampler.forward_native"]
    assert finding["warmups"] == ["GPUModelRunner._dummy_sampler_run"]


def test_0_20_0_with_flashinfer_off_has_no_seeded_gap():
    report = _check("0.20.0", "--assume", "VLLM_USE_FLASHINFER_SAMPLER=0")
    assert _seeded(report) == []


def test_0_21_0_fixed_the_seeded_gap():
    report = _check("0.21.0")
    assert report["errors"] == []
    assert _seeded(report) == []


def test_0_33_0_is_analyzed_without_internal_error():
    report = _check("0.33.0")
    assert report["stats"]["files_parsed"] > 10
    assert report["stats"]["warmups"], "no warmup found in 0.33.0"
    assert not report["stats"]["configs_truncated"]


def test_0_21_0_reports_triton_specialization_gaps():
    report = _check("0.21.0", "--select", "WL004")
    gaps = {(f["extra"]["kernel"].rsplit(".", 1)[-1], f["extra"]["parameter"]): f
            for f in report["findings"]}
    batch = gaps[("_topk_topp_kernel", "BATCH_SIZE")]
    assert batch["extra"]["warmed"] == ["% 16 == 0"] and batch["extra"]["missing"] == ["other"]
    # the speculative path's rows are its draft tokens (`logits[target_logits_indices]`):
    # judged too, so the gap holds with and without speculative decoding
    assert batch["inputs"] == ["batch size", "rows(SpecDecodeMetadata.target_logits_indices)"]
    assert batch["configs"] == []
    assert gaps[("_topk_topp_kernel", "TOPK_ENABLED")]["extra"]["missing"] == ["False"]
    assert gaps[("_topk_topp_kernel", "TOPP_ENABLED")]["extra"]["missing"] == ["False"]


def test_fix_out_writes_a_whole_fixed_release_that_check_analyzes(tmp_path):
    link_releases("0.20.0")
    out = tmp_path / "out"
    proc = run_cli("fix", "--vllm", "0.20.0", "--out", str(out), "--field", "generators")
    assert proc.returncode == 0, proc.stderr
    assert f"check it with `warmlint check {out}`" in proc.stderr
    original = release("0.20.0")
    runner = "vllm/v1/worker/gpu_model_runner.py"
    files = {p.relative_to(original).as_posix() for p in original.rglob("*") if p.is_file()}
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == files - {".warmlint-complete.json"}  # sources and dist-info, no marker
    assert [rel for rel in written if (out / rel).read_bytes() != (original / rel).read_bytes()
            ] == [runner]
    text = (out / runner).read_text()
    # The diff touches only the warmup method (0.20.0 already imports replace and envs).
    lines = (original / runner).read_text().splitlines()
    changed = [i for i, line in enumerate(text.splitlines()) if line not in lines]
    body = text.splitlines()
    start = next(i for i, line in enumerate(body) if "def _dummy_sampler_run" in line)
    end = next(i for i in range(start + 1, len(body)) if body[i].startswith("    def "))
    assert changed and all(start < i < end for i in changed)
    assert "clone" not in "\n".join(body[i] for i in changed)
    report = run_cli("check", "--no-cache", "--format", "json", str(out), check_json=True).json
    assert _seeded(report) == [] and report["errors"] == []
    assert report["stats"]["files_parsed"] >= 40  # the whole program (43), not one file
    again = run_cli("fix", "--check", "--field", "generators", str(out))
    assert again.returncode == 0, again.stdout  # a second fix changes nothing


def test_plugin_seeded_is_a_noop_on_0_21_0_and_upgrades_0_20_0():
    """``WARMLINT_PLUGIN_FIX=seeded``: only the seeded path, which 0.21.0 warms itself
    (the whole fix, the default, is tests/test_plugin_releases.py's)."""
    from warmlint.plugin import fixed_dummy_sampler_run_source

    assert fixed_dummy_sampler_run_source(release("0.21.0"), choice="seeded") is None
    source = fixed_dummy_sampler_run_source(release("0.20.0"), choice="seeded")
    assert 'not in ("processed_logits", "processed_logprobs")' in source
    assert "envs.VLLM_USE_FLASHINFER_SAMPLER" in source
    # A later start may run the cached copy only if it checks out against the install.
    from warmlint.plugin_source import installed_method, is_upgrade_of
    from warmlint.settings import Settings

    runner = release("0.20.0") / "vllm/v1/worker/gpu_model_runner.py"
    original = installed_method(runner, "GPUModelRunner", "_dummy_sampler_run")
    assert is_upgrade_of(source, original, {"generators": Settings().fix_values["generators"]})
