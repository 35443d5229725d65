"""``warmlint fix``: insert warmup calls that take the cold outcomes (LibCST codemod)."""

from __future__ import annotations

import difflib
import os
import shutil
import sys
from pathlib import Path

from warmlint.commands import (add_incomplete_option, add_jobs_option, add_tree_options,
                               downloaded, incomplete_exit, jobs, not_read, note_not_read,
                               overrides, progress, target, warn_settings, write_stdout)
from warmlint.settings_file import UsageError, display_path, load_settings
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
                        help="write a copy of the whole tree, fixed, to DIR (new or empty) "
                             "instead of editing in place; `warmlint check DIR` analyzes it")
    parser.add_argument("--field", action="append", metavar="NAME",
                        help="only fix outcomes driven by this metadata field (repeatable)")
    add_incomplete_option(parser)
    add_jobs_option(parser)


def run(args) -> int:
    from warmlint.check import open_cache, store_report
    from warmlint.codemod.run import compute_fixes

    if (args.vllm or args.pypi) and not (args.out or args.diff or args.check):
        flag = "--vllm" if args.vllm else "--pypi"
        raise UsageError(f"{flag} needs --out DIR (a downloaded release is not edited in place)")
    root, only = target(args)
    settings, source = load_settings(root, overrides(args), args.config)
    if args.out and not (args.diff or args.check):
        _check_out(args.out, root)
    cache = open_cache(settings, not args.no_cache, args.cache_dir)
    result = compute_fixes(root, settings, set(args.field) if args.field else None,
                           progress=progress(args), jobs=jobs(args), cache=cache)
    show = (lambda rel: rel) if downloaded(args) else (lambda rel: display_path(root, rel))
    files = [f for f in result.files if only is None or _inside(f.path, only)]
    for finding, reason in result.unfixable:
        sys.stderr.write(printable(f"{show(finding.path)}:{finding.line}:{finding.col}: "
                                   f"{finding.rule} no automatic fix: {reason}") + "\n")
    for rel, reason in result.skipped:
        sys.stderr.write(printable(f"{show(rel)}: skipped: {reason}") + "\n")
    warn_settings(result.report)
    note_not_read(not_read(result.report, only), show, settings.exclude)
    for name in result.unknown_fields:
        known = ", ".join(result.known_fields) or "none"
        sys.stderr.write(printable(f"warmlint: warning: --field {name!r} drives no edit of "
                                   f"this tree (fields that do: {known})") + "\n")
    if not result.converged:
        sys.stderr.write(f"warmlint: the fixed warmup still has fixable findings after "
                         f"{result.rounds} rounds; run `warmlint fix` again\n")
    if args.diff or args.check:
        for fix in files:
            if args.diff:
                write_stdout("".join(difflib.unified_diff(
                    fix.old.splitlines(keepends=True), fix.new.splitlines(keepends=True),
                    f"a/{fix.path}", f"b/{fix.path}")))
            else:
                write_stdout(f"would fix {show(fix.path)}\n")
        return 2 if incomplete_exit(result.report, args) else (1 if files else 0)
    if args.out:
        copy_tree(root, args.out, source if args.config is None else None)
    for fix in files:
        dest = (args.out / fix.path) if args.out else (root / fix.path)
        _write(dest, fix.new.encode("utf-8"), os.stat(root / fix.path).st_mode & 0o7777)
        where = dest if args.out else show(fix.path)
        sys.stderr.write(f"fixed {where}: {_summary(fix.applied)}\n")
    if files and cache is not None and len(files) == len(result.files):
        # The last round analyzed exactly what is now on disk: `check` (or `fix --check`)
        # of the written tree reuses it instead of analyzing it again.
        store_report(args.out or root, settings, cache, result.report, written=True)
    if not files:  # of an incomplete analysis only "nothing fixed" is known
        sys.stderr.write("warmlint: nothing fixed\n" if result.report.incomplete
                         else "warmlint: nothing to fix\n")
    if args.out:
        sys.stderr.write(f"warmlint: wrote the {'fixed ' * bool(files)}tree to {args.out}; "
                         f"check it with `warmlint check {args.out}`\n")
    return 2 if incomplete_exit(result.report, args) else 0


def _write(dest: Path, data: bytes, mode: int) -> None:
    """In place: the file keeps its mode (and a symlink stays a link); under --out, a new
    file gets the source's mode."""
    from warmlint.files import write_file

    try:
        write_file(dest, data, mode)
    except OSError as exc:
        raise UsageError(f"{dest}: cannot write the fix: {exc.strerror or exc}") from None


def _check_out(out: Path, root: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out}: --out needs a new or empty directory")
    if out.resolve().is_relative_to(root.resolve()):
        raise UsageError(f"{out}: --out must be outside the analyzed tree {root}")


def copy_tree(root: Path, out: Path, config: Path | None) -> None:
    """What ``check`` reads of ``root``: every .py file outside hidden directories, the
    top-level ``*.dist-info`` of a release (``verify --release-dir`` reads it), and the
    ``pyproject.toml`` the settings came from, so ``check OUT`` analyzes the same program
    under the same configuration."""
    def ignore(directory: str, names: list) -> set:
        top = Path(directory) == root
        return {n for n in names if n.startswith(".") or n == "__pycache__"
                or (os.path.isfile(os.path.join(directory, n)) and not n.endswith(".py")
                    and not (top and n == "pyproject.toml")
                    and not Path(directory).name.endswith(".dist-info"))}

    try:
        # Links stay links: a link loop in the tree must not make the copy endless.
        shutil.copytree(root, out, ignore=ignore, symlinks=True, dirs_exist_ok=True)
        if config is not None and config.parent != root:
            shutil.copyfile(config, out / "pyproject.toml")
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the fixed tree: {exc}") from None


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
