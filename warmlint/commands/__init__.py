"""Subcommands of the ``warmlint`` CLI, one module each: ``add_parser(sub)`` and ``run(args)``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from warmlint.settings_file import UsageError, resolve_targets

NAMES = ["check", "fix", "verify", "info"]


def add_tree_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every command that analyzes a tree."""
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="a vLLM checkout, the directory holding the vllm package, or files in it")
    parser.add_argument("--vllm", metavar="VERSION",
                        help="analyze this vLLM release from PyPI (downloaded once, cached); "
                             "the same as --pypi vllm==VERSION")
    parser.add_argument("--pypi", metavar="DIST==VERSION",
                        help="analyze this distribution's wheel from PyPI, e.g. a fork: "
                             "--pypi aphrodite-engine==0.24.1 (its packages, as the wheel names "
                             "them; downloaded once, cached)")
    parser.add_argument("--assume", action="append", default=[], metavar="NAME=VALUE",
                        help="pin a config atom, e.g. VLLM_USE_FLASHINFER_SAMPLER=1 (repeatable)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="read [tool.warmlint] from FILE instead of the tree's pyproject.toml")
    parser.add_argument("--select", metavar="CODES", help="comma-separated rule codes to run")
    parser.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes to skip")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", help="cache directory")
    parser.add_argument("--verify-cache", action="store_true",
                        help="with --vllm or --pypi: hash every file of the cached release against the "
                             "wheel's RECORD before use (re-downloads it if one differs)")

    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (downloads, long analyses)")


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                        help="config leaves analyzed at once, in forked processes (default: "
                             "the number of cores; 1: one at a time, still sharing the work "
                             "leaves have in common; 0: no forking)")


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text!r}") from None
    if not 0 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"jobs must be between 0 and 1024, not {value}")
    return value


def jobs(args) -> int | None:
    """Forked leaves for this invocation: --jobs, else the cores this process may use;
    None (serial) for 0."""
    value = args.jobs
    if value is None:
        value = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    return value or None


def add_incomplete_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="exit by findings even when part of the tree could not be analyzed "
                             "(a file that does not parse, an analysis limit, a model runner "
                             "without a warmup; default: such a result exits 2)")


def not_read(report, only: set | None) -> list:
    """The files named on the command line that the analysis never read: nothing in them
    is reached from a warmup or a sampler it follows, so they hold no finding, and a
    user who meant them to be checked should hear that they were not looked at."""
    read = set(report.files)
    return sorted(p for p in only or () if not p.endswith("/") and p not in read)


def note_not_read(paths: list, show, exclude: tuple = ()) -> None:
    """One stderr line naming (three of) ``not_read``'s files, and one for those the
    ``exclude`` setting leaves out; nothing if none."""
    from warmlint.index import excluded
    from warmlint.printable import printable

    left_out = [p for p in paths if excluded(p, exclude)]
    unreached = [p for p in paths if p not in left_out]
    for group, why in ((unreached, "no warmup or sampler it follows reaches {}"),
                       (left_out, "the exclude setting leaves {} out")):
        if group:
            one = len(group) == 1
            named = ", ".join((show or str)(p) for p in group[:3])
            more = f" and {len(group) - 3} more" if len(group) > 3 else ""
            sys.stderr.write(printable(
                f"warmlint: note: {'1 given file' if one else f'{len(group)} given files'} "
                f"not read by the analysis ({why.format('it' if one else 'them')}): "
                f"{named}{more}") + "\n")


def warn_settings(report) -> None:
    """One stderr line per setting that changed nothing (``setting_warnings``)."""
    from warmlint.printable import printable
    from warmlint.setting_warnings import messages

    for text in messages(report.stats):
        sys.stderr.write(printable(f"warmlint: warning: {text}") + "\n")


def incomplete_exit(report, args) -> bool:
    """Say on one line (stderr) that the result is incomplete; True if that decides exit 2."""
    from warmlint.printable import printable

    reasons = report.incomplete
    if not reasons:
        return False
    n = len(reasons)
    more = f" and {n - 1} more" if n > 1 else ""
    verdict = ("exiting by findings (--allow-incomplete)" if args.allow_incomplete
               else "not a clean pass (exit 2; --allow-incomplete exits by findings)")
    sys.stderr.write(printable(f"warmlint: incomplete: {n} problem{'s' * (n != 1)} "
                               f"({reasons[0]}{more}); {verdict}") + "\n")
    return not args.allow_incomplete


def overrides(args) -> dict:
    """Settings given on the command line, in ``[tool.warmlint]`` shape."""
    from warmlint.config_leaves import parse_assumed

    result: dict = {}
    assume = {}
    for item in args.assume:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--assume expects NAME=VALUE, got '{item}'")
        assume[name.strip()] = parse_assumed(value)
    if assume:
        result["assume"] = assume
    for flag in ("select", "ignore"):
        value = getattr(args, flag, None)
        if value is not None:  # `--select ,` selects nothing: an error, not a silent pass
            result[flag] = [c.strip().upper() for c in value.split(",") if c.strip()]
    return result


def progress(args) -> str:
    """The ``warmlint.progress`` mode for this invocation."""
    from warmlint.progress import mode

    return mode(quiet=getattr(args, "quiet", False))


def downloaded(args) -> bool:
    """Whether the tree is a release from PyPI (--vllm or --pypi), not the user's files."""
    return getattr(args, "vllm", None) is not None or getattr(args, "pypi", None) is not None


def release_spec(args) -> tuple[str, str] | None:
    """(distribution, version) of --vllm VERSION or --pypi DIST==VERSION, else None."""
    if args.vllm is not None and args.pypi is not None:
        raise UsageError("give either --vllm VERSION or --pypi DIST==VERSION, not both")
    if args.vllm is None and args.pypi is None:
        return None
    if args.vllm is not None and not args.vllm.strip():
        raise UsageError("--vllm needs a version, e.g. --vllm 0.20.0")
    if args.paths:
        flag = "--vllm VERSION" if args.vllm is not None else "--pypi DIST==VERSION"
        raise UsageError(f"give either {flag} or paths, not both")
    from warmlint.pypi import DownloadError, parse_spec

    try:
        return parse_spec(args.pypi) if args.pypi is not None else ("vllm", args.vllm)
    except DownloadError as exc:
        raise UsageError(str(exc)) from None


def target(args) -> tuple[Path, set | None]:
    """(root, files to report on or None) from PATHs, --vllm VERSION or --pypi DIST==VERSION."""
    spec = release_spec(args)
    if spec is None:
        return resolve_targets(args.paths)
    from warmlint.download import DownloadError, fetch_release

    try:
        return fetch_release(spec[1], args.cache_dir, dist=spec[0], progress=progress(args),
                             verify=args.verify_cache), None
    except DownloadError as exc:
        raise UsageError(str(exc)) from None


def write_stdout(text: str) -> None:
    """Write to stdout; a reader that went away (``| head``) does not change the exit status.

    The rest of the output is dropped: stdout is pointed at /dev/null so that neither
    this write nor the interpreter's final flush raises again.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
