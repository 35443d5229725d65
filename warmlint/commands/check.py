"""``warmlint check``: report findings in text, JSON, GitHub annotations or SARIF."""

from __future__ import annotations

import sys
from pathlib import Path

from warmlint.commands import add_tree_options, overrides, target
from warmlint.config import display_path, load_settings


def add_parser(sub) -> None:
    parser = sub.add_parser("check", help="report unwarmed dispatch branches")
    add_tree_options(parser)
    parser.add_argument("--format", choices=["text", "json", "github", "sarif"], default="text")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the report to FILE")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")


def _only(report, only: set | None):
    if only is not None:
        report.findings = [f for f in report.findings if f.path in only
                           or any(f.path.startswith(d) for d in only if d.endswith("/"))]
    return report


def run(args) -> int:
    from warmlint.check import run_check
    from warmlint.reporters import render
    from warmlint.reporters.text import render_errors

    root, only = target(args)
    settings, _ = load_settings(root, overrides(args), args.config)
    report = _only(run_check(root, settings, use_cache=not args.no_cache,
                             cache_dir=args.cache_dir), only)
    show = None if args.vllm else (lambda rel: display_path(root, rel))
    output = render(report, args.format, root_display=show)
    if args.output:
        from warmlint.summary_cache import atomic_write

        atomic_write(args.output, output.encode())
    else:
        sys.stdout.write(output)
    if args.format == "text":
        sys.stderr.write(render_errors(report, root_display=show))
        n, e = len(report.findings), len(report.errors)
        sys.stderr.write(f"warmlint: {n} finding{'s' * (n != 1)}, {e} error{'s' * (e != 1)} "
                         f"({report.stats.get('files_parsed', 0)} files, "
                         f"{report.stats.get('seconds', 0)} s)\n")
    return 1 if report.findings and not args.exit_zero else 0
