"""Request kinds of the GPU matrix: their names, their counts, and which runner has them.

Standard library only: ``warmlint verify`` (no torch) and both harnesses (torch) share
this table, so the matrix that ``verify`` asks for is exactly what the cases can build.

A kind is a name with an optional count: ``logprobs:20`` asks for the top 20 logprobs,
``token_logprobs:8`` for the logprobs of 8 given token ids. The count matters on a GPU:
Triton specializes kernels on constexprs derived from it (the v2 runner's
``TOPK_BLOCK_SIZE = next_power_of_2(count + 1)``), so 1, 5 and 20 can be three different
compiles. A kind without a count takes the count the first GPU runs used (5 logprobs,
3 token ids), so older results and test ids keep their meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_KINDS = ("seeded", "unseeded", "greedy", "mixed", "topk_only", "topp_only", "no_filter",
              "logprobs", "token_logprobs")
DEFAULT_COUNTS = {"logprobs": 5, "token_logprobs": 3}
# Requests verified by the v1 rejection sampler (a deployment with a drafter), one draft
# token per request; the value is the request kind their sampling metadata has.
SPEC_KINDS = {"spec_random": "unseeded", "spec_greedy": "greedy", "spec_logprobs": "logprobs"}
RUNNERS = ("v1", "v2")
RUNNER_KINDS = {"v1": BASE_KINDS + tuple(SPEC_KINDS), "v2": BASE_KINDS}
MAX_TOKEN_IDS = 20  # v2 caps logprob_token_ids (MAX_LOGPROB_TOKEN_IDS); the matrix stays below

# The matrix `warmlint verify` runs when no --kinds/--batches are given. Batches: 1 (a
# single request), 8 (the smallest batch vLLM filters with Triton instead of PyTorch),
# 37 (not a multiple of 16: Triton's integer specialization), 256 (max_num_seqs, the
# warmup's own batch).
MATRIX_KINDS = ("seeded", "unseeded", "greedy", "mixed", "topk_only", "topp_only", "no_filter",
                "logprobs:1", "logprobs:5", "logprobs:20", "token_logprobs:1",
                "token_logprobs:3", "token_logprobs:8", "token_logprobs:20")
MATRIX = {
    "v1": {"kinds": MATRIX_KINDS + tuple(SPEC_KINDS), "batches": (1, 8, 37, 256)},
    "v2": {"kinds": MATRIX_KINDS, "batches": (1, 8, 37, 256)},
}


@dataclass(frozen=True)
class Kind:
    """One request kind: ``name`` (a BASE_KINDS or SPEC_KINDS entry) and its count."""

    name: str
    count: int | None = None

    @property
    def text(self) -> str:
        """The canonical spelling: the count is written only where it is not the default."""
        if self.count is None or self.count == DEFAULT_COUNTS.get(self.base):
            return self.name
        return f"{self.name}:{self.count}"

    @property
    def base(self) -> str:
        """The sampling-metadata kind (a spec kind's plain counterpart)."""
        return SPEC_KINDS.get(self.name, self.name)

    @property
    def speculative(self) -> bool:
        return self.name in SPEC_KINDS

    @property
    def n(self) -> int | None:
        """The count the request really uses (the default where none was written)."""
        return self.count if self.count is not None else DEFAULT_COUNTS.get(self.base)


def parse_kind(text: str, runner: str = "v1") -> Kind:
    """``"logprobs:20"`` -> Kind("logprobs", 20); ValueError names what is allowed."""
    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; one of {', '.join(RUNNERS)}")
    name, sep, count = text.strip().partition(":")
    allowed = RUNNER_KINDS[runner]
    if name not in allowed:
        raise ValueError(f"unknown request kind {name!r} for the {runner} runner; one of "
                         f"{', '.join(allowed)}")
    if not sep:
        return Kind(name)
    base = SPEC_KINDS.get(name, name)
    if base not in DEFAULT_COUNTS:
        raise ValueError(f"request kind {name!r} takes no count (only "
                         f"{', '.join(DEFAULT_COUNTS)} do)")
    try:
        n = int(count)
    except ValueError:
        raise ValueError(f"{text!r}: the count after ':' must be an integer") from None
    if not 1 <= n <= MAX_TOKEN_IDS:
        raise ValueError(f"{text!r}: the count must be between 1 and {MAX_TOKEN_IDS}")
    return Kind(name, n)


def token_ids(n: int) -> list[int]:
    """The token ids a ``token_logprobs:n`` request asks about: 11, 22, 33, ... (the first
    GPU runs used [11, 22, 33]); all far below any vocabulary size."""
    return [11 * (i + 1) for i in range(n)]


def detect_runner(release_dir, config: dict | None = None) -> str:
    """v2 where the tree has only the v2 runner, or the config asks for it
    (``VLLM_USE_V2_MODEL_RUNNER=1``); else v1. 0.26.0 has both runners: v1 by default."""
    from pathlib import Path

    root = Path(release_dir)
    v1 = (root / "vllm/v1/worker/gpu_model_runner.py").is_file()
    v2 = (root / "vllm/v1/worker/gpu/model_runner.py").is_file()
    wanted = str((config or {}).get("VLLM_USE_V2_MODEL_RUNNER", "")).strip().lower()
    if v2 and (not v1 or wanted in ("1", "true")):
        return "v2"
    return "v1"
