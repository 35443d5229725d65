#!/usr/bin/env python3
"""Write a minimal renamed-fork tree with the shape that makes Aphrodite's v1 sampler
exceed warmlint's analysis budget (docs/limitations.md, docs/forks.md).

    python tools/repro_elif_loop.py 14 /tmp/loop14 && warmlint check --no-cache /tmp/loop14

The sampler loops over a module-level list of N constants with an N-arm chain
``elif sid == K and md.fK is not None: logits = ops.opK(logits)`` (each op launches a
Triton kernel); the warmup sets every ``fK`` to None. Measured on the 2-core development
machine before the failed arms were joined (warmlint/joins.py): N=10 1.1 s, 12 5.0 s, 13
14.1 s, 14 77 s; since, N=20 takes 0.6 s, like the same chain unrolled by hand
(``--shape unrolled``) or separate ``if``s (``--shape ifs``). tests/test_joins.py runs it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def arms(n: int, indent: str, chain: bool) -> str:
    return "".join(f"{indent}{'elif' if chain and i else 'if'} sid == {i} and md.f{i} is not None:\n"
                   f"{indent}    logits = ops.op{i}(logits)\n" for i in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=["loop", "unrolled", "ifs"], default="loop")
    args = parser.parse_args()
    n, pkg = args.n, args.out / "forkllm"
    shutil.rmtree(args.out, ignore_errors=True)
    for sub in ("", "v1", "v1/sample", "v1/worker", "triton_utils"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "triton_utils/__init__.py").write_text("import triton\nimport triton.language as tl\n")
    (pkg / "v1/sample/metadata.py").write_text(
        "from dataclasses import dataclass\n\nimport torch\n\n\n@dataclass\nclass SamplingMetadata:\n"
        "    temperature: torch.Tensor | None\n"
        + "".join(f"    f{i}: torch.Tensor | None = None\n" for i in range(n)))
    (pkg / "v1/sample/ops.py").write_text("from forkllm.triton_utils import triton\n\n" + "".join(
        f"\n@triton.jit\ndef _k{i}(X):\n    pass\n\n\ndef op{i}(logits):\n    _k{i}[(1,)](logits)\n"
        f"    return logits\n" for i in range(n)))
    if args.shape == "unrolled":
        body = "".join(f"        sid = {k}\n" + arms(n, "        ", True) for k in range(n))
    else:
        body = "        for sid in ORDER:\n" + arms(n, "            ", args.shape == "loop")
    (pkg / "v1/sample/sampler.py").write_text(
        "from forkllm.v1.sample import ops\n\n"
        f"ORDER = {list(range(n))}\n\n\nclass Sampler:\n"
        "    def __call__(self, logits, sampling_metadata):\n"
        "        return self.forward(logits, sampling_metadata)\n\n"
        f"    def forward(self, logits, md):\n{body}        return logits\n")
    (pkg / "v1/worker/gpu_model_runner.py").write_text(
        "import torch\n\nfrom forkllm.v1.sample.metadata import SamplingMetadata\n"
        "from forkllm.v1.sample.sampler import Sampler\n\n\nclass GPUModelRunner:\n"
        "    def __init__(self, forkllm_config, device):\n"
        "        self.device = device\n        self.sampler = Sampler()\n\n"
        "    def _dummy_sampler_run(self, hidden_states):\n"
        "        logits = self.model.compute_logits(hidden_states)\n"
        "        n = logits.size(0)\n"
        "        md = SamplingMetadata(temperature=torch.full((n,), 0.5, device=self.device),\n"
        f"                              {', '.join(f'f{i}=None' for i in range(n))})\n"
        "        return self.sampler(logits=logits, sampling_metadata=md)\n")


if __name__ == "__main__":
    main()
