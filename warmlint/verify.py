"""``warmlint verify``: the static verdicts against real JIT events on a GPU.

For one vLLM release (its ``.py`` tree, as ``--vllm`` or the GPU bundle unpacks it), one
warmup (the release's own, a fixed runner file, or the plugin's) and one config, run the
real warmup, then a matrix of request kinds and batch sizes, each in a fresh process
(``warmlint.runtime.case``), and count JIT events in each request's first step. Beside
each row: the finding that predicts it, from warmlint's own analysis of the same tree
under the same config, or "unexplained" when a compile happened that no finding
predicted, or "predicted, not observed" when a finding said cold and the GPU disagreed.

Either model runner: v1 (``vllm/v1/worker/gpu_model_runner.py``) or v2
(``vllm/v1/worker/gpu/``, ``warmlint.runtime.harness_v2``); ``runner="auto"`` takes v2 where
the tree has only that runner or the config sets ``VLLM_USE_V2_MODEL_RUNNER=1``. Only the
findings of the runner under test count (a finding's ``extra.runner``). Where the runner's
request kinds have no path facts in the analysis' terms yet (v2), a cell's prediction is
the sink mapping alone: a cold cell is explained when a finding of that runner names a
kernel that compiled in it, and no "predicted, not observed" can be claimed.

Each row also carries the start-up cost of the warmup under test, as each case measured
it (wall time, peak GPU memory above what was allocated before it); the report
summarizes it, and ``render_compare`` puts an original and a fixed warmup side by side.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from warmlint import sinks
from warmlint.runtime.requests import MATRIX, detect_runner, parse_kind
from warmlint.verify_cost import startup_cost
from warmlint.verify_render import render_compare, render_text, summary_counts  # noqa: F401

KINDS = ("seeded", "unseeded", "greedy", "mixed", "topk_only", "topp_only", "no_filter",
         "logprobs", "token_logprobs")
BATCHES = (1, 37, 256)
_M = "SamplingMetadata."
_RANDOM = {_M + "generators": "unset", _M + "top_k": "set", _M + "top_p": "set",
           _M + "all_greedy": "unset", _M + "all_random": "set", _M + "temperature": "set",
           _M + "max_num_logprobs": "unset", _M + "logprob_token_ids": "unset"}
# What each request kind of warmlint.runtime.harness sets, in the analysis' terms.
KIND_FACTS = {
    "seeded": {**_RANDOM, _M + "generators": "set"},
    "unseeded": dict(_RANDOM),
    "greedy": {**_RANDOM, _M + "all_greedy": "set", _M + "all_random": "unset",
               _M + "temperature": "unset", _M + "top_k": "unset", _M + "top_p": "unset"},
    "mixed": {**_RANDOM, _M + "all_random": "unset"},
    "topk_only": {**_RANDOM, _M + "top_p": "unset"},
    "topp_only": {**_RANDOM, _M + "top_k": "unset"},
    "no_filter": {**_RANDOM, _M + "top_k": "unset", _M + "top_p": "unset"},
    "logprobs": {**_RANDOM, _M + "max_num_logprobs": "set"},
    "token_logprobs": {**_RANDOM, _M + "logprob_token_ids": "set"},
}
# Per runner: the facts table its request kinds have in the analysis' terms (None: none
# yet, so predictions come from the sink mapping alone), and the module of its
# GPUModelRunner (``extra.runner`` of the findings that belong to it).
RUNNER_FACTS = {"v1": KIND_FACTS, "v2": None}
RUNNER_MODULES = {"v1": "vllm.v1.worker.gpu_model_runner.",
                  "v2": "vllm.v1.worker.gpu.model_runner."}
RUNNER_FILES = {"v1": "vllm/v1/worker/gpu_model_runner.py",
                "v2": "vllm/v1/worker/gpu/model_runner.py"}
# A case started before the deadline may run this long past it (a cold v2 case takes a
# minute or two); WARMLINT_CASE_GRACE_S tightens it under a hard time limit.
CASE_GRACE_S = 180


def facts_of(kind: str) -> dict:
    """The v1 facts of a request kind, its count and speculation aside."""
    return KIND_FACTS[parse_kind(kind, "v1").base]


def config_holds(text: str, config: dict) -> bool:
    """Evaluate one of a finding's config conditions against a case's config."""
    match = re.fullmatch(r"(\w+)=([01])", text)
    if match:
        return bool(int(config.get(match.group(1), "0"))) == (match.group(2) == "1")
    if text in ("speculative_config", "not speculative_config"):
        on = bool(config.get("speculative"))  # the cell's deployment has a drafter
        return on != text.startswith("not")
    match = re.fullmatch(r"\S*logprobs_mode (not in|in|==|!=) (.+)", text)
    if match:
        op, rhs = match.groups()
        values = set(re.findall(r"'([^']*)'|\"([^\"]*)\"", rhs))
        values = {a or b for a, b in values}
        inside = config.get("logprobs_mode", "raw_logprobs") in values
        return inside if op in ("in", "==") else not inside
    return True  # a condition verify cannot evaluate does not rule the finding out


# The inputs that route a sampler call; other facts on a path (penalties off, no bad
# words) hold for every request kind here and would only add noise to the matching.
ROUTING = {_M + n for n in ("generators", "top_k", "top_p", "all_greedy", "max_num_logprobs",
                            "logprob_token_ids")}


def _path_matches(path: dict, kind: str, batch: int, config: dict) -> bool:
    facts = facts_of(kind)
    if batch < path.get("batch size >=", 0):
        return False
    if not all(config_holds(c, config) for c in path.get("configs", [])):
        return False  # a path of other configs (speculative decoding has no 8-row minimum)
    return all(facts[key] == value for key, value in path.items() if key in ROUTING)


def predicts(finding: dict, kind: str, batch: int, config: dict) -> bool:
    """Whether ``finding`` says a request of this kind and batch compiles something."""
    if not all(config_holds(c, config) for c in finding.get("configs", [])):
        return False
    extra = finding.get("extra", {})
    if not any(_path_matches(p, kind, batch, config) for p in extra.get("paths") or [{}]):
        return False
    if finding["rule"] == "WL001":
        facts = facts_of(kind)
        return all(facts.get(inputs[0]) == ("set" if positive else "unset")
                   for inputs, positive in extra.get("literals", []) if len(inputs) == 1)
    computed = extra.get("computed")
    if finding["rule"] == "WL004" and computed:
        from warmlint.verify_counts import computed_missing

        return computed_missing(finding, computed, kind)
    if finding["rule"] == "WL004" and "batch size" in finding.get("inputs", []):
        from warmlint.specialization import int_class  # pulls in the analysis: only here

        return int_class(batch) in set(extra.get("missing", []))
    return finding["rule"] == "WL004"  # a flag: the matching path fixes the missing value


def static_findings(release_dir: Path, warmup: str, config: dict,
                    runner: str = "v1") -> list:
    """warmlint's findings for the tree the GPU case will run, under the case's config
    (``config["speculative"]``: a deployment with a drafter), of that runner only."""
    from warmlint.check import analyze_tree
    from warmlint.settings import Settings

    settings = Settings(select=("WL001", "WL004"))
    settings.assume.update({"VLLM_USE_FLASHINFER_SAMPLER": bool(int(
        config.get("VLLM_USE_FLASHINFER_SAMPLER", "0"))), "speculative_config": None,
        "logprobs_mode": config.get("logprobs_mode", "raw_logprobs")})
    if config.get("speculative"):
        settings.assume.pop("speculative_config")  # findings say which config they need
    with tempfile.TemporaryDirectory(prefix="warmlint-verify-") as tmp:
        root = _tree_for(release_dir, warmup, Path(tmp), settings, runner)
        report = analyze_tree(root, settings, None)
        return [f for f in (f.to_json() for f in report.findings) if of_runner(f, runner)]


def of_runner(finding: dict, runner: str) -> bool:
    """A finding found from that runner's warmup (or one that does not say)."""
    owner = finding.get("extra", {}).get("runner")
    return not owner or owner.startswith(RUNNER_MODULES[runner])


