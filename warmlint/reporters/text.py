"""``path:line:col: CODE message``, one finding per line (ruff's concise format).

Control and bidi characters quoted from the analyzed source are escaped (``printable``).
"""

from __future__ import annotations

from warmlint.printable import printable


def render(report, *, root_display=None) -> str:
    show = root_display or (lambda rel: rel)
    lines = [printable(f"{show(f.path)}:{f.line}:{f.col}: {f.rule} {f.message}")
             for f in report.findings]
    return "\n".join(lines) + ("\n" if lines else "")


def render_errors(report, *, root_display=None) -> str:
    show = root_display or (lambda rel: rel)
    lines = [printable(f"{show(e['path'])}:{e['line']}: error: {e['message']}")
             for e in report.errors]
    return "\n".join(lines) + ("\n" if lines else "")
