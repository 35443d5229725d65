"""The cheapest Fixit rule we could write: it visits the Module node and reports nothing.

What remains is Fixit's own cost per file (LibCST parse, the metadata every LintRule
asks for - PositionProvider - and the visitor walk), i.e. Fixit's floor for any rule.
"""

import libcst as cst
from fixit import LintRule, Valid


class NoOp(LintRule):
    VALID = [Valid("x = 1\n")]
    INVALID = []

    def visit_Module(self, node: cst.Module) -> None:
        return None
