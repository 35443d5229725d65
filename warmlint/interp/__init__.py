"""An abstract interpreter for the subset of Python that vLLM's warmups and samplers use.

It runs twice per configuration: once over the warmups, recording which branch outcomes
and JIT sinks they reach, then over the sampler entry calls the warmups made, with
request inputs left open, recording where a serving path first leaves the warmup's
outcomes and which sinks it reaches from there. The two runs differ only in their
``PassPolicy`` (``frames.py``; ``warmup.WarmupPass`` and ``serving.ServingPass``).
"""

from warmlint.interp.core import Interp, Memo
from warmlint.interp.frames import BudgetExceeded, Frame, PassPolicy, SinkHit

__all__ = ["BudgetExceeded", "Frame", "Interp", "Memo", "PassPolicy", "SinkHit"]
