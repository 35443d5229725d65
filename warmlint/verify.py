"""``warmlint verify``: the static verdicts against real JIT events on a GPU.

For one vLLM release (its ``.py`` tree, as ``--vllm`` or the GPU bundle unpacks it), one
warmup (the release's own, a fixed runner file, or the plugin's) and one config, run the
real warmup, then a matrix of request kinds and batch sizes, each in a fresh process
(``warmlint.runtime.case``), and count JIT events in each request's first step. Beside
each row: the finding that predicts it, from warmlint's own analysis of the same tree
under the same config, or "unexplained" when a compile happened that no finding
predicted, or "predicted, not observed" when a finding said cold and the GPU disagreed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from warmlint import sinks

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


def config_holds(text: str, config: dict) -> bool:
    """Evaluate one of a finding's config conditions against a case's config."""
    match = re.fullmatch(r"(\w+)=([01])", text)
    if match:
        return bool(int(config.get(match.group(1), "0"))) == (match.group(2) == "1")
    if text in ("speculative_config", "not speculative_config"):
        return text.startswith("not")  # the stand-in runner has no speculative decoding
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
    facts = KIND_FACTS[kind]
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
        facts = KIND_FACTS[kind]
        return all(facts.get(inputs[0]) == ("set" if positive else "unset")
                   for inputs, positive in extra.get("literals", []) if len(inputs) == 1)
    if finding["rule"] == "WL004" and "batch size" in finding.get("inputs", []):
        from warmlint.specialization import int_class  # pulls in the analysis: only here

        return int_class(batch) in set(extra.get("missing", []))
    return finding["rule"] == "WL004"  # a flag: the matching path fixes the missing value


def static_findings(release_dir: Path, warmup: str, config: dict) -> list:
    """warmlint's findings for the tree the GPU case will run, under the case's config."""
    from warmlint.check import analyze_tree
    from warmlint.settings import Settings

    settings = Settings(select=("WL001", "WL004"))
    settings.assume.update({"VLLM_USE_FLASHINFER_SAMPLER": bool(int(
        config.get("VLLM_USE_FLASHINFER_SAMPLER", "0"))), "speculative_config": None,
        "logprobs_mode": config.get("logprobs_mode", "raw_logprobs")})
    with tempfile.TemporaryDirectory(prefix="warmlint-verify-") as tmp:
        root = _tree_for(release_dir, warmup, Path(tmp), settings)
        report = analyze_tree(root, settings, None)
        return [f.to_json() for f in report.findings]


def _tree_for(release_dir: Path, warmup: str, tmp: Path, settings) -> Path:
    runner = "vllm/v1/worker/gpu_model_runner.py"
    if warmup == "original":
        return release_dir
    root = tmp / "tree"
    shutil.copytree(release_dir / "vllm", root / "vllm")
    if warmup.startswith("file:"):
        shutil.copy(warmup[5:], root / runner)
    elif warmup == "plugin":
        from warmlint.codemod.run import compute_fixes

        for fix in compute_fixes(root, settings, {"generators"}).files:
            (root / fix.path).write_text(fix.new)
    return root


def run_case(release_dir: Path, warmup: str, config: dict, kind: str, batch: int,
             out_dir: Path, python: str = sys.executable) -> dict:
    out = out_dir / f"{kind}-{batch}.json"
    cmd = [python, "-m", "warmlint.runtime.case", "--release-dir", str(release_dir),
           "--warmup", warmup, "--kind", kind, "--batch", str(batch), "--json", str(out),
           "--logprobs-mode", config.get("logprobs_mode", "raw_logprobs")]
    cmd += [arg for name, value in config.items() if name.isupper()
            for arg in ("--env", f"{name}={value}")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
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


def verify(release_dir: Path, warmup: str, config: dict, kinds=KINDS, batches=BATCHES,
           jobs: int = 4, out_dir: Path | None = None) -> dict:
    config = with_defaults(release_dir, config)  # unset means the release's default
    findings = static_findings(release_dir, warmup, config)
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="warmlint-verify-cases-"))
    cells = [(k, b) for k in kinds for b in batches]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda c: run_case(release_dir, warmup, config, c[0], c[1],
                                                   out_dir), cells))
    rows = [_row(kind, batch, result, findings, config)
            for (kind, batch), result in zip(cells, results)]
    return {"release": release_dir.name, "warmup": warmup, "config": config, "rows": rows,
            "findings": [_label(f) for f in findings]}


def _label(f: dict) -> str:
    what = f["extra"].get("parameter") or f["outcome"]
    return f"{f['rule']} {f['path'].rsplit('/', 1)[-1]}:{f['line']} {what}"


def _row(kind: str, batch: int, result: dict, findings: list, config: dict) -> dict:
    predicted = [_label(f) for f in findings if predicts(f, kind, batch, config)]
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
    cold = events["total"] > 0
    if cold and not predicted:  # the compiled kernel is a sink some finding names
        row["explained_by"] = [_label(f) for f in findings if _compiled_sink(f, events, config)]
    row["verdict"] = ("cold, predicted" if cold and predicted else
                      "cold, explained by sink" if cold and row.get("explained_by") else
                      "unexplained" if cold else
                      "predicted, not observed" if predicted else "warm")
    return row


def _compiled_sink(finding: dict, events: dict, config: dict) -> bool:
    if not all(config_holds(c, config) for c in finding.get("configs", [])):
        return False
    for sink in finding.get("sinks", []):
        observed = events.get(sinks.kind_of(sink["id"]).gpu_event)
        if isinstance(observed, list) and sink["name"] in observed:
            return True  # a compiled-kernel list (Triton): this kernel compiled
        if observed and not isinstance(observed, list):
            return True  # a compile count (Dynamo, FlashInfer)
    return False


def render_text(report: dict) -> str:
    head = (f"vLLM {report['release']}, warmup: {report['warmup']}, config: "
            f"{', '.join(f'{k}={v}' for k, v in report['config'].items()) or 'default'}\n")
    lines = [head, f"{'request':<16}{'batch':>6}{'events':>8}{'first ms':>11}{'steady ms':>11}"
             f"  verdict / prediction"]
    for r in report["rows"]:
        if r["verdict"] in ("error", "skipped"):
            lines.append(f"{r['kind']:<16}{r['batch']:>6}{'-':>8}{'-':>11}{'-':>11}  "
                         f"{r['verdict']}: {r.get('error', '')[:60]}")
            continue
        why = "; ".join(r["predicted"] or r.get("explained_by", []))
        lines.append(f"{r['kind']:<16}{r['batch']:>6}{r['events']:>8}{r['first_ms']:>11}"
                     f"{r['steady_ms']:>11}  {r['verdict']}{': ' + why if why else ''}")
    return "\n".join(lines) + "\n"


def cuda_available(python: str = sys.executable) -> bool:
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=300,
                              env=os.environ.copy()).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
