#!/usr/bin/env python3
"""Compare warmlint's reports at an older commit with the working tree's, tree by tree.

An engine change that should change no result (a cache, a reuse, a faster path) is checked
by analyzing the same trees with both versions and comparing the JSON reports, minus what
may differ (``stats.seconds``, and stats keys the older version did not write yet).

Why a tool: each side must import its own warmlint. ``python -c`` puts the current
directory first on ``sys.path``, so a comparison run from the repository root imports the
working tree's package on *both* sides whatever ``PYTHONPATH`` says, and every tree
compares "same". This runs both sides from a scratch directory, checks which ``warmlint``
each one imported, and exits 1 if any report differs (2 on a usage error).

    python tools/compare_reports.py 4b80850 ~/.cache/warmlint/releases/vllm-0.34.0
    python tools/compare_reports.py HEAD TREE --args "-j 0" --args "-j 2"
    python tools/compare_reports.py HEAD TREE --args "-j 0 --config docs/forks/aphrodite-engine.toml"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = ("import sys, warmlint; from warmlint.cli import main; "
       "sys.stderr.write('imported ' + warmlint.__file__ + '\\n'); sys.exit(main(sys.argv[1:]))")


def report(source: Path, tree: Path, extra: list, scratch: Path, name: str) -> dict:
    """The JSON report of ``tree`` by the warmlint package under ``source``."""
    out = scratch / f"{name}.json"
    proc = subprocess.run([sys.executable, "-c", RUN, "check", "--no-cache", "-q", "--exit-zero",
                           "--format", "json", "-o", str(out), *extra, str(tree)],
                          cwd=scratch, env={**os.environ, "PYTHONPATH": str(source)},
                          capture_output=True, text=True)
    imported = next((line.split(" ", 1)[1] for line in proc.stderr.splitlines()
                     if line.startswith("imported ")), "")
    if not imported.startswith(str(source) + "/"):
        raise SystemExit(f"compare_reports: {name} imported {imported or 'nothing'}, "
                         f"not {source}: {proc.stderr.strip()[-300:]}")
    if proc.returncode != 0:
        raise SystemExit(f"compare_reports: {name} failed ({proc.returncode}): "
                         f"{proc.stderr.strip()[-300:]}")
    return json.loads(out.read_text())


def normalized(old: dict, new: dict) -> tuple[dict, dict]:
    """Both reports without their run times, and without the stats keys only one has."""
    old, new = json.loads(json.dumps(old)), json.loads(json.dumps(new))
    for one in (old, new):
        one["stats"].pop("seconds", None)
    for key in set(old["stats"]) ^ set(new["stats"]):
        old["stats"].pop(key, None)
        new["stats"].pop(key, None)
    return old, new


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the older commit (anything git rev-parse takes)")
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--args", action="append", default=None, metavar="ARGS",
                        help="check's extra arguments, one run each (default: -j 0)")
    args = parser.parse_args(argv)
    # both sides run in a scratch directory: paths given here are made absolute
    runs = [[str(Path(t).resolve()) if Path(t).exists() else t for t in shlex.split(a)]
            for a in (args.args or ["-j 0"])]
    trees = [t.resolve() for t in args.trees]
    with tempfile.TemporaryDirectory(prefix="warmlint-compare-") as scratch:
        scratch = Path(scratch)
        old_src = scratch / "old"
        made = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q",
                               str(old_src), args.rev], capture_output=True, text=True)
        if made.returncode != 0:
            print(f"compare_reports: cannot check out {args.rev}: {made.stderr.strip()}",
                  file=sys.stderr)
            return 2
        try:
            differ = 0
            for tree in trees:
                for extra in runs:
                    old, new = normalized(report(old_src, tree, extra, scratch, "old"),
                                          report(REPO, tree, extra, scratch, "new"))
                    same = old == new
                    differ += not same
                    print(f"{'same' if same else 'DIFF'} {tree.name} {' '.join(extra)}: "
                          f"{len(new['findings'])} findings")
            return 1 if differ else 0
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(old_src)], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
