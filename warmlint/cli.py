"""The ``warmlint`` command. Exit status: 0 clean, 1 findings, 2 usage or internal error."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from warmlint import __version__
from warmlint.config import UsageError, display_path, load_settings, resolve_targets


def _common(parser: argparse.ArgumentParser) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="warmlint", description=__doc__)
    parser.add_argument("--version", action="version", version=f"warmlint {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="report unwarmed dispatch branches")
    _common(check)
    check.add_argument("--format", choices=["text", "json", "github", "sarif"], default="text")
    check.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the report to FILE")
    check.add_argument("--baseline", type=Path, metavar="FILE",
                       help="report only findings not recorded in FILE")
    check.add_argument("--write-baseline", type=Path, metavar="FILE",
                       help="record the current findings in FILE and exit 0")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")

    cfg = sub.add_parser("config", help="print the resolved configuration")
    _common(cfg)

    sub.add_parser("rules", help="list the rules")
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", metavar="CODE")
    return parser


def _overrides(args) -> dict:
    from warmlint.configs import parse_assumed

    overrides: dict = {}
    assume = {}
    for item in args.assume:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--assume expects NAME=VALUE, got '{item}'")
        assume[name.strip()] = parse_assumed(value)
    if assume:
        overrides["assume"] = assume
    for flag in ("select", "ignore"):
        value = getattr(args, flag, None)
        if value:
            overrides[flag] = [c.strip().upper() for c in value.split(",") if c.strip()]
    return overrides


def _target(args) -> tuple[Path, set | None]:
    if args.vllm:
        if args.paths:
            raise UsageError("give either --vllm VERSION or paths, not both")
        from warmlint.download import DownloadError, fetch_release

        try:
            return fetch_release(args.vllm, args.cache_dir), None
        except DownloadError as exc:
            raise UsageError(str(exc)) from None
    return resolve_targets(args.paths)


def _selected(report, only: set | None):
    if only is None:
        return report
    report.findings = [f for f in report.findings
                       if f.path in only or any(f.path.startswith(d) for d in only if d.endswith("/"))]
    return report


def cmd_check(args) -> int:
    from warmlint.check import run_check
    from warmlint.reporters import render
    from warmlint.reporters.text import render_errors

    root, only = _target(args)
    settings, _ = load_settings(root, _overrides(args), args.config)
    report = _selected(run_check(root, settings, use_cache=not args.no_cache,
                                 cache_dir=args.cache_dir), only)
    show = (lambda rel: display_path(root, rel)) if not args.vllm else None
    output = render(report, args.format, root_display=show)
    if args.output:
        from warmlint.summary_cache import atomic_write

        atomic_write(args.output, output.encode())
    else:
        sys.stdout.write(output)
    if args.format == "text":
        sys.stderr.write(render_errors(report, root_display=show))
        n = len(report.findings)
        sys.stderr.write(f"warmlint: {n} finding{'s' if n != 1 else ''}, "
                         f"{len(report.errors)} error{'s' if len(report.errors) != 1 else ''} "
                         f"({report.stats.get('files_parsed', 0)} files, "
                         f"{report.stats.get('seconds', 0)} s)\n")
    return 1 if report.findings and not args.exit_zero else 0


def cmd_config(args) -> int:
    root, _ = _target(args)
    settings, source = load_settings(root, _overrides(args), args.config)
    data = {"root": str(root), "source": str(source) if source else None,
            "settings": settings.as_dict()}
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    return 0


def cmd_rules(args) -> int:
    from warmlint.rules import load

    for rule in load():
        sys.stdout.write(f"{rule.code}  {rule.name:<28} {rule.summary}\n")
    return 0


def cmd_rule(args) -> int:
    from warmlint.rules import by_code

    rule = by_code(args.code)
    if rule is None:
        raise UsageError(f"unknown rule '{args.code}' (see `warmlint rules`)")
    sys.stdout.write(f"{rule.code} {rule.name}\n\n{rule.doc.strip()}\n")
    return 0


COMMANDS = {"check": cmd_check, "config": cmd_config, "rules": cmd_rules, "rule": cmd_rule}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"warmlint: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("warmlint: interrupted\n")
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the user gets one line, not a traceback
        if os.environ.get("WARMLINT_DEBUG"):
            raise
        sys.stderr.write(f"warmlint: internal error: {type(exc).__name__}: {exc} "
                         "(set WARMLINT_DEBUG=1 for a traceback)\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
