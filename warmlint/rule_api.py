"""What a rule is: a code, a kebab-case name, its documentation, examples, a check, a fix.

Rules live in ``rules/`` (installed as ``warmlint.rules``), one module per rule, named
``wl<NNN>_<name>.py``; being there registers the rule and selects it by default. Each
reads top to bottom: docstring (what it does, why it matters, example, fix, fix safety),
``CODE``, ``NAME``, ``SUMMARY``, ``FIX_SAFETY``, message, ``EXAMPLES``, helpers,
``check(facts)`` yielding findings and, when the rule has one, ``fix(finding, facts)``
returning edits (``warmlint.edits``) or raising ``edits.NoFix(reason)``. ``facts`` is a
``warmlint.facts.Facts``: the documented view of the analysis, never engine internals.
Examples are small vLLM-shaped sources; an ``Invalid`` marks each line it expects a
finding on with ``# expect: <CODE>``, and the test suite runs every example through the
real analysis.
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
    fix: Callable[..., Iterable] | None = None  # (Finding, Facts) -> [edit]; raises NoFix
    no_fix: str = "the rule has no automatic fix"  # why, for a rule without ``fix``

    def fix_status(self, finding, facts) -> dict:
        """The finding's JSON ``fix``: ``{"available", "safe", "description", "reason"}``:
        ``available`` is whether ``warmlint fix`` changes the code for it (its edits),
        ``safe`` whether that change keeps behaviour, ``description`` what it does,
        ``reason`` why there is none."""
        from warmlint.edits import NoFix

        if self.fix is None:
            return no_fix(self.no_fix)
        try:
            edits = list(self.fix(finding, facts))
        except NoFix as exc:
            return no_fix(exc.reason)
        if not edits:
            return no_fix(NOTHING_TO_CHANGE)
        return {"available": True, "safe": True,
                "description": "; ".join(dict.fromkeys(e.describe() for e in edits)),
                "reason": ""}

    @classmethod
    def from_module(cls, module) -> "Rule":
        """The rule a ``rules/wl<NNN>_<name>.py`` module defines; its ``CODE`` and ``NAME``
        must be what its file name says (that is how it is found without importing it)."""
        stem = module.__name__.rsplit(".", 1)[-1]
        code, _, name = stem.partition("_")
        if (module.CODE, module.NAME) != (code.upper(), name.replace("_", "-")):
            raise ValueError(f"{module.__name__}: CODE/NAME {module.CODE} {module.NAME} do not "
                             f"match the file name {stem}.py")
        return cls(code=module.CODE, name=module.NAME, summary=module.SUMMARY,
                   doc=module.__doc__, check=module.check,
                   fix_safety=getattr(module, "FIX_SAFETY", "no automatic fix"),
                   examples=list(getattr(module, "EXAMPLES", [])),
                   kind=getattr(module, "KIND", "analysis"), fix=getattr(module, "fix", None),
                   no_fix=getattr(module, "NO_FIX", cls.no_fix))

    @property
    def valid(self) -> list:
        return [e for e in self.examples if isinstance(e, Valid)]

    @property
    def invalid(self) -> list:
        return [e for e in self.examples if isinstance(e, Invalid)]

    def markdown(self) -> str:
        return f"## {self.code} `{self.name}`\n\n{self.doc.strip()}\n"


NOTHING_TO_CHANGE = "nothing to change"  # a rule fix that made no edit (not a NoFix)


def no_fix(reason: str) -> dict:
    return {"available": False, "safe": False, "description": f"no automatic fix: {reason}",
            "reason": reason}


def sink_phrase(sink: dict) -> str:
    from warmlint.sinks import phrase

    return phrase(sink)
