"""Make text from analyzed files safe to print on a terminal or into a CI log.

Why: messages quote the analyzed source (conditions, names, paths), and a fork's file
can hold ESC sequences that recolor or rewrite the terminal, BEL, or right-to-left
overrides that make a line read differently from what it says ("Trojan Source"). JSON
and SARIF escape control characters themselves; text, GitHub annotations and one-line
errors go through ``printable`` first, which writes each such character as a visible
``\\xNN``/``\\uNNNN`` escape.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; bidi embeddings, overrides, isolates and marks; line and
# paragraph separators (a log viewer may start a new, forged line at them).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2066-\u2069\ufeff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control and bidi character escaped, except those in ``keep``."""
    if keep:
        return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
    return _UNSAFE.sub(_escape, text)
