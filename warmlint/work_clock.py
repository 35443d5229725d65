"""A clock of analysis work that does not run while source is parsed.

Forked config leaves (``leaf_fork``) pay when leaves share work before their last config
decision. The first leaves also parse most of what every leaf reads (LibCST function
spans, tables of contents), which a child inherits parsed: counting it made vLLM
0.34.0's v2 leaves look 0.5 s deep when their shared work was 0.2 s, and v1 leaves
(0.002-0.05 s of work) look 0.1-0.2 s deep. ``now`` leaves parsing out.
"""

from __future__ import annotations

import functools
import time

_parsing = [0.0]  # seconds spent in ``parsing`` functions so far, in this process
_depth = [0]  # parsing functions running now (one may call another)


def now() -> float:
    """perf_counter() less the time spent parsing."""
    return time.perf_counter() - _parsing[0]


def parsing(function):
    """Decorator: time in ``function`` is parsing (not counted by ``now``); nested
    parsing functions count once."""

    @functools.wraps(function)
    def timed(*args, **kwargs):
        if _depth[0]:
            return function(*args, **kwargs)
        _depth[0] += 1
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _depth[0] -= 1
            _parsing[0] += time.perf_counter() - started
    return timed
