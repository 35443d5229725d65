"""Findings and their stable identity.

A finding's fingerprint hashes what it is about (rule, file, function, condition,
outcome, sinks), never its line, so baselines survive unrelated edits above it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field, fields


def canonical_paths(paths: list) -> list:
    """A finding's request paths in one order (by their JSON), whatever order the
    analysis met them in: call reuse and joins change the discovery order, not the set."""
    return sorted(paths, key=lambda path: json.dumps(path, sort_keys=True))


@dataclass
class Finding:
    rule: str
    name: str
    path: str
    line: int
    col: int
    function: str
    message: str
    condition: str = ""
    outcome: str = ""
    inputs: list = field(default_factory=list)
    sinks: list = field(default_factory=list)
    chain: list = field(default_factory=list)
    warmups: list = field(default_factory=list)
    configs: list = field(default_factory=list)
    related: list = field(default_factory=list)  # [{"path", "line", "col", "message"}]
    fix: dict | None = None  # {"available", "safe", "description", "reason"}: Rule.fix_status
    extra: dict = field(default_factory=dict)
    # What the finding is about in the analysis (the rule's own handle, for its ``fix``);
    # never serialized, absent on findings read back from the cache.
    subject: object = field(default=None, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        key = "\x1f".join([self.rule, self.path, self.function, self.condition, self.outcome,
                           ",".join(sorted(s.get("id", "") for s in self.sinks)),
                           self.extra.get("identity", "")])
        return hashlib.sha1(key.encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
                if f.name != "subject"}
        data["fingerprint"] = self.fingerprint
        if not data["fix"]:
            data.pop("fix")
        if not data["related"]:
            data.pop("related")
        if not data["extra"]:
            data.pop("extra")
        return data


def sort_key(f: Finding) -> tuple:
    return (f.path, f.line, f.col, f.rule, f.outcome)
