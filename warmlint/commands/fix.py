"""``warmlint fix``: insert warmup calls that take the cold outcomes (LibCST codemod)."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

from warmlint.commands import (add_incomplete_option, add_tree_options, incomplete_exit,
                               overrides, target, write_stdout)
from warmlint.config import UsageError, display_path, load_settings
from warmlint.printable import printable


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
    add_incomplete_option(parser)


def run(args) -> int:
    from warmlint.codemod.run import compute_fixes

    if args.vllm and not (args.out or args.diff or args.check):
        raise UsageError("--vllm needs --out DIR (a downloaded release is not edited in place)")
    root, only = target(args)
    settings, _ = load_settings(root, overrides(args), args.config)
    result = compute_fixes(root, settings, set(args.field) if args.field else None)
    show = (lambda rel: rel) if args.vllm else (lambda rel: display_path(root, rel))
    files = [f for f in result.files if only is None or _inside(f.path, only)]
    for site, reason in result.unfixable:
        sys.stderr.write(printable(f"{show(site.path)}:{site.line}:{site.col}: WL001 no "
                                   f"automatic fix: {reason}") + "\n")
    for rel, reason in result.skipped:
        sys.stderr.write(printable(f"{show(rel)}: skipped: {reason}") + "\n")
    if args.diff or args.check:
        for fix in files:
            if args.diff:
                write_stdout("".join(difflib.unified_diff(
                    fix.old.splitlines(keepends=True), fix.new.splitlines(keepends=True),
                    f"a/{fix.path}", f"b/{fix.path}")))
            else:
                write_stdout(f"would fix {show(fix.path)}\n")
        return 2 if incomplete_exit(result.report, args) else (1 if files else 0)
    for fix in files:
        dest = (args.out / fix.path) if args.out else (root / fix.path)
        _write(dest, fix.new.encode("utf-8"), os.stat(root / fix.path).st_mode & 0o7777)
        calls = sum(1 for c in fix.applied if not isinstance(c, str))
        copies = len(fix.applied) - calls
        where = dest if args.out else show(fix.path)
        done = [f"{calls} warmup call{'s' * (calls != 1)} added"] if calls else []
        done += [f"{copies} logits cop{'ies' if copies != 1 else 'y'} removed"] if copies else []
        sys.stderr.write(f"fixed {where}: {', '.join(done)}\n")
    if not files:
        sys.stderr.write("warmlint: nothing to fix\n")
    return 2 if incomplete_exit(result.report, args) else 0


def _write(dest: Path, data: bytes, mode: int) -> None:
    """In place: the file keeps its mode (and a symlink stays a link); under --out, a new
    file gets the source's mode."""
    from warmlint.files import write_file

    try:
        write_file(dest, data, mode)
    except OSError as exc:
        raise UsageError(f"{dest}: cannot write the fix: {exc.strerror or exc}") from None


def _inside(rel: str, only: set) -> bool:
    return rel in only or any(rel.startswith(d) for d in only if d.endswith("/"))
