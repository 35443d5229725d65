"""``warmlint check``: analysis, rules, and the run's JSON-able result (cached whole)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from warmlint import __version__, shift
from warmlint.findings import Finding, sort_key
from warmlint.settings import Settings
from warmlint.index import code_digest
from warmlint.summary_cache import SummaryCache, default_cache_dir, listing_digest


@dataclass
class Report:
    root: Path
    findings: list = field(default_factory=list)  # [Finding]
    errors: list = field(default_factory=list)  # [{"path", "line", "message"}]
    stats: dict = field(default_factory=dict)
    files: list = field(default_factory=list)  # rel paths the analysis read (suppression pass)

    def to_json(self) -> dict:
        return {"warmlint": __version__, "root": str(self.root),
                "findings": [f.to_json() for f in self.findings],
                "errors": self.errors, "stats": self.stats}


def _finding_from_json(data: dict) -> Finding:
    data = dict(data)
    data.pop("fingerprint", None)
    return Finding(**data)


def analyze_tree(root: Path, settings: Settings, cache: SummaryCache | None,
                 packages: tuple[str, ...] | None = None, overlay: dict | None = None) -> Report:
    """Run the analysis and every enabled rule; no filtering by path or suppression.
    ``overlay``: rel path -> text to analyze instead of the file (``fix``'s next round)."""
    from warmlint.analysis import analyze
    from warmlint.index import SourceTree
    from warmlint.rules import load

    from warmlint.facts import Facts as RuleFacts

    tree = SourceTree(root, cache, tuple(settings.exclude), packages, overlay)
    facts = analyze(tree, settings)
    rule_facts = RuleFacts(facts)
    produced: dict = {}  # code -> findings in the order the rule produced them (fixes)
    for rule in load():
        if rule.kind == "analysis" and settings.rule_enabled(rule.code):
            produced[rule.code] = list(rule.check(rule_facts))
            for finding in produced[rule.code]:
                finding.fix = rule.fix_status(finding, rule_facts)
    findings: list[Finding] = [f for found in produced.values() for f in found]
    findings.sort(key=sort_key)
    errors = [{"path": e.path, "line": e.line, "message": e.message} for e in tree.errors]
    errors += [{"path": p, "line": line, "message": msg} for p, line, msg in facts.errors]
    configs = sum(len(p.leaves) for p in facts.programs)
    stats = {"files_parsed": len(tree.files_read), "functions_parsed": facts.functions_parsed,
             "warmups": [w.ref.dotted for w in facts.warmups], "configs": configs,
             "configs_truncated": facts.truncated}
    report = Report(root, findings, errors, stats, sorted(tree.files_read))
    report.deps = _dependencies(root, {**tree.files_failed, **tree.files_read})
    report.codes = dict(tree.code_digests)
    report.sources = tree.bytes_read()
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


def run_check(root: Path, settings: Settings, *, use_cache: bool = True,
              cache_dir: Path | None = None) -> Report:
    started = time.perf_counter()
    cache = SummaryCache(cache_dir or default_cache_dir(), f"{__version__}:{settings.fingerprint()}") \
        if use_cache else None
    key = f"check:{root}"
    if cache is not None:
        cached = cache.get_result(key, root, code_digest)
        if isinstance(cached, dict) and "files" in cached:
            report = Report(root, [_finding_from_json(f) for f in cached["findings"]],
                            cached["errors"], dict(cached["stats"], cache="hit"), cached["files"])
            report.stats["seconds"] = round(time.perf_counter() - started, 3)
            return report
    report = analyze_tree(root, settings, cache)
    if cache is not None:
        payload = dict(report.to_json(), files=report.files)
        cache.put_result(key, report.deps, payload, report.codes,
                         shift.anchors(payload, report.sources))
        report.stats["cache"] = "miss"
    report.stats["seconds"] = round(time.perf_counter() - started, 3)
    return report
