"""``warmlint fix``: insert warmup calls that take the cold outcomes (LibCST codemod)."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

from warmlint.commands import add_tree_options, overrides, target
from warmlint.config import UsageError, display_path, load_settings


def add_parser(sub) -> None:
    parser = sub.add_parser("fix", help="insert warmup calls for fixable WL001 findings")
    add_tree_options(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true",
                      help="print a unified diff, write nothing (exit 1 if it is not empty)")
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if a fix would change anything")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write the fixed files under DIR instead of in place")
    parser.add_argument("--field", action="append", metavar="NAME",
                        help="only fix outcomes driven by this metadata field (repeatable)")


def run(args) -> int:
    from warmlint.codemod.run import compute_fixes
    from warmlint.summary_cache import atomic_write

    if args.vllm and not (args.out or args.diff or args.check):
        raise UsageError("--vllm needs --out DIR (a downloaded release is not edited in place)")
    root, only = target(args)
    settings, _ = load_settings(root, overrides(args), args.config)
    result = compute_fixes(root, settings, set(args.field) if args.field else None)
    show = (lambda rel: rel) if args.vllm else (lambda rel: display_path(root, rel))
    files = [f for f in result.files if only is None or _inside(f.path, only)]
    for finding, reason in result.unfixable:
        sys.stderr.write(f"{show(finding.path)}:{finding.line}:{finding.col}: {finding.rule} "
                         f"no automatic fix: {reason}\n")
    for rel, reason in result.skipped:
        sys.stderr.write(f"{show(rel)}: skipped: {reason}\n")
    if not result.converged:
        sys.stderr.write(f"warmlint: the fixed warmup still has fixable findings after "
                         f"{result.rounds} rounds; run `warmlint fix` again\n")
    if args.diff or args.check:
        for fix in files:
            if args.diff:
                sys.stdout.writelines(difflib.unified_diff(
                    fix.old.splitlines(keepends=True), fix.new.splitlines(keepends=True),
                    f"a/{fix.path}", f"b/{fix.path}"))
            else:
                sys.stdout.write(f"would fix {show(fix.path)}\n")
        return 1 if files else 0
    for fix in files:
        dest = (args.out / fix.path) if args.out else (root / fix.path)
        mode = os.stat(root / fix.path).st_mode & 0o7777
        atomic_write(dest, fix.new.encode("utf-8"), mode)
        where = dest if args.out else show(fix.path)
        sys.stderr.write(f"fixed {where}: {_summary(fix.applied)}\n")
    if not files:
        sys.stderr.write("warmlint: nothing to fix\n")
    return 0


def _summary(applied: list) -> str:
    """"2 warmup calls added, 1 logits copy removed": each edit names what it changes."""
    from warmlint.edits import InsertCall

    counts: dict = {}
    for edit in sorted(applied, key=lambda e: not isinstance(e, InsertCall)):
        counts[edit.noun] = counts.get(edit.noun, 0) + 1
    return ", ".join(f"{n} {one if n == 1 else many} {verb}"
                     for (one, many, verb), n in counts.items())


def _inside(rel: str, only: set) -> bool:
    return rel in only or any(rel.startswith(d) for d in only if d.endswith("/"))
