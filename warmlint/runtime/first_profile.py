"""Where a request's first step spends its time, when it is slow with no JIT event.

A first step that takes 100 ms where the next takes 4, with no Triton, Dynamo or
FlashInfer compile in it, is not a warmlint finding, but the README must say what it is.
Timing alone cannot tell a lazily loaded CUDA module from a Python import run on first
use or a one-time library handle: ``WARMLINT_PROFILE_FIRST=1`` (set in a case's
environment, e.g. a `verify` spec's env list) runs the first step under ``cProfile`` and
keeps its most expensive entries, by own and by cumulative time, in the case's result
(``first_step_profile``). C functions (a torch op loading its module, ``import``) show as
builtins with their own time, which is what attributes the gap. The profiler's overhead
makes that step slower, so the verdict cells of a matrix run without it.
"""

from __future__ import annotations

import contextlib
import os

ENV = "WARMLINT_PROFILE_FIRST"
TOP = 25


class FirstStepProfile:
    """``step(i)``: a context that profiles step 0 when ``$WARMLINT_PROFILE_FIRST`` is 1."""

    def __init__(self, enabled: bool | None = None, top: int = TOP):
        self.enabled = os.environ.get(ENV) == "1" if enabled is None else enabled
        self.top = top
        self.entries: dict | None = None

    def step(self, index: int):
        if not self.enabled or index != 0:
            return contextlib.nullcontext()
        return self._profiled()

    @contextlib.contextmanager
    def _profiled(self):
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            stats = pstats.Stats(profile)
            self.entries = {"by_own": top_entries(stats, self.top, "own_s"),
                            "by_cumulative": top_entries(stats, self.top, "cumulative_s")}


def top_entries(stats, top: int, key: str) -> list[dict]:
    """The ``top`` functions by ``key``: where, calls, own and cumulative seconds."""
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():
        where = name if path == "~" else f"{_short(path)}:{line}({name})"
        rows.append({"function": where, "calls": calls, "own_s": round(own, 5),
                     "cumulative_s": round(cumulative, 5)})
    rows.sort(key=lambda row: -row[key])
    return rows[:top]


def _short(path: str) -> str:
    """A path from its package down (``.../site-packages/vllm/x.py`` -> ``vllm/x.py``)."""
    for marker in ("site-packages/", "dist-packages/", "/releases/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
