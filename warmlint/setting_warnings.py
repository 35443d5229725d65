"""Settings that changed nothing, as one message each: the same words on every surface.

A pinned assumption no configuration read, a pinned value its atom cannot hold, a settings
entry that matched nothing (``stats.unread_assumptions``, ``impossible_assumptions``,
``unmatched_patterns``): the analysis is complete, but the user believed a setting took
effect. stderr says it for every format (``commands.warn_settings``); SARIF carries each
as a tool configuration notification, and GitHub annotations as a ``::warning`` without
a file, so a CI step that shows only its report shows them too.
"""

from __future__ import annotations


def messages(stats: dict) -> list[str]:
    out = []
    for pin in stats.get("unread_assumptions") or []:
        close = pin.get("did_you_mean")
        hint = f" (did you mean '{close}'?)" if close else ""
        out.append(f"assumption '{pin.get('name')}' is read by no configuration of this "
                   f"tree, so it pinned nothing{hint}")
    for pin in stats.get("impossible_assumptions") or []:
        allowed = ", ".join(repr(v) for v in pin.get("allowed") or [])
        out.append(f"assumption '{pin.get('name')}' = {pin.get('value')!r} is none of the "
                   f"values it can hold ({allowed}): the configuration it pins cannot exist")
    for found in stats.get("unmatched_patterns") or []:
        out.append(f"{found.get('setting')} entry '{found.get('pattern')}' matches "
                   f"{found.get('matches')}")
    return out
