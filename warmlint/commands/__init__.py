"""Subcommands of the ``warmlint`` CLI, one module each: ``add_parser(sub)`` and ``run(args)``."""

from __future__ import annotations

import argparse
from pathlib import Path

from warmlint.config import UsageError, resolve_targets

NAMES = ["check", "fix", "verify", "info"]


def add_tree_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every command that analyzes a tree."""
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="a vLLM checkout, the directory holding the vllm package, or files in it")
    parser.add_argument("--vllm", metavar="VERSION",
                        help="analyze this vLLM release from PyPI (downloaded once, cached)")
    parser.add_argument("--assume", action="append", default=[], metavar="NAME=VALUE",
                        help="pin a config atom, e.g. VLLM_USE_FLASHINFER_SAMPLER=1 (repeatable)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="read [tool.warmlint] from FILE instead of the tree's pyproject.toml")
    parser.add_argument("--select", metavar="CODES", help="comma-separated rule codes to run")
    parser.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes to skip")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", help="cache directory")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (downloads, long analyses)")


def overrides(args) -> dict:
    """Settings given on the command line, in ``[tool.warmlint]`` shape."""
    from warmlint.configs import parse_assumed

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
        if value:
            result[flag] = [c.strip().upper() for c in value.split(",") if c.strip()]
    return result


def progress(args) -> str:
    """The ``warmlint.progress`` mode for this invocation."""
    from warmlint.progress import mode

    return mode(quiet=getattr(args, "quiet", False))


def target(args) -> tuple[Path, set | None]:
    """(root, files to report on or None) from PATHs or --vllm VERSION."""
    if args.vllm:
        if args.paths:
            raise UsageError("give either --vllm VERSION or paths, not both")
        from warmlint.download import DownloadError, fetch_release

        try:
            return fetch_release(args.vllm, args.cache_dir, progress=progress(args)), None
        except DownloadError as exc:
            raise UsageError(str(exc)) from None
    return resolve_targets(args.paths)
