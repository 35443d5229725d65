#!/usr/bin/env python3
"""What summaries kept from one run would save the next (issue 16's item 1, upper bound).

Issue 16 asks for summaries that survive a run, so that an edit re-runs only what it can
change. Before building a store for them (a plain-data encoding, nodes named by address,
keys with code digests), this measures the most such a store could give, in one process
and serially, on a real tree: the analysis runs twice on the same parsed functions, and
the second run is measured three ways:

- ``parses kept``: the same tree, function parses, resolver and warmup methods as the
  first run, fresh call summaries and copied constructions (what a second run pays once
  parsing is free: the floor of everything else);
- ``summaries kept``: as ``parses kept``, and the first run's call summaries
  (``interp/summaries.py``) and constructions (``interp/built.py``) stay in place, so every
  call and construction the first run stored can be replayed from the start of the second:
  what summaries that survive a run would give *if nothing were edited* (an edit can only
  take some of them away);
- ``first run``: the first run itself, for scale.

Each line gives CPU seconds of the whole analysis, of the warmup pass and of the serving
pass, and the calls and constructions replayed from a summary. Self-check: the rules' findings of every measured run must equal the
first run's (``findings: same``), else the line says ``DIFFERENT`` and the exit status is 1.

    .venv/bin/python bench/carry_over.py ~/.cache/warmlint/releases/vllm-0.34.0 --repeat 3
    .venv/bin/python bench/carry_over.py TREE --config docs/forks/aphrodite-engine.toml
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import warmlint.analysis as A
from warmlint.index import SourceTree
from warmlint.interp import built
from warmlint.interp.built import BuiltReuse
from warmlint.interp.summaries import CallSummaries


class Meter:
    """CPU per pass, around ``analysis``'s own functions, and replays."""

    def __init__(self):
        self.cpu: Counter = Counter()
        self.replays = 0
        for name, label in (("run_warmups", "warmup"), ("run_entries", "serving")):
            setattr(A, name, self._timed(getattr(A, name), label))
        first = built.Reuses.first

        def counted(reuses, *args):
            got = first(reuses, *args)
            self.replays += got is not None
            return got

        built.Reuses.first = counted

    def _timed(self, fn, label):
        def run(*args, **kwargs):
            started = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[label] += time.process_time() - started
        return run


class Kept:
    """Makes ``analysis`` reuse what an earlier run made: parses, resolver, warmup methods,
    and (``summaries``) the call summaries and constructions."""

    def __init__(self, summaries: bool):
        self.memo: dict = {}
        self.calls, self.builds = CallSummaries(), BuiltReuse()
        self.summaries = summaries
        self.real = {n: getattr(A, n) for n in ("FunctionLoader", "Resolver", "discover",
                                                 "CallSummaries", "BuiltReuse")}

    def install(self) -> None:
        def once(name):
            real = self.real[name]

            def made(*args):
                if name not in self.memo:
                    self.memo[name] = real(*args)
                return self.memo[name]
            return made

        for name in ("FunctionLoader", "Resolver", "discover"):
            setattr(A, name, once(name))
        if self.summaries:
            A.CallSummaries, A.BuiltReuse = (lambda: self.calls), (lambda: self.builds)
        else:
            A.CallSummaries, A.BuiltReuse = self.real["CallSummaries"], self.real["BuiltReuse"]

    def uninstall(self) -> None:
        for name, real in self.real.items():
            setattr(A, name, real)


def findings(facts, settings) -> list:
    """The run's findings as ``check`` reports them (JSON, sorted)."""
    from warmlint.check import run_rules

    return sorted(json.dumps(f.to_json(), sort_keys=True)
                  for found in run_rules(facts, settings)[1].values() for f in found)


def one_run(meter: Meter, tree, settings) -> dict:
    meter.cpu.clear()
    meter.replays = 0
    started = time.process_time()
    facts = A.analyze(tree, settings, None)
    cpu = time.process_time() - started
    return {"cpu": cpu, "warmup": meter.cpu["warmup"], "serving": meter.cpu["serving"],
            "replays": meter.replays,
            "configs": sum(len(p.leaves) for p in facts.programs),
            "findings": findings(facts, settings)}


def measure(root: Path, settings, repeat: int) -> dict:
    meter = Meter()
    rows: dict = {"first run": [], "parses kept": [], "summaries kept": []}
    for _ in range(repeat):
        for label in ("parses kept", "summaries kept"):
            kept = Kept(summaries=label == "summaries kept")
            kept.install()
            try:
                tree = SourceTree(root, None, tuple(settings.exclude), None,
                                  settings.max_file_size, None)
                rows["first run"].append(one_run(meter, tree, settings))
                rows[label].append(one_run(meter, tree, settings))
            finally:
                kept.uninstall()
    return rows


def report(name: str, rows: dict) -> tuple[str, bool]:
    reference = rows["first run"][0]["findings"]
    lines = [f"{name}: {len(reference)} findings, "
             f"{rows['first run'][0]['configs']} configuration leaves; medians of "
             f"{len(rows['first run'])} (CPU s)"]
    same = True
    for label, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("cpu", "warmup", "serving", "replays")}
        ok = all(r["findings"] == reference for r in runs)
        same &= ok
        lines.append(f"  {label:15} total {med['cpu']:6.3f}  warmup {med['warmup']:6.3f}  "
                     f"serving {med['serving']:6.3f}  "
                     f"replays {int(med['replays']):>6,}  findings: "
                     f"{'same' if ok else 'DIFFERENT'}")
    return "\n".join(lines), same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--config", type=Path, help="a TOML file with [tool.warmlint]")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    from warmlint.settings_file import load_settings

    settings, _ = load_settings(args.tree, None, args.config)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    text, same = report(args.tree.name, measure(args.tree, settings, args.repeat))
    print(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