def _tree_for(release_dir: Path, warmup: str, tmp: Path, settings, runner: str = "v1") -> Path:
    runner_file = RUNNER_FILES[runner]
    if warmup == "original":
        return release_dir
    root = tmp / "tree"
    shutil.copytree(release_dir / "vllm", root / "vllm")
    if warmup.startswith("file:"):
        shutil.copy(warmup[5:], root / runner_file)
    elif warmup == "plugin":  # what the plugin ships: WARMLINT_PLUGIN_FIX, default all
        from warmlint.codemod.run import compute_fixes
        from warmlint.plugin import TARGETS, fix_choice

        choice = fix_choice()
        seeded = next(t.fields for t in TARGETS.values() if t.runner_file == runner_file)
        fields = None if choice == "all" else seeded if choice == "seeded" else set(choice)
        for fix in compute_fixes(root, settings, fields).files:
            (root / fix.path).write_text(fix.new)
    return root


def case_command(release_dir: Path, warmup: str, config: dict, kind: str, batch: int,
                 out: Path, runner: str = "v1", python: str = sys.executable) -> list:
    """The ``warmlint.runtime.case`` command line of one cell (upper-case config = env)."""
    cmd = [python, "-m", "warmlint.runtime.case", "--release-dir", str(release_dir),
           "--warmup", warmup, "--kind", kind, "--batch", str(batch), "--json", str(out),
           "--logprobs-mode", config.get("logprobs_mode", "raw_logprobs"), "--runner", runner]
    if parse_kind(kind, runner).speculative:
        cmd.append("--speculative")
    cmd += [arg for name, value in config.items() if name.isupper()
            for arg in ("--env", f"{name}={value}")]
    # As in tests/gpu: "--device cpu --vocab 4096 --hidden 64" dry-runs the machinery on a
    # machine without CUDA (its verdicts then mean nothing).
    return cmd + shlex.split(os.environ.get("WARMLINT_CASE_ARGS", ""))


