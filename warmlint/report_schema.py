"""The shape of a stored ``check`` result, checked before a cache hit is believed.

Why: a cached result is read back from a directory others may write, and it feeds the
reporters, suppressions and baselines directly. An entry with a ``None`` sink id or an
int where a list belongs used to crash every later run until the cache was deleted.
The schema is plain data, one line per object, in the shapes the rules produce; a
value that does not conform makes the entry a miss (it is rebuilt), never an error.

Schema language: a type (``int`` excludes ``bool``); ``[s]``, a list of ``s``; a dict of
keys (``"key?"`` optional; other keys allowed, except where ``closed``); a tuple of
alternatives; ``None`` for JSON null.
"""

from __future__ import annotations

SINK = {"id": str, "kind": str, "name": str, "qualname": str, "path": str, "line": int}
RELATED = {"path": str, "line": int, "col?": int, "message?": str}
EDIT = {"path": str, "line": int, "col?": (int, None), "end_line?": int, "end_col?": int,
        "text?": str}
FIX = {"description": str, "safe?": bool, "available?": bool, "reason?": str, "edits?": [EDIT]}
FINDING = {"rule": str, "name": str, "path": str, "line": int, "col": int, "function": str,
           "message": str, "condition?": str, "outcome?": str, "inputs?": [str],
           "sinks?": [SINK], "chain?": [str], "warmups?": [str], "configs?": [str],
           "related?": [RELATED], "fix?": (None, FIX), "extra?": {"identity?": str},
           "fingerprint?": str}
ERROR = {"path": str, "line": int, "message": str}
# The stats the reporters turn into words (setting_warnings): their entries' fields
STATS = {"unread_assumptions?": [{"name": str, "did_you_mean": (str, None)}],
         "impossible_assumptions?": [{"name": str, "value?": object, "allowed": list}],
         "unmatched_patterns?": [{"setting": str, "pattern": str, "matches": str}]}
RESULT = {"findings": [FINDING], "errors": [ERROR], "stats": STATS, "files": [str]}
CLOSED = {id(FINDING), id(ERROR)}  # becomes a Finding(**...) / is printed as is


def conforms(value, schema) -> bool:
    if schema is None:
        return value is None
    if isinstance(schema, tuple):
        return any(conforms(value, s) for s in schema)
    if isinstance(schema, list):
        return isinstance(value, list) and all(conforms(v, schema[0]) for v in value)
    if isinstance(schema, dict):
        return isinstance(value, dict) and _fields(value, schema)
    if schema is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, schema)


def _fields(value: dict, schema: dict) -> bool:
    names = {key.rstrip("?") for key in schema}
    if id(schema) in CLOSED and not set(value) <= names:
        return False
    for key, sub in schema.items():
        name = key.rstrip("?")
        if name not in value:
            if not key.endswith("?"):
                return False
        elif not conforms(value[name], sub):
            return False
    return True
