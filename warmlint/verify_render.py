"""Rendering a ``warmlint verify`` report: the text table per runner and warmup, and the
side-by-side comparison of two warmups with their start-up cost. Plain functions of the
report's JSON, apart from running it (``verify.py``)."""

from __future__ import annotations

def _compiled(r: dict) -> str:
    """What compiled in a cold cell: Triton kernel names, Dynamo frames, FlashInfer builds."""
    parts = list(dict.fromkeys(r.get("kernels") or []))
    if r.get("dynamo"):
        parts.append(f"{r['dynamo']} Dynamo")
    if r.get("flashinfer"):
        parts.append(f"{r['flashinfer']} FlashInfer build")
    return ", ".join(parts)


def _startup_line(report: dict) -> str:
    s = report.get("startup") or {}
    if not s.get("cases"):
        return "start-up (warmup under test): not measured (no case ran)"
    line = (f"start-up (warmup under test): {s['seconds_median']} s median "
            f"({s['seconds_min']}-{s['seconds_max']} s over {s['cases']} cases run side by "
            f"side), peak GPU memory +{s['peak_extra_mb']} MB, {s['events_median']:g} JIT events")
    if s.get("compiles_median") is not None:
        line += _compiles(s)
    if s.get("parts_seconds_median"):
        line += "; " + ", ".join(f"{n} {v} s" for n, v in s["parts_seconds_median"].items())
    if s.get("sampler"):
        line += f"; sampler: {', '.join(s['sampler'])}"
    return line


def _compiles(s: dict) -> str:
    return (f"; {s['compiles_median']:g} Triton compiles (slowest {s['compile_s_max_median']}"
            f" s, all {s['compile_s_sum_median']} s)")


def summary_counts(report: dict) -> dict:
    counts: dict = {}
    for r in report["rows"]:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts


def render_text(report: dict) -> str:
    head = (f"vLLM {report['release']}, runner {report.get('runner', 'v1')}, warmup: "
            f"{report['warmup']}, config: "
            f"{', '.join(f'{k}={v}' for k, v in report['config'].items()) or 'default'}")
    lines = [head, _startup_line(report)]
    if report.get("prediction") == "sinks":
        lines.append("predictions: by sink only (no path facts for this runner's requests "
                     "yet): a cold cell is explained when a finding names what compiled")
    lines += ["", f"{'request':<18}{'batch':>6}{'events':>8}{'first ms':>11}{'steady ms':>11}"
              f"  verdict / prediction"]
    for r in report["rows"]:
        if r["verdict"] in ("error", "skipped"):
            lines.append(f"{r['kind']:<18}{r['batch']:>6}{'-':>8}{'-':>11}{'-':>11}  "
                         f"{r['verdict']}: {r.get('error', '')[-80:].strip()}")
            continue
        why = "; ".join(r["predicted"] or r.get("explained_by", []))
        if r.get("unnamed_kernels"):  # predicted, but not what compiled
            why = f"{', '.join(r['unnamed_kernels'])} named by no prediction ({why})"
        what = f" [{_compiled(r)}]" if r["events"] else ""
        lines.append(f"{r['kind']:<18}{r['batch']:>6}{r['events']:>8}{r['first_ms']:>11}"
                     f"{r['steady_ms']:>11}  {r['verdict']}{what}{': ' + why if why else ''}")
    counts = summary_counts(report)
    lines.append(f"\n{len(report['rows'])} of {report.get('cells', len(report['rows']))} "
                 "cells: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "\n".join(lines) + "\n"


def render_compare(reports: list) -> str:
    """Warmups side by side (e.g. original vs fixed) over the cells they share: start-up
    cost, then per cell the first-step events and time under each warmup."""
    if not reports:
        return ""
    names = [f"{r['warmup'] if len(r['warmup']) < 28 else '...' + r['warmup'][-25:]}"
             for r in reports]
    lines = [f"vLLM {reports[0]['release']}, runner {reports[0].get('runner', 'v1')}: "
             + " vs ".join(names), ""]
    for name, report in zip(names, reports):
        s = report.get("startup") or {}
        cost = (f"{s['seconds_median']} s, +{s['peak_extra_mb']} MB peak"
                + (_compiles(s) if s.get("compiles_median") is not None else "")
                if s.get("cases") else "not measured")
        lines.append(f"  start-up {name}: {cost}")
    lines.append("")
    cells = {}
    for i, report in enumerate(reports):
        for r in report["rows"]:
            cells.setdefault((r["kind"], r["batch"]), [None] * len(reports))[i] = r
    lines.append(f"{'request':<18}{'batch':>6}  " + "  |  ".join(
        f"{n[:28]:<28}" for n in names))

    def cell(r) -> str:
        if r is None:
            return "not run"
        if r["verdict"] in ("error", "skipped"):
            return r["verdict"]
        return (f"{r['events']} ev {r['first_ms']:>9} ms {'cold' if r['events'] else 'warm'}")

    for (kind, batch), rs in cells.items():
        lines.append(f"{kind:<18}{batch:>6}  " + "  |  ".join(f"{cell(r):<28}" for r in rs))
    return "\n".join(lines) + "\n"
