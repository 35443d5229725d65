"""When the cyclic garbage collector runs during an analysis, and why so rarely.

The abstract interpreter builds a live heap of 1-2 million objects (states, values,
frames, records) and few reference cycles. Every collection re-scans the young part of
that heap and frees almost nothing: at the collector's defaults, and even at (50,000, 20,
100), collections took 8-15% of a cold run (stop 45: 0.31 s of 3.47 s on vLLM 0.34.0,
0.42 s of 5.7 s on 0.33.0), and turning them off cost 3-11 MB of uncollected cycles on
the seven real trees the tests use. So an analysis collects only after ``THRESHOLDS[0]``
more objects were allocated than freed: no vLLM release reaches it (2 million at most),
while a tree that builds far more garbage cycles is still collected, a bound on memory.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

THRESHOLDS = (4_000_000, 10, 10)


@contextmanager
def rare_collections():
    """``THRESHOLDS`` inside, the caller's thresholds again after."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
