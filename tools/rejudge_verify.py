#!/usr/bin/env python3
"""Judge recorded GPU cells again with today's static analysis: no GPU needed.

    .venv/bin/python tools/rejudge_verify.py docs/gpu/verify-0.26.0-v2-flashinfer.json \\
        --release-dir ~/.cache/warmlint/releases/vllm-0.26.0 [--warmup-file FILE] [-o OUT]

A `warmlint verify` report (or one of the `reports` of a side-by-side file) records, per
cell, the JIT events the GPU observed in the request's first step. This recomputes the
findings for the same release, runner, warmup and config (``verify.static_findings``) and
gives each cell the verdict ``verify._row`` would give it now, from the recorded events.
It prints the cells whose verdict changed and the verdict counts before and after.
``--warmup-file`` replaces a ``file:`` warmup whose path no longer exists (the GPU bundle's
fixed runner: regenerate it with ``warmlint fix``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from warmlint import verify


def _events(row: dict) -> dict:
    return {"total": row["events"], "triton_kernels": row.get("kernels", []),
            "dynamo": row.get("dynamo", 0), "flashinfer": row.get("flashinfer", 0)}


def rejudge(report: dict, release_dir: Path, warmup: str) -> list:
    runner, config = report["runner"], report["config"]
    found: dict = {}
    rows = []
    for row in report["rows"]:
        if row.get("status") != "ok":
            rows.append(row)
            continue
        spec = verify.parse_kind(row["kind"], runner).speculative
        cell_config = {**config, "speculative": "1"} if spec else config
        if spec not in found:
            found[spec] = verify.static_findings(release_dir, warmup, cell_config, runner)
        result = {"status": "ok", "request": {"events": _events(row),
                                              "first_s": row["first_ms"] / 1000,
                                              "second_s": row["steady_ms"] / 1000}}
        again = verify._row(row["kind"], row["batch"], result, found[spec], cell_config, runner)
        rows.append({**row, "predicted": again["predicted"],
                     "explained_by": again.get("explained_by", []),
                     "verdict": again["verdict"], "verdict_recorded": row["verdict"]})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--release-dir", type=Path, required=True)
    parser.add_argument("--warmup-file", type=Path)
    parser.add_argument("--output", "-o", type=Path)
    args = parser.parse_args(argv)
    data = json.loads(args.report.read_text())
    reports = data["reports"] if "reports" in data else [data]
    out = []
    for report in reports:
        warmup = report["warmup"]
        if warmup.startswith("file:") and args.warmup_file:
            warmup = f"file:{args.warmup_file.resolve()}"
        rows = rejudge(report, args.release_dir.expanduser(), warmup)
        before = Counter(r.get("verdict_recorded", r.get("verdict")) for r in rows)
        after = Counter(r.get("verdict") for r in rows)
        print(f"{report['release']} {report['runner']} warmup={report['warmup']}")
        for r in rows:
            if r.get("verdict_recorded") not in (None, r["verdict"]):
                why = ", ".join(r.get("predicted") or r.get("explained_by") or [])
                print(f"  {r['kind']} @ {r['batch']}: {r['verdict_recorded']} -> "
                      f"{r['verdict']} ({why})")
        print(f"  before: {dict(sorted(before.items()))}")
        print(f"  after:  {dict(sorted(after.items()))}")
        out.append({**report, "rows": rows})
    if args.output:
        args.output.write_text(json.dumps({"reports": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
