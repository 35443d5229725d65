"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

One run: the driver lists every rule (documentation included, so a viewer can show
it), results point into the tree through the ``SRCROOT`` base id (relative URIs are
what code scanning maps onto the repository), and files that could not be analyzed
become tool execution notifications (and make ``executionSuccessful`` false: the
result is incomplete); settings that changed nothing (``setting_warnings``) are tool
configuration notifications. A finding's fix is described, not spelled out:
``warmlint fix`` computes the edits, and SARIF requires each fix to name an artifact
change, so a fix without edits carries an empty insertion at the finding. Only findings
``warmlint fix`` handles get ``fixes``; every result carries the ``fix`` object of the
JSON output (``warmlint.fixes``) in its properties, so CI can read either format. No
``informationUri``: warmlint has no published home page to point at.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

from warmlint import __version__
from warmlint.setting_warnings import messages

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "warmlintFingerprint/v1"
BASE_ID = "SRCROOT"


def rule_level(rule) -> str:
    # Meta findings are about comments, not about cold kernels.
    return "warning" if rule.kind == "meta" else "error"


def doc_body(rule) -> str:
    """The rule's docstring without its title line (``WL001 `name```)."""
    lines = rule.doc.strip().splitlines()
    if lines and lines[0].startswith(rule.code):
        lines = lines[1:]
    return "\n".join(lines).strip()


def _what_it_does(rule) -> str:
    match = re.search(r"\*\*What it does\.\*\*(.*?)(?:\n\s*\n|$)", rule.doc, re.DOTALL)
    text = match.group(1) if match else rule.summary
    return " ".join(text.split())


def _descriptor(rule) -> dict:
    body = doc_body(rule)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _what_it_does(rule)},
        "help": {"text": body, "markdown": body},
        "defaultConfiguration": {"level": rule_level(rule)},
        "properties": {"fixSafety": rule.fix_safety},
    }


def _physical(path: str, line: int | None, col: int | None = None) -> dict:
    region = {"startLine": max(1, int(line or 1))}
    if col:
        region["startColumn"] = max(1, int(col))
    return {"artifactLocation": {"uri": quote(path), "uriBaseId": BASE_ID}, "region": region}


def _fixes(finding) -> list:
    edits = finding.fix.get("edits") or [
        {"path": finding.path, "line": finding.line, "col": finding.col, "text": ""}]
    changes: dict = {}
    for edit in edits:
        start = {"startLine": max(1, edit["line"]), "startColumn": max(1, edit.get("col") or 1)}
        end = {"endLine": max(1, edit.get("end_line", edit["line"])),
               "endColumn": max(1, edit.get("end_col", start["startColumn"]))}
        replacement = {"deletedRegion": {**start, **end}}
        if edit.get("text"):
            replacement["insertedContent"] = {"text": edit["text"]}
        changes.setdefault(edit["path"], []).append(replacement)
    return [{"description": {"text": finding.fix.get("description", "")},
             "artifactChanges": [
                 {"artifactLocation": {"uri": quote(path), "uriBaseId": BASE_ID},
                  "replacements": replacements} for path, replacements in changes.items()]}]


def _result(finding, index: dict, rules: list) -> dict:
    i = index.get(finding.rule)
    result = {"ruleId": finding.rule, "message": {"text": finding.message},
              "level": rule_level(rules[i]) if i is not None else "error",
              "locations": [{"physicalLocation": _physical(finding.path, finding.line,
                                                           finding.col)}],
              "partialFingerprints": {FINGERPRINT_KEY: finding.fingerprint},
              "properties": {"function": finding.function, "configs": finding.configs,
                             **({"fix": finding.fix} if finding.fix else {})}}
    if finding.fix:  # whether `warmlint fix` fixes it, and why not
        result["properties"]["fixSafe"] = bool(finding.fix.get("safe"))
        if finding.fix.get("reason"):
            result["properties"]["fixReason"] = finding.fix["reason"]
    if i is not None:
        result["ruleIndex"] = i
    if finding.function and finding.function != "<module>":
        result["locations"][0]["logicalLocations"] = [
            {"fullyQualifiedName": finding.function, "kind": "function"}]
    if finding.related:
        result["relatedLocations"] = [
            {"id": n, "physicalLocation": _physical(r["path"], r.get("line"), r.get("col")),
             "message": {"text": r.get("message", "")}}
            for n, r in enumerate(finding.related, 1)]
    if finding.fix and finding.fix.get("available"):
        result["fixes"] = _fixes(finding)
    return result


def _notification(error: dict) -> dict:
    return {"level": "error", "message": {"text": error["message"]},
            "locations": [{"physicalLocation": _physical(error["path"], error.get("line"))}]}


def to_sarif(report) -> dict:
    from warmlint.rules import load

    rules = load()
    index = {rule.code: i for i, rule in enumerate(rules)}
    root = Path(report.root).resolve().as_uri().rstrip("/") + "/"
    run = {
        "tool": {"driver": {"name": "warmlint", "version": __version__,
                            "semanticVersion": __version__,
                            "rules": [_descriptor(rule) for rule in rules]}},
        "originalUriBaseIds": {BASE_ID: {"uri": root}},
        # An incomplete result (any errors entry) is not a successful execution: a viewer
        # must not read the missing results as a clean tree.
        "invocations": [{"executionSuccessful": not report.incomplete,
                         "toolExecutionNotifications": [_notification(e)
                                                        for e in report.errors],
                         # settings that changed nothing (a pin no config read...)
                         "toolConfigurationNotifications": [
                             {"level": "warning", "message": {"text": text}}
                             for text in messages(report.stats)],
                         "properties": {"complete": not report.incomplete,
                                        "incomplete": report.incomplete,
                                        "unjudged": report.stats.get("unjudged", [])}}],
        "results": [_result(f, index, rules) for f in report.findings],
        "columnKind": "unicodeCodePoints",
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report, *, root_display=None) -> str:
    # URIs stay relative to SRCROOT whatever the cwd: code scanning resolves them.
    return json.dumps(to_sarif(report), indent=2) + "\n"
