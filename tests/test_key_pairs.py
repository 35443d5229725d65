"""WL004 on whole keys: a batch class and a flag each warmed, never together
(``warmlint/key_pairs.py``), through the CLI, `fix` and `verify`'s predictions; and the
row count of a tensor's head slice, which the pairs need to read a fix's 8-row call."""

from __future__ import annotations

import importlib
import json

import libcst as cst

from conftest import run_cli
from warmlint.interp import shims
from warmlint.state import State, SymFact
from warmlint.values import Const, Sym, Tensor

WL004 = importlib.import_module("warmlint.rules.wl004_triton_specialization_gap")
RUNNER = "vllm/v1/worker/gpu_model_runner.py"


def _tree(tmp_path, extra: str = ""):
    path = tmp_path / RUNNER
    path.parent.mkdir(parents=True)
    path.write_text(WL004._PAIR.format(marker="", extra=extra))
    return tmp_path


def _findings(root):
    report = run_cli("check", "--no-cache", "--format", "json", "--select", "WL004",
                     str(root), check_json=True).json
    assert report["errors"] == [] and report["stats"]["complete"]
    return report["findings"]


def test_a_flag_warmed_only_at_the_full_batch_is_a_pair_gap(tmp_path):
    from warmlint.verify import predicts

    [finding] = _findings(_tree(tmp_path))
    extra = finding["extra"]
    assert (extra["parameter"], extra["value"], extra["batch_parameter"]) == (
        "TOPK", "False", "N_ROWS")
    assert extra["missing"] == ["other"] and extra["warmed"] == ["% 16 == 0"]
    assert "batch size" in finding["inputs"] and "SamplingMetadata.top_k" in finding["inputs"]
    # the path the finding names decides the flag: top-k unset, at least 8 rows
    assert all(p["SamplingMetadata.top_k"] == "unset" and p["batch size >="] == 8
               for p in extra["paths"])
    assert finding["fix"]["available"] and "top_k=None" in finding["fix"]["description"]
    cells = [(kind, b) for kind in ("topp_only", "topk_only") for b in (1, 8, 37, 256)
             if predicts(finding, kind, b, {})]
    assert cells == [("topp_only", 8), ("topp_only", 37)]


def test_fix_warms_the_pair_and_check_is_then_clean(tmp_path):
    root = _tree(tmp_path)
    fixed = run_cli("fix", str(root))
    assert fixed.returncode == 0, fixed.stderr
    text = (root / RUNNER).read_text()
    assert "hidden_states[:8]" in text and "top_k=None" in text.split("hidden_states[:8]")[1]
    assert _findings(root) == []
    assert run_cli("fix", "--check", str(root)).returncode == 0


def test_a_warmup_running_the_pair_is_clean(tmp_path):
    extra = "\n            self.sampler(hidden_states[:9], replace(metadata, top_k=None))"
    assert _findings(_tree(tmp_path, extra)) == []


class _Eval:
    """The one thing ``head_rows`` asks of the interpreter: evaluate the bound."""

    def eval(self, node, state):
        return [(state, Const(int(node.value)))]


def _head(batch, facts=None, code="x[:8]"):
    state = State(env={}, facts=facts or {})
    element = cst.parse_expression(code).slice[0]
    return [None if rows is None else rows.value
            for _, rows in shims.head_rows(_Eval(), Tensor(batch), element, state)]


def test_a_head_slice_keeps_its_row_count_where_it_is_known():
    n = Sym("num_reqs", "opaque", "num_reqs", is_int=True)
    assert _head(Const(256)) == [8]
    assert _head(Const(5)) == [5]
    assert _head(n, {"num_reqs": SymFact(lo=9)}) == [8]
    assert _head(n) == [None]  # fewer rows than 8 possible: unknown
    assert _head(Const(256), code="x[1:8]") == [None]


UNJUDGED = '''
from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    rows: torch.Tensor


@triton.jit
def _rows_kernel(LOGITS, N_ROWS):
    pass


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        picked = logits[sampling_metadata.rows]
        _rows_kernel[(8,)](picked, picked.shape[0])
        return logits


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        self.sampler(hidden_states, SamplingMetadata(rows=torch.zeros(3)))
'''


def test_an_argument_whose_classes_cannot_be_told_is_counted_not_passed(tmp_path):
    """Rows picked by a request's index tensor: their count is unknown on both sides, so
    WL004 cannot judge N_ROWS; the run says so (summary line, JSON, SARIF)."""
    path = tmp_path / RUNNER
    path.parent.mkdir(parents=True)
    path.write_text(UNJUDGED)
    proc = run_cli("check", "--no-cache", "--format", "json", str(tmp_path))
    report = json.loads(proc.stdout)
    assert report["findings"] == [] and report["stats"]["complete"]
    assert report["stats"]["unjudged"] == ["_rows_kernel.N_ROWS"]
    assert "1 kernel argument not judged, see stats.unjudged" in proc.stderr
    sarif = json.loads(run_cli("check", "--no-cache", "--format", "sarif",
                               str(tmp_path)).stdout)
    assert sarif["runs"][0]["invocations"][0]["properties"]["unjudged"] == [
        "_rows_kernel.N_ROWS"]
