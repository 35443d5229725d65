"""An abstract interpreter for the subset of Python that vLLM's warmups and samplers use.

It runs twice per configuration: once over the warmups (``mode="warmup"``), recording
which branch outcomes and JIT sinks they reach, then over the sampler entry calls the
warmups made, with request inputs left open (``mode="serving"``), recording where a
serving path first leaves the warmup's outcomes and which sinks it reaches from there.
"""

from warmlint.interp.core import Interp, Recorder, SinkHit

__all__ = ["Interp", "Recorder", "SinkHit"]
