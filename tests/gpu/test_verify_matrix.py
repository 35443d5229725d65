"""The GPU proof's CPU side: request kinds, the verify matrix and its verdicts, the
bundle, and the run script, checked without CUDA (and mostly without torch).

The cases themselves need a GPU; everything that decides what they run, how a cell's
JIT events become a verdict, and what travels to the GPU machine is plain Python and is
checked here, so CI keeps the device command honest.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from warmlint import verify
from warmlint.runtime import requests

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "fixtures" / "minivllm"
FI_ON = {"VLLM_USE_FLASHINFER_SAMPLER": "1"}


def _bundle_module():
    spec = importlib.util.spec_from_file_location("gpu_bundle", REPO / "tools" / "gpu_bundle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- request kinds ------------------------------------------------------------------------

def test_kinds_carry_counts_and_keep_the_first_runs_defaults():
    assert requests.parse_kind("logprobs") == requests.Kind("logprobs")
    assert requests.parse_kind("logprobs").n == 5 and requests.parse_kind("token_logprobs").n == 3
    kind = requests.parse_kind("token_logprobs:20", "v2")
    assert (kind.base, kind.n, kind.text) == ("token_logprobs", 20, "token_logprobs:20")
    assert requests.parse_kind("logprobs:5").text == "logprobs"  # the default is not spelled
    spec = requests.parse_kind("spec_logprobs:20")
    assert spec.speculative and spec.base == "logprobs" and spec.n == 20
    assert requests.token_ids(3) == [11, 22, 33]  # what the first GPU runs asked for
    assert len(set(requests.token_ids(20))) == 20


@pytest.mark.parametrize("text, runner, message", [
    ("spec_greedy", "v2", "unknown request kind 'spec_greedy' for the v2 runner"),
    ("seeded:3", "v1", "takes no count"),
    ("logprobs:x", "v1", "must be an integer"),
    ("token_logprobs:21", "v1", "between 1 and 20"),
    ("nothing", "v1", "unknown request kind"),
    ("seeded", "v3", "unknown runner"),
])
def test_kinds_refuse_what_no_harness_builds(text, runner, message):
    with pytest.raises(ValueError, match=message):
        requests.parse_kind(text, runner)


def test_default_matrices_hold_the_issue_12_cells():
    for runner in requests.RUNNERS:
        kinds, batches = verify.matrix(runner)
        assert batches == (1, 8, 37, 256)
        parsed = [requests.parse_kind(k, runner) for k in kinds]
        assert len({k.text for k in parsed}) == len(parsed)
        counts = {(k.base, k.n) for k in parsed if k.base in requests.DEFAULT_COUNTS}
        assert {("token_logprobs", n) for n in (1, 3, 8, 20)} <= counts
        assert {("logprobs", n) for n in (1, 5, 20)} <= counts
        assert {"topk_only", "topp_only", "seeded", "mixed", "greedy"} <= {k.name for k in parsed}
    assert set(requests.SPEC_KINDS) <= set(verify.matrix("v1")[0])
    assert not set(requests.SPEC_KINDS) & set(verify.matrix("v2")[0])


def test_runner_is_chosen_from_the_tree_or_the_config(tmp_path):
    def tree(name, *files):
        root = tmp_path / name
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text("")
        return root

    v1, v2 = "vllm/v1/worker/gpu_model_runner.py", "vllm/v1/worker/gpu/model_runner.py"
    assert requests.detect_runner(tree("old", v1)) == "v1"
    assert requests.detect_runner(tree("new", v2)) == "v2"
    both = tree("both", v1, v2)  # 0.26.0: v1 unless the config asks for v2
    assert requests.detect_runner(both) == "v1"
    assert requests.detect_runner(both, {"VLLM_USE_V2_MODEL_RUNNER": "1"}) == "v2"


# --- one cell: its command and its verdict ------------------------------------------------

def test_case_commands_name_the_runner_and_the_deployment(tmp_path):
    cmd = verify.case_command(tmp_path, "original", {**FI_ON, "logprobs_mode": "raw_logprobs"},
                              "logprobs:20", 37, tmp_path / "o.json", runner="v2")
    assert cmd[cmd.index("--runner") + 1] == "v2" and cmd[cmd.index("--kind") + 1] == "logprobs:20"
    assert "--speculative" not in cmd
    assert cmd[cmd.index("--env") + 1] == "VLLM_USE_FLASHINFER_SAMPLER=1"
    spec = verify.case_command(tmp_path, "original", {"speculative": "1"}, "spec_greedy", 8,
                               tmp_path / "o.json")
    assert "--speculative" in spec and "speculative=1" not in " ".join(spec)


def _ok(kernels=(), dynamo=0, first=1.0, warmup_s=0.5, peak=500_000_000):
    events = {"total": len(kernels) + dynamo, "triton_kernels": list(kernels),
              "dynamo": dynamo, "flashinfer": 0}
    return {"status": "ok", "request": {"events": events, "first_s": first, "second_s": 0.001},
            "warmup": {"seconds": warmup_s, "memory_extra_bytes": peak,
                       "events": {"total": 3}, "parts": {"_dummy_sampler_run": {"seconds": 0.1},
                                                         "warmup_kernels": {"seconds": 0.4}}}}


def _finding(runner_module, sink="_topk_topp_kernel", kind="triton"):
    return {"rule": "WL004", "path": "vllm/v1/sample/ops/topk_topp_triton.py", "line": 947,
            "outcome": "x", "configs": [], "inputs": ["batch size"],
            "sinks": [{"id": f"{kind}:m.{sink}", "kind": kind, "name": sink}],
            "extra": {"parameter": "BATCH_SIZE", "runner": f"{runner_module}GPUModelRunner"}}


def test_v2_cells_are_explained_by_sinks_until_the_analysis_has_v2_facts():
    v2 = _finding(verify.RUNNER_MODULES["v2"])
    cold = verify._row("seeded", 256, _ok(["_topk_topp_kernel"]), [v2], FI_ON, "v2")
    assert cold["verdict"] == "cold, explained by sink" and cold["predicted"] == []
    assert cold["explained_by"] == ["WL004 topk_topp_triton.py:947 BATCH_SIZE"]
    other = verify._row("seeded", 256, _ok(["_gumbel_sample_kernel"]), [v2], FI_ON, "v2")
    assert other["verdict"] == "unexplained"
    warm = verify._row("greedy", 256, _ok(), [v2], FI_ON, "v2")
    assert warm["verdict"] == "warm"  # no per-cell prediction to contradict
    assert (warm["warmup_s"], warm["warmup_peak_mb"]) == (0.5, 500.0)
    failed = verify._row("greedy", 1, {"status": "error", "error": "boom"}, [v2], FI_ON, "v2")
    assert failed["verdict"] == "error" and failed["error"] == "boom"


def test_findings_count_only_for_their_own_runner():
    v1, v2 = _finding(verify.RUNNER_MODULES["v1"]), _finding(verify.RUNNER_MODULES["v2"])
    assert verify.of_runner(v1, "v1") and not verify.of_runner(v1, "v2")
    assert verify.of_runner(v2, "v2") and not verify.of_runner(v2, "v1")
    assert verify.of_runner({"extra": {}}, "v2")  # a finding that does not say


def test_speculative_configs_follow_the_cells_deployment():
    assert verify.config_holds("not speculative_config", {})
    assert not verify.config_holds("speculative_config", {})
    assert verify.config_holds("speculative_config", {"speculative": "1"})
    assert not verify.config_holds("not speculative_config", {"speculative": "1"})


def test_v1_predictions_take_counts_and_spec_kinds_by_their_base_kind():
    config = verify.with_defaults(MINI, dict(FI_ON))
    findings = verify.static_findings(MINI, "original", config, "v1")
    labels = {verify._label(f) for f in findings}
    assert "WL001 topk_topp_sampler.py:30 `generators` is true" in labels

    def predicted(kind, batch):
        return [verify._label(f) for f in findings if verify.predicts(f, kind, batch, config)]

    assert predicted("seeded", 256) and not predicted("unseeded", 256)
    assert predicted("logprobs:20", 37) == predicted("logprobs", 37) != []
    assert verify.static_findings(MINI, "original", config, "v2") == []  # no v2 runner here


# --- the matrix --------------------------------------------------------------------------

def test_verify_runs_batch_by_batch_reports_kind_by_kind_and_honours_the_deadline(
        monkeypatch, tmp_path):
    started, partial = [], []

    def fake_case(release_dir, warmup, config, kind, batch, out_dir, python=None, runner="v1",
                  deadline=None):
        if deadline is not None and time.time() > deadline:
            return {"status": "skipped", "reason": "not started: the run's deadline had passed"}
        started.append((kind, batch, runner, config.get("speculative")))
        return _ok(["_topk_topp_kernel"] if kind == "seeded" else (), warmup_s=len(started))

    monkeypatch.setattr(verify, "run_case", fake_case)
    monkeypatch.setattr(verify, "static_findings", lambda *a: [])
    report = verify.verify(MINI, "original", dict(FI_ON), ["seeded", "greedy", "spec_greedy"],
                           [256, 1], jobs=1, out_dir=tmp_path, runner="v1",
                           progress=partial.append)
    assert [(k, b) for k, b, _, _ in started] == [
        ("seeded", 256), ("greedy", 256), ("spec_greedy", 256),
        ("seeded", 1), ("greedy", 1), ("spec_greedy", 1)]
    assert [s for _, _, _, s in started] == [None, None, "1"] * 2  # the drafter deployment
    assert [(r["kind"], r["batch"]) for r in report["rows"]] == [
        ("seeded", 256), ("seeded", 1), ("greedy", 256), ("greedy", 1),
        ("spec_greedy", 256), ("spec_greedy", 1)]
    assert len(partial) == 6 and len(partial[0]["rows"]) == 1
    assert report["startup"]["cases"] == 6 and report["startup"]["seconds_median"] == 3.5
    assert report["startup"]["peak_extra_mb"] == 500.0
    assert report["startup"]["parts_seconds_median"] == {"_dummy_sampler_run": 0.1,
                                                         "warmup_kernels": 0.4}
    text = verify.render_text(report)
    assert "start-up (warmup under test): 3.5 s median" in text
    assert "[_topk_topp_kernel]" in text and "6 of 6 cells" in text

    started.clear()
    late = verify.verify(MINI, "original", dict(FI_ON), ["seeded"], [256], jobs=1,
                         out_dir=tmp_path, runner="v2", deadline=time.time() - 1)
    assert started == [] and late["rows"][0]["verdict"] == "skipped"
    assert late["runner"] == "v2" and late["prediction"] == "sinks"
    assert "not started" in verify.render_text(late)


def test_compare_puts_warmups_side_by_side():
    def report(warmup, seeded_events, seconds):
        rows = [{"kind": "seeded", "batch": 256, "verdict": "warm" if not seeded_events else
                 "unexplained", "events": seeded_events, "first_ms": 9000.0 if seeded_events
                 else 1.1, "steady_ms": 1.0, "predicted": []},
                {"kind": "greedy", "batch": 256, "verdict": "error", "predicted": []}]
        return {"release": "0.26.0", "runner": "v2", "warmup": warmup, "config": {},
                "rows": rows, "startup": {"cases": 2, "seconds_median": seconds,
                                          "peak_extra_mb": 566.5}}

    text = verify.render_compare([report("original", 1, 0.3), report("file:/x/fixed.py", 0, 11.1)])
    assert "original vs file:/x/fixed.py" in text
    assert "start-up original: 0.3 s, +566.5 MB peak" in text
    assert "start-up file:/x/fixed.py: 11.1 s" in text
    line = next(l for l in text.splitlines() if l.startswith("seeded"))
    assert "1 ev    9000.0 ms cold" in line and "0 ev       1.1 ms warm" in line


def test_cli_refuses_bad_matrices_before_looking_for_a_gpu(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "warmlint.cli", "verify", "--release-dir",
                               str(tmp_path), *args], capture_output=True, text=True,
                              cwd=REPO, timeout=120)

    proc = run("--runner", "v2", "--kinds", "spec_greedy")
    assert proc.returncode == 2 and "unknown request kind 'spec_greedy'" in proc.stderr
    proc = run("--runner", "v2", "--warmup", "plugin")
    assert proc.returncode == 2 and "v1 runner only" in proc.stderr
    proc = run("--deadline", "1")
    assert proc.returncode == 2 and "in the past" in proc.stderr


def test_case_records_its_runner_and_refuses_unknown_kinds_before_any_import(tmp_path):
    out = tmp_path / "case.json"
    proc = subprocess.run(
        [sys.executable, "-m", "warmlint.runtime.case", "--release-dir", str(MINI),
         "--json", str(out), "--runner", "v2", "--kind", "spec_greedy",
         "--cache-root", str(tmp_path / "caches")],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    result = json.loads(out.read_text())
    assert proc.returncode == 1 and result["status"] == "error" and result["runner"] == "v2"
    assert "unknown request kind 'spec_greedy' for the v2 runner" in result["error"]
    assert "versions" not in result  # it stopped before importing torch or vLLM


# --- what travels -----------------------------------------------------------------------

def test_bundle_takes_flashinfer_from_the_newest_release_pin(tmp_path):
    bundle = _bundle_module()
    for version, fi, tvm in (("0.21.0", "0.6.8.post1", "0.1.9"), ("0.26.0", "0.6.14", "0.1.10")):
        info = tmp_path / version / f"vllm-{version}.dist-info"
        info.mkdir(parents=True)
        info.joinpath("METADATA").write_text(
            f"Name: vllm\nRequires-Dist: torch==2.11.0\nRequires-Dist: flashinfer-python=={fi}\n"
            f"Requires-Dist: apache-tvm-ffi=={tvm}\nRequires-Dist: numba==0.65.0; extra == 'x'\n")
    pins = {v: bundle.release_pins(tmp_path / v) for v in ("0.21.0", "0.26.0")}
    assert pins["0.26.0"] == {"torch": "2.11.0", "flashinfer-python": "0.6.14",
                              "apache-tvm-ffi": "0.1.10"}
    chosen, notes = bundle.choose_flashinfer(pins, {})
    assert chosen == {"flashinfer-python": "0.6.14", "apache-tvm-ffi": "0.1.10"}
    assert notes == ["vLLM 0.21.0 pins flashinfer-python==0.6.8.post1 but runs with 0.6.14",
                     "vLLM 0.21.0 pins apache-tvm-ffi==0.1.9 but runs with 0.1.10"]
    only_old, none = bundle.choose_flashinfer({"0.21.0": pins["0.21.0"]}, {})
    assert only_old["flashinfer-python"] == "0.6.8.post1" and none == []
    forced, _ = bundle.choose_flashinfer(pins, {"flashinfer-python": "0.6.8.post1"})
    assert forced == {"flashinfer-python": "0.6.8.post1", "apache-tvm-ffi": "0.1.10"}


def test_bundle_packs_a_release_as_tar_xz_that_the_run_script_unpacks(tmp_path):
    bundle = _bundle_module()
    tree = tmp_path / "tree"
    (tree / "vllm" / "v1").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("x = 1\n")
    (tree / "vllm" / "v1" / "a.py").write_text("y = 2\n" * 100)
    (tree / "vllm" / "v1" / "a.so").write_bytes(b"\0")  # not a .py: left out
    (tree / "vllm-0.26.0.dist-info").mkdir()
    (tree / "vllm-0.26.0.dist-info" / "METADATA").write_text("Name: vllm\n")
    dest, cache = tmp_path / "payload", tmp_path / "cache"
    dest.mkdir()
    archive = bundle.xz_release(tree, "0.26.0", dest, cache)
    assert archive.name == "vllm-0.26.0.tar.xz"
    with tarfile.open(archive) as tf:
        assert sorted(tf.getnames()) == ["vllm-0.26.0.dist-info/METADATA", "vllm/__init__.py",
                                         "vllm/v1/a.py"]
    kept = cache / "archives" / "vllm-0.26.0.tar.xz"
    before = kept.stat().st_mtime_ns
    bundle.xz_release(tree, "0.26.0", dest, cache)  # reused, not rebuilt
    assert kept.stat().st_mtime_ns == before
    # the run script's unpack step, on this archive
    releases = tmp_path / "releases"
    script = (f"source tools/run_gpu_tests.sh; BUNDLE={tmp_path}; mkdir -p $BUNDLE/releases; "
              f"mv {archive} $BUNDLE/releases/; unpack_releases")
    proc = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "WARMLINT_FUNCTIONS_ONLY": "1",
                                            "OUT": str(tmp_path / "out"),
                                            "WARMLINT_PYTHON": sys.executable,
                                            "WARMLINT_RELEASES_DIR": str(releases)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (releases / "0.26.0" / "vllm" / "v1" / "a.py").read_text() == "y = 2\n" * 100
    assert (releases / "0.26.0" / "vllm" / "_C.py").is_file()  # the compiled-op stand-in


def test_run_script_turns_verify_specs_into_verify_commands(tmp_path):
    log = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/bash\necho "$*" >> {log}\n')
    fake.chmod(0o755)
    specs = ("0.26.0:original:VLLM_USE_FLASHINFER_SAMPLER=1:runner=v2:batches=256,37,8,1 "
             "0.21.0:original+fixed:VLLM_USE_FLASHINFER_SAMPLER=0,X=1:kinds=topk_only,"
             "logprobs/20:jobs=4")
    env = {**os.environ, "WARMLINT_FUNCTIONS_ONLY": "1", "OUT": str(tmp_path / "out"),
           "WARMLINT_PYTHON": str(fake), "WARMLINT_GPU_JOBS": "12", "WARMLINT_VERIFY": specs,
           "WARMLINT_DEADLINE_S": "500", "WARMLINT_FIXED_RUNNER_0_21_0": "/x/fixed.py",
           "WARMLINT_RELEASES_DIR": "/r"}
    proc = subprocess.run(["bash", "-c", "source tools/run_gpu_tests.sh; run_verify"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [c for c in log.read_text().splitlines() if c.startswith("-m warmlint.cli verify")]
    first, second = calls
    assert first.startswith("-m warmlint.cli verify --release-dir /r/0.26.0 --jobs 12 "
                            "--runner v2 --batches 256,37,8,1 --warmup original "
                            "--env VLLM_USE_FLASHINFER_SAMPLER=1 --deadline ")
    deadline = int(first.split("--deadline ")[1].split()[0])
    assert 0 < deadline - time.time() <= 500
    assert "--kinds topk_only,logprobs:20" in second and "--jobs 4" in second
    assert "--warmup original --warmup file:/x/fixed.py" in second
    assert "--env VLLM_USE_FLASHINFER_SAMPLER=0 --env X=1" in second
    assert first.endswith(f"--cases-dir {tmp_path}/out/cases-1")


def test_run_script_runs_only_flashinfer_free_specs_while_flashinfer_builds(tmp_path):
    log = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/bash\necho "$*" >> {log}\n')
    fake.chmod(0o755)
    env = {**os.environ, "WARMLINT_FUNCTIONS_ONLY": "1", "OUT": str(tmp_path / "out"),
           "WARMLINT_PYTHON": str(fake), "VERIFY_TAG": "early", "WARMLINT_RELEASES_DIR": "/r",
           "WARMLINT_VERIFY": "0.21.0:original:VLLM_USE_FLASHINFER_SAMPLER=1 "
                              "0.21.0:original:VLLM_USE_FLASHINFER_SAMPLER=0:batches=256"}
    proc = subprocess.run(["bash", "-c", "source tools/run_gpu_tests.sh; run_verify"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and "would build FlashInfer themselves" in proc.stdout
    [call] = [c for c in log.read_text().splitlines() if c.startswith("-m warmlint.cli verify")]
    assert "--env VLLM_USE_FLASHINFER_SAMPLER=0" in call
    assert f"-o {tmp_path}/out/verify-early-2.json" in call


def test_a_prediction_explains_a_cell_only_through_the_kernels_it_names():
    """The H200's speculative cells (2026-12-03): a WL004 finding about
    `rejection_random_sample_kernel` predicted them, but `expand_kernel` compiled."""
    v1 = _finding(verify.RUNNER_MODULES["v1"])  # WL004, batch-size class of _topk_topp_kernel
    v1["extra"]["missing"] = ["other"]  # 37 rows
    named = verify._row("seeded", 37, _ok(["_topk_topp_kernel"]), [v1], FI_ON)
    assert named["verdict"] == "cold, predicted" and "unnamed_kernels" not in named
    other = verify._row("seeded", 37, _ok(["_topk_topp_kernel", "expand_kernel"]), [v1], FI_ON)
    assert other["verdict"] == "unexplained" and other["unnamed_kernels"] == ["expand_kernel"]
    assert other["predicted"] == ["WL004 topk_topp_triton.py:947 BATCH_SIZE"]
    text = verify.render_text({"release": "0.21.0", "runner": "v1", "warmup": "fixed",
                               "config": FI_ON, "rows": [other]})
    assert "expand_kernel named by no prediction (WL004 topk_topp_triton.py:947" in text
