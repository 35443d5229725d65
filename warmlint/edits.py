"""What a rule's ``fix(finding, facts)`` returns: edits, as plain data.

The codemod (``warmlint.codemod``) applies edits and knows no rule: a rule says *what*
to change in terms of the warmup it read (``facts.WarmupCall``), and the codemod finds
the place again in the file and writes it the way vLLM's formatter would. Two kinds of
edit cover every fix so far:

- ``InsertCall``: repeat a warmup's entry call right after it, with the request object
  varied (``replace(<metadata>, field=value)``) and/or the batch cut to its first rows,
  under an ``if`` guard. Repeating the warmup's own call keeps its arguments, its place
  inside the warmup's out-of-memory handling and its logits tensor (no copy).
  For the model runner v2, whose sampler reads per-request rows, the repeated call
  follows a block that fills every row with a copy of the warmup's own request with the
  fields changed (``fill``: a ``row_fill.RowFill``) and publishes them.
- ``ReplaceExpression``: replace an expression of a function by another (WL003: a full
  copy of the logits by the tensor itself).

Planning across findings is generic too: an edit may say which sinks it warms
(``covers``) and the order to try it in (``priority``); an edit whose sinks earlier
edits already warm is dropped, so two outcomes reaching one cold kernel cost one
start-up compile, not two. Identical edits (same ``key``) are applied once.
"""

from __future__ import annotations

from dataclasses import dataclass


class NoFix(Exception):
    """Raised by a rule's ``fix`` when the finding has no automatic fix; says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Rows:
    """Run the call on the first ``count`` rows of the warmup batch."""

    count: int
    args: tuple = ()  # keys (keyword name or position) of the per-row arguments
    fields: tuple = ()  # per-row fields of the request object


# In a ``set_fields`` value: the request object the call passes (``{base}.top_k.to(...)``),
# spelled by the codemod as the call spells it.
BASE = "{base}"


@dataclass(frozen=True)
class InsertCall:
    path: str  # file, relative to the root
    function: str  # qualified name of the warmup method holding the call
    anchor: tuple  # statement path of the call (codemod.anchors)
    call: str  # source of the call, to find it again in that statement
    request_arg: object  # keyword name or position of the request-object argument
    set_fields: tuple = ()  # ((field, value source), ...) for replace(...)
    rows: Rows | None = None
    guard: tuple = ()  # source of each condition the call runs under (joined with and)
    note: str = ""  # comment above the inserted call
    names: tuple = ()  # names the inserted code reads that may need an import: torch, envs
    field: str = ""  # the request field whose outcome it takes (`fix --field`)
    covers: frozenset = frozenset()  # (runner, sink id) it warms
    priority: int = 0  # order among one rule's edits: lower first
    noun: tuple = ("warmup call", "warmup calls", "added")
    fill: object = None  # row_fill.RowFill: fill every row first (v2); request_arg unused
    imports: tuple = ()  # ((module, name or None), ...) the inserted code needs

    @property
    def key(self) -> tuple:
        return ("insert", self.path, self.function, self.anchor, self.field, self.set_fields,
                self.rows.count if self.rows else None)

    @property
    def content(self) -> tuple:
        """What it writes, wherever its anchor has moved: planned again in a later round
        of ``fix``, it did not take what it was for."""
        return (self.path, self.function, self.call, self.set_fields,
                self.rows.count if self.rows else None, self.guard, self.note)

    def describe(self) -> str:
        call = " ".join(self.call.split()).replace("( ", "(").replace(", )", ")")
        parts = [f"call `{call.replace(' )', ')')}` again"]
        if self.fill is not None:
            changed = ", ".join(f"{k}={v}" for k, v in self.set_fields)
            parts = [f"fill every row with `{self.fill.replace}({self.fill.base}, {changed})` "
                     f"and call `{call.replace(' )', ')')}` again"]
        elif self.set_fields:
            parts.append("with " + ", ".join(f"{k}={v.replace(BASE + '.', '')}"
                                             for k, v in self.set_fields))
        if self.rows:
            parts.append(f"on its first {self.rows.count} rows")
        if self.guard:
            parts.append("when " + " and ".join(self.guard))
        return " ".join(parts) + f" ({self.function})"

    def selected(self, fields: set | None) -> tuple[bool, str]:
        """Whether ``fix --field`` keeps it, and why not."""
        if fields is None or self.field in fields:
            return True, ""
        return False, f"field `{self.field}` not selected" if self.field else ""


@dataclass(frozen=True)
class ReplaceExpression:
    path: str
    function: str  # qualified name of the function holding the expression
    old: str  # its source (compared without whitespace)
    new: str  # the replacement's source; the old expression's parentheses are kept
    description: str = ""
    noun: tuple = ("expression", "expressions", "replaced")
    covers: frozenset = frozenset()
    priority: int = 0

    @property
    def key(self) -> tuple:
        return ("replace", self.path, self.function, "".join(self.old.split()))

    content = key

    def describe(self) -> str:
        return self.description or f"replace `{self.old}` by `{self.new}` ({self.function})"

    field = ""  # (not a dataclass field) no request field: `fix --field` keeps it

    def selected(self, fields: set | None) -> tuple[bool, str]:
        return True, ""
