"""One JSON object: ``{"warmlint", "root", "findings", "errors", "stats"}`` (docs/output.md: schema)."""

from __future__ import annotations

import json


def render(report, *, root_display=None) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n"
