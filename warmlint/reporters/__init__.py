"""Output formats. Each reporter turns a check ``Report`` into text for stdout."""

from __future__ import annotations

import importlib

FORMATS = {
    "text": "warmlint.reporters.text",
    "json": "warmlint.reporters.json_report",
    "github": "warmlint.reporters.github",
    "sarif": "warmlint.reporters.sarif",
}


def render(report, fmt: str, *, root_display=None) -> str:
    module = importlib.import_module(FORMATS[fmt])
    return module.render(report, root_display=root_display)
