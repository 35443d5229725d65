"""Stored results survive edits that only move code.

A comment line or a blank line added above a branch changes no code but moves every
position below it. A file's code digest is two digests: its ``ast`` with positions and
the spelling of its literals (``code``: messages quote the code, so ``'a'`` -> ``"a"`` is
new code), and its *shape*: its lines of code (blank and comment-only lines left out, so
every code line keeps its bytes and its columns, and the source texts in messages stay
what a fresh run would show; a re-wrapped call or a change of quotes is a new shape) plus
its string constants in order. Two sources with the same lines of code differ only in
lines that are blank or start with ``#``: outside a string those are comments and blank
lines, inside one they change the string's value, which the constants hold; so the same
shape is the same ``ast`` without positions. Both digests hash pickles, not ``ast.dump``
text, which cost twice as much (a pickle from another Python version is only a miss).

When a changed file keeps its shape, the stored result is still the analysis of that
file's code, at other lines, in the same columns. For each line the result reports in a
file, the cache stores which line of code it is (its index among the lines of code);
moving the result means reading where that line of code is now.
A reported line that is not a line of code cannot be anchored: then the run is redone.
"""

from __future__ import annotations

import ast
import hashlib
import pickle
import re

from warmlint.decode import decode_source

# A stored result's code digest for a file whose bytes the cache holds
# (``SummaryCache.put_source``): computed only by a later run that finds the file changed
# (``SourceTree.defer_digests``).
LATER = "later"


def tree_digest(tree: ast.AST, source: str) -> str:
    """``code/shape`` of a module's tree and its source text."""
    code = "\n".join(line.rstrip() for _, line in _code_lines(source))
    constants = _constants(tree)
    strings = [node.value for node in constants if isinstance(node.value, (str, bytes))]
    return f"{_sha1_of((tree, _spellings(constants, source)))}/{_sha1_of((code, strings))}"


def _constants(tree: ast.AST) -> list:
    """The tree's ``Constant`` nodes, depth first, field by field: what ``ast.walk``
    finds (a constant holds none), in a quarter of its time (no generator per node)."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        if type(node) is ast.Constant:
            found.append(node)
            continue
        for name in reversed(node._fields):
            value = getattr(node, name, None)
            if type(value) is list:
                todo.extend(x for x in reversed(value) if isinstance(x, ast.AST))
            elif isinstance(value, ast.AST):
                todo.append(value)
    return found


def _spellings(constants: list, source: str) -> list:
    """How each literal is written where its ``ast`` is silent: ``'a'`` and ``"a"`` (or
    ``0o7`` and ``0x7``) are one ``Constant`` at the same place, but a message quoting the
    code shows the spelling, so a changed spelling is not the same code. The first and
    last line of each literal (quotes and prefixes live there; the lines between are in
    its value), from the UTF-8 bytes the column offsets count."""
    try:
        lines = source.encode("utf-8", "surrogatepass").split(b"\n")
        out = []
        for node in constants:
            first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
            if node.lineno == node.end_lineno:
                out.append(first[node.col_offset:node.end_col_offset])
            else:
                out += [first[node.col_offset:], last[:node.end_col_offset]]
        return out
    except (IndexError, TypeError):  # positions the split does not match: the whole text
        return [source]


def _sha1_of(obj) -> str:
    return hashlib.sha1(pickle.dumps(obj, protocol=4)).hexdigest()


def compare(now: str, stored: str) -> str | None:
    """"same" (only comments changed, nothing moved), "moved", or None (new code)."""
    if now.partition("/")[0] == stored.partition("/")[0]:
        return "same"
    if "/" in now and now.rpartition("/")[2] == stored.rpartition("/")[2]:
        return "moved"
    return None


def anchors(result, sources: dict) -> dict:
    """{rel: {reported line: index among the file's lines of code}} for every line the
    result reports in a file of ``sources`` (rel -> bytes read); a file with a reported
    line that is not a line of code gets no entry, so moving it re-runs the analysis."""
    spots: dict = {}
    rewrite(result, set(sources), lambda rel, line: spots.setdefault(rel, set()).add(line))
    out = {rel: {} for rel in sources if rel not in spots}
    for rel, lines in spots.items():
        index = {n: i for i, (n, _) in enumerate(_code_lines(_text(sources[rel], rel)))}
        if all(line in index for line in lines):
            out[rel] = {str(line): index[line] for line in lines}
    return out


def move(result, stored: dict, moved: dict):
    """(the result with the lines reported in ``moved`` (rel -> new bytes, same shape)
    moved to where their code is now, the anchors re-keyed to them), or None."""
    places = {}
    for rel, data in moved.items():
        if rel not in stored:  # a reported line there could not be anchored
            return None
        if not stored[rel]:
            continue  # nothing reported in that file
        lines = [n for n, _ in _code_lines(_text(data, rel))]
        places[rel] = {int(old): lines[i] for old, i in stored[rel].items() if i < len(lines)}
        if len(places[rel]) != len(stored[rel]):
            return None
    missing = []

    def new_line(rel, line):
        got = places[rel].get(line)
        if got is None:
            missing.append((rel, line))
        return got

    moved_result = rewrite(result, set(places), new_line)
    if missing:
        return None
    new_anchors = dict(stored)
    for rel, lines in places.items():
        new_anchors[rel] = {str(lines[int(old)]): i for old, i in stored[rel].items()}
    return moved_result, new_anchors


def rewrite(obj, rels: set, line_of):
    """``obj`` with each line it reports in ``rels`` replaced by ``line_of(rel, line)``
    (None keeps it): a dict's "path"/"line", and "rel:line" inside text."""
    if isinstance(obj, dict):
        new = {k: rewrite(v, rels, line_of) for k, v in obj.items()}
        if obj.get("path") in rels and isinstance(obj.get("line"), int):
            new["line"] = line_of(obj["path"], obj["line"]) or obj["line"]
        return new
    if isinstance(obj, list):
        return [rewrite(v, rels, line_of) for v in obj]
    if isinstance(obj, str) and ".py:" in obj:
        for rel in rels:
            obj = re.sub(re.escape(rel) + r":(\d+)\b",
                         lambda m, rel=rel: f"{rel}:{line_of(rel, int(m.group(1))) or m.group(1)}",
                         obj)
    return obj


def _code_lines(source: str) -> list:
    """(line number, text) of the lines that hold code: not blank, not only a comment."""
    return [(n, line) for n, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def _text(data: bytes, rel: str) -> str:
    return decode_source(data, rel)
