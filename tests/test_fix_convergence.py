"""`warmlint fix` is a fixed point, and every finding says whether it has a fix.

`fix` plans from the tree as it will be after its own edits (it re-analyzes in memory
until a round changes nothing), so `fix` then `fix --check` exits 0, and `check` on the
fixed tree reports only findings whose `fix.safe` is false, each with its reason.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from conftest import VARIANTS, link_releases, make_tree, run_cli
from conftest import release as conftest_release
from warmlint.edits import NoFix
from warmlint.request_values import changes
from warmlint.state import SymFact
from warmlint.values import Const, Dict, Tensor



def _fix_then_check(root, *extra) -> dict:
    fix = run_cli("fix", "--no-cache", str(root), *extra)
    assert fix.returncode == 0, fix.stderr
    assert "Traceback" not in fix.stderr and "run `warmlint fix` again" not in fix.stderr
    # A fresh analysis of the fixed tree (`fix` stored nothing: --no-cache), which
    # `check` then reads back from the cache instead of analyzing the tree a third time.
    cache = ["--cache-dir", str(root.parent / f"{root.name}-cache")]
    again = run_cli("fix", "--check", *cache, str(root), *extra)
    assert again.returncode == 0, again.stdout + again.stderr
    report = run_cli("check", *cache, "--format", "json", str(root), *extra,
                     check_json=True).json
    assert report["stats"]["cache"] == "hit"
    for finding in report["findings"]:
        assert set(finding["fix"]) == {"available", "description", "safe", "reason"}, finding["fix"]
        assert not finding["fix"]["safe"], (finding["message"], finding["fix"])
        assert finding["fix"]["reason"]
    return report


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fix_is_a_fixed_point_on_every_fixture(tmp_path, variant):
    root = make_tree(tmp_path, variant)
    before = run_cli("check", "--no-cache", "--format", "json", str(root), check_json=True).json
    for finding in before["findings"]:  # every finding says whether fix fixes it
        assert isinstance(finding["fix"]["safe"], bool)
        assert finding["fix"]["safe"] or finding["fix"]["reason"]
    fixable = [f for f in before["findings"] if f["fix"]["safe"]]
    after = _fix_then_check(root)
    assert len(after["findings"]) == len(before["findings"]) - len(fixable)


def test_constexpr_values_are_warmed_once_each(tmp_path):
    root = make_tree(tmp_path)
    _fix_then_check(root)
    text = (root / "vllm/v1/worker/gpu_model_runner.py").read_text()
    # `_mask_kernel`'s USE_K/USE_P flags are `k is not None` / `p is not None`: one call
    # without top-k and one without top-p after the plain warmup call, and the same two
    # inside the seeded block (with FlashInfer on, only seeded requests reach the kernel);
    # then each again on the first 8 rows (N_ROWS other): Triton's key is the whole tuple,
    # and the next round finds USE_K False never launched with a batch of that class.
    assert text.count("top_k=None,") == 4 and text.count("top_p=None,") == 4
    for name in ("top_k", "top_p"):
        assert len(re.findall(name + r"=None,\s+temperature=dummy_metadata\.temperature\[:8\]",
                              text)) == 2, name


def test_sarif_says_why_a_finding_has_no_fix(tmp_path):
    root = make_tree(tmp_path, "flashinfer_cold")
    doc = json.loads(run_cli("check", "--no-cache", "--format", "sarif", str(root)).stdout)
    results = doc["runs"][0]["results"]
    assert results and all("fixSafe" in r["properties"] for r in results)
    unfixable = [r for r in results if not r["properties"]["fixSafe"]]
    assert unfixable and all(r["properties"]["fixReason"] and "fixes" not in r
                             for r in unfixable)
    assert all("fixes" in r for r in results if r["properties"]["fixSafe"])


def test_request_values_take_the_path():
    values = {"top_k": Tensor(), "all_greedy": Const(False), "generators": Dict({}),
              "max_num_logprobs": Const(-1)}
    path = {"SamplingMetadata.top_k": SymFact(none=True),
            "SamplingMetadata.all_greedy": SymFact(truthy=True),
            "SamplingMetadata.generators": SymFact(truthy=False),
            "SamplingMetadata.max_num_logprobs": SymFact(none=False, ne=frozenset({-1})),
            "SamplingMetadata.top_k.ndim": SymFact(truthy=True)}
    got = changes(values, "SamplingMetadata", path, {"max_num_logprobs": "1"})
    assert got == [("all_greedy", "True"), ("max_num_logprobs", "1"), ("top_k", "None")]
    with pytest.raises(NoFix, match="`max_num_logprobs` set"):
        changes(values, "SamplingMetadata", path, {})


@pytest.mark.network
# 0.34.0 (v2 rows) by default; the v1 releases' fixes are pinned by their goldens
# (test_golden.py) and by the plugin's copy of them (test_plugin_releases.py), and their
# fixed point, like 0.33.0's, runs with -m extended (a v1 fix re-analyzes 0.21.0 for
# ~50-70 s a run; the v1 fixed point is also pinned on every fixture above).
@pytest.mark.parametrize("version", ["0.34.0",
                                     pytest.param("0.21.0", marks=pytest.mark.extended),
                                     pytest.param("0.20.0", marks=pytest.mark.extended),
                                     pytest.param("0.33.0", marks=pytest.mark.extended)])
def test_fix_is_a_fixed_point_on_real_releases(tmp_path, version):
    release = conftest_release(version)
    root = tmp_path / "tree"
    shutil.copytree(release / "vllm", root / "vllm")
    report = _fix_then_check(root)
    assert report["errors"] == []
    if version == "0.34.0":
        # TOPK_BLOCK_SIZE = min(next_power_of_2(1 + logprobs), 1024): the warmup's
        # request (for_sampler_warmup: logprobs=5) compiles 8 only; one block per other
        # value serving makes with logprobs <= 20 (1, 2, 4, 16, 32), each row asking for
        # the smallest logprobs giving it
        text = (root / "vllm/v1/worker/gpu/model_runner.py").read_text()
        for n in (0, 1, 2, 8, 16):
            assert f"logprobs={n})" in text, n
        assert "logprobs=4)" not in text and "logprobs=5)" not in text
        assert not [f for f in report["findings"]
                    if f["condition"] == "_topk_log_softmax_kernel.TOPK_BLOCK_SIZE"]
        # 64, 128 and 256 come from 32-128 token ids: no fix-values entry builds those
        # rows by default (on the H200 they left `_fill_logprob_token_ids_kernel` cold),
        # so the token-id path stays reported, with its reason
        assert "logprob_token_ids=" not in text
        [ids] = [f for f in report["findings"] if f["condition"] == "max_per_req_token_ids == 0"]
        assert ids["fix"]["reason"]
    if version in ("0.20.0", "0.21.0"):  # (0.33.0's v1 gathers token ids with torch)
        # v1: PADDED_TOPK = next_power_of_2(1 + the most token ids a request asks for),
        # <= 128 ids: one warmup call per power of two the first fix call ({0: [0]}: 2)
        # does not compile, and the 16-column class of the int `topk` (15 ids)
        text = (root / "vllm/v1/worker/gpu_model_runner.py").read_text()
        for n in (0, 2, 4, 8, 16, 32, 64, 128, 15):
            assert f"logprob_token_ids={{0: [0] * {n}}}" in text, n
        assert not [f for f in report["findings"]
                    if f["condition"].startswith("_topk_log_softmax_kernel.")]


@pytest.mark.network
def test_no_wl004_prediction_below_the_8_row_minimum():
    """0.21.0 with FlashInfer off: top-k-only requests recompile `_topk_topp_kernel` at 37
    and 256 rows, not at 1 (vLLM filters fewer than 8 rows with PyTorch); the path that
    has no minimum is speculative decoding's, which `verify`'s stand-in runner lacks."""
    from warmlint.verify import predicts

    link_releases("0.21.0")
    report = run_cli("check", "--vllm", "0.21.0", "--no-cache", "--format", "json",
                     "--select", "WL004", check_json=True).json
    [topp] = [f for f in report["findings"] if f["extra"]["parameter"] == "TOPP_ENABLED"]
    config = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert [b for b in (1, 37, 256) if predicts(topp, "topk_only", b, config)] == [37, 256]


def test_fix_reuses_a_stored_result_with_nothing_to_fix(tmp_path, monkeypatch):
    """`fix` stores the analysis of what it wrote (its last round), so `check` and
    `fix --check` right after it reuse it; on a tree whose stored result has nothing to
    fix, `fix` is that result: no analysis, the same unfixable findings in the same order
    as a fresh run."""
    import warmlint.check as check_module
    from warmlint.check import open_cache
    from warmlint.codemod.run import compute_fixes
    from warmlint.settings import Settings

    root = make_tree(tmp_path, "flashinfer_cold")  # fixable findings, and unfixable ones
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert "fixed " in run_cli("fix", *cache, str(root)).stderr
    stored = run_cli("check", "--format", "json", *cache, str(root), check_json=True).json
    fresh = run_cli("check", "--format", "json", "--no-cache", str(root), check_json=True).json
    assert stored["stats"]["cache"] == "hit"
    assert stored["findings"] == fresh["findings"] and fresh["findings"]
    reused = run_cli("fix", "--check", *cache, str(root))
    again = run_cli("fix", "--check", "--no-cache", str(root))
    assert (reused.returncode, reused.stderr) == (0, again.stderr)
    assert "no automatic fix" in again.stderr

    settings = Settings()
    fresh = compute_fixes(root, settings)
    store = open_cache(settings, True, tmp_path / "cache2")
    compute_fixes(root, settings, cache=store)  # stores its first round
    monkeypatch.setattr(check_module, "analyze_tree", lambda *a, **k: pytest.fail("analyzed"))
    reused = compute_fixes(root, settings, cache=store)
    assert not fresh.files and not reused.files and fresh.unfixable
    assert [(f.path, f.line, f.col, f.rule, why) for f, why in reused.unfixable] == \
        [(f.path, f.line, f.col, f.rule, why) for f, why in fresh.unfixable]
