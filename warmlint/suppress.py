"""Inline suppressions: ``# warmlint: ok[WL001] <reason>`` (or ``ok[WL001,WL004]``).

In the spirit of vLLM's ``# gpu-sync-ok: <reason>``: a cold branch may be acceptable
(a debug-only path, a kernel too large to warm), but the reader must learn why, so a
suppression without a reason suppresses nothing and is reported. It covers findings on
its own line and on the line below it (a comment line above a long ``if``). The pass
runs after the analysis (and after the whole-run cache), over the files the analysis
read only; suppressions that match nothing are handed to the meta rule WL100.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from warmlint.files import DEFAULT_MAX_BYTES, read_regular
from warmlint.findings import sort_key
from warmlint.index import comments

# The body ends at the next '#', so another pragma (a noqa list, say) may follow it.
PRAGMA = re.compile(r"#\s*warmlint\s*:(?P<body>[^#]*)")
OK = re.compile(r"ok\[(?P<codes>[^\]]*)\](?P<reason>.*)$", re.DOTALL)
CODE = re.compile(r"[A-Z]+[0-9]+")
META_CODE = "WL100"


@dataclass
class Suppression:
    path: str
    line: int
    col: int  # 1-based, of the '#'
    text: str  # the pragma as written, for messages
    codes: tuple = ()
    reason: str = ""
    malformed: bool = False
    function: str = "<module>"
    used: set = field(default_factory=set)

    def covers(self, line: int) -> bool:
        return line in (self.line, self.line + 1)


@dataclass
class Problem:
    """A suppression the meta rule reports: kind is unused|no-reason|malformed|unknown."""

    suppression: Suppression
    kind: str
    codes: tuple = ()


def parse_comment(path: str, line: int, col: int, comment: str) -> Suppression | None:
    match = PRAGMA.search(comment)
    if match is None:
        return None
    text = comment[match.start():match.end()].rstrip()
    ok = OK.match(match.group("body").strip())
    codes = tuple(c.strip().upper() for c in ok.group("codes").split(",")) if ok else ()
    if not ok or not codes or not all(CODE.fullmatch(c) for c in codes):
        return Suppression(path, line, col + match.start() + 1, text, malformed=True)
    return Suppression(path, line, col + match.start() + 1, text, codes,
                       ok.group("reason").strip())


def scan_source(path: str, source: str) -> list[Suppression]:
    # Up to what tokenizes: the analysis already reported what it could not parse.
    found = [sup for tok in comments(source)
             if (sup := parse_comment(path, tok.start[0], tok.start[1], tok.string)) is not None]
    if found:
        _name_functions(source, found)
    return found


def _name_functions(source: str, sups: list[Suppression]) -> None:
    """Qualified name of the function around each suppression: part of its identity."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    spans = []

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                if not isinstance(node, ast.ClassDef):
                    spans.append((node.lineno, node.end_lineno or node.lineno, name))
                walk(node.body, name + ".")

    walk(tree.body, "")
    for sup in sups:
        inner = [s for s in spans if s[0] <= sup.line <= s[1]]
        if inner:
            sup.function = max(inner, key=lambda s: s[0])[2]


def scan(root: Path, files, limit: int = DEFAULT_MAX_BYTES) -> list[Suppression]:
    found = []
    for rel in files:
        try:  # regular files only, bounded: `files` may come from the cache
            data = read_regular(root / rel, limit)
        except OSError:
            continue
        if b"warmlint" not in data:  # skip tokenizing (huge) files without a pragma
            continue
        try:
            found.extend(scan_source(rel, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return found


def match(findings: list, sups: list[Suppression]) -> list:
    """Findings no valid suppression covers; marks the codes each suppression used."""
    by_path: dict = {}
    for sup in sups:
        if not sup.malformed and sup.reason:
            by_path.setdefault(sup.path, []).append(sup)
    kept = []
    for finding in findings:
        cover = [s for s in by_path.get(finding.path, ())
                 if finding.rule in s.codes and s.covers(finding.line)]
        if cover:
            min(cover, key=lambda s: s.line != finding.line).used.add(finding.rule)
        else:
            kept.append(finding)
    return kept


def problems(sups: list[Suppression], known: set, enabled) -> list[Problem]:
    out = []
    for sup in sups:
        if sup.malformed:
            out.append(Problem(sup, "malformed"))
        elif not sup.reason:
            out.append(Problem(sup, "no-reason", sup.codes))
        else:
            unknown = tuple(c for c in sup.codes if c not in known)
            # A deselected rule produced no findings: its suppressions cannot be judged.
            unused = tuple(c for c in sup.codes
                           if c in known and enabled(c) and c not in sup.used)
            if unknown:
                out.append(Problem(sup, "unknown", unknown))
            if unused:
                out.append(Problem(sup, "unused", unused))
    return out


def apply(report, settings):
    """Drop suppressed findings from ``report`` and add WL100 findings; returns it."""
    from warmlint.rules import codes, load

    sups = scan(Path(report.root), getattr(report, "files", ()), settings.max_file_size)
    kept = match(report.findings, sups)
    report.stats["suppressed"] = len(report.findings) - len(kept)
    known = set(codes())
    if META_CODE in known and settings.rule_enabled(META_CODE):
        meta = load({META_CODE})[0]
        for finding in meta.check(problems(sups, known, settings.rule_enabled)):
            finding.fix = meta.fix_status(finding, None)
            kept.append(finding)
    report.findings = sorted(kept, key=sort_key)
    return report
