"""GitHub Actions workflow commands: one ``::error`` annotation per finding.

``::error file=PATH,line=N,col=N,title=WL001 unwarmed-dispatch-branch::MESSAGE``; files
that could not be analyzed become ``::warning`` annotations, and so does each setting that
changed nothing (``setting_warnings``; no file). Escaping follows the
Actions toolkit (``@actions/core`` command.ts): ``%``, CR and LF everywhere, and also
``:`` and ``,`` in properties, where they would end a value. Other control characters
and bidi overrides (from the analyzed source) are written as visible escapes first
(``printable``): the log would otherwise render them.
"""

from __future__ import annotations

from warmlint.printable import printable
from warmlint.setting_warnings import messages

_DATA = (("%", "%25"), ("\r", "%0D"), ("\n", "%0A"))
_PROPERTY = _DATA + ((":", "%3A"), (",", "%2C"))


def escape_data(text: str) -> str:
    text = printable(text, keep="\r\n")
    for raw, escaped in _DATA:  # '%' first, so escapes are not escaped again
        text = text.replace(raw, escaped)
    return text


def escape_property(text: str) -> str:
    text = printable(text, keep="\r\n")
    for raw, escaped in _PROPERTY:
        text = text.replace(raw, escaped)
    return text


def command(kind: str, message: str, **props) -> str:
    fields = ",".join(f"{key}={escape_property(str(value))}" for key, value in props.items()
                      if value is not None)
    return f"::{kind} {fields}::{escape_data(message)}"


def render(report, *, root_display=None) -> str:
    show = root_display or (lambda rel: rel)
    lines = [command("error", f.message, file=show(f.path), line=f.line, col=f.col,
                     title=f"{f.rule} {f.name}") for f in report.findings]
    lines += [command("warning", e["message"], file=show(e["path"]), line=e.get("line"),
                      title="warmlint could not analyze this file") for e in report.errors]
    lines += [command("warning", text, title="warmlint setting changed nothing")
              for text in messages(report.stats)]
    return "\n".join(lines) + ("\n" if lines else "")
