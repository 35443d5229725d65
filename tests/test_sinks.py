"""The sink table: ids, JSON form, recognition from settings, and a new kind added as data."""

from __future__ import annotations

from pathlib import Path

from warmlint import sinks
from warmlint.check import analyze_tree
from warmlint.settings import Settings, apply

RUNNER = '''
import torch
from vllm.sampler import Sampler, SamplingMetadata


class GPUModelRunner:
    def __init__(self, vllm_config):
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        meta = SamplingMetadata(graphs=False)
        self.sampler(hidden_states, meta)
'''

SAMPLER = '''
from dataclasses import dataclass

import mylib


@dataclass
class SamplingMetadata:
    graphs: bool


@mylib.capture
def captured(x):
    return x


class Sampler:
    def __call__(self, logits, meta: SamplingMetadata):
        if meta.graphs:
            return captured(logits)
        return logits
'''


def _tree(root: Path) -> Path:
    for rel, text in {"vllm/v1/worker/gpu_model_runner.py": RUNNER,
                      "vllm/sampler.py": SAMPLER}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_ids_round_trip_and_json():
    sink_id = sinks.make_id(sinks.TRITON, "pkg.ops._kernel")
    assert sink_id == "triton:pkg.ops._kernel"
    assert sinks.parse_id(sink_id) == (sinks.TRITON, "pkg.ops._kernel")
    assert sinks.as_json(sink_id, "pkg/ops.py", 3) == {
        "id": sink_id, "kind": "triton", "name": "_kernel", "qualname": "pkg.ops._kernel",
        "path": "pkg/ops.py", "line": 3}
    ext = sinks.as_json("flashinfer:flashinfer.sampling", "s.py", 1)
    assert (ext["kind"], ext["name"]) == ("flashinfer", "flashinfer.sampling")
    assert sinks.phrase(ext) == "JIT module `flashinfer.sampling`"


def test_external_granularity_is_data():
    settings = apply(Settings(), {"external-sinks": {"mypkg": "function"}}, "test")
    kind, target = sinks.recognize_external(settings, "mypkg.ops.fused")
    assert (kind.name, target) == ("mypkg", "mypkg.ops.fused")
    kind, target = sinks.recognize_external(settings, "flashinfer.sampling.top_k_sample")
    assert target == "flashinfer.sampling"
    assert sinks.recognize_external(settings, "torch.topk") is None


def test_dispatcher_kernel_argument():
    assert sinks._kernel_argument("dispatch(kernel=_k, warmup_inputs=f)") == "_k"
    assert sinks._kernel_argument("dispatch(warmup_inputs=f)") is None
    assert sinks._kernel_argument("not python(") is None


def test_a_new_kind_is_one_entry_plus_settings(tmp_path):
    """A throw-away kind: registered in the table, recognized from `sink-decorators`."""
    root = _tree(tmp_path)
    plain = analyze_tree(root, Settings(select=("WL001",)), None)
    assert plain.findings == []  # without the kind, `mylib.capture` is just a decorator
    kind = sinks.register(sinks.SinkKind("cuda-graph", "captured graph `{name}`"))
    try:
        settings = apply(Settings(select=("WL001",)),
                         {"sink-decorators": {"mylib.capture": "cuda-graph"}}, "test")
        report = analyze_tree(root, settings, None)
    finally:
        del sinks.KINDS[kind.name]
    [finding] = report.findings
    assert finding.sinks[0]["kind"] == "cuda-graph"
    assert finding.sinks[0]["id"] == "cuda-graph:vllm.sampler.captured"
    assert "captured graph `captured`" in finding.message
    assert finding.outcome == "`meta.graphs` is true"
