"""``warmlint check``: analysis, rules, and the run's JSON-able result (cached whole)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from warmlint import __version__, shift, unit_deps
from warmlint.findings import Finding, sort_key
from warmlint.settings import Settings
from warmlint.index import code_digest
from warmlint.summary_cache import SummaryCache, default_cache_dir, inside_tree, listing_digest


@dataclass
class Report:
    root: Path
    findings: list = field(default_factory=list)  # [Finding]
    errors: list = field(default_factory=list)  # [{"path", "line", "message"}]
    stats: dict = field(default_factory=dict)
    files: list = field(default_factory=list)  # rel paths the analysis read (suppression pass)
    fix_order: list | None = None  # a stored result's: indices of findings in rule order

    @property
    def incomplete(self) -> list[str]:
        """Why the result does not cover everything it was asked to, one line each.

        Every ``errors`` entry is such a reason, whatever produced it (a file that could
        not be read or parsed, a budget or nesting limit, an entry that could not be
        resolved): the findings of what was skipped are unknown, so the run is no clean
        pass (``--allow-incomplete`` relaxes the exit status, not the report).
        """
        return [f"{e.get('path')}:{e.get('line')}: {e.get('message')}" for e in self.errors]

    def to_json(self) -> dict:
        stats = {**self.stats, "complete": not self.incomplete, "incomplete": self.incomplete}
        return {"warmlint": __version__, "root": str(self.root),
                "findings": [f.to_json() for f in self.findings],
                "errors": self.errors, "stats": stats}


def _finding_from_json(data: dict) -> Finding:
    data = dict(data)
    data.pop("fingerprint", None)
    return Finding(**data)


def _report_from_cache(root: Path, cached) -> Report | None:
    """The stored run as a Report, or None if it is not what ``run_check`` stores."""
    from warmlint.report_schema import RESULT, conforms

    if not conforms(cached, RESULT) or not all(map(inside_tree, cached["files"])):
        return None  # (the suppression pass reads `files`)
    report = Report(root, [_finding_from_json(f) for f in cached["findings"]], cached["errors"],
                    dict(cached["stats"], cache="hit"), cached["files"])
    order = cached.get("fix_order")  # the findings as the rules produced them (fix's order)
    if (isinstance(order, list) and all(type(i) is int for i in order)
            and sorted(order) == list(range(len(report.findings)))):
        report.fix_order = order
    return report


def analyze_tree(root: Path, settings: Settings, cache: SummaryCache | None,
                 packages: tuple[str, ...] | None = None, progress: str = "off",
                 overlay: dict | None = None, jobs: int | None = None) -> Report:
    """Run the analysis and every enabled rule; no filtering by path or suppression.

    progress: a ``warmlint.progress`` mode; the ticker counts the files read so far.
    ``overlay``: rel path -> text to analyze instead of the file (``fix``'s next round).
    ``jobs``: config leaves in up to this many forked processes; None: serially."""
    from warmlint import unmatched
    from warmlint.analysis import analyze, pins_outside, unread_pins
    from warmlint.index import SourceTree
    from warmlint.progress import Ticker

    tree = SourceTree(root, cache, tuple(settings.exclude), packages, settings.max_file_size,
                      overlay)
    with Ticker(f"analyzing {root}", lambda: f"{len(tree.files_read)} files read", progress):
        facts = analyze(tree, settings, jobs)
        rule_facts, produced = run_rules(facts, settings)
        tree.defer_digests()
    findings: list[Finding] = [f for found in produced.values() for f in found]
    findings.sort(key=sort_key)
    errors = [{"path": e.path, "line": e.line, "message": e.message} for e in tree.errors]
    errors += [{"path": p, "line": line, "message": msg} for p, line, msg in facts.errors]
    configs = sum(len(p.leaves) for p in facts.programs)
    # what a setting changed is judged on a complete run only: a config cut off, or a file
    # left unread, may have read the pin or held the decorator
    complete = not errors and not facts.truncated
    stats = {"files_parsed": len(tree.files_read), "functions_parsed": facts.functions_parsed,
             "warmups": [w.ref.dotted for w in facts.warmups], "configs": configs,
             "configs_truncated": facts.truncated,
             "unjudged": rule_facts.unjudged if settings.rule_enabled("WL004") else [],
             "unread_assumptions": unread_pins(settings, facts.programs) if complete else [],
             "impossible_assumptions": pins_outside(facts.programs),
             "unmatched_patterns": unmatched.unmatched(settings, facts.resolver, facts.warmups)
             if complete else []}
    report = Report(root, findings, errors, stats, sorted(tree.files_read))
    report.deps = _dependencies(root, {**tree.files_failed, **tree.files_read})
    report.codes = dict(tree.code_digests)
    report.sources = tree.bytes_read()
    report.units = unit_deps.record(tree)  # what it read of each file, for the cache
    report.facts = facts  # for `warmlint fix` and the plugin; not part of the JSON
    report.rule_facts, report.produced = rule_facts, produced
    return report


def _dependencies(root: Path, files_read: dict) -> dict:
    """Digests of the files read, and of their directories' listings: a module added
    next to one that was read can change how an import resolves."""
    deps = dict(files_read)
    for rel in files_read:
        directory = str(Path(rel).parent)
        try:
            deps["dir:" + directory] = listing_digest(root / directory)
        except OSError:
            pass
    return deps


def open_cache(settings: Settings, use_cache: bool, cache_dir: Path | None):
    return SummaryCache(cache_dir or default_cache_dir(), f"{__version__}:{settings.fingerprint()}",
                        settings.max_file_size) if use_cache else None


def _key(root: Path) -> str:
    return f"check:{root}"


def stored_report(root: Path, cache: SummaryCache) -> Report | None:
    """The stored result of the tree as it is now (``check``'s or ``fix``'s first round)."""
    return _report_from_cache(root, cache.get_result(_key(root), root, code_digest))


def store_report(root: Path, settings: Settings, cache: SummaryCache, report: Report,
                 written: bool = False) -> None:
    """Store an analysis of the files as they are on disk under ``root``: the analyzed
    tree, or (``written``) the tree ``fix`` just wrote the analyzed texts to."""
    index = {id(f): i for i, f in enumerate(report.findings)}
    order = [index[id(f)] for found in report.produced.values() for f in found]
    payload = dict(report.to_json(), root=str(root), files=report.files, fix_order=order)
    words = unit_deps.names(report.sources, json.dumps(settings.as_dict(), default=str))
    deps = report.deps if not written else _dependencies(root, {
        k: v for k, v in report.deps.items() if not k.startswith("dir:")})
    cache.put_result(_key(root), deps, payload, report.codes,
                     shift.anchors(payload, report.sources), report.units, words)
    report.stats["cache"] = "miss"


def run_rules(facts, settings: Settings) -> tuple:
    """(the rules' view of ``facts``, code -> the findings each enabled analysis rule
    produced, in its own order, each with its fix status): what ``fix`` orders by."""
    from warmlint.facts import Facts as RuleFacts
    from warmlint.rules import load

    rule_facts = RuleFacts(facts)
    produced: dict = {}
    for rule in load():
        if rule.kind == "analysis" and settings.rule_enabled(rule.code):
            produced[rule.code] = list(rule.check(rule_facts))
            for finding in produced[rule.code]:
                finding.fix = rule.fix_status(finding, rule_facts)
    return rule_facts, produced


def run_check(root: Path, settings: Settings, *, use_cache: bool = True,
              cache_dir: Path | None = None, progress: str = "off",
              jobs: int | None = None) -> Report:
    started = time.perf_counter()
    cache = open_cache(settings, use_cache, cache_dir)
    if cache is not None:
        report = stored_report(root, cache)
        if report is not None:
            report.stats["seconds"] = round(time.perf_counter() - started, 3)
            return report
    report = analyze_tree(root, settings, cache, progress=progress, jobs=jobs)
    if cache is not None:
        store_report(root, settings, cache, report)
    report.stats["seconds"] = round(time.perf_counter() - started, 3)
    return report
