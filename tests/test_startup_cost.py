"""`verify`'s start-up cost of a warmup (``verify_cost.startup_cost``): wall time and peak memory
over the cases that ran it, and its Triton compiles as ``JitEvents`` timed them, rendered
in the text table and in the side-by-side comparison."""

from __future__ import annotations

from warmlint.verify_cost import startup_cost
from warmlint.verify_render import render_compare, render_text


def _case(seconds, compiles, extra_mb=500):
    events = [{"name": f"k{i}", "seconds": s, "manual_warmup": False}
              for i, s in enumerate(compiles)]
    return {"status": "ok", "sampler_forward": "forward_cuda",
            "warmup": {"seconds": seconds, "memory_extra_bytes": extra_mb * 1_000_000,
                       "events": {"total": len(compiles), "triton_events": events}}}


def test_compiles_are_counted_with_the_slowest_and_their_sum():
    cost = startup_cost([_case(10.0, [2.0, 6.0]), _case(12.0, [3.0, 7.0]),
                         _case(11.0, [2.5, 6.5, None])])
    assert cost["cases"] == 3 and cost["seconds_median"] == 11.0
    assert cost["compiles_median"] == 2  # an event without a time is not a timed compile
    assert cost["compile_s_max_median"] == 6.5 and cost["compile_s_sum_median"] == 9.0


def test_a_warmup_without_timed_compiles_reports_none():
    cost = startup_cost([_case(1.0, [])])
    assert "compiles_median" not in cost and cost["cases"] == 1


def test_the_tables_show_the_compiles():
    report = {"release": "0.21.0", "runner": "v1", "warmup": "original", "config": {},
              "rows": [], "startup": startup_cost([_case(8.2, [7.9])])}
    assert "1 Triton compiles (slowest 7.9 s, all 7.9 s)" in render_text(report)
    fixed = dict(report, warmup="fixed", startup=startup_cost([_case(30.0, [7.9, 9.0, 5.1])]))
    assert "3 Triton compiles (slowest 9.0 s, all 22.0 s)" in render_compare([report, fixed])