def run_case(release_dir: Path, warmup: str, config: dict, kind: str, batch: int,
             out_dir: Path, python: str = sys.executable, runner: str = "v1",
             deadline: float | None = None) -> dict:
    """One cell in a fresh process; ``deadline`` (epoch s): none starts after it, and one
    still running ``CASE_GRACE_S`` after it is stopped."""
    if deadline is not None and time.time() > deadline:
        return {"status": "skipped", "reason": "not started: the run's deadline had passed"}
    out = out_dir / f"{kind.replace(':', '_')}-{batch}.json"
    cmd = case_command(release_dir, warmup, config, kind, batch, out, runner, python)
    grace = float(os.environ.get("WARMLINT_CASE_GRACE_S", CASE_GRACE_S))
    timeout = 900 if deadline is None else max(10.0, deadline + grace - time.time())
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"timed out after {timeout:.0f} s (deadline)"}
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        return {"status": "error", "error": proc.stderr[-2000:]}


def with_defaults(release_dir: Path, config: dict, names=("VLLM_USE_FLASHINFER_SAMPLER",)) -> dict:
    """``config`` plus the release's own default for each env var it leaves unset."""
    from warmlint.env_defaults import UNKNOWN, env_default

    out = dict(config)
    for name in names:
        if name not in out:
            default = env_default(release_dir, name)
            if default is not UNKNOWN:
                out[name] = "1" if default else "0"
    return out


def matrix(runner: str) -> tuple[tuple, tuple]:
    """(kinds, batches) of the default matrix for a runner."""
    return MATRIX[runner]["kinds"], MATRIX[runner]["batches"]


def verify(release_dir: Path, warmup: str, config: dict, kinds=None, batches=None,
           jobs: int = 4, out_dir: Path | None = None, *, runner: str = "auto",
           deadline: float | None = None, progress=None) -> dict:
    """Run the matrix; ``progress(report)`` gets the partial report after each cell.

    Cells run batch by batch in the order given (so a deadline drops the last batches'
    cells, not whole request kinds); rows come back kind by kind.
    """
    config = with_defaults(release_dir, config)  # unset means the release's default
    if runner == "auto":
        runner = detect_runner(release_dir, config)
    default_kinds, default_batches = matrix(runner)
    kinds = [parse_kind(k, runner).text for k in (kinds or default_kinds)]
    batches = list(batches or default_batches)
    findings = {}  # by deployment: with or without a drafter

    def findings_for(kind: str) -> tuple[list, dict]:
        spec = parse_kind(kind, runner).speculative
        cell_config = {**config, "speculative": "1"} if spec else config
        if spec not in findings:
            findings[spec] = static_findings(release_dir, warmup, cell_config, runner)
        return findings[spec], cell_config

    for kind in kinds:
        findings_for(kind)
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="warmlint-verify-cases-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    order = [(k, b) for b in batches for k in kinds]
    done: dict = {}
    lock = threading.Lock()
    report = {"release": release_dir.name, "runner": runner, "warmup": warmup,
              "config": config, "cells": len(order), "prediction": (
                  "paths" if RUNNER_FACTS[runner] is not None else "sinks"),
              "findings": sorted({_label(f) for fs in findings.values() for f in fs})}

    def rows() -> list:
        out = []
        for kind in kinds:
            for batch in batches:
                if (kind, batch) in done:
                    fs, cell_config = findings_for(kind)
                    out.append(_row(kind, batch, done[kind, batch], fs, cell_config, runner))
        return out

    def one(cell):
        kind, batch = cell
        fs, cell_config = findings_for(kind)
        result = run_case(release_dir, warmup, cell_config, kind, batch, out_dir,
                          runner=runner, deadline=deadline)
        with lock:
            done[cell] = result
            if progress is not None:
                progress({**report, "rows": rows(), "startup": startup_cost(done.values())})
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, order))
    return {**report, "rows": rows(), "startup": startup_cost(done.values())}


