"""What a rule is: a code, a kebab-case name, its documentation, examples, and a check.

Rules live in ``rules/`` (installed as ``warmlint.rules``), one module per rule, each
reading top to bottom: docstring (what it does, why it matters, example, fix, fix
safety), message, examples, helpers, the check. Examples are small vLLM-shaped sources;
an ``Invalid`` marks each line it expects a finding on with ``# expect: <CODE>``, and the
test suite runs every example through the real analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

RUNNER_PATH = "vllm/v1/worker/gpu_model_runner.py"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+\d+)")


@dataclass(frozen=True)
class Example:
    code: str
    files: dict = field(default_factory=dict)  # extra path -> source
    assume: dict = field(default_factory=dict)  # --assume for this example
    note: str = ""

    def tree(self) -> dict:
        return {RUNNER_PATH: self.code, **self.files}

    def expected(self) -> set:
        """(path, line, code) of every ``# expect: CODE`` marker."""
        found = set()
        for path, source in self.tree().items():
            for lineno, line in enumerate(source.splitlines(), 1):
                for code in EXPECT.findall(line):
                    found.add((path, lineno, code))
        return found


class Valid(Example):
    pass


class Invalid(Example):
    pass


@dataclass
class Rule:
    code: str
    name: str
    summary: str
    doc: str
    check: Callable[..., Iterable]  # (Facts) -> Iterable[Finding]
    fix_safety: str = "no automatic fix"
    examples: list = field(default_factory=list)
    kind: str = "analysis"  # "analysis" | "meta" (WL100: produced by the suppression pass)

    @property
    def valid(self) -> list:
        return [e for e in self.examples if isinstance(e, Valid)]

    @property
    def invalid(self) -> list:
        return [e for e in self.examples if isinstance(e, Invalid)]

    def markdown(self) -> str:
        return f"## {self.code} `{self.name}`\n\n{self.doc.strip()}\n"


def sink_phrase(sink: dict) -> str:
    from warmlint.sinks import phrase

    return phrase(sink)
