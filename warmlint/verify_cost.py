"""The start-up cost of a warmup as ``warmlint verify``'s cases measured it.

Why a module of its own: the cost is a result in its own right (issue: the fixed warmup
moves every compile to start-up, and users need that price measured), computed from the
case files alone, apart from running them (``verify.py``) and drawing tables
(``verify_render.py``).
"""

from __future__ import annotations

import statistics


def startup_cost(results) -> dict:
    """The warmup under test, as the cases measured it: wall time (median, min, max over
    cases: they ran side by side, so the spread is noise from neighbours) and peak GPU
    memory above the memory allocated before it (the same in every case)."""
    results = list(results)
    warm = [r["warmup"] for r in results if r.get("status") == "ok" and r.get("warmup")]
    if not warm:
        return {"cases": 0}
    # which sampling path the sampler was built for (v1: forward_cuda = FlashInfer bound;
    # v2: "flashinfer"), so a table says whether the FlashInfer dispatch was under test
    samplers = sorted({str(r.get("sampler_forward")) for r in results if r.get("status") == "ok"})
    seconds = [w["seconds"] for w in warm]
    extra = [w.get("memory_extra_bytes", 0) for w in warm]
    out = {"cases": len(warm), "seconds_median": round(statistics.median(seconds), 3),
           "seconds_min": round(min(seconds), 3), "seconds_max": round(max(seconds), 3),
           "peak_extra_mb": round(max(extra) / 1e6, 1),
           "peak_extra_mb_min": round(min(extra) / 1e6, 1),
           "events_median": statistics.median(w["events"]["total"] for w in warm),
           "sampler": samplers}
    out.update(_compile_cost(warm))
    parts = {}
    for w in warm:
        for name, part in (w.get("parts") or {}).items():
            parts.setdefault(name, []).append(part["seconds"])
    if parts:
        out["parts_seconds_median"] = {n: round(statistics.median(v), 3)
                                       for n, v in parts.items()}
    return out


def _compile_cost(warm: list) -> dict:
    """The warmup's Triton compiles, timed one by one by ``JitEvents`` (medians over
    cases): how many, the slowest, and their sum. The sum bounds what compiling at start-up
    costs when the compiles run one after another, as a warmup's calls do."""
    timed = [[e["seconds"] for e in (w.get("events") or {}).get("triton_events", [])
              if isinstance(e.get("seconds"), (int, float))] for w in warm]
    if not any(timed):
        return {}
    return {"compiles_median": statistics.median(len(t) for t in timed),
            "compile_s_max_median": round(statistics.median(max(t, default=0.0)
                                                            for t in timed), 3),
            "compile_s_sum_median": round(statistics.median(sum(t) for t in timed), 3)}