def _label(f: dict) -> str:
    what = f["extra"].get("parameter") or f["outcome"]
    return f"{f['rule']} {f['path'].rsplit('/', 1)[-1]}:{f['line']} {what}"


def _row(kind: str, batch: int, result: dict, findings: list, config: dict,
         runner: str = "v1") -> dict:
    by_paths = RUNNER_FACTS.get(runner) is not None
    predicting = [f for f in findings if predicts(f, kind, batch, config)] if by_paths else []
    predicted = [_label(f) for f in predicting]
    row = {"kind": kind, "batch": batch, "status": result.get("status"),
           "predicted": predicted}
    if result.get("status") != "ok":
        row["verdict"] = "error" if result.get("status") == "error" else "skipped"
        row["error"] = (result.get("error") or result.get("reason") or "")[-300:]
        return row
    request = result["request"]
    events = request["events"]
    row.update(events=events["total"], kernels=events.get("triton_kernels", []),
               dynamo=events.get("dynamo", 0), flashinfer=events.get("flashinfer", 0),
               first_ms=round(request["first_s"] * 1000, 1),
               steady_ms=round((request["second_s"] or 0) * 1000, 1))
    warmup = result.get("warmup") or {}
    if "seconds" in warmup:
        row.update(warmup_s=warmup["seconds"],
                   warmup_peak_mb=round(warmup.get("memory_extra_bytes", 0) / 1e6, 1))
    cold = events["total"] > 0
    # a Triton kernel compiled that no predicting finding names is not explained by them
    # (the prediction was right for a wrong reason): judged like an unpredicted compile
    unnamed = sorted(set(row["kernels"]) - {s["name"] for f in predicting
                                            for s in f.get("sinks", [])}) if predicting else []
    if unnamed:
        row["unnamed_kernels"] = unnamed
    if cold and (not predicted or unnamed):  # the compiled kernel is a sink some finding names
        row["explained_by"] = [_label(f) for f in findings
                               if _compiled_sink(f, events, config, unnamed or None)]
    row["verdict"] = ("cold, predicted" if cold and predicted and not unnamed else
                      "cold, explained by sink" if cold and row.get("explained_by") else
                      "unexplained" if cold else
                      "predicted, not observed" if predicted else "warm")
    return row


def _compiled_sink(finding: dict, events: dict, config: dict, only=None) -> bool:
    """Whether a kernel ``finding`` names compiled (one of ``only``, if given)."""
    if not all(config_holds(c, config) for c in finding.get("configs", [])):
        return False
    for sink in finding.get("sinks", []):
        observed = events.get(sinks.kind_of(sink["id"]).gpu_event)
        if isinstance(observed, list) and sink["name"] in observed \
                and (only is None or sink["name"] in only):
            return True  # a compiled-kernel list (Triton): this kernel compiled
        if observed and not isinstance(observed, list) and only is None:
            return True  # a compile count (Dynamo, FlashInfer)
    return False


def cpu_dry_run() -> bool:
    """WARMLINT_CASE_ARGS asks the cases to run on the CPU (a rehearsal without a GPU)."""
    args = shlex.split(os.environ.get("WARMLINT_CASE_ARGS", ""))
    return "--device=cpu" in args or ("--device", "cpu") in zip(args, args[1:])


def cuda_available(python: str = sys.executable) -> bool:
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=300,
                              env=os.environ.copy()).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
