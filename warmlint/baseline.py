"""Baselines: adopt warmlint on a fork with known findings, fail only on new ones.

A baseline records each finding's fingerprint (rule, file, function, condition,
outcome, sinks; never the line), so edits elsewhere in a file do not resurrect it.
Fingerprints are counted, not just collected: a second identical finding in the same
function is new.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from warmlint.settings_file import UsageError
from warmlint.files import DATA_MAX_BYTES, read_regular, write_file
from warmlint.findings import sort_key

VERSION = 1
FIELDS = ("fingerprint", "rule", "path", "function", "message")


def dumps(findings: list) -> str:
    entries = [{name: getattr(f, name) for name in FIELDS} for f in findings]
    entries.sort(key=lambda e: (e["path"], e["rule"], e["function"], e["fingerprint"]))
    return json.dumps({"warmlint_baseline": VERSION, "findings": entries}, indent=2) + "\n"


def write(path: Path, findings: list) -> None:
    try:
        write_file(path, dumps(findings).encode())
    except OSError as exc:
        raise UsageError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None


def load(path: Path) -> Counter:
    """Fingerprint counts recorded in ``path``; any defect is a usage error."""
    try:
        data = json.loads(read_regular(path, DATA_MAX_BYTES).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting
        raise UsageError(f"{path}: corrupt baseline: {exc}") from None
    if not isinstance(data, dict) or data.get("warmlint_baseline") != VERSION:
        raise UsageError(f"{path}: not a warmlint baseline (version {VERSION}); "
                         "write one with --write-baseline")
    entries = data.get("findings")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("fingerprint"), str) for e in entries):
        raise UsageError(f"{path}: corrupt baseline: 'findings' must be a list of "
                         "objects with a 'fingerprint'")
    return Counter(e["fingerprint"] for e in entries)


def filter_new(findings: list, known: Counter) -> tuple[list, int]:
    """(findings not in the baseline, how many were baselined)."""
    left = Counter(known)
    new = []
    for finding in sorted(findings, key=sort_key):
        if left[finding.fingerprint] > 0:
            left[finding.fingerprint] -= 1
        else:
            new.append(finding)
    return new, len(findings) - len(new)


def stale(findings: list, known: Counter) -> int:
    """Baseline entries that match no current finding: fixed since, safe to drop."""
    return sum((known - Counter(f.fingerprint for f in findings)).values())
