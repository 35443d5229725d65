"""Integration: real vLLM releases from PyPI through `warmlint check --vllm VERSION`.

Marked `network` (deselect offline with `-m 'not network'`); CI runs them. Releases are
cached under `.cache/warmlint` in the checkout, so a run downloads each one once.
"""

from __future__ import annotations

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.network
CACHE = {"WARMLINT_CACHE_DIR": str(REPO / ".cache" / "warmlint")}
SEEDED = ("vllm/v1/sample/ops/topk_topp_sampler.py", "TopKTopPSampler.forward_cuda")


def _check(version: str, *extra: str):
    proc = run_cli("check", "--vllm", version, "--format", "json", "--no-cache", *extra,
                   env=CACHE, check_json=True)
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
