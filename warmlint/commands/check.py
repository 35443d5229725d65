"""``warmlint check``: report findings in text, JSON, GitHub annotations or SARIF."""

from __future__ import annotations

import sys
from pathlib import Path

from warmlint.commands import (add_incomplete_option, add_jobs_option, add_tree_options,
                               downloaded, incomplete_exit, jobs, not_read, note_not_read,
                               overrides, progress, target, warn_settings, write_stdout)
from warmlint.settings_file import UsageError, display_path, load_settings


def add_parser(sub) -> None:
    parser = sub.add_parser("check", help="report unwarmed dispatch branches")
    add_tree_options(parser)
    parser.add_argument("--format", choices=["text", "json", "github", "sarif"], default="text")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the report to FILE")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    add_incomplete_option(parser)
    add_jobs_option(parser)
    known = parser.add_mutually_exclusive_group()
    known.add_argument("--baseline", type=Path, metavar="FILE",
                       help="report only findings not recorded in FILE")
    known.add_argument("--write-baseline", type=Path, metavar="FILE",
                       help="record the current findings in FILE and exit 0")


def _only(report, only: set | None):
    if only is not None:
        report.findings = [f for f in report.findings if f.path in only
                           or any(f.path.startswith(d) for d in only if d.endswith("/"))]
    return report


def run(args) -> int:
    from warmlint import baseline, fixes, suppress
    from warmlint.check import run_check
    from warmlint.reporters import render
    from warmlint.reporters.text import render_errors

    root, only = target(args)
    settings, _ = load_settings(root, overrides(args), args.config)
    known = baseline.load(args.baseline) if args.baseline else None  # fail before analyzing
    report = suppress.apply(run_check(root, settings, use_cache=not args.no_cache,
                                      cache_dir=args.cache_dir, progress=progress(args),
                                      jobs=jobs(args)),
                            settings)
    fixes.complete(report.findings)
    show = None if downloaded(args) else (lambda rel: display_path(root, rel))
    if args.write_baseline:
        _only(report, only)
        sys.stderr.write(render_errors(report, root_display=show))
        if incomplete_exit(report, args):  # it would record too few findings
            sys.stderr.write(f"warmlint: {args.write_baseline} not written\n")
            return 2
        baseline.write(args.write_baseline, report.findings)
        sys.stderr.write(f"warmlint: recorded {len(report.findings)} findings in "
                         f"{args.write_baseline}\n")
        return 0
    if known is not None:  # over the whole tree: an entry of a file not shown is not stale
        stale = baseline.stale(report.findings, known)
        report.findings, n = baseline.filter_new(report.findings, known)
        report.stats.update(baselined=n, baseline_stale=stale)
    _only(report, only)
    report.stats["not_read"] = not_read(report, only)
    output = render(report, args.format, root_display=show)
    if args.output:
        from warmlint.files import write_file

        try:
            write_file(args.output, output.encode())
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write the report: "
                             f"{exc.strerror or exc}") from None
    else:
        write_stdout(output)
    if args.format == "text":  # the other formats carry the errors themselves
        sys.stderr.write(render_errors(report, root_display=show))
    warn_settings(report)
    note_not_read(report.stats["not_read"], show, settings.exclude)
    sys.stderr.write(summary(report) + "\n")
    if incomplete_exit(report, args):
        return 2
    return 1 if report.findings and not args.exit_zero else 0


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def summary(report) -> str:
    """``warmlint: 2 findings, 0 errors, 1 suppressed[, 3 baselined, 1 stale baseline
    entry] (7 files, 0.41 s)``: what was hidden is counted, so nothing hides silently."""
    stats = report.stats
    parts = [_count(len(report.findings), "finding"), _count(len(report.errors), "error"),
             f"{stats.get('suppressed', 0)} suppressed"]
    if "baselined" in stats:
        parts += [f"{stats['baselined']} baselined",
                  _count(stats["baseline_stale"], "stale baseline entry",
                         "stale baseline entries")]
    unjudged = len(stats.get("unjudged") or [])
    return (f"warmlint: {', '.join(parts)} ({stats.get('files_parsed', 0)} files, "
            f"{stats.get('seconds', 0)} s"
            + (f"; {_count(unjudged, 'kernel argument')} not judged, see stats.unjudged"
               if unjudged else "") + ")")
