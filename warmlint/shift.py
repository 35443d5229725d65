"""Stored results survive edits that only move code.

A comment line or a blank line added above a branch changes no code but moves every
position below it. A file's code digest is two digests: its ``ast`` with positions
(``code``), and its *shape*: the ``ast`` without positions plus its lines of code (blank
and comment-only lines left out, so every code line keeps its bytes and its columns, and
the source texts in messages stay what a fresh run would show; a re-wrapped call or a
change of quotes is a new shape). When a changed file keeps its shape, the stored result
is still the analysis of that file's code, at other lines. For
each position the result reports in a file, the cache stores the ``ast`` node it sits on
(its index in ``ast.walk`` order, which two trees of one shape share) and the column
offset from that node's start; moving the result means reading each node's new position.
A position that no node starts on its line cannot be anchored: then the run is redone.
"""

from __future__ import annotations

import ast
import hashlib
import re

# ast.dump(include_attributes=True) writes a node's four position attributes last.
_POSITIONS = re.compile(r"(?:, )?lineno=\d+, col_offset=\d+, end_lineno=\d+, end_col_offset=\d+(?=\))")


def tree_digest(tree: ast.AST, source: str) -> str:
    """``code/shape`` of a module's tree and its source text."""
    text = ast.dump(tree, include_attributes=True)
    code_lines = "\n".join(line.rstrip() for line in source.splitlines()
                           if line.strip() and not line.lstrip().startswith("#"))
    return f"{_sha1(text)}/{_sha1(_POSITIONS.sub('', text) + chr(0) + code_lines)}"


def compare(now: str, stored: str) -> str | None:
    """"same" (only comments changed, nothing moved), "moved", or None (new code)."""
    if now.partition("/")[0] == stored.partition("/")[0]:
        return "same"
    if "/" in now and now.rpartition("/")[2] == stored.rpartition("/")[2]:
        return "moved"
    return None


def anchors(result, sources: dict) -> dict:
    """{rel: {"line:col" or "line:": [node index, column offset]}} for every position the
    result reports in a file of ``sources`` (rel -> bytes read); a file with a position
    that cannot be anchored gets none, so moving it re-runs the analysis."""
    spots = _spots(result, set(sources))
    out = {rel: {} for rel in sources if rel not in spots}
    for rel, wanted in spots.items():
        nodes = _starts(sources[rel])
        found = {}
        for line, col in wanted:
            at = _anchor(nodes, line, col) if nodes is not None else None
            if at is None:
                break
            found[_key(line, col)] = at
        else:
            out[rel] = found
    return out


def move(result, stored: dict, moved: dict):
    """The result with the positions in ``moved`` (rel -> new bytes, same shape) read from
    the new trees, and the anchors re-keyed to them; None if a position is not anchored."""
    new_places = {}
    for rel, data in moved.items():
        if rel not in stored:  # a position there could not be anchored
            return None
        if not stored[rel]:
            continue  # nothing reported in that file
        nodes = _starts(data)
        if nodes is None:
            return None
        places = {}
        for key, (index, offset) in stored[rel].items():
            if index >= len(nodes):
                return None
            line, col = nodes[index]
            places[key] = (line, None if key.endswith(":") else col + 1 + offset)
        new_places[rel] = places
    missing = []
    moved_result = _rewrite(result, new_places, missing)
    if missing:
        return None
    new_anchors = dict(stored)
    for rel, places in new_places.items():
        new_anchors[rel] = {_key(*places[k]): v for k, v in stored[rel].items()}
    return moved_result, new_anchors


# -- positions in a result ---------------------------------------------------------------
def _refs(rel: str) -> re.Pattern:
    return re.compile(re.escape(rel) + r":(\d+)\b")


def _spots(result, rels: set) -> dict:
    """rel -> {(line, col or None)}: dicts with path/line(/col), and "rel:line" in text."""
    out: dict = {}

    def visit(obj):
        if isinstance(obj, dict):
            if obj.get("path") in rels and isinstance(obj.get("line"), int):
                col = obj.get("col")
                out.setdefault(obj["path"], set()).add(
                    (obj["line"], col if isinstance(col, int) else None))
            for value in obj.values():
                visit(value)
        elif isinstance(obj, list):
            for value in obj:
                visit(value)
        elif isinstance(obj, str) and ".py:" in obj:
            for rel in rels:
                for m in _refs(rel).finditer(obj):
                    out.setdefault(rel, set()).add((int(m.group(1)), None))

    visit(result)
    return out


def _rewrite(obj, places: dict, missing: list):
    if isinstance(obj, dict):
        new = {k: _rewrite(v, places, missing) for k, v in obj.items()}
        if obj.get("path") in places and isinstance(obj.get("line"), int):
            col = obj.get("col")
            got = places[obj["path"]].get(_key(obj["line"], col if isinstance(col, int) else None))
            if got is None:
                missing.append(obj)
                return new
            new["line"] = got[0]
            if isinstance(col, int):
                new["col"] = got[1]
        return new
    if isinstance(obj, list):
        return [_rewrite(v, places, missing) for v in obj]
    if isinstance(obj, str) and ".py:" in obj:
        for rel, spots in places.items():
            def sub(m, spots=spots):
                got = spots.get(_key(int(m.group(1)), None))
                if got is None:
                    missing.append(m.group(0))
                    return m.group(0)
                return f"{rel}:{got[0]}"
            obj = _refs(rel).sub(sub, obj)
    return obj


# -- anchoring ---------------------------------------------------------------------------
def _starts(data: bytes) -> list | None:
    """(line, column) where each node starts, in ``ast.walk`` order."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return [(n.lineno, n.col_offset) for n in ast.walk(tree) if hasattr(n, "lineno")]


def _anchor(nodes: list, line: int, col: int | None):
    """The node on ``line`` that starts last at or before ``col`` (1-based), and the offset."""
    best = None
    for index, (n_line, n_col) in enumerate(nodes):
        if n_line != line:
            continue
        if col is None:
            return [index, 0]
        if n_col <= col - 1 and (best is None or n_col > nodes[best][1]):
            best = index
    if best is None:
        return None
    return [best, col - 1 - nodes[best][1]]


def _key(line: int, col: int | None) -> str:
    return f"{line}:" if col is None else f"{line}:{col}"


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()
