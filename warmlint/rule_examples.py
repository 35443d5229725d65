"""Example trees shared by rules' examples (each rule's ``EXAMPLES`` builds on them).

``seeded_sampler`` is the smallest vLLM-shaped runner with a cold seeded path: a sampler
whose fast path (bound by ``envs.VLLM_USE_FAST_PATH``) falls back to a Triton kernel for
seeded requests, and a warmup that never passes a generator. WL001 reports it; WL100's
examples put suppressions on it.
"""

from __future__ import annotations

_SAMPLER = '''
import dataclasses
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import triton

from vllm import envs


@dataclass
class SamplingMetadata:
    temperature: torch.Tensor
    generators: dict
    max_num_logprobs: int | None


@triton.jit
def _filter_kernel(LOGITS, N):
    pass


def apply_filter(logits):
    _filter_kernel[(logits.shape[0],)](logits, logits.shape[1])
    return logits


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        if envs.VLLM_USE_FAST_PATH:
            self.forward = self.forward_fast
        else:
            self.forward = self.forward_native

    def forward_native(self, logits, sampling_metadata):
        return apply_filter(logits)

    def forward_fast(self, logits, sampling_metadata):
        if sampling_metadata.generators:{marker}
            return self.forward_native(logits, sampling_metadata)
        return logits
'''

_RUNNER = '''

class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.device = device
        self.sampler = Sampler()

    def _dummy_sampler_run(self, hidden_states: torch.Tensor):
        logits = hidden_states
        metadata = SamplingMetadata(temperature=logits, generators={{}}, max_num_logprobs=None)
        self.sampler(logits, metadata){extra}
'''

# A second warmup call that takes the seeded outcome.
SEEDED_CALL = '''
        self.sampler(logits, replace(metadata, generators={0: torch.Generator(device=self.device)}))'''


def seeded_sampler(marker: str = "", extra: str = "") -> str:
    """The runner module; ``marker`` ends the seeded branch's line (``# expect: ...``),
    ``extra`` follows the warmup's sampler call."""
    return _SAMPLER.replace("{marker}", marker) + _RUNNER.format(extra=extra)
