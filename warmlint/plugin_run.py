"""The upgraded warmup as it runs inside vLLM: timed, and never the reason start-up fails.

Why: the plugin's method is checked before it is installed (``plugin_source``), but what
its extra sampler calls do on a given GPU, model and config is only known when they run.
vLLM's own warmup is what vLLM would have run without the plugin, so if the upgraded one
raises (an out-of-memory from the extra calls, a request value this deployment's sampler
rejects), the plugin logs one warning with the error and runs vLLM's own warmup instead:
the start-up goes on as if the plugin were absent, and an error that vLLM's own warmup
raises too is vLLM's, raised as vLLM would. Each run also logs what it took.
"""

from __future__ import annotations

import dataclasses
import functools
import time


def guarded(method, original, added: int, logger, threads: int = 1):
    """``method`` (the upgraded warmup) falling back to ``original`` (vLLM's) if it raises;
    ``logger()`` gives the logger, looked up when a line is written; ``threads``: the pool
    its deferred calls run on (``plugin_defer``; 1: none), all finished before it returns."""
    from warmlint.plugin_defer import run_deferred

    calls = f"{added} warmup call{'' if added == 1 else 's'} added"

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            result = run_deferred(method, threads, self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - vLLM's own warmup decides, below
            _say(logger, "warning", "warmlint plugin: the upgraded sampler warmup (%s) "
                 "failed (%s: %s); running vLLM's own warmup instead", calls,
                 type(exc).__name__, str(exc)[:200])
            return original(self, *args, **kwargs)
        _say(logger, "info", "warmlint plugin: the upgraded sampler warmup (%s) took %.2f s",
             calls, time.perf_counter() - started)
        return result

    return run


def _say(logger, level: str, *args) -> None:
    try:
        getattr(logger(), level)(*args)
    except Exception:  # noqa: BLE001 - not even logging may break vLLM
        pass


def replace_fields(obj, **changes):
    """``__warmlint_replace`` in the installed method: a copy of a request object with
    fields changed, a msgspec struct (v2's ``SamplingParams``) or a dataclass (v1's
    ``SamplingMetadata``, v2's ``InputBatch``)."""
    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **changes)
    import msgspec

    return msgspec.structs.replace(obj, **changes)
