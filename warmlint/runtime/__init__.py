"""Runtime checks of warmlint's verdicts on a real GPU (optional; needs torch, triton, vLLM).

Nothing here is imported by the linter itself, and importing this package does not import
torch: ``jitcount`` and ``harness`` import torch, triton and flashinfer only when used.
"""

from warmlint.runtime.jitcount import JitEvents, fresh_compile_caches

__all__ = ["JitEvents", "fresh_compile_caches"]
