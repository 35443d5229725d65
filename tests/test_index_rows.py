"""Rows picked by an index tensor (``logits[metadata.target_logits_indices]``: the
speculative-decoding path's draft tokens): the warmup's index has as many rows as it was
made with, a request's own index selects a request-dependent count (``rows(...)``), and a
kernel argument fed by it is judged like the batch size, so the speculative deployment's
row classes are found and `fix` warms them there too. Engine units, then the CLI."""

from __future__ import annotations

from conftest import run_cli
from warmlint.interp import containers, dtypes
from warmlint.serving import BATCH_INPUT, is_row_count
from warmlint.values import Const, External, OneOf, Seq, Sym, Tensor, join, selected_rows

N = Sym("warmup_batch", "opaque", "warmup batch", is_int=True)
IDX = Sym("SpecMeta.target_idx", "request", "SpecMeta.target_idx")


def test_an_integer_index_tensor_selects_as_many_rows_as_it_has():
    assert containers.index_rows(Tensor(N, dtype="int32")) is N
    assert containers.index_rows(Tensor(N, dtype="bool")) is None  # a mask: count unknown
    assert containers.index_rows(Tensor(N)) is None  # type unknown: nothing concluded
    assert containers.index_rows(Const(0)) is None  # one row, not a count


def test_a_request_index_selects_a_request_dependent_count():
    rows = containers.index_rows(IDX)
    assert rows.key == "rows(SpecMeta.target_idx)" and rows.is_int and rows.kind == "request"
    assert is_row_count(rows.key) and is_row_count(BATCH_INPUT)
    assert not is_row_count("len(SamplingMetadata.logprob_token_ids[])")
    assert selected_rows(IDX).key == rows.key
    assert containers.index_rows(Sym("SpecMeta.n", "request", "n", is_int=True)) is None


def test_lists_keep_their_length_through_range_comprehension_and_sum():
    per_request = Seq(None, "list", None, elem=Seq((Const(0),), "list", False), size=N)
    flat = containers.flattened(per_request, Seq((), "list", True))
    assert flat is not None and flat.size is N  # sum([[0] for _ in range(n)], []): n items
    two_each = Seq(None, "list", None, elem=Seq((Const(0), Const(1)), "list", False), size=N)
    assert containers.flattened(two_each, Seq((), "list", True)) is None  # 2n: not modeled
    known = Seq((Seq((Const(1),), "list"), Seq((Const(2), Const(3)), "list")), "list")
    assert [c.value for c in containers.flattened(known, Seq((), "list", True)).items] == [
        1, 2, 3]
    assert containers.count(Const(-3)).value == 0 and containers.count(N) is N
    assert containers.count(Sym("x", "request", "x")) is None


def test_element_types_where_the_code_writes_them():
    int32 = External("torch.int32")
    assert dtypes.of_maker("zeros", [N], {"dtype": int32}, None) == "int32"
    assert dtypes.of_maker("full", [N, Const(7)], {}, None) == "int64"
    assert dtypes.of_maker("full", [N, Const(0.5)], {}, None) == "float32"
    assert dtypes.of_maker("zeros", [N], {"dtype": Sym("d", "opaque", "d")}, None) is None
    assert dtypes.of_maker("zeros_like", [], {}, Tensor(N, dtype="int64")) == "int64"
    t = Tensor(N, dtype="int64")
    assert dtypes.of_method("to", t, [int32], {}) == "int32"
    assert dtypes.of_method("to", t, [Const("cuda")], {}) == "int64"
    assert dtypes.of_method("to", t, [Sym("dev", "opaque", "dev")], {}) is None
    assert dtypes.of_method("long", Tensor(N), [], {}) == "int64"
    assert dtypes.of_method("new_empty", t, [N], {}) == "int64"
    assert dtypes.of_method("sum", t, [], {}) is None


def test_a_tensor_whose_rows_differ_on_two_paths_stays_one_tensor():
    """Of unknown row count (a row count that is either would do, but call reuse then
    answers differently from a fresh call on vLLM 0.21.0: tests/test_reuse.py)."""
    rows = selected_rows(IDX)
    joined = join(Tensor(N, dtype="float32"), Tensor(rows, dtype="float32"))
    assert isinstance(joined, Tensor) and joined.dtype == "float32" and joined.batch is None
    assert join(Tensor(N, dtype="int32"), Tensor(rows, dtype="int64")).dtype is None
    assert isinstance(join(Tensor(N), Tensor(None)), OneOf)  # an unknown count stays apart


RUNNER = "vllm/v1/worker/gpu_model_runner.py"
SPECULATIVE = '''
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass
class SamplingMetadata:
    top_k: torch.Tensor | None


@dataclass
class SpecDecodeMetadata:
    target_logits_indices: torch.Tensor

    @classmethod
    def make_dummy(cls, draft_token_ids, device):
        num_tokens = len(sum(draft_token_ids, []))
        return cls(target_logits_indices=torch.zeros(num_tokens, dtype=torch.int32))


@triton.jit
def _mask_kernel(LOGITS, N_ROWS):
    pass


def mask(logits):
    if logits.shape[0] >= 8:
        _mask_kernel[(8,)](logits, logits.shape[0])
    return logits


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        return mask(logits)


class RejectionSampler(nn.Module):
    def forward(self, metadata, logits, sampling_metadata):
        return mask(logits[metadata.target_logits_indices])


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.speculative_config = vllm_config.speculative_config
        self.sampler = Sampler()
        self.rejection_sampler = RejectionSampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        num_reqs = hidden_states.shape[0]
        metadata = SamplingMetadata(top_k=torch.ones(num_reqs))
        self.sampler(logits=hidden_states, sampling_metadata=metadata)
        if self.speculative_config:
            draft_token_ids = [[0] for _ in range(num_reqs)]
            spec = SpecDecodeMetadata.make_dummy(draft_token_ids, None)
            self.rejection_sampler(spec, hidden_states, metadata)
'''


def _findings(root):
    report = run_cli("check", "--no-cache", "--format", "json", "--select", "WL004",
                     str(root), check_json=True).json
    assert report["errors"] == [] and report["stats"]["complete"]
    return report


def test_the_speculative_paths_rows_are_judged_and_fixed_in_every_deployment(tmp_path):
    """The warmup's speculative call has n rows (one draft token per request), so the
    speculative deployment is judged like the plain one (before: its warm rows were
    unknown, the argument was not judged there, and `fix` guarded its 8-row call with
    `not speculative_config`: on the H200 the first speculative request of 8 or 37
    rows then compiled `_topk_topp_kernel`, 7.8-11.3 s)."""
    path = tmp_path / RUNNER
    path.parent.mkdir(parents=True)
    path.write_text(SPECULATIVE)
    report = _findings(tmp_path)
    [finding] = report["findings"]
    assert "_mask_kernel.N_ROWS" not in report["stats"]["unjudged"]
    assert finding["extra"]["missing"] == ["other"]
    assert set(finding["inputs"]) == {BATCH_INPUT, "rows(SpecDecodeMetadata.target_logits_indices)"}
    assert finding["configs"] == []  # plain and speculative deployments alike
    assert run_cli("fix", str(tmp_path)).returncode == 0
    text = path.read_text()
    assert "hidden_states[:8]" in text and "speculative_config and num_reqs" not in text
    assert _findings(tmp_path)["findings"] == []
    assert run_cli("fix", "--check", str(tmp_path)).returncode == 0
